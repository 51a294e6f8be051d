//! The write path: validation, MySQL's INSERT/UPDATE/DELETE semantics and
//! the per-group overlay.
//!
//! A commit group is applied against the engine's current state plus an
//! [`Overlay`] of the group's pending changes, so a later op sees earlier
//! ones. Each caller's op list is atomic: the overlay keeps an undo log and a
//! failing caller's changes are rolled back without touching the others'.
//! The overlay then becomes one engine batch (see `Storage::commit_group`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use ladle_common::{coerce, Row, RowDelta, TableDeltas, TableId, TableSchema, Value};

use crate::auto_inc::{reserve_batch, IdAllocator};
use crate::engine::{Batch, KvRead, ScanFn};
use crate::read::{self, KeyedRow};
use crate::table::{now, TableState};
use crate::{
    IdBatches, IndexRef, OnConflict, OpResult, Result, RowReturning, ScanSpec, StorageError,
    ValueMisfit, WriteOp,
};

/// Rows bigger than this (not counting BLOB/TEXT/JSON content) are refused.
pub(crate) const ROW_SIZE_LIMIT: usize = 65_535;

/// A caller's commit check over the group's state and its row deltas.
pub(crate) type CheckFn<'a> = dyn Fn(&dyn KvRead, &[(TableId, RowDelta)]) -> Result<()> + 'a;

/// A change to undo: column family, key, and the overlay's previous entry.
type UndoEntry = (String, Vec<u8>, Option<Option<Vec<u8>>>);

/// Pending puts (`Some`) and deletes (`None`) per column family, with an
/// undo log for rolling back one caller.
#[derive(Default)]
pub(crate) struct Overlay {
    cfs: HashMap<String, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    undo: Vec<UndoEntry>,
}

impl Overlay {
    pub fn put(&mut self, cf: &str, key: Vec<u8>, value: Vec<u8>) {
        self.set(cf, key, Some(value));
    }

    pub fn delete(&mut self, cf: &str, key: Vec<u8>) {
        self.set(cf, key, None);
    }

    fn set(&mut self, cf: &str, key: Vec<u8>, value: Option<Vec<u8>>) {
        let map = match self.cfs.get_mut(cf) {
            Some(m) => m,
            None => self.cfs.entry(cf.to_string()).or_default(),
        };
        let prev = map.insert(key.clone(), value);
        self.undo.push((cf.to_string(), key, prev));
    }

    /// Forgets the undo log: everything so far stays.
    pub fn keep(&mut self) {
        self.undo.clear();
    }

    /// Undoes every change since the last [`Overlay::keep`].
    pub fn rollback(&mut self) {
        while let Some((cf, key, prev)) = self.undo.pop() {
            if let Some(map) = self.cfs.get_mut(&cf) {
                match prev {
                    Some(v) => {
                        map.insert(key, v);
                    }
                    None => {
                        map.remove(&key);
                    }
                }
            }
        }
    }

    /// Moves every pending change into `batch`.
    pub fn into_batch(self, batch: &mut Batch) {
        for (cf, map) in self.cfs {
            for (k, v) in map {
                match v {
                    Some(v) => batch.put(&cf, k, v),
                    None => batch.delete(&cf, k),
                }
            }
        }
    }
}

/// Reads of the engine state with the overlay on top.
pub(crate) struct OverlayReader<'a> {
    pub base: &'a dyn KvRead,
    pub overlay: &'a Overlay,
}

