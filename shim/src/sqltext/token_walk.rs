//! Steps the token rewrites before parsing share (`STRAIGHT_JOIN`,
//! `WITH ROLLUP`, index hints): the solid (non-whitespace) token after or
//! before a place, an unquoted word, and the words that may follow
//! SELECT before its first item.

use sqlparser::tokenizer::{Token, TokenWithLocation};

/// SELECT's modifiers other than `STRAIGHT_JOIN` (which
/// `straight_join.rs` reads apart): words between SELECT and its first
/// item.
pub(super) const SELECT_MODIFIERS: [&str; 10] = [
    "ALL",
    "DISTINCT",
    "DISTINCTROW",
    "HIGH_PRIORITY",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "SQL_BUFFER_RESULT",
    "SQL_CACHE",
    "SQL_NO_CACHE",
    "SQL_CALC_FOUND_ROWS",
];

/// Whether `t` is the unquoted word `w` (any case).
pub(super) fn is_word(t: &Token, w: &str) -> bool {
    matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
}

/// The first solid token at or after `i`.
pub(super) fn next_solid(toks: &[TokenWithLocation], i: usize) -> Option<usize> {
    (i..toks.len()).find(|&j| !matches!(toks[j].token, Token::Whitespace(_)))
}

/// The last solid token before `end`.
pub(super) fn prev_solid(toks: &[TokenWithLocation], end: usize) -> Option<usize> {
    (0..end)
        .rev()
        .find(|&k| !matches!(toks[k].token, Token::Whitespace(_)))
}

/// `toks` as text, whitespace runs as one space (tests of the rewrites).
#[cfg(test)]
pub(super) fn rendered(toks: Vec<TokenWithLocation>) -> String {
    toks.into_iter()
        .map(|t| t.token.to_string())
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
