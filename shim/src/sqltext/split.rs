//! Statement text before it is parsed: a multi-statement text split at
//! its top-level semicolons, MySQL's executable comments opened.

use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::tokenize::{byte_offset, line_starts};

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
    let line_starts = line_starts(sql);
    let offset = |line: u64, column: u64| byte_offset(sql, &line_starts, line, column);
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

/// The version (`MMmmpp`) MySQL's executable comments are compared with:
/// the server version Ladle announces (`vars::SERVER_VERSION`, 8.0.34).
pub const COMMENT_VERSION: u32 = 80034;

/// `sql` with MySQL's executable comments opened: `/*! text */` and
/// `/*!NNNNN text */` (5 or 6 digits, a version no newer than
/// [`COMMENT_VERSION`]) become ` text ` so it runs, as dump tools expect
/// (`/*!40101 SET NAMES utf8mb4 */`). A comment for a newer version, a
/// MariaDB-only `/*M!...*/` (Ladle announces itself as MySQL) and every
/// other comment stay comments; strings, quoted names and `--`/`#`
/// comments are left as they are.
pub fn open_versioned_comments(sql: &str) -> std::borrow::Cow<'_, str> {
    if !sql.contains("/*!") {
        return std::borrow::Cow::Borrowed(sql);
    }
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    // Start of text not yet copied.
    let mut copied = 0;
    // Inside an opened comment: its `*/` is dropped.
    let mut opened = false;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    // A backslash escapes the next byte in strings.
                    i += if b[i] == b'\\' && q != b'`' { 2 } else { 1 };
                }
                i += 1;
            }
            b'#' => i = sql[i..].find('\n').map_or(b.len(), |n| i + n),
            b'-' if b.get(i + 1) == Some(&b'-')
                && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                i = sql[i..].find('\n').map_or(b.len(), |n| i + n)
            }
            b'*' if opened && b.get(i + 1) == Some(&b'/') => {
                out.push_str(&sql[copied..i]);
                out.push(' ');
                i += 2;
                copied = i;
                opened = false;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let digits = b
                    .get(i + 3..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                let runs = b.get(i + 2) == Some(&b'!')
                    && !opened
                    && match digits {
                        0 => true,
                        5 | 6 => sql[i + 3..i + 3 + digits]
                            .parse::<u32>()
                            .is_ok_and(|v| v <= COMMENT_VERSION),
                        _ => false,
                    };
                if runs {
                    out.push_str(&sql[copied..i]);
                    out.push(' ');
                    i += 3 + digits;
                    copied = i;
                    opened = true;
                } else {
                    // A comment that stays one: skip to its end.
                    i = sql[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied.min(sql.len())..]);
    std::borrow::Cow::Owned(out)
}
