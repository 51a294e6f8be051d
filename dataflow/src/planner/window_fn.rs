//! Window functions in the select list (`ROW_NUMBER() OVER (PARTITION BY
//! a ORDER BY b)`, RANK, DENSE_RANK, COUNT/SUM/AVG/MIN/MAX OVER, LAG and
//! LEAD): planned as [`LOp::Window`] nodes over the FROM/WHERE relation, one
//! per distinct window, each call becoming a column the rest of the SELECT
//! (projection, ORDER BY, an outer query's WHERE) reads like any other.

use std::ops::ControlFlow;

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::expr::{unsupported, ExprCx, ScopeCol};
use super::query::Planner;
use super::relation::stable;
use super::select_state::{Frame, SelectState};
use super::syntax::{has_subquery, order_by_item};
use crate::expr::Expr;
use crate::ops::reader::OrderSpec;
use crate::ops::Frame as WindowFrame;
use crate::ops::{AggKind, Bound, WinFn};
use crate::plan::{LNode, LOp};
use crate::{DataflowError, Result, WindowError};

/// Qualifier of the columns window functions add (hidden from `*`, as
/// every `__sq` column is).
const WINDOW_QUALIFIER: &str = "__sqwin";

/// One distinct window (PARTITION BY and ORDER BY) and its calls.
struct WindowPlan {
    text: String,
    partition: Vec<usize>,
    order: OrderSpec,
    frame: Option<WindowFrame>,
    /// The function and its result column (named by the call's index).
    funcs: Vec<(WinFn, ScopeCol)>,
}

