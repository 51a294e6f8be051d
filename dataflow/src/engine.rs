//! The engine: the view catalog (planning, installing, dropping and
//! reinstalling views), the commit observer and the engine's statistics.
//! Queries are bound to views in `prepared.rs` and read in `read/`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AO};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ladle_common::{Lsn, TableId};
use ladle_storage::Storage;
use parking_lot::{Mutex, RwLock};
use sqlparser::ast;

use crate::expr::Expr;
use crate::graph::Graph;
use crate::plan::{Planned, PlannedView, Source};
use crate::planner::normalize::{normalize, ColumnKinds, Normalized, Shape};
use crate::planner::{PlanMemo, Planner};
use crate::propagation::{run_worker, Observer, Propagation};
use crate::read::{self, numeric_key, FillStats, KeysFilling, Target, View};
use crate::variants::LiteralVariants;
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

/// The engine's state, shared by [`Dataflow`], its prepared queries (weakly)
/// and the propagation worker.
pub(crate) struct EngineState {
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
    /// The installed views of each query shape by its literals (see
    /// `variants.rs`), and how many were dropped to bound them.
    variants: LiteralVariants,
    variant_evictions: AtomicU64,
}

/// How long a view may go unread before it is dropped (between this and
/// twice this: views are swept at this interval and dropped when no query
/// read them since the previous sweep). See
/// [`Dataflow::set_view_idle_timeout`].
pub const DEFAULT_VIEW_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// What the previous snapshot left behind, so the next one can be
/// incremental (see `snapshot.rs`). Its mutex also serializes snapshots.
#[derive(Default)]
pub(crate) struct SnapshotTracker {
    /// The epoch the nodes' changed-key sets are relative to, and the stable
    /// ids of the nodes it holds.
    pub(crate) last: Option<(u64, HashSet<String>)>,
}

/// How reader misses were filled since start, in keys (see
/// [`Dataflow::fill_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FillCounts {
    /// Computed outside the commit and graph locks and installed.
    pub unlocked: u64,
    /// Computed outside the locks but discarded: a write to one of the
    /// view's tables committed meanwhile.
    pub conflicts: u64,
    /// Computed under the graph lock.
    pub locked: u64,
    /// Of `unlocked`: installed by an attempt that held the writers of the
    /// view's tables, after a long attempt lost to a write.
    pub held: u64,
    /// Of `conflicts`: stopped when the write committed instead of
    /// finishing first (see [`crate::interrupt::watch_lost`]).
    pub stopped: u64,
}

