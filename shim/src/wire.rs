//! Values and column metadata on the wire: `SqlType` -> MySQL column type and
//! flags, `Value` -> text or binary protocol cells, and prepared-statement
//! parameters -> `Value`.

use std::time::Duration;

use chrono::{NaiveDate, NaiveDateTime};
use ladle_common::{SqlType, Value};
use ladle_dataflow::{OutputColumn, ResultRows, RowRef};
use opensrv_mysql::{Column, ColumnFlags, ColumnType, RowWriter, ValueInner};
use tokio::io::AsyncWrite;

/// The MySQL column type and flags describing `ty`.
pub fn column_type(ty: &SqlType) -> (ColumnType, ColumnFlags) {
    let mut flags = ColumnFlags::empty();
    let t = match ty {
        SqlType::Int { bytes, unsigned } => {
            if *unsigned {
                flags |= ColumnFlags::UNSIGNED_FLAG;
            }
            flags |= ColumnFlags::NUM_FLAG;
            match bytes {
                1 => ColumnType::MYSQL_TYPE_TINY,
                2 => ColumnType::MYSQL_TYPE_SHORT,
                3 => ColumnType::MYSQL_TYPE_INT24,
                4 => ColumnType::MYSQL_TYPE_LONG,
                _ => ColumnType::MYSQL_TYPE_LONGLONG,
            }
        }
        SqlType::Year => {
            flags |= ColumnFlags::UNSIGNED_FLAG | ColumnFlags::ZEROFILL_FLAG;
            ColumnType::MYSQL_TYPE_YEAR
        }
        SqlType::Float => ColumnType::MYSQL_TYPE_FLOAT,
        SqlType::Double => ColumnType::MYSQL_TYPE_DOUBLE,
        SqlType::Decimal { .. } => ColumnType::MYSQL_TYPE_NEWDECIMAL,
        SqlType::Char(_) => ColumnType::MYSQL_TYPE_STRING,
        SqlType::VarChar(_) => ColumnType::MYSQL_TYPE_VAR_STRING,
        SqlType::Text(_) | SqlType::Json => {
            flags |= ColumnFlags::BLOB_FLAG;
            ColumnType::MYSQL_TYPE_BLOB
        }
        SqlType::Enum(_) => {
            flags |= ColumnFlags::ENUM_FLAG;
            ColumnType::MYSQL_TYPE_STRING
        }
        SqlType::Binary(_) => {
            flags |= ColumnFlags::BINARY_FLAG;
            ColumnType::MYSQL_TYPE_STRING
        }
        SqlType::VarBinary(_) => {
            flags |= ColumnFlags::BINARY_FLAG;
            ColumnType::MYSQL_TYPE_VAR_STRING
        }
        SqlType::Blob(_) => {
            flags |= ColumnFlags::BINARY_FLAG | ColumnFlags::BLOB_FLAG;
            ColumnType::MYSQL_TYPE_BLOB
        }
        SqlType::Date => ColumnType::MYSQL_TYPE_DATE,
        SqlType::DateTime => ColumnType::MYSQL_TYPE_DATETIME,
        SqlType::Timestamp => ColumnType::MYSQL_TYPE_TIMESTAMP,
        SqlType::Time => ColumnType::MYSQL_TYPE_TIME,
    };
    (t, flags)
}

