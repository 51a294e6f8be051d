//! Values and column metadata on the wire: `SqlType` -> MySQL column
//! definition (type, length, decimals, character set, flags), `Value` ->
//! text or binary protocol cells, and prepared-statement parameters ->
//! `Value`.
//!
//! What the metadata says comes from `OutputColumn`: the column's
//! `SqlType` (with its display width and fractional-seconds precision),
//! nullability and, for a column passed through from a base table, that
//! column's keys, AUTO_INCREMENT, default and ON UPDATE as MariaDB's flags.

use chrono::{NaiveDateTime, Timelike};
use ladle_common::{ColumnDefault, SqlType, Value};
use ladle_dataflow::{BaseColumn, OutputColumn, ResultRows, RowRef};

use crate::protocol::codec::{put_lenenc_bytes, Cursor, Decoded, Malformed};

/// MySQL column type codes (`enum_field_types`).
pub mod types {
    pub const DECIMAL: u8 = 0x00;
    pub const TINY: u8 = 0x01;
    pub const SHORT: u8 = 0x02;
    pub const LONG: u8 = 0x03;
    pub const FLOAT: u8 = 0x04;
    pub const DOUBLE: u8 = 0x05;
    pub const NULL: u8 = 0x06;
    pub const TIMESTAMP: u8 = 0x07;
    pub const LONGLONG: u8 = 0x08;
    pub const INT24: u8 = 0x09;
    pub const DATE: u8 = 0x0A;
    pub const TIME: u8 = 0x0B;
    pub const DATETIME: u8 = 0x0C;
    pub const YEAR: u8 = 0x0D;
    pub const NEWDATE: u8 = 0x0E;
    pub const VARCHAR: u8 = 0x0F;
    pub const BIT: u8 = 0x10;
    pub const JSON: u8 = 0xF5;
    pub const NEWDECIMAL: u8 = 0xF6;
    pub const ENUM: u8 = 0xF7;
    pub const SET: u8 = 0xF8;
    pub const TINY_BLOB: u8 = 0xF9;
    pub const MEDIUM_BLOB: u8 = 0xFA;
    pub const LONG_BLOB: u8 = 0xFB;
    pub const BLOB: u8 = 0xFC;
    pub const VAR_STRING: u8 = 0xFD;
    pub const STRING: u8 = 0xFE;
    pub const GEOMETRY: u8 = 0xFF;
}

/// Column definition flags.
pub mod flags {
    pub const NOT_NULL: u16 = 1;
    pub const PRI_KEY: u16 = 2;
    pub const UNIQUE_KEY: u16 = 4;
    pub const MULTIPLE_KEY: u16 = 8;
    pub const BLOB: u16 = 16;
    pub const UNSIGNED: u16 = 32;
    pub const ZEROFILL: u16 = 64;
    pub const BINARY: u16 = 128;
    pub const ENUM: u16 = 256;
    pub const AUTO_INCREMENT: u16 = 512;
    pub const TIMESTAMP: u16 = 1024;
    pub const NO_DEFAULT_VALUE: u16 = 4096;
    pub const ON_UPDATE_NOW: u16 = 8192;
    /// Part of some key (any position, any index).
    pub const PART_KEY: u16 = 16384;
    // NUM_FLAG (32768) is set by client libraries, not sent by servers.
}

/// Collation ids: `binary`, and the one text columns are sent in
/// (utf8mb4_general_ci, as MariaDB 10.11 sends for its default collation).
pub const BINARY_COLLATION: u16 = 63;
pub const TEXT_COLLATION: u16 = 45;
/// Bytes per character of utf8mb4, by which text lengths are multiplied.
const MBMAXLEN: u64 = 4;
/// `decimals` of a floating-point value with no fixed scale, as MariaDB
/// and MySQL send it.
pub const NOT_FIXED_DEC: u8 = 31;
/// The decimals MariaDB gives a computed string (its NOT_FIXED_DEC).
pub const NOT_FIXED_DEC_STRING: u8 = 39;

