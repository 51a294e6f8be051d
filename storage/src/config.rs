//! How storage is opened: durability, caches, WAL handling, disk reserve.

use std::path::PathBuf;
use std::time::Duration;

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
    /// What to do when RocksDB's write-ahead log is damaged at start-up.
    pub wal_recovery: WalRecovery,
    /// Writes are refused (MySQL's 1021) while the data directory's file
    /// system has less free space than this, so RocksDB never runs out of
    /// room mid-write; they succeed again once space is freed. 0 = no check.
    pub disk_reserve: u64,
}

/// What opening storage does with a damaged write-ahead log (a flipped
/// byte, a truncated record): it may hold acknowledged commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WalRecovery {
    /// Refuse to open (RocksDB's absolute-consistency recovery), as MySQL
    /// refuses a corrupted redo log: nothing acknowledged is lost silently.
    #[default]
    AbsoluteConsistency,
    /// Recover to the last consistent point: replay stops at the first
    /// damaged record and everything after it is dropped (and logged). Only
    /// when the operator asks for it.
    PointInTime,
}
