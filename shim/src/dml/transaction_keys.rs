//! The unique keys a transaction has written so far: an INSERT or UPDATE
//! inside a transaction decides its duplicates against them before commit.

use std::collections::HashMap;

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::{IndexRef, OnConflict, ScanSpec, StorageError, WriteOp};

use super::overlay::{coerce_lenient, key_values, transaction_rows};
use crate::error::Result;
use crate::exec::Engine;
use crate::session::Session;

/// The PRIMARY and UNIQUE keys of a table as an open transaction sees it,
/// for checking one INSERT statement's rows: every current row holding a
/// key some new row has (committed rows with the transaction's buffered
/// writes replayed), and the statement's own rows as they are added.
pub(super) struct TransactionKeys<'a> {
    pub(super) schema: &'a TableSchema,
    /// PRIMARY first, then each UNIQUE key.
    pub(super) keys: Vec<UniqueKey>,
}

/// One unique key: its name, its columns, and the row holding each
/// normalized key value.
pub(super) struct UniqueKey {
    pub(super) name: String,
    pub(super) columns: Vec<usize>,
    pub(super) rows: HashMap<Vec<Value>, Row>,
}

impl<'a> TransactionKeys<'a> {
    pub(super) fn new(
        e: &Engine,
        s: &Session,
        schema: &'a TableSchema,
        new_rows: &[Row],
    ) -> Result<TransactionKeys<'a>> {
        let mut defs: Vec<(String, Option<IndexRef>, Vec<usize>)> = Vec::new();
        if let Some(pk) = &schema.primary_key {
            defs.push(("PRIMARY".into(), Some(IndexRef::Primary), pk.clone()));
        }
        for idx in schema.indexes.iter().filter(|i| i.unique) {
            defs.push((
                idx.name.clone(),
                Some(IndexRef::Secondary(idx.id)),
                idx.columns.clone(),
            ));
        }
        let mut me = TransactionKeys {
            schema,
            keys: defs
                .iter()
                .map(|(name, _, columns)| UniqueKey {
                    name: name.clone(),
                    columns: columns.clone(),
                    rows: HashMap::new(),
                })
                .collect(),
        };
        if defs.is_empty() {
            return Ok(me);
        }
        // The transaction's ops on the table, and whether each only adds
        // rows it holds (a plain INSERT or INSERT IGNORE, whose rows were
        // checked when it ran): then no committed row changed.
        let ops: Vec<&WriteOp> = s
            .transaction
            .iter()
            .flat_map(|tx| tx.ops.iter())
            .filter(|op| op.table() == schema.id)
            .collect();
        let only_added = ops.iter().all(|op| {
            matches!(
                op,
                WriteOp::Insert {
                    on_conflict: OnConflict::Error | OnConflict::Ignore,
                    ..
                }
            )
        });
        if let (Some(tx), false) = (&s.transaction, only_added) {
            // The transaction changed or removed rows: its view of the rows
            // holding the new rows' keys is those committed rows (and the
            // ones its ops touched) with its ops replayed.
            let lookups: Vec<ScanSpec> = defs
                .iter()
                .filter_map(|(_, index, cols)| Some((index.as_ref()?, cols)))
                .flat_map(|(index, cols)| {
                    new_rows.iter().filter_map(move |row| {
                        Some(ScanSpec::Prefix {
                            index: *index,
                            key: key_values(row, cols)?,
                        })
                    })
                })
                .collect();
            for r in transaction_rows(e, tx, schema, &lookups)? {
                me.add(&r);
            }
        } else {
            // Committed rows by key lookups, plus the rows the transaction
            // added that share a key with the new rows, from its index of
            // them (so a bulk load in a transaction stays O(rows) overall).
            if let Some(tx) = &s.transaction {
                let mut all = tx.added_keys.borrow_mut();
                let added = all.entry(schema.id).or_default();
                me.catch_up(added, &tx.ops);
                for (i, (_, _, cols)) in defs.iter().enumerate() {
                    for row in new_rows {
                        let found = me
                            .normalized(row, cols)
                            .and_then(|k| added.keys.get(i).and_then(|m| m.get(&k)).cloned());
                        if let Some(r) = found {
                            me.add(&r);
                        }
                    }
                }
            }
            for (_, index, cols) in &defs {
                let Some(index) = index else { continue };
                for row in new_rows {
                    if let Some(k) = key_values(row, cols) {
                        for r in e.storage.lookup(schema.id, *index, &k)? {
                            me.add(&r);
                        }
                    }
                }
            }
        }
        Ok(me)
    }

    /// Brings `added` (this table's index of rows the transaction's plain
    /// INSERTs added) up to date with `ops` (ROLLBACK TO SAVEPOINT clears
    /// the index, see `Transaction::rollback_to`).
    pub(super) fn catch_up(&self, added: &mut crate::session::AddedKeys, ops: &[WriteOp]) {
        if added.keys.len() != self.keys.len() || added.ops_seen > ops.len() {
            *added = crate::session::AddedKeys {
                ops_seen: 0,
                keys: vec![HashMap::new(); self.keys.len()],
            };
        }
        for op in &ops[added.ops_seen..] {
            if let WriteOp::Insert { table, rows, .. } = op {
                if *table == self.schema.id {
                    for r in rows {
                        let r = coerce_lenient(self.schema, r);
                        for (i, key) in self.keys.iter().enumerate() {
                            if let Some(k) = self.normalized(&r, &key.columns) {
                                added.keys[i].insert(k, r.clone());
                            }
                        }
                    }
                }
            }
        }
        added.ops_seen = ops.len();
    }

    pub(super) fn normalized(&self, row: &Row, cols: &[usize]) -> Option<Vec<Value>> {
        Some(
            key_values(row, cols)?
                .iter()
                .zip(cols)
                .map(|(v, &c)| v.key_normalized(self.schema.columns[c].collation))
                .collect(),
        )
    }

    /// How many distinct current rows share a unique key with `row`.
    pub(super) fn conflicts(&self, row: &Row) -> usize {
        let mut found: Vec<&Row> = Vec::new();
        for key in &self.keys {
            if let Some(r) = self
                .normalized(row, &key.columns)
                .and_then(|k| key.rows.get(&k))
            {
                if !found.contains(&r) {
                    found.push(r);
                }
            }
        }
        found.len()
    }

    /// The first current row `row` collides with (the one ON DUPLICATE
    /// KEY UPDATE updates).
    pub(super) fn first_conflict(&self, row: &Row) -> Option<Row> {
        self.keys
            .iter()
            .find_map(|key| key.rows.get(&self.normalized(row, &key.columns)?).cloned())
    }

    /// MySQL's 1062 for the first key of `row` that collides.
    pub(super) fn duplicate_error(&self, row: &Row) -> StorageError {
        for key in &self.keys {
            if self
                .normalized(row, &key.columns)
                .is_some_and(|k| key.rows.contains_key(&k))
            {
                let value = key
                    .columns
                    .iter()
                    .map(|&c| row[c].to_string())
                    .collect::<Vec<_>>()
                    .join("-");
                return StorageError::DuplicateKey {
                    key: key.name.clone(),
                    value,
                };
            }
        }
        StorageError::Internal("no duplicate key to report".into())
    }

    /// Also knows `rows` (current rows found later), except a row whose
    /// primary key it already holds: its version here is the newer one.
    pub(super) fn learn(&mut self, rows: Vec<Row>) {
        let Some(pk) = self.schema.primary_key.as_ref().filter(|pk| !pk.is_empty()) else {
            return;
        };
        for r in rows {
            let held = self.keys.first().is_some_and(|primary| {
                primary.columns == *pk
                    && self
                        .normalized(&r, pk)
                        .is_some_and(|k| primary.rows.contains_key(&k))
            });
            if !held {
                self.add(&r);
            }
        }
    }

    /// Forgets the rows `row` replaces (REPLACE deletes them).
    pub(super) fn remove_conflicting(&mut self, row: &Row) {
        let victims: Vec<Row> = self
            .keys
            .iter()
            .filter_map(|key| key.rows.get(&self.normalized(row, &key.columns)?).cloned())
            .collect();
        for v in victims {
            let normalized: Vec<Option<Vec<Value>>> = self
                .keys
                .iter()
                .map(|key| self.normalized(&v, &key.columns))
                .collect();
            for (key, k) in self.keys.iter_mut().zip(normalized) {
                if let Some(k) = k {
                    key.rows.remove(&k);
                }
            }
        }
    }

    /// Every row it knows.
    pub(super) fn rows(self) -> Vec<Row> {
        let mut out: Vec<Row> = Vec::new();
        for key in self.keys {
            for (_, r) in key.rows {
                if !out.contains(&r) {
                    out.push(r);
                }
            }
        }
        out
    }

    pub(super) fn add(&mut self, row: &Row) {
        let normalized: Vec<Option<Vec<Value>>> = self
            .keys
            .iter()
            .map(|key| self.normalized(row, &key.columns))
            .collect();
        for (key, k) in self.keys.iter_mut().zip(normalized) {
            if let Some(k) = k {
                key.rows.insert(k, row.clone());
            }
        }
    }
}
