//! Ladle's base tables: durable rows in RocksDB, the catalog, the change log
//! and the group-committed write path. (`snapshot` is the separate store for
//! the dataflow's view-state snapshots.)
//!
//! Entry point: [`Storage`]. Upper layers (dataflow, shim) see only this
//! API and know nothing of RocksDB; this crate knows nothing of SQL text.
//!
//! ```text
//!   storage.rs (Storage: writes, reads, log)  ddl.rs (open, DDL)  view.rs (read views)
//!   commit.rs (group-commit queue)  write.rs (group apply)  read.rs  catalog.rs (records)
//!   table.rs (row codec, index layout)  keys.rs (memcomparable)  cf.rs (names)
//!   ------------- engine.rs: KvRead / KvEngine / KvSnapshot -------------
//!   rocks/ (RocksDB)                              memory.rs (BTreeMaps)
//! ```
//!
//! The root holds only these docs, the modules and the public re-exports;
//! the API types live in `error.rs`, `config.rs`, `ops.rs` (what a write
//! asks) and `hooks.rs` (commit check, observer, write gate).
//!
//! **No RocksDB dependency above the engine traits**: only `src/rocks/`
//! imports `rocksdb`. The in-memory engine implements the same traits
//! (`Durability::Memory`, [`Storage::in_memory`]); one conformance suite
//! (`src/tests/suite.rs`) runs against both.
//!
//! Layout (one RocksDB instance at `<data_dir>/db`, one shared block cache):
//! - a column family per index: `t<table id>` is the primary index (primary
//!   key, or a hidden `(epoch, sequence)` row id for tables without one ->
//!   the postcard-encoded row); `i<index id>` is a secondary index
//!   ((index columns ++ primary key) -> the primary key and, by default, the
//!   whole row, so a secondary lookup is one range scan). Keys are
//!   memcomparable (`keys.rs`); text keys are folded by the column's
//!   collation. Index families have whole-key and 9-byte prefix blooms.
//! - `catalog`: format version, databases, table records (schema with its
//!   version, plus the padding values of added columns), id counters,
//!   AUTO_INCREMENT counters, the row-id epoch (bumped on every open), the
//!   last LSN, index-build markers and meta records.
//! - `changelog`: LSN -> postcard `Vec<TableDeltas>`, written in the same
//!   batch as the rows.
//!
//! Writes ([`Storage::write`]) are group-committed. A caller queues its op
//! list; if no leader is active it becomes the leader, drains the queue,
//! takes the commit lock and applies each caller's ops in order over an
//! overlay of the group's pending changes (atomically per caller: a failing
//! caller is rolled back alone; a caller's [`CommitCheck`], if any, then
//! verifies the state its ops leave, e.g. foreign keys, and a failure rolls
//! it back the same way). The group becomes ONE batch (rows of every
//! index, AUTO_INCREMENT counters, one change-log entry with a new LSN)
//! written with one WAL sync; the [`CommitObserver`] is told while the lock
//! is still held; then the group's callers are woken. Reads never take the
//! commit lock, so observers and [`Storage::exclusive`] may read.
//!
//! Cluster hooks (unused on a single node): a [`WriteGate`] admits writes
//! and decides when a committed one may be acknowledged (a replica refuses
//! them, a primary waits for its synchronous replicas);
//! [`Storage::apply_replicated_run`] writes a run of a primary's change-log
//! entries at the same LSNs as one batch; [`Storage::create_local_table`]
//! makes a scratch table outside the ids replicas assign in step;
//! [`Storage::fenced`] lets a schema change and its record sit
//! between two LSNs; [`Storage::set_log_floor`] keeps log entries replicas
//! need.
//!
//! AUTO_INCREMENT: an INSERT reserves values in batches as InnoDB does
//! ([`IdBatches`], [`IdAllocator`]); the counter past the batch is written
//! in the same batch as the rows that used it, so a crash can never hand
//! out a committed value again. Values a failed or ending statement
//! reserved and did not keep stay used up while the server runs (a gap, as
//! in MariaDB); a restart may hand them out again (they were never
//! visible).
//!
//! Limits: a row's non-BLOB/TEXT/JSON content is limited to 64 KiB
//! ([`StorageError::RowTooLarge`]). DDL (including index builds) holds the
//! commit lock, so writes wait while an index is built. A group is applied
//! and synced before the next one starts (no pipelining), so durable write
//! throughput is bounded by `group size / (apply time + fsync)`.

pub mod snapshot;

mod auto_inc;
mod catalog;
mod cf;
mod change_log;
mod commit;
mod config;
mod ddl;
mod engine;
mod error;
mod health;
mod hooks;
mod keys;
mod memory;
mod ops;
mod read;
mod recent_log;
mod rocks;
mod storage;
mod table;
mod view;
mod write;
mod write_hold;

pub use auto_inc::IdAllocator;
pub use change_log::LogEntry;
pub use config::{Durability, StorageConfig, WalRecovery};
pub use error::{Result, StorageError, ValueMisfit};
pub use hooks::{CommitCheck, CommitObserver, WriteGate};
pub use ops::{
    ConflictUpdater, IdBatches, IndexRef, OnConflict, OpResult, RowFilter, RowReturning,
    RowUpdater, ScanSpec, TableChange, WriteOp, WriteResult,
};
pub use read::RowSink;
pub use rocks::WalRecoveryReport;
pub use storage::{set_secondary_full_row_for_new_tables, Storage};
pub use table::pad_value as added_column_value;
pub use view::{ReadView, SnapshotReads};
pub use write::check_not_null;
pub use write_hold::WriteHold;

#[cfg(test)]
mod tests;
