//! Subqueries in conditions and select lists: IN and EXISTS as semi- and
//! anti-joins, keyed semi-joins for parameterized subqueries, IN over a
//! value, and the rewriting of subqueries into joined columns.

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::correlated::{correlated, correlated_in_value, qualify_outer, subquery_and};
use super::expr::{
    aggregate_name, collect_bare_columns, unsupported, visit_children, ExprCx, Scope, ScopeCol,
};
use super::query::Planner;
use super::relation::{stable, Correlated};
use super::syntax::{as_column, call, has_placeholder, has_subquery, is_dual, number};
use crate::expr::Expr;
use crate::ops::{AggKind, AggSpec, JoinKind};
use crate::plan::{LNode, LOp};
use crate::{DataflowError, Result};

impl Planner<'_> {
    pub(super) fn semi_in(
        &self,
        node: LNode,
        scope: &Scope,
        expr: &ast::Expr,
        sub: &ast::Query,
        negated: bool,
    ) -> Result<LNode> {
        let col = as_column(expr).ok_or_else(|| unsupported("IN (SELECT ...) on an expression"))?;
        let c = scope.resolve(col)?;
        let rel = self.relation(sub)?;
        if rel.cols.len() != 1 {
            return Err(DataflowError::BadArgument(
                "Operand should contain 1 column(s)".into(),
            ));
        }
        let nullable = scope.cols[c].nullable || rel.cols[0].nullable;
        let kind = if negated {
            JoinKind::Anti
        } else {
            JoinKind::Semi
        };
        let colls = node.colls.clone();
        let sub = with_mark_carrier(rel.node);
        let joined = LNode {
            op: LOp::Join {
                kind,
                left_cols: vec![c],
                right_cols: vec![0],
            },
            inputs: vec![node, sub.clone()],
            colls: colls.clone(),
        };
        if !negated || !nullable {
            return Ok(joined);
        }
        Ok(not_in_nulls(joined, c, sub))
    }

    /// `x IN (SELECT y ...)` as a value (in the select list, under OR, on
    /// an expression), with MySQL's three-valued answer: 1 when some `y`
    /// equals `x`; else 0 when the subquery is empty; else NULL when `x`
    /// or some `y` is NULL; else 0. The distinct `y`s join `x` (LEFT), and
    /// the subquery's row and non-NULL counts join every row (one row, key
    /// []). The subquery must be uncorrelated.
    pub(super) fn in_value(
        &self,
        x: &ast::Expr,
        sub: &ast::Query,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let rel = match self.relation(sub) {
            Err(DataflowError::UnknownColumn(..)) => return correlated_in_value(x, sub, scope),
            r => r?,
        };
        if rel.cols.len() != 1 {
            return Err(DataflowError::BadArgument(
                "Operand should contain 1 column(s)".into(),
            ));
        }
        let qual = format!("__in{n}");
        let width = scope.cols.len();
        // `x` as a column of its own (named here, whatever it is).
        let xc = width;
        {
            let e = stable(ExprCx::row(scope).compile(x)?)?;
            let (ty, nullable) = e.result_type(&scope.types());
            let coll = if ty.is_text() {
                rel.cols[0].coll
            } else {
                Collation::Binary
            };
            let mut colls = node.colls.clone();
            colls.push(coll);
            let inner = LNode::take(node);
            *node = LNode {
                op: LOp::Project((0..width).map(Expr::Column).chain([e]).collect()),
                inputs: vec![inner],
                colls,
            };
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: "__x".into(),
                ty,
                nullable,
                collation: coll,
                table: String::new(),
                origin: None,
                stored: false,
                shown: None,
            });
        }
        let ycoll = rel.cols[0].coll;
        let bigint = SqlType::Int {
            bytes: 8,
            unsigned: false,
            display_width: None,
        };
        // The distinct values: (y, COUNT(*)), grouped by y.
        let values = LNode {
            op: LOp::Aggregate {
                ngroup: 1,
                aggs: vec![AggSpec::new(AggKind::CountStar, 0)],
                scalar: false,
            },
            inputs: vec![rel.node.clone()],
            colls: vec![ycoll, Collation::Binary],
        };
        let stats = row_counts(rel.node);
        let mut colls = node.colls.clone();
        colls.extend([ycoll, Collation::Binary]);
        let left = LNode::take(node);
        let with_values = LNode {
            op: LOp::Join {
                kind: JoinKind::Left,
                left_cols: vec![xc],
                right_cols: vec![0],
            },
            inputs: vec![left, values],
            colls: colls.clone(),
        };
        colls.extend([Collation::Binary, Collation::Binary]);
        *node = LNode {
            op: LOp::Join {
                kind: JoinKind::Left,
                left_cols: vec![],
                right_cols: vec![],
            },
            inputs: vec![with_values, stats],
            colls,
        };
        for (name, ty, coll) in [
            ("__y", rel.cols[0].ty.clone(), ycoll),
            ("__m", bigint.clone(), Collation::Binary),
            ("__rows", bigint.clone(), Collation::Binary),
            ("__nonnull", bigint, Collation::Binary),
        ] {
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: name.into(),
                ty,
                nullable: true,
                collation: coll,
                table: String::new(),
                origin: None,
                stored: false,
                shown: None,
            });
        }
        let col = |name: &str| {
            ast::Expr::CompoundIdentifier(vec![
                ast::Ident::new(qual.clone()),
                ast::Ident::new(name),
            ])
        };
        let x_col = col("__x");
        let is_null = |e: ast::Expr, negated: bool| {
            if negated {
                ast::Expr::IsNotNull(Box::new(e))
            } else {
                ast::Expr::IsNull(Box::new(e))
            }
        };
        let rows = call("COALESCE", vec![col("__rows"), number("0")]);
        Ok(ast::Expr::Case {
            operand: None,
            conditions: vec![
                is_null(col("__m"), true),
                ast::Expr::BinaryOp {
                    left: Box::new(rows.clone()),
                    op: ast::BinaryOperator::Eq,
                    right: Box::new(number("0")),
                },
                ast::Expr::BinaryOp {
                    left: Box::new(is_null(x_col, false)),
                    op: ast::BinaryOperator::Or,
                    right: Box::new(ast::Expr::BinaryOp {
                        left: Box::new(rows),
                        op: ast::BinaryOperator::Gt,
                        right: Box::new(col("__nonnull")),
                    }),
                },
            ],
            results: vec![number("1"), number("0"), ast::Expr::Value(ast::Value::Null)],
            else_result: Some(Box::new(number("0"))),
        })
    }

    /// `x IN (SELECT y ... WHERE col = ? ...)` or `EXISTS (SELECT ... WHERE
    /// inner = outer AND col = ? ...)`: a semi-join whose right side depends
    /// on parameters. The right side, projected to (y, correlation columns,
    /// parameter columns) and made DISTINCT, is inner-joined, and the
    /// parameter columns become reader keys: for one key value each outer
    /// row meets at most one right row, so no row is repeated.
    pub(super) fn keyed_semi(
        &self,
        node: &mut LNode,
        scope: &mut Scope,
        key_frame: &mut Vec<(usize, Vec<usize>)>,
        in_expr: Option<&ast::Expr>,
        sub: &ast::Query,
        n: usize,
    ) -> Result<()> {
        let ast::SetExpr::Select(s) = &*sub.body else {
            return Err(unsupported("parameters in this subquery"));
        };
        if s.from.is_empty()
            || !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            || s.having.is_some()
            || sub.limit.is_some()
            || sub.offset.is_some()
        {
            return Err(unsupported("parameters in this subquery"));
        }
        let mut params = Vec::new();
        let Correlated {
            inner,
            scope: iscope,
            inner_cols,
            outer_cols,
            residual,
            ..
        } = self.plan_correlated_params(
            s,
            scope,
            "a subquery",
            "correlated condition other than equality",
            Some(&mut params),
        )?;
        if !residual.is_empty() {
            return Err(unsupported(
                "parameters in a subquery with a correlated condition other than equality",
            ));
        }
        if params.is_empty() {
            return Err(unsupported("parameters in a subquery other than col = ?"));
        }
        let text_coll =
            |ty: &SqlType, c: Collation| if ty.is_text() { c } else { Collation::Binary };
        let mut proj: Vec<Expr> = Vec::new();
        let mut cols: Vec<ScopeCol> = Vec::new();
        let mut left_cols = Vec::new();
        let mut push_inner = |e: Expr, ty: SqlType, coll: Collation, proj: &mut Vec<Expr>| {
            proj.push(e);
            cols.push(ScopeCol {
                qualifier: format!("__sqk{n}"),
                name: format!("__c{}", proj.len() - 1),
                ty,
                nullable: true,
                collation: coll,
                table: String::new(),
                origin: None,
                stored: false,
                shown: None,
            });
        };
        if let Some(x) = in_expr {
            let xc = scope.resolve(
                as_column(x).ok_or_else(|| unsupported("IN (SELECT ...) on an expression"))?,
            )?;
            let y_ast = match s.projection.as_slice() {
                [ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. }] => e,
                _ => {
                    return Err(DataflowError::BadArgument(
                        "Operand should contain 1 column(s)".into(),
                    ))
                }
            };
            if aggregate_name(y_ast).is_some() || has_subquery(y_ast) || has_placeholder(y_ast) {
                return Err(unsupported("parameters in this subquery"));
            }
            let y = stable(ExprCx::row(&iscope).compile(y_ast)?)?;
            let (ty, _) = y.result_type(&iscope.types());
            let coll = match &y {
                Expr::Column(c) => iscope.cols[*c].collation,
                _ => Collation::GeneralCi,
            };
            push_inner(y, ty.clone(), text_coll(&ty, coll), &mut proj);
            left_cols.push(xc);
        }
        for (&i, &o) in inner_cols.iter().zip(&outer_cols) {
            let ic = &iscope.cols[i];
            push_inner(
                Expr::Column(i),
                ic.ty.clone(),
                text_coll(&ic.ty, ic.collation),
                &mut proj,
            );
            left_cols.push(o);
        }
        if left_cols.is_empty() {
            return Err(unsupported("uncorrelated EXISTS"));
        }
        let nk = left_cols.len();
        for &(i, _) in &params {
            let ic = &iscope.cols[i];
            push_inner(
                Expr::Column(i),
                ic.ty.clone(),
                text_coll(&ic.ty, ic.collation),
                &mut proj,
            );
        }
        let rcolls: Vec<Collation> = cols.iter().map(|c| c.collation).collect();
        let right = LNode {
            op: LOp::Aggregate {
                ngroup: proj.len(),
                aggs: vec![],
                scalar: false,
            },
            inputs: vec![LNode {
                op: LOp::Project(proj),
                inputs: vec![inner],
                colls: rcolls.clone(),
            }],
            colls: rcolls.clone(),
        };
        let width = scope.cols.len();
        let mut colls = node.colls.clone();
        colls.extend(rcolls);
        let left = LNode::take(node);
        *node = LNode {
            op: LOp::Join {
                kind: JoinKind::Inner,
                left_cols,
                right_cols: (0..nk).collect(),
            },
            inputs: vec![left, right],
            colls,
        };
        scope.cols.extend(cols);
        for (j, &(_, slot)) in params.iter().enumerate() {
            key_frame.push((width + nk + j, vec![slot]));
        }
        Ok(())
    }

    /// Correlated `EXISTS (SELECT ... FROM ... WHERE inner = outer AND ...)`.
    pub(super) fn semi_exists(
        &self,
        node: LNode,
        scope: &Scope,
        sub: &ast::Query,
        negated: bool,
    ) -> Result<LNode> {
        let ast::SetExpr::Select(s) = &*sub.body else {
            return Err(unsupported("EXISTS over this query"));
        };
        // (A LIMIT 0 or an OFFSET: counted, see `exists_as_count`.)
        if s.from.is_empty()
            || !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            || s.having.is_some()
            || !limit_keeps_exists(sub)
            || aggregates_one_row(sub)
        {
            return Err(unsupported("EXISTS over this query"));
        }
        let Correlated {
            inner,
            scope: iscope,
            inner_cols,
            outer_cols,
            residual,
            ..
        } = self.plan_correlated(
            s,
            scope,
            "EXISTS",
            "correlated EXISTS condition other than equality",
        )?;
        check_exists_list(s, &iscope, scope)?;
        if !residual.is_empty() {
            return Err(unsupported(
                "correlated EXISTS condition other than equality",
            ));
        }
        if outer_cols.is_empty() {
            return Err(unsupported("uncorrelated EXISTS"));
        }
        let kind = if negated {
            JoinKind::Anti
        } else {
            JoinKind::Semi
        };
        let colls = node.colls.clone();
        Ok(LNode {
            op: LOp::Join {
                kind,
                left_cols: outer_cols,
                right_cols: inner_cols,
            },
            inputs: vec![node, inner],
            colls,
        })
    }
}