/// Wire metadata for result columns, adjusted so every value in `rows` can
/// be encoded under it (a computed column whose values do not fit its
/// declared type is widened; NOT NULL is dropped if a NULL appears).
pub fn wire_columns(cols: &[OutputColumn], rows: &ResultRows) -> Vec<Column> {
    let mut out: Vec<Column> = cols
        .iter()
        .map(|c| {
            let (coltype, mut colflags) = column_type(&c.ty);
            if !c.nullable {
                colflags |= ColumnFlags::NOT_NULL_FLAG;
            }
            Column {
                table: c.table.clone(),
                column: c.name.clone(),
                coltype,
                colflags,
            }
        })
        .collect();
    let mut saw_null = vec![false; cols.len()];
    let mut widened = vec![false; cols.len()];
    // One pass, row by row: a large result's rows are touched once here
    // (then once more to write them), not once per column.
    for row in rows.iter() {
        for (i, c) in out.iter_mut().enumerate() {
            let v = row.get(i).unwrap_or(&Value::Null);
            if v.is_null() {
                saw_null[i] = true;
            } else if !fits(
                v,
                c.coltype,
                c.colflags.contains(ColumnFlags::UNSIGNED_FLAG),
            ) {
                widened[i] = true;
                widen(c, v);
            }
        }
    }
    for (i, c) in out.iter_mut().enumerate() {
        // A second pass after widening: if anything still does not fit
        // (mixed signed/unsigned extremes), fall back to a string. Without
        // widening every value was checked against the final type.
        if widened[i]
            && rows.iter().any(|r| {
                let v = r.get(i).unwrap_or(&Value::Null);
                !v.is_null()
                    && !fits(
                        v,
                        c.coltype,
                        c.colflags.contains(ColumnFlags::UNSIGNED_FLAG),
                    )
            })
        {
            c.coltype = ColumnType::MYSQL_TYPE_VAR_STRING;
            c.colflags
                .remove(ColumnFlags::UNSIGNED_FLAG | ColumnFlags::NUM_FLAG);
        }
        if saw_null[i] {
            c.colflags.remove(ColumnFlags::NOT_NULL_FLAG);
        }
    }
    out
}

/// Widens `c` for a value that does not fit it: integers to BIGINT (signed,
/// or unsigned for a large unsigned value), anything else to a string.
fn widen(c: &mut Column, v: &Value) {
    let int = matches!(v, Value::Int(_) | Value::UInt(_)) && is_int_type(c.coltype);
    if int && fits(v, ColumnType::MYSQL_TYPE_LONGLONG, false) {
        c.coltype = ColumnType::MYSQL_TYPE_LONGLONG;
        c.colflags.remove(ColumnFlags::UNSIGNED_FLAG);
    } else if int && matches!(v, Value::UInt(_)) {
        c.coltype = ColumnType::MYSQL_TYPE_LONGLONG;
        c.colflags.insert(ColumnFlags::UNSIGNED_FLAG);
    } else {
        c.coltype = ColumnType::MYSQL_TYPE_VAR_STRING;
        c.colflags
            .remove(ColumnFlags::UNSIGNED_FLAG | ColumnFlags::NUM_FLAG);
    }
}

fn is_int_type(t: ColumnType) -> bool {
    matches!(
        t,
        ColumnType::MYSQL_TYPE_TINY
            | ColumnType::MYSQL_TYPE_SHORT
            | ColumnType::MYSQL_TYPE_INT24
            | ColumnType::MYSQL_TYPE_LONG
            | ColumnType::MYSQL_TYPE_LONGLONG
            | ColumnType::MYSQL_TYPE_YEAR
    )
}

fn int_value(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(i128::from(*i)),
        Value::UInt(u) => Some(i128::from(*u)),
        _ => None,
    }
}

/// Whether `v` can be encoded (in the binary protocol) as `t`.
fn fits(v: &Value, t: ColumnType, unsigned: bool) -> bool {
    use ColumnType::*;
    match t {
        MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG
        | MYSQL_TYPE_LONGLONG | MYSQL_TYPE_YEAR => {
            let Some(i) = int_value(v) else { return false };
            let bits = match t {
                MYSQL_TYPE_TINY => 8,
                MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => 16,
                MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG => 32,
                _ => 64,
            };
            if unsigned {
                i >= 0 && i < (1i128 << bits)
            } else {
                i >= -(1i128 << (bits - 1)) && i < (1i128 << (bits - 1))
            }
        }
        MYSQL_TYPE_FLOAT | MYSQL_TYPE_DOUBLE => v.as_f64().is_some(),
        MYSQL_TYPE_DATE | MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP => {
            matches!(v, Value::Date(_) | Value::DateTime(_))
        }
        MYSQL_TYPE_TIME => matches!(v, Value::Time(us) if *us >= 0),
        _ => true,
    }
}

/// Writes one row; `binary` selects the binary (prepared statement) protocol.
/// The columns must come from [`wire_columns`] over the same rows.
pub fn write_row<W: AsyncWrite + Unpin>(
    w: &mut RowWriter<'_, W>,
    cols: &[Column],
    row: RowRef<'_>,
    binary: bool,
) -> std::io::Result<()> {
    for (i, c) in cols.iter().enumerate() {
        let v = row.get(i).unwrap_or(&Value::Null);
        write_cell(w, c, v, binary)?;
    }
    Ok(())
}

