//! Correlated subqueries: planning a subquery that reads the enclosing
//! query's columns, and decorrelating it into a join on those columns.

use ladle_common::Collation;
use sqlparser::ast;

use super::expr::{collect_aggregates, unsupported, ExprCx, Scope, ScopeCol};
use super::query::{bounded, Planner};
use super::relation::{stable, Correlated, PlannedBody};
use super::syntax::{as_column, as_slot, has_placeholder, has_subquery, number, split_conjuncts};
use crate::expr::Expr;
use crate::ops::JoinKind;
use crate::plan::{LNode, LOp};
use crate::{DataflowError, Result};

impl Planner<'_> {
    /// Plans a correlated subquery's FROM and WHERE: every `inner = outer`
    /// equality becomes a (inner, outer) column pair for the caller's join;
    /// every other condition filters the inner plan. `context` and
    /// `non_equality` name the construct in Unsupported errors.
    pub(super) fn plan_correlated(
        &self,
        s: &ast::Select,
        scope: &Scope,
        context: &str,
        non_equality: &str,
    ) -> Result<Correlated> {
        self.plan_correlated_params(s, scope, context, non_equality, None)
    }

    /// [`Self::plan_correlated`], also collecting `inner = ?` conditions
    /// as (inner column, parameter slot) when `params` is given. Each body
    /// is planned once for the statement (see [`PlanMemo`](super::PlanMemo)).
    pub(super) fn plan_correlated_params(
        &self,
        s: &ast::Select,
        scope: &Scope,
        context: &str,
        non_equality: &str,
        params: Option<&mut Vec<(usize, usize)>>,
    ) -> Result<Correlated> {
        let with_params = params.is_some();
        let body = self
            .memo
            .body(self.database, self.depth, s, scope, with_params, || {
                let body = self.plan_body(s, scope, with_params)?;
                if let PlannedBody::Planned(c, _) = &body {
                    bounded(&c.inner)?;
                }
                Ok(body)
            })?;
        match body {
            PlannedBody::Planned(correlated, found) => {
                if let Some(params) = params {
                    params.extend(found);
                }
                Ok(*correlated)
            }
            PlannedBody::Parameters => Err(unsupported(format!(
                "parameters or subqueries inside {context}"
            ))),
            PlannedBody::NonEquality => Err(unsupported(non_equality)),
        }
    }

    /// [`Self::plan_correlated_params`] for every construct: its refusals
    /// name none.
    fn plan_body(&self, s: &ast::Select, scope: &Scope, with_params: bool) -> Result<PlannedBody> {
        let mut found = Vec::new();
        let mut params = with_params.then_some(&mut found);
        let mut conj = Vec::new();
        if let Some(w) = &s.selection {
            split_conjuncts(w, &mut conj);
        }
        let (mut inner, mut iscope) = self.plan_from(&s.from, &mut conj)?;
        // Subqueries nested in this one that read only its own rows
        // (numbered apart from the enclosing query's).
        let mut nested = 1000;
        let mut outer_cols = Vec::new();
        let mut inner_cols = Vec::new();
        let mut residual = Vec::new();
        for c in conj {
            if let ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Eq,
                right,
            } = &c
            {
                if let (Some(a), Some(b)) = (as_column(left), as_column(right)) {
                    let pick = |x: &[ast::Ident], y: &[ast::Ident]| match (
                        iscope.resolve(x),
                        scope.resolve(y),
                    ) {
                        (Ok(i), Ok(o)) if iscope.resolve(y).is_err() => Some((i, o)),
                        _ => None,
                    };
                    if let Some((i, o)) = pick(a, b).or_else(|| pick(b, a)) {
                        inner_cols.push(i);
                        outer_cols.push(o);
                        continue;
                    }
                }
            }
            if let (
                Some(ps),
                ast::Expr::BinaryOp {
                    left,
                    op: ast::BinaryOperator::Eq,
                    right,
                },
            ) = (params.as_deref_mut(), &c)
            {
                let pair = match (as_column(left), as_slot(right)) {
                    (Some(col), Some(slot)) => Some((col, slot)),
                    _ => as_column(right).zip(as_slot(left)),
                };
                if let Some(i) =
                    pair.and_then(|(col, slot)| Some((iscope.resolve(col).ok()?, slot)))
                {
                    ps.push(i);
                    continue;
                }
            }
            if has_placeholder(&c) {
                return Ok(PlannedBody::Parameters);
            }
            // A nested subquery reading the enclosing query (Django's
            // OuterRef(OuterRef(..))): `decorrelate` plans it over the
            // enclosing query's distinct values.
            if has_subquery(&c) && scope_reads_outer(&c, &iscope, scope) {
                residual.push(c);
                continue;
            }
            // A nested subquery over this one's rows only: planned into
            // the inner plan as the enclosing WHERE plans its own.
            let c = if has_subquery(&c) {
                match self.subquery_condition(c, &mut inner, &mut iscope, &mut nested)? {
                    Some(c) => c,
                    None => continue,
                }
            } else {
                c
            };
            let e = match ExprCx::row(&iscope).compile(&c).and_then(stable) {
                Ok(e) => e,
                Err(DataflowError::UnknownColumn(..)) if scope_reads_outer(&c, &iscope, scope) => {
                    residual.push(c);
                    continue;
                }
                Err(DataflowError::UnknownColumn(..)) => return Ok(PlannedBody::NonEquality),
                Err(other) => return Err(other),
            };
            let colls = inner.colls.clone();
            inner = LNode {
                op: LOp::Filter(e),
                inputs: vec![inner],
                colls,
            };
        }
        let correlated = Correlated {
            inner,
            scope: iscope,
            inner_cols,
            outer_cols,
            residual,
            null_safe: Vec::new(),
        };
        Ok(PlannedBody::Planned(Box::new(correlated), found))
    }

    /// A correlated subquery body with conditions other than `inner =
    /// outer` (`WHERE b.price > p.id * 10`) made uncorrelated: the distinct
    /// values of the outer columns it reads (D) joined with the inner rows
    /// on the equalities and filtered by the other conditions. D's columns
    /// then are the correlation key, equal to the outer columns. After a
    /// NULL-rejecting condition (comparisons of columns and arithmetic)
    /// an outer row with a NULL in what it reads matches no inner row, and
    /// the caller's LEFT JOIN (which never matches a NULL key) gives the
    /// empty subquery's answer, as it should. A nullable column read only
    /// by other conditions (`NOT EXISTS (.. WHERE x = o.c)`, true for a
    /// NULL) is listed in `null_safe`: D's row with its NULL holds that
    /// outer row's inner rows, and the caller joins NULL to it.
    pub(super) fn decorrelate(
        &self,
        outer: &LNode,
        oscope: &Scope,
        c: Correlated,
        n: usize,
        value: Option<&mut ast::Expr>,
    ) -> Result<Correlated> {
        self.decorrelate_over(outer, oscope, c, n, value, Vec::new())
    }

    /// [`Self::decorrelate`] with D's columns starting with `o_cols` (the
    /// outer columns several subqueries share a key on), then the others
    /// `c` reads.
    pub(super) fn decorrelate_over(
        &self,
        outer: &LNode,
        oscope: &Scope,
        c: Correlated,
        n: usize,
        value: Option<&mut ast::Expr>,
        mut o_cols: Vec<usize>,
    ) -> Result<Correlated> {
        let qual = format!("__sqo{n}");
        for &o in &c.outer_cols {
            if !o_cols.contains(&o) {
                o_cols.push(o);
            }
        }
        let mut conds = Vec::new();
        // Outer columns a NULL in which may still let inner rows through
        // (`NOT EXISTS (.. WHERE x = o.c)`), and those it never does.
        let (mut sensitive, mut rejected) = (Vec::new(), Vec::new());
        for r in &c.residual {
            let reads_outer = |e: &ast::Expr| outer_columns_read(e, &c.scope, oscope);
            if null_rejecting(r, &reads_outer) {
                rejected.extend(reads_outer(r));
            } else {
                sensitive.extend(reads_outer(r));
            }
            if has_subquery(r) {
                outer_references_unambiguous(r, &c.scope, oscope)?;
            }
            let mut r = r.clone();
            rewrite_outer_refs(&mut r, &c.scope, oscope, &qual, &mut o_cols)?;
            conds.push(r);
        }
        if let Some(v) = value {
            if has_subquery(v) {
                outer_references_unambiguous(v, &c.scope, oscope)?;
            }
            rewrite_outer_refs(v, &c.scope, oscope, &qual, &mut o_cols)?;
        }
        let k = o_cols.len();
        let null_safe = (0..k)
            .filter(|&i| {
                let o = o_cols[i];
                oscope.cols[o].nullable
                    && sensitive.contains(&o)
                    && !rejected.contains(&o)
                    && !c.outer_cols.contains(&o)
            })
            .collect();
        let dcolls: Vec<Collation> = o_cols.iter().map(|&o| outer.colls[o]).collect();
        let distinct_outer = LNode {
            op: LOp::Aggregate {
                ngroup: k,
                aggs: vec![],
                scalar: false,
            },
            inputs: vec![LNode {
                op: LOp::Project(o_cols.iter().map(|&o| Expr::Column(o)).collect()),
                inputs: vec![outer.clone()],
                colls: dcolls.clone(),
            }],
            colls: dcolls.clone(),
        };
        let mut jscope = Scope {
            cols: o_cols
                .iter()
                .enumerate()
                .map(|(i, &o)| ScopeCol {
                    qualifier: qual.clone(),
                    name: format!("__o{i}"),
                    table: String::new(),
                    origin: None,
                    stored: false,
                    shown: None,
                    ..oscope.cols[o].clone()
                })
                .collect(),
            coalesced: Vec::new(),
        };
        jscope.cols.extend(c.scope.cols.iter().cloned());
        let mut jcolls = dcolls;
        jcolls.extend(c.inner.colls.iter().copied());
        let mut joined = LNode {
            op: LOp::Join {
                kind: JoinKind::Inner,
                left_cols: c
                    .outer_cols
                    .iter()
                    .map(|o| o_cols.iter().position(|x| x == o).unwrap_or_default())
                    .collect(),
                right_cols: c.inner_cols.clone(),
            },
            inputs: vec![distinct_outer, c.inner],
            colls: jcolls.clone(),
        };
        // Nested subqueries now read D's columns: planned over the join as
        // a WHERE plans its own (numbered apart from the inner ones).
        let mut nested = 4000;
        for r in conds {
            let r = if has_subquery(&r) {
                match self.subquery_condition(r, &mut joined, &mut jscope, &mut nested)? {
                    Some(r) => r,
                    None => continue,
                }
            } else {
                r
            };
            let e = stable(ExprCx::row(&jscope).compile(&r)?)?;
            let colls = joined.colls.clone();
            joined = LNode {
                op: LOp::Filter(e),
                inputs: vec![joined],
                colls,
            };
        }
        Ok(Correlated {
            inner: joined,
            scope: jscope,
            inner_cols: (0..k).collect(),
            outer_cols: o_cols,
            residual: vec![],
            null_safe,
        })
    }
}