/// The window calls in `e` (outside subqueries), added to `calls` once each.
fn collect_calls(e: &ast::Expr, calls: &mut Vec<ast::Function>) {
    if has_subquery(e) {
        return;
    }
    let _ = ast::visit_expressions(e, |x| {
        if let ast::Expr::Function(f) = x {
            if f.over.is_some() && !calls.contains(f) {
                calls.push(f.clone());
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Whether the select list or ORDER BY of `s` (in `q`) calls a window
/// function.
pub(super) fn has_window_calls(s: &ast::Select, q: &ast::Query) -> bool {
    let mut calls = Vec::new();
    for item in &s.projection {
        if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } =
            item
        {
            collect_calls(e, &mut calls);
        }
    }
    for o in q.order_by.iter().flat_map(|ob| &ob.exprs) {
        collect_calls(&o.expr, &mut calls);
    }
    !calls.is_empty()
}

/// The name of a window function called in `e` (outside subqueries).
fn window_call_in(e: &ast::Expr) -> Option<String> {
    let mut name = None;
    super::syntax::any_shallow(e, |x| match x {
        ast::Expr::Function(f) if f.over.is_some() => {
            name = Some(f.name.to_string().to_ascii_lowercase());
            true
        }
        _ => false,
    });
    name
}

/// The expressions a call passes as arguments.
fn call_args(f: &ast::Function) -> impl Iterator<Item = &ast::Expr> {
    let args = match &f.args {
        ast::FunctionArguments::List(l) => l.args.as_slice(),
        _ => &[],
    };
    args.iter().filter_map(|a| match a {
        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))
        | ast::FunctionArg::Named {
            arg: ast::FunctionArgExpr::Expr(e),
            ..
        } => Some(e),
        _ => None,
    })
}

/// Refuses window functions where MySQL does (3593): in WHERE, GROUP BY
/// or HAVING, or inside an aggregate's or a window function's arguments;
/// and inside a window's PARTITION BY or ORDER BY (3594).
pub(super) fn misplaced_window_calls(s: &ast::Select, q: &ast::Query) -> Result<()> {
    let group_by = match &s.group_by {
        ast::GroupByExpr::Expressions(g, _) => g.as_slice(),
        ast::GroupByExpr::All(_) => &[],
    };
    let misused = |name: String| DataflowError::from(WindowError::InvalidUse(name));
    for e in s.selection.iter().chain(group_by).chain(&s.having) {
        if let Some(name) = window_call_in(e) {
            return Err(misused(name));
        }
    }
    let items = s.projection.iter().filter_map(|i| match i {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    });
    let order = q.order_by.iter().flat_map(|ob| &ob.exprs).map(|o| &o.expr);
    for e in items.chain(order) {
        let mut found = None;
        super::syntax::any_shallow(e, |x| {
            let ast::Expr::Function(f) = x else {
                return false;
            };
            if f.over.is_none() && super::expr::aggregate_name(x).is_none() {
                return false;
            }
            found = call_args(f).find_map(window_call_in).map(misused);
            if let (None, Some(ast::WindowType::WindowSpec(w))) = (&found, &f.over) {
                let spec = w
                    .partition_by
                    .iter()
                    .chain(w.order_by.iter().map(|o| &o.expr));
                if spec.clone().any(|e| window_call_in(e).is_some()) {
                    let window = w.window_name.as_ref().map(|n| n.value.clone());
                    found = Some(
                        WindowError::NestedInSpec(
                            window.unwrap_or_else(|| "<unnamed window>".into()),
                        )
                        .into(),
                    );
                }
            }
            found.is_some()
        });
        if let Some(e) = found {
            return Err(e);
        }
    }
    Ok(())
}

/// `e` with each window call replaced by its column; whether any was.
fn replace_calls(e: &mut ast::Expr, calls: &[ast::Function]) -> bool {
    if has_subquery(e) {
        return false;
    }
    let mut any = false;
    let _ = ast::visit_expressions_mut(e, |x| {
        if let ast::Expr::Function(f) = x {
            if let Some(i) = calls.iter().position(|c| c == f) {
                *x = ast::Expr::CompoundIdentifier(vec![
                    ast::Ident::new(WINDOW_QUALIFIER),
                    ast::Ident::new(format!("__w{i}")),
                ]);
                any = true;
            }
        }
        ControlFlow::<()>::Continue(())
    });
    any
}

/// The column of `e`: its own when it is one, else a computed column after
/// the relation's `width` (shared by equal expressions).
fn place(e: Expr, width: usize, extra: &mut Vec<Expr>) -> usize {
    if let Expr::Column(c) = e {
        return c;
    }
    match extra.iter().position(|x| *x == e) {
        Some(i) => width + i,
        None => {
            extra.push(e);
            width + extra.len() - 1
        }
    }
}

impl Planner<'_> {
    /// Plans the select list's window calls over `st` (FROM and WHERE
    /// planned): returns the SELECT and query with each call replaced by
    /// its column, or `None` when there are none. WHERE's reader keys
    /// (`col = ?`) are added to every window's PARTITION BY: a read sees
    /// only one key's rows, so partitioning by it changes nothing, and the
    /// view can then be keyed by it.
    pub(super) fn window_functions(
        &self,
        st: &mut SelectState,
        s: &ast::Select,
        q: &ast::Query,
    ) -> Result<Option<(ast::Select, ast::Query)>> {
        let mut calls: Vec<ast::Function> = Vec::new();
        for item in &s.projection {
            if let ast::SelectItem::UnnamedExpr(e)
            | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
            {
                collect_calls(e, &mut calls);
            }
        }
        for o in q.order_by.iter().flat_map(|ob| &ob.exprs) {
            collect_calls(&o.expr, &mut calls);
        }
        if calls.is_empty() {
            return Ok(None);
        }
        if st.window.is_some() {
            return Err(unsupported(
                "window functions over a derived table with LIMIT",
            ));
        }
        if !st.read_filters.is_empty() {
            return Err(unsupported(
                "window functions with a range or repeated parameter (or NOW()) in WHERE",
            ));
        }
        let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty())
            || s.having.is_some();
        if grouped {
            return Err(unsupported("window functions with GROUP BY"));
        }

        let width = st.node.width();
        let frame = Frame::after(&st.scope, None);
        let (windows, extra) = self.plan_windows(st, &calls, &frame)?;
        add_window_nodes(st, windows, extra, &frame, width);
        rewrite_calls(s, q, &calls).map(Some)
    }

    /// Each distinct window of `calls`, with its functions, and the
    /// computed columns (after the relation's) they read.
    fn plan_windows(
        &self,
        st: &SelectState,
        calls: &[ast::Function],
        frame: &Frame,
    ) -> Result<(Vec<WindowPlan>, Vec<Expr>)> {
        let width = st.node.width();
        let mut extra: Vec<Expr> = Vec::new();
        let mut windows: Vec<WindowPlan> = Vec::new();
        {
            let cx = ExprCx::row(&st.scope);
            let compile = |e: &ast::Expr| -> Result<Expr> { stable(cx.compile(e)?) };
            for (i, f) in calls.iter().enumerate() {
                let spec = match &f.over {
                    Some(ast::WindowType::WindowSpec(w)) if w.window_name.is_none() => w,
                    _ => return Err(unsupported("named windows")),
                };
                if f.filter.is_some() || f.null_treatment.is_some() || !f.within_group.is_empty() {
                    return Err(unsupported(format!("{f}")));
                }
                let text = format!(
                    "{:?}|{:?}|{:?}",
                    spec.partition_by
                        .iter()
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>(),
                    spec.order_by
                        .iter()
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>(),
                    spec.window_frame.as_ref().map(|f| format!("{f:?}"))
                );
                let w = match windows.iter().position(|w| w.text == text) {
                    Some(w) => w,
                    None => {
                        let mut partition = Vec::new();
                        for e in &spec.partition_by {
                            let c = place(compile(e)?, width, &mut extra);
                            if !partition.contains(&c) {
                                partition.push(c);
                            }
                        }
                        for (k, _) in &st.key_frame {
                            if !partition.contains(k) {
                                partition.push(*k);
                            }
                        }
                        let mut order = Vec::new();
                        for o in &spec.order_by {
                            if o.nulls_first.is_some() || o.with_fill.is_some() {
                                return Err(unsupported("NULLS FIRST/LAST in a window"));
                            }
                            let e = compile(&o.expr)?;
                            let coll = frame.collation_of(&e);
                            let c = place(e, width, &mut extra);
                            order.push((c, o.asc == Some(false), coll));
                        }
                        let window_frame = match &spec.window_frame {
                            Some(f) => Some(frame_of(f, &order, &cx)?),
                            None => None,
                        };
                        windows.push(WindowPlan {
                            text,
                            partition,
                            order,
                            frame: window_frame,
                            funcs: Vec::new(),
                        });
                        windows.len() - 1
                    }
                };
                let (func, ty, nullable, collation) =
                    self.window_call(f, &cx, frame, width, &mut extra)?;
                let shown = match &func {
                    WinFn::Agg(spec) => {
                        let arg = match spec.col.checked_sub(width) {
                            Some(x) => extra.get(x).cloned(),
                            None => Some(Expr::Column(spec.col)),
                        };
                        arg.and_then(|arg| {
                            super::aggregate::shown_decimals(spec, &arg, &ty, false, &frame.types)
                        })
                    }
                    _ => None,
                };
                windows[w].funcs.push((
                    func,
                    ScopeCol {
                        qualifier: WINDOW_QUALIFIER.into(),
                        name: format!("__w{i}"),
                        ty,
                        nullable,
                        collation,
                        table: String::new(),
                        origin: None,
                        stored: false,
                        shown,
                    },
                ));
            }
        }

        Ok((windows, extra))
    }

    /// One window call: its function and result type.
    fn window_call(
        &self,
        f: &ast::Function,
        cx: &ExprCx<'_>,
        frame: &Frame,
        width: usize,
        extra: &mut Vec<Expr>,
    ) -> Result<(WinFn, ladle_common::SqlType, bool, Collation)> {
        let name = f.name.to_string().to_ascii_lowercase();
        let args: Vec<&ast::FunctionArg> = match &f.args {
            ast::FunctionArguments::List(l) => l.args.iter().collect(),
            ast::FunctionArguments::None => vec![],
            ast::FunctionArguments::Subquery(_) => {
                return Err(unsupported(format!("{name} over a subquery")))
            }
        };
        let bigint = crate::expr::int_of_width(21);
        match name.as_str() {
            "row_number" | "rank" | "dense_rank" => {
                if !args.is_empty() {
                    return Err(DataflowError::BadArgument(format!(
                        "{} takes no arguments",
                        name.to_ascii_uppercase()
                    )));
                }
                let func = match name.as_str() {
                    "row_number" => WinFn::RowNumber,
                    "rank" => WinFn::Rank,
                    _ => WinFn::DenseRank,
                };
                Ok((func, bigint, false, Collation::Binary))
            }
            "count" | "sum" | "avg" | "min" | "max" => {
                if let ast::FunctionArguments::List(l) = &f.args {
                    if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
                        return Err(unsupported(format!(
                            "{}(DISTINCT ...) over a window",
                            name.to_ascii_uppercase()
                        )));
                    }
                }
                let mut plain = f.clone();
                plain.over = None;
                let (mut spec, arg, (ty, nullable, coll)) =
                    self.agg_spec(&ast::Expr::Function(plain), cx, 0)?;
                // An AVG's quotient digits, read through `ScopeCol::shown`.
                spec.exact_avg = spec.kind == AggKind::Avg && !spec.float;
                if spec.kind != AggKind::CountStar {
                    spec.col = place(arg, width, extra);
                }
                // A window of a row is never empty, but MIN/SUM of NULLs is NULL.
                Ok((WinFn::Agg(spec), ty, nullable, coll))
            }
            "lag" | "lead" => shift_call(&name, &args, cx, frame, width, extra),
            "first_value" | "last_value" | "nth_value" => {
                nth_call(&name, &args, cx, frame, width, extra)
            }
            "percent_rank" | "cume_dist" => {
                if !args.is_empty() {
                    return Err(DataflowError::BadArgument(format!(
                        "{} takes no arguments",
                        name.to_ascii_uppercase()
                    )));
                }
                let func = if name == "percent_rank" {
                    WinFn::PercentRank
                } else {
                    WinFn::CumeDist
                };
                Ok((func, SqlType::Double, false, Collation::Binary))
            }
            "ntile" => {
                let n = match args.as_slice() {
                    [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))] => {
                        constant_arg(cx, e, &name, "argument")?.as_i64()
                    }
                    _ => None,
                };
                match n {
                    Some(n) if n >= 1 => {
                        Ok((WinFn::Ntile(n as usize), bigint, false, Collation::Binary))
                    }
                    _ => Err(incorrect_arguments("ntile")),
                }
            }
            other => Err(unsupported(format!(
                "window function {}",
                other.to_ascii_uppercase()
            ))),
        }
    }
}

