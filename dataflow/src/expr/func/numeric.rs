//! Numeric functions: ABS, SIGN, ROUND and TRUNCATE, FLOOR and CEIL, MOD,
//! POW, SQRT, the trigonometric and logarithmic functions, PI and RAND.

use chrono::Utc;
use ladle_common::{SqlType, Value};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};

use super::args::int_arg;
use super::Func;
use crate::expr::error::{EvalError, EvalResult};
use crate::expr::ops::{self, to_num, Num};
use crate::expr::tree::{ArithOp, Expr};
use crate::expr::typing::{int_of_width, type_chars};

/// The numeric functions over their evaluated arguments `vals` (`v0` the
/// first).
pub(super) fn call(f: Func, vals: &[Value], v0: Value) -> EvalResult {
    use Func::*;
    Ok(match f {
        Abs => match to_num(&v0) {
            None => Value::Null,
            // A signed BIGINT stays signed: ABS(-9223372036854775808) is
            // out of its range, as in MariaDB (1690), not 2^63.
            Some(Num::Int(i)) if matches!(v0, Value::Int(_)) && i.abs() > i128::from(i64::MAX) => {
                return Err(EvalError::OutOfRange("BIGINT value is out of range".into()))
            }
            Some(Num::Int(i)) => ops::int_value(i.abs())?,
            Some(Num::Dec(d)) => Value::Decimal(d.abs()),
            Some(Num::Float(x)) => Value::Double(x.abs()),
        },
        Sign => match to_num(&v0) {
            None => Value::Null,
            Some(Num::Int(i)) => Value::Int(i.signum() as i64),
            Some(Num::Dec(d)) => Value::Int(if d.is_zero() {
                0
            } else if d.is_sign_negative() {
                -1
            } else {
                1
            }),
            Some(Num::Float(x)) => Value::Int(if x == 0.0 {
                0
            } else if x < 0.0 {
                -1
            } else {
                1
            }),
        },
        Round | Truncate => {
            let places = match vals.get(1) {
                Some(v) if v.is_null() => return Ok(Value::Null),
                Some(v) => int_arg(v).unwrap_or(0),
                None => 0,
            };
            positive_zero(round(&v0, places, f == Truncate)?)
        }
        Floor | Ceil => {
            match to_num(&v0) {
                None => Value::Null,
                Some(Num::Int(i)) => ops::int_value(i)?,
                Some(Num::Dec(d)) => {
                    let r = if f == Floor { d.floor() } else { d.ceil() };
                    ops::int_value(r.to_i128().ok_or_else(|| {
                        EvalError::OutOfRange("BIGINT value is out of range".into())
                    })?)?
                }
                Some(Num::Float(x)) => {
                    positive_zero(Value::Double(if f == Floor { x.floor() } else { x.ceil() }))
                }
            }
        }
        Mod => ops::arith(ArithOp::Mod, &v0, &vals[1])?,
        Pow => match (ops::value_to_f64(&v0), ops::value_to_f64(&vals[1])) {
            (Some(a), Some(b)) => {
                let r = a.powf(b);
                if r.is_finite() {
                    Value::Double(r)
                } else {
                    return Err(EvalError::OutOfRange(
                        "DOUBLE value is out of range in 'pow'".into(),
                    ));
                }
            }
            _ => Value::Null,
        },
        Sqrt => match ops::value_to_f64(&v0) {
            Some(a) if a >= 0.0 => Value::Double(a.sqrt()),
            _ => Value::Null,
        },
        Sin | Cos | Tan | Cot | Asin | Acos | Atan | Exp | Ln | Log | Log2 | Log10 | Degrees
        | Radians => {
            let xs: Option<Vec<f64>> = vals.iter().map(ops::value_to_f64).collect();
            match xs {
                Some(xs) => math(f, &xs)?,
                None => Value::Null,
            }
        }
        Pi => Value::Double(std::f64::consts::PI),
        Rand => Value::Double(rand_f64()),
        _ => unreachable!("{f:?} is not a numeric function"),
    })
}

/// The result types of the numeric functions, given their arguments
/// (ROUND's literal scale) and their types.
pub(super) fn result_type(f: Func, args: &[Expr], tys: &[(SqlType, bool)]) -> (SqlType, bool) {
    use Func::*;
    let any_null = tys.iter().any(|t| t.1);
    let bigint = SqlType::Int {
        bytes: 8,
        unsigned: false,
        display_width: None,
    };
    match f {
        Sign => (bigint, any_null),
        Abs => match &tys[0].0 {
            t @ SqlType::Int { .. } => (int_of_width(type_chars(t)), any_null),
            t => (t.clone(), any_null),
        },
        Round | Truncate => match &tys[0].0 {
            SqlType::Decimal { precision, .. } => {
                let scale = match args.get(1) {
                    Some(Expr::Literal(v)) => v.as_i64().unwrap_or(0).clamp(0, 30) as u8,
                    _ => 0,
                };
                (
                    SqlType::Decimal {
                        precision: *precision,
                        scale,
                    },
                    any_null,
                )
            }
            t => (t.clone(), any_null),
        },
        Floor | Ceil => match &tys[0].0 {
            SqlType::Float | SqlType::Double => (SqlType::Double, any_null),
            _ => (bigint, any_null),
        },
        Mod => (tys[0].0.clone(), true),
        Pow | Sqrt | Rand => (SqlType::Double, f != Rand),
        Sin | Cos | Tan | Cot | Asin | Acos | Atan | Exp | Ln | Log | Log2 | Log10 | Degrees
        | Radians => (SqlType::Double, true),
        Pi => (SqlType::Double, false),
        _ => unreachable!("{f:?} is not a numeric function"),
    }
}

