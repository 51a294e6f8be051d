//! Scalar subqueries (`(SELECT agg(x) FROM ... WHERE inner = outer)`) as
//! LEFT JOINs with an aggregate grouped by the correlation columns: the
//! subquery's shape ([`ScalarShape`]), its correlation, and the join.

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::correlated::{outer_columns_read, scope_reads_outer, value_null_for_null_outer};
use super::expr::{aggregate_name, norm, unsupported, ExprCx, Scope, ScopeCol};
use super::query::Planner;
use super::relation::{stable, Correlated};
use super::select_state::SelectState;
use super::syntax::{as_column, call, has_subquery, number, select_from};
use crate::expr::Expr;
use crate::ops::{AggKind, AggSpec, JoinKind};
use crate::plan::{LNode, LOp};
use crate::{DataflowError, Result};

/// The rows of `inner` that come first, per correlation key (`keys`), in
/// the order `order` (`ORDER BY z1 [DESC], ...`): for each `z` in turn,
/// its extreme per key (MIN or MAX, maintained) joins back the rows that
/// have it. Ties remain; `(SELECT y ... LIMIT 1)` takes MAX(y) of them,
/// one of the rows MySQL may return. Each `z` must be NOT NULL: MIN/MAX
/// skip NULLs, which MySQL sorts first (ascending) or last (descending).
pub(super) fn first_in_order(
    inner: LNode,
    iscope: &Scope,
    keys: &[usize],
    order: &[ast::OrderByExpr],
) -> Result<LNode> {
    let width = inner.width();
    let k = keys.len();
    let mut rows = inner;
    for o in order {
        let z = stable(ExprCx::row(iscope).compile(&o.expr)?)?;
        let (_, nullable) = z.result_type(&iscope.types());
        if nullable {
            return Err(unsupported(
                "ORDER BY a nullable expression in a scalar subquery with LIMIT 1",
            ));
        }
        let zcoll = match &z {
            Expr::Column(c) => rows.colls[*c],
            _ => Collation::GeneralCi,
        };
        let mut zcolls = rows.colls.clone();
        zcolls.push(zcoll);
        let with_z = LNode {
            op: LOp::Project((0..width).map(Expr::Column).chain([z]).collect()),
            inputs: vec![rows],
            colls: zcolls.clone(),
        };
        let mut kcolls: Vec<Collation> = keys.iter().map(|&c| zcolls[c]).collect();
        kcolls.push(zcoll);
        let mut spec = AggSpec::new(
            if o.asc == Some(false) {
                AggKind::Max
            } else {
                AggKind::Min
            },
            k,
        );
        spec.collation = zcoll;
        let extreme = LNode {
            op: LOp::Aggregate {
                ngroup: k,
                aggs: vec![spec],
                scalar: false,
            },
            inputs: vec![LNode {
                op: LOp::Project(
                    keys.iter()
                        .map(|&c| Expr::Column(c))
                        .chain([Expr::Column(width)])
                        .collect(),
                ),
                inputs: vec![with_z.clone()],
                colls: kcolls.clone(),
            }],
            colls: kcolls.clone(),
        };
        let mut jcolls = zcolls.clone();
        jcolls.extend(kcolls);
        let joined = LNode {
            op: LOp::Join {
                kind: JoinKind::Inner,
                left_cols: keys.iter().copied().chain([width]).collect(),
                right_cols: (0..=k).collect(),
            },
            inputs: vec![with_z, extreme],
            colls: jcolls,
        };
        rows = LNode {
            op: LOp::Project((0..width).map(Expr::Column).collect()),
            colls: zcolls[..width].to_vec(),
            inputs: vec![joined],
        };
    }
    Ok(rows)
}

