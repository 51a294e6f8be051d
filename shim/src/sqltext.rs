//! SQL text to tokens and statements with MySQL's string-literal rules.
//!
//! sqlparser's unescaping turns `'\_'` into `_`, but MySQL keeps the
//! backslash of `\%` and `\_` in a string literal so that `LIKE 'al\_%'`
//! matches a literal underscore. So the shim tokenizes without sqlparser's
//! unescaping and unescapes string literals itself ([`unescape_literal`]),
//! exactly as MySQL does, then hands the tokens to the parser.

use sqlparser::ast::{self, SelectItem, Statement};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithLocation, Tokenizer, Word};

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

/// A parser over `sql` (see [`tokenize`]).
pub fn parser(sql: &str) -> Result<Parser<'static>> {
    Ok(Parser::new(&MySql).with_tokens_with_locations(tokenize(sql)?))
}

/// sqlparser's MySQL dialect with `<<`/`>>` and MySQL's precedence for `XOR`: below the
/// comparisons and AND, above OR (`a > 1 XOR b > 2` is `(a > 1) XOR (b >
/// 2)`). sqlparser binds XOR tighter than `>`, which read that as `a > (1
/// XOR b) > 2`: a wrong answer, not an error. Everything else is
/// [`MySqlDialect`]'s (it reports itself as that dialect, so the parser's
/// MySQL-only rules apply).
#[derive(Debug)]
struct MySql;

/// `<<` and `>>` bind below `+ -` (30) and above `&` (23), as in MySQL;
/// sqlparser's MySQL dialect does not parse them at all.
const SHIFT_PRECEDENCE: u8 = 25;

impl sqlparser::dialect::Dialect for MySql {
    fn dialect(&self) -> std::any::TypeId {
        std::any::TypeId::of::<MySqlDialect>()
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        MySqlDialect {}.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        MySqlDialect {}.is_identifier_part(ch)
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        MySqlDialect {}.is_delimited_identifier_start(ch)
    }
    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        MySqlDialect {}.identifier_quote_style(identifier)
    }
    fn supports_string_literal_backslash_escape(&self) -> bool {
        MySqlDialect {}.supports_string_literal_backslash_escape()
    }
    fn supports_numeric_prefix(&self) -> bool {
        MySqlDialect {}.supports_numeric_prefix()
    }
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &ast::Expr,
        precedence: u8,
    ) -> Option<std::result::Result<ast::Expr, sqlparser::parser::ParserError>> {
        if let Some(in_union) = in_parenthesized_set_operation(parser, expr) {
            return Some(Ok(in_union));
        }
        let shift = match parser.peek_token().token {
            Token::ShiftLeft => Some(ast::BinaryOperator::PGBitwiseShiftLeft),
            Token::ShiftRight => Some(ast::BinaryOperator::PGBitwiseShiftRight),
            _ => None,
        };
        if let Some(op) = shift {
            parser.next_token();
            return Some(
                parser
                    .parse_subexpr(SHIFT_PRECEDENCE)
                    .map(|right| ast::Expr::BinaryOp {
                        left: Box::new(expr.clone()),
                        op,
                        right: Box::new(right),
                    }),
            );
        }
        MySqlDialect {}.parse_infix(parser, expr, precedence)
    }
    fn parse_prefix(
        &self,
        parser: &mut Parser,
    ) -> Option<std::result::Result<ast::Expr, sqlparser::parser::ParserError>> {
        // `((SELECT ..) UNION (SELECT ..))` as a value: Django's Subquery
        // over a combined queryset.
        if parser.peek_nth_token(0).token != Token::LParen
            || parser.peek_nth_token(1).token != Token::LParen
        {
            return None;
        }
        parser
            .maybe_parse(set_operation_in_parens)
            .ok()
            .flatten()
            .map(|q| Ok(ast::Expr::Subquery(q)))
    }
    fn get_next_precedence(
        &self,
        parser: &Parser,
    ) -> Option<std::result::Result<u8, sqlparser::parser::ParserError>> {
        match parser.peek_token().token {
            Token::ShiftLeft | Token::ShiftRight => Some(Ok(SHIFT_PRECEDENCE)),
            _ => None,
        }
    }
    fn parse_statement(
        &self,
        parser: &mut Parser,
    ) -> Option<std::result::Result<Statement, sqlparser::parser::ParserError>> {
        crate::table_options::create_table(parser)
            .or_else(|| MySqlDialect {}.parse_statement(parser))
    }
    fn require_interval_qualifier(&self) -> bool {
        MySqlDialect {}.require_interval_qualifier()
    }
    fn supports_limit_comma(&self) -> bool {
        MySqlDialect {}.supports_limit_comma()
    }
    fn prec_value(&self, prec: sqlparser::dialect::Precedence) -> u8 {
        match prec {
            // Between AND (10) and OR (5).
            sqlparser::dialect::Precedence::Xor => 7,
            other => MySqlDialect {}.prec_value(other),
        }
    }
}

