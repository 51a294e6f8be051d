//! Reading a function's arguments, shared by the function families.

use ladle_common::Value;
use rust_decimal::prelude::ToPrimitive;

use crate::expr::error::EvalResult;
use crate::expr::ops::{to_num, Num};
use crate::expr::tree::{Ctx, Expr};

/// Argument `i` evaluated (NULL when absent): for the functions that
/// evaluate only the arguments they need.
pub(super) fn arg(args: &[Expr], i: usize, c: &Ctx<'_>) -> EvalResult {
    match args.get(i) {
        Some(e) => e.eval_ctx(c),
        None => Ok(Value::Null),
    }
}

/// An argument read as an integer (rounded, clamped to BIGINT's range).
pub(super) fn int_arg(v: &Value) -> Option<i64> {
    match to_num(v)? {
        Num::Int(i) => Some(i.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64),
        Num::Dec(d) => d.round().to_i64(),
        Num::Float(f) => Some(f.round() as i64),
    }
}

/// Whether any argument is NULL (most functions are then NULL).
pub(super) fn null_in(vals: &[Value]) -> bool {
    vals.iter().any(|v| v.is_null())
}

/// The literal `e` is, if it is one.
pub(super) fn literal(e: Option<&Expr>) -> Option<&Value> {
    match e {
        Some(Expr::Literal(v)) => Some(v),
        _ => None,
    }
}
