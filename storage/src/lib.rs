//! Ladle's base tables: durable rows in RocksDB, the catalog, the change log
//! and the group-committed write path.
//!
//! Entry point: [`Storage`]. Upper layers (dataflow, shim) see only this
//! API; only `src/rocks/` may import `rocksdb`.
//!
//! API CONTRACT (skeleton written first so dataflow and shim can code against
//! it; the storage implementer fills in the bodies and may add methods, but
//! must not change these signatures without updating every caller).

pub mod snapshot;

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ladle_common::{ColumnSchema, IndexSchema, Lsn, Row, TableDeltas, TableId, TableSchema, Value};

/// When a write is acknowledged relative to its fsync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync (WAL sync) before acknowledging. The default.
    Sync,
    /// Acknowledge after the write reaches RocksDB's WAL buffer; a background
    /// flush syncs every few milliseconds.
    Async,
    /// Nothing on disk: an in-memory engine. For tests and benchmarks.
    Memory,
}

#[derive(Clone, Debug)]
pub struct StorageConfig {
    /// RocksDB lives in `<data_dir>/db`.
    pub data_dir: PathBuf,
    pub durability: Durability,
    /// Shared block cache for every column family.
    pub block_cache_bytes: usize,
    /// Optional separate directory for RocksDB's write-ahead log.
    pub wal_dir: Option<PathBuf>,
    /// How often `Durability::Async` syncs the WAL.
    pub async_flush_interval: Duration,
}

