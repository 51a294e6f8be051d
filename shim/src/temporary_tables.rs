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
}

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

    /// Connection `owner`'s temporary tables, forgotten here: it has ended
    /// and the caller drops them.
    pub fn take_owned_by(&self, owner: u32) -> Vec<(String, String)> {
        let mut owners = self.owners.lock();
        let mine: Vec<_> = owners
            .iter()
            .filter(|(_, e)| e.owner == owner)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &mine {
            owners.remove(k);
        }
        self.note_len(&owners);
        mine
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
    fn owned_tables_are_taken_once() {
        let t = TemporaryTables::default();
        t.add("d", "a", 1, 10);
        t.add("d", "b", 2, 11);
        assert!(t.contains("d", "a") && !t.contains("d", "c"));
        assert!(t.foreign("d", "a", 2) && !t.foreign("d", "a", 1));
        assert!(t.foreign_named_in(2, "SELECT * FROM `A`") && !t.foreign_named_in(1, "SELECT a"));
        assert!(!t.foreign_named_in(2, "SELECT 1"));
        assert_eq!(t.take_owned_by(1), vec![("d".to_string(), "a".to_string())]);
        assert!(t.take_owned_by(1).is_empty());
        assert!(!t.foreign_named_in(2, "SELECT a FROM a"));
        t.rename(("d", "b"), ("e", "c"));
        assert!(t.foreign("e", "c", 1) && !t.contains("d", "b"));
        assert_eq!(t.remove_database("e"), vec![11]);
        assert!(!t.contains("e", "c"));
    }
}
