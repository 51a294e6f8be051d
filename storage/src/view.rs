//! Consistent reads of every table: [`SnapshotReads`] inside the commit
//! (a write's check) and [`ReadView`], a point-in-time view.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use ladle_common::{Lsn, Row, TableId, TableSchema, Value};

use crate::engine::{self, KvSnapshot};
use crate::error::{no_table_id, Result, StorageError};
use crate::ops::IndexRef;
use crate::read;
use crate::table::TableState;

/// Reads of one consistent state of every table, valid inside
/// [`Storage::with_snapshot`](crate::Storage::with_snapshot) (on the calling thread, no copying).
pub struct SnapshotReads<'a> {
    pub(crate) lsn: Lsn,
    pub(crate) tables: Arc<HashMap<TableId, Arc<TableState>>>,
    pub(crate) reader: &'a dyn engine::KvRead,
}

impl SnapshotReads<'_> {
    /// The LSN of the last batch this state reflects.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// Rows whose `index` columns start with `key` (as [`Storage::lookup`](crate::Storage::lookup)).
    pub fn lookup(&self, table: TableId, index: IndexRef, key: &[Value]) -> Result<Vec<Row>> {
        let t = self.table(table)?;
        strip_keys(read::lookup(self.reader, &t, index, key)?)
    }

    /// [`SnapshotReads::lookup`] for each of `keys`, from one index scan,
    /// decoding only the columns `keep` marks where given.
    pub fn lookup_many(
        &self,
        table: TableId,
        index: IndexRef,
        keys: &[Vec<Value>],
        keep: Option<&[bool]>,
    ) -> Result<Vec<Vec<Row>>> {
        let t = self.table(table)?;
        read::lookup_many(self.reader, &t, index, keys, keep)?
            .into_iter()
            .map(strip_keys)
            .collect()
    }

    /// Every row, in primary-key order.
    pub fn scan(&self, table: TableId) -> Result<Vec<Row>> {
        self.scan_columns(table, None)
    }

    /// [`SnapshotReads::scan`] decoding only the columns `keep` marks.
    pub fn scan_columns(&self, table: TableId, keep: Option<&[bool]>) -> Result<Vec<Row>> {
        let t = self.table(table)?;
        read::scan_rows(self.reader, &t, keep)
    }

    /// [`SnapshotReads::scan_columns`] handing each row to `each` as it is
    /// decoded, until it returns false.
    pub fn scan_each(
        &self,
        table: TableId,
        keep: Option<&[bool]>,
        each: crate::RowSink<'_>,
    ) -> Result<()> {
        let t = self.table(table)?;
        read::scan_rows_each(self.reader, &t, keep, each)
    }

    fn table(&self, id: TableId) -> Result<Arc<TableState>> {
        self.tables.get(&id).cloned().ok_or_else(|| no_table_id(id))
    }
}

pub(crate) fn strip_keys(rows: Vec<read::KeyedRow>) -> Result<Vec<Row>> {
    Ok(rows.into_iter().map(|(_, row)| row).collect())
}

/// A consistent point-in-time view of every table (a RocksDB snapshot, or a
/// copy-on-write copy of the in-memory engine).
pub struct ReadView {
    pub(crate) lsn: Lsn,
    pub(crate) tables: Arc<HashMap<TableId, Arc<TableState>>>,
    pub(crate) snapshot: Box<dyn KvSnapshot>,
}

impl ReadView {
    /// The LSN of the last batch this view reflects.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    pub fn lookup(&self, table: TableId, index: IndexRef, key: &[Value]) -> Result<Vec<Row>> {
        let t = self.table(table)?;
        let key = key.to_vec();
        self.run(move |r| strip_keys(read::lookup(r, &t, index, &key)?))
    }

    pub fn scan(&self, table: TableId) -> Result<Vec<Row>> {
        self.scan_columns(table, None)
    }

    /// [`ReadView::scan`] decoding only the columns `keep` marks (the
    /// others are NULL).
    pub fn scan_columns(&self, table: TableId, keep: Option<&[bool]>) -> Result<Vec<Row>> {
        let t = self.table(table)?;
        let keep = keep.map(<[bool]>::to_vec);
        self.run(move |r| read::scan_rows(r, &t, keep.as_deref()))
    }

    /// The schema `table` had when the view was taken (`None`: it did not
    /// exist then).
    pub fn schema(&self, table: TableId) -> Option<Arc<TableSchema>> {
        self.tables.get(&table).map(|t| t.schema.clone())
    }

    /// Rows whose `index` key lies between the bounds, in index order.
    pub fn range(
        &self,
        table: TableId,
        index: IndexRef,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
    ) -> Result<Vec<Row>> {
        let t = self.table(table)?;
        let lower = owned_bound(lower);
        let upper = owned_bound(upper);
        self.run(move |r| {
            strip_keys(read::range(
                r,
                &t,
                index,
                as_ref_bound(&lower),
                as_ref_bound(&upper),
            )?)
        })
    }

    fn table(&self, id: TableId) -> Result<Arc<TableState>> {
        self.tables.get(&id).cloned().ok_or_else(|| no_table_id(id))
    }

    fn run(
        &self,
        job: impl FnOnce(&dyn engine::KvRead) -> Result<Vec<Row>> + Send + 'static,
    ) -> Result<Vec<Row>> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.snapshot.run(Box::new(move |r| {
            let _ = tx.send(job(r));
        }));
        rx.recv()
            .map_err(|_| StorageError::Internal("snapshot reader is gone".into()))?
    }
}

fn owned_bound(b: Bound<&[Value]>) -> Bound<Vec<Value>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref_bound(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}
