//! MySQL's `GROUP BY a, b WITH ROLLUP`, which sqlparser 0.52 reads only
//! in other dialects: the parser is given `GROUP BY ROLLUP (a, b)`, which
//! it reads as `Expr::Rollup` (the dialect enables those GROUP BY forms),
//! and `crate::rollup` answers it.

use sqlparser::tokenizer::{Token, TokenWithLocation, Whitespace};

use super::token_walk::{is_word, next_solid, prev_solid};

/// `toks` with each `GROUP BY list WITH ROLLUP` as `GROUP BY ROLLUP
/// (list)`; a WITH ROLLUP not after a GROUP BY list is left for the
/// parser to refuse.
pub(super) fn read_with_rollup(mut toks: Vec<TokenWithLocation>) -> Vec<TokenWithLocation> {
    quote_written_group_by_forms(&mut toks);
    let mut i = 0;
    while i < toks.len() {
        if is_word(&toks[i].token, "WITH") {
            if let Some(r) = next_solid(&toks, i + 1).filter(|&r| is_word(&toks[r].token, "ROLLUP"))
            {
                if let Some(by) = group_by_before(&toks, i) {
                    toks[i].token = Token::RParen;
                    toks[r].token = Token::Whitespace(Whitespace::Space);
                    let opening = [
                        Token::Whitespace(Whitespace::Space),
                        Token::make_keyword("ROLLUP"),
                        Token::LParen,
                    ];
                    let at = by + 1;
                    toks.splice(at..at, opening.into_iter().map(TokenWithLocation::wrap));
                    i = r + 3;
                    continue;
                }
            }
        }
        i += 1;
    }
    toks
}

/// `GROUP BY ROLLUP (...)`, `CUBE (...)` and `GROUPING SETS` as written
/// are not MySQL's: their first word is quoted, so the parser reads a call
/// of a function that does not exist, or fails at SETS, as MariaDB does
/// (only `WITH ROLLUP` becomes a rollup list).
fn quote_written_group_by_forms(toks: &mut [TokenWithLocation]) {
    for i in 0..toks.len() {
        if !is_word(&toks[i].token, "BY") {
            continue;
        }
        let group = prev_solid(toks, i);
        if !group.is_some_and(|g| is_word(&toks[g].token, "GROUP")) {
            continue;
        }
        if let Some(next) = next_solid(toks, i + 1) {
            if let Token::Word(w) = &mut toks[next].token {
                let form = ["ROLLUP", "CUBE", "GROUPING"]
                    .iter()
                    .any(|f| w.value.eq_ignore_ascii_case(f));
                if form && w.quote_style.is_none() {
                    w.quote_style = Some('`');
                    w.keyword = sqlparser::keywords::Keyword::NoKeyword;
                }
            }
        }
    }
}

/// The `BY` of the `GROUP BY` whose list ends at `end`, at the same
/// parenthesis depth, if the list is not empty.
fn group_by_before(toks: &[TokenWithLocation], end: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut solid_after: Option<usize> = None;
    for j in (0..end).rev() {
        match &toks[j].token {
            Token::Whitespace(_) => continue,
            Token::RParen => depth += 1,
            Token::LParen if depth == 0 => return None,
            Token::LParen => depth -= 1,
            t if depth == 0 && is_word(t, "BY") => {
                let group = prev_solid(toks, j)?;
                return (is_word(&toks[group].token, "GROUP") && solid_after.is_some())
                    .then_some(j);
            }
            _ => {}
        }
        solid_after = Some(j);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(sql: &str) -> String {
        let toks = crate::sqltext::tokenize(sql).expect("tokenizes");
        super::super::token_walk::rendered(read_with_rollup(toks))
    }

    #[test]
    fn with_rollup_becomes_a_rollup_list() {
        assert_eq!(
            read("SELECT a, SUM(x) FROM t GROUP BY a, f(b) WITH ROLLUP LIMIT 2"),
            "SELECT a, SUM(x) FROM t GROUP BY ROLLUP( a, f(b) ) LIMIT 2"
        );
        assert_eq!(
            read("SELECT * FROM (SELECT a FROM t GROUP BY a with rollup) d"),
            "SELECT * FROM (SELECT a FROM t GROUP BY ROLLUP( a ) ) d"
        );
        // No GROUP BY list: left alone.
        assert_eq!(read("WITH ROLLUP"), "WITH ROLLUP");
        // The other dialects' forms are not read as such.
        assert_eq!(
            read("SELECT a FROM t GROUP BY rollup(a)"),
            "SELECT a FROM t GROUP BY `rollup`(a)"
        );
    }
}
