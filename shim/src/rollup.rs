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
//!
//! Inside a derived table, a subquery or a view, where no order is kept,
//! the levels are instead one UNION ALL, an ordinary maintained query
//! ([`expand_nested`]); with a LIMIT, one ordered by the merge order.

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

/// `q` with each SELECT grouped WITH ROLLUP inside it (a derived table,
/// a subquery; with `whole`, `q` itself too) as the UNION ALL of its
/// levels: an ordinary query, kept as one maintained view, whose rows
/// come in no particular order (as a derived table's). Level 0 keeps
/// only a total over some rows (no input row, no super-aggregate row).
/// With a LIMIT the union is read in the merged order ([`in_merge_order`]);
/// ORDER BY is 1221.
pub(crate) fn expand_nested(q: &mut ast::Query, whole: bool) -> Result<()> {
    struct Expander {
        depth: usize,
        whole: bool,
        failed: Option<ShimError>,
    }
    impl VisitorMut for Expander {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
            self.depth -= 1;
            if (self.depth > 0 || self.whole) && is_rollup(q) {
                match union_of_levels(q) {
                    Ok(union) => *q = union,
                    Err(err) => {
                        self.failed = Some(err);
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut expander = Expander {
        depth: 0,
        whole,
        failed: None,
    };
    let _ = q.visit(&mut expander);
    expander.failed.map_or(Ok(()), Err)
}

/// `q`, a SELECT grouped WITH ROLLUP, as the UNION ALL of its levels
/// (see [`expand_nested`]).
fn union_of_levels(q: &ast::Query) -> Result<ast::Query> {
    if q.order_by.is_some() {
        return Err(ShimError::WrongUsage("CUBE/ROLLUP", "ORDER BY"));
    }
    let limited = q.limit.is_some() || q.offset.is_some();
    let SetExpr::Select(select) = q.body.as_ref() else {
        return Err(ShimError::Internal("ROLLUP of no SELECT".into()));
    };
    let groups = rollup_columns(select)
        .ok_or_else(|| ShimError::Internal("ROLLUP without its list".into()))?;
    let n = groups.len();
    let mut union: Option<SetExpr> = None;
    for level in (0..=n).rev() {
        let mut branch = *level_query(q, select, &groups, level).body;
        if let SetExpr::Select(sel) = &mut branch {
            if limited {
                // Which group columns this level rolls up, for the order.
                for i in 0..n {
                    sel.projection.push(SelectItem::ExprWithAlias {
                        expr: Expr::Value(ast::Value::Number(
                            u8::from(level <= i).to_string(),
                            false,
                        )),
                        alias: ast::Ident::new(format!("__ladle_rolled_{i}")),
                    });
                }
            } else {
                // The group values only the merge needs.
                sel.projection
                    .truncate(sel.projection.len().saturating_sub(n));
            }
            if level == 0 {
                let some_rows = crate::sqltext::parse_expr("COUNT(*) > 0")?;
                sel.having = Some(match sel.having.take() {
                    Some(h) => Expr::BinaryOp {
                        left: Box::new(Expr::Nested(Box::new(h))),
                        op: ast::BinaryOperator::And,
                        right: Box::new(some_rows),
                    },
                    None => some_rows,
                });
            }
        }
        union = Some(match union {
            None => branch,
            Some(left) => SetExpr::SetOperation {
                op: ast::SetOperator::Union,
                set_quantifier: ast::SetQuantifier::All,
                left: Box::new(left),
                right: Box::new(branch),
            },
        });
    }
    let mut out = q.clone();
    if let Some(body) = union {
        out.body = Box::new(body);
    }
    if limited {
        out.limit = None;
        out.offset = None;
        return in_merge_order(out, select, n, q);
    }
    Ok(out)
}

/// `union` (the levels of `q`, whose SELECT is `select` with `n` group
/// columns, each level with its group values and which of them it rolls
/// up as hidden columns) as `SELECT items FROM (union) ORDER BY <the
/// merge order> LIMIT ...`, `q`'s LIMIT and OFFSET taken from the rows
/// in MariaDB's order (see [`merge_order`]).
fn in_merge_order(
    union: ast::Query,
    select: &ast::Select,
    n: usize,
    q: &ast::Query,
) -> Result<ast::Query> {
    let mut names = Vec::new();
    for item in &select.projection {
        let name = match item {
            SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
            SelectItem::UnnamedExpr(x) => ladle_dataflow::expr_column_name(x),
            _ => {
                return Err(ShimError::Unsupported(
                    "LIMIT with ROLLUP and * in a derived table or a view".into(),
                ))
            }
        };
        names.push(format!("`__ladle_levels`.`{}`", name.replace('`', "``")));
    }
    let order: Vec<String> = (0..n)
        .map(|i| format!("`__ladle_rolled_{i}`, `__ladle_rollup_{i}`"))
        .collect();
    let mut text = format!(
        "SELECT {} FROM ({union}) AS `__ladle_levels` ORDER BY {}",
        names.join(", "),
        order.join(", ")
    );
    if let Some(limit) = &q.limit {
        text.push_str(&format!(" LIMIT {limit}"));
    }
    if let Some(offset) = &q.offset {
        text.push_str(&format!(" {offset}"));
    }
    match crate::sqltext::parse(&text)?.into_iter().next() {
        Some(ast::Statement::Query(ordered)) => Ok(*ordered),
        _ => Err(ShimError::Internal("ROLLUP levels in order".into())),
    }
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
    fn a_nested_rollup_is_the_union_of_its_levels() {
        let mut q = query(
            "SELECT * FROM (SELECT a, SUM(b) s FROM t GROUP BY a WITH ROLLUP HAVING s > 1) d",
        );
        expand_nested(&mut q, false).expect("expands");
        assert_eq!(
            q.to_string(),
            "SELECT * FROM (SELECT a, SUM(b) AS s FROM t GROUP BY a HAVING s > 1 \
             UNION ALL SELECT NULL, SUM(b) AS s FROM t HAVING (s > 1) AND COUNT(*) > 0) AS d"
        );
        // The whole SELECT is left to `select` unless asked.
        let mut whole = query("SELECT a FROM t GROUP BY a WITH ROLLUP");
        expand_nested(&mut whole, false).expect("expands");
        assert!(is_rollup(&whole));
        expand_nested(&mut whole, true).expect("expands");
        assert!(!is_rollup(&whole));
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
