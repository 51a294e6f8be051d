//! Scalar functions.

use chrono::{Datelike, Duration, NaiveDateTime, Timelike, Utc};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};

use super::dates;
use super::ops::{self, to_bytes, to_num, to_text, truth, Num};
use super::{Ctx, EvalError, EvalResult, Expr};
use ladle_common::{Collation, SqlType, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Coalesce,
    IfNull,
    NullIf,
    If,
    Concat,
    ConcatWs,
    Lower,
    Upper,
    Length,
    CharLength,
    Substring,
    Left,
    Right,
    Trim,
    LTrim,
    RTrim,
    Replace,
    Abs,
    Round,
    Truncate,
    Floor,
    Ceil,
    Greatest,
    Least,
    Now,
    UtcTimestamp,
    CurDate,
    CurTime,
    UnixTimestamp,
    FromUnixTime,
    Date,
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    /// DATE_ADD(date, seconds-or-months encoded by the planner): args are
    /// (date, amount, unit code).
    DateAdd,
    Rand,
    Sign,
    Mod,
    Pow,
    Sqrt,
    /// SIN .. DEGREES: one DOUBLE argument, NULL outside the domain.
    Sin,
    Cos,
    Tan,
    Cot,
    Asin,
    Acos,
    /// ATAN(x) or ATAN(y, x); ATAN2(y, x).
    Atan,
    Exp,
    /// LN(x), LOG(x), LOG(b, x), LOG2(x), LOG10(x).
    Ln,
    Log,
    Log2,
    Log10,
    Degrees,
    Radians,
    Pi,
    /// REGEXP_LIKE(s, pattern, match_type): `match_type` letters as MySQL's
    /// (c case-sensitive, i insensitive, m multi-line, n `.` matches a
    /// newline; the last of c/i wins). `s REGEXP p` compiles to it with the
    /// comparison's collation as the default.
    RegexpLike,
    /// QUARTER, WEEKDAY (0 = Monday), DAYOFYEAR, MICROSECOND.
    Quarter,
    Weekday,
    DayOfYear,
    Microsecond,
    /// WEEK(d[, mode]) and YEARWEEK(d[, mode]) with MySQL's eight modes.
    Week,
    YearWeek,
    /// MAKEDATE(year, day_of_year).
    MakeDate,
    /// TIME(x): the time part; TIME_TO_SEC(t).
    TimeOf,
    TimeToSec,
    /// MD5(s), SHA1(s)/SHA(s), SHA2(s, bits): lower-case hex digests.
    Md5,
    Sha1,
    Sha2,
    /// ORD(s): the first character's bytes as a big-endian number.
    Ord,
    Locate,
    Instr,
    Repeat,
    Reverse,
    Lpad,
    Rpad,
    Hex,
    /// UNHEX(s): the bytes a hex string spells (a binary string).
    Unhex,
    DateFormat,
    DayOfWeek,
    MonthName,
    DayName,
    DateDiff,
    /// CONVERT_TZ(dt, from, to) between numeric offsets ('+02:00') and
    /// 'SYSTEM' (UTC here). Named zones give NULL, as on a MySQL or
    /// MariaDB server without time zone tables (Django probes
    /// `CONVERT_TZ(.., 'UTC', 'UTC') IS NOT NULL` for them).
    ConvertTz,
    /// TIMESTAMPDIFF(unit, a, b): whole units from `a` to `b` (the unit
    /// is compiled to a `UNIT_*` literal; not callable by name).
    TimestampDiff,
    /// `(row count, value)` of a scalar subquery without an aggregate: the
    /// value, or MySQL's error 1242 when the subquery had several rows.
    /// Volatile so that the planner checks it at read time, not while
    /// maintaining state. Not callable from SQL.
    SingleRow,
    /// JSON_EXTRACT(doc, path, ...), also `doc -> path`.
    JsonExtract,
    /// JSON_UNQUOTE(s), also `doc ->> path` over JSON_EXTRACT.
    JsonUnquote,
    /// JSON_CONTAINS(target, candidate[, path]).
    JsonContains,
    /// JSON_CONTAINS_PATH(doc, 'one' | 'all', path, ...).
    JsonContainsPath,
    JsonType,
    JsonValid,
    /// TO_DAYS(d), FROM_DAYS(n), TO_SECONDS(d), LAST_DAY(d) (see `dates`).
    ToDays,
    FromDays,
    ToSeconds,
    LastDay,
    /// TIMESTAMP(x) or TIMESTAMP(d, t).
    Timestamp,
    /// STR_TO_DATE(s, format): DATE, TIME or DATETIME by the format.
    StrToDate,
}

/// Interval units for DATE_ADD (the third argument, as an integer code).
pub const UNIT_MICROSECOND: i64 = 0;
pub const UNIT_SECOND: i64 = 1;
pub const UNIT_MINUTE: i64 = 2;
pub const UNIT_HOUR: i64 = 3;
pub const UNIT_DAY: i64 = 4;
pub const UNIT_WEEK: i64 = 5;
pub const UNIT_MONTH: i64 = 6;
pub const UNIT_QUARTER: i64 = 7;
pub const UNIT_YEAR: i64 = 8;

/// What looking a function up by name found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(Func),
    /// A built-in called with too few or too many arguments (MySQL's 1582).
    WrongArgCount,
    /// Not a function Ladle knows.
    Unknown,
}

/// Built-ins Ladle does not evaluate yet, with their argument counts, so
/// that a wrong count still gets MySQL's 1582 rather than "unsupported".
const UNIMPLEMENTED_ARITY: &[(&str, usize, usize)] = &[("sleep", 1, 1)];

impl Func {
    /// Looks a function up by its SQL name and checks the argument count.
    pub fn by_name(name: &str, nargs: usize) -> Lookup {
        let n = name.to_ascii_lowercase();
        let (found, min, max) = match Func::signature(&n) {
            Some((f, min, max)) => (Some(f), min, max),
            None => match UNIMPLEMENTED_ARITY.iter().find(|(u, ..)| *u == n) {
                Some(&(_, min, max)) => (None, min, max),
                None => return Lookup::Unknown,
            },
        };
        match found {
            _ if nargs < min || nargs > max => Lookup::WrongArgCount,
            Some(f) => Lookup::Found(f),
            None => Lookup::Unknown,
        }
    }