fn write_cell<W: AsyncWrite + Unpin>(
    w: &mut RowWriter<'_, W>,
    c: &Column,
    v: &Value,
    binary: bool,
) -> std::io::Result<()> {
    use ColumnType::*;
    if v.is_null() {
        return w.write_col(None::<i64>);
    }
    if !binary {
        // Integers (most cells of large results) are formatted in place,
        // without `to_string`'s allocation; the text is the same.
        let mut digits = [0u8; 20];
        return match v {
            Value::Int(i) => w.write_col(int_text(*i < 0, i.unsigned_abs(), &mut digits)),
            Value::UInt(u) => w.write_col(int_text(false, *u, &mut digits)),
            Value::Bytes(b) => w.write_col(&b[..]),
            Value::Double(d) if c.coltype == MYSQL_TYPE_FLOAT => {
                w.write_col(format_float(*d as f32))
            }
            other => w.write_col(other.to_string()),
        };
    }
    let unsigned = c.colflags.contains(ColumnFlags::UNSIGNED_FLAG);
    match c.coltype {
        MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG
        | MYSQL_TYPE_LONGLONG | MYSQL_TYPE_YEAR => {
            let i = int_value(v).unwrap_or(0);
            match (c.coltype, unsigned) {
                (MYSQL_TYPE_TINY, false) => w.write_col(i as i8),
                (MYSQL_TYPE_TINY, true) => w.write_col(i as u8),
                (MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR, false) => w.write_col(i as i16),
                (MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR, true) => w.write_col(i as u16),
                (MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG, false) => w.write_col(i as i32),
                (MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG, true) => w.write_col(i as u32),
                (_, false) => w.write_col(i as i64),
                (_, true) => w.write_col(i as u64),
            }
        }
        MYSQL_TYPE_FLOAT => w.write_col(v.as_f64().unwrap_or(0.0) as f32),
        MYSQL_TYPE_DOUBLE => w.write_col(v.as_f64().unwrap_or(0.0)),
        MYSQL_TYPE_DATE => match v {
            Value::Date(d) => w.write_col(*d),
            Value::DateTime(dt) => w.write_col(dt.date()),
            other => w.write_col(other.to_string()),
        },
        MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP => match v {
            Value::DateTime(dt) => w.write_col(*dt),
            Value::Date(d) => w.write_col(d.and_hms_opt(0, 0, 0).unwrap_or_default()),
            other => w.write_col(other.to_string()),
        },
        MYSQL_TYPE_TIME => match v {
            Value::Time(us) => w.write_col(Duration::from_micros(u64::try_from(*us).unwrap_or(0))),
            other => w.write_col(other.to_string()),
        },
        _ => match v {
            Value::Bytes(b) => w.write_col(&b[..]),
            other => w.write_col(other.to_string()),
        },
    }
}

/// The decimal text of an integer of magnitude `n` (negative if `neg`),
/// written at the end of `buf` (20 bytes: "-9223372036854775808" and
/// "18446744073709551615" both fit).
fn int_text(neg: bool, mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if neg {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

fn format_float(f: f32) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e7 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

/// Converts a prepared-statement parameter into a Ladle value.
pub fn param_value(v: opensrv_mysql::Value<'_>) -> Value {
    match v.into_inner() {
        ValueInner::NULL => Value::Null,
        ValueInner::Int(i) => Value::Int(i),
        // Clients send small integers with the unsigned flag set; keep every
        // value that fits as a signed integer.
        ValueInner::UInt(u) => match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(u),
        },
        ValueInner::Double(d) => Value::Double(d),
        ValueInner::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::text(s),
            Err(_) => Value::bytes(b),
        },
        // Decoded here rather than with opensrv's `From` impls, which panic
        // on a DATE parameter (they expect the DATETIME variant).
        ValueInner::Date(b) => match decode_datetime(b) {
            Some(dt) if dt.time() == chrono::NaiveTime::MIN => Value::Date(dt.date()),
            Some(dt) => Value::DateTime(dt),
            None => Value::Null,
        },
        ValueInner::Datetime(b) => decode_datetime(b).map_or(Value::Null, Value::DateTime),
        ValueInner::Time(b) => Value::Time(decode_time(b)),
    }
}

