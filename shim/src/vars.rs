//! System variables (`@@x`, SHOW VARIABLES) and [`EvalContext`], which
//! evaluates the expressions the shim answers itself (SELECTs without FROM,
//! constant INSERT values, WHERE/projection over the virtual catalog tables)
//! with the view engine's evaluator: session references and the virtual
//! row's columns become literals, the rest is `ladle_dataflow`'s, so these
//! answers never differ from a view's.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::ControlFlow;

use ladle_common::{Collation, SqlType, Value};
use ladle_dataflow::value_expr;
use sqlparser::ast::{self, Expr};

use crate::session::Session;

/// The version string clients see.
pub const SERVER_VERSION: &str = concat!("8.0.34-ladle-", env!("CARGO_PKG_VERSION"));
pub const MAX_ALLOWED_PACKET: u64 = ladle_common::MAX_ALLOWED_PACKET;

/// Server-wide facts the variables report.
#[derive(Clone, Debug)]
pub struct ServerFacts {
    pub max_connections: usize,
    pub port: u16,
    pub datadir: String,
    /// Whether TLS is offered (`have_ssl`).
    pub tls: bool,
    /// The default of `@@ladle_read_consistency`.
    pub read_consistency: ReadConsistency,
    /// The connection timeouts' server-wide values.
    pub timeouts: Timeouts,
    /// Server-wide settings root may change at runtime (`SET GLOBAL`).
    pub security: std::sync::Arc<SecurityGlobals>,
    /// Global values of session variables (`SET GLOBAL`).
    pub globals: std::sync::Arc<GlobalVariables>,
    /// `caching_sha2_password_private_key_path` and `..._public_key_path`:
    /// the RSA key pair's files (empty where there is none).
    pub rsa_key_paths: (String, String),
    /// The server's named locks (`GET_LOCK` and kin).
    pub named_locks: std::sync::Arc<crate::named_locks::NamedLocks>,
}

/// The global values of session variables that `SET GLOBAL` changes. As
/// in MySQL a session starts with the global values of the moment
/// ([`GlobalVariables::start_session`]); a later `SET GLOBAL` changes
/// `@@global.x` and the sessions that start after it, not the running
/// ones (`cte_max_recursion_depth` excepted: a session that has not set
/// its own reads the global one).
#[derive(Debug)]
pub struct GlobalVariables {
    /// `cte_max_recursion_depth`: iterations a recursive CTE may take.
    pub cte_max_recursion_depth: std::sync::atomic::AtomicU64,
    /// Every other variable `SET GLOBAL` gave a value, by lower-case name
    /// (the rest keep their defaults).
    values: parking_lot::Mutex<BTreeMap<String, Value>>,
}

impl Default for GlobalVariables {
    fn default() -> GlobalVariables {
        GlobalVariables {
            cte_max_recursion_depth: DEFAULT_CTE_MAX_RECURSION_DEPTH.into(),
            values: Default::default(),
        }
    }
}

impl GlobalVariables {
    /// `SET GLOBAL name = v` (`None`: `= DEFAULT`).
    pub(crate) fn set(&self, name: &str, v: Option<Value>) {
        let mut values = self.values.lock();
        match v {
            Some(v) => values.insert(name.to_string(), v),
            None => values.remove(name),
        };
    }

    /// The values `SET GLOBAL` gave, by name.
    pub(crate) fn values(&self) -> BTreeMap<String, Value> {
        self.values.lock().clone()
    }

    /// A new (or reset) session's variables: the global values of now.
    pub fn start_session(&self, s: &mut Session) {
        let values = self.values();
        if values.is_empty() {
            return;
        }
        if let Some(v) = values.get("autocommit") {
            if truth(v) == Some(false) {
                s.autocommit = false;
                if s.transaction.is_none() {
                    s.begin_transaction();
                }
            }
        }
        s.variables = values
            .into_iter()
            .filter(|(n, _)| n != "autocommit")
            .collect();
    }
}

/// MySQL 8's default `@@cte_max_recursion_depth` (iterations of a
/// recursive CTE).
pub const DEFAULT_CTE_MAX_RECURSION_DEPTH: u64 = 1000;

/// The largest `@@cte_max_recursion_depth` (MySQL's).
pub(crate) const MAX_CTE_MAX_RECURSION_DEPTH: u64 = 4_294_967_295;

