//! Expression depth: long `AND`/`OR` chains are rebalanced and anything
//! still nested deeper than [`MAX_EXPR_DEPTH`] is refused, before any
//! recursive pass (normalize, plan, compile, evaluate, print, drop) sees it.
//!
//! sqlparser parses a left-associative chain (`a OR b OR c ...`, `1 + 1 +
//! ...`) in a loop, but builds a left-deep tree: 3,000 `OR` terms nest 3,000
//! levels, and every pass over the tree then recurses that deep. ORMs send
//! such chains, so `AND`/`OR` chains (associative and evaluated left to right
//! either way) are rebuilt as balanced trees, nesting `log2(n)` levels with
//! the operands in the same order and the same printed text. Other chains
//! (`+`, `||`, ...) are not reassociated (that could change overflow and
//! rounding); past [`MAX_EXPR_DEPTH`] levels the statement gets MySQL's error
//! 1436 (MariaDB refuses a chain of 1,000 `+` the same way), and the tree is
//! taken apart without recursion so that even dropping it is safe.
//!
//! Every thread that plans or evaluates expressions runs on a stack of at
//! least [`THREAD_STACK_BYTES`], which fits [`MAX_EXPR_DEPTH`] levels of the
//! deepest pass with room to spare (in debug builds too).

use std::ops::ControlFlow;

use sqlparser::ast::{self, BinaryOperator, Expr, VisitMut, VisitorMut};

/// The deepest expression nesting accepted (after rebalancing).
pub const MAX_EXPR_DEPTH: usize = 512;

/// How deep sqlparser may recurse (its own count: a parenthesis or a
/// function call one level, a subquery two or three) before it refuses
/// the text with 1436. Its default of 50 refused 48 nested parentheses
/// and 48 nested function calls (MariaDB takes 592 nested calls and
/// thousands of parentheses): this lets everything [`MAX_EXPR_DEPTH`]
/// allows through. The parser's recursion is the deepest of all per
/// level (debug build: about 52 KiB per nested function call, 28 KiB per
/// parenthesis), so this is kept near [`MAX_EXPR_DEPTH`]: 640 nested
/// calls take about 33 MiB of [`THREAD_STACK_BYTES`] (1,024 took 54).
pub const MAX_PARSE_DEPTH: usize = MAX_EXPR_DEPTH + MAX_EXPR_DEPTH / 4;

/// The stack of every thread that plans or evaluates expressions (tokio's
/// workers and blocking threads, the propagation thread and the domain
/// pool). Reserved address space; pages are touched only when used.
pub const THREAD_STACK_BYTES: usize = 64 << 20;

/// The deepest nesting of set operations accepted (`SELECT ... UNION ALL
/// SELECT ...` n times nests n - 1 levels; a parenthesized query one more).
/// sqlparser reads a chain in a loop but builds it left-deep, and the passes
/// over a query (visits, clones, planning) recurse through it: 20,000
/// `UNION ALL`s overflowed a worker's stack in a clone (the server
/// aborted). The chain is not reassociated (UNION and UNION ALL mixed do
/// not associate); past this it gets MySQL's 1436, as a too deep
/// expression does.
pub const MAX_SET_DEPTH: usize = 4096;

/// Chains shorter than this keep the parser's shape.
const REBALANCE_FROM: usize = 16;

/// Statements of `sql` in sqlparser's MySQL dialect, its recursion bounded
/// by [`MAX_PARSE_DEPTH`] as the shim's parser is: text the shim accepted
/// (a stored view, a rewrite of a parsed expression) parses again.
pub fn parse_sql(sql: &str) -> Result<Vec<ast::Statement>, sqlparser::parser::ParserError> {
    sqlparser::parser::Parser::new(&sqlparser::dialect::MySqlDialect {})
        .with_recursion_limit(MAX_PARSE_DEPTH)
        .try_with_sql(sql)?
        .parse_statements()
}

/// A statement nested too deeply to handle (MySQL's error 1436).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep;

/// Rebalances the long `AND`/`OR` chains of `node` (a statement, query or
/// expression) and checks its expression depth. On `Err` the too-deep parts
/// have been replaced by `NULL`, so `node` is safe to drop.
pub fn bound_depth<T: VisitMut>(node: &mut T) -> Result<(), TooDeep> {
    let mut v = Bounder {
        depth: 0,
        too_deep: false,
    };
    let _ = node.visit(&mut v);
    if v.too_deep {
        Err(TooDeep)
    } else {
        Ok(())
    }
}

