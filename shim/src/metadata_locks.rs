//! Metadata locks: MySQL's MDL, reduced to what Ladle's buffered
//! transactions need. A transaction's writes are built (rows laid out,
//! row functions compiled) when each statement runs and applied at COMMIT,
//! so the table's schema must not change in between: a transaction that has
//! written a table holds it *shared* until it ends, and a schema change of
//! the table (ALTER TABLE, CREATE/DROP INDEX, RENAME, DROP, TRUNCATE) takes
//! it *exclusive* (DROP DATABASE: all its tables), waiting for the other holders to finish (up to
//! `lock_wait_timeout`, then 1205). A transaction that meets a schema
//! change in progress waits for it and then sees the new schema.
//!
//! Waiters give way to nobody: a waiting schema change does not stop new
//! transactions from taking the table, so no cycle of waits can form (a
//! schema change holds nothing while it waits); a long stream of
//! transactions can delay it, bounded by its timeout.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::TableId;
use parking_lot::{Condvar, Mutex};
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError};
use crate::tokens::{qualified_name, word};

/// Every table's metadata lock.
#[derive(Default)]
pub struct MetadataLocks {
    tables: Mutex<HashMap<TableId, TableLock>>,
    released: Condvar,
}

#[derive(Default)]
struct TableLock {
    /// Connections whose open transaction has written the table.
    holders: HashSet<u32>,
    /// The connection changing the table's schema now, if any.
    changing: Option<u32>,
}

impl TableLock {
    fn is_free(&self) -> bool {
        self.holders.is_empty() && self.changing.is_none()
    }
}

/// How often a waiter looks at its KILL flag.
const POLL: Duration = Duration::from_millis(100);

impl MetadataLocks {
    /// Holds `table` shared for `connection`'s transaction (no-op if it
    /// already does), waiting while another connection changes its schema.
    /// Held until [`TransactionLocks`] drops.
    pub fn hold_shared(
        self: &Arc<Self>,
        held: &mut TransactionLocks,
        connection: u32,
        table: TableId,
        timeout: Duration,
    ) -> Result<()> {
        if held.tables.contains(&table) {
            return Ok(());
        }
        let mut tables = self.tables.lock();
        self.wait(&mut tables, timeout, |tables| {
            tables
                .get(&table)
                .and_then(|t| t.changing)
                .is_none_or(|c| c == connection)
        })?;
        tables.entry(table).or_default().holders.insert(connection);
        held.locks = Some(Arc::clone(self));
        held.connection = connection;
        held.tables.push(table);
        Ok(())
    }

    /// Takes `table` exclusive for a schema change by `connection`: waits
    /// until no other connection's transaction holds it and no other
    /// change runs. Released when the guard drops.
    pub fn exclusive(
        self: &Arc<Self>,
        connection: u32,
        table: TableId,
        timeout: Duration,
    ) -> Result<SchemaChangeGuard> {
        let mut tables = self.tables.lock();
        self.wait(&mut tables, timeout, |tables| {
            tables
                .get(&table)
                .is_none_or(|t| t.changing.is_none() && t.holders.iter().all(|&h| h == connection))
        })?;
        tables.entry(table).or_default().changing = Some(connection);
        Ok(SchemaChangeGuard {
            locks: Arc::clone(self),
            table,
        })
    }

    /// Waits until `ready`, waking on every release and every [`POLL`] (a
    /// KILL QUERY of the waiting statement ends the wait).
    fn wait(
        &self,
        tables: &mut parking_lot::MutexGuard<'_, HashMap<TableId, TableLock>>,
        timeout: Duration,
        ready: impl Fn(&HashMap<TableId, TableLock>) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !ready(tables) {
            ladle_dataflow::interrupt::check()?;
            let now = Instant::now();
            if now >= deadline {
                return Err(ShimError::LockWaitTimeout);
            }
            self.released.wait_for(tables, POLL.min(deadline - now));
        }
        Ok(())
    }

