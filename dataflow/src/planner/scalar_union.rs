//! A correlated scalar subquery over a set operation (Django's
//! `Subquery(qs1.union(qs2).values("x")[:1])`): `(SELECT a.v FROM a WHERE
//! a.t = o.id UNION SELECT b.v FROM b WHERE b.w < o.x LIMIT 1)`.
//!
//! Each SELECT is planned over the distinct values D of every outer column
//! any of them reads (as [`Planner::decorrelate`] plans one), its rows
//! carrying D's columns before its value. The set operation then combines
//! rows of the same outer values only (D's columns are part of every row),
//! so it is the subquery's set operation for each outer row at once, and
//! the value is aggregated per D as a one-SELECT subquery's is.

use ladle_common::Collation;
use sqlparser::ast;

use super::correlated::{null_rejecting, outer_columns_read};
use super::expr::{collect_aggregates, derived_collation, unsupported, ExprCx, Scope};
use super::query::Planner;
use super::relation::{rel_scope, stable, ColInfo, Correlated, Rel};
use super::scalar_subquery::ScalarShape;
use super::set_expr::{as_result_types, intersect_or_except, set_operation_type};
use super::syntax::{as_column, has_subquery, one_row_from, select_from};
use crate::expr::Expr;
use crate::plan::{LNode, LOp};
use crate::{DataflowError, Result};

/// The name the combined rows give the subquery's value.
const VALUE: &str = "__v";

impl Planner<'_> {
    /// Scalar subquery `q`, a set operation whose SELECTs read the outer
    /// query (`scope`, rows `node`), joined into `node`; returns the
    /// expression that reads its value.
    pub(super) fn scalar_subquery_union(
        &self,
        q: &ast::Query,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let mut selects = Vec::new();
        leaves(&q.body, &mut selects)?;
        let name = value_name(selects[0]);
        let mut planned = Vec::new();
        let mut o_cols: Vec<usize> = Vec::new();
        for s in &selects {
            let (c, value) = self.union_branch(s, scope)?;
            for o in c.outer_cols.iter().copied().chain(
                c.residual
                    .iter()
                    .chain([&value])
                    .flat_map(|e| outer_columns_read(e, &c.scope, scope)),
            ) {
                if !o_cols.contains(&o) {
                    o_cols.push(o);
                }
            }
            planned.push((c, value));
        }
        // An outer row with a NULL in a column every SELECT compares in a
        // NULL-rejecting condition (an equality, `U0.v < o.c`) has no rows;
        // another nullable column's NULL may still give some (`a = o.x
        // UNION ... b < o.y` for a NULL y), so there D's NULL row must meet
        // the outer NULL (`null_safe`, see `decorrelate`).
        let null_safe: Vec<usize> = (0..o_cols.len())
            .filter(|&i| {
                let o = o_cols[i];
                let rejected = |(c, _): &(Correlated, ast::Expr)| {
                    let reads = |e: &ast::Expr| outer_columns_read(e, &c.scope, scope);
                    c.outer_cols.contains(&o)
                        || c.residual
                            .iter()
                            .any(|r| reads(r).contains(&o) && null_rejecting(r, &reads))
                };
                scope.cols[o].nullable && !planned.iter().all(rejected)
            })
            .collect();
        let k = o_cols.len();
        let mut rels = Vec::new();
        for (c, mut value) in planned {
            let d = self.decorrelate_over(node, scope, c, n, Some(&mut value), o_cols.clone())?;
            if d.outer_cols != o_cols {
                return Err(unsupported("this scalar subquery over a UNION"));
            }
            rels.push(branch_rel(d, &value, k)?);
        }
        let mut rels = rels.into_iter();
        let rel = combine(&q.body, &mut rels, k)?;
        let (inner, iscope) = rel_scope(rel, &format!("__squ{n}"));
        let rows = Correlated {
            inner,
            scope: iscope,
            inner_cols: (0..k).collect(),
            outer_cols: o_cols,
            residual: Vec::new(),
            null_safe,
        };
        let over = over_rows(q, name.as_deref())?;
        let shape = ScalarShape::of(&over)?;
        self.scalar_of_rows(&over, shape, &[], rows, node, scope, n)
    }

    /// One SELECT of the set operation, planned as a correlated subquery,
    /// and its value.
    fn union_branch(&self, s: &ast::Select, scope: &Scope) -> Result<(Correlated, ast::Expr)> {
        let value = match s.projection.as_slice() {
            [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }] => {
                e.clone()
            }
            [_] => return Err(unsupported("this scalar subquery over a UNION")),
            _ => {
                return Err(DataflowError::BadArgument(
                    "Operand should contain 1 column(s)".into(),
                ))
            }
        };
        let mut aggs = Vec::new();
        collect_aggregates(&value, &mut aggs);
        let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty());
        if grouped || s.having.is_some() || !aggs.is_empty() || has_subquery(&value) {
            return Err(unsupported(
                "a scalar subquery over a UNION of grouped SELECTs",
            ));
        }
        let c = self.plan_correlated(
            s,
            scope,
            "a scalar subquery",
            "correlated condition other than equality",
        )?;
        Ok((c, value))
    }
}

