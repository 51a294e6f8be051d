//! `GROUP BY g1, ..., gn WITH ROLLUP`: answered per execution from n + 1
//! ordinary grouped SELECTs, each a maintained view of its own.
//!
//! Level k (n down to 0) groups by g1..gk; in its select list and HAVING
//! the rolled-up columns g(k+1)..gn (outside aggregate calls, or the items
//! a GROUP BY position or alias names) are NULL, as in MySQL's
//! super-aggregate rows. Each level also returns g1..gk as hidden trailing
//! columns, by which the rows are merged in MariaDB's order: by the group
//! columns ascending, each super-aggregate row after the rows it sums,
//! the grand total last (a NULL that is data sorts first, a rolled-up
//! one after its group). LIMIT/OFFSET apply to the merged rows. No input
//! row, no super-aggregate row. ORDER BY with ROLLUP is MariaDB's 1221.
//! The result metadata is level n's.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use ladle_common::Row;
use sqlparser::ast::{self, Expr, GroupByExpr, SelectItem, SetExpr, VisitMut, VisitorMut};

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;

/// Whether `q` is a SELECT grouped WITH ROLLUP.
pub(crate) fn is_rollup(q: &ast::Query) -> bool {
    matches!(q.body.as_ref(), SetExpr::Select(s) if rollup_columns(s).is_some())
}

/// The GROUP BY list of a `GROUP BY ... WITH ROLLUP` SELECT.
fn rollup_columns(s: &ast::Select) -> Option<Vec<Expr>> {
    match &s.group_by {
        GroupByExpr::Expressions(exprs, _) => match exprs.as_slice() {
            [Expr::Rollup(sets)] => Some(sets.iter().flatten().cloned().collect()),
            _ => None,
        },
        GroupByExpr::All(_) => None,
    }
}

/// Answers `q`, a SELECT grouped WITH ROLLUP.
pub(crate) fn select(e: &Engine, s: &mut Session, q: &ast::Query) -> Result<Output> {
    if q.order_by.is_some() {
        return Err(ShimError::WrongUsage("CUBE/ROLLUP", "ORDER BY"));
    }
    let SetExpr::Select(select) = q.body.as_ref() else {
        return Err(ShimError::Internal("ROLLUP of no SELECT".into()));
    };
    let groups = rollup_columns(select)
        .ok_or_else(|| ShimError::Internal("ROLLUP without its list".into()))?;
    let n = groups.len();
    let mut columns = Vec::new();
    let mut tagged: Vec<(usize, Row)> = Vec::new();
    for level in (0..=n).rev() {
        let Output::Rows { columns: c, rows } =
            e.select(s, &level_query(q, select, &groups, level))?
        else {
            return Err(ShimError::Internal("ROLLUP level gave no rows".into()));
        };
        let rows = rows.into_vec();
        if level == n {
            columns = c;
            if rows.is_empty() {
                break;
            }
        }
        tagged.extend(rows.into_iter().map(|r| (level, r)));
    }
    let visible = columns.len().saturating_sub(n);
    tagged.sort_by(|a, b| merge_order(a, b, visible, n));
    let offset = match &q.offset {
        Some(o) => count(e, s, &o.value)?,
        None => 0,
    };
    let limit = match &q.limit {
        Some(l) => count(e, s, l)?,
        None => usize::MAX,
    };
    let rows: Vec<Row> = tagged
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|(_, mut r)| {
            r.truncate(visible);
            r
        })
        .collect();
    columns.truncate(visible);
    Ok(Output::Rows {
        columns,
        rows: rows.into(),
    })
}

/// A LIMIT or OFFSET value.
fn count(e: &Engine, s: &Session, x: &Expr) -> Result<usize> {
    match e.eval_constant(s, x)?.as_i64() {
        Some(n) if n >= 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => Err(ShimError::WrongArguments("LIMIT".into())),
    }
}

/// MariaDB's order of the merged rows (see the module): `(level, row)`,
/// the row's hidden group values from `visible` on.
fn merge_order(a: &(usize, Row), b: &(usize, Row), visible: usize, n: usize) -> Ordering {
    for i in 0..n {
        match (a.0 > i, b.0 > i) {
            (true, true) => {
                let o = a.1.get(visible + i).cmp(&b.1.get(visible + i));
                if o.is_ne() {
                    return o;
                }
            }
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            (false, false) => return Ordering::Equal,
        }
    }
    Ordering::Equal
}

