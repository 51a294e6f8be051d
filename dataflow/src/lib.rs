//! Ladle's incremental view engine.
//!
//! Entry point: [`Dataflow`]. Every SELECT becomes a view: the planner turns
//! the SQL AST into a logical query graph, which is lowered into shared
//! dataflow nodes ending in a reader keyed by the query's parameters.
//!
//! ```text
//!  SQL AST --planner--> query graph (plan::LNode) --install--> dataflow nodes --> readers
//!                                                   (nodes shared by signature)
//!  write: Storage::write -> on_commit: queue (lsn, deltas) -> ack
//!         worker: snapshot at X -> merged batches <= X -> Base -> Filter/Project/Join/Aggregate -> Reader
//!                                                        (deltas for holes are dropped)
//!  read:  PreparedQuery::execute -> reader hit -> rows (read_after: the reader's own rows, shared)
//!                                -> miss -> upquery: pull(key) through the ancestors,
//!                                   down to storage lookups; fills the holes on the path
//!  evict: least recently used reader keys; then aggregate state, clearing its descendants
//!  snapshot: under the commit lock, Arc references to the partitions changed since the
//!            last epoch -> serialized into `SnapshotStore` files after the lock is released
//!  recover:  newest verified epoch -> restore nodes by stable id -> replay the change log
//! ```
//!
//! Snapshots and warm restarts: [`Dataflow::snapshot`], [`Dataflow::recover`]
//! and [`Dataflow::compact_snapshots`] (design in `snapshot.rs`). Every
//! installed view is recorded in the catalog and reinstalled by
//! [`Dataflow::new`], so a restart rebuilds the same graph.
//! Views no query read for about [`DEFAULT_VIEW_IDLE_TIMEOUT`] are dropped
//! with their catalog records (sweeps run by the reads;
//! [`Dataflow::set_view_idle_timeout`], [`Dataflow::drop_unused_views`]); a
//! later read or prepare reinstalls them. EXPLAIN GRAPH
//! ([`Dataflow::explain_graph`]) describes a view without installing it.
//!
//! Consistency: storage calls [`ladle_storage::CommitObserver::on_commit`]
//! inside its commit lock; the batch is queued and the writers are
//! acknowledged. A propagation worker applies the queued batches in LSN
//! order, merged, against a storage snapshot taken right after them
//! (`propagation.rs`). Reads wait, bounded, for the writes they must see:
//! [`PreparedQuery::execute`] every write acknowledged before it,
//! [`PreparedQuery::execute_after`] a connection's own writes
//! (read-your-writes; other connections' writes appear eventually).
//! `Storage::exclusive` and DDL settle the backlog first (commit lock,
//! then the graph lock), so inside them storage and the graph agree.
//! A reader miss runs its upquery outside the locks on a stateless copy of
//! the view's ancestors once the graph has applied every batch of the
//! view's tables, then installs the result inside `Storage::exclusive`
//! only if no batch touching those tables committed meanwhile (per-table
//! counters); after repeated conflicts, and for views over an aggregate
//! partitioned by nothing, the upquery runs inside the locks. Either way a
//! replay never races a delta. Reader hits take no lock: readers publish
//! each batch as a new version of a persistent map (`ops/reader.rs`).
//!
//! Partial state: readers and aggregates hold some keys (complete results)
//! and holes. Deltas for holes are dropped; a fill computes the key from the
//! nearest ancestor that holds it (ultimately storage index lookups/scans),
//! filling state on the way, so a filled key's dependencies are filled too.
//! Evicting an aggregate's state clears every node downstream of it.
//!
//! Joins are maintained per join key: for each key a batch touches, both
//! inputs are looked up as they are after the batch, the rows before it are
//! those minus the batch's deltas, and the output is the difference. Storage
//! reads during propagation subtract the deltas of tables not yet
//! propagated, so self-joins and multi-table batches are exact.
//!
//! SQL: selection, projection, MySQL expressions; inner/LEFT/comma joins
//! (equi-joins by key; non-equi and cross joins with key [] and a filter;
//! LEFT JOIN ON conditions over both sides as a filtered inner join plus the
//! unmatched left rows); GROUP BY with COUNT/SUM/AVG/MIN/MAX/GROUP_CONCAT
//! (and DISTINCT forms; VAR_POP/VAR_SAMP/STDDEV_* as COUNT/SUM arithmetic,
//! `planner::stats`), HAVING; DISTINCT; ORDER BY/LIMIT/OFFSET (limit
//! applied at read over the full per-key result; LIMIT/OFFSET literals are
//! parameters, so every page reads one view); UNION [ALL], INTERSECT and
//! EXCEPT (both sides tagged, grouped by all columns); derived tables
//! and named views; IN/EXISTS subqueries as semi/anti-joins (`NOT IN` with
//! MySQL's NULL rules; `col = ?` inside keys the view through a DISTINCT
//! inner join; a correlated `x IN` as EXISTS); scalar subqueries as LEFT
//! joins with aggregates grouped by the correlation columns (without an
//! aggregate: MAX plus a row count checked at read time; `ORDER BY z LIMIT
//! 1`: the rows with each key's MIN/MAX z joined back). Correlations other
//! than `inner = outer` join the DISTINCT outer values they read to the
//! inner rows and filter (only NULL-rejecting conditions). Subqueries as
//! values (EXISTS, IN, scalar; in the select list, WHERE under OR, HAVING,
//! ORDER BY, or without FROM over one constant row) become such joined
//! columns: EXISTS is COUNT(*) > 0, IN is 1/0/NULL from the distinct
//! values and the row and non-NULL counts. Equality parameters (also in an inner join's ON) are reader
//! keys; other parameters and NOW()/RAND() in WHERE are read-time filters,
//! and under GROUP BY (or with `IN (?, ?)`) the view keeps the
//! pre-aggregation rows and aggregates at read time (`plan::ReadAgg`).
//! Keys compare as MySQL does: a string looked up in a number column is
//! read as a number (`'01'` finds 1); a number against a text column stays
//! a filter (no lookup by the string finds `'1abc' = 1`), also when bound
//! to a `?` at execute time; a text column never hash-joins a binary one
//! (bytewise comparison, through the filter). Binary strings (`X'..'`,
//! `_binary`, CAST/CONVERT to binary, BLOB columns) are `Value::Bytes`,
//! compared, ordered and matched by LIKE byte for byte.
//! Anything else (LIMIT other than 1 in a subquery, parameters in LEFT JOIN
//! ON, ranges inside subqueries, a subquery reading a query two levels out,
//! ...) is [`DataflowError::Unsupported`], never a wrong answer.
//!
//! Only the `planner` module reads the SQL AST; operators see Ladle's own
//! expression (`expr`) and plan types. This crate must not depend on the
//! shim or on RocksDB.