impl Planner<'_> {
    /// A scalar subquery joined into `node` (LEFT, on its correlation
    /// columns); returns the expression that reads its value.
    ///
    /// Django's forms are taken apart first: `ORDER BY NULL` (or any
    /// ORDER BY without LIMIT) orders nothing, and `GROUP BY` on the inner side of `inner = outer`
    /// correlations makes no more than one group per outer row (but no
    /// group, so NULL, where no row matches: COUNT is then not 0).
    ///
    /// An uncorrelated subquery of a shape the join cannot take (GROUP BY
    /// a column, LIMIT with OFFSET, a UNION) is read through a derived
    /// table: `(SELECT __sqd.__v FROM (q) AS __sqd)`, whose rows the
    /// derived table's own plan maintains.
    pub(super) fn scalar_subquery(
        &self,
        q: &ast::Query,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let (saved_node, saved_scope) = (node.clone(), scope.clone());
        match self.scalar_subquery_joined(q, node, scope, n) {
            // `(SELECT x FROM (<reads the outer row>) u ORDER BY x LIMIT 1)`
            // (MySQL 8.0.14's outer references in a derived table): the
            // derived table's query with that ORDER BY and LIMIT.
            Err(DataflowError::UnknownColumn(..)) if self.lift_derived(q).is_some() => {
                *node = saved_node;
                *scope = saved_scope;
                let lifted = self
                    .lift_derived(q)
                    .ok_or_else(|| unsupported("this scalar subquery"))?;
                self.scalar_subquery(&lifted, node, scope, n)
            }
            Err(DataflowError::Unsupported(why)) => {
                *node = saved_node;
                *scope = saved_scope;
                let planned_alone = self.relation(q);
                if let Err(e @ DataflowError::AmbiguousColumn(..)) = planned_alone {
                    // Its own name error, not a shape Ladle lacks.
                    return Err(e);
                }
                if matches!(&*q.body, ast::SetExpr::SetOperation { .. })
                    && matches!(planned_alone, Err(DataflowError::UnknownColumn(..)))
                {
                    // Its branches read the outer query: each planned over
                    // the outer values it reads (see `scalar_union`).
                    return self.scalar_subquery_union(q, node, scope, n);
                }
                let Some(derived) = over_derived(q).filter(|_| planned_alone.is_ok()) else {
                    return Err(DataflowError::Unsupported(why));
                };
                self.scalar_subquery_joined(&derived, node, scope, n)
            }
            other => other,
        }
    }

    /// [`Self::scalar_subquery`] as a join of the subquery's own rows.
    fn scalar_subquery_joined(
        &self,
        q: &ast::Query,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let mut q = q.clone();
        // Without LIMIT, an order does not change the (one) value.
        if q.limit.is_none() && q.offset.is_none()
            || q.order_by.as_ref().is_some_and(|ob| {
                ob.exprs
                    .iter()
                    .all(|o| matches!(o.expr, ast::Expr::Value(ast::Value::Null)))
            })
        {
            q.order_by = None;
        }
        if let Some(rows) = self.groups_of_one_row(&q) {
            q = rows;
        }
        let mut grouped = Vec::new();
        if let ast::SetExpr::Select(s) = &mut *q.body {
            if let ast::GroupByExpr::Expressions(g, mods) = &mut s.group_by {
                if mods.is_empty() && s.having.is_none() {
                    grouped = std::mem::take(g);
                }
            }
        }
        self.scalar_subquery_grouped(&q, &grouped, node, scope, n)
    }

    /// `(SELECT agg(..) FROM t ... GROUP BY <a key of t> [HAVING h] LIMIT
    /// 1)` (Django's `.values(pk).annotate(..)[:1]`): each group is one
    /// row, so it reads as `(SELECT <agg of that row> FROM t WHERE ... AND
    /// <h of that row> LIMIT 1)`, any row's value. COUNT, MIN and MAX
    /// only (a one-row SUM or AVG has a type of its own); `None` for
    /// other shapes.
    fn groups_of_one_row(&self, q: &ast::Query) -> Option<ast::Query> {
        let one = matches!(&q.limit, Some(ast::Expr::Value(ast::Value::Number(n, _))) if n == "1");
        let ast::SetExpr::Select(s) = &*q.body else {
            return None;
        };
        let ast::GroupByExpr::Expressions(g, mods) = &s.group_by else {
            return None;
        };
        if !one || q.offset.is_some() || q.order_by.is_some() || g.is_empty() || !mods.is_empty() {
            return None;
        }
        if s.from.len() != 1 || !s.from[0].joins.is_empty() || s.distinct.is_some() {
            return None;
        }
        let (node, scope) = self.plan_from(&s.from, &mut Vec::new()).ok()?;
        let cols = g
            .iter()
            .map(|e| scope.resolve(as_column(e)?).ok())
            .collect::<Option<Vec<usize>>>()?;
        if !keyed_by_unique(&node, &cols) {
            return None;
        }
        let mut s2 = s.clone();
        for item in &mut s2.projection {
            match item {
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => *e = aggregates_of_one_row(e)?,
                _ => return None,
            }
        }
        if let Some(h) = s2.having.take() {
            let h = aggregates_of_one_row(&h)?;
            s2.selection = Some(match s2.selection.take() {
                Some(w) => ast::Expr::BinaryOp {
                    left: Box::new(ast::Expr::Nested(Box::new(w))),
                    op: ast::BinaryOperator::And,
                    right: Box::new(ast::Expr::Nested(Box::new(h))),
                },
                None => h,
            });
        }
        s2.group_by = ast::GroupByExpr::Expressions(vec![], vec![]);
        let mut q2 = q.clone();
        *q2.body = ast::SetExpr::Select(s2);
        Some(q2)
    }

    pub(super) fn scalar_subquery_grouped(
        &self,
        q: &ast::Query,
        grouped: &[ast::Expr],
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let shape = ScalarShape::of(q)?;
        let correlated = self.plan_correlated(
            shape.select,
            scope,
            "a scalar subquery",
            "correlated condition other than equality",
        )?;
        self.scalar_of_rows(q, shape, grouped, correlated, node, scope, n)
    }

    /// The value of scalar subquery `q` (of shape `shape`) over its planned
    /// rows `correlated`, joined into `node`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scalar_of_rows(
        &self,
        q: &ast::Query,
        shape: ScalarShape<'_>,
        grouped: &[ast::Expr],
        mut correlated: Correlated,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        // Correlated on a key of its one table, the subquery has one row
        // at most: no row count to check at read time.
        let at_most_one_row = keyed_by_unique(&correlated.inner, &correlated.inner_cols);
        // Window calls: columns of the inner rows, partitioned by the
        // correlation columns (each outer row sees its own rows only).
        let windowed = self.correlated_windows(shape.select, q, &mut correlated)?;
        let ScalarShape {
            select: _,
            value: mut agg,
            top1_desc,
            first_by,
            single,
        } = match &windowed {
            Some(q) => ScalarShape::of(q)?,
            None => shape,
        };
        // `(SELECT y ... LIMIT 1)` without ORDER BY (Django's `[:1]`):
        // MariaDB returns the first row it reads, in primary key order when
        // it scans one table (also within one value of a secondary key);
        // the same row here, when the subquery reads one table.
        let first_by = match first_by {
            None if windowed.is_none() && unordered_limit_one(q) => {
                primary_key_order(&correlated.scope)
            }
            other => other,
        };
        let single = single && !at_most_one_row;
        let agg_name = aggregate_name(&agg).unwrap_or_default();
        // A value reading the outer row (`(SELECT o.x + U0.y FROM U0 ...)`,
        // or through a nested subquery): computed over the outer query's
        // distinct values, when it is NULL (a COUNT 0) for a NULL in them,
        // as an outer row with one then joins no group.
        if scope_reads_outer(&agg, &correlated.scope, scope) {
            let reads_outer = |e: &ast::Expr| outer_columns_read(e, &correlated.scope, scope);
            if !grouped.is_empty() || !value_null_for_null_outer(&agg, &reads_outer) {
                return Err(unsupported(
                    "a scalar subquery whose value reads the outer query",
                ));
            }
            correlated = self.decorrelate(node, scope, correlated, n, Some(&mut agg))?;
        }
        if has_subquery(&agg) {
            // `(SELECT EXISTS(SELECT ... WHERE U0.x = V0.id) FROM V0 ...)`:
            // a subquery in the value over the inner rows only joins them.
            if scope_reads_outer(&agg, &correlated.scope, scope) {
                return Err(unsupported(
                    "a subquery reading the outer query inside a scalar subquery's value",
                ));
            }
            let mut nested = 2000;
            self.rewrite_subqueries(
                &mut agg,
                &mut correlated.inner,
                &mut correlated.scope,
                &mut nested,
            )?;
        }
        for g in grouped {
            let by_key = as_column(g)
                .and_then(|ids| correlated.scope.resolve(ids).ok())
                .is_some_and(|c| correlated.inner_cols.contains(&c));
            if !by_key {
                return Err(unsupported(
                    "GROUP BY other than the correlation columns in a scalar subquery",
                ));
            }
        }
        if !correlated.residual.is_empty() {
            correlated = self.decorrelate(node, scope, correlated, n, None)?;
        }
        let reads_outer = |e: DataflowError, iscope: &Scope| match e {
            DataflowError::UnknownColumn(..) if scope_reads_outer(&agg, iscope, scope) => {
                unsupported("a scalar subquery whose value reads the outer query")
            }
            other => other,
        };
        if let Some(order) = &first_by {
            correlated.inner = first_in_order(
                correlated.inner,
                &correlated.scope,
                &correlated.inner_cols,
                order,
            )
            .map_err(|e| reads_outer(e, &correlated.scope))?;
        }
        // Uncorrelated: a one-row aggregate joined to every row (key []).
        let k = correlated.inner_cols.len();
        let iscope = &correlated.scope;
        let row_cx = ExprCx::row(iscope);
        let (mut spec, arg, (ty, _, coll)) = self
            .agg_spec(&agg, &row_cx, k)
            .map_err(|e| reads_outer(e, iscope))?;
        // The outer query reads the value as a top-level aggregate's
        // (an AVG's quotient digits, see `ScopeCol::shown`); uncorrelated,
        // it aggregates a quotient's full digits, as an ungrouped one does.
        let (arg, shown) =
            super::aggregate::exact_reading(&mut spec, arg, &ty, k == 0, &iscope.types());
        // `ORDER BY y LIMIT 1` over a nullable y: MySQL sorts NULL first,
        // which MIN skips; whether some y is NULL is kept beside it.
        let nulls_first = top1_desc == Some(false) && arg.result_type(&iscope.types()).1;
        let value = ScalarAggregate {
            spec,
            arg,
            ty,
            coll,
            single,
            nulls_first,
            shown,
        };
        let qual = join_scalar_aggregate(node, scope, correlated, value, n);
        let col = ast::Expr::CompoundIdentifier(vec![
            ast::Ident::new(qual.clone()),
            ast::Ident::new("__v"),
        ]);
        if nulls_first {
            let z =
                ast::Expr::CompoundIdentifier(vec![ast::Ident::new(qual), ast::Ident::new("__z")]);
            return Ok(ast::Expr::Case {
                operand: None,
                conditions: vec![ast::Expr::BinaryOp {
                    left: Box::new(z),
                    op: ast::BinaryOperator::Eq,
                    right: Box::new(number("1")),
                }],
                results: vec![ast::Expr::Value(ast::Value::Null)],
                else_result: Some(Box::new(col)),
            });
        }
        if single {
            let n =
                ast::Expr::CompoundIdentifier(vec![ast::Ident::new(qual), ast::Ident::new("__n")]);
            return Ok(call(super::expr::SINGLE_ROW_FN, vec![n, col]));
        }
        if agg_name == "count" && grouped.is_empty() {
            // COUNT over no rows is 0, not NULL.
            return Ok(call("COALESCE", vec![col, number("0")]));
        }
        Ok(col)
    }
}

