//! Scalar subqueries (`(SELECT agg(x) FROM ... WHERE inner = outer)`) as
//! LEFT JOINs with an aggregate grouped by the correlation columns.

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::correlated::{scope_reads_outer, Correlated};
use super::expr::{aggregate_name, norm, unsupported, ExprCx, Scope, ScopeCol};
use super::query::Planner;
use super::relation::stable;
use super::syntax::{as_column, call, has_subquery};
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
    pub(super) fn scalar_subquery(
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

    pub(super) fn scalar_subquery_grouped(
        &self,
        q: &ast::Query,
        grouped: &[ast::Expr],
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
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
                    && norm(&ob.exprs[0].expr) == norm(&agg) =>
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
                            o.expr = agg.clone();
                        }
                    }
                    if let ast::Expr::Value(ast::Value::Number(n, _)) = &o.expr {
                        if n != "1" {
                            return Err(DataflowError::UnknownColumn(
                                n.clone(),
                                "order clause".into(),
                            ));
                        }
                        o.expr = agg.clone();
                    }
                }
                Some(order)
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
        let (agg, single) = match aggregate_name(&agg) {
            Some(_) => (agg, false),
            None if any_row => (call("MAX", vec![agg]), false),
            None => (
                ast::Expr::Function(ast::Function {
                    name: ast::ObjectName(vec![ast::Ident::new(match top1_desc {
                        Some(false) => "MIN",
                        _ => "MAX",
                    })]),
                    parameters: ast::FunctionArguments::None,
                    args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                        duplicate_treatment: None,
                        args: vec![ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(agg))],
                        clauses: vec![],
                    }),
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: vec![],
                }),
                top1_desc.is_none(),
            ),
        };
        let agg_name = aggregate_name(&agg).unwrap_or_default();
        let mut correlated = self.plan_correlated(
            s,
            scope,
            "a scalar subquery",
            "correlated condition other than equality",
        )?;
        let mut agg = agg;
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
            correlated = self.decorrelate(node, scope, correlated, n)?;
        }
        let Correlated {
            mut inner,
            scope: iscope,
            inner_cols,
            outer_cols,
            ..
        } = correlated;
        let reads_outer = |e: DataflowError| match e {
            DataflowError::UnknownColumn(..) if scope_reads_outer(&agg, &iscope, scope) => {
                unsupported("a scalar subquery whose value reads the outer query")
            }
            other => other,
        };
        if let Some(order) = &first_by {
            inner = first_in_order(inner, &iscope, &inner_cols, order).map_err(reads_outer)?;
        }
        // Uncorrelated: a one-row aggregate joined to every row (key []).
        let k = inner_cols.len();
        let row_cx = ExprCx::row(&iscope);
        let (spec, arg, (ty, _, coll)) = self.agg_spec(&agg, &row_cx, k).map_err(reads_outer)?;
        if top1_desc == Some(false) && arg.result_type(&iscope.types()).1 {
            return Err(unsupported(
                "ORDER BY ... ASC LIMIT 1 over a nullable expression in a scalar subquery",
            ));
        }
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
        let mut jcolls = node.colls.clone();
        jcolls.extend(colls.iter().copied());
        let left = LNode::take(node);
        *node = LNode {
            op: LOp::Join {
                kind: JoinKind::Left,
                left_cols: outer_cols,
                right_cols: (0..k).collect(),
            },
            inputs: vec![left, aggn],
            colls: jcolls,
        };
        for (i, &c) in inner_cols.iter().enumerate() {
            let ic = &iscope.cols[c];
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: format!("__k{i}"),
                ty: ic.ty.clone(),
                nullable: true,
                collation: ic.collation,
                table: String::new(),
                origin: None,
            });
        }
        scope.cols.push(ScopeCol {
            qualifier: qual.clone(),
            name: "__v".into(),
            ty,
            nullable: true,
            collation: coll,
            table: String::new(),
            origin: None,
        });
        let col = ast::Expr::CompoundIdentifier(vec![
            ast::Ident::new(qual.clone()),
            ast::Ident::new("__v"),
        ]);
        if single {
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: "__n".into(),
                ty: SqlType::Int {
                    bytes: 8,
                    unsigned: false,
                    display_width: None,
                },
                nullable: true,
                collation: Collation::Binary,
                table: String::new(),
                origin: None,
            });
            let n =
                ast::Expr::CompoundIdentifier(vec![ast::Ident::new(qual), ast::Ident::new("__n")]);
            return Ok(ast::Expr::Function(ast::Function {
                name: ast::ObjectName(vec![ast::Ident::new(super::expr::SINGLE_ROW_FN)]),
                parameters: ast::FunctionArguments::None,
                args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                    duplicate_treatment: None,
                    args: vec![
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(n)),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(col)),
                    ],
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            }));
        }
        if agg_name == "count" && grouped.is_empty() {
            // COUNT over no rows is 0, not NULL.
            return Ok(ast::Expr::Function(ast::Function {
                name: ast::ObjectName(vec![ast::Ident::new("COALESCE")]),
                parameters: ast::FunctionArguments::None,
                args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                    duplicate_treatment: None,
                    args: vec![
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(col)),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Value(
                            ast::Value::Number("0".into(), false),
                        ))),
                    ],
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            }));
        }
        Ok(col)
    }
}
