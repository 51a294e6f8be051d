//! Reading stored dates and datetimes back without chrono's general
//! parser. Rows hold them in chrono's serde form (`2024-05-01` and
//! `2024-05-01T10:20:30.123456`), and every decode of a row parses them
//! again; chrono's `FromStr` walks a format-item list for each. The usual
//! shape is read here digit by digit; anything else (years outside
//! 0000-9999, MySQL's zero date, a leap second) goes to chrono, so what
//! is accepted and what it means is chrono's either way.

use std::fmt;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use serde::de::{Error, Visitor};
use serde::Deserializer;

/// `deserialize_with` for a `NaiveDate` in chrono's serde form.
pub(crate) fn date<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDate, D::Error> {
    d.deserialize_str(Text(|s: &str| parse_date(s).or_else(|| s.parse().ok())))
}

/// `deserialize_with` for a `NaiveDateTime` in chrono's serde form.
pub(crate) fn datetime<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDateTime, D::Error> {
    d.deserialize_str(Text(|s: &str| parse_datetime(s).or_else(|| s.parse().ok())))
}

/// A visitor taking a string and parsing it with the closure.
struct Text<F>(F);

impl<T, F: FnOnce(&str) -> Option<T>> Visitor<'_> for Text<F> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a date or datetime in chrono's serde form")
    }

    fn visit_str<E: Error>(self, s: &str) -> Result<T, E> {
        (self.0)(s).ok_or_else(|| E::custom(format!("not a date or datetime: {s:?}")))
    }
}

/// `YYYY-MM-DD`.
fn parse_date(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    NaiveDate::from_ymd_opt(
        digits(&b[0..4])? as i32,
        digits(&b[5..7])?,
        digits(&b[8..10])?,
    )
}

/// `YYYY-MM-DDTHH:MM:SS`, then optionally `.` and 1-9 fraction digits.
fn parse_datetime(s: &str) -> Option<NaiveDateTime> {
    let b = s.as_bytes();
    if b.len() < 19 || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let date = parse_date(s.get(..10)?)?;
    let nanos = match &b[19..] {
        [] => 0,
        [b'.', fraction @ ..] if (1..=9).contains(&fraction.len()) => {
            digits(fraction)? * 10u32.pow(9 - fraction.len() as u32)
        }
        _ => return None,
    };
    let (h, m, sec) = (
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    );
    // Second 60 (a leap second) is chrono's to read.
    if sec > 59 {
        return None;
    }
    Some(date.and_time(NaiveTime::from_hms_nano_opt(h, m, sec, nanos)?))
}

/// The number written by ASCII digits only (at most 9 of them).
fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use serde::de::value::{Error as ValueError, StrDeserializer};

    use super::*;
    use crate::value::{Value, ZERO_DATE};

    fn read_date(s: &str) -> Option<NaiveDate> {
        date(StrDeserializer::<ValueError>::new(s)).ok()
    }

    fn read_datetime(s: &str) -> Option<NaiveDateTime> {
        datetime(StrDeserializer::<ValueError>::new(s)).ok()
    }

    /// Every shape a row can hold reads back as it was written, through the
    /// stored form (postcard), and any text reads as chrono reads it.
    #[test]
    fn dates_read_back_as_chrono_reads_them() {
        let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        let dates = [
            day(2024, 5, 1),
            day(1, 1, 1),
            day(9999, 12, 31),
            day(10000, 1, 1),
            day(0, 2, 29),
            ZERO_DATE,
            NaiveDate::MAX,
        ];
        let times = [
            NaiveTime::from_hms_opt(0, 0, 0).unwrap(),
            NaiveTime::from_hms_opt(23, 59, 59).unwrap(),
            NaiveTime::from_hms_micro_opt(10, 20, 30, 123_456).unwrap(),
            NaiveTime::from_hms_micro_opt(10, 20, 30, 100_000).unwrap(),
            NaiveTime::from_hms_nano_opt(10, 20, 30, 1).unwrap(),
            // A leap second.
            NaiveTime::from_hms_milli_opt(23, 59, 59, 1_500).unwrap(),
        ];
        for d in dates {
            let stored = postcard::to_allocvec(&Value::Date(d)).unwrap();
            let back: Value = postcard::from_bytes(&stored).unwrap();
            assert!(matches!(back, Value::Date(x) if x == d), "{d}");
            for t in times {
                let dt = d.and_time(t);
                let stored = postcard::to_allocvec(&Value::DateTime(dt)).unwrap();
                let back: Value = postcard::from_bytes(&stored).unwrap();
                assert!(matches!(back, Value::DateTime(x) if x == dt), "{dt:?}");
            }
        }
        let texts = [
            "2024-05-01",
            "2024-13-01",
            "2024-02-30",
            "2024-02-29",
            "2023-02-29",
            "2024-0a-01",
            "2024-5-1",
            "+12024-05-01",
            "2024-05-01T10:20:30",
            "2024-05-01T10:20:30.5",
            "2024-05-01T10:20:30.123456789",
            "2024-05-01T10:20:30.1234567890",
            "2024-05-01T10:20:30.",
            "2024-05-01T24:00:00",
            "2024-05-01T10:60:00",
            "2024-05-01T23:59:60",
            "2024-05-01T23:59:60.5",
            "2024-05-01 10:20:30",
            "2024-05-01T10:20",
            "2024-05-01T10:20:30Z",
            "-0001-05-01T10:20:30",
        ];
        for s in texts {
            assert_eq!(read_date(s), s.parse().ok(), "{s}");
            assert_eq!(read_datetime(s), s.parse().ok(), "{s}");
        }
        assert!(read_datetime("2024-05-01T10:20:30.5").is_some());
    }
}