/// The session's `@@cte_max_recursion_depth`: its own `SET`, else the
/// global value.
pub(crate) fn cte_max_recursion_depth(session: &Session, facts: &ServerFacts) -> u64 {
    match session.variables.get("cte_max_recursion_depth") {
        Some(Value::UInt(n)) => *n,
        _ => facts
            .globals
            .cte_max_recursion_depth
            .load(std::sync::atomic::Ordering::SeqCst),
    }
}

impl ServerFacts {
    /// `@@require_secure_transport`: plaintext logins are refused (3159).
    pub fn secure_transport_required(&self) -> bool {
        self.security
            .require_secure_transport
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Global variables of the security settings, shared by every session
/// and changed by `SET GLOBAL` (which needs SUPER).
#[derive(Debug)]
pub struct SecurityGlobals {
    /// `require_secure_transport`.
    pub require_secure_transport: std::sync::atomic::AtomicBool,
    /// `max_connect_errors`: failed handshakes in a row after which a host
    /// is blocked (1129) until `FLUSH HOSTS`.
    pub max_connect_errors: std::sync::atomic::AtomicU64,
    /// `max_prepared_stmt_count`: statements all sessions together may
    /// hold prepared (1461 past it).
    pub max_prepared_stmt_count: std::sync::atomic::AtomicU64,
}

impl Default for SecurityGlobals {
    fn default() -> SecurityGlobals {
        SecurityGlobals {
            require_secure_transport: false.into(),
            // MySQL's and MariaDB's default.
            max_connect_errors: 100.into(),
            max_prepared_stmt_count: MAX_PREPARED_STMT_COUNT_DEFAULT.into(),
        }
    }
}

/// MySQL's and MariaDB's default `max_prepared_stmt_count`.
pub const MAX_PREPARED_STMT_COUNT_DEFAULT: u64 = 16_382;

/// Variables with no global value: `SET GLOBAL` of one is 1228, as in
/// MySQL (they describe one session's statements).
pub const SESSION_ONLY_VARIABLES: [&str; 7] = [
    "identity",
    "insert_id",
    "last_insert_id",
    "pseudo_thread_id",
    "rand_seed1",
    "rand_seed2",
    "timestamp",
];

/// The global variables of [`SecurityGlobals`], by name.
pub const SECURITY_VARIABLES: [&str; 3] = [
    "max_connect_errors",
    "max_prepared_stmt_count",
    "require_secure_transport",
];

/// MySQL's connection timeouts, in seconds (the server-wide values; a
/// session may `SET` its own `wait_timeout`, `interactive_timeout`,
/// `net_read_timeout` and `net_write_timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// The whole connection phase (greeting to OK) must finish within it.
    pub connect: u64,
    /// Idle time between commands before the server closes the connection.
    pub wait: u64,
    /// `wait` for clients that connect with CLIENT_INTERACTIVE.
    pub interactive: u64,
    /// A packet whose first byte arrived must arrive whole within it.
    pub net_read: u64,
    /// A reply must be written (accepted by the socket) within it.
    pub net_write: u64,
}

impl Default for Timeouts {
    /// MySQL's defaults.
    fn default() -> Timeouts {
        Timeouts {
            connect: 10,
            wait: 28800,
            interactive: 28800,
            net_read: 30,
            net_write: 60,
        }
    }
}

/// The timeout variables a session can set, and their range in seconds
/// (MySQL's: values outside are clamped).
pub const SESSION_TIMEOUTS: [(&str, u64, u64); 6] = [
    ("lock_wait_timeout", 1, 31_536_000),
    ("innodb_lock_wait_timeout", 1, 1_073_741_824),
    ("wait_timeout", 1, 31_536_000),
    ("interactive_timeout", 1, 31_536_000),
    ("net_read_timeout", 1, 31_536_000),
    ("net_write_timeout", 1, 31_536_000),
];

/// The session variables that change what a schema change does (whether
/// an ALTER truncates a value or fails, whether a new FOREIGN KEY is checked
/// against existing rows, how a TIMESTAMP default is read), as (name, SQL
/// literal) for those this session set: a replica replays the statement
/// under the same ones.
pub fn schema_change_settings(session: &Session) -> Vec<(String, String)> {
    const SHAPING: [&str; 4] = [
        "sql_mode",
        "foreign_key_checks",
        "time_zone",
        "unique_checks",
    ];
    SHAPING
        .iter()
        .filter_map(|name| {
            let value = session.variables.get(*name)?;
            Some((name.to_string(), crate::params::literal(value)))
        })
        .collect()
}

/// `innodb_lock_wait_timeout`'s default (seconds a row lock request
/// waits; see [`crate::row_locks`]): 50, as in InnoDB.
pub const INNODB_LOCK_WAIT_TIMEOUT: u64 = 50;

/// `lock_wait_timeout`'s default: a year, as in MySQL.
pub const LOCK_WAIT_TIMEOUT: u64 = 31_536_000;

/// How long the session's statements wait for a metadata lock.
pub fn lock_wait_timeout(session: &Session) -> std::time::Duration {
    session_timeout(session, "lock_wait_timeout", LOCK_WAIT_TIMEOUT)
}

/// A session's value of timeout variable `name` (one of
/// [`SESSION_TIMEOUTS`]): its own `SET`, else `default`.
pub fn session_timeout(session: &Session, name: &str, default: u64) -> std::time::Duration {
    let secs = match session.variables.get(name) {
        Some(Value::Int(i)) => u64::try_from(*i).unwrap_or(1),
        Some(Value::UInt(u)) => *u,
        _ => default,
    };
    std::time::Duration::from_secs(secs.max(1))
}

/// Whether the session's `sql_mode` is strict (STRICT_TRANS_TABLES or
/// STRICT_ALL_TABLES, or TRADITIONAL which includes them; the default): a
/// value that does not fit its column fails the write. Otherwise an INSERT
/// stores what fits, with a warning, as INSERT IGNORE does.
pub fn strict_mode(session: &Session) -> bool {
    ["STRICT_TRANS_TABLES", "STRICT_ALL_TABLES", "TRADITIONAL"]
        .iter()
        .any(|m| sql_mode_has(session, m))
}

/// Whether a division by zero is reported (warning 1365; an error where
/// strict mode turns warnings into errors): `sql_mode` has
/// ERROR_FOR_DIVISION_BY_ZERO (the default's does). Else it is NULL
/// silently, as in MariaDB.
pub fn division_by_zero_warns(session: &Session) -> bool {
    sql_mode_has(session, "ERROR_FOR_DIVISION_BY_ZERO")
}

/// Whether a 0 in an AUTO_INCREMENT column asks for a generated value, as
/// NULL does: unless `sql_mode` has NO_AUTO_VALUE_ON_ZERO (not in the
/// default mode; dumps set it so that a row with id 0 keeps it).
pub fn auto_value_on_zero(session: &Session) -> bool {
    !matches!(
        session.variables.get("sql_mode"),
        Some(Value::Text(modes)) if modes
            .split(',')
            .any(|m| m.trim().eq_ignore_ascii_case("NO_AUTO_VALUE_ON_ZERO"))
    )
}

/// Whether the session's `sql_mode` has ONLY_FULL_GROUP_BY (not in
/// MariaDB's default mode): a grouped select list may then read only
/// grouped or aggregated columns (see `Dataflow::check_full_group_by`).
pub fn only_full_group_by(session: &Session) -> bool {
    matches!(
        session.variables.get("sql_mode"),
        Some(Value::Text(modes)) if modes
            .split(',')
            .any(|m| m.trim().eq_ignore_ascii_case("ONLY_FULL_GROUP_BY"))
    )
}

/// Whether the session's `sql_mode` names `mode` (true when it is unset:
/// the default mode names every mode asked about here).
pub fn sql_mode_has(session: &Session, mode: &str) -> bool {
    match session.variables.get("sql_mode") {
        Some(Value::Text(modes)) => modes
            .split(',')
            .any(|m| m.trim().eq_ignore_ascii_case(mode)),
        _ => true,
    }
}

/// Which writes a read waits for (`@@ladle_read_consistency`). Writes are
/// acknowledged before views apply them; a read waits, bounded, until its
/// view reflects the writes it must see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadConsistency {
    /// The connection's own writes (read-your-writes); other connections'
    /// writes appear a moment later (eventual consistency).
    Session,
    /// Every write acknowledged before the read, on any connection: what a
    /// MySQL client expects (a COMMIT on one connection is visible to the
    /// next statement on any other). The default.
    #[default]
    Strong,
}