/// `e` with each column of the outer query (`outer`, not `inner`) read as
/// the distinct outer values' column `qual.__o<i>`, `i` its place in
/// `o_cols` (added there when new). Names a nested subquery resolves
/// itself are left alone.
fn rewrite_outer_refs(
    e: &mut ast::Expr,
    inner: &Scope,
    outer: &Scope,
    qual: &str,
    o_cols: &mut Vec<usize>,
) -> Result<()> {
    let nested = has_subquery(e);
    let mut err = None;
    let _ = ast::visit_expressions_mut(e, |e| {
        let ids = match e {
            ast::Expr::Identifier(id) => vec![id.clone()],
            ast::Expr::CompoundIdentifier(ids) => ids.clone(),
            _ => return std::ops::ControlFlow::<()>::Continue(()),
        };
        if inner.resolve(&ids).is_ok() {
            return std::ops::ControlFlow::Continue(());
        }
        match outer.resolve(&ids) {
            Ok(oc) => {
                let i = o_cols.iter().position(|&x| x == oc).unwrap_or_else(|| {
                    o_cols.push(oc);
                    o_cols.len() - 1
                });
                *e = ast::Expr::CompoundIdentifier(vec![
                    ast::Ident::new(qual),
                    ast::Ident::new(format!("__o{i}")),
                ]);
            }
            // A nested subquery's own column.
            Err(_) if nested => {}
            Err(e) => err = Some(e),
        }
        std::ops::ControlFlow::Continue(())
    });
    err.map_or(Ok(()), Err)
}

