//! SQL text to tokens: sqlparser's tokenizer without its unescaping, then
//! MySQL's rules for what it reads differently (string literals, `X'..'`,
//! `b'..'`, the `BINARY` operator, signed integers).

use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, TokenWithLocation, Tokenizer, Word};

use super::literal::unescape_literal;
use crate::error::{Result, ShimError};

/// Tokens of `sql` (whitespace included), string literals and quoted
/// identifiers unescaped by MySQL's rules.
///
/// sqlparser reads `X'41'` and `0x41` alike (a hex literal), but MariaDB
/// tells them apart: `0x41` is a number in numeric context (`0x41 + 0` is
/// 65), `X'41'` the string 'A' (`X'41' + 0` is 0, with warning 1292). So an
/// `X'..'` literal gets a `_binary` introducer, which makes it a binary
/// string everywhere (unless it has an introducer already).
pub fn tokenize(sql: &str) -> Result<Vec<TokenWithLocation>> {
    let mut toks = Tokenizer::new(&MySqlDialect {}, sql)
        .with_unescape(false)
        .tokenize_with_location()
        .map_err(|e| ShimError::Parse(e.to_string()))?;
    if toks
        .iter()
        .any(|t| matches!(t.token, Token::HexStringLiteral(_)))
    {
        toks = introduce_quoted_hex(sql, toks);
    }
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
    bit_value_literals(&mut toks);
    binary_operator_to_cast(&mut toks);
    signed_integer_to_signed(&mut toks);
    national_character_types(&mut toks);
    from_dual_before_locking_clause(&mut toks);
    locking_clause_per_table(&mut toks);
    Ok(toks)
}

/// A comparison, arithmetic or bit operator.
fn is_operator(t: &Token) -> bool {
    matches!(
        t,
        Token::Eq
            | Token::DoubleEq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq
            | Token::Spaceship
            | Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::Mod
            | Token::Ampersand
            | Token::Pipe
            | Token::Caret
            | Token::ShiftLeft
            | Token::ShiftRight
    )
}

/// MySQL's bit-value literal `b'0101'` (which sqlparser reads as the
/// column `b` aliased '0101'). It is a binary string that compares and
/// computes as a number: beside a comparison or arithmetic operator it
/// becomes that number (`(price < 1000) = b'1'`, which Django writes for
/// boolean CHECKs, is `... = 1`; `b'101' + 0` is 5), elsewhere the binary
/// string of its bits (`SELECT b'1000001'` is 'A').
fn bit_value_literals(toks: &mut Vec<TokenWithLocation>) {
    let operator = |t: Option<&TokenWithLocation>| t.is_some_and(|t| is_operator(&t.token));
    let mut i = 0;
    while i + 1 < toks.len() {
        let bits = match (&toks[i].token, &toks[i + 1].token) {
            (Token::Word(w), Token::SingleQuotedString(s))
                if w.quote_style.is_none()
                    && w.value.eq_ignore_ascii_case("b")
                    && s.len() <= 64
                    && s.bytes().all(|c| c == b'0' || c == b'1') =>
            {
                s.clone()
            }
            _ => {
                i += 1;
                continue;
            }
        };
        let value = u64::from_str_radix(&bits, 2).unwrap_or(0);
        let significant = |from: usize, step: isize| {
            let mut j = from as isize + step;
            while j >= 0 && (j as usize) < toks.len() {
                if !matches!(toks[j as usize].token, Token::Whitespace(_)) {
                    return Some(&toks[j as usize]);
                }
                j += step;
            }
            None
        };
        let numeric = operator(significant(i, -1)) || operator(significant(i + 1, 1));
        let (line, column) = (toks[i].location.line, toks[i].location.column);
        let at = |token| TokenWithLocation::new(token, line, column);
        let replacement = if numeric {
            vec![at(Token::Number(value.to_string(), false))]
        } else {
            let bytes = bits.len().div_ceil(8);
            let hex = if bytes == 0 {
                String::new()
            } else {
                format!("{value:0width$X}", width = bytes * 2)
            };
            vec![
                at(Token::make_word("_binary", None)),
                at(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)),
                at(Token::HexStringLiteral(hex)),
            ]
        };
        let n = replacement.len();
        toks.splice(i..i + 2, replacement);
        i += n;
    }
}

