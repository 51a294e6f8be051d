//! Scalar values, column types and collations.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// A SQL scalar value.
///
/// Strings and byte strings are reference counted so that rows can be shared
/// between dataflow nodes and readers without copying.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Value {
    Null,
    /// Any signed integer column (TINYINT..BIGINT) and BOOL.
    Int(i64),
    /// Unsigned integer columns whose value does not fit `i64`, and any value
    /// of an UNSIGNED column (planner and storage may use either; they compare
    /// numerically equal).
    UInt(u64),
    /// FLOAT and DOUBLE.
    Double(f64),
    Decimal(Decimal),
    /// CHAR, VARCHAR, TEXT, ENUM (as its label).
    Text(Arc<str>),
    /// BINARY, VARBINARY, BLOB.
    Bytes(Arc<[u8]>),
    Date(#[serde(deserialize_with = "crate::date_text::date")] NaiveDate),
    /// DATETIME and TIMESTAMP (no time zone: session time zone is UTC).
    DateTime(#[serde(deserialize_with = "crate::date_text::datetime")] NaiveDateTime),
    /// TIME as signed microseconds (MySQL's range is +-838:59:59).
    Time(i64),
}

/// MySQL's zero date `0000-00-00` (the zero DATETIME is this date at
/// midnight), which is no calendar date: held as chrono's earliest date,
/// which no MySQL date or date arithmetic reaches, so it sorts before every
/// date as MySQL sorts it; it is printed and sent as zeros.
pub const ZERO_DATE: NaiveDate = NaiveDate::MIN;

/// First day (from the common era) of the dates that stand for MySQL's
/// dates with a zero month or day (`'2024-00-15'`, `'2024-02-00'`), which no
/// calendar holds but MySQL stores as given (without `NO_ZERO_IN_DATE`):
/// `y-m-d` is held as chrono's date `PARTIAL_BASE + y*416 + m*32 + d` days,
/// about 219,000 years BC: after [`ZERO_DATE`], before every date MySQL
/// reaches. [`date_parts`] reads one back; values compare by their parts.
const PARTIAL_BASE: i32 = -80_000_000;
/// Days per year of the partial-date encoding (13 months of 32 days).
const PARTIAL_YEAR: i32 = 13 * 32;

/// The year, month and day MySQL sees in `d`: zeros for [`ZERO_DATE`], the
/// given fields for a date with a zero month or day.
pub fn date_parts(d: &NaiveDate) -> (i32, u32, u32) {
    use chrono::Datelike;
    if *d == ZERO_DATE {
        return (0, 0, 0);
    }
    let n = d.num_days_from_ce() - PARTIAL_BASE;
    if (0..10_000 * PARTIAL_YEAR).contains(&n) {
        let (y, rest) = (n / PARTIAL_YEAR, (n % PARTIAL_YEAR) as u32);
        return (y, rest / 32, rest % 32);
    }
    (d.year(), d.month(), d.day())
}

/// The date MySQL stores for `y-m-d` (without `NO_ZERO_IN_DATE` and
/// `NO_ZERO_DATE`): a calendar date, [`ZERO_DATE`] for all zeros, or a
/// date with a zero month or day (see [`date_parts`]); `None` for what is
/// no date (`2020-02-30`, month 13).
pub fn date_from_parts(y: i32, m: u32, d: u32) -> Option<NaiveDate> {
    if (y, m, d) == (0, 0, 0) {
        return Some(ZERO_DATE);
    }
    if m == 0 || d == 0 {
        if !(0..=9999).contains(&y) || m > 12 || d > 31 {
            return None;
        }
        let n = PARTIAL_BASE + y * PARTIAL_YEAR + (m * 32 + d) as i32;
        return NaiveDate::from_num_days_from_ce_opt(n);
    }
    NaiveDate::from_ymd_opt(y, m, d)
}

/// Whether `d` is a calendar date: not [`ZERO_DATE`] nor a date with a zero
/// month or day, on which MySQL's date functions give NULL.
pub fn is_calendar_date(d: &NaiveDate) -> bool {
    let (_, m, day) = date_parts(d);
    m != 0 && day != 0
}

/// `YYYY-MM-DD` of `d`, zeros for [`ZERO_DATE`] and zero fields.
fn date_text(d: &NaiveDate) -> String {
    let (y, m, day) = date_parts(d);
    format!("{y:04}-{m:02}-{day:02}")
}

/// `YYYY-MM-DD HH:MM:SS` of `d` (no fraction), zeros for the zero date.
fn datetime_text(d: &NaiveDateTime) -> String {
    format!("{} {}", date_text(&d.date()), d.format("%H:%M:%S"))
}

impl Value {
    /// The zero DATE (`0000-00-00`, see [`ZERO_DATE`]).
    pub fn zero_date() -> Value {
        Value::Date(ZERO_DATE)
    }

    /// The zero DATETIME (`0000-00-00 00:00:00`).
    pub fn zero_datetime() -> Value {
        Value::DateTime(ZERO_DATE.and_time(chrono::NaiveTime::MIN))
    }

    /// Whether the value is the zero DATE or DATETIME.
    pub fn is_zero_date(&self) -> bool {
        match self {
            Value::Date(d) => *d == ZERO_DATE,
            Value::DateTime(d) => d.date() == ZERO_DATE,
            _ => false,
        }
    }

    pub fn text(s: impl AsRef<str>) -> Value {
        Value::Text(Arc::from(s.as_ref()))
    }

    pub fn bytes(b: impl AsRef<[u8]>) -> Value {
        Value::Bytes(Arc::from(b.as_ref()))
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value as an `i64`, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            _ => None,
        }
    }

    /// The value as a double, for numeric values (integers, decimals, floats).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::UInt(u) => Some(*u as f64),
            Value::Double(d) => Some(*d),
            Value::Decimal(d) => d.to_string().parse().ok(),
            _ => None,
        }
    }

    /// The value as a string, for text values.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    fn is_numeric(&self) -> bool {
        matches!(
            self,
            Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal(_)
        )
    }

    /// Rank used to order values of different kinds; NULL sorts first, as in
    /// MySQL's ORDER BY.
    fn kind_rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal(_) => 1,
            Value::Date(_) | Value::DateTime(_) => 2,
            Value::Time(_) => 3,
            Value::Text(_) => 4,
            Value::Bytes(_) => 5,
        }
    }

    /// Total order of two values, comparing strings under `collation`.
    ///
    /// NULL sorts before everything and equals NULL (this is ORDER BY and
    /// GROUP BY order; SQL's three-valued `=` is the evaluator's business).
    /// Numbers of different representations compare numerically; a DATE
    /// compares with a DATETIME as midnight of that day.
    pub fn cmp_collated(&self, other: &Value, collation: Collation) -> Ordering {
        use Value::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Int(a), Int(b)) => a.cmp(b),
            (UInt(a), UInt(b)) => a.cmp(b),
            (Int(a), UInt(b)) => cmp_i64_u64(*a, *b),
            (UInt(a), Int(b)) => cmp_i64_u64(*b, *a).reverse(),
            (Decimal(a), Decimal(b)) => a.cmp(b),
            (Text(a), Text(b)) => collation.compare(a, b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Date(a), Date(b)) => date_parts(a).cmp(&date_parts(b)),
            (DateTime(a), DateTime(b)) => datetime_key(a).cmp(&datetime_key(b)),
            (Date(a), DateTime(b)) => {
                datetime_key(&a.and_time(NaiveTime::MIN)).cmp(&datetime_key(b))
            }
            (DateTime(a), Date(b)) => {
                datetime_key(a).cmp(&datetime_key(&b.and_time(NaiveTime::MIN)))
            }
            (Time(a), Time(b)) => a.cmp(b),
            (a, b) if a.is_numeric() && b.is_numeric() => cmp_numeric(a, b),
            (a, b) => a.kind_rank().cmp(&b.kind_rank()),
        }
    }

    /// A value that is equal (as a key) to every value this one equals under
    /// `collation`: strings are folded, integers that fit `i64` become `Int`.
    /// Use it to build hash keys that agree with [`Value::cmp_collated`].
    pub fn key_normalized(&self, collation: Collation) -> Value {
        match self {
            Value::Text(s) => match collation {
                Collation::Binary => self.clone(),
                Collation::Bin if !s.ends_with(' ') => self.clone(),
                _ => Value::text(collation.fold(s)),
            },
            Value::UInt(u) => match i64::try_from(*u) {
                Ok(i) => Value::Int(i),
                Err(_) => self.clone(),
            },
            Value::Decimal(d) if d.fract().is_zero() => match i64::try_from(d.trunc()) {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Decimal(d.normalize()),
            },
            Value::Decimal(d) => Value::Decimal(d.normalize()),
            Value::Double(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::Int(*f as i64),
            Value::Date(d) => Value::DateTime(d.and_hms_opt(0, 0, 0).unwrap_or_default()),
            _ => self.clone(),
        }
    }
}

