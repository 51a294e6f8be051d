//! Small questions about, and builders of, SQL AST nodes: conjuncts,
//! placeholders, subqueries, bare columns, LIMIT counts.

use std::ops::ControlFlow;

use ladle_common::Value;
use sqlparser::ast;

use super::expr::{literal, placeholder_slot, unsupported, Scope};
use crate::plan::Count;
use crate::{DataflowError, Result};

/// `e` as an ORDER BY item with no direction of its own (ascending).
pub(super) fn order_by_item(e: &ast::Expr) -> ast::OrderByExpr {
    ast::OrderByExpr {
        expr: e.clone(),
        asc: None,
        nulls_first: None,
        with_fill: None,
    }
}

pub(super) fn split_conjuncts(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            split_conjuncts(left, out);
            split_conjuncts(right, out);
        }
        ast::Expr::Nested(x)
            if matches!(
                **x,
                ast::Expr::BinaryOp {
                    op: ast::BinaryOperator::And,
                    ..
                }
            ) =>
        {
            split_conjuncts(x, out)
        }
        other => out.push(other.clone()),
    }
}

pub(super) fn has_placeholder(e: &ast::Expr) -> bool {
    let mut found = false;
    fn walk(e: &ast::Expr, found: &mut bool) {
        if let ast::Expr::Value(ast::Value::Placeholder(_)) = e {
            *found = true;
        }
        super::expr::visit_children(e, &mut |c| walk(c, found));
    }
    walk(e, &mut found);
    found
}