/// The view engine. One per server.
pub struct Dataflow {
    pub(crate) inner: Arc<EngineState>,
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
        let inner = Arc::new(EngineState {
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
            variants: LiteralVariants::default(),
            variant_evictions: AtomicU64::new(0),
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
                full_group_by: false,
                memo: &PlanMemo::default(),
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

    /// The result columns of `query`: its installed view's, else those
    /// of its plan. Installs nothing (a catalog listing every view's
    /// columns must not install them all).
    pub fn query_columns(&self, database: &str, query: &ast::Query) -> Result<Vec<OutputColumn>> {
        Ok(match self.inner.installed_target(database, query)? {
            Some(Target::View(v)) => v.spec.columns.clone(),
            Some(Target::Constant(c)) => c.columns.clone(),
            None => match self.inner.plan_uninstalled(database, query)? {
                Planned::View(v) => v.columns,
                Planned::Constant(c) => c.columns,
            },
        })
    }

    /// Refuses `query` as `sql_mode=ONLY_FULL_GROUP_BY` does (1055, 1140:
    /// see [`DataflowError::NotInGroupBy`]); any other error is left for
    /// the read to report. Plans the query; installs nothing.
    pub fn check_full_group_by(&self, database: &str, query: &ast::Query) -> Result<()> {
        let named = self.inner.named.read();
        let planned = Planner {
            storage: &self.inner.storage,
            database,
            views: &named,
            depth: 0,
            full_group_by: true,
            memo: &PlanMemo::default(),
        }
        .plan(query);
        match planned {
            Err(e @ (DataflowError::NotInGroupBy(_) | DataflowError::MixOfGroupColumns)) => Err(e),
            _ => Ok(()),
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

    /// Views dropped since start because their query shape had
    /// [`MAX_LITERAL_VARIANTS`](crate::MAX_LITERAL_VARIANTS) others
    /// installed for other literal values (see `variants.rs`).
    pub fn variant_evictions(&self) -> u64 {
        self.inner.variant_evictions.load(AO::Relaxed)
    }

    /// The view-state limit (`--memory-limit`).
    pub fn memory_limit(&self) -> usize {
        self.inner.config.memory_limit
    }

    /// Until the guard is dropped, the reads of this thread's statement
    /// share one working-set budget (what one read may materialize; see
    /// [`crate::interrupt::watch_memory`]), to which the caller charges
    /// the rows it holds between reads ([`crate::interrupt::charge`]): a
    /// statement made of many reads, such as a recursive CTE's iterations.
    pub fn watch_statement_memory(&self) -> crate::interrupt::WatchGuard {
        crate::interrupt::watch_memory(crate::read::statement_memory(&self.inner.config))
    }

    /// How reader misses were filled so far.
    pub fn fill_stats(&self) -> FillCounts {
        let s = &self.inner.fill_stats;
        FillCounts {
            unlocked: s.unlocked.load(AO::Relaxed),
            conflicts: s.conflicts.load(AO::Relaxed),
            locked: s.locked.load(AO::Relaxed),
            held: s.held.load(AO::Relaxed),
            stopped: s.stopped.load(AO::Relaxed),
        }
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

impl EngineState {
    /// The installed view `bind` would choose for `query`, without
    /// installing anything; `None` if it is not installed.
    fn installed_target(&self, database: &str, query: &ast::Query) -> Result<Option<Target>> {
        Ok(self.installed(database, query)?.map(|(t, _, _)| t))
    }

    /// What `bind` would give for `query` if its view is installed already
    /// (the first [`Shape`] whose view is): nothing is planned or
    /// installed, so this never blocks.
    pub(crate) fn installed(
        &self,
        database: &str,
        query: &ast::Query,
    ) -> Result<Option<(Target, Vec<Source>, usize)>> {
        let col_kinds = self.column_kinds(database, query);
        for shape in Shape::PREFERENCE {
            let norm = normalize(database, query, shape, &col_kinds)?;
            let Some(v) = self.installed_view(&norm) else {
                continue;
            };
            if lists_readable(&norm, Some(&v.spec)) {
                return Ok(Some((Target::View(v), norm.sources, norm.user_params)));
            }
        }
        Ok(None)
    }

    /// The installed view answering `norm`: the one keeping only as many
    /// rows per key as its reads take, else the one keeping them all.
    fn installed_view(&self, norm: &Normalized) -> Option<Arc<View>> {
        let views = self.views.read();
        norm.top_k
            .and_then(|k| views.get(&top_k_signature_of(&norm.signature, k)))
            .or_else(|| views.get(&norm.signature))
            .cloned()
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
            full_group_by: false,
            memo: &PlanMemo::default(),
        }
        .plan(q)
    }

    /// EXPLAIN GRAPH of a view that is not installed (see
    /// [`Dataflow::explain_graph`]); the view is planned as `bind` would.
    fn explain_uninstalled(&self, database: &str, query: &ast::Query) -> Result<String> {
        let spec = match self.plan_uninstalled(database, query)? {
            Planned::Constant(_) => return Ok("Constant (no FROM): evaluated directly\n".into()),
            Planned::View(v) => v,
        };
        let text = self.graph.lock().describe_uninstalled(
            &spec.plan,
            spec.key.clone(),
            spec.reader_order(),
            spec.read_filter.as_ref(),
        )?;
        Ok(format!(
            "view not installed (EXPLAIN GRAPH does not install it) keyed by {:?}{}\n{}",
            spec.key_names,
            range_note(&spec),
            text
        ))
    }

    /// `query` planned as `bind` would plan it, without installing it.
    fn plan_uninstalled(&self, database: &str, query: &ast::Query) -> Result<Planned> {
        let col_kinds = self.column_kinds(database, query);
        let mut failure = None;
        let mut planned = None;
        for shape in Shape::PREFERENCE {
            let norm = normalize(database, query, shape, &col_kinds)?;
            match self.plan(database, &norm.query) {
                Ok(Planned::View(v)) if !lists_readable(&norm, Some(&v)) => {}
                Ok(Planned::View(mut v)) => {
                    if let Some(k) = norm.top_k {
                        crate::plan::top_k::push_below_left_joins(&mut v, k);
                    }
                    planned = Some(Planned::View(v));
                    break;
                }
                Ok(p) => {
                    planned = Some(p);
                    break;
                }
                Err(e) => failure = Some(e),
            }
        }
        match (planned, failure) {
            (Some(p), _) => Ok(p),
            (None, Some(e)) => Err(e),
            (None, None) => Err(DataflowError::Internal(
                "no parameterization of the query planned".into(),
            )),
        }
    }

    /// Drops the view `target` reads (see [`Dataflow::discard`]).
    pub(crate) fn discard_view(&self, target: &Target) {
        if let Target::View(v) = target {
            self.drop_views_where(|x| std::ptr::eq(x, &**v));
        }
    }

    /// What the read path uses of the engine (see [`crate::read`]).
    pub(crate) fn reads(&self) -> read::Context<'_> {
        read::Context {
            storage: &self.storage,
            graph: &self.graph,
            propagation: &self.propagation,
            config: &self.config,
            stats: &self.fill_stats,
        }
    }

    fn drop_unused_views(&self) -> usize {
        let doomed = self.drop_views_where(|v| !v.used.swap(false, AO::Relaxed));
        if !doomed.is_empty() {
            tracing::info!(views = doomed.len(), "dropped views no query used lately");
        }
        doomed.len()
    }

    /// Drops the view `p` reads now (see [`Dataflow::discard`]).
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

    /// Runs [`EngineState::drop_unused_views`] if an idle timeout passed since
    /// the previous sweep (one reader wins the race to run it).
    pub(crate) fn sweep_if_due(&self) {
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

    /// The view for `query`, in the first [`Shape`] (most shared first)
    /// whose view plans: `col IN (...)` shares the view of `col = ?` when
    /// that view is keyed by `col` (otherwise the list stays a filter or
    /// its own multi-slot key), and literal range bounds share the view of
    /// their prepared form unless that does not plan.
    /// `origin`: the query to record in the catalog for views installed now
    /// (None while reinstalling recorded views).
    pub(crate) fn bind(
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
            match self.target(database, &norm, origin) {
                Ok(t) if lists_readable(&norm, t.view_spec()) => {
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
        norm: &Normalized,
        origin: Option<&ast::Query>,
    ) -> Result<Target> {
        let q = &norm.query;
        if let Some(v) = self.installed_view(norm) {
            return Ok(Target::View(v));
        }
        let mut spec = match self.plan(database, q)? {
            Planned::Constant(c) => return Ok(Target::Constant(c)),
            Planned::View(v) => *v,
        };
        // A view keeping only the first rows of each key serves reads of
        // at most that many rows: its own signature says how many.
        let top_k_signature;
        let signature = match norm.top_k {
            Some(k) if crate::plan::top_k::push_below_left_joins(&mut spec, k) => {
                top_k_signature = top_k_signature_of(&norm.signature, k);
                &top_k_signature
            }
            _ => &norm.signature,
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
                spec.read_filter.as_ref(),
                &format!("{database}\u{1}{signature}"),
            )?;
            let id = self.next_id.fetch_add(1, AO::Relaxed);
            let commits = self.propagation.counters(&tables);
            let v = Arc::new(View {
                name: format!("q_{id}"),
                query: shown_query(signature),
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
                marks_rows: g.marks_rows(node),
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
        if installed {
            let victims = self.variants.installed(database, q, &view);
            if !victims.is_empty() {
                let dropped =
                    self.drop_views_where(|v| victims.iter().any(|x| std::ptr::eq(v, &**x)));
                self.variant_evictions
                    .fetch_add(dropped.len() as u64, AO::Relaxed);
            }
        }
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
}

/// A view's query as SHOW VIEWS shows it: its signature without the
/// database, with the rows it keeps per key if it keeps only the first.
fn shown_query(signature: &str) -> String {
    let query = signature.split('\u{1}').nth(1).unwrap_or_default();
    match query.split_once('\u{2}') {
        Some((query, top)) => format!("{query} /* {top} per key */"),
        None => query.to_string(),
    }
}

/// The signature of `signature`'s view keeping `k` rows per key.
fn top_k_signature_of(signature: &str, k: usize) -> String {
    format!("{signature}\u{2}top {k}")
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
