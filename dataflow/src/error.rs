//! The crate's one error type, by whose fault an error is.

use ladle_storage::StorageError;

use crate::expr;

// (Clone: a planned subquery's refusal is remembered, see `planner::memo`.)
#[derive(Debug, Clone, thiserror::Error)]
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
    /// A built-in function called with the wrong number of arguments
    /// (MySQL's 1582); holds the name as the call spelled it.
    #[error("Incorrect parameter count in the call to native function '{0}'")]
    FunctionParamCount(String),
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
    /// Under `sql_mode=ONLY_FULL_GROUP_BY`, a select-list column that is
    /// neither grouped nor aggregated (1055), named `db.table.column`.
    #[error("'{0}' isn't in GROUP BY")]
    NotInGroupBy(String),
    /// Under `sql_mode=ONLY_FULL_GROUP_BY`, aggregates beside a bare column
    /// without GROUP BY (1140).
    #[error("Mixing of GROUP columns (MIN(),MAX(),COUNT(),...) with no GROUP columns is illegal if there is no GROUP BY clause")]
    MixOfGroupColumns,
    /// An aggregate of a query's own rows in its WHERE (`WHERE a =
    /// MAX(a)`), which picks the rows it would aggregate (1111).
    #[error("Invalid use of group function")]
    InvalidGroupFunction,
    /// One SELECT's FROM clause joins more than 61 tables (MySQL's 1116).
    #[error("Too many tables; MariaDB can only use 61 tables in a join")]
    TooManyTables,
    /// `CONVERT(x USING name)` naming no character set MariaDB has
    /// (1115); holds the name as written.
    #[error("Unknown character set: '{0}'")]
    UnknownCharset(String),
    /// A scalar subquery returned several rows (MySQL's 1242).
    #[error("Subquery returns more than 1 row")]
    SubqueryRows,
    /// A call of a function that is no MySQL or MariaDB built-in: MariaDB
    /// takes the name for a stored function, and there is none (1305).
    #[error("FUNCTION {0} does not exist")]
    UnknownFunction(FunctionName),
    /// The read was stopped (see [`interrupt`]): by `KILL` or a client
    /// that went away, or (`timeout`) by `max_execution_time`.
    #[error("{}", if *.timeout {
        "Query execution was interrupted, maximum statement execution time exceeded"
    } else {
        "Query execution was interrupted"
    })]
    Interrupted { timeout: bool },
    /// A read would materialize more rows than a statement may hold (see
    /// [`crate::interrupt::watch_memory`]): MySQL's 1041.
    #[error(
        "Out of memory: the statement needs more than its {limit} bytes of working memory \
         (half of --memory-limit); narrow it, or raise --memory-limit"
    )]
    OutOfMemory { limit: usize },
    /// A window MySQL refuses: a WINDOW clause or an OVER naming a window
    /// wrongly (3579-3583, 3591), a window function out of place (3593,
    /// 3594).
    #[error(transparent)]
    Window(#[from] WindowError),
    // --- a known gap ---
    #[error("This version of Ladle doesn't yet support '{0}'")]
    Unsupported(Gap),
    // --- the environment / other layers ---
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The view being read was dropped meanwhile (a schema change): the
    /// read is planned again. Never reaches a client.
    #[error("view dropped while being read")]
    ViewDropped,
    /// An optimistic fill stopped because a write raced it (see
    /// [`crate::interrupt::watch_lost`]): the fill is retried. Never
    /// reaches a client.
    #[error("fill lost to a concurrent write")]
    FillLost,
    // --- our bug ---
    #[error("internal dataflow error: {0}")]
    Internal(String),
}

impl DataflowError {
    /// The planner refused NOW()/RAND() where a maintained view would
    /// freeze their value: the statement can still be answered with its
    /// clock fixed (see the shim's `clock`).
    pub fn is_volatile_refusal(&self) -> bool {
        matches!(self, DataflowError::Unsupported(gap) if gap.volatile)
    }

    /// An [`DataflowError::UnknownFunction`] whose name does not say its
    /// database names `database`'s function, as MariaDB qualifies a
    /// stored function's name with the current database (`FUNCTION
    /// db.f does not exist`; `f` alone when none is selected, `None` or
    /// empty). The first database given sticks; any other error is
    /// returned as it is.
    pub fn in_database(self, database: Option<&str>) -> DataflowError {
        match self {
            DataflowError::UnknownFunction(f) if !f.settled => {
                let name = match database {
                    Some(db) if !db.is_empty() => format!("{db}.{}", f.name),
                    _ => f.name,
                };
                DataflowError::UnknownFunction(FunctionName {
                    name,
                    settled: true,
                })
            }
            other => other,
        }
    }
}

