//! Calendar arithmetic for the date and time functions: MySQL's week
//! numbering, DATE_FORMAT, month arithmetic, TIMESTAMPDIFF's units and
//! CONVERT_TZ's offsets.

use chrono::{Datelike, NaiveDateTime, Timelike};

use super::catalog::{
    UNIT_DAY, UNIT_HOUR, UNIT_MICROSECOND, UNIT_MINUTE, UNIT_MONTH, UNIT_QUARTER, UNIT_SECOND,
    UNIT_WEEK, UNIT_YEAR,
};

/// Whole `unit`s (a `UNIT_*` code) from `a` to `b`, truncated toward
/// zero as MySQL counts them: months are calendar months, less one when
/// `b`'s day and time of month come before `a`'s.
pub(super) fn timestamp_diff(unit: i64, a: NaiveDateTime, b: NaiveDateTime) -> Option<i64> {
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
pub(super) fn zone_offset_seconds(zone: &str) -> Option<i64> {
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

/// MySQL's DATE_FORMAT specifiers, over the fields MySQL sees (a zero
/// month or day is printed as given). `None` (NULL) where MySQL gives NULL:
/// a month or day-of-year name of month 0, a weekday of the zero date.
pub(super) fn date_format(dt: NaiveDateTime, f: &str) -> Option<String> {
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

pub(super) fn month_name(month: u32) -> Option<&'static str> {
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

pub(super) fn add_months(dt: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
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

/// MySQL's week flags (sql/sql_time.h): Monday starts the week; weeks of
/// the previous/next year count as that year's; week 1 is the first with
/// the first weekday (else the first with 4 or more days).
const WEEK_MONDAY_FIRST: i64 = 1;
pub(super) const WEEK_YEAR: i64 = 2;
const WEEK_FIRST_WEEKDAY: i64 = 4;

/// The flags of `WEEK(d, mode)`'s mode 0..7.
pub(super) fn week_mode(mode: i64) -> i64 {
    let mut m = mode & 7;
    if m & WEEK_MONDAY_FIRST == 0 {
        m ^= WEEK_FIRST_WEEKDAY;
    }
    m
}

/// (week, year) of `d` as MySQL's calc_week computes them.
pub(super) fn mysql_week(d: chrono::NaiveDate, behaviour: i64) -> (i64, i64) {
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
