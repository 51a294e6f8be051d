//! [`Storage`]: the base tables' API (open, schema, writes, reads, log).
//! The DDL half of the impl is in `catalog.rs`, reading and truncating
//! the change log in `change_log.rs`; the commit queue in `commit.rs`.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ladle_common::{
    ColumnSchema, IndexSchema, Lsn, Row, RowDelta, TableDeltas, TableId, TableSchema, Value,
};
use parking_lot::{Mutex, RwLock};

use crate::catalog::{self, Catalog};
use crate::commit::{CommitQueue, Pending};
use crate::config::{Durability, StorageConfig};
use crate::engine::{self, KvEngine, KvSnapshot};
use crate::error::{no_table_id, Result, StorageError};
use crate::hooks::{CommitCheck, CommitObserver, WriteGate};
use crate::ops::{IndexRef, OpResult, WriteOp, WriteResult};
use crate::table::TableState;
use crate::view::{strip_keys, ReadView, SnapshotReads};
use crate::write_hold::{WriteHold, WriteHolds};
use crate::{cf, keys, memory, read, rocks, write, RowSink};

/// The storage engine: one per server.
pub struct Storage {
    pub(crate) engine: Arc<dyn KvEngine>,
    durability: Durability,
    pub(crate) catalog: RwLock<Catalog>,
    /// Held while a group commits (and by DDL and [`Storage::exclusive`]).
    pub(crate) commit: Mutex<()>,
    queue: CommitQueue,
    observer: RwLock<Option<Arc<dyn CommitObserver>>>,
    pub(crate) last_lsn: AtomicU64,
    /// Hidden row ids of tables without a primary key: this open's epoch...
    epoch: u64,
    /// ...and the next sequence number within it.
    row_seq: AtomicU64,
    /// The `Durability::Async` WAL sync thread: dropping the sender stops it.
    flusher: Mutex<Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>>,
    /// Layout of secondary entries for tables created from now on.
    pub(crate) secondary_full_row: AtomicBool,
    /// The free-space check before writes (durable engines only).
    disk_guard: std::sync::OnceLock<DiskGuard>,
    /// Cluster hooks (see [`WriteGate`]); none on a single node.
    gate: RwLock<Option<Arc<dyn WriteGate>>>,
    /// Writes hold it shared; [`Storage::fenced`] holds it exclusively so
    /// a schema change and what it records happen between two LSNs.
    fence: RwLock<()>,
    /// Change-log entries above this LSN are kept by `truncate_log` (a
    /// replica still needs them). `u64::MAX`: no such floor.
    pub(crate) log_floor: AtomicU64,
    /// The newest change-log entries in memory (a cluster node's; see
    /// [`Storage::keep_recent_log`]).
    pub(crate) recent_log: crate::recent_log::RecentLog,
    /// Tables whose writes wait briefly (see [`Storage::hold_writes`]).
    pub(crate) write_holds: WriteHolds,
}

thread_local! {
    /// Set while this thread runs inside [`Storage::fenced`]: its own
    /// writes do not wait for the fence they hold.
    static IN_FENCE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set inside [`Storage::fenced_with_record`]: the meta record every
    /// catalog write of this thread carries.
    static ATTACHED: std::cell::RefCell<Option<AttachedRecord>> =
        const { std::cell::RefCell::new(None) };
}

/// A meta record written in the same batch as a schema change.
struct AttachedRecord {
    key: Vec<u8>,
    value: Vec<u8>,
    /// Some catalog batch carried it.
    carried: bool,
}

/// Adds this thread's attached record (if any) to `batch`, a catalog
/// change about to be written.
pub(crate) fn attach_record(batch: &mut engine::Batch) {
    ATTACHED.with(|a| {
        if let Some(r) = a.borrow_mut().as_mut() {
            batch.put(cf::CATALOG, r.key.clone(), r.value.clone());
            r.carried = true;
        }
    });
}

/// Where the free space writes need is checked, and how much to keep.
struct DiskGuard {
    path: PathBuf,
    reserve: u64,
}

impl Drop for Storage {
    fn drop(&mut self) {
        // Stop and join the WAL sync thread so that the engine (and the
        // RocksDB lock) is released when the storage is.
        if let Some((stop, handle)) = self.flusher.lock().take() {
            drop(stop);
            let _ = handle.join();
        }
    }
}

