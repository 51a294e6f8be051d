//! The transaction overlay: a table as an open transaction sees it (its
//! buffered writes replayed over the committed rows, or over its
//! REPEATABLE READ snapshot), and the overlays reads lay over a view.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::{IndexRef, OnConflict, ScanSpec, WriteOp};

use crate::error::Result;
use crate::exec::Engine;
use crate::session::{Session, Transaction};

/// Whether the open transaction wrote `table`.
pub(crate) fn transaction_wrote(s: &Session, table: ladle_common::TableId) -> bool {
    s.transaction
        .as_ref()
        .is_some_and(|tx| tx.ops.iter().any(|op| op.table() == table))
}

/// Every row of `schema`'s table as the session sees it: committed rows
/// with the open transaction's writes replayed.
pub(crate) fn table_as_transaction_sees(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
) -> Result<Vec<Row>> {
    candidate_rows(e, s, schema, &ScanSpec::Full)
}

/// `rows` (a table's committed rows) as the transaction's buffered ops
/// leave them.
pub(super) fn replay(tx: &Transaction, schema: &TableSchema, rows: Vec<Row>) -> Result<Vec<Row>> {
    replay_noting(tx, schema, rows, &mut Vec::new())
}

/// [`replay`], also pushing to `touched` every row an op wrote or removed
/// on the way (an inserted row a later op deleted is gone from the result
/// but still hides a snapshot's row with its key: see [`snapshot_overlay`]).
pub(super) fn replay_noting(
    tx: &Transaction,
    schema: &TableSchema,
    mut rows: Vec<Row>,
    touched: &mut Vec<Row>,
) -> Result<Vec<Row>> {
    for op in &tx.ops {
        match op {
            WriteOp::Insert {
                table,
                rows: new,
                on_conflict,
                ..
            } if *table == schema.id => {
                for r in new {
                    let coerced = coerce_lenient(schema, r);
                    match on_conflict {
                        OnConflict::Replace => {
                            let gone = colliding(schema, &rows, &coerced);
                            let mut i = 0;
                            rows.retain(|r| {
                                i += 1;
                                let keep = !gone.contains(&(i - 1));
                                if !keep {
                                    touched.push(r.clone());
                                }
                                keep
                            });
                            touched.push(coerced.clone());
                            rows.push(coerced);
                        }
                        OnConflict::Update(f) => match colliding(schema, &rows, &coerced).first() {
                            Some(&i) => {
                                let updated = coerce_lenient(schema, &f(&rows[i], &coerced)?);
                                if updated != rows[i] {
                                    touched.push(rows[i].clone());
                                    touched.push(updated.clone());
                                }
                                rows[i] = updated;
                            }
                            None => {
                                touched.push(coerced.clone());
                                rows.push(coerced);
                            }
                        },
                        // Checked when the statement ran: an IGNORE op
                        // holds only the rows that did not collide.
                        OnConflict::Error | OnConflict::Ignore => {
                            touched.push(coerced.clone());
                            rows.push(coerced);
                        }
                    }
                }
            }
            WriteOp::Update { table, update, .. } if *table == schema.id => {
                for r in rows.iter_mut() {
                    if let Some(n) = update(r)? {
                        // Typed as COMMIT will store it (`i / 2` of an INT
                        // column reads back as an integer, not a decimal).
                        let n = coerce_lenient(schema, &n);
                        if n != *r {
                            touched.push(r.clone());
                            touched.push(n.clone());
                        }
                        *r = n;
                    }
                }
            }
            WriteOp::Delete { table, filter, .. } if *table == schema.id => {
                let mut kept = Vec::with_capacity(rows.len());
                for r in rows {
                    if filter(&r)? {
                        touched.push(r);
                    } else {
                        kept.push(r);
                    }
                }
                rows = kept;
            }
            _ => {}
        }
    }
    Ok(rows)
}

/// `row` coerced to the table's column types, each value that does not
/// coerce left as it is (COMMIT will report it).
pub(super) fn coerce_lenient(schema: &TableSchema, row: &Row) -> Row {
    row.iter()
        .zip(&schema.columns)
        .map(|(v, c)| ladle_common::coerce(v, c).unwrap_or_else(|_| v.clone()))
        .collect()
}

/// Positions in `rows` of the rows sharing a PRIMARY or UNIQUE key with
/// `row`, those sharing the PRIMARY key first.
pub(super) fn colliding(schema: &TableSchema, rows: &[Row], row: &Row) -> Vec<usize> {
    let mut keys: Vec<&[usize]> = Vec::new();
    if let Some(pk) = &schema.primary_key {
        keys.push(pk);
    }
    keys.extend(
        schema
            .indexes
            .iter()
            .filter(|i| i.unique)
            .map(|i| &i.columns[..]),
    );
    let normalized = |r: &Row, cols: &[usize]| -> Option<Vec<Value>> {
        Some(
            key_values(r, cols)?
                .iter()
                .zip(cols)
                .map(|(v, &c)| v.key_normalized(schema.columns[c].collation))
                .collect(),
        )
    };
    let wanted: Vec<(&[usize], Vec<Value>)> = keys
        .iter()
        .filter_map(|cols| Some((*cols, normalized(row, cols)?)))
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    // In key order (PRIMARY first, then each UNIQUE key), as storage finds
    // them: ON DUPLICATE KEY UPDATE updates the first.
    let mut out: Vec<usize> = Vec::new();
    for (cols, k) in &wanted {
        for (i, r) in rows.iter().enumerate() {
            if !out.contains(&i) && normalized(r, cols).as_ref() == Some(k) {
                out.push(i);
            }
        }
    }
    out
}

