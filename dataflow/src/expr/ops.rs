//! Value-level operations with MySQL semantics: conversions, arithmetic,
//! comparison, LIKE and CAST.

use std::cmp::Ordering;
use std::str::FromStr;

use chrono::{NaiveDate, NaiveDateTime};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};

use super::byte_charset;
use super::char_cast::cast_to_char;
use super::error::{out_of_range_in, EvalError, EvalResult};
use super::tree::{ArithOp, CastType, CmpOp};
use super::warnings::{note, warn, WARN_DIVISION_BY_ZERO, WARN_TRUNCATED_WRONG_VALUE};
use ladle_common::{Collation, Value};

/// A truth value as SQL gives it: 1, 0 or NULL.
pub(crate) fn bool_value(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(true) => Value::Int(1),
        Some(false) => Value::Int(0),
    }
}

/// SQL truth: `None` for NULL.
pub(crate) fn truth(v: &Value) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(*i != 0),
        Value::UInt(u) => Some(*u != 0),
        Value::Double(d) => Some(*d != 0.0),
        Value::Decimal(d) => Some(!d.is_zero()),
        Value::Text(s) => Some(text_to_f64(s) != 0.0),
        Value::Bytes(b) => Some(text_to_f64(&String::from_utf8_lossy(b)) != 0.0),
        Value::Date(_) | Value::DateTime(_) => Some(true),
        Value::Time(t) => Some(*t != 0),
    }
}

/// The longest numeric prefix of `s` as a double (MySQL's string-to-number
/// conversion: `'12abc'` is 12, `'abc'` is 0).
pub(crate) fn text_to_f64(s: &str) -> f64 {
    let t = s.trim_start();
    t[..numeric_prefix_len(t)].parse::<f64>().unwrap_or(0.0)
}

/// Length of the number `t` starts with (sign, digits, point, exponent);
/// 0 when it starts with none.
fn numeric_prefix_len(t: &str) -> usize {
    let b = t.as_bytes();
    let mut end = 0;
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let mut digits = false;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        digits = true;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            digits = true;
        }
    }
    if digits {
        end = i;
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            let mut j = i + 1;
            if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                j += 1;
            }
            let start = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > start {
                end = j;
            }
        }
    }
    end
}

/// Records MySQL's 1292 when the string `v`, read as a number of type
/// `as_type` (`DECIMAL` when compared with an integer, `DOUBLE` in
/// arithmetic or against any other number), is not wholly a number: a warning, or
/// a note when only spaces follow it, as MariaDB reports them. Leading
/// spaces are ignored silently.
fn warn_if_partly_numeric(v: &Value, as_type: &str) {
    warn_unless_whole(v, as_type, numeric_prefix_len);
}

/// [`warn_if_partly_numeric`] for a string read as an integer (CAST AS
/// SIGNED/UNSIGNED): only a sign and digits count (`'1.7'`, `'1e3'` warn).
pub(crate) fn warn_if_partly_integer(v: &Value) {
    warn_unless_whole(v, "INTEGER", integer_prefix_len);
}

/// Length of the integer `t` starts with (sign, digits); 0 for none.
fn integer_prefix_len(t: &str) -> usize {
    let sign = usize::from(t.starts_with(['+', '-']));
    let digits = t[sign..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        0
    } else {
        sign + digits
    }
}

/// Warns (1292) unless the string `v` is wholly the number `prefix_len`
/// reads (a note when only spaces follow it).
fn warn_unless_whole(v: &Value, as_type: &str, prefix_len: fn(&str) -> usize) {
    let text = match v {
        Value::Text(_) | Value::Bytes(_) => to_text(v),
        _ => return,
    };
    let t = text.trim_start();
    let end = prefix_len(t);
    let rest = &t[end..];
    if end > 0 && rest.is_empty() {
        return;
    }
    let message = format!("Truncated incorrect {as_type} value: '{text}'");
    if end > 0 && rest.trim_end().is_empty() {
        note(WARN_TRUNCATED_WRONG_VALUE, message);
    } else {
        warn(WARN_TRUNCATED_WRONG_VALUE, message);
    }
}

