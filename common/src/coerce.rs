//! Coercion of a value into a column's type, as INSERT and UPDATE need it.

use std::str::FromStr;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use rust_decimal::Decimal;

use crate::bit::BitMisfit;
use crate::utf8::{escaped_bytes, utf8_replacing_invalid};
use crate::{ColumnSchema, SqlType, Value};

/// Why a value does not fit a column. The front end maps these to MySQL
/// errors (1366 incorrect value, 1264 out of range, 1406 data too long).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoerceError {
    #[error("Incorrect {ty} value: '{value}' for column '{column}'")]
    Incorrect {
        ty: String,
        value: String,
        column: String,
    },
    /// Bytes that are not UTF-8 for a text column; `value` shows the
    /// first bad bytes as MariaDB does (`\xFF`).
    #[error("Incorrect string value: '{value}' for column '{column}'")]
    IncorrectString { value: String, column: String },
    #[error("Out of range value for column '{column}'")]
    OutOfRange { column: String },
    #[error("Data too long for column '{column}'")]
    TooLong { column: String },
}

/// Converts `v` into the representation `column` stores, or says why it
/// cannot. NULL passes through (NOT NULL is checked by the write path).
///
/// Strict mode semantics (MariaDB's default `STRICT_TRANS_TABLES`): a value
/// that does not fit is an error, never silently truncated.
pub fn coerce(v: &Value, column: &ColumnSchema) -> Result<Value, CoerceError> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let misfit = Misfit { v, column };
    match &column.ty {
        SqlType::Int {
            bytes, unsigned, ..
        } => coerce_int(v, *bytes, *unsigned, &misfit),
        SqlType::Year => coerce_year(v, &misfit),
        SqlType::Float | SqlType::Double => {
            let d = match v {
                Value::Text(s) => s.trim().parse::<f64>().map_err(|_| misfit.incorrect())?,
                _ => v.as_f64().ok_or_else(|| misfit.incorrect())?,
            };
            // A FLOAT holds a single-precision float, as in MariaDB: 0.1 is
            // stored as 0.10000000149011612 (so `f = 0.1` is false there
            // too) and past 3.4e38 is out of range (Ladle had kept the
            // double: 1e39 stored, 123456789 read back as given).
            let d = if column.ty == SqlType::Float {
                if d.abs() > f64::from(f32::MAX) {
                    return Err(misfit.out_of_range());
                }
                f64::from(d as f32)
            } else {
                d
            };
            // Stored without the sign of a zero, as MariaDB does (it never
            // returns -0).
            Ok(Value::Double(if d == 0.0 { 0.0 } else { d }))
        }
        SqlType::Decimal { precision, scale } => coerce_decimal(v, *precision, *scale, &misfit),
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::Text(n) => {
            coerce_text(v, *n as usize, &misfit)
        }
        SqlType::Json => Ok(Value::text(to_text(v))),
        SqlType::Enum(labels) => coerce_enum(v, labels, column),
        SqlType::Binary(n) | SqlType::VarBinary(n) | SqlType::Blob(n) => {
            let mut b: Vec<u8> = match v {
                Value::Bytes(b) => b.to_vec(),
                other => to_text(other).into_bytes(),
            };
            if b.len() > *n as usize {
                return Err(misfit.too_long());
            }
            // BINARY(n) is fixed-length: MySQL pads it with 0x00 bytes.
            if matches!(column.ty, SqlType::Binary(_)) {
                b.resize(*n as usize, 0);
            }
            Ok(Value::bytes(b))
        }
        SqlType::Date => match v {
            Value::Date(_) => Ok(v.clone()),
            Value::DateTime(dt) => Ok(Value::Date(dt.date())),
            Value::Text(s) => parse_datetime(s)
                .map(|dt| Value::Date(dt.date()))
                .ok_or_else(|| misfit.incorrect()),
            Value::Int(_) | Value::UInt(_) => number_as_datetime(v)
                .map(|dt| Value::Date(dt.date()))
                .ok_or_else(|| misfit.incorrect()),
            _ => Err(misfit.incorrect()),
        },
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => coerce_datetime(v, *fsp, &misfit),
        SqlType::Time { fsp } => coerce_time(v, *fsp, &misfit),
        SqlType::Bit(width) => crate::bit::bit_value(v, *width).map_err(|why| match why {
            BitMisfit::TooLong => misfit.too_long(),
            BitMisfit::Negative => misfit.out_of_range(),
        }),
    }
}

/// A value and the column it does not fit: the error to report.
struct Misfit<'a> {
    v: &'a Value,
    column: &'a ColumnSchema,
}

impl Misfit<'_> {
    fn incorrect(&self) -> CoerceError {
        CoerceError::Incorrect {
            ty: match self.column.ty {
                // As MariaDB names them in this message, whatever the precision.
                SqlType::DateTime { .. } | SqlType::Timestamp { .. } => "datetime".into(),
                SqlType::Time { .. } => "time".into(),
                _ => self.column.ty.sql_name(),
            },
            value: self.v.to_string(),
            column: self.column.name.clone(),
        }
    }

    fn out_of_range(&self) -> CoerceError {
        CoerceError::OutOfRange {
            column: self.column.name.clone(),
        }
    }

    fn too_long(&self) -> CoerceError {
        CoerceError::TooLong {
            column: self.column.name.clone(),
        }
    }
}