impl ReadConsistency {
    /// The variable's session name for this value.
    pub const VARIABLE: &'static str = "ladle_read_consistency";

    pub fn as_str(self) -> &'static str {
        match self {
            ReadConsistency::Session => "SESSION",
            ReadConsistency::Strong => "STRONG",
        }
    }

    /// Parses a value as SET and the command line spell it (any case).
    pub fn parse(text: &str) -> Option<ReadConsistency> {
        match text.to_ascii_uppercase().as_str() {
            "SESSION" => Some(ReadConsistency::Session),
            "STRONG" => Some(ReadConsistency::Strong),
            _ => None,
        }
    }

    /// The session's setting: its own `SET`, else the server default.
    pub fn of(session: &Session, facts: &ServerFacts) -> ReadConsistency {
        match session.variables.get(Self::VARIABLE) {
            Some(Value::Text(t)) => Self::parse(t).unwrap_or(facts.read_consistency),
            _ => facts.read_consistency,
        }
    }
}

/// Every system variable Ladle reports, with its value, in name order.
pub fn system_variables(session: &Session, facts: &ServerFacts) -> Vec<(String, Value)> {
    let mut v = fixed_variables();
    v.extend(server_variables(facts));
    v.extend(session_state_variables(session, facts));
    // Session overrides (SET x = ...) replace defaults or add new names.
    for (name, value) in &session.variables {
        match v.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value.clone(),
            None => v.push((name.clone(), value.clone())),
        }
    }
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The system variables whose values are the same on every server.
fn fixed_variables() -> Vec<(String, Value)> {
    let t = |s: &str| Value::text(s);
    vec![
        ("auto_increment_increment".into(), Value::Int(1)),
        ("auto_increment_offset".into(), Value::Int(1)),
        ("character_set_client".into(), t("utf8mb4")),
        ("character_set_connection".into(), t("utf8mb4")),
        ("character_set_database".into(), t("utf8mb4")),
        ("character_set_results".into(), t("utf8mb4")),
        ("character_set_server".into(), t("utf8mb4")),
        ("character_set_system".into(), t("utf8mb3")),
        ("collation_connection".into(), t("utf8mb4_general_ci")),
        ("collation_database".into(), t("utf8mb4_general_ci")),
        ("collation_server".into(), t("utf8mb4_general_ci")),
        ("default_storage_engine".into(), t("InnoDB")),
        // Dumps save and restore these around their statements.
        ("foreign_key_checks".into(), Value::Int(1)),
        ("hostname".into(), t("localhost")),
        ("init_connect".into(), t("")),
        // Seconds a row lock request waits: see `row_locks`.
        (
            "innodb_lock_wait_timeout".into(),
            Value::Int(INNODB_LOCK_WAIT_TIMEOUT as i64),
        ),
        ("license".into(), t("MIT")),
        // Seconds a schema change waits for transactions using its table
        // (and they for it): see `metadata_locks`.
        (
            "lock_wait_timeout".into(),
            Value::Int(LOCK_WAIT_TIMEOUT as i64),
        ),
        ("lower_case_table_names".into(), Value::Int(0)),
        (
            "max_allowed_packet".into(),
            Value::Int(MAX_ALLOWED_PACKET as i64),
        ),
        // Milliseconds a SELECT may run (0: no limit); 3024 past it.
        ("max_execution_time".into(), Value::Int(0)),
        ("net_buffer_length".into(), Value::Int(16384)),
        ("performance_schema".into(), Value::Int(0)),
        ("query_cache_size".into(), Value::Int(0)),
        ("query_cache_type".into(), t("OFF")),
        ("socket".into(), Value::Null),
        ("sql_auto_is_null".into(), Value::Int(0)),
        ("sql_notes".into(), Value::Int(1)),
        (
            "sql_mode".into(),
            t("STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"),
        ),
        ("sql_select_limit".into(), Value::UInt(u64::MAX)),
        ("storage_engine".into(), t("InnoDB")),
        ("system_time_zone".into(), t("UTC")),
        ("time_zone".into(), t("SYSTEM")),
        ("transaction_isolation".into(), t("READ-COMMITTED")),
        ("transaction_read_only".into(), Value::Int(0)),
        ("tx_isolation".into(), t("READ-COMMITTED")),
        ("tx_read_only".into(), Value::Int(0)),
        ("unique_checks".into(), Value::Int(1)),
        ("version".into(), t(SERVER_VERSION)),
        (
            "version_comment".into(),
            t("Ladle incremental view database"),
        ),
        ("version_compile_machine".into(), t(std::env::consts::ARCH)),
        ("version_compile_os".into(), t(std::env::consts::OS)),
    ]
}