/// Replaces `(SELECT agg(x) FROM ... WHERE inner = outer ...)` in a select
/// list by a column of a LEFT JOIN with that aggregate grouped by the
/// correlation columns.
pub(super) struct SubqueryRewriter<'p, 'a> {
    pub(super) planner: &'p Planner<'a>,
    pub(super) node: &'p mut LNode,
    pub(super) scope: &'p mut Scope,
    pub(super) n: &'p mut usize,
    pub(super) err: Option<DataflowError>,
    /// Whether the expression is a WHERE or ON condition, where the
    /// enclosing query cannot aggregate: a FROM-less subquery's aggregates
    /// are then over its own single row (see [`one_row_aggregates`]).
    pub(super) one_row: bool,
}

impl ast::VisitorMut for SubqueryRewriter<'_, '_> {
    type Break = ();
    fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> std::ops::ControlFlow<()> {
        // `(SELECT x)`: `x`, whose own subqueries are visited next.
        let value = match e {
            ast::Expr::Subquery(q) => from_less_value(q, self.one_row).cloned().map(|v| match self
                .one_row
            {
                true => one_row_aggregates(v),
                false => v,
            }),
            _ => None,
        };
        if let Some(x) = value {
            *e = ast::Expr::Nested(Box::new(x));
            return std::ops::ControlFlow::Continue(());
        }
        let planned = match e {
            ast::Expr::Subquery(q) => self
                .planner
                .scalar_subquery(q, self.node, self.scope, *self.n),
            ast::Expr::Exists { subquery, negated } => {
                let negated = *negated;
                let checked = match &*subquery.body {
                    ast::SetExpr::Select(s) if !s.from.is_empty() => self
                        .planner
                        .plan_from(&s.from, &mut Vec::new())
                        .and_then(|(_, iscope)| check_exists_list(s, &iscope, self.scope)),
                    _ => Ok(()),
                };
                checked
                    .and_then(|()| exists_as_count(subquery))
                    .and_then(|count| {
                        let (count, offset) = match count {
                            ExistsAs::Count(count, offset) => (count, offset),
                            ExistsAs::Always(exists) => {
                                return Ok(number(if exists != negated { "1" } else { "0" }))
                            }
                        };
                        let n = self
                            .planner
                            .scalar_subquery(&count, self.node, self.scope, *self.n)?;
                        Ok(ast::Expr::BinaryOp {
                            left: Box::new(n),
                            op: if negated {
                                ast::BinaryOperator::LtEq
                            } else {
                                ast::BinaryOperator::Gt
                            },
                            right: Box::new(number(&offset.to_string())),
                        })
                    })
            }
            ast::Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => self
                .planner
                .in_value(expr, subquery, self.node, self.scope, *self.n)
                .map(|v| {
                    if *negated {
                        ast::Expr::UnaryOp {
                            op: ast::UnaryOperator::Not,
                            expr: Box::new(ast::Expr::Nested(Box::new(v))),
                        }
                    } else {
                        v
                    }
                }),
            _ => return std::ops::ControlFlow::Continue(()),
        };
        match planned {
            Ok(replacement) => {
                *self.n += 1;
                *e = replacement;
                std::ops::ControlFlow::Continue(())
            }
            Err(err) => {
                self.err = Some(err);
                std::ops::ControlFlow::Break(())
            }
        }
    }
}

