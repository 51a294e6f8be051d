//! Window functions over a grouped query (`SELECT dept, SUM(x), RANK()
//! OVER (ORDER BY SUM(x) DESC), SUM(SUM(x)) OVER () FROM t GROUP BY
//! dept`): the windows run over the aggregate's rows, after HAVING, as in
//! SQL's order of evaluation. Planned as a query over a derived table of
//! the grouped rows,
//!
//! ```sql
//! SELECT __wgrp.dept AS dept, __wgrp.__wg1 AS `SUM(x)`,
//!        RANK() OVER (ORDER BY __wgrp.__wg1 DESC) AS `RANK() OVER (...)`, ...
//! FROM (SELECT dept, SUM(x) AS __wg1 FROM t GROUP BY dept) AS __wgrp
//! ```
//!
//! so the aggregate and the windows are the maintained operators each
//! already is. Every part of the select list and ORDER BY without a window
//! call (aggregates, group keys, bare columns, whole items) is computed by
//! the grouped query; constants stay outside.

use std::ops::ControlFlow;

use sqlparser::ast;

use super::expr::{aggregate_name, norm, unsupported};
use super::syntax::{
    any_shallow, as_column, as_slot, order_by_item, query_of, split_conjuncts, visit_shallow_mut,
};
use crate::Result;

/// The derived table of the grouped rows.
const GROUPED: &str = "__wgrp";

/// Whether `e` is a window function call.
fn is_window_call(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Function(f) if f.over.is_some())
}

/// Whether `e` has a window call (outside subqueries).
fn has_window_call(e: &ast::Expr) -> bool {
    any_shallow(e, is_window_call)
}

/// Whether `e` has an aggregate call that is no window call.
fn has_aggregate(e: &ast::Expr) -> bool {
    any_shallow(e, |x| aggregate_name(x).is_some() && !is_window_call(x))
}

/// Whether `e` reads no row: no column, aggregate or subquery in it.
fn is_constant(e: &ast::Expr) -> bool {
    !any_shallow(e, |x| {
        matches!(
            x,
            ast::Expr::Identifier(_)
                | ast::Expr::CompoundIdentifier(_)
                | ast::Expr::Subquery(_)
                | ast::Expr::Exists { .. }
                | ast::Expr::InSubquery { .. }
        ) || aggregate_name(x).is_some()
    })
}

/// The grouped query's select list, built up as the outer query is.
#[derive(Default)]
struct Grouped {
    /// Each item: its expression's text (lowercased), the expression and
    /// its name in the derived table.
    items: Vec<(String, ast::Expr, String)>,
}

impl Grouped {
    /// The outer query's reference to `e` computed by the grouped query
    /// (named `alias` when given and free).
    fn column(&mut self, e: &ast::Expr, alias: Option<&ast::Ident>) -> ast::Expr {
        let key = norm(e);
        let name = match self.items.iter().find(|(k, _, _)| *k == key) {
            Some((_, _, name)) => name.clone(),
            None => {
                let free = |n: &str| !self.items.iter().any(|i| i.2.eq_ignore_ascii_case(n));
                let name = match alias {
                    Some(a) if free(&a.value) => a.value.clone(),
                    _ => format!("__wg{}", self.items.len()),
                };
                self.items.push((key, e.clone(), name.clone()));
                name
            }
        };
        ast::Expr::CompoundIdentifier(vec![ast::Ident::new(GROUPED), ast::Ident::new(name)])
    }

    /// `e` for the outer query: its window calls kept, what they and the
    /// rest read (other than constants) taken from the grouped query.
    fn lift(&mut self, e: &ast::Expr) -> ast::Expr {
        let mut e = e.clone();
        let _ = visit_shallow_mut(&mut e, |x| {
            if !is_window_call(x) && !has_window_call(x) && !is_constant(x) {
                *x = self.column(x, None);
            }
            ControlFlow::<()>::Continue(())
        });
        e
    }
}