/// A string read as a date or datetime (compared with one, or CAST), as
/// MariaDB reads it: a valid prefix is used and what follows ignored with
/// warning 1292 (`'2020-01-01 10:00:00+00:00'`); no valid prefix is `None`.
fn text_to_datetime(s: &str) -> Option<NaiveDateTime> {
    if let Some(dt) = ladle_common::parse_datetime(s) {
        return Some(dt);
    }
    let (dt, len) = ladle_common::parse_datetime_prefix_len(s)?;
    // MariaDB names what it read: a date alone, or a date and a time.
    let kind = if len > 10 { "datetime" } else { "date" };
    warn(
        WARN_TRUNCATED_WRONG_VALUE,
        format!("Truncated incorrect {kind} value: '{s}'"),
    );
    Some(dt)
}

/// A string as the number MySQL compares it as with a number: exact when
/// the whole string is a decimal number (`'01'`, `' 10'`), else its
/// numeric prefix as a double (`'1abc'` is 1, `'abc'` 0).
pub(crate) fn string_as_number(v: &Value) -> Value {
    let s = to_text(v);
    match text_to_decimal(&s) {
        Some(d) => Value::Decimal(d),
        None => Value::Double(text_to_f64(&s)),
    }
}

fn text_to_decimal(s: &str) -> Option<Decimal> {
    let t = s.trim();
    Decimal::from_str(t).ok()
}

pub(crate) fn value_to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Null => None,
        Value::Text(s) => Some(text_to_f64(s)),
        Value::Bytes(b) => Some(text_to_f64(&String::from_utf8_lossy(b))),
        Value::Date(d) => Some(date_number(d) as f64),
        Value::DateTime(dt) => Some(datetime_number(dt) as f64),
        Value::Time(t) => Some(time_number(*t) as f64),
        other => other.as_f64(),
    }
}

fn date_number(d: &NaiveDate) -> i64 {
    let (y, m, day) = ladle_common::date_parts(d);
    i64::from(y) * 10000 + i64::from(m) * 100 + i64::from(day)
}

fn datetime_number(dt: &NaiveDateTime) -> i64 {
    use chrono::Timelike;
    date_number(&dt.date()) * 1_000_000
        + i64::from(dt.hour()) * 10000
        + i64::from(dt.minute()) * 100
        + i64::from(dt.second())
}

fn time_number(us: i64) -> i64 {
    let s = us / 1_000_000;
    let sign = if s < 0 { -1 } else { 1 };
    let s = s.abs();
    sign * ((s / 3600) * 10000 + ((s / 60) % 60) * 100 + s % 60)
}

/// The value's bytes: a binary string as it is, text as UTF-8, anything
/// else as its text rendering (what bytewise comparison, LIKE and the
/// binary string functions work on).
pub(crate) fn to_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::Bytes(b) => b.to_vec(),
        Value::Text(s) => s.as_bytes().to_vec(),
        other => other.to_string().into_bytes(),
    }
}

/// The value as text (for string functions).
pub(crate) fn to_text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    }
}

/// A numeric view of a value for arithmetic.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    Int(i128),
    Dec(Decimal),
    Float(f64),
}

pub(crate) fn to_num(v: &Value) -> Option<Num> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => Num::Int(i128::from(*i)),
        Value::UInt(u) => Num::Int(i128::from(*u)),
        Value::Decimal(d) => Num::Dec(*d),
        Value::Double(f) => Num::Float(*f),
        Value::Text(_) | Value::Bytes(_) => Num::Float(value_to_f64(v).unwrap_or(0.0)),
        Value::Date(_) | Value::DateTime(_) | Value::Time(_) => {
            Num::Int(i128::from(value_to_f64(v).unwrap_or(0.0) as i64))
        }
    })
}

fn num_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Dec(d) => d.to_f64().unwrap_or(0.0),
        Num::Float(f) => f,
    }
}

fn num_dec(n: Num) -> Option<Decimal> {
    match n {
        Num::Int(i) => Decimal::from_i128_with_scale(i, 0).into(),
        Num::Dec(d) => Some(d),
        Num::Float(f) => Decimal::try_from(f).ok(),
    }
}