impl Planner<'_> {
    /// The window calls of a correlated scalar subquery `q` (over `s`)
    /// planned over its inner rows, each window partitioned by the
    /// correlation columns too; returns `q` with each call replaced by its
    /// column, or `None` when it has none.
    fn correlated_windows(
        &self,
        s: &ast::Select,
        q: &ast::Query,
        correlated: &mut Correlated,
    ) -> Result<Option<ast::Query>> {
        let mut st = SelectState {
            node: LNode::take(&mut correlated.inner),
            scope: std::mem::take(&mut correlated.scope),
            window: None,
            nsub: 0,
            key_frame: correlated.inner_cols.iter().map(|&c| (c, vec![])).collect(),
            key_conjuncts: Vec::new(),
            read_filters: Vec::new(),
            narrowed_slot: None,
            never_null: Vec::new(),
        };
        let planned = self.window_functions(&mut st, s, q);
        // What the ORDER BY ... LIMIT 1 reads may rely on the never-NULL
        // ones (this scope is never a result's metadata).
        for &c in &st.never_null {
            st.scope.cols[c].nullable = false;
        }
        correlated.inner = st.node;
        correlated.scope = st.scope;
        let Some((s2, mut q2)) = planned? else {
            return Ok(None);
        };
        if !correlated.residual.is_empty() {
            return Err(unsupported(
                "window functions in a scalar subquery correlated other than by equality",
            ));
        }
        // Without LIMIT the order changes nothing (see `scalar_subquery`),
        // and no order is made up for the windows' sake.
        if q.order_by.is_none() {
            q2.order_by = None;
        }
        *q2.body = ast::SetExpr::Select(Box::new(s2));
        Ok(Some(q2))
    }
}