/// A DATETIME's order: its date's fields (see [`date_parts`]), then time.
fn datetime_key(d: &NaiveDateTime) -> ((i32, u32, u32), NaiveTime) {
    (date_parts(&d.date()), d.time())
}

fn cmp_i64_u64(a: i64, b: u64) -> Ordering {
    if a < 0 {
        Ordering::Less
    } else {
        (a as u64).cmp(&b)
    }
}

fn cmp_numeric(a: &Value, b: &Value) -> Ordering {
    // Exact comparison where both sides are exact numbers; doubles otherwise.
    let exact = |v: &Value| match v {
        Value::Int(i) => Some(Decimal::from(*i)),
        Value::UInt(u) => Some(Decimal::from(*u)),
        Value::Decimal(d) => Some(*d),
        _ => None,
    };
    if let (Some(x), Some(y)) = (exact(a), exact(b)) {
        return x.cmp(&y);
    }
    let x = a.as_f64().unwrap_or(f64::NAN);
    let y = b.as_f64().unwrap_or(f64::NAN);
    // -0 equals 0 (total_cmp orders them); NaN, never stored, still orders.
    x.partial_cmp(&y).unwrap_or_else(|| x.total_cmp(&y))
}

/// Binary equality: same kind and same value, strings compared byte for byte.
/// Use [`Value::cmp_collated`] for SQL comparisons.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.cmp_collated(other, Collation::Binary) == Ordering::Equal
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Value) -> Ordering {
        self.cmp_collated(other, Collation::Binary)
    }
}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must agree with `Eq`: numerically equal numbers hash alike.
        match self.key_normalized(Collation::Binary) {
            Value::Null => 0u8.hash(state),
            Value::Int(i) => {
                1u8.hash(state);
                i.hash(state)
            }
            Value::UInt(u) => {
                1u8.hash(state);
                u.hash(state)
            }
            Value::Double(f) => {
                1u8.hash(state);
                f.to_bits().hash(state)
            }
            Value::Decimal(d) => {
                1u8.hash(state);
                d.hash(state)
            }
            Value::Text(s) => {
                4u8.hash(state);
                s.hash(state)
            }
            Value::Bytes(b) => {
                5u8.hash(state);
                b.hash(state)
            }
            Value::Date(d) => {
                2u8.hash(state);
                d.hash(state)
            }
            Value::DateTime(d) => {
                2u8.hash(state);
                d.hash(state)
            }
            Value::Time(t) => {
                3u8.hash(state);
                t.hash(state)
            }
        }
    }
}