/// DOUBLE `v` (= `f`) cast to SIGNED or UNSIGNED as MariaDB casts it:
/// rounded half to even (`rint`: 2.5 is 2, 3.5 is 4), and past the type's
/// range its nearest end with note 1916 (a negative one is 0 UNSIGNED).
fn double_to_integer(v: &Value, f: f64, unsigned: bool) -> Value {
    let r = f.round_ties_even();
    // 2^63 and 2^64: the first doubles past each type's range.
    let (lo, hi) = if unsigned {
        (0.0, 18_446_744_073_709_551_616.0)
    } else {
        (-9_223_372_036_854_775_808.0, 9_223_372_036_854_775_808.0)
    };
    if r >= lo && r < hi {
        return if unsigned {
            Value::UInt(r as u64)
        } else {
            Value::Int(r as i64)
        };
    }
    let ty = if unsigned { "UNSIGNED" } else { "SIGNED" };
    note(
        1916,
        format!(
            "Got overflow when converting '{}' to {ty} BIGINT. Value truncated",
            to_text(v)
        ),
    );
    match (unsigned, r < lo) {
        (true, true) => Value::UInt(0),
        (true, false) => Value::UInt(u64::MAX),
        (false, true) => Value::Int(i64::MIN),
        (false, false) => Value::Int(i64::MAX),
    }
}

pub(crate) fn int_value(i: i128) -> EvalResult {
    if let Ok(v) = i64::try_from(i) {
        Ok(Value::Int(v))
    } else if let Ok(u) = u64::try_from(i) {
        Ok(Value::UInt(u))
    } else {
        Err(EvalError::OutOfRange("BIGINT value is out of range".into()))
    }
}

fn float_value(f: f64) -> EvalResult {
    if f.is_finite() {
        Ok(Value::Double(f))
    } else {
        Err(EvalError::OutOfRange("DOUBLE value is out of range".into()))
    }
}

fn dec_overflow() -> EvalError {
    EvalError::OutOfRange("DECIMAL value is out of range".into())
}

/// `-v`; `constant` says whether the negated expression reads no row,
/// asked only when the result leaves BIGINT's range.
pub(crate) fn negate(v: &Value, constant: impl FnOnce() -> bool) -> EvalResult {
    match to_num(v) {
        None => Ok(Value::Null),
        // Past BIGINT's range the negation of a constant is a DECIMAL, as
        // in MariaDB: `-(-9223372036854775808)` is 9223372036854775808;
        // of a column's value (BIGINT's least, a large BIGINT UNSIGNED) it
        // is 1690.
        Some(Num::Int(i)) => match i64::try_from(-i) {
            Ok(n) => Ok(Value::Int(n)),
            Err(_) if constant() => Ok(Value::Decimal(Decimal::from_i128_with_scale(-i, 0))),
            Err(_) => Err(EvalError::OutOfRange("BIGINT value is out of range".into())),
        },
        Some(Num::Dec(d)) => Ok(Value::Decimal(-d)),
        Some(Num::Float(f)) => float_value(-f),
    }
}

pub(crate) fn to_u64_bits(v: &Value) -> u64 {
    match to_num(v) {
        Some(Num::Int(i)) => i as u64,
        Some(Num::Dec(d)) => d.round().to_i128().unwrap_or(0) as u64,
        Some(Num::Float(f)) => f.round() as i128 as u64,
        None => 0,
    }
}

