//! Reads whose NOW()/RAND() no maintained view can hold (`COALESCE(MIN(x),
//! UTC_TIMESTAMP())` in the select list, `ORDER BY RAND()`): the planner
//! refuses to freeze a clock into maintained state, so such a statement is
//! answered with its clock fixed instead. MySQL evaluates NOW() and its
//! kin once per statement, so replacing each by the value it has now gives
//! the statement's exact answer; the view built for it is not remembered
//! for the statement's text, so the next execution reads the clock again
//! (and an unused view is dropped by the idle timeout). `ORDER BY RAND()`
//! asks for any order: the RAND() keys are dropped, and the rows come back
//! in the order the view holds them, one of the orders it allows.

use sqlparser::ast::{self, visit_expressions_mut, DataType, Expr};
use std::ops::ControlFlow;

use ladle_common::Value;

use crate::error::Result;
use crate::exec::Engine;
use crate::session::Session;

/// The clock functions MySQL evaluates once per statement.
const CLOCK_FUNCTIONS: &[&str] = &[
    "now",
    "current_timestamp",
    "localtime",
    "localtimestamp",
    "utc_timestamp",
    "curdate",
    "current_date",
    "utc_date",
    "curtime",
    "current_time",
    "utc_time",
    "unix_timestamp",
];

fn function_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Function(f) => Some(f.name.to_string().to_ascii_lowercase()),
        _ => None,
    }
}

/// Whether `f` takes no argument (or only a precision): a value of the
/// statement's clock, not of a row.
fn reads_clock_only(f: &ast::Function) -> bool {
    match &f.args {
        ast::FunctionArguments::None => true,
        ast::FunctionArguments::List(l) => l.args.iter().all(|a| {
            matches!(
                a,
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(Expr::Value(
                    ast::Value::Number(..)
                )))
            )
        }),
        ast::FunctionArguments::Subquery(_) => false,
    }
}

/// `q` with its clock functions replaced by their values now and its
/// `ORDER BY RAND()` keys dropped; None when it has neither.
pub fn fix_clock(e: &Engine, s: &Session, q: &ast::Query) -> Result<Option<ast::Query>> {
    let mut fixed = q.clone();
    let mut changed = false;
    if let Some(order) = &mut fixed.order_by {
        let before = order.exprs.len();
        order.exprs.retain(|o| {
            !(function_name(&o.expr).as_deref() == Some("rand")
                && matches!(&o.expr, Expr::Function(f) if f.args == ast::FunctionArguments::None
                    || matches!(&f.args, ast::FunctionArguments::List(l) if l.args.is_empty())))
        });
        changed |= order.exprs.len() != before;
        if order.exprs.is_empty() {
            fixed.order_by = None;
        }
    }
    let mut failure = None;
    let _ = visit_expressions_mut(&mut fixed, |x| {
        let Expr::Function(f) = &*x else {
            return ControlFlow::<()>::Continue(());
        };
        let name = f.name.to_string().to_ascii_lowercase();
        if !CLOCK_FUNCTIONS.contains(&name.as_str()) || !reads_clock_only(f) {
            return ControlFlow::Continue(());
        }
        let fsp = match &f.args {
            ast::FunctionArguments::List(l) => l.args.first().and_then(|a| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(Expr::Value(
                    ast::Value::Number(n, _),
                ))) => n.parse::<u8>().ok(),
                _ => None,
            }),
            _ => None,
        };
        match e.eval_constant(s, x) {
            Ok(v) => {
                if let Some(literal) = literal_of(&v, fsp.unwrap_or(0).min(6)) {
                    *x = literal;
                    changed = true;
                }
                ControlFlow::Continue(())
            }
            Err(err) => {
                failure = Some(err);
                ControlFlow::Break(())
            }
        }
    });
    if let Some(err) = failure {
        return Err(err);
    }
    Ok(changed.then_some(fixed))
}

/// A literal of `v`'s type spelling `v` (with `fsp` fractional digits).
fn literal_of(v: &Value, fsp: u8) -> Option<Expr> {
    let typed = |data_type: DataType, value: String| Expr::TypedString { data_type, value };
    let precision = (fsp > 0).then_some(u64::from(fsp));
    Some(match v {
        Value::DateTime(_) => typed(DataType::Datetime(precision), v.temporal_text(fsp)?),
        Value::Time(_) => typed(
            DataType::Time(precision, ast::TimezoneInfo::None),
            v.temporal_text(fsp)?,
        ),
        Value::Date(_) => typed(DataType::Date, v.to_string()),
        Value::Int(i) => Expr::Value(ast::Value::Number(i.to_string(), false)),
        Value::Decimal(d) => Expr::Value(ast::Value::Number(d.to_string(), false)),
        _ => return None,
    })
}