/// Into an integer column of `bytes` bytes.
fn coerce_int(v: &Value, bytes: u8, unsigned: bool, misfit: &Misfit) -> Result<Value, CoerceError> {
    let d = to_decimal(v).ok_or_else(|| misfit.incorrect())?;
    // MySQL rounds a fractional value assigned to an integer column.
    let d = d.round();
    let bits = u32::from(bytes) * 8;
    if unsigned {
        let max: u128 = (1u128 << bits) - 1;
        let u = u128::try_from(d).map_err(|_| misfit.out_of_range())?;
        if u > max {
            return Err(misfit.out_of_range());
        }
        Ok(match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(u as u64),
        })
    } else {
        let min: i128 = -(1i128 << (bits - 1));
        let max: i128 = (1i128 << (bits - 1)) - 1;
        let i = i128::try_from(d).map_err(|_| misfit.out_of_range())?;
        if i < min || i > max {
            return Err(misfit.out_of_range());
        }
        Ok(Value::Int(i as i64))
    }
}

/// The end of an integer column's range (`bytes` bytes) nearest to `v`,
/// a number beyond it.
fn int_range_end(v: &Value, bytes: u8, unsigned: bool) -> Value {
    let negative = to_decimal(v).is_some_and(|d| d.is_sign_negative());
    let bits = u32::from(bytes) * 8;
    match (unsigned, negative) {
        (true, true) => Value::Int(0),
        (true, false) => match i64::try_from((1u128 << bits) - 1) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(u64::MAX),
        },
        (false, true) => Value::Int((-(1i128 << (bits - 1))) as i64),
        (false, false) => Value::Int(((1i128 << (bits - 1)) - 1) as i64),
    }
}

/// Into a YEAR: two digits are 1970-2069, 0 stays 0.
fn coerce_year(v: &Value, misfit: &Misfit) -> Result<Value, CoerceError> {
    let i = to_decimal(v).ok_or_else(|| misfit.incorrect())?.round();
    let i = i64::try_from(i).map_err(|_| misfit.out_of_range())?;
    match i {
        0 => Ok(Value::Int(0)),
        1..=69 => Ok(Value::Int(2000 + i)),
        70..=99 => Ok(Value::Int(1900 + i)),
        1901..=2155 => Ok(Value::Int(i)),
        _ => Err(misfit.out_of_range()),
    }
}

/// Into a DECIMAL(precision, scale).
fn coerce_decimal(
    v: &Value,
    precision: u8,
    scale: u8,
    misfit: &Misfit,
) -> Result<Value, CoerceError> {
    let d = to_decimal(v).ok_or_else(|| misfit.incorrect())?;
    // Half away from zero, as MariaDB stores it (round_dp would
    // round half to even: 0.5 into DECIMAL(3,0) gave 0, not 1).
    let d = d.round_dp_with_strategy(
        u32::from(scale),
        rust_decimal::RoundingStrategy::MidpointAwayFromZero,
    );
    let int_digits = u32::from(precision).saturating_sub(u32::from(scale));
    // Past 28 integer digits every DECIMAL here fits (its largest,
    // 79228162514264337593543950335, has 29); 10^29 does not exist here
    // (the saturated limit refused that largest value).
    if int_digits <= 28 {
        let limit = (0..int_digits).fold(Decimal::ONE, |acc, _| acc * Decimal::TEN);
        if d.abs() >= limit {
            return Err(misfit.out_of_range());
        }
    }
    let mut d = d;
    d.rescale(u32::from(scale));
    Ok(Value::Decimal(d))
}

/// Into a CHAR, VARCHAR or TEXT column of length `n` (characters; bytes
/// for TEXT).
fn coerce_text(v: &Value, n: usize, misfit: &Misfit) -> Result<Value, CoerceError> {
    let column = misfit.column;
    let s = match v {
        // Bytes into a utf8mb4 column: kept if they are UTF-8, else
        // refused (MariaDB's 1366 in strict mode), never replaced.
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => s.to_string(),
            Err(e) => {
                return Err(CoerceError::IncorrectString {
                    value: escape_invalid(&b[e.valid_up_to()..]),
                    column: column.name.clone(),
                })
            }
        },
        other => to_text(other),
    };
    // CHAR drops trailing spaces (it reads back without its pad).
    let s = match column.ty {
        SqlType::Char(_) if s.ends_with(' ') => s.trim_end_matches(' ').to_string(),
        _ => s,
    };
    let length = |s: &str| match column.ty {
        SqlType::Text(_) => s.len(),
        _ => s.chars().count(),
    };
    if length(&s) > n {
        // Only spaces past the end: cut, as MariaDB does (with a
        // note), even in strict mode.
        let trimmed = s.trim_end_matches(' ');
        if length(trimmed) > n {
            return Err(misfit.too_long());
        }
        let mut kept = trimmed.to_string();
        while length(&kept) < n {
            kept.push(' ');
        }
        return Ok(Value::text(kept));
    }
    Ok(Value::text(s))
}