impl Storage {
    /// A storage over an opened `engine` and its loaded `catalog`, with no
    /// observer, gate or flusher yet.
    pub(crate) fn new(
        engine: Arc<dyn KvEngine>,
        durability: Durability,
        catalog: Catalog,
        last_lsn: Lsn,
        epoch: u64,
    ) -> Storage {
        Storage {
            engine,
            durability,
            catalog: RwLock::new(catalog),
            commit: Mutex::new(()),
            queue: CommitQueue::default(),
            observer: RwLock::new(None),
            last_lsn: AtomicU64::new(last_lsn),
            epoch,
            row_seq: AtomicU64::new(0),
            flusher: Mutex::new(None),
            disk_guard: Default::default(),
            gate: RwLock::new(None),
            fence: RwLock::new(()),
            log_floor: AtomicU64::new(u64::MAX),
            recent_log: Default::default(),
            write_holds: Default::default(),
            secondary_full_row: AtomicBool::new(
                catalog::SECONDARY_FULL_ROW.load(Ordering::Relaxed),
            ),
        }
    }

    /// Opens (creating if missing) `<data_dir>/db`, or an in-memory engine
    /// for `Durability::Memory`. Bumps the hidden-row-id epoch, finishes or
    /// redoes interrupted index builds.
    pub fn open(config: StorageConfig) -> Result<Arc<Storage>> {
        let engine: Arc<dyn KvEngine> = match config.durability {
            Durability::Memory => Arc::new(memory::MemoryEngine::new()),
            Durability::Sync | Durability::Async => {
                let opts = rocks::RocksOptions {
                    block_cache_bytes: config.block_cache_bytes,
                    wal_dir: config.wal_dir.as_deref(),
                    background_jobs: 4,
                    wal_recovery: config.wal_recovery,
                };
                Arc::new(rocks::RocksEngine::open(
                    &config.data_dir.join("db"),
                    &opts,
                )?)
            }
        };
        let storage = Storage::open_engine(engine, config.durability)?;
        if config.durability != Durability::Memory && config.disk_reserve > 0 {
            let _ = storage.disk_guard.set(DiskGuard {
                path: config.data_dir.clone(),
                reserve: config.disk_reserve,
            });
        }
        if config.durability == Durability::Async {
            storage.start_flusher(config.async_flush_interval)?;
        }
        Ok(storage)
    }

    /// An empty in-memory engine (tests).
    pub fn in_memory() -> Arc<Storage> {
        match Storage::open_engine(Arc::new(memory::MemoryEngine::new()), Durability::Memory) {
            Ok(s) => s,
            // Opening an empty in-memory engine touches no I/O; failing here
            // is a bug in this crate.
            Err(e) => panic!("opening an empty in-memory engine failed: {e}"),
        }
    }

    fn start_flusher(self: &Arc<Self>, interval: Duration) -> Result<()> {
        let engine = Arc::clone(&self.engine);
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("ladle-wal-sync".into())
            .spawn(move || {
                // Runs until the storage drops the sender (then joins us).
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stop_rx.recv_timeout(interval)
                {
                    if let Err(e) = engine.sync_wal() {
                        tracing::error!("background WAL sync failed: {e}");
                    }
                }
                if let Err(e) = engine.sync_wal() {
                    tracing::error!("final WAL sync failed: {e}");
                }
            })
            .map_err(|e| StorageError::Io(format!("spawning the WAL sync thread: {e}")))?;
        *self.flusher.lock() = Some((stop_tx, handle));
        Ok(())
    }

    // ---- catalog ----

