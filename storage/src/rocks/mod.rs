//! The RocksDB engine: the only module that imports `rocksdb`.
//!
//! One `DB` (multi-threaded column-family mode) at `<data_dir>/db`, one
//! shared LRU block cache, per-kind column-family options (index families
//! get whole-key and prefix bloom filters; system families are tuned
//! for ordered scans). Long-lived snapshots live on their own thread because
//! a RocksDB snapshot borrows the `DB` and this crate forbids `unsafe`.

mod wal_scan;

use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType,
    DBRawIteratorWithThreadMode, DBRecoveryMode, DBWithThreadMode, MultiThreaded, Options,
    ReadOptions, SliceTransform, SnapshotWithThreadMode, WriteBatch, WriteOptions,
};

use crate::engine::{
    Batch, BatchOp, CfKind, KvEngine, KvRead, KvSnapshot, PrefixScanFn, ScanFn, SnapshotJob,
};
use crate::{cf, keys};
use crate::{Result, StorageError};
pub use wal_scan::WalRecoveryReport;

type Db = DBWithThreadMode<MultiThreaded>;

/// RocksDB's `max_total_wal_size`: the most write-ahead log a restart
/// after a crash replays, whatever the write rate between snapshots.
const MAX_TOTAL_WAL_BYTES: u64 = 256 << 20;
/// RocksDB's `db_write_buffer_size`: the memtables of all column families
/// together; past it the largest is flushed. With the 64 MB block cache,
/// the memory storage uses beside `--memory-limit`'s view state.
const MEMTABLE_BUDGET_BYTES: usize = 128 << 20;
/// Index families build prefix bloom filters on the first 9 key bytes: the
/// whole first value when it is a fixed-width one (integers, dates, times,
/// doubles: a tag byte and 8 bytes), so a lookup by the first index column
/// skips SST files that lack it. Shorter keys are outside the domain.
const PREFIX_LEN: usize = 9;

/// Tuning knobs the storage config passes down.
pub(crate) struct RocksOptions<'a> {
    pub block_cache_bytes: usize,
    pub wal_dir: Option<&'a Path>,
    pub background_jobs: i32,
    pub wal_recovery: crate::WalRecovery,
}

pub(crate) struct RocksEngine {
    db: Arc<Db>,
    cache: Cache,
    /// Names of the column families that exist.
    cfs: parking_lot::Mutex<std::collections::BTreeSet<String>>,
    /// What opening dropped, after a point-in-time WAL recovery.
    wal_recovery: Option<WalRecoveryReport>,
}

fn io(e: rocksdb::Error) -> StorageError {
    match e.kind() {
        rocksdb::ErrorKind::Corruption => {
            report_corruption(e.as_ref());
            StorageError::Corruption(e.into_string())
        }
        _ if e.as_ref().contains("No space left on device") => StorageError::DiskFull {
            path: e.into_string(),
            available: 0,
            reserve: 0,
        },
        _ => StorageError::Io(e.into_string()),
    }
}

/// Logs the first corruption RocksDB reports in this process at error
/// level, with what to do: the statements that meet it only log warnings,
/// and once a compaction has met a damaged block RocksDB refuses every
/// write until the data directory is repaired. Once, as every later
/// statement that meets it reports it again.
fn report_corruption(damage: &str) {
    static REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !REPORTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::error!(
            damage,
            "storage corruption: a data file failed its checksum; reads of it fail with \
             1034 and RocksDB may refuse all writes. Stop the server and restore the data \
             directory from a backup (docs/operations.md, damaged table files)"
        );
    }
}

impl RocksEngine {
    /// A refused write's error: a corruption or a full disk as any I/O;
    /// other errors while a background error stops every write say so
    /// (1030 for the client, where a plain I/O error is 1105).
    fn write_error(&self, e: rocksdb::Error) -> StorageError {
        match io(e) {
            StorageError::Io(message) => match self.background_error() {
                Some(why) => StorageError::WritesStopped(why),
                None => StorageError::Io(message),
            },
            other => other,
        }
    }
}

fn missing(cf: &str) -> StorageError {
    StorageError::Internal(format!("column family {cf} does not exist"))
}

