//! The shim's error type and THE table mapping every Ladle error to the
//! MySQL error number and SQLSTATE a client expects. No other module picks
//! error numbers.

use ladle_common::{CoerceError, SqlType};
use ladle_dataflow::{DataflowError, WindowError};
use ladle_storage::StorageError;

/// Errors the front end reports, by whose fault they are.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    // --- the user's fault ---
    #[error("You have an error in your SQL syntax; {0}")]
    Parse(String),
    #[error("No database selected")]
    NoDatabase,
    #[error("Unknown database '{0}'")]
    UnknownDatabase(String),
    #[error("Table '{database}.{table}' doesn't exist")]
    UnknownTable { database: String, table: String },
    #[error("Unknown column '{0}' in '{1}'")]
    UnknownColumn(String, String),
    #[error("Incorrect arguments to {0}")]
    WrongArguments(String),
    #[error(
        "Incorrect number of arguments for prepared statement: expected {expected}, got {got}"
    )]
    ParamCount { expected: usize, got: usize },
    #[error("Unknown prepared statement handler ({0}) given to mysqld_stmt_execute")]
    UnknownStatement(u32),
    /// A name no SQL PREPARE gave the session (`given_to`: "EXECUTE",
    /// "DEALLOCATE PREPARE").
    #[error("Unknown prepared statement handler ({name}) given to {given_to}")]
    UnknownStatementName {
        name: String,
        given_to: &'static str,
    },
    /// A statement SQL PREPARE does not take (PREPARE, EXECUTE,
    /// DEALLOCATE PREPARE themselves).
    #[error("This command is not supported in the prepared statement protocol yet")]
    NotPreparable,
    #[error("Multiple primary key defined")]
    MultiplePrimaryKey,
    /// A clause the statement form does not take (MySQL's multi-table
    /// UPDATE with ORDER BY or LIMIT: "UPDATE", "ORDER BY").
    #[error("Incorrect usage of {0} and {1}")]
    WrongUsage(&'static str, &'static str),
    #[error("Unknown system variable '{0}'")]
    UnknownVariable(String),
    #[error("Variable '{0}' can't be set to the value of '{1}'")]
    WrongValueForVar(String, String),
    /// A variable only the server's configuration sets.
    #[error("Variable '{0}' is a read only variable")]
    ReadOnlyVariable(String),
    #[error("Access denied for user '{user}'@'{host}' (using password: {using_password})")]
    AccessDenied {
        user: String,
        host: String,
        using_password: &'static str,
    },
    #[error("Too many connections")]
    TooManyConnections,
    #[error("SAVEPOINT {0} does not exist")]
    NoSuchSavepoint(String),
    #[error("Got a packet bigger than 'max_allowed_packet' bytes")]
    PacketTooLarge,
    /// An expression or a chain of set operations nested deeper than
    /// Ladle evaluates (MariaDB refuses a chain of 1,000 `+` with the same
    /// error).
    #[error(
        "Thread stack overrun: an expression is nested more than {} levels deep, \
         or a UNION more than {}; use IN (...) or fewer terms",
        ladle_dataflow::MAX_EXPR_DEPTH,
        ladle_dataflow::MAX_SET_DEPTH
    )]
    TooDeep,
    /// Queries nested in parentheses deeper than
    /// [`crate::sqltext::MAX_SELECT_NESTING`] (MariaDB's error and bound).
    #[error("Too high level of nesting for select")]
    TooManyNestedSelects,
    /// A metadata lock (see [`crate::metadata_locks`]) not granted within
    /// `lock_wait_timeout`.
    #[error("Lock wait timeout exceeded; try restarting transaction")]
    LockWaitTimeout,
    /// A row lock request closed a cycle of waits (see
    /// [`crate::row_locks`]): its transaction is rolled back.
    #[error("Deadlock found when trying to get lock; try restarting transaction")]
    Deadlock,
    /// A `NOWAIT` locking read met a row another transaction holds.
    #[error(
        "Statement aborted because lock(s) could not be acquired immediately and NOWAIT is set."
    )]
    LockNowait,
    /// A write waited for a row lock, so the rows it had found may have
    /// changed: the statement runs again (never sent to a client unless it
    /// keeps happening; see `dispatch::run_write_retrying`).
    #[error("Lock wait timeout exceeded; try restarting transaction")]
    RetryAfterRowLock,
    /// A multi-table UPDATE changing a table under two names, one of
    /// which assigns its primary key (the names in FROM's order).
    #[error(
        "Primary key/partition key update is not allowed since the table is updated both as \
         '{0}' and '{1}'"
    )]
    KeyUpdateUnderTwoNames(String, String),
    /// An UPDATE or DELETE (`statement`) through a view that is not
    /// updatable (aggregates, DISTINCT, UNION, no table...).
    #[error("The target table {view} of the {statement} is not updatable")]
    ViewNotUpdatable {
        view: String,
        statement: &'static str,
    },
    /// A write to a view's computed column.
    #[error("Column '{0}' is not updatable")]
    ColumnNotUpdatable(String),
    /// An INSERT through a view that is not insertable-into.
    #[error("The target table {0} of the INSERT is not insertable-into")]
    ViewNotInsertable(String),
    /// A write through a join view changing columns of several of its
    /// tables (`db.view`).
    #[error("Can not modify more than one base table through a join view '{0}'")]
    JoinViewManyTables(String),
    /// An INSERT into a join view naming no columns (`db.view`).
    #[error("Can not insert into join view '{0}' without fields list")]
    JoinViewNoFieldList(String),
    /// A DELETE from a join view (`db.view`).
    #[error("Can not delete from join view '{0}'")]
    JoinViewDelete(String),
    /// A row written through a view WITH CHECK OPTION that the view (or,
    /// CASCADED, a view under it) would not show (`db.view`, as MySQL
    /// writes it).
    #[error("CHECK OPTION failed '{0}'")]
    ViewCheckFailed(String),
    // --- a known gap ---
    #[error("This version of Ladle doesn't yet support '{0}'")]
    Unsupported(String),
    // --- other layers ---
    #[error("{}", storage_message(.0))]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Dataflow(#[from] DataflowError),
    /// An error whose MySQL code depends on the statement rather than the
    /// cause (DROP DATABASE of a missing database is 1008, not 1049).
    #[error("{}", .0.message)]
    Wire(WireError),
    // --- our bug ---
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = ShimError> = std::result::Result<T, E>;