    pub fn create_database(&self, name: &str, if_not_exists: bool) -> Result<()> {
        self.ddl_create_database(name, if_not_exists)
    }
    /// Drops the database and its tables; returns the dropped tables.
    pub fn drop_database(&self, name: &str, if_exists: bool) -> Result<Vec<Arc<TableSchema>>> {
        self.ddl_drop_database(name, if_exists)
    }
    pub fn databases(&self) -> Vec<String> {
        self.catalog.read().databases.iter().cloned().collect()
    }
    /// Creates a table. Storage assigns `schema.id` and every index id; the
    /// returned schema carries them. `if_not_exists` returns the existing one.
    pub fn create_table(
        &self,
        schema: TableSchema,
        if_not_exists: bool,
    ) -> Result<Arc<TableSchema>> {
        self.ddl_create_table(schema, if_not_exists)
    }
    /// Creates a table only this node has, for as long as this open lasts
    /// or until it is dropped ([`Storage::drop_table`]): a statement's
    /// scratch table (a recursive CTE's). Its ids come from a range of
    /// their own, so the ids later CREATE TABLEs get are the same on every
    /// node of a cluster (each replays the same schema changes), and
    /// nothing of it is written to the catalog: a crash leaves at most its
    /// empty column family, which the next open drops. Writes to it are
    /// not replicated; it is meant to stay empty.
    pub fn create_local_table(&self, schema: TableSchema) -> Result<Arc<TableSchema>> {
        self.ddl_create_local_table(schema)
    }
    pub fn drop_table(&self, database: &str, table: &str) -> Result<Arc<TableSchema>> {
        self.ddl_drop_table(database, table)
    }
    pub fn table(&self, database: &str, table: &str) -> Option<Arc<TableSchema>> {
        let c = self.catalog.read();
        let id = c.names.get(&(database.to_string(), table.to_string()))?;
        c.tables.get(id).map(|t| Arc::clone(&t.schema))
    }
    pub fn table_by_id(&self, id: TableId) -> Option<Arc<TableSchema>> {
        self.catalog
            .read()
            .tables
            .get(&id)
            .map(|t| Arc::clone(&t.schema))
    }
    /// The tables of `database`, by name.
    pub fn tables(&self, database: &str) -> Vec<Arc<TableSchema>> {
        let c = self.catalog.read();
        c.names
            .range((database.to_string(), String::new())..)
            .take_while(|((db, _), _)| db == database)
            .filter_map(|(_, id)| c.tables.get(id).map(|t| Arc::clone(&t.schema)))
            .collect()
    }
    /// Builds a new index over existing rows (bounded batches), then records
    /// it. `index.id` is assigned by storage. Writes wait while it builds.
    pub fn create_index(
        &self,
        database: &str,
        table: &str,
        index: IndexSchema,
    ) -> Result<Arc<TableSchema>> {
        self.ddl_create_index(database, table, index)
    }
    pub fn drop_index(&self, database: &str, table: &str, index: &str) -> Result<Arc<TableSchema>> {
        self.ddl_drop_index(database, table, index)
    }
    /// ALTER TABLE ADD COLUMN (appended last): bumps the schema version; no
    /// rewrite. Older rows read the column's DEFAULT (fixed at this moment).
    pub fn add_column(
        &self,
        database: &str,
        table: &str,
        column: ColumnSchema,
    ) -> Result<Arc<TableSchema>> {
        self.ddl_add_column(database, table, column)
    }
    /// ALTER TABLE: gives the table `change.schema` in one batch with its
    /// rows (each old row, numbered from 1, through `convert` when
    /// `change.rewrite_rows`) and index entries, so a crash leaves the old
    /// table or the new one. Writes wait meanwhile; a long rewrite logs its
    /// progress. Fails, changing nothing, on a key the new rows share or an
    /// error of `convert`.
    pub fn alter_table<E: From<StorageError>>(
        &self,
        database: &str,
        table: &str,
        change: crate::ops::TableChange,
        convert: &mut dyn FnMut(usize, Row) -> std::result::Result<Row, E>,
    ) -> std::result::Result<Arc<TableSchema>, E> {
        self.ddl_alter_table(database, table, change, convert)
    }
    /// A new hidden row id (a row of a table without a primary key).
    pub(crate) fn next_row_id(&self) -> Vec<u8> {
        keys::row_id(self.epoch, self.row_seq.fetch_add(1, Ordering::Relaxed))
    }
    /// Small metadata records (view definitions, graph) in the catalog.
    pub fn put_meta(&self, key: &str, value: &[u8]) -> Result<()> {
        self.put_metas(&[(key, value)])
    }
    /// Several meta records in one batch, so a crash keeps all of them or
    /// none (a cluster's account list and its record for replicas).
    pub fn put_metas(&self, records: &[(&str, &[u8])]) -> Result<()> {
        let mut b = engine::Batch::default();
        for (key, value) in records {
            b.put(cf::CATALOG, cf::catalog_key::meta(key), *value);
        }
        attach_record(&mut b);
        self.engine.write(b, self.sync())
    }
    pub fn delete_meta(&self, key: &str) -> Result<()> {
        let mut b = engine::Batch::default();
        b.delete(cf::CATALOG, cf::catalog_key::meta(key));
        attach_record(&mut b);
        self.engine.write(b, self.sync())
    }
    /// Every meta record whose key starts with `prefix`, in key order.
    pub fn list_meta(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        let start = cf::catalog_key::meta(prefix);
        let end = keys::prefix_successor(&start);
        let skip = cf::catalog_key::META.len();
        let mut out = Vec::new();
        self.engine.with_consistent(&mut |r| {
            out.clear();
            r.scan(cf::CATALOG, &start, end.as_deref(), &mut |k, v| {
                out.push((String::from_utf8_lossy(&k[skip..]).into_owned(), v.to_vec()));
                Ok(true)
            })
        })?;
        Ok(out)
    }

    // ---- writes ----

    /// Applies `ops` atomically (all or none), group-committed with other
    /// connections' writes, and returns once durable per the configured
    /// durability. Validation (types, NOT NULL, keys) happens here.
    pub fn write(&self, ops: Vec<WriteOp>) -> Result<WriteResult> {
        self.write_checked(ops, None)
    }