/// Level `level` of `q`: grouped by the first `level` columns, the others
/// NULL, the group values appended (see the module).
fn level_query(q: &ast::Query, select: &ast::Select, groups: &[Expr], level: usize) -> ast::Query {
    let mut q = q.clone();
    q.limit = None;
    q.offset = None;
    let mut sel = select.clone();
    sel.group_by = GroupByExpr::Expressions(groups[..level].to_vec(), Vec::new());
    let rolled: Vec<Expr> = groups[level..]
        .iter()
        .map(|g| resolve(g, &select.projection))
        .collect();
    for item in &mut sel.projection {
        let named = |alias: &ast::Ident| {
            groups[level..].iter().any(
                |g| matches!(g, Expr::Identifier(i) if i.value.eq_ignore_ascii_case(&alias.value)),
            )
        };
        match item {
            SelectItem::ExprWithAlias { expr, alias } if named(alias) => {
                *expr = Expr::Value(ast::Value::Null)
            }
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                null_rolled(expr, &rolled)
            }
            _ => {}
        }
    }
    if let Some(h) = &mut sel.having {
        null_rolled(h, &rolled);
    }
    for (i, g) in groups.iter().enumerate() {
        let value = if i < level {
            resolve(g, &select.projection)
        } else {
            Expr::Value(ast::Value::Null)
        };
        sel.projection.push(SelectItem::ExprWithAlias {
            expr: value,
            alias: ast::Ident::new(format!("__ladle_rollup_{i}")),
        });
    }
    q.body = Box::new(SetExpr::Select(Box::new(sel)));
    q
}

/// A GROUP BY item as the expression it stands for: a position names a
/// select item, an alias the item it names.
fn resolve(g: &Expr, projection: &[SelectItem]) -> Expr {
    let item_expr = |item: &SelectItem| match item {
        SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => Some(x.clone()),
        _ => None,
    };
    match g {
        Expr::Value(ast::Value::Number(n, _)) => n
            .parse::<usize>()
            .ok()
            .and_then(|k| projection.get(k.checked_sub(1)?))
            .and_then(item_expr)
            .unwrap_or_else(|| g.clone()),
        Expr::Identifier(i) => projection
            .iter()
            .find_map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias }
                    if alias.value.eq_ignore_ascii_case(&i.value) =>
                {
                    Some(expr.clone())
                }
                _ => None,
            })
            .unwrap_or_else(|| g.clone()),
        _ => g.clone(),
    }
}

/// Whether `a` and `b` name the same column or are the same expression
/// (`t.a` and `a` alike).
fn same(a: &Expr, b: &Expr) -> bool {
    let column = |x: &Expr| match x {
        Expr::Identifier(i) => Some(i.value.to_ascii_lowercase()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.to_ascii_lowercase()),
        _ => None,
    };
    match (column(a), column(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// `e` with each `rolled` expression outside aggregate calls as NULL.
fn null_rolled(e: &mut Expr, rolled: &[Expr]) {
    struct Nuller<'a> {
        rolled: &'a [Expr],
        in_aggregate: usize,
    }
    impl VisitorMut for Nuller<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, x: &mut Expr) -> ControlFlow<()> {
            if is_aggregate(x) {
                self.in_aggregate += 1;
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, x: &mut Expr) -> ControlFlow<()> {
            if is_aggregate(x) {
                self.in_aggregate -= 1;
            } else if self.in_aggregate == 0 && self.rolled.iter().any(|r| same(r, x)) {
                *x = Expr::Value(ast::Value::Null);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = e.visit(&mut Nuller {
        rolled,
        in_aggregate: 0,
    });
}

/// An aggregate call (whose arguments are the group's rows, not its
/// key): rolled-up columns inside it keep their values.
fn is_aggregate(x: &Expr) -> bool {
    matches!(x, Expr::Function(f) if f.over.is_none() && crate::sqltext::is_aggregate_function(&f.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str) -> ast::Query {
        match crate::sqltext::parse(sql).expect("parses").remove(0) {
            ast::Statement::Query(q) => *q,
            other => panic!("not a query: {other}"),
        }
    }

    #[test]
    fn levels_null_the_rolled_columns_outside_aggregates() {
        let q = query("SELECT a, b, SUM(b), CONCAT(a, b) FROM t GROUP BY a, b WITH ROLLUP");
        assert!(is_rollup(&q));
        let SetExpr::Select(select) = q.body.as_ref() else {
            panic!("a SELECT")
        };
        let groups = rollup_columns(select).expect("a rollup");
        let level = level_query(&q, select, &groups, 1);
        assert_eq!(
            level.to_string(),
            "SELECT a, NULL, SUM(b), CONCAT(a, NULL), a AS __ladle_rollup_0, \
             NULL AS __ladle_rollup_1 FROM t GROUP BY a"
        );
    }

    #[test]
    fn super_aggregate_rows_follow_their_group() {
        use ladle_common::Value;
        let row = |level: usize, a: Option<i64>, b: Option<i64>| {
            let v = |x: Option<i64>| x.map_or(Value::Null, Value::Int);
            (level, vec![v(a), v(b)])
        };
        let mut rows = vec![
            row(0, None, None),
            row(1, Some(2), None),
            row(2, Some(2), Some(1)),
            row(1, Some(1), None),
            row(2, Some(1), None),
            row(2, Some(1), Some(5)),
        ];
        rows.sort_by(|a, b| merge_order(a, b, 0, 2));
        assert_eq!(
            rows,
            vec![
                row(2, Some(1), None),
                row(2, Some(1), Some(5)),
                row(1, Some(1), None),
                row(2, Some(2), Some(1)),
                row(1, Some(2), None),
                row(0, None, None),
            ]
        );
    }
}
