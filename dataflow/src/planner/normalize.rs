//! Auto-parameterization: numbers placeholders, turns literals in top-level
//! equality predicates into parameters, and computes the view signature
//! under which equal-shaped queries share one view.

use std::collections::HashSet;
use std::ops::ControlFlow;

use ladle_common::Value;
use sqlparser::ast::{self, VisitMut};

use super::expr::literal;
use crate::plan::Source;
use crate::Result;

pub(crate) struct Normalized {
    /// The query with every parameter as `?N` (N = slot).
    pub query: ast::Query,
    pub sources: Vec<Source>,
    pub user_params: usize,
    /// Text identifying the view shape (all parameters as `?`).
    pub signature: String,
    /// The rows a read takes per key (LIMIT plus OFFSET, rounded up, see
    /// [`crate::plan::top_k::bound`]) when both are literals: a view may
    /// keep only that many ordered rows per key.
    pub top_k: Option<usize>,
}

fn is_plain_literal(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Value(v) => !matches!(
            v,
            ast::Value::Null | ast::Value::Placeholder(_) | ast::Value::Boolean(_)
        ),
        _ => false,
    }
}

fn is_col(e: &ast::Expr) -> bool {
    matches!(
        e,
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
    )
}

const LIT: &str = "?lit";

/// Literals extracted from the WHERE clause, and IN lists collapsed into
/// one parameter (`?l<N>` = `lists[N]`).
struct Extracted<'a> {
    lits: Vec<Value>,
    lists: Vec<Vec<Source>>,
    collapse_in: bool,
    /// GROUP BY columns (as written): an IN list on one of them is read
    /// per element even under aggregation (each element's groups are its
    /// own).
    grouped_cols: Vec<String>,
    /// Only `t.col = literal` (inner join ON: a bare name could become
    /// ambiguous in WHERE, where the planner moves it).
    qualified_only: bool,
    /// Literal bounds of range comparisons (`col < lit`, `col BETWEEN lit
    /// AND lit`) become parameters too: in the outer WHERE of a query over
    /// one table only (a range parameter inside a subquery or an ON clause
    /// does not plan, and over a join it could not be pushed below it).
    ranges: bool,
    /// The kinds of the columns of the query's tables.
    cols: &'a ColumnKinds,
}

/// Lower-cased names of the columns of the tables a query reads, by kind
/// (a name can be of several kinds in different tables).
#[derive(Debug, Default)]
pub(crate) struct ColumnKinds {
    pub text: HashSet<String>,
    pub numeric: HashSet<String>,
    /// Binary, temporal and other columns.
    pub other: HashSet<String>,
}

fn column_name(col: &ast::Expr) -> Option<String> {
    match col {
        ast::Expr::Identifier(i) => Some(i.value.to_ascii_lowercase()),
        ast::Expr::CompoundIdentifier(ids) => ids.last().map(|i| i.value.to_ascii_lowercase()),
        _ => None,
    }
}

/// A hex literal compared with a number column is a number (MySQL's
/// numeric context): rewritten as one before it becomes a parameter, so the
/// key lookup sees 65 for `id = 0x41`. Only when the name is a number column
/// in every table of the query that has it.
fn hex_to_number(col: &ast::Expr, lit: &mut ast::Expr, cols: &ColumnKinds) {
    let Some(name) = column_name(col) else {
        return;
    };
    if !cols.numeric.contains(&name) || cols.text.contains(&name) || cols.other.contains(&name) {
        return;
    }
    if let ast::Expr::Value(v @ ast::Value::HexStringLiteral(_)) = lit {
        if let Ok(Value::Bytes(b)) = literal(v) {
            let tail = &b[b.len().saturating_sub(8)..];
            let n = tail.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
            *v = ast::Value::Number(n.to_string(), false);
        }
    }
}

/// Whether `col = lit` must stay a filter rather than become a key
/// lookup: a number compared with a text column compares numerically in
/// MySQL (`'1abc' = 1`, `'01' = 1`), which no lookup by the string can
/// find. Names are matched without their table, so a text column of that
/// name in any table of the query keeps the literal (a filter is always
/// correct, only slower).
fn number_against_text(col: &ast::Expr, lit: &ast::Expr, cols: &ColumnKinds) -> bool {
    matches!(lit, ast::Expr::Value(ast::Value::Number(..)))
        && column_name(col).is_some_and(|n| cols.text.contains(&n))
}