/// Into an ENUM of `labels`: a label (any case), the empty value, or a
/// label's number.
fn coerce_enum(v: &Value, labels: &[String], column: &ColumnSchema) -> Result<Value, CoerceError> {
    let s = to_text(v);
    if let Some(label) = labels.iter().find(|l| l.eq_ignore_ascii_case(&s)) {
        return Ok(Value::text(label));
    }
    // The empty value (index 0), which IGNORE stores for what is no
    // label; strict mode refuses it before the write (the shim).
    if s.is_empty() {
        return Ok(Value::text(""));
    }
    // An integer selects the n-th label (1-based), as in MySQL.
    if let Some(i) = v.as_i64() {
        if i >= 1 && (i as usize) <= labels.len() {
            return Ok(Value::text(&labels[i as usize - 1]));
        }
    }
    Err(CoerceError::Incorrect {
        ty: "enum".into(),
        value: s,
        column: column.name.clone(),
    })
}

/// Into a DATETIME or TIMESTAMP with `fsp` fractional digits.
fn coerce_datetime(v: &Value, fsp: u8, misfit: &Misfit) -> Result<Value, CoerceError> {
    let dt = match v {
        Value::DateTime(dt) => truncate_datetime(*dt, fsp),
        Value::Date(d) => d.and_hms_opt(0, 0, 0).unwrap_or_default(),
        Value::Text(s) => parse_datetime(s)
            .map(|dt| truncate_datetime(dt, fsp))
            .ok_or_else(|| misfit.incorrect())?,
        Value::Int(_) | Value::UInt(_) => {
            number_as_datetime(v).ok_or_else(|| misfit.incorrect())?
        }
        _ => return Err(misfit.incorrect()),
    };
    let zero = dt.date() == crate::value::ZERO_DATE;
    let timestamp = matches!(misfit.column.ty, SqlType::Timestamp { .. });
    if timestamp && !zero && !timestamp_in_range(dt) {
        return Err(misfit.incorrect());
    }
    Ok(Value::DateTime(dt))
}

/// Into a TIME with `fsp` fractional digits.
fn coerce_time(v: &Value, fsp: u8, misfit: &Misfit) -> Result<Value, CoerceError> {
    match v {
        Value::Time(us) => Ok(Value::Time(truncate_micros(*us, fsp))),
        Value::Text(s) => parse_time(s)
            .map(|us| Value::Time(truncate_micros(us, fsp)))
            .ok_or_else(|| misfit.incorrect()),
        Value::Int(i) => {
            // HHMMSS as an integer.
            let (h, m, s) = (i / 10000, (i / 100) % 100, i % 100);
            if h.abs() > 838 {
                return Err(misfit.out_of_range());
            }
            Ok(Value::Time((h * 3600 + m * 60 + s) * 1_000_000))
        }
        _ => Err(misfit.incorrect()),
    }
}

/// Whether a TIMESTAMP can hold `dt` (the session's time zone being UTC,
/// Ladle's only one): since the epoch up to 2^31 - 1 seconds, i.e.
/// just after '1970-01-01 00:00:00' (a fraction of its second will do) to
/// '2038-01-19 03:14:07.999999'. Outside it MariaDB refuses the value
/// (1292), where a DATETIME would take it.
pub fn timestamp_in_range(dt: NaiveDateTime) -> bool {
    let utc = dt.and_utc();
    utc.timestamp_micros() > 0 && utc.timestamp() <= i64::from(i32::MAX)
}

/// An integer given for a date: 0 is the zero date, else `YYYYMMDD` or
/// `YYYYMMDDHHMMSS`, as MySQL reads it.
fn number_as_datetime(v: &Value) -> Option<NaiveDateTime> {
    match v.as_i64() {
        Some(0) => Some(crate::value::ZERO_DATE.and_time(chrono::NaiveTime::MIN)),
        Some(n) if n > 0 => parse_datetime(&n.to_string()),
        _ => None,
    }
}

/// Microseconds cut to `fsp` fractional digits, toward zero: MariaDB
/// truncates (it rounds only under `TIME_ROUND_FRACTIONAL`).
pub fn truncate_micros(us: i64, fsp: u8) -> i64 {
    let unit = 10i64.pow(6 - u32::from(fsp.min(6)));
    us / unit * unit
}

/// A datetime's fraction cut to `fsp` digits (see [`truncate_micros`]).
pub fn truncate_datetime(dt: NaiveDateTime, fsp: u8) -> NaiveDateTime {
    let micros = i64::from(dt.and_utc().timestamp_subsec_micros());
    let kept = truncate_micros(micros, fsp);
    dt.with_nanosecond((kept * 1000) as u32).unwrap_or(dt)
}

