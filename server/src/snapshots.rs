//! View-state snapshots as the server runs them: the store under
//! `<data-dir>/snapshots/`, warm recovery at start-up, the scheduler thread
//! (a snapshot every `--snapshot-interval`, chain compaction, change-log
//! trimming when snapshots are off), the final snapshot at clean shutdown,
//! and the `SNAPSHOT VIEWS` / `SHOW SNAPSHOTS` statements (as the shim's
//! [`Admin`]).
//!
//! Everything here blocks: it runs on its own std thread or a blocking
//! thread, never on a tokio worker. One snapshot runs at a time; a failed
//! snapshot is logged and counted, and the next interval tries again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use ladle_dataflow::{
    Dataflow, DecodedSnapshot, RecoveryProgress, RecoveryStats, SnapshotConfig, SnapshotStats,
    SnapshotStore,
};
use ladle_shim::admin::{Admin, RetainedSnapshot, SnapshotTaken};
use ladle_storage::snapshot::Compression;
use ladle_storage::Storage;
use parking_lot::Mutex;
use prometheus::{Gauge, Histogram, HistogramOpts, IntCounter, IntGauge, Registry};

/// Ask for compaction once a node's chain holds more files than this (the
/// dataflow merges chains longer than 4).
const MAX_CHAIN_FILES: usize = 4;

/// With snapshots off, how often the change log is trimmed (tests shorten
/// it with the environment variable `LADLE_LOG_TRIM_INTERVAL_MS`).
const TRIM_EVERY: Duration = Duration::from_secs(10);

fn trim_every() -> Duration {
    std::env::var("LADLE_LOG_TRIM_INTERVAL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(TRIM_EVERY, Duration::from_millis)
}

/// At most this often a recovery progress line is logged.
const PROGRESS_LOG_EVERY: Duration = Duration::from_millis(500);

/// Why a snapshot is taken (for logs).
#[derive(Clone, Copy, Debug)]
pub enum Trigger {
    Scheduled,
    Statement,
    Shutdown,
    /// Shipped with a checkpoint to a bootstrapping cluster node.
    Bootstrap,
}

/// Recovery begun before storage opened ([`begin_recovery`]): the thread
/// decoding the newest snapshot, and the store to recover from on this
/// thread if that one could not start or panicked.
pub struct PendingRecovery {
    decoding: Option<std::thread::JoinHandle<DecodedSnapshot>>,
    store: SnapshotStore,
}

impl PendingRecovery {
    /// Waits for the decoding and installs what it decoded.
    fn finish(
        self,
        dataflow: &Dataflow,
        progress: &mut dyn FnMut(&RecoveryProgress),
        servable: &mut dyn FnMut(),
    ) -> anyhow::Result<RecoveryStats> {
        let stats = match self.decoding.and_then(|h| h.join().ok()) {
            Some(d) => dataflow.install_snapshot(d, progress, servable)?,
            None => dataflow.recover(&self.store, progress)?,
        };
        Ok(stats)
    }
}

/// Opens `<data_dir>/snapshots/`, or None without durable storage (base
/// tables do not survive a restart, so neither may view state). Opening
/// deletes unpublished files: the data directory must be locked first.
pub fn open_store(
    data_dir: &std::path::Path,
    durable: bool,
) -> anyhow::Result<Option<SnapshotStore>> {
    if !durable {
        return Ok(None);
    }
    let dir = data_dir.join(ladle_storage::snapshot::SNAPSHOT_DIR_NAME);
    let config = SnapshotConfig {
        compression: compression_from_env()?,
        ..SnapshotConfig::default()
    };
    let store = SnapshotStore::open(&dir, config)
        .with_context(|| format!("opening snapshot directory {}", dir.display()))?;
    Ok(Some(store))
}

/// Starts reading, verifying and decoding the newest snapshot on its own
/// thread, before storage opens: decoding needs neither storage nor the
/// graph, so a warm start overlaps the two instead of adding them up.
/// Progress goes to the recovery metrics and the log as usual.
pub fn begin_recovery(store: &SnapshotStore, metrics: &SnapshotMetrics) -> PendingRecovery {
    let (st, m) = (store.clone(), metrics.clone());
    let decoding = std::thread::Builder::new()
        .name("ladle-recovery".into())
        .spawn(move || Dataflow::decode_snapshot(&st, &mut progress_reporter(&m)))
        .map_err(|e| {
            tracing::warn!("cannot start the recovery thread ({e}); recovering on this one")
        })
        .ok();
    PendingRecovery {
        decoding,
        store: store.clone(),
    }
}

/// Recovery progress to the metrics and, at most every
/// [`PROGRESS_LOG_EVERY`] and at each phase's start and end, the log.
fn progress_reporter(m: &SnapshotMetrics) -> impl FnMut(&RecoveryProgress) + '_ {
    let mut last_log: Option<Instant> = None;
    let mut last_phase = "";
    move |p: &RecoveryProgress| {
        let ratio = if p.total == 0 {
            1.0
        } else {
            p.done as f64 / p.total as f64
        };
        m.recovery_progress.set(ratio);
        m.recovery_bytes.set(p.bytes as i64);
        m.recovery_rows.set(p.rows as i64);
        let due = last_log.is_none_or(|t| t.elapsed() >= PROGRESS_LOG_EVERY);
        if due || p.phase != last_phase || p.done == p.total {
            last_log = Some(Instant::now());
            last_phase = p.phase;
            tracing::info!(
                phase = p.phase,
                percent = format_args!("{:.1}", ratio * 100.0),
                done = p.done,
                total = p.total,
                mb = format_args!("{:.1}", p.bytes as f64 / 1e6),
                rows = p.rows,
                "recovering view state"
            );
        }
    }
}

