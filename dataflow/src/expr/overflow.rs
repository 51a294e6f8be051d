//! Which expressions may fail with [`EvalError::OutOfRange`] (MySQL's
//! 1690), judged from the kinds of number their operands hold
//! ([`NumKind`]): a filter whose predicate cannot overflow marks no row
//! and costs its view nothing (see `ops::Filter`). Every operator and
//! function is classified here, beside the evaluator, by matches without a
//! catch-all, so a new one must be classified to compile; the tests
//! evaluate each over extreme values of every kind and check that nothing
//! classified safe returns the error.
//!
//! [`EvalError::OutOfRange`]: super::EvalError::OutOfRange

use ladle_common::{SqlType, Value};

use super::func::Func;
use super::tree::{ArithOp, CastType, Expr};

/// What the values of an expression (or a column) may be, as far as
/// overflowing goes. Every kind includes NULL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumKind {
    /// Integers held as `Value::Int` of magnitude below 2^n, for n < 64
    /// (a TINYINT .. INT column, signed or not; a truth value); with n =
    /// 64, any BIGINT, signed or not (`Value::Int` or `Value::UInt`).
    Int(u8),
    /// DECIMALs.
    Decimal,
    /// Finite DOUBLEs.
    Double,
    /// Anything: a string (which arithmetic reads as a DOUBLE), a temporal
    /// value, a function's result of no kind above, a column of unknown
    /// type or one that may hold an overflow marker (a NaN: see
    /// `expr::out_of_range_marker`).
    Any,
}

use NumKind::{Any, Decimal, Double, Int};

/// Integers of any magnitude (BIGINT, signed or not).
const BIGINT: NumKind = Int(64);

impl NumKind {
    /// The kind of the values a column of type `ty` holds.
    pub(crate) fn of_type(ty: &SqlType) -> NumKind {
        match ty {
            SqlType::Int { bytes, .. } if *bytes < 8 => Int(bytes * 8),
            SqlType::Int { .. } => BIGINT,
            SqlType::Year => Int(16),
            SqlType::Decimal { .. } => Decimal,
            SqlType::Float | SqlType::Double => Double,
            // BIT(n) may be held as `Value::UInt`, whose arithmetic is
            // unsigned.
            _ => Any,
        }
    }

    /// The kind of `v`.
    pub(crate) fn of_value(v: &Value) -> NumKind {
        match v {
            Value::Null => Int(0),
            Value::Int(i) => Int(64 - i.unsigned_abs().leading_zeros() as u8),
            Value::UInt(_) => BIGINT,
            Value::Decimal(_) => Decimal,
            Value::Double(f) if f.is_finite() => Double,
            _ => Any,
        }
    }

    /// A kind holding the values of both.
    pub(crate) fn or(self, other: NumKind) -> NumKind {
        match (self, other) {
            (Int(a), Int(b)) => Int(a.max(b)),
            (a, b) if a == b => a,
            _ => Any,
        }
    }

    /// A signed integer (`Value::Int`) below 2^63 in magnitude.
    fn narrow_int(self) -> bool {
        matches!(self, Int(n) if n < 64)
    }

    /// A number whose negation, absolute value and conversions to DOUBLE
    /// stay in range.
    fn negatable(self) -> bool {
        self.narrow_int() || matches!(self, Decimal | Double)
    }
}

impl Expr {
    /// The kind of the expression's values, given its input columns'.
    pub(crate) fn num_kind(&self, input: &[NumKind]) -> NumKind {
        use Expr::*;
        match self {
            Column(i) => input.get(*i).copied().unwrap_or(Any),
            Literal(v) => NumKind::of_value(v),
            Param(_) | Proposed(_) => Any,
            Neg(e) => match e.num_kind(input) {
                k if k.negatable() => k,
                _ => Any,
            },
            Not(_)
            | Cmp { .. }
            | Logic(..)
            | IsNull { .. }
            | IsBool { .. }
            | InList { .. }
            | Between { .. }
            | Like { .. } => Int(1),
            BitNot(_) => BIGINT,
            Arith(op, l, r) => arith_kind(*op, l.num_kind(input), r.num_kind(input)),
            Case {
                whens, otherwise, ..
            } => {
                let otherwise = otherwise.as_ref().map_or(Int(0), |e| e.num_kind(input));
                whens
                    .iter()
                    .fold(otherwise, |k, (_, then)| k.or(then.num_kind(input)))
            }
            Cast(e, ty) => cast_kind(e.num_kind(input), ty),
            Call(f, args) => call_kind(*f, args, input),
        }
    }