    /// A function by its lower-case SQL name, with its least and most
    /// argument counts.
    fn signature(n: &str) -> Option<(Func, usize, usize)> {
        use Func::*;
        Some(match n {
            "coalesce" => (Coalesce, 1, usize::MAX),
            "ifnull" => (IfNull, 2, 2),
            "nullif" => (NullIf, 2, 2),
            "if" => (If, 3, 3),
            "concat" => (Concat, 1, usize::MAX),
            "concat_ws" => (ConcatWs, 2, usize::MAX),
            "lower" | "lcase" => (Lower, 1, 1),
            "upper" | "ucase" => (Upper, 1, 1),
            "length" | "octet_length" => (Length, 1, 1),
            "char_length" | "character_length" => (CharLength, 1, 1),
            "substring" | "substr" | "mid" => (Substring, 2, 3),
            "left" => (Left, 2, 2),
            "right" => (Right, 2, 2),
            "trim" => (Trim, 1, 1),
            "ltrim" => (LTrim, 1, 1),
            "rtrim" => (RTrim, 1, 1),
            "replace" => (Replace, 3, 3),
            "abs" => (Abs, 1, 1),
            "round" => (Round, 1, 2),
            "truncate" => (Truncate, 2, 2),
            "floor" => (Floor, 1, 1),
            "ceil" | "ceiling" => (Ceil, 1, 1),
            "greatest" => (Greatest, 2, usize::MAX),
            "least" => (Least, 2, usize::MAX),
            "now" | "current_timestamp" | "localtimestamp" | "localtime" | "sysdate" => (Now, 0, 1),
            "utc_timestamp" => (UtcTimestamp, 0, 1),
            "curdate" | "current_date" | "utc_date" => (CurDate, 0, 0),
            "curtime" | "current_time" | "utc_time" => (CurTime, 0, 1),
            "unix_timestamp" => (UnixTimestamp, 0, 1),
            "from_unixtime" => (FromUnixTime, 1, 1),
            "date" => (Date, 1, 1),
            "year" => (Year, 1, 1),
            "month" => (Month, 1, 1),
            "day" | "dayofmonth" => (Day, 1, 1),
            "hour" => (Hour, 1, 1),
            "minute" => (Minute, 1, 1),
            "second" => (Second, 1, 1),
            "rand" => (Rand, 0, 1),
            "sign" => (Sign, 1, 1),
            "mod" => (Mod, 2, 2),
            "pow" | "power" => (Pow, 2, 2),
            "sqrt" => (Sqrt, 1, 1),
            "sin" => (Sin, 1, 1),
            "cos" => (Cos, 1, 1),
            "tan" => (Tan, 1, 1),
            "cot" => (Cot, 1, 1),
            "asin" => (Asin, 1, 1),
            "acos" => (Acos, 1, 1),
            "atan" => (Atan, 1, 2),
            "atan2" => (Atan, 2, 2),
            "exp" => (Exp, 1, 1),
            "ln" => (Ln, 1, 1),
            "log" => (Log, 1, 2),
            "log2" => (Log2, 1, 1),
            "log10" => (Log10, 1, 1),
            "degrees" => (Degrees, 1, 1),
            "radians" => (Radians, 1, 1),
            "pi" => (Pi, 0, 0),
            "regexp_like" => (RegexpLike, 2, 3),
            "quarter" => (Quarter, 1, 1),
            "weekday" => (Weekday, 1, 1),
            "dayofyear" => (DayOfYear, 1, 1),
            "microsecond" => (Microsecond, 1, 1),
            "week" => (Week, 1, 2),
            "yearweek" => (YearWeek, 1, 2),
            "makedate" => (MakeDate, 2, 2),
            "time" => (TimeOf, 1, 1),
            "time_to_sec" => (TimeToSec, 1, 1),
            "md5" => (Md5, 1, 1),
            "sha1" | "sha" => (Sha1, 1, 1),
            "sha2" => (Sha2, 2, 2),
            "ord" => (Ord, 1, 1),
            "locate" => (Locate, 2, 2),
            "instr" => (Instr, 2, 2),
            "repeat" => (Repeat, 2, 2),
            "reverse" => (Reverse, 1, 1),
            "lpad" => (Lpad, 3, 3),
            "rpad" => (Rpad, 3, 3),
            "hex" => (Hex, 1, 1),
            "unhex" => (Unhex, 1, 1),
            "date_format" => (DateFormat, 2, 2),
            "dayofweek" => (DayOfWeek, 1, 1),
            "monthname" => (MonthName, 1, 1),
            "dayname" => (DayName, 1, 1),
            "datediff" => (DateDiff, 2, 2),
            "convert_tz" => (ConvertTz, 3, 3),
            "json_extract" => (JsonExtract, 2, usize::MAX),
            "json_unquote" => (JsonUnquote, 1, 1),
            "json_contains" => (JsonContains, 2, 3),
            "json_contains_path" => (JsonContainsPath, 3, usize::MAX),
            "json_type" => (JsonType, 1, 1),
            "json_valid" => (JsonValid, 1, 1),
            "to_days" => (ToDays, 1, 1),
            "from_days" => (FromDays, 1, 1),
            "to_seconds" => (ToSeconds, 1, 1),
            "last_day" => (LastDay, 1, 1),
            "timestamp" => (Timestamp, 1, 2),
            "str_to_date" => (StrToDate, 2, 2),
            _ => return None,
        })
    }

    pub fn is_volatile(self) -> bool {
        matches!(
            self,
            Func::Now | Func::UtcTimestamp | Func::CurDate | Func::CurTime | Func::Rand
        ) || self == Func::UnixTimestamp
            || self == Func::SingleRow
    }
}

fn now() -> NaiveDateTime {
    let n = Utc::now().naive_utc();
    n.with_nanosecond(0).unwrap_or(n)
}

fn arg(args: &[Expr], i: usize, c: &Ctx<'_>) -> EvalResult {
    match args.get(i) {
        Some(e) => e.eval_ctx(c),
        None => Ok(Value::Null),
    }
}

fn int_arg(v: &Value) -> Option<i64> {
    match to_num(v)? {
        Num::Int(i) => Some(i.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64),
        Num::Dec(d) => d.round().to_i64(),
        Num::Float(f) => Some(f.round() as i64),
    }
}

/// The SQL name of a function, as MySQL's warnings spell it.
fn sql_name(f: Func) -> &'static str {
    match f {
        Func::Concat => "concat",
        Func::ConcatWs => "concat_ws",
        Func::Replace => "replace",
        Func::Repeat => "repeat",
        Func::Lpad => "lpad",
        Func::Rpad => "rpad",
        Func::Hex => "hex",
        _ => "function",
    }
}

/// Whether a result of `bytes` bytes from `f` is past `max_allowed_packet`;
/// if so, records MySQL's warning 1301 (the caller returns NULL).
fn too_large(f: Func, bytes: u128) -> bool {
    let max = ladle_common::MAX_ALLOWED_PACKET;
    if bytes <= u128::from(max) {
        return false;
    }
    super::warn(
        super::WARN_ALLOWED_PACKET_OVERFLOWED,
        format!(
            "Result of {}() was larger than max_allowed_packet ({max}) - truncated",
            sql_name(f)
        ),
    );
    true
}