/// The system variables this server's configuration sets.
fn server_variables(facts: &ServerFacts) -> Vec<(String, Value)> {
    let t = |s: &str| Value::text(s);
    let security = &facts.security;
    vec![
        (
            "connect_timeout".into(),
            Value::Int(facts.timeouts.connect as i64),
        ),
        // Iterations a recursive CTE may take (3636 past them).
        (
            "cte_max_recursion_depth".into(),
            Value::UInt(
                facts
                    .globals
                    .cte_max_recursion_depth
                    .load(std::sync::atomic::Ordering::SeqCst),
            ),
        ),
        (
            "caching_sha2_password_private_key_path".into(),
            t(&facts.rsa_key_paths.0),
        ),
        (
            "caching_sha2_password_public_key_path".into(),
            t(&facts.rsa_key_paths.1),
        ),
        ("datadir".into(), t(&facts.datadir)),
        (
            "have_ssl".into(),
            t(if facts.tls { "YES" } else { "DISABLED" }),
        ),
        (
            "interactive_timeout".into(),
            Value::Int(facts.timeouts.interactive as i64),
        ),
        (
            "max_connect_errors".into(),
            Value::UInt(
                security
                    .max_connect_errors
                    .load(std::sync::atomic::Ordering::SeqCst),
            ),
        ),
        (
            "max_prepared_stmt_count".into(),
            Value::UInt(
                security
                    .max_prepared_stmt_count
                    .load(std::sync::atomic::Ordering::SeqCst),
            ),
        ),
        (
            "max_connections".into(),
            Value::Int(facts.max_connections as i64),
        ),
        (
            ReadConsistency::VARIABLE.into(),
            t(facts.read_consistency.as_str()),
        ),
        (
            "net_read_timeout".into(),
            Value::Int(facts.timeouts.net_read as i64),
        ),
        (
            "net_write_timeout".into(),
            Value::Int(facts.timeouts.net_write as i64),
        ),
        ("port".into(), Value::Int(i64::from(facts.port))),
        (
            "require_secure_transport".into(),
            Value::Int(i64::from(facts.secure_transport_required())),
        ),
    ]
}