impl RocksEngine {
    pub fn open(path: &Path, opts: &RocksOptions<'_>) -> Result<RocksEngine> {
        std::fs::create_dir_all(path)
            .map_err(|e| StorageError::Io(format!("{}: {e}", path.display())))?;
        let cache = Cache::new_lru_cache(opts.block_cache_bytes.max(1 << 20)).map_err(io)?;
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.set_max_background_jobs(opts.background_jobs);
        db_opts.increase_parallelism(opts.background_jobs);
        db_opts.set_bytes_per_sync(1 << 20);
        // Bounds what a restart after a crash replays: past this much
        // write-ahead log, the column families holding its oldest entries
        // are flushed (the server also flushes after every view snapshot).
        db_opts.set_max_total_wal_size(MAX_TOTAL_WAL_BYTES);
        // One budget for the memtables of every family: each table and
        // index is a family with its own 64 MB write buffer, so without it
        // memtable memory grew with the number of tables written to.
        db_opts.set_db_write_buffer_size(MEMTABLE_BUDGET_BYTES);
        // Start-up: don't read every table file's properties to refresh
        // compaction statistics (an estimate; compactions refresh it).
        db_opts.set_skip_stats_update_on_db_open(true);
        // Table files are opened at start-up by this many threads per
        // column family, each started and joined per family: 16 (RocksDB's
        // default) cost ~5 ms of thread starts in a 15-25 ms open of a
        // small database, on the path of a warm restart. Many files still
        // open in parallel.
        db_opts.set_max_file_opening_threads(if table_files(path) > 64 {
            std::thread::available_parallelism().map_or(4, |n| n.get().min(16)) as i32
        } else {
            1
        });
        if let Some(wal) = opts.wal_dir {
            db_opts.set_wal_dir(wal);
        }
        let existing = if path.join("CURRENT").exists() {
            Db::list_cf(&db_opts, path).map_err(io)?
        } else {
            Vec::new()
        };
        let mut names: Vec<String> = existing;
        for system in [cf::CATALOG, cf::CHANGE_LOG] {
            if !names.iter().any(|n| n == system) {
                names.push(system.to_string());
            }
        }
        let descriptors = || -> Vec<ColumnFamilyDescriptor> {
            names
                .iter()
                .map(|n| ColumnFamilyDescriptor::new(n, cf_options(&cache, cf::kind(n))))
                .collect()
        };
        // Always tried with absolute consistency first: a damaged WAL is
        // detected (and reported) whatever the operator chose.
        db_opts.set_wal_recovery_mode(DBRecoveryMode::AbsoluteConsistency);
        let first = Db::open_cf_descriptors(&db_opts, path, descriptors());
        // Then allowing only a torn last record: a process killed (kill -9)
        // while RocksDB wrote a record leaves part of it, and that write was
        // never acknowledged (it returns after the whole record, and after
        // the sync under `--durability sync`). Damage anywhere else still
        // fails this mode too. Seen as the storage crash test failing now
        // and then with "truncated record body".
        let first = match first {
            Err(e) if e.kind() == rocksdb::ErrorKind::Corruption => {
                db_opts.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
                let tolerant = Db::open_cf_descriptors(&db_opts, path, descriptors());
                if tolerant.is_ok() {
                    tracing::warn!(
                        damage = %e.clone().into_string(),
                        "the write-ahead log ended in a partly written record (a write \
                         interrupted by the crash, never acknowledged); it was dropped"
                    );
                }
                tolerant
            }
            other => other,
        };
        let mut wal_recovery = None;
        let db = match first {
            Ok(db) => db,
            Err(e) if e.kind() == rocksdb::ErrorKind::Corruption && table_file_damage(&e) => {
                return Err(StorageError::Corruption(format!(
                    "a table file in {} is damaged ({}); refusing to start, as it holds \
                     committed rows that cannot be read. Restore the data directory from a \
                     backup (--wal-recovery does not apply: the write-ahead log is intact)",
                    path.display(),
                    e.into_string()
                )));
            }
            Err(e) if e.kind() == rocksdb::ErrorKind::Corruption => {
                let wal = opts.wal_dir.unwrap_or(path);
                if opts.wal_recovery == crate::WalRecovery::AbsoluteConsistency {
                    return Err(StorageError::Corruption(format!(
                        "the write-ahead log in {} is damaged ({}); refusing to start, as it \
                         may hold acknowledged commits. Restore the data directory from a \
                         backup, or start with --wal-recovery point-in-time to recover to the \
                         last consistent point (every write after the damaged record is lost)",
                        wal.display(),
                        e.into_string()
                    )));
                }
                let kept = keep_damaged_wal(wal, path.parent().unwrap_or(path));
                tracing::warn!(
                    wal = %wal.display(),
                    damage = %e.clone().into_string(),
                    wal_bytes = wal_bytes(wal),
                    kept = %kept,
                    "write-ahead log damaged: recovering to the last consistent point \
                     (--wal-recovery point-in-time); writes after the damaged record are dropped \
                     (the damaged log is kept as it was, see `kept`)"
                );
                // Read before RocksDB recovers (it may reuse or delete the
                // files), compared with where it got to after.
                let before = wal_scan::WalContents::read(wal);
                db_opts.set_wal_recovery_mode(DBRecoveryMode::PointInTime);
                let db = Db::open_cf_descriptors(&db_opts, path, descriptors()).map_err(io)?;
                let report = before.dropped_after(db.latest_sequence_number());
                tracing::warn!(
                    dropped_records = report.dropped_records,
                    dropped_writes = report.dropped_writes,
                    dropped_bytes = report.dropped_bytes,
                    recovered_sequence = report.recovered_sequence,
                    wal_bytes = report.wal_bytes,
                    kept = %kept,
                    "write-ahead log recovered to the last consistent point: dropped {} write \
                     batches ({} key writes, {} bytes of log) after it",
                    report.dropped_records,
                    report.dropped_writes,
                    report.dropped_bytes
                );
                wal_recovery = Some(report);
                db
            }
            Err(e) => return Err(io(e)),
        };
        Ok(RocksEngine {
            db: Arc::new(db),
            cache,
            cfs: parking_lot::Mutex::new(names.into_iter().collect()),
            wal_recovery,
        })
    }
}