/// Bytes of the first `n` characters of `pad` repeated (without building it).
fn cycled_bytes(pad: &[char], n: u128) -> u128 {
    let per_cycle: u128 = pad.iter().map(|c| c.len_utf8() as u128).sum();
    let len = pad.len() as u128;
    let tail: u128 = pad[..(n % len) as usize]
        .iter()
        .map(|c| c.len_utf8() as u128)
        .sum();
    n / len * per_cycle + tail
}

pub(crate) fn call(f: Func, args: &[Expr], c: &Ctx<'_>) -> EvalResult {
    use Func::*;
    // Lazy functions first.
    match f {
        Coalesce => {
            for a in args {
                let v = a.eval_ctx(c)?;
                if !v.is_null() {
                    return Ok(v);
                }
            }
            return Ok(Value::Null);
        }
        IfNull => {
            let v = arg(args, 0, c)?;
            return if v.is_null() { arg(args, 1, c) } else { Ok(v) };
        }
        If => {
            let cond = arg(args, 0, c)?;
            return if truth(&cond) == Some(true) {
                arg(args, 1, c)
            } else {
                arg(args, 2, c)
            };
        }
        SingleRow => {
            let n = arg(args, 0, c)?;
            if n.as_i64().unwrap_or(0) > 1 {
                return Err(EvalError::SubqueryRows);
            }
            return arg(args, 1, c);
        }
        _ => {}
    }
    let vals: Vec<Value> = args
        .iter()
        .map(|a| a.eval_ctx(c))
        .collect::<EvalResult<_>>()?;
    let v0 = vals.first().cloned().unwrap_or(Value::Null);
    let null_in = |vals: &[Value]| vals.iter().any(|v| v.is_null());
    Ok(match f {
        Coalesce | IfNull | If | SingleRow => Value::Null,
        NullIf => {
            let v1 = vals.get(1).cloned().unwrap_or(Value::Null);
            if ops::compare(&v0, &v1, Collation::GeneralCi) == Some(std::cmp::Ordering::Equal) {
                Value::Null
            } else {
                v0
            }
        }
        Concat => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let total: u128 = vals.iter().map(|v| to_bytes(v).len() as u128).sum();
            if too_large(f, total) {
                return Ok(Value::Null);
            }
            // One binary argument makes the result a binary string.
            if vals.iter().any(|v| matches!(v, Value::Bytes(_))) {
                return Ok(Value::bytes(
                    vals.iter().flat_map(to_bytes).collect::<Vec<u8>>(),
                ));
            }
            Value::text(vals.iter().map(to_text).collect::<String>())
        }
        ConcatWs => {
            if v0.is_null() {
                return Ok(Value::Null);
            }
            let parts = vals[1..].iter().filter(|v| !v.is_null());
            let total: u128 = parts
                .clone()
                .map(|v| to_bytes(v).len() as u128 + to_bytes(&v0).len() as u128)
                .sum();
            if too_large(f, total) {
                return Ok(Value::Null);
            }
            if vals.iter().any(|v| matches!(v, Value::Bytes(_))) {
                let sep = to_bytes(&v0);
                let parts: Vec<Vec<u8>> = parts.map(to_bytes).collect();
                return Ok(Value::bytes(parts.join(sep.as_slice())));
            }
            let sep = to_text(&v0);
            let parts: Vec<String> = parts.map(to_text).collect();
            Value::text(parts.join(&sep))
        }
        Lower | Upper | Trim | LTrim | RTrim | Reverse | Hex | Unhex if v0.is_null() => Value::Null,
        // Case conversion does not apply to binary strings (MySQL).
        Lower | Upper if matches!(v0, Value::Bytes(_)) => v0,
        Reverse if matches!(v0, Value::Bytes(_)) => {
            Value::bytes(to_bytes(&v0).into_iter().rev().collect::<Vec<u8>>())
        }
        Lower => Value::text(to_text(&v0).to_lowercase()),
        Upper => Value::text(to_text(&v0).to_uppercase()),
        Trim => Value::text(to_text(&v0).trim_matches(' ')),
        LTrim => Value::text(to_text(&v0).trim_start_matches(' ')),
        RTrim => Value::text(to_text(&v0).trim_end_matches(' ')),
        Reverse => Value::text(to_text(&v0).chars().rev().collect::<String>()),
        Hex if too_large(f, to_bytes(&v0).len() as u128 * 2) => Value::Null,
        Hex => match &v0 {
            Value::Text(_) | Value::Bytes(_) => Value::text(
                to_bytes(&v0)
                    .iter()
                    .map(|b| format!("{b:02X}"))
                    .collect::<String>(),
            ),
            other => Value::text(format!("{:X}", ops::to_u64_bits(other))),
        },
        Unhex => match unhex(&to_bytes(&v0)) {
            Some(b) => Value::bytes(b),
            None => Value::Null,
        },
        Length => match &v0 {
            Value::Null => Value::Null,
            other => Value::Int(to_bytes(other).len() as i64),
        },
        // A binary string's characters are its bytes.
        CharLength => match &v0 {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Int(b.len() as i64),
            other => Value::Int(to_text(other).chars().count() as i64),
        },
        Substring if matches!(v0, Value::Bytes(_)) => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let pos = int_arg(&vals[1]).unwrap_or(0);
            let len = match vals.get(2) {
                Some(l) => int_arg(l).unwrap_or(0),
                None => i64::MAX,
            };
            Value::bytes(substring(&to_bytes(&v0), pos, len))
        }
        Substring => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let s: Vec<char> = to_text(&v0).chars().collect();
            let pos = int_arg(&vals[1]).unwrap_or(0);
            let len = match vals.get(2) {
                Some(l) => int_arg(l).unwrap_or(0),
                None => i64::MAX,
            };
            Value::text(substring(&s, pos, len).iter().collect::<String>())
        }
        Left | Right if matches!(v0, Value::Bytes(_)) => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let b = to_bytes(&v0);
            let k = int_arg(&vals[1]).unwrap_or(0).clamp(0, b.len() as i64) as usize;
            Value::bytes(if f == Left {
                &b[..k]
            } else {
                &b[b.len() - k..]
            })
        }
        Left | Right => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let s: Vec<char> = to_text(&v0).chars().collect();
            let k = int_arg(&vals[1]).unwrap_or(0).clamp(0, s.len() as i64) as usize;
            let out: String = if f == Left {
                s[..k].iter().collect()
            } else {
                s[s.len() - k..].iter().collect()
            };
            Value::text(out)
        }
        Replace => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let from = to_text(&vals[1]);
            let hay = to_text(&v0);
            if from.is_empty() {
                return Ok(Value::text(hay));
            }
            let to = to_text(&vals[2]);
            let hits = hay.matches(from.as_str()).count() as u128;
            let bytes = hay.len() as u128 - hits * from.len() as u128 + hits * to.len() as u128;
            if too_large(f, bytes) {
                return Ok(Value::Null);
            }
            Value::text(hay.replace(&from, &to))
        }
        Repeat => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let n = int_arg(&vals[1]).unwrap_or(0).max(0) as u128;
            let s = to_text(&v0);
            if too_large(f, s.len() as u128 * n) {
                return Ok(Value::Null);
            }
            Value::text(s.repeat(n as usize))
        }
        Lpad | Rpad => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let s: Vec<char> = to_text(&v0).chars().collect();
            let n = int_arg(&vals[1]).unwrap_or(0);
            if n < 0 {
                return Ok(Value::Null);
            }
            let pad: Vec<char> = to_text(&vals[2]).chars().collect();
            if s.len() as i64 >= n {
                return Ok(Value::text(s[..n as usize].iter().collect::<String>()));
            }
            if pad.is_empty() {
                return Ok(Value::Null);
            }
            let body_bytes: u128 = s.iter().map(|c| c.len_utf8() as u128).sum();
            if too_large(
                f,
                body_bytes + cycled_bytes(&pad, (n as u128) - s.len() as u128),
            ) {
                return Ok(Value::Null);
            }
            let n = n as usize;
            let fill: String = pad.iter().cycle().take(n - s.len()).collect();
            let body: String = s.iter().collect();
            Value::text(if f == Lpad {
                fill + &body
            } else {
                body + &fill
            })
        }
        Locate | Instr => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let (needle, hay) = if f == Locate {
                (&vals[0], &vals[1])
            } else {
                (&vals[1], &vals[0])
            };
            let h = Collation::GeneralCi.fold(&to_text(hay)).to_string();
            let h = h.to_lowercase();
            let nd = to_text(needle).to_uppercase().to_lowercase();
            match h.find(&nd) {
                Some(byte) => Value::Int(h[..byte].chars().count() as i64 + 1),
                None => Value::Int(0),
            }
        }
        Abs => match to_num(&v0) {
            None => Value::Null,
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
            round(&v0, places, f == Truncate)?
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
                Some(Num::Float(x)) => Value::Double(if f == Floor { x.floor() } else { x.ceil() }),
            }
        }
        Mod => ops::arith(super::ArithOp::Mod, &v0, &vals[1])?,
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
        RegexpLike => regexp_like(&vals)?,
        Greatest | Least => {
            if null_in(&vals) {
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
        Now | UtcTimestamp => Value::DateTime(now()),
        CurDate => Value::Date(now().date()),
        CurTime => Value::Time(i64::from(now().num_seconds_from_midnight()) * 1_000_000),
        UnixTimestamp => match vals.first() {
            None => Value::Int(now().and_utc().timestamp()),
            Some(v) => match calendar(v) {
                Some(dt) => Value::Int(dt.and_utc().timestamp().max(0)),
                None => Value::Null,
            },
        },
        FromUnixTime => match int_arg(&v0) {
            Some(secs) if secs >= 0 => match chrono::DateTime::from_timestamp(secs, 0) {
                Some(dt) => Value::DateTime(dt.naive_utc()),
                None => Value::Null,
            },
            _ => Value::Null,
        },
        Date => match calendar(&v0) {
            Some(dt) => Value::Date(dt.date()),
            // The zero date, or one with a zero month or day: itself.
            None => ops::to_datetime(&v0).map_or(Value::Null, |dt| Value::Date(dt.date())),
        },
        // The zero date's fields are zeros, a zero month or day is 0.
        Year | Month | Day | Hour | Minute | Second | Quarter
            if ops::to_datetime(&v0).is_some() && calendar(&v0).is_none() =>
        {
            let dt = ops::to_datetime(&v0).unwrap_or_default();
            let (y, m, d) = ladle_common::date_parts(&dt.date());
            Value::Int(i64::from(match f {
                Year => y as u32,
                Month => m,
                Day => d,
                Quarter => m.div_ceil(3),
                Hour => dt.hour(),
                Minute => dt.minute(),
                _ => dt.second(),
            }))
        }
        Year | Month | Day | Hour | Minute | Second => match calendar(&v0) {
            Some(dt) => Value::Int(i64::from(match f {
                Year => dt.year() as u32,
                Month => dt.month(),
                Day => dt.day(),
                Hour => dt.hour(),
                Minute => dt.minute(),
                _ => dt.second(),
            })),
            None => match (&v0, f) {
                (Value::Time(us), Hour) => Value::Int(us / 3_600_000_000),
                (Value::Time(us), Minute) => Value::Int((us / 60_000_000) % 60),
                (Value::Time(us), Second) => Value::Int((us / 1_000_000) % 60),
                _ => Value::Null,
            },
        },
        DateAdd => {
            if null_in(&vals) {
                return Ok(Value::Null);
            }
            let is_date = matches!(v0, Value::Date(_));
            let Some(dt) = calendar(&v0) else {
                if ops::to_datetime(&v0).is_some() {
                    super::warn(
                        super::WARN_TRUNCATED_WRONG_VALUE,
                        format!("Incorrect datetime value: '{v0}'"),
                    );
                }
                return Ok(Value::Null);
            };
            let amount = int_arg(&vals[1]).unwrap_or(0);
            let unit = int_arg(&vals[2]).unwrap_or(UNIT_DAY);
            let out = match unit {
                UNIT_MONTH | UNIT_QUARTER | UNIT_YEAR => {
                    let per = match unit {
                        UNIT_YEAR => 12,
                        UNIT_QUARTER => 3,
                        _ => 1,
                    };
                    amount
                        .checked_mul(per)
                        .and_then(|months| add_months(dt, months))
                }
                _ => {
                    let d = match unit {
                        UNIT_MICROSECOND => Some(Duration::microseconds(amount)),
                        UNIT_SECOND => Duration::try_seconds(amount),
                        UNIT_MINUTE => Duration::try_minutes(amount),
                        UNIT_HOUR => Duration::try_hours(amount),
                        UNIT_WEEK => Duration::try_weeks(amount),
                        _ => Duration::try_days(amount),
                    };
                    d.and_then(|d| dt.checked_add_signed(d))
                        // MySQL's calendar ends at 9999-12-31.
                        .filter(|o| (0..=9999).contains(&o.year()))
                }
            };
            match out {
                Some(o) if is_date && unit >= UNIT_DAY => Value::Date(o.date()),
                Some(o) => Value::DateTime(o),
                None => {
                    super::warn(
                        super::WARN_DATETIME_FUNCTION_OVERFLOW,
                        "Datetime function: datetime field overflow".into(),
                    );
                    Value::Null
                }
            }
        }
        Rand => Value::Double(rand_f64()),
        // Not `calendar`: MySQL formats the zero date and dates with a
        // zero month or day by their fields.
        DateFormat => match (ops::to_datetime(&v0), &vals[1]) {
            (Some(dt), f) if !f.is_null() => {
                date_format(dt, &to_text(f)).map_or(Value::Null, Value::text)
            }
            _ => Value::Null,
        },
        Quarter | Weekday | DayOfYear | Week | YearWeek => match calendar(&v0) {
            Some(dt) => {
                let d = dt.date();
                let mode = vals.get(1).and_then(int_arg).unwrap_or(0);
                Value::Int(match f {
                    Quarter => i64::from((d.month() - 1) / 3 + 1),
                    Weekday => i64::from(d.weekday().num_days_from_monday()),
                    DayOfYear => i64::from(d.ordinal()),
                    Week => mysql_week(d, week_mode(mode)).0,
                    _ => {
                        let (week, year) = mysql_week(d, week_mode(mode) | WEEK_YEAR);
                        year * 100 + week
                    }
                })
            }
            None => Value::Null,
        },
        Microsecond => match time_of_day(&v0) {
            Some(us) => Value::Int((us % 1_000_000).abs()),
            None => Value::Null,
        },
        MakeDate => match (int_arg(&v0), int_arg(&vals[1])) {
            (Some(y), Some(n)) if n > 0 && (0..=9999).contains(&y) => {
                // Two-digit years as MySQL reads them; day n of year y.
                let y = match y {
                    0..=69 => y + 2000,
                    70..=99 => y + 1900,
                    _ => y,
                };
                chrono::NaiveDate::from_ymd_opt(y as i32, 1, 1)
                    .and_then(|d| d.checked_add_signed(Duration::try_days(n - 1)?))
                    .filter(|d| d.year() <= 9999)
                    .map_or(Value::Null, Value::Date)
            }
            _ => Value::Null,
        },
        TimeOf => time_of_day(&v0).map_or(Value::Null, Value::Time),
        ToDays | ToSeconds | LastDay | Timestamp | StrToDate => {
            date_function(f, args, &vals, &mut record_date_warning)
        }
        FromDays if v0.is_null() => Value::Null,
        FromDays => {
            ops::warn_if_partly_integer(&v0);
            dates::from_days(int_arg(&v0))
        }
        // MySQL's whole seconds (MariaDB keeps the fraction).
        TimeToSec => time_of_day(&v0).map_or(Value::Null, |us| Value::Int(us / 1_000_000)),
        JsonExtract => super::json::extract(&vals)?,
        JsonUnquote => super::json::unquote(&v0),
        JsonContains => super::json::contains_fn(&vals)?,
        JsonContainsPath => super::json::contains_path(&vals)?,
        JsonType => super::json::type_of(&v0),
        JsonValid => super::json::valid(&v0),
        Md5 | Sha1 | Sha2 | Ord if v0.is_null() => Value::Null,
        Md5 | Sha1 | Sha2 => {
            use sha2::Digest;
            let data = to_bytes(&v0);
            let digest: Option<Vec<u8>> = match f {
                Md5 => Some(md5::Md5::digest(&data).to_vec()),
                Sha1 => Some(sha1::Sha1::digest(&data).to_vec()),
                _ => match vals.get(1).and_then(int_arg) {
                    Some(224) => Some(sha2::Sha224::digest(&data).to_vec()),
                    Some(0 | 256) => Some(sha2::Sha256::digest(&data).to_vec()),
                    Some(384) => Some(sha2::Sha384::digest(&data).to_vec()),
                    Some(512) => Some(sha2::Sha512::digest(&data).to_vec()),
                    _ => None,
                },
            };
            match digest {
                Some(d) => Value::text(d.iter().map(|b| format!("{b:02x}")).collect::<String>()),
                None => Value::Null,
            }
        }
        Ord => {
            let data = to_bytes(&v0);
            let first = match &v0 {
                Value::Text(t) => t.chars().next().map_or(0, char::len_utf8),
                _ => data.len().min(1),
            };
            Value::Int(
                data[..first]
                    .iter()
                    .fold(0i64, |n, &b| n * 256 + i64::from(b)),
            )
        }
        // The month's name by the date's fields (`2020-05-00` is May);
        // NULL for month 0.
        MonthName => match ops::to_datetime(&v0) {
            Some(dt) => {
                let (_, month, _) = ladle_common::date_parts(&dt.date());
                month_name(month).map_or(Value::Null, Value::text)
            }
            None => Value::Null,
        },
        DayName => match calendar(&v0) {
            Some(dt) => Value::text(dt.format("%A").to_string()),
            None => Value::Null,
        },
        DayOfWeek => match calendar(&v0) {
            Some(dt) => Value::Int(i64::from(dt.weekday().number_from_sunday())),
            None => Value::Null,
        },
        DateDiff => match (calendar(&v0), calendar(&vals[1])) {
            (Some(a), Some(b)) => Value::Int((a.date() - b.date()).num_days()),
            _ => Value::Null,
        },
        TimestampDiff => match (int_arg(&v0), calendar(&vals[1]), calendar(&vals[2])) {
            (Some(unit), Some(a), Some(b)) => {
                timestamp_diff(unit, a, b).map_or(Value::Null, Value::Int)
            }
            _ => Value::Null,
        },
        ConvertTz => {
            let offset = |v: &Value| (!v.is_null()).then(|| zone_offset_seconds(&to_text(v)))?;
            match (calendar(&v0), offset(&vals[1]), offset(&vals[2])) {
                (Some(dt), Some(from), Some(to)) => dt
                    .checked_add_signed(chrono::Duration::seconds(to - from))
                    .map_or(Value::Null, Value::DateTime),
                _ => Value::Null,
            }
        }
    })
}