/// Whether planning a subquery on its own failed because it reads columns
/// of the enclosing query.
pub(super) fn correlated<T>(planned: Result<T>) -> bool {
    matches!(planned, Err(DataflowError::UnknownColumn(..)))
}

/// `x` with every column qualified by its table in the outer `scope`, so
/// that inside `sub` it still means the outer row; refused when `sub`
/// uses the same table name or alias.
pub(super) fn qualify_outer(x: &ast::Expr, scope: &Scope, sub: &ast::Query) -> Result<ast::Expr> {
    let ast::SetExpr::Select(s) = &*sub.body else {
        return Err(unsupported("IN over this correlated subquery"));
    };
    let inner_names = from_names(s);
    let mut x = x.clone();
    let mut err = None;
    let _ = ast::visit_expressions_mut(&mut x, |e| {
        let ids = match e {
            ast::Expr::Identifier(id) => vec![id.clone()],
            ast::Expr::CompoundIdentifier(ids) => ids.clone(),
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. } => {
                err = Some(unsupported("IN over a correlated subquery on a subquery"));
                return std::ops::ControlFlow::<()>::Continue(());
            }
            _ => return std::ops::ControlFlow::Continue(()),
        };
        match scope.resolve(&ids) {
            Ok(c) => {
                let col = &scope.cols[c];
                if col.qualifier.is_empty() || inner_names.contains(&col.qualifier) {
                    err = Some(unsupported(
                        "IN over a correlated subquery naming an outer table again",
                    ));
                } else {
                    *e = ast::Expr::CompoundIdentifier(vec![
                        ast::Ident::new(col.qualifier.clone()),
                        ast::Ident::new(col.name.clone()),
                    ]);
                }
            }
            Err(e) => err = Some(e),
        }
        std::ops::ControlFlow::Continue(())
    });
    match err {
        Some(e) => Err(e),
        None => Ok(x),
    }
}