/// Whether a corruption found while opening is in a table file (`.sst`)
/// or the file list (`MANIFEST`), not in the write-ahead log: RocksDB names
/// the damaged file in the message for those, and no WAL recovery mode
/// gets past them (a truncated table file was reported as a damaged WAL,
/// with advice to start with --wal-recovery point-in-time, which then
/// failed the same way).
fn table_file_damage(e: &rocksdb::Error) -> bool {
    let msg = e.as_ref();
    msg.contains(".sst") || msg.contains("MANIFEST-")
}

/// Copies the write-ahead log files of `wal` into a new directory
/// `damaged-wal-<unix seconds>` under `under` before a point-in-time
/// recovery drops what follows the damage, so the dropped writes stay on
/// disk for the operator (RocksDB reuses or deletes the originals). The
/// copy's path, or why there is none.
fn keep_damaged_wal(wal: &Path, under: &Path) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let to = under.join(format!("damaged-wal-{secs}"));
    let copy = || -> std::io::Result<()> {
        std::fs::create_dir_all(&to)?;
        for entry in std::fs::read_dir(wal)?.flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|x| x == "log") {
                std::fs::copy(&p, to.join(entry.file_name()))?;
            }
        }
        Ok(())
    };
    match copy() {
        Ok(()) => to.display().to_string(),
        Err(e) => format!("not kept: copying to {} failed: {e}", to.display()),
    }
}

/// Bytes of write-ahead log (`.log`) files in `dir`.
fn wal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}

/// How many table (`.sst`) files the database directory holds.
fn table_files(path: &Path) -> usize {
    std::fs::read_dir(path).map_or(0, |dir| {
        dir.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "sst"))
            .count()
    })
}

fn cf_options(cache: &Cache, kind: CfKind) -> Options {
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(cache);
    block.set_cache_index_and_filter_blocks(true);
    let mut opts = Options::default();
    match kind {
        CfKind::Index => {
            block.set_bloom_filter(10.0, false);
            block.set_whole_key_filtering(true);
            opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(PREFIX_LEN));
            // No memtable bloom: it is allocated and zeroed whole with every
            // memtable, in proportion to the write buffer, not to what the
            // family holds: at 0.02 of 64 MB it was 1.3 MB of resident
            // memory per table and per index from CREATE TABLE on (200
            // empty two-index tables: 750 MB), and 15 ms of page faults
            // per open. A lookup it would skip is one skip-list search;
            // the table files keep their bloom filters.
        }
        CfKind::System => {}
    }
    opts.set_block_based_table_factory(&block);
    opts.set_level_compaction_dynamic_level_bytes(true);
    // LZ4, not RocksDB's default Snappy: a cold fill decompresses every
    // block of the tables it scans (Snappy was 9% of the instructions of
    // the Lobsters front page's cold fill). Files written with Snappy stay
    // readable: each block records its own compression.
    opts.set_compression_type(DBCompressionType::Lz4);
    opts
}

/// Reads against a RocksDB snapshot.
struct SnapReader<'a> {
    db: &'a Db,
    snap: &'a SnapshotWithThreadMode<'a, Db>,
}