/// Whole `unit`s (a `UNIT_*` code) from `a` to `b`, truncated toward
/// zero as MySQL counts them: months are calendar months, less one when
/// `b`'s day and time of month come before `a`'s.
fn timestamp_diff(unit: i64, a: NaiveDateTime, b: NaiveDateTime) -> Option<i64> {
    let d = b - a;
    Some(match unit {
        UNIT_MICROSECOND => d.num_microseconds()?,
        UNIT_SECOND => d.num_seconds(),
        UNIT_MINUTE => d.num_minutes(),
        UNIT_HOUR => d.num_hours(),
        UNIT_DAY => d.num_days(),
        UNIT_WEEK => d.num_days() / 7,
        UNIT_MONTH | UNIT_QUARTER | UNIT_YEAR => {
            let mut months =
                i64::from(b.year() - a.year()) * 12 + i64::from(b.month()) - i64::from(a.month());
            let within = |x: NaiveDateTime| (x.day(), x.time());
            if months > 0 && within(b) < within(a) {
                months -= 1;
            } else if months < 0 && within(b) > within(a) {
                months += 1;
            }
            match unit {
                UNIT_MONTH => months,
                UNIT_QUARTER => months / 3,
                _ => months / 12,
            }
        }
        _ => return None,
    })
}