pub(crate) fn arith(op: ArithOp, l: &Value, r: &Value) -> EvalResult {
    // An overflow marker (see `out_of_range_marker`) stays one.
    for v in [l, r] {
        if out_of_range_in(v).is_some() {
            return Ok(v.clone());
        }
    }
    if !l.is_null() && !r.is_null() {
        warn_if_partly_numeric(l, "DOUBLE");
        warn_if_partly_numeric(r, "DOUBLE");
    }
    let (a, b) = match (to_num(l), to_num(r)) {
        (Some(a), Some(b)) => (a, b),
        _ => return Ok(Value::Null),
    };
    let zero = match b {
        Num::Int(y) => y == 0,
        Num::Dec(y) => y.is_zero(),
        Num::Float(y) => y == 0.0,
    };
    if zero && matches!(op, ArithOp::Div | ArithOp::IntDiv | ArithOp::Mod) {
        // NULL, with MariaDB's warning (the session's sql_mode decides
        // whether a statement reports it: ERROR_FOR_DIVISION_BY_ZERO).
        warn(WARN_DIVISION_BY_ZERO, "Division by 0".into());
    }
    if let ArithOp::BitAnd | ArithOp::BitOr | ArithOp::BitXor | ArithOp::Shl | ArithOp::Shr = op {
        let x = to_u64_bits(l);
        let y = to_u64_bits(r);
        let v = match op {
            ArithOp::BitAnd => x & y,
            ArithOp::BitOr => x | y,
            ArithOp::BitXor => x ^ y,
            ArithOp::Shl => x.checked_shl(y as u32).unwrap_or(0),
            _ => x.checked_shr(y as u32).unwrap_or(0),
        };
        return Ok(Value::UInt(v));
    }
    // An unsigned operand makes the result unsigned, as in MySQL.
    let unsigned = matches!(l, Value::UInt(_)) || matches!(r, Value::UInt(_));
    let result = match (a, b) {
        (Num::Float(_), _) | (_, Num::Float(_)) => float_arith(op, num_f64(a), num_f64(b)),
        (Num::Int(x), Num::Int(y)) => int_arith(op, x, y, unsigned),
        _ => match (num_dec(a), num_dec(b)) {
            (Some(x), Some(y)) => decimal_arith(op, x, y),
            _ => Ok(Value::Null),
        },
    };
    match (op, result) {
        (ArithOp::IntDiv, Ok(q)) if !unsigned => signed_quotient(q),
        (_, result) => result,
    }
}

/// A DIV of signed operands is a BIGINT: a quotient past its range (only
/// `-9223372036854775808 DIV -1` among integers; any DOUBLE or DECIMAL
/// past it) is 1690, as in MySQL, not the unsigned number.
fn signed_quotient(q: Value) -> EvalResult {
    match q {
        Value::UInt(u) if i64::try_from(u).is_err() => {
            Err(EvalError::OutOfRange("BIGINT value is out of range".into()))
        }
        q => Ok(q),
    }
}

/// Arithmetic with a DOUBLE operand: NULL for a zero divisor.
fn float_arith(op: ArithOp, x: f64, y: f64) -> EvalResult {
    match op {
        ArithOp::Add => float_value(x + y),
        ArithOp::Sub => float_value(x - y),
        ArithOp::Mul => float_value(x * y),
        ArithOp::Div => {
            if y == 0.0 {
                Ok(Value::Null)
            } else {
                float_value(x / y)
            }
        }
        ArithOp::IntDiv => {
            if y == 0.0 {
                Ok(Value::Null)
            } else {
                int_value((x / y).trunc() as i128)
            }
        }
        ArithOp::Mod => {
            if y == 0.0 {
                Ok(Value::Null)
            } else {
                float_value(x % y)
            }
        }
        _ => Ok(Value::Null),
    }
}

/// Integer arithmetic (exact, in i128) checked against BIGINT's range, or
/// BIGINT UNSIGNED's when an operand is `unsigned`.
fn int_arith(op: ArithOp, x: i128, y: i128, unsigned: bool) -> EvalResult {
    match op {
        ArithOp::Add | ArithOp::Sub | ArithOp::Mul => {
            let res = match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                _ => x
                    .checked_mul(y)
                    .ok_or_else(|| EvalError::OutOfRange("BIGINT value is out of range".into()))?,
            };
            // Unsigned, below zero is an error, not a negative number.
            if unsigned {
                return u64::try_from(res).map(Value::UInt).map_err(|_| {
                    EvalError::OutOfRange("BIGINT UNSIGNED value is out of range".into())
                });
            }
            if i64::try_from(res).is_err() {
                return Err(EvalError::OutOfRange("BIGINT value is out of range".into()));
            }
            int_value(res)
        }
        ArithOp::Div => {
            if y == 0 {
                return Ok(Value::Null);
            }
            let (dx, dy) = (
                Decimal::from_i128_with_scale(x, 0),
                Decimal::from_i128_with_scale(y, 0),
            );
            Ok(Value::Decimal(div_exact(dx, dy)?))
        }
        ArithOp::IntDiv => {
            if y == 0 {
                Ok(Value::Null)
            } else if unsigned && x / y < 0 {
                Err(EvalError::OutOfRange(
                    "BIGINT UNSIGNED value is out of range".into(),
                ))
            } else {
                int_value(x / y)
            }
        }
        ArithOp::Mod => {
            if y == 0 {
                Ok(Value::Null)
            } else {
                int_value(x % y)
            }
        }
        _ => Ok(Value::Null),
    }
}