impl From<CoerceError> for ShimError {
    fn from(e: CoerceError) -> ShimError {
        ShimError::Storage(StorageError::BadValue(e))
    }
}

impl From<sqlparser::parser::ParserError> for ShimError {
    fn from(e: sqlparser::parser::ParserError) -> ShimError {
        match e {
            // Nesting past what the parser allows: MySQL's 1436.
            sqlparser::parser::ParserError::RecursionLimitExceeded => ShimError::TooDeep,
            e => ShimError::Parse(e.to_string()),
        }
    }
}

/// A MySQL error as the wire protocol carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MysqlCode {
    pub errno: u16,
    pub sqlstate: &'static str,
}

const fn code(errno: u16, sqlstate: &'static str) -> MysqlCode {
    MysqlCode { errno, sqlstate }
}

// The mapping table (a unit test checks the SQLSTATEs are well formed).
pub const ER_ACCESS_DENIED: MysqlCode = code(1045, "28000");
pub const ER_CON_COUNT: MysqlCode = code(1040, "08004");
pub const ER_NO_DB: MysqlCode = code(1046, "3D000");
pub const ER_BAD_NULL: MysqlCode = code(1048, "23000");
pub const ER_BAD_DB: MysqlCode = code(1049, "42000");
pub const ER_TABLE_EXISTS: MysqlCode = code(1050, "42S01");
pub const ER_BAD_TABLE: MysqlCode = code(1051, "42S02");
pub const ER_NON_UNIQ: MysqlCode = code(1052, "23000");
pub const ER_NONUNIQ_TABLE: MysqlCode = code(1066, "42000");
pub const ER_BAD_FIELD: MysqlCode = code(1054, "42S22");
pub const ER_DUP_FIELDNAME: MysqlCode = code(1060, "42S21");
pub const ER_DUP_KEYNAME: MysqlCode = code(1061, "42000");
pub const ER_DUP_ENTRY: MysqlCode = code(1062, "23000");
pub const ER_PARSE: MysqlCode = code(1064, "42000");
pub const ER_DB_CREATE_EXISTS: MysqlCode = code(1007, "HY000");
pub const ER_DB_DROP_EXISTS: MysqlCode = code(1008, "HY000");
pub const ER_CANT_DROP_FIELD_OR_KEY: MysqlCode = code(1091, "42000");
pub const ER_KEY_COLUMN_DOES_NOT_EXIST: MysqlCode = code(1072, "42000");
pub const ER_WRONG_AUTO_KEY: MysqlCode = code(1075, "42000");
pub const ER_CANT_REMOVE_ALL_FIELDS: MysqlCode = code(1090, "42000");
pub const ER_KEY_DOES_NOT_EXIST: MysqlCode = code(1176, "42000");
pub const ER_DROP_INDEX_FK: MysqlCode = code(1553, "HY000");
pub const ER_FK_COLUMN_CANNOT_DROP_CHILD: MysqlCode = code(1829, "HY000");
pub const ER_WRONG_VALUE_COUNT: MysqlCode = code(1136, "21S01");
pub const ER_UNKNOWN: MysqlCode = code(1105, "HY000");
pub const ER_NO_SUCH_TABLE: MysqlCode = code(1146, "42S02");
pub const ER_NET_PACKET_TOO_LARGE: MysqlCode = code(1153, "08S01");
pub const ER_TOO_BIG_ROWSIZE: MysqlCode = code(1118, "42000");
pub const ER_UNKNOWN_SYSTEM_VARIABLE: MysqlCode = code(1193, "HY000");
pub const ER_UNKNOWN_STMT_HANDLER: MysqlCode = code(1243, "HY000");
pub const ER_UNSUPPORTED_PS: MysqlCode = code(1295, "HY000");
pub const ER_WRONG_ARGUMENTS: MysqlCode = code(1210, "HY000");
pub const ER_WRONG_VALUE_FOR_VAR: MysqlCode = code(1231, "42000");
pub const ER_VARIABLE_IS_READONLY: MysqlCode = code(1238, "HY000");
pub const ER_NOT_SUPPORTED_YET: MysqlCode = code(1235, "42000");
pub const ER_NON_UPDATABLE_TABLE: MysqlCode = code(1288, "HY000");
pub const ER_NON_INSERTABLE_TABLE: MysqlCode = code(1471, "HY000");
pub const ER_NONUPDATEABLE_COLUMN: MysqlCode = code(1348, "HY000");
pub const ER_VIEW_MULTIUPDATE: MysqlCode = code(1393, "HY000");
pub const ER_VIEW_NO_INSERT_FIELD_LIST: MysqlCode = code(1394, "HY000");
pub const ER_VIEW_DELETE_MERGE_VIEW: MysqlCode = code(1395, "HY000");
pub const ER_VIEW_CHECK_FAILED: MysqlCode = code(1369, "44000");
pub const ER_MULTI_UPDATE_KEY_CONFLICT: MysqlCode = code(1706, "HY000");
pub const ER_UNKNOWN_CHARACTER_SET: MysqlCode = code(1115, "42000");
pub const ER_UNKNOWN_COLLATION: MysqlCode = code(1273, "HY000");
pub const ER_UNKNOWN_STORAGE_ENGINE: MysqlCode = code(1286, "42000");
pub const ER_CANT_CHANGE_TX_CHARACTERISTICS: MysqlCode = code(1568, "25001");
pub const ER_TABLE_DEF_CHANGED: MysqlCode = code(1412, "HY000");
pub const ER_TOO_MANY_TABLES: MysqlCode = code(1116, "HY000");
pub const ER_SUBQUERY_NO_1_ROW: MysqlCode = code(1242, "21000");
pub const ER_OPERAND_COLUMNS: MysqlCode = code(1241, "21000");
pub const ER_WARN_DATA_OUT_OF_RANGE: MysqlCode = code(1264, "22003");
pub const ER_DATA_OUT_OF_RANGE: MysqlCode = code(1690, "22003");
pub const ER_NO_DEFAULT_FOR_FIELD: MysqlCode = code(1364, "HY000");
pub const ER_WRONG_FIELD_WITH_GROUP: MysqlCode = code(1055, "42000");
pub const ER_MIX_OF_GROUP_FUNC_AND_FIELDS: MysqlCode = code(1140, "42000");
pub const ER_INVALID_GROUP_FUNC_USE: MysqlCode = code(1111, "HY000");
// MariaDB's SQLSTATE for 1366 (MySQL 8 sends HY000).
pub const ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: MysqlCode = code(1366, "22007");
/// A cluster replica, or a primary that may have lost its leadership,
/// refuses writes (as a server started with --read-only): retryable.
pub const ER_OPTION_PREVENTS_STATEMENT: MysqlCode = code(1290, "HY000");
/// Also a replica's read that waited too long for the session's own
/// forwarded write (clients retry 1205).
pub const ER_LOCK_WAIT_TIMEOUT: MysqlCode = code(1205, "HY000");
/// A row lock wait that would close a cycle (the transaction is rolled back).
pub const ER_LOCK_DEADLOCK: MysqlCode = code(1213, "40001");
/// MySQL 8.0's `NOWAIT` refusal (MariaDB sends 1205 instead).
pub const ER_LOCK_NOWAIT: MysqlCode = code(3572, "HY000");
pub const ER_TRUNCATED_WRONG_VALUE: MysqlCode = code(1292, "22007");
pub const ER_DIVISION_BY_ZERO: MysqlCode = code(1365, "22012");
pub const ER_ERROR_ON_RENAME: MysqlCode = code(1025, "HY000");
pub const ER_DATETIME_FUNCTION_OVERFLOW: MysqlCode = code(1441, "22008");
pub const ER_WARN_DATA_TRUNCATED: MysqlCode = code(1265, "01000");
pub const ER_DISK_FULL: MysqlCode = code(1021, "HY000");
/// Stored data failed its checksum or would not decode: what MySQL and
/// MariaDB answer when a table's pages are found corrupt (InnoDB's
/// DB_CORRUPTION becomes HA_ERR_CRASHED, reported as ER_NOT_KEYFILE).
pub const ER_NOT_KEYFILE: MysqlCode = code(1034, "HY000");
/// "Got error N from storage engine": storage refuses writes after a
/// background error that is not a corruption.
pub const ER_GET_ERRNO: MysqlCode = code(1030, "HY000");
pub const ER_OUT_OF_RESOURCES: MysqlCode = code(1041, "HY000");
pub const ER_STACK_OVERRUN: MysqlCode = code(1436, "HY000");
pub const ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT: MysqlCode = code(1473, "HY000");
pub const ER_DATA_TOO_LONG: MysqlCode = code(1406, "22001");
pub const ER_UNKNOWN_VIEW: MysqlCode = code(1347, "HY000");
pub const ER_VIEW_SELECT_TMPTABLE: MysqlCode = code(1352, "HY000");
pub const ER_MULTIPLE_PRI_KEY: MysqlCode = code(1068, "42000");
pub const ER_SP_DOES_NOT_EXIST: MysqlCode = code(1305, "42000");
pub const ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT: MysqlCode = code(1582, "42000");
/// MariaDB's ER_CONSTRAINT_FAILED (MySQL 8 says 3819 for the same).
// Windows: MySQL 8's codes (MariaDB's 4009-4015 and 4074 say the same).
pub const ER_WINDOW_NO_SUCH_WINDOW: MysqlCode = code(3579, "HY000");
pub const ER_WINDOW_CIRCULARITY_IN_WINDOW_GRAPH: MysqlCode = code(3580, "HY000");
pub const ER_WINDOW_NO_CHILD_PARTITIONING: MysqlCode = code(3581, "HY000");
pub const ER_WINDOW_NO_INHERIT_FRAME: MysqlCode = code(3582, "HY000");
pub const ER_WINDOW_NO_REDEFINE_ORDER_BY: MysqlCode = code(3583, "HY000");
pub const ER_WINDOW_DUPLICATE_NAME: MysqlCode = code(3591, "HY000");
pub const ER_WINDOW_INVALID_WINDOW_FUNC_USE: MysqlCode = code(3593, "HY000");
pub const ER_WINDOW_NESTED_WINDOW_FUNC_USE_IN_WINDOW_SPEC: MysqlCode = code(3594, "HY000");
pub const ER_CONSTRAINT_FAILED: MysqlCode = code(4025, "23000");
pub const ER_DUP_CONSTRAINT_NAME: MysqlCode = code(1826, "HY000");
/// A value other than DEFAULT (or NULL) written to a generated column: an
/// error, a warning under IGNORE (MariaDB's rule).
pub const ER_WARNING_NON_DEFAULT_VALUE_FOR_GENERATED_COLUMN: MysqlCode = code(1906, "HY000");
pub const ER_ROW_IS_REFERENCED: MysqlCode = code(1451, "23000");
pub const ER_NO_REFERENCED_ROW: MysqlCode = code(1452, "23000");
pub const ER_TRUNCATE_ILLEGAL_FK: MysqlCode = code(1701, "42000");
pub const ER_WRONG_FK_DEF: MysqlCode = code(1239, "42000");
pub const ER_CANT_CREATE_TABLE: MysqlCode = code(1005, "HY000");
pub const ER_TOO_BIG_PRECISION: MysqlCode = code(1426, "42000");
pub const ER_TOO_BIG_DISPLAYWIDTH: MysqlCode = code(1439, "42000");
pub const ER_INVALID_DEFAULT: MysqlCode = code(1067, "42000");
// Accounts, privileges and connections.
pub const ER_DBACCESS_DENIED: MysqlCode = code(1044, "42000");
pub const ER_NO_SUCH_THREAD: MysqlCode = code(1094, "HY000");
pub const ER_KILL_DENIED: MysqlCode = code(1095, "HY000");
pub const ER_HOST_IS_BLOCKED: MysqlCode = code(1129, "HY000");
pub const ER_PASSWORD_NO_MATCH: MysqlCode = code(1133, "28000");
pub const ER_NONEXISTING_GRANT: MysqlCode = code(1141, "42000");
pub const ER_TABLEACCESS_DENIED: MysqlCode = code(1142, "42000");
pub const ER_NONEXISTING_TABLE_GRANT: MysqlCode = code(1147, "42000");
pub const ER_LOCAL_VARIABLE: MysqlCode = code(1228, "HY000");
pub const ER_WRONG_TYPE_FOR_VAR: MysqlCode = code(1232, "42000");
pub const ER_GLOBAL_VARIABLE: MysqlCode = code(1229, "HY000");
pub const ER_MAX_PREPARED_STMT_COUNT_REACHED: MysqlCode = code(1461, "42000");
/// More placeholders than COM_STMT_PREPARE's reply can count (65,535).
pub const ER_PS_MANY_PARAM: MysqlCode = code(1390, "HY000");
pub const ER_WRONG_USAGE: MysqlCode = code(1221, "HY000");
pub const ER_SPECIFIC_ACCESS_DENIED: MysqlCode = code(1227, "42000");
pub const ER_QUERY_INTERRUPTED: MysqlCode = code(1317, "70100");
pub const ER_PASSWD_LENGTH: MysqlCode = code(1372, "HY000");
/// MySQL 8's ER_PASSWORD_FORMAT: an `AS` hash its plugin cannot read.
pub const ER_PASSWORD_FORMAT: MysqlCode = code(1827, "HY000");
pub const ER_CANNOT_USER: MysqlCode = code(1396, "HY000");
pub const ER_CONNECTION_KILLED: MysqlCode = code(1927, "70100");
pub const ER_USER_CREATE_EXISTS: MysqlCode = code(1973, "HY000");
pub const ER_USER_DROP_EXISTS: MysqlCode = code(1974, "HY000");
pub const ER_QUERY_TIMEOUT: MysqlCode = code(3024, "HY000");
pub const ER_SECURE_TRANSPORT_REQUIRED: MysqlCode = code(3159, "HY000");
pub const ER_WRONG_COLUMN_NAME: MysqlCode = code(1166, "42000");
// Functional key parts (MySQL 8).
pub const ER_FUNCTIONAL_INDEX_REF_AUTO_INCREMENT: MysqlCode = code(3754, "HY000");
pub const ER_FUNCTIONAL_INDEX_PRIMARY_KEY: MysqlCode = code(3756, "HY000");
pub const ER_FUNCTIONAL_INDEX_ON_LOB: MysqlCode = code(3757, "HY000");
pub const ER_FUNCTIONAL_INDEX_FUNCTION_IS_NOT_ALLOWED: MysqlCode = code(3758, "HY000");
pub const ER_FUNCTIONAL_INDEX_ON_FIELD: MysqlCode = code(3762, "HY000");
pub const ER_DEPENDENT_BY_FUNCTIONAL_INDEX: MysqlCode = code(3837, "HY000");