/// Errors, by whose fault they are. The shim maps each to a MySQL error code.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    // --- the user's fault ---
    #[error("Duplicate entry '{value}' for key '{key}'")]
    DuplicateKey { key: String, value: String },
    #[error("Column '{column}' cannot be null")]
    NotNull { column: String },
    #[error("Field '{column}' doesn't have a default value")]
    NoDefault { column: String },
    #[error(transparent)]
    BadValue(#[from] ladle_common::CoerceError),
    #[error("Row size too large ({size} bytes, limit {limit})")]
    RowTooLarge { size: usize, limit: usize },
    #[error("Unknown database '{0}'")]
    NoSuchDatabase(String),
    #[error("Can't create database '{0}'; database exists")]
    DatabaseExists(String),
    #[error("Table '{database}.{table}' doesn't exist")]
    NoSuchTable { database: String, table: String },
    #[error("Table '{0}' already exists")]
    TableExists(String),
    #[error("Duplicate key name '{0}'")]
    IndexExists(String),
    #[error("Can't DROP '{0}'; check that column/key exists")]
    NoSuchIndex(String),
    #[error("Duplicate column name '{0}'")]
    ColumnExists(String),
    #[error("Column count doesn't match value count")]
    ColumnCount,
    /// An expression evaluated by the caller's row function failed.
    #[error("{0}")]
    Expression(String),
    // --- the environment ---
    #[error("storage I/O error: {0}")]
    Io(String),
    #[error("data directory format version {found} is not supported (expected {expected})")]
    FormatVersion { found: u32, expected: u32 },
    #[error("corruption: {0}")]
    Corruption(String),
    // --- our bug ---
    #[error("internal storage error: {0}")]
    Internal(String),
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Which index of a table a read uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexRef {
    /// The primary key (or the hidden row id of a table without one).
    Primary,
    /// A secondary index, by [`IndexSchema::id`].
    Secondary(u64),
}

/// Rows an UPDATE or DELETE considers.
#[derive(Clone, Debug)]
pub enum ScanSpec {
    /// Every row of the table.
    Full,
    /// Rows whose index columns start with `key` (a prefix of the index's
    /// columns, or all of them).
    Prefix { index: IndexRef, key: Vec<Value> },
}

/// Decides whether a row matches (DELETE/UPDATE WHERE).
pub type RowFilter = Arc<dyn Fn(&Row) -> Result<bool> + Send + Sync>;
/// Computes the new row for a matching row, or `None` if it does not match.
pub type RowUpdater = Arc<dyn Fn(&Row) -> Result<Option<Row>> + Send + Sync>;
/// ON DUPLICATE KEY UPDATE: `(existing, proposed) -> new row`.
pub type ConflictUpdater = Arc<dyn Fn(&Row, &Row) -> Result<Row> + Send + Sync>;

/// What an INSERT does when it meets an existing PRIMARY/UNIQUE key.
#[derive(Clone)]
pub enum OnConflict {
    Error,
    /// INSERT IGNORE: skip the row.
    Ignore,
    /// REPLACE: delete every conflicting row, then insert.
    Replace,
    /// INSERT ... ON DUPLICATE KEY UPDATE.
    Update(ConflictUpdater),
}

/// One statement's effect, resolved and validated inside the commit.
#[derive(Clone)]
pub enum WriteOp {
    /// Full rows in schema order. `Value::Null` in an AUTO_INCREMENT column
    /// (or 0) allocates the next value. Values are coerced to column types.
    Insert { table: TableId, rows: Vec<Row>, on_conflict: OnConflict },
    Update { table: TableId, scan: ScanSpec, update: RowUpdater },
    Delete { table: TableId, scan: ScanSpec, filter: RowFilter },
}

/// The outcome of one [`WriteOp`], with MySQL's counting rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpResult {
    pub affected_rows: u64,
    /// The first AUTO_INCREMENT value this op generated, if any.
    pub last_insert_id: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteResult {
    /// The LSN of the group commit that made the write durable.
    pub lsn: Lsn,
    pub ops: Vec<OpResult>,
}

/// Told about every committed batch, in LSN order.
pub trait CommitObserver: Send + Sync {
    /// Called inside the commit critical section, after the batch is in
    /// RocksDB (and synced under `Durability::Sync`), before the writers are
    /// acknowledged. Reads of storage from inside see the batch applied.
    fn on_commit(&self, lsn: Lsn, changes: &[TableDeltas]);
}

/// A consistent point-in-time view of every table (a RocksDB snapshot).
pub struct ReadView {
    _private: (),
}

impl ReadView {
    /// The LSN of the last batch this view reflects.
    pub fn lsn(&self) -> Lsn {
        unimplemented!("storage implementer")
    }
    pub fn lookup(&self, _table: TableId, _index: IndexRef, _key: &[Value]) -> Result<Vec<Row>> {
        unimplemented!("storage implementer")
    }
    pub fn scan(&self, _table: TableId) -> Result<Vec<Row>> {
        unimplemented!("storage implementer")
    }
}

/// The storage engine: one per server.
pub struct Storage {
    _private: (),
}

impl Storage {
    /// Opens (creating if missing) `<data_dir>/db`, or an in-memory engine
    /// for `Durability::Memory`. Bumps the hidden-row-id epoch, finishes or
    /// redoes interrupted index builds.
    pub fn open(_config: StorageConfig) -> Result<Arc<Storage>> {
        unimplemented!("storage implementer")
    }

    /// An empty in-memory engine (tests).
    pub fn in_memory() -> Arc<Storage> {
        unimplemented!("storage implementer")
    }

    // ---- catalog ----

    pub fn create_database(&self, _name: &str, _if_not_exists: bool) -> Result<()> {
        unimplemented!("storage implementer")
    }
    /// Drops the database and its tables; returns the dropped tables.
    pub fn drop_database(&self, _name: &str, _if_exists: bool) -> Result<Vec<Arc<TableSchema>>> {
        unimplemented!("storage implementer")
    }
    pub fn databases(&self) -> Vec<String> {
        unimplemented!("storage implementer")
    }
    /// Creates a table. Storage assigns `schema.id` and every index id; the
    /// returned schema carries them. `if_not_exists` returns the existing one.
    pub fn create_table(&self, _schema: TableSchema, _if_not_exists: bool) -> Result<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    pub fn drop_table(&self, _database: &str, _table: &str) -> Result<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    pub fn table(&self, _database: &str, _table: &str) -> Option<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    pub fn table_by_id(&self, _id: TableId) -> Option<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    pub fn tables(&self, _database: &str) -> Vec<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    /// Builds a new index over existing rows (bounded batches), then records
    /// it. `index.id` is assigned by storage.
    pub fn create_index(&self, _database: &str, _table: &str, _index: IndexSchema) -> Result<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    pub fn drop_index(&self, _database: &str, _table: &str, _index: &str) -> Result<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    /// ALTER TABLE ADD COLUMN: bumps the schema version; no rewrite.
    pub fn add_column(&self, _database: &str, _table: &str, _column: ColumnSchema) -> Result<Arc<TableSchema>> {
        unimplemented!("storage implementer")
    }
    /// Small metadata records (view definitions, graph) in the catalog.
    pub fn put_meta(&self, _key: &str, _value: &[u8]) -> Result<()> {
        unimplemented!("storage implementer")
    }
    pub fn delete_meta(&self, _key: &str) -> Result<()> {
        unimplemented!("storage implementer")
    }
    /// Every meta record whose key starts with `prefix`, in key order.
    pub fn list_meta(&self, _prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        unimplemented!("storage implementer")
    }

    // ---- writes ----

    /// Applies `ops` atomically (all or none), group-committed with other
    /// connections' writes, and returns once durable per the configured
    /// durability. Validation (types, NOT NULL, keys) happens here.
    pub fn write(&self, _ops: Vec<WriteOp>) -> Result<WriteResult> {
        unimplemented!("storage implementer")
    }

    /// Registers the observer told of every commit (the dataflow).
    pub fn set_commit_observer(&self, _observer: Arc<dyn CommitObserver>) {
        unimplemented!("storage implementer")
    }

    /// Runs `f` while no commit is in progress, so storage reads inside `f`
    /// see exactly the batches every observer has been told of.
    pub fn exclusive<R>(&self, _f: impl FnOnce() -> R) -> R {
        unimplemented!("storage implementer")
    }

    // ---- reads of the latest committed state ----

    /// Rows whose `index` columns start with `key` (point or prefix lookup).
    /// Key values are coerced to the column types; a key that cannot be
    /// coerced matches nothing.
    pub fn lookup(&self, _table: TableId, _index: IndexRef, _key: &[Value]) -> Result<Vec<Row>> {
        unimplemented!("storage implementer")
    }
    /// Rows whose `index` key lies between the bounds (ordered scan).
    pub fn range(&self, _table: TableId, _index: IndexRef, _lower: Bound<&[Value]>, _upper: Bound<&[Value]>) -> Result<Vec<Row>> {
        unimplemented!("storage implementer")
    }
    /// Every row, in primary-key order.
    pub fn scan(&self, _table: TableId) -> Result<Vec<Row>> {
        unimplemented!("storage implementer")
    }
    pub fn estimate_rows(&self, _table: TableId) -> u64 {
        unimplemented!("storage implementer")
    }
    pub fn read_view(&self) -> ReadView {
        unimplemented!("storage implementer")
    }
    /// The LSN of the newest committed batch.
    pub fn last_lsn(&self) -> Lsn {
        unimplemented!("storage implementer")
    }

    // ---- change log ----

    /// Calls `f` for every logged batch with LSN > `after`, in order.
    pub fn read_log(&self, _after: Lsn, _f: &mut dyn FnMut(Lsn, Vec<TableDeltas>) -> Result<()>) -> Result<()> {
        unimplemented!("storage implementer")
    }
    /// Drops log entries with LSN < `below`.
    pub fn truncate_log(&self, _below: Lsn) -> Result<()> {
        unimplemented!("storage implementer")
    }
}
