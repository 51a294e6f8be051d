//! Day-number and parsing date functions: TO_DAYS, FROM_DAYS, TO_SECONDS,
//! LAST_DAY, TIMESTAMP and STR_TO_DATE, with MariaDB's NULLs and warnings.

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

use ladle_common::{SqlType, Value};

/// A warning these functions raise; the caller records it with its MySQL
/// code (this module stays below the evaluator: it imports none of it).
pub(super) enum DateWarning {
    /// 1292: a value that is no date or time, or read only in part.
    Truncated(String),
    /// 1411: STR_TO_DATE of a string its format does not read.
    WrongValueForFunction(String),
}

/// Where a function sends its warnings.
pub(super) type Warn<'a> = &'a mut dyn FnMut(DateWarning);

/// A function's argument and what it reads as a date and time (the
/// evaluator's reading: zero dates and zero fields included).
pub(super) struct DateArg<'a> {
    pub value: &'a Value,
    pub datetime: Option<NaiveDateTime>,
}

/// The last day number FROM_DAYS turns into a date (9999-12-31); below
/// 366 (year 0) it gives the zero date.
const MAX_DAY_NUMBER: i64 = 3_652_424;
const FIRST_DAY_NUMBER: i64 = 366;
/// Day number of 0001-01-01 less chrono's day of it from the common era.
const CE_OFFSET: i64 = 365;

/// MySQL's day number of `y-m-d` (its `calc_daynr`: day 1 is 0000-01-01,
/// with its own reckoning of year 0); truncating division as in C.
fn day_number(y: i64, m: i64, d: i64) -> i64 {
    if y == 0 && m == 0 {
        return 0;
    }
    let mut sum = 365 * y + 31 * (m - 1) + d;
    let y = if m <= 2 {
        y - 1
    } else {
        sum -= (m * 4 + 23) / 10;
        y
    };
    sum + y / 4 - ((y / 100 + 1) * 3) / 4
}

/// Warns that `v` is no datetime (1292), as the day-number functions do.
fn warn_not_datetime(v: &Value, warn: Warn<'_>) {
    warn(DateWarning::Truncated(format!(
        "Incorrect datetime value: '{v}'"
    )));
}

/// `v` as a calendar datetime. A string or number that is none warns
/// (1292), the zero date and zero month or day included; a DATE or
/// DATETIME value holding one is NULL silently, as in MariaDB.
fn calendar_or_warn(a: &DateArg<'_>, warn: Warn<'_>) -> Option<NaiveDateTime> {
    let dt = a
        .datetime
        .filter(|dt| ladle_common::is_calendar_date(&dt.date()));
    let typed = matches!(a.value, Value::Date(_) | Value::DateTime(_));
    if dt.is_none() && !a.value.is_null() && !typed {
        warn_not_datetime(a.value, warn);
    }
    dt
}

/// The date of MySQL day number `n`; `None` outside 0001-01-01 ..=
/// 9999-12-31.
fn date_of_day_number(n: i64) -> Option<NaiveDate> {
    if !(FIRST_DAY_NUMBER..=MAX_DAY_NUMBER).contains(&n) {
        return None;
    }
    NaiveDate::from_num_days_from_ce_opt(i32::try_from(n - CE_OFFSET).ok()?)
}

fn mysql_day_number(d: NaiveDate) -> i64 {
    day_number(
        i64::from(d.year()),
        i64::from(d.month()),
        i64::from(d.day()),
    )
}

/// TO_DAYS(d): days since year 0.
pub(super) fn to_days(a: &DateArg<'_>, warn: Warn<'_>) -> Value {
    calendar_or_warn(a, warn).map_or(Value::Null, |dt| Value::Int(mysql_day_number(dt.date())))
}

/// TO_SECONDS(d): seconds since year 0.
pub(super) fn to_seconds(a: &DateArg<'_>, warn: Warn<'_>) -> Value {
    calendar_or_warn(a, warn).map_or(Value::Null, |dt| {
        Value::Int(mysql_day_number(dt.date()) * 86_400 + i64::from(dt.num_seconds_from_midnight()))
    })
}

/// FROM_DAYS(n): the date of day number `n` (see [`day_number`]); the
/// zero date outside 0001-01-01 ..= 9999-12-31 (and for what is no number).
pub(super) fn from_days(n: Option<i64>) -> Value {
    date_of_day_number(n.unwrap_or(0)).map_or(Value::zero_date(), Value::Date)
}