impl ShimError {
    /// This error, met in row `row` (from 1) of a statement's rows: a
    /// value that does not fit its column names the row, as MariaDB's
    /// message does (see [`StorageError::at_row`]).
    pub fn at_row(self, row: usize) -> ShimError {
        match self {
            ShimError::Storage(e) => ShimError::Storage(e.at_row(row)),
            other => other,
        }
    }

    /// The MySQL error number and SQLSTATE for this error.
    pub fn mysql_code(&self) -> MysqlCode {
        match self {
            ShimError::Parse(_) => ER_PARSE,
            ShimError::NoDatabase => ER_NO_DB,
            ShimError::UnknownDatabase(_) => ER_BAD_DB,
            ShimError::UnknownTable { .. } => ER_NO_SUCH_TABLE,
            ShimError::UnknownColumn(..) => ER_BAD_FIELD,
            ShimError::WrongArguments(_) | ShimError::ParamCount { .. } => ER_WRONG_ARGUMENTS,
            ShimError::UnknownStatement(_) | ShimError::UnknownStatementName { .. } => {
                ER_UNKNOWN_STMT_HANDLER
            }
            ShimError::NotPreparable => ER_UNSUPPORTED_PS,
            ShimError::UnknownVariable(_) => ER_UNKNOWN_SYSTEM_VARIABLE,
            ShimError::MultiplePrimaryKey => ER_MULTIPLE_PRI_KEY,
            ShimError::WrongUsage(..) => ER_WRONG_USAGE,
            ShimError::WrongValueForVar(..) => ER_WRONG_VALUE_FOR_VAR,
            ShimError::ReadOnlyVariable(_) => ER_VARIABLE_IS_READONLY,
            ShimError::AccessDenied { .. } => ER_ACCESS_DENIED,
            ShimError::TooManyConnections => ER_CON_COUNT,
            ShimError::NoSuchSavepoint(_) => ER_SP_DOES_NOT_EXIST,
            ShimError::PacketTooLarge => ER_NET_PACKET_TOO_LARGE,
            ShimError::TooDeep => ER_STACK_OVERRUN,
            ShimError::TooManyNestedSelects => ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT,
            ShimError::LockWaitTimeout | ShimError::RetryAfterRowLock => ER_LOCK_WAIT_TIMEOUT,
            ShimError::Deadlock => ER_LOCK_DEADLOCK,
            ShimError::LockNowait => ER_LOCK_NOWAIT,
            ShimError::KeyUpdateUnderTwoNames(..) => ER_MULTI_UPDATE_KEY_CONFLICT,
            ShimError::ViewNotUpdatable { .. } => ER_NON_UPDATABLE_TABLE,
            ShimError::ViewNotInsertable(_) => ER_NON_INSERTABLE_TABLE,
            ShimError::ColumnNotUpdatable(_) => ER_NONUPDATEABLE_COLUMN,
            ShimError::JoinViewManyTables(_) => ER_VIEW_MULTIUPDATE,
            ShimError::JoinViewNoFieldList(_) => ER_VIEW_NO_INSERT_FIELD_LIST,
            ShimError::JoinViewDelete(_) => ER_VIEW_DELETE_MERGE_VIEW,
            ShimError::ViewCheckFailed(_) => ER_VIEW_CHECK_FAILED,
            ShimError::Unsupported(_) => ER_NOT_SUPPORTED_YET,
            ShimError::Storage(e) => storage_code(e),
            ShimError::Dataflow(e) => dataflow_code(e),
            ShimError::Wire(w) => w.code,
            ShimError::Internal(_) => ER_UNKNOWN,
        }
    }