/// The computed columns `extra` (after the relation's `width`) and one
/// window node per distinct window over `st`'s plan, each adding its calls'
/// columns to the scope (named by the calls' indexes).
fn add_window_nodes(
    st: &mut SelectState,
    windows: Vec<WindowPlan>,
    extra: Vec<Expr>,
    frame: &Frame,
    width: usize,
) {
    // The computed columns the windows read, after the relation's.
    if !extra.is_empty() {
        let mut colls = st.node.colls.clone();
        for (n, e) in extra.iter().enumerate() {
            let (ty, nullable) = e.result_type(&frame.types);
            let collation = frame.collation_of(e);
            colls.push(collation);
            st.scope.cols.push(ScopeCol {
                qualifier: WINDOW_QUALIFIER.into(),
                name: format!("__x{n}"),
                ty,
                nullable,
                collation,
                table: String::new(),
                origin: None,
                stored: false,
                shown: None,
            });
        }
        st.node = LNode {
            op: LOp::Project((0..width).map(Expr::Column).chain(extra).collect()),
            inputs: vec![LNode::take(&mut st.node)],
            colls,
        };
    }
    // One window node per distinct window, each adding its calls'
    // columns; the calls' names are their indexes.
    for w in windows {
        let mut colls = st.node.colls.clone();
        let mut funcs = Vec::new();
        for (f, col) in w.funcs {
            if let WinFn::Agg(spec) = &f {
                let arg_null = st.scope.cols.get(spec.col).is_none_or(|c| c.nullable);
                if col.nullable && !arg_null && holds_current_row(w.frame.as_ref()) {
                    st.never_null.push(st.scope.cols.len());
                }
            }
            colls.push(col.collation);
            funcs.push(f);
            st.scope.cols.push(col);
        }
        st.node = LNode {
            op: LOp::Window {
                partition: w.partition,
                order: w.order,
                funcs,
                offset: 0,
                limit: None,
                frame: w.frame,
            },
            inputs: vec![LNode::take(&mut st.node)],
            colls,
        };
    }
}