/// LAST_DAY(d): the last day of d's month. A zero month gives NULL but a
/// zero day does not, and neither warns (MariaDB reads the fields).
pub(super) fn last_day(a: &DateArg<'_>, warn: Warn<'_>) -> Value {
    let Some(dt) = a.datetime else {
        if !a.value.is_null() {
            warn_not_datetime(a.value, warn);
        }
        return Value::Null;
    };
    let (y, m, _) = ladle_common::date_parts(&dt.date());
    if m == 0 {
        return Value::Null;
    }
    let (next_y, next_m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    NaiveDate::from_ymd_opt(next_y, next_m, 1)
        .and_then(|d| d.pred_opt())
        .map_or(Value::Null, Value::Date)
}

/// TIMESTAMP(x): `x` as a DATETIME, zero dates kept.
pub(super) fn timestamp(a: &DateArg<'_>, warn: Warn<'_>) -> Value {
    match a.datetime {
        Some(dt) => Value::DateTime(dt),
        None => {
            if !a.value.is_null() {
                warn_not_datetime(a.value, warn);
            }
            Value::Null
        }
    }
}

/// TIMESTAMP(d, t): the datetime `d` plus the time `t`; NULL past the
/// calendar (no warning) or for the zero date. A zero month or day counts
/// by day numbers as MariaDB's does (`2020-02-00` is January 31st).
pub(super) fn timestamp_plus(d: &DateArg<'_>, t: &Value, warn: Warn<'_>) -> Value {
    if d.value.is_null() || t.is_null() {
        return Value::Null;
    }
    let Some(dt) = d.datetime else {
        warn_not_datetime(d.value, warn);
        return Value::Null;
    };
    let time = match t {
        Value::Time(us) => Some(*us),
        other => ladle_common::parse_time(&other.to_string()),
    };
    let Some(us) = time else {
        warn(DateWarning::Truncated(format!(
            "Incorrect INTERVAL DAY TO SECOND value: '{t}'"
        )));
        return Value::Null;
    };
    let (y, m, day) = ladle_common::date_parts(&dt.date());
    let n = day_number(i64::from(y), i64::from(m), i64::from(day));
    let Some(date) = date_of_day_number(n) else {
        return Value::Null;
    };
    date.and_time(dt.time())
        .checked_add_signed(chrono::Duration::microseconds(us))
        .filter(|o| (0..=9999).contains(&o.year()))
        .map_or(Value::Null, Value::DateTime)
}

/// The fields STR_TO_DATE reads, as MySQL's `extract_date_time` keeps them.
#[derive(Default)]
struct Parsed {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
    year_day: i64,
    /// `%h`/`%l`/`%r` read a 12-hour clock; `%p` adds 12 for PM.
    twelve_hour: bool,
    pm: i64,
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Reads at most `max` digits from the front of `s` (at least one).
fn digits(s: &mut &str, max: usize) -> Option<i64> {
    let n = s.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let v = s[..n].parse().ok()?;
    *s = &s[n..];
    Some(v)
}

/// Reads a month name from the front of `s`: whole (`%M`) or its first
/// three letters (`%b`), case-insensitively.
fn month_name(s: &mut &str, abbreviated: bool) -> Option<i64> {
    let (i, len) = MONTHS.iter().enumerate().find_map(|(i, name)| {
        let name = if abbreviated { &name[..3] } else { name };
        let head = s.get(..name.len())?;
        head.eq_ignore_ascii_case(name).then_some((i, name.len()))
    })?;
    *s = &s[len..];
    Some(i as i64 + 1)
}

/// Two-digit years as MySQL reads them (70..99 are the 1900s).
fn full_year(y: i64) -> i64 {
    match y {
        0..=69 => y + 2000,
        70..=99 => y + 1900,
        _ => y,
    }
}

/// Reads `s` by `format` into `p`, as MySQL's `extract_date_time`: spaces
/// before each field are skipped, and the format stops where `s` ends.
/// `None` when `s` does not match.
fn extract<'a>(mut s: &'a str, format: &str, p: &mut Parsed) -> Option<&'a str> {
    let mut fmt = format.chars();
    while let Some(c) = fmt.next() {
        s = s.trim_start();
        if s.is_empty() {
            break;
        }
        if c != '%' {
            if !c.is_whitespace() {
                s = s.strip_prefix(c)?;
            }
            continue;
        }
        let Some(spec) = fmt.next() else { break };
        match spec {
            'Y' => {
                let before = s.len();
                p.year = digits(&mut s, 4)?;
                if before - s.len() <= 2 {
                    p.year = full_year(p.year);
                }
            }
            'y' => p.year = full_year(digits(&mut s, 2)?),
            'm' | 'c' => p.month = digits(&mut s, 2)?,
            'd' | 'e' => p.day = digits(&mut s, 2)?,
            'H' | 'k' => p.hour = digits(&mut s, 2)?,
            'h' | 'I' | 'l' => {
                p.hour = digits(&mut s, 2)?;
                p.twelve_hour = true;
            }
            'i' => p.minute = digits(&mut s, 2)?,
            's' | 'S' => p.second = digits(&mut s, 2)?,
            'f' => {
                let before = s.len();
                let v = digits(&mut s, 6)?;
                p.micros = v * 10_i64.pow((6 - (before - s.len())) as u32);
            }
            'p' => {
                let head = s.get(..2)?;
                if !p.twelve_hour {
                    return None;
                }
                p.pm = match head.to_ascii_uppercase().as_str() {
                    "AM" => 0,
                    "PM" => 12,
                    _ => return None,
                };
                s = &s[2..];
            }
            'M' => p.month = month_name(&mut s, false)?,
            'b' => p.month = month_name(&mut s, true)?,
            'j' => p.year_day = digits(&mut s, 3)?,
            'T' => s = extract(s, "%H:%i:%s", p)?,
            'r' => s = extract(s, "%I:%i:%S %p", p)?,
            _ => return None,
        }
    }
    Some(s)
}