/// Binary DATE/DATETIME: [year(2), month, day, (h, m, s, (micros(4)))]; an
/// empty value is the zero date, which has no calendar value (NULL).
fn decode_datetime(b: &[u8]) -> Option<NaiveDateTime> {
    if b.len() < 4 {
        return None;
    }
    let year = i32::from(u16::from_le_bytes([b[0], b[1]]));
    let date = NaiveDate::from_ymd_opt(year, u32::from(b[2]), u32::from(b[3]))?;
    let (h, m, sec) = if b.len() >= 7 {
        (u32::from(b[4]), u32::from(b[5]), u32::from(b[6]))
    } else {
        (0, 0, 0)
    };
    let micros = if b.len() >= 11 {
        u32::from_le_bytes([b[7], b[8], b[9], b[10]])
    } else {
        0
    };
    date.and_hms_micro_opt(h, m, sec, micros)
}

/// Binary TIME: [is_negative, days(4), h, m, s, (micros(4))].
fn decode_time(b: &[u8]) -> i64 {
    if b.len() < 8 {
        return 0;
    }
    let neg = b[0] == 1;
    let days = i64::from(u32::from_le_bytes([b[1], b[2], b[3], b[4]]));
    let (h, m, s) = (i64::from(b[5]), i64::from(b[6]), i64::from(b[7]));
    let micros = if b.len() >= 12 {
        i64::from(u32::from_le_bytes([b[8], b[9], b[10], b[11]]))
    } else {
        0
    };
    let us = ((days * 24 + h) * 3600 + m * 60 + s) * 1_000_000 + micros;
    if neg {
        -us
    } else {
        us
    }
}

/// A column description for a statement's parameter (all sent as strings).
pub fn param_column() -> Column {
    Column {
        table: String::new(),
        column: "?".into(),
        coltype: ColumnType::MYSQL_TYPE_VAR_STRING,
        colflags: ColumnFlags::empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_dates_decode_without_panicking() {
        let date = decode_datetime(&[0xE8, 0x07, 2, 29]).map(|d| d.to_string());
        assert_eq!(date.as_deref(), Some("2024-02-29 00:00:00"));
        let dt = decode_datetime(&[0xE8, 0x07, 2, 29, 10, 11, 12, 5, 0, 0, 0]);
        assert_eq!(
            dt.map(|d| d.to_string()).as_deref(),
            Some("2024-02-29 10:11:12.000005")
        );
        // The zero date, a truncated value and an impossible day are NULL.
        assert_eq!(decode_datetime(&[]), None);
        assert_eq!(decode_datetime(&[0xE8, 0x07]), None);
        assert_eq!(decode_datetime(&[0xE8, 0x07, 2, 30]), None);
    }

    #[test]
    fn computed_columns_widen_to_fit_values() {
        let cols = vec![OutputColumn {
            name: "n".into(),
            table: String::new(),
            ty: SqlType::Int {
                bytes: 4,
                unsigned: false,
            },
            nullable: false,
        }];
        let rows = ResultRows::from(vec![
            vec![Value::Int(1)],
            vec![Value::Int(i64::MAX)],
            vec![Value::Null],
        ]);
        let wc = wire_columns(&cols, &rows);
        assert_eq!(wc[0].coltype, ColumnType::MYSQL_TYPE_LONGLONG);
        assert!(!wc[0].colflags.contains(ColumnFlags::NOT_NULL_FLAG));
        let rows = ResultRows::from(vec![vec![Value::text("x")]]);
        assert_eq!(
            wire_columns(&cols, &rows)[0].coltype,
            ColumnType::MYSQL_TYPE_VAR_STRING
        );
    }

    #[test]
    fn integers_format_as_display_does() {
        let mut buf = [0u8; 20];
        for i in [
            0,
            1,
            -1,
            9,
            10,
            -10,
            12345,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ] {
            let text = int_text(i < 0, i.unsigned_abs(), &mut buf);
            assert_eq!(text, Value::Int(i).to_string().as_bytes());
        }
        for u in [0, 7, u64::MAX, u64::MAX / 3] {
            let text = int_text(false, u, &mut buf);
            assert_eq!(text, Value::UInt(u).to_string().as_bytes());
        }
    }

    #[test]
    fn binary_time_decodes() {
        let b = [1u8, 1, 0, 0, 0, 2, 3, 4];
        assert_eq!(decode_time(&b), -((26 * 3600 + 3 * 60 + 4) * 1_000_000));
    }
}