/// Whether every row's frame holds the row itself (so an aggregate over
/// it of a value never NULL is never NULL): the default frame does, an
/// explicit one unless it starts after the row or ends before it.
fn holds_current_row(frame: Option<&WindowFrame>) -> bool {
    frame.is_none_or(|f| {
        !matches!(f.start, Bound::Following(n) if n > 0.0)
            && !matches!(f.end, Bound::Preceding(n) if n > 0.0)
    })
}

/// The SELECT and query with each window call replaced by its column (an
/// unnamed select item keeps the call's text as its name).
fn rewrite_calls(
    s: &ast::Select,
    q: &ast::Query,
    calls: &[ast::Function],
) -> Result<(ast::Select, ast::Query)> {
    let mut s2 = s.clone();
    for item in s2.projection.iter_mut() {
        match item {
            ast::SelectItem::UnnamedExpr(e) => {
                let name = crate::expr_column_name(e);
                if replace_calls(e, calls) {
                    *item = ast::SelectItem::ExprWithAlias {
                        expr: e.clone(),
                        alias: ast::Ident::new(name),
                    };
                }
            }
            ast::SelectItem::ExprWithAlias { expr, .. } => {
                replace_calls(expr, calls);
            }
            _ => {}
        }
    }
    let mut aggregates = Vec::new();
    for item in &s2.projection {
        if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } =
            item
        {
            super::expr::collect_aggregates(e, &mut aggregates);
        }
    }
    if !aggregates.is_empty() {
        return Err(unsupported("window functions with aggregates"));
    }
    let mut q2 = q.clone();
    for o in q2.order_by.iter_mut().flat_map(|ob| ob.exprs.iter_mut()) {
        replace_calls(&mut o.expr, calls);
    }
    // Without ORDER BY, MySQL returns the rows in the order it computed
    // the (last) window in: its PARTITION BY, then its ORDER BY. ORMs'
    // tests read them so (SQLAlchemy's WindowFunctionTest).
    if q2.order_by.is_none() && s.distinct.is_none() {
        if let Some(ast::WindowType::WindowSpec(w)) = calls.last().and_then(|f| f.over.as_ref()) {
            let exprs: Vec<ast::OrderByExpr> = w
                .partition_by
                .iter()
                .map(order_by_item)
                .chain(w.order_by.iter().cloned())
                .collect();
            if !exprs.is_empty() {
                q2.order_by = Some(ast::OrderBy {
                    exprs,
                    interpolate: None,
                });
            }
        }
    }
    Ok((s2, q2))
}

