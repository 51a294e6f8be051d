//! Scalar functions. [`Func`] names them (`catalog`); each family's file
//! evaluates and types its own: `control` (COALESCE, IF, NULLIF, GREATEST,
//! ...), `string`, `numeric`, `datetime` (with `calendar`'s arithmetic) and
//! `json`. [`Family::of`] is the one table routing a function to its family,
//! for evaluation and for typing alike. `builtin_names` lists every MySQL
//! and MariaDB built-in, evaluated here or not.

mod args;
pub(super) mod builtin_names;
mod calendar;
mod catalog;
mod control;
mod datetime;
mod json;
mod numeric;
mod string;

use ladle_common::{SqlType, Value};

pub use catalog::{
    Func, Lookup, UNIT_DAY, UNIT_HOUR, UNIT_MICROSECOND, UNIT_MINUTE, UNIT_MONTH, UNIT_QUARTER,
    UNIT_SECOND, UNIT_WEEK, UNIT_YEAR,
};

use super::error::EvalResult;
use super::tree::{Ctx, Expr};

/// The file a function is evaluated and typed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// Evaluates only the arguments it needs (`control::call_lazy`).
    Control,
    /// Compares its evaluated arguments (`control::call`).
    Comparison,
    String,
    Numeric,
    DateTime,
    Json,
}

impl Family {
    fn of(f: Func) -> Family {
        use Func::*;
        match f {
            Coalesce | IfNull | If | SingleRow => Family::Control,
            NullIf | Greatest | Least | Field => Family::Comparison,
            Concat | ConcatWs | Lower | Upper | Length | CharLength | Substring | Left | Right
            | Trim | LTrim | RTrim | Replace | RegexpLike | RegexpReplace | Md5 | Sha1 | Sha2
            | Ord | Locate | Instr | Repeat | Reverse | Lpad | Rpad | Hex | Unhex => Family::String,
            Abs | Round | Truncate | Floor | Ceil | Rand | Sign | Mod | Pow | Sqrt | Sin | Cos
            | Tan | Cot | Asin | Acos | Atan | Exp | Ln | Log | Log2 | Log10 | Degrees
            | Radians | Pi => Family::Numeric,
            Now | UtcTimestamp | CurDate | CurTime | UnixTimestamp | FromUnixTime | Date | Year
            | Month | Day | Hour | Minute | Second | DateAdd | Quarter | Weekday | DayOfYear
            | Microsecond | Week | YearWeek | MakeDate | TimeOf | TimeToSec | DateFormat
            | DayOfWeek | MonthName | DayName | DateDiff | ConvertTz | TimestampDiff | ToDays
            | FromDays | ToSeconds | LastDay | Timestamp | StrToDate => Family::DateTime,
            JsonExtract | JsonUnquote | JsonContains | JsonContainsPath | JsonType | JsonValid
            | JsonLength | JsonKeys | JsonDepth => Family::Json,
        }
    }
}

impl Func {
    /// Whether `f` reads its argument at `position` as a string (a BIT
    /// argument there is its bytes, see the planner). HEX reads a BIT's
    /// number; a length, position or count argument is a number.
    pub(crate) fn reads_string_at(self, position: usize) -> bool {
        match self {
            Func::Hex => false,
            Func::Sha2 | Func::Substring | Func::Left | Func::Right | Func::Repeat => position == 0,
            Func::Locate => position < 2,
            Func::Lpad | Func::Rpad => position != 1,
            _ => Family::of(self) == Family::String,
        }
    }
}

/// Evaluates `f` over `args`: the control functions evaluate the arguments
/// they need, every other function all of them, in order, first.
pub(crate) fn call(f: Func, args: &[Expr], c: &Ctx<'_>) -> EvalResult {
    let family = Family::of(f);
    if family == Family::Control {
        return control::call_lazy(f, args, c);
    }
    let vals: Vec<Value> = args
        .iter()
        .map(|a| a.eval_ctx(c))
        .collect::<EvalResult<_>>()?;
    let v0 = vals.first().cloned().unwrap_or(Value::Null);
    match family {
        Family::Control | Family::Comparison => control::call(f, &vals, v0),
        Family::String => string::call(f, &vals, v0),
        Family::Numeric => numeric::call(f, &vals, v0),
        Family::DateTime => datetime::call(f, args, &vals, v0),
        Family::Json => json::call(f, &vals, v0),
    }
}

/// The result type and nullability of `f` over `args`, given the input
/// columns' types.
pub(crate) fn result_type(f: Func, args: &[Expr], input: &[(SqlType, bool)]) -> (SqlType, bool) {
    let tys: Vec<(SqlType, bool)> = args.iter().map(|a| a.result_type(input)).collect();
    match Family::of(f) {
        Family::Control | Family::Comparison => control::result_type(f, &tys),
        Family::String => string::result_type(f, &tys),
        Family::Numeric => numeric::result_type(f, args, &tys),
        Family::DateTime => datetime::result_type(f, args, &tys),
        Family::Json => json::result_type(f),
    }
}