    /// [`Storage::write`], with `check` run on the state the write would
    /// commit (see [`CommitCheck`]): constraints between rows that another
    /// connection's commit may break after the caller last read them
    /// (FOREIGN KEYs) are verified where no commit can interleave.
    pub fn write_checked(
        &self,
        ops: Vec<WriteOp>,
        check: Option<CommitCheck>,
    ) -> Result<WriteResult> {
        let gate = self.gate.read().clone();
        if let Some(g) = &gate {
            g.admit()?;
        }
        let result = {
            // Until the batch is committed (not acknowledged): a hold waits
            // for exactly the writes that could still move its tables.
            let _writing = self.write_holds.enter(&ops);
            let _fence = (!IN_FENCE.with(|f| f.get())).then(|| self.fence.read());
            self.write_queued(ops, check)?
        };
        if let Some(g) = &gate {
            g.acknowledge(result.lsn)?;
        }
        Ok(result)
    }

    /// Makes writes to `tables` wait until the returned hold is dropped
    /// (each write at most a couple of seconds; DDL is not held), once the
    /// writes to them in progress have finished. For a reader fill that
    /// lost its race to a write once and must run again: holding the
    /// view's writers for the length of one fill costs a few writes a
    /// delay, where recomputing it under the graph lock stalled every
    /// reader miss and view update meanwhile. The holder must still
    /// validate what it read: a write that cascades into a held table is
    /// not held, nor one that outwaited its bound.
    pub fn hold_writes(&self, tables: &[TableId]) -> WriteHold<'_> {
        self.write_holds.hold(tables)
    }

    /// Installs the cluster's write gate (see [`WriteGate`]).
    pub fn set_write_gate(&self, gate: Arc<dyn WriteGate>) {
        *self.gate.write() = Some(gate);
    }

    /// Waits for the writes in progress to be acknowledged (a no-op inside
    /// [`Storage::fenced`], where none is).
    pub fn await_writes_in_flight(&self) {
        if !IN_FENCE.with(|f| f.get()) {
            drop(self.fence.write());
        }
    }

    /// Runs `f` while no write is in progress or starts (writes made by `f`
    /// itself go through): a schema change run inside, and whatever `f`
    /// records about it, sit between two LSNs.
    pub fn fenced<R>(&self, f: impl FnOnce() -> R) -> R {
        let _fence = self.fence.write();
        IN_FENCE.with(|x| x.set(true));
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                IN_FENCE.with(|x| x.set(false));
            }
        }
        let _reset = Reset;
        f()
    }

    /// [`Storage::fenced`], and every catalog change `f` writes (tables,
    /// indexes, databases, meta records) carries the meta record `key` =
    /// `value` in its own batch: the record is durable exactly when the
    /// schema change is (a cluster's record of a DDL statement for its
    /// replicas). Inside, [`Storage::record_carried`] says whether a
    /// catalog write has carried it, and [`Storage::withdraw_record`]
    /// takes it back (the change failed).
    pub fn fenced_with_record<R>(&self, key: &str, value: &[u8], f: impl FnOnce() -> R) -> R {
        self.fenced(|| {
            ATTACHED.with(|a| {
                *a.borrow_mut() = Some(AttachedRecord {
                    key: cf::catalog_key::meta(key),
                    value: value.to_vec(),
                    carried: false,
                })
            });
            struct Detach;
            impl Drop for Detach {
                fn drop(&mut self) {
                    ATTACHED.with(|a| *a.borrow_mut() = None);
                }
            }
            let _detach = Detach;
            f()
        })
    }

    /// Inside [`Storage::fenced_with_record`]: whether a catalog write
    /// has carried the record.
    pub fn record_carried(&self) -> bool {
        ATTACHED.with(|a| a.borrow().as_ref().is_some_and(|r| r.carried))
    }

    /// Inside [`Storage::fenced_with_record`]: later writes no longer
    /// carry the record, and one already written is deleted.
    pub fn withdraw_record(&self) -> Result<()> {
        let Some(r) = ATTACHED.with(|a| a.borrow_mut().take()) else {
            return Ok(());
        };
        if !r.carried {
            return Ok(());
        }
        let mut b = engine::Batch::default();
        b.delete(cf::CATALOG, r.key);
        self.engine.write(b, self.sync())
    }

    /// Writes a consistent copy of the whole database (rows, catalog, meta
    /// records, change log) into the new directory `dir`, with no write or
    /// schema change in progress, and returns the LSN it holds: what a new
    /// replica starts from (`<data_dir>/db` of a node opened over it).
    pub fn checkpoint(&self, dir: &std::path::Path) -> Result<Lsn> {
        self.fenced(|| {
            let _commit = self.commit.lock();
            let lsn = self.last_lsn();
            self.engine.checkpoint(dir)?;
            Ok(lsn)
        })
    }

    fn write_queued(&self, ops: Vec<WriteOp>, check: Option<CommitCheck>) -> Result<WriteResult> {
        self.check_disk()?;
        self.queue.submit(ops, check, |group| {
            let _commit = self.commit.lock();
            self.commit_group(group);
        })
    }

    /// Refuses a write while the data directory's file system has less
    /// free space than the configured reserve.
    pub fn check_disk(&self) -> Result<()> {
        let Some(guard) = self.disk_guard.get() else {
            return Ok(());
        };
        // An unreadable figure does not stop writes (RocksDB reports a
        // real failure itself).
        let Ok(st) = rustix::fs::statvfs(&guard.path) else {
            return Ok(());
        };
        let available = st.f_bavail.saturating_mul(st.f_frsize);
        if available < guard.reserve {
            return Err(StorageError::DiskFull {
                path: guard.path.display().to_string(),
                available,
                reserve: guard.reserve,
            });
        }
        Ok(())
    }

    /// Registers the observer told of every commit (the dataflow).
    pub fn set_commit_observer(&self, observer: Arc<dyn CommitObserver>) {
        *self.observer.write() = Some(observer);
    }

    /// Runs `f` while no commit is in progress, so storage reads inside `f`
    /// see exactly the batches every observer has been told of. `f` may read
    /// storage but must not write or run DDL (they wait for this lock).
    pub fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = self.commit.lock();
        self.settle_observer();
        f()
    }

    /// Tells the observer to finish the batches it was told of; called with
    /// the commit lock held (see [`CommitObserver::settle`]).
    pub(crate) fn settle_observer(&self) {
        let observer = self.observer.read().clone();
        if let Some(o) = observer {
            o.settle();
        }
    }

    /// Runs `f` over one consistent state of every table (a RocksDB
    /// snapshot, or the in-memory engine under its read lock: writers wait
    /// meanwhile there), without the commit lock: commits go on, unseen by
    /// `f`. For an observer processing batches after they commit: it
    /// processes the batches up to [`SnapshotReads::lsn`] against exactly
    /// that state.
    pub fn with_snapshot<R>(&self, f: impl FnOnce(&SnapshotReads<'_>) -> R) -> Result<R> {
        let tables = self.catalog.read().tables.clone();
        let mut f = Some(f);
        let mut out = None;
        self.engine.with_consistent(&mut |reader| {
            let lsn = reader
                .get(cf::CATALOG, cf::catalog_key::LSN)?
                .as_deref()
                .and_then(keys::decode_lsn)
                .unwrap_or(0);
            let reads = SnapshotReads {
                lsn,
                tables: tables.clone(),
                reader,
            };
            if let Some(f) = f.take() {
                out = Some(f(&reads));
            }
            Ok(())
        })?;
        out.ok_or_else(|| StorageError::Internal("snapshot closure did not run".into()))
    }

    // ---- reads of the latest committed state ----

    /// Rows whose `index` columns start with `key` (point or prefix lookup).
    /// Key values are coerced to the column types; a key that cannot be
    /// coerced matches nothing.
    pub fn lookup(&self, table: TableId, index: IndexRef, key: &[Value]) -> Result<Vec<Row>> {
        let t = self.table_state(table)?;
        if let Some(rows) = read::point_read(&*self.engine, &t, index, key, None)? {
            return Ok(rows);
        }
        self.read_latest(|r| read::lookup(r, &t, index, key))
    }

    /// [`Storage::lookup`] for each of `keys`, read from one consistent
    /// state with one index scan: a fill asks for many keys at once. With
    /// `keep`, only the columns it marks are decoded (the others are NULL).
    pub fn lookup_many(
        &self,
        table: TableId,
        index: IndexRef,
        keys: &[Vec<Value>],
        keep: Option<&[bool]>,
    ) -> Result<Vec<Vec<Row>>> {
        let t = self.table_state(table)?;
        if let [key] = keys {
            if let Some(rows) = read::point_read(&*self.engine, &t, index, key, keep)? {
                return Ok(vec![rows]);
            }
        }
        let mut out = Vec::new();
        self.engine.with_consistent(&mut |r| {
            out = read::lookup_many(r, &t, index, keys, keep)?;
            Ok(())
        })?;
        out.into_iter().map(strip_keys).collect()
    }
    /// Rows whose `index` key lies between the bounds (ordered scan).
    pub fn range(
        &self,
        table: TableId,
        index: IndexRef,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
    ) -> Result<Vec<Row>> {
        let t = self.table_state(table)?;
        self.read_latest(|r| read::range(r, &t, index, lower, upper))
    }
    /// Every row, in primary-key order.
    pub fn scan(&self, table: TableId) -> Result<Vec<Row>> {
        self.scan_columns(table, None)
    }
    /// [`Storage::scan`] decoding only the columns `keep` marks (the
    /// others are NULL), as a fill that needs few columns asks.
    pub fn scan_columns(&self, table: TableId, keep: Option<&[bool]>) -> Result<Vec<Row>> {
        let t = self.table_state(table)?;
        let mut out = Vec::new();
        self.engine.with_consistent(&mut |r| {
            out = read::scan_rows(r, &t, keep)?;
            Ok(())
        })?;
        Ok(out)
    }
    /// [`Storage::scan_columns`] handing each row to `each` as it is
    /// decoded, until it returns false (a fill folding rows holds none).
    pub fn scan_each(&self, table: TableId, keep: Option<&[bool]>, each: RowSink) -> Result<()> {
        let t = self.table_state(table)?;
        (self.engine).with_consistent(&mut |r| read::scan_rows_each(r, &t, keep, each))
    }
    pub fn estimate_rows(&self, table: TableId) -> u64 {
        match self.table_state(table) {
            Ok(t) => t.counters.rows.load(Ordering::Relaxed).max(0) as u64,
            Err(_) => 0,
        }
    }
    /// Reserves `n` consecutive AUTO_INCREMENT values for `table` and
    /// returns the first, for a transaction that must report generated keys
    /// before it commits (the shim buffers transactional writes). The
    /// reservation is in memory: rows later written with these explicit
    /// values advance the durable counter; unused values leave a gap, as in
    /// MySQL.
    pub fn reserve_auto_increment(&self, table: TableId, n: u64) -> Result<u64> {
        let t = self.table_state(table)?;
        let mut next = t.counters.auto_inc.lock();
        let first = (*next).max(1);
        *next = first.saturating_add(n);
        Ok(first)
    }
    /// Moves `table`'s in-memory AUTO_INCREMENT counter past a batch of
    /// `size` values starting at the larger of it and `at_least`, and
    /// returns the batch's first value: [`crate::IdAllocator::take`]'s
    /// `reserve` for a transaction's INSERT (see
    /// [`Self::reserve_auto_increment`]).
    pub fn reserve_auto_increment_batch(
        &self,
        table: TableId,
        at_least: u64,
        size: u64,
    ) -> Result<u64> {
        let t = self.table_state(table)?;
        let mut counter = t.counters.auto_inc.lock();
        Ok(crate::auto_inc::reserve_batch(&mut counter, at_least, size))
    }
    /// Advances `table`'s in-memory AUTO_INCREMENT counter past `used`, an
    /// explicit value a transaction's INSERT gave, so later generated
    /// values do not collide with it (MySQL moves the counter when the
    /// statement runs, not at COMMIT).
    pub fn note_auto_increment(&self, table: TableId, used: u64) -> Result<()> {
        let t = self.table_state(table)?;
        let mut next = t.counters.auto_inc.lock();
        if used >= *next {
            *next = used.saturating_add(1);
        }
        Ok(())
    }
    pub fn read_view(&self) -> ReadView {
        let tables = self.catalog.read().tables.clone();
        match self.try_read_view(tables.clone()) {
            Ok(v) => v,
            Err(e) => {
                // Taking a snapshot only fails if a thread cannot be spawned;
                // fall back to a view that reports the error on every read.
                tracing::error!("taking a read view failed: {e}");
                ReadView {
                    lsn: self.last_lsn(),
                    tables,
                    snapshot: Box::new(FailedSnapshot),
                }
            }
        }
    }
    /// Makes every batch committed so far durable (syncs the WAL), whatever
    /// the durability mode. A snapshot of view state calls it before it is
    /// published, so it never reflects writes a crash could still lose.
    pub fn sync_wal(&self) -> Result<()> {
        self.engine.sync_wal()
    }
    /// Writes buffered table data (RocksDB memtables) to table files, so
    /// the next open has no write-ahead log to replay. For clean shutdown;
    /// durability never depends on it.
    pub fn flush(&self) -> Result<()> {
        self.engine.flush()
    }
    /// The LSN of the newest committed batch.
    pub fn last_lsn(&self) -> Lsn {
        self.last_lsn.load(Ordering::Acquire)
    }

    // ---- change log ----

    /// Applies a batch another node committed (a replica following its
    /// primary): the same row changes, logged at the same LSN, which must be
    /// the next one here. Bypasses the write gate; the observer (the
    /// dataflow) is told as for a local commit, so views stay current.
    /// `sync` false leaves the write-ahead log unsynced (the next synced
    /// write, or [`Storage::sync_wal`], makes it durable). A run of entries
    /// is better applied with [`Storage::apply_replicated_run`].
    pub fn apply_replicated(&self, lsn: Lsn, changes: Vec<TableDeltas>, sync: bool) -> Result<()> {
        self.apply_replicated_run(vec![(lsn, changes)], sync)
    }

    /// Applies a run of batches another node committed, the first at the
    /// next LSN here and each at the LSN after the one before, as ONE
    /// engine batch: every entry's rows, index entries and AUTO_INCREMENT
    /// counters and every entry logged at its own LSN, written with at most
    /// one WAL sync (`sync`). So a crash keeps the whole run or none of it
    /// (the last LSN is in the same batch), and an entry that cannot be
    /// applied fails the run with nothing written. The observer is told
    /// every entry, in order, once the run is written
    /// ([`CommitObserver::on_commit_run`]): storage never holds a state
    /// between two entries of the run.
    pub fn apply_replicated_run(
        &self,
        entries: Vec<(Lsn, Vec<TableDeltas>)>,
        sync: bool,
    ) -> Result<()> {
        let _commit = self.commit.lock();
        let last = self.last_lsn();
        let mut expected = last;
        for (lsn, changes) in &entries {
            expected = expected.saturating_add(1);
            if *lsn != expected || changes.is_empty() {
                return Err(StorageError::Internal(format!(
                    "replicated entry {lsn} does not follow {}",
                    expected - 1
                )));
            }
        }
        if entries.is_empty() {
            return Ok(());
        }
        let tables = self.catalog.read().tables.clone();
        let mut batch = engine::Batch::default();
        let mut auto_inc = HashMap::new();
        self.engine.with_consistent(&mut |base| {
            let mut g = self.group(base, &tables);
            for (_, changes) in &entries {
                g.apply_deltas(changes)?;
            }
            auto_inc = std::mem::take(&mut g.auto_inc);
            batch = engine::Batch::default();
            std::mem::take(&mut g.overlay).into_batch(&mut batch);
            Ok(())
        })?;
        self.persist_entries(batch, &auto_inc, entries, &tables, sync && self.sync())
    }
}

