//! `sql_mode` values as MariaDB stores them ([`canonical_sql_mode`]): the
//! modes a `SET` names, combination modes (ANSI, TRADITIONAL, ORACLE, ...)
//! with the modes they include, in MariaDB's own order; an unknown name is
//! 1231. Readers of the variable (`crate::vars::sql_mode_has`) can then
//! look for one name.

use ladle_common::Value;

use crate::error::{Result, ShimError};

/// MariaDB 10.11's modes, in the order of their bits (`SELECT @@sql_mode`
/// lists them so; `SET sql_mode = n` sets the modes of n's bits).
const MODES: [&str; 35] = [
    "REAL_AS_FLOAT",
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "IGNORE_SPACE",
    "IGNORE_BAD_TABLE_OPTIONS",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "POSTGRESQL",
    "ORACLE",
    "MSSQL",
    "DB2",
    "MAXDB",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_FIELD_OPTIONS",
    "MYSQL323",
    "MYSQL40",
    "ANSI",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "TRADITIONAL",
    "NO_AUTO_CREATE_USER",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
    "EMPTY_STRING_IS_NULL",
    "SIMULTANEOUS_ASSIGNMENT",
    "TIME_ROUND_FRACTIONAL",
];

/// The modes of a foreign dialect's combination (MSSQL, POSTGRESQL, DB2,
/// MAXDB and ORACLE start from these).
const DIALECT: &[&str] = &[
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "IGNORE_SPACE",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_FIELD_OPTIONS",
];

/// The modes combination mode `mode` adds besides itself (MariaDB's
/// `expand_sql_mode`).
fn included(mode: &str) -> Vec<&'static str> {
    match mode {
        "ANSI" => vec![
            "REAL_AS_FLOAT",
            "PIPES_AS_CONCAT",
            "ANSI_QUOTES",
            "IGNORE_SPACE",
        ],
        "ORACLE" => [DIALECT, &["NO_AUTO_CREATE_USER", "SIMULTANEOUS_ASSIGNMENT"]].concat(),
        "MSSQL" | "POSTGRESQL" | "DB2" => DIALECT.to_vec(),
        "MAXDB" => [DIALECT, &["NO_AUTO_CREATE_USER"]].concat(),
        "MYSQL323" | "MYSQL40" => vec!["HIGH_NOT_PRECEDENCE"],
        "TRADITIONAL" => vec![
            "STRICT_TRANS_TABLES",
            "STRICT_ALL_TABLES",
            "NO_ZERO_IN_DATE",
            "NO_ZERO_DATE",
            "ERROR_FOR_DIVISION_BY_ZERO",
            "NO_AUTO_CREATE_USER",
            "NO_ENGINE_SUBSTITUTION",
        ],
        _ => Vec::new(),
    }
}

/// The bit of mode `name` (any case), if it is one.
fn bit_of(name: &str) -> Option<u64> {
    MODES
        .iter()
        .position(|m| m.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// `value` (what `SET sql_mode = value` assigns: a comma-separated list of
/// modes, or the number of their bits) as MariaDB stores it: every mode
/// it names or includes, once each, in MariaDB's order. An unknown name,
/// a number past the modes and NULL are 1231, as MariaDB refuses them.
pub fn canonical_sql_mode(value: &Value) -> Result<Value> {
    let refused = |shown: String| ShimError::WrongValueForVar("sql_mode".into(), shown);
    let mut bits: u64 = match value {
        Value::Int(_) | Value::UInt(_) => {
            let n = match value {
                Value::Int(i) => u64::try_from(*i).unwrap_or(u64::MAX),
                Value::UInt(u) => *u,
                _ => u64::MAX,
            };
            if n >> MODES.len() != 0 {
                return Err(refused(value.to_string()));
            }
            n
        }
        Value::Null => return Err(refused("NULL".into())),
        other => {
            let text = match other {
                Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                v => v.to_string(),
            };
            // Empty names (`'a,,b'`) are skipped; names are not trimmed.
            let mut bits = 0;
            for name in text.split(',').filter(|n| !n.is_empty()) {
                bits |= bit_of(name).ok_or_else(|| refused(name.to_string()))?;
            }
            bits
        }
    };
    for (i, mode) in MODES.iter().enumerate() {
        if bits & (1 << i) != 0 {
            for inner in included(mode) {
                bits |= bit_of(inner).unwrap_or(0);
            }
        }
    }
    let names: Vec<&str> = MODES
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, m)| *m)
        .collect();
    Ok(Value::text(names.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(v: Value) -> Option<String> {
        match canonical_sql_mode(&v).ok()? {
            Value::Text(t) => Some(t.to_string()),
            _ => None,
        }
    }

    #[test]
    fn modes_come_out_in_mariadbs_order_with_combinations_expanded() {
        assert_eq!(
            canonical(Value::text("STRICT_TRANS_TABLES,ANSI_QUOTES")).as_deref(),
            Some("ANSI_QUOTES,STRICT_TRANS_TABLES")
        );
        assert_eq!(
            canonical(Value::text("ansi")).as_deref(),
            Some("REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI")
        );
        assert_eq!(
            canonical(Value::text("MYSQL40")).as_deref(),
            Some("MYSQL40,HIGH_NOT_PRECEDENCE")
        );
        assert_eq!(
            canonical(Value::text("ansi_quotes,,")).as_deref(),
            Some("ANSI_QUOTES")
        );
        assert_eq!(canonical(Value::text("")).as_deref(), Some(""));
        assert_eq!(canonical(Value::Int(4)).as_deref(), Some("ANSI_QUOTES"));
        assert_eq!(canonical(Value::text("NOPE")), None);
        assert_eq!(canonical(Value::text(" ansi_quotes")), None);
        assert_eq!(canonical(Value::Null), None);
        assert_eq!(canonical(Value::Int(-1)), None);
        assert_eq!(canonical(Value::Int(1 << 35)), None);
    }
}