/// How [`coerce_adjusting`] made a value fit, as MySQL's non-strict mode
/// (INSERT IGNORE) does; the front end reports each as a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adjustment {
    /// A number beyond the column's range became the nearest end of it.
    Clamped,
    /// A string was cut to the column's length, or a string with a numeric
    /// prefix kept only that (`'12abc'` -> 12).
    Truncated,
    /// A string that is not a number became 0.
    Zeroed,
    /// Bytes that are not UTF-8, for a text column: each invalid sequence
    /// became `?` (MariaDB's 1366 warning).
    Replaced,
}

/// [`coerce`], except that a number out of range, a string too long or a
/// non-numeric string for a numeric column is adjusted as MySQL's non-strict
/// mode does instead of refused; the adjustment says what happened. Values
/// with no such adjustment (dates, ENUM labels) are still errors.
pub fn coerce_adjusting(
    v: &Value,
    column: &ColumnSchema,
) -> Result<(Value, Option<Adjustment>), CoerceError> {
    let err = match coerce(v, column) {
        Ok(fits) => return Ok((fits, None)),
        Err(e) => e,
    };
    let numeric = matches!(
        column.ty,
        SqlType::Int { .. } | SqlType::Decimal { .. } | SqlType::Float | SqlType::Double
    );
    match (&err, &column.ty) {
        (
            CoerceError::OutOfRange { .. },
            SqlType::Int {
                bytes, unsigned, ..
            },
        ) => Ok((
            int_range_end(v, *bytes, *unsigned),
            Some(Adjustment::Clamped),
        )),
        (CoerceError::OutOfRange { .. }, SqlType::Decimal { precision, scale }) => {
            let negative = to_decimal(v).is_some_and(|d| d.is_sign_negative());
            // The largest value: precision nines with `scale` decimals.
            let nines = (0..*precision)
                .try_fold(0i128, |acc, _| acc.checked_mul(10)?.checked_add(9))
                .ok_or_else(|| err.clone())?;
            let mut largest = Decimal::try_from_i128_with_scale(nines, u32::from(*scale))
                .map_err(|_| err.clone())?;
            if negative {
                largest.set_sign_negative(true);
            }
            Ok((
                coerce(&Value::Decimal(largest), column)?,
                Some(Adjustment::Clamped),
            ))
        }
        (CoerceError::OutOfRange { .. }, SqlType::Float) => {
            let negative = match v {
                Value::Text(s) => s.trim().starts_with('-'),
                other => other.as_f64().is_some_and(|x| x < 0.0),
            };
            let end = if negative { f32::MIN } else { f32::MAX };
            Ok((Value::Double(f64::from(end)), Some(Adjustment::Clamped)))
        }
        // Every bit set (0 for a negative DECIMAL), "Out of range", as
        // MariaDB's non-strict mode stores it.
        (CoerceError::TooLong { .. } | CoerceError::OutOfRange { .. }, SqlType::Bit(width)) => {
            let why = match err {
                CoerceError::OutOfRange { .. } => BitMisfit::Negative,
                _ => BitMisfit::TooLong,
            };
            let clamped = crate::bit::bit_clamped(*width, why);
            Ok((clamped, Some(Adjustment::Clamped)))
        }
        (CoerceError::TooLong { .. }, SqlType::Char(n) | SqlType::VarChar(n)) => {
            let cut: String = to_text(v).chars().take(*n as usize).collect();
            Ok((Value::text(cut), Some(Adjustment::Truncated)))
        }
        (CoerceError::TooLong { .. }, SqlType::Text(n)) => {
            let s = to_text(v);
            let mut end = (*n as usize).min(s.len());
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Ok((Value::text(&s[..end]), Some(Adjustment::Truncated)))
        }
        (
            CoerceError::TooLong { .. },
            SqlType::Binary(n) | SqlType::VarBinary(n) | SqlType::Blob(n),
        ) => {
            let b: Vec<u8> = match v {
                Value::Bytes(b) => b.to_vec(),
                other => to_text(other).into_bytes(),
            };
            Ok((
                Value::bytes(&b[..b.len().min(*n as usize)]),
                Some(Adjustment::Truncated),
            ))
        }
        (CoerceError::IncorrectString { .. }, _) => {
            let Value::Bytes(b) = v else {
                return Err(err);
            };
            let (replaced, _) =
                coerce_adjusting(&Value::text(utf8_replacing_invalid(b).0), column)?;
            Ok((replaced, Some(Adjustment::Replaced)))
        }
        // A date or time followed by something else keeps the date or time
        // (`'2020-01-01 10:00:00abc'`), as MariaDB's non-strict mode does.
        (
            CoerceError::Incorrect { .. },
            SqlType::Date
            | SqlType::DateTime { .. }
            | SqlType::Timestamp { .. }
            | SqlType::Time { .. },
        ) => {
            if let SqlType::Timestamp { fsp } = column.ty {
                if let Some(zero) = timestamp_past_range(v, fsp) {
                    return Ok((zero, Some(Adjustment::Clamped)));
                }
            }
            if let (Value::Text(s), SqlType::Time { fsp }) = (v, &column.ty) {
                if let Some(clamped) = time_past_range(s) {
                    let clamped = Value::Time(truncate_micros(clamped, *fsp));
                    return Ok((clamped, Some(Adjustment::Clamped)));
                }
            }
            let prefix = match (v, &column.ty) {
                (Value::Text(s), SqlType::Time { .. }) => time_prefix(s).map(Value::Time),
                (Value::Text(s), _) => parse_datetime_prefix(s).map(Value::DateTime),
                _ => None,
            };
            // A TIMESTAMP holds no zero month or day: the zero timestamp.
            let prefix = prefix.filter(|p| {
                !matches!((p, &column.ty), (Value::DateTime(dt), SqlType::Timestamp { .. })
                    if !crate::is_calendar_date(&dt.date()))
            });
            match (prefix, &column.ty) {
                (Some(p), _) => Ok((coerce(&p, column)?, Some(Adjustment::Truncated))),
                // No time at all: '00:00:00', as MariaDB stores it.
                (None, SqlType::Time { .. }) => Ok((Value::Time(0), Some(Adjustment::Truncated))),
                // No date at all (`'2020-02-30'`, `'garbage'`): the zero
                // date, "Data truncated" (MariaDB's non-strict mode).
                (None, SqlType::Date) => Ok((Value::zero_date(), Some(Adjustment::Truncated))),
                (None, SqlType::DateTime { .. } | SqlType::Timestamp { .. }) => {
                    Ok((Value::zero_datetime(), Some(Adjustment::Truncated)))
                }
                (None, _) => Err(err),
            }
        }
        // No label: the empty value (index 0), "Data truncated".
        (CoerceError::Incorrect { .. }, SqlType::Enum(_)) => {
            Ok((Value::text(""), Some(Adjustment::Truncated)))
        }
        (CoerceError::Incorrect { .. }, _) if numeric => {
            let text = to_text(v);
            match numeric_prefix(&text) {
                Some(prefix) => {
                    let (value, _) = coerce_adjusting(&Value::text(prefix), column)?;
                    Ok((value, Some(Adjustment::Truncated)))
                }
                None => Ok((coerce(&Value::Int(0), column)?, Some(Adjustment::Zeroed))),
            }
        }
        _ => Err(err),
    }
}