/// An open transaction's uncommitted effect on the `tables` a SELECT reads,
/// as row deltas over committed state (deletes, then inserts), so the
/// transaction reads its own writes. Empty when it wrote none of them.
///
/// Each written table is replayed whole ([`replay`]) and diffed
/// against its committed rows: O(table size) per such read, the price of
/// reading inside a transaction that wrote to the table.
pub(crate) fn transaction_overlay(
    e: &Engine,
    s: &Session,
    tables: &[ladle_common::TableId],
) -> Result<Vec<ladle_common::TableDeltas>> {
    let mut out = Vec::new();
    for w in written_tables(e, s, tables)? {
        let deltas = row_diff(w.committed, w.replayed);
        if !deltas.is_empty() {
            out.push(ladle_common::TableDeltas {
                table: w.id,
                deltas,
            });
        }
    }
    Ok(out)
}

/// Like [`transaction_overlay`] for a REPEATABLE READ transaction: the
/// deltas turn `view` (its read view) into what the transaction reads. The
/// rows its writes touched (those its replay changes in the latest
/// committed state, by primary key; by whole row without one) read as the
/// transaction left them, the others as `view` has them, as InnoDB shows a
/// row a transaction updated in its own version and every other row in
/// the read view's.
pub(crate) fn snapshot_overlay(
    e: &Engine,
    s: &Session,
    tables: &[ladle_common::TableId],
    view: &ladle_storage::ReadView,
) -> Result<Vec<ladle_common::TableDeltas>> {
    let mut out = Vec::new();
    for WrittenTable {
        id: t,
        schema,
        committed,
        replayed,
        touched,
    } in written_tables(e, s, tables)?
    {
        let seen = view.scan(t)?;
        let desired = match &schema.primary_key {
            Some(pk) if !pk.is_empty() => {
                // A key the transaction wrote shows the transaction's own
                // version of its row (or none, if it ends up deleted), as
                // InnoDB's read view sees its own changes; every other key
                // the snapshot's.
                let key = |r: &Row| -> Vec<Value> {
                    pk.iter()
                        .map(|&c| r[c].key_normalized(schema.columns[c].collation))
                        .collect()
                };
                let touched: std::collections::HashSet<Vec<Value>> =
                    touched.iter().map(key).collect();
                let mut rows: Vec<Row> = seen
                    .iter()
                    .filter(|r| !touched.contains(&key(r)))
                    .cloned()
                    .collect();
                rows.extend(replayed.into_iter().filter(|r| touched.contains(&key(r))));
                rows
            }
            _ => {
                // No key to follow a row by: apply the change to the rows
                // the view has (a delete of a row it lacks is a no-op).
                let mut rows = seen.clone();
                for d in row_diff(committed, replayed) {
                    match d {
                        ladle_common::RowDelta::Delete(r) => {
                            if let Some(i) = rows.iter().position(|x| *x == r) {
                                rows.swap_remove(i);
                            }
                        }
                        ladle_common::RowDelta::Insert(r) => rows.push(r),
                    }
                }
                rows
            }
        };
        let deltas = row_diff(seen, desired);
        if !deltas.is_empty() {
            out.push(ladle_common::TableDeltas { table: t, deltas });
        }
    }
    Ok(out)
}

/// A table the open transaction wrote.
pub(super) struct WrittenTable {
    pub(super) id: ladle_common::TableId,
    pub(super) schema: Arc<TableSchema>,
    /// Its latest committed rows.
    pub(super) committed: Vec<Row>,
    /// Those rows with the transaction's ops replayed.
    pub(super) replayed: Vec<Row>,
    /// Every row the ops wrote or removed on the way (see
    /// [`replay_noting`]).
    pub(super) touched: Vec<Row>,
}