    /// Whether evaluating the expression over input columns of kinds
    /// `input` may fail with `EvalError::OutOfRange` for some row.
    pub(crate) fn may_overflow(&self, input: &[NumKind]) -> bool {
        let mut may = false;
        self.walk(&mut |e| may |= e.node_may_overflow(input));
        may
    }

    /// [`Self::may_overflow`] of this node's own operation, its operands
    /// evaluated.
    fn node_may_overflow(&self, input: &[NumKind]) -> bool {
        use Expr::*;
        match self {
            // A leaf, a bitwise complement, or a node that only compares,
            // tests or picks among its operands' values.
            Column(_) | Literal(_) | Param(_) | Proposed(_) | BitNot(_) => false,
            Not(_) | Cmp { .. } | Logic(..) | IsNull { .. } | IsBool { .. } => false,
            InList { .. } | Between { .. } | Like { .. } | Case { .. } => false,
            // A constant past BIGINT's range negates to a DECIMAL.
            Neg(e) => match e.num_kind(input) {
                k if k.negatable() => false,
                k => !(k == BIGINT && e.reads_no_row()),
            },
            Arith(op, l, r) => arith_may_overflow(*op, l.num_kind(input), r.num_kind(input)),
            // A DOUBLE or a string saturates (note 1916); a DECIMAL fails.
            Cast(e, CastType::Signed | CastType::Unsigned) => {
                !matches!(e.num_kind(input), Int(_) | Double)
            }
            Cast(..) => false,
            Call(f, args) => call_may_overflow(*f, args, input),
        }
    }
}

/// Whether `l op r` may fail for operands of these kinds.
fn arith_may_overflow(op: ArithOp, l: NumKind, r: NumKind) -> bool {
    use ArithOp::*;
    match (op, l, r) {
        (BitAnd | BitOr | BitXor | Shl | Shr, ..) => false,
        // Below 2^62 each, the sum is below 2^63.
        (Add | Sub, Int(a), Int(b)) => a.max(b) >= 63,
        (Mul, Int(a), Int(b)) => a + b > 63,
        // Exact: an integer quotient of integers fits a DECIMAL.
        (Div, Int(_), Int(_)) => false,
        // Only BIGINT's least DIV -1, or an unsigned negative quotient.
        (IntDiv, Int(a), Int(b)) => a >= 64 || b >= 64,
        // The remainder is no larger than either operand; a DOUBLE's is
        // finite.
        (Mod, Int(_) | Double, Int(_) | Double) => false,
        _ => true,
    }
}

/// The kind of `l op r`.
fn arith_kind(op: ArithOp, l: NumKind, r: NumKind) -> NumKind {
    use ArithOp::*;
    match (op, l, r) {
        (BitAnd | BitOr | BitXor | Shl | Shr, ..) => BIGINT,
        (Add | Sub, Int(a), Int(b)) => Int((a.max(b) + 1).min(64)),
        (Mul, Int(a), Int(b)) => Int((a + b).min(64)),
        (Div, Int(_), Int(_)) => Decimal,
        (IntDiv, Int(a), Int(b)) if a < 64 && b < 64 => Int(a),
        (IntDiv, ..) => BIGINT,
        (Mod, Int(a), Int(b)) => Int(a.min(b)),
        (_, Any, _) | (_, _, Any) => Any,
        (_, Double, _) | (_, _, Double) => Double,
        _ => Decimal,
    }
}

