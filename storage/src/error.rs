//! The crate's one error type, by whose fault an error is.

use ladle_common::{CoerceError, ColumnSchema, TableId, Value};

/// Errors, by whose fault they are. The shim maps each to a MySQL error code.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StorageError {
    // --- the user's fault ---
    #[error("Duplicate entry '{value}' for key '{key}'")]
    DuplicateKey { key: String, value: String },
    #[error("Column '{column}' cannot be null")]
    NotNull { column: String },
    #[error("Field '{column}' doesn't have a default value")]
    NoDefault { column: String },
    #[error(transparent)]
    BadValue(#[from] ladle_common::CoerceError),
    /// A value that does not fit its column in one row of a write op: the
    /// shim words MariaDB's message, which names the row, from it.
    #[error("{} at row {}", .0.error, .0.row)]
    BadValueAt(Box<ValueMisfit>),
    #[error("Row size too large ({size} bytes, limit {limit})")]
    RowTooLarge { size: usize, limit: usize },
    #[error("Unknown database '{0}'")]
    NoSuchDatabase(String),
    #[error("Can't create database '{0}'; database exists")]
    DatabaseExists(String),
    #[error("Table '{database}.{table}' doesn't exist")]
    NoSuchTable { database: String, table: String },
    #[error("Table '{0}' already exists")]
    TableExists(String),
    #[error("Duplicate key name '{0}'")]
    IndexExists(String),
    #[error("Can't DROP '{0}'; check that column/key exists")]
    NoSuchIndex(String),
    #[error("Duplicate column name '{0}'")]
    ColumnExists(String),
    #[error("Column count doesn't match value count")]
    ColumnCount,
    /// A value the caller's row function computed is out of its type's
    /// range (integer overflow: MySQL's 1690).
    #[error("{0}")]
    OutOfRange(String),
    /// An expression evaluated by the caller's row function failed.
    #[error("{0}")]
    Expression(String),
    /// An expression evaluated by the caller's row function raised a
    /// warning that strict `sql_mode` makes the statement's error (MySQL's
    /// `code`: 1292 for `'x' + 1`, 1365 for a division by zero).
    #[error("{message}")]
    StrictWarning { code: u16, message: String },
    /// A caller's [`CommitCheck`] found a FOREIGN KEY violated at commit:
    /// a row references a parent row that is gone (MySQL's 1452).
    #[error("{0}")]
    NoReferencedRow(String),
    /// A caller's [`CommitCheck`] found a FOREIGN KEY violated at commit:
    /// a removed parent row is still referenced (MySQL's 1451).
    #[error("{0}")]
    RowIsReferenced(String),
    /// The caller's row function found a CHECK constraint FALSE for a row.
    #[error("CONSTRAINT `{constraint}` failed for `{database}`.`{table}`")]
    CheckFailed {
        constraint: String,
        database: String,
        table: String,
    },
    /// The caller's row function found a row written through a view WITH
    /// CHECK OPTION that the view would not show (MySQL's 1369; the view
    /// as `db.view`).
    #[error("CHECK OPTION failed '{0}'")]
    ViewCheckFailed(String),
    /// This node does not take writes now (a replica, or a primary that
    /// may have lost its leadership): MySQL's 1290, which clients retry.
    #[error("The MySQL server is running with the --read-only option so it cannot execute this statement ({0})")]
    ReadOnly(String),
    /// A write op was built for an older version of its table's schema (an
    /// ALTER TABLE or index change committed in between): MySQL's 1412,
    /// which the caller retries by building the op again.
    #[error("Table definition has changed, please retry transaction")]
    SchemaChanged { table: String },
    /// A caller's [`CommitCheck`] found a row the write changes held by
    /// another connection (a row lock the caller keeps): nothing was
    /// written; the caller waits for it and writes again.
    #[error("Lock wait timeout exceeded; try restarting transaction")]
    RowLocked,
    /// A caller's row function found its statement interrupted (KILL
    /// QUERY, KILL CONNECTION, its client gone): nothing was written.
    /// MySQL's 1317.
    #[error("Query execution was interrupted")]
    Interrupted,
    // --- the environment ---
    #[error("storage I/O error: {0}")]
    Io(String),
    #[error("data directory format version {found} is not supported (expected {expected})")]
    FormatVersion { found: u32, expected: u32 },
    #[error("corruption: {0}")]
    Corruption(String),
    /// The engine refuses every write after a background error (a failed
    /// flush or compaction) that is not a corruption: MySQL's 1030, until
    /// a restart. (A corruption stays 1034.)
    #[error("Got error 1 \"storage refuses writes after a background error: {0}\" from storage engine RocksDB")]
    WritesStopped(String),
    /// The data directory's file system is (nearly) full: MySQL's 1021.
    #[error(
        "Disk full ({path}); {available} bytes free, {reserve} kept in reserve: \
         free some space and retry"
    )]
    DiskFull {
        path: String,
        available: u64,
        reserve: u64,
    },
    // --- our bug ---
    #[error("internal storage error: {0}")]
    Internal(String),
}

/// A value that does not fit its column, where a write op met it.
#[derive(Clone, Debug)]
pub struct ValueMisfit {
    pub error: CoerceError,
    /// The value as the op gave it.
    pub value: Value,
    pub column: ColumnSchema,
    pub database: String,
    pub table: String,
    /// The row's number (from 1) among an INSERT's rows, or among the rows
    /// an UPDATE changes, in the order it meets them; 0 until the op's
    /// row loop numbers it.
    pub row: usize,
}

impl StorageError {
    /// This error, met in row `row` of a write op: a value that does not
    /// fit its column is numbered (see [`ValueMisfit::row`]).
    pub fn at_row(self, row: usize) -> StorageError {
        match self {
            StorageError::BadValueAt(mut m) => {
                m.row = row;
                StorageError::BadValueAt(m)
            }
            other => other,
        }
    }
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

pub(crate) fn no_table_id(id: TableId) -> StorageError {
    StorageError::NoSuchTable {
        database: String::new(),
        table: format!("#{id}"),
    }
}