    fn release(&self, f: impl FnOnce(&mut HashMap<TableId, TableLock>)) {
        let mut tables = self.tables.lock();
        f(&mut tables);
        tables.retain(|_, t| !t.is_free());
        self.released.notify_all();
    }
}

/// The tables a transaction holds shared; released when it ends (the
/// [`crate::session::Transaction`] that owns this drops).
#[derive(Default)]
pub struct TransactionLocks {
    locks: Option<Arc<MetadataLocks>>,
    connection: u32,
    tables: Vec<TableId>,
}

impl Drop for TransactionLocks {
    fn drop(&mut self) {
        if let Some(locks) = &self.locks {
            locks.release(|tables| {
                for t in &self.tables {
                    if let Some(lock) = tables.get_mut(t) {
                        lock.holders.remove(&self.connection);
                    }
                }
            });
        }
    }
}

/// A schema change's exclusive hold of its table.
pub struct SchemaChangeGuard {
    locks: Arc<MetadataLocks>,
    table: TableId,
}

impl Drop for SchemaChangeGuard {
    fn drop(&mut self) {
        let table = self.table;
        self.locks.release(|tables| {
            if let Some(lock) = tables.get_mut(&table) {
                lock.changing = None;
            }
        });
    }
}

/// A table a statement names: `(database if qualified, table)`.
pub(crate) type NamedTable = (Option<String>, String);

/// The tables a schema-changing statement (its tokens, whitespace
/// removed) changes: `ALTER [ONLINE] [IGNORE] TABLE t`, `CREATE [UNIQUE |
/// FULLTEXT | SPATIAL] INDEX i ON t`, `DROP INDEX i ON t`, `DROP
/// [TEMPORARY] TABLE[S] [IF EXISTS] a, b`, `RENAME TABLE a TO b, ...` (the
/// sources) and `TRUNCATE [TABLE] t`. None for any other statement.
pub(crate) fn schema_change_targets(t: &[Token]) -> Vec<NamedTable> {
    let is = |i: usize, w: &str| word(t, i).as_deref() == Some(w);
    let position = |w: &str, within: usize| (0..within.min(t.len())).find(|&i| is(i, w));
    let name_at = |mut i: usize| qualified_name(t, &mut i).into_iter().collect::<Vec<_>>();
    let list_from = |mut i: usize, skip_to: bool| {
        let mut names = Vec::new();
        while let Some(n) = qualified_name(t, &mut i) {
            names.push(n);
            if skip_to && is(i, "TO") {
                i += 1;
                let _ = qualified_name(t, &mut i);
            }
            if !matches!(t.get(i), Some(Token::Comma)) {
                break;
            }
            i += 1;
        }
        names
    };
    match word(t, 0).as_deref() {
        Some("ALTER") => match position("TABLE", 4) {
            Some(i) if (1..i).all(|j| is(j, "ONLINE") || is(j, "IGNORE")) => name_at(i + 1),
            _ => Vec::new(),
        },
        Some("CREATE" | "DROP") if position("INDEX", 3).is_some() => {
            let index = position("INDEX", 3).unwrap_or(0);
            let modifiers =
                (1..index).all(|j| is(j, "UNIQUE") || is(j, "FULLTEXT") || is(j, "SPATIAL"));
            match (modifiers, (index..t.len()).find(|&i| is(i, "ON"))) {
                (true, Some(on)) => name_at(on + 1),
                _ => Vec::new(),
            }
        }
        Some("DROP") => {
            let mut i = 1 + usize::from(is(1, "TEMPORARY"));
            if !(is(i, "TABLE") || is(i, "TABLES")) {
                return Vec::new();
            }
            i += 1;
            if is(i, "IF") && is(i + 1, "EXISTS") {
                i += 2;
            }
            list_from(i, false)
        }
        Some("RENAME") if is(1, "TABLE") || is(1, "TABLES") => list_from(2, true),
        Some("TRUNCATE") => name_at(1 + usize::from(is(1, "TABLE"))),
        _ => Vec::new(),
    }
}

