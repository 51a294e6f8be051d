//! The engine: view catalog, prepared queries, the commit observer, reads
//! and misses.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AO};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use ladle_common::{coerce, ColumnSchema, Lsn, Row, TableDeltas, TableId, Value};
use ladle_storage::Storage;
use parking_lot::{Mutex, RwLock};
use sqlparser::ast;

use crate::expr::Expr;
use crate::graph::{Graph, NodeId};
use crate::ops::reader::{cmp_rows, Rows};
use crate::ops::ReaderState;
use crate::plan::range::RangeIndex;
use crate::plan::{Constant, Count, Planned, PlannedView, Source};
use crate::planner::normalize::{normalize, ColumnKinds, Normalized, Shape};
use crate::planner::Planner;
use crate::propagation::{newest_commit, run_worker, Observer, Propagation, TableCounters};
use crate::rows::ResultRows;
use crate::{DataflowConfig, DataflowError, OutputColumn, Result, ViewStats};

const VIEW_META: &str = "dataflow/view/";
/// Every installed view, so a restart rebuilds the same graph (and snapshots
/// restore into it): `<prefix><hash of the view signature>` -> postcard
/// [`InstalledView`].
const INSTALLED_META: &str = "dataflow/installed/";

/// The catalog record of an installed view.
#[derive(serde::Serialize, serde::Deserialize)]
struct InstalledView {
    database: String,
    /// The SQL of a query the view was planned for.
    sql: String,
    signature: String,
}

fn installed_key(signature: &str) -> String {
    format!("{INSTALLED_META}{}", crate::graph::stable_id(signature))
}

/// An installed view.
pub(crate) struct View {
    name: String,
    query: String,
    spec: PlannedView,
    /// The stored-row columns `spec.output` returns when every output is a
    /// plain column (the common case): copied without evaluating anything.
    output_columns: Option<Arc<[usize]>>,
    reader: Arc<ReaderState>,
    node: NodeId,
    /// The graph computes values for the view (see
    /// [`Graph::computes_values`]): its reads check for overflow markers.
    computes: bool,
    tables: Vec<TableId>,
    /// The counters of each of `tables` (see `Inner::table_commits`).
    commits: Vec<Arc<TableCounters>>,
    /// The storage LSN when the view was installed: `commits` record
    /// every commit after it (a table's counters may be created with the
    /// view, knowing nothing of earlier commits).
    installed_lsn: Lsn,
    /// The reader's ancestors detached from the graph, for fills outside
    /// the locks; `None` if the view must fill under them (`Graph::detach`).
    detached: OnceLock<Option<Graph>>,
    /// Read since the previous idle sweep (see [`Dataflow::drop_unused_views`]).
    used: AtomicBool,
    dropped: AtomicBool,
    /// Keys some read is filling now (see [`Inner::fill`]).
    filling: KeysFilling,
}

/// The keys of one view being filled, so that concurrent misses on a key
/// wait for one fill instead of each doing it (a cold start's popular
/// keys: every page misses the same front page at once).
#[derive(Default)]
struct KeysFilling {
    /// Normalized keys (see `ReaderState::norm`).
    keys: Mutex<HashSet<Vec<Value>>>,
    done: parking_lot::Condvar,
}

/// Releases the keys a fill claimed, also when it fails or panics.
struct FillClaim<'a> {
    filling: &'a KeysFilling,
    keys: Vec<Vec<Value>>,
}

impl Drop for FillClaim<'_> {
    fn drop(&mut self) {
        let mut keys = self.filling.keys.lock();
        for k in &self.keys {
            keys.remove(k);
        }
        self.filling.done.notify_all();
    }
}

/// How often a read waiting for another read's fill of the same key checks
/// whether it was interrupted (KILL, a client gone, max_execution_time).
const FILL_WAIT: Duration = Duration::from_millis(200);

/// How long a read waits for another read's fill of the same key before
/// filling it itself. The claim ends with the fill (done, failed or
/// unwound), so this only guards against a fill that never ends: a short
/// bound made every waiter on a loaded server (a cold start, exactly when
/// fills are slow) repeat the fill it was waiting for.
const FILL_WAIT_MAX: Duration = Duration::from_secs(30);

enum Target {
    View(Arc<View>),
    Constant(Constant),
}

pub(crate) struct Prepared {
    engine: Weak<Inner>,
    database: String,
    query: ast::Query,
    /// The view and where each of its parameter slots comes from.
    target: RwLock<(Target, Arc<Vec<Source>>)>,
    columns: Vec<OutputColumn>,
    pub user_params: usize,
}

pub(crate) struct Inner {
    pub(crate) storage: Arc<Storage>,
    pub(crate) config: DataflowConfig,
    pub(crate) graph: Arc<Mutex<Graph>>,
    /// Held while a snapshot is taken: snapshots are serialized.
    pub(crate) snapshots: Mutex<SnapshotTracker>,
    /// signature -> view
    views: RwLock<HashMap<String, Arc<View>>>,
    /// (database, lower name) -> SQL text
    named: RwLock<HashMap<(String, String), String>>,
    next_id: std::sync::atomic::AtomicU64,
    /// The commit queue, its worker's state and the per-table counters
    /// (see `propagation.rs`); shares `storage` and `graph`.
    pub(crate) propagation: Arc<Propagation>,
    fill_stats: FillStats,
    /// When the engine started: the origin of the millisecond clocks below.
    started: Instant,
    /// Milliseconds between idle sweeps; 0 = never.
    idle_sweep_ms: AtomicU64,
    /// When the previous idle sweep ran (ms since `started`).
    last_sweep_ms: AtomicU64,
}

/// How long a view may go unread before it is dropped (between this and
/// twice this: views are swept at this interval and dropped when no query
/// read them since the previous sweep). See
/// [`Dataflow::set_view_idle_timeout`].
pub const DEFAULT_VIEW_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// How reader misses were filled (see `Inner::fill`).
#[derive(Default)]
struct FillStats {
    /// Computed outside the locks and installed.
    unlocked: AtomicU64,
    /// Computed outside the locks but discarded: a write to one of the
    /// view's tables committed meanwhile.
    conflicts: AtomicU64,
    /// Computed under the commit and graph locks.
    locked: AtomicU64,
}

/// What the previous snapshot left behind, so the next one can be
/// incremental (see `snapshot.rs`). Its mutex also serializes snapshots.
#[derive(Default)]
pub(crate) struct SnapshotTracker {
    /// The epoch the nodes' changed-key sets are relative to, and the stable
    /// ids of the nodes it holds.
    pub(crate) last: Option<(u64, HashSet<String>)>,
}