/// The names (lower-cased tables or aliases) a SELECT's FROM gives its
/// relations.
fn from_names(s: &ast::Select) -> Vec<String> {
    s.from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
        .filter_map(|f| match f {
            ast::TableFactor::Table { name, alias, .. } => Some(
                alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .or_else(|| name.0.last().map(|i| i.value.clone()))
                    .unwrap_or_default()
                    .to_ascii_lowercase(),
            ),
            ast::TableFactor::Derived { alias, .. } => {
                alias.as_ref().map(|a| a.name.value.to_ascii_lowercase())
            }
            _ => None,
        })
        .collect()
}

/// `sub` (`SELECT y FROM ... WHERE w`) as `SELECT y FROM ... WHERE (w) AND
/// cond(y)`, for rewriting `x IN (sub)` into EXISTS forms.
pub(super) fn subquery_and(
    sub: &ast::Query,
    cond: impl Fn(ast::Expr) -> ast::Expr,
) -> Result<ast::Query> {
    let mut q = sub.clone();
    let ast::SetExpr::Select(s) = &mut *q.body else {
        return Err(unsupported("IN over this correlated subquery"));
    };
    let y = match s.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }] => {
            e.clone()
        }
        _ => {
            return Err(DataflowError::BadArgument(
                "Operand should contain 1 column(s)".into(),
            ))
        }
    };
    let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    if grouped || s.having.is_some() || q.limit.is_some() || q.offset.is_some() {
        return Err(unsupported("IN over this correlated subquery"));
    }
    let c = cond(ast::Expr::Nested(Box::new(y)));
    s.selection = Some(match s.selection.take() {
        Some(w) => ast::Expr::BinaryOp {
            left: Box::new(ast::Expr::Nested(Box::new(w))),
            op: ast::BinaryOperator::And,
            right: Box::new(c),
        },
        None => c,
    });
    Ok(q)
}