/// The server's snapshot machinery; shared by the scheduler thread, the
/// shim (as [`Admin`]) and shutdown.
pub struct Snapshots {
    dataflow: Arc<Dataflow>,
    storage: Arc<Storage>,
    /// None with `--durability memory`: base tables do not survive a
    /// restart, so neither may view state.
    store: Option<SnapshotStore>,
    interval: Duration,
    metrics: SnapshotMetrics,
    /// Held while a snapshot (or compaction) runs: one at a time.
    running: Mutex<()>,
    /// With periodic snapshots off: the LSN of the newest `SNAPSHOT VIEWS`
    /// taken in this run. Trimming keeps the change log after it, so a
    /// restart from that snapshot stays warm.
    manual_lsn: Mutex<Option<u64>>,
    /// Recovery begun before storage opened, and since when.
    pending: Mutex<Option<(PendingRecovery, Instant)>>,
    /// Set by a recovery that replayed change-log batches (a start after a
    /// crash): the scheduler's first snapshot is then taken at once, not
    /// one interval later, so the next restart does not replay them again.
    /// Without it a server killed more often than the interval replayed
    /// a change log that grew with every restart.
    snapshot_due: AtomicBool,
}

impl Snapshots {
    /// The machinery over `store` (from [`open_store`]; None without
    /// durable storage), with `pending` recovery if it was begun already.
    pub fn new(
        store: Option<SnapshotStore>,
        metrics: SnapshotMetrics,
        pending: Option<(PendingRecovery, Instant)>,
        dataflow: Arc<Dataflow>,
        storage: Arc<Storage>,
        interval: Duration,
    ) -> Snapshots {
        let me = Snapshots {
            dataflow,
            storage,
            store,
            interval,
            metrics,
            running: Mutex::new(()),
            manual_lsn: Mutex::new(None),
            pending: Mutex::new(pending),
            snapshot_due: AtomicBool::new(false),
        };
        me.refresh_store_gauges();
        me
    }

    /// Whether periodic (and shutdown) snapshots are on.
    pub fn enabled(&self) -> bool {
        self.store.is_some() && !self.interval.is_zero()
    }

    /// Whether snapshots can be taken (durable storage), scheduled or not.
    pub fn durable(&self) -> bool {
        self.store.is_some()
    }

    fn store(&self) -> anyhow::Result<&SnapshotStore> {
        self.store
            .as_ref()
            .context("snapshots need durable storage (this server runs with --durability memory)")
    }