/// A DOUBLE as MariaDB prints it (`my_gcvt`): the shortest digits that
/// read back as the same double, positionally from 1e-15 up, and past 1e15
/// while digits fall after the point (`0.0000000000000015`,
/// `100000000000000`, `1999999999999997.5`), else in exponent form
/// (`1e15`, `1.234567890123456e15`, `1e-16`); zero (either sign) is `0`.
fn write_double(f: &mut fmt::Formatter<'_>, d: f64) -> fmt::Result {
    if d == 0.0 {
        return write!(f, "0");
    }
    if !d.is_finite() {
        return write!(f, "{d}");
    }
    let exponent = format!("{d:e}");
    let (mantissa, power) = exponent.rsplit_once('e').unwrap_or((&exponent, "0"));
    let power: i32 = power.parse().unwrap_or(0);
    let digits = mantissa.bytes().filter(u8::is_ascii_digit).count() as i32;
    if power >= -15 && (power <= 14 || power + 1 < digits) {
        write!(f, "{d}")
    } else {
        write!(f, "{exponent}")
    }
}

/// MySQL-style text rendering (what the text protocol sends).
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "NULL"),
            Value::Int(i) => write!(f, "{i}"),
            Value::UInt(u) => write!(f, "{u}"),
            Value::Double(d) => write_double(f, *d),
            Value::Decimal(d) => write!(f, "{d}"),
            Value::Text(s) => write!(f, "{s}"),
            Value::Bytes(b) => write!(f, "{}", String::from_utf8_lossy(b)),
            Value::Date(d) => write!(f, "{}", date_text(d)),
            Value::DateTime(d) => {
                write!(f, "{}", datetime_text(d))?;
                let micros = d.and_utc().timestamp_subsec_micros();
                if micros != 0 {
                    write!(f, ".{micros:06}")?;
                }
                Ok(())
            }
            Value::Time(us) => {
                let sign = if *us < 0 { "-" } else { "" };
                let us = us.unsigned_abs();
                let secs = us / 1_000_000;
                let frac = us % 1_000_000;
                write!(
                    f,
                    "{sign}{:02}:{:02}:{:02}",
                    secs / 3600,
                    (secs / 60) % 60,
                    secs % 60
                )?;
                if frac != 0 {
                    write!(f, ".{frac:06}")?;
                }
                Ok(())
            }
        }
    }
}