/// `x IN (SELECT y ... correlated)` as a value, from three EXISTS: 1 when
/// some `y = x`; else 0 when the subquery is empty; else NULL when `x` or
/// some `y` is NULL; else 0.
pub(super) fn correlated_in_value(
    x: &ast::Expr,
    sub: &ast::Query,
    scope: &Scope,
) -> Result<ast::Expr> {
    let x = qualify_outer(x, scope, sub)?;
    let exists = |q: ast::Query| ast::Expr::Exists {
        subquery: Box::new(q),
        negated: false,
    };
    let matched = exists(subquery_and(sub, |y| ast::Expr::BinaryOp {
        left: Box::new(y),
        op: ast::BinaryOperator::Eq,
        right: Box::new(x.clone()),
    })?);
    let any = exists(subquery_and(sub, |_| {
        ast::Expr::Value(ast::Value::Boolean(true))
    })?);
    let null_y = exists(subquery_and(sub, |y| ast::Expr::IsNull(Box::new(y)))?);
    Ok(ast::Expr::Case {
        operand: None,
        conditions: vec![
            matched,
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Not,
                expr: Box::new(any),
            },
            ast::Expr::BinaryOp {
                left: Box::new(ast::Expr::IsNull(Box::new(x))),
                op: ast::BinaryOperator::Or,
                right: Box::new(null_y),
            },
        ],
        results: vec![number("1"), number("0"), ast::Expr::Value(ast::Value::Null)],
        else_result: Some(Box::new(number("0"))),
    })
}

/// Whether `c` reads a column of the outer query: one `inner` does not
/// have and `outer` does.
pub(super) fn scope_reads_outer(c: &ast::Expr, inner: &Scope, outer: &Scope) -> bool {
    !outer_columns_read(c, inner, outer).is_empty()
}