    /// A call of a function that does not exist, named in the session's
    /// database `database` as MariaDB names it (see
    /// [`DataflowError::in_database`]); any other error as it is.
    pub fn in_database(self, database: Option<&str>) -> ShimError {
        match self {
            ShimError::Dataflow(e) => ShimError::Dataflow(e.in_database(database)),
            other => other,
        }
    }

    /// True for errors that are Ladle's fault or the environment's (logged
    /// at WARN/ERROR rather than DEBUG).
    pub fn is_internal(&self) -> bool {
        self.mysql_code() == ER_UNKNOWN
    }
}

fn storage_code(e: &StorageError) -> MysqlCode {
    match e {
        StorageError::DuplicateKey { .. } => ER_DUP_ENTRY,
        StorageError::NotNull { .. } => ER_BAD_NULL,
        StorageError::NoDefault { .. } => ER_NO_DEFAULT_FOR_FIELD,
        // MariaDB reports a bad date or time as 1292, anything else as 1366.
        StorageError::BadValue(CoerceError::Incorrect { ty, .. })
            if matches!(ty.as_str(), "date" | "datetime" | "time") =>
        {
            ER_TRUNCATED_WRONG_VALUE
        }
        // A value that is no label of an ENUM: "Data truncated" (1265).
        StorageError::BadValue(CoerceError::Incorrect { ty, .. }) if ty == "enum" => {
            ER_WARN_DATA_TRUNCATED
        }
        StorageError::BadValue(
            CoerceError::Incorrect { .. } | CoerceError::IncorrectString { .. },
        ) => ER_TRUNCATED_WRONG_VALUE_FOR_FIELD,
        StorageError::BadValue(CoerceError::OutOfRange { .. }) => ER_WARN_DATA_OUT_OF_RANGE,
        StorageError::BadValue(CoerceError::TooLong { .. }) => ER_DATA_TOO_LONG,
        StorageError::BadValueAt(m) => misfit_wording(m).0,
        StorageError::RowTooLarge { .. } => ER_TOO_BIG_ROWSIZE,
        StorageError::NoSuchDatabase(_) => ER_BAD_DB,
        StorageError::DatabaseExists(_) => ER_DB_CREATE_EXISTS,
        StorageError::NoSuchTable { .. } => ER_NO_SUCH_TABLE,
        StorageError::TableExists(_) => ER_TABLE_EXISTS,
        StorageError::IndexExists(_) => ER_DUP_KEYNAME,
        StorageError::NoSuchIndex(_) => ER_CANT_DROP_FIELD_OR_KEY,
        StorageError::ColumnExists(_) => ER_DUP_FIELDNAME,
        StorageError::ColumnCount => ER_WRONG_VALUE_COUNT,
        StorageError::Expression(_) => ER_WRONG_ARGUMENTS,
        StorageError::StrictWarning { code, .. } => warning_code(*code),
        StorageError::OutOfRange(_) => ER_DATA_OUT_OF_RANGE,
        StorageError::CheckFailed { .. } => ER_CONSTRAINT_FAILED,
        StorageError::ViewCheckFailed(_) => ER_VIEW_CHECK_FAILED,
        StorageError::NoReferencedRow(_) => ER_NO_REFERENCED_ROW,
        StorageError::RowIsReferenced(_) => ER_ROW_IS_REFERENCED,
        StorageError::DiskFull { .. } => ER_DISK_FULL,
        StorageError::ReadOnly(_) => ER_OPTION_PREVENTS_STATEMENT,
        StorageError::SchemaChanged { .. } => ER_TABLE_DEF_CHANGED,
        StorageError::RowLocked => ER_LOCK_WAIT_TIMEOUT,
        StorageError::Interrupted => ER_QUERY_INTERRUPTED,
        StorageError::Corruption(_) => ER_NOT_KEYFILE,
        StorageError::WritesStopped(_) => ER_GET_ERRNO,
        StorageError::Io(_) | StorageError::FormatVersion { .. } | StorageError::Internal(_) => {
            ER_UNKNOWN
        }
    }
}

