//! Ladle's scalar expressions: a closed tree over column positions, evaluated
//! with MySQL semantics (NULL propagation, three-valued logic, MySQL's
//! numeric result types, collation-aware string comparison).
//!
//! The planner builds these from the SQL AST; operators only ever see this
//! type.

mod dates;
pub(crate) mod func;
mod json;
mod ops;

use std::fmt;

use ladle_common::{Collation, SqlType, Value};

pub use func::Func;
pub(crate) use ops::{compare, like, string_as_number, truth, value_to_f64};

/// An evaluation failure (the user's fault).
#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// A result outside its type's range (integer overflow): MySQL's 1690.
    OutOfRange(String),
    /// A scalar subquery without an aggregate found several rows at read
    /// time: MySQL's 1242.
    SubqueryRows,
    /// Any other bad input.
    Invalid(String),
}

pub type EvalResult<T = Value> = Result<T, EvalError>;

/// What a maintained view stores for a computed value that overflowed
/// (MySQL's 1690 in a projection evaluated when a write is propagated):
/// not NULL, which would be a wrong answer, but a NaN with a payload of
/// its own per message. No SQL value is a NaN (evaluation refuses
/// non-finite doubles), a NaN equals only itself under `Value`'s total
/// order, so an insert and its later delete still cancel out, and
/// arithmetic carries it (an aggregate over it keeps it). A read that
/// returns it fails with the error instead ([`out_of_range_in`]).
const OUT_OF_RANGE_MARKERS: [(u64, &str); 4] = [
    (0x7ff8_0000_0000_1690, "BIGINT value is out of range"),
    (
        0x7ff8_0000_0001_1690,
        "BIGINT UNSIGNED value is out of range",
    ),
    (0x7ff8_0000_0002_1690, "DECIMAL value is out of range"),
    (0x7ff8_0000_0003_1690, "DOUBLE value is out of range"),
];

/// The marker standing for an [`EvalError::OutOfRange`] with `message`.
pub(crate) fn out_of_range_marker(message: &str) -> Value {
    let bits = OUT_OF_RANGE_MARKERS
        .iter()
        .find(|(_, m)| message.starts_with(m))
        .map_or(OUT_OF_RANGE_MARKERS[0].0, |(b, _)| *b);
    Value::Double(f64::from_bits(bits))
}

/// The error message `v` stands for, if it is an out-of-range marker.
pub(crate) fn out_of_range_in(v: &Value) -> Option<&'static str> {
    match v {
        Value::Double(f) if f.is_nan() => OUT_OF_RANGE_MARKERS
            .iter()
            .find(|(b, _)| *b == f.to_bits())
            .map(|(_, m)| *m),
        _ => None,
    }
}

/// MySQL's ER_WARN_ALLOWED_PACKET_OVERFLOWED: a string function's result
/// past `max_allowed_packet` is NULL with this warning.
pub const WARN_ALLOWED_PACKET_OVERFLOWED: u16 = 1301;
/// MySQL's ER_DATETIME_FUNCTION_OVERFLOW: DATE_ADD past the calendar's range.
pub const WARN_DATETIME_FUNCTION_OVERFLOW: u16 = 1441;

/// How many warnings one thread keeps until [`take_warnings`] (MySQL's
/// default `max_error_count` is 64); evaluation on threads nobody drains
/// (view maintenance) cannot grow it past this.
const MAX_WARNINGS: usize = 64;

/// MySQL's ER_WRONG_VALUE_FOR_TYPE: STR_TO_DATE of a string its format
/// does not read.
pub const WARN_WRONG_VALUE_FOR_FUNCTION: u16 = 1411;

/// MySQL's ER_TRUNCATED_WRONG_VALUE: a string read as a number, a date or
/// a time only in part (`'1abc' = 1`, `'2020-01-01x'`).
pub const WARN_TRUNCATED_WRONG_VALUE: u16 = 1292;