/// An explicit frame: ROWS or RANGE, its bounds' offsets constants (RANGE
/// with an offset over one numeric ORDER BY value).
fn frame_of(f: &ast::WindowFrame, order: &OrderSpec, cx: &ExprCx<'_>) -> Result<WindowFrame> {
    let rows = match f.units {
        ast::WindowFrameUnits::Rows => true,
        ast::WindowFrameUnits::Range => false,
        ast::WindowFrameUnits::Groups => return Err(unsupported("GROUPS window frames")),
    };
    let offset = |e: &ast::Expr| -> Result<f64> {
        let x = cx.compile(e)?;
        if !x.columns().is_empty() || x.has_params() || x.is_volatile() {
            return Err(unsupported("a window frame offset that is not a constant"));
        }
        let v = x.eval(&[]).map_err(DataflowError::from)?;
        let n = crate::expr::value_to_f64(&v).filter(|n| *n >= 0.0 && !v.is_null());
        match n {
            Some(n) if !rows || n.fract() == 0.0 => Ok(n),
            _ => Err(DataflowError::BadArgument(format!(
                "Window frame offset {v} is not a non-negative {}",
                if rows { "integer" } else { "number" }
            ))),
        }
    };
    let bound = |b: &ast::WindowFrameBound, start: bool| -> Result<Bound> {
        Ok(match b {
            ast::WindowFrameBound::CurrentRow => Bound::CurrentRow,
            ast::WindowFrameBound::Preceding(None) if start => Bound::UnboundedPreceding,
            ast::WindowFrameBound::Following(None) if !start => Bound::UnboundedFollowing,
            ast::WindowFrameBound::Preceding(None) | ast::WindowFrameBound::Following(None) => {
                return Err(DataflowError::BadArgument(format!(
                    "Window frame bound {b} is not allowed there"
                )))
            }
            ast::WindowFrameBound::Preceding(Some(e)) => Bound::Preceding(offset(e)?),
            ast::WindowFrameBound::Following(Some(e)) => Bound::Following(offset(e)?),
        })
    };
    let frame = WindowFrame {
        rows,
        start: bound(&f.start_bound, true)?,
        end: match &f.end_bound {
            Some(b) => bound(b, false)?,
            None => Bound::CurrentRow,
        },
    };
    let offsets = [&frame.start, &frame.end]
        .iter()
        .any(|b| matches!(b, Bound::Preceding(_) | Bound::Following(_)));
    if !rows && offsets && order.len() != 1 {
        return Err(unsupported(
            "a RANGE frame with an offset over other than one ORDER BY value",
        ));
    }
    Ok(frame)
}