fn rand_f64() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(Utc::now().timestamp_nanos_opt().unwrap_or(0) as u128);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

fn round(v: &Value, places: i64, truncate: bool) -> EvalResult {
    let strategy = if truncate {
        RoundingStrategy::ToZero
    } else {
        RoundingStrategy::MidpointAwayFromZero
    };
    Ok(match to_num(v) {
        None => Value::Null,
        Some(Num::Int(i)) => {
            if places >= 0 {
                ops::int_value(i)?
            } else {
                // Past 10^20 every BIGINT rounds to 0.
                let Some(p) = 10i128.checked_pow(places.unsigned_abs().min(20) as u32) else {
                    return Ok(Value::Int(0));
                };
                let d = Decimal::from_i128_with_scale(i, 0) / Decimal::from_i128_with_scale(p, 0);
                let r = d.round_dp_with_strategy(0, strategy);
                let r =
                    r.to_i128().unwrap_or(0).checked_mul(p).ok_or_else(|| {
                        EvalError::OutOfRange("BIGINT value is out of range".into())
                    })?;
                ops::int_value(r)?
            }
        }
        Some(Num::Dec(d)) => {
            if places >= 0 {
                let p = places.min(28) as u32;
                let mut r = d.round_dp_with_strategy(p, strategy);
                r.rescale(p);
                Value::Decimal(r)
            } else {
                let p = Decimal::from_i128_with_scale(
                    10i128.pow(places.unsigned_abs().min(28) as u32),
                    0,
                );
                (d / p)
                    .round_dp_with_strategy(0, strategy)
                    .checked_mul(p)
                    .map(Value::Decimal)
                    .ok_or_else(|| EvalError::OutOfRange("DECIMAL value is out of range".into()))?
            }
        }
        Some(Num::Float(x)) => Value::Double(round_double(x, places, truncate)),
    })
}

/// ROUND/TRUNCATE of a DOUBLE as MariaDB's `my_double_round`: scaled by
/// the power of ten, rounded to the nearest integer with ties to even
/// (C's `rint`: ROUND(2.5e0) is 2, ROUND(1.2345e0, 3) is 1.234) or
/// truncated, and scaled back; a scaling past DOUBLE's range leaves the
/// value (or 0 for negative places).
fn round_double(x: f64, places: i64, truncate: bool) -> f64 {
    let digits = places.unsigned_abs().min(400);
    // Exact for every power of ten a DOUBLE holds, as MariaDB's table
    // (products of powers up to 10^22 are exact).
    let scale: f64 = if digits <= 22 {
        10f64.powi(digits as i32)
    } else {
        format!("1e{digits}").parse().unwrap_or(f64::INFINITY)
    };
    let whole = |y: f64| {
        if truncate {
            y.trunc()
        } else {
            y.round_ties_even()
        }
    };
    if places < 0 {
        if scale.is_infinite() {
            0.0
        } else {
            whole(x / scale) * scale
        }
    } else {
        let y = x * scale;
        if y.is_infinite() {
            x
        } else {
            whole(y) / scale
        }
    }
}

/// The trigonometric, exponential and logarithmic functions, as MariaDB
/// answers them: NULL outside the domain (`LN(0)`, `ACOS(2)`, `LOG(1, x)`),
/// error 1690 when the result is not finite (`EXP(1000)`, `COT(0)`).
fn math(f: Func, xs: &[f64]) -> EvalResult {
    use Func::*;
    let x = xs[0];
    let r = match (f, xs.len()) {
        (Sin, _) => x.sin(),
        (Cos, _) => x.cos(),
        (Tan, _) => x.tan(),
        (Cot, _) => 1.0 / x.tan(),
        (Asin | Acos, _) if !(-1.0..=1.0).contains(&x) => return Ok(Value::Null),
        (Asin, _) => x.asin(),
        (Acos, _) => x.acos(),
        (Atan, 1) => x.atan(),
        (Atan, _) => x.atan2(xs[1]),
        (Exp, _) => x.exp(),
        (Ln | Log | Log2 | Log10, 1) if x <= 0.0 => return Ok(Value::Null),
        (Ln | Log, 1) => x.ln(),
        (Log2, _) => x.log2(),
        (Log10, _) => x.log10(),
        (Log, _) => {
            let y = xs[1];
            if x <= 0.0 || x == 1.0 || y <= 0.0 {
                return Ok(Value::Null);
            }
            y.ln() / x.ln()
        }
        (Degrees, _) => x.to_degrees(),
        (Radians, _) => x.to_radians(),
        _ => return Err(EvalError::Invalid(format!("{f:?} is not a math function"))),
    };
    if !r.is_finite() {
        let name = format!("{f:?}").to_ascii_lowercase();
        let shown = xs
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",");
        return Err(EvalError::OutOfRange(format!(
            "DOUBLE value is out of range in '{name}({shown})'"
        )));
    }
    Ok(Value::Double(r))
}

/// A DOUBLE zero without its sign: MariaDB's ROUND, TRUNCATE, FLOOR and
/// CEILING of a small negative number give 0, not -0 (in text with fixed
/// decimals, `0`, not `-0`).
fn positive_zero(v: Value) -> Value {
    match v {
        Value::Double(x) => Value::Double(if x == 0.0 { 0.0 } else { x }),
        other => other,
    }
}