/// The SELECTs of a set operation, in order; refuses a parenthesized one
/// with its own ORDER BY or LIMIT.
fn leaves<'q>(e: &'q ast::SetExpr, out: &mut Vec<&'q ast::Select>) -> Result<()> {
    match e {
        ast::SetExpr::Select(s) => {
            out.push(s);
            Ok(())
        }
        ast::SetExpr::SetOperation { left, right, .. } => {
            leaves(left, out)?;
            leaves(right, out)
        }
        ast::SetExpr::Query(q)
            if q.order_by.is_none() && q.limit.is_none() && q.offset.is_none() =>
        {
            leaves(&q.body, out)
        }
        _ => Err(unsupported("this scalar subquery over a UNION")),
    }
}

/// The name the set operation's column has (its first SELECT's): what its
/// ORDER BY may name.
fn value_name(s: &ast::Select) -> Option<String> {
    match s.projection.first()? {
        ast::SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
        ast::SelectItem::UnnamedExpr(e) => as_column(e)?.last().map(|id| id.value.clone()),
        _ => None,
    }
}

/// A decorrelated SELECT's rows as D's `k` columns, then its value.
fn branch_rel(d: Correlated, value: &ast::Expr, k: usize) -> Result<Rel> {
    let v = stable(ExprCx::row(&d.scope).compile(value)?)?;
    let (ty, nullable) = v.result_type(&d.scope.types());
    let coll = derived_collation(&v, |c| d.inner.colls.get(c).copied().unwrap_or_default());
    let mut cols: Vec<ColInfo> = d.scope.cols[..k]
        .iter()
        .map(|c| ColInfo {
            name: c.name.clone(),
            table: String::new(),
            origin: None,
            stored: false,
            ty: c.ty.clone(),
            nullable: c.nullable,
            coll: c.collation,
        })
        .collect();
    let mut colls: Vec<Collation> = d.inner.colls[..k].to_vec();
    cols.push(ColInfo {
        name: VALUE.into(),
        table: String::new(),
        origin: None,
        stored: false,
        ty,
        nullable,
        coll,
    });
    colls.push(coll);
    Ok(Rel {
        node: LNode {
            op: LOp::Project((0..k).map(Expr::Column).chain([v]).collect()),
            inputs: vec![d.inner],
            colls,
        },
        cols,
    })
}

/// The SELECTs' rows (`rels`, in order) combined as `e` combines them;
/// D's `k` columns keep their types and collations.
fn combine(e: &ast::SetExpr, rels: &mut impl Iterator<Item = Rel>, k: usize) -> Result<Rel> {
    let (op, quantifier, left, right) = match e {
        ast::SetExpr::Select(_) => {
            return rels
                .next()
                .ok_or_else(|| unsupported("this scalar subquery over a UNION"))
        }
        ast::SetExpr::Query(q) => return combine(&q.body, rels, k),
        ast::SetExpr::SetOperation {
            op,
            set_quantifier,
            left,
            right,
        } => (op, set_quantifier, left, right),
        _ => return Err(unsupported("this scalar subquery over a UNION")),
    };
    let l = combine(left, rels, k)?;
    let r = combine(right, rels, k)?;
    let mut cols = l.cols.clone();
    let (ty, nullable) = set_operation_type(&[
        (l.cols[k].ty.clone(), l.cols[k].nullable),
        (r.cols[k].ty.clone(), r.cols[k].nullable),
    ]);
    cols[k].ty = ty;
    cols[k].nullable = nullable;
    if cols[k].ty.is_text() {
        cols[k].coll = Collation::GeneralCi;
    }
    let (l, r) = (as_result_types(l, &cols), as_result_types(r, &cols));
    let colls: Vec<Collation> = cols.iter().map(|c| c.coll).collect();
    let all = matches!(quantifier, ast::SetQuantifier::All);
    let distinct = matches!(
        quantifier,
        ast::SetQuantifier::None | ast::SetQuantifier::Distinct
    );
    let node = match op {
        ast::SetOperator::Union if all || distinct => {
            let both = LNode {
                op: LOp::Union,
                inputs: vec![l.node, r.node],
                colls: colls.clone(),
            };
            if all {
                both
            } else {
                LNode {
                    op: LOp::Aggregate {
                        ngroup: k + 1,
                        aggs: vec![],
                        scalar: false,
                    },
                    inputs: vec![both],
                    colls,
                }
            }
        }
        ast::SetOperator::Intersect | ast::SetOperator::Except if distinct => intersect_or_except(
            l.node,
            r.node,
            colls,
            matches!(op, ast::SetOperator::Intersect),
        ),
        _ => return Err(unsupported(format!("{op} {quantifier}"))),
    };
    Ok(Rel { node, cols })
}

