//! MySQL's index hints (`t USE INDEX (a)`, `FORCE KEY FOR ORDER BY (b)`,
//! `IGNORE INDEX (c) USE INDEX ()`), which sqlparser 0.52 does not read.
//! They steer InnoDB's choice of index and never change an answer, and
//! Ladle answers from views it plans itself, so the parser is given the
//! statement without them. The names they give are still checked as
//! MySQL checks them (1176 for an index the table lacks): [`index_hints`]
//! lists them with the table each is for.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithLocation, Whitespace};

use super::token_walk::{next_solid, prev_solid};

/// `toks` with every index hint turned into whitespace.
pub(super) fn strip_index_hints(mut toks: Vec<TokenWithLocation>) -> Vec<TokenWithLocation> {
    let mut i = 0;
    while let Some(mut start) = next_hint(&toks, i) {
        // A table's hints: one, or several in a row.
        loop {
            let Some(end) = hint_end(&toks, start) else {
                return toks; // Not a whole hint: the parser reports it.
            };
            let another = next_solid(&toks, end).filter(|&h| is_hint_start(&toks, h));
            let upto = another.unwrap_or(end);
            for t in &mut toks[start..upto] {
                t.token = Token::Whitespace(Whitespace::Space);
            }
            i = upto;
            match another {
                Some(h) => start = h,
                None => break,
            }
        }
    }
    toks
}

/// One hint's index names and the table reference it follows.
#[derive(Debug, PartialEq)]
pub struct IndexHint {
    /// The table's name as written: one part, or `db.table`.
    pub table: Vec<String>,
    /// The reference's alias, if it has one (MySQL's errors name it).
    pub alias: Option<String>,
    /// The index names, as written (`PRIMARY` included).
    pub names: Vec<String>,
}

/// The index hints of `sql` (none if it does not tokenize).
pub fn index_hints(sql: &str) -> Vec<IndexHint> {
    let Ok(toks) = super::tokenize(sql) else {
        return Vec::new();
    };
    let mut hints = Vec::new();
    let mut i = 0;
    while let Some(mut start) = next_hint(&toks, i) {
        let target = hinted_table(&toks, start);
        // A table's hints: one, or several in a row.
        loop {
            let Some(end) = hint_end(&toks, start) else {
                return hints;
            };
            let open = (start..end).find(|&k| toks[k].token == Token::LParen);
            let names = open
                .map(|o| {
                    toks[o..end]
                        .iter()
                        .filter_map(|t| word_value(&t.token))
                        .collect()
                })
                .unwrap_or_default();
            if let Some((table, alias)) = &target {
                hints.push(IndexHint {
                    table: table.clone(),
                    alias: alias.clone(),
                    names,
                });
            }
            i = end;
            match next_solid(&toks, end).filter(|&h| is_hint_start(&toks, h)) {
                Some(h) => start = h,
                None => break,
            }
        }
    }
    hints
}

fn word_value(t: &Token) -> Option<String> {
    match t {
        Token::Word(w) => Some(w.value.clone()),
        _ => None,
    }
}

/// Words that come before a table name, never as one.
const BEFORE_TABLE: [&str; 8] = [
    "FROM",
    "JOIN",
    "UPDATE",
    "STRAIGHT_JOIN",
    "INTO",
    "LOW_PRIORITY",
    "IGNORE",
    "QUICK",
];

/// The table reference before the hint at `hint` (possibly after an
/// earlier hint of the same table): `db.t`, `t`, `t AS a` or `t a`.
fn hinted_table(toks: &[TokenWithLocation], hint: usize) -> Option<(Vec<String>, Option<String>)> {
    let prev = |j: usize| prev_solid(toks, j);
    let last = prev(hint)?;
    let before = prev(last);
    let qualified_at = |end: usize| {
        let mut parts = vec![word_value(&toks[end].token)?];
        let mut j = end;
        while let Some(dot) = prev(j).filter(|&d| toks[d].token == Token::Period) {
            j = prev(dot)?;
            parts.insert(0, word_value(&toks[j].token)?);
        }
        Some(parts)
    };
    match before.map(|b| &toks[b].token) {
        Some(Token::Word(w)) if w.quote_style.is_none() && w.keyword == Keyword::AS => {
            let alias = word_value(&toks[last].token);
            Some((qualified_at(prev(before?)?)?, alias))
        }
        Some(Token::Word(w))
            if w.quote_style.is_some()
                || !BEFORE_TABLE.contains(&w.value.to_ascii_uppercase().as_str()) =>
        {
            let alias = word_value(&toks[last].token);
            Some((qualified_at(before?)?, alias))
        }
        _ => Some((qualified_at(last)?, None)),
    }
}

/// `USE|FORCE|IGNORE` followed by `INDEX|KEY` at `j`.
fn is_hint_start(toks: &[TokenWithLocation], j: usize) -> bool {
    matches!(
        keyword(toks, Some(j)),
        Some(Keyword::USE | Keyword::FORCE | Keyword::IGNORE)
    ) && matches!(
        keyword(toks, next_solid(toks, j + 1)),
        Some(Keyword::INDEX | Keyword::KEY)
    )
}

fn keyword(toks: &[TokenWithLocation], i: Option<usize>) -> Option<Keyword> {
    match &toks.get(i?)?.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    }
}

/// Where the next hint from `i` on starts: `USE|FORCE|IGNORE` followed by
/// `INDEX|KEY` (so `INSERT IGNORE INTO` is not one) after a table name or
/// alias.
fn next_hint(toks: &[TokenWithLocation], i: usize) -> Option<usize> {
    let mut prev: Option<usize> = None;
    let mut j = next_solid(toks, i)?;
    loop {
        let after_name = prev.is_some_and(|p| matches!(&toks[p].token, Token::Word(_)));
        if after_name && is_hint_start(toks, j) {
            return Some(j);
        }
        prev = Some(j);
        j = next_solid(toks, j + 1)?;
    }
}

/// One past the `)` that ends the hint starting at `start`, if the hint
/// is whole: `verb INDEX|KEY [FOR JOIN|ORDER BY|GROUP BY] (names)`.
fn hint_end(toks: &[TokenWithLocation], start: usize) -> Option<usize> {
    let mut j = next_solid(toks, next_solid(toks, start + 1)? + 1)?;
    if keyword(toks, Some(j)) == Some(Keyword::FOR) {
        j = next_solid(toks, j + 1)?;
        match keyword(toks, Some(j))? {
            Keyword::JOIN => {}
            Keyword::ORDER | Keyword::GROUP => {
                j = next_solid(toks, j + 1)?;
                (keyword(toks, Some(j))? == Keyword::BY).then_some(())?;
            }
            _ => return None,
        }
        j = next_solid(toks, j + 1)?;
    }
    (toks[j].token == Token::LParen).then_some(())?;
    let close = (j + 1..toks.len()).find(|&k| toks[k].token == Token::RParen)?;
    let names_only = toks[j + 1..close].iter().all(|t| {
        matches!(
            t.token,
            Token::Word(_) | Token::Comma | Token::Whitespace(_)
        )
    });
    names_only.then_some(close + 1)
}