impl KvRead for SnapReader<'_> {
    fn get(&self, cf_name: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let cf = self.db.cf_handle(cf_name).ok_or_else(|| missing(cf_name))?;
        self.snap.get_cf(&cf, key).map_err(io)
    }

    fn scan(&self, cf_name: &str, lower: &[u8], upper: Option<&[u8]>, f: ScanFn<'_>) -> Result<()> {
        let cf = self.db.cf_handle(cf_name).ok_or_else(|| missing(cf_name))?;
        let mut ro = ReadOptions::default();
        // A scan of every key starting with `lower` (upper bound = its
        // successor) stays within one extractor prefix when `lower` covers
        // it: prefix mode may use the bloom filters. Anything else is a
        // total-order scan.
        let within_prefix = lower.len() >= PREFIX_LEN
            && upper.is_some()
            && keys::prefix_successor(lower).as_deref() == upper;
        if within_prefix {
            ro.set_prefix_same_as_start(true);
        } else {
            ro.set_total_order_seek(true);
        }
        if let Some(u) = upper {
            if u <= lower {
                return Ok(());
            }
            ro.set_iterate_upper_bound(u.to_vec());
        }
        let mut it: DBRawIteratorWithThreadMode<Db> = self.snap.raw_iterator_cf_opt(&cf, ro);
        it.seek(lower);
        while let Some((k, v)) = it.item() {
            if !f(k, v)? {
                return Ok(());
            }
            it.next();
        }
        it.status().map_err(io)
    }

    fn scan_prefixes(
        &self,
        cf_name: &str,
        prefixes: &[Vec<u8>],
        f: PrefixScanFn<'_>,
    ) -> Result<()> {
        let cf = self.db.cf_handle(cf_name).ok_or_else(|| missing(cf_name))?;
        let mut ro = ReadOptions::default();
        // One iterator for every prefix, so no upper bound: each prefix's
        // run ends at the first key not starting with it. Prefix mode (the
        // bloom filters) only if every prefix covers the extractor's.
        if prefixes.iter().all(|p| p.len() >= PREFIX_LEN) {
            ro.set_prefix_same_as_start(true);
        } else {
            ro.set_total_order_seek(true);
        }
        // Seeks in key order move the iterator forward through the same
        // blocks instead of back and forth.
        let mut order: Vec<usize> = (0..prefixes.len()).collect();
        order.sort_by(|&a, &b| prefixes[a].cmp(&prefixes[b]));
        let mut it: DBRawIteratorWithThreadMode<Db> = self.snap.raw_iterator_cf_opt(&cf, ro);
        for i in order {
            let prefix = &prefixes[i];
            it.seek(prefix);
            while let Some((k, v)) = it.item() {
                if !k.starts_with(prefix) {
                    break;
                }
                f(i, k, v)?;
                it.next();
            }
            it.status().map_err(io)?;
        }
        Ok(())
    }
}

impl KvEngine for RocksEngine {
    fn cf_names(&self) -> Vec<String> {
        self.cfs.lock().iter().cloned().collect()
    }

    fn create_cf(&self, name: &str, kind: CfKind) -> Result<()> {
        let mut cfs = self.cfs.lock();
        if self.db.cf_handle(name).is_none() {
            self.db
                .create_cf(name, &cf_options(&self.cache, kind))
                .map_err(io)?;
        }
        cfs.insert(name.to_string());
        Ok(())
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let mut cfs = self.cfs.lock();
        if self.db.cf_handle(name).is_some() {
            self.db.drop_cf(name).map_err(io)?;
        }
        cfs.remove(name);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        for name in self.cf_names() {
            if let Some(h) = self.db.cf_handle(&name) {
                self.db.flush_cf(&h).map_err(io)?;
            }
        }
        Ok(())
    }