/// DECIMAL arithmetic: division gets the dividend's scale + 4.
/// A result keeps the scale MySQL gives the operation (`0 * -0.5` is
/// `0.0`, `4 % 0.5` is `0.0`, `1 - 0.0` is `1.0`): the decimal arithmetic
/// returns a zero product or remainder unscaled, and an operand unchanged
/// when the other is zero.
fn at_scale(r: Decimal, scale: u32) -> Decimal {
    let mut r = r;
    if r.scale() < scale {
        r.rescale(scale.min(MAX_DECIMAL_SCALE));
    }
    r
}

/// The largest scale the decimal type holds.
const MAX_DECIMAL_SCALE: u32 = 28;

fn decimal_arith(op: ArithOp, x: Decimal, y: Decimal) -> EvalResult {
    match op {
        ArithOp::Add => x
            .checked_add(y)
            .map(|r| Value::Decimal(at_scale(r, x.scale().max(y.scale()))))
            .ok_or_else(dec_overflow),
        ArithOp::Sub => x
            .checked_sub(y)
            .map(|r| Value::Decimal(at_scale(r, x.scale().max(y.scale()))))
            .ok_or_else(dec_overflow),
        ArithOp::Mul => x
            .checked_mul(y)
            .map(|r| Value::Decimal(at_scale(r, x.scale() + y.scale())))
            .ok_or_else(dec_overflow),
        ArithOp::Div => {
            if y.is_zero() {
                Ok(Value::Null)
            } else {
                Ok(Value::Decimal(div_exact(x, y)?))
            }
        }
        ArithOp::IntDiv => {
            if y.is_zero() {
                Ok(Value::Null)
            } else {
                let q = x.checked_div(y).ok_or_else(dec_overflow)?.trunc();
                int_value(q.to_i128().ok_or_else(dec_overflow)?)
            }
        }
        ArithOp::Mod => {
            if y.is_zero() {
                Ok(Value::Null)
            } else {
                x.checked_rem(y)
                    .map(|r| Value::Decimal(at_scale(r, x.scale().max(y.scale()))))
                    .ok_or_else(dec_overflow)
            }
        }
        _ => Ok(Value::Null),
    }
}

/// Division with MySQL's result scale (dividend scale + 4).
/// `d` rounded (half away from zero) or padded to `scale` digits.
fn at_shown_scale(d: Decimal, scale: u32) -> Decimal {
    let scale = scale.min(MAX_DECIMAL_SCALE);
    let mut r = d.round_dp_with_strategy(scale, RoundingStrategy::MidpointAwayFromZero);
    r.rescale(scale);
    r
}

/// The digits MariaDB's decimal division keeps (`do_div_mod`): each
/// operand's scale rounded up to whole 9-digit words, the increment (4)
/// less what that rounding added, the sum rounded up to words again
/// (`1.50 / 2.25` keeps 18, `1 / 3` 9); the quotient is truncated there
/// and shown with the dividend's scale + 4 only where it leaves
/// arithmetic ([`CastType::Shown`]).
fn quotient_scale(x: &Decimal, y: &Decimal) -> u32 {
    quotient_digits(x.scale(), y.scale())
}

