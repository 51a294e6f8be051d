//! Asynchronous propagation: committed batches are queued by the commit
//! observer and propagated by a worker thread, off the writers' path.
//!
//! ```text
//!  commit (commit lock held): write + fsync -> on_commit: push (lsn, deltas) -> ack the writers
//!  worker: snapshot of storage at X -> wait until every batch <= X is pushed
//!          -> graph lock: propagate the batches (A, X] as ONE merged batch, reading
//!             base tables from that snapshot, the touched domains in parallel on
//!             the domain pool (graph/domains.rs) -> applied = X -> wake waiting readers
//! ```
//!
//! Why one merged batch against the snapshot: joins look their other input
//! up in storage, so a batch must be propagated against the storage state
//! right after it. Several batches merged in LSN order against the state
//! after the last one is exact (the graph undoes the batch's unprocessed
//! deltas from base reads); recovery replays the change log the same way.
//!
//! Consistency points:
//! - [`CommitObserver::settle`]: `Storage::exclusive` and DDL call it with
//!   the commit lock held; the backlog is propagated there and then (storage
//!   cannot move), so code inside `exclusive` still sees storage and the
//!   graph agree: view installs, locked fills, snapshot cuts, schema
//!   changes.
//! - Read-your-writes (invariant 3): [`Propagation::wait_for_writes`] makes a read
//!   wait until the graph has applied the reader's last write (bounded; a
//!   timed-out wait settles the backlog itself).
//! - Fills outside the locks read the latest storage, so they start only
//!   when the graph has applied every committed batch of the view's tables
//!   (per-table counters, [`TableCounters`]).
//! - Backpressure: past [`MAX_BACKLOG`] queued batches the committing
//!   leader propagates the backlog itself, inside the commit lock (as a
//!   synchronous engine would), so memory stays bounded when writes outrun
//!   the worker.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering as AO};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ladle_common::{Lsn, TableDeltas, TableId};
use ladle_storage::{CommitObserver, SnapshotReads, Storage};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::config::DataflowConfig;
use crate::graph::{BaseReads, Graph};

/// Queued batches beyond which the committing leader propagates itself.
pub(crate) const MAX_BACKLOG: usize = 256;

/// How long a read waits for the worker to apply its writes before it
/// settles the backlog itself (under the commit lock).
const READ_WAIT: Duration = Duration::from_secs(2);

/// Per base table: batches committed and batches propagated that touched
/// it, and the LSN of the newest such commit.
#[derive(Default)]
pub(crate) struct TableCounters {
    /// Bumped inside the commit lock when the batch is queued.
    pub committed: AtomicU64,
    /// Bumped under the graph lock when the batch is propagated.
    pub applied: AtomicU64,
    /// LSN of the newest committed batch touching the table.
    pub last_lsn: AtomicU64,
}

impl TableCounters {
    /// Storage and the graph agree on this table (as of the reads).
    pub fn caught_up(&self) -> bool {
        // Committed first: the counters only grow and applied <= committed,
        // so equal values mean they were equal when `applied` was read.
        let committed = self.committed.load(AO::SeqCst);
        self.applied.load(AO::SeqCst) == committed
    }
}

#[derive(Default)]
struct Backlog {
    /// Committed batches not yet propagated, in LSN order.
    batches: VecDeque<(Lsn, Vec<TableDeltas>)>,
    /// LSN of the newest batch queued (drains do not lower it).
    pushed: Lsn,
    shutdown: bool,
}

/// The queue between commits and the propagation worker.
#[derive(Default)]
pub(crate) struct Pipeline {
    backlog: Mutex<Backlog>,
    /// Signalled when a batch is queued, and on shutdown.
    pushed_cv: Condvar,
    /// LSN of the newest batch the graph has applied (written under the
    /// graph lock, read without it).
    applied: AtomicU64,
    /// Guards nothing; `applied_cv` waits on it.
    applied_lock: Mutex<()>,
    /// Signalled when `applied` moves.
    applied_cv: Condvar,
}