/// A storage error's message: MariaDB's for a value that does not fit
/// its column in a row a statement writes (see [`misfit_wording`]).
fn storage_message(e: &StorageError) -> String {
    match e {
        StorageError::BadValueAt(m) => misfit_wording(m).1,
        other => other.to_string(),
    }
}

/// MariaDB's strict-mode error for a value that does not fit its column,
/// naming the statement's row: a number beyond the column's range 1264, a
/// string too long 1406, a number with trailing junk (`'1x'`) or no label
/// of an ENUM 1265, a bad date or time 1292 and any other incorrect value
/// 1366 (these two name the column `db`.`table`.`column`).
fn misfit_wording(m: &ladle_storage::ValueMisfit) -> (MysqlCode, String) {
    let row = m.row;
    let column = &m.column.name;
    let qualified = format!("`{}`.`{}`.`{column}`", m.database, m.table);
    let numeric = matches!(
        m.column.ty,
        SqlType::Int { .. }
            | SqlType::Year
            | SqlType::Bit(_)
            | SqlType::Decimal { .. }
            | SqlType::Float
            | SqlType::Double
    );
    let truncated = || {
        numeric
            && matches!(
                ladle_common::coerce_adjusting(&m.value, &m.column),
                Ok((_, Some(ladle_common::Adjustment::Truncated)))
            )
    };
    match &m.error {
        CoerceError::OutOfRange { .. } => (
            ER_WARN_DATA_OUT_OF_RANGE,
            format!("Out of range value for column '{column}' at row {row}"),
        ),
        CoerceError::TooLong { .. } => (
            ER_DATA_TOO_LONG,
            format!("Data too long for column '{column}' at row {row}"),
        ),
        CoerceError::Incorrect { ty, .. } if ty == "enum" || truncated() => (
            ER_WARN_DATA_TRUNCATED,
            format!("Data truncated for column '{column}' at row {row}"),
        ),
        CoerceError::Incorrect { ty, value, .. } => {
            let (code, kind) = match &m.column.ty {
                SqlType::Date
                | SqlType::DateTime { .. }
                | SqlType::Timestamp { .. }
                | SqlType::Time { .. } => (ER_TRUNCATED_WRONG_VALUE, ty.as_str()),
                SqlType::Int { .. } | SqlType::Year => {
                    (ER_TRUNCATED_WRONG_VALUE_FOR_FIELD, "integer")
                }
                SqlType::Decimal { .. } => (ER_TRUNCATED_WRONG_VALUE_FOR_FIELD, "decimal"),
                SqlType::Float | SqlType::Double => (ER_TRUNCATED_WRONG_VALUE_FOR_FIELD, "double"),
                _ => (ER_TRUNCATED_WRONG_VALUE_FOR_FIELD, ty.as_str()),
            };
            let message =
                format!("Incorrect {kind} value: '{value}' for column {qualified} at row {row}");
            (code, message)
        }
        CoerceError::IncorrectString { value, .. } => (
            ER_TRUNCATED_WRONG_VALUE_FOR_FIELD,
            format!("Incorrect string value: '{value}' for column {qualified} at row {row}"),
        ),
    }
}