/// The system variables that follow the session's state.
fn session_state_variables(session: &Session, facts: &ServerFacts) -> Vec<(String, Value)> {
    let errors = session
        .warnings
        .iter()
        .filter(|w| w.level == "Error")
        .count();
    let wait_timeout = if session.interactive {
        facts.timeouts.interactive
    } else {
        facts.timeouts.wait
    };
    vec![
        (
            "autocommit".into(),
            Value::Int(i64::from(session.autocommit)),
        ),
        ("error_count".into(), Value::Int(errors as i64)),
        (
            "in_transaction".into(),
            Value::Int(i64::from(session.in_transaction())),
        ),
        ("timestamp".into(), timestamp_variable()),
        ("wait_timeout".into(), Value::Int(wait_timeout as i64)),
        (
            "warning_count".into(),
            Value::Int(session.warnings.len() as i64),
        ),
    ]
}

/// `@@timestamp`: the seconds since the Unix epoch the session fixed its
/// clock at (`SET timestamp = n`), or the real clock's; to the
/// microsecond, as MariaDB shows it.
fn timestamp_variable() -> Value {
    let micros = ladle_dataflow::clock::now_micros();
    Value::Decimal(rust_decimal::Decimal::new(micros, 6))
}

/// The instant (microseconds since the Unix epoch) the session fixed its
/// clock at with `SET timestamp = n`, if it did: NOW() and its kin read it
/// in the session's statements (see [`ladle_dataflow::clock`]).
pub fn fixed_clock(session: &Session) -> Option<i64> {
    match session.variables.get("timestamp")? {
        Value::Decimal(d) => (*d * rust_decimal::Decimal::from(1_000_000))
            .trunc()
            .try_into()
            .ok(),
        _ => None,
    }
}

/// `SET timestamp = v`'s value as the session keeps it: seconds to the
/// microsecond (at most 2147483647, MariaDB's bound), or `None` for 0 or
/// less (the real clock again, as in MariaDB); `None` if `v` is no number
/// (1232).
pub fn timestamp_setting(v: &Value) -> Option<Option<Value>> {
    use rust_decimal::prelude::FromPrimitive;
    let secs = match v {
        Value::Int(i) => rust_decimal::Decimal::from(*i),
        Value::UInt(u) => rust_decimal::Decimal::from(*u),
        Value::Decimal(d) => *d,
        Value::Double(f) => rust_decimal::Decimal::from_f64(*f)?,
        Value::Text(t) => t.trim().parse().ok()?,
        _ => return None,
    };
    if secs.is_sign_negative() || secs.is_zero() {
        return Some(None);
    }
    let mut secs = secs
        .min(rust_decimal::Decimal::from(2_147_483_647))
        .round_dp(6);
    secs.rescale(6);
    Some(Some(Value::Decimal(secs)))
}

