//! Reading a statement by its tokens: the words the router and the
//! keyword-form handlers look at (`word`, `ident`, `qualified_name`), the
//! statement's first words and [`Kind`], and tokens rendered back to text.

use sqlparser::tokenizer::{Token, Word};

use crate::error::Result;
use crate::output::Kind;

/// Tokens without whitespace and comments.
pub fn tokens(sql: &str) -> Result<Vec<Token>> {
    Ok(crate::sqltext::tokenize(sql)?
        .into_iter()
        .map(|t| t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect())
}

/// The upper-cased word at `i`, if that token is a word (quoted or not).
pub fn word(t: &[Token], i: usize) -> Option<String> {
    match t.get(i) {
        Some(Token::Word(Word {
            value,
            quote_style: None,
            ..
        })) => Some(value.to_ascii_uppercase()),
        _ => None,
    }
}

/// The identifier at `i` (a word, quoted or not).
pub fn ident(t: &[Token], i: usize) -> Option<String> {
    match t.get(i) {
        Some(Token::Word(w)) => Some(w.value.clone()),
        Some(Token::SingleQuotedString(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Reads `name` or `db.name` at `*i`, advancing past it.
pub fn qualified_name(t: &[Token], i: &mut usize) -> Option<(Option<String>, String)> {
    let first = ident(t, *i)?;
    *i += 1;
    if matches!(t.get(*i), Some(Token::Period)) {
        let second = ident(t, *i + 1)?;
        *i += 2;
        Some((Some(first), second))
    } else {
        Some((None, first))
    }
}

/// `sql` from its first word on: past leading whitespace and comments.
fn past_leading_comments(sql: &str) -> &str {
    let mut rest = sql.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else if rest.starts_with("--") || rest.starts_with('#') {
            rest = rest.split_once('\n').map_or("", |(_, r)| r);
        } else {
            break;
        }
        rest = rest.trim_start();
    }
    rest
}

/// The first two words of a statement, upper case (cheap: no tokenizer;
/// leading comments are skipped).
pub(crate) fn first_words(sql: &str) -> (String, String) {
    let mut words = leading_words(sql, 2).into_iter();
    let w0 = words.next().unwrap_or_default();
    let w1 = words.next().unwrap_or_default();
    (w0, w1)
}

/// Up to `n` first words of a statement, upper case, as [`first_words`].
pub(crate) fn leading_words(sql: &str, n: usize) -> Vec<String> {
    past_leading_comments(sql)
        .split(|c: char| !c.is_ascii_alphabetic() && c != '_')
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

pub fn classify(sql: &str) -> Kind {
    // (A comment before a write must not hide it: a replica forwards
    // statements by their kind.)
    let first = past_leading_comments(sql)
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    match first.as_str() {
        "SELECT" | "WITH" => Kind::Select,
        "INSERT" | "REPLACE" => Kind::Insert,
        "UPDATE" => Kind::Update,
        "DELETE" | "TRUNCATE" => Kind::Delete,
        // DROP PREPARE frees a session's prepared statement: no schema change.
        "DROP" if first_words(sql).1 == "PREPARE" => Kind::Other,
        "CREATE" | "DROP" | "ALTER" | "RENAME" => Kind::Ddl,
        "BEGIN" | "START" | "COMMIT" | "ROLLBACK" => Kind::Transaction,
        "SHOW" | "DESCRIBE" | "DESC" | "EXPLAIN" => Kind::Show,
        _ => Kind::Other,
    }
}

/// The comma-separated parts of `toks` (a comma inside parentheses
/// separates nothing); one empty part for no tokens.
pub(crate) fn top_level_parts(toks: &[Token]) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                parts.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&toks[start..]);
    parts
}

/// Tokens (without whitespace) as SQL text again.
pub fn render_tokens(toks: &[Token]) -> String {
    toks.iter().map(render_token).collect::<Vec<_>>().join(" ")
}

pub(crate) fn render_token(t: &Token) -> String {
    match t {
        Token::SingleQuotedString(s) => crate::params::quote(s),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::first_words;

    #[test]
    fn first_words_skip_leading_comments() {
        let w = |s: &str| first_words(s);
        assert_eq!(w("CREATE USER 'u'@'%'"), ("CREATE".into(), "USER".into()));
        assert_eq!(
            w("/* app */ grant SELECT ON *.* TO u"),
            ("GRANT".into(), "SELECT".into())
        );
        assert_eq!(
            w("-- note\n  SET PASSWORD = ''"),
            ("SET".into(), "PASSWORD".into())
        );
        assert_eq!(w("# x\nSHOW GRANTS"), ("SHOW".into(), "GRANTS".into()));
        assert_eq!(w("/* unterminated"), (String::new(), String::new()));
    }

    #[test]
    fn a_statement_is_of_its_kind_after_leading_comments() {
        use super::classify;
        use crate::output::Kind;
        assert_eq!(classify("/* app */ INSERT INTO t VALUES (1)"), Kind::Insert);
        assert_eq!(classify("-- note\nUPDATE t SET a = 1"), Kind::Update);
        assert_eq!(classify("# x\n /* y */ (SELECT 1)"), Kind::Select);
        assert_eq!(classify("/* unterminated"), Kind::Other);
    }
}