/// Seconds east of UTC of a CONVERT_TZ zone: `+H:MM` / `-H:MM` within
/// MariaDB's range (-12:59 to +13:00), or 'SYSTEM' (UTC). `None` for
/// anything else, named zones and surrounding spaces included.
fn zone_offset_seconds(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("SYSTEM") {
        return Some(0);
    }
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':')?;
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    let minutes = sign * (h * 60 + m);
    (m < 60 && (-(12 * 60 + 59)..=13 * 60).contains(&minutes)).then_some(minutes * 60)
}

/// SUBSTRING's units (characters or bytes) from 1-based `pos` (from the end
/// when negative; nothing for 0), at most `len` of them.
fn substring<T: Clone>(s: &[T], pos: i64, len: i64) -> Vec<T> {
    let n = s.len() as i64;
    let start = if pos > 0 {
        pos - 1
    } else if pos < 0 {
        n + pos
    } else {
        return Vec::new();
    };
    if start < 0 || start >= n || len <= 0 {
        return Vec::new();
    }
    let end = start.saturating_add(len).min(n);
    s[start as usize..end as usize].to_vec()
}

/// The bytes a string of hex digits spells (an odd count reads as if it
/// had a leading 0, as in MySQL); `None` for a non-hex character.
fn unhex(digits: &[u8]) -> Option<Vec<u8>> {
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(digits.len().div_ceil(2));
    let (head, rest) = digits.split_at(digits.len() % 2);
    if let [c] = head {
        out.push(nibble(*c)?);
    }
    for pair in rest.chunks(2) {
        out.push(nibble(pair[0])? << 4 | nibble(pair[1])?);
    }
    Some(out)
}