/// The view engine. One per server.
pub struct Dataflow {
    pub(crate) inner: Arc<Inner>,
    /// The propagation worker (see `propagation.rs`), joined on drop.
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Dataflow {
    fn drop(&mut self) {
        self.inner.propagation.pipeline.shut_down();
        if let Some(w) = self.worker.lock().take() {
            if w.join().is_err() {
                tracing::error!("the propagation worker panicked");
            }
        }
    }
}

fn bad(e: crate::expr::EvalError) -> DataflowError {
    DataflowError::from(e)
}

impl Dataflow {
    /// Builds the engine over `storage`, registers it as the commit
    /// observer, and reinstalls views persisted in the catalog.
    pub fn new(storage: Arc<Storage>, config: DataflowConfig) -> Result<Arc<Dataflow>> {
        let domain_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.domain_threads)
            .thread_name(|i| format!("ladle-domain-{i}"))
            .stack_size(crate::THREAD_STACK_BYTES)
            .build()
            .map_err(|e| DataflowError::Internal(format!("starting the domain workers: {e}")))?;
        let graph = Arc::new(Mutex::new(Graph::new(storage.clone())));
        let propagation = Arc::new(Propagation::new(
            storage.clone(),
            graph.clone(),
            domain_pool,
            &config,
        ));
        let inner = Arc::new(Inner {
            propagation,
            graph,
            snapshots: Mutex::new(Default::default()),
            storage: storage.clone(),
            config,
            views: RwLock::new(HashMap::new()),
            named: RwLock::new(HashMap::new()),
            next_id: std::sync::atomic::AtomicU64::new(1),
            fill_stats: FillStats::default(),
            started: Instant::now(),
            idle_sweep_ms: AtomicU64::new(DEFAULT_VIEW_IDLE_TIMEOUT.as_millis() as u64),
            last_sweep_ms: AtomicU64::new(0),
        });
        for (k, v) in storage.list_meta(VIEW_META)? {
            let rest = &k[VIEW_META.len()..];
            if let Some((db, name)) = rest.split_once('/') {
                inner.named.write().insert(
                    (db.to_string(), name.to_string()),
                    String::from_utf8_lossy(&v).into_owned(),
                );
            }
        }
        // Registered under the commit lock, so the pipeline starts exactly
        // where storage is and no batch goes unqueued.
        storage.exclusive(|| {
            let observer = Observer(Arc::downgrade(&inner.propagation));
            storage.set_commit_observer(Arc::new(observer));
            inner.propagation.pipeline.start_at(storage.last_lsn());
        });
        let worker = {
            let propagation = Arc::downgrade(&inner.propagation);
            let pipeline = inner.propagation.pipeline.clone();
            std::thread::Builder::new()
                .name("ladle-propagate".into())
                .stack_size(crate::THREAD_STACK_BYTES)
                .spawn(move || run_worker(propagation, pipeline))
                .map_err(|e| {
                    DataflowError::Internal(format!("spawning the propagation worker: {e}"))
                })?
        };
        let dataflow = Arc::new(Dataflow {
            inner,
            worker: Mutex::new(Some(worker)),
        });
        dataflow.inner.reinstall_views()?;
        Ok(dataflow)
    }

    /// CREATE [OR REPLACE] VIEW: a named query usable in FROM.
    pub fn create_view(
        &self,
        database: &str,
        name: &str,
        query: &ast::Query,
        or_replace: bool,
    ) -> Result<()> {
        let key = (database.to_ascii_lowercase(), name.to_ascii_lowercase());
        if !or_replace
            && (self.inner.named.read().contains_key(&key)
                || self.inner.storage.table(database, name).is_some())
        {
            return Err(DataflowError::ViewExists(name.to_string()));
        }
        // Validate: the view must plan.
        let sql = query.to_string();
        {
            let named = self.inner.named.read();
            let p = Planner {
                storage: &self.inner.storage,
                database,
                views: &named,
                depth: 0,
            };
            p.plan(query)?;
        }
        self.inner
            .storage
            .put_meta(&format!("{VIEW_META}{}/{}", key.0, key.1), sql.as_bytes())?;
        self.inner.named.write().insert(key, sql);
        if or_replace {
            self.inner.invalidate_all();
        }
        Ok(())
    }

    pub fn drop_view(&self, database: &str, name: &str, if_exists: bool) -> Result<()> {
        let key = (database.to_ascii_lowercase(), name.to_ascii_lowercase());
        if self.inner.named.write().remove(&key).is_none() {
            if if_exists {
                return Ok(());
            }
            return Err(DataflowError::UnknownView(format!("{database}.{name}")));
        }
        self.inner
            .storage
            .delete_meta(&format!("{VIEW_META}{}/{}", key.0, key.1))?;
        self.inner.invalidate_all();
        Ok(())
    }

    /// Names of the named views (CREATE VIEW) in `database`.
    pub fn named_views(&self, database: &str) -> Vec<String> {
        let db = database.to_ascii_lowercase();
        let mut v: Vec<String> = self
            .inner
            .named
            .read()
            .keys()
            .filter(|k| k.0 == db)
            .map(|k| k.1.clone())
            .collect();
        v.sort();
        v
    }