/// `x [NOT] IN ((SELECT ..) UNION (SELECT ..))`, as Django writes `__in`
/// over a combined queryset: sqlparser reads `IN ((` as the start of a
/// list of values and fails at the UNION. None (the parser where it was)
/// for anything else.
fn in_parenthesized_set_operation(parser: &mut Parser, expr: &ast::Expr) -> Option<ast::Expr> {
    use sqlparser::keywords::Keyword;
    let is_keyword = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    let negated = is_keyword(&parser.peek_nth_token(0).token, Keyword::NOT);
    let at = usize::from(negated);
    if !is_keyword(&parser.peek_nth_token(at).token, Keyword::IN)
        || parser.peek_nth_token(at + 1).token != Token::LParen
        || parser.peek_nth_token(at + 2).token != Token::LParen
    {
        return None;
    }
    let subquery = parser
        .maybe_parse(|p| {
            if negated {
                p.expect_keyword(Keyword::NOT)?;
            }
            p.expect_keyword(Keyword::IN)?;
            set_operation_in_parens(p)
        })
        .ok()??;
    Some(ast::Expr::InSubquery {
        expr: Box::new(expr.clone()),
        subquery,
        negated,
    })
}

/// `( query )` where the query is a set operation, else an error (for
/// `maybe_parse` to put the parser back).
fn set_operation_in_parens(
    p: &mut Parser,
) -> std::result::Result<Box<ast::Query>, sqlparser::parser::ParserError> {
    p.expect_token(&Token::LParen)?;
    let q = p.parse_query()?;
    p.expect_token(&Token::RParen)?;
    match *q.body {
        ast::SetExpr::SetOperation { .. } => Ok(q),
        _ => Err(sqlparser::parser::ParserError::ParserError(
            "not a set operation".into(),
        )),
    }
}

/// Every statement in `sql`, long `AND`/`OR` chains rebalanced; nesting
/// past [`ladle_dataflow::MAX_EXPR_DEPTH`] is refused (MySQL's 1436).
pub fn parse_statements(sql: &str) -> Result<Vec<Statement>> {
    let mut parser = parser(sql)?;
    let mut stmts = contain_parser_panic(|| parser.parse_statements())?;
    // Checks every statement (so each too-deep one is made safe to drop).
    let bounded: Vec<_> = stmts.iter_mut().map(ladle_dataflow::bound_depth).collect();
    if bounded.iter().any(|b| b.is_err()) {
        return Err(ShimError::TooDeep);
    }
    Ok(stmts)
}

/// One expression (a stored CHECK, a WHERE of SHOW, ...), bounded as
/// [`parse_statements`] bounds a statement.
pub fn parse_expr(sql: &str) -> Result<ast::Expr> {
    let mut parser = parser(sql)?;
    let mut e = contain_parser_panic(|| parser.parse_expr())?;
    ladle_dataflow::bound_depth(&mut e).map_err(|_| ShimError::TooDeep)?;
    Ok(e)
}

/// [`parse_expr`] of text that must be one expression and nothing after
/// it (`KILL 19 21` is MySQL's 1064 near '21', not a kill of 19).
pub fn parse_whole_expr(sql: &str) -> Result<ast::Expr> {
    let mut parser = parser(sql)?;
    let mut e = contain_parser_panic(|| parser.parse_expr())?;
    let mut rest = String::new();
    loop {
        match parser.next_token().token {
            Token::EOF => break,
            t => rest.push_str(&t.to_string()),
        }
    }
    if !rest.is_empty() {
        return Err(ShimError::Parse(format!(
            "check the manual that corresponds to your MariaDB server version for the right \
             syntax to use near '{rest}' at line 1"
        )));
    }
    ladle_dataflow::bound_depth(&mut e).map_err(|_| ShimError::TooDeep)?;
    Ok(e)
}