/// MySQL's DATE_FORMAT specifiers, over the fields MySQL sees (a zero
/// month or day is printed as given). `None` (NULL) where MySQL gives NULL:
/// a month or day-of-year name of month 0, a weekday of the zero date.
fn date_format(dt: NaiveDateTime, f: &str) -> Option<String> {
    let (year, month, day) = ladle_common::date_parts(&dt.date());
    let day_number = day_number_date(year, month, day);
    let mut out = String::new();
    let mut it = f.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = it.next() else { break };
        let h12 = match dt.hour() % 12 {
            0 => 12,
            h => h,
        };
        // Names and ordinals need a month; weekdays and weeks a day number
        // (MySQL's: `2020-00-15` is 2019-12-15, `2020-05-00` 2020-04-30).
        let named_month = (month != 0).then_some(dt.date());
        let weekday_date = if (year, month) == (0, 0) {
            None
        } else {
            day_number
        };
        let s = match spec {
            'Y' => format!("{year:04}"),
            'y' => format!("{:02}", year % 100),
            'm' => format!("{month:02}"),
            'c' => month.to_string(),
            'd' => format!("{day:02}"),
            'e' => day.to_string(),
            'D' => format!("{day}{}", ordinal_suffix(day)),
            'H' => format!("{:02}", dt.hour()),
            'k' => dt.hour().to_string(),
            'h' | 'I' => format!("{h12:02}"),
            'l' => h12.to_string(),
            'i' => format!("{:02}", dt.minute()),
            's' | 'S' => format!("{:02}", dt.second()),
            'f' => format!("{:06}", dt.nanosecond() / 1000),
            'p' => (if dt.hour() < 12 { "AM" } else { "PM" }).to_string(),
            'T' => dt.format("%H:%M:%S").to_string(),
            'r' => format!(
                "{h12:02}:{:02}:{:02} {}",
                dt.minute(),
                dt.second(),
                if dt.hour() < 12 { "AM" } else { "PM" }
            ),
            'M' => month_name(month)?.to_string(),
            'b' => month_name(month)?[..3].to_string(),
            'j' => {
                named_month?;
                let jan1 = chrono::NaiveDate::from_ymd_opt(year, 1, 1)?;
                format!("{:03}", (day_number? - jan1).num_days() + 1)
            }
            'W' => weekday_date?.format("%A").to_string(),
            'a' => weekday_date?.format("%a").to_string(),
            'w' => weekday_date?.weekday().num_days_from_sunday().to_string(),
            'U' | 'u' | 'V' | 'v' => {
                let mode = match spec {
                    'U' => 0,
                    'u' => 1,
                    'V' => 2,
                    _ => 3,
                };
                format!("{:02}", mysql_week(day_number?, week_mode(mode)).0)
            }
            'X' | 'x' => {
                let mode = if spec == 'X' { 2 } else { 3 };
                format!(
                    "{:04}",
                    mysql_week(day_number?, week_mode(mode) | WEEK_YEAR).1
                )
            }
            other => other.to_string(),
        };
        out.push_str(&s);
    }
    Some(out)
}

/// The calendar date MySQL's day number of `year-month-day` falls on, where
/// a zero day is the month's day before its first and month 0 the 31 days
/// before January; `None` for the zero date.
fn day_number_date(year: i32, month: u32, day: u32) -> Option<chrono::NaiveDate> {
    if (year, month, day) == (0, 0, 0) {
        return None;
    }
    let first = chrono::NaiveDate::from_ymd_opt(year, month.max(1), 1)?;
    let back = if month == 0 { 31 } else { 0 };
    first.checked_add_signed(chrono::Duration::days(i64::from(day) - 1 - back))
}

fn month_name(month: u32) -> Option<&'static str> {
    const NAMES: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    NAMES
        .get(usize::try_from(month).ok()?.checked_sub(1)?)
        .copied()
}

/// `st`, `nd`, `rd` or `th` after a day of the month (`%D`).
fn ordinal_suffix(day: u32) -> &'static str {
    match (day % 10, day % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

fn add_months(dt: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let total = (i64::from(dt.year()) * 12 + i64::from(dt.month0())).checked_add(months)?;
    let (y, m0) = (total.div_euclid(12), total.rem_euclid(12));
    if !(0..=9999).contains(&y) {
        return None;
    }
    let mut day = dt.day();
    loop {
        if let Some(d) = chrono::NaiveDate::from_ymd_opt(y as i32, m0 as u32 + 1, day) {
            return Some(d.and_time(dt.time()));
        }
        if day <= 28 {
            return None;
        }
        day -= 1;
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
        Some(Num::Float(x)) => {
            let p = 10f64.powi(places.clamp(-300, 300) as i32);
            let y = x * p;
            let r = if truncate { y.trunc() } else { y.round() };
            Value::Double(r / p)
        }
    })
}