/// A window function's constant argument (NTILE's buckets, NTH_VALUE's N,
/// LAG/LEAD's offset and default); `what` names it in the refusal of a
/// non-constant one.
fn constant_arg(cx: &ExprCx<'_>, e: &ast::Expr, name: &str, what: &str) -> Result<Value> {
    let x = cx.compile(e)?;
    if !x.columns().is_empty() || x.has_params() || x.is_volatile() {
        return Err(unsupported(format!(
            "{} with a non-constant {what}",
            name.to_ascii_uppercase()
        )));
    }
    x.eval(&[]).map_err(DataflowError::from)
}

/// A window function's argument, an expression (not `*` or a named one).
fn unnamed_arg(name: &str, a: &ast::FunctionArg) -> Result<ast::Expr> {
    match a {
        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e.clone()),
        other => Err(unsupported(format!("{name}({other})"))),
    }
}

/// MySQL's error for a call with the wrong number of arguments.
fn parameter_count(name: &str) -> DataflowError {
    DataflowError::BadArgument(format!(
        "Incorrect parameter count in the call to native function '{}'",
        name.to_ascii_uppercase()
    ))
}

/// MySQL's error for an argument out of its range (a negative offset).
fn incorrect_arguments(name: &str) -> DataflowError {
    DataflowError::BadArgument(format!(
        "Incorrect arguments to {}",
        name.to_ascii_uppercase()
    ))
}

/// LAG or LEAD: its column, constant offset and default.
fn shift_call(
    name: &str,
    args: &[&ast::FunctionArg],
    cx: &ExprCx<'_>,
    frame: &Frame,
    width: usize,
    extra: &mut Vec<Expr>,
) -> Result<(WinFn, ladle_common::SqlType, bool, Collation)> {
    let expr_of = |a: &ast::FunctionArg| unnamed_arg(name, a);
    let (arg, offset, default) = match args {
        [a] => (expr_of(a)?, None, None),
        [a, o] => (expr_of(a)?, Some(expr_of(o)?), None),
        [a, o, d] => (expr_of(a)?, Some(expr_of(o)?), Some(expr_of(d)?)),
        _ => return Err(parameter_count(name)),
    };
    let arg = stable(cx.compile(&arg)?)?;
    let (ty, _) = arg.result_type(&frame.types);
    let coll = frame.collation_of(&arg);
    let constant = |e: &ast::Expr| constant_arg(cx, e, name, "offset or default");
    let offset = match offset {
        None => 1,
        Some(o) => match constant(&o)?.as_i64() {
            Some(n) if n >= 0 => n as usize,
            _ => return Err(incorrect_arguments(name)),
        },
    };
    let default = match default {
        None => Value::Null,
        Some(d) => constant(&d)?,
    };
    let col = place(arg, width, extra);
    Ok((
        WinFn::Shift {
            col,
            offset,
            lead: name == "lead",
            default,
        },
        ty,
        true,
        coll,
    ))
}

/// FIRST_VALUE, LAST_VALUE or NTH_VALUE: its column and N.
fn nth_call(
    name: &str,
    args: &[&ast::FunctionArg],
    cx: &ExprCx<'_>,
    frame: &Frame,
    width: usize,
    extra: &mut Vec<Expr>,
) -> Result<(WinFn, ladle_common::SqlType, bool, Collation)> {
    let expr_of = |a: &ast::FunctionArg| unnamed_arg(name, a);
    let (arg, nth) = match (name, args) {
        ("nth_value", [a, n]) => (expr_of(a)?, Some(expr_of(n)?)),
        ("first_value" | "last_value", [a]) => (expr_of(a)?, None),
        _ => return Err(parameter_count(name)),
    };
    let nth = match nth {
        None => 1,
        Some(n) => match constant_arg(cx, &n, name, "argument")?.as_i64() {
            Some(n) if n >= 1 => n as usize,
            _ => return Err(incorrect_arguments(name)),
        },
    };
    let arg = stable(cx.compile(&arg)?)?;
    let (ty, _) = arg.result_type(&frame.types);
    let coll = frame.collation_of(&arg);
    let col = place(arg, width, extra);
    let func = WinFn::Nth {
        col,
        nth,
        from_last: name == "last_value",
    };
    Ok((func, ty, true, coll))
}