thread_local! {
    /// Set while this thread runs the parser (its panics are answered, not reported).
    static PARSING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `parse`, turning a panic inside sqlparser into a syntax error.
///
/// sqlparser 0.52's MySQL dialect unwraps the parse of the operand after
/// `DIV` (`SELECT 1 DIV`, `1 DIV (2`, a long `DIV` chain past its recursion
/// limit all panic); the dialect cannot be wrapped (the parser checks its
/// concrete type), so the panic is contained here, at the one boundary
/// where it can arise, and answered with error 1064 like any syntax error.
/// The process-wide panic hook stays quiet for it, and only for it.
pub fn contain_parser_panic<T>(
    parse: impl FnOnce() -> std::result::Result<T, sqlparser::parser::ParserError>,
) -> Result<T> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !PARSING.with(|p| p.get()) {
                previous(info);
            }
        }));
    });
    PARSING.with(|p| p.set(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(parse));
    PARSING.with(|p| p.set(false));
    match outcome {
        Ok(parsed) => Ok(parsed?),
        Err(_) => Err(ShimError::Parse(
            "the operand after DIV is not a complete expression".into(),
        )),
    }
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

/// Byte offset of each line start of `sql`.
fn line_starts(sql: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The byte offset in `sql` of a token location (lines and characters
/// within a line count from 1).
fn byte_offset(sql: &str, line_starts: &[usize], line: u64, column: u64) -> Option<usize> {
    let start = *line_starts.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
    let skip = usize::try_from(column).ok()?.checked_sub(1)?;
    match sql[start..].char_indices().nth(skip) {
        Some((i, _)) => Some(start + i),
        None => Some(sql.len()),
    }
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

/// Rewrites `node`'s string literals so that its `Display` text, parsed
/// again (as stored view definitions, CHECK constraints and generated
/// columns are), yields the same values: sqlparser prints literals without
/// escaping backslashes, which MySQL's string syntax reads as escapes.
pub fn display_safe<T: ast::VisitMut + Clone>(node: &T) -> T {
    let mut q = node.clone();
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

/// An expression as text that parses back to the same expression (see
/// [`display_safe`]), for definitions stored as text.
pub fn expr_text(e: &ast::Expr) -> String {
    display_safe(e).to_string()
}

/// Statement text from the bytes a client sent (COM_QUERY,
/// COM_STMT_PREPARE), losing nothing. Valid UTF-8 is used as it is. Otherwise
/// the bytes are scanned with MySQL's lexical rules ('...' and "..." strings
/// with backslash escapes and doubled quotes, `...` identifiers, `#`, `-- `
/// and `/* */` comments): a string literal whose bytes (after unescaping)
/// are not UTF-8 becomes the hex literal `X'..'` of those bytes (an
/// introducer before it, `_binary` or `N`, is dropped: a hex literal is
/// binary already), invalid bytes inside a comment become U+FFFD (they mean
/// nothing), and invalid UTF-8 anywhere else is a syntax error (1064).
pub fn from_bytes(
    bytes: &[u8],
) -> std::result::Result<std::borrow::Cow<'_, str>, crate::error::WireError> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Ok(std::borrow::Cow::Borrowed(s));
    }
    let syntax_error = |at: usize| crate::error::WireError {
        code: crate::error::ER_PARSE,
        message: format!(
            "You have an error in your SQL syntax; invalid UTF-8 near '{}'",
            String::from_utf8_lossy(&bytes[at..bytes.len().min(at + 20)])
        ),
    };
    let mut out = String::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                let (end, closed) = string_end(bytes, i, q);
                let raw = &bytes[i..end];
                match std::str::from_utf8(raw) {
                    Ok(s) => out.push_str(s),
                    Err(_) if !closed => return Err(syntax_error(i)),
                    Err(_) => {
                        drop_introducer(&mut out);
                        out.push_str("X'");
                        for b in unescape_bytes(&raw[1..raw.len() - 1], q) {
                            out.push(HEX[usize::from(b >> 4)] as char);
                            out.push(HEX[usize::from(b & 0xF)] as char);
                        }
                        out.push('\'');
                    }
                }
                i = end;
            }
            b'`' => {
                let (end, _) = string_end(bytes, i, b'`');
                out.push_str(std::str::from_utf8(&bytes[i..end]).map_err(|_| syntax_error(i))?);
                i = end;
            }
            b'#' => i = comment(bytes, i, line_end(bytes, i), &mut out),
            b'-' if bytes.get(i + 1) == Some(&b'-')
                && bytes
                    .get(i + 2)
                    .is_none_or(|c| c.is_ascii_whitespace() || c.is_ascii_control()) =>
            {
                i = comment(bytes, i, line_end(bytes, i), &mut out)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = bytes[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(bytes.len(), |p| i + 2 + p + 2);
                i = comment(bytes, i, end, &mut out);
            }
            _ => {
                // Up to the next byte that starts a token handled above.
                let end = bytes[i + 1..]
                    .iter()
                    .position(|b| matches!(b, b'\'' | b'"' | b'`' | b'#' | b'-' | b'/'))
                    .map_or(bytes.len(), |p| i + 1 + p);
                out.push_str(
                    std::str::from_utf8(&bytes[i..end])
                        .map_err(|e| syntax_error(i + e.valid_up_to()))?,
                );
                i = end;
            }
        }
    }
    Ok(std::borrow::Cow::Owned(out))
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The end (exclusive) of the quoted token starting at `start` with quote
/// `q`, and whether it is closed. Backslash escapes apply in strings, not
/// in backtick identifiers; a doubled quote is part of the token.
fn string_end(bytes: &[u8], start: usize, q: u8) -> (usize, bool) {
    let mut i = start + 1;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' && q != b'`' {
            i += 2;
        } else if b == q {
            if bytes.get(i + 1) == Some(&q) {
                i += 2;
            } else {
                return (i + 1, true);
            }
        } else {
            i += 1;
        }
    }
    (bytes.len(), false)
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| from + p)
}

/// Copies the comment `bytes[from..end]`, invalid UTF-8 replaced.
fn comment(bytes: &[u8], from: usize, end: usize, out: &mut String) -> usize {
    out.push_str(&String::from_utf8_lossy(&bytes[from..end]));
    end
}

/// Removes a character set introducer (`_binary`, `_utf8mb4`...) or the `N`
/// of a national string literal from the end of `out`.
fn drop_introducer(out: &mut String) {
    let word_start = out
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
        .last()
        .map(|(i, _)| i);
    if let Some(at) = word_start {
        let word = &out[at..];
        if word.eq_ignore_ascii_case("n") || (word.starts_with('_') && word.len() > 1) {
            out.truncate(at);
            return;
        }
    }
    // `_binary 'x'`: an introducer may be separated by whitespace.
    let trimmed = out
        .trim_end_matches(|c: char| c.is_ascii_whitespace())
        .len();
    if trimmed < out.len() {
        let head = &out[..trimmed];
        let at = head
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
            .last()
            .map(|(i, _)| i);
        if let Some(at) = at {
            if head[at..].starts_with('_') && head.len() - at > 1 {
                out.truncate(at);
            }
        }
    }
}

/// The bytes of a string literal's body, unescaped as MySQL does (see
/// [`unescape_literal`]).
fn unescape_bytes(raw: &[u8], quote: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'\\' && i + 1 < raw.len() {
            let e = raw[i + 1];
            match e {
                b'0' => out.push(0),
                b'b' => out.push(8),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'Z' => out.push(0x1A),
                b'%' | b'_' => out.extend_from_slice(&[b'\\', e]),
                other => out.push(other),
            }
            i += 2;
        } else if b == quote && raw.get(i + 1) == Some(&quote) {
            out.push(quote);
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
    out
}

/// Statements of `sql`, string literals unescaped as MySQL does (see
/// [`crate::sqltext`]).
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    crate::sqltext::parse_statements(sql)
}

/// A select list (`*`, `t.*`, expressions with aliases) given as text,
/// all of it: a RETURNING list the shim split off its statement.
pub(crate) fn parse_select_items(sql: &str) -> Result<Vec<SelectItem>> {
    let mut parser = crate::sqltext::parser(sql)?;
    let mut items = crate::sqltext::contain_parser_panic(|| {
        let items = parser.parse_comma_separated(Parser::parse_select_item)?;
        parser.expect_token(&Token::EOF)?;
        Ok(items)
    })?;
    ladle_dataflow::bound_depth(&mut items).map_err(|_| ShimError::TooDeep)?;
    Ok(items)
}

/// The last part of a (possibly qualified) name.
pub fn last_part(n: &ast::ObjectName) -> String {
    n.0.last().map(|i| i.value.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: &[u8]) -> String {
        from_bytes(bytes).expect("converts").into_owned()
    }

    /// The bytes the hex literal in `sql` stands for.
    fn hex_bytes(sql: &str) -> Vec<u8> {
        let at = sql.find("X'").expect("hex literal") + 2;
        let end = at + sql[at..].find('\'').unwrap();
        (at..end)
            .step_by(2)
            .map(|i| u8::from_str_radix(&sql[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn every_byte_value_round_trips() {
        // Each byte, escaped as a client library escapes it, inside a
        // literal that is invalid UTF-8 (so it is rewritten).
        for b in 0..=255u8 {
            let mut body = vec![0xFF];
            match b {
                0 => body.extend_from_slice(b"\\0"),
                b'\'' | b'\\' => body.extend_from_slice(&[b'\\', b]),
                _ => body.push(b),
            }
            let mut sql = b"SELECT _binary'".to_vec();
            sql.extend_from_slice(&body);
            sql.extend_from_slice(b"' AS v");
            let t = text(&sql);
            assert!(t.starts_with("SELECT X'"), "{t}");
            assert_eq!(hex_bytes(&t), vec![0xFF, b], "byte {b}");
            assert!(parse_statements(&t).is_ok(), "{t}");
        }
        // The whole range in one literal.
        let mut sql = b"INSERT INTO t VALUES ('".to_vec();
        for b in 0..=255u8 {
            match b {
                0 => sql.extend_from_slice(b"\\0"),
                b'\'' => sql.extend_from_slice(b"''"),
                b'\\' => sql.extend_from_slice(b"\\\\"),
                _ => sql.push(b),
            }
        }
        sql.extend_from_slice(b"')");
        let t = text(&sql);
        assert_eq!(hex_bytes(&t), (0..=255u8).collect::<Vec<_>>());
        assert!(t.starts_with("INSERT INTO t VALUES (X'"), "{t}");
    }

    #[test]
    fn escapes_quotes_and_introducers() {
        assert_eq!(text(b"SELECT 'a\\'\x80'"), "SELECT X'612780'");
        assert_eq!(text(b"SELECT \"a\"\"\x80\""), "SELECT X'612280'");
        assert_eq!(text(b"SELECT _binary '\x80\\n\\%'"), "SELECT X'800A5C25'");
        assert_eq!(text(b"SELECT N'\x80', x'80'"), "SELECT X'80', x'80'");
        // Valid literals next to an invalid one are left alone.
        assert_eq!(
            text(b"SELECT 'caf\xc3\xa9', '\xe9'"),
            "SELECT 'caf\u{e9}', X'E9'"
        );
        // A valid text is not touched at all.
        assert!(matches!(
            from_bytes("SELECT 'é'".as_bytes()),
            Ok(std::borrow::Cow::Borrowed(_))
        ));
    }

    #[test]
    fn quotes_inside_identifiers_and_comments_do_not_open_strings() {
        assert_eq!(
            text(b"SELECT `it's` FROM t /* don't */ WHERE a = '\xff' -- it's\n"),
            "SELECT `it's` FROM t /* don't */ WHERE a = X'FF' -- it's\n"
        );
        assert_eq!(
            text(b"SELECT 1 # \xff'\nFROM t"),
            "SELECT 1 # \u{fffd}'\nFROM t"
        );
        assert_eq!(text(b"SELECT 2-1, '\xff'"), "SELECT 2-1, X'FF'");
    }

    #[test]
    fn invalid_utf8_outside_literals_is_a_syntax_error() {
        for bad in [
            &b"SELECT \xff"[..],
            b"SELECT `a\xff`",
            b"SELECT '\xff",
            b"\x80",
        ] {
            let e = from_bytes(bad).unwrap_err();
            assert_eq!(e.code.errno, 1064, "{bad:?}");
        }
    }

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
    }

    #[test]
    fn quoted_hex_literals_are_binary_strings() {
        let text = |sql: &str| -> String {
            tokenize(sql)
                .unwrap()
                .into_iter()
                .map(|t| t.token.to_string())
                .collect()
        };
        assert_eq!(text("SELECT X'41' + 0x41"), "SELECT _binary X'41' + X'41'");
        assert_eq!(text("SELECT\nx'00ff'"), "SELECT\n_binary X'00ff'");
        // Already introduced (also the text of a view read back).
        assert_eq!(text("SELECT _binary X'41'"), "SELECT _binary X'41'");
        assert_eq!(text("SELECT _utf8mb4 x'41'"), "SELECT _utf8mb4 X'41'");
        // Result columns are still named as the literal was written.
        let stmts = parse_statements("SELECT X'41' + 1, CONCAT(x'42', 'c')").unwrap();
        let [Statement::Query(q)] = stmts.as_slice() else {
            panic!("one query: {stmts:?}");
        };
        let ast::SetExpr::Select(sel) = q.body.as_ref() else {
            panic!("a SELECT");
        };
        let names: Vec<String> = sel
            .projection
            .iter()
            .map(|item| match item {
                ast::SelectItem::UnnamedExpr(e) => ladle_dataflow::expr_column_name(e),
                other => other.to_string(),
            })
            .collect();
        assert_eq!(names, ["X'41' + 1", "CONCAT(X'42', 'c')"]);
    }

    #[test]
    fn versioned_comments_run_up_to_the_announced_version() {
        let open = |s| open_versioned_comments(s).into_owned();
        assert_eq!(open("/*!40101 SET NAMES utf8 */;"), "  SET NAMES utf8  ;");
        assert_eq!(open("SELECT 1 /*! + 1 */"), "SELECT 1   + 1  ");
        assert_eq!(open("/*!800341 SET a=1 */"), "/*!800341 SET a=1 */");
        assert_eq!(open("/*!90000 x */ SELECT 1"), "/*!90000 x */ SELECT 1");
        assert_eq!(open("/*M!100616 SET a=1 */"), "/*M!100616 SET a=1 */");
        assert_eq!(open("SELECT '/*!4 */', `/*!`"), "SELECT '/*!4 */', `/*!`");
        assert_eq!(
            open("SELECT 1 -- /*!40101 x */"),
            "SELECT 1 -- /*!40101 x */"
        );
        assert_eq!(open("/*!50503 SET @a='*/' */"), "  SET @a='*/'  ");
        assert_eq!(split_statements("SELECT 'open"), ["SELECT 'open"]);
    }

    /// The statement `sql` parses to, printed.
    fn parsed(sql: &str) -> String {
        parse_statements(sql).expect("parses")[0].to_string()
    }

    #[test]
    fn binary_operator_on_columns_and_parameters_is_a_cast() {
        assert_eq!(
            parsed("SELECT id FROM u WHERE name = BINARY t.name"),
            "SELECT id FROM u WHERE name = CAST(t.name AS BINARY)"
        );
        assert_eq!(
            parsed("SELECT id FROM u WHERE BINARY name = ? AND x = BINARY ?"),
            "SELECT id FROM u WHERE CAST(name AS BINARY) = ? AND x = CAST(? AS BINARY)"
        );
        // Literals, casts and column types are not touched.
        assert_eq!(
            parsed("SELECT BINARY 'a' = 'A', CAST(x AS BINARY)"),
            "SELECT BINARY 'a' = 'A', CAST(x AS BINARY)"
        );
        let create = "CREATE TABLE t (b BINARY(4), c BINARY NOT NULL, d BINARY)";
        assert!(!parsed(create).contains("CAST"));
        // Any operand: a function call, a parenthesized expression, a number.
        assert_eq!(
            parsed("SELECT BINARY LOWER(a) = 'x', BINARY (a || 'b'), 1 + BINARY 2"),
            "SELECT CAST(LOWER(a) AS BINARY) = 'x', CAST((a || 'b') AS BINARY), 1 + CAST(2 AS BINARY)"
        );
        assert_eq!(
            parsed("SELECT BINARY CONCAT(a, UPPER(b)) FROM t WHERE BINARY t.f(x) = 1"),
            "SELECT CAST(CONCAT(a, UPPER(b)) AS BINARY) FROM t WHERE CAST(t.f(x) AS BINARY) = 1"
        );
        assert!(!parsed("SELECT CONVERT(a, BINARY(4))").contains("CAST"));
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