/// The columns of `outer` that `c` reads (those `inner` does not have),
/// sorted.
pub(super) fn outer_columns_read(c: &ast::Expr, inner: &Scope, outer: &Scope) -> Vec<usize> {
    let mut cols = Vec::new();
    let _ = ast::visit_expressions(c, |e| {
        let ids = match e {
            ast::Expr::Identifier(id) => std::slice::from_ref(id),
            ast::Expr::CompoundIdentifier(ids) => ids.as_slice(),
            _ => return std::ops::ControlFlow::<()>::Continue(()),
        };
        if inner.resolve(ids).is_err() {
            if let Ok(o) = outer.resolve(ids) {
                cols.push(o);
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    cols.sort_unstable();
    cols.dedup();
    cols
}

/// Whether `e` is NULL whenever a column it reads is NULL: columns,
/// literals, arithmetic and functions that give NULL for a NULL argument.
fn strict(e: &ast::Expr) -> bool {
    use ast::BinaryOperator as B;
    match e {
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) | ast::Expr::Value(_) => true,
        ast::Expr::Nested(x) | ast::Expr::Extract { expr: x, .. } => strict(x),
        ast::Expr::Cast { expr, .. } => strict(expr),
        ast::Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            strict(expr)
                && substring_from.as_deref().is_none_or(strict)
                && substring_for.as_deref().is_none_or(strict)
        }
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus | ast::UnaryOperator::Plus,
            expr,
        } => strict(expr),
        ast::Expr::BinaryOp { left, op, right } => {
            matches!(
                op,
                B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo | B::MyIntegerDivide
            ) && strict(left)
                && strict(right)
        }
        ast::Expr::Function(f) => {
            let name = f.name.to_string().to_ascii_lowercase();
            let null_in_null_out = matches!(
                name.as_str(),
                "year"
                    | "month"
                    | "day"
                    | "dayofmonth"
                    | "hour"
                    | "minute"
                    | "second"
                    | "date"
                    | "lower"
                    | "upper"
                    | "length"
                    | "char_length"
                    | "abs"
                    | "round"
                    | "floor"
                    | "ceil"
                    | "ceiling"
                    | "concat"
                    | "date_format"
                    | "replace"
                    | "left"
                    | "right"
                    | "substr"
                    | "trim"
                    | "ltrim"
                    | "rtrim"
            );
            let args_strict = match &f.args {
                ast::FunctionArguments::List(l) => l.args.iter().all(|a| {
                    matches!(a, ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) if strict(x))
                }),
                _ => false,
            };
            null_in_null_out && f.over.is_none() && f.filter.is_none() && args_strict
        }
        _ => false,
    }
}

/// Whether a scalar subquery's value `agg` (an aggregate over the inner
/// rows) is NULL, or a COUNT 0, for an outer row with a NULL in a column
/// it reads (`reads_outer`): its argument is [`strict`], or a subquery
/// that is then empty ([`nested_null_rejecting`]).
pub(super) fn value_null_for_null_outer(
    agg: &ast::Expr,
    reads_outer: &dyn Fn(&ast::Expr) -> Vec<usize>,
) -> bool {
    let ast::Expr::Function(f) = agg else {
        return false;
    };
    let name = f.name.to_string().to_ascii_lowercase();
    let ast::FunctionArguments::List(l) = &f.args else {
        return false;
    };
    let arg = match l.args.as_slice() {
        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))] => strip_parens(x),
        _ => return false,
    };
    let value_ok = match arg {
        ast::Expr::Subquery(q) => nested_null_rejecting(q, reads_outer),
        x => strict(x),
    };
    matches!(name.as_str(), "max" | "min" | "sum" | "avg" | "count")
        && l.duplicate_treatment.is_none()
        && f.over.is_none()
        && f.filter.is_none()
        && value_ok
}

/// Whether a correlated condition is false or NULL whenever a column it
/// reads is NULL: a comparison of columns, literals, arithmetic and
/// functions that give NULL for a NULL argument; an AND or OR of such
/// conditions (each side of an OR reading the same outer columns, as
/// `reads_outer` lists them). For those, an outer row
/// whose correlation values include a NULL matches no inner row, which
/// the decorrelated plan relies on.
pub(super) fn null_rejecting(
    e: &ast::Expr,
    reads_outer: &dyn Fn(&ast::Expr) -> Vec<usize>,
) -> bool {
    use ast::BinaryOperator as B;
    match e {
        ast::Expr::Nested(x) => null_rejecting(x, reads_outer),
        ast::Expr::BinaryOp {
            left,
            op: B::Or,
            right,
        } => {
            // Each side must fail for a NULL in any outer column either reads.
            reads_outer(left) == reads_outer(right)
                && null_rejecting(left, reads_outer)
                && null_rejecting(right, reads_outer)
        }
        ast::Expr::BinaryOp {
            left,
            op: B::And,
            right,
        } => null_rejecting(left, reads_outer) && null_rejecting(right, reads_outer),
        ast::Expr::BinaryOp {
            left,
            op: B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq,
            right,
        } => strict(left) && strict(right),
        ast::Expr::Between {
            expr, low, high, ..
        } => strict(expr) && strict(low) && strict(high),
        ast::Expr::Like {
            expr,
            pattern,
            escape_char: None,
            ..
        } => strict(expr) && strict(pattern),
        // NOT of a comparison is NULL for a NULL operand too.
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Not,
            expr,
        } => match strip_parens(expr) {
            ast::Expr::BinaryOp {
                left,
                op: B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq,
                right,
            } => strict(left) && strict(right),
            _ => false,
        },
        ast::Expr::Exists {
            subquery,
            negated: false,
        } => nested_null_rejecting(subquery, reads_outer),
        ast::Expr::InSubquery {
            expr,
            subquery,
            negated: false,
        } => {
            (reads_outer(expr).is_empty() || strict(expr))
                && nested_null_rejecting(subquery, reads_outer)
        }
        _ => false,
    }
}

