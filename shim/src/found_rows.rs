//! `SELECT SQL_CALC_FOUND_ROWS ...` and `FOUND_ROWS()`, as WordPress pages
//! every post list: the query runs without the modifier, then, when it has
//! a LIMIT or OFFSET, once more without them; the second result's row count
//! is what `FOUND_ROWS()` returns next (kept in the session by
//! `settle_statement`, which otherwise records the rows a SELECT returned).
//! Both runs read views like any other SELECT.

use sqlparser::ast::Statement;

use crate::error::WireError;
use crate::exec::Engine;
use crate::output::{Kind, Output};
use crate::session::Session;
use crate::sqltext::parse;

/// The words that may stand between SELECT and its first item.
const MODIFIERS: [&str; 10] = [
    "ALL",
    "DISTINCT",
    "DISTINCTROW",
    "HIGH_PRIORITY",
    "STRAIGHT_JOIN",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "SQL_BUFFER_RESULT",
    "SQL_CACHE",
    "SQL_NO_CACHE",
];

/// `sql` without `SQL_CALC_FOUND_ROWS` among the modifiers after its
/// leading SELECT, if it has it there.
pub(crate) fn strip_calc(sql: &str) -> Option<String> {
    let rest = sql.trim_start();
    let head = rest.get(..6)?;
    if !head.eq_ignore_ascii_case("SELECT") || !rest[6..].starts_with(char::is_whitespace) {
        return None;
    }
    let start = sql.len() - rest.len() + 6;
    let mut at = start;
    loop {
        let word_at = at + sql[at..].len() - sql[at..].trim_start().len();
        let len = sql[word_at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(sql.len() - word_at);
        let word = &sql[word_at..word_at + len];
        if word.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS") {
            return Some(format!("{}{}", &sql[..at], &sql[word_at + len..]));
        }
        if len == 0 || !MODIFIERS.iter().any(|m| m.eq_ignore_ascii_case(word)) {
            return None;
        }
        at = word_at + len;
    }
}

impl Engine {
    /// Runs `plain` (a SELECT whose SQL_CALC_FOUND_ROWS was taken out) and
    /// leaves in the session the rows it finds without its LIMIT.
    pub(crate) fn select_calc_found_rows(
        &self,
        s: &mut Session,
        plain: &str,
    ) -> Result<Output, WireError> {
        let out = self.execute_inner(s, plain, Kind::Select)?;
        let returned = match &out {
            Output::Rows { rows, .. } => rows.len() as u64,
            Output::Done { .. } => 0,
        };
        let unlimited = match parse(plain)?.pop() {
            Some(Statement::Query(mut q)) if q.limit.is_some() || q.offset.is_some() => {
                q.limit = None;
                q.offset = None;
                Some(q.to_string())
            }
            _ => None,
        };
        let found = match unlimited {
            Some(sql) => match self.execute_inner(s, &sql, Kind::Select)? {
                Output::Rows { rows, .. } => rows.len() as u64,
                Output::Done { .. } => 0,
            },
            None => returned,
        };
        s.calc_found_rows = Some(found);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::strip_calc;

    #[test]
    fn the_modifier_goes_wherever_it_is_among_the_modifiers() {
        assert_eq!(
            strip_calc("SELECT SQL_CALC_FOUND_ROWS  t.ID FROM t LIMIT 0, 10").as_deref(),
            Some("SELECT  t.ID FROM t LIMIT 0, 10")
        );
        assert_eq!(
            strip_calc(" select distinct sql_calc_found_rows a FROM t").as_deref(),
            Some(" select distinct a FROM t")
        );
        assert_eq!(strip_calc("SELECT a AS SQL_CALC_FOUND_ROWS FROM t"), None);
        assert_eq!(strip_calc("SELECT 'SQL_CALC_FOUND_ROWS'"), None);
        assert_eq!(strip_calc("SELECT"), None);
        assert_eq!(strip_calc("UPDATE t SET a = 1"), None);
    }
}