/// Replaces literal `e` by a parameter slot whose value is pushed on `lits`.
fn take_literal(e: &mut ast::Expr, lits: &mut Vec<Value>) -> Result<()> {
    if let ast::Expr::Value(v) = e {
        lits.push(literal(v)?);
    }
    *e = ast::Expr::Value(ast::Value::Placeholder(LIT.into()));
    Ok(())
}

fn is_range_op(op: &ast::BinaryOperator) -> bool {
    use ast::BinaryOperator::*;
    matches!(op, Lt | LtEq | Gt | GtEq)
}

/// A bound that reads the same as a parameter: a number or a quoted
/// string. Hex and bit literals (numbers or strings by context) and typed
/// literals (`DATE '...'`) stay in the view's text.
fn is_range_literal(e: &ast::Expr) -> bool {
    matches!(
        e,
        ast::Expr::Value(
            ast::Value::Number(..)
                | ast::Value::SingleQuotedString(_)
                | ast::Value::DoubleQuotedString(_)
        )
    )
}

fn is_user_param(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Value(ast::Value::Placeholder(p)) if p.starts_with("?u"))
}

/// Turns the literals of `e` a shared view can take as parameters into
/// placeholders (collected in `x`), through AND and into the subquery of a
/// semi-join; `allow_in` lets IN lists take part outside GROUP BY columns.
fn extract(e: &mut ast::Expr, x: &mut Extracted<'_>, allow_in: bool) -> Result<()> {
    hex_literals_to_numbers(e, x.cols);
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            extract(left, x, allow_in)?;
            extract(right, x, allow_in)
        }
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::Eq,
            right,
        } => extract_equality(left, right, x),
        ast::Expr::BinaryOp { left, op, right } if x.ranges && is_range_op(op) => {
            extract_range(left, right, x)
        }
        ast::Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } if x.ranges
            && is_col(expr)
            && is_range_literal(low)
            && is_range_literal(high)
            && !number_against_text(expr, low, x.cols)
            && !number_against_text(expr, high, x.cols) =>
        {
            take_literal(low, &mut x.lits)?;
            take_literal(high, &mut x.lits)
        }
        ast::Expr::InSubquery {
            subquery,
            negated: false,
            ..
        }
        | ast::Expr::Exists {
            subquery,
            negated: false,
        } => extract_semi_join(subquery, x),
        ast::Expr::InList { expr, list, .. }
            if list.iter().any(|i| number_against_text(expr, i, x.cols)) =>
        {
            Ok(())
        }
        ast::Expr::InList {
            expr,
            list,
            negated: false,
        } if (allow_in || x.grouped_cols.contains(&expr.to_string()))
            && x.collapse_in
            && is_col(expr)
            && !list.is_empty()
            && list.iter().all(|i| is_plain_literal(i) || is_user_param(i)) =>
        {
            let keyed = collapse_in_list(expr, list, x)?;
            *e = keyed;
            Ok(())
        }
        ast::Expr::InList {
            expr,
            list,
            negated: false,
        } if (allow_in || x.grouped_cols.contains(&expr.to_string()))
            && is_col(expr)
            && list.iter().all(is_plain_literal) =>
        {
            for item in list.iter_mut() {
                if let ast::Expr::Value(v) = item {
                    x.lits.push(literal(v)?);
                }
                *item = ast::Expr::Value(ast::Value::Placeholder(LIT.into()));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Hex literals compared with a numeric column read as numbers (see
/// [`hex_to_number`]), before they are parameterized.
fn hex_literals_to_numbers(e: &mut ast::Expr, cols: &ColumnKinds) {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::Eq,
            right,
        } => {
            hex_to_number(left, right, cols);
            hex_to_number(right, left, cols);
        }
        ast::Expr::InList { expr, list, .. } => {
            for item in list.iter_mut() {
                hex_to_number(expr, item, cols);
            }
        }
        _ => {}
    }
}

/// `col = literal` (either way round): the literal becomes a parameter,
/// unless a number is compared with a text column.
fn extract_equality(
    left: &mut ast::Expr,
    right: &mut ast::Expr,
    x: &mut Extracted<'_>,
) -> Result<()> {
    let col_ok = |c: &ast::Expr| {
        is_col(c) && (!x.qualified_only || matches!(c, ast::Expr::CompoundIdentifier(_)))
    };
    let cols = x.cols;
    if number_against_text(left, right, cols) || number_against_text(right, left, cols) {
        return Ok(());
    }
    if col_ok(left) && is_plain_literal(right) {
        take_literal(right, &mut x.lits)?;
    } else if col_ok(right) && is_plain_literal(left) {
        take_literal(left, &mut x.lits)?;
    }
    Ok(())
}

/// `col < literal` and the other range comparisons (either way round).
fn extract_range(left: &mut ast::Expr, right: &mut ast::Expr, x: &mut Extracted<'_>) -> Result<()> {
    let cols = x.cols;
    if is_col(left) && is_range_literal(right) && !number_against_text(left, right, cols) {
        take_literal(right, &mut x.lits)?;
    } else if is_col(right) && is_range_literal(left) && !number_against_text(right, left, cols) {
        take_literal(left, &mut x.lits)?;
    }
    Ok(())
}

/// `IN (subquery)` and `EXISTS`: `col = literal` inside becomes a key of
/// the semi-join (see `Planner::keyed_semi`), for the shapes that plans.
fn extract_semi_join(subquery: &mut ast::Query, x: &mut Extracted<'_>) -> Result<()> {
    if subquery.limit.is_some() || subquery.offset.is_some() {
        return Ok(());
    }
    if let ast::SetExpr::Select(s) = &mut *subquery.body {
        // A nested subquery would make the keyed semi-join refuse
        // what the plain one plans: leave those literals alone.
        let nested = s.selection.as_ref().is_some_and(|w| {
            ast::visit_expressions(w, |e| match e {
                ast::Expr::Subquery(_)
                | ast::Expr::InSubquery { .. }
                | ast::Expr::Exists { .. } => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            })
            .is_break()
        });
        if !s.from.is_empty() && !nested && !aggregates(s) {
            if let Some(w) = &mut s.selection {
                // The outer GROUP BY says nothing about these lists.
                let outer = std::mem::take(&mut x.grouped_cols);
                let ranges = std::mem::replace(&mut x.ranges, false);
                let r = extract(w, x, false);
                x.grouped_cols = outer;
                x.ranges = ranges;
                r?;
            }
        }
    }
    Ok(())
}

/// `col IN (a, b, ...)` shares the view of `col = ?`: the list goes to
/// `x.lists`, and the returned equality with its placeholder replaces it.
fn collapse_in_list(
    expr: &ast::Expr,
    list: &[ast::Expr],
    x: &mut Extracted<'_>,
) -> Result<ast::Expr> {
    let mut items = Vec::with_capacity(list.len());
    for item in list.iter() {
        match item {
            ast::Expr::Value(ast::Value::Placeholder(p)) => {
                match p.strip_prefix("?u").and_then(|n| n.parse().ok()) {
                    Some(n) => items.push(Source::User(n)),
                    None => {
                        return Err(crate::DataflowError::Unsupported(
                            format!("placeholder {p}").into(),
                        ))
                    }
                }
            }
            ast::Expr::Value(v) => items.push(Source::Literal(literal(v)?)),
            _ => {}
        }
    }
    let placeholder = format!("?l{}", x.lists.len());
    x.lists.push(items);
    Ok(ast::Expr::BinaryOp {
        left: Box::new(expr.clone()),
        op: ast::BinaryOperator::Eq,
        right: Box::new(ast::Expr::Value(ast::Value::Placeholder(placeholder))),
    })
}

/// Which literals [`normalize`] turns into parameters besides those of
/// top-level equalities and LIMIT/OFFSET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// `col IN (a, b, ...)` becomes one key lookup per element (see
    /// [`Source::List`]).
    pub collapse_in: bool,
    /// Bounds of range comparisons in the outer WHERE of a query over one
    /// table become parameters, so `id BETWEEN 5 AND 10` and `id BETWEEN
    /// 7 AND 12` read one view (as their prepared form does) instead of
    /// installing a view each.
    pub ranges: bool,
}

