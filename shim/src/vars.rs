//! System variables (`@@x`, SHOW VARIABLES) and a small evaluator for the
//! expressions the shim answers itself: session functions and variables in
//! SELECTs without FROM, and WHERE/projection over the virtual catalog tables
//! (SHOW ... WHERE, information_schema).

use std::cmp::Ordering;

use ladle_common::{Collation, Value};
use sqlparser::ast::{self, BinaryOperator, Expr, UnaryOperator};

use crate::session::Session;

/// The version string clients see.
pub const SERVER_VERSION: &str = concat!("8.0.34-ladle-", env!("CARGO_PKG_VERSION"));
pub const MAX_ALLOWED_PACKET: u64 = 64 * 1024 * 1024;

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
    let t = |s: &str| Value::text(s);
    let mut v: Vec<(String, Value)> = vec![
        ("auto_increment_increment".into(), Value::Int(1)),
        ("auto_increment_offset".into(), Value::Int(1)),
        (
            "autocommit".into(),
            Value::Int(i64::from(session.autocommit)),
        ),
        ("character_set_client".into(), t("utf8mb4")),
        ("character_set_connection".into(), t("utf8mb4")),
        ("character_set_database".into(), t("utf8mb4")),
        ("character_set_results".into(), t("utf8mb4")),
        ("character_set_server".into(), t("utf8mb4")),
        ("character_set_system".into(), t("utf8mb3")),
        ("collation_connection".into(), t("utf8mb4_general_ci")),
        ("collation_database".into(), t("utf8mb4_general_ci")),
        ("collation_server".into(), t("utf8mb4_general_ci")),
        ("datadir".into(), t(&facts.datadir)),
        ("default_storage_engine".into(), t("InnoDB")),
        (
            "error_count".into(),
            Value::Int(
                session
                    .warnings
                    .iter()
                    .filter(|w| w.level == "Error")
                    .count() as i64,
            ),
        ),
        (
            "have_ssl".into(),
            t(if facts.tls { "YES" } else { "DISABLED" }),
        ),
        ("hostname".into(), t("localhost")),
        (
            "in_transaction".into(),
            Value::Int(i64::from(session.in_transaction())),
        ),
        ("init_connect".into(), t("")),
        ("interactive_timeout".into(), Value::Int(28800)),
        ("license".into(), t("MIT")),
        ("lower_case_table_names".into(), Value::Int(0)),
        (
            "max_allowed_packet".into(),
            Value::Int(MAX_ALLOWED_PACKET as i64),
        ),
        (
            "max_connections".into(),
            Value::Int(facts.max_connections as i64),
        ),
        ("net_buffer_length".into(), Value::Int(16384)),
        (
            ReadConsistency::VARIABLE.into(),
            t(facts.read_consistency.as_str()),
        ),
        ("net_write_timeout".into(), Value::Int(60)),
        ("performance_schema".into(), Value::Int(0)),
        ("port".into(), Value::Int(i64::from(facts.port))),
        ("query_cache_size".into(), Value::Int(0)),
        ("query_cache_type".into(), t("OFF")),
        ("socket".into(), Value::Null),
        ("sql_auto_is_null".into(), Value::Int(0)),
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
        ("version".into(), t(SERVER_VERSION)),
        (
            "version_comment".into(),
            t("Ladle incremental view database"),
        ),
        ("version_compile_machine".into(), t(std::env::consts::ARCH)),
        ("version_compile_os".into(), t(std::env::consts::OS)),
        ("wait_timeout".into(), Value::Int(28800)),
        (
            "warning_count".into(),
            Value::Int(session.warnings.len() as i64),
        ),
    ];
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

