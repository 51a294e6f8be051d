//! The statistical aggregates (`VAR_POP`, `VAR_SAMP`, `VARIANCE`,
//! `STDDEV_POP`, `STDDEV_SAMP`, `STDDEV`, `STD`) rewritten into
//! `COUNT`/`SUM`, which every aggregation path maintains incrementally
//! (a retraction subtracts from the sums; Welford's running mean could
//! not be undone).
//!
//! With `n = COUNT(x)`, `s = SUM(x)`, `q = SUM(x * x)` and
//! `d = n * q - s * s` (= n^2 times the population variance):
//! `VAR_POP = d / n^2`, `VAR_SAMP = d / (n (n - 1))`, and the standard
//! deviations their square roots. For an exact argument (integer,
//! DECIMAL) `d` is exact, so only the last division rounds; the result
//! has the argument's scale plus 4 decimals, as MariaDB prints it (MariaDB
//! sends a DOUBLE with that many decimals; here it is that DECIMAL). For a
//! floating-point argument the result is a DOUBLE whose last digit may
//! differ from MariaDB's, which sums in row order.

use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::expr::{unsupported, ExprCx, Scope};
use crate::Result;
use ladle_common::SqlType;

/// Which statistic a function name asks for.
#[derive(Clone, Copy)]
enum Stat {
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
}

fn stat_of(e: &ast::Expr) -> Option<(Stat, &ast::Function)> {
    let ast::Expr::Function(f) = e else {
        return None;
    };
    let stat = match f.name.to_string().to_ascii_lowercase().as_str() {
        "var_pop" | "variance" => Stat::VarPop,
        "var_samp" => Stat::VarSamp,
        "stddev_pop" | "stddev" | "std" => Stat::StddevPop,
        "stddev_samp" => Stat::StddevSamp,
        _ => return None,
    };
    Some((stat, f))
}

/// Whether `e` calls a statistical aggregate (outside subqueries too: the
/// caller only needs to know whether to rewrite).
pub(crate) fn has_statistic(e: &ast::Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        if stat_of(x).is_some() && matches!(x, ast::Expr::Function(f) if f.over.is_none()) {
            found = true;
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    found
}

/// Rewrites every statistical aggregate in `e` over the row scope `scope`.
pub(crate) fn expand_statistics(e: &mut ast::Expr, scope: &Scope) -> Result<()> {
    let mut err = None;
    let _ = ast::visit_expressions_mut(e, |x| {
        if err.is_some() {
            return std::ops::ControlFlow::<()>::Continue(());
        }
        if let Some((stat, f)) = stat_of(x) {
            match expansion(stat, f, scope) {
                Ok(Some(new)) => *x = new,
                Ok(None) => {}
                Err(e) => err = Some(e),
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    err.map_or(Ok(()), Err)
}

fn expansion(stat: Stat, f: &ast::Function, scope: &Scope) -> Result<Option<ast::Expr>> {
    if f.over.is_some() {
        return Ok(None); // a window function: refused where windows are
    }
    let ast::FunctionArguments::List(list) = &f.args else {
        return Err(unsupported(format!("{}", f.name)));
    };
    let arg = match list.args.as_slice() {
        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a))]
            if list.duplicate_treatment.is_none() && list.clauses.is_empty() =>
        {
            a
        }
        _ => return Err(unsupported(format!("{f}"))),
    };
    let (ty, _) = ExprCx::row(scope).compile(arg)?.result_type(&scope.types());
    let x = format!("({arg})");
    let n = format!("COUNT({x})");
    let d = format!("({n} * SUM({x} * {x}) - SUM({x}) * SUM({x}))");
    let pop = format!("NULLIF({n} * {n}, 0)");
    let samp = format!("NULLIF({n} * ({n} - 1), 0)");
    let scale = match ty {
        SqlType::Float | SqlType::Double => None,
        SqlType::Decimal { scale, .. } => Some(scale as u32 + 4),
        _ => Some(4),
    };
    let text = match scale {
        Some(sc) => {
            // Exact `d`: one rounding, in the last division.
            let d = format!("CAST({d} AS DOUBLE)");
            let v = match stat {
                Stat::VarPop => format!("{d} / {pop}"),
                Stat::VarSamp => format!("{d} / {samp}"),
                Stat::StddevPop => format!("SQRT({d}) / NULLIF({n}, 0)"),
                Stat::StddevSamp => format!("SQRT({d} / {samp})"),
            };
            format!("CAST({v} AS DECIMAL(38, {}))", sc.min(30))
        }
        None => {
            // Rounding can leave a tiny negative `d` for equal values.
            let d = format!("GREATEST(CAST({d} AS DOUBLE), 0e0)");
            match stat {
                Stat::VarPop => format!("{d} / {pop}"),
                Stat::VarSamp => format!("{d} / {samp}"),
                Stat::StddevPop => format!("SQRT({d} / {pop})"),
                Stat::StddevSamp => format!("SQRT({d} / {samp})"),
            }
        }
    };
    let parsed = Parser::new(&MySqlDialect {})
        .with_recursion_limit(super::depth::MAX_PARSE_DEPTH)
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| crate::DataflowError::Internal(format!("statistics rewrite: {e}")))?;
    Ok(Some(parsed))
}

/// Whether the select list, HAVING or ORDER BY of `s` calls a statistical
/// aggregate.
pub(crate) fn select_has_statistic(s: &ast::Select, q: &ast::Query) -> bool {
    s.projection.iter().any(|i| match i {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
            has_statistic(e)
        }
        _ => false,
    }) || s.having.as_ref().is_some_and(has_statistic)
        || q.order_by
            .iter()
            .flat_map(|o| &o.exprs)
            .any(|o| has_statistic(&o.expr))
}

/// `s` and `q` with every statistical aggregate rewritten over `scope` (the
/// FROM clause's rows); a select-list item keeps its name.
pub(crate) fn expand_in_select(
    s: &ast::Select,
    q: &ast::Query,
    scope: &Scope,
) -> Result<(ast::Select, ast::Query)> {
    let mut s = s.clone();
    let mut q = q.clone();
    for item in &mut s.projection {
        match item {
            ast::SelectItem::UnnamedExpr(e) if has_statistic(e) => {
                let alias = ast::Ident::new(crate::expr_column_name(e));
                let mut expr = e.clone();
                expand_statistics(&mut expr, scope)?;
                *item = ast::SelectItem::ExprWithAlias { expr, alias };
            }
            ast::SelectItem::ExprWithAlias { expr, .. } => expand_statistics(expr, scope)?,
            _ => {}
        }
    }
    if let Some(h) = &mut s.having {
        expand_statistics(h, scope)?;
    }
    if let Some(ob) = &mut q.order_by {
        for o in &mut ob.exprs {
            expand_statistics(&mut o.expr, scope)?;
        }
    }
    Ok((s, q))
}