/// One result (or parameter) column as the protocol describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnDef {
    pub table: String,
    pub name: String,
    pub coltype: u8,
    pub flags: u16,
    pub length: u32,
    pub decimals: u8,
    pub charset: u16,
}

impl ColumnDef {
    pub fn unsigned(&self) -> bool {
        self.flags & flags::UNSIGNED != 0
    }

    /// Appends the ColumnDefinition41 payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_lenenc_bytes(out, b"def");
        put_lenenc_bytes(out, b""); // schema
        put_lenenc_bytes(out, self.table.as_bytes());
        put_lenenc_bytes(out, self.table.as_bytes()); // org_table
        put_lenenc_bytes(out, self.name.as_bytes());
        put_lenenc_bytes(out, self.name.as_bytes()); // org_name
        out.push(0x0C);
        out.extend_from_slice(&self.charset.to_le_bytes());
        out.extend_from_slice(&self.length.to_le_bytes());
        out.push(self.coltype);
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.push(self.decimals);
        out.extend_from_slice(&[0, 0]);
    }
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Characters a fraction of `fsp` digits adds to a temporal value: the
/// point and the digits.
fn fraction_len(fsp: u8) -> u64 {
    if fsp == 0 {
        0
    } else {
        1 + u64::from(fsp)
    }
}

/// The definition describing a value of type `ty` (before nullability).
pub fn column_def(name: &str, table: &str, ty: &SqlType) -> ColumnDef {
    use types::*;
    let mut f = 0u16;
    let mut charset = BINARY_COLLATION;
    let mut decimals = 0u8;
    let (coltype, length): (u8, u64) = match ty {
        SqlType::Int {
            bytes,
            unsigned,
            display_width,
        } => {
            if *unsigned {
                f |= flags::UNSIGNED;
            }
            let t = match bytes {
                1 => TINY,
                2 => SHORT,
                3 => INT24,
                4 => LONG,
                _ => LONGLONG,
            };
            // The length is the display width (1 for TINYINT(1)).
            let width = SqlType::int_display_width(*bytes, *unsigned, *display_width);
            (t, u64::from(width))
        }
        SqlType::Year => {
            f |= flags::UNSIGNED | flags::ZEROFILL;
            (YEAR, 4)
        }
        SqlType::Float => {
            decimals = NOT_FIXED_DEC;
            (FLOAT, 12)
        }
        SqlType::Double => {
            decimals = NOT_FIXED_DEC;
            (DOUBLE, 22)
        }
        SqlType::Decimal { precision, scale } => {
            decimals = *scale;
            // Digits, the sign, and the point if there is a scale.
            let len = u64::from(*precision) + 1 + u64::from(*scale > 0);
            (NEWDECIMAL, len)
        }
        SqlType::Char(n) => {
            charset = TEXT_COLLATION;
            (STRING, u64::from(*n) * MBMAXLEN)
        }
        SqlType::VarChar(n) => {
            charset = TEXT_COLLATION;
            (VAR_STRING, u64::from(*n) * MBMAXLEN)
        }
        SqlType::Text(n) => {
            charset = TEXT_COLLATION;
            f |= flags::BLOB;
            (BLOB, u64::from(*n) * MBMAXLEN)
        }
        SqlType::Json => {
            charset = TEXT_COLLATION;
            f |= flags::BLOB;
            (BLOB, u64::from(u32::MAX))
        }
        SqlType::Enum(labels) => {
            charset = TEXT_COLLATION;
            f |= flags::ENUM;
            let widest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
            (STRING, widest as u64 * MBMAXLEN)
        }
        SqlType::Binary(n) => {
            f |= flags::BINARY;
            (STRING, u64::from(*n))
        }
        SqlType::VarBinary(n) => {
            f |= flags::BINARY;
            (VAR_STRING, u64::from(*n))
        }
        SqlType::Blob(n) => {
            f |= flags::BINARY | flags::BLOB;
            (BLOB, u64::from(*n))
        }
        SqlType::Date => {
            f |= flags::BINARY;
            (DATE, 10)
        }
        SqlType::DateTime { fsp } => {
            f |= flags::BINARY;
            decimals = *fsp;
            (DATETIME, 19 + fraction_len(*fsp))
        }
        SqlType::Timestamp { fsp } => {
            // What MariaDB sends for a TIMESTAMP column.
            f |= flags::BINARY | flags::UNSIGNED;
            decimals = *fsp;
            (TIMESTAMP, 19 + fraction_len(*fsp))
        }
        SqlType::Time { fsp } => {
            f |= flags::BINARY;
            decimals = *fsp;
            (TIME, 10 + fraction_len(*fsp))
        }
        // Sent as its bytes (see `text_cell`), as MariaDB sends a BIT column.
        SqlType::Bit(n) => {
            f |= flags::UNSIGNED;
            (BIT, u64::from(*n))
        }
    };
    ColumnDef {
        table: table.to_string(),
        name: name.to_string(),
        coltype,
        flags: f,
        length: clamp(length),
        decimals,
        charset,
    }
}

