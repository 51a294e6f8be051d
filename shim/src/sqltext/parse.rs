//! Statements and expressions from SQL text: the parser over the tokens
//! ([`super::tokenize`]) in Ladle's dialect, nesting bounded, sqlparser's
//! panics contained.

use sqlparser::ast::{self, SelectItem, Statement};
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithLocation};

use super::dialect::MySql;
use super::index_hints::strip_index_hints;
use super::straight_join::read_straight_join;
use super::tokenize::tokenize;
use super::with_rollup::read_with_rollup;
use crate::error::{Result, ShimError};

/// A parser over `sql` (see [`tokenize`]), index hints left out (see
/// [`strip_index_hints`]), `STRAIGHT_JOIN` read as MySQL does (see
/// [`read_straight_join`]) and `WITH ROLLUP` as a rollup list (see
/// [`read_with_rollup`]).
pub fn parser(sql: &str) -> Result<Parser<'static>> {
    let toks = read_with_rollup(read_straight_join(strip_index_hints(tokenize(sql)?)));
    refuse_nested_selects(&toks)?;
    Ok(Parser::new(&MySql)
        .with_recursion_limit(ladle_dataflow::MAX_PARSE_DEPTH)
        .with_tokens_with_locations(toks))
}

/// How deep queries may nest in parentheses (`(SELECT (SELECT ...))`,
/// derived tables, `EXISTS (SELECT ...)`); past it, MariaDB's error 1473
/// at MariaDB's bound.
pub const MAX_SELECT_NESTING: usize = 63;

/// Refuses text whose queries nest in parentheses deeper than
/// [`MAX_SELECT_NESTING`] (MariaDB's 1473), before the parser recurses
/// through them. A nested query is the parser's deepest recursion per
/// level (about 110 KiB of stack in a debug build): within its recursion
/// limit ([`ladle_dataflow::MAX_PARSE_DEPTH`]), 700 nested derived tables
/// overflowed a statement thread's stack and aborted the server.
fn refuse_nested_selects(toks: &[TokenWithLocation]) -> Result<()> {
    let mut toks = toks
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .peekable();
    // Per open parenthesis, whether a query starts inside it.
    let mut open: Vec<bool> = Vec::new();
    let mut queries = 0usize;
    while let Some(t) = toks.next() {
        match t {
            Token::LParen => {
                let query = matches!(toks.peek(), Some(Token::Word(w))
                    if matches!(w.keyword, Keyword::SELECT | Keyword::WITH));
                queries += usize::from(query);
                if queries > MAX_SELECT_NESTING {
                    return Err(ShimError::TooManyNestedSelects);
                }
                open.push(query);
            }
            Token::RParen => queries -= usize::from(open.pop().unwrap_or(false)),
            _ => {}
        }
    }
    Ok(())
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
    refuse_other_dialects(&stmts)?;
    Ok(stmts)
}

/// Forms sqlparser reads for other dialects that MySQL's grammar lacks,
/// each MySQL's 1064 near the text given: BigQuery's `WINDOW w2 AS w1`
/// (MySQL defines a window only in parentheses, `WINDOW w2 AS (w1)`),
/// used or not, and PostgreSQL's empty grouping `GROUP BY ()` (the
/// dialect reads GROUP BY forms for `WITH ROLLUP`, see `with_rollup.rs`).
fn refuse_other_dialects(stmts: &[Statement]) -> Result<()> {
    use sqlparser::ast::{
        GroupByExpr, NamedWindowDefinition, NamedWindowExpr, SetExpr, Visit, Visitor,
    };
    use std::ops::ControlFlow;
    fn bare(body: &SetExpr) -> Option<String> {
        match body {
            SetExpr::Select(select) => {
                let empty_group = matches!(&select.group_by, GroupByExpr::Expressions(g, _)
                    if g.iter().any(|e| matches!(e, ast::Expr::Tuple(t) if t.is_empty())));
                if empty_group {
                    return Some(")".into());
                }
                select
                    .named_window
                    .iter()
                    .find_map(|NamedWindowDefinition(_, expr)| match expr {
                        NamedWindowExpr::NamedWindow(name) => Some(name.value.clone()),
                        NamedWindowExpr::WindowSpec(_) => None,
                    })
            }
            SetExpr::SetOperation { left, right, .. } => bare(left).or_else(|| bare(right)),
            _ => None,
        }
    }
    struct Finder;
    impl Visitor for Finder {
        type Break = String;
        fn pre_visit_query(&mut self, q: &ast::Query) -> ControlFlow<String> {
            match bare(&q.body) {
                Some(name) => ControlFlow::Break(name),
                None => ControlFlow::Continue(()),
            }
        }
    }
    for stmt in stmts {
        if let ControlFlow::Break(name) = stmt.visit(&mut Finder) {
            return Err(ShimError::Parse(format!(
                "check the manual that corresponds to your MariaDB server version for the \
                 right syntax to use near '{name}' at line 1"
            )));
        }
    }
    Ok(())
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
/// limit all panic). Ladle's dialect now parses `DIV` itself (see
/// `dialect.rs`), so that path is not taken; the containment stays as the
/// net for any other panic of the parser, at the one boundary where it can
/// arise, answered with error 1064 like any syntax error.
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

/// Statements of `sql`, string literals unescaped as MySQL does (see
/// [`crate::sqltext`]).
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    parse_statements(sql)
}

/// A select list (`*`, `t.*`, expressions with aliases) given as text,
/// all of it: a RETURNING list the shim split off its statement.
pub(crate) fn parse_select_items(sql: &str) -> Result<Vec<SelectItem>> {
    let mut parser = parser(sql)?;
    let mut items = contain_parser_panic(|| {
        let items = parser.parse_comma_separated(Parser::parse_select_item)?;
        parser.expect_token(&Token::EOF)?;
        Ok(items)
    })?;
    ladle_dataflow::bound_depth(&mut items).map_err(|_| ShimError::TooDeep)?;
    Ok(items)
}

/// MySQL's aggregate functions (outside an OVER clause).
const AGGREGATE_FUNCTIONS: [&str; 18] = [
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "GROUP_CONCAT",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
];

/// Whether the function `name` (its last part, any case) is an aggregate.
pub fn is_aggregate_function(name: &ast::ObjectName) -> bool {
    let name = last_part(name);
    AGGREGATE_FUNCTIONS
        .iter()
        .any(|a| name.eq_ignore_ascii_case(a))
}

/// The last part of a (possibly qualified) name.
pub fn last_part(n: &ast::ObjectName) -> String {
    n.0.last().map(|i| i.value.clone()).unwrap_or_default()
}
