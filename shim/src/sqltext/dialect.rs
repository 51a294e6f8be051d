//! The SQL dialect the parser reads: sqlparser's MySQL dialect with
//! MySQL's shift operators, XOR precedence and set operations in
//! parentheses.

use sqlparser::ast::{self, Statement};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

/// sqlparser's MySQL dialect with `<<`/`>>` and MySQL's precedence for `XOR`: below the
/// comparisons and AND, above OR (`a > 1 XOR b > 2` is `(a > 1) XOR (b >
/// 2)`). sqlparser binds XOR tighter than `>`, which read that as `a > (1
/// XOR b) > 2`: a wrong answer, not an error. Everything else is
/// [`MySqlDialect`]'s (it reports itself as that dialect, so the parser's
/// MySQL-only rules apply).
#[derive(Debug)]
pub(super) struct MySql;

/// `<<` and `>>` bind below `+ -` (30) and above `&` (23), as in MySQL;
/// sqlparser's MySQL dialect does not parse them at all.
const SHIFT_PRECEDENCE: u8 = 25;

/// `col->'$.p'` and `col->>'$.p'` bind tighter than any other operator,
/// as in MySQL: `data->'$.t' = 'y'` compares the extracted value
/// (sqlparser's own precedence for them, below `=`, read `data -> ('$.t'
/// = 'y')`: a wrong answer, not an error).
const ARROW_PRECEDENCE: u8 = 45;

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
    /// `GROUP BY ROLLUP (...)`: what `WITH ROLLUP` is given to the parser
    /// as (see `with_rollup.rs`).
    fn supports_group_by_expr(&self) -> bool {
        true
    }
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &ast::Expr,
        precedence: u8,
    ) -> Option<std::result::Result<ast::Expr, sqlparser::parser::ParserError>> {
        match in_parenthesized_set_operation(parser, expr) {
            Ok(Some(in_union)) => return Some(Ok(in_union)),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        let shift = match parser.peek_token().token {
            Token::ShiftLeft => Some(ast::BinaryOperator::PGBitwiseShiftLeft),
            Token::ShiftRight => Some(ast::BinaryOperator::PGBitwiseShiftRight),
            _ => None,
        };
        // `DIV` and `MOD` bind as `*` and `/`, left to right: `7 DIV 2 * 3`
        // is 9, `7 DIV 2 = 3` true. sqlparser's MySQL dialect parsed a whole
        // expression after DIV (`7 DIV (2 * 3)`, `7 DIV (2 = 3)`: wrong
        // answers, not errors; `8 DIV 2 DIV 2` a syntax error), and no
        // `MOD` operator.
        let word = match &parser.peek_token().token {
            Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
            _ => None,
        };
        let op = match word {
            Some(Keyword::DIV) => Some(ast::BinaryOperator::MyIntegerDivide),
            Some(Keyword::MOD) => Some(ast::BinaryOperator::Modulo),
            _ => None,
        };
        if (op.is_some() || shift.is_some()) && too_deep_on_the_left(expr) {
            return Some(Err(sqlparser::parser::ParserError::RecursionLimitExceeded));
        }
        if let Some(op) = op {
            parser.next_token();
            let prec = self.prec_value(sqlparser::dialect::Precedence::MulDivModOp);
            return Some(parser.parse_subexpr(prec).map(|right| ast::Expr::BinaryOp {
                left: Box::new(expr.clone()),
                op,
                right: Box::new(right),
            }));
        }
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
            || !query_after_parentheses(parser)
        {
            return None;
        }
        // Too deep is 1436 here, not a reason to read the text another way.
        match parser.maybe_parse(set_operation_in_parens) {
            Ok(q) => q.map(|q| Ok(ast::Expr::Subquery(q))),
            Err(e) => Some(Err(e)),
        }
    }
    fn get_next_precedence(
        &self,
        parser: &Parser,
    ) -> Option<std::result::Result<u8, sqlparser::parser::ParserError>> {
        match parser.peek_token().token {
            Token::ShiftLeft | Token::ShiftRight => Some(Ok(SHIFT_PRECEDENCE)),
            Token::Arrow | Token::LongArrow => Some(Ok(ARROW_PRECEDENCE)),
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::MOD => Some(Ok(
                self.prec_value(sqlparser::dialect::Precedence::MulDivModOp),
            )),
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

/// Whether `expr`'s chain of left operands is past
/// [`ladle_dataflow::MAX_EXPR_DEPTH`]. An operator this dialect parses
/// gets its left operand by reference and must copy it, so a chain of n
/// DIVs would copy O(n^2) nodes (a 2,400-term chain: seconds) before the
/// depth bound refuses the statement: it is refused here, before the copy.
fn too_deep_on_the_left(mut expr: &ast::Expr) -> bool {
    for _ in 0..ladle_dataflow::MAX_EXPR_DEPTH {
        match expr {
            ast::Expr::BinaryOp { left, .. } => expr = left,
            _ => return false,
        }
    }
    true
}

/// `x [NOT] IN ((SELECT ..) UNION (SELECT ..))`, as Django writes `__in`
/// over a combined queryset: sqlparser reads `IN ((` as the start of a
/// list of values and fails at the UNION. None (the parser where it was)
/// for anything else.
/// Too deep (sqlparser's recursion limit) is an error, not None.
fn in_parenthesized_set_operation(
    parser: &mut Parser,
    expr: &ast::Expr,
) -> std::result::Result<Option<ast::Expr>, sqlparser::parser::ParserError> {
    use sqlparser::keywords::Keyword;
    let is_keyword = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    let negated = is_keyword(&parser.peek_nth_token(0).token, Keyword::NOT);
    let at = usize::from(negated);
    if !is_keyword(&parser.peek_nth_token(at).token, Keyword::IN)
        || parser.peek_nth_token(at + 1).token != Token::LParen
        || parser.peek_nth_token(at + 2).token != Token::LParen
    {
        return Ok(None);
    }
    let subquery = parser.maybe_parse(|p| {
        if negated {
            p.expect_keyword(Keyword::NOT)?;
        }
        p.expect_keyword(Keyword::IN)?;
        set_operation_in_parens(p)
    })?;
    Ok(subquery.map(|subquery| ast::Expr::InSubquery {
        expr: Box::new(expr.clone()),
        subquery,
        negated,
    }))
}

/// Whether a query (`SELECT`, `WITH`, `VALUES`, `TABLE`) starts after the
/// parentheses the parser is at: only then can they hold a set operation.
/// Without it, each `((` of `((((1))))` parsed everything inside as a query
/// first (quadratic in the nesting, each try as deep as the nesting).
/// Stepped over and back (`peek_nth_token(n)` walks n tokens each time:
/// 4,000 parentheses took 85 s), and no further than the parser could
/// recurse (past that it refuses the text either way).
fn query_after_parentheses(parser: &mut Parser) -> bool {
    let mut taken = 1;
    while parser.next_token().token == Token::LParen && taken <= ladle_dataflow::MAX_PARSE_DEPTH {
        taken += 1;
    }
    parser.prev_token();
    let query = matches!(&parser.peek_token().token, Token::Word(w)
        if matches!(w.keyword, Keyword::SELECT | Keyword::WITH | Keyword::VALUES | Keyword::TABLE));
    for _ in 1..taken {
        parser.prev_token();
    }
    query
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