impl Shape {
    /// The shapes to try, most shared first: a caller takes the first
    /// whose view plans (and keys on its collapsed IN lists); the last is
    /// the query with only its equality literals as parameters.
    pub const PREFERENCE: [Shape; 3] = [
        Shape {
            collapse_in: true,
            ranges: true,
        },
        Shape {
            collapse_in: false,
            ranges: true,
        },
        Shape {
            collapse_in: false,
            ranges: false,
        },
    ];
}

/// Normalizes `q` into the parameterized query of `shape` and its view
/// signature.
/// `cols`: the columns of the tables the query reads, by kind (numbers
/// compared with text columns stay literals; hex literals compared with
/// number columns become numbers).
pub(crate) fn normalize(
    database: &str,
    q: &ast::Query,
    shape: Shape,
    cols: &ColumnKinds,
) -> Result<Normalized> {
    let Shape {
        collapse_in,
        ranges,
    } = shape;
    let mut query = q.clone();
    // 1. Name the caller's placeholders in text order.
    let mut n = 0usize;
    let _ = ast::visit_expressions_mut(&mut query, |e| {
        if let ast::Expr::Value(ast::Value::Placeholder(p)) = e {
            if p == "?" {
                *p = format!("?u{n}");
                n += 1;
            }
        }
        ControlFlow::<()>::Continue(())
    });
    // LIMIT/OFFSET placeholders are visited too (they are expressions).
    let user_params = n;
    // WITH: each CTE inlined where it is read (after the placeholders are
    // named in text order).
    super::cte::inline_ctes(&mut query)?;
    // 2. Literals in top-level equalities of a plain SELECT become slots.
    let mut x = Extracted {
        lits: Vec::new(),
        lists: Vec::new(),
        collapse_in,
        grouped_cols: Vec::new(),
        qualified_only: false,
        ranges: false,
        cols,
    };
    if let ast::SetExpr::Select(s) = &mut *query.body {
        if !s.from.is_empty() {
            // IN lists become several reader lookups, which cannot be
            // merged after aggregation: keep them as filters there.
            let allow_in = !aggregates(s);
            if let ast::GroupByExpr::Expressions(g, _) = &s.group_by {
                x.grouped_cols = g
                    .iter()
                    .filter(|e| is_col(e))
                    .map(|e| e.to_string())
                    .collect();
            }
            // Inner joins' ON conditions are WHERE conditions (the planner
            // moves their parameters there); FROM is visited before WHERE.
            for twj in &mut s.from {
                for j in &mut twj.joins {
                    if let ast::JoinOperator::Inner(ast::JoinConstraint::On(on)) =
                        &mut j.join_operator
                    {
                        x.qualified_only = true;
                        let ranges = std::mem::replace(&mut x.ranges, false);
                        let r = extract(on, &mut x, false);
                        x.qualified_only = false;
                        x.ranges = ranges;
                        r?;
                    }
                }
            }
            // Over one table only: a range parameter is a read-time filter,
            // which cannot be pushed below a join the way a literal is (a
            // filtered cross product would be built whole).
            x.ranges = ranges
                && matches!(&s.from[..], [twj] if twj.joins.is_empty()
                    && matches!(twj.relation, ast::TableFactor::Table { .. }));
            if let Some(w) = &mut s.selection {
                extract(w, &mut x, allow_in)?;
            }
        }
    }
    // 2b. LIMIT/OFFSET: literals become slots too, so every page of a
    // paginated query reads one view.
    let top_k = top_k_of(&query);
    limit_slots(&mut query, &mut x.lits)?;
    // 3. Number every parameter as a slot, in visit order.
    let mut sources = Vec::new();
    let mut lit_iter = x.lits.into_iter();
    let mut lists = x.lists;
    let mut bad = None;
    let _ = ast::visit_expressions_mut(&mut query, |e| {
        if let ast::Expr::Value(ast::Value::Placeholder(p)) = e {
            let src = if p == LIT {
                lit_iter.next().map(Source::Literal)
            } else if let Some(n) = p.strip_prefix("?l") {
                n.parse::<usize>()
                    .ok()
                    .and_then(|n| lists.get_mut(n))
                    .map(|l| Source::List(std::mem::take(l)))
            } else {
                p.strip_prefix("?u")
                    .and_then(|x| x.parse().ok())
                    .map(Source::User)
            };
            match src {
                Some(s) => {
                    *p = format!("?{}", sources.len());
                    sources.push(s);
                }
                None => bad = Some(p.clone()),
            }
        }
        ControlFlow::<()>::Continue(())
    });
    if let Some(p) = bad {
        return Err(crate::DataflowError::Unsupported(
            format!("placeholder {p}").into(),
        ));
    }
    let mut shape = query.clone();
    let _ = shape.visit(&mut Blank);
    let signature = format!("{}\u{1}{}", database.to_ascii_lowercase(), shape);
    Ok(Normalized {
        query,
        sources,
        user_params,
        signature,
        top_k,
    })
}