impl Value {
    /// The text of a DATETIME or TIME value with `fsp` fractional digits,
    /// as MariaDB prints a column of that precision (`.500000` for
    /// DATETIME(6)); a value with a finer fraction than `fsp` (a computed
    /// one) keeps all six digits rather than lose them. `None` for other
    /// values.
    pub fn temporal_text(&self, fsp: u8) -> Option<String> {
        let (mut text, micros) = match self {
            Value::DateTime(d) => (datetime_text(d), d.and_utc().timestamp_subsec_micros()),
            Value::Time(us) => {
                // The sign is written apart: -0.25 s has no whole seconds.
                let magnitude = us.unsigned_abs();
                let whole = i64::try_from(magnitude - magnitude % 1_000_000).unwrap_or(i64::MAX);
                let sign = if *us < 0 { "-" } else { "" };
                (
                    format!("{sign}{}", Value::Time(whole)),
                    (magnitude % 1_000_000) as u32,
                )
            }
            _ => return None,
        };
        let fsp = u32::from(fsp.min(6));
        let digits = if micros % 10u32.pow(6 - fsp) == 0 {
            fsp
        } else {
            6
        };
        if digits > 0 {
            let fraction = format!("{micros:06}");
            text.push('.');
            text.push_str(&fraction[..digits as usize]);
        }
        Some(text)
    }
}

/// How strings compare. Every string column has one; the default for text
/// columns is [`Collation::GeneralCi`], matching MariaDB's
/// `utf8mb4_general_ci` (`'Alice' = 'alice'`, trailing spaces ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Collation {
    /// Byte order, every byte counting: `binary`, and Ladle's exact
    /// comparisons (`Value`'s `Eq` and `Ord`). Columns declared `_bin`
    /// before [`Collation::Bin`] existed still carry it.
    Binary,
    /// `utf8mb4_general_ci`: case-insensitive, PAD SPACE.
    #[default]
    GeneralCi,
    /// `utf8mb4_bin`: byte order, PAD SPACE as in MariaDB (`'a' = 'a '`:
    /// trailing spaces do not count in comparisons and keys; LIKE counts
    /// them). Last, so stored schemas keep their variants' numbers.
    Bin,
}