/// One condition raised by evaluation: level (`Warning` or `Note`), MySQL
/// code, message, as SHOW WARNINGS lists it.
pub type EvalWarning = (&'static str, u16, String);

thread_local! {
    static WARNINGS: std::cell::RefCell<Vec<EvalWarning>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Records a warning raised while evaluating on this thread.
pub(crate) fn warn(code: u16, message: String) {
    raise("Warning", code, message);
}

/// Records a note (a lesser warning: `'1 ' = 1` ignores only spaces).
pub(crate) fn note(code: u16, message: String) {
    raise("Note", code, message);
}

fn raise(level: &'static str, code: u16, message: String) {
    WARNINGS.with(|w| {
        let mut w = w.borrow_mut();
        if w.len() < MAX_WARNINGS {
            w.push((level, code, message));
        }
    });
}

/// The warnings (MySQL code, message) raised by evaluation on this thread
/// since the last call. A statement runs evaluation on its own thread when
/// it needs no view (SELECT without FROM, UPDATE/INSERT expressions, a
/// read's parameters); a view's rows are computed when it is written, so
/// their warnings are not reported (see [`without_warnings`]).
pub fn take_warnings() -> Vec<EvalWarning> {
    WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// Runs `f`, dropping the warnings its evaluation raises on this thread
/// (those raised before are kept). For computing a view's rows on a
/// reading statement's thread (a cold fill, a transaction's overlay read):
/// a warm read of the same view computes nothing and so raises nothing,
/// and a statement's warnings must not depend on whether its view was
/// cached. (MariaDB evaluates every row per statement and warns each
/// time; matching that would need every view to keep, per row and group,
/// the warnings computing it raised, including for rows its filters
/// dropped.)
pub(crate) fn without_warnings<T>(f: impl FnOnce() -> T) -> T {
    let before = take_warnings();
    let out = f();
    WARNINGS.with(|w| *w.borrow_mut() = before);
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    IntDiv,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `<=>`: NULL-safe equality.
    NullSafeEq,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogicOp {
    And,
    Or,
    Xor,
}

/// A CAST target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CastType {
    Signed,
    Unsigned,
    Char,
    /// CHAR of a DATETIME/TIMESTAMP/TIME of precision `fsp`: as MariaDB
    /// prints it, with exactly `fsp` fractional digits (`.500` for (3)).
    TemporalChar {
        fsp: u8,
    },
    Decimal {
        precision: u8,
        scale: u8,
    },
    Double,
    Date,
    DateTime,
    Time,
    Binary,
}

/// A compiled scalar expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The value of input column `n`.
    Column(usize),
    Literal(Value),
    /// A read-time parameter slot (bound when a reader is queried).
    Param(usize),
    /// `VALUES(col)` in ON DUPLICATE KEY UPDATE: column `n` of the proposed row.
    Proposed(usize),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    BitNot(Box<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Cmp {
        op: CmpOp,
        left: Box<Expr>,
        right: Box<Expr>,
        collation: Collation,
    },
    Logic(LogicOp, Box<Expr>, Box<Expr>),
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    /// `IS [NOT] TRUE` (`value` true) and `IS [NOT] FALSE` (`value` false).
    IsBool {
        expr: Box<Expr>,
        value: bool,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
        collation: Collation,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
        collation: Collation,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: char,
        negated: bool,
        collation: Collation,
    },
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
        collation: Collation,
    },
    Cast(Box<Expr>, CastType),
    Call(Func, Vec<Expr>),
}

impl Expr {
    /// Evaluates over `row` with no parameters.
    pub fn eval(&self, row: &[Value]) -> EvalResult {
        self.eval_ctx(&Ctx {
            row,
            params: &[],
            proposed: None,
        })
    }

    /// Evaluates with parameter slots bound.
    pub fn eval_params(&self, row: &[Value], params: &[Value]) -> EvalResult {
        self.eval_ctx(&Ctx {
            row,
            params,
            proposed: None,
        })
    }

    pub fn eval_proposed(&self, row: &[Value], proposed: &[Value]) -> EvalResult {
        self.eval_ctx(&Ctx {
            row,
            params: &[],
            proposed: Some(proposed),
        })
    }

    /// SQL truth (NULL is false).
    pub fn eval_bool(&self, row: &[Value], params: &[Value]) -> EvalResult<bool> {
        Ok(truth(&self.eval_params(row, params)?) == Some(true))
    }

    pub(crate) fn eval_ctx(&self, c: &Ctx<'_>) -> EvalResult {
        use Expr::*;
        Ok(match self {
            Column(i) => c.row.get(*i).cloned().unwrap_or(Value::Null),
            Literal(v) => v.clone(),
            Param(i) => c.params.get(*i).cloned().unwrap_or(Value::Null),
            Proposed(i) => match c.proposed {
                Some(p) => p.get(*i).cloned().unwrap_or(Value::Null),
                None => Value::Null,
            },
            Neg(e) => ops::negate(&e.eval_ctx(c)?)?,
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
                ops::cmp_op(*op, &l, &r, *collation)
            }
            Logic(op, l, r) => {
                let a = truth(&l.eval_ctx(c)?);
                match op {
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
                }
            }
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
            } => {
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
                    } else if compare(&v, &x, *collation) == Some(std::cmp::Ordering::Equal) {
                        found = true;
                        break;
                    }
                }
                if found {
                    bool_value(Some(!negated))
                } else if saw_null {
                    Value::Null
                } else {
                    bool_value(Some(*negated))
                }
            }
            Between {
                expr,
                low,
                high,
                negated,
                collation,
            } => {
                let v = expr.eval_ctx(c)?;
                let lo = ops::cmp_op(CmpOp::Ge, &v, &low.eval_ctx(c)?, *collation);
                let hi = ops::cmp_op(CmpOp::Le, &v, &high.eval_ctx(c)?, *collation);
                let both = match (truth(&lo), truth(&hi)) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                bool_value(both.map(|b| b != *negated))
            }
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
            } => {
                let op_val = match operand {
                    Some(o) => Some(o.eval_ctx(c)?),
                    None => None,
                };
                for (w, then) in whens {
                    let wv = w.eval_ctx(c)?;
                    let hit = match &op_val {
                        Some(o) => truth(&ops::cmp_op(CmpOp::Eq, o, &wv, *collation)) == Some(true),
                        None => truth(&wv) == Some(true),
                    };
                    if hit {
                        return then.eval_ctx(c);
                    }
                }
                match otherwise {
                    Some(e) => e.eval_ctx(c)?,
                    None => Value::Null,
                }
            }
            Cast(e, ty) => ops::cast(&e.eval_ctx(c)?, ty)?,
            Call(f, args) => func::call(*f, args, c)?,
        })
    }

    /// Whether the expression reads the clock or randomness (its value is
    /// not a function of its inputs).
    pub fn is_volatile(&self) -> bool {
        let mut v = false;
        self.walk(&mut |e| {
            if let Expr::Call(f, _) = e {
                if f.is_volatile() {
                    v = true;
                }
            }
        });
        v
    }

    pub fn has_params(&self) -> bool {
        let mut v = false;
        self.walk(&mut |e| {
            if matches!(e, Expr::Param(_)) {
                v = true;
            }
        });
        v
    }

    /// Input columns the expression reads.
    pub fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Column(i) = e {
                if !out.contains(i) {
                    out.push(*i);
                }
            }
        });
        out
    }

    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        for ch in self.children() {
            ch.walk(f);
        }
    }

    fn children(&self) -> Vec<&Expr> {
        use Expr::*;
        match self {
            Column(_) | Literal(_) | Param(_) | Proposed(_) => vec![],
            Neg(e) | Not(e) | BitNot(e) | Cast(e, _) => vec![e],
            IsNull { expr, .. } | IsBool { expr, .. } => vec![expr],
            Arith(_, l, r) | Logic(_, l, r) => vec![l, r],
            Cmp { left, right, .. } => vec![left, right],
            InList { expr, list, .. } => std::iter::once(&**expr).chain(list.iter()).collect(),
            Between {
                expr, low, high, ..
            } => vec![expr, low, high],
            Like { expr, pattern, .. } => vec![expr, pattern],
            Case {
                operand,
                whens,
                otherwise,
                ..
            } => {
                let mut v: Vec<&Expr> = Vec::new();
                if let Some(o) = operand {
                    v.push(o);
                }
                for (a, b) in whens {
                    v.push(a);
                    v.push(b);
                }
                if let Some(o) = otherwise {
                    v.push(o);
                }
                v
            }
            Call(_, args) => args.iter().collect(),
        }
    }

    /// Rewrites column references through `map` (input position -> new
    /// expression).
    pub fn map_columns(&self, map: &dyn Fn(usize) -> Expr) -> Expr {
        use Expr::*;
        let m = |e: &Expr| Box::new(e.map_columns(map));
        match self {
            Column(i) => map(*i),
            Literal(_) | Param(_) | Proposed(_) => self.clone(),
            Neg(e) => Neg(m(e)),
            Not(e) => Not(m(e)),
            BitNot(e) => BitNot(m(e)),
            Cast(e, t) => Cast(m(e), t.clone()),
            IsNull { expr, negated } => IsNull {
                expr: m(expr),
                negated: *negated,
            },
            IsBool {
                expr,
                value,
                negated,
            } => IsBool {
                expr: m(expr),
                value: *value,
                negated: *negated,
            },
            Arith(op, l, r) => Arith(*op, m(l), m(r)),
            Logic(op, l, r) => Logic(*op, m(l), m(r)),
            Cmp {
                op,
                left,
                right,
                collation,
            } => Cmp {
                op: *op,
                left: m(left),
                right: m(right),
                collation: *collation,
            },
            InList {
                expr,
                list,
                negated,
                collation,
            } => InList {
                expr: m(expr),
                list: list.iter().map(|e| e.map_columns(map)).collect(),
                negated: *negated,
                collation: *collation,
            },
            Between {
                expr,
                low,
                high,
                negated,
                collation,
            } => Between {
                expr: m(expr),
                low: m(low),
                high: m(high),
                negated: *negated,
                collation: *collation,
            },
            Like {
                expr,
                pattern,
                escape,
                negated,
                collation,
            } => Like {
                expr: m(expr),
                pattern: m(pattern),
                escape: *escape,
                negated: *negated,
                collation: *collation,
            },
            Case {
                operand,
                whens,
                otherwise,
                collation,
            } => Case {
                operand: operand.as_ref().map(|o| m(o)),
                whens: whens
                    .iter()
                    .map(|(a, b)| (a.map_columns(map), b.map_columns(map)))
                    .collect(),
                otherwise: otherwise.as_ref().map(|o| m(o)),
                collation: *collation,
            },
            Call(f, args) => Call(*f, args.iter().map(|e| e.map_columns(map)).collect()),
        }
    }

    /// The result type and nullability, given the input columns' types.
    pub fn result_type(&self, input: &[(SqlType, bool)]) -> (SqlType, bool) {
        use Expr::*;
        let bigint = SqlType::Int {
            bytes: 8,
            unsigned: false,
            display_width: None,
        };
        // MySQL types a comparison as INT of display width 1.
        let boolean = SqlType::Int {
            bytes: 4,
            unsigned: false,
            display_width: Some(1),
        };
        match self {
            Column(i) | Proposed(i) => input
                .get(*i)
                .cloned()
                .unwrap_or((SqlType::VarChar(255), true)),
            Literal(v) => (literal_type(v), v.is_null()),
            Param(_) => (SqlType::VarChar(255), true),
            Neg(e) => match e.result_type(input) {
                // A BIGINT one character wider (the sign), as MySQL's.
                (t @ SqlType::Int { .. }, n) => (int_of_width(type_chars(&t) + 1), n),
                other => other,
            },
            Not(e) => (boolean, e.result_type(input).1),
            BitNot(_) => (
                SqlType::Int {
                    bytes: 8,
                    unsigned: true,
                    display_width: None,
                },
                false,
            ),
            Arith(op, l, r) => {
                let (lt, ln) = l.result_type(input);
                let (rt, rn) = r.result_type(input);
                let nullable =
                    ln || rn || matches!(op, ArithOp::Div | ArithOp::IntDiv | ArithOp::Mod);
                // Display widths and decimal precisions as MySQL's
                // metadata gives them (what clients size buffers from).
                let (lp, rp) = (expr_precision(l, &lt), expr_precision(r, &rt));
                let (ls, rs) = (u32::from(type_scale(&lt)), u32::from(type_scale(&rt)));
                let (lw, rw) = (expr_chars(l, &lt), expr_chars(r, &rt));
                let decimal = |precision: u32, scale: u32| SqlType::Decimal {
                    precision: precision.clamp(1, 65) as u8,
                    scale: scale.min(30) as u8,
                };
                let ty = match op {
                    ArithOp::IntDiv => int_of_width(lp.saturating_sub(ls).max(1)),
                    ArithOp::BitAnd
                    | ArithOp::BitOr
                    | ArithOp::BitXor
                    | ArithOp::Shl
                    | ArithOp::Shr => SqlType::Int {
                        bytes: 8,
                        unsigned: true,
                        display_width: None,
                    },
                    ArithOp::Div => {
                        if is_float(&lt) || is_float(&rt) || lt.is_text() || rt.is_text() {
                            SqlType::Double
                        } else {
                            let scale = ls + 4;
                            decimal(lp.saturating_sub(ls) + rs + scale, scale)
                        }
                    }
                    _ => {
                        if is_float(&lt) || is_float(&rt) || lt.is_text() || rt.is_text() {
                            SqlType::Double
                        } else if matches!(lt, SqlType::Decimal { .. })
                            || matches!(rt, SqlType::Decimal { .. })
                        {
                            match op {
                                ArithOp::Mul => decimal(lp + rp, ls + rs),
                                ArithOp::Mod => decimal(lp.max(rp), ls.max(rs)),
                                _ => {
                                    let scale = ls.max(rs);
                                    let int_part = lp.saturating_sub(ls).max(rp.saturating_sub(rs));
                                    decimal(int_part + scale + 1, scale)
                                }
                            }
                        } else {
                            let width = match op {
                                ArithOp::Mul => lw + rw,
                                ArithOp::Mod => lw.max(rw),
                                _ => lw.max(rw) + 1,
                            };
                            // An UNSIGNED operand makes it unsigned (the
                            // evaluator's rule, see `ops::arith`).
                            let unsigned = [&lt, &rt]
                                .iter()
                                .any(|t| matches!(t, SqlType::Int { unsigned: true, .. }));
                            SqlType::Int {
                                bytes: 8,
                                unsigned: unsigned && *op != ArithOp::Mod,
                                display_width: Some(width.min(255) as u8),
                            }
                        }
                    }
                };
                (ty, nullable)
            }
            Cmp {
                op, left, right, ..
            } => {
                let n = left.result_type(input).1 || right.result_type(input).1;
                (boolean, n && *op != CmpOp::NullSafeEq)
            }
            Logic(_, l, r) => (boolean, l.result_type(input).1 || r.result_type(input).1),
            IsNull { .. } | IsBool { .. } => (boolean, false),
            InList { .. } | Between { .. } | Like { .. } => (boolean, true),
            Case {
                whens, otherwise, ..
            } => {
                let mut tys: Vec<(SqlType, bool)> =
                    whens.iter().map(|(_, t)| t.result_type(input)).collect();
                match otherwise {
                    Some(o) => tys.push(o.result_type(input)),
                    None => tys.push((SqlType::VarChar(0), true)),
                }
                unify_types(&tys)
            }
            Cast(e, t) => {
                // Once: casts nest in long arithmetic chains (UNSIGNED
                // operands), so typing the operand twice is exponential.
                let (et, n) = e.result_type(input);
                let ty = match t {
                    CastType::Signed => bigint,
                    CastType::Unsigned => SqlType::Int {
                        bytes: 8,
                        unsigned: true,
                        // An integer keeps its width (an UNSIGNED column's
                        // operand in arithmetic, see the planner).
                        display_width: match &et {
                            t @ SqlType::Int { .. } => Some(type_chars(t).min(255) as u8),
                            _ => None,
                        },
                    },
                    // As many characters as the value can print as.
                    CastType::Char => SqlType::VarChar(expr_chars(e, &et)),
                    CastType::TemporalChar { .. } => SqlType::VarChar(65535),
                    CastType::Binary => SqlType::VarBinary(65535),
                    CastType::Decimal { precision, scale } => SqlType::Decimal {
                        precision: *precision,
                        scale: *scale,
                    },
                    CastType::Double => SqlType::Double,
                    CastType::Date => SqlType::Date,
                    CastType::DateTime => SqlType::DateTime { fsp: 0 },
                    CastType::Time => SqlType::Time { fsp: 0 },
                };
                (
                    ty,
                    n || matches!(
                        t,
                        CastType::Date | CastType::DateTime | CastType::Time | CastType::Char
                    ),
                )
            }
            Call(f, args) => func::result_type(*f, args, input),
        }
    }
}