/// The value `e` of a scalar subquery `(SELECT e)` that reads no table
/// and filters, groups, orders and limits nothing: it is `e` over the
/// enclosing row, as MySQL resolves `e`'s columns there. An aggregate
/// call over a column is the enclosing query's (`(SELECT MAX(a)) FROM t`
/// is `MAX(a)` over t), as MySQL places an aggregate whose columns are all
/// outer ones; not with an aggregate over no column (`COUNT(*)`) or a
/// window call, which would count the subquery's single row. With
/// `one_row` (in a condition, where the enclosing query cannot aggregate)
/// every aggregate is over that single row ([`one_row_aggregates`]).
fn from_less_value(q: &ast::Query, one_row: bool) -> Option<&ast::Expr> {
    let ast::SetExpr::Select(s) = &*q.body else {
        return None;
    };
    let e = match s.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }] => e,
        _ => return None,
    };
    let plain = q.with.is_none()
        && q.order_by.is_none()
        && q.limit.is_none()
        && q.offset.is_none()
        && q.fetch.is_none()
        && q.locks.is_empty()
        && (s.from.is_empty() || is_dual(s))
        && s.selection.is_none()
        && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty())
        && s.having.is_none()
        && s.into.is_none();
    let mut aggregates = Vec::new();
    super::expr::collect_aggregates(e, &mut aggregates);
    let outer_aggregates = one_row || aggregates.iter().all(aggregates_a_column);
    (plain && outer_aggregates && !super::window_fn::has_window_calls(s, q)).then_some(e)
}