/// The value of `@@name` (name without the `@@` and scope), if known.
pub fn system_variable(session: &Session, facts: &ServerFacts, name: &str) -> Option<Value> {
    let name = name.to_ascii_lowercase();
    system_variables(session, facts)
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// Every system variable's global value (`@@global.x`, SHOW GLOBAL
/// VARIABLES): a new session's values.
pub fn global_system_variables(facts: &ServerFacts) -> Vec<(String, Value)> {
    let mut fresh = Session::new(0, String::new(), String::new());
    facts.globals.start_session(&mut fresh);
    // (A session's own values of `in_transaction` and the like.)
    fresh.transaction = None;
    system_variables(&fresh, facts)
}

/// The value of `@@global.name`, if known.
pub fn global_system_variable(facts: &ServerFacts, name: &str) -> Option<Value> {
    let name = name.to_ascii_lowercase();
    global_system_variables(facts)
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// What an expression may refer to while the shim evaluates it.
pub struct EvalContext<'a> {
    pub session: &'a Session,
    pub facts: &'a ServerFacts,
    /// Columns of the current virtual row: (qualifier, name) pairs.
    pub columns: &'a [(String, String)],
    pub row: &'a [Value],
}

/// Why an expression could not be evaluated.
#[derive(Debug)]
pub enum EvalError {
    /// The dataflow compiler refused it (an unsupported function, an
    /// unknown column, ...).
    Compile(ladle_dataflow::DataflowError),
    /// Evaluating it failed (overflow, ...).
    Eval(ladle_dataflow::DataflowError),
    UnknownColumn(String),
    UnknownVariable(String),
    /// A MySQL error of its own (a named lock's 3057 or 3058).
    Refused(crate::error::WireError),
}

/// A constant expression's value and what its compiled expression
/// declares of it.
pub struct Typed {
    pub value: Value,
    pub ty: SqlType,
    /// Whether the type may be NULL (whatever this value is).
    pub nullable: bool,
    /// The decimals a DOUBLE result is shown with (`None`: not fixed).
    pub decimals: Option<u8>,
}

impl EvalContext<'_> {
    /// Evaluates `e` with the one expression evaluator the views use:
    /// session references (`@@x`, `@x`, DATABASE(), USER(), ...) and the
    /// virtual row's columns are replaced by their values as literals, and
    /// the result is compiled and evaluated by the dataflow crate, so a
    /// query without a table answers exactly as a view would.
    pub fn eval(&self, e: &Expr) -> Result<Value, EvalError> {
        self.eval_typed(e).map(|t| t.value)
    }

    /// [`Self::eval`], with what the compiled expression declares of it.
    pub fn eval_typed(&self, e: &Expr) -> Result<Typed, EvalError> {
        let mut resolved = e.clone();
        let mut failure = None;
        let _ = ast::visit_expressions_mut(&mut resolved, |x| {
            match self.session_value(x) {
                Ok(Some(v)) => *x = value_expr(&v),
                Ok(None) => {}
                Err(err) => {
                    failure = Some(err);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        if let Some(err) = failure {
            return Err(err);
        }
        let compiled = ladle_dataflow::compile_row_expr(&resolved, None)
            .map_err(|e| EvalError::Compile(e.in_database(self.session.database.as_deref())))?;
        let value = compiled.eval(&Vec::new()).map_err(EvalError::Eval)?;
        let (ty, nullable) = compiled.constant_type();
        Ok(Typed {
            value,
            ty,
            nullable,
            decimals: compiled.constant_decimals(),
        })
    }

    /// The value `x` stands for if it is a session reference or a column of
    /// the virtual row; `None` for anything else.
    fn session_value(&self, x: &Expr) -> Result<Option<Value>, EvalError> {
        match x {
            Expr::Identifier(id) => self.ident(std::slice::from_ref(id)),
            Expr::CompoundIdentifier(ids) => self.ident(ids),
            Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("sleep") => self.sleep(f),
            Expr::Function(f) if is_lock_function(f) => self.lock_function(f),
            Expr::Function(f) => Ok(self.function(f)),
            _ => Ok(None),
        }
    }

    /// `SLEEP(seconds)` (statements run on statement threads): 0 after the
    /// whole time, 1 when KILL QUERY or the client leaving cut it short,
    /// as in MySQL; NULL or a negative time sleeps not at all. Another
    /// argument count is left to the view engine, which refuses it.
    fn sleep(&self, f: &ast::Function) -> Result<Option<Value>, EvalError> {
        let ast::FunctionArguments::List(list) = &f.args else {
            return Ok(None);
        };
        let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg))] = list.args.as_slice()
        else {
            return Ok(None);
        };
        // As a number, the way MySQL reads it (1292 for '1x').
        let seconds = self.eval(&Expr::BinaryOp {
            left: Box::new(arg.clone()),
            op: ast::BinaryOperator::Plus,
            right: Box::new(value_expr(&Value::Double(0.0))),
        })?;
        let seconds = seconds.as_f64().filter(|s| s.is_finite()).unwrap_or(0.0);
        if self.session.probing {
            return Ok(Some(Value::Int(0)));
        }
        let interrupted =
            sleep_unless_interrupted(std::time::Duration::from_secs_f64(seconds.clamp(0.0, 1e9)));
        Ok(Some(Value::Int(i64::from(interrupted))))
    }

    /// `GET_LOCK(name, timeout)`, `RELEASE_LOCK(name)`,
    /// `IS_FREE_LOCK(name)`, `IS_USED_LOCK(name)` and
    /// `RELEASE_ALL_LOCKS()` (see [`crate::named_locks`]) for this
    /// session's connection. A prepared statement's probe takes no lock.
    fn lock_function(&self, f: &ast::Function) -> Result<Option<Value>, EvalError> {
        use crate::named_locks::{deadlock_error, lock_key, wait_for, Acquired};
        let name = f.name.to_string().to_ascii_lowercase();
        let args = match &f.args {
            ast::FunctionArguments::List(list) => list.args.as_slice(),
            _ => &[],
        };
        let arity = if name == "get_lock" {
            2
        } else {
            usize::from(name != "release_all_locks")
        };
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) = arg else {
                return Ok(None);
            };
            values.push(self.eval(e)?);
        }
        if values.len() != arity {
            let error = ladle_dataflow::DataflowError::FunctionParamCount(f.name.to_string());
            return Err(EvalError::Eval(error));
        }
        let locks = &self.facts.named_locks;
        let me = self.session.connection_id;
        if name == "release_all_locks" {
            let released = if self.session.probing {
                0
            } else {
                locks.release_all(me)
            };
            return Ok(Some(Value::Int(
                i64::try_from(released).unwrap_or(i64::MAX),
            )));
        }
        let key = lock_key(&values[0]).map_err(EvalError::Refused)?;
        let holder = || {
            locks
                .holder(&key)
                .map_or(Value::Null, |c| Value::Int(i64::from(c)))
        };
        Ok(Some(match name.as_str() {
            _ if self.session.probing => Value::Null,
            "is_used_lock" => holder(),
            "is_free_lock" => Value::Int(i64::from(locks.holder(&key).is_none())),
            "release_lock" => locks
                .release(me, &key)
                .map_or(Value::Null, |r| Value::Int(r.into())),
            _ => {
                // As a number, the way MySQL reads it.
                let seconds = match &values[1] {
                    Value::Null => None,
                    v => Some(v.as_f64().unwrap_or(0.0)),
                };
                let interrupted = || ladle_dataflow::interrupt::check().is_err();
                match locks.acquire(me, &key, wait_for(seconds), interrupted) {
                    Acquired::Granted => Value::Int(1),
                    Acquired::TimedOut => Value::Int(0),
                    Acquired::Interrupted => Value::Null,
                    Acquired::Deadlock => return Err(EvalError::Refused(deadlock_error())),
                }
            }
        }))
    }

    fn ident(&self, ids: &[ast::Ident]) -> Result<Option<Value>, EvalError> {
        let first = &ids[0].value;
        if let Some(var) = first.strip_prefix("@@") {
            // @@x, @@session.x, @@global.x, @@local.x
            let (scope, name) = if ids.len() > 1
                && ["session", "global", "local"].contains(&var.to_ascii_lowercase().as_str())
            {
                (var, ids[1].value.clone())
            } else if let Some((scope, n)) = var.split_once('.') {
                (scope, n.to_string())
            } else {
                ("", var.to_string())
            };
            let value = if scope.eq_ignore_ascii_case("global") {
                global_system_variable(self.facts, &name)
            } else {
                system_variable(self.session, self.facts, &name)
            };
            return value.map(Some).ok_or(EvalError::UnknownVariable(name));
        }
        if let Some(var) = first.strip_prefix('@') {
            return Ok(Some(
                self.session
                    .user_variables
                    .get(&var.to_ascii_lowercase())
                    .cloned()
                    .unwrap_or(Value::Null),
            ));
        }
        // A column of the virtual row, optionally qualified.
        let name = &ids[ids.len() - 1].value;
        let qualifier = if ids.len() >= 2 {
            Some(&ids[ids.len() - 2].value)
        } else {
            None
        };
        let found = self.columns.iter().position(|(q, n)| {
            n.eq_ignore_ascii_case(name)
                && !matches!(qualifier, Some(x) if !x.eq_ignore_ascii_case(q))
        });
        match found {
            Some(i) => Ok(Some(self.row.get(i).cloned().unwrap_or(Value::Null))),
            // No virtual row: the dataflow compiler reports the name.
            None if self.columns.is_empty() => Ok(None),
            None => Err(EvalError::UnknownColumn(
                ids.iter()
                    .map(|i| i.value.as_str())
                    .collect::<Vec<_>>()
                    .join("."),
            )),
        }
    }

    /// The session functions' values (DATABASE(), USER(), ...).
    fn function(&self, f: &ast::Function) -> Option<Value> {
        let name = f.name.to_string().to_ascii_lowercase();
        let no_args = match &f.args {
            ast::FunctionArguments::List(l) => l.args.is_empty(),
            _ => true,
        };
        if !no_args {
            return None;
        }
        let s = self.session;
        Some(match name.as_str() {
            "database" | "schema" => s
                .database
                .as_deref()
                .map(Value::text)
                .unwrap_or(Value::Null),
            "version" => Value::text(SERVER_VERSION),
            "user" | "session_user" | "system_user" => {
                Value::text(format!("{}@{}", s.user, s.host))
            }
            "current_user" => {
                let (user, host) = crate::session::current_user(s);
                Value::text(format!("{user}@{host}"))
            }
            "connection_id" => Value::Int(i64::from(s.connection_id)),
            "last_insert_id" => Value::UInt(s.last_insert_id),
            "row_count" => Value::Int(s.row_count),
            "found_rows" => Value::UInt(s.found_rows_count),
            _ => return None,
        })
    }
}