fn dataflow_code(e: &DataflowError) -> MysqlCode {
    match e {
        DataflowError::UnknownColumn(..) => ER_BAD_FIELD,
        DataflowError::AmbiguousColumn(..) => ER_NON_UNIQ,
        DataflowError::UnknownTable(_) => ER_NO_SUCH_TABLE,
        DataflowError::ParamCount { .. } => ER_WRONG_ARGUMENTS,
        DataflowError::FunctionParamCount(_) => ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT,
        DataflowError::ViewExists(_) => ER_TABLE_EXISTS,
        DataflowError::UnknownView(_) => ER_UNKNOWN_VIEW,
        DataflowError::BadArgument(_) => ER_WRONG_ARGUMENTS,
        DataflowError::OutOfRange(_) => ER_DATA_OUT_OF_RANGE,
        DataflowError::UnknownCharset(_) => ER_UNKNOWN_CHARACTER_SET,
        DataflowError::SubqueryRows => ER_SUBQUERY_NO_1_ROW,
        DataflowError::TooManyTables => ER_TOO_MANY_TABLES,
        DataflowError::NotInGroupBy(_) => ER_WRONG_FIELD_WITH_GROUP,
        DataflowError::MixOfGroupColumns => ER_MIX_OF_GROUP_FUNC_AND_FIELDS,
        DataflowError::InvalidGroupFunction => ER_INVALID_GROUP_FUNC_USE,
        DataflowError::UnknownFunction(_) => ER_SP_DOES_NOT_EXIST,
        DataflowError::Unsupported(_) => ER_NOT_SUPPORTED_YET,
        DataflowError::Interrupted { timeout: false } => ER_QUERY_INTERRUPTED,
        DataflowError::Interrupted { timeout: true } => ER_QUERY_TIMEOUT,
        DataflowError::OutOfMemory { .. } => ER_OUT_OF_RESOURCES,
        DataflowError::Window(w) => window_code(w),
        DataflowError::Storage(s) => storage_code(s),
        DataflowError::ViewDropped | DataflowError::FillLost | DataflowError::Internal(_) => {
            ER_UNKNOWN
        }
    }
}