/// `e`, the value of a FROM-less subquery in a WHERE or ON condition (see
/// [`from_less_value`]), with its aggregate calls over the subquery's
/// single row, as MySQL places them where the enclosing query cannot
/// aggregate (`WHERE a = (SELECT MAX(a))` holds for every `a` not NULL):
/// MIN and MAX are their argument, COUNT(*) is 1 and COUNT(x) whether `x`
/// is not NULL. Other aggregates stay for the planner to refuse (known
/// gap: SUM, AVG and GROUP_CONCAT change the type). Those of a nested
/// subquery are its own.
fn one_row_aggregates(mut e: ast::Expr) -> ast::Expr {
    struct OneRow {
        depth: usize,
    }
    impl ast::VisitorMut for OneRow {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut ast::Query) -> std::ops::ControlFlow<()> {
            self.depth += 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut ast::Query) -> std::ops::ControlFlow<()> {
            self.depth -= 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut ast::Expr) -> std::ops::ControlFlow<()> {
            if let Some(v) = (self.depth == 0).then(|| one_row_value(e)).flatten() {
                *e = v;
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = ast::VisitMut::visit(&mut e, &mut OneRow { depth: 0 });
    e
}

/// Aggregate call `agg` over one row (see [`one_row_aggregates`]), if it
/// is one of those it knows.
fn one_row_value(agg: &ast::Expr) -> Option<ast::Expr> {
    let name = aggregate_name(agg)?;
    let ast::Expr::Function(f) = agg else {
        return None;
    };
    let ast::FunctionArguments::List(l) = &f.args else {
        return None;
    };
    if !l.clauses.is_empty() || f.filter.is_some() || f.over.is_some() {
        return None;
    }
    let nested = |x: ast::Expr| Some(ast::Expr::Nested(Box::new(x)));
    match (name.as_str(), l.args.as_slice()) {
        ("count", [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]) => Some(number("1")),
        ("count", [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))]) => {
            nested(ast::Expr::IsNotNull(Box::new(x.clone())))
        }
        ("min" | "max", [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))]) => {
            nested(x.clone())
        }
        _ => None,
    }
}