/// `s` and `q` rewritten as a query over a derived table of the grouped
/// rows, when `s` both groups (GROUP BY, HAVING or an aggregate outside
/// window calls) and calls window functions in its select list or ORDER
/// BY; `None` otherwise.
pub(super) fn grouped_windows(
    s: &ast::Select,
    q: &ast::Query,
) -> Result<Option<(ast::Select, ast::Query)>> {
    let items: Vec<&ast::Expr> =
        s.projection
            .iter()
            .filter_map(|i| match i {
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
                _ => None,
            })
            .collect();
    let order: Vec<&ast::Expr> = q
        .order_by
        .iter()
        .flat_map(|o| &o.exprs)
        .map(|o| &o.expr)
        .collect();
    let windowed = items.iter().chain(&order).any(|e| has_window_call(e));
    let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty())
        || s.having.is_some()
        || items.iter().chain(&order).any(|e| has_aggregate(e));
    if !windowed || !grouped {
        return Ok(None);
    }
    let mut inner = Grouped::default();
    let mut projection = Vec::new();
    let mut aliases = Vec::new();
    for item in &s.projection {
        let (e, alias) = match item {
            ast::SelectItem::UnnamedExpr(e) => (e, None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
            _ => return Err(unsupported("* beside window functions and GROUP BY")),
        };
        // The name the item had: its alias, its column's or its text.
        let name = match (alias, as_column(e)) {
            (Some(a), _) => a.clone(),
            (None, Some(ids)) => ids.last().cloned().unwrap_or_else(|| ast::Ident::new("")),
            (None, None) => ast::Ident::new(crate::expr_column_name(e)),
        };
        let expr = if has_window_call(e) {
            inner.lift(e)
        } else {
            // Computed whole by the grouped query, under its alias (HAVING
            // and GROUP BY may name it).
            inner.column(e, alias)
        };
        aliases.push(name.value.to_ascii_lowercase());
        projection.push(ast::SelectItem::ExprWithAlias { expr, alias: name });
    }
    let mut outer_q = q.clone();
    if let (None, None, ast::GroupByExpr::Expressions(g, _)) =
        (&q.order_by, &s.distinct, &s.group_by)
    {
        // Without ORDER BY, MariaDB returns the groups in GROUP BY's
        // order, windows or not (not in the windows' order, as it does
        // the rows of a query without GROUP BY).
        if !g.is_empty() {
            outer_q.order_by = Some(ast::OrderBy {
                exprs: g.iter().map(order_by_item).collect(),
                interpolate: None,
            });
        }
    }
    for o in outer_q.order_by.iter_mut().flat_map(|o| o.exprs.iter_mut()) {
        let keep = match &o.expr {
            // A position or a name of the select list: the outer query's.
            ast::Expr::Value(ast::Value::Number(..)) => true,
            ast::Expr::Identifier(id) => aliases.contains(&id.value.to_ascii_lowercase()),
            _ => false,
        };
        if !keep {
            o.expr = inner.lift(&o.expr);
        }
    }

    let mut grouped_s = s.clone();
    grouped_s.distinct = None;
    let keys = reader_keys(&mut grouped_s, &mut inner);
    grouped_s.projection = inner
        .items
        .into_iter()
        .map(|(_, expr, name)| ast::SelectItem::ExprWithAlias {
            expr,
            alias: ast::Ident::new(name),
        })
        .collect();
    let derived = ast::TableWithJoins {
        relation: ast::TableFactor::Derived {
            lateral: false,
            subquery: Box::new(query_of(ast::SetExpr::Select(Box::new(grouped_s)))),
            alias: Some(ast::TableAlias {
                name: ast::Ident::new(GROUPED),
                columns: vec![],
            }),
        },
        joins: vec![],
    };
    let mut outer_s = s.clone();
    outer_s.projection = projection;
    outer_s.from = vec![derived];
    outer_s.selection = conjunction(keys);
    outer_s.group_by = ast::GroupByExpr::Expressions(vec![], vec![]);
    outer_s.having = None;
    *outer_q.body = ast::SetExpr::Select(Box::new(outer_s.clone()));
    Ok(Some((outer_s, outer_q)))
}

/// WHERE's `col = ?` conjuncts of a query with GROUP BY, taken out of
/// `grouped` (its WHERE) for the outer query, where they key the view:
/// each column is grouped by too, and the outer query's windows are
/// partitioned by it (as a key's are, see `window_functions`), so a read
/// of one value sees that value's groups and windows over them alone, as
/// if the rows had been filtered first.
fn reader_keys(grouped: &mut ast::Select, inner: &mut Grouped) -> Vec<ast::Expr> {
    let ast::GroupByExpr::Expressions(group_by, mods) = &mut grouped.group_by else {
        return Vec::new();
    };
    let Some(selection) = grouped.selection.take() else {
        return Vec::new();
    };
    if group_by.is_empty() || !mods.is_empty() {
        // Without GROUP BY, no rows still make one row: keep the filter.
        grouped.selection = Some(selection);
        return Vec::new();
    }
    let mut conj = Vec::new();
    split_conjuncts(&selection, &mut conj);
    let mut keys = Vec::new();
    let mut rest = Vec::new();
    for c in conj {
        let key = match &c {
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Eq,
                right,
            } => match (as_column(left), as_column(right)) {
                (Some(_), None) if as_slot(right).is_some() => Some((&**left, &**right)),
                (None, Some(_)) if as_slot(left).is_some() => Some((&**right, &**left)),
                _ => None,
            },
            _ => None,
        };
        match key {
            Some((col, slot)) => {
                if !group_by.iter().any(|g| norm(g) == norm(col)) {
                    group_by.push(col.clone());
                }
                keys.push(ast::Expr::BinaryOp {
                    left: Box::new(inner.column(col, None)),
                    op: ast::BinaryOperator::Eq,
                    right: Box::new(slot.clone()),
                });
            }
            None => rest.push(c),
        }
    }
    grouped.selection = conjunction(rest);
    keys
}