    /// Loads the newest verified snapshot into the dataflow and replays the
    /// change log after it (or starts cold), logging progress. Call once,
    /// before serving, or from the moment it calls `servable` (see
    /// [`Dataflow::install_snapshot`]). None without durable storage
    /// (nothing to recover).
    pub fn recover(&self, servable: &mut dyn FnMut()) -> anyhow::Result<Option<RecoveryStats>> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let m = &self.metrics;
        let mut progress = progress_reporter(m);
        let pending = self.pending.lock().take();
        let (stats, started) = match pending {
            Some((install, started)) => (
                install
                    .finish(&self.dataflow, &mut progress, servable)
                    .context("recovering view state")?,
                started,
            ),
            None => {
                let started = Instant::now();
                let stats = self
                    .dataflow
                    .recover(store, &mut progress)
                    .context("recovering view state")?;
                (stats, started)
            }
        };
        let secs = started.elapsed().as_secs_f64();
        m.recovery_progress.set(1.0);
        m.recovery_rows.set(stats.rows_restored as i64);
        m.recovery_bytes.set(stats.bytes_read as i64);
        m.recovery_epoch.set(
            stats
                .epoch
                .map_or(-1, |e| i64::try_from(e).unwrap_or(i64::MAX)),
        );
        m.recovery_nodes_restored.set(stats.nodes_restored as i64);
        m.recovery_nodes_cold.set(stats.nodes_cold as i64);
        m.recovery_replayed_batches
            .set(stats.replayed_batches as i64);
        if stats.replayed_batches > 0 {
            self.snapshot_due.store(true, Ordering::SeqCst);
        }
        m.recovery_rejected_epochs.set(stats.rejected.len() as i64);
        // Set last: a non-zero `ladle_recovery_seconds` says every
        // recovery metric above is final (a warm start serves, and /health
        // says 200, before interior state has finished installing).
        m.recovery_seconds.set(secs.max(f64::MIN_POSITIVE));
        for reason in &stats.rejected {
            tracing::warn!(%reason, "a snapshot was rejected during recovery");
        }
        match stats.epoch {
            Some(epoch) => tracing::info!(
                epoch,
                lsn = stats.lsn,
                nodes_restored = stats.nodes_restored,
                nodes_cold = stats.nodes_cold,
                rows = stats.rows_restored,
                mb = format_args!("{:.1}", stats.bytes_read as f64 / 1e6),
                replayed_batches = stats.replayed_batches,
                load_ms = stats.load.as_millis() as u64,
                replay_ms = stats.replay.as_millis() as u64,
                total_ms = (secs * 1000.0) as u64,
                "view state recovered from snapshot"
            ),
            None => tracing::info!(
                total_ms = (secs * 1000.0) as u64,
                "no usable snapshot: views start cold and fill on demand"
            ),
        }
        Ok(Some(stats))
    }

    /// Takes one snapshot now (waiting for one already running), publishes
    /// it and records metrics. Errors are logged and counted here too.
    pub fn take(&self, trigger: Trigger) -> anyhow::Result<SnapshotStats> {
        let store = self.store()?;
        let _one = self.running.lock();
        let started = Instant::now();
        let result = self.dataflow.snapshot(store);
        let m = &self.metrics;
        match &result {
            Ok(s) => {
                m.duration.observe(s.total.as_secs_f64());
                m.capture_seconds.set(s.capture.as_secs_f64());
                m.written_bytes.inc_by(s.bytes_written);
                m.taken.inc();
                m.last_epoch.set(i64::try_from(s.epoch).unwrap_or(i64::MAX));
                m.last_success.set(unix_now_secs());
                if !self.enabled() && matches!(trigger, Trigger::Statement) {
                    *self.manual_lsn.lock() = Some(s.lsn);
                }
                // Flushing the memtables retires RocksDB's write-ahead log:
                // a restart after kill -9 then replays only what was
                // written since this snapshot, as the views do, instead of
                // everything since the last memtable flush (1.07 s of a
                // 1.4 s restart with 1M rows loaded).
                let flush = Instant::now();
                match self.storage.flush() {
                    Ok(()) => m.flush_seconds.set(flush.elapsed().as_secs_f64()),
                    Err(e) => {
                        tracing::warn!(error = %e, "flushing memtables after the snapshot failed")
                    }
                }
                // The dataflow logs the publish at info; this adds the trigger.
                tracing::debug!(
                    ?trigger,
                    epoch = s.epoch,
                    lsn = s.lsn,
                    nodes = s.nodes,
                    nodes_written = s.nodes_written,
                    full_nodes = s.full_nodes,
                    rows = s.rows_written,
                    mb = format_args!("{:.1}", s.bytes_written as f64 / 1e6),
                    capture_ms = s.capture.as_millis() as u64,
                    total_ms = s.total.as_millis() as u64,
                    "snapshot published"
                );
            }
            Err(e) => {
                m.failures.inc();
                tracing::warn!(
                    ?trigger,
                    error = %e,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "snapshot failed; the previous snapshot stays in use"
                );
            }
        }
        self.refresh_store_gauges();
        Ok(result?)
    }

    /// Takes a snapshot now and hard-links every file of the snapshot
    /// directory into `into` (same layout; published files are never
    /// rewritten in place), with no snapshot or compaction running
    /// meanwhile: a consistent copy of the view state for a bootstrapping
    /// cluster node. Returns the snapshot's LSN.
    pub fn take_and_link(&self, into: &std::path::Path) -> anyhow::Result<u64> {
        let stats = self.take(Trigger::Bootstrap)?;
        let store = self.store()?;
        let _one = self.running.lock();
        link_tree(store.dir(), into)?;
        Ok(stats.lsn)
    }

    /// Merges long delta chains of the newest epoch so recovery reads a
    /// bounded number of files per node.
    fn compact_if_needed(&self) {
        let Some(store) = &self.store else { return };
        // (Not while a copy is linked for a bootstrap: `take_and_link`.)
        let _one = self.running.lock();
        let longest = store.retained().last().map_or(0, |e| e.longest_chain);
        if longest <= MAX_CHAIN_FILES {
            return;
        }
        match self.dataflow.compact_snapshots(store) {
            Ok(c) if c.nodes_compacted == 0 => {}
            Ok(c) => {
                self.metrics.compactions.inc();
                tracing::info!(
                    as_of = ?c.as_of,
                    nodes = c.nodes_compacted,
                    files_merged = c.files_merged,
                    mb = format_args!("{:.1}", c.bytes_written as f64 / 1e6),
                    skipped = c.nodes_skipped,
                    "compacted snapshot chains"
                );
            }
            Err(e) => tracing::warn!(error = %e, "snapshot compaction failed; will retry"),
        }
    }

    /// With snapshots off nothing else trims the change log: drop what no
    /// recovery can need (everything, except after a `SNAPSHOT VIEWS` of
    /// this run).
    fn trim_change_log(&self) {
        let last = self.storage.last_lsn();
        let keep_after = self.manual_lsn.lock().unwrap_or(last);
        let below = keep_after.min(last).saturating_add(1);
        match self.storage.truncate_log(below) {
            Ok(()) => self.metrics.log_trims.inc(),
            Err(e) => {
                tracing::warn!(error = %e, below, "trimming the change log failed; will retry")
            }
        }
    }

    fn refresh_store_gauges(&self) {
        let retained = self
            .store
            .as_ref()
            .map(|s| s.retained())
            .unwrap_or_default();
        let m = &self.metrics;
        m.retained_epochs.set(retained.len() as i64);
        if let Some(e) = retained.last() {
            m.bytes.set(e.bytes as i64);
            m.last_epoch.set(i64::try_from(e.epoch).unwrap_or(i64::MAX));
            m.newest_created_ms
                .set(i64::try_from(e.created_unix_ms).unwrap_or(i64::MAX));
        } else {
            m.bytes.set(0);
        }
        self.refresh_age();
    }

    fn refresh_age(&self) {
        let created_ms = self.metrics.newest_created_ms.get();
        let age = if created_ms > 0 {
            (unix_now_secs() - created_ms as f64 / 1000.0).max(0.0)
        } else {
            -1.0
        };
        self.metrics.age.set(age);
    }

    /// Starts the scheduler thread; it runs until [`Scheduler::stop`].
    pub fn start_scheduler(self: &Arc<Self>) -> anyhow::Result<Scheduler> {
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let me = self.clone();
        let thread = std::thread::Builder::new()
            .name("ladle-snapshots".into())
            .spawn(move || me.schedule(stop_rx))
            .context("starting the snapshot thread")?;
        Ok(Scheduler {
            stop: stop_tx,
            thread,
        })
    }

    fn schedule(&self, stop: mpsc::Receiver<()>) {
        let mut last_snapshot = Instant::now();
        let mut last_trim = Instant::now();
        let trim_every = trim_every();
        let tick = trim_every.clamp(Duration::from_millis(10), Duration::from_secs(1));
        loop {
            match stop.recv_timeout(tick) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Stop requested, or the server is gone.
                _ => return,
            }
            self.refresh_age();
            if self.enabled() {
                let after_replay = self.snapshot_due.swap(false, Ordering::SeqCst);
                if after_replay || last_snapshot.elapsed() >= self.interval {
                    if after_replay {
                        tracing::info!(
                            "taking a snapshot now: recovery replayed the change log, \
                             which the next restart would replay again"
                        );
                    }
                    // Failures are logged and counted inside; try again next interval.
                    let _ = self.take(Trigger::Scheduled);
                    last_snapshot = Instant::now();
                }
            } else if last_trim.elapsed() >= trim_every {
                self.trim_change_log();
                last_trim = Instant::now();
            }
            // Also after `SNAPSHOT VIEWS` epochs; cheap when nothing is due.
            self.compact_if_needed();
        }
    }
}