use std::sync::Arc;

use ladle_common::{Collation, Lsn, Row, SqlType, TableDeltas, TableId, TableSchema, Value};
use ladle_storage::StorageError;
use sqlparser::ast;

mod engine;
mod expr;
mod graph;
pub mod interrupt;
mod ops;
mod plan;
mod planner;
mod propagation;
mod rows;
mod snapshot;

pub use engine::{Dataflow, DEFAULT_VIEW_IDLE_TIMEOUT};
pub use expr::take_warnings as take_eval_warnings;
pub use planner::depth::{bound_depth, TooDeep, MAX_EXPR_DEPTH, THREAD_STACK_BYTES};
pub use rows::{ResultRows, RowRef};
pub use snapshot::{
    CompactionStats, DecodedSnapshot, RecoveryProgress, RecoveryStats, SnapshotConfig,
    SnapshotStats, SnapshotStore,
};

#[derive(Debug, thiserror::Error)]
pub enum DataflowError {
    // --- the user's fault ---
    #[error("Unknown column '{0}' in '{1}'")]
    UnknownColumn(String, String),
    #[error("Column '{0}' in {1} is ambiguous")]
    AmbiguousColumn(String, String),
    #[error("Table '{0}' doesn't exist")]
    UnknownTable(String),
    #[error("Incorrect number of arguments: expected {expected}, got {got}")]
    ParamCount { expected: usize, got: usize },
    #[error("Table '{0}' already exists")]
    ViewExists(String),
    #[error("Unknown view '{0}'")]
    UnknownView(String),
    #[error("Incorrect parameter: {0}")]
    BadArgument(String),
    /// An expression's result does not fit its type (`BIGINT value is out
    /// of range`), MySQL's 1690.
    #[error("{0}")]
    OutOfRange(String),
    /// A scalar subquery returned several rows (MySQL's 1242).
    #[error("Subquery returns more than 1 row")]
    SubqueryRows,
    /// The read was stopped (see [`interrupt`]): by `KILL` or a client
    /// that went away, or (`timeout`) by `max_execution_time`.
    #[error("{}", if *.timeout {
        "Query execution was interrupted, maximum statement execution time exceeded"
    } else {
        "Query execution was interrupted"
    })]
    Interrupted { timeout: bool },
    /// A read would materialize more rows than a statement may hold (see
    /// [`interrupt::watch_memory`]): MySQL's 1041.
    #[error(
        "Out of memory: the statement needs more than its {limit} bytes of working memory \
         (half of --memory-limit); narrow it, or raise --memory-limit"
    )]
    OutOfMemory { limit: usize },
    // --- a known gap ---
    #[error("This version of Ladle doesn't yet support '{0}'")]
    Unsupported(String),
    // --- the environment / other layers ---
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The view being read was dropped meanwhile (a schema change): the
    /// read is planned again. Never reaches a client.
    #[error("view dropped while being read")]
    ViewDropped,
    // --- our bug ---
    #[error("internal dataflow error: {0}")]
    Internal(String),
}