/// The conjunction of `parts`, if any.
fn conjunction(parts: Vec<ast::Expr>) -> Option<ast::Expr> {
    parts.into_iter().reduce(|a, b| ast::Expr::BinaryOp {
        left: Box::new(a),
        op: ast::BinaryOperator::And,
        right: Box::new(b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> Option<String> {
        let stmts = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MySqlDialect {}, sql)
            .expect("parses");
        let Some(ast::Statement::Query(q)) = stmts.into_iter().next() else {
            panic!("not a query")
        };
        let ast::SetExpr::Select(s) = &*q.body else {
            panic!("not a SELECT")
        };
        grouped_windows(s, &q).unwrap().map(|(_, q)| q.to_string())
    }

    #[test]
    fn windows_run_over_the_grouped_rows() {
        assert_eq!(
            rewritten(
                "SELECT dept, SUM(x), RANK() OVER (ORDER BY SUM(x) DESC) AS r, \
                 SUM(SUM(x)) OVER () FROM t WHERE y > 1 GROUP BY dept HAVING COUNT(*) > 1 \
                 ORDER BY r, dept LIMIT 5"
            )
            .unwrap(),
            "SELECT __wgrp.__wg0 AS dept, __wgrp.__wg1 AS SUM(x), \
             RANK() OVER (ORDER BY __wgrp.__wg1 DESC) AS r, \
             SUM(__wgrp.__wg1) OVER () AS SUM(SUM(x)) OVER () \
             FROM (SELECT dept AS __wg0, SUM(x) AS __wg1 FROM t WHERE y > 1 GROUP BY dept \
             HAVING COUNT(*) > 1) AS __wgrp ORDER BY r, dept LIMIT 5"
        );
    }

    #[test]
    fn aliases_stay_for_having_and_constants_stay_outside() {
        assert_eq!(
            rewritten(
                "SELECT YEAR(d) AS y, 1 + ROW_NUMBER() OVER (PARTITION BY YEAR(d) ORDER BY MAX(x) \
                 ROWS 1 PRECEDING) FROM t GROUP BY y HAVING y > 2000"
            )
            .unwrap(),
            "SELECT __wgrp.y AS y, 1 + ROW_NUMBER() OVER (PARTITION BY __wgrp.y ORDER BY \
             __wgrp.__wg1 ROWS 1 PRECEDING) AS 1 + ROW_NUMBER() OVER (PARTITION BY YEAR(d) \
             ORDER BY MAX(x) ROWS 1 PRECEDING) FROM (SELECT YEAR(d) AS y, MAX(x) AS __wg1 \
             FROM t GROUP BY y HAVING y > 2000) AS __wgrp ORDER BY y"
        );
    }

    #[test]
    fn equality_parameters_key_the_outer_query() {
        assert_eq!(
            rewritten(
                "SELECT dept, RANK() OVER (ORDER BY SUM(x)) FROM t \
                 WHERE region = ?0 AND y > 2 AND ?1 = t.kind GROUP BY dept"
            )
            .unwrap(),
            "SELECT __wgrp.__wg0 AS dept, RANK() OVER (ORDER BY __wgrp.__wg1) AS \
             RANK() OVER (ORDER BY SUM(x)) FROM (SELECT dept AS __wg0, SUM(x) AS __wg1, \
             region AS __wg2, t.kind AS __wg3 FROM t WHERE y > 2 GROUP BY dept, region, t.kind) \
             AS __wgrp WHERE __wgrp.__wg2 = ?0 AND __wgrp.__wg3 = ?1 ORDER BY dept"
        );
        // Without GROUP BY no rows still make a row: the filter stays.
        assert_eq!(
            rewritten("SELECT SUM(x), RANK() OVER () FROM t WHERE region = ?0").unwrap(),
            "SELECT __wgrp.__wg0 AS SUM(x), RANK() OVER () AS RANK() OVER () FROM \
             (SELECT SUM(x) AS __wg0 FROM t WHERE region = ?0) AS __wgrp"
        );
    }

    #[test]
    fn ungrouped_or_windowless_queries_are_left_alone() {
        assert!(rewritten("SELECT a, ROW_NUMBER() OVER (ORDER BY b) FROM t").is_none());
        assert!(rewritten("SELECT a, SUM(b) FROM t GROUP BY a").is_none());
        assert!(rewritten("SELECT a, SUM(b) OVER () FROM t").is_none());
        assert!(rewritten(
            "SELECT a, (SELECT ROW_NUMBER() OVER () FROM u LIMIT 1) FROM t GROUP BY a"
        )
        .is_none());
    }
}