/// Hard-links every file under `from` into `to`, directories recreated.
fn link_tree(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            link_tree(&entry.path(), &target)?;
        } else {
            std::fs::hard_link(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The running scheduler thread.
pub struct Scheduler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Scheduler {
    /// Asks the thread to stop and waits for it (and for a snapshot it is
    /// taking) to finish.
    pub fn stop(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            tracing::error!("the snapshot thread panicked");
        }
    }
}

impl Admin for Snapshots {
    fn snapshot_now(&self) -> Result<SnapshotTaken, String> {
        let s = self
            .take(Trigger::Statement)
            .map_err(|e| format!("{e:#}"))?;
        Ok(SnapshotTaken {
            epoch: s.epoch,
            lsn: s.lsn,
            nodes: s.nodes as u64,
            nodes_written: s.nodes_written as u64,
            bytes_written: s.bytes_written,
            capture_ms: s.capture.as_millis() as u64,
            total_ms: s.total.as_millis() as u64,
        })
    }

    fn snapshots(&self) -> Result<Vec<RetainedSnapshot>, String> {
        let store = self.store().map_err(|e| e.to_string())?;
        Ok(store
            .retained()
            .into_iter()
            .map(|e| RetainedSnapshot {
                epoch: e.epoch,
                lsn: e.lsn,
                nodes: e.nodes as u64,
                files: e.files as u64,
                bytes: e.bytes,
                longest_chain: e.longest_chain as u64,
                created_unix_ms: e.created_unix_ms,
            })
            .collect())
    }
}

/// Snapshot file compression: none unless `LADLE_SNAPSHOT_COMPRESSION=lz4`
/// (measured in the README: lz4 shrinks files but slows recovery, which is
/// CPU-bound on a local disk).
fn compression_from_env() -> anyhow::Result<Compression> {
    match std::env::var("LADLE_SNAPSHOT_COMPRESSION") {
        Err(_) => Ok(Compression::None),
        Ok(v) if v.eq_ignore_ascii_case("none") || v.is_empty() => Ok(Compression::None),
        Ok(v) if v.eq_ignore_ascii_case("lz4") => Ok(Compression::Lz4),
        Ok(v) => anyhow::bail!("LADLE_SNAPSHOT_COMPRESSION must be none or lz4, not {v:?}"),
    }
}

fn unix_now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Snapshot and recovery metrics, registered in the front end's registry
/// so `/metrics` shows them with everything else.
#[derive(Clone)]
pub struct SnapshotMetrics {
    duration: Histogram,
    capture_seconds: Gauge,
    /// Memtable flush after the last snapshot (bounds WAL replay).
    flush_seconds: Gauge,
    bytes: IntGauge,
    written_bytes: IntCounter,
    last_epoch: IntGauge,
    last_success: Gauge,
    age: Gauge,
    /// Creation time of the newest retained epoch (ms); feeds `age`.
    newest_created_ms: IntGauge,
    retained_epochs: IntGauge,
    taken: IntCounter,
    failures: IntCounter,
    compactions: IntCounter,
    log_trims: IntCounter,
    recovery_seconds: Gauge,
    recovery_progress: Gauge,
    recovery_rows: IntGauge,
    recovery_bytes: IntGauge,
    recovery_epoch: IntGauge,
    recovery_nodes_restored: IntGauge,
    recovery_nodes_cold: IntGauge,
    recovery_replayed_batches: IntGauge,
    recovery_rejected_epochs: IntGauge,
}

impl SnapshotMetrics {
    pub fn new(registry: &Registry) -> anyhow::Result<SnapshotMetrics> {
        let m = SnapshotMetrics {
            duration: Histogram::with_opts(
                HistogramOpts::new(
                    "ladle_snapshot_duration_seconds",
                    "Time to take and publish one snapshot of view state",
                )
                .buckets(vec![
                    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                ]),
            )?,
            capture_seconds: Gauge::new(
                "ladle_snapshot_capture_seconds",
                "Capture phase (consistent cut) of the last snapshot",
            )?,
            flush_seconds: Gauge::new(
                "ladle_snapshot_flush_seconds",
                "Memtable flush after the last snapshot (retires RocksDB's write-ahead log)",
            )?,
            bytes: IntGauge::new(
                "ladle_snapshot_bytes",
                "On-disk bytes of the newest snapshot (all files its manifest references)",
            )?,
            written_bytes: IntCounter::new(
                "ladle_snapshot_written_bytes_total",
                "Bytes written by snapshots",
            )?,
            last_epoch: IntGauge::new("ladle_snapshot_last_epoch", "Newest published epoch")?,
            last_success: Gauge::new(
                "ladle_snapshot_last_success_timestamp_seconds",
                "Unix time of the last successful snapshot in this run",
            )?,
            age: Gauge::new(
                "ladle_snapshot_age_seconds",
                "Age of the newest snapshot (-1: none)",
            )?,
            newest_created_ms: IntGauge::new(
                "ladle_snapshot_newest_created_unix_ms",
                "Creation time of the newest retained snapshot",
            )?,
            retained_epochs: IntGauge::new(
                "ladle_snapshot_retained_epochs",
                "Snapshot epochs kept on disk",
            )?,
            taken: IntCounter::new("ladle_snapshots_total", "Snapshots published")?,
            failures: IntCounter::new("ladle_snapshot_failures_total", "Snapshots that failed")?,
            compactions: IntCounter::new(
                "ladle_snapshot_compactions_total",
                "Background merges of snapshot delta chains",
            )?,
            log_trims: IntCounter::new(
                "ladle_change_log_trims_total",
                "Change-log truncations by the scheduler while periodic snapshots are off",
            )?,
            recovery_seconds: Gauge::new(
                "ladle_recovery_seconds",
                "Time to recover view state at start-up (snapshot load and log replay)",
            )?,
            recovery_progress: Gauge::new(
                "ladle_recovery_progress_ratio",
                "Progress of the current recovery phase (0..1)",
            )?,
            recovery_rows: IntGauge::new(
                "ladle_recovery_rows",
                "Rows of view state restored from the snapshot",
            )?,
            recovery_bytes: IntGauge::new(
                "ladle_recovery_bytes",
                "Snapshot bytes read and verified at start-up",
            )?,
            recovery_epoch: IntGauge::new(
                "ladle_recovery_epoch",
                "Snapshot epoch recovered from (-1: cold start)",
            )?,
            recovery_nodes_restored: IntGauge::new(
                "ladle_recovery_nodes_restored",
                "Materialized nodes restored from the snapshot",
            )?,
            recovery_nodes_cold: IntGauge::new(
                "ladle_recovery_nodes_cold",
                "Materialized nodes that started empty (not in the snapshot)",
            )?,
            recovery_replayed_batches: IntGauge::new(
                "ladle_recovery_replayed_batches",
                "Change-log batches replayed after the snapshot",
            )?,
            recovery_rejected_epochs: IntGauge::new(
                "ladle_recovery_rejected_epochs",
                "Snapshot epochs refused at start-up (missing or corrupt files)",
            )?,
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(m.duration.clone()),
            Box::new(m.capture_seconds.clone()),
            Box::new(m.flush_seconds.clone()),
            Box::new(m.bytes.clone()),
            Box::new(m.written_bytes.clone()),
            Box::new(m.last_epoch.clone()),
            Box::new(m.last_success.clone()),
            Box::new(m.age.clone()),
            Box::new(m.newest_created_ms.clone()),
            Box::new(m.retained_epochs.clone()),
            Box::new(m.taken.clone()),
            Box::new(m.failures.clone()),
            Box::new(m.compactions.clone()),
            Box::new(m.log_trims.clone()),
            Box::new(m.recovery_seconds.clone()),
            Box::new(m.recovery_progress.clone()),
            Box::new(m.recovery_rows.clone()),
            Box::new(m.recovery_bytes.clone()),
            Box::new(m.recovery_epoch.clone()),
            Box::new(m.recovery_nodes_restored.clone()),
            Box::new(m.recovery_nodes_cold.clone()),
            Box::new(m.recovery_replayed_batches.clone()),
            Box::new(m.recovery_rejected_epochs.clone()),
        ];
        for c in collectors {
            registry.register(c)?;
        }
        m.recovery_epoch.set(-1);
        m.age.set(-1.0);
        Ok(m)
    }
}
