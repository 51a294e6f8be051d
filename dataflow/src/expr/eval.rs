//! Evaluating an [`Expr`] with MySQL semantics: NULL propagation,
//! three-valued logic, short-circuiting AND, OR, CASE and the lazy
//! functions.

use ladle_common::{Collation, Value};

use super::error::EvalResult;
use super::func;
use super::ops::{self, bool_value, compare, truth};
use super::tree::{CmpOp, Ctx, Expr, LogicOp};

impl Expr {
    /// Evaluates over `row` with no parameters.
    pub fn eval(&self, row: &[Value]) -> EvalResult {
        self.eval_ctx(&Ctx {
            row,
            params: &[],
            proposed: None,
            markers_fail: false,
        })
    }

    /// Evaluates with parameter slots bound.
    pub fn eval_params(&self, row: &[Value], params: &[Value]) -> EvalResult {
        self.eval_ctx(&Ctx {
            row,
            params,
            proposed: None,
            markers_fail: false,
        })
    }

    pub fn eval_proposed(&self, row: &[Value], proposed: &[Value]) -> EvalResult {
        self.eval_ctx(&Ctx {
            row,
            params: &[],
            proposed: Some(proposed),
            markers_fail: false,
        })
    }

    /// SQL truth (NULL is false).
    pub fn eval_bool(&self, row: &[Value], params: &[Value]) -> EvalResult<bool> {
        Ok(truth(&self.eval_params(row, params)?) == Some(true))
    }

    /// [`Expr::eval_bool`] over a row some of whose columns may hold
    /// overflow markers: reading one fails with its error (1690), as
    /// MySQL fails evaluating the value it stands for; one the evaluation
    /// does not reach (AND and OR stop early) does not.
    pub fn eval_bool_reading_markers(&self, row: &[Value], params: &[Value]) -> EvalResult<bool> {
        let c = Ctx {
            row,
            params,
            proposed: None,
            markers_fail: true,
        };
        Ok(truth(&self.eval_ctx(&c)?) == Some(true))
    }

    pub(crate) fn eval_ctx(&self, c: &Ctx<'_>) -> EvalResult {
        use Expr::*;
        Ok(match self {
            Column(i) => {
                let v = c.row.get(*i).cloned().unwrap_or(Value::Null);
                // Only a filter that may mark looks for markers: every other
                // evaluation reads columns without the check.
                if c.markers_fail {
                    match super::error::out_of_range_in(&v) {
                        Some(m) if m != super::error::SUBQUERY_ROWS => {
                            return Err(super::error::EvalError::OutOfRange(m.to_string()));
                        }
                        _ => {}
                    }
                }
                v
            }
            Literal(v) => v.clone(),
            Param(i) => c.params.get(*i).cloned().unwrap_or(Value::Null),
            Proposed(i) => match c.proposed {
                Some(p) => p.get(*i).cloned().unwrap_or(Value::Null),
                None => Value::Null,
            },
            Neg(e) => ops::negate(&e.eval_ctx(c)?, || e.reads_no_row())?,
            Not(e) => bool_value(truth(&e.eval_ctx(c)?).map(|b| !b)),
            BitNot(e) => match e.eval_ctx(c)? {
                Value::Null => Value::Null,
                v => Value::UInt(!ops::to_u64_bits(&v)),
            },
            Arith(op, l, r) => ops::arith(*op, &l.eval_ctx(c)?, &r.eval_ctx(c)?)?,
            Cmp {
                op,
                left,
                right,
                collation,
            } => {
                let l = left.eval_ctx(c)?;
                let r = right.eval_ctx(c)?;
                match constant_read_as_other(left, right, &l, &r) {
                    Some(k) => super::warnings::once_per_constant(k, || {
                        ops::cmp_op(*op, &l, &r, *collation)
                    }),
                    None => ops::cmp_op(*op, &l, &r, *collation),
                }
            }
            Logic(op, l, r) => logic(*op, l, r, c)?,
            IsNull { expr, negated } => bool_value(Some(expr.eval_ctx(c)?.is_null() != *negated)),
            IsBool {
                expr,
                value,
                negated,
            } => {
                let t = truth(&expr.eval_ctx(c)?);
                bool_value(Some((t == Some(*value)) != *negated))
            }
            InList {
                expr,
                list,
                negated,
                collation,
            } => in_list(expr, list, *negated, *collation, c)?,
            Between {
                expr,
                low,
                high,
                negated,
                collation,
            } => between(
                expr.eval_ctx(c)?,
                low.eval_ctx(c)?,
                high.eval_ctx(c)?,
                *negated,
                *collation,
            ),
            Like {
                expr,
                pattern,
                escape,
                negated,
                collation,
            } => {
                let v = expr.eval_ctx(c)?;
                let p = pattern.eval_ctx(c)?;
                if v.is_null() || p.is_null() {
                    return Ok(Value::Null);
                }
                let m = ops::like_values(&v, &p, *escape, *collation);
                bool_value(Some(m != *negated))
            }
            Case {
                operand,
                whens,
                otherwise,
                collation,
            } => case(
                operand.as_deref(),
                whens,
                otherwise.as_deref(),
                *collation,
                c,
            )?,
            Cast(e, ty) => ops::cast(&e.eval_ctx(c)?, ty)?,
            Call(f, args) => func::call(*f, args, c)?,
        })
    }
}