/// `e` with each aggregate over one row replaced by its value there:
/// COUNT(*) is 1, COUNT(x) whether x is not NULL, MIN(x) and MAX(x) are
/// x; `None` when `e` has another aggregate.
fn aggregates_of_one_row(e: &ast::Expr) -> Option<ast::Expr> {
    let mut e = e.clone();
    let mut other = false;
    let _ = ast::visit_expressions_mut(&mut e, |x| {
        let Some(name) = aggregate_name(x) else {
            return std::ops::ControlFlow::<()>::Continue(());
        };
        let ast::Expr::Function(f) = &*x else {
            other = true;
            return std::ops::ControlFlow::Break(());
        };
        let arg = match &f.args {
            ast::FunctionArguments::List(l)
                if l.duplicate_treatment.is_none() && f.filter.is_none() && f.over.is_none() =>
            {
                match l.args.as_slice() {
                    [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)] => None,
                    [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a))] => Some(a.clone()),
                    _ => {
                        other = true;
                        return std::ops::ControlFlow::Break(());
                    }
                }
            }
            _ => {
                other = true;
                return std::ops::ControlFlow::Break(());
            }
        };
        *x = match (name.as_str(), arg) {
            ("count", None) => number("1"),
            ("count", Some(a)) => ast::Expr::Case {
                operand: None,
                conditions: vec![ast::Expr::IsNull(Box::new(a))],
                results: vec![number("0")],
                else_result: Some(Box::new(number("1"))),
            },
            ("min" | "max", Some(a)) => ast::Expr::Nested(Box::new(a)),
            _ => {
                other = true;
                return std::ops::ControlFlow::Break(());
            }
        };
        std::ops::ControlFlow::Continue(())
    });
    (!other).then_some(e)
}

