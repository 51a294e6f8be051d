//! Memcomparable key encoding: the only place that turns values into key
//! bytes. Byte order of encoded keys equals [`Value::cmp_collated`] order of
//! the (coerced) values under the column's collation, so prefix and range
//! scans work with RocksDB's default bytewise comparator.
//!
//! Each value is self-delimiting, so a concatenation of encoded values is
//! itself memcomparable and an encoded prefix of columns is a byte prefix:
//!
//! | value | bytes |
//! |---|---|
//! | NULL | `00` (sorts first) |
//! | non-NULL | `01` then the payload below |
//! | signed int, YEAR | `i64` big-endian with the sign bit flipped |
//! | unsigned int | `u64` big-endian |
//! | FLOAT, DOUBLE | IEEE bits: negative -> all bits inverted, else sign bit set |
//! | DECIMAL(p, s) | mantissa at the column's scale as `i128`, sign flipped |
//! | text | the collation's folded form (`Collation::fold`), escaped |
//! | bytes | escaped: `00` -> `00 FF`, terminated by `00 01` |
//! | DATE | its fields as `(year * 13 + month) * 32 + day`, `i64`, sign flipped |
//! | DATETIME, TIMESTAMP | the DATE number times 86,400,000,000 plus microseconds since midnight, `i64`, sign flipped |
//! | TIME | microseconds as `i64`, sign flipped |
//!
//! Text keys under `GeneralCi` hold the folded string (MariaDB's
//! utf8mb4_general_ci weights: case and accents folded, trailing spaces
//! dropped), so 'Alice', 'alice' and 'Alíce' are the same key (they collide
//! in a UNIQUE index and a lookup for one finds the others); the row itself
//! keeps the original spelling. Changing the fold changes keys on disk, so
//! it bumps the catalog's format version.
//!
//! Hidden row ids (tables without a primary key) are `epoch:u64 BE ++
//! sequence:u64 BE`; change-log keys are the LSN as `u64` big-endian.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use ladle_common::{Collation, ColumnSchema, Lsn, SqlType, Value};
use rust_decimal::Decimal;

const NULL_TAG: u8 = 0x00;
const VALUE_TAG: u8 = 0x01;

