//! Decoding a stored row with only some of its columns: a full scan feeding
//! a COUNT or SUM needs a few integer columns of each row, not its TEXT
//! (a scan of 120k comments otherwise allocates and copies both bodies of
//! each). Columns not kept read as NULL, in place, so positions still
//! follow the schema.

use std::fmt;

use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::value::Value;

/// A row, as `crate::Row` names it (the alias lives in the crate root).
type Row = Vec<Value>;

/// Deserializes a [`Row`] (as serde writes `Vec<Value>`) keeping column `i`
/// only where `keep[i]` is true; columns past `keep`'s end are kept.
pub struct RowColumns<'k> {
    pub keep: &'k [bool],
}

/// A [`Value`] read and dropped without allocating: the same variants in the
/// same order (serde formats without field names, such as postcard, match
/// variants by position), strings and bytes borrowed from the input. Dates,
/// times and decimals are written as strings (chrono's and rust_decimal's
/// serde forms), so they are skipped as strings. `row_columns_match_value`
/// (below) fails if [`Value`] gains or reorders a variant without this.
#[derive(Deserialize)]
#[allow(dead_code)] // only deserialized, never read
enum SkippedValue<'a> {
    Null,
    Int(i64),
    UInt(u64),
    Double(f64),
    Decimal(&'a str),
    Text(&'a str),
    Bytes(&'a [u8]),
    Date(&'a str),
    DateTime(&'a str),
    Time(i64),
}

impl<'de> DeserializeSeed<'de> for RowColumns<'_> {
    type Value = Row;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Row, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RowColumns<'_> {
    type Value = Row;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a row of values")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Row, A::Error> {
        let mut row = Vec::with_capacity(seq.size_hint().unwrap_or(self.keep.len()));
        loop {
            let kept = self.keep.get(row.len()).copied().unwrap_or(true);
            let value = if kept {
                seq.next_element::<Value>()?
            } else {
                seq.next_element::<SkippedValue>()?.map(|_| Value::Null)
            };
            match value {
                Some(v) => row.push(v),
                None => return Ok(row),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::NaiveDate;
    use serde::de::DeserializeSeed;

    use super::RowColumns;
    use crate::value::Value;

    /// One value of every variant: if `Value` gains or reorders one,
    /// `SkippedValue` must follow, or skipping misreads what comes after.
    fn every_variant() -> Vec<Value> {
        let date = NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
        vec![
            Value::Null,
            Value::Int(-7),
            Value::UInt(u64::MAX),
            Value::Double(1.5),
            Value::Decimal("12.345".parse().unwrap()),
            Value::Text(Arc::from("héllo")),
            Value::Bytes(Arc::from(&[0u8, 255, 10][..])),
            Value::Date(date),
            Value::DateTime(date.and_hms_micro_opt(1, 2, 3, 456).unwrap()),
            Value::Time(-3_600_000_001),
        ]
    }

    /// No wildcard: a new variant fails to compile here.
    fn variant_index(v: &Value) -> usize {
        match v {
            Value::Null => 0,
            Value::Int(_) => 1,
            Value::UInt(_) => 2,
            Value::Double(_) => 3,
            Value::Decimal(_) => 4,
            Value::Text(_) => 5,
            Value::Bytes(_) => 6,
            Value::Date(_) => 7,
            Value::DateTime(_) => 8,
            Value::Time(_) => 9,
        }
    }

    fn decode(bytes: &[u8], keep: &[bool]) -> Vec<Value> {
        let mut de = postcard::Deserializer::from_bytes(bytes);
        RowColumns { keep }.deserialize(&mut de).unwrap()
    }

    #[test]
    fn row_columns_match_value() {
        let row = every_variant();
        let bytes = postcard::to_allocvec(&row).unwrap();
        let variants: Vec<usize> = row.iter().map(variant_index).collect();
        assert_eq!(
            variants,
            (0..10).collect::<Vec<_>>(),
            "each variant once, in order"
        );
        // Each column alone, and each column dropped alone.
        for i in 0..row.len() {
            let only: Vec<bool> = (0..row.len()).map(|j| j == i).collect();
            let expected: Vec<Value> = (0..row.len())
                .map(|j| if j == i { row[j].clone() } else { Value::Null })
                .collect();
            assert_eq!(decode(&bytes, &only), expected, "keeping only column {i}");
            let all_but: Vec<bool> = only.iter().map(|k| !k).collect();
            let expected: Vec<Value> = (0..row.len())
                .map(|j| if j == i { Value::Null } else { row[j].clone() })
                .collect();
            assert_eq!(decode(&bytes, &all_but), expected, "dropping column {i}");
        }
        // A short mask keeps the rest; an empty row decodes empty.
        assert_eq!(decode(&bytes, &[false]), {
            let mut r = row.clone();
            r[0] = Value::Null;
            r
        });
        let empty = postcard::to_allocvec(&Vec::<Value>::new()).unwrap();
        assert_eq!(decode(&empty, &[false, true]), Vec::<Value>::new());
    }
}