impl Pipeline {
    /// Starts in agreement with storage at `lsn` (the graph has applied
    /// everything so far: its state is computed from storage on demand).
    pub fn start_at(&self, lsn: Lsn) {
        self.backlog.lock().pushed = lsn;
        self.applied.store(lsn, AO::SeqCst);
    }

    pub fn applied(&self) -> Lsn {
        self.applied.load(AO::SeqCst)
    }

    /// Queued batches and the LSN distance between queued and applied.
    pub fn lag(&self) -> (usize, u64) {
        let b = self.backlog.lock();
        (b.batches.len(), b.pushed.saturating_sub(self.applied()))
    }

    pub fn shut_down(&self) {
        self.backlog.lock().shutdown = true;
        self.pushed_cv.notify_all();
    }

    /// Waits until the graph has applied `lsn`, at most `timeout`.
    pub fn wait_applied(&self, lsn: Lsn, timeout: Duration) -> bool {
        if self.applied() >= lsn {
            return true;
        }
        let deadline = Instant::now() + timeout;
        let mut guard = self.applied_lock.lock();
        while self.applied() < lsn {
            if self.applied_cv.wait_until(&mut guard, deadline).timed_out() {
                return self.applied() >= lsn;
            }
        }
        true
    }
}

/// What propagation owns and shares with the engine: the graph, the queue
/// of committed batches, the domain workers and the per-table counters.
/// The engine holds it; the commit observer and the worker hold it weakly,
/// so they stop when the engine is dropped.
pub(crate) struct Propagation {
    pub(crate) storage: Arc<Storage>,
    pub(crate) graph: Arc<Mutex<Graph>>,
    /// Committed batches waiting for the propagation worker.
    pub(crate) pipeline: Arc<Pipeline>,
    /// Workers a batch's domains propagate on (see `graph/domains.rs`).
    domain_pool: rayon::ThreadPool,
    /// Fewer row deltas than this in a batch: no parallel propagation
    /// (`DataflowConfig::parallel_min_deltas`).
    parallel_min_deltas: usize,
    /// The view-state memory limit, enforced after each propagation.
    memory_limit: usize,
    /// Per base table with a view: batches committed and propagated. A
    /// fill outside the locks starts only when the two agree and is
    /// installed only if `committed` did not move.
    table_commits: RwLock<HashMap<TableId, Arc<TableCounters>>>,
}

/// The storage commit observer: queues every batch for the worker.
pub(crate) struct Observer(pub Weak<Propagation>);

impl CommitObserver for Observer {
    fn on_commit(&self, lsn: Lsn, changes: Vec<TableDeltas>) {
        self.queue(vec![(lsn, changes)]);
    }

    /// The run is queued under one lock, so the worker, whose snapshot
    /// holds all of it, never propagates part of it against that state.
    fn on_commit_run(&self, entries: Vec<(Lsn, Vec<TableDeltas>)>) {
        self.queue(entries);
    }

    fn settle(&self) {
        if let Some(inner) = self.0.upgrade() {
            let mut g = inner.graph.lock();
            inner.apply_backlog(&mut g, None);
        }
    }
}

impl Observer {
    /// Queues committed batches (in LSN order, storage at the last) for
    /// the worker; past [`MAX_BACKLOG`] propagates the backlog here.
    fn queue(&self, entries: Vec<(Lsn, Vec<TableDeltas>)>) {
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        for (lsn, changes) in &entries {
            inner.count_commit(*lsn, changes);
        }
        let backlog_full = {
            let mut b = inner.pipeline.backlog.lock();
            for (lsn, changes) in entries {
                b.pushed = lsn;
                b.batches.push_back((lsn, changes));
            }
            b.batches.len() >= MAX_BACKLOG
        };
        inner.pipeline.pushed_cv.notify_all();
        if backlog_full {
            // Still inside the commit lock: storage is at the last batch
            // queued, and every batch up to it is queued.
            let mut g = inner.graph.lock();
            inner.apply_backlog(&mut g, None);
        }
    }
}