fn window_code(e: &WindowError) -> MysqlCode {
    match e {
        WindowError::NoSuchWindow(_) => ER_WINDOW_NO_SUCH_WINDOW,
        WindowError::Circularity => ER_WINDOW_CIRCULARITY_IN_WINDOW_GRAPH,
        WindowError::ChildPartitioning => ER_WINDOW_NO_CHILD_PARTITIONING,
        WindowError::InheritFrame(_) => ER_WINDOW_NO_INHERIT_FRAME,
        WindowError::RedefineOrderBy(..) => ER_WINDOW_NO_REDEFINE_ORDER_BY,
        WindowError::DuplicateName(_) => ER_WINDOW_DUPLICATE_NAME,
        WindowError::InvalidUse(_) => ER_WINDOW_INVALID_WINDOW_FUNC_USE,
        WindowError::NestedInSpec(_) => ER_WINDOW_NESTED_WINDOW_FUNC_USE_IN_WINDOW_SPEC,
    }
}

/// The error code of a DROP DATABASE of a missing database (1008), which
/// differs from USE of a missing one (1049).
pub fn drop_db_missing(name: &str) -> (MysqlCode, String) {
    (
        ER_DB_DROP_EXISTS,
        format!("Can't drop database '{name}'; database doesn't exist"),
    )
}

/// A warning evaluation raised (`errno`, `message`), as the error it
/// becomes where MariaDB's strict `sql_mode` turns warnings into errors
/// (its `abort_on_warning`: an INSERT's RETURNING): the warning's own
/// code with that code's SQLSTATE.
pub fn warning_as_error(errno: u16, message: String) -> WireError {
    WireError {
        code: warning_code(errno),
        message,
    }
}

/// The code (with its SQLSTATE) of warning `errno` raised as an error.
fn warning_code(errno: u16) -> MysqlCode {
    [
        ER_TRUNCATED_WRONG_VALUE,
        ER_DIVISION_BY_ZERO,
        ER_DATETIME_FUNCTION_OVERFLOW,
        ER_WARN_DATA_OUT_OF_RANGE,
        ER_TRUNCATED_WRONG_VALUE_FOR_FIELD,
    ]
    .into_iter()
    .find(|c| c.errno == errno)
    .unwrap_or(MysqlCode {
        errno,
        sqlstate: "HY000",
    })
}

