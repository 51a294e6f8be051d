//! What the engine tells its callers about results and views: result
//! column metadata (with base-column provenance) and view statistics.

use std::sync::Arc;

use ladle_common::{SqlType, TableSchema};

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
    /// A DOUBLE result's fixed number of decimals (`ROUND(x, 2)`: 2;
    /// `FLOOR(x)`: 0), which its text shows positionally as MariaDB does
    /// (`100000000000000000.00`, not `1e17`); `None`: not fixed.
    pub decimals: Option<u8>,
    /// Whether the value is held as a table's column holds it though it
    /// has no `origin`: a UNION's column (MariaDB's temporary table).
    /// Such a BIT value goes out as its bytes, as a base column's does; an
    /// expression's (`MAX(b)`, `IFNULL(b, b)`) as its number, as MariaDB
    /// sends them.
    pub stored: bool,
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