pub(crate) struct Ctx<'a> {
    pub row: &'a [Value],
    pub params: &'a [Value],
    pub proposed: Option<&'a [Value]>,
}

pub(crate) fn bool_value(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(true) => Value::Int(1),
        Some(false) => Value::Int(0),
    }
}

fn is_float(t: &SqlType) -> bool {
    matches!(t, SqlType::Float | SqlType::Double)
}

fn type_scale(t: &SqlType) -> u8 {
    match t {
        SqlType::Decimal { scale, .. } => *scale,
        _ => 0,
    }
}

/// A signed BIGINT of display width `chars` (MySQL's type for integer
/// arithmetic, whose width it derives from the operands').
pub(crate) fn int_of_width(chars: u32) -> SqlType {
    SqlType::Int {
        bytes: 8,
        unsigned: false,
        display_width: Some(chars.min(255) as u8),
    }
}

/// The characters a value of type `t` prints as at most (MySQL's
/// `max_char_length`, what result metadata reports as the length).
pub fn type_chars(t: &SqlType) -> u32 {
    let fraction = |fsp: u8| if fsp == 0 { 0 } else { 1 + u32::from(fsp) };
    match t {
        SqlType::Int {
            bytes,
            unsigned,
            display_width,
        } => u32::from(SqlType::int_display_width(
            *bytes,
            *unsigned,
            *display_width,
        )),
        SqlType::Year => 4,
        SqlType::Float => 12,
        SqlType::Double => 22,
        SqlType::Decimal { precision, scale } => u32::from(*precision) + 1 + u32::from(*scale > 0),
        SqlType::Char(n)
        | SqlType::VarChar(n)
        | SqlType::Text(n)
        | SqlType::Binary(n)
        | SqlType::VarBinary(n)
        | SqlType::Blob(n) => *n,
        SqlType::Json => u32::MAX / 4,
        SqlType::Enum(labels) => labels
            .iter()
            .map(|l| l.chars().count() as u32)
            .max()
            .unwrap_or(0),
        SqlType::Date => 10,
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => 19 + fraction(*fsp),
        SqlType::Time { fsp } => 10 + fraction(*fsp),
    }
}

