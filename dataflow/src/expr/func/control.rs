//! Control flow and comparison functions: COALESCE, IFNULL, IF and a
//! scalar subquery's single row evaluate only the arguments they need;
//! NULLIF, GREATEST, LEAST and FIELD compare their evaluated arguments.

use ladle_common::{Collation, SqlType, Value};

use super::args::{arg, null_in};
use super::Func;
use crate::expr::error::{EvalError, EvalResult};
use crate::expr::ops;
use crate::expr::tree::{Ctx, Expr};
use crate::expr::typing::unify_types;

/// COALESCE, IFNULL, IF and [`Func::SingleRow`], evaluating `args` lazily.
pub(super) fn call_lazy(f: Func, args: &[Expr], c: &Ctx<'_>) -> EvalResult {
    use Func::*;
    match f {
        Coalesce => {
            for a in args {
                let v = a.eval_ctx(c)?;
                if !v.is_null() {
                    return Ok(v);
                }
            }
            Ok(Value::Null)
        }
        IfNull => {
            let v = arg(args, 0, c)?;
            if v.is_null() {
                arg(args, 1, c)
            } else {
                Ok(v)
            }
        }
        If => {
            let cond = arg(args, 0, c)?;
            if ops::truth(&cond) == Some(true) {
                arg(args, 1, c)
            } else {
                arg(args, 2, c)
            }
        }
        SingleRow => {
            let n = arg(args, 0, c)?;
            if n.as_i64().unwrap_or(0) > 1 {
                return Err(EvalError::SubqueryRows);
            }
            arg(args, 1, c)
        }
        _ => unreachable!("{f:?} is not a lazy control function"),
    }
}

/// NULLIF, GREATEST and LEAST over their evaluated arguments `vals`
/// (`v0` the first).
pub(super) fn call(f: Func, vals: &[Value], v0: Value) -> EvalResult {
    use Func::*;
    Ok(match f {
        NullIf => {
            let v1 = vals.get(1).cloned().unwrap_or(Value::Null);
            if ops::compare(&v0, &v1, Collation::GeneralCi) == Some(std::cmp::Ordering::Equal) {
                Value::Null
            } else {
                v0
            }
        }
        Greatest | Least => {
            if null_in(vals) {
                return Ok(Value::Null);
            }
            let mut best = vals[0].clone();
            for v in &vals[1..] {
                let o = ops::compare(v, &best, Collation::GeneralCi);
                let better = if f == Greatest {
                    o == Some(std::cmp::Ordering::Greater)
                } else {
                    o == Some(std::cmp::Ordering::Less)
                };
                if better {
                    best = v.clone();
                }
            }
            best
        }
        Field => {
            let at = vals[1..].iter().position(|v| {
                ops::compare(&v0, v, Collation::GeneralCi) == Some(std::cmp::Ordering::Equal)
            });
            Value::Int(at.map_or(0, |i| i as i64 + 1))
        }
        _ => unreachable!("{f:?} is not a comparison function"),
    })
}

/// The result types of the control and comparison functions, given their
/// arguments' types.
pub(super) fn result_type(f: Func, tys: &[(SqlType, bool)]) -> (SqlType, bool) {
    use Func::*;
    let any_null = tys.iter().any(|t| t.1);
    match f {
        Coalesce => {
            let (t, _) = unify_types(tys);
            (t, tys.iter().all(|t| t.1))
        }
        IfNull => {
            let (t, _) = unify_types(tys);
            (t, tys.get(1).map(|t| t.1).unwrap_or(true))
        }
        NullIf => (tys[0].0.clone(), true),
        Field => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            false,
        ),
        If => unify_types(&tys[1..]),
        Greatest | Least => {
            let (t, _) = unify_types(tys);
            (t, any_null)
        }
        SingleRow => (
            tys.get(1).map(|t| t.0.clone()).unwrap_or(SqlType::Int {
                bytes: 8,
                unsigned: false,
                display_width: None,
            }),
            true,
        ),
        _ => unreachable!("{f:?} is not a control or comparison function"),
    }
}