/// RENAME TABLE (or ALTER TABLE ... RENAME) into a database that does
/// not exist: MariaDB's 1025 from InnoDB (the engine Ladle reports),
/// naming the tables by their files.
pub fn rename_into_missing_database(from: &(String, String), to: &(String, String)) -> WireError {
    WireError {
        code: ER_ERROR_ON_RENAME,
        message: format!(
            "Error on rename of './{}/{}' to './{}/{}' (errno: 168 \"Unknown (generic) error from engine\")",
            from.0, from.1, to.0, to.1
        ),
    }
}

/// DROP TABLE of a missing table (1051).
pub fn unknown_table_drop(name: &str) -> (MysqlCode, String) {
    (ER_BAD_TABLE, format!("Unknown table '{name}'"))
}

/// An error already resolved to its wire form (for the few statements whose
/// MySQL code depends on the statement rather than the cause).
#[derive(Debug, Clone)]
pub struct WireError {
    pub code: MysqlCode,
    pub message: String,
}

impl From<ShimError> for WireError {
    fn from(e: ShimError) -> WireError {
        if let ShimError::Wire(w) = e {
            return w;
        }
        WireError {
            code: e.mysql_code(),
            message: e.to_string(),
        }
    }
}

impl From<(MysqlCode, String)> for WireError {
    fn from((code, message): (MysqlCode, String)) -> WireError {
        WireError { code, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sqlstate_is_five_characters() {
        let all = [
            ER_ACCESS_DENIED,
            ER_CON_COUNT,
            ER_NO_DB,
            ER_BAD_NULL,
            ER_BAD_DB,
            ER_TABLE_EXISTS,
            ER_BAD_TABLE,
            ER_DIVISION_BY_ZERO,
            ER_DATETIME_FUNCTION_OVERFLOW,
            ER_ERROR_ON_RENAME,
            ER_NON_UNIQ,
            ER_NONUNIQ_TABLE,
            ER_BAD_FIELD,
            ER_DUP_FIELDNAME,
            ER_DUP_KEYNAME,
            ER_DUP_ENTRY,
            ER_PARSE,
            ER_DB_CREATE_EXISTS,
            ER_DB_DROP_EXISTS,
            ER_CANT_DROP_FIELD_OR_KEY,
            ER_WRONG_VALUE_COUNT,
            ER_UNKNOWN,
            ER_NO_SUCH_TABLE,
            ER_NET_PACKET_TOO_LARGE,
            ER_TOO_BIG_ROWSIZE,
            ER_UNKNOWN_SYSTEM_VARIABLE,
            ER_UNKNOWN_STMT_HANDLER,
            ER_UNSUPPORTED_PS,
            ER_WRONG_ARGUMENTS,
            ER_WRONG_VALUE_FOR_VAR,
            ER_NOT_SUPPORTED_YET,
            ER_SUBQUERY_NO_1_ROW,
            ER_WARN_DATA_OUT_OF_RANGE,
            ER_NO_DEFAULT_FOR_FIELD,
            ER_TRUNCATED_WRONG_VALUE_FOR_FIELD,
            ER_DATA_TOO_LONG,
            ER_UNKNOWN_VIEW,
            ER_MULTIPLE_PRI_KEY,
            ER_NON_UPDATABLE_TABLE,
            ER_NON_INSERTABLE_TABLE,
            ER_NONUPDATEABLE_COLUMN,
            ER_VIEW_MULTIUPDATE,
            ER_VIEW_NO_INSERT_FIELD_LIST,
            ER_VIEW_DELETE_MERGE_VIEW,
            ER_VIEW_CHECK_FAILED,
            ER_MULTI_UPDATE_KEY_CONFLICT,
        ];
        for c in all {
            assert_eq!(c.sqlstate.len(), 5, "errno {}", c.errno);
            assert!(
                c.sqlstate
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()),
                "errno {}",
                c.errno
            );
        }
    }

    #[test]
    fn storage_errors_map_to_mysql_codes() {
        let dup = ShimError::Storage(StorageError::DuplicateKey {
            key: "PRIMARY".into(),
            value: "1".into(),
        });
        assert_eq!(dup.mysql_code(), code(1062, "23000"));
        let long = ShimError::from(CoerceError::TooLong { column: "c".into() });
        assert_eq!(long.mysql_code().errno, 1406);
        assert_eq!(ShimError::Parse("x".into()).mysql_code().errno, 1064);
        // Writes refused after a storage background error: a corruption is
        // 1034, anything else 1030 (not 1105, "unknown error").
        let corrupt = ShimError::Storage(StorageError::Corruption("block".into()));
        assert_eq!(corrupt.mysql_code(), code(1034, "HY000"));
        let stopped = ShimError::Storage(StorageError::WritesStopped("IO error".into()));
        assert_eq!(stopped.mysql_code(), code(1030, "HY000"));
        assert!(stopped.to_string().starts_with("Got error 1 "), "{stopped}");
    }
}