impl Collation {
    /// The collation a `COLLATE`/`CHARSET` name selects, if Ladle knows it.
    pub fn from_name(name: &str) -> Option<Collation> {
        let n = name.to_ascii_lowercase();
        if n == "binary" {
            Some(Collation::Binary)
        } else if n.ends_with("_bin") {
            Some(Collation::Bin)
        } else if n.ends_with("_ci")
            || n == "utf8mb4"
            || n == "utf8"
            || n == "utf8mb3"
            || n == "latin1"
        {
            Some(Collation::GeneralCi)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Collation::Binary | Collation::Bin => "utf8mb4_bin",
            Collation::GeneralCi => "utf8mb4_general_ci",
        }
    }

    /// The string every string equal to `s` under this collation folds to.
    ///
    /// Under `GeneralCi` each character becomes its MariaDB
    /// `utf8mb4_general_ci` weight ([`Collation::fold_char`]) and trailing
    /// spaces are dropped (PAD SPACE), so `'Café '`, `'cafe'` and `'CAFÉ'`
    /// fold alike; under `Bin` only trailing spaces are dropped. Storage's
    /// key encoding uses this too, so index lookups agree with comparisons.
    pub fn fold(self, s: &str) -> String {
        match self {
            Collation::Binary => s.to_string(),
            Collation::Bin => s.trim_end_matches(' ').to_string(),
            Collation::GeneralCi => {
                let trimmed = s.trim_end_matches(' ');
                if trimmed.is_ascii() {
                    trimmed.to_ascii_uppercase()
                } else {
                    trimmed.chars().map(|c| self.fold_char(c)).collect()
                }
            }
        }
    }

    /// One character's fold (see [`Collation::fold`]); what LIKE compares.
    ///
    /// `GeneralCi` maps a character to one character (never more): letters
    /// to their unaccented upper case (`'é'` -> `'E'`, `'ß'` -> `'S'`), as
    /// MariaDB's weight table does, and every character outside the Basic
    /// Multilingual Plane (emoji among them) to U+FFFD, so they all compare
    /// equal to each other, exactly as in MariaDB.
    pub fn fold_char(self, c: char) -> char {
        match self {
            Collation::Binary | Collation::Bin => c,
            Collation::GeneralCi => general_ci_weight(c),
        }
    }
    pub fn compare(self, a: &str, b: &str) -> Ordering {
        match self {
            Collation::Binary => a.as_bytes().cmp(b.as_bytes()),
            Collation::Bin => a
                .trim_end_matches(' ')
                .as_bytes()
                .cmp(b.trim_end_matches(' ').as_bytes()),
            // `fold(a).cmp(&fold(b))` without building the two strings
            // (folded characters compare by code point, as their UTF-8
            // does), from the first byte where they differ: an identical
            // prefix folds identically.
            Collation::GeneralCi => {
                let (a, b) = (a.trim_end_matches(' '), b.trim_end_matches(' '));
                let same = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                let start = (0..=same)
                    .rev()
                    .find(|&i| a.is_char_boundary(i))
                    .unwrap_or(0);
                a[start..]
                    .chars()
                    .map(general_ci_weight)
                    .cmp(b[start..].chars().map(general_ci_weight))
            }
        }
    }
}

/// `c`'s `utf8mb4_general_ci` weight, as a character.
fn general_ci_weight(c: char) -> char {
    use crate::general_ci_weights::WEIGHT_RUNS;
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    let Ok(cp) = u16::try_from(u32::from(c)) else {
        return char::REPLACEMENT_CHARACTER;
    };
    // The last run starting at or before `cp`; runs do not overlap.
    let i = WEIGHT_RUNS.partition_point(|run| run.0 <= cp);
    let Some(&(first, last, step, weight, same)) = i.checked_sub(1).map(|i| &WEIGHT_RUNS[i]) else {
        return c;
    };
    if cp > last || (cp - first) % u16::from(step) != 0 {
        return c;
    }
    let w = if same { weight } else { weight + (cp - first) };
    char::from_u32(u32::from(w)).unwrap_or(c)
}