fn strip_parens(e: &ast::Expr) -> &ast::Expr {
    match e {
        ast::Expr::Nested(x) => strip_parens(x),
        other => other,
    }
}

/// Whether a nested subquery under EXISTS or IN is empty when a column of
/// the outer query it reads is NULL: it reads them only in WHERE
/// conjuncts that are [`null_rejecting`], and has no aggregate, GROUP BY
/// or HAVING (a COUNT over no rows is a row).
fn nested_null_rejecting(q: &ast::Query, reads_outer: &dyn Fn(&ast::Expr) -> Vec<usize>) -> bool {
    let ast::SetExpr::Select(s) = &*q.body else {
        return false;
    };
    let plain = matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
        && s.having.is_none()
        && s.projection.iter().all(|item| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                let mut aggs = Vec::new();
                collect_aggregates(e, &mut aggs);
                aggs.is_empty() && reads_outer(e).is_empty()
            }
            _ => true,
        });
    let joins_read_outer = s.from.iter().flat_map(|t| &t.joins).any(|j| {
        let constraint = match &j.join_operator {
            ast::JoinOperator::Inner(c)
            | ast::JoinOperator::LeftOuter(c)
            | ast::JoinOperator::RightOuter(c) => c,
            _ => return true,
        };
        matches!(constraint, ast::JoinConstraint::On(e) if !reads_outer(e).is_empty())
    });
    let mut conj = Vec::new();
    if let Some(w) = &s.selection {
        split_conjuncts(w, &mut conj);
    }
    plain
        && !joins_read_outer
        && conj
            .iter()
            .all(|c| reads_outer(c).is_empty() || null_rejecting(c, reads_outer))
}

/// Refuses a correlated condition with nested subqueries whose outer
/// references might be the nested queries' own columns: an unqualified
/// one, or one qualified by a name a nested FROM uses too.
fn outer_references_unambiguous(r: &ast::Expr, inner: &Scope, outer: &Scope) -> Result<()> {
    let mut nested_names = Vec::new();
    let _ = ast::visit_expressions(r, |e| {
        if let ast::Expr::Subquery(q)
        | ast::Expr::Exists { subquery: q, .. }
        | ast::Expr::InSubquery { subquery: q, .. } = e
        {
            if let ast::SetExpr::Select(s) = &*q.body {
                nested_names.extend(from_names(s));
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    let mut ambiguous = false;
    let _ = ast::visit_expressions(r, |e| {
        let ids = match e {
            ast::Expr::Identifier(id) => std::slice::from_ref(id),
            ast::Expr::CompoundIdentifier(ids) => ids.as_slice(),
            _ => return std::ops::ControlFlow::<()>::Continue(()),
        };
        if inner.resolve(ids).is_err() && outer.resolve(ids).is_ok() {
            ambiguous |= ids.len() < 2
                || nested_names.contains(&ids[ids.len() - 2].value.to_ascii_lowercase());
        }
        std::ops::ControlFlow::Continue(())
    });
    if ambiguous {
        return Err(unsupported(
            "a nested subquery naming the outer query's columns unqualified or by its own table names",
        ));
    }
    Ok(())
}
