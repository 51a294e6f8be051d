//! `?` placeholders of prepared statements: finding them in SQL text
//! (outside quotes and comments); binding values into a write statement
//! parsed once at PREPARE ([`ParsedWrite`]); and, for the statements
//! re-planned at each execution (SHOW, SET, DDL, the MySQL forms the SQL
//! parser does not read), substituting the values as SQL literals.

use std::fmt::Write;
use std::ops::ControlFlow;

use ladle_common::Value;
use sqlparser::ast::{self, Statement};

use crate::error::Result;
use crate::output::Kind;

/// An INSERT, REPLACE, UPDATE or DELETE parsed once at PREPARE, its
/// placeholders numbered in text order (`?1`, `?2`, ...): each execution
/// binds the values into a copy of the tree, so no SQL text is rendered,
/// tokenized, routed or parsed again.
pub struct ParsedWrite {
    kind: Kind,
    stmt: Statement,
}

impl ParsedWrite {
    /// `sql` (with `?` at `marks`), a write of `kind` the SQL parser reads
    /// as it is (see `Engine::bindable_write`), parsed for binding; `None`
    /// when it must take the text path after all: it does not parse as one
    /// statement, or a placeholder sits where the parser wants no
    /// expression.
    pub fn parse(sql: &str, marks: &[usize], kind: Kind) -> Option<ParsedWrite> {
        let mut numbered = String::with_capacity(sql.len() + 2 * marks.len());
        let mut last = 0;
        for (i, m) in marks.iter().enumerate() {
            numbered.push_str(&sql[last..*m]);
            let _ = write!(numbered, "?{}", i + 1);
            last = m + 1;
        }
        numbered.push_str(&sql[last..]);
        let mut stmts = crate::sqltext::parse(&numbered).ok()?;
        let stmt = match (stmts.pop(), stmts.is_empty()) {
            (Some(stmt), true) => stmt,
            _ => return None,
        };
        // Every mark must be one expression placeholder, once.
        let mut seen = vec![false; marks.len()];
        let mut stray = false;
        let _ = ast::visit_expressions(&stmt, |e| {
            if let ast::Expr::Value(ast::Value::Placeholder(p)) = e {
                match placeholder_index(p, marks.len()) {
                    Some(i) if !seen[i] => seen[i] = true,
                    _ => stray = true,
                }
            }
            ControlFlow::<()>::Continue(())
        });
        if stray || seen.contains(&false) {
            return None;
        }
        Some(ParsedWrite { kind, stmt })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The statement with `values` (one per placeholder, in text order) in
    /// place of its placeholders, each as the literal the text path would
    /// have parsed.
    pub fn bind(&self, values: &[Value]) -> Result<Statement> {
        let mut stmt = self.stmt.clone();
        let mut failure = None;
        let _ = ast::visit_expressions_mut(&mut stmt, |e| {
            if let ast::Expr::Value(ast::Value::Placeholder(p)) = e {
                let v = placeholder_index(p, values.len()).map_or(&Value::Null, |i| &values[i]);
                match literal_expr(v) {
                    Ok(x) => *e = x,
                    Err(err) => {
                        failure = Some(err);
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        });
        match failure {
            Some(err) => Err(err),
            None => Ok(stmt),
        }
    }
}

/// The 0-based index of numbered placeholder `?n` among `count`.
fn placeholder_index(p: &str, count: usize) -> Option<usize> {
    let n: usize = p.strip_prefix('?')?.parse().ok()?;
    (1..=count).contains(&n).then(|| n - 1)
}

/// `v` as the expression its SQL literal ([`literal`]) parses to.
fn literal_expr(v: &Value) -> Result<ast::Expr> {
    Ok(match v {
        Value::Null => ast::Expr::Value(ast::Value::Null),
        Value::Int(i) if *i >= 0 => ast::Expr::Value(ast::Value::Number(i.to_string(), false)),
        Value::UInt(u) => ast::Expr::Value(ast::Value::Number(u.to_string(), false)),
        Value::Text(t) => ast::Expr::Value(ast::Value::SingleQuotedString(t.to_string())),
        other => crate::sqltext::parse_expr(&literal(other))?,
    })
}

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

    #[test]
    fn bound_writes_parse_as_their_substituted_text() {
        use std::str::FromStr;
        let day = chrono::NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
        let values = [
            Value::Null,
            Value::Int(-3),
            Value::Int(7),
            Value::UInt(u64::MAX),
            Value::Double(1.5),
            Value::Double(-2e300),
            Value::Decimal(rust_decimal::Decimal::from_str("-12.50").unwrap()),
            Value::text("it's \\ a\n'q' ?"),
            Value::text(""),
            Value::text("nul \0 tab \t emoji \u{1F600} quote \" back \\ end"),
            Value::Int(i64::MIN),
            Value::Bytes(vec![0u8, 255, 39].into()),
            Value::Bytes(Vec::new().into()),
            Value::Date(day),
            Value::DateTime(day.and_hms_micro_opt(1, 2, 3, 4).unwrap()),
            Value::Time(-3_600_000_001),
        ];
        for sql in [
            "INSERT INTO t (a, b) VALUES (?, ?), (?, ?)",
            "UPDATE t SET a = ? - ?, b = CASE WHEN ? THEN ? WHEN ? THEN ? ELSE ? END WHERE id = ?",
            "DELETE FROM t WHERE a IN (?, ?) AND b BETWEEN ? AND ? LIMIT 1",
            "REPLACE INTO t VALUES (?)",
            "INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = ? * 2",
            "UPDATE t SET a = '?' WHERE b = ? /* ? */",
        ] {
            let marks = placeholders(sql);
            assert!(crate::dispatch::bindable_write(sql), "{sql}");
            let write = ParsedWrite::parse(sql, &marks, Kind::Insert).expect(sql);
            for start in 0..values.len() {
                let vals: Vec<Value> = (0..marks.len())
                    .map(|i| values[(start + i) % values.len()].clone())
                    .collect();
                let text = substitute(sql, &marks, &vals);
                let parsed = crate::sqltext::parse(&text).unwrap().pop().unwrap();
                assert_eq!(write.bind(&vals).unwrap(), parsed, "{text}");
            }
        }
    }

    #[test]
    fn writes_the_dispatcher_rewrites_are_not_bound() {
        for sql in [
            "UPDATE IGNORE t SET a = ?",
            "UPDATE t SET a = ? ORDER BY id LIMIT ?",
            "INSERT INTO t SET a = ?",
            "DELETE FROM t WHERE a = ? RETURNING a",
            "SELECT ?",
            "SET @x = ?",
            "INSERT /*!40000 IGNORE */ INTO t VALUES (?)",
        ] {
            assert!(!crate::dispatch::bindable_write(sql), "{sql}");
        }
        // Placeholders where the parser wants no expression: the text path.
        let sql = "INSERT INTO t VALUES (?) ON DUPLICATE KEY UPDATE a = VALUES(a)";
        assert!(ParsedWrite::parse(sql, &placeholders(sql), Kind::Insert).is_some());
        let sql = "UPDATE t SET a = ? ?";
        assert!(ParsedWrite::parse(sql, &placeholders(sql), Kind::Update).is_none());
    }
}