/// `SELECT __v FROM <the combined rows> ORDER BY ... LIMIT ...`: the shape
/// of the value over the combined rows, `q`'s ORDER BY reading its
/// column by position or `name`.
fn over_rows(q: &ast::Query, name: Option<&str>) -> Result<ast::Query> {
    // The FROM only makes the shape a SELECT: the rows are planned.
    let from = one_row_from();
    let mut over = select_from(ast::Expr::Identifier(ast::Ident::new(VALUE)), from);
    over.limit = q.limit.clone();
    over.offset = q.offset.clone();
    if let Some(ob) = &q.order_by {
        let mut ob = ob.clone();
        for o in &mut ob.exprs {
            let named = match &o.expr {
                ast::Expr::Value(ast::Value::Number(p, _)) => p == "1",
                e => as_column(e)
                    .and_then(|ids| ids.last())
                    .zip(name)
                    .is_some_and(|(id, name)| id.value.eq_ignore_ascii_case(name)),
            };
            if !named {
                return Err(unsupported(
                    "ORDER BY other than the column of a scalar subquery over a UNION",
                ));
            }
            o.expr = ast::Expr::Identifier(ast::Ident::new(VALUE));
        }
        over.order_by = Some(ob);
    }
    Ok(over)
}

impl Planner<'_> {
    /// [`lift_derived`] (a method, so that `scalar_subquery` calls it
    /// without importing this module, which imports it).
    pub(super) fn lift_derived(&self, q: &ast::Query) -> Option<ast::Query> {
        lift_derived(q)
    }
}

/// `(SELECT x FROM (q2) AS u [ORDER BY x] [LIMIT ..])` as `q2` with that
/// ORDER BY and LIMIT, when `x` is `q2`'s one column and the outer SELECT
/// does nothing else; `None` otherwise.
fn lift_derived(q: &ast::Query) -> Option<ast::Query> {
    let ast::SetExpr::Select(s) = &*q.body else {
        return None;
    };
    let [ast::TableWithJoins {
        relation:
            ast::TableFactor::Derived {
                lateral: false,
                subquery,
                alias: Some(alias),
            },
        joins,
    }] = s.from.as_slice()
    else {
        return None;
    };
    let plain = joins.is_empty()
        && alias.columns.is_empty()
        && s.selection.is_none()
        && s.having.is_none()
        && s.distinct.is_none()
        && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty())
        && subquery.order_by.is_none()
        && subquery.limit.is_none()
        && subquery.offset.is_none()
        && subquery.with.is_none();
    let mut selects = Vec::new();
    if !plain || leaves(&subquery.body, &mut selects).is_err() {
        return None;
    }
    let name = value_name(selects[0])?;
    // `x`, `u.x` or `*` naming the derived table's one column.
    let names_it = |e: &ast::Expr| match as_column(e) {
        Some([col]) => col.value.eq_ignore_ascii_case(&name),
        Some([table, col]) => {
            table.value.eq_ignore_ascii_case(&alias.name.value)
                && col.value.eq_ignore_ascii_case(&name)
        }
        _ => false,
    };
    let one_column = selects[0].projection.len() == 1;
    let selected = match s.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }] => {
            names_it(e)
        }
        [ast::SelectItem::Wildcard(_)] => true,
        _ => false,
    };
    if !one_column || !selected {
        return None;
    }
    let mut lifted = (**subquery).clone();
    if let Some(ob) = &q.order_by {
        let mut ob = ob.clone();
        for o in &mut ob.exprs {
            if names_it(&o.expr) {
                o.expr = ast::Expr::Identifier(ast::Ident::new(name.clone()));
            } else if !matches!(&o.expr, ast::Expr::Value(ast::Value::Number(p, _)) if p == "1") {
                return None;
            }
        }
        lifted.order_by = Some(ob);
    }
    lifted.limit = q.limit.clone();
    lifted.offset = q.offset.clone();
    Some(lifted)
}