/// AND, OR and XOR over SQL truth; AND and OR skip `r` when `l` decides.
fn logic(op: LogicOp, l: &Expr, r: &Expr, c: &Ctx<'_>) -> EvalResult {
    let a = truth(&l.eval_ctx(c)?);
    Ok(match op {
        LogicOp::And => {
            if a == Some(false) {
                return Ok(Value::Int(0));
            }
            let b = truth(&r.eval_ctx(c)?);
            match (a, b) {
                (_, Some(false)) => Value::Int(0),
                (Some(true), Some(true)) => Value::Int(1),
                _ => Value::Null,
            }
        }
        LogicOp::Or => {
            if a == Some(true) {
                return Ok(Value::Int(1));
            }
            let b = truth(&r.eval_ctx(c)?);
            match (a, b) {
                (_, Some(true)) => Value::Int(1),
                (Some(false), Some(false)) => Value::Int(0),
                _ => Value::Null,
            }
        }
        LogicOp::Xor => {
            let b = truth(&r.eval_ctx(c)?);
            match (a, b) {
                (Some(x), Some(y)) => bool_value(Some(x != y)),
                _ => Value::Null,
            }
        }
    })
}

/// `expr [NOT] IN (list)`: stops at the first equal item; NULL when none
/// is equal and an item is NULL.
fn in_list(
    expr: &Expr,
    list: &[Expr],
    negated: bool,
    collation: Collation,
    c: &Ctx<'_>,
) -> EvalResult {
    let v = expr.eval_ctx(c)?;
    if v.is_null() {
        return Ok(Value::Null);
    }
    let mut saw_null = false;
    let mut found = false;
    for item in list {
        let x = item.eval_ctx(c)?;
        if x.is_null() {
            saw_null = true;
        } else if compare(&v, &x, collation) == Some(std::cmp::Ordering::Equal) {
            found = true;
            break;
        }
    }
    Ok(if found {
        bool_value(Some(!negated))
    } else if saw_null {
        Value::Null
    } else {
        bool_value(Some(negated))
    })
}

/// CASE: the first WHEN that holds (or equals the operand) gives the
/// result, evaluating nothing after it.
fn case(
    operand: Option<&Expr>,
    whens: &[(Expr, Expr)],
    otherwise: Option<&Expr>,
    collation: Collation,
    c: &Ctx<'_>,
) -> EvalResult {
    let op_val = match operand {
        Some(o) => Some(o.eval_ctx(c)?),
        None => None,
    };
    for (w, then) in whens {
        let wv = w.eval_ctx(c)?;
        let hit = match &op_val {
            Some(o) => truth(&ops::cmp_op(CmpOp::Eq, o, &wv, collation)) == Some(true),
            None => truth(&wv) == Some(true),
        };
        if hit {
            return then.eval_ctx(c);
        }
    }
    match otherwise {
        Some(e) => e.eval_ctx(c),
        None => Ok(Value::Null),
    }
}

/// `v BETWEEN lo AND hi`. The three are compared under one type, as in
/// MySQL: strings beside a number compare as numbers, all three (pairwise,
/// `'A' BETWEEN '0' AND 5` would compare 'A' with '0' as strings).
fn between(v: Value, lo: Value, hi: Value, negated: bool, collation: Collation) -> Value {
    let values = [&v, &lo, &hi];
    let number = |x: &&Value| {
        matches!(
            x,
            Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_)
        )
    };
    let string = |x: &&Value| matches!(x, Value::Text(_) | Value::Bytes(_));
    let (v, lo, hi) = if values.iter().any(number) && values.iter().any(string) {
        let as_number = |x: Value| match x {
            Value::Text(_) | Value::Bytes(_) => ops::string_as_number(&x),
            other => other,
        };
        (as_number(v), as_number(lo), as_number(hi))
    } else {
        (v, lo, hi)
    };
    let lo = ops::cmp_op(CmpOp::Ge, &v, &lo, collation);
    let hi = ops::cmp_op(CmpOp::Le, &v, &hi, collation);
    let both = match (truth(&lo), truth(&hi)) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    };
    bool_value(both.map(|b| b != negated))
}

/// The address of the constant string operand of a comparison whose other
/// operand is not a string (`n = 'x'`): the string is read as a number, a
/// date or a time, which may warn (see `super::warnings::once_per_constant`).
fn constant_read_as_other(left: &Expr, right: &Expr, l: &Value, r: &Value) -> Option<usize> {
    let text = |v: &Value| matches!(v, Value::Text(_) | Value::Bytes(_));
    match (left, right) {
        (Expr::Literal(_), Expr::Literal(_)) => None,
        (Expr::Literal(_), _) if text(l) && !text(r) && !r.is_null() => {
            Some(std::ptr::from_ref(left) as usize)
        }
        (_, Expr::Literal(_)) if text(r) && !text(l) && !l.is_null() => {
            Some(std::ptr::from_ref(right) as usize)
        }
        _ => None,
    }
}