    /// SHOW VIEWS.
    pub fn view_stats(&self) -> Vec<ViewStats> {
        let views: Vec<Arc<View>> = self.inner.views.read().values().cloned().collect();
        let mut out: Vec<ViewStats> = views
            .iter()
            .map(|v| {
                let (keys, rows) = v.reader.stats();
                ViewStats {
                    name: v.name.clone(),
                    query: v.query.clone(),
                    // A range column follows the key: reads take the rows
                    // between their bounds from each key's ordered rows.
                    key_columns: v
                        .spec
                        .key_names
                        .iter()
                        .cloned()
                        .chain(v.spec.range.iter().map(|r| format!("{} (range)", r.name)))
                        .collect(),
                    cached_keys: keys,
                    cached_rows: rows,
                    memory_bytes: v.reader.bytes() as u64,
                    hits: v.reader.hits.load(AO::Relaxed),
                    misses: v.reader.misses.load(AO::Relaxed),
                    upqueries: v.reader.upqueries.load(AO::Relaxed),
                    evicted_keys: v.reader.evicted_keys.load(AO::Relaxed),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// EXPLAIN GRAPH: the dataflow serving `query`, as text. A view not
    /// installed yet is not installed: it is lowered into the graph to show
    /// which existing nodes it would share, described, and removed again
    /// under the same graph lock (no delta ever sees it, nothing is
    /// recorded in the catalog).
    pub fn explain_graph(&self, database: &str, query: &ast::Query) -> Result<String> {
        let target = match self.inner.installed_target(database, query)? {
            Some(t) => t,
            None => return self.inner.explain_uninstalled(database, query),
        };
        match &target {
            Target::Constant(_) => Ok("Constant (no FROM): evaluated directly\n".into()),
            Target::View(v) => {
                let g = self.inner.graph.lock();
                Ok(format!(
                    "view {} keyed by {:?}{}\n{}",
                    v.name,
                    v.spec.key_names,
                    range_note(&v.spec),
                    g.describe(v.node)
                ))
            }
        }
    }

    /// Drops every view no query read since the previous call (or since
    /// it was installed), and its catalog record; returns how many. A
    /// prepared query over a dropped view reinstalls it on its next execute
    /// (and a new prepare does too), starting cold. Called every idle
    /// timeout by the reads themselves (see [`Dataflow::set_view_idle_timeout`]).
    pub fn drop_unused_views(&self) -> usize {
        self.inner.drop_unused_views()
    }

    /// Views unread for about `timeout` (between it and twice it) are
    /// dropped, checked by the reads; `None` keeps every view. The default
    /// is [`DEFAULT_VIEW_IDLE_TIMEOUT`].
    pub fn set_view_idle_timeout(&self, timeout: Option<Duration>) {
        let ms = timeout.map_or(0, |t| (t.as_millis() as u64).max(1));
        self.inner.idle_sweep_ms.store(ms, AO::Relaxed);
    }

    /// Schema changes: views over the table are rebuilt or removed.
    pub fn table_changed(&self, table: TableId) {
        let inner = &self.inner;
        let doomed = inner.storage.exclusive(|| {
            let mut g = inner.graph.lock();
            let mut views = inner.views.write();
            let doomed: Vec<String> = views
                .iter()
                .filter(|(_, v)| v.tables.contains(&table))
                .map(|(k, _)| k.clone())
                .collect();
            for k in &doomed {
                if let Some(v) = views.remove(k) {
                    v.dropped.store(true, AO::SeqCst);
                    g.uninstall(v.node);
                }
            }
            g.forget_schema(table);
            doomed
        });
        inner.forget_installed(&doomed);
    }

    /// Bytes of view state currently held.
    pub fn memory_bytes(&self) -> usize {
        self.inner.graph.lock().state_bytes()
    }

    /// Times the memory limit cleared an interior node's state (and
    /// everything downstream of it), since start; reader keys evicted are
    /// counted per view ([`ViewStats::evicted_keys`]).
    pub fn interior_evictions(&self) -> u64 {
        self.inner.graph.lock().interior_evictions
    }

    /// The view-state limit (`--memory-limit`).
    pub fn memory_limit(&self) -> usize {
        self.inner.config.memory_limit
    }

    /// How reader misses were filled so far: (outside the locks, discarded
    /// because a write to the view's tables raced them, under the locks).
    pub fn fill_stats(&self) -> (u64, u64, u64) {
        let s = &self.inner.fill_stats;
        (
            s.unlocked.load(AO::Relaxed),
            s.conflicts.load(AO::Relaxed),
            s.locked.load(AO::Relaxed),
        )
    }

    /// How many domains the graph has: parts below the base tables that
    /// share no state, propagated in parallel (`DataflowConfig::domain_threads`).
    pub fn domain_count(&self) -> usize {
        self.inner.graph.lock().domains().len()
    }

    /// The LSN of the newest batch every view reflects (writes are
    /// propagated asynchronously after they are acknowledged).
    pub fn applied_lsn(&self) -> Lsn {
        self.inner.propagation.pipeline.applied()
    }

    /// Propagation lag: committed batches waiting for the worker, and the
    /// LSN distance between the newest commit and what views reflect.
    pub fn propagation_lag(&self) -> (usize, u64) {
        self.inner.propagation.pipeline.lag()
    }

    /// Propagates every committed batch now (under the commit lock), so
    /// every view reflects every acknowledged write.
    pub fn settle(&self) {
        self.inner.propagation.settle();
    }
}

impl Inner {
    /// The installed view `bind` would choose for `query`, without
    /// installing anything; `None` if it is not installed.
    fn installed_target(&self, database: &str, query: &ast::Query) -> Result<Option<Target>> {
        Ok(self.installed(database, query)?.map(|(t, _, _)| t))
    }

    /// What `bind` would give for `query` if its view is installed already
    /// (the first [`Shape`] whose view is): nothing is planned or
    /// installed, so this never blocks.
    fn installed(
        &self,
        database: &str,
        query: &ast::Query,
    ) -> Result<Option<(Target, Vec<Source>, usize)>> {
        let col_kinds = self.column_kinds(database, query);
        for shape in Shape::PREFERENCE {
            let norm = normalize(database, query, shape, &col_kinds)?;
            let Some(v) = self.views.read().get(&norm.signature).cloned() else {
                continue;
            };
            if lists_readable(&norm, Some(&v.spec)) {
                return Ok(Some((Target::View(v), norm.sources, norm.user_params)));
            }
        }
        Ok(None)
    }

    /// The columns of the base tables `query` names, by kind (see
    /// `normalize`).
    fn column_kinds(&self, database: &str, query: &ast::Query) -> ColumnKinds {
        let mut out = ColumnKinds::default();
        let _ = ast::visit_relations(query, |name| {
            let table = match name.0.as_slice() {
                [t] => self.storage.table(database, &t.value),
                [d, t] => self.storage.table(&d.value, &t.value),
                _ => None,
            };
            for c in table.iter().flat_map(|t| t.columns.iter()) {
                let kind = if c.ty.is_text() {
                    &mut out.text
                } else if numeric_key(&c.ty) {
                    &mut out.numeric
                } else {
                    &mut out.other
                };
                kind.insert(c.name.to_ascii_lowercase());
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        out
    }

    fn plan(&self, database: &str, q: &ast::Query) -> Result<Planned> {
        let named = self.named.read();
        Planner {
            storage: &self.storage,
            database,
            views: &named,
            depth: 0,
        }
        .plan(q)
    }

    /// EXPLAIN GRAPH of a view that is not installed (see
    /// [`Dataflow::explain_graph`]); the view is planned as `bind` would.
    fn explain_uninstalled(&self, database: &str, query: &ast::Query) -> Result<String> {
        let col_kinds = self.column_kinds(database, query);
        let mut failure = None;
        let mut planned = None;
        for shape in Shape::PREFERENCE {
            let norm = normalize(database, query, shape, &col_kinds)?;
            match self.plan(database, &norm.query) {
                Ok(Planned::View(v)) if !lists_readable(&norm, Some(&v)) => {}
                Ok(p) => {
                    planned = Some(p);
                    break;
                }
                Err(e) => failure = Some(e),
            }
        }
        let planned = match (planned, failure) {
            (Some(p), _) => p,
            (None, Some(e)) => return Err(e),
            (None, None) => {
                return Err(DataflowError::Internal(
                    "no parameterization of the query planned".into(),
                ))
            }
        };
        let spec = match planned {
            Planned::Constant(_) => return Ok("Constant (no FROM): evaluated directly\n".into()),
            Planned::View(v) => v,
        };
        let text = self.graph.lock().describe_uninstalled(
            &spec.plan,
            spec.key.clone(),
            spec.reader_order(),
        )?;
        Ok(format!(
            "view not installed (EXPLAIN GRAPH does not install it) keyed by {:?}{}\n{}",
            spec.key_names,
            range_note(&spec),
            text
        ))
    }

    fn drop_unused_views(&self) -> usize {
        let doomed = self.drop_views_where(|v| !v.used.swap(false, AO::Relaxed));
        if !doomed.is_empty() {
            tracing::info!(views = doomed.len(), "dropped views no query used lately");
        }
        doomed.len()
    }

    /// Drops the view `p` reads now (see [`Dataflow::discard`]).
    pub(crate) fn discard_view(&self, p: &Prepared) {
        if let Target::View(v) = &p.target.read().0 {
            self.drop_views_where(|x| std::ptr::eq(x, &**v));
        }
    }

    /// Uninstalls the views `doomed` picks, and forgets their catalog
    /// records; returns their signatures. A read of one meanwhile sees it
    /// dropped and plans again.
    fn drop_views_where(&self, mut doomed: impl FnMut(&View) -> bool) -> Vec<String> {
        let dropped = self.storage.exclusive(|| {
            let mut g = self.graph.lock();
            let mut views = self.views.write();
            let picked: Vec<String> = views
                .iter()
                .filter(|(_, v)| doomed(v))
                .map(|(k, _)| k.clone())
                .collect();
            for k in &picked {
                if let Some(v) = views.remove(k) {
                    v.dropped.store(true, AO::SeqCst);
                    g.uninstall(v.node);
                }
            }
            picked
        });
        self.forget_installed(&dropped);
        dropped
    }

    /// Runs [`Inner::drop_unused_views`] if an idle timeout passed since
    /// the previous sweep (one reader wins the race to run it).
    fn sweep_if_due(&self) {
        let every = self.idle_sweep_ms.load(AO::Relaxed);
        if every == 0 {
            return;
        }
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.last_sweep_ms.load(AO::Relaxed);
        if now.saturating_sub(last) < every {
            return;
        }
        if self
            .last_sweep_ms
            .compare_exchange(last, now, AO::Relaxed, AO::Relaxed)
            .is_ok()
        {
            self.drop_unused_views();
        }
    }

    fn invalidate_all(&self) {
        self.drop_views_where(|_| true);
    }

    /// Deletes the catalog records of views no longer installed (a prepared
    /// query rebinding later records its view again).
    fn forget_installed(&self, signatures: &[String]) {
        for sig in signatures {
            if let Err(e) = self.storage.delete_meta(&installed_key(sig)) {
                tracing::warn!("forgetting an installed view failed: {e}");
            }
        }
    }

    /// Reinstalls every view recorded in the catalog (on start), so the
    /// graph, and the snapshot ids of its nodes, match the previous run.
    /// Records that no longer plan are deleted.
    fn reinstall_views(&self) -> Result<()> {
        let records = self.storage.list_meta(INSTALLED_META)?;
        let mut installed = 0usize;
        for (key, bytes) in records {
            let reinstalled = postcard::from_bytes::<InstalledView>(&bytes)
                .map_err(|e| DataflowError::Internal(format!("bad view record: {e}")))
                .and_then(|rec| {
                    let q = crate::planner::parse_query(&rec.sql)?;
                    self.bind(&rec.database, &q, None)?;
                    Ok(self.views.read().contains_key(&rec.signature))
                });
            match reinstalled {
                Ok(true) => installed += 1,
                Ok(false) => {
                    tracing::info!("a recorded view now plans differently; forgetting it");
                    self.storage.delete_meta(&key)?;
                }
                Err(e) => {
                    tracing::info!("a recorded view no longer plans ({e}); forgetting it");
                    self.storage.delete_meta(&key)?;
                }
            }
        }
        if installed > 0 {
            tracing::info!(views = installed, "reinstalled views from the catalog");
        }
        Ok(())
    }

    pub(crate) fn prepare(
        self: &Arc<Self>,
        database: &str,
        query: &ast::Query,
    ) -> Result<Prepared> {
        let bound = self.bind(database, query, Some(query))?;
        Ok(self.prepared(database, query, bound))
    }

    /// [`Inner::prepare`] if the query's view is installed already; `None`
    /// (nothing planned or installed) otherwise.
    pub(crate) fn prepare_installed(
        self: &Arc<Self>,
        database: &str,
        query: &ast::Query,
    ) -> Result<Option<Prepared>> {
        Ok(self
            .installed(database, query)?
            .map(|bound| self.prepared(database, query, bound)))
    }

    fn prepared(
        self: &Arc<Self>,
        database: &str,
        query: &ast::Query,
        (target, sources, user_params): (Target, Vec<Source>, usize),
    ) -> Prepared {
        let columns = match &target {
            Target::View(v) => v.spec.columns.clone(),
            Target::Constant(c) => c.columns.clone(),
        };
        Prepared {
            engine: Arc::downgrade(self),
            database: database.to_string(),
            query: query.clone(),
            target: RwLock::new((target, Arc::new(sources))),
            columns,
            user_params,
        }
    }

    /// The view for `query`, in the first [`Shape`] (most shared first)
    /// whose view plans: `col IN (...)` shares the view of `col = ?` when
    /// that view is keyed by `col` (otherwise the list stays a filter or
    /// its own multi-slot key), and literal range bounds share the view of
    /// their prepared form unless that does not plan.
    /// `origin`: the query to record in the catalog for views installed now
    /// (None while reinstalling recorded views).
    fn bind(
        &self,
        database: &str,
        query: &ast::Query,
        origin: Option<&ast::Query>,
    ) -> Result<(Target, Vec<Source>, usize)> {
        let col_kinds = self.column_kinds(database, query);
        let mut tried: Vec<String> = Vec::new();
        let mut failure = None;
        for shape in Shape::PREFERENCE {
            let norm = normalize(database, query, shape, &col_kinds)?;
            if tried.contains(&norm.signature) {
                continue;
            }
            match self.target(database, &norm.query, &norm.signature, origin) {
                Ok(t) if lists_readable(&norm, view_spec(&t)) => {
                    return Ok((t, norm.sources, norm.user_params));
                }
                Ok(_) => {}
                Err(e) => failure = Some(e),
            }
            tried.push(norm.signature);
        }
        Err(failure.unwrap_or_else(|| {
            DataflowError::Internal("no parameterization of the query planned".into())
        }))
    }

    fn target(
        &self,
        database: &str,
        q: &ast::Query,
        signature: &str,
        origin: Option<&ast::Query>,
    ) -> Result<Target> {
        if let Some(v) = self.views.read().get(signature) {
            return Ok(Target::View(v.clone()));
        }
        let spec = match self.plan(database, q)? {
            Planned::Constant(c) => return Ok(Target::Constant(c)),
            Planned::View(v) => *v,
        };
        let mut tables = Vec::new();
        spec.plan.tables(&mut tables);
        let (view, installed) = self.storage.exclusive(|| -> Result<(Arc<View>, bool)> {
            let mut g = self.graph.lock();
            let mut views = self.views.write();
            if let Some(v) = views.get(signature) {
                return Ok((v.clone(), false));
            }
            let (node, reader) = g.install(
                &spec.plan,
                spec.key.clone(),
                spec.reader_order(),
                &format!("{database}\u{1}{signature}"),
            )?;
            let id = self.next_id.fetch_add(1, AO::Relaxed);
            let commits = self.propagation.counters(&tables);
            let v = Arc::new(View {
                name: format!("q_{id}"),
                query: signature
                    .split('\u{1}')
                    .nth(1)
                    .unwrap_or_default()
                    .to_string(),
                output_columns: spec
                    .output
                    .iter()
                    .map(|e| match e {
                        Expr::Column(i) => Some(*i),
                        _ => None,
                    })
                    .collect::<Option<Vec<usize>>>()
                    .map(Arc::from),
                computes: g.computes_values(node),
                installed_lsn: self.storage.last_lsn(),
                spec,
                reader,
                node,
                tables,
                commits,
                detached: OnceLock::new(),
                filling: KeysFilling::default(),
                used: AtomicBool::new(true),
                dropped: AtomicBool::new(false),
            });
            views.insert(signature.to_string(), v.clone());
            Ok((v, true))
        })?;
        if let (true, Some(origin)) = (installed, origin) {
            let record = InstalledView {
                database: database.to_string(),
                sql: origin.to_string(),
                signature: signature.to_string(),
            };
            // Not fatal: the view works; only a restart would start it anew.
            let saved = postcard::to_stdvec(&record)
                .map_err(|e| DataflowError::Internal(e.to_string()))
                .and_then(|b| Ok(self.storage.put_meta(&installed_key(signature), &b)?));
            if let Err(e) = saved {
                tracing::warn!("recording installed view failed: {e}");
            }
        }
        Ok(Target::View(view))
    }

    /// Fills a reader hole by an upquery, consistently with the deltas
    /// (invariant 4).
    ///
    /// First outside the locks, so a miss stalls neither writers nor other
    /// misses: note the commit counters of the view's tables, pull on a
    /// detached stateless copy of the view's ancestors (reading the latest
    /// storage, and the aggregate partitions the real graph has filled,
    /// each under a brief graph lock), then take the commit and graph locks
    /// and install the result (the reader key and the aggregate partitions
    /// computed on the way) only if no counter moved and the partitions read
    /// are still filled. Storage applies a batch before `on_commit` bumps
    /// the counters (under the graph lock, before propagating), all inside
    /// the commit lock, so unchanged counters mean every read saw exactly
    /// the batches bumped before the fill started (propagated before any of
    /// its graph reads), the state the graph reflects at install, and no
    /// delta for the key was dropped meanwhile. Otherwise, or after repeated
    /// conflicts, it fills under the locks.
    ///
    /// `keys` are filled together: one detached copy, one pass under the
    /// locks, one eviction (a page's IN list misses many keys at once).
    /// Returns each key's rows, in order.
    ///
    /// A key another read is filling is not filled again: this read waits
    /// (up to [`FILL_WAIT_MAX`]) and takes the rows that fill installed.
    fn fill(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        let mut out: Vec<Option<Rows>> = vec![None; keys.len()];
        for round in 0..2 {
            let norm: Vec<Vec<Value>> = keys.iter().map(|k| v.reader.norm(k)).collect();
            let (mine, theirs): (Vec<usize>, Vec<usize>) = {
                let mut filling = v.filling.keys.lock();
                (0..keys.len())
                    .filter(|&i| out[i].is_none())
                    .partition(|&i| filling.insert(norm[i].clone()))
            };
            if !mine.is_empty() {
                let _claim = FillClaim {
                    filling: &v.filling,
                    keys: mine.iter().map(|&i| norm[i].clone()).collect(),
                };
                let holes: Vec<&[Value]> = mine.iter().map(|&i| keys[i]).collect();
                for (&i, rows) in mine.iter().zip(self.fill_now(v, &holes)?) {
                    out[i] = Some(rows);
                }
            }
            if theirs.is_empty() {
                break;
            }
            {
                let give_up = Instant::now() + FILL_WAIT_MAX;
                let mut filling = v.filling.keys.lock();
                while theirs.iter().any(|&i| filling.contains(&norm[i])) {
                    if v.filling.done.wait_for(&mut filling, FILL_WAIT).timed_out() {
                        crate::interrupt::check()?;
                        if Instant::now() >= give_up {
                            break;
                        }
                    }
                }
            }
            for &i in &theirs {
                out[i] = v.reader.get(keys[i]);
            }
            if round == 1 {
                // Still holes (evicted at once, or a slow fill): fill them
                // here without waiting again.
                let rest: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
                let holes: Vec<&[Value]> = rest.iter().map(|&i| keys[i]).collect();
                for (&i, rows) in rest.iter().zip(self.fill_now(v, &holes)?) {
                    out[i] = Some(rows);
                }
                break;
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Fills `keys` now (see [`Inner::fill`]). What the view's expressions
    /// warn while computing its rows is not the reading statement's (see
    /// [`crate::expr::without_warnings`]).
    fn fill_now(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        let _budget = crate::interrupt::watch_memory(statement_memory(&self.config));
        crate::expr::without_warnings(|| self.fill_now_warning_free(v, keys))
    }

    fn fill_now_warning_free(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let detached = v.detached.get_or_init(|| {
            let g = self.graph.lock();
            if v.dropped.load(AO::SeqCst) {
                return None;
            }
            let parent = g.nodes[v.node].parents[0];
            g.detach(parent, self.graph.clone())
        });
        if let Some(template) = detached {
            for _attempt in 0..2 {
                // An unlocked fill needs the worker to have applied every
                // batch of the view's tables; it usually has, or soon will.
                self.propagation
                    .pipeline
                    .wait_applied(newest_commit(&v.commits), Duration::from_millis(100));
                let mark = crate::interrupt::charged();
                let started = Instant::now();
                if let Some(rows) = self.fill_unlocked(v, template, keys)? {
                    return Ok(rows);
                }
                // The lost attempt's rows are gone: a view of a few hundred
                // MB must not fail with 1041 because a commit raced it.
                crate::interrupt::give_back_to(mark);
                self.fill_stats.conflicts.fetch_add(1, AO::Relaxed);
                if started.elapsed() >= LONG_FILL {
                    // A long fill lost to a write will lose again to the
                    // next one: doing it twice more (once more unlocked,
                    // then locked) tripled the Lobsters front page's cold
                    // fill (1.2 s each) while every reader of it waited.
                    break;
                }
            }
        }
        self.fill_locked(v, keys)
    }

    /// The rows for `key` as a transaction reads them: a pull on a
    /// detached, stateless copy of the view's ancestors whose base reads
    /// apply the transaction's overlay, over the latest committed state
    /// (under the commit lock, so every base read sees the same state) or
    /// over the transaction's read view (no lock: the view is one state by
    /// itself). Nothing is cached.
    fn read_overlay(&self, v: &View, key: &[Value], tx: TxRead<'_>) -> Result<Rows> {
        let pull = || {
            let mut g = {
                let g = self.graph.lock();
                if v.dropped.load(AO::SeqCst) {
                    return Err(DataflowError::ViewDropped);
                }
                let parent = g.nodes[v.node].parents[0];
                g.detach_with(parent, true, None).ok_or_else(|| {
                    DataflowError::Unsupported(
                        "reading this view inside a transaction that wrote to its tables, \
                         or under REPEATABLE READ"
                            .into(),
                    )
                })?
            };
            g.set_overlay(tx.overlay);
            let root = g.detached_root();
            let rows = match tx.snapshot {
                Some(view) => g.pull_from(view, root, &v.spec.key, key)?,
                None => g.pull(root, &v.spec.key, key)?,
            };
            Ok(Rows::from(v.reader.sorted(rows)))
        };
        let _budget = crate::interrupt::watch_memory(statement_memory(&self.config));
        // Computing the view's rows: its warnings are not the statement's
        // (see `crate::expr::without_warnings`).
        crate::expr::without_warnings(|| match tx.snapshot {
            Some(_) => pull(),
            None => self.storage.exclusive(pull),
        })
    }

    /// One optimistic fill of `keys` (see [`Inner::fill`]); `None` on a
    /// conflict.
    fn fill_unlocked(
        &self,
        v: &View,
        template: &Graph,
        keys: &[&[Value]],
    ) -> Result<Option<Vec<Rows>>> {
        let before: Vec<u64> = v
            .commits
            .iter()
            .map(|c| c.committed.load(AO::SeqCst))
            .collect();
        // Storage reads below see the latest state: the graph must reflect
        // it too for the view's tables (aggregate partitions are read from
        // the graph), and nothing may commit to them until the install.
        if !v.commits.iter().all(|c| c.caught_up()) {
            return Ok(None);
        }
        let mut g = template.copy_detached();
        let root = g.detached_root();
        let mut pulled = Vec::with_capacity(keys.len());
        for key in keys {
            // Counted as done, whether or not a conflict discards it.
            v.reader.upqueries.fetch_add(1, AO::Relaxed);
            match g.pull(root, &v.spec.key, key) {
                Ok(rows) => pulled.push(rows),
                Err(_) if v.dropped.load(AO::SeqCst) => return Err(DataflowError::ViewDropped),
                Err(e) => return Err(e),
            }
        }
        let fills = g.take_fills();
        let read = g.take_read();
        self.storage.exclusive(|| {
            let mut g = self.graph.lock();
            if v.dropped.load(AO::SeqCst) {
                return Err(DataflowError::ViewDropped);
            }
            let moved = v
                .commits
                .iter()
                .zip(&before)
                .any(|(c, b)| c.committed.load(AO::SeqCst) != *b);
            if moved || !g.still_filled(&read) {
                return Ok(None);
            }
            // Only holes are filled: a key filled meanwhile (by another
            // read) keeps its rows, which equal these.
            g.install_fills(fills);
            let out = keys
                .iter()
                .zip(pulled)
                .map(|(key, rows)| {
                    v.reader.get(key).unwrap_or_else(|| {
                        self.fill_stats.unlocked.fetch_add(1, AO::Relaxed);
                        v.reader.fill(key, rows)
                    })
                })
                .collect();
            g.evict(self.config.memory_limit);
            Ok(Some(out))
        })
    }

    /// Fills reader holes under the commit and graph locks.
    fn fill_locked(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        self.storage.exclusive(|| {
            let mut g = self.graph.lock();
            if v.dropped.load(AO::SeqCst) {
                return Err(DataflowError::ViewDropped);
            }
            let parent = g.nodes[v.node].parents[0];
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                if let Some(rows) = v.reader.get(key) {
                    out.push(rows);
                    continue;
                }
                self.fill_stats.locked.fetch_add(1, AO::Relaxed);
                v.reader.upqueries.fetch_add(1, AO::Relaxed);
                let rows = g.pull(parent, &v.spec.key, key)?;
                out.push(v.reader.fill(key, rows));
            }
            g.evict(self.config.memory_limit);
            Ok(out)
        })
    }
}

/// An unlocked fill that took this long and lost its race to a write is
/// not retried unlocked: the next attempt runs under the locks.
const LONG_FILL: Duration = Duration::from_millis(20);

/// The least a statement may materialize, whatever `--memory-limit`: tiny
/// limits (tests of constant eviction) still answer ordinary queries.
const MIN_STATEMENT_MEMORY: usize = 16 << 20;

/// What one statement's reads may materialize (see
/// [`crate::interrupt::watch_memory`]): half the view-state limit, so view
/// state plus a statement's rows stay within 1.5 times it.
fn statement_memory(config: &DataflowConfig) -> usize {
    (config.memory_limit / 2).max(MIN_STATEMENT_MEMORY)
}

impl Prepared {
    pub fn columns(&self) -> &[OutputColumn] {
        &self.columns
    }

    pub fn execute(&self, params: &[Value], after: Lsn) -> Result<ResultRows> {
        self.execute_with(params, None, after)
    }

    /// The base tables the query currently reads (empty for a constant).
    pub fn tables(&self) -> Vec<TableId> {
        match &self.target.read().0 {
            Target::View(v) => v.tables.clone(),
            Target::Constant(_) => Vec::new(),
        }
    }

    /// `overlay`: an open transaction's read (its own writes as row deltas,
    /// over the latest state or its read view); the answer is then
    /// computed by upqueries on a detached copy of the view and never
    /// cached.
    /// `after`: the read reflects at least every write to the view's tables
    /// with an LSN up to it (read-your-writes).
    pub fn execute_with(
        &self,
        params: &[Value],
        overlay: Option<TxRead<'_>>,
        after: Lsn,
    ) -> Result<ResultRows> {
        if params.len() != self.user_params {
            return Err(DataflowError::ParamCount {
                expected: self.user_params,
                got: params.len(),
            });
        }
        let engine = self
            .engine
            .upgrade()
            .ok_or_else(|| DataflowError::Internal("engine shut down".into()))?;
        for _attempt in 0..3 {
            let (target, sources) = self.target_now();
            let (slots, lists) = bind_slots(&sources, params);
            let view = match target {
                Target::Constant(c) => return constant(&c, &slots).map(ResultRows::from),
                Target::View(v) => v,
            };
            if numeric_param_on_text_key(&view, &sources, &slots, &lists) {
                // A number bound to `text_col = ?` compares numerically
                // (`'01' = 1`), which no lookup by the string finds: the
                // query runs with the values inlined, where the number
                // against the text column is a filter (see `normalize`).
                let inlined =
                    engine.prepare(&self.database, &inline_params(&self.query, params))?;
                return inlined.execute_with(&[], overlay, after);
            }
            if view.dropped.load(AO::SeqCst) {
                let (t, sources, _) =
                    engine.bind(&self.database, &self.query, Some(&self.query))?;
                *self.target.write() = (t, Arc::new(sources));
                continue;
            }
            mark_used(&view);
            engine.sweep_if_due();
            let overlay = match overlay {
                // A snapshot read of tables nobody committed to since the
                // snapshot (as the view's counters, complete since its
                // install, tell): the view's cache holds that state, once it has
                // applied every write up to the snapshot. Kept only if
                // still true after the read (a commit meanwhile, even one
                // a fill saw, sends it to the snapshot path).
                Some(TxRead {
                    overlay: [],
                    snapshot: Some(snap),
                }) if view.installed_lsn <= snap.lsn()
                    && newest_commit(&view.commits) <= snap.lsn() =>
                {
                    engine
                        .propagation
                        .wait_for_writes(&view.commits, snap.lsn());
                    let cached = read(&engine, &view, &slots, &lists, None, OnMiss::Fill);
                    match cached {
                        Ok(Some(rows)) if newest_commit(&view.commits) <= snap.lsn() => {
                            return Ok(rows)
                        }
                        Err(e) if !matches!(e, DataflowError::ViewDropped) => return Err(e),
                        _ => overlay,
                    }
                }
                other => other,
            };
            if overlay.is_none() {
                engine.propagation.wait_for_writes(&view.commits, after);
            }
            match read(&engine, &view, &slots, &lists, overlay, OnMiss::Fill) {
                Err(DataflowError::ViewDropped) => continue,
                Ok(Some(rows)) => return Ok(rows),
                Ok(None) => {
                    return Err(DataflowError::Internal(
                        "a filling read gave no answer".into(),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        Err(DataflowError::Internal("view kept being dropped".into()))
    }

    /// The answer if it can be given without blocking: every key it reads
    /// is cached and the view has applied the writes `after` asks for.
    /// `None` when the read would have to wait, fill a key (an upquery) or
    /// re-plan; the caller then runs [`Prepared::execute`] where blocking is
    /// fine. Lets a server answer cache hits on its network threads, with
    /// no hand-off to a blocking pool.
    pub fn read_cached(&self, params: &[Value], after: Lsn) -> Option<Result<ResultRows>> {
        if params.len() != self.user_params {
            return None;
        }
        let engine = self.engine.upgrade()?;
        let (target, sources) = self.target_now();
        let (slots, lists) = bind_slots(&sources, params);
        let view = match target {
            Target::Constant(c) => return Some(constant(&c, &slots).map(ResultRows::from)),
            Target::View(v) => v,
        };
        if view.dropped.load(AO::SeqCst)
            || numeric_param_on_text_key(&view, &sources, &slots, &lists)
            || !engine.propagation.writes_applied(&view.commits, after)
        {
            return None;
        }
        mark_used(&view);
        read(&engine, &view, &slots, &lists, None, OnMiss::GiveUp).transpose()
    }

    /// The current plan and where its parameter slots come from.
    fn target_now(&self) -> (Target, Arc<Vec<Source>>) {
        let t = self.target.read();
        let target = match &t.0 {
            Target::Constant(c) => Target::Constant(c.clone()),
            Target::View(v) => Target::View(v.clone()),
        };
        (target, t.1.clone())
    }
}

/// The value of each parameter slot, and the elements of the slots bound to
/// IN lists (the slot itself holds the list's first element).
fn bind_slots(sources: &[Source], params: &[Value]) -> (Vec<Value>, Vec<(usize, Vec<Value>)>) {
    let value = |s: &Source| match s {
        Source::User(i) => params.get(*i).cloned().unwrap_or(Value::Null),
        Source::Literal(v) => v.clone(),
        Source::List(_) => Value::Null,
    };
    let mut lists: Vec<(usize, Vec<Value>)> = Vec::new();
    let slots = sources
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Source::List(items) => {
                let vals: Vec<Value> = items.iter().map(value).collect();
                let first = vals.first().cloned().unwrap_or(Value::Null);
                lists.push((i, vals));
                first
            }
            other => value(other),
        })
        .collect();
    (slots, lists)
}

/// Marks a view as read (the idle sweep drops views nobody reads).
fn mark_used(view: &View) {
    // Checked first: a store on every read would bounce the line between
    // cores.
    if !view.used.load(AO::Relaxed) {
        view.used.store(true, AO::Relaxed);
    }
}

/// How a read inside a transaction sees the tables: `overlay` (the
/// transaction's own writes, row deltas per table in order) on top of the
/// latest committed state, or of `snapshot` when the transaction reads one
/// point in time (REPEATABLE READ).
#[derive(Clone, Copy)]
pub(crate) struct TxRead<'a> {
    pub overlay: &'a [TableDeltas],
    pub snapshot: Option<&'a ladle_storage::ReadView>,
}

/// What a read does about a key its view does not hold.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnMiss {
    /// Fill it (an upquery; may block).
    Fill,
    /// Give up: the read answers `None`.
    GiveUp,
}

/// Whether a caller's parameter bound to a text key column is a number.
fn numeric_param_on_text_key(
    view: &View,
    sources: &[Source],
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
) -> bool {
    let number = |v: &Value| {
        matches!(
            v,
            Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_)
        )
    };
    let spec = &view.spec;
    spec.key_slots.iter().enumerate().any(|(i, key_slots)| {
        spec.key_types.get(i).is_some_and(|t| t.is_text())
            && key_slots.iter().any(|&s| match sources.get(s) {
                Some(Source::User(_)) => slots.get(s).is_some_and(number),
                Some(Source::List(items)) => {
                    items.iter().any(|x| matches!(x, Source::User(_)))
                        && lists
                            .iter()
                            .any(|(slot, vals)| *slot == s && vals.iter().any(number))
                }
                _ => false,
            })
    })
}

/// `query` with its `?` placeholders replaced, in text order, by `params`
/// as literals.
fn inline_params(query: &ast::Query, params: &[Value]) -> ast::Query {
    let mut q = query.clone();
    let mut next = params.iter();
    let _ = ast::visit_expressions_mut(&mut q, |e| {
        if matches!(e, ast::Expr::Value(ast::Value::Placeholder(p)) if p == "?") {
            if let Some(v) = next.next() {
                *e = crate::value_expr(v);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    q
}

fn constant(c: &Constant, slots: &[Value]) -> Result<Vec<Row>> {
    if let Some(f) = &c.filter {
        if !f.eval_bool(&[], slots).map_err(bad)? {
            return Ok(vec![]);
        }
    }
    Ok(vec![c
        .exprs
        .iter()
        .map(|e| e.eval_params(&[], slots))
        .collect::<Result<Row, _>>()
        .map_err(bad)?])
}

fn count(c: &Option<Count>, slots: &[Value]) -> Result<Option<usize>> {
    Ok(match c {
        None => None,
        Some(Count::Const(n)) => Some(*n as usize),
        Some(Count::Slot(s)) => match slots.get(*s) {
            Some(v) => match v.as_i64() {
                Some(i) if i >= 0 => Some(i as usize),
                _ => match v {
                    Value::Text(t) => Some(
                        t.trim()
                            .parse::<usize>()
                            .map_err(|_| DataflowError::BadArgument("LIMIT".into()))?,
                    ),
                    _ => {
                        return Err(DataflowError::BadArgument(
                            "LIMIT must be a non-negative integer".into(),
                        ))
                    }
                },
            },
            None => None,
        },
    })
}

/// Whether `spec`'s view reads every collapsed IN list of `norm`: as a
/// key, or as its range index's equality narrowed per element (else the
/// list would be read as a one-value filter).
fn lists_readable(norm: &Normalized, spec: Option<&PlannedView>) -> bool {
    let key_slots = spec.map_or(&[][..], |s| &s.key_slots[..]);
    let list_slot = spec.and_then(|s| s.range.as_ref()?.list_slot);
    norm.sources.iter().enumerate().all(|(i, s)| {
        !matches!(s, Source::List(_))
            || key_slots.iter().any(|k| k[..] == [i])
            || list_slot == Some(i)
    })
}

/// The plan of `t`'s view (none for a constant).
fn view_spec(t: &Target) -> Option<&PlannedView> {
    match t {
        Target::View(v) => Some(&v.spec),
        Target::Constant(_) => None,
    }
}

/// The rows of `got` (one key's, in the reader's order) that `filter`
/// keeps under any of `variants` (the slots, once per IN-list element),
/// each once and in the reader's order: the element's rows are found by
/// `range`, and the spans of all elements merged before filtering.
fn listed_rows<'r>(
    got: &'r Rows,
    range: &RangeIndex,
    filter: &Expr,
    variants: &[Vec<Value>],
) -> Result<Vec<&'r Row>> {
    let mut spans: Vec<(usize, usize)> = variants
        .iter()
        .map(|slots| range.narrow(got, slots))
        .filter(|(start, end)| start < end)
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut out = Vec::new();
    for (start, end) in merged {
        for r in got.range(start, end) {
            for slots in variants {
                if filter.eval_bool(r, slots).map_err(bad)? {
                    out.push(r);
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// EXPLAIN's note on a view's range parameters (empty without any).
fn range_note(spec: &PlannedView) -> String {
    match &spec.range {
        Some(r) => format!(
            ", range {} read from each key's rows ordered by {}",
            r.describe(),
            r.name
        ),
        None => String::new(),
    }
}

/// The label of an ENUM whose (1-based) index is `n`; `None` for no
/// label's index.
fn enum_label_at(labels: &[String], n: f64) -> Option<Value> {
    if n.fract() != 0.0 || n < 1.0 {
        return None;
    }
    labels.get(n as usize - 1).map(Value::text)
}

fn numeric_key(t: &ladle_common::SqlType) -> bool {
    use ladle_common::SqlType;
    matches!(
        t,
        SqlType::Int { .. }
            | SqlType::Year
            | SqlType::Decimal { .. }
            | SqlType::Float
            | SqlType::Double
    )
}

/// Reads a view; `lists` gives the elements of key slots bound to IN lists.
/// `None` only with [`OnMiss::GiveUp`], when a key is not cached. A value
/// that overflowed when the view computed it fails the read with its 1690,
/// as MySQL fails the query that evaluates it.
fn read(
    engine: &Inner,
    v: &View,
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
    overlay: Option<TxRead<'_>>,
    on_miss: OnMiss,
) -> Result<Option<ResultRows>> {
    let rows = read_rows(engine, v, slots, lists, overlay, on_miss)?;
    if let (true, Some(rows)) = (v.computes, &rows) {
        for row in rows.iter() {
            if let Some(m) = row.iter().find_map(crate::expr::out_of_range_in) {
                return Err(DataflowError::OutOfRange(m.to_string()));
            }
        }
    }
    Ok(rows)
}

/// [`read`] without the overflow check.
fn read_rows(
    engine: &Inner,
    v: &View,
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
    overlay: Option<TxRead<'_>>,
    on_miss: OnMiss,
) -> Result<Option<ResultRows>> {
    let spec = &v.spec;
    // Key values, coerced to the key columns' types.
    let mut keys: Vec<Vec<Value>> = vec![vec![]];
    for (i, slot_list) in spec.key_slots.iter().enumerate() {
        let col = ColumnSchema::new("", spec.key_types[i].clone());
        let coll = spec
            .key
            .get(i)
            .and_then(|&k| spec.plan.colls.get(k))
            .copied()
            .unwrap_or_default();
        let mut vals: Vec<Value> = Vec::new();
        let raws = slot_list
            .iter()
            .flat_map(|s| match lists.iter().find(|l| l.0 == *s) {
                Some(l) => l.1.clone(),
                None => vec![slots.get(*s).cloned().unwrap_or(Value::Null)],
            });
        for raw in raws {
            // An ENUM compared with a number compares its label's index
            // (`e = 2` finds the second label), as in MySQL.
            if let (ladle_common::SqlType::Enum(labels), Some(n)) =
                (&spec.key_types[i], raw.as_f64())
            {
                if let Some(label) = enum_label_at(labels, n) {
                    if !vals.contains(&label) {
                        vals.push(label);
                    }
                }
                continue;
            }
            // A string compared with a number column compares as a number
            // (`'1abc'` and `'01'` equal 1, `'abc'` 0): look that number up.
            let raw = match &raw {
                Value::Text(_) | Value::Bytes(_) if numeric_key(&spec.key_types[i]) => {
                    crate::expr::string_as_number(&raw)
                }
                // A datetime string compared with a temporal column: what
                // follows the value (a `+00:00` offset) is ignored, as
                // MariaDB does (with a warning).
                Value::Text(t)
                    if matches!(
                        spec.key_types[i],
                        ladle_common::SqlType::Date
                            | ladle_common::SqlType::DateTime { .. }
                            | ladle_common::SqlType::Timestamp { .. }
                    ) =>
                {
                    match ladle_common::parse_datetime_prefix(t) {
                        Some(dt) => Value::DateTime(dt),
                        None => raw,
                    }
                }
                _ => raw,
            };
            // Coerce to the column's type for the lookup, but only when that
            // loses nothing: `id = 1.5` matches no integer.
            if let Ok(x) = coerce(&raw, &col) {
                let exact = crate::expr::compare(&raw, &x, ladle_common::Collation::GeneralCi)
                    == Some(std::cmp::Ordering::Equal);
                // Elements equal under the key's collation are read once:
                // `IN (1, 1)` returns each row once.
                let dup = vals
                    .iter()
                    .any(|y| crate::expr::compare(y, &x, coll) == Some(std::cmp::Ordering::Equal));
                if !x.is_null() && exact && !dup {
                    vals.push(x);
                }
            }
        }
        let mut next = Vec::new();
        for k in &keys {
            for val in &vals {
                let mut k2 = k.clone();
                k2.push(val.clone());
                next.push(k2);
            }
        }
        keys = next;
    }
    // The keys' cached results, then borrowed rows: a read copies only the
    // rows it returns (a top-k over a large key used to copy all of them).
    let mut found: Vec<Option<Rows>> = Vec::with_capacity(keys.len());
    for k in &keys {
        found.push(match overlay {
            Some(o) => Some(engine.read_overlay(v, k, o)?),
            None => v.reader.get(k),
        });
    }
    let missing: Vec<usize> = (0..keys.len()).filter(|&i| found[i].is_none()).collect();
    if !missing.is_empty() && on_miss == OnMiss::GiveUp {
        return Ok(None);
    }
    // Counted once the read is sure to answer: a read that gave up is
    // retried, and counted, by a filling one.
    if overlay.is_none() {
        let hits = (keys.len() - missing.len()) as u64;
        v.reader.hits.fetch_add(hits, AO::Relaxed);
        v.reader.misses.fetch_add(missing.len() as u64, AO::Relaxed);
    }
    if !missing.is_empty() {
        let holes: Vec<&[Value]> = missing.iter().map(|&i| &keys[i][..]).collect();
        for (i, rows) in missing.iter().zip(engine.fill(v, &holes)?) {
            found[*i] = Some(rows);
        }
    }
    let results: Vec<Rows> = found.into_iter().flatten().collect();
    debug_assert_eq!(results.len(), keys.len(), "every key read or filled");
    let offset = count(&spec.offset, slots)?.unwrap_or(0);
    let limit = count(&spec.limit, slots)?;
    // A plain read shares the reader's rows (see `rows.rs`).
    let plain = spec.read_filter.is_none()
        && spec.finish.is_none()
        && (keys.len() <= 1 || (spec.order.is_empty() && !spec.dedup))
        && (spec.empty_default.is_none() || results.iter().all(|r| !r.is_empty()))
        && !keys.is_empty();
    if let (true, Some(cols)) = (plain, &v.output_columns) {
        return Ok(Some(ResultRows::shared(
            results,
            cols.clone(),
            offset,
            limit,
        )));
    }
    let project = |r: &Row| -> Result<Row> {
        match &v.output_columns {
            Some(cols) => Ok(cols
                .iter()
                .map(|&i| r.get(i).cloned().unwrap_or(Value::Null))
                .collect()),
            None => spec
                .output
                .iter()
                .map(|e: &Expr| e.eval_params(r, slots))
                .collect::<Result<Row, _>>()
                .map_err(bad),
        }
    };
    if let ([got], None, None) = (&results[..], &spec.read_filter, &spec.finish) {
        if spec.empty_default.is_none() || !got.is_empty() {
            // One key, outputs computed per row: only the page is read (by
            // index, O(log n) to reach the OFFSET).
            let start = offset.min(got.len());
            let end = start + (got.len() - start).min(limit.unwrap_or(usize::MAX));
            return got
                .range(start, end)
                .map(project)
                .collect::<Result<Vec<Row>>>()
                .map(|rows| Some(rows.into()));
        }
    }
    let mut rows: Vec<Cow<'_, Row>> = Vec::new();
    if keys.is_empty() {
        // `col = NULL`: no rows match; an aggregate without GROUP BY still
        // returns its one row.
        if let Some(d) = &spec.empty_default {
            rows.push(Cow::Borrowed(d));
        }
    }
    // One key read in the order the result needs (its ORDER BY starts with
    // the range column, ascending, or it has none): the rows inside the
    // range are filtered as they come and the read stops at OFFSET + LIMIT
    // (`id > ? ORDER BY id LIMIT n` reads n rows, not the rest of the key).
    let stop_at = match (&spec.range, limit) {
        (Some(r), Some(l))
            if keys.len() == 1
                && spec.finish.is_none()
                && spec.empty_default.is_none()
                && !spec.dedup
                && r.leads(&spec.order) =>
        {
            Some(offset.saturating_add(l))
        }
        _ => None,
    };
    // An IN list on the range index's equality (`story_id IN (...)` on a
    // view keyed by `user_id`): the slots once per element, each narrowing
    // the key's rows to that element's; a row is kept once if any
    // element's filter holds.
    let listed: Option<Vec<Vec<Value>>> = spec.range.as_ref().and_then(|r| {
        let slot = r.list_slot?;
        let (_, elements) = lists.iter().find(|l| l.0 == slot)?;
        let variants = elements.iter().map(|e| {
            let mut s = slots.to_vec();
            s[slot] = e.clone();
            s
        });
        Some(variants.collect())
    });
    // DISTINCT merges rows equal under their columns' collations.
    let mut dedup_seen: std::collections::HashSet<Vec<Value>> = std::collections::HashSet::new();
    for got in &results {
        if got.is_empty() {
            if let Some(d) = &spec.empty_default {
                rows.push(Cow::Borrowed(d));
            }
        }
        if let (Some(variants), Some(range), Some(f)) = (&listed, &spec.range, &spec.read_filter) {
            for r in listed_rows(got, range, f, variants)? {
                if stop_at.is_some_and(|n| rows.len() >= n) {
                    break;
                }
                rows.push(Cow::Borrowed(r));
            }
            continue;
        }
        // Range parameters: only the rows between the bounds (the filter
        // below still checks each).
        let (start, end) = match &spec.range {
            Some(r) => r.narrow(got, slots),
            None => (0, got.len()),
        };
        for r in got.range(start, end) {
            if let Some(n) = stop_at {
                if rows.len() >= n {
                    break;
                }
                if let Some(f) = &spec.read_filter {
                    if !f.eval_bool(r, slots).map_err(bad)? {
                        continue;
                    }
                }
            }
            if spec.dedup
                && keys.len() > 1
                && !dedup_seen.insert(crate::ops::norm_key(r, &spec.plan.colls))
            {
                continue;
            }
            rows.push(Cow::Borrowed(r));
        }
    }
    if let (Some(f), None, None) = (&spec.read_filter, stop_at, &listed) {
        let mut kept = Vec::with_capacity(rows.len());
        for r in rows {
            if f.eval_bool(&r, slots).map_err(bad)? {
                kept.push(r);
            }
        }
        rows = kept;
    }
    if let Some(f) = &spec.finish {
        let owned: Vec<Row> = rows.into_iter().map(Cow::into_owned).collect();
        rows = f
            .apply(owned, slots)
            .map_err(bad)?
            .into_iter()
            .map(Cow::Owned)
            .collect();
    }
    if keys.len() > 1 && !spec.order.is_empty() {
        rows.sort_by(|a, b| cmp_rows(a, b, &spec.order));
    } else if spec.range.is_some() && !spec.order.is_empty() {
        // The reader orders by the range column first: sort as a reader
        // without one would have kept them.
        rows.sort_by(|a, b| cmp_rows(a, b, &spec.order).then_with(|| a.cmp(b)));
    }
    if spec.dedup && keys.len() > 1 {
        // DISTINCT over several lookups: stored rows differ in the key
        // column, so merge the output rows, then apply OFFSET/LIMIT.
        let stored_coll = |i: usize| spec.plan.colls.get(i).copied().unwrap_or_default();
        let out_colls: Vec<ladle_common::Collation> = match &v.output_columns {
            Some(cols) => cols.iter().map(|&i| stored_coll(i)).collect(),
            None => spec
                .output
                .iter()
                .map(|e| match e {
                    Expr::Column(i) => stored_coll(*i),
                    _ => ladle_common::Collation::Binary,
                })
                .collect(),
        };
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for r in &rows {
            let o = project(r)?;
            if seen.insert(crate::ops::norm_key(&o, &out_colls)) {
                out.push(o);
            }
        }
        let iter = out.into_iter().skip(offset);
        let page: Vec<Row> = match limit {
            Some(l) => iter.take(l).collect(),
            None => iter.collect(),
        };
        return Ok(Some(page.into()));
    }
    rows.iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .map(|r| project(r))
        .collect::<Result<Vec<Row>>>()
        .map(|rows| Some(rows.into()))
}