/// Whether `inner` is one table's rows (filtered) and `cols` cover its
/// primary key or a UNIQUE index, so that equal values in them pick one
/// row at most.
fn keyed_by_unique(inner: &LNode, cols: &[usize]) -> bool {
    let Some(t) = inner.filtered_table() else {
        return false;
    };
    let covered = |key: &[usize]| !key.is_empty() && key.iter().all(|c| cols.contains(c));
    t.primary_key.as_deref().is_some_and(covered)
        || t.indexes.iter().any(|i| i.unique && covered(&i.columns))
}

/// What a scalar subquery computes: its SELECT, the aggregate giving its
/// value, and how its ORDER BY ... LIMIT 1 reads.
pub(super) struct ScalarShape<'q> {
    select: &'q ast::Select,
    /// The aggregate (a bare value `y` becomes MAX(y) or MIN(y)).
    value: ast::Expr,
    /// `ORDER BY y [DESC] LIMIT 1` over the value itself: whether DESC.
    top1_desc: Option<bool>,
    /// `ORDER BY z... LIMIT 1` over other expressions: the rows first in
    /// that order are taken first.
    first_by: Option<Vec<ast::OrderByExpr>>,
    /// The value is a bare `y` that must come from a single row: the row
    /// count is computed too, and read time checks it (MySQL error 1242).
    single: bool,
}