/// The flags MariaDB sends for a base table's column beyond its type's
/// and nullability: its place in keys, AUTO_INCREMENT, whether it has a
/// default, ON UPDATE CURRENT_TIMESTAMP.
fn base_column_flags(base: &BaseColumn) -> u16 {
    let t = &*base.table;
    let Some(c) = t.columns.get(base.column) else {
        return 0;
    };
    let mut f = 0;
    let primary = t.primary_key.as_deref().unwrap_or(&[]);
    if primary.contains(&base.column) {
        f |= flags::PRI_KEY | flags::PART_KEY;
    }
    for index in &t.indexes {
        if !index.columns.contains(&base.column) {
            continue;
        }
        f |= flags::PART_KEY;
        // Only an index's first column is marked, and only a one-column
        // UNIQUE index makes it UNIQUE_KEY (as in MariaDB's table.cc).
        if index.columns[0] == base.column {
            f |= if index.unique && index.columns.len() == 1 {
                flags::UNIQUE_KEY
            } else {
                flags::MULTIPLE_KEY
            };
        }
    }
    if c.auto_increment {
        f |= flags::AUTO_INCREMENT;
    }
    if !c.nullable && !c.auto_increment && c.default == ColumnDefault::None {
        f |= flags::NO_DEFAULT_VALUE;
    }
    if c.on_update_current_timestamp {
        f |= flags::ON_UPDATE_NOW;
    }
    // A TIMESTAMP set automatically (DEFAULT or ON UPDATE CURRENT_TIMESTAMP).
    let automatic = c.on_update_current_timestamp || c.default == ColumnDefault::CurrentTimestamp;
    if matches!(c.ty, SqlType::Timestamp { .. }) && automatic {
        f |= flags::TIMESTAMP;
    }
    f
}

/// What MariaDB's metadata says of a computed column (an expression, not
/// a table's column) beyond its type: a number or date is a binary string
/// (BINARY flag), a string's decimals are "not fixed" (39; CAST(.. AS
/// CHAR) and HEX() say 0 there, which Ladle does not tell apart), a DOUBLE
/// may print 23 characters.
fn computed_column(d: &mut ColumnDef) {
    if d.charset == BINARY_COLLATION {
        // A BIT here is a UNION's column, flagged as a table's.
        let flagged_as_table = matches!(d.coltype, types::BIT);
        if !matches!(d.coltype, types::STRING | types::VAR_STRING | types::BLOB)
            && !flagged_as_table
        {
            d.flags |= flags::BINARY;
        }
        if d.coltype == types::DOUBLE {
            d.length = 23;
        }
    }
    if matches!(d.coltype, types::STRING | types::VAR_STRING | types::BLOB) {
        d.decimals = NOT_FIXED_DEC_STRING;
    }
}