    fn write(&self, batch: Batch, sync: bool) -> Result<()> {
        let mut wb = WriteBatch::default();
        for op in &batch.ops {
            match op {
                BatchOp::Put { cf, key, value } => {
                    let h = self.db.cf_handle(cf).ok_or_else(|| missing(cf))?;
                    wb.put_cf(&h, key, value);
                }
                BatchOp::Delete { cf, key } => {
                    let h = self.db.cf_handle(cf).ok_or_else(|| missing(cf))?;
                    wb.delete_cf(&h, key);
                }
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db.write_opt(wb, &wo).map_err(|e| self.write_error(e))
    }

    fn sync_wal(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(io)
    }

    fn checkpoint(&self, dir: &std::path::Path) -> Result<()> {
        rocksdb::checkpoint::Checkpoint::new(&*self.db)
            .and_then(|c| c.create_checkpoint(dir))
            .map_err(io)
    }

    fn get_latest(&self, cf_name: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let cf = self.db.cf_handle(cf_name).ok_or_else(|| missing(cf_name))?;
        self.db.get_cf(&cf, key).map_err(io)
    }

    fn with_consistent(&self, f: &mut dyn FnMut(&dyn KvRead) -> Result<()>) -> Result<()> {
        let snap = self.db.snapshot();
        f(&SnapReader {
            db: &self.db,
            snap: &snap,
        })
    }

    fn snapshot(&self) -> Result<Box<dyn KvSnapshot>> {
        let (tx, rx) = mpsc::channel::<SnapshotJob>();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<()>(1);
        let db = Arc::clone(&self.db);
        std::thread::Builder::new()
            .name("ladle-snapshot".into())
            .spawn(move || {
                let snap = db.snapshot();
                // The receiver waits for this; if it is gone there is nobody
                // to serve.
                if ready_tx.send(()).is_err() {
                    return;
                }
                let reader = SnapReader {
                    db: &db,
                    snap: &snap,
                };
                while let Ok(job) = rx.recv() {
                    job(&reader);
                }
            })
            .map_err(|e| StorageError::Io(format!("spawning snapshot thread: {e}")))?;
        ready_rx.recv().map_err(|_| {
            StorageError::Internal("snapshot thread exited before taking its snapshot".into())
        })?;
        Ok(Box::new(RocksSnapshot {
            jobs: parking_lot::Mutex::new(tx),
        }))
    }

    fn background_error(&self) -> Option<String> {
        // RocksDB counts background (flush, compaction) errors; only when
        // there was one, ask whether writes are stopped by it: an empty
        // write, which does nothing (no WAL record, no sequence number)
        // but meets the error RocksDB holds. `no_slowdown`: a write stall
        // is not an error here, and /health must not wait on one.
        let errors = self
            .db
            .property_int_value("rocksdb.background-errors")
            .ok()
            .flatten()
            .unwrap_or(0);
        if errors == 0 {
            return None;
        }
        let mut probe = WriteOptions::default();
        probe.disable_wal(true);
        probe.set_no_slowdown(true);
        match self.db.write_opt(WriteBatch::default(), &probe) {
            Ok(()) => None,
            Err(e) if e.kind() == rocksdb::ErrorKind::Incomplete => None,
            Err(e) => Some(e.into_string()),
        }
    }

    fn wal_recovery(&self) -> Option<WalRecoveryReport> {
        self.wal_recovery.clone()
    }

    #[cfg(test)]
    fn compact(&self) -> Result<()> {
        // Forced: a lone file would otherwise be moved down unread.
        let mut opts = rocksdb::CompactOptions::default();
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
        for name in self.cf_names() {
            if let Some(h) = self.db.cf_handle(&name) {
                self.db
                    .compact_range_cf_opt(&h, None::<&[u8]>, None::<&[u8]>, &opts);
            }
        }
        Ok(())
    }

    fn estimate_keys(&self, cf_name: &str) -> u64 {
        let Some(cf) = self.db.cf_handle(cf_name) else {
            return 0;
        };
        let int = |name: &str| {
            self.db
                .property_int_value_cf(&cf, name)
                .ok()
                .flatten()
                .unwrap_or(0)
        };
        // RocksDB's estimate counts table files only once their statistics
        // are loaded, which start-up skips (`skip_stats_update_on_db_open`):
        // after a restart it is the memtables' entries alone (0 for a table
        // whose rows are all in files, a few after a crash's log replay).
        // The files' properties are read when they are opened anyway;
        // entries less twice the deletions is RocksDB's own estimate from
        // them.
        let files = self
            .db
            .property_value_cf(&cf, "rocksdb.aggregated-table-properties")
            .ok()
            .flatten()
            .map_or(0, |p| {
                let entries = table_property(&p, "# entries");
                entries.saturating_sub(2 * table_property(&p, "# deletions"))
            });
        let counted = files
            + int("rocksdb.num-entries-active-mem-table")
            + int("rocksdb.num-entries-imm-mem-tables");
        counted.max(int("rocksdb.estimate-num-keys"))
    }
}

/// A count in RocksDB's text form of table properties
/// (`# entries=120; # deletions=3; ...`); 0 if absent.
fn table_property(text: &str, name: &str) -> u64 {
    text.split(';')
        .filter_map(|part| part.trim().split_once('='))
        .find(|(key, _)| key.trim() == name)
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

struct RocksSnapshot {
    jobs: parking_lot::Mutex<mpsc::Sender<SnapshotJob>>,
}

impl KvSnapshot for RocksSnapshot {
    fn run(&self, job: SnapshotJob) {
        // If the thread is gone the job is dropped; its reply channel then
        // reports the failure to the caller.
        let _ = self.jobs.lock().send(job);
    }
}