impl<'q> ScalarShape<'q> {
    pub(super) fn of(q: &'q ast::Query) -> Result<ScalarShape<'q>> {
        let ast::SetExpr::Select(s) = &*q.body else {
            return Err(unsupported("this scalar subquery"));
        };
        let agg = match &s.projection.first() {
            Some(ast::SelectItem::UnnamedExpr(e))
            | Some(ast::SelectItem::ExprWithAlias { expr: e, .. }) => e.clone(),
            _ => return Err(unsupported("this scalar subquery")),
        };
        // `(SELECT y ... ORDER BY y [DESC] LIMIT 1)` is MAX(y) (MIN(y)).
        let top1_desc = match (&q.order_by, &q.limit, &q.offset) {
            (Some(ob), Some(ast::Expr::Value(ast::Value::Number(one, _))), None)
                if one == "1"
                    && ob.interpolate.is_none()
                    && ob.exprs.len() == 1
                    && ob.exprs[0].nulls_first.is_none()
                    && ob.exprs[0].with_fill.is_none()
                    && aggregate_name(&agg).is_none()
                    && orders_by_value(s, &ob.exprs[0].expr, &agg) =>
            {
                Some(ob.exprs[0].asc == Some(false))
            }
            _ => None,
        };
        // `(SELECT y ... LIMIT 1)` without ORDER BY may give any row's y:
        // MAX(y) is one of them, and never several rows. With `ORDER BY
        // z...` the rows first narrow to those first in that order.
        let limit_one = q.offset.is_none()
            && matches!(&q.limit, Some(ast::Expr::Value(ast::Value::Number(one, _))) if one == "1");
        let first_by = match &q.order_by {
            Some(ob) if limit_one && top1_desc.is_none() && aggregate_name(&agg).is_none() => {
                Some(first_by_order(s, ob, &agg)?)
            }
            _ => None,
        };
        let any_row = limit_one && (q.order_by.is_none() || first_by.is_some());
        let simple = s.from.len() == 1
            && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            && s.having.is_none()
            && s.distinct.is_none()
            && ((q.order_by.is_none() && q.limit.is_none()) || top1_desc.is_some() || any_row)
            && s.projection.len() == 1;
        if !simple {
            return Err(unsupported("this scalar subquery"));
        }
        // Without an aggregate, `(SELECT y ...)` is MAX(y) plus the row
        // count, which read time checks (MySQL error 1242 for several rows).
        let (value, single) = match aggregate_name(&agg) {
            Some(_) => (agg, false),
            None if any_row => (call("MAX", vec![agg]), false),
            None => {
                let extreme = match top1_desc {
                    Some(false) => "MIN",
                    _ => "MAX",
                };
                (call(extreme, vec![agg]), top1_desc.is_none())
            }
        };
        Ok(ScalarShape {
            select: s,
            value,
            top1_desc,
            first_by,
            single,
        })
    }
}

/// Whether `ORDER BY o` orders by the select list's only value: `o` is
/// that expression, `1` or its alias (Django's `ORDER BY 1 DESC`).
fn orders_by_value(s: &ast::Select, o: &ast::Expr, value: &ast::Expr) -> bool {
    let alias = match s.projection.first() {
        Some(ast::SelectItem::ExprWithAlias { alias, .. }) => Some(&alias.value),
        _ => None,
    };
    match o {
        ast::Expr::Value(ast::Value::Number(n, _)) => n == "1",
        ast::Expr::Identifier(id) if alias.is_some_and(|a| a.eq_ignore_ascii_case(&id.value)) => {
            true
        }
        o => norm(o) == norm(value),
    }
}

/// Whether `q` is `SELECT y ... LIMIT 1` without ORDER BY, OFFSET or an
/// aggregate.
fn unordered_limit_one(q: &ast::Query) -> bool {
    let one = matches!(&q.limit, Some(ast::Expr::Value(ast::Value::Number(n, _))) if n == "1");
    let ast::SetExpr::Select(s) = &*q.body else {
        return false;
    };
    let plain = match s.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }] => {
            aggregate_name(e).is_none()
        }
        _ => false,
    };
    one && plain && q.order_by.is_none() && q.offset.is_none()
}

/// The primary key of the one base table `scope` reads, as an ORDER BY;
/// `None` when it reads several (or a column of no table) or the table
/// has none.
fn primary_key_order(scope: &Scope) -> Option<Vec<ast::OrderByExpr>> {
    let table = &scope.cols.first()?.origin.as_ref()?.table;
    let one_table = scope.cols.iter().all(|c| {
        c.origin
            .as_ref()
            .is_some_and(|o| std::sync::Arc::ptr_eq(&o.table, table))
    });
    let pk = table.primary_key.as_ref().filter(|pk| !pk.is_empty())?;
    if !one_table {
        return None;
    }
    pk.iter()
        .map(|&column| {
            let c = scope
                .cols
                .iter()
                .find(|c| c.origin.as_ref().is_some_and(|o| o.column == column))?;
            Some(ast::OrderByExpr {
                expr: ast::Expr::CompoundIdentifier(vec![
                    ast::Ident::new(c.qualifier.clone()),
                    ast::Ident::new(c.name.clone()),
                ]),
                asc: None,
                nulls_first: None,
                with_fill: None,
            })
        })
        .collect()
}