/// [`quotient_scale`] of a dividend of scale `sx` by a divisor of scale
/// `sy` (AVG divides its sum by a count: `quotient_digits(s, 0)`).
pub(crate) fn quotient_digits(sx: u32, sy: u32) -> u32 {
    let words = |digits: u32| digits.div_ceil(9) * 9;
    let (fx, fy) = (words(sx), words(sy));
    let increment = 4u32.saturating_sub((fx - sx) + (fy - sy));
    words(fx + fy + increment).min(MAX_DECIMAL_SCALE)
}

/// `x / y` with MariaDB's internal digits (see [`quotient_scale`]).
fn div_exact(x: Decimal, y: Decimal) -> EvalResult<Decimal> {
    let q = x.checked_div(y).ok_or_else(dec_overflow)?;
    Ok(q.round_dp_with_strategy(quotient_scale(&x, &y), RoundingStrategy::ToZero))
}

pub(crate) fn to_datetime(v: &Value) -> Option<NaiveDateTime> {
    match v {
        Value::DateTime(dt) => Some(*dt),
        Value::Date(d) => d.and_hms_opt(0, 0, 0),
        Value::Text(s) => ladle_common::parse_datetime(s),
        Value::Int(_) | Value::UInt(_) => ladle_common::parse_datetime(&v.to_string()),
        _ => None,
    }
}

/// SQL comparison: `None` when either side is NULL.
pub(crate) fn compare(a: &Value, b: &Value, coll: Collation) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Null, _) | (_, Null) => None,
        (Text(x), Text(y)) => Some(coll.compare(x, y)),
        // A binary operand makes the comparison bytewise (case- and
        // accent-sensitive), whatever the other side's collation.
        (Bytes(x), Bytes(y)) => Some(x.cmp(y)),
        (Text(x), Bytes(y)) => Some(x.as_bytes().cmp(y)),
        (Bytes(x), Text(y)) => Some((**x).cmp(y.as_bytes())),
        // A string compared with a date or time is read as one; MariaDB
        // ignores what follows a valid value (`'... 03:04:05+00:00'`, with
        // a warning).
        (Date(_) | DateTime(_), Text(s)) => match text_to_datetime(s) {
            Some(dt) => {
                Some(Value::DateTime(to_datetime(a)?).cmp_collated(&Value::DateTime(dt), coll))
            }
            None => Some(to_text(a).cmp(&s.to_string())),
        },
        (Text(s), Date(_) | DateTime(_)) => match text_to_datetime(s) {
            Some(dt) => {
                Some(Value::DateTime(dt).cmp_collated(&Value::DateTime(to_datetime(b)?), coll))
            }
            None => Some(s.to_string().cmp(&to_text(b))),
        },
        (Time(x), Text(s)) => match ladle_common::parse_time(s) {
            Some(y) => Some(x.cmp(&y)),
            None => Some(to_text(a).cmp(&s.to_string())),
        },
        (Text(s), Time(y)) => match ladle_common::parse_time(s) {
            Some(x) => Some(x.cmp(y)),
            None => Some(s.to_string().cmp(&to_text(b))),
        },
        (Date(_) | DateTime(_), Date(_) | DateTime(_)) => Some(a.cmp_collated(b, coll)),
        (Time(x), Time(y)) => Some(x.cmp(y)),
        (Text(_) | Bytes(_), _) | (_, Text(_) | Bytes(_)) => {
            // The string is read as a number of the other side's kind.
            let (text, number) = if matches!(a, Text(_) | Bytes(_)) {
                (a, b)
            } else {
                (b, a)
            };
            // MariaDB compares a string with an integer as a DECIMAL,
            // with anything else as a DOUBLE.
            let as_type = if matches!(number, Int(_) | UInt(_)) {
                "DECIMAL"
            } else {
                "DOUBLE"
            };
            warn_if_partly_numeric(text, as_type);
            let x = value_to_f64(a)?;
            let y = value_to_f64(b)?;
            x.partial_cmp(&y)
        }
        (Date(_) | DateTime(_) | Time(_), _) | (_, Date(_) | DateTime(_) | Time(_)) => {
            let x = value_to_f64(a)?;
            let y = value_to_f64(b)?;
            x.partial_cmp(&y)
        }
        _ => Some(a.cmp_collated(b, coll)),
    }
}

