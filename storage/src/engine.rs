//! The key-value engine traits every engine implements (TiKV's
//! `engine_traits` in miniature): point read and ordered scan ([`KvRead`]),
//! atomic multi-column-family write batches, column-family management, WAL
//! sync and snapshots ([`KvEngine`]).
//!
//! No RocksDB dependency above this line: the table layer (catalog, keys,
//! indexes, write path) sees only these traits. `rocks` and `memory`
//! implement them; `src/tests/suite.rs` runs the same suite against both.

use crate::Result;

/// One change in a [`Batch`].
#[derive(Clone, Debug)]
pub(crate) enum BatchOp {
    Put {
        cf: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        cf: String,
        key: Vec<u8>,
    },
}

/// Changes to several column families, applied atomically.
#[derive(Clone, Debug, Default)]
pub(crate) struct Batch {
    pub ops: Vec<BatchOp>,
}

impl Batch {
    pub fn put(&mut self, cf: &str, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(BatchOp::Put {
            cf: cf.to_string(),
            key: key.into(),
            value: value.into(),
        });
    }

    pub fn delete(&mut self, cf: &str, key: impl Into<Vec<u8>>) {
        self.ops.push(BatchOp::Delete {
            cf: cf.to_string(),
            key: key.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Visitor for [`KvRead::scan`]: returns `false` to stop.
pub(crate) type ScanFn<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> Result<bool>;

/// Reads of one consistent state (the latest, or a snapshot). `Sync`: the
/// dataflow's domains read one snapshot from several threads at once.
pub(crate) trait KvRead: Sync {
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Visits entries with `lower <= key < upper` (no upper: to the end) in
    /// key order until `f` returns `false`.
    fn scan(&self, cf: &str, lower: &[u8], upper: Option<&[u8]>, f: ScanFn<'_>) -> Result<()>;
    /// Visits the entries whose key starts with each of `prefixes`, in key
    /// order within a prefix; `f` is told which prefix (its position).
    /// RocksDB serves every prefix from one iterator: setting one up costs
    /// more than the seek, and a page's misses ask for dozens of keys.
    fn scan_prefixes(&self, cf: &str, prefixes: &[Vec<u8>], f: PrefixScanFn<'_>) -> Result<()> {
        for (i, prefix) in prefixes.iter().enumerate() {
            let upper = crate::keys::prefix_successor(prefix);
            self.scan(cf, prefix, upper.as_deref(), &mut |k, v| {
                f(i, k, v)?;
                Ok(true)
            })?;
        }
        Ok(())
    }
}

/// Visitor for [`KvRead::scan_prefixes`]: the prefix's position, key, value.
pub(crate) type PrefixScanFn<'a> = &'a mut dyn FnMut(usize, &[u8], &[u8]) -> Result<()>;

/// A closure run against a snapshot (possibly on the snapshot's own thread).
pub(crate) type SnapshotJob = Box<dyn FnOnce(&dyn KvRead) + Send>;

/// A long-lived consistent point in time.
pub(crate) trait KvSnapshot: Send + Sync {
    fn run(&self, job: SnapshotJob);
}

pub(crate) trait KvEngine: Send + Sync {
    /// Column families that exist.
    fn cf_names(&self) -> Vec<String>;
    fn create_cf(&self, name: &str, kind: CfKind) -> Result<()>;
    /// Dropping a column family that does not exist is not an error.
    fn drop_cf(&self, name: &str) -> Result<()>;
    /// Applies the batch atomically; `sync` waits for the WAL fsync.
    fn write(&self, batch: Batch, sync: bool) -> Result<()>;
    /// Moves in-memory data to files (RocksDB memtables to SSTs); tests use
    /// it to exercise the on-disk read path.
    #[cfg_attr(not(test), allow(dead_code))]
    fn flush(&self) -> Result<()>;
    /// Makes every write so far durable.
    fn sync_wal(&self) -> Result<()>;
    /// One point read of the latest state (no snapshot needed).
    fn get_latest(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Runs `f` against one consistent state (short-lived reads).
    fn with_consistent(&self, f: &mut dyn FnMut(&dyn KvRead) -> Result<()>) -> Result<()>;
    /// A long-lived snapshot.
    fn snapshot(&self) -> Result<Box<dyn KvSnapshot>>;
    /// Approximate number of keys in a column family.
    fn estimate_keys(&self, cf: &str) -> u64;
    /// Writes a consistent copy of the database into the new directory
    /// `dir` (RocksDB: a checkpoint, SST files hard-linked).
    fn checkpoint(&self, dir: &std::path::Path) -> Result<()>;
    /// Why the engine refuses every write, when a background job (a
    /// compaction meeting a damaged block, a failed flush) stopped them;
    /// `None` while writes are taken.
    fn background_error(&self) -> Option<String> {
        None
    }
    /// What opening dropped, after a point-in-time WAL recovery.
    fn wal_recovery(&self) -> Option<crate::rocks::WalRecoveryReport> {
        None
    }
    /// Compacts every column family (tests: makes a compaction meet what
    /// is on disk now).
    #[cfg(test)]
    fn compact(&self) -> Result<()> {
        Ok(())
    }
}

/// What a column family holds, so an engine can tune it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CfKind {
    /// Catalog and change log: small or append-only, scanned in order.
    System,
    /// A table index: point and prefix lookups.
    Index,
}
