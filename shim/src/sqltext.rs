//! SQL text to tokens and statements with MySQL's string-literal rules.
//!
//! sqlparser's unescaping turns `'\_'` into `_`, but MySQL keeps the
//! backslash of `\%` and `\_` in a string literal so that `LIKE 'al\_%'`
//! matches a literal underscore. So the shim tokenizes without sqlparser's
//! unescaping and unescapes string literals itself ([`unescape_literal`]),
//! exactly as MySQL does, then hands the tokens to the parser.

use sqlparser::ast::{self, Query, Statement};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithLocation, Tokenizer, Word};

use crate::error::{Result, ShimError};

/// Tokens of `sql` (whitespace included), string literals and quoted
/// identifiers unescaped by MySQL's rules.
pub fn tokenize(sql: &str) -> Result<Vec<TokenWithLocation>> {
    let mut toks = Tokenizer::new(&MySqlDialect {}, sql)
        .with_unescape(false)
        .tokenize_with_location()
        .map_err(|e| ShimError::Parse(e.to_string()))?;
    for t in &mut toks {
        match &mut t.token {
            Token::SingleQuotedString(s) | Token::NationalStringLiteral(s) => {
                *s = unescape_literal(s, '\'')
            }
            Token::DoubleQuotedString(s) => *s = unescape_literal(s, '"'),
            Token::Word(Word {
                value,
                quote_style: Some(q),
                ..
            }) => {
                let doubled: String = [*q, *q].iter().collect();
                if value.contains(&doubled) {
                    *value = value.replace(&doubled, &q.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(toks)
}

/// A parser over `sql` (see [`tokenize`]).
pub fn parser(sql: &str) -> Result<Parser<'static>> {
    Ok(Parser::new(&MySqlDialect {}).with_tokens_with_locations(tokenize(sql)?))
}

/// Every statement in `sql`.
pub fn parse_statements(sql: &str) -> Result<Vec<Statement>> {
    Ok(parser(sql)?.parse_statements()?)
}

/// The statements of a multi-statement text, split at top-level semicolons
/// (not those inside strings, quoted names or comments), without empty
/// ones. Text that does not tokenize comes back whole, so that running it
/// reports the error.
pub fn split_statements(sql: &str) -> Vec<&str> {
    let Ok(toks) = Tokenizer::new(&MySqlDialect {}, sql)
        .with_unescape(false)
        .tokenize_with_location()
    else {
        return vec![sql];
    };
    // Byte offset of each line start; locations count lines from 1 and
    // characters within a line from 1.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |line: u64, column: u64| -> Option<usize> {
        let start = *line_starts.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
        let skip = usize::try_from(column).ok()?.checked_sub(1)?;
        match sql[start..].char_indices().nth(skip) {
            Some((i, _)) => Some(start + i),
            None => Some(sql.len()),
        }
    };
    let mut pieces = Vec::new();
    let mut from = 0;
    let mut has_content = false;
    for t in &toks {
        match &t.token {
            Token::SemiColon => {
                let Some(at) = offset(t.location.line, t.location.column) else {
                    return vec![sql];
                };
                if has_content {
                    pieces.push(&sql[from..at]);
                }
                from = at + 1;
                has_content = false;
            }
            Token::Whitespace(_) => {}
            _ => has_content = true,
        }
    }
    if has_content {
        pieces.push(&sql[from..]);
    }
    if pieces.is_empty() {
        pieces.push(sql);
    }
    pieces
}

/// The body of a string literal as the tokenizer left it (backslash escapes
/// and doubled quotes intact), unescaped as MySQL does: `\0 \b \n \r \t \Z`
/// and `\\ \' \"` are the usual characters, `\%` and `\_` stay two characters
/// (so LIKE sees an escaped wildcard), any other `\x` is `x`, and a doubled
/// `quote` is one.
pub fn unescape_literal(raw: &str, quote: char) -> String {
    if !raw.contains(['\\', quote]) {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('0') => out.push('\0'),
                Some('b') => out.push('\u{8}'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('t') => out.push('\t'),
                Some('Z') => out.push('\u{1a}'),
                Some(w @ ('%' | '_')) => {
                    out.push('\\');
                    out.push(w);
                }
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else if c == quote && chars.peek() == Some(&quote) {
            chars.next();
            out.push(quote);
        } else {
            out.push(c);
        }
    }
    out
}

/// Rewrites `query`'s string literals so that its `Display` text, parsed
/// again by plain sqlparser (as stored view definitions are), yields the same
/// values: sqlparser prints literals without escaping backslashes.
pub fn display_safe(query: &Query) -> Query {
    let mut q = query.clone();
    let _ = ast::visit_expressions_mut(&mut q, |e| {
        if let ast::Expr::Value(
            ast::Value::SingleQuotedString(s)
            | ast::Value::DoubleQuotedString(s)
            | ast::Value::NationalStringLiteral(s),
        ) = e
        {
            if s.contains('\\') {
                *s = s.replace('\\', "\\\\");
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(sql: &str) -> String {
        match &parse_statements(&format!("SELECT {sql}")).unwrap()[0] {
            Statement::Query(q) => match &*q.body {
                ast::SetExpr::Select(s) => match &s.projection[0] {
                    ast::SelectItem::UnnamedExpr(ast::Expr::Value(
                        ast::Value::SingleQuotedString(v) | ast::Value::DoubleQuotedString(v),
                    )) => v.clone(),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mysql_escapes() {
        assert_eq!(literal(r"'al\_%'"), r"al\_%");
        assert_eq!(literal(r"'100\%'"), r"100\%");
        assert_eq!(literal(r"'a\\b'"), r"a\b");
        assert_eq!(literal(r"'it''s'"), "it's");
        assert_eq!(literal(r"'it\'s'"), "it's");
        assert_eq!(literal(r#""say ""hi""""#), r#"say "hi""#);
        assert_eq!(literal(r"'\n\t\0\x'"), "\n\t\0x");
        assert_eq!(literal("'é'"), "é");
    }

    #[test]
    fn splits_at_top_level_semicolons() {
        assert_eq!(
            split_statements("SELECT 1; SELECT 2"),
            ["SELECT 1", " SELECT 2"]
        );
        assert_eq!(
            split_statements("SELECT ';' AS a;\n-- x;\nSELECT \"b;\", `c;`;"),
            ["SELECT ';' AS a", "\n-- x;\nSELECT \"b;\", `c;`"]
        );
        assert_eq!(
            split_statements("SELECT 'é';SELECT 2;;"),
            ["SELECT 'é'", "SELECT 2"]
        );
        assert_eq!(split_statements("SELECT 1"), ["SELECT 1"]);
        assert_eq!(split_statements("SELECT 'open"), ["SELECT 'open"]);
    }

    #[test]
    fn quoted_identifiers_undouble() {
        let stmts = parse_statements("SELECT `a``b` FROM t").unwrap();
        assert!(stmts[0].to_string().contains("`a``b`"), "{}", stmts[0]);
    }

    #[test]
    fn display_safe_round_trips_backslashes() {
        let Statement::Query(q) = parse_statements(r"SELECT 1 WHERE 'x' LIKE 'al\_%'")
            .unwrap()
            .remove(0)
        else {
            panic!()
        };
        let text = display_safe(&q).to_string();
        let again = Parser::parse_sql(&MySqlDialect {}, &text).unwrap();
        assert_eq!(again[0].to_string(), Statement::Query(q).to_string());
    }
}
