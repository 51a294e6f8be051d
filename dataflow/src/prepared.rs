//! [`PreparedQuery`]: a SELECT bound to a view, the handle callers read
//! through; and the [`Dataflow`] calls that make one.

use std::sync::Arc;

use ladle_common::{Lsn, Row, TableDeltas, TableId, Value};
use sqlparser::ast;

use crate::engine::{self, Dataflow};
use crate::error::Result;
use crate::meta::OutputColumn;
use crate::rows::ResultRows;

/// A SELECT bound to a view. Cheap to clone; `execute` is a reader lookup.
#[derive(Clone)]
pub struct PreparedQuery {
    pub(crate) inner: Arc<engine::Prepared>,
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
        let tx = engine::TxRead {
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
        let tx = engine::TxRead {
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
        self.inner.discard_view(&q.inner);
    }

    /// Plans (or reuses) the view answering `query` in `database`. Literals
    /// in equality predicates become parameters so queries differing only in
    /// them share one view; `?` placeholders become parameters too. Queries
    /// without FROM are evaluated directly.
    pub fn prepare(&self, database: &str, query: &ast::Query) -> Result<PreparedQuery> {
        Ok(PreparedQuery {
            inner: Arc::new(self.inner.prepare(database, query)?),
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
        Ok(self
            .inner
            .prepare_installed(database, query)?
            .map(|prepared| PreparedQuery {
                inner: Arc::new(prepared),
            }))
    }
}