/// Wire metadata for result columns, adjusted so every value in `rows` can
/// be encoded under it (a computed column whose values do not fit its
/// declared type is widened; NOT NULL is dropped if a NULL appears).
pub fn wire_columns(cols: &[OutputColumn], rows: &ResultRows) -> Vec<ColumnDef> {
    let mut out: Vec<ColumnDef> = cols
        .iter()
        .map(|c| {
            // Only a table's (or a UNION's) BIT column goes out as bytes;
            // a value computed from one (MAX(b), IFNULL(b, b)) is a number,
            // as in MariaDB.
            let ty = match (&c.ty, &c.origin) {
                (SqlType::Bit(_), None) if !c.stored => SqlType::Int {
                    bytes: 8,
                    unsigned: true,
                    display_width: None,
                },
                (ty, _) => ty.clone(),
            };
            let mut d = column_def(&c.name, &c.table, &ty);
            if let (SqlType::Double, Some(n)) = (&c.ty, c.decimals) {
                d.decimals = n.min(NOT_FIXED_DEC - 1);
            }
            if !c.nullable {
                d.flags |= flags::NOT_NULL;
            }
            match &c.origin {
                Some(base) => d.flags |= base_column_flags(base),
                None => computed_column(&mut d),
            }
            d
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
            } else if !fits(v, c.coltype, c.unsigned()) {
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
                !v.is_null() && !fits(v, c.coltype, c.unsigned())
            })
        {
            to_string_column(c);
        }
        if saw_null[i] {
            c.flags &= !flags::NOT_NULL;
        }
    }
    out
}

fn to_string_column(c: &mut ColumnDef) {
    c.coltype = types::VAR_STRING;
    c.flags &= !(flags::UNSIGNED | flags::ZEROFILL | flags::BINARY);
    c.charset = TEXT_COLLATION;
    c.decimals = 0;
    c.length = c.length.max(255 * MBMAXLEN as u32);
}

/// Widens `c` for a value that does not fit it: integers to BIGINT (signed,
/// or unsigned for a large unsigned value), anything else to a string.
fn widen(c: &mut ColumnDef, v: &Value) {
    let int = matches!(v, Value::Int(_) | Value::UInt(_)) && is_int_type(c.coltype);
    if int && fits(v, types::LONGLONG, false) {
        c.coltype = types::LONGLONG;
        c.flags &= !flags::UNSIGNED;
        c.length = 20;
    } else if int && matches!(v, Value::UInt(_)) {
        c.coltype = types::LONGLONG;
        c.flags |= flags::UNSIGNED;
        c.length = 20;
    } else {
        to_string_column(c);
    }
}

fn is_int_type(t: u8) -> bool {
    use types::*;
    matches!(t, TINY | SHORT | INT24 | LONG | LONGLONG | YEAR)
}

fn int_value(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(i128::from(*i)),
        Value::UInt(u) => Some(i128::from(*u)),
        _ => None,
    }
}

/// Whether `v` can be encoded (in the binary protocol) as `t`.
fn fits(v: &Value, t: u8, unsigned: bool) -> bool {
    use types::*;
    match t {
        TINY | SHORT | INT24 | LONG | LONGLONG | YEAR => {
            let Some(i) = int_value(v) else { return false };
            let bits = match t {
                TINY => 8,
                SHORT | YEAR => 16,
                INT24 | LONG => 32,
                _ => 64,
            };
            if unsigned {
                i >= 0 && i < (1i128 << bits)
            } else {
                i >= -(1i128 << (bits - 1)) && i < (1i128 << (bits - 1))
            }
        }
        FLOAT | DOUBLE => v.as_f64().is_some(),
        DATE | DATETIME | TIMESTAMP => matches!(v, Value::Date(_) | Value::DateTime(_)),
        TIME => matches!(v, Value::Time(_)),
        _ => true,
    }
}

/// Appends one text-protocol row: each cell a length-encoded string, NULL
/// as 0xFB. The columns must come from [`wire_columns`] over the same rows.
pub fn text_row(out: &mut Vec<u8>, cols: &[ColumnDef], row: RowRef<'_>) {
    for (i, c) in cols.iter().enumerate() {
        let v = row.get(i).unwrap_or(&Value::Null);
        text_cell(out, c, v);
    }
}