/// `ORDER BY z... LIMIT 1`'s order, with `ORDER BY 1` or the select
/// list's alias read as the select list's only column.
fn first_by_order(
    s: &ast::Select,
    ob: &ast::OrderBy,
    value: &ast::Expr,
) -> Result<Vec<ast::OrderByExpr>> {
    if ob.interpolate.is_some()
        || ob
            .exprs
            .iter()
            .any(|o| o.nulls_first.is_some() || o.with_fill.is_some())
    {
        return Err(unsupported("this scalar subquery"));
    }
    // `ORDER BY 1` or the alias: the select list's only column.
    let alias = match s.projection.first() {
        Some(ast::SelectItem::ExprWithAlias { alias, .. }) => Some(&alias.value),
        _ => None,
    };
    let mut order = ob.exprs.clone();
    for o in &mut order {
        if let ast::Expr::Identifier(id) = &o.expr {
            if alias.is_some_and(|a| a.eq_ignore_ascii_case(&id.value)) {
                o.expr = value.clone();
            }
        }
        if let ast::Expr::Value(ast::Value::Number(n, _)) = &o.expr {
            if n != "1" {
                return Err(DataflowError::UnknownColumn(
                    n.clone(),
                    "order clause".into(),
                ));
            }
            o.expr = value.clone();
        }
    }
    Ok(order)
}

/// A scalar subquery's aggregate over its inner rows.
struct ScalarAggregate {
    spec: AggSpec,
    arg: Expr,
    ty: SqlType,
    coll: Collation,
    /// Also count the rows (see [`ScalarShape::single`]).
    single: bool,
    /// Also whether some argument is NULL (`__z`: the value is then NULL,
    /// first in ascending order).
    nulls_first: bool,
    /// The decimals the value is shown with (`ScopeCol::shown`).
    shown: Option<u8>,
}

/// LEFT JOINs `node` with `value` aggregated over the correlated inner rows
/// grouped by the correlation columns, and names the joined columns in
/// `scope` (`__sq<n>.__k<i>`, `.__v`, and `.__n` for the row count);
/// returns the qualifier.
fn join_scalar_aggregate(
    node: &mut LNode,
    scope: &mut Scope,
    correlated: Correlated,
    value: ScalarAggregate,
    n: usize,
) -> String {
    let Correlated {
        inner,
        scope: iscope,
        inner_cols,
        outer_cols,
        null_safe,
        ..
    } = correlated;
    let ScalarAggregate {
        spec,
        arg,
        ty,
        coll,
        single,
        nulls_first,
        shown,
    } = value;
    let k = inner_cols.len();
    let mut pre: Vec<Expr> = inner_cols.iter().map(|&c| Expr::Column(c)).collect();
    pre.push(arg);
    let mut colls: Vec<Collation> = inner_cols.iter().map(|&c| inner.colls[c]).collect();
    colls.push(coll);
    let mut specs = vec![spec];
    if single {
        pre.push(Expr::Literal(Value::Int(1)));
        colls.push(Collation::Binary);
        specs.push(AggSpec::new(AggKind::CountStar, k + 1));
    }
    if nulls_first {
        let is_null = Expr::IsNull {
            expr: Box::new(pre[k].clone()),
            negated: false,
        };
        pre.push(is_null);
        colls.push(Collation::Binary);
        specs.push(AggSpec::new(AggKind::Max, pre.len() - 1));
    }
    let proj = LNode {
        op: LOp::Project(pre),
        inputs: vec![inner],
        colls: colls.clone(),
    };
    let aggn = LNode {
        op: LOp::Aggregate {
            ngroup: k,
            aggs: specs,
            scalar: k == 0,
        },
        inputs: vec![proj],
        colls: colls.clone(),
    };
    let qual = format!("__sq{n}");
    let joined = |name: String, ty: SqlType, collation: Collation| ScopeCol {
        qualifier: qual.clone(),
        name,
        ty,
        nullable: true,
        collation,
        table: String::new(),
        origin: None,
        stored: false,
        shown: None,
    };
    // Keys where NULL meets NULL: compared as (IS NULL, value or 0) pairs
    // computed on both sides (hidden columns).
    let (mut left_cols, mut right_cols) = (outer_cols, (0..k).collect::<Vec<usize>>());
    for (i, &p) in null_safe.iter().enumerate() {
        let oc = &scope.cols[left_cols[p]];
        let (ty, coll) = (oc.ty.clone(), oc.collation);
        scope
            .cols
            .push(joined(format!("__nf{i}"), int8(), Collation::Binary));
        scope.cols.push(joined(format!("__nv{i}"), ty, coll));
    }
    let left = null_safe_keys(LNode::take(node), &mut left_cols, &null_safe);
    let right = null_safe_keys(aggn, &mut right_cols, &null_safe);
    let mut jcolls = left.colls.clone();
    jcolls.extend(right.colls.iter().copied());
    *node = LNode {
        op: LOp::Join {
            kind: JoinKind::Left,
            left_cols,
            right_cols,
        },
        inputs: vec![left, right],
        colls: jcolls,
    };
    for (i, &c) in inner_cols.iter().enumerate() {
        let ic = &iscope.cols[c];
        scope
            .cols
            .push(joined(format!("__k{i}"), ic.ty.clone(), ic.collation));
    }
    scope.cols.push(ScopeCol {
        shown,
        ..joined("__v".into(), ty, coll)
    });
    if single {
        scope
            .cols
            .push(joined("__n".into(), int8(), Collation::Binary));
    }
    if nulls_first {
        scope
            .cols
            .push(joined("__z".into(), int8(), Collation::Binary));
    }
    for (i, &p) in null_safe.iter().enumerate() {
        let ic = &iscope.cols[inner_cols[p]];
        let (ty, coll) = (ic.ty.clone(), ic.collation);
        scope
            .cols
            .push(joined(format!("__mf{i}"), int8(), Collation::Binary));
        scope.cols.push(joined(format!("__mv{i}"), ty, coll));
    }
    qual
}

