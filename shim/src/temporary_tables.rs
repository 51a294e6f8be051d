//! TEMPORARY tables: which connection created each one.
//!
//! Ladle keeps a temporary table as an ordinary table under its own name,
//! but, as MySQL does, lists it nowhere (SHOW TABLES, SHOW TABLE STATUS,
//! `information_schema`) and drops it when the connection that created it
//! ends. Known gaps: other connections can still reach it by name, it does
//! not shadow a base table of the same name, and a server restart keeps it
//! as an ordinary table.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Temporary tables by (database, table), each with its connection id.
#[derive(Default)]
pub struct TemporaryTables {
    owners: Mutex<HashMap<(String, String), u32>>,
}

impl TemporaryTables {
    /// Records `db`.`table` as connection `owner`'s temporary table.
    pub fn add(&self, db: &str, table: &str, owner: u32) {
        self.owners
            .lock()
            .insert((db.to_string(), table.to_string()), owner);
    }

    /// Forgets `db`.`table` (dropped, renamed).
    pub fn remove(&self, db: &str, table: &str) {
        self.owners
            .lock()
            .remove(&(db.to_string(), table.to_string()));
    }

    /// Forgets every temporary table of database `db` (dropped).
    pub fn remove_database(&self, db: &str) {
        self.owners.lock().retain(|(d, _), _| d != db);
    }

    /// Whether `db`.`table` is a temporary table (hidden from listings).
    pub fn contains(&self, db: &str, table: &str) -> bool {
        let owners = self.owners.lock();
        !owners.is_empty() && owners.contains_key(&(db.to_string(), table.to_string()))
    }

    /// Connection `owner`'s temporary tables, forgotten here: it has ended
    /// and the caller drops them.
    pub fn take_owned_by(&self, owner: u32) -> Vec<(String, String)> {
        let mut owners = self.owners.lock();
        let mine: Vec<_> = owners
            .iter()
            .filter(|(_, o)| **o == owner)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &mine {
            owners.remove(k);
        }
        mine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_tables_are_taken_once() {
        let t = TemporaryTables::default();
        t.add("d", "a", 1);
        t.add("d", "b", 2);
        assert!(t.contains("d", "a") && !t.contains("d", "c"));
        assert_eq!(t.take_owned_by(1), vec![("d".to_string(), "a".to_string())]);
        assert!(t.take_owned_by(1).is_empty());
        t.remove_database("d");
        assert!(!t.contains("d", "b"));
    }
}
