//! [`PreparedQuery`]: a SELECT bound to a view, the handle callers read
//! through; the [`Dataflow`] calls that make one; and [`Binding`], what it
//! reads now, planned again when a schema change drops its view.

use std::sync::{Arc, Weak};

use ladle_common::{Lsn, Row, TableDeltas, TableId, Value};
use parking_lot::RwLock;
use sqlparser::ast;

use crate::engine::{Dataflow, EngineState};
use crate::error::{DataflowError, Result};
use crate::meta::OutputColumn;
use crate::plan::Source;
use crate::propagation::newest_commit;
use crate::read::{self, bind_slots, numeric_param_on_text_key, OnMiss, Target, TxRead};
use crate::rows::ResultRows;

/// A SELECT bound to a view. Cheap to clone; `execute` is a reader lookup.
#[derive(Clone)]
pub struct PreparedQuery {
    pub(crate) inner: Arc<Binding>,
}

impl PreparedQuery {
    /// Result columns.
    pub fn columns(&self) -> &[OutputColumn] {
        self.inner.columns()
    }
    /// Number of `?` placeholders the caller must supply.
    pub fn param_count(&self) -> usize {
        self.inner.user_params
    }
    /// Reads the result for `params` (one value per `?`), reflecting every
    /// write acknowledged before the call (it waits for their propagation).
    pub fn execute(&self, params: &[Value]) -> Result<Vec<Row>> {
        self.read_after(params, Lsn::MAX).map(ResultRows::into_vec)
    }
    /// Reads the result reflecting at least the writes with LSN <= `lsn`
    /// (a connection's last write: read-your-writes); newer writes may or
    /// may not be visible yet (eventual consistency).
    pub fn execute_after(&self, params: &[Value], lsn: Lsn) -> Result<Vec<Row>> {
        self.read_after(params, lsn).map(ResultRows::into_vec)
    }
    /// [`PreparedQuery::execute_after`] without copying: a plain read
    /// returns rows shared with the view's reader (`Lsn::MAX`: every write
    /// acknowledged before the call, as [`PreparedQuery::execute`]).
    pub fn read_after(&self, params: &[Value], lsn: Lsn) -> Result<ResultRows> {
        self.inner.execute(params, lsn)
    }
    /// Like [`PreparedQuery::read_after`] if the answer needs no blocking
    /// (every key cached, the writes up to `lsn` applied); `None` otherwise.
    pub fn read_cached(&self, params: &[Value], lsn: Lsn) -> Option<Result<ResultRows>> {
        self.inner.read_cached(params, lsn)
    }
    /// The base tables the query reads.
    pub fn tables(&self) -> Vec<TableId> {
        self.inner.tables()
    }
    /// Reads the result as if `overlay` (row deltas per table, in order)
    /// were applied on top of the committed tables: how a transaction reads
    /// its own uncommitted writes. Computed by upqueries over a stateless
    /// copy of the view (nothing cached), under the commit lock.
    pub fn execute_overlay(&self, params: &[Value], overlay: &[TableDeltas]) -> Result<Vec<Row>> {
        let tx = TxRead {
            overlay,
            snapshot: None,
        };
        self.inner
            .execute_with(params, Some(tx), Lsn::MAX)
            .map(ResultRows::into_vec)
    }
    /// Reads the result over `snapshot` (one consistent state of every
    /// table, taken at a REPEATABLE READ transaction's first read) with
    /// `overlay` (the transaction's own writes, as row deltas over that
    /// state) applied: computed by upqueries over a stateless copy of the
    /// view reading the snapshot, without the commit lock; nothing cached.
    pub fn execute_snapshot(
        &self,
        params: &[Value],
        snapshot: &ladle_storage::ReadView,
        overlay: &[TableDeltas],
    ) -> Result<Vec<Row>> {
        let tx = TxRead {
            overlay,
            snapshot: Some(snapshot),
        };
        self.inner
            .execute_with(params, Some(tx), Lsn::MAX)
            .map(ResultRows::into_vec)
    }
}

impl Dataflow {
    /// Drops the view `q` reads now (a view made for one statement: its
    /// query holds values of that moment, such as NOW() fixed, so no later
    /// statement would share it). Another reader of it plans again.
    pub fn discard(&self, q: &PreparedQuery) {
        self.inner.discard_view(&q.inner.target.read().0);
    }