/// Makes tables created from now on store the whole row in their secondary
/// index entries (instead of only the primary key), trading write volume for
/// one point read less per secondary lookup. For benchmarks.
#[doc(hidden)]
pub fn set_secondary_full_row_for_new_tables(on: bool) {
    catalog::SECONDARY_FULL_ROW.store(on, Ordering::Relaxed);
}

struct FailedSnapshot;

impl KvSnapshot for FailedSnapshot {
    fn run(&self, _job: engine::SnapshotJob) {
        // Dropping the job drops its reply channel: the reader gets an error.
    }
}

impl Storage {
    pub(crate) fn sync(&self) -> bool {
        self.durability == Durability::Sync
    }

    pub(crate) fn table_state(&self, id: TableId) -> Result<Arc<TableState>> {
        self.catalog
            .read()
            .tables
            .get(&id)
            .cloned()
            .ok_or_else(|| no_table_id(id))
    }

    pub(crate) fn read_latest(
        &self,
        mut f: impl FnMut(&dyn engine::KvRead) -> Result<Vec<read::KeyedRow>>,
    ) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        self.engine.with_consistent(&mut |r| {
            out = f(r)?;
            Ok(())
        })?;
        strip_keys(out)
    }

    fn try_read_view(&self, tables: Arc<HashMap<TableId, Arc<TableState>>>) -> Result<ReadView> {
        let snapshot = self.engine.snapshot()?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        snapshot.run(Box::new(move |r| {
            let _ = tx.send(r.get(cf::CATALOG, cf::catalog_key::LSN));
        }));
        let lsn = rx
            .recv()
            .map_err(|_| StorageError::Internal("snapshot reader is gone".into()))??;
        let lsn = lsn.as_deref().and_then(keys::decode_lsn).unwrap_or(0);
        Ok(ReadView {
            lsn,
            tables,
            snapshot,
        })
    }

    /// An empty commit group over `base` (the engine state) and `tables`.
    fn group<'a>(
        &'a self,
        base: &'a dyn engine::KvRead,
        tables: &'a HashMap<TableId, Arc<TableState>>,
    ) -> write::Group<'a> {
        write::Group {
            base,
            tables,
            overlay: write::Overlay::default(),
            deltas: Vec::new(),
            auto_inc: HashMap::new(),
            epoch: self.epoch,
            row_seq: &self.row_seq,
        }
    }

    /// Writes a group's batch with its AUTO_INCREMENT counters and, when it
    /// changed rows, a change-log entry at the next LSN (syncing the WAL when
    /// `sync`); then tells the observer. Returns the LSN the batch is part
    /// of. Called with the commit lock held.
    fn persist_batch(
        &self,
        batch: engine::Batch,
        auto_inc: &HashMap<TableId, u64>,
        changes: Vec<TableDeltas>,
        tables: &HashMap<TableId, Arc<TableState>>,
        sync: bool,
    ) -> Result<Lsn> {
        let entries = if changes.is_empty() {
            Vec::new()
        } else {
            vec![(self.last_lsn() + 1, changes)]
        };
        self.persist_entries(batch, auto_inc, entries, tables, sync)?;
        Ok(self.last_lsn())
    }

    /// Writes `batch`, the AUTO_INCREMENT counters and `entries` (each
    /// logged at its LSN, consecutive after the last one here) as one
    /// engine write, then moves the last LSN and tells the observer. Called
    /// with the commit lock held.
    fn persist_entries(
        &self,
        mut batch: engine::Batch,
        auto_inc: &HashMap<TableId, u64>,
        entries: Vec<(Lsn, Vec<TableDeltas>)>,
        tables: &HashMap<TableId, Arc<TableState>>,
        sync: bool,
    ) -> Result<()> {
        for (table, next) in auto_inc {
            batch.put(
                cf::CATALOG,
                cf::catalog_key::auto_inc(*table),
                next.to_be_bytes(),
            );
        }
        let mut recent = Vec::new();
        for (lsn, changes) in &entries {
            let bytes = postcard::to_stdvec(changes)
                .map_err(|e| StorageError::Internal(format!("encoding the change log: {e}")))?;
            if self.recent_log.enabled() {
                recent.push((*lsn, std::sync::Arc::from(bytes.as_slice())));
            }
            batch.put(cf::CHANGE_LOG, keys::lsn_key(*lsn), bytes);
        }
        let newest = entries.last().map(|(lsn, _)| *lsn);
        if let Some(lsn) = newest {
            batch.put(cf::CATALOG, cf::catalog_key::LSN, keys::lsn_key(lsn));
        }
        if !batch.is_empty() {
            self.engine.write(batch, sync)?;
        }
        if !recent.is_empty() {
            self.recent_log.push(recent);
        }
        let Some(lsn) = newest else {
            return Ok(());
        };
        for td in entries.iter().flat_map(|(_, changes)| changes) {
            if let Some(t) = tables.get(&td.table) {
                let delta: i64 = td.deltas.iter().map(|d| d.sign()).sum();
                t.counters.rows.fetch_add(delta, Ordering::Relaxed);
            }
        }
        let observer = self.observer.read().clone();
        if let Some(o) = observer {
            match <[_; 1]>::try_from(entries) {
                Ok([(lsn, changes)]) => o.on_commit(lsn, changes),
                Err(entries) => o.on_commit_run(entries),
            }
        }
        // Only now: a reader that finds the position here (a replica's
        // read after its session's forwarded write) then waits for views
        // the observer has been told of, never for ones it has not.
        self.last_lsn.store(lsn, Ordering::Release);
        Ok(())
    }

    /// Leader side of group commit: applies every caller's ops, writes one
    /// batch, tells the observer, fills every caller's slot. Called with the
    /// commit lock held.
    fn commit_group(&self, group: Vec<Pending>) {
        let tables = self.catalog.read().tables.clone();
        let mut outcomes: Vec<Result<Vec<OpResult>>> = Vec::with_capacity(group.len());
        let mut batch = engine::Batch::default();
        let mut changes = Vec::new();
        let mut calls: Vec<(Vec<WriteOp>, Option<CommitCheck>)> = Vec::with_capacity(group.len());
        let mut slots = Vec::with_capacity(group.len());
        for p in group {
            calls.push((p.ops, p.check));
            slots.push(p.slot);
        }
        let check_lsn = self.last_lsn();
        let mut calls = Some(calls);
        let mut auto_inc = HashMap::new();
        let applied = self.engine.with_consistent(&mut |base| {
            let mut g = self.group(base, &tables);
            for (ops, check) in calls.take().unwrap_or_default() {
                // A caller's closure (filter, updater) that panics fails
                // that caller alone, not the leader's thread or the group.
                let mark = g.deltas.len();
                let check = check.map(|check| {
                    let tables = tables.clone();
                    move |reader: &dyn engine::KvRead, deltas: &[(TableId, RowDelta)]| {
                        let reads = SnapshotReads {
                            lsn: check_lsn,
                            tables: tables.clone(),
                            reader,
                        };
                        check(&reads, deltas)
                    }
                });
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    g.apply_caller(ops, check.as_ref().map(|c| c as &write::CheckFn<'_>))
                }))
                .unwrap_or_else(|_| {
                    g.overlay.rollback();
                    g.deltas.truncate(mark);
                    Err(StorageError::Internal(
                        "a write operation's row function panicked".into(),
                    ))
                });
                outcomes.push(outcome);
            }
            changes = g.take_changes();
            auto_inc = std::mem::take(&mut g.auto_inc);
            g.overlay.into_batch(&mut batch);
            Ok(())
        });
        if let Err(e) = applied {
            for slot in slots {
                slot.fill(Err(e.clone()));
            }
            return;
        }
        let lsn = match self.persist_batch(batch, &auto_inc, changes, &tables, self.sync()) {
            Ok(lsn) => lsn,
            Err(e) => {
                for slot in slots {
                    slot.fill(Err(e.clone()));
                }
                return;
            }
        };
        for (slot, outcome) in slots.into_iter().zip(outcomes) {
            slot.fill(outcome.map(|ops| WriteResult { lsn, ops }));
        }
    }
}