fn text_cell(out: &mut Vec<u8>, c: &ColumnDef, v: &Value) {
    // Integers (most cells of large results) are formatted in place,
    // without `to_string`'s allocation; the text is the same.
    let mut digits = [0u8; 20];
    match v {
        Value::Null => out.push(0xFB),
        Value::Int(_) | Value::UInt(_) if c.coltype == types::BIT => {
            let bytes = ladle_common::bit_bytes(v, c.length as u8).unwrap_or_default();
            put_lenenc_bytes(out, &bytes)
        }
        // A DOUBLE of fixed decimals whose value came out as another
        // number (GREATEST(ROUND(x, 1), 2) picked the 2): shown as that
        // DOUBLE, 2.0, as MariaDB converts it.
        Value::Int(_) | Value::UInt(_) | Value::Decimal(_)
            if c.coltype == types::DOUBLE && c.decimals < NOT_FIXED_DEC =>
        {
            let d = v.as_f64().unwrap_or_default();
            let text = format!("{d:.*}", usize::from(c.decimals));
            put_lenenc_bytes(out, text.as_bytes())
        }
        Value::Int(i) => put_lenenc_bytes(out, int_text(*i < 0, i.unsigned_abs(), &mut digits)),
        Value::UInt(u) => put_lenenc_bytes(out, int_text(false, *u, &mut digits)),
        Value::Bytes(b) => put_lenenc_bytes(out, b),
        Value::Text(s) => put_lenenc_bytes(out, s.as_bytes()),
        Value::Double(d) if c.coltype == types::FLOAT => {
            put_lenenc_bytes(out, format_float(*d as f32).as_bytes())
        }
        // A DOUBLE of fixed decimals (ROUND(x, 2)) is written positionally
        // with them, as MariaDB's `%.*f`: 100000000000000000.00.
        Value::Double(d) if c.coltype == types::DOUBLE && c.decimals < NOT_FIXED_DEC => {
            let text = format!("{d:.*}", usize::from(c.decimals));
            put_lenenc_bytes(out, text.as_bytes())
        }
        Value::DateTime(_) | Value::Time(_)
            if matches!(c.coltype, types::DATETIME | types::TIMESTAMP | types::TIME) =>
        {
            let text = v.temporal_text(c.decimals).unwrap_or_default();
            put_lenenc_bytes(out, text.as_bytes())
        }
        other => put_lenenc_bytes(out, other.to_string().as_bytes()),
    }
}

/// Appends one binary-protocol row: the 0x00 header, the NULL bitmap
/// (offset 2), then each non-NULL value encoded as its column's type says.
pub fn binary_row(out: &mut Vec<u8>, cols: &[ColumnDef], row: RowRef<'_>) {
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (cols.len() + 7 + 2) / 8, 0);
    for (i, c) in cols.iter().enumerate() {
        let v = row.get(i).unwrap_or(&Value::Null);
        if v.is_null() {
            let bit = i + 2;
            out[bitmap_at + bit / 8] |= 1 << (bit % 8);
            continue;
        }
        binary_cell(out, c, v);
    }
}

fn binary_cell(out: &mut Vec<u8>, c: &ColumnDef, v: &Value) {
    use types::*;
    match c.coltype {
        TINY | SHORT | INT24 | LONG | LONGLONG | YEAR => {
            // `wire_columns` made the type fit every value; the truncating
            // casts keep the two's complement bytes the client reads.
            let i = int_value(v).unwrap_or(0);
            match c.coltype {
                TINY => out.push(i as u8),
                SHORT | YEAR => out.extend_from_slice(&(i as u16).to_le_bytes()),
                INT24 | LONG => out.extend_from_slice(&(i as u32).to_le_bytes()),
                _ => out.extend_from_slice(&(i as u64).to_le_bytes()),
            }
        }
        FLOAT => out.extend_from_slice(&(v.as_f64().unwrap_or(0.0) as f32).to_le_bytes()),
        DOUBLE => out.extend_from_slice(&v.as_f64().unwrap_or(0.0).to_le_bytes()),
        DATE | DATETIME | TIMESTAMP => {
            let dt = match v {
                Value::DateTime(dt) => *dt,
                Value::Date(d) => d.and_hms_opt(0, 0, 0).unwrap_or_default(),
                _ => NaiveDateTime::default(),
            };
            put_datetime(out, &dt, c.coltype == DATE);
        }
        TIME => put_time(out, if let Value::Time(us) = v { *us } else { 0 }),
        _ => text_cell(out, c, v),
    }
}