/// The database `DROP {DATABASE | SCHEMA} [IF EXISTS] d` drops, whose
/// tables it changes.
pub(crate) fn dropped_database(t: &[Token]) -> Option<String> {
    let is = |i: usize, w: &str| word(t, i).as_deref() == Some(w);
    if !(is(0, "DROP") && (is(1, "DATABASE") || is(1, "SCHEMA"))) {
        return None;
    }
    let at = if is(2, "IF") && is(3, "EXISTS") { 4 } else { 2 };
    crate::tokens::ident(t, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(sql: &str) -> Vec<NamedTable> {
        schema_change_targets(&crate::tokens::tokens(sql).unwrap())
    }

    fn named(names: &[&str]) -> Vec<NamedTable> {
        names
            .iter()
            .map(|n| match n.split_once('.') {
                Some((db, t)) => (Some(db.to_string()), t.to_string()),
                None => (None, n.to_string()),
            })
            .collect()
    }

    #[test]
    fn schema_changes_name_their_tables() {
        assert_eq!(targets("ALTER TABLE t ADD COLUMN x INT"), named(&["t"]));
        assert_eq!(targets("alter ignore table d.t drop x"), named(&["d.t"]));
        assert_eq!(targets("CREATE UNIQUE INDEX i ON `t` (a)"), named(&["t"]));
        assert_eq!(targets("DROP INDEX i ON d.t"), named(&["d.t"]));
        assert_eq!(targets("DROP TABLE IF EXISTS a, d.b"), named(&["a", "d.b"]));
        assert_eq!(
            targets("RENAME TABLE a TO b, d.c TO d.e"),
            named(&["a", "d.c"])
        );
        assert_eq!(targets("TRUNCATE TABLE t"), named(&["t"]));
        assert_eq!(targets("TRUNCATE t"), named(&["t"]));
        assert!(targets("CREATE TABLE t (a INT)").is_empty());
        assert!(targets("DROP DATABASE d").is_empty());
        let tokens = |sql| crate::tokens::tokens(sql).unwrap();
        assert_eq!(
            dropped_database(&tokens("DROP DATABASE IF EXISTS `d`")),
            Some("d".into())
        );
        assert_eq!(dropped_database(&tokens("drop schema d")), Some("d".into()));
        assert_eq!(dropped_database(&tokens("DROP TABLE d")), None);
        assert!(targets("ALTER USER u IDENTIFIED BY 'x'").is_empty());
    }

    const SHORT: Duration = Duration::from_millis(300);

    #[test]
    fn a_schema_change_waits_for_transactions_that_wrote_the_table() {
        let locks = Arc::new(MetadataLocks::default());
        let mut tx = TransactionLocks::default();
        locks.hold_shared(&mut tx, 1, 7, SHORT).unwrap();
        // Its own transaction does not block a connection.
        drop(locks.exclusive(1, 7, SHORT).unwrap());
        assert!(matches!(
            locks.exclusive(2, 7, SHORT),
            Err(ShimError::LockWaitTimeout)
        ));
        // Another table is free.
        drop(locks.exclusive(2, 8, SHORT).unwrap());
        let waiter = {
            let locks = Arc::clone(&locks);
            std::thread::spawn(move || locks.exclusive(2, 7, Duration::from_secs(30)).is_ok())
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(tx);
        assert!(waiter.join().unwrap());
        assert!(locks.tables.lock().is_empty());
    }

    #[test]
    fn a_transaction_waits_for_a_schema_change_in_progress() {
        let locks = Arc::new(MetadataLocks::default());
        let change = locks.exclusive(2, 7, SHORT).unwrap();
        let mut tx = TransactionLocks::default();
        assert!(matches!(
            locks.hold_shared(&mut tx, 1, 7, SHORT),
            Err(ShimError::LockWaitTimeout)
        ));
        drop(change);
        locks.hold_shared(&mut tx, 1, 7, SHORT).unwrap();
        // Held once however often it is asked for.
        locks.hold_shared(&mut tx, 1, 7, SHORT).unwrap();
        assert_eq!(tx.tables, vec![7]);
    }
}