pub(crate) fn cmp_op(op: CmpOp, a: &Value, b: &Value, coll: Collation) -> Value {
    if op == CmpOp::NullSafeEq {
        return bool_value(Some(match (a.is_null(), b.is_null()) {
            (true, true) => true,
            (false, false) => compare(a, b, coll) == Some(Ordering::Equal),
            _ => false,
        }));
    }
    let Some(o) = compare(a, b, coll) else {
        return Value::Null;
    };
    bool_value(Some(match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
        CmpOp::NullSafeEq => false,
    }))
}

/// `v LIKE pattern`: bytewise when either side is a binary string (`_`
/// then matches one byte), by characters under `coll` otherwise.
pub(crate) fn like_values(v: &Value, pattern: &Value, escape: char, coll: Collation) -> bool {
    if matches!(v, Value::Bytes(_)) || matches!(pattern, Value::Bytes(_)) {
        let escape = u8::try_from(u32::from(escape)).unwrap_or(b'\\');
        return like_tokens(&to_bytes(v), &to_bytes(pattern), escape, b'%', b'_', |b| b);
    }
    like(&to_text(v), &to_text(pattern), escape, coll)
}

/// `s LIKE pattern` with `%`, `_` and an escape character.
pub(crate) fn like(s: &str, pattern: &str, escape: char, coll: Collation) -> bool {
    // PAD SPACE does not apply to LIKE: the text is matched as is.
    let text: Vec<char> = s.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    like_tokens(&text, &pattern, escape, '%', '_', |c| coll.fold_char(c))
}