/// A calendar date and time a TIMESTAMP cannot hold (see
/// [`timestamp_in_range`]): what MariaDB stores for it with 1264, the zero
/// timestamp — whose fraction, when the value had one, it keeps and prints
/// as `1970-01-01 00:00:00.f` (its zero is second 0 of the epoch).
fn timestamp_past_range(v: &Value, fsp: u8) -> Option<Value> {
    let dt = match v {
        Value::Text(s) => parse_datetime_prefix(s)?,
        Value::DateTime(dt) => *dt,
        _ => return None,
    };
    let dt = truncate_datetime(dt, fsp);
    if !crate::is_calendar_date(&dt.date()) || timestamp_in_range(dt) {
        return None;
    }
    let micros = dt.and_utc().timestamp_subsec_micros();
    Some(match micros {
        0 => Value::zero_datetime(),
        us => Value::DateTime(chrono::DateTime::from_timestamp(0, us * 1000)?.naive_utc()),
    })
}

/// A well-formed time past TIME's range (`'839:00:00'`): the end of the
/// range it is past, ±838:59:59.999999, as MariaDB stores it with 1264.
fn time_past_range(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let hours: i64 = body.split(':').next()?.parse().ok()?;
    let within = format!("838{}", &body[body.find(':')?..]);
    if hours <= 838 || parse_time(&within).is_none() {
        return None;
    }
    let end = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999;
    Some(if neg { -end } else { end })
}

/// [`parse_time`] of the longest prefix of `s` that is a time.
fn time_prefix(s: &str) -> Option<i64> {
    let s = s.trim();
    (1..=s.len())
        .rev()
        .filter(|&end| ends_a_value(s, end))
        .find_map(|end| parse_time(&s[..end]))
}

/// Whether a date or time read from `s` may end at `end`: not inside a
/// character, and not where more of a date or time follows (a digit, `:`
/// or `.`, after spaces or not), so that `'2024-02-30'` is no `2024-02-03`
/// and `'10:00:60'` no `10:00`: those are invalid values, not prefixes.
fn ends_a_value(s: &str, end: usize) -> bool {
    s.is_char_boundary(end)
        && !s[end..]
            .trim_start()
            .starts_with(|c: char| c.is_ascii_digit() || c == ':' || c == '.')
}