impl KvRead for OverlayReader<'_> {
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.overlay.cfs.get(cf).and_then(|m| m.get(key)) {
            return Ok(v.clone());
        }
        self.base.get(cf, key)
    }

    fn scan(&self, cf: &str, lower: &[u8], upper: Option<&[u8]>, f: ScanFn<'_>) -> Result<()> {
        let Some(map) = self.overlay.cfs.get(cf).filter(|m| !m.is_empty()) else {
            return self.base.scan(cf, lower, upper, f);
        };
        if matches!(upper, Some(u) if u <= lower) {
            return Ok(());
        }
        let hi = match upper {
            Some(u) => Bound::Excluded(u),
            None => Bound::Unbounded,
        };
        let mut pending = map
            .range::<[u8], _>((Bound::Included(lower), hi))
            .peekable();
        let mut stopped = false;
        self.base.scan(cf, lower, upper, &mut |k, v| {
            // Overlay entries before this key come first.
            while let Some((ok, ov)) = pending.peek() {
                if ok.as_slice() >= k {
                    break;
                }
                if let Some(val) = ov {
                    if !f(ok, val)? {
                        stopped = true;
                        return Ok(false);
                    }
                }
                pending.next();
            }
            let go_on = match pending.peek() {
                Some((ok, ov)) if ok.as_slice() == k => {
                    let r = match ov {
                        Some(val) => f(k, val)?,
                        None => true,
                    };
                    pending.next();
                    r
                }
                _ => f(k, v)?,
            };
            stopped = !go_on;
            Ok(go_on)
        })?;
        if !stopped {
            for (ok, ov) in pending {
                if let Some(val) = ov {
                    if !f(ok, val)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The state of one commit group while its callers' ops are applied.
pub(crate) struct Group<'a> {
    pub base: &'a dyn KvRead,
    pub tables: &'a HashMap<TableId, Arc<TableState>>,
    pub overlay: Overlay,
    /// Deltas in commit order; truncated when a caller is rolled back.
    pub deltas: Vec<(TableId, RowDelta)>,
    /// AUTO_INCREMENT counters to persist with the batch (table -> next).
    pub auto_inc: HashMap<TableId, u64>,
    /// Hidden row ids: `(epoch, next sequence)`.
    pub epoch: u64,
    pub row_seq: &'a std::sync::atomic::AtomicU64,
}

impl Group<'_> {
    fn reader(&self) -> OverlayReader<'_> {
        OverlayReader {
            base: self.base,
            overlay: &self.overlay,
        }
    }

    fn table(&self, id: TableId) -> Result<Arc<TableState>> {
        self.tables
            .get(&id)
            .cloned()
            .ok_or_else(|| StorageError::NoSuchTable {
                database: String::new(),
                table: format!("#{id}"),
            })
    }

    /// The table an op writes, as long as its schema is still the version
    /// the op was built for.
    fn table_at(&self, id: TableId, schema_version: u32) -> Result<Arc<TableState>> {
        let t = self.table(id)?;
        if t.schema.version != schema_version {
            return Err(StorageError::SchemaChanged {
                table: t.schema.name.clone(),
            });
        }
        Ok(t)
    }

    /// Applies one caller's ops atomically; `check` (the caller's
    /// [`crate::CommitCheck`]) then sees the result, and an error from it
    /// undoes them.
    pub fn apply_caller(
        &mut self,
        ops: Vec<WriteOp>,
        check: Option<&CheckFn<'_>>,
    ) -> Result<Vec<OpResult>> {
        let mark = self.deltas.len();
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            match self.apply_op(op) {
                Ok(r) => results.push(r),
                Err(e) => {
                    self.overlay.rollback();
                    self.deltas.truncate(mark);
                    return Err(e);
                }
            }
        }
        if let Some(check) = check {
            if let Err(e) = check(&self.reader(), &self.deltas[mark..]) {
                self.overlay.rollback();
                self.deltas.truncate(mark);
                return Err(e);
            }
        }
        self.overlay.keep();
        Ok(results)
    }

    fn apply_op(&mut self, op: WriteOp) -> Result<OpResult> {
        match op {
            WriteOp::Insert {
                table,
                schema_version,
                rows,
                on_conflict,
                auto_value_on_zero,
                id_batches,
                returning,
            } => {
                let t = self.table_at(table, schema_version)?;
                let mut result = OpResult::default();
                let mut next = NextId {
                    ids: IdAllocator::new(id_batches, rows.len()),
                    on_zero: auto_value_on_zero,
                };
                let rules = (&on_conflict, returning.as_ref());
                for (i, row) in rows.into_iter().enumerate() {
                    self.insert(&t, row, rules, &mut result, &mut next)
                        .map_err(|e| e.at_row(i + 1))?;
                }
                // An explicit id is reported only when some row was written
                // (MySQL's `info.copied`).
                if result.last_insert_id.is_none() && result.affected_rows == 0 {
                    result.insert_id = 0;
                }
                result.found_rows += result.affected_rows;
                Ok(result)
            }
            WriteOp::Update {
                table,
                schema_version,
                scan,
                update,
            } => {
                let t = self.table_at(table, schema_version)?;
                let mut result = OpResult::default();
                for (pk, old) in self.candidates(&t, &scan)? {
                    let numbered = |e: StorageError| e.at_row(result.found_rows as usize + 1);
                    let Some(new) = update(&old).map_err(numbered)? else {
                        continue;
                    };
                    result.found_rows += 1;
                    // Numbered among the rows the UPDATE matches (MariaDB
                    // counts the rows its access path reads: the same
                    // where an index or range finds exactly those).
                    let changed = self
                        .update_row(&t, &pk, &old, new)
                        .map_err(|e| e.at_row(result.found_rows as usize))?;
                    if changed {
                        result.affected_rows += 1;
                    }
                }
                Ok(result)
            }
            WriteOp::Delete {
                table,
                schema_version,
                scan,
                filter,
            } => {
                let t = self.table_at(table, schema_version)?;
                let mut result = OpResult::default();
                for (pk, row) in self.candidates(&t, &scan)? {
                    if filter(&row)? {
                        self.remove_entries(&t, &pk, &row)?;
                        self.deltas.push((t.schema.id, RowDelta::Delete(row)));
                        result.affected_rows += 1;
                        result.found_rows += 1;
                    }
                }
                Ok(result)
            }
        }
    }

    fn candidates(&self, t: &TableState, scan: &ScanSpec) -> Result<Vec<KeyedRow>> {
        let r = self.reader();
        match scan {
            ScanSpec::Full => read::scan_all(&r, t),
            ScanSpec::Prefix { index, key } => read::lookup(&r, t, *index, key),
            ScanSpec::Keys(keys) => {
                let mut rows = Vec::with_capacity(keys.len());
                for key in keys {
                    rows.extend(read::lookup(&r, t, IndexRef::Primary, key)?);
                }
                Ok(rows)
            }
        }
    }

    /// Inserts one row of a statement and lists it with `returning` (see
    /// [`WriteOp::Insert`]; its error fails the op). `next` holds the
    /// AUTO_INCREMENT value the statement hands out next (see
    /// [`Self::prepare_insert`]).
    fn insert(
        &mut self,
        t: &TableState,
        row: Row,
        (on_conflict, returning): (&OnConflict, Option<&RowReturning>),
        result: &mut OpResult,
        next: &mut NextId,
    ) -> Result<()> {
        let (row, generated) = self.prepare_insert(t, row, next)?;
        let conflicts = self.conflicts(t, &row, None)?;
        // A row IGNORE skips, or ON DUPLICATE KEY UPDATE turns into an
        // update, gives its generated value back to the statement's next
        // row (InnoDB's restore_auto_increment); the counter still moved.
        if let (Some(g), false) = (generated, conflicts.is_empty()) {
            if matches!(on_conflict, OnConflict::Ignore | OnConflict::Update(_)) {
                next.ids.give_back(g);
            }
        }
        // An explicit value moves the counter once its row is written;
        // InnoDB also moves it for a duplicate under REPLACE or INSERT ...
        // SELECT (its `set_max_autoinc`), not under INSERT, IGNORE or ON
        // DUPLICATE KEY UPDATE.
        if generated.is_none()
            && (conflicts.is_empty()
                || matches!(on_conflict, OnConflict::Replace)
                || next.ids.batches() == IdBatches::Growing)
        {
            if let Some(ai) = t.schema.auto_increment_column() {
                self.bump_auto_inc(t, &row[ai]);
            }
        }
        // The row whose AUTO_INCREMENT value the OK packet may report, and
        // whether the generated value (if any) was used by a written row.
        let (written, inserted) = if conflicts.is_empty() {
            let id = auto_inc_value(t, &row);
            list(returning, &row, generated, &mut result.rows)?;
            self.insert_new(t, row)?;
            result.affected_rows += 1;
            (id, true)
        } else {
            match on_conflict {
                OnConflict::Error => return Err(conflicts[0].error(t, &row)),
                OnConflict::Ignore => {
                    result.ignored.push(conflicts[0].error(t, &row).to_string());
                    // MySQL reports the last row the statement processed,
                    // written or not (see `apply_op`).
                    if result.last_insert_id.is_none() {
                        result.insert_id = auto_inc_value(t, &row).unwrap_or(result.insert_id);
                    }
                    return Ok(());
                }
                OnConflict::Replace => {
                    for c in &conflicts {
                        self.remove_entries(t, &c.pk, &c.row)?;
                        self.deltas
                            .push((t.schema.id, RowDelta::Delete(c.row.clone())));
                    }
                    let id = auto_inc_value(t, &row);
                    list(returning, &row, generated, &mut result.rows)?;
                    self.insert_new(t, row)?;
                    result.affected_rows += 1 + conflicts.len() as u64;
                    (id, true)
                }
                OnConflict::Update(f) => {
                    let c = &conflicts[0];
                    let new = f(&c.row, &row)?;
                    let id = auto_inc_value(t, &new);
                    let changed = self.update_row(t, &c.pk, &c.row, new)?;
                    // The row as the update left it: the delta it pushed.
                    let left = match self.deltas.last() {
                        Some((_, RowDelta::Insert(stored))) if changed => stored,
                        _ => &c.row,
                    };
                    list(returning, left, None, &mut result.rows)?;
                    if changed {
                        result.affected_rows += 2;
                    } else {
                        // Found but left as it was: 1 for FOUND_ROWS
                        // clients (affected rows are added per op).
                        result.found_rows += 1;
                    }
                    (id, false)
                }
            }
        };
        if result.last_insert_id.is_none() {
            match generated.filter(|_| inserted) {
                Some(g) => {
                    result.last_insert_id = Some(g);
                    result.insert_id = g;
                }
                None => result.insert_id = written.unwrap_or(result.insert_id),
            }
        }
        Ok(())
    }

    /// Coerces, checks NOT NULL, fills AUTO_INCREMENT and checks size.
    /// Returns the row and the value generated for it, if any. As in
    /// MariaDB, a row whose values do not fit or break NOT NULL fails
    /// before it takes a value (the handler reserves one in `write_row`);
    /// the value comes from the statement's batch ([`IdAllocator::take`]).
    /// A 0 wants a value only `on_zero` (see [`WriteOp::Insert`]).
    fn prepare_insert(
        &mut self,
        t: &TableState,
        row: Row,
        next: &mut NextId,
    ) -> Result<(Row, Option<u64>)> {
        let mut row = self.coerce_row(t, row)?;
        check_not_null(&t.schema, &row, true)?;
        let mut generated = None;
        if let Some(ai) = t.schema.auto_increment_column() {
            let column = &t.schema.columns[ai];
            let wants_value = row[ai].is_null() || (next.on_zero && row[ai].as_i64() == Some(0));
            if wants_value {
                let mut counter = t.counters.auto_inc.lock();
                let v = next.ids.take(|at_least, size| {
                    Ok::<_, StorageError>(reserve_batch(&mut counter, at_least, size))
                })?;
                self.auto_inc.insert(t.schema.id, *counter);
                row[ai] = coerce(&Value::UInt(v), column)?;
                generated = Some(v);
            } else if let Some(explicit) = positive(&row[ai]) {
                next.ids.follow(explicit);
            }
            next.ids.row_done();
        }
        self.check_row(t, &row)?;
        Ok((row, generated))
    }

    fn bump_auto_inc(&mut self, t: &TableState, v: &Value) {
        let Some(explicit) = positive(v) else {
            return;
        };
        let mut next = t.counters.auto_inc.lock();
        if explicit >= *next {
            *next = explicit.saturating_add(1);
            self.auto_inc.insert(t.schema.id, *next);
        }
    }

    fn coerce_row(&self, t: &TableState, row: Row) -> Result<Row> {
        if row.len() != t.schema.columns.len() {
            return Err(StorageError::ColumnCount);
        }
        row.iter()
            .zip(&t.schema.columns)
            .map(|(v, c)| {
                coerce(v, c).map_err(|error| {
                    StorageError::BadValueAt(Box::new(ValueMisfit {
                        error,
                        value: v.clone(),
                        column: c.clone(),
                        database: t.schema.database.clone(),
                        table: t.schema.name.clone(),
                        row: 0,
                    }))
                })
            })
            .collect()
    }

    fn check_row(&self, t: &TableState, row: &Row) -> Result<()> {
        // AUTO_INCREMENT is filled in by now (`prepare_insert`).
        check_not_null(&t.schema, row, false)?;
        let size = t.row_size(row);
        if size > ROW_SIZE_LIMIT {
            return Err(StorageError::RowTooLarge {
                size,
                limit: ROW_SIZE_LIMIT,
            });
        }
        Ok(())
    }

    /// Replaces `old` (stored under `pk`) by `new`; `false` if unchanged.
    fn update_row(&mut self, t: &TableState, pk: &[u8], old: &Row, new: Row) -> Result<bool> {
        let mut new = self.coerce_row(t, new)?;
        if new == *old {
            return Ok(false);
        }
        for (i, c) in t.schema.columns.iter().enumerate() {
            if c.on_update_current_timestamp && new[i] == old[i] {
                new[i] = coerce(&now(), c)?;
            }
        }
        if let Some(ai) = t.schema.auto_increment_column() {
            let v = new[ai].clone();
            self.bump_auto_inc(t, &v);
        }
        self.check_row(t, &new)?;
        if let Some(c) = self.conflicts(t, &new, Some(pk))?.first() {
            return Err(c.error(t, &new));
        }
        let new_pk = t.primary_key(&new).unwrap_or_else(|| pk.to_vec());
        self.remove_entries(t, pk, old)?;
        self.put_entries(t, &new_pk, &new)?;
        self.deltas
            .push((t.schema.id, RowDelta::Delete(old.clone())));
        self.deltas.push((t.schema.id, RowDelta::Insert(new)));
        Ok(true)
    }

    fn insert_new(&mut self, t: &TableState, row: Row) -> Result<()> {
        let pk = match t.primary_key(&row) {
            Some(pk) => pk,
            None => {
                let seq = self
                    .row_seq
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                crate::keys::row_id(self.epoch, seq)
            }
        };
        self.put_entries(t, &pk, &row)?;
        self.deltas.push((t.schema.id, RowDelta::Insert(row)));
        Ok(())
    }

    fn put_entries(&mut self, t: &TableState, pk: &[u8], row: &Row) -> Result<()> {
        self.overlay
            .put(t.primary_cf(), pk.to_vec(), crate::table::encode_row(row)?);
        for index in &t.schema.indexes {
            let value = t.secondary_value(pk, row)?;
            self.overlay.put(
                &crate::cf::secondary(index.id),
                t.secondary_key(index, row, pk),
                value,
            );
        }
        Ok(())
    }

    fn remove_entries(&mut self, t: &TableState, pk: &[u8], row: &Row) -> Result<()> {
        self.overlay.delete(t.primary_cf(), pk.to_vec());
        for index in &t.schema.indexes {
            self.overlay.delete(
                &crate::cf::secondary(index.id),
                t.secondary_key(index, row, pk),
            );
        }
        Ok(())
    }

    /// Stored rows that share a PRIMARY or UNIQUE key with `row`, other than
    /// the row under `exclude`, each once, primary first.
    fn conflicts(
        &self,
        t: &TableState,
        row: &Row,
        exclude: Option<&[u8]>,
    ) -> Result<Vec<Conflict>> {
        let r = self.reader();
        let mut out: Vec<Conflict> = Vec::new();
        if let Some(pk) = t.primary_key(row) {
            if exclude != Some(&pk[..]) {
                if let Some(existing) = read::get_row(&r, t, &pk)? {
                    out.push(Conflict {
                        key: None,
                        pk,
                        row: existing,
                    });
                }
            }
        }
        for index in t.schema.indexes.iter().filter(|i| i.unique) {
            if index.columns.iter().any(|&c| row[c].is_null()) {
                continue;
            }
            let key: Vec<Value> = index.columns.iter().map(|&c| row[c].clone()).collect();
            for (pk, existing) in read::lookup(&r, t, crate::IndexRef::Secondary(index.id), &key)? {
                if exclude == Some(&pk[..]) || out.iter().any(|c| c.pk == pk) {
                    continue;
                }
                out.push(Conflict {
                    key: Some(index.id),
                    pk,
                    row: existing,
                });
            }
        }
        Ok(out)
    }

    /// Applies row changes another node committed (a replica following its
    /// primary): an insert stores the row (a new hidden row id for a table
    /// without a primary key) and advances AUTO_INCREMENT past it; a delete
    /// removes the stored row equal to it. No validation: the primary did it.
    pub fn apply_deltas(&mut self, changes: &[TableDeltas]) -> Result<()> {
        for td in changes {
            let t = self.table(td.table)?;
            for delta in &td.deltas {
                match delta {
                    RowDelta::Insert(row) => {
                        if let Some(ai) = t.schema.auto_increment_column() {
                            self.bump_auto_inc(&t, &row[ai]);
                        }
                        self.insert_new(&t, row.clone())?;
                    }
                    RowDelta::Delete(row) => {
                        let pk = match t.primary_key(row) {
                            Some(pk) => pk,
                            // Equal rows of a table without a key cannot be
                            // told apart: removing any one of them is right.
                            None => read::scan_all(&self.reader(), &t)?
                                .into_iter()
                                .find(|(_, stored)| stored == row)
                                .map(|(pk, _)| pk)
                                .ok_or_else(|| {
                                    StorageError::Corruption(format!(
                                        "a replicated delete of table #{} matches no row",
                                        td.table
                                    ))
                                })?,
                        };
                        self.remove_entries(&t, &pk, row)?;
                    }
                }
            }
        }
        self.deltas.clear();
        self.overlay.keep();
        Ok(())
    }

    /// Groups the deltas into per-table runs, in commit order.
    pub fn take_changes(&mut self) -> Vec<TableDeltas> {
        let mut out: Vec<TableDeltas> = Vec::new();
        for (table, delta) in self.deltas.drain(..) {
            match out.last_mut() {
                Some(last) if last.table == table => last.deltas.push(delta),
                _ => out.push(TableDeltas {
                    table,
                    deltas: vec![delta],
                }),
            }
        }
        out
    }
}