/// The top-k bound of a query whose LIMIT and OFFSET are literals.
fn top_k_of(q: &ast::Query) -> Option<usize> {
    let number = |e: &ast::Expr| match e {
        ast::Expr::Value(ast::Value::Number(n, _)) => n.parse::<u64>().ok(),
        _ => None,
    };
    let limit = number(q.limit.as_ref()?)?;
    let offset = match &q.offset {
        Some(o) => number(&o.value)?,
        None => 0,
    };
    crate::plan::top_k::bound(limit, offset)
}

/// Parameterizes the top-level `LIMIT`/`OFFSET` literals (visited after the
/// WHERE clause, so their values follow the WHERE literals in `lits`).
///
/// `LIMIT a, b` (MySQL: offset `a`, count `b`) and `LIMIT b OFFSET a` parse
/// to the same AST, so when both are the caller's `?` the order in which the
/// client sends their values is unknown here: refused, so the caller plans
/// it per execution with the values substituted as literals.
fn limit_slots(q: &mut ast::Query, lits: &mut Vec<Value>) -> Result<()> {
    if let (Some(l), Some(o)) = (&q.limit, &q.offset) {
        if is_user_param(l) && is_user_param(&o.value) {
            return Err(crate::DataflowError::Unsupported(
                "both LIMIT and OFFSET as parameters (LIMIT ?, ? and LIMIT ? OFFSET ? parse alike)"
                    .into(),
            ));
        }
    }
    if q.limit.is_some() && q.offset.is_none() {
        // `LIMIT n` is `LIMIT n OFFSET 0`: one shape for both.
        q.offset = Some(ast::Offset {
            value: ast::Expr::Value(ast::Value::Number("0".into(), false)),
            rows: ast::OffsetRows::None,
        });
    }
    let mut take = |e: &mut ast::Expr| -> Result<()> {
        if let ast::Expr::Value(v @ ast::Value::Number(..)) = e {
            // Only what `count_of` accepts; anything else keeps its error.
            if let n @ (Value::Int(0..) | Value::UInt(_)) = literal(v)? {
                lits.push(n);
                *e = ast::Expr::Value(ast::Value::Placeholder(LIT.into()));
            }
        }
        Ok(())
    };
    if let Some(l) = &mut q.limit {
        take(l)?;
    }
    if let Some(o) = &mut q.offset {
        take(&mut o.value)?;
    }
    Ok(())
}

struct Blank;

impl ast::VisitorMut for Blank {
    type Break = ();
    fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
        if let ast::Expr::Value(ast::Value::Placeholder(p)) = e {
            *p = "?".into();
        }
        ControlFlow::Continue(())
    }
}

/// Whether `s` aggregates: an aggregate in its select list, GROUP BY or
/// HAVING. Its rows are then groups, not input rows.
fn aggregates(s: &ast::Select) -> bool {
    let mut aggs = Vec::new();
    for item in &s.projection {
        if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } =
            item
        {
            super::expr::collect_aggregates(e, &mut aggs);
        }
    }
    let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    !aggs.is_empty() || grouped || s.having.is_some()
}
