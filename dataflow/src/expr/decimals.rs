//! The fixed decimals of an [`Expr`]: how many digits after the point
//! MariaDB shows a DOUBLE result with (its `decimals` metadata), carried
//! through arithmetic as MariaDB carries them: `ROUND(x, 1) + 0` is
//! `1.0`, `FLOOR(x) + 0.5` is `1.5`, `ROUND(x, 2) / 2` is `0.500000`.
//! A DOUBLE column, a float literal, a string or a function such as
//! SQRT has no fixed decimals (MariaDB's `NOT_FIXED_DEC`): the value is
//! shown in its shortest form.

use ladle_common::{SqlType, Value};

use super::func::Func;
use super::tree::{ArithOp, CastType, Expr};
use super::typing::{is_float, literal_type};

/// MariaDB's `NOT_FIXED_DEC` (`FLOATING_POINT_DECIMALS`): from this many
/// decimals on, a DOUBLE is shown in its shortest form.
const NOT_FIXED: u8 = 31;

/// What `div_precision_increment` adds to a quotient's decimals.
const DIV_INCREMENT: u8 = 4;

impl Expr {
    /// The decimals a DOUBLE result of this expression is shown with, or
    /// `None` if they are not fixed (see the module docs); `input`: the
    /// input columns' types. Only meaningful where the result is a DOUBLE.
    pub fn fixed_decimals(&self, input: &[(SqlType, bool)]) -> Option<u8> {
        Some(self.decimals(input)).filter(|&d| d < NOT_FIXED)
    }

    /// MariaDB's `decimals` of this expression (`NOT_FIXED` and above: not
    /// fixed).
    fn decimals(&self, input: &[(SqlType, bool)]) -> u8 {
        use Expr::*;
        match self {
            Column(i) | Proposed(i) => input.get(*i).map_or(NOT_FIXED, |(t, _)| type_decimals(t)),
            Literal(Value::Null) => 0,
            Literal(v) => type_decimals(&literal_type(v)),
            Param(_) => NOT_FIXED,
            Neg(e) => e.decimals(input),
            Arith(op, l, r) => arith_decimals(*op, l, r, input),
            Case {
                whens, otherwise, ..
            } => widest(
                whens
                    .iter()
                    .map(|(_, t)| t)
                    .chain(otherwise.as_deref())
                    .map(|e| e.decimals(input)),
            ),
            Cast(_, t) => match t {
                CastType::Decimal { scale, .. } | CastType::Shown { scale } => *scale,
                CastType::Signed
                | CastType::Unsigned
                | CastType::Date
                | CastType::DateTime
                | CastType::Time => 0,
                _ => NOT_FIXED,
            },
            Call(f, args) => call_decimals(*f, args, self, input),
            Not(_) | BitNot(_) | Cmp { .. } | Logic(..) | IsNull { .. } | IsBool { .. } => 0,
            InList { .. } | Between { .. } | Like { .. } => 0,
        }
    }
}

/// The decimals of a value of type `t`.
fn type_decimals(t: &SqlType) -> u8 {
    match t {
        SqlType::Int { .. } | SqlType::Year | SqlType::Bit(_) | SqlType::Date => 0,
        SqlType::Decimal { scale, .. } => *scale,
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } | SqlType::Time { fsp } => *fsp,
        _ => NOT_FIXED,
    }
}

/// The most decimals of several (not fixed if any is not).
fn widest(ds: impl Iterator<Item = u8>) -> u8 {
    ds.max().unwrap_or(0).min(NOT_FIXED)
}

fn arith_decimals(op: ArithOp, l: &Expr, r: &Expr, input: &[(SqlType, bool)]) -> u8 {
    let (ld, rd) = (l.decimals(input), r.decimals(input));
    let double = || {
        let (lt, rt) = (l.result_type(input).0, r.result_type(input).0);
        is_float(&lt) || is_float(&rt) || lt.is_text() || rt.is_text()
    };
    let d = match op {
        ArithOp::IntDiv
        | ArithOp::BitAnd
        | ArithOp::BitOr
        | ArithOp::BitXor
        | ArithOp::Shl
        | ArithOp::Shr => 0,
        // A DOUBLE quotient: the operands' most decimals plus the
        // increment; a DECIMAL one: the dividend's.
        ArithOp::Div if double() => ld.max(rd).saturating_add(DIV_INCREMENT),
        ArithOp::Div => ld.saturating_add(DIV_INCREMENT),
        // A DECIMAL product has the sum of its operands' scales, a DOUBLE
        // one their most.
        ArithOp::Mul if !double() => ld.saturating_add(rd),
        ArithOp::Add | ArithOp::Sub | ArithOp::Mul | ArithOp::Mod => ld.max(rd),
    };
    d.min(NOT_FIXED)
}

fn call_decimals(f: Func, args: &[Expr], whole: &Expr, input: &[(SqlType, bool)]) -> u8 {
    let arg = |i: usize| args.get(i).map_or(0, |a| a.decimals(input));
    match f {
        Func::Round | Func::Truncate => match args.get(1) {
            None => 0,
            // A negative count rounds to whole numbers.
            Some(Expr::Literal(v)) => v.as_i64().map_or(0, |n| n.clamp(0, 30) as u8),
            Some(Expr::Neg(n)) if matches!(**n, Expr::Literal(_)) => 0,
            Some(_) => arg(0),
        },
        Func::Floor | Func::Ceil | Func::Sign => 0,
        Func::Abs => arg(0),
        Func::Mod => arg(0).max(arg(1)).min(NOT_FIXED),
        Func::Coalesce | Func::IfNull | Func::Greatest | Func::Least => {
            widest(args.iter().map(|a| a.decimals(input)))
        }
        Func::If => arg(1).max(arg(2)).min(NOT_FIXED),
        Func::NullIf => arg(0),
        _ => type_decimals(&whole.result_type(input).0),
    }
}