/// A statement's AUTO_INCREMENT state while it inserts its rows.
struct NextId {
    ids: IdAllocator,
    /// Whether a 0 asks for a value, as NULL does (see [`WriteOp::Insert`]).
    on_zero: bool,
}

/// An existing row in the way of a PRIMARY (`key: None`) or UNIQUE key.
struct Conflict {
    key: Option<u64>,
    pk: Vec<u8>,
    row: Row,
}

impl Conflict {
    /// MySQL's 1062 error, naming the key and the proposed row's values.
    fn error(&self, t: &TableState, proposed: &Row) -> StorageError {
        let (name, columns): (String, &[usize]) = match self.key {
            None => (
                "PRIMARY".into(),
                t.schema.primary_key.as_deref().unwrap_or(&[]),
            ),
            Some(id) => match t.secondary(id) {
                Some(i) => (i.name.clone(), &i.columns),
                None => (format!("#{id}"), &[]),
            },
        };
        let value = columns
            .iter()
            .map(|&c| proposed[c].to_string())
            .collect::<Vec<_>>()
            .join("-");
        StorageError::DuplicateKey { key: name, value }
    }
}

/// The AUTO_INCREMENT column's value in `row`, if the table has one and the
/// value is a positive integer (what an OK packet reports as insert id).
/// The NOT NULL rule every write of a row obeys: a NULL in a NOT NULL
/// column is 1048 ([`StorageError::NotNull`], naming the first such
/// column). With `to_generate`, a NULL in the AUTO_INCREMENT column passes:
/// it is a value the write will generate (a caller checking a row before
/// the write, as a transaction's statement does).
pub fn check_not_null(schema: &TableSchema, row: &[Value], to_generate: bool) -> Result<()> {
    let generated = schema.auto_increment_column().filter(|_| to_generate);
    for (i, (v, c)) in row.iter().zip(&schema.columns).enumerate() {
        if v.is_null() && !c.nullable && Some(i) != generated {
            return Err(StorageError::NotNull {
                column: c.name.clone(),
            });
        }
    }
    Ok(())
}

/// Lists `row` (as the insert left it; `generated`: the AUTO_INCREMENT
/// value generated for it, if any) with the op's `returning`, if it has one.
fn list(
    returning: Option<&RowReturning>,
    row: &Row,
    generated: Option<u64>,
    listed: &mut Vec<Row>,
) -> Result<()> {
    if let Some(f) = returning {
        listed.push(f(row, generated)?);
    }
    Ok(())
}

/// An explicit AUTO_INCREMENT value that moves the counter.
fn positive(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) if *i > 0 => Some(*i as u64),
        Value::UInt(u) => Some(*u),
        _ => None,
    }
}

fn auto_inc_value(t: &TableState, row: &Row) -> Option<u64> {
    match row.get(t.schema.auto_increment_column()?)? {
        Value::Int(i) => u64::try_from(*i).ok().filter(|&i| i > 0),
        Value::UInt(u) => Some(*u),
        _ => None,
    }
}