/// Appends the key encoding of `v` (already coerced to `column`'s type).
pub(crate) fn encode_value(out: &mut Vec<u8>, v: &Value, column: &ColumnSchema) {
    if v.is_null() {
        out.push(NULL_TAG);
        return;
    }
    out.push(VALUE_TAG);
    match (&column.ty, v) {
        (SqlType::Int { unsigned: true, .. } | SqlType::Bit(_), _) => {
            let u = match v {
                Value::UInt(u) => *u,
                Value::Int(i) => *i as u64,
                other => other.as_f64().unwrap_or(0.0) as u64,
            };
            out.extend_from_slice(&u.to_be_bytes());
        }
        (SqlType::Int { .. } | SqlType::Year, _) => {
            let i = match v {
                Value::Int(i) => *i,
                Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
                other => other.as_f64().unwrap_or(0.0) as i64,
            };
            encode_i64(out, i);
        }
        (SqlType::Float | SqlType::Double, _) => {
            // -0 and 0 are one key, as they compare equal (-0 + 0 is 0).
            let f = v.as_f64().unwrap_or(0.0) + 0.0;
            let bits = f.to_bits();
            let ordered = if bits >> 63 == 1 {
                !bits
            } else {
                bits | (1 << 63)
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        (SqlType::Decimal { scale, .. }, _) => {
            let mut d = match v {
                Value::Decimal(d) => *d,
                Value::Int(i) => Decimal::from(*i),
                Value::UInt(u) => Decimal::from(*u),
                _ => Decimal::ZERO,
            };
            d.rescale(u32::from(*scale));
            let m = d.mantissa();
            out.extend_from_slice(&((m as u128) ^ (1u128 << 127)).to_be_bytes());
        }
        (_, Value::Text(s)) => {
            let folded = match column.collation {
                Collation::Binary => std::borrow::Cow::Borrowed(&**s),
                c => std::borrow::Cow::Owned(c.fold(s)),
            };
            encode_bytes(out, folded.as_bytes());
        }
        (_, Value::Bytes(b)) => encode_bytes(out, b),
        (_, Value::Date(d)) => encode_i64(out, date_number(d)),
        (_, Value::DateTime(dt)) => encode_i64(out, datetime_number(dt)),
        (_, Value::Time(us)) => encode_i64(out, *us),
        // A value of another kind than the column holds cannot come from the
        // write path (values are coerced first); encode it as its text.
        (_, other) => encode_bytes(out, other.to_string().as_bytes()),
    }
}

/// Encodes `values` (coerced) of `columns` as one key.
pub(crate) fn encode_key<'a>(
    values: impl IntoIterator<Item = (&'a Value, &'a ColumnSchema)>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    for (v, c) in values {
        encode_value(&mut out, v, c);
    }
    out
}

/// Microseconds per day.
const DAY_MICROS: i64 = 86_400_000_000;

/// A date as a number in MySQL's order of dates, which is the order of
/// their fields: the zero date, and dates with a zero month or day
/// (`2020-00-15` between `2019-12-31` and `2020-01-01`), fall where MySQL
/// puts them, which chrono's day count (they are held far in the past, see
/// [`ladle_common::date_parts`]) would not give.
fn date_number(d: &NaiveDate) -> i64 {
    let (y, m, day) = ladle_common::date_parts(d);
    (i64::from(y) * 13 + i64::from(m)) * 32 + i64::from(day)
}

fn date_from_number(n: i64) -> Option<NaiveDate> {
    let (y, rest) = (n.div_euclid(13 * 32), n.rem_euclid(13 * 32));
    ladle_common::date_from_parts(
        i32::try_from(y).ok()?,
        (rest / 32) as u32,
        (rest % 32) as u32,
    )
}

/// A datetime as a number in MySQL's order: its date's number (see
/// [`date_number`]), then the time of day. Saturates only past the years
/// chrono reaches and MySQL does not (any year up to about 250,000 fits).
fn datetime_number(dt: &NaiveDateTime) -> i64 {
    let t = dt.time();
    let micros =
        i64::from(t.num_seconds_from_midnight()) * 1_000_000 + i64::from(t.nanosecond() / 1000);
    date_number(&dt.date())
        .saturating_mul(DAY_MICROS)
        .saturating_add(micros)
}

fn datetime_from_number(n: i64) -> Option<NaiveDateTime> {
    let date = date_from_number(n.div_euclid(DAY_MICROS))?;
    let micros = n.rem_euclid(DAY_MICROS);
    let time = NaiveTime::from_num_seconds_from_midnight_opt(
        (micros / 1_000_000) as u32,
        (micros % 1_000_000) as u32 * 1000,
    )?;
    Some(date.and_time(time))
}

fn encode_i64(out: &mut Vec<u8>, i: i64) {
    out.extend_from_slice(&((i as u64) ^ (1 << 63)).to_be_bytes());
}

fn encode_bytes(out: &mut Vec<u8>, b: &[u8]) {
    for &byte in b {
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Decodes one value of `column` from the front of `input`, advancing it.
/// Text under `GeneralCi` comes back folded (the key holds no more).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn decode_value(input: &mut &[u8], column: &ColumnSchema) -> Option<Value> {
    let (&tag, rest) = input.split_first()?;
    *input = rest;
    if tag == NULL_TAG {
        return Some(Value::Null);
    }
    if tag != VALUE_TAG {
        return None;
    }
    let v = match &column.ty {
        SqlType::Int { unsigned: true, .. } | SqlType::Bit(_) => {
            let u = u64::from_be_bytes(take::<8>(input)?);
            match i64::try_from(u) {
                Ok(i) => Value::Int(i),
                Err(_) => Value::UInt(u),
            }
        }
        SqlType::Int { .. } | SqlType::Year => Value::Int(decode_i64(input)?),
        SqlType::Float | SqlType::Double => {
            let o = u64::from_be_bytes(take::<8>(input)?);
            let bits = if o >> 63 == 1 { o & !(1 << 63) } else { !o };
            Value::Double(f64::from_bits(bits))
        }
        SqlType::Decimal { scale, .. } => {
            let m = (u128::from_be_bytes(take::<16>(input)?) ^ (1u128 << 127)) as i128;
            Value::Decimal(Decimal::try_from_i128_with_scale(m, u32::from(*scale)).ok()?)
        }
        SqlType::Date => Value::Date(date_from_number(decode_i64(input)?)?),
        SqlType::DateTime { .. } | SqlType::Timestamp { .. } => {
            Value::DateTime(datetime_from_number(decode_i64(input)?)?)
        }
        SqlType::Time { .. } => Value::Time(decode_i64(input)?),
        SqlType::Binary(_) | SqlType::VarBinary(_) | SqlType::Blob(_) => {
            Value::bytes(decode_bytes(input)?)
        }
        SqlType::Char(_)
        | SqlType::VarChar(_)
        | SqlType::Text(_)
        | SqlType::Enum(_)
        | SqlType::Json => Value::text(String::from_utf8(decode_bytes(input)?).ok()?),
    };
    Some(v)
}

#[cfg_attr(not(test), allow(dead_code))]
fn take<const N: usize>(input: &mut &[u8]) -> Option<[u8; N]> {
    if input.len() < N {
        return None;
    }
    let (head, rest) = input.split_at(N);
    *input = rest;
    head.try_into().ok()
}

#[cfg_attr(not(test), allow(dead_code))]
fn decode_i64(input: &mut &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(take::<8>(input)?) ^ (1 << 63)) as i64)
}