/// Whether aggregate call `agg` reads a column among its arguments.
fn aggregates_a_column(agg: &ast::Expr) -> bool {
    let mut columns = Vec::new();
    visit_children(agg, &mut |arg| collect_bare_columns(arg, &mut columns));
    !columns.is_empty()
}

/// `EXISTS (SELECT ... [LIMIT n [OFFSET k]])` as `(SELECT COUNT(*) ...) >
/// k`: the query and `k` (or a constant, see [`ExistsAs`]). The select
/// list, DISTINCT, GROUP BY without HAVING, ORDER BY and a LIMIT of at
/// least one row do not change whether a row exists; past an OFFSET they
/// may (the rows counted must be the subquery's), so with one the
/// subquery must be a plain SELECT ... FROM ... WHERE.
pub(super) fn exists_as_count(sub: &ast::Query) -> Result<ExistsAs> {
    let mut q = sub.clone();
    let literal = |x: Option<&ast::Expr>| match x {
        Some(ast::Expr::Value(ast::Value::Number(n, _))) => n.parse::<u64>().ok(),
        _ => None,
    };
    let offset = match &q.offset {
        None => 0,
        Some(o) => {
            literal(Some(&o.value)).ok_or_else(|| unsupported("LIMIT or OFFSET inside EXISTS"))?
        }
    };
    match (&q.limit, literal(q.limit.as_ref())) {
        (None, _) => {}
        (Some(_), Some(0)) => return Ok(ExistsAs::Always(false)),
        (Some(_), Some(_)) => {}
        (Some(_), None) => return Err(unsupported("LIMIT or OFFSET inside EXISTS")),
    }
    if aggregates_one_row(&q) {
        // One row, whatever it aggregates (even over no row).
        return Ok(ExistsAs::Always(offset == 0));
    }
    if offset > 0 && !counts_its_rows(&q) {
        return Err(unsupported("OFFSET inside EXISTS over this query"));
    }
    q.limit = None;
    q.offset = None;
    q.order_by = None;
    let ast::SetExpr::Select(s) = &mut *q.body else {
        return Err(unsupported("EXISTS over this query"));
    };
    s.distinct = None;
    if s.having.is_none() {
        // Groups exist exactly when rows do.
        s.group_by = ast::GroupByExpr::Expressions(vec![], vec![]);
    }
    let mut count = call("COUNT", vec![]);
    if let ast::Expr::Function(ast::Function {
        args: ast::FunctionArguments::List(l),
        ..
    }) = &mut count
    {
        l.args = vec![ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)];
    }
    s.projection = vec![ast::SelectItem::UnnamedExpr(count)];
    Ok(ExistsAs::Count(Box::new(q), offset))
}