pub(crate) fn result_type(f: Func, args: &[Expr], input: &[(SqlType, bool)]) -> (SqlType, bool) {
    use Func::*;
    let tys: Vec<(SqlType, bool)> = args.iter().map(|a| a.result_type(input)).collect();
    let any_null = tys.iter().any(|t| t.1);
    let bigint = SqlType::Int {
        bytes: 8,
        unsigned: false,
        display_width: None,
    };
    let text = |n: u32| SqlType::VarChar(n);
    match f {
        Coalesce => {
            let (t, _) = super::unify_types(&tys);
            (t, tys.iter().all(|t| t.1))
        }
        IfNull => {
            let (t, _) = super::unify_types(&tys);
            (t, tys.get(1).map(|t| t.1).unwrap_or(true))
        }
        NullIf => (tys[0].0.clone(), true),
        If => super::unify_types(&tys[1..]),
        Concat | ConcatWs | Replace | Lpad | Rpad | Repeat => {
            let n: u32 = tys
                .iter()
                .map(|t| match t.0 {
                    SqlType::Char(n)
                    | SqlType::VarChar(n)
                    | SqlType::Binary(n)
                    | SqlType::VarBinary(n) => n,
                    ref t if f == Concat => super::type_chars(t),
                    _ => 64,
                })
                .fold(0u32, |a, b| a.saturating_add(b));
            let binary = matches!(f, Concat | ConcatWs) && tys.iter().any(|t| t.0.is_binary());
            (
                if binary {
                    SqlType::VarBinary(n.max(1))
                } else {
                    text(n.max(1))
                },
                // CONCAT may be NULL past max_allowed_packet (MySQL's
                // metadata says so too).
                match f {
                    ConcatWs => tys[0].1,
                    Concat => true,
                    _ => any_null,
                },
            )
        }
        Lower | Upper | Trim | LTrim | RTrim | Reverse | Substring | Left | Right => {
            let t = match &tys[0].0 {
                t if t.is_text() || t.is_binary() => t.clone(),
                _ => text(255),
            };
            (t, any_null)
        }
        // Two hex digits per byte of a string.
        Hex => match &tys[0].0 {
            t if t.is_text() || t.is_binary() => {
                (text(super::type_chars(t).saturating_mul(2)), any_null)
            }
            _ => (text(255), any_null),
        },
        Unhex => (SqlType::VarBinary(255), true),
        DateFormat => (text(64), true),
        MonthName | DayName => (text(9), true),
        DayOfWeek | DateDiff => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            true,
        ),
        Length | CharLength | Locate | Instr => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: Some(10),
            },
            any_null,
        ),
        Sign => (bigint, any_null),
        Abs => match &tys[0].0 {
            t @ SqlType::Int { .. } => (super::int_of_width(super::type_chars(t)), any_null),
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
        Greatest | Least => {
            let (t, _) = super::unify_types(&tys);
            (t, any_null)
        }
        Mod => (tys[0].0.clone(), true),
        Pow | Sqrt | Rand => (SqlType::Double, f != Rand),
        Sin | Cos | Tan | Cot | Asin | Acos | Atan | Exp | Ln | Log | Log2 | Log10 | Degrees
        | Radians => (SqlType::Double, true),
        Pi => (SqlType::Double, false),
        RegexpLike => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            any_null,
        ),
        SingleRow => (tys.get(1).map(|t| t.0.clone()).unwrap_or(bigint), true),
        Now | UtcTimestamp => (SqlType::DateTime { fsp: 0 }, false),
        CurDate => (SqlType::Date, false),
        CurTime => (SqlType::Time { fsp: 0 }, false),
        UnixTimestamp => (bigint, !args.is_empty()),
        FromUnixTime => (SqlType::DateTime { fsp: 0 }, true),
        TimestampDiff => (bigint, true),
        ConvertTz => (
            match &tys[0].0 {
                SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => {
                    SqlType::DateTime { fsp: *fsp }
                }
                _ => SqlType::DateTime { fsp: 0 },
            },
            true,
        ),
        Date => (SqlType::Date, true),
        Year | Month | Day | Hour | Minute | Second => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: Some(if f == Year { 4 } else { 2 }),
            },
            true,
        ),
        Quarter | Weekday | DayOfYear | Microsecond | Week | YearWeek | TimeToSec => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            true,
        ),
        MakeDate | FromDays | LastDay => (SqlType::Date, true),
        ToDays => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            true,
        ),
        ToSeconds => (
            SqlType::Int {
                bytes: 8,
                unsigned: false,
                display_width: None,
            },
            true,
        ),
        Timestamp => (
            SqlType::DateTime {
                fsp: args
                    .iter()
                    .zip(tys)
                    .map(|(a, t)| fraction_digits(a, &t.0))
                    .max()
                    .unwrap_or(0),
            },
            true,
        ),
        StrToDate => (dates::str_to_date_type(literal(args.get(1))), true),
        Md5 | Sha1 => (SqlType::VarChar(40), any_null),
        JsonExtract | JsonUnquote => (SqlType::Text(u32::MAX), true),
        JsonContains | JsonContainsPath | JsonValid => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            true,
        ),
        JsonType => (SqlType::VarChar(16), true),
        Sha2 => (SqlType::VarChar(128), true),
        Ord => (
            SqlType::Int {
                bytes: 8,
                unsigned: false,
                display_width: None,
            },
            any_null,
        ),
        TimeOf => (
            SqlType::Time {
                fsp: fraction_digits(&args[0], &tys[0].0),
            },
            true,
        ),
        DateAdd => match tys[0].0 {
            SqlType::Date => (SqlType::Date, true),
            _ => (SqlType::DateTime { fsp: 0 }, true),
        },
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