#[cfg_attr(not(test), allow(dead_code))]
fn decode_bytes(input: &mut &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == 0 {
            match input.get(i + 1)? {
                0xFF => out.push(0),
                0x01 => {
                    *input = &input[i + 2..];
                    return Some(out);
                }
                _ => return None,
            }
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
    None
}

/// The hidden row id of a row in a table without a primary key.
pub(crate) fn row_id(epoch: u64, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    k.extend_from_slice(&epoch.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub(crate) fn lsn_key(lsn: Lsn) -> [u8; 8] {
    lsn.to_be_bytes()
}

pub(crate) fn decode_lsn(key: &[u8]) -> Option<Lsn> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}

/// The smallest key greater than every key starting with `prefix`, or `None`
/// if there is none (the prefix is all `FF`).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last != 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use ladle_common::coerce;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn column_types() -> Vec<ColumnSchema> {
        let mut bin = ColumnSchema::new("s", SqlType::VarChar(64));
        bin.collation = Collation::Binary;
        vec![
            ColumnSchema::new(
                "i",
                SqlType::Int {
                    bytes: 8,
                    unsigned: false,
                    display_width: None,
                },
            ),
            ColumnSchema::new(
                "u",
                SqlType::Int {
                    bytes: 8,
                    unsigned: true,
                    display_width: None,
                },
            ),
            ColumnSchema::new(
                "t",
                SqlType::Int {
                    bytes: 1,
                    unsigned: false,
                    display_width: None,
                },
            ),
            ColumnSchema::new("d", SqlType::Double),
            ColumnSchema::new(
                "m",
                SqlType::Decimal {
                    precision: 20,
                    scale: 4,
                },
            ),
            ColumnSchema::new("ci", SqlType::VarChar(64)),
            bin,
            ColumnSchema::new("b", SqlType::VarBinary(64)),
            ColumnSchema::new("dt", SqlType::Date),
            ColumnSchema::new("ts", SqlType::DateTime { fsp: 0 }),
            ColumnSchema::new("tm", SqlType::Time { fsp: 0 }),
            ColumnSchema::new("y", SqlType::Year),
        ]
    }

    /// Arbitrary raw values; they are coerced to a column before encoding.
    fn raw_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Int),
            any::<u64>().prop_map(Value::UInt),
            (-1.0e12f64..1.0e12).prop_map(Value::Double),
            (any::<i64>(), 0u32..8)
                .prop_map(|(m, s)| Value::Decimal(Decimal::new(m % 1_000_000_000_000, s))),
            "[a-eA-E \\x00éÉßs😀😁]{0,6}".prop_map(Value::text),
            proptest::collection::vec(any::<u8>(), 0..6).prop_map(Value::bytes),
            (0i64..3_000_000).prop_map(|d| Value::Date(
                NaiveDate::from_num_days_from_ce_opt(d as i32 + 1).unwrap_or_default()
            )),
            (-2_000_000_000i64..4_000_000_000).prop_map(|s| Value::DateTime(
                DateTime::from_timestamp(s, 0)
                    .map(|d| d.naive_utc())
                    .unwrap_or(NaiveDateTime::MIN)
            )),
            (-3_000_000_000_000i64..3_000_000_000_000).prop_map(Value::Time),
            // The zero date and dates with a zero month or day, alone and
            // with a time of day.
            (0i32..=9999, 0u32..=12, 0u32..=31, 0u32..86_400).prop_map(|(y, m, d, secs)| {
                let day = if d % 2 == 0 { 0 } else { d };
                let date = ladle_common::date_from_parts(y, m % 3, day).unwrap_or_default();
                match NaiveTime::from_num_seconds_from_midnight_opt(secs, 0) {
                    Some(t) if secs % 2 == 0 => Value::DateTime(date.and_time(t)),
                    _ => Value::Date(date),
                }
            }),
        ]
    }

    fn normalized(v: &Value, c: &ColumnSchema) -> Value {
        match v {
            Value::Text(s) => Value::text(c.collation.fold(s)),
            other => other.clone(),
        }
    }

    proptest! {
        #[test]
        fn order_matches_cmp_collated(a in raw_value(), b in raw_value(), col in 0usize..12) {
            let c = &column_types()[col];
            let (Ok(a), Ok(b)) = (coerce(&a, c), coerce(&b, c)) else { return Ok(()) };
            let ka = encode_key([(&a, c)]);
            let kb = encode_key([(&b, c)]);
            prop_assert_eq!(ka.cmp(&kb), a.cmp_collated(&b, c.collation), "{:?} {:?} in {:?}", a, b, c.ty);
        }

        #[test]
        fn round_trips(a in raw_value(), col in 0usize..12) {
            let c = &column_types()[col];
            let Ok(a) = coerce(&a, c) else { return Ok(()) };
            let k = encode_key([(&a, c)]);
            let mut input = &k[..];
            let back = decode_value(&mut input, c);
            prop_assert!(input.is_empty());
            let back = back.expect("decodes");
            prop_assert_eq!(back.cmp_collated(&normalized(&a, c), Collation::Binary), Ordering::Equal,
                "{:?} came back as {:?}", a, back);
        }

        #[test]
        fn composite_keys_order_and_prefix(a in raw_value(), b in raw_value(), x in raw_value(), y in raw_value()) {
            let cols = column_types();
            let (c1, c2) = (&cols[5], &cols[0]);
            let vals = [(coerce(&a, c1), coerce(&x, c2)), (coerce(&b, c1), coerce(&y, c2))];
            let [(Ok(a), Ok(x)), (Ok(b), Ok(y))] = vals else { return Ok(()) };
            let k1 = encode_key([(&a, c1), (&x, c2)]);
            let k2 = encode_key([(&b, c1), (&y, c2)]);
            let expected = a.cmp_collated(&b, c1.collation).then(x.cmp_collated(&y, c2.collation));
            prop_assert_eq!(k1.cmp(&k2), expected);
            prop_assert!(k1.starts_with(&encode_key([(&a, c1)])));
        }
    }

    #[test]
    fn dates_with_zero_fields_key_between_calendar_dates() {
        let c = ColumnSchema::new("d", SqlType::Date);
        let key = |y, m, d| {
            encode_key([(
                &Value::Date(ladle_common::date_from_parts(y, m, d).unwrap()),
                &c,
            )])
        };
        let ordered = [
            key(0, 0, 0),
            key(2019, 12, 31),
            key(2020, 0, 15),
            key(2020, 1, 1),
            key(2020, 4, 30),
            key(2020, 5, 0),
            key(2020, 5, 1),
        ];
        assert!(ordered.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn general_ci_keys_collide() {
        let c = ColumnSchema::new("name", SqlType::VarChar(10));
        assert_eq!(
            encode_key([(&Value::text("Alice"), &c)]),
            encode_key([(&Value::text("alice  "), &c)])
        );
        assert_eq!(
            encode_key([(&Value::text("Alíce"), &c)]),
            encode_key([(&Value::text("ALICE"), &c)])
        );
        let mut bin = c.clone();
        bin.collation = Collation::Binary;
        assert_ne!(
            encode_key([(&Value::text("Alice"), &bin)]),
            encode_key([(&Value::text("alice"), &bin)])
        );
    }

    #[test]
    fn null_sorts_first_and_successor() {
        let c = ColumnSchema::new(
            "i",
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
        );
        assert!(encode_key([(&Value::Null, &c)]) < encode_key([(&Value::Int(i64::MIN), &c)]));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }
}