/// The name of a called function that does not exist (a
/// [`DataflowError::UnknownFunction`]), as MariaDB's error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionName {
    /// As the call spelled it (`f`, or `db.f`).
    name: String,
    /// Whether `name` says its database, or that none is selected: set by
    /// a call naming its database, or by [`DataflowError::in_database`].
    settled: bool,
}

impl FunctionName {
    /// The name of a call of `parts` (`[f]` or `[db, f]`).
    pub(crate) fn called(parts: &[String]) -> FunctionName {
        FunctionName {
            name: parts.join("."),
            settled: parts.len() > 1,
        }
    }
}

impl std::fmt::Display for FunctionName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// How a window is wrong: a named one (`WINDOW w AS (...)`, `OVER w`,
/// `OVER (w ORDER BY c)`), or a window function where none may be; with
/// MySQL's message for each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// An OVER or a window definition names no window of the WINDOW
    /// clause (3579).
    #[error("Window name '{0}' is not defined.")]
    NoSuchWindow(String),
    /// Window definitions refer to each other in a cycle (3580).
    #[error("There is a circularity in the window dependency graph.")]
    Circularity,
    /// A window that refines another names its own PARTITION BY (3581).
    #[error("A window which depends on another cannot define partitioning.")]
    ChildPartitioning,
    /// The window another refines has a frame (3582).
    #[error("Window '{0}' has a frame definition, so cannot be referenced by another window.")]
    InheritFrame(String),
    /// A window and the one it refines both have ORDER BY (3583): the
    /// refining window, then the refined one.
    #[error("Window '{0}' cannot inherit '{1}' since both contain an ORDER BY clause.")]
    RedefineOrderBy(String, String),
    /// The WINDOW clause defines a name twice (3591).
    #[error("Window '{0}' is defined twice.")]
    DuplicateName(String),
    /// A window function (named) in WHERE, GROUP BY or HAVING, or in the
    /// arguments of an aggregate or of another window function (3593; the
    /// stray quote is MySQL's).
    #[error("You cannot use the window function '{0}' in this context.'")]
    InvalidUse(String),
    /// A window function in a window's PARTITION BY or ORDER BY (3594).
    #[error("You cannot nest a window function in the specification of window '{0}'.")]
    NestedInSpec(String),
}

/// What the view engine cannot do yet (a [`DataflowError::Unsupported`]),
/// and whether a value that changes between reads (NOW(), RAND()) where a
/// view would have to hold it is the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    what: String,
    volatile: bool,
}

impl Gap {
    /// A gap caused by NOW()/RAND() where a maintained view would freeze
    /// their value.
    pub(crate) fn volatile(what: impl Into<String>) -> Gap {
        Gap {
            what: what.into(),
            volatile: true,
        }
    }

    /// What is not supported, as the error message names it.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

impl From<String> for Gap {
    fn from(what: String) -> Gap {
        Gap {
            what,
            volatile: false,
        }
    }
}

impl From<&str> for Gap {
    fn from(what: &str) -> Gap {
        Gap::from(what.to_string())
    }
}

pub type Result<T, E = DataflowError> = std::result::Result<T, E>;

impl From<expr::EvalError> for DataflowError {
    fn from(e: expr::EvalError) -> DataflowError {
        match e {
            expr::EvalError::OutOfRange(m) => DataflowError::OutOfRange(m),
            expr::EvalError::SubqueryRows => DataflowError::SubqueryRows,
            expr::EvalError::Invalid(m) => DataflowError::BadArgument(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_refusals_are_told_by_their_type_not_their_text() {
        let frozen = DataflowError::Unsupported(Gap::volatile("NOW()/RAND() in HAVING"));
        assert!(frozen.is_volatile_refusal());
        assert_eq!(
            frozen.to_string(),
            "This version of Ladle doesn't yet support 'NOW()/RAND() in HAVING'"
        );
        let other = DataflowError::Unsupported("a gap that names NOW()/RAND()".into());
        assert!(!other.is_volatile_refusal());
    }

    #[test]
    fn an_unknown_function_is_named_in_the_first_database_given() {
        let bare = || DataflowError::UnknownFunction(FunctionName::called(&["NoSuch".into()]));
        let named = bare().in_database(Some("d1")).in_database(Some("d2"));
        assert_eq!(named.to_string(), "FUNCTION d1.NoSuch does not exist");
        let none = bare().in_database(None).in_database(Some("d2"));
        assert_eq!(none.to_string(), "FUNCTION NoSuch does not exist");
        let own = DataflowError::UnknownFunction(FunctionName::called(&["o".into(), "f".into()]));
        assert_eq!(
            own.in_database(Some("d1")).to_string(),
            "FUNCTION o.f does not exist"
        );
    }
}