/// Wildcard matching over units (characters or bytes), each folded by
/// `fold` before it is compared.
fn like_tokens<T: Copy + PartialEq>(
    s: &[T],
    pattern: &[T],
    escape: T,
    any: T,
    one: T,
    fold: impl Fn(T) -> T,
) -> bool {
    enum Tok<T> {
        Any,
        One,
        Ch(T),
    }
    let mut toks = Vec::new();
    let mut it = pattern.iter().copied();
    while let Some(c) = it.next() {
        if c == escape {
            match it.next() {
                Some(n) => toks.push(Tok::Ch(fold(n))),
                None => toks.push(Tok::Ch(fold(c))),
            }
        } else if c == any {
            toks.push(Tok::Any);
        } else if c == one {
            toks.push(Tok::One);
        } else {
            toks.push(Tok::Ch(fold(c)));
        }
    }
    let text: Vec<T> = s.iter().map(|&c| fold(c)).collect();
    // Iterative wildcard matching with backtracking to the last `%`.
    let (mut ti, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < text.len() {
        if pi < toks.len() {
            match &toks[pi] {
                Tok::Any => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                Tok::One => {
                    ti += 1;
                    pi += 1;
                    continue;
                }
                Tok::Ch(c) if *c == text[ti] => {
                    ti += 1;
                    pi += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pi < toks.len() && matches!(toks[pi], Tok::Any) {
        pi += 1;
    }
    pi == toks.len()
}

pub(crate) fn cast(v: &Value, ty: &CastType) -> EvalResult {
    if v.is_null() {
        return Ok(Value::Null);
    }
    // A string cast to a number warns about what it ignored, as in MySQL
    // (UNSIGNED goes through SIGNED, so it warns once).
    match ty {
        CastType::Signed => warn_if_partly_integer(v),
        CastType::Decimal { .. } => warn_if_partly_numeric(v, "DECIMAL"),
        CastType::Double => warn_if_partly_numeric(v, "DOUBLE"),
        _ => {}
    }
    Ok(match ty {
        CastType::Signed => match to_num(v) {
            Some(Num::Int(i)) => Value::Int(i as i64),
            Some(Num::Dec(d)) => int_value(
                d.round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero)
                    .to_i128()
                    .unwrap_or(0),
            )?,
            Some(Num::Float(f)) => match v {
                Value::Text(_) | Value::Bytes(_) => Value::Int(text_int_prefix(&to_text(v))),
                _ => double_to_integer(v, f, false),
            },
            None => Value::Null,
        },
        // Always `UInt`, so that arithmetic on the result is unsigned.
        CastType::Unsigned => match (to_num(v), v) {
            (_, Value::Text(_) | Value::Bytes(_)) | (Some(Num::Int(_) | Num::Dec(_)) | None, _) => {
                match cast(v, &CastType::Signed)? {
                    Value::Int(i) => Value::UInt(i as u64),
                    other => other,
                }
            }
            (Some(Num::Float(f)), _) => double_to_integer(v, f, true),
        },
        CastType::Char => cast_to_char(v, None),
        CastType::CharN(n) => cast_to_char(v, Some(*n as usize)),
        CastType::TemporalChar { fsp } => match v.temporal_text(*fsp) {
            Some(text) => Value::text(text),
            None => Value::text(to_text(v)),
        },
        CastType::Binary => Value::bytes(to_bytes(v)),
        CastType::Recode(charset) => byte_charset::recode(v, *charset),
        CastType::Encode(charset) => byte_charset::encode(v, *charset),
        CastType::BitBytes { width } => {
            let n = match v {
                // A BIT(64) value past BIGINT's range is held as UInt.
                Value::Int(i) => *i as u64,
                Value::UInt(u) => *u,
                other => return Ok(other.clone()),
            };
            let len = usize::from(width.div_ceil(8)).clamp(1, 8);
            Value::bytes(&n.to_be_bytes()[8 - len..])
        }
        CastType::Decimal { scale, .. } => {
            let d = match to_num(v) {
                Some(Num::Float(f)) => match v {
                    Value::Text(s) => text_to_decimal(s).or_else(|| Decimal::try_from(f).ok()),
                    // From the double's shortest round-trip digits, as
                    // MySQL does (`try_from` keeps about 15 of them).
                    _ => text_to_decimal(&f.to_string()).or_else(|| Decimal::try_from(f).ok()),
                },
                Some(n) => num_dec(n),
                None => None,
            }
            .unwrap_or(Decimal::ZERO);
            let mut d =
                d.round_dp_with_strategy(u32::from(*scale), RoundingStrategy::MidpointAwayFromZero);
            d.rescale(u32::from(*scale));
            Value::Decimal(d)
        }
        CastType::Double => Value::Double(value_to_f64(v).unwrap_or(0.0)),
        CastType::Shown { scale } => match v {
            Value::Decimal(d) => Value::Decimal(at_shown_scale(*d, u32::from(*scale))),
            other => other.clone(),
        },
        CastType::Date | CastType::DateTime => {
            let dt = match v {
                Value::Text(s) => text_to_datetime(s).or_else(|| {
                    let kind = if *ty == CastType::Date {
                        "date"
                    } else {
                        "datetime"
                    };
                    warn(
                        WARN_TRUNCATED_WRONG_VALUE,
                        format!("Incorrect {kind} value: '{s}'"),
                    );
                    None
                }),
                other => to_datetime(other),
            };
            match (dt, ty) {
                (None, _) => Value::Null,
                (Some(dt), CastType::Date) => Value::Date(dt.date()),
                (Some(dt), _) => Value::DateTime(dt),
            }
        }
        CastType::Time => match v {
            Value::Time(_) => v.clone(),
            Value::DateTime(dt) => {
                use chrono::Timelike;
                Value::Time(i64::from(dt.num_seconds_from_midnight()) * 1_000_000)
            }
            other => {
                let col =
                    ladle_common::ColumnSchema::new("", ladle_common::SqlType::Time { fsp: 0 });
                ladle_common::coerce(&Value::text(to_text(other)), &col).unwrap_or(Value::Null)
            }
        },
    })
}

fn text_int_prefix(s: &str) -> i64 {
    let t = s.trim_start();
    let mut end = 0;
    for (i, c) in t.char_indices() {
        if c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+')) {
            end = i + c.len_utf8();
        } else {
            break;
        }
    }
    let digits = &t[..end];
    match digits.parse::<i64>() {
        Ok(i) => i,
        Err(_) => {
            if digits.len() > 1 {
                if digits.starts_with('-') {
                    i64::MIN
                } else {
                    i64::MAX
                }
            } else {
                0
            }
        }
    }
}