impl DataflowError {
    /// The planner refused NOW()/RAND() where a maintained view would
    /// freeze their value: the statement can still be answered with its
    /// clock fixed (see the shim's `clock`).
    pub fn is_volatile_refusal(&self) -> bool {
        matches!(self, DataflowError::Unsupported(what) if what.contains("NOW()/RAND()"))
    }
}

pub type Result<T, E = DataflowError> = std::result::Result<T, E>;

#[derive(Clone, Debug)]
pub struct DataflowConfig {
    /// Bytes of view state kept in memory before eviction.
    pub memory_limit: usize,
    /// Threads that propagate a batch through independent domains (parts
    /// of the graph sharing no state) in parallel; 0 = one per core.
    pub domain_threads: usize,
}

impl Default for DataflowConfig {
    fn default() -> Self {
        DataflowConfig {
            memory_limit: 1 << 30,
            domain_threads: 0,
        }
    }
}

/// A result column's metadata, as the wire protocol describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputColumn {
    pub name: String,
    /// The base table it comes from, or empty for computed columns.
    pub table: String,
    /// The base column it passes through unchanged, if it does (a bare
    /// column reference, aliased, grouped or read through a derived table;
    /// not a UNION's or an expression's).
    pub origin: Option<BaseColumn>,
    pub ty: SqlType,
    pub nullable: bool,
}

/// A base table's column, as a result column's provenance: MySQL result
/// metadata describes such a column by its place in the table (its keys,
/// AUTO_INCREMENT, default, ON UPDATE).
#[derive(Clone, Debug, PartialEq)]
pub struct BaseColumn {
    pub table: Arc<TableSchema>,
    /// Position in `table.columns`.
    pub column: usize,
}

/// Introspection of one installed view (SHOW VIEWS).
#[derive(Clone, Debug)]
pub struct ViewStats {
    pub name: String,
    pub query: String,
    pub key_columns: Vec<String>,
    pub cached_keys: u64,
    pub cached_rows: u64,
    pub memory_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub upqueries: u64,
    /// Keys evicted from the view to stay under the memory limit.
    pub evicted_keys: u64,
}