fn int8() -> SqlType {
    SqlType::Int {
        bytes: 8,
        unsigned: false,
        display_width: None,
    }
}

/// `node` with two columns after its own for each key position `p` in
/// `null_safe` (of `keys`, its join columns): whether `keys[p]` is NULL,
/// and its value or 0 when it is. `keys[p]` then names the second, and the
/// first joins the key: a join on them matches NULL with NULL.
fn null_safe_keys(node: LNode, keys: &mut Vec<usize>, null_safe: &[usize]) -> LNode {
    if null_safe.is_empty() {
        return node;
    }
    let width = node.width();
    let mut exprs: Vec<Expr> = (0..width).map(Expr::Column).collect();
    let mut colls = node.colls.clone();
    for &p in null_safe {
        let c = keys[p];
        let is_null = Expr::IsNull {
            expr: Box::new(Expr::Column(c)),
            negated: false,
        };
        exprs.push(is_null.clone());
        exprs.push(Expr::Case {
            operand: None,
            whens: vec![(is_null, Expr::Literal(Value::Int(0)))],
            otherwise: Some(Box::new(Expr::Column(c))),
            collation: node.colls[c],
        });
        colls.extend([Collation::Binary, node.colls[c]]);
        keys[p] = exprs.len() - 1;
        keys.push(exprs.len() - 2);
    }
    LNode {
        op: LOp::Project(exprs),
        inputs: vec![node],
        colls,
    }
}

/// `(SELECT __sqd.__v FROM (q) AS __sqd)`, `q`'s one column named `__v`
/// (in its first SELECT, which names a UNION's columns); `None` when `q`
/// is not a query of one column.
fn over_derived(q: &ast::Query) -> Option<ast::Query> {
    let mut inner = q.clone();
    let mut body = &mut *inner.body;
    loop {
        match body {
            ast::SetExpr::Select(_) => break,
            ast::SetExpr::SetOperation { left, .. } => body = &mut **left,
            ast::SetExpr::Query(q) => body = &mut *q.body,
            _ => return None,
        }
    }
    let ast::SetExpr::Select(s) = body else {
        return None;
    };
    let expr = match s.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }] => {
            e.clone()
        }
        _ => return None,
    };
    s.projection = vec![ast::SelectItem::ExprWithAlias {
        expr,
        alias: ast::Ident::new("__v"),
    }];
    let from = ast::TableWithJoins {
        relation: ast::TableFactor::Derived {
            lateral: false,
            subquery: Box::new(inner),
            alias: Some(ast::TableAlias {
                name: ast::Ident::new("__sqd"),
                columns: vec![],
            }),
        },
        joins: vec![],
    };
    let value =
        ast::Expr::CompoundIdentifier(vec![ast::Ident::new("__sqd"), ast::Ident::new("__v")]);
    Some(select_from(value, from))
}