/// The value of `@@name` (name without the `@@` and scope), if known.
pub fn system_variable(session: &Session, facts: &ServerFacts, name: &str) -> Option<Value> {
    let name = name.to_ascii_lowercase();
    system_variables(session, facts)
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

/// Why the shim could not evaluate an expression itself.
#[derive(Debug)]
pub enum EvalError {
    /// Not something the shim evaluates (let dataflow try).
    NotSession,
    UnknownColumn(String),
    UnknownVariable(String),
}

impl EvalContext<'_> {
    pub fn eval(&self, e: &Expr) -> Result<Value, EvalError> {
        match e {
            Expr::Value(v) => literal(v).ok_or(EvalError::NotSession),
            Expr::Nested(e) => self.eval(e),
            Expr::Identifier(id) => self.ident(std::slice::from_ref(id)),
            Expr::CompoundIdentifier(ids) => self.ident(ids),
            Expr::Function(f) => self.function(f),
            Expr::UnaryOp { op, expr } => {
                let v = self.eval(expr)?;
                match op {
                    UnaryOperator::Not => Ok(truth(&v)
                        .map(|b| Value::Int(i64::from(!b)))
                        .unwrap_or(Value::Null)),
                    UnaryOperator::Minus => match v {
                        Value::Int(i) => Ok(i
                            .checked_neg()
                            .map(Value::Int)
                            .unwrap_or_else(|| Value::Decimal(-rust_decimal::Decimal::from(i)))),
                        // -9223372036854775808 arrives as minus an unsigned literal.
                        Value::UInt(u) if u == 1u64 << 63 => Ok(Value::Int(i64::MIN)),
                        Value::UInt(u) => Ok(Value::Decimal(-rust_decimal::Decimal::from(u))),
                        Value::Double(d) => Ok(Value::Double(-d)),
                        Value::Decimal(d) => Ok(Value::Decimal(-d)),
                        Value::Null => Ok(Value::Null),
                        _ => Err(EvalError::NotSession),
                    },
                    UnaryOperator::Plus => Ok(v),
                    _ => Err(EvalError::NotSession),
                }
            }
            Expr::Case {
                operand,
                conditions,
                results,
                else_result,
            } => {
                let base = operand.as_ref().map(|o| self.eval(o)).transpose()?;
                for (c, r) in conditions.iter().zip(results) {
                    let hit = match &base {
                        Some(b) => {
                            let v = self.eval(c)?;
                            !b.is_null() && !v.is_null() && compare(b, &v) == Ordering::Equal
                        }
                        None => truth(&self.eval(c)?) == Some(true),
                    };
                    if hit {
                        return self.eval(r);
                    }
                }
                match else_result {
                    Some(x) => self.eval(x),
                    None => Ok(Value::Null),
                }
            }
            Expr::IsNull(e) => Ok(Value::Int(i64::from(self.eval(e)?.is_null()))),
            Expr::IsNotNull(e) => Ok(Value::Int(i64::from(!self.eval(e)?.is_null()))),
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let v = self.eval(expr)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                let mut found = false;
                for item in list {
                    let x = self.eval(item)?;
                    if !x.is_null() && compare(&v, &x) == Ordering::Equal {
                        found = true;
                    }
                }
                Ok(Value::Int(i64::from(found != *negated)))
            }
            Expr::Like {
                negated,
                expr,
                pattern,
                ..
            } => {
                let v = self.eval(expr)?;
                let p = self.eval(pattern)?;
                if v.is_null() || p.is_null() {
                    return Ok(Value::Null);
                }
                let m = like(&v.to_string(), &p.to_string());
                Ok(Value::Int(i64::from(m != *negated)))
            }
            Expr::BinaryOp { left, op, right } => {
                let l = self.eval(left)?;
                let r = self.eval(right)?;
                match op {
                    BinaryOperator::And => Ok(match (truth(&l), truth(&r)) {
                        (Some(false), _) | (_, Some(false)) => Value::Int(0),
                        (Some(true), Some(true)) => Value::Int(1),
                        _ => Value::Null,
                    }),
                    BinaryOperator::Or => Ok(match (truth(&l), truth(&r)) {
                        (Some(true), _) | (_, Some(true)) => Value::Int(1),
                        (Some(false), Some(false)) => Value::Int(0),
                        _ => Value::Null,
                    }),
                    BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq => {
                        if l.is_null() || r.is_null() {
                            return Ok(Value::Null);
                        }
                        let o = compare(&l, &r);
                        let b = match op {
                            BinaryOperator::Eq => o == Ordering::Equal,
                            BinaryOperator::NotEq => o != Ordering::Equal,
                            BinaryOperator::Lt => o == Ordering::Less,
                            BinaryOperator::LtEq => o != Ordering::Greater,
                            BinaryOperator::Gt => o == Ordering::Greater,
                            _ => o != Ordering::Less,
                        };
                        Ok(Value::Int(i64::from(b)))
                    }
                    _ => Err(EvalError::NotSession),
                }
            }
            _ => Err(EvalError::NotSession),
        }
    }

    fn ident(&self, ids: &[ast::Ident]) -> Result<Value, EvalError> {
        let first = &ids[0].value;
        if let Some(var) = first.strip_prefix("@@") {
            // @@x, @@session.x, @@global.x, @@local.x
            let name = if ids.len() > 1
                && ["session", "global", "local"].contains(&var.to_ascii_lowercase().as_str())
            {
                ids[1].value.clone()
            } else if let Some((scope, n)) = var.split_once('.') {
                let _ = scope;
                n.to_string()
            } else {
                var.to_string()
            };
            return system_variable(self.session, self.facts, &name)
                .ok_or(EvalError::UnknownVariable(name));
        }
        if let Some(var) = first.strip_prefix('@') {
            return Ok(self
                .session
                .user_variables
                .get(&var.to_ascii_lowercase())
                .cloned()
                .unwrap_or(Value::Null));
        }
        // A column of the virtual row, optionally qualified.
        let name = &ids[ids.len() - 1].value;
        let qualifier = if ids.len() >= 2 {
            Some(&ids[ids.len() - 2].value)
        } else {
            None
        };
        let mut found = None;
        for (i, (q, n)) in self.columns.iter().enumerate() {
            if n.eq_ignore_ascii_case(name)
                && !matches!(qualifier, Some(x) if !x.eq_ignore_ascii_case(q))
            {
                found = Some(i);
                break;
            }
        }
        match found {
            Some(i) => Ok(self.row.get(i).cloned().unwrap_or(Value::Null)),
            None if self.columns.is_empty() => Err(EvalError::NotSession),
            None => Err(EvalError::UnknownColumn(
                ids.iter()
                    .map(|i| i.value.as_str())
                    .collect::<Vec<_>>()
                    .join("."),
            )),
        }
    }

    fn function(&self, f: &ast::Function) -> Result<Value, EvalError> {
        let name = f.name.to_string().to_ascii_lowercase();
        let args: Vec<&Expr> = match &f.args {
            ast::FunctionArguments::List(l) => l
                .args
                .iter()
                .filter_map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let s = self.session;
        Ok(match name.as_str() {
            "database" | "schema" => s
                .database
                .as_deref()
                .map(Value::text)
                .unwrap_or(Value::Null),
            "version" => Value::text(SERVER_VERSION),
            "user" | "session_user" | "system_user" => {
                Value::text(format!("{}@{}", s.user, s.host))
            }
            "current_user" => Value::text(format!("{}@%", s.user)),
            "connection_id" => Value::Int(i64::from(s.connection_id)),
            "last_insert_id" if args.is_empty() => Value::UInt(s.last_insert_id),
            "lower" | "lcase" if args.len() == 1 => match self.eval(args[0])? {
                Value::Null => Value::Null,
                v => Value::text(v.to_string().to_lowercase()),
            },
            "upper" | "ucase" if args.len() == 1 => match self.eval(args[0])? {
                Value::Null => Value::Null,
                v => Value::text(v.to_string().to_uppercase()),
            },
            "ifnull" | "coalesce" if !args.is_empty() => {
                for a in &args {
                    let v = self.eval(a)?;
                    if !v.is_null() {
                        return Ok(v);
                    }
                }
                Value::Null
            }
            _ => return Err(EvalError::NotSession),
        })
    }
}