/// The longest prefix of `s` that reads as a number (`'12abc'` -> `12`),
/// as MySQL converts strings in numeric context; `None` if there is none.
fn numeric_prefix(s: &str) -> Option<&str> {
    let t = s.trim_start();
    let b = t.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits_from = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - digits_from;
    if b.get(i) == Some(&b'.') {
        let frac_from = i + 1;
        let mut j = frac_from;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        digits += j - frac_from;
        if digits > 0 {
            i = j;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_from = j;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        if j > exp_from {
            i = j;
        }
    }
    Some(&t[..i])
}

/// Whether storing `v` in `column` drops something MariaDB reports with a
/// Note 1265 ("Data truncated"): DECIMAL digits past the scale that are not
/// zeros (rounded), or spaces past a VARCHAR's length (cut).
pub fn truncation_note(v: &Value, column: &ColumnSchema) -> bool {
    match (&column.ty, v) {
        (SqlType::Decimal { scale, .. }, _) => {
            let d = match v {
                // A double as its shortest digits, as MariaDB reads it.
                Value::Double(f) => Decimal::from_str(&f.to_string()).ok(),
                other => to_decimal(other),
            };
            // Out of range is a warning of its own (1264), not this note.
            d.is_some_and(|d| {
                d.round_dp_with_strategy(
                    u32::from(*scale),
                    rust_decimal::RoundingStrategy::MidpointAwayFromZero,
                ) != d
                    && coerce(v, column).is_ok()
            })
        }
        // CHAR drops trailing spaces anyway: no note.
        (SqlType::VarChar(n), Value::Text(s)) => {
            s.chars().count() > *n as usize
                && s.trim_end_matches(' ').chars().count() <= *n as usize
        }
        _ => false,
    }
}

fn to_decimal(v: &Value) -> Option<Decimal> {
    match v {
        Value::Int(i) => Some(Decimal::from(*i)),
        Value::UInt(u) => Some(Decimal::from(*u)),
        Value::Decimal(d) => Some(*d),
        Value::Double(f) => Decimal::try_from(*f).ok(),
        Value::Text(s) => {
            let s = s.trim();
            Decimal::from_str(s)
                .ok()
                .or_else(|| Decimal::from_scientific(s).ok())
                .or_else(|| {
                    s.parse::<f64>()
                        .ok()
                        .and_then(|f| Decimal::try_from(f).ok())
                })
        }
        _ => None,
    }
}

/// Up to 6 bytes as MariaDB shows the bad part of an incorrect string
/// value (see [`escaped_bytes`]).
fn escape_invalid(b: &[u8]) -> String {
    escaped_bytes(&b[..b.len().min(6)])
}

fn to_text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    }
}

/// Parses the date and datetime literals MySQL accepts: `YYYY-MM-DD`,
/// `YYYY-MM-DD HH:MM:SS[.ffffff]`, and the `T` separator.
pub fn parse_datetime(s: &str) -> Option<NaiveDateTime> {
    let s = s.trim();
    if is_zero_date_text(s) {
        return Some(crate::value::ZERO_DATE.and_time(chrono::NaiveTime::MIN));
    }
    for fmt in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
        "%Y%m%d%H%M%S",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(dt);
        }
    }
    for fmt in ["%Y-%m-%d", "%Y%m%d"] {
        if let Ok(d) = NaiveDate::parse_from_str(s, fmt) {
            return d.and_hms_opt(0, 0, 0);
        }
    }
    parse_zero_in_date(s)
}

/// A date with a zero month or day (`2024-00-15`, `2024-02-00 10:00:00`,
/// `20240200`), which MySQL stores as given (see
/// [`crate::date_from_parts`]); `None` for anything else.
fn parse_zero_in_date(s: &str) -> Option<NaiveDateTime> {
    // Byte positions below are character positions only in ASCII.
    if !s.is_ascii() {
        return None;
    }
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let (date, time) = match s.as_bytes().get(4) {
        Some(b'-') => s.split_at(s.len().min(10)),
        _ if s.len() == 8 || s.len() == 14 => s.split_at(8),
        _ => return None,
    };
    // A dashed date shorter than 10 bytes (`2024-`) splits into the wrong
    // number of fields; only the undashed forms are cut by position.
    let fields: Vec<&str> = if date.as_bytes().get(4) == Some(&b'-') {
        date.split('-').collect()
    } else {
        vec![&date[..4], &date[4..6], &date[6..]]
    };
    let [y, m, d] = fields[..] else { return None };
    if ![y, m, d].iter().all(|f| digits(f)) || (m.len(), d.len()) != (2, 2) {
        return None;
    }
    let (m, d): (u32, u32) = (m.parse().ok()?, d.parse().ok()?);
    if m != 0 && d != 0 {
        return None;
    }
    let date = crate::date_from_parts(y.parse().ok()?, m, d)?;
    let time = match time.strip_prefix([' ', 'T']) {
        _ if time.is_empty() => NaiveTime::MIN,
        Some(t) => ["%H:%M:%S%.f", "%H:%M"]
            .iter()
            .find_map(|f| NaiveTime::parse_from_str(t, f).ok())?,
        None => NaiveTime::parse_from_str(time, "%H%M%S").ok()?,
    };
    Some(date.and_time(time))
}

/// MySQL's zero date or datetime spelled out: `0000-00-00`, with
/// `00:00:00` and a zero fraction or not, or `00000000[000000]`.
fn is_zero_date_text(s: &str) -> bool {
    let rest = match s.strip_prefix("0000-00-00") {
        Some(rest) => rest,
        None => return matches!(s, "00000000" | "00000000000000"),
    };
    let Some(time) = rest.strip_prefix([' ', 'T']) else {
        return rest.is_empty();
    };
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    hms == "00:00:00" && fraction.bytes().all(|b| b == b'0')
}