/// A column type, as declared in CREATE TABLE.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SqlType {
    /// TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT: `bytes` is 1, 2, 3, 4 or 8.
    /// BOOL/BOOLEAN is `Int { bytes: 1, unsigned: false }`.
    Int {
        bytes: u8,
        unsigned: bool,
        /// The declared display width (`TINYINT(1)`), or `None` for the
        /// type's default (`int(11)`). Only shown (SHOW COLUMNS, result
        /// metadata): Rails reads `tinyint(1)` as a boolean column.
        display_width: Option<u8>,
    },
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Char(u32),
    VarChar(u32),
    /// TINYTEXT/TEXT/MEDIUMTEXT/LONGTEXT with their maximum byte length.
    Text(u32),
    Binary(u32),
    VarBinary(u32),
    Blob(u32),
    Date,
    /// `fsp`: fractional-seconds precision, 0..=6 (`DATETIME(6)`); stored
    /// values are truncated to it, as MariaDB does.
    DateTime {
        fsp: u8,
    },
    Timestamp {
        fsp: u8,
    },
    Time {
        fsp: u8,
    },
    Year,
    /// ENUM('a', 'b', ...): stored as its label text.
    Enum(Vec<String>),
    Json,
    /// BIT(n), 1 <= n <= 64: held as the unsigned number of its bits (see
    /// `bit.rs`). Last, so that catalogs written before it read as before.
    Bit(u8),
}

impl SqlType {
    pub fn is_integer(&self) -> bool {
        matches!(self, SqlType::Int { .. } | SqlType::Year | SqlType::Bit(_))
    }

    pub fn is_text(&self) -> bool {
        matches!(
            self,
            SqlType::Char(_)
                | SqlType::VarChar(_)
                | SqlType::Text(_)
                | SqlType::Enum(_)
                | SqlType::Json
        )
    }

    pub fn is_binary(&self) -> bool {
        matches!(
            self,
            SqlType::Binary(_) | SqlType::VarBinary(_) | SqlType::Blob(_)
        )
    }

