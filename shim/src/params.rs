//! `?` placeholders in SQL text: finding them (outside quotes and comments)
//! and substituting parameter values as SQL literals, for prepared
//! statements that are re-planned at each execution (DML, SHOW, SET...).

use std::fmt::Write;

use ladle_common::Value;

/// Byte offsets of the `?` placeholders in `sql`.
pub fn placeholders(sql: &str) -> Vec<usize> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() {
                    if b[i] == b'\\' && q != b'`' {
                        i += 2;
                        continue;
                    }
                    if b[i] == q {
                        if i + 1 < b.len() && b[i + 1] == q {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'-' if b.get(i + 1) == Some(&b'-')
                && !matches!(b.get(i + 2), Some(c) if !c.is_ascii_whitespace()) =>
            {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'?' => {
                out.push(i);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// `sql` with each placeholder at `marks` replaced by the matching value.
/// `values.len()` must equal `marks.len()` (checked by the caller).
pub fn substitute(sql: &str, marks: &[usize], values: &[Value]) -> String {
    let mut out = String::with_capacity(sql.len() + 16 * marks.len());
    let mut last = 0;
    for (m, v) in marks.iter().zip(values) {
        out.push_str(&sql[last..*m]);
        out.push_str(&literal(v));
        last = m + 1;
    }
    out.push_str(&sql[last..]);
    out
}

/// A value as a MySQL literal.
pub fn literal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Double(d) if d.is_finite() => {
            let s = format!("{d:?}");
            if s.contains(['e', 'E']) {
                s
            } else {
                format!("{d:e}")
            }
        }
        Value::Double(_) => "NULL".into(),
        Value::Decimal(d) => d.to_string(),
        Value::Bytes(b) => {
            if b.is_empty() {
                return "''".into();
            }
            let mut s = String::from("X'");
            for byte in b.iter() {
                let _ = write!(s, "{byte:02x}");
            }
            s.push('\'');
            s
        }
        other => quote(&other.to_string()),
    }
}

/// A string as a single-quoted literal with MySQL escapes.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_skip_quotes_and_comments() {
        let sql = "SELECT '?', `a?`, \"it''s?\" /* ? */ FROM t WHERE a = ? -- ?\n AND b = ?";
        let m = placeholders(sql);
        assert_eq!(m.len(), 2);
        let out = substitute(sql, &m, &[Value::text("x'y"), Value::Int(-3)]);
        assert!(out.ends_with("a = 'x''y' -- ?\n AND b = -3"), "{out}");
    }

    #[test]
    fn literals_round_trip_through_the_parser() {
        assert_eq!(literal(&Value::bytes([0u8, 255])), "X'00ff'");
        assert_eq!(literal(&Value::Double(1.5)), "1.5e0");
        assert_eq!(quote("a\\b"), "'a\\\\b'");
    }
}
