//! MySQL's index hints (`t USE INDEX (a)`, `FORCE KEY FOR ORDER BY (b)`,
//! `IGNORE INDEX (c) USE INDEX ()`), which sqlparser 0.52 does not read.
//! They steer InnoDB's choice of index and never change an answer, and
//! Ladle answers from views it plans itself, so the parser is given the
//! statement without them. (MySQL refuses a hint naming an index the
//! table lacks, 1176; Ladle does not check the names.)

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithLocation, Whitespace};

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

/// The first non-whitespace token at or after `i`.
fn next_solid(toks: &[TokenWithLocation], i: usize) -> Option<usize> {
    (i..toks.len()).find(|&j| !matches!(toks[j].token, Token::Whitespace(_)))
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