/// What `EXISTS (sub)` is (see [`exists_as_count`]).
pub(super) enum ExistsAs {
    /// The same for every row: `LIMIT 0` never has a row, an aggregate
    /// without GROUP BY always one.
    Always(bool),
    /// `(count) > k`.
    Count(Box<ast::Query>, u64),
}

/// MySQL's 1054 for a column of an EXISTS subquery's select list that
/// neither its FROM (`inner`) nor the enclosing query (`outer`) has: the
/// list is never read otherwise, and a statement with a mistyped column
/// must not run (a DELETE would delete rows).
fn check_exists_list(s: &ast::Select, inner: &Scope, outer: &Scope) -> Result<()> {
    for item in &s.projection {
        let (ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }) =
            item
        else {
            continue;
        };
        let mut columns = Vec::new();
        super::expr::collect_bare_columns(e, &mut columns);
        for ids in columns {
            if inner.resolve(&ids).is_err() && outer.resolve(&ids).is_err() {
                let name: Vec<&str> = ids.iter().map(|i| i.value.as_str()).collect();
                return Err(DataflowError::UnknownColumn(
                    name.join("."),
                    "field list".into(),
                ));
            }
        }
    }
    Ok(())
}

/// Whether `q` is a SELECT that aggregates without GROUP BY or HAVING:
/// exactly one row, even over no row.
fn aggregates_one_row(q: &ast::Query) -> bool {
    let ast::SetExpr::Select(s) = &*q.body else {
        return false;
    };
    matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
        && s.having.is_none()
        && s.projection.iter().any(|item| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                let mut aggregates = Vec::new();
                super::expr::collect_aggregates(e, &mut aggregates);
                !aggregates.is_empty()
            }
            _ => false,
        })
}