fn put_datetime(out: &mut Vec<u8>, dt: &NaiveDateTime, date_only: bool) {
    let d = dt.date();
    let (year, month, day) = ladle_common::date_parts(&d);
    let (h, m, s) = (dt.hour() as u8, dt.minute() as u8, dt.second() as u8);
    let micros = dt.and_utc().timestamp_subsec_micros();
    let midnight = (h, m, s, micros) == (0, 0, 0, 0);
    if d == ladle_common::ZERO_DATE && (date_only || midnight) {
        // The zero date: no fields at all, as MySQL sends it (a time on
        // it, `0000-00-00 10:11:00`, is sent with its fields).
        out.push(0);
        return;
    }
    let year = u16::try_from(year).unwrap_or(0);
    let len = if date_only || midnight {
        4
    } else if micros == 0 {
        7
    } else {
        11
    };
    out.push(len);
    out.extend_from_slice(&year.to_le_bytes());
    out.push(month as u8);
    out.push(day as u8);
    if len >= 7 {
        out.extend_from_slice(&[h, m, s]);
    }
    if len == 11 {
        out.extend_from_slice(&micros.to_le_bytes());
    }
}

fn put_time(out: &mut Vec<u8>, us: i64) {
    if us == 0 {
        out.push(0);
        return;
    }
    let neg = us < 0;
    let us = us.unsigned_abs();
    let micros = (us % 1_000_000) as u32;
    let secs = us / 1_000_000;
    let days = u32::try_from(secs / 86_400).unwrap_or(u32::MAX);
    let rem = secs % 86_400;
    out.push(if micros == 0 { 8 } else { 12 });
    out.push(u8::from(neg));
    out.extend_from_slice(&days.to_le_bytes());
    out.extend_from_slice(&[(rem / 3600) as u8, (rem / 60 % 60) as u8, (rem % 60) as u8]);
    if micros != 0 {
        out.extend_from_slice(&micros.to_le_bytes());
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

/// A FLOAT as MariaDB prints it (`my_gcvt` for a float): rounded to 6
/// significant digits (`FLT_DIG`), then written as a DOUBLE is
/// (positionally from 1e-15 to 1e15, else in exponent form): 12345678 is
/// `12345700`, 1e17 `1e17`, 3.14159265 `3.14159` (Ladle had written all
/// of a float's digits, and integers past 1e15 positionally).
fn format_float(f: f32) -> String {
    let d = f64::from(f);
    if !d.is_finite() {
        return format!("{f}");
    }
    let rounded = format!("{d:.5e}").parse::<f64>().unwrap_or(d);
    Value::Double(rounded).to_string()
}

/// Decodes one binary-protocol parameter value of type `coltype` from `c`.
pub fn param_value(c: &mut Cursor<'_>, coltype: u8, unsigned: bool) -> Decoded<Value> {
    use types::*;
    Ok(match coltype {
        NULL => Value::Null,
        TINY => {
            let b = c.u8()?;
            if unsigned {
                Value::Int(i64::from(b))
            } else {
                Value::Int(i64::from(b as i8))
            }
        }
        SHORT | YEAR => {
            let n = c.u16()?;
            if unsigned {
                Value::Int(i64::from(n))
            } else {
                Value::Int(i64::from(n as i16))
            }
        }
        LONG | INT24 => {
            let n = c.u32()?;
            if unsigned {
                Value::Int(i64::from(n))
            } else {
                Value::Int(i64::from(n as i32))
            }
        }
        LONGLONG => {
            let n = c.u64()?;
            // Clients send small integers with the unsigned flag set; keep
            // every value that fits as a signed integer.
            match (unsigned, i64::try_from(n)) {
                (true, Err(_)) => Value::UInt(n),
                (true, Ok(i)) => Value::Int(i),
                (false, _) => Value::Int(n as i64),
            }
        }
        FLOAT => Value::Double(f64::from(f32::from_bits(c.u32()?))),
        DOUBLE => Value::Double(f64::from_bits(c.u64()?)),
        DATE | DATETIME | TIMESTAMP | NEWDATE => {
            let n = c.u8()?;
            let b = c.take(usize::from(n))?;
            match decode_datetime(b) {
                Some(dt) if coltype == DATE && dt.time() == chrono::NaiveTime::MIN => {
                    Value::Date(dt.date())
                }
                Some(dt) => Value::DateTime(dt),
                None => Value::Null,
            }
        }
        TIME => {
            let n = c.u8()?;
            Value::Time(decode_time(c.take(usize::from(n))?).ok_or(Malformed)?)
        }
        DECIMAL | NEWDECIMAL | VARCHAR | BIT | JSON | ENUM | SET | TINY_BLOB | MEDIUM_BLOB
        | LONG_BLOB | BLOB | VAR_STRING | STRING | GEOMETRY => bytes_value(c.lenenc_bytes()?),
        _ => return Err(Malformed),
    })
}

/// A string parameter: text if it is UTF-8, bytes otherwise.
pub fn bytes_value(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => Value::text(s),
        Err(_) => Value::bytes(b),
    }
}

/// Binary DATE/DATETIME: [year(2), month, day, (h, m, s, (micros(4)))]; an
/// empty value (or all zeros) is the zero date.
fn decode_datetime(b: &[u8]) -> Option<NaiveDateTime> {
    let zero = ladle_common::ZERO_DATE.and_time(chrono::NaiveTime::MIN);
    if b.is_empty() || b.iter().all(|&x| x == 0) {
        return Some(zero);
    }
    if b.len() < 4 {
        return None;
    }
    let year = i32::from(u16::from_le_bytes([b[0], b[1]]));
    let date = ladle_common::date_from_parts(year, u32::from(b[2]), u32::from(b[3]))?;
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

/// Binary TIME: [is_negative, days(4), h, m, s, (micros(4))]; `None` if
/// the value overflows microseconds in an i64 (no TIME is that long).
fn decode_time(b: &[u8]) -> Option<i64> {
    if b.len() < 8 {
        return Some(0);
    }
    let neg = b[0] == 1;
    let days = i64::from(u32::from_le_bytes([b[1], b[2], b[3], b[4]]));
    let (h, m, s) = (i64::from(b[5]), i64::from(b[6]), i64::from(b[7]));
    let micros = if b.len() >= 12 {
        i64::from(u32::from_le_bytes([b[8], b[9], b[10], b[11]]))
    } else {
        0
    };
    let secs = days
        .checked_mul(24)?
        .checked_add(h)?
        .checked_mul(3600)?
        .checked_add(m * 60 + s)?;
    let us = secs.checked_mul(1_000_000)?.checked_add(micros)?;
    Some(if neg { -us } else { us })
}

/// A column description for a statement's parameter, as MySQL sends them.
pub fn param_column() -> ColumnDef {
    ColumnDef {
        table: String::new(),
        name: "?".into(),
        coltype: types::VAR_STRING,
        flags: flags::BINARY,
        length: 0,
        decimals: 0,
        charset: BINARY_COLLATION,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: Vec<Vec<Value>>) -> ResultRows {
        ResultRows::from(v)
    }

    #[test]
    fn binary_dates_decode_without_panicking() {
        let date = decode_datetime(&[0xE8, 0x07, 2, 29]).map(|d| d.to_string());
        assert_eq!(date.as_deref(), Some("2024-02-29 00:00:00"));
        let dt = decode_datetime(&[0xE8, 0x07, 2, 29, 10, 11, 12, 5, 0, 0, 0]);
        assert_eq!(
            dt.map(|d| d.to_string()).as_deref(),
            Some("2024-02-29 10:11:12.000005")
        );
        // The zero date (no fields, or zeros) is the zero date.
        let zero = Value::zero_datetime();
        assert_eq!(
            decode_datetime(&[]).map(Value::DateTime),
            Some(zero.clone())
        );
        assert_eq!(
            decode_datetime(&[0, 0, 0, 0]).map(Value::DateTime),
            Some(zero)
        );
        // A truncated value and an impossible day are NULL.
        assert_eq!(decode_datetime(&[0xE8, 0x07]), None);
        assert_eq!(decode_datetime(&[0xE8, 0x07, 2, 30]), None);
    }

    #[test]
    fn computed_columns_widen_to_fit_values() {
        let cols = vec![OutputColumn {
            name: "n".into(),
            table: String::new(),
            origin: None,
            ty: SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            nullable: false,
            decimals: None,
            stored: false,
        }];
        let r = rows(vec![
            vec![Value::Int(1)],
            vec![Value::Int(i64::MAX)],
            vec![Value::Null],
        ]);
        let wc = wire_columns(&cols, &r);
        assert_eq!(wc[0].coltype, types::LONGLONG);
        assert_eq!(wc[0].flags & flags::NOT_NULL, 0);
        let r = rows(vec![vec![Value::text("x")]]);
        assert_eq!(wire_columns(&cols, &r)[0].coltype, types::VAR_STRING);
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
    fn binary_time_round_trips() {
        let b = [1u8, 1, 0, 0, 0, 2, 3, 4];
        let us = -((26 * 3600 + 3 * 60 + 4) * 1_000_000);
        assert_eq!(decode_time(&b), Some(us));
        // Days beyond what microseconds in an i64 hold: malformed, no
        // overflow.
        assert_eq!(decode_time(&[0, 0xFF, 0xFF, 0xFF, 0xFF, 23, 59, 59]), None);
        assert_eq!(
            decode_time(&[1, 0xE8, 3, 0, 0, 0, 0, 1]),
            Some(-(1000 * 86_400 + 1) * 1_000_000)
        );
        for us in [us, 0, 5, 838 * 3_600_000_000 + 59_999_999, -1] {
            let mut out = Vec::new();
            put_time(&mut out, us);
            assert_eq!(usize::from(out[0]), out.len() - 1);
            assert_eq!(decode_time(&out[1..]), Some(us), "{us}");
        }
    }

    #[test]
    fn binary_rows_follow_the_column_types() {
        let cols = vec![
            OutputColumn {
                name: "t".into(),
                table: String::new(),
                origin: None,
                ty: SqlType::Int {
                    bytes: 1,
                    unsigned: false,
                    display_width: None,
                },
                nullable: true,
                decimals: None,
                stored: false,
            },
            OutputColumn {
                name: "b".into(),
                table: String::new(),
                origin: None,
                ty: SqlType::Int {
                    bytes: 8,
                    unsigned: false,
                    display_width: None,
                },
                nullable: true,
                decimals: None,
                stored: false,
            },
            OutputColumn {
                name: "s".into(),
                table: String::new(),
                origin: None,
                ty: SqlType::VarChar(10),
                nullable: true,
                decimals: None,
                stored: false,
            },
        ];
        let r = rows(vec![vec![Value::Int(-2), Value::Null, Value::text("hi")]]);
        let wc = wire_columns(&cols, &r);
        let mut out = Vec::new();
        binary_row(&mut out, &wc, r.iter().next().unwrap());
        // Header, bitmap (column 1 is NULL: bit 3), -2 as one byte, "hi".
        assert_eq!(out, vec![0x00, 0b0000_1000, 0xFE, 2, b'h', b'i']);
    }
}