/// The kind of a value of kind `k` cast to `ty`.
fn cast_kind(k: NumKind, ty: &CastType) -> NumKind {
    match ty {
        // Always `Value::UInt`, whose arithmetic is unsigned.
        CastType::Unsigned => BIGINT,
        CastType::Signed if k.narrow_int() => k,
        CastType::Signed => BIGINT,
        CastType::Decimal { .. } => Decimal,
        // A string may read as an infinite DOUBLE.
        CastType::Double if matches!(k, Int(_) | Decimal | Double) => Double,
        CastType::Shown { .. } => k,
        CastType::Double
        | CastType::Char
        | CastType::CharN(_)
        | CastType::TemporalChar { .. }
        | CastType::Date
        | CastType::DateTime
        | CastType::Time
        | CastType::Binary
        | CastType::Recode(_)
        | CastType::Encode(_)
        | CastType::BitBytes { .. } => Any,
    }
}

/// The kind of `f(args)`: the control functions return one of their
/// arguments' values; few others matter.
fn call_kind(f: Func, args: &[Expr], input: &[NumKind]) -> NumKind {
    let kind = |i: usize| args.get(i).map_or(Int(0), |a| a.num_kind(input));
    let all = |from: usize| (from..args.len()).fold(Int(0), |k, i| k.or(kind(i)));
    match f {
        Func::Coalesce | Func::IfNull | Func::Greatest | Func::Least => all(0),
        Func::If => kind(1).or(kind(2)),
        Func::NullIf => kind(0),
        Func::Sign => Int(2),
        Func::Abs => match kind(0) {
            k if k.negatable() => k,
            _ => Any,
        },
        Func::Floor | Func::Ceil => match kind(0) {
            k @ (Int(_) | Double) => k,
            _ => Any,
        },
        _ => Any,
    }
}

/// Whether `f` itself may fail over `args` of their kinds.
fn call_may_overflow(f: Func, args: &[Expr], input: &[NumKind]) -> bool {
    use Func::*;
    let kind = |i: usize| args.get(i).map_or(Int(0), |a| a.num_kind(input));
    match f {
        // Only a signed BIGINT's least.
        Abs => !kind(0).negatable(),
        // A DECIMAL to BIGINT.
        Floor | Ceil => !matches!(kind(0), Int(_) | Double),
        // Only to tens or more (negative places); that moves an integer
        // below 2^62 up to a power of ten, never past BIGINT's range.
        // TRUNCATE only moves a number toward zero.
        Truncate => false,
        Round => match (args.get(1), kind(0)) {
            (None | Some(Expr::Literal(Value::Int(0..))), _) => false,
            (_, Int(n)) => n >= 63,
            (_, k) => k != Double,
        },
        Mod => arith_may_overflow(ArithOp::Mod, kind(0), kind(1)),
        // A DOUBLE result that is not finite.
        Pow | Exp | Cot | Degrees => true,
        // Finite over finite numbers; a string may read as an infinite
        // DOUBLE ('1e400'), an overflow marker as a NaN.
        Sin | Cos | Tan | Atan | Ln | Log | Log2 | Log10 | Radians => {
            (0..args.len()).any(|i| kind(i) == Any)
        }
        // NULL outside their domain.
        Asin | Acos | Sqrt => false,
        Pi | Rand | Sign => false,
        Coalesce | IfNull | Field | NullIf | If | Greatest | Least | SingleRow => false,
        Concat | ConcatWs | Lower | Upper | Length | CharLength | Substring | Left | Right
        | Trim | LTrim | RTrim | Replace | RegexpLike | RegexpReplace | Md5 | Sha1 | Sha2 | Ord
        | Locate | Instr | Repeat | Reverse | Lpad | Rpad | Hex | Unhex => false,
        Now | UtcTimestamp | CurDate | CurTime | UnixTimestamp | FromUnixTime | Date | Year
        | Month | Day | Hour | Minute | Second | DateAdd | Quarter | Weekday | DayOfYear
        | Microsecond | Week | YearWeek | MakeDate | TimeOf | TimeToSec | DateFormat
        | DayOfWeek | MonthName | DayName | DateDiff | ConvertTz | TimestampDiff | ToDays
        | FromDays | ToSeconds | LastDay | Timestamp | StrToDate => false,
        JsonExtract | JsonUnquote | JsonContains | JsonContainsPath | JsonType | JsonValid
        | JsonLength | JsonKeys | JsonDepth => false,
    }
}

#[cfg(test)]
mod tests;