/// Whether `COUNT(*)` in place of `q`'s select list counts `q`'s rows: a
/// SELECT without DISTINCT, grouping, HAVING or aggregates.
fn counts_its_rows(q: &ast::Query) -> bool {
    let ast::SetExpr::Select(s) = &*q.body else {
        return false;
    };
    s.distinct.is_none()
        && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
        && s.having.is_none()
        && s.projection.iter().all(|item| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                let mut aggregates = Vec::new();
                super::expr::collect_aggregates(e, &mut aggregates);
                aggregates.is_empty()
            }
            _ => true,
        })
}

/// Whether `EXISTS (sub)` is `EXISTS` over `sub` without its ORDER BY and
/// LIMIT: a LIMIT of at least one row and no OFFSET.
pub(super) fn limit_keeps_exists(sub: &ast::Query) -> bool {
    let positive = |x: &ast::Expr| matches!(x, ast::Expr::Value(ast::Value::Number(n, _)) if n.parse::<u64>().is_ok_and(|n| n > 0));
    let no_offset = match &sub.offset {
        None => true,
        Some(o) => matches!(&o.value, ast::Expr::Value(ast::Value::Number(n, _)) if n == "0"),
    };
    no_offset && sub.limit.as_ref().is_none_or(positive)
}

impl Planner<'_> {
    /// Replaces every subquery in `e` (scalar, EXISTS, IN) by an expression
    /// over columns joined into `node` (see [`SubqueryRewriter`]); `n`
    /// numbers them apart.
    pub(super) fn rewrite_subqueries(
        &self,
        e: &mut ast::Expr,
        node: &mut LNode,
        scope: &mut Scope,
        n: &mut usize,
    ) -> Result<()> {
        self.rewrite_subqueries_in(e, node, scope, n, false)
    }

    /// [`Self::rewrite_subqueries`], in a WHERE or ON condition when
    /// `one_row` (see [`SubqueryRewriter::one_row`]).
    fn rewrite_subqueries_in(
        &self,
        e: &mut ast::Expr,
        node: &mut LNode,
        scope: &mut Scope,
        n: &mut usize,
        one_row: bool,
    ) -> Result<()> {
        let mut rw = SubqueryRewriter {
            planner: self,
            node,
            scope,
            n,
            err: None,
            one_row,
        };
        let _ = ast::VisitMut::visit(e, &mut rw);
        rw.err.map_or(Ok(()), Err)
    }

    /// A WHERE condition with a subquery over `node`: `IN`/`EXISTS` as a
    /// semi- or anti-join where the shape allows (`None`: the condition is
    /// planned; a correlated `IN` as `EXISTS`); otherwise the condition with its subqueries joined in as
    /// values, for the caller to filter on.
    pub(super) fn subquery_condition(
        &self,
        c: ast::Expr,
        node: &mut LNode,
        scope: &mut Scope,
        n: &mut usize,
    ) -> Result<Option<ast::Expr>> {
        // `x NOT IN (SELECT y ... WHERE <reads the outer row>)` is NULL,
        // not true, for an outer row whose `x` or some `y` is NULL (unless
        // its subquery is empty): no anti-join says that, so it is filtered
        // on its three-valued answer, computed as a value (see
        // `correlated_in_value`).
        if let ast::Expr::InSubquery {
            subquery,
            negated: true,
            ..
        } = &c
        {
            if correlated(self.relation(subquery)) {
                let mut c = c;
                self.rewrite_subqueries_in(&mut c, node, scope, n, true)?;
                return Ok(Some(c));
            }
        }
        // `x IN (SELECT y ... WHERE <reads the outer row>)` filters as
        // `EXISTS (SELECT ... WHERE ... AND y = x)`.
        let c = match c {
            ast::Expr::InSubquery {
                expr,
                subquery,
                negated: false,
            } if correlated(self.relation(&subquery)) => {
                let x = qualify_outer(&expr, scope, &subquery)?;
                ast::Expr::Exists {
                    subquery: Box::new(subquery_and(&subquery, |y| ast::Expr::BinaryOp {
                        left: Box::new(y),
                        op: ast::BinaryOperator::Eq,
                        right: Box::new(x.clone()),
                    })?),
                    negated: false,
                }
            }
            c => c,
        };
        let semi = match &c {
            ast::Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => Some(self.semi_in(node.clone(), scope, expr, subquery, *negated)),
            ast::Expr::Exists { subquery, negated } => {
                Some(self.semi_exists(node.clone(), scope, subquery, *negated))
            }
            _ => None,
        };
        match semi {
            Some(Ok(joined)) => {
                *node = joined;
                return Ok(None);
            }
            Some(Err(DataflowError::Unsupported(_))) | None => {}
            Some(Err(e)) => return Err(e),
        }
        let mut c = c;
        self.rewrite_subqueries_in(&mut c, node, scope, n, true)?;
        Ok(Some(c))
    }
}