impl Propagation {
    pub(crate) fn new(
        storage: Arc<Storage>,
        graph: Arc<Mutex<Graph>>,
        domain_pool: rayon::ThreadPool,
        config: &DataflowConfig,
    ) -> Propagation {
        Propagation {
            storage,
            graph,
            pipeline: Arc::new(Pipeline::default()),
            domain_pool,
            parallel_min_deltas: config.parallel_min_deltas,
            memory_limit: config.memory_limit,
            table_commits: RwLock::new(HashMap::new()),
        }
    }

    /// The counters of each of `tables`, created for tables seen the first
    /// time (a view over them is being installed).
    pub(crate) fn counters(&self, tables: &[TableId]) -> Vec<Arc<TableCounters>> {
        let mut all = self.table_commits.write();
        tables
            .iter()
            .map(|t| all.entry(*t).or_default().clone())
            .collect()
    }

    /// Bumps the committed counters of the tables `changes` touches (inside
    /// the commit lock).
    fn count_commit(&self, lsn: Lsn, changes: &[TableDeltas]) {
        self.each_counter(changes, |n| {
            n.committed.fetch_add(1, AO::SeqCst);
            n.last_lsn.store(lsn, AO::SeqCst);
        });
    }

    /// Bumps the applied counters for a merged batch about to be propagated
    /// (under the graph lock).
    fn count_applied(&self, changes: &[TableDeltas]) {
        self.each_counter(changes, |n| {
            n.applied.fetch_add(1, AO::SeqCst);
        });
    }

    /// Runs `f` on the counters of each table entry of `changes` that has
    /// views.
    fn each_counter(&self, changes: &[TableDeltas], f: impl Fn(&TableCounters)) {
        let counters = self.table_commits.read();
        for c in changes {
            if let Some(n) = counters.get(&c.table) {
                f(n);
            }
        }
    }

    /// Propagates the queued batches up to `src`'s LSN (reading base tables
    /// from `src`), or all of them reading the latest storage when `src` is
    /// `None` (the caller holds the commit lock). Called under the graph
    /// lock.
    pub(crate) fn apply_backlog(&self, g: &mut Graph, src: Option<&SnapshotReads<'_>>) {
        let p = &self.pipeline;
        let (batches, upto) = {
            let mut b = p.backlog.lock();
            let upto = src.map_or(b.pushed, |s| s.lsn());
            let mut taken = Vec::new();
            while b.batches.front().is_some_and(|(lsn, _)| *lsn <= upto) {
                if let Some(batch) = b.batches.pop_front() {
                    taken.push(batch);
                }
            }
            (taken, upto)
        };
        if batches.is_empty() {
            return;
        }
        let merged: Vec<TableDeltas> = batches.into_iter().flat_map(|(_, c)| c).collect();
        self.count_applied(&merged);
        let latest = self.storage.clone();
        let src: &dyn BaseReads = match src {
            Some(s) => s,
            None => &*latest,
        };
        let result =
            g.on_commit_parallel(&merged, src, &self.domain_pool, self.parallel_min_deltas);
        if let Err(e) = result {
            // A failed propagation leaves views unreliable: drop their state
            // so the next reads recompute from storage.
            tracing::error!("dataflow propagation failed: {e}");
            g.clear_all();
        }
        if upto > p.applied() {
            p.applied.store(upto, AO::SeqCst);
        }
        {
            // Taken so a reader between its check and its wait is not missed.
            let _guard = p.applied_lock.lock();
            p.applied_cv.notify_all();
        }
        g.evict(self.memory_limit);
    }

    /// Whether the views have applied every write to the tables behind
    /// `counters` up to `lsn` (what [`Propagation::wait_for_writes`] waits for).
    pub(crate) fn writes_applied(&self, counters: &[Arc<TableCounters>], lsn: Lsn) -> bool {
        self.pipeline.applied() >= newest_commit(counters).min(lsn)
    }

