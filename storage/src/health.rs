//! The engine's health, as the server reports it: a background error
//! that stops every write, and what a point-in-time WAL recovery dropped
//! when storage opened.

use crate::{Storage, WalRecoveryReport};

impl Storage {
    /// Why every write is refused, when a background job of the engine
    /// stopped them (RocksDB: a compaction that met a damaged block, a
    /// failed flush): writes fail until the process restarts on a repaired
    /// data directory. `None` while writes are taken. Cheap unless there
    /// was a background error.
    pub fn background_error(&self) -> Option<String> {
        self.engine.background_error()
    }

    /// What opening dropped, when it recovered a damaged write-ahead log
    /// to its last consistent point (`--wal-recovery point-in-time`).
    pub fn wal_recovery(&self) -> Option<WalRecoveryReport> {
        self.engine.wal_recovery()
    }

    /// Compacts every column family (tests).
    #[cfg(test)]
    pub(crate) fn compact(&self) -> crate::Result<()> {
        self.engine.compact()
    }
}
