//! TEMPORARY tables: which connection created each one.
//!
//! Ladle keeps a temporary table as an ordinary table under a name of its
//! connection's ([`crate::temporary_names`]: two connections may each have
//! a `t`, and it shadows a base table `t` for its connection), but, as
//! MySQL does, lists it nowhere (SHOW TABLES, SHOW TABLE STATUS,
//! `information_schema`), lets no other connection reach it (1146, see
//! [`crate::privileges::check_sql`]; DROP TABLE: 1051), nor any view
//! (1352) and drops it when
//! the connection that created it ends. Each one is also recorded in the
//! catalog ([`record`]), so that a server restart, clean or not, drops it
//! ([`crate::temporary_cleanup`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use ladle_common::TableId;
use ladle_storage::Storage;
use parking_lot::Mutex;

use crate::error::Result;

/// The catalog meta keys recording temporary tables by table id.
pub(crate) const META_PREFIX: &str = "shim/temporary/";

/// A temporary table's owner and id.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Entry {
    owner: u32,
    id: TableId,
}

/// Temporary tables by (database, table), each with its connection id.
#[derive(Default)]
pub struct TemporaryTables {
    owners: Mutex<HashMap<(String, String), Entry>>,
    /// Whether `owners` holds any: every statement asks (a connection's
    /// own names, another's), most while there are none, without the lock.
    any: AtomicBool,
    /// Set on a cluster node until, primary, it has dropped the temporary
    /// tables no live session owns ([`crate::temporary_cleanup`]): a new
    /// session may get the connection id of a dead one, and so its stored
    /// names, so CREATE TEMPORARY TABLE waits for the drops.
    creates_held: AtomicBool,
}

/// How long CREATE TEMPORARY TABLE waits for a new primary's cleanup.
const CREATES_HELD_AT_MOST: std::time::Duration = std::time::Duration::from_secs(10);