/// The row count and non-NULL count of a one-column `sub`: one row, for
/// `IN (SELECT ...)`'s NULL rules.
pub(super) fn row_counts(sub: LNode) -> LNode {
    LNode {
        op: LOp::Aggregate {
            ngroup: 0,
            aggs: vec![
                AggSpec::new(AggKind::CountStar, 0),
                AggSpec::new(AggKind::Count, 0),
            ],
            scalar: true,
        },
        inputs: vec![sub],
        colls: vec![Collation::Binary, Collation::Binary],
    }
}

/// `sub` (the subquery of a semi- or anti-join on its first column) with
/// one more output column when a filter in it may mark the rows whose
/// WHERE overflowed: a projection looked up by all its columns carries a
/// mark in one of them, moving the row to another key, where the join
/// would not find it (`ops::Project::with_lookups`); the added column
/// carries it instead, for the join to carry on (`ops::Join::join_rows`).
fn with_mark_carrier(mut sub: LNode) -> LNode {
    let marks = sub.may_mark_rows();
    if let (true, LOp::Project(es)) = (marks, &mut sub.op) {
        es.push(Expr::Literal(Value::Null));
        sub.colls.push(Collation::Binary);
    }
    sub
}

/// MySQL's `x NOT IN (SELECT y ...)` over nullable columns: true when the
/// subquery is empty; otherwise NULL (so not true) when `x` is NULL or any
/// `y` is NULL, else true exactly when no `y` equals `x`. `anti` is the
/// anti-join on `x = y` (which passes rows whose `x` is NULL); the subquery's
/// row count and non-NULL count join in as two columns (one row, key []),
/// filter, and are projected away.
pub(super) fn not_in_nulls(anti: LNode, x: usize, sub: LNode) -> LNode {
    let width = anti.width();
    let stats_colls = vec![Collation::Binary, Collation::Binary];
    let stats = row_counts(LNode {
        op: LOp::Project(vec![Expr::Column(0)]),
        colls: vec![sub.colls.first().copied().unwrap_or_default()],
        inputs: vec![sub],
    });
    let mut colls = anti.colls.clone();
    colls.extend(stats_colls);
    let joined = LNode {
        op: LOp::Join {
            kind: JoinKind::Left,
            left_cols: vec![],
            right_cols: vec![],
        },
        inputs: vec![anti, stats],
        colls: colls.clone(),
    };
    let (rows, non_null) = (Expr::Column(width), Expr::Column(width + 1));
    let eq = |a: Expr, b: Expr| Expr::Cmp {
        op: crate::expr::CmpOp::Eq,
        left: Box::new(a),
        right: Box::new(b),
        collation: Collation::Binary,
    };
    let and = |a, b| Expr::Logic(crate::expr::LogicOp::And, Box::new(a), Box::new(b));
    let keep = Expr::Logic(
        crate::expr::LogicOp::Or,
        Box::new(eq(rows.clone(), Expr::Literal(Value::Int(0)))),
        Box::new(and(
            Expr::IsNull {
                expr: Box::new(Expr::Column(x)),
                negated: true,
            },
            eq(non_null, rows),
        )),
    );
    let filtered = LNode {
        op: LOp::Filter(keep),
        inputs: vec![joined],
        colls: colls.clone(),
    };
    LNode {
        op: LOp::Project((0..width).map(Expr::Column).collect()),
        inputs: vec![filtered],
        colls: colls[..width].to_vec(),
    }
}