/// [`parse_datetime`] of the longest prefix of `s` that is a date or
/// datetime, as MariaDB reads a string compared with a temporal value: what
/// follows (a time zone offset `+00:00`, a `Z`) is ignored, with a warning
/// in MariaDB.
pub fn parse_datetime_prefix(s: &str) -> Option<NaiveDateTime> {
    parse_datetime_prefix_len(s).map(|(dt, _)| dt)
}

/// [`parse_datetime_prefix`], and the length of the prefix read (of `s`
/// without leading spaces).
pub fn parse_datetime_prefix_len(s: &str) -> Option<(NaiveDateTime, usize)> {
    let s = s.trim();
    if let Some(dt) = parse_datetime(s) {
        return Some((dt, s.len()));
    }
    // The longest datetime spelling is 26 characters; a shorter prefix
    // than `YYYYMMDD` is no date.
    (8..=s.len().min(26))
        .rev()
        .filter(|&end| ends_a_value(s, end))
        .find_map(|end| parse_datetime(&s[..end]).map(|dt| (dt, end)))
}

/// Parses a TIME literal (`[-]H[H..]:MM[:SS[.ffffff]]`) into signed
/// microseconds.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let mut parts = body.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next().unwrap_or("0").parse().ok()?;
    let sec_part = parts.next().unwrap_or("0");
    let (sec, frac) = match sec_part.split_once('.') {
        Some((a, b)) => {
            let digits: String = b.chars().chain(std::iter::repeat('0')).take(6).collect();
            (a.parse::<i64>().ok()?, digits.parse::<i64>().ok()?)
        }
        None => (sec_part.parse::<i64>().ok()?, 0),
    };
    if m >= 60 || sec >= 60 || h > 838 {
        return None;
    }
    let us = (h * 3600 + m * 60 + sec) * 1_000_000 + frac;
    let _ = NaiveTime::MIN;
    Some(if neg { -us } else { us })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_in_date_parsing_takes_any_text() {
        assert!(parse_datetime("2024-00-15").is_some());
        assert!(parse_datetime("20240200 10:00:00").is_none());
        for s in [
            "2020é-00-1",
            "20é00115",
            "é2020-00-15",
            "2020-00-1é",
            "1234567é",
            // Found by fuzzing: a dashed date cut short panicked slicing it.
            "2024-",
            "2024-0",
            "2024-00",
            "2024-00-1",
            "2024--",
        ] {
            assert_eq!(parse_datetime(s), None, "{s}");
        }
    }

    #[test]
    fn non_strict_adjustments_match_mysql() {
        let col = |ty| ColumnSchema::new("c", ty);
        let tiny = col(SqlType::Int {
            bytes: 1,
            unsigned: false,
            display_width: None,
        });
        let utiny = col(SqlType::Int {
            bytes: 1,
            unsigned: true,
            display_width: None,
        });
        let adjust = |v: Value, c: &ColumnSchema| coerce_adjusting(&v, c).unwrap();
        assert_eq!(
            adjust(Value::Int(300), &tiny),
            (Value::Int(127), Some(Adjustment::Clamped))
        );
        assert_eq!(
            adjust(Value::Int(-300), &tiny),
            (Value::Int(-128), Some(Adjustment::Clamped))
        );
        assert_eq!(
            adjust(Value::Int(-4), &utiny),
            (Value::Int(0), Some(Adjustment::Clamped))
        );
        assert_eq!(
            adjust(Value::Int(256), &utiny),
            (Value::Int(255), Some(Adjustment::Clamped))
        );
        assert_eq!(
            adjust(Value::text("12abc"), &tiny),
            (Value::Int(12), Some(Adjustment::Truncated))
        );
        assert_eq!(
            adjust(Value::text("abc"), &tiny),
            (Value::Int(0), Some(Adjustment::Zeroed))
        );
        assert_eq!(adjust(Value::Int(7), &tiny), (Value::Int(7), None));
        let dec = col(SqlType::Decimal {
            precision: 4,
            scale: 1,
        });
        let (v, a) = adjust(Value::Decimal(Decimal::new(1234567, 2)), &dec);
        assert_eq!(
            (v.to_string(), a),
            ("999.9".to_string(), Some(Adjustment::Clamped))
        );
        let (v, _) = adjust(Value::Int(-99999), &dec);
        assert_eq!(v.to_string(), "-999.9");
        assert_eq!(
            adjust(Value::text("abcdef"), &col(SqlType::VarChar(3))),
            (Value::text("abc"), Some(Adjustment::Truncated))
        );
        assert_eq!(
            adjust(Value::text("ééé"), &col(SqlType::Text(3))),
            (Value::text("é"), Some(Adjustment::Truncated))
        );
        // No date at all: the zero date ('0000-00-00' itself fits).
        assert_eq!(
            adjust(Value::text("2024-02-30"), &col(SqlType::Date)),
            (Value::zero_date(), Some(Adjustment::Truncated))
        );
        assert_eq!(
            coerce(&Value::text("0000-00-00 00:00:00.000"), &col(SqlType::Date)),
            Ok(Value::zero_date())
        );
        assert_eq!(
            coerce(&Value::Int(0), &col(SqlType::DateTime { fsp: 0 })),
            Ok(Value::zero_datetime())
        );
        assert_eq!(Value::zero_datetime().to_string(), "0000-00-00 00:00:00");
        // A valid date or time followed by something else keeps it.
        let at = col(SqlType::DateTime { fsp: 0 });
        assert_eq!(
            adjust(Value::text("2024-02-29 10:11:12 UTC"), &at),
            (
                coerce(&Value::text("2024-02-29 10:11:12"), &at).unwrap(),
                Some(Adjustment::Truncated)
            )
        );
        let during = col(SqlType::Time { fsp: 1 });
        assert_eq!(
            adjust(Value::text("10:00:00.25x"), &during),
            (Value::Time(36_000_200_000), Some(Adjustment::Truncated))
        );
        // Not a time at all: '00:00:00' (MariaDB: 1265).
        assert_eq!(
            adjust(Value::text("10:00:60"), &during),
            (Value::Time(0), Some(Adjustment::Truncated))
        );
        assert_eq!(numeric_prefix(" -1.5e3x"), Some("-1.5e3"));
        assert_eq!(numeric_prefix(".5."), Some(".5"));
        assert_eq!(numeric_prefix("e5"), None);
        assert_eq!(numeric_prefix("-"), None);
        // Bytes that are not UTF-8 into a text column: refused, or with `?`
        // for each bad sequence in non-strict mode, as MariaDB does.
        let name = col(SqlType::VarChar(10));
        assert!(matches!(
            coerce(&Value::bytes([0x41, 0xFF, 0x42]), &name),
            Err(CoerceError::IncorrectString { ref value, .. }) if value == "\\xFFB"
        ));
        assert_eq!(
            coerce(&Value::bytes([0xC3, 0xA9]), &name),
            Ok(Value::text("é"))
        );
        assert_eq!(
            adjust(Value::bytes([0x41, 0xFF, 0x42]), &name),
            (Value::text("A?B"), Some(Adjustment::Replaced))
        );
        assert_eq!(
            adjust(Value::bytes([0xC3, 0xA9, 0xC3]), &name).0,
            Value::text("é?")
        );
    }

    fn col(ty: SqlType) -> ColumnSchema {
        ColumnSchema::new("c", ty)
    }

    #[test]
    fn integers_are_range_checked() {
        let tiny = col(SqlType::Int {
            bytes: 1,
            unsigned: false,
            display_width: None,
        });
        assert_eq!(coerce(&Value::Int(127), &tiny), Ok(Value::Int(127)));
        assert!(matches!(
            coerce(&Value::Int(128), &tiny),
            Err(CoerceError::OutOfRange { .. })
        ));
        assert_eq!(coerce(&Value::text("42"), &tiny), Ok(Value::Int(42)));
        assert!(matches!(
            coerce(&Value::text("x"), &tiny),
            Err(CoerceError::Incorrect { .. })
        ));
        let ubig = col(SqlType::Int {
            bytes: 8,
            unsigned: true,
            display_width: None,
        });
        assert_eq!(
            coerce(&Value::UInt(u64::MAX), &ubig),
            Ok(Value::UInt(u64::MAX))
        );
        assert!(coerce(&Value::Int(-1), &ubig).is_err());
    }

    #[test]
    fn fractional_seconds_are_truncated_to_the_declared_precision() {
        let at = |fsp, s| coerce(&Value::text(s), &col(SqlType::DateTime { fsp })).unwrap();
        assert_eq!(
            at(0, "2020-01-01 10:00:00.7").to_string(),
            "2020-01-01 10:00:00"
        );
        assert_eq!(
            at(2, "2020-01-01 10:00:00.129").to_string(),
            "2020-01-01 10:00:00.120000"
        );
        assert_eq!(
            at(6, "2020-01-01 10:00:00.1234567").to_string(),
            "2020-01-01 10:00:00.123456"
        );
        let during = |fsp, s| coerce(&Value::text(s), &col(SqlType::Time { fsp })).unwrap();
        assert_eq!(during(3, "10:00:00.99951"), Value::Time(36_000_999_000));
        assert_eq!(during(0, "-00:00:01.5"), Value::Time(-1_000_000));
    }

    #[test]
    fn strings_and_dates() {
        assert!(matches!(
            coerce(&Value::text("abcd"), &col(SqlType::VarChar(3))),
            Err(CoerceError::TooLong { .. })
        ));
        let d = coerce(
            &Value::text("2024-02-29 10:11:12"),
            &col(SqlType::DateTime { fsp: 0 }),
        )
        .unwrap();
        assert_eq!(d.to_string(), "2024-02-29 10:11:12");
        assert_eq!(
            coerce(&Value::text("12:30:00"), &col(SqlType::Time { fsp: 0 }))
                .unwrap()
                .to_string(),
            "12:30:00"
        );
        let dec = coerce(
            &Value::text("3.14159"),
            &col(SqlType::Decimal {
                precision: 5,
                scale: 2,
            }),
        )
        .unwrap();
        assert_eq!(dec.to_string(), "3.14");
    }
}