/// REGEXP_LIKE(s, pattern[, match_type]); see [`Func::RegexpLike`]. Without
/// a match type the match is case-insensitive, as REGEXP is on
/// utf8mb4_general_ci text (the planner passes "c" for binary operands).
fn regexp_like(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let subject = to_text(&vals[0]);
    let pattern = to_text(&vals[1]);
    let mode = vals.get(2).map(to_text).unwrap_or_default();
    // A view evaluates one pattern for row after row: the last one built
    // (per thread) is kept.
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, String, regex::Regex)>> =
            const { std::cell::RefCell::new(None) };
    }
    let cached = LAST.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|(p, m, _)| *p == pattern && *m == mode)
            .map(|(_, _, re)| re.is_match(&subject))
    });
    if let Some(hit) = cached {
        return Ok(Value::Int(hit as i64));
    }
    let mut b = regex::RegexBuilder::new(&pattern);
    b.case_insensitive(true);
    for c in mode.chars() {
        match c {
            'c' => b.case_insensitive(false),
            'i' => b.case_insensitive(true),
            'm' => b.multi_line(true),
            'n' => b.dot_matches_new_line(true),
            'u' => &mut b,
            _ => {
                return Err(EvalError::Invalid(
                    "Incorrect arguments to regexp_like".into(),
                ))
            }
        };
    }
    let re = b
        .build()
        .map_err(|e| EvalError::Invalid(format!("Regex error '{e}'")))?;
    let hit = re.is_match(&subject);
    LAST.with(|l| *l.borrow_mut() = Some((pattern, mode, re)));
    Ok(Value::Int(hit as i64))
}

/// MySQL's week flags (sql/sql_time.h): Monday starts the week; weeks of
/// the previous/next year count as that year's; week 1 is the first with
/// the first weekday (else the first with 4 or more days).
const WEEK_MONDAY_FIRST: i64 = 1;
const WEEK_YEAR: i64 = 2;
const WEEK_FIRST_WEEKDAY: i64 = 4;

/// The flags of `WEEK(d, mode)`'s mode 0..7.
fn week_mode(mode: i64) -> i64 {
    let mut m = mode & 7;
    if m & WEEK_MONDAY_FIRST == 0 {
        m ^= WEEK_FIRST_WEEKDAY;
    }
    m
}

/// (week, year) of `d` as MySQL's calc_week computes them.
fn mysql_week(d: chrono::NaiveDate, behaviour: i64) -> (i64, i64) {
    let days_in_year = |y: i64| {
        if chrono::NaiveDate::from_ymd_opt(y as i32, 2, 29).is_some() {
            366
        } else {
            365
        }
    };
    let monday_first = behaviour & WEEK_MONDAY_FIRST != 0;
    let mut week_year = behaviour & WEEK_YEAR != 0;
    let first_weekday = behaviour & WEEK_FIRST_WEEKDAY != 0;
    let daynr = i64::from(d.num_days_from_ce());
    let jan1 = chrono::NaiveDate::from_ymd_opt(d.year(), 1, 1).unwrap_or(d);
    let mut first_daynr = i64::from(jan1.num_days_from_ce());
    let mut weekday = i64::from(if monday_first {
        jan1.weekday().num_days_from_monday()
    } else {
        jan1.weekday().num_days_from_sunday()
    });
    let mut year = i64::from(d.year());
    if d.month() == 1 && i64::from(d.day()) <= 7 - weekday {
        if !week_year && ((first_weekday && weekday != 0) || (!first_weekday && weekday >= 4)) {
            return (0, year);
        }
        week_year = true;
        year -= 1;
        let days = days_in_year(year);
        first_daynr -= days;
        weekday = (weekday + 53 * 7 - days).rem_euclid(7);
    }
    let days = if (first_weekday && weekday != 0) || (!first_weekday && weekday >= 4) {
        daynr - (first_daynr + (7 - weekday))
    } else {
        daynr - (first_daynr - weekday)
    };
    if week_year && days >= 52 * 7 {
        let wd = (weekday + days_in_year(year)) % 7;
        if (!first_weekday && wd < 4) || (first_weekday && wd == 0) {
            return (1, year + 1);
        }
    }
    (days / 7 + 1, year)
}

/// The time of day of a TIME, DATETIME or DATE value, or of a string
/// spelling a datetime or a time, in signed microseconds.
fn time_of_day(v: &Value) -> Option<i64> {
    let of = |dt: chrono::NaiveDateTime| {
        let t = dt.time();
        i64::from(t.num_seconds_from_midnight()) * 1_000_000 + i64::from(t.nanosecond() / 1000)
    };
    match v {
        Value::Time(us) => Some(*us),
        Value::Text(s) => ladle_common::parse_datetime(s)
            .map(of)
            .or_else(|| ladle_common::parse_time(s)),
        _ => ops::to_datetime(v).map(of),
    }
}

/// `v` as a calendar date and time for a date function: not the zero date
/// (`0000-00-00`), for which MySQL's date functions give NULL.
fn calendar(v: &Value) -> Option<chrono::NaiveDateTime> {
    ops::to_datetime(v).filter(|dt| ladle_common::is_calendar_date(&dt.date()))
}

/// The literal `e` is, if it is one.
fn literal(e: Option<&Expr>) -> Option<&Value> {
    match e {
        Some(Expr::Literal(v)) => Some(v),
        _ => None,
    }
}

/// Fractional-second digits a temporal argument brings to a result, as
/// MariaDB counts them: the type's, a string literal's own digits, 6 for
/// a string column or expression, none for a date or a number.
fn fraction_digits(arg: &Expr, ty: &SqlType) -> u8 {
    match (ty, literal(Some(arg))) {
        (SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } | SqlType::Time { fsp }, _) => *fsp,
        (_, Some(Value::Text(s))) => s
            .split_once('.')
            .map_or(0, |(_, f)| f.trim_end().len().min(6) as u8),
        (t, None) if t.is_text() || t.is_binary() => 6,
        _ => 0,
    }
}

/// The date functions of `dates` that read a date argument, given the
/// evaluator's reading of it.
fn date_function(f: Func, args: &[Expr], vals: &[Value], warn: dates::Warn<'_>) -> Value {
    let a = dates::DateArg {
        value: &vals[0],
        datetime: ops::to_datetime(&vals[0]),
    };
    match (f, vals.get(1)) {
        (Func::ToDays, _) => dates::to_days(&a, warn),
        (Func::ToSeconds, _) => dates::to_seconds(&a, warn),
        (Func::LastDay, _) => dates::last_day(&a, warn),
        (Func::Timestamp, None) => dates::timestamp(&a, warn),
        (Func::Timestamp, Some(t)) => dates::timestamp_plus(&a, t, warn),
        (_, Some(format)) => {
            dates::str_to_date(&vals[0], format, literal(args.get(1)).is_some(), warn)
        }
        (_, None) => Value::Null,
    }
}

/// Records a warning of `dates` with its MySQL code.
fn record_date_warning(w: dates::DateWarning) {
    let (code, message) = match w {
        dates::DateWarning::Truncated(m) => (super::WARN_TRUNCATED_WRONG_VALUE, m),
        dates::DateWarning::WrongValueForFunction(m) => (super::WARN_WRONG_VALUE_FOR_FUNCTION, m),
    };
    super::warn(code, message);
}