    /// Fractional-seconds precision of DATETIME, TIMESTAMP and TIME; 0 for
    /// every other type.
    pub fn fsp(&self) -> u8 {
        match self {
            SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } | SqlType::Time { fsp } => *fsp,
            _ => 0,
        }
    }

    /// The display width an integer type is shown with: the declared one,
    /// else MariaDB's default (digits, plus one for a sign).
    pub fn int_display_width(bytes: u8, unsigned: bool, declared: Option<u8>) -> u8 {
        declared.unwrap_or(match (bytes, unsigned) {
            (1, false) => 4,
            (1, true) => 3,
            (2, false) => 6,
            (2, true) => 5,
            (3, false) => 9,
            (3, true) => 8,
            (4, false) => 11,
            (4, true) => 10,
            _ => 20,
        })
    }

    /// The SQL spelling, as SHOW CREATE TABLE and DESCRIBE print it.
    pub fn sql_name(&self) -> String {
        let with_fsp = |name: &str, fsp: u8| {
            if fsp == 0 {
                name.to_string()
            } else {
                format!("{name}({fsp})")
            }
        };
        match self {
            SqlType::Int {
                bytes,
                unsigned,
                display_width,
            } => {
                let width = SqlType::int_display_width(*bytes, *unsigned, *display_width);
                let name = match bytes {
                    1 => "tinyint",
                    2 => "smallint",
                    3 => "mediumint",
                    4 => "int",
                    _ => "bigint",
                };
                if *unsigned {
                    format!("{name}({width}) unsigned")
                } else {
                    format!("{name}({width})")
                }
            }
            SqlType::Float => "float".into(),
            SqlType::Double => "double".into(),
            SqlType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            SqlType::Char(n) => format!("char({n})"),
            SqlType::VarChar(n) => format!("varchar({n})"),
            SqlType::Text(n) => match n {
                0..=255 => "tinytext".into(),
                256..=65535 => "text".into(),
                65536..=16777215 => "mediumtext".into(),
                _ => "longtext".into(),
            },
            SqlType::Binary(n) => format!("binary({n})"),
            SqlType::VarBinary(n) => format!("varbinary({n})"),
            SqlType::Blob(n) => match n {
                0..=255 => "tinyblob".into(),
                256..=65535 => "blob".into(),
                65536..=16777215 => "mediumblob".into(),
                _ => "longblob".into(),
            },
            SqlType::Date => "date".into(),
            SqlType::DateTime { fsp } => with_fsp("datetime", *fsp),
            SqlType::Timestamp { fsp } => with_fsp("timestamp", *fsp),
            SqlType::Time { fsp } => with_fsp("time", *fsp),
            SqlType::Year => "year(4)".into(),
            SqlType::Enum(labels) => {
                let quoted: Vec<String> = labels
                    .iter()
                    .map(|l| format!("'{}'", l.replace('\'', "''")))
                    .collect();
                format!("enum({})", quoted.join(","))
            }
            SqlType::Json => "longtext".into(),
            SqlType::Bit(n) => format!("bit({n})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_with_zero_fields_round_trip_and_sort_by_their_fields() {
        let date = |y, m, d| Value::Date(date_from_parts(y, m, d).unwrap());
        let sorted = [
            date(0, 0, 0),
            date(0, 0, 1),
            date(1999, 12, 31),
            date(2024, 0, 0),
            date(2024, 0, 15),
            date(2024, 1, 1),
            date(2024, 2, 0),
            date(2024, 2, 29),
            date(9999, 12, 0),
            date(9999, 12, 31),
        ];
        for w in sorted.windows(2) {
            assert_eq!(
                w[0].cmp_collated(&w[1], Collation::Binary),
                Ordering::Less,
                "{w:?}"
            );
        }
        assert_eq!(date(2024, 0, 15).to_string(), "2024-00-15");
        assert_eq!(date(2024, 2, 0).to_string(), "2024-02-00");
        assert_eq!(date(0, 0, 0).to_string(), "0000-00-00");
        for (y, m, d) in [(2024, 0, 31), (0, 12, 0), (9999, 0, 0), (2024, 2, 29)] {
            let Value::Date(v) = date(y, m, d) else {
                unreachable!()
            };
            assert_eq!(date_parts(&v), (y, m, d));
        }
        assert_eq!(date_from_parts(2024, 13, 0), None);
        assert_eq!(date_from_parts(2024, 2, 30), None);
        assert!(!is_calendar_date(&date_from_parts(2024, 0, 1).unwrap()));
    }

    #[test]
    fn general_ci_ignores_case_and_trailing_spaces() {
        let ci = Collation::GeneralCi;
        assert_eq!(ci.compare("Alice", "alice"), Ordering::Equal);
        assert_eq!(ci.compare("alice  ", "ALICE"), Ordering::Equal);
        assert_eq!(ci.compare("alice", "bob"), Ordering::Less);
        assert_ne!(Collation::Binary.compare("Alice", "alice"), Ordering::Equal);
    }

    #[test]
    fn general_ci_folds_accents_like_mariadb() {
        let ci = Collation::GeneralCi;
        assert_eq!(ci.compare("café", "CAFE"), Ordering::Equal);
        assert_eq!(ci.compare("Äpfel", "apfel"), Ordering::Equal);
        assert_eq!(ci.compare("Å", "a"), Ordering::Equal);
        assert_eq!(ci.compare("straße", "STRASE"), Ordering::Equal);
        assert_eq!(ci.compare("Ё", "е"), Ordering::Equal);
        // Not folded by general_ci: Æ, Ø and Й stay distinct letters.
        assert_ne!(ci.compare("Æ", "A"), Ordering::Equal);
        assert_ne!(ci.compare("ø", "o"), Ordering::Equal);
        assert_ne!(ci.compare("й", "и"), Ordering::Equal);
        assert_eq!(ci.compare("æ", "Æ"), Ordering::Equal);
        // Outside the BMP every character weighs U+FFFD, as in MariaDB.
        assert_eq!(ci.compare("\u{1F600}", "\u{1F601}"), Ordering::Equal);
        assert_eq!(ci.fold("é "), "E");
        assert_eq!(ci.fold_char('ÿ'), 'Y');
    }

    #[test]
    fn general_ci_compare_orders_as_the_folded_strings_do() {
        // `compare` skips building the folded strings; it must order
        // exactly as comparing them would (ASCII, mixed, accents, trailing
        // spaces, prefixes, characters beyond the BMP).
        let words = [
            "",
            " ",
            "a",
            "A ",
            "ab",
            "aB",
            "abc",
            "abd",
            "b",
            "Z",
            "[",
            "_",
            "`",
            "{",
            "é",
            "E",
            "ea",
            "éb",
            "Ä",
            "straße",
            "STRASSE",
            "Æ",
            "ø",
            "\u{1F600}",
            "x\u{1F600}",
            "zz  ",
            "\u{7f}",
            "\u{80}",
            "ÿ",
            "aé",
            "aè",
            "aÉ",
            "ae",
            "éa",
            "ÉA",
        ];
        let ci = Collation::GeneralCi;
        for a in words {
            for b in words {
                assert_eq!(
                    ci.compare(a, b),
                    ci.fold(a).cmp(&ci.fold(b)),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    #[test]
    fn double_text_is_mariadbs() {
        for (d, text) in [
            (1e15, "1e15"),
            (1e14, "100000000000000"),
            (1.234567890123456e15, "1.234567890123456e15"),
            (999999999999999.9, "999999999999999.9"),
            (1.5e-15, "0.0000000000000015"),
            (1e-16, "1e-16"),
            (-1.25, "-1.25"),
            (-0.0, "0"),
            (5e-324, "5e-324"),
            (0.30000000000000004, "0.30000000000000004"),
            (1999999999999997.5, "1999999999999997.5"),
        ] {
            assert_eq!(Value::Double(d).to_string(), text);
        }
    }

    #[test]
    fn weight_runs_are_sorted_and_disjoint() {
        use crate::general_ci_weights::WEIGHT_RUNS;
        for pair in WEIGHT_RUNS.windows(2) {
            assert!(pair[0].1 < pair[1].0, "{pair:?}");
        }
        for &(first, last, step, _, _) in WEIGHT_RUNS {
            assert!(first <= last && step > 0 && (last - first) % u16::from(step) == 0);
        }
    }

    #[test]
    fn temporal_text_shows_the_declared_fraction() {
        let dt = crate::parse_datetime("2020-01-02 03:04:05.5").unwrap();
        assert_eq!(
            Value::DateTime(dt).temporal_text(6).unwrap(),
            "2020-01-02 03:04:05.500000"
        );
        assert_eq!(
            Value::DateTime(dt).temporal_text(2).unwrap(),
            "2020-01-02 03:04:05.50"
        );
        // Finer than declared (a computed value): nothing is dropped.
        assert_eq!(
            Value::DateTime(dt).temporal_text(0).unwrap(),
            "2020-01-02 03:04:05.500000"
        );
        assert_eq!(
            Value::Time(-1_250_000).temporal_text(3).unwrap(),
            "-00:00:01.250"
        );
        assert_eq!(
            Value::Time(3_000_000).temporal_text(1).unwrap(),
            "00:00:03.0"
        );
        assert_eq!(
            Value::Time(-250_000).temporal_text(2).unwrap(),
            "-00:00:00.25"
        );
        assert_eq!(Value::Int(1).temporal_text(1), None);
    }

    #[test]
    fn numbers_compare_across_representations() {
        assert_eq!(Value::Int(5), Value::UInt(5));
        assert_eq!(Value::Int(5), Value::Decimal(Decimal::from(5)));
        assert!(Value::Int(-1) < Value::UInt(0));
        assert!(Value::Null < Value::Int(i64::MIN));
        let mut h1 = std::collections::hash_map::DefaultHasher::new();
        let mut h2 = std::collections::hash_map::DefaultHasher::new();
        Value::Int(7).hash(&mut h1);
        Value::UInt(7).hash(&mut h2);
        assert_eq!(h1.finish(), h2.finish());
    }
}