/// A SQL literal as a value.
pub fn literal(v: &ast::Value) -> Option<Value> {
    Some(match v {
        ast::Value::Number(n, _) => {
            if let Ok(i) = n.parse::<i64>() {
                Value::Int(i)
            } else if let Ok(u) = n.parse::<u64>() {
                Value::UInt(u)
            } else if n.contains(['e', 'E']) {
                Value::Double(n.parse().ok()?)
            } else {
                Value::Decimal(n.parse().ok()?)
            }
        }
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Value::text(s),
        ast::Value::Boolean(b) => Value::Int(i64::from(*b)),
        ast::Value::Null => Value::Null,
        ast::Value::HexStringLiteral(h) => Value::bytes(decode_hex(h)?),
        _ => return None,
    })
}

fn decode_hex(h: &str) -> Option<Vec<u8>> {
    if h.len() & 1 == 1 {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
        .collect()
}

/// SQL truth: NULL is unknown; numbers are true when non-zero; strings by
/// their numeric prefix (MySQL's rule, approximated as "parses as non-zero").
pub fn truth(v: &Value) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Text(s) => Some(s.trim().parse::<f64>().map(|f| f != 0.0).unwrap_or(false)),
        other => Some(other.as_f64().map(|f| f != 0.0).unwrap_or(true)),
    }
}

/// Comparison as MySQL does it for catalog strings: case-insensitive text,
/// numbers numerically (a numeric string against a number compares as a
/// number).
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Text(s), n) | (n, Value::Text(s)) if n.as_f64().is_some() => {
            let x = s.trim().parse::<f64>().unwrap_or(0.0);
            let y = n.as_f64().unwrap_or(0.0);
            let o = x.total_cmp(&y);
            if matches!(a, Value::Text(_)) {
                o
            } else {
                o.reverse()
            }
        }
        _ => a.cmp_collated(b, Collation::GeneralCi),
    }
}

/// SQL LIKE with `%`, `_` and `\` escapes, case-insensitive.
pub fn like(s: &str, pattern: &str) -> bool {
    let s: Vec<char> = s.to_lowercase().chars().collect();
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    fn go(s: &[char], p: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('%') => (0..=s.len()).any(|i| go(&s[i..], &p[1..])),
            Some('_') => !s.is_empty() && go(&s[1..], &p[1..]),
            Some('\\') if p.len() > 1 => !s.is_empty() && s[0] == p[1] && go(&s[1..], &p[2..]),
            Some(c) => !s.is_empty() && s[0] == *c && go(&s[1..], &p[1..]),
        }
    }
    go(&s, &p)
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
        };
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