/// A SELECT bound to a view. Cheap to clone; `execute` is a reader lookup.
#[derive(Clone)]
pub struct PreparedQuery {
    inner: Arc<engine::Prepared>,
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

/// A scalar expression over one table's row (UPDATE SET/WHERE, DELETE WHERE,
/// INSERT VALUES, ON DUPLICATE KEY UPDATE).
#[derive(Clone, Debug)]
pub struct RowExpr {
    expr: expr::Expr,
}

impl RowExpr {
    /// Evaluates against `row` (laid out as the table's columns).
    pub fn eval(&self, row: &Row) -> Result<Value> {
        self.expr.eval(row).map_err(eval_err)
    }
    /// The value's type and whether it may be NULL, over `table`'s rows.
    pub fn result_type(&self, table: &TableSchema) -> (SqlType, bool) {
        let input: Vec<(SqlType, bool)> = table
            .columns
            .iter()
            .map(|c| (c.ty.clone(), c.nullable))
            .collect();
        self.expr.result_type(&input)
    }
    /// Evaluates with `VALUES(col)` referring to `proposed` (ON DUPLICATE KEY
    /// UPDATE).
    pub fn eval_with_proposed(&self, row: &Row, proposed: &Row) -> Result<Value> {
        self.expr.eval_proposed(row, proposed).map_err(eval_err)
    }
    /// SQL truth of the value (for WHERE): NULL and 0 are false.
    pub fn eval_predicate(&self, row: &Row) -> Result<bool> {
        self.expr.eval_bool(row, &[]).map_err(eval_err)
    }
}

fn eval_err(e: expr::EvalError) -> DataflowError {
    DataflowError::from(e)
}

impl From<expr::EvalError> for DataflowError {
    fn from(e: expr::EvalError) -> DataflowError {
        match e {
            expr::EvalError::OutOfRange(m) => DataflowError::OutOfRange(m),
            expr::EvalError::SubqueryRows => DataflowError::SubqueryRows,
            expr::EvalError::Invalid(m) => DataflowError::BadArgument(m),
        }
    }
}

/// A SQL literal with `v`'s value and type: temporal values as typed
/// literals (`DATE '2024-01-02'`), binary strings as hex literals, doubles
/// in exponent notation (which keeps them DOUBLE). Compiling it gives `v`
/// back.
pub fn value_expr(v: &Value) -> ast::Expr {
    let typed = |data_type: ast::DataType| ast::Expr::TypedString {
        data_type,
        value: v.to_string(),
    };
    let lit = match v {
        Value::Null => ast::Value::Null,
        Value::Int(i) => ast::Value::Number(i.to_string(), false),
        Value::UInt(u) => ast::Value::Number(u.to_string(), false),
        Value::Double(f) => ast::Value::Number(format!("{f:e}"), false),
        Value::Decimal(d) => ast::Value::Number(d.to_string(), false),
        Value::Bytes(b) => {
            ast::Value::HexStringLiteral(b.iter().map(|x| format!("{x:02X}")).collect())
        }
        Value::Text(t) => ast::Value::SingleQuotedString(t.to_string()),
        Value::Date(_) => return typed(ast::DataType::Date),
        Value::DateTime(_) => return typed(ast::DataType::Datetime(None)),
        Value::Time(_) => return typed(ast::DataType::Time(None, ast::TimezoneInfo::None)),
    };
    ast::Expr::Value(lit)
}

/// SQL truth of a value, as WHERE and IF read it: `None` for NULL, numbers
/// when non-zero, strings by their numeric prefix (`'12abc'` is true).
pub fn value_truth(v: &Value) -> Option<bool> {
    expr::truth(v)
}

/// SQL comparison under `collation` (`None` when either side is NULL):
/// numbers with strings numerically, binary strings bytewise, as the view
/// engine compares.
pub fn compare_values(a: &Value, b: &Value, collation: Collation) -> Option<std::cmp::Ordering> {
    expr::compare(a, b, collation)
}

/// `s LIKE pattern` (escape `\`) under `collation`.
pub fn like_text(s: &str, pattern: &str, collation: Collation) -> bool {
    expr::like(s, pattern, '\\', collation)
}

/// The result column name of a select-list expression without an alias:
/// its SQL text, with a `_binary X'..'` shown as `X'..'` (the shim's
/// tokenizer introduces every `X'..'` literal, see `shim::sqltext`, and
/// MariaDB names the column as the literal was written).
pub fn expr_column_name(expr: &ast::Expr) -> String {
    // A string literal is named by its text, unquoted (MySQL's).
    if let ast::Expr::Value(ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s)) =
        expr
    {
        return s.clone();
    }
    // `X'..'` as the tokenizer introduced it.
    let plain_hex = |e: &ast::Expr| match e {
        ast::Expr::IntroducedString {
            introducer,
            value: v @ ast::Value::HexStringLiteral(_),
        } if introducer.eq_ignore_ascii_case("_binary") => Some(ast::Expr::Value(v.clone())),
        _ => None,
    };
    let mut found = false;
    let _ = ast::visit_expressions(expr, |e| {
        found |= plain_hex(e).is_some();
        std::ops::ControlFlow::<()>::Continue(())
    });
    if !found {
        return expr.to_string();
    }
    let mut plain = expr.clone();
    let _ = ast::visit_expressions_mut(&mut plain, |e| {
        if let Some(hex) = plain_hex(e) {
            *e = hex;
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    plain.to_string()
}

/// Compiles `expr` over the columns of `table` (or over no columns when
/// `table` is `None`, e.g. INSERT VALUES). Placeholders are an error: the
/// caller substitutes parameter values into the AST first.
pub fn compile_row_expr(expr: &ast::Expr, table: Option<&TableSchema>) -> Result<RowExpr> {
    Ok(RowExpr {
        expr: planner::compile_row_expr(expr, table)?,
    })
}