struct Bounder {
    depth: usize,
    too_deep: bool,
}

impl VisitorMut for Bounder {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        rebalance(e);
        self.depth += 1;
        if self.depth > MAX_EXPR_DEPTH {
            self.too_deep = true;
            dismantle(std::mem::replace(e, Expr::Value(ast::Value::Null)));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _e: &mut Expr) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    /// Before the visit descends into the query's body (recursively).
    fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
        if set_depth(&q.body) > MAX_SET_DEPTH {
            self.too_deep = true;
            let empty = ast::SetExpr::Values(ast::Values {
                explicit_row: false,
                rows: Vec::new(),
            });
            dismantle_set(std::mem::replace(&mut *q.body, empty));
        }
        ControlFlow::Continue(())
    }
}

/// How deep set operations and parenthesized queries nest in `body`,
/// measured without recursion.
fn set_depth(body: &ast::SetExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(body, 0)];
    while let Some((n, d)) = stack.pop() {
        deepest = deepest.max(d);
        match n {
            ast::SetExpr::SetOperation { left, right, .. } => {
                stack.push((left, d + 1));
                stack.push((right, d + 1));
            }
            ast::SetExpr::Query(q) => stack.push((&q.body, d + 1)),
            _ => {}
        }
    }
    deepest
}

/// Drops a set expression without recursing through its chain; each
/// SELECT's own expressions are bounded (and so safe to drop) first.
fn dismantle_set(body: ast::SetExpr) {
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        match n {
            ast::SetExpr::SetOperation { left, right, .. } => {
                stack.push(*left);
                stack.push(*right);
            }
            ast::SetExpr::Query(q) => stack.push(*q.body),
            ast::SetExpr::Select(mut s) => {
                let _ = bound_depth(&mut *s);
            }
            other => drop(other),
        }
    }
}

fn is_chain_op(op: &BinaryOperator) -> bool {
    matches!(op, BinaryOperator::And | BinaryOperator::Or)
}

/// If `e` is a left-deep chain (as parsed) of one associative logical
/// operator at least [`REBALANCE_FROM`] long, rebuilds it balanced, operands
/// in order. A balanced tree's spine is short, so it is left as it is.
fn rebalance(e: &mut Expr) {
    let Expr::BinaryOp { op, .. } = e else {
        return;
    };
    if !is_chain_op(op) {
        return;
    }
    let op = op.clone();
    let mut spine = 1;
    let mut at = &*e;
    while let Expr::BinaryOp { left, op: o, .. } = at {
        if *o != op {
            break;
        }
        spine += 1;
        at = left;
    }
    if spine < REBALANCE_FROM {
        return;
    }
    // Operands in order, without recursion (a nested expression in
    // parentheses is an operand: its own chain is handled when visited).
    let mut operands = Vec::new();
    let mut stack = vec![std::mem::replace(e, Expr::Value(ast::Value::Null))];
    while let Some(n) = stack.pop() {
        match n {
            Expr::BinaryOp { left, op: o, right } if o == op => {
                stack.push(*right);
                stack.push(*left);
            }
            other => operands.push(other),
        }
    }
    *e = balanced(operands, &op);
}

/// A balanced tree of `op` over `operands` (at least one), operands in
/// order: `log2(n)` levels deep.
pub(crate) fn balanced(mut operands: Vec<Expr>, op: &BinaryOperator) -> Expr {
    if operands.len() == 1 {
        return operands.pop().unwrap_or(Expr::Value(ast::Value::Null));
    }
    let right = operands.split_off(operands.len() / 2);
    Expr::BinaryOp {
        left: Box::new(balanced(operands, op)),
        op: op.clone(),
        right: Box::new(balanced(right, op)),
    }
}

