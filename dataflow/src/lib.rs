//! Ladle's incremental view engine.
//!
//! API CONTRACT (skeleton written first so the shim can code against it; the
//! dataflow implementer fills in the bodies and may add items, but must not
//! change these signatures without updating the shim).

use std::sync::Arc;

use ladle_common::{Row, SqlType, TableId, TableSchema, Value};
use ladle_storage::{Storage, StorageError};
use sqlparser::ast;

mod expr;
mod planner;

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
    // --- a known gap ---
    #[error("This version of Ladle doesn't yet support '{0}'")]
    Unsupported(String),
    // --- the environment / other layers ---
    #[error(transparent)]
    Storage(#[from] StorageError),
    // --- our bug ---
    #[error("internal dataflow error: {0}")]
    Internal(String),
}

pub type Result<T, E = DataflowError> = std::result::Result<T, E>;

#[derive(Clone, Debug)]
pub struct DataflowConfig {
    /// Bytes of view state kept in memory before eviction.
    pub memory_limit: usize,
}

/// A result column's metadata, as the wire protocol describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputColumn {
    pub name: String,
    /// The base table it comes from, or empty for computed columns.
    pub table: String,
    pub ty: SqlType,
    pub nullable: bool,
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
}

/// A SELECT bound to a view. Cheap to clone; `execute` is a reader lookup.
#[derive(Clone)]
pub struct PreparedQuery {
    _private: Arc<()>,
}

impl PreparedQuery {
    /// Result columns.
    pub fn columns(&self) -> &[OutputColumn] {
        unimplemented!("dataflow implementer")
    }
    /// Number of `?` placeholders the caller must supply.
    pub fn param_count(&self) -> usize {
        unimplemented!("dataflow implementer")
    }
    /// Reads the result for `params` (one value per `?`).
    pub fn execute(&self, _params: &[Value]) -> Result<Vec<Row>> {
        unimplemented!("dataflow implementer")
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
    DataflowError::BadArgument(e.0)
}

/// Compiles `expr` over the columns of `table` (or over no columns when
/// `table` is `None`, e.g. INSERT VALUES). Placeholders are an error: the
/// caller substitutes parameter values into the AST first.
pub fn compile_row_expr(expr: &ast::Expr, table: Option<&TableSchema>) -> Result<RowExpr> {
    Ok(RowExpr { expr: planner::compile_row_expr(expr, table)? })
}

/// The view engine. One per server.
pub struct Dataflow {
    _private: (),
}

impl Dataflow {
    /// Builds the engine over `storage`, registers it as the commit
    /// observer, and reinstalls views persisted in the catalog.
    pub fn new(_storage: Arc<Storage>, _config: DataflowConfig) -> Result<Arc<Dataflow>> {
        unimplemented!("dataflow implementer")
    }

    /// Plans (or reuses) the view answering `query` in `database`. Literals
    /// in equality predicates become parameters so queries differing only in
    /// them share one view; `?` placeholders become parameters too. Queries
    /// without FROM are evaluated directly.
    pub fn prepare(&self, _database: &str, _query: &ast::Query) -> Result<PreparedQuery> {
        unimplemented!("dataflow implementer")
    }

    /// CREATE [OR REPLACE] VIEW: a named query usable in FROM.
    pub fn create_view(&self, _database: &str, _name: &str, _query: &ast::Query, _or_replace: bool) -> Result<()> {
        unimplemented!("dataflow implementer")
    }
    pub fn drop_view(&self, _database: &str, _name: &str, _if_exists: bool) -> Result<()> {
        unimplemented!("dataflow implementer")
    }
    /// Names of the named views (CREATE VIEW) in `database`.
    pub fn named_views(&self, _database: &str) -> Vec<String> {
        unimplemented!("dataflow implementer")
    }
    /// SHOW VIEWS.
    pub fn view_stats(&self) -> Vec<ViewStats> {
        unimplemented!("dataflow implementer")
    }
    /// EXPLAIN GRAPH: the dataflow serving `query`, as text.
    pub fn explain_graph(&self, _database: &str, _query: &ast::Query) -> Result<String> {
        unimplemented!("dataflow implementer")
    }
    /// Schema changes: views over the table are rebuilt or removed.
    pub fn table_changed(&self, _table: TableId) {
        unimplemented!("dataflow implementer")
    }
}