/// [`type_chars`] of expression `e` of type `t`: a literal number's own.
fn expr_chars(e: &Expr, t: &SqlType) -> u32 {
    match e {
        Expr::Literal(v @ (Value::Int(_) | Value::UInt(_))) => v.to_string().len() as u32,
        _ => type_chars(t),
    }
}

/// The decimal digits of a numeric expression `e` of type `t` (MySQL's
/// `decimal_precision`): a DECIMAL's precision, an integer's digits.
fn expr_precision(e: &Expr, t: &SqlType) -> u32 {
    match (e, t) {
        (Expr::Literal(v @ (Value::Int(_) | Value::UInt(_))), _) => {
            v.to_string().trim_start_matches('-').len() as u32
        }
        (_, SqlType::Decimal { precision, .. }) => u32::from(*precision),
        (_, SqlType::Int { unsigned, .. }) => {
            type_chars(t).saturating_sub(u32::from(!unsigned)).max(1)
        }
        _ => 65,
    }
}

/// The type MySQL gives a literal.
pub fn literal_type(v: &Value) -> SqlType {
    match v {
        Value::Null => SqlType::VarChar(0),
        // INT if it fits, as wide as its digits (MySQL's).
        Value::Int(i) => SqlType::Int {
            bytes: if i32::try_from(*i).is_ok() { 4 } else { 8 },
            unsigned: false,
            display_width: Some(i.to_string().len() as u8),
        },
        Value::UInt(_) => SqlType::Int {
            bytes: 8,
            unsigned: true,
            display_width: None,
        },
        Value::Double(_) => SqlType::Double,
        Value::Decimal(d) => SqlType::Decimal {
            precision: 65.min((d.mantissa().abs().to_string().len() as u8).max(d.scale() as u8)),
            scale: d.scale() as u8,
        },
        Value::Text(s) => SqlType::VarChar(s.chars().count() as u32),
        Value::Bytes(b) => SqlType::VarBinary(b.len() as u32),
        Value::Date(_) => SqlType::Date,
        Value::DateTime(_) => SqlType::DateTime { fsp: 0 },
        Value::Time(_) => SqlType::Time { fsp: 0 },
    }
}