impl TemporaryTables {
    fn none(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    fn note_len(&self, owners: &HashMap<(String, String), Entry>) {
        self.any.store(!owners.is_empty(), Ordering::Release);
    }

    /// Records `db`.`table` (table `id`) as connection `owner`'s temporary
    /// table.
    pub fn add(&self, db: &str, table: &str, owner: u32, id: TableId) {
        let mut owners = self.owners.lock();
        owners.insert((db.to_string(), table.to_string()), Entry { owner, id });
        self.note_len(&owners);
    }

    /// Forgets `db`.`table` (dropped): its id if it was temporary.
    pub fn remove(&self, db: &str, table: &str) -> Option<TableId> {
        if self.none() {
            return None;
        }
        let mut owners = self.owners.lock();
        let id = owners
            .remove(&(db.to_string(), table.to_string()))
            .map(|e| e.id);
        self.note_len(&owners);
        id
    }

    /// Renamed (same table id, same owner).
    pub fn rename(&self, from: (&str, &str), to: (&str, &str)) {
        let mut owners = self.owners.lock();
        if let Some(e) = owners.remove(&(from.0.to_string(), from.1.to_string())) {
            owners.insert((to.0.to_string(), to.1.to_string()), e);
        }
    }

    /// Forgets every temporary table of database `db` (dropped): their ids.
    pub fn remove_database(&self, db: &str) -> Vec<TableId> {
        let mut ids = Vec::new();
        let mut owners = self.owners.lock();
        owners.retain(|(d, _), e| {
            if d == db {
                ids.push(e.id);
            }
            d != db
        });
        self.note_len(&owners);
        ids
    }

    /// Whether `db`.`table` is a temporary table (hidden from listings).
    pub fn contains(&self, db: &str, table: &str) -> bool {
        if self.none() {
            return false;
        }
        let owners = self.owners.lock();
        !owners.is_empty() && owners.contains_key(&(db.to_string(), table.to_string()))
    }

    /// Whether `sql` may name a temporary table of another connection than
    /// `connection` (its name is in the text, ASCII case aside, or holds a
    /// quote a quoted name would double): only then must the statement's
    /// tables be checked, a parse the common statement is spared.
    pub fn foreign_named_in(&self, connection: u32, sql: &str) -> bool {
        if self.none() {
            return false;
        }
        let owners = self.owners.lock();
        if owners.is_empty() {
            return false;
        }
        let mut lower = None;
        owners.iter().any(|((_, table), e)| {
            if e.owner == connection {
                return false;
            }
            if table.contains(['`', '"']) {
                return true;
            }
            let text = lower.get_or_insert_with(|| sql.to_ascii_lowercase());
            text.contains(&table.to_ascii_lowercase())
        })
    }

    /// Whether `db`.`table` is another connection's temporary table, which
    /// `connection` must not see.
    pub fn foreign(&self, db: &str, table: &str, connection: u32) -> bool {
        if self.none() {
            return false;
        }
        let owners = self.owners.lock();
        !owners.is_empty()
            && owners
                .get(&(db.to_string(), table.to_string()))
                .is_some_and(|e| e.owner != connection)
    }

    /// Connection `owner`'s temporary tables: (database, name as the
    /// connection names it; see [`crate::temporary_names`]).
    pub fn owned_by(&self, owner: u32) -> Vec<crate::temporary_names::Owned> {
        if self.none() {
            return Vec::new();
        }
        let owners = self.owners.lock();
        if owners.is_empty() {
            return Vec::new();
        }
        owners
            .iter()
            .filter(|(_, e)| e.owner == owner)
            .map(|((db, t), _)| {
                let name = crate::temporary_names::visible_name(owner, t);
                (db.clone(), name.to_string())
            })
            .collect()
    }

    /// The connection owning temporary table `id`, if it is one here (0:
    /// the server's own sessions', which own none that a client uses).
    pub fn owner_of(&self, id: TableId) -> Option<u32> {
        let owners = self.owners.lock();
        owners.values().find(|e| e.id == id).map(|e| e.owner)
    }

    /// CREATE TEMPORARY TABLE waits from now until [`Self::release_creates`].
    pub fn hold_creates(&self) {
        self.creates_held.store(true, Ordering::Release);
    }

    pub fn release_creates(&self) {
        self.creates_held.store(false, Ordering::Release);
    }

    /// Waits (bounded) while CREATE TEMPORARY TABLE is held.
    pub fn await_creates(&self) {
        let start = std::time::Instant::now();
        while self.creates_held.load(Ordering::Acquire) && start.elapsed() < CREATES_HELD_AT_MOST {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Connection `owner`'s temporary tables by their stored names: it has
    /// ended and the caller drops them (each stays listed here, hidden,
    /// until its DROP forgets it).
    pub fn stored_by(&self, owner: u32) -> Vec<(String, String)> {
        if self.none() {
            return Vec::new();
        }
        let owners = self.owners.lock();
        owners
            .iter()
            .filter(|(_, e)| e.owner == owner)
            .map(|(k, _)| k.clone())
            .collect()
    }
}

fn meta_key(id: TableId) -> String {
    format!("{META_PREFIX}{id}")
}

/// Records table `id` as temporary in the catalog: a restart drops it.
pub fn record(storage: &Storage, id: TableId) -> Result<()> {
    Ok(storage.put_meta(&meta_key(id), b"")?)
}

/// Forgets the catalog record of temporary table `id` (dropped).
pub fn forget(storage: &Storage, id: TableId) -> Result<()> {
    Ok(storage.delete_meta(&meta_key(id))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_tables_are_listed_until_dropped() {
        let t = TemporaryTables::default();
        t.add("d", "a", 1, 10);
        t.add("d", "b", 2, 11);
        assert!(t.contains("d", "a") && !t.contains("d", "c"));
        assert!(t.foreign("d", "a", 2) && !t.foreign("d", "a", 1));
        assert!(t.foreign_named_in(2, "SELECT * FROM `A`") && !t.foreign_named_in(1, "SELECT a"));
        assert!(!t.foreign_named_in(2, "SELECT 1"));
        assert_eq!(t.stored_by(1), vec![("d".to_string(), "a".to_string())]);
        assert_eq!(t.remove("d", "a"), Some(10));
        assert!(t.stored_by(1).is_empty());
        assert!(!t.foreign_named_in(2, "SELECT a FROM a"));
        t.rename(("d", "b"), ("e", "c"));
        assert!(t.foreign("e", "c", 1) && !t.contains("d", "b"));
        assert_eq!(t.remove_database("e"), vec![11]);
        assert!(!t.contains("e", "c"));
    }

    #[test]
    fn owners_are_found_by_table_id() {
        let t = TemporaryTables::default();
        t.add("d", "#tmp#4#a", 4, 10);
        t.add("d", "#tmp#5#a", 0, 11);
        assert_eq!(t.owner_of(10), Some(4));
        assert_eq!(t.owner_of(11), Some(0));
        assert_eq!(t.owner_of(12), None);
    }

    #[test]
    fn held_creates_wait_until_released() {
        let t = std::sync::Arc::new(TemporaryTables::default());
        let started = std::time::Instant::now();
        t.await_creates();
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
        t.hold_creates();
        let releaser = {
            let t = t.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(200));
                t.release_creates();
            })
        };
        t.await_creates();
        let waited = started.elapsed();
        assert!(
            waited >= std::time::Duration::from_millis(200),
            "{waited:?}"
        );
        assert!(waited < CREATES_HELD_AT_MOST, "{waited:?}");
        releaser.join().unwrap();
    }
}