/// Drops `e` without recursing through the shapes a parser loop can nest
/// arbitrarily deep (binary and postfix operators).
fn dismantle(e: Expr) {
    let mut stack = vec![e];
    while let Some(n) = stack.pop() {
        match n {
            Expr::BinaryOp { left, right, .. } => {
                stack.push(*left);
                stack.push(*right);
            }
            Expr::IsNull(x)
            | Expr::IsNotNull(x)
            | Expr::IsTrue(x)
            | Expr::IsNotTrue(x)
            | Expr::IsFalse(x)
            | Expr::IsNotFalse(x)
            | Expr::IsUnknown(x)
            | Expr::IsNotUnknown(x)
            | Expr::Nested(x)
            | Expr::UnaryOp { expr: x, .. }
            | Expr::Collate { expr: x, .. }
            | Expr::Cast { expr: x, .. } => stack.push(*x),
            Expr::InList { expr, list, .. } => {
                stack.push(*expr);
                stack.extend(list);
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                stack.push(*expr);
                stack.push(*low);
                stack.push(*high);
            }
            Expr::Like { expr, pattern, .. }
            | Expr::ILike { expr, pattern, .. }
            | Expr::SimilarTo { expr, pattern, .. }
            | Expr::RLike { expr, pattern, .. } => {
                stack.push(*expr);
                stack.push(*pattern);
            }
            Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
                stack.push(*a);
                stack.push(*b);
            }
            Expr::AnyOp { left, right, .. } | Expr::AllOp { left, right, .. } => {
                stack.push(*left);
                stack.push(*right);
            }
            other => drop(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn parse(sql: &str) -> ast::Statement {
        Parser::parse_sql(&MySqlDialect {}, sql)
            .expect("parse")
            .remove(0)
    }

    fn depth(e: &Expr) -> usize {
        match e {
            Expr::BinaryOp { left, right, .. } => 1 + depth(left).max(depth(right)),
            Expr::Nested(x) => 1 + depth(x),
            _ => 1,
        }
    }

    fn where_clause(s: &ast::Statement) -> &Expr {
        let ast::Statement::Query(q) = s else {
            panic!("not a query")
        };
        let ast::SetExpr::Select(sel) = &*q.body else {
            panic!("not a select")
        };
        sel.selection.as_ref().expect("WHERE")
    }

    #[test]
    fn long_or_chain_is_balanced_with_the_same_text() {
        let ors: Vec<String> = (0..3000).map(|i| format!("id = {i}")).collect();
        let sql = format!("SELECT id FROM t WHERE {}", ors.join(" OR "));
        let mut s = parse(&sql);
        bound_depth(&mut s).expect("within bounds");
        assert!(depth(where_clause(&s)) <= 16, "{}", depth(where_clause(&s)));
        assert_eq!(s.to_string(), sql);
    }

    #[test]
    fn mixed_and_or_keeps_precedence() {
        let terms: Vec<String> = (0..40).map(|i| format!("a = {i} AND b = {i}")).collect();
        let sql = format!("SELECT 1 FROM t WHERE {}", terms.join(" OR "));
        let mut s = parse(&sql);
        bound_depth(&mut s).expect("within bounds");
        assert_eq!(s.to_string(), sql);
        let Expr::BinaryOp { op, .. } = where_clause(&s) else {
            panic!("not an OR")
        };
        assert_eq!(*op, BinaryOperator::Or);
    }

    #[test]
    fn short_chains_keep_their_shape() {
        let sql = "SELECT 1 FROM t WHERE a = 1 OR b = 2 OR c = 3";
        let mut s = parse(sql);
        let before = s.clone();
        bound_depth(&mut s).expect("within bounds");
        assert_eq!(s, before);
    }

    #[test]
    fn a_long_union_chain_is_refused_and_drops_safely() {
        let chain = |n: usize| {
            (0..n)
                .map(|i| format!("SELECT {i}"))
                .collect::<Vec<_>>()
                .join(" UNION ALL ")
        };
        // 100,000 levels: dropping or visiting this recursively would
        // overflow a 2 MiB test thread's stack.
        let mut s = parse(&format!("SELECT COUNT(*) FROM ({}) d", chain(100_000)));
        assert_eq!(bound_depth(&mut s), Err(TooDeep));
        drop(s);
        let mut s = parse(&chain(100_000));
        assert_eq!(bound_depth(&mut s), Err(TooDeep));
        drop(s);
        // At the bound: accepted (visited on a statement thread's stack).
        let ok = chain(MAX_SET_DEPTH + 1);
        let within = std::thread::Builder::new()
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || bound_depth(&mut parse(&ok)))
            .expect("spawn")
            .join()
            .expect("join");
        assert_eq!(within, Ok(()));
    }

    #[test]
    fn deep_arithmetic_is_refused_and_drops_safely() {
        // 200,000 levels: dropping this tree recursively would overflow a
        // 2 MiB test thread's stack.
        let sql = format!("SELECT 1{}", "+1".repeat(200_000));
        let mut s = parse(&sql);
        assert_eq!(bound_depth(&mut s), Err(TooDeep));
        drop(s);
        let ok = format!("SELECT 1{}", "+1".repeat(MAX_EXPR_DEPTH - 10));
        assert_eq!(bound_depth(&mut parse(&ok)), Ok(()));
    }
}