    /// Blocks until the graph reflects every write with LSN <= `lsn` to one
    /// of `tables` (read-your-writes). Bounded: after [`READ_WAIT`] the
    /// backlog is propagated by the caller under the commit lock.
    pub(crate) fn wait_for_writes(&self, counters: &[Arc<TableCounters>], lsn: Lsn) {
        if self.writes_applied(counters, lsn) {
            return;
        }
        let needed = newest_commit(counters).min(lsn);
        if !self.pipeline.wait_applied(needed, READ_WAIT) {
            tracing::warn!(
                lsn = needed,
                applied = self.pipeline.applied(),
                "propagation is slow; the read settles the backlog itself"
            );
            self.settle();
        }
    }

    /// Runs `f` under the graph lock with the graph caught up to a fresh
    /// snapshot of storage, which `f` reads base tables from: storage and
    /// the graph agree for `f` as inside [`Storage::exclusive`], but commits
    /// go on meanwhile (queued for the worker), so a long `f` (a cold fill
    /// of a 40k-row view) does not stall every writer.
    ///
    /// The snapshot is taken under the graph lock: nothing newer than it can
    /// be applied before `f` runs (taken before the lock, the worker could
    /// apply a newer snapshot's batches first, and under steady writes it
    /// usually did). `Ok(None)`, without running `f`, at shutdown.
    pub(crate) fn at_snapshot<R>(
        &self,
        f: impl FnOnce(&mut Graph, &SnapshotReads<'_>) -> R,
    ) -> ladle_storage::Result<Option<R>> {
        let pipeline = &self.pipeline;
        let mut g = self.graph.lock();
        self.storage.with_snapshot(|snap| {
            {
                // The snapshot may hold a batch whose `on_commit` has not
                // queued it yet (it does so right after the write, inside
                // the same commit, without the graph lock): wait for it.
                let mut b = pipeline.backlog.lock();
                while b.pushed < snap.lsn() && !b.shutdown {
                    pipeline
                        .pushed_cv
                        .wait_for(&mut b, Duration::from_millis(10));
                }
                if b.shutdown {
                    return None;
                }
            }
            self.apply_backlog(&mut g, Some(snap));
            Some(f(&mut g, snap))
        })
    }

    /// Propagates every queued batch now, under the commit lock.
    pub(crate) fn settle(&self) {
        self.storage.exclusive(|| ());
    }
}

/// LSN of the newest commit touching any of the tables behind `counters`.
pub(crate) fn newest_commit(counters: &[Arc<TableCounters>]) -> Lsn {
    counters
        .iter()
        .map(|c| c.last_lsn.load(AO::SeqCst))
        .max()
        .unwrap_or(0)
}

/// Test hook: `LADLE_PROPAGATION_DELAY_MS` makes the worker wait that long
/// before each round, so tests can tell reads that wait for propagation
/// from reads that happen to come after it.
fn test_delay() -> Option<Duration> {
    let ms: u64 = std::env::var("LADLE_PROPAGATION_DELAY_MS")
        .ok()?
        .parse()
        .ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// The propagation worker: runs until the engine is dropped.
pub(crate) fn run_worker(propagation: Weak<Propagation>, pipeline: Arc<Pipeline>) {
    let delay = test_delay();
    loop {
        {
            let mut b = pipeline.backlog.lock();
            while b.batches.is_empty() && !b.shutdown {
                pipeline.pushed_cv.wait(&mut b);
            }
            if b.shutdown {
                return;
            }
        }
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        let Some(inner) = propagation.upgrade() else {
            return;
        };
        if let Err(e) = inner.at_snapshot(|_, _| ()) {
            // Could not take a snapshot: propagate under the commit lock.
            tracing::error!("propagation snapshot failed: {e}; settling under the commit lock");
            inner.settle();
        }
    }
}
