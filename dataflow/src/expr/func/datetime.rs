//! Date and time functions: the clock, fields of a date or time, DATE_ADD,
//! DATE_FORMAT, weeks, differences, time zones, and the conversions of
//! `expr::dates` (TO_DAYS, STR_TO_DATE, ...); calendar arithmetic is in
//! `calendar`.

use chrono::{Datelike, Duration, NaiveDateTime, Timelike};
use ladle_common::{SqlType, Value};

use super::args::{int_arg, literal, null_in};
use super::calendar::{
    add_months, date_format, month_name, mysql_week, timestamp_diff, week_mode,
    zone_offset_seconds, WEEK_YEAR,
};
use super::catalog::{
    UNIT_DAY, UNIT_HOUR, UNIT_MICROSECOND, UNIT_MINUTE, UNIT_MONTH, UNIT_QUARTER, UNIT_SECOND,
    UNIT_WEEK, UNIT_YEAR,
};
use super::Func;
use crate::expr::dates;
use crate::expr::error::EvalResult;
use crate::expr::ops::{self, to_text};
use crate::expr::tree::Expr;
use crate::expr::warnings::{
    warn, WARN_DATETIME_FUNCTION_OVERFLOW, WARN_TRUNCATED_WRONG_VALUE,
    WARN_WRONG_VALUE_FOR_FUNCTION,
};

/// The date and time functions over their evaluated arguments `vals`
/// (`v0` the first); `args` are the expressions (STR_TO_DATE reads whether
/// its format is a literal).
pub(super) fn call(f: Func, args: &[Expr], vals: &[Value], v0: Value) -> EvalResult {
    use Func::*;
    Ok(match f {
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
        DateAdd => date_add(vals, &v0),
        // Not `calendar`: MySQL formats the zero date and dates with a
        // zero month or day by their fields.
        DateFormat => match (ops::to_datetime(&v0), &vals[1]) {
            (Some(dt), f) if !f.is_null() => {
                date_format(dt, &to_text(f)).map_or(Value::Null, Value::text)
            }
            _ => Value::Null,
        },
        Quarter | Weekday | DayOfYear | Week | YearWeek => week_field(f, vals, &v0),
        Microsecond => match time_of_day(&v0) {
            Some(us) => Value::Int((us % 1_000_000).abs()),
            None => Value::Null,
        },
        MakeDate => make_date(&v0, &vals[1]),
        TimeOf => time_of_day(&v0).map_or(Value::Null, Value::Time),
        ToDays | ToSeconds | LastDay | Timestamp | StrToDate => {
            date_function(f, args, vals, &mut record_date_warning)
        }
        FromDays if v0.is_null() => Value::Null,
        FromDays => {
            ops::warn_if_partly_integer(&v0);
            dates::from_days(int_arg(&v0))
        }
        // MySQL's whole seconds (MariaDB keeps the fraction).
        TimeToSec => time_of_day(&v0).map_or(Value::Null, |us| Value::Int(us / 1_000_000)),
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
        _ => unreachable!("{f:?} is not a date or time function"),
    })
}

/// The result types of the date and time functions, given their arguments
/// (literal formats, fractional digits) and their types.
pub(super) fn result_type(f: Func, args: &[Expr], tys: &[(SqlType, bool)]) -> (SqlType, bool) {
    use Func::*;
    let bigint = SqlType::Int {
        bytes: 8,
        unsigned: false,
        display_width: None,
    };
    let text = |n: u32| SqlType::VarChar(n);
    match f {
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
        TimeOf => (
            SqlType::Time {
                fsp: fraction_digits(&args[0], &tys[0].0),
            },
            true,
        ),
        DateAdd => match &tys[0].0 {
            SqlType::Date => (SqlType::Date, true),
            // The DATETIME keeps its fraction (`dt6 + INTERVAL 1 DAY` is
            // DATETIME(6)); a MICROSECOND interval adds one.
            t => {
                let fsp = match t {
                    SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => *fsp,
                    _ => 0,
                };
                let micro =
                    matches!(literal(args.get(2)), Some(v) if v.as_i64() == Some(UNIT_MICROSECOND));
                let fsp = if micro { 6 } else { fsp };
                (SqlType::DateTime { fsp }, true)
            }
        },
        _ => unreachable!("{f:?} is not a date or time function"),
    }
}

/// DATE_ADD(`v0`, amount, unit code): NULL with a warning for an invalid
/// date or a result past the calendar.
fn date_add(vals: &[Value], v0: &Value) -> Value {
    if null_in(vals) {
        return Value::Null;
    }
    let is_date = matches!(v0, Value::Date(_));
    let Some(dt) = calendar(v0) else {
        if ops::to_datetime(v0).is_some() {
            warn(
                WARN_TRUNCATED_WRONG_VALUE,
                format!("Incorrect datetime value: '{v0}'"),
            );
        }
        return Value::Null;
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
            warn(
                WARN_DATETIME_FUNCTION_OVERFLOW,
                "Datetime function: datetime field overflow".into(),
            );
            Value::Null
        }
    }
}

/// QUARTER, WEEKDAY, DAYOFYEAR, WEEK and YEARWEEK(`v0`[, mode]) of a
/// calendar date.
fn week_field(f: Func, vals: &[Value], v0: &Value) -> Value {
    use Func::*;
    match calendar(v0) {
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
    }
}

/// MAKEDATE(year `v0`, day of year `n`).
fn make_date(v0: &Value, n: &Value) -> Value {
    match (int_arg(v0), int_arg(n)) {
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
    }
}

fn now() -> NaiveDateTime {
    let n = crate::clock::now_utc();
    n.with_nanosecond(0).unwrap_or(n)
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
        dates::DateWarning::Truncated(m) => (WARN_TRUNCATED_WRONG_VALUE, m),
        dates::DateWarning::WrongValueForFunction(m) => (WARN_WRONG_VALUE_FOR_FUNCTION, m),
    };
    warn(code, message);
}