/// The `tables` the open transaction wrote.
pub(super) fn written_tables(
    e: &Engine,
    s: &Session,
    tables: &[ladle_common::TableId],
) -> Result<Vec<WrittenTable>> {
    let Some(tx) = s.transaction.as_ref().filter(|t| !t.ops.is_empty()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for &t in tables {
        let written = tx.ops.iter().any(|op| op.table() == t);
        let Some(schema) = written.then(|| e.storage.table_by_id(t)).flatten() else {
            continue;
        };
        let committed = e.storage.scan(t)?;
        let mut touched = Vec::new();
        let replayed = replay_noting(tx, &schema, committed.clone(), &mut touched)?;
        out.push(WrittenTable {
            id: t,
            schema,
            committed,
            replayed,
            touched,
        });
    }
    Ok(out)
}

/// The row deltas (deletes, then inserts) that turn the multiset `base`
/// into `desired`; a row in both cancels out.
pub(super) fn row_diff(base: Vec<Row>, desired: Vec<Row>) -> Vec<ladle_common::RowDelta> {
    let mut count: HashMap<Row, i64> = HashMap::new();
    for r in desired {
        *count.entry(r).or_default() += 1;
    }
    for r in base {
        *count.entry(r).or_default() -= 1;
    }
    let mut deltas = Vec::new();
    for (r, n) in &count {
        for _ in 0..(-n).max(0) {
            deltas.push(ladle_common::RowDelta::Delete(r.clone()));
        }
    }
    for (r, n) in count {
        for _ in 0..n.max(0) {
            deltas.push(ladle_common::RowDelta::Insert(r.clone()));
        }
    }
    deltas
}

/// Rows of `schema`'s table as the open transaction `tx` leaves them: at
/// least every row one of `scans` finds in that state (callers filter
/// further). Reads only what the scans and the transaction's own ops on
/// the table look up, when each of those is a key lookup and the ops only
/// insert, update or delete by their own scans (a REPLACE or ON DUPLICATE
/// KEY UPDATE reaches rows by any unique key): a row the transaction
/// changed was found by one of its ops' scans, and any other row is as
/// committed. Otherwise it replays the ops over the whole table. (sysbench
/// `oltp_read_write`'s UPDATE, DELETE and INSERT by primary key each read
/// the whole table before: 2 ms of CPU per statement at 40k rows.)
pub(super) fn transaction_rows(
    e: &Engine,
    tx: &Transaction,
    schema: &TableSchema,
    scans: &[ScanSpec],
) -> Result<Vec<Row>> {
    let mut lookups: Vec<&ScanSpec> = scans.iter().collect();
    let by_own_scans = tx.ops.iter().all(|op| match op {
        WriteOp::Insert {
            table, on_conflict, ..
        } => *table != schema.id || matches!(on_conflict, OnConflict::Error | OnConflict::Ignore),
        WriteOp::Update { table, scan, .. } | WriteOp::Delete { table, scan, .. } => {
            if *table == schema.id {
                lookups.push(scan);
            }
            true
        }
    });
    let pk = schema.primary_key.as_deref().filter(|pk| !pk.is_empty());
    let keyed = lookups.iter().all(|s| matches!(s, ScanSpec::Prefix { .. }));
    let (Some(pk), true, true) = (pk, by_own_scans, keyed) else {
        return replay(tx, schema, e.storage.scan(schema.id)?);
    };
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::new();
    for scan in lookups {
        if let ScanSpec::Prefix { index, key } = scan {
            for r in e.storage.lookup(schema.id, *index, key)? {
                if seen.insert(key_values(&r, pk)) {
                    rows.push(r);
                }
            }
        }
    }
    replay(tx, schema, rows)
}

/// The rows an UPDATE/DELETE considers: committed rows, or inside a
/// transaction the table as the transaction's buffered ops leave it (so
/// counts and ORDER BY ... LIMIT see the transaction's own writes).
pub(crate) fn candidate_rows(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    scan: &ScanSpec,
) -> Result<Vec<Row>> {
    let Some(tx) = s.transaction.as_ref().filter(|t| !t.ops.is_empty()) else {
        return Ok(match scan {
            ScanSpec::Full => e.storage.scan(schema.id)?,
            ScanSpec::Prefix { index, key } => e.storage.lookup(schema.id, *index, key)?,
            ScanSpec::Keys(keys) => {
                let mut rows = Vec::with_capacity(keys.len());
                for key in keys {
                    rows.extend(e.storage.lookup(schema.id, IndexRef::Primary, key)?);
                }
                rows
            }
        });
    };
    let rows = transaction_rows(e, tx, schema, std::slice::from_ref(scan))?;
    match (scan, &schema.primary_key) {
        // In the order given, as storage visits them.
        (ScanSpec::Keys(keys), Some(pk)) => {
            let mut by_key: HashMap<Vec<Value>, Row> = rows
                .into_iter()
                .map(|r| (pk.iter().map(|&c| r[c].clone()).collect(), r))
                .collect();
            Ok(keys.iter().filter_map(|k| by_key.remove(k)).collect())
        }
        // In primary key order, as storage (and InnoDB) scans the table:
        // the transaction's own inserts among the committed rows, so that
        // a statement over several rows fails on the row InnoDB fails on
        // first (an out-of-range value before a later row's CHECK).
        (ScanSpec::Full, Some(pk)) => {
            let mut rows = rows;
            rows.sort_by(|a, b| {
                pk.iter()
                    .map(|&c| {
                        let coll = schema.columns[c].compare_collation();
                        a[c].cmp_collated(&b[c], coll)
                    })
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            Ok(rows)
        }
        _ => Ok(rows),
    }
}

/// The key values of `row` for `cols`, or None if any is NULL (NULLs never
/// collide).
pub(super) fn key_values(row: &Row, cols: &[usize]) -> Option<Vec<Value>> {
    cols.iter()
        .map(|&c| row.get(c).filter(|v| !v.is_null()).cloned())
        .collect()
}