/// `CAST(x AS SIGNED INTEGER)` (MySQL's long form, which Django sends) as
/// `CAST(x AS SIGNED)`: sqlparser reads only the short form. The `INTEGER`
/// or `INT` after `AS SIGNED` / `AS UNSIGNED` is dropped.
fn signed_integer_to_signed(toks: &mut Vec<TokenWithLocation>) {
    use sqlparser::keywords::Keyword;
    let word = |t: &TokenWithLocation, k: Keyword| matches!(&t.token, Token::Word(Word { keyword, quote_style: None, .. }) if *keyword == k);
    let next = |toks: &[TokenWithLocation], from: usize| {
        (from..toks.len()).find(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
    };
    let mut i = 0;
    while i < toks.len() {
        if word(&toks[i], Keyword::AS) {
            let signed = |t: &TokenWithLocation| {
                matches!(&t.token, Token::Word(w) if w.quote_style.is_none()
                    && (w.value.eq_ignore_ascii_case("signed") || w.value.eq_ignore_ascii_case("unsigned")))
            };
            if let Some(sg) = next(toks, i + 1).filter(|&j| signed(&toks[j])) {
                if let Some(int) = next(toks, sg + 1)
                    .filter(|&j| word(&toks[j], Keyword::INTEGER) || word(&toks[j], Keyword::INT))
                {
                    toks.drain(sg + 1..=int);
                }
            }
        }
        i += 1;
    }
}

/// `SELECT 1 FOR UPDATE` (or `FOR SHARE`) as `SELECT 1 FROM DUAL FOR
/// UPDATE`: sqlparser reads a FROM-less `FOR` as a column alias. Only in
/// text with no FROM at all (a statement with one parses as it is).
fn from_dual_before_locking_clause(toks: &mut Vec<TokenWithLocation>) {
    let is = |t: &Token, w: &str| matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    if toks.iter().any(|t| is(&t.token, "FROM")) {
        return;
    }
    let next = |toks: &[TokenWithLocation], from: usize| {
        (from..toks.len()).find(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
    };
    let at = (0..toks.len()).find(|&i| {
        is(&toks[i].token, "FOR")
            && next(toks, i + 1)
                .is_some_and(|j| is(&toks[j].token, "UPDATE") || is(&toks[j].token, "SHARE"))
    });
    if let Some(at) = at {
        let location = toks[at].location;
        let word = |w: &str| {
            TokenWithLocation::new(Token::make_word(w, None), location.line, location.column)
        };
        let space = || {
            TokenWithLocation::new(
                Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
                location.line,
                location.column,
            )
        };
        toks.splice(at..at, [word("FROM"), space(), word("DUAL"), space()]);
    }
}

/// `FOR UPDATE OF a, b NOWAIT` (MySQL's list of tables; Django sends it)
/// as `FOR UPDATE OF a NOWAIT FOR UPDATE OF b NOWAIT`: sqlparser reads one
/// table after OF, and one locking clause per table means the same.
fn locking_clause_per_table(toks: &mut Vec<TokenWithLocation>) {
    let is = |t: &TokenWithLocation, w: &str| matches!(&t.token, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    // The indexes of the tokens that are not whitespace.
    let sig: Vec<usize> = (0..toks.len())
        .filter(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
        .collect();
    let mut n = 0;
    while n + 3 < sig.len() {
        let (f, kind, of) = (sig[n], sig[n + 1], sig[n + 2]);
        if !(is(&toks[f], "FOR")
            && (is(&toks[kind], "UPDATE") || is(&toks[kind], "SHARE"))
            && is(&toks[of], "OF"))
        {
            n += 1;
            continue;
        }
        // Names: words joined by periods, separated by commas.
        let mut names: Vec<Vec<TokenWithLocation>> = vec![Vec::new()];
        let mut m = n + 3;
        while let Some(&at) = sig.get(m) {
            let last = names.last().and_then(|x| x.last()).map(|t| &t.token);
            match (&toks[at].token, last) {
                (Token::Word(_), None | Some(Token::Period)) => {}
                (Token::Period, Some(Token::Word(_))) => {}
                (Token::Comma, Some(Token::Word(_))) => {
                    names.push(Vec::new());
                    m += 1;
                    continue;
                }
                _ => break,
            }
            if let Some(name) = names.last_mut() {
                name.push(toks[at].clone());
            }
            m += 1;
        }
        if names.len() < 2 || names.iter().any(Vec::is_empty) {
            n += 1;
            continue;
        }
        let mut tail: Vec<TokenWithLocation> = Vec::new();
        if sig.get(m).is_some_and(|&at| is(&toks[at], "NOWAIT")) {
            tail.push(toks[sig[m]].clone());
            m += 1;
        } else if sig.get(m).is_some_and(|&at| is(&toks[at], "SKIP"))
            && sig.get(m + 1).is_some_and(|&at| is(&toks[at], "LOCKED"))
        {
            tail.extend([toks[sig[m]].clone(), toks[sig[m + 1]].clone()]);
            m += 2;
        }
        let location = toks[f].location;
        let space = TokenWithLocation::new(
            Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
            location.line,
            location.column,
        );
        let mut clauses = Vec::new();
        for name in names {
            let words = [toks[f].clone(), toks[kind].clone(), toks[of].clone()];
            for t in words.into_iter().chain(name).chain(tail.iter().cloned()) {
                clauses.push(t);
                clauses.push(space.clone());
            }
        }
        let end = sig.get(m - 1).map_or(toks.len(), |&at| at + 1);
        toks.splice(f..end, clauses);
        return;
    }
}

/// `NATIONAL CHAR|VARCHAR|CHARACTER` (SQL's national character types,
/// which SQLAlchemy's NCHAR and NVARCHAR write) without `NATIONAL`, which
/// sqlparser does not read: every text column here is utf8mb4 already.
fn national_character_types(toks: &mut Vec<TokenWithLocation>) {
    let is = |t: &Token, w: &str| matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    let mut i = 0;
    while i < toks.len() {
        if is(&toks[i].token, "NATIONAL") {
            let next =
                (i + 1..toks.len()).find(|&j| !matches!(toks[j].token, Token::Whitespace(_)));
            if next.is_some_and(|j| {
                ["CHAR", "VARCHAR", "CHARACTER"]
                    .iter()
                    .any(|w| is(&toks[j].token, w))
            }) {
                toks.remove(i);
                continue;
            }
        }
        i += 1;
    }
}

/// `toks` with a `_binary` introducer before each `X'..'` literal that has
/// none (see [`tokenize`]).
fn introduce_quoted_hex(sql: &str, toks: Vec<TokenWithLocation>) -> Vec<TokenWithLocation> {
    let line_starts = line_starts(sql);
    let mut out: Vec<TokenWithLocation> = Vec::with_capacity(toks.len());
    for t in toks {
        let quoted_hex = matches!(t.token, Token::HexStringLiteral(_))
            && byte_offset(sql, &line_starts, t.location.line, t.location.column)
                .and_then(|at| sql.as_bytes().get(at))
                .is_some_and(|c| c.eq_ignore_ascii_case(&b'x'));
        let introduced = out
            .iter()
            .rev()
            .find(|p| !matches!(p.token, Token::Whitespace(_)))
            .is_some_and(|p| matches!(&p.token, Token::Word(w) if w.quote_style.is_none() && w.value.starts_with('_')));
        if quoted_hex && !introduced {
            out.push(TokenWithLocation::new(
                Token::make_word("_binary", None),
                t.location.line,
                t.location.column,
            ));
            out.push(TokenWithLocation::new(
                Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
                t.location.line,
                t.location.column,
            ));
        }
        out.push(t);
    }
    out
}

/// Rewrites MySQL's `BINARY` operator on a column, parameter, number,
/// function call or parenthesized expression (`name = BINARY col`,
/// `BINARY t.col`, `BINARY ?`, `BINARY LOWER(x)`) as `CAST(.. AS BINARY)`,
/// which it means: sqlparser reads `BINARY` there as the start of a typed
/// string and accepts only `BINARY 'literal'` (kept as is). Only where an
/// expression starts (after an operator, `(`, `,` or a clause keyword), so
/// the type `BINARY(4)` and `VARCHAR(10) BINARY` in column definitions are
/// left alone.
fn binary_operator_to_cast(toks: &mut Vec<TokenWithLocation>) {
    use sqlparser::keywords::Keyword;
    let significant = |toks: &[TokenWithLocation], from: usize| {
        (from..toks.len()).find(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
    };
    let mut i = 0;
    while i < toks.len() {
        let is_binary = matches!(
            &toks[i].token,
            Token::Word(Word {
                keyword: Keyword::BINARY,
                quote_style: None,
                ..
            })
        );
        let before = toks[..i]
            .iter()
            .rev()
            .find(|t| !matches!(t.token, Token::Whitespace(_)))
            .map(|t| &t.token);
        let starts_expression = match before {
            Some(Token::Word(w)) if w.quote_style.is_none() => matches!(
                w.keyword,
                Keyword::SELECT
                    | Keyword::WHERE
                    | Keyword::AND
                    | Keyword::OR
                    | Keyword::NOT
                    | Keyword::ON
                    | Keyword::BY
                    | Keyword::HAVING
                    | Keyword::WHEN
                    | Keyword::THEN
                    | Keyword::ELSE
                    | Keyword::LIKE
                    | Keyword::DISTINCT
                    | Keyword::XOR
            ),
            Some(Token::LParen | Token::Comma) => true,
            Some(t) => is_operator(t),
            _ => false,
        };
        let Some(start) = significant(toks, i + 1).filter(|_| is_binary && starts_expression)
        else {
            i += 1;
            continue;
        };
        // The operand (BINARY binds tighter than any operator): a
        // parameter, a number, a (qualified) column name, a function call
        // (`BINARY LOWER(x)`) or a parenthesized expression.
        let mut end = start;
        let closing = |open: usize| {
            let mut depth = 0usize;
            (open..toks.len()).find(|&k| {
                match toks[k].token {
                    Token::LParen => depth += 1,
                    Token::RParen => depth = depth.saturating_sub(1),
                    _ => {}
                }
                depth == 0
            })
        };
        match &toks[start].token {
            Token::Placeholder(_) | Token::Number(..) => {}
            // `CONVERT(x, BINARY(4))` names the type: a lone number in
            // parentheses is left alone.
            Token::LParen
                if !matches!(
                    (
                        toks.get(start + 1).map(|t| &t.token),
                        toks.get(start + 2).map(|t| &t.token)
                    ),
                    (Some(Token::Number(..)), Some(Token::RParen))
                ) =>
            {
                match closing(start) {
                    Some(close) => end = close,
                    None => {
                        i += 1;
                        continue;
                    }
                }
            }
            Token::Word(_) => {
                while matches!(toks.get(end + 1).map(|t| &t.token), Some(Token::Period))
                    && matches!(toks.get(end + 2).map(|t| &t.token), Some(Token::Word(_)))
                {
                    end += 2;
                }
                if let Some(open) =
                    significant(toks, end + 1).filter(|&k| matches!(toks[k].token, Token::LParen))
                {
                    match closing(open) {
                        Some(close) => end = close,
                        None => {
                            i += 1;
                            continue;
                        }
                    }
                }
            }
            _ => {
                i += 1;
                continue;
            }
        }
        let location = toks[i].location;
        let at = |token: Token| TokenWithLocation { token, location };
        let word = |w: &str| at(Token::make_keyword(w));
        let operand: Vec<TokenWithLocation> = toks[start..=end].to_vec();
        let mut cast = vec![word("CAST"), at(Token::LParen)];
        cast.extend(operand);
        cast.extend([
            at(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)),
            word("AS"),
            at(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)),
            word("BINARY"),
            at(Token::RParen),
        ]);
        let len = cast.len();
        toks.splice(i..=end, cast);
        i += len;
    }
}

/// Byte offset of each line start of `sql`.
pub(super) fn line_starts(sql: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The byte offset in `sql` of a token location (lines and characters
/// within a line count from 1).
pub(super) fn byte_offset(
    sql: &str,
    line_starts: &[usize],
    line: u64,
    column: u64,
) -> Option<usize> {
    let start = *line_starts.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
    let skip = usize::try_from(column).ok()?.checked_sub(1)?;
    match sql[start..].char_indices().nth(skip) {
        Some((i, _)) => Some(start + i),
        None => Some(sql.len()),
    }
}