/// Whether every column `e` names is qualified (`t.col`).
pub(super) fn columns_qualified(e: &ast::Expr) -> bool {
    !ast::visit_expressions(e, |x| {
        if matches!(x, ast::Expr::Identifier(_)) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// Whether `e` has a placeholder anywhere, subqueries included.
pub(super) fn has_placeholder_deep(e: &ast::Expr) -> bool {
    ast::visit_expressions(e, |x| {
        if let ast::Expr::Value(ast::Value::Placeholder(_)) = x {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

pub(super) fn has_subquery(e: &ast::Expr) -> bool {
    let mut found = false;
    fn walk(e: &ast::Expr, found: &mut bool) {
        if matches!(
            e,
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. }
        ) {
            *found = true;
        }
        super::expr::visit_children(e, &mut |c| walk(c, found));
    }
    walk(e, &mut found);
    found
}

pub(super) fn as_column(e: &ast::Expr) -> Option<&[ast::Ident]> {
    match e {
        ast::Expr::Identifier(i) => Some(std::slice::from_ref(i)),
        ast::Expr::CompoundIdentifier(ids) => Some(ids),
        ast::Expr::Nested(x) => as_column(x),
        _ => None,
    }
}

pub(super) fn as_slot(e: &ast::Expr) -> Option<usize> {
    match e {
        ast::Expr::Value(ast::Value::Placeholder(p)) => placeholder_slot(p),
        _ => None,
    }
}

pub(super) fn count_of(e: &ast::Expr) -> Result<Count> {
    match e {
        ast::Expr::Value(ast::Value::Placeholder(p)) => placeholder_slot(p)
            .map(Count::Slot)
            .ok_or_else(|| unsupported("placeholder")),
        ast::Expr::Value(v) => match literal(v)? {
            Value::Int(i) if i >= 0 => Ok(Count::Const(i as u64)),
            Value::UInt(u) => Ok(Count::Const(u)),
            _ => Err(DataflowError::BadArgument(
                "LIMIT/OFFSET must be a non-negative integer".into(),
            )),
        },
        _ => Err(unsupported("LIMIT expression")),
    }
}

/// A numeric literal.
pub(super) fn number(n: &str) -> ast::Expr {
    ast::Expr::Value(ast::Value::Number(n.into(), false))
}

/// A call of the function `name` on `args`.
pub(super) fn call(name: &str, args: Vec<ast::Expr>) -> ast::Expr {
    ast::Expr::Function(ast::Function {
        name: ast::ObjectName(vec![ast::Ident::new(name)]),
        parameters: ast::FunctionArguments::None,
        args: ast::FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// Whether the select list or WHERE of `s` has a subquery.
pub(super) fn select_has_subquery(s: &ast::Select) -> bool {
    s.projection.iter().any(|i| match i {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
            has_subquery(e)
        }
        _ => false,
    }) || s.selection.as_ref().is_some_and(has_subquery)
}

/// A query of `body` alone (no ORDER BY, LIMIT, WITH).
pub(super) fn query_of(body: ast::SetExpr) -> ast::Query {
    ast::Query {
        with: None,
        body: Box::new(body),
        order_by: None,
        limit: None,
        limit_by: vec![],
        offset: None,
        fetch: None,
        locks: vec![],
        for_clause: None,
        settings: None,
        format_clause: None,
    }
}

/// `SELECT value FROM from`, nothing else.
pub(super) fn select_from(value: ast::Expr, from: ast::TableWithJoins) -> ast::Query {
    let mut q = select_one();
    if let ast::SetExpr::Select(s) = &mut *q.body {
        s.projection = vec![ast::SelectItem::UnnamedExpr(value)];
        s.from = vec![from];
    }
    q
}

/// `FROM (SELECT 1) AS __ladle_one`: one constant row.
pub(super) fn one_row_from() -> ast::TableWithJoins {
    let one = select_one();
    ast::TableWithJoins {
        relation: ast::TableFactor::Derived {
            lateral: false,
            subquery: Box::new(one),
            alias: Some(ast::TableAlias {
                name: ast::Ident::new("__ladle_one"),
                columns: vec![],
            }),
        },
        joins: vec![],
    }
}

/// `SELECT 1`.
fn select_one() -> ast::Query {
    query_of(ast::SetExpr::Select(Box::new(ast::Select {
        distinct: None,
        top: None,
        top_before_distinct: false,
        projection: vec![ast::SelectItem::UnnamedExpr(number("1"))],
        into: None,
        from: vec![],
        lateral_views: vec![],
        prewhere: None,
        selection: None,
        group_by: ast::GroupByExpr::Expressions(vec![], vec![]),
        cluster_by: vec![],
        distribute_by: vec![],
        sort_by: vec![],
        having: None,
        named_window: vec![],
        qualify: None,
        window_before_qualify: false,
        value_table_mode: None,
        connect_by: None,
    })))
}

/// `FROM DUAL` (MySQL's dummy table) without joins.
pub(super) fn is_dual(s: &ast::Select) -> bool {
    match s.from.as_slice() {
        [ast::TableWithJoins {
            relation: ast::TableFactor::Table {
                name, alias: None, ..
            },
            joins,
        }] => joins.is_empty() && name.0.len() == 1 && name.0[0].value.eq_ignore_ascii_case("dual"),
        _ => false,
    }
}

/// Whether `c` is an equality between a column of `a` and a column of `b`.
pub(super) fn links(c: &ast::Expr, a: &Scope, b: &Scope) -> bool {
    if let ast::Expr::BinaryOp {
        left,
        op: ast::BinaryOperator::Eq,
        right,
    } = c
    {
        if let (Some(x), Some(y)) = (as_column(left), as_column(right)) {
            let ab = a.resolve(x).is_ok()
                && b.resolve(y).is_ok()
                && a.resolve(y).is_err()
                && b.resolve(x).is_err();
            let ba = a.resolve(y).is_ok()
                && b.resolve(x).is_ok()
                && a.resolve(x).is_err()
                && b.resolve(y).is_err();
            return ab || ba;
        }
    }
    false
}

/// Calls `f` on `e` and each expression inside it, parents before their
/// children, never inside a subquery (its names are its own); the
/// children visited are those of what `f` leaves in place.
pub(super) fn visit_shallow_mut<E>(
    e: &mut ast::Expr,
    f: impl FnMut(&mut ast::Expr) -> ControlFlow<E>,
) -> ControlFlow<E> {
    struct Shallow<F, E> {
        depth: usize,
        f: F,
        _break: std::marker::PhantomData<E>,
    }
    impl<E, F: FnMut(&mut ast::Expr) -> ControlFlow<E>> ast::VisitorMut for Shallow<F, E> {
        type Break = E;
        fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<E> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<E> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<E> {
            if self.depth == 0 {
                (self.f)(e)
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    ast::VisitMut::visit(
        e,
        &mut Shallow {
            depth: 0,
            f,
            _break: std::marker::PhantomData,
        },
    )
}

/// Whether some expression inside `e` (outside subqueries) passes `test`.
pub(super) fn any_shallow(e: &ast::Expr, mut test: impl FnMut(&ast::Expr) -> bool) -> bool {
    // The walk is written once, over a copy (expressions are small).
    let mut copy = e.clone();
    visit_shallow_mut(&mut copy, |x| {
        if test(x) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// MariaDB's 1235 for `x IN (SELECT ... LIMIT n)` (and `= ANY`, `> ALL`,
/// `SOME`): a subquery of those may not limit its rows (a derived table
/// inside it may).
pub(super) fn refuse_limited_in(q: &ast::Query) -> Result<()> {
    let limited = |sub: &ast::Query| sub.limit.is_some() || sub.offset.is_some();
    let found = ast::visit_expressions(q, |e| {
        let refused = match e {
            ast::Expr::InSubquery { subquery, .. } => limited(subquery),
            ast::Expr::AnyOp { right, .. } | ast::Expr::AllOp { right, .. } => {
                matches!(&**right, ast::Expr::Subquery(sub) if limited(sub))
            }
            _ => false,
        };
        if refused {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    match found {
        ControlFlow::Break(()) => Err(unsupported("LIMIT & IN/ALL/ANY/SOME subquery")),
        ControlFlow::Continue(()) => Ok(()),
    }
}