/// What a STR_TO_DATE format yields, as MySQL decides by its specifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Yields {
    Date,
    Time,
    DateTime,
}

/// The result kind of `format` and whether it reads a fraction (`%f`).
fn format_yields(format: &str) -> (Yields, bool) {
    let (mut date, mut time, mut frac) = (false, false, false);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            Some('a' | 'b' | 'c' | 'd' | 'D' | 'e' | 'j' | 'm' | 'M' | 'u' | 'U' | 'v' | 'V')
            | Some('w' | 'W' | 'x' | 'X' | 'y' | 'Y') => date = true,
            Some('f') => {
                frac = true;
                time = true;
            }
            Some('h' | 'H' | 'I' | 'i' | 'k' | 'l' | 'p' | 'r' | 's' | 'S' | 'T') => time = true,
            _ => {}
        }
    }
    let yields = match (date, time) {
        (true, false) => Yields::Date,
        (false, true) => Yields::Time,
        _ => Yields::DateTime,
    };
    (yields, frac)
}

/// The type of STR_TO_DATE(s, format): by the format when it is a
/// literal, else DATETIME(6), as MariaDB types it.
pub(super) fn str_to_date_type(format: Option<&Value>) -> SqlType {
    let Some(f) = format.filter(|f| !f.is_null()) else {
        return SqlType::DateTime { fsp: 6 };
    };
    let (yields, frac) = format_yields(&f.to_string());
    let fsp = if frac { 6 } else { 0 };
    match yields {
        Yields::Date => SqlType::Date,
        Yields::Time => SqlType::Time { fsp },
        Yields::DateTime => SqlType::DateTime { fsp },
    }
}

/// STR_TO_DATE(s, format): NULL with warning 1411 when `s` does not
/// match; trailing text other than spaces is ignored with warning 1292.
/// A format that is no literal always yields a DATETIME (see
/// [`str_to_date_type`]).
pub(super) fn str_to_date(
    s: &Value,
    format: &Value,
    literal_format: bool,
    warn: Warn<'_>,
) -> Value {
    if s.is_null() || format.is_null() {
        return Value::Null;
    }
    let (text, format) = (s.to_string(), format.to_string());
    let mut p = Parsed::default();
    let parsed = extract(&text, &format, &mut p).and_then(|rest| Some((rest, resolve(p)?)));
    let Some((rest, (date, time))) = parsed else {
        warn(DateWarning::WrongValueForFunction(format!(
            "Incorrect datetime value: '{text}' for function str_to_date"
        )));
        return Value::Null;
    };
    let yields = if literal_format {
        format_yields(&format).0
    } else {
        Yields::DateTime
    };
    if !rest.trim().is_empty() {
        let kind = match yields {
            Yields::Date => "date",
            Yields::Time => "time",
            Yields::DateTime => "datetime",
        };
        warn(DateWarning::Truncated(format!(
            "Truncated incorrect {kind} value: '{text}'"
        )));
    }
    match yields {
        Yields::Date => Value::Date(date),
        Yields::Time => Value::Time(
            i64::from(time.num_seconds_from_midnight()) * 1_000_000
                + i64::from(time.nanosecond() / 1000),
        ),
        Yields::DateTime => Value::DateTime(date.and_time(time)),
    }
}

/// The date and time the fields stand for (12-hour clock and day of year
/// applied), `None` when a field is out of range.
fn resolve(mut p: Parsed) -> Option<(NaiveDate, NaiveTime)> {
    if p.twelve_hour {
        if !(1..=12).contains(&p.hour) {
            return None;
        }
        p.hour = p.hour % 12 + p.pm;
    }
    if p.year_day > 0 {
        let d = date_of_day_number(day_number(p.year, 1, 1) + p.year_day - 1)?;
        (p.year, p.month, p.day) = (
            i64::from(d.year()),
            i64::from(d.month()),
            i64::from(d.day()),
        );
    }
    if p.month > 12 || p.day > 31 || p.hour > 23 || p.minute > 59 || p.second > 59 {
        return None;
    }
    let date =
        ladle_common::date_from_parts(i32::try_from(p.year).ok()?, p.month as u32, p.day as u32)?;
    let time = NaiveTime::from_hms_micro_opt(
        p.hour as u32,
        p.minute as u32,
        p.second as u32,
        p.micros as u32,
    )?;
    Some((date, time))
}