/// The common type of several branches (CASE, COALESCE, IF, UNION).
pub fn unify_types(tys: &[(SqlType, bool)]) -> (SqlType, bool) {
    let nullable = tys.iter().any(|t| t.1);
    let non_null: Vec<&SqlType> = tys
        .iter()
        .filter(|t| !(t.1 && matches!(t.0, SqlType::VarChar(0))))
        .map(|t| &t.0)
        .collect();
    if non_null.is_empty() {
        return (SqlType::VarChar(0), true);
    }
    if non_null.iter().any(|t| t.is_text() || t.is_binary()) {
        let len = non_null
            .iter()
            .map(|t| match t {
                SqlType::Json | SqlType::Enum(_) => 64,
                t if t.is_text() || t.is_binary() => type_chars(t),
                _ => 64,
            })
            .max()
            .unwrap_or(255);
        // One binary branch makes the result a binary string (MySQL).
        if non_null.iter().any(|t| t.is_binary()) {
            return (SqlType::VarBinary(len), nullable);
        }
        return (SqlType::VarChar(len), nullable);
    }
    if non_null.iter().all(|t| t.is_integer()) {
        let unsigned = non_null
            .iter()
            .all(|t| matches!(t, SqlType::Int { unsigned: true, .. }));
        let bytes = non_null
            .iter()
            .map(|t| match t {
                SqlType::Int { bytes, .. } => *bytes,
                _ => 2,
            })
            .max()
            .unwrap_or(8);
        return (
            SqlType::Int {
                bytes,
                unsigned,
                display_width: None,
            },
            nullable,
        );
    }
    if non_null.iter().any(|t| is_float(t)) {
        return (SqlType::Double, nullable);
    }
    if non_null
        .iter()
        .all(|t| t.is_integer() || matches!(t, SqlType::Decimal { .. }))
    {
        let scale = non_null.iter().map(|t| type_scale(t)).max().unwrap_or(0);
        return (
            SqlType::Decimal {
                precision: 65,
                scale,
            },
            nullable,
        );
    }
    if non_null.iter().all(|t| **t == *non_null[0]) {
        return (non_null[0].clone(), nullable);
    }
    if non_null.iter().all(|t| {
        matches!(
            t,
            SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }
        )
    }) {
        return (SqlType::DateTime { fsp: 0 }, nullable);
    }
    (SqlType::VarChar(255), nullable)
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Expr::*;
        match self {
            Column(i) => write!(f, "#{i}"),
            Literal(v) => match v {
                Value::Text(s) => write!(f, "'{s}'"),
                other => write!(f, "{other}"),
            },
            Param(i) => write!(f, "?{i}"),
            Proposed(i) => write!(f, "VALUES(#{i})"),
            Neg(e) => write!(f, "-({e})"),
            Not(e) => write!(f, "NOT ({e})"),
            BitNot(e) => write!(f, "~({e})"),
            Arith(op, l, r) => write!(f, "({l} {op:?} {r})"),
            Cmp {
                op, left, right, ..
            } => write!(f, "({left} {op:?} {right})"),
            Logic(op, l, r) => write!(f, "({l} {op:?} {r})"),
            IsNull { expr, negated } => {
                write!(f, "({expr} IS {}NULL)", if *negated { "NOT " } else { "" })
            }
            IsBool {
                expr,
                value,
                negated,
            } => {
                write!(
                    f,
                    "({expr} IS {}{})",
                    if *negated { "NOT " } else { "" },
                    if *value { "TRUE" } else { "FALSE" }
                )
            }
            InList {
                expr,
                list,
                negated,
                ..
            } => {
                let items: Vec<String> = list.iter().map(|e| e.to_string()).collect();
                write!(
                    f,
                    "({expr} {}IN ({}))",
                    if *negated { "NOT " } else { "" },
                    items.join(", ")
                )
            }
            Between {
                expr,
                low,
                high,
                negated,
                ..
            } => {
                write!(
                    f,
                    "({expr} {}BETWEEN {low} AND {high})",
                    if *negated { "NOT " } else { "" }
                )
            }
            Like {
                expr,
                pattern,
                negated,
                ..
            } => write!(
                f,
                "({expr} {}LIKE {pattern})",
                if *negated { "NOT " } else { "" }
            ),
            Case { .. } => write!(f, "CASE(..)"),
            Cast(e, t) => write!(f, "CAST({e} AS {t:?})"),
            Call(func, args) => {
                let items: Vec<String> = args.iter().map(|e| e.to_string()).collect();
                write!(f, "{func:?}({})", items.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// Decimal division with an explicit result scale (AVG).
pub(crate) fn ops_div(a: Value, b: Value, scale: u32) -> Option<Value> {
    let x = match a {
        Value::Decimal(d) => d,
        Value::Int(i) => rust_decimal::Decimal::from(i),
        _ => return None,
    };
    let y = match b {
        Value::Decimal(d) => d,
        Value::Int(i) => rust_decimal::Decimal::from(i),
        _ => return None,
    };
    if y.is_zero() {
        return None;
    }
    ops::div_decimal(x, y, scale).ok().map(Value::Decimal)
}

pub(crate) fn arith_values(op: ArithOp, a: &Value, b: &Value) -> EvalResult {
    ops::arith(op, a, b)
}