    /// Plans (or reuses) the view answering `query` in `database`. Literals
    /// in equality predicates become parameters so queries differing only in
    /// them share one view; `?` placeholders become parameters too. Queries
    /// without FROM are evaluated directly.
    pub fn prepare(&self, database: &str, query: &ast::Query) -> Result<PreparedQuery> {
        Ok(PreparedQuery {
            inner: Arc::new(Binding::prepare(&self.inner, database, query)?),
        })
    }

    /// [`Dataflow::prepare`] if the query's view is installed already;
    /// `None` (nothing planned or installed) otherwise. Never blocks: a
    /// server may call it on its network threads, then try
    /// [`PreparedQuery::read_cached`].
    pub fn prepare_installed(
        &self,
        database: &str,
        query: &ast::Query,
    ) -> Result<Option<PreparedQuery>> {
        Ok(
            Binding::prepare_installed(&self.inner, database, query)?.map(|binding| {
                PreparedQuery {
                    inner: Arc::new(binding),
                }
            }),
        )
    }
}

/// A query bound to what it reads now (a view, or a constant), and where
/// each of the view's parameter slots comes from.
pub(crate) struct Binding {
    engine: Weak<EngineState>,
    database: String,
    query: ast::Query,
    /// The view and where each of its parameter slots comes from.
    target: RwLock<(Target, Arc<Vec<Source>>)>,
    columns: Vec<OutputColumn>,
    pub user_params: usize,
}

impl Binding {
    /// Binds `query` to its view, planning and installing it if needed.
    pub(crate) fn prepare(
        engine: &Arc<EngineState>,
        database: &str,
        query: &ast::Query,
    ) -> Result<Binding> {
        let bound = engine.bind(database, query, Some(query))?;
        Ok(Binding::new(engine, database, query, bound))
    }

    /// [`Binding::prepare`] if the query's view is installed already; `None`
    /// (nothing planned or installed) otherwise.
    pub(crate) fn prepare_installed(
        engine: &Arc<EngineState>,
        database: &str,
        query: &ast::Query,
    ) -> Result<Option<Binding>> {
        Ok(engine
            .installed(database, query)?
            .map(|bound| Binding::new(engine, database, query, bound)))
    }

    fn new(
        engine: &Arc<EngineState>,
        database: &str,
        query: &ast::Query,
        (target, sources, user_params): (Target, Vec<Source>, usize),
    ) -> Binding {
        let columns = match &target {
            Target::View(v) => v.spec.columns.clone(),
            Target::Constant(c) => c.columns.clone(),
        };
        Binding {
            engine: Arc::downgrade(engine),
            database: database.to_string(),
            query: query.clone(),
            target: RwLock::new((target, Arc::new(sources))),
            columns,
            user_params,
        }
    }

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
                Target::Constant(c) => return read::constant(&c, &slots).map(ResultRows::from),
                Target::View(v) => v,
            };
            if numeric_param_on_text_key(&view, &sources, &slots, &lists) {
                // A number bound to `text_col = ?` compares numerically
                // (`'01' = 1`), which no lookup by the string finds: the
                // query runs with the values inlined, where the number
                // against the text column is a filter (see `normalize`).
                let inlined =
                    Binding::prepare(&engine, &self.database, &inline_params(&self.query, params))?;
                return inlined.execute_with(&[], overlay, after);
            }
            if view.is_dropped() {
                let (t, sources, _) =
                    engine.bind(&self.database, &self.query, Some(&self.query))?;
                *self.target.write() = (t, Arc::new(sources));
                continue;
            }
            view.mark_used();
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
                    let cached =
                        read::read(&engine.reads(), &view, &slots, &lists, None, OnMiss::Fill);
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
            match read::read(
                &engine.reads(),
                &view,
                &slots,
                &lists,
                overlay,
                OnMiss::Fill,
            ) {
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
            Target::Constant(c) => return Some(read::constant(&c, &slots).map(ResultRows::from)),
            Target::View(v) => v,
        };
        if view.is_dropped()
            || numeric_param_on_text_key(&view, &sources, &slots, &lists)
            || !engine.propagation.writes_applied(&view.commits, after)
        {
            return None;
        }
        view.mark_used();
        read::read(&engine.reads(), &view, &slots, &lists, None, OnMiss::GiveUp).transpose()
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