/// Whether `f` calls one of the named lock functions.
fn is_lock_function(f: &ast::Function) -> bool {
    const NAMES: [&str; 5] = [
        "get_lock",
        "release_lock",
        "is_free_lock",
        "is_used_lock",
        "release_all_locks",
    ];
    let name = f.name.to_string();
    NAMES.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// Sleeps for `d` unless the statement is interrupted first (checked
/// every few milliseconds); whether it was.
fn sleep_unless_interrupted(d: std::time::Duration) -> bool {
    const SLICE: std::time::Duration = std::time::Duration::from_millis(10);
    let end = std::time::Instant::now() + d;
    loop {
        if ladle_dataflow::interrupt::check().is_err() {
            return true;
        }
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(SLICE));
    }
}

/// SQL truth, as the view engine reads it (`'12abc'` is true).
pub fn truth(v: &Value) -> Option<bool> {
    ladle_dataflow::value_truth(v)
}

/// The order of two catalog values (ORDER BY over virtual tables): NULL
/// first, then as the view engine compares them.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    ladle_dataflow::compare_values(a, b, Collation::GeneralCi).unwrap_or_else(|| a.cmp(b))
}

/// `s LIKE pattern`, case-insensitive (SHOW ... LIKE).
pub fn like(s: &str, pattern: &str) -> bool {
    ladle_dataflow::like_text(s, pattern, Collation::GeneralCi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_mysql_patterns() {
        assert!(like("character_set_client", "character\\_set\\_%"));
        assert!(like("Users", "us%"));
        assert!(!like("users", "u_"));
        assert!(like("ab", "a_"));
    }

    #[test]
    fn session_variables_override_defaults() {
        let mut s = Session::new(1, "root".into(), "localhost".into());
        let facts = ServerFacts {
            max_connections: 10,
            port: 3307,
            datadir: "/d".into(),
            tls: false,
            read_consistency: ReadConsistency::Session,
            timeouts: Default::default(),
            security: Default::default(),
            globals: Default::default(),
            rsa_key_paths: ("/d/private_key.pem".into(), String::new()),
            named_locks: Default::default(),
        };
        assert_eq!(
            system_variable(&s, &facts, "caching_sha2_password_private_key_path"),
            Some(Value::text("/d/private_key.pem"))
        );
        assert_eq!(
            system_variable(&s, &facts, "AUTOCOMMIT"),
            Some(Value::Int(1))
        );
        s.variables.insert("sql_mode".into(), Value::text("ANSI"));
        assert_eq!(
            system_variable(&s, &facts, "sql_mode"),
            Some(Value::text("ANSI"))
        );
        assert!(system_variable(&s, &facts, "nope").is_none());
    }
}
