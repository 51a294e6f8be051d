//! MySQL's typing rules shared by expressions and functions: the type of
//! a literal, the common type of several branches, how many characters a
//! type prints as.

use ladle_common::{SqlType, Value};

use super::tree::Expr;

pub(super) fn is_float(t: &SqlType) -> bool {
    matches!(t, SqlType::Float | SqlType::Double)
}

pub(super) fn type_scale(t: &SqlType) -> u8 {
    match t {
        SqlType::Decimal { scale, .. } => *scale,
        _ => 0,
    }
}

/// A signed BIGINT of display width `chars` (MySQL's type for integer
/// arithmetic, whose width it derives from the operands').
pub(crate) fn int_of_width(chars: u32) -> SqlType {
    SqlType::Int {
        bytes: 8,
        unsigned: false,
        display_width: Some(chars.min(255) as u8),
    }
}

/// The characters a value of type `t` prints as at most (MySQL's
/// `max_char_length`, what result metadata reports as the length).
pub fn type_chars(t: &SqlType) -> u32 {
    let fraction = |fsp: u8| if fsp == 0 { 0 } else { 1 + u32::from(fsp) };
    match t {
        SqlType::Int {
            bytes,
            unsigned,
            display_width,
        } => u32::from(SqlType::int_display_width(
            *bytes,
            *unsigned,
            *display_width,
        )),
        SqlType::Year => 4,
        // The digits of its largest value (b + 0 prints them).
        SqlType::Bit(n) => match n {
            64.. => 20,
            n => (1u64 << n).saturating_sub(1).to_string().len() as u32,
        },
        SqlType::Float => 12,
        SqlType::Double => 22,
        SqlType::Decimal { precision, scale } => u32::from(*precision) + 1 + u32::from(*scale > 0),
        SqlType::Char(n)
        | SqlType::VarChar(n)
        | SqlType::Text(n)
        | SqlType::Binary(n)
        | SqlType::VarBinary(n)
        | SqlType::Blob(n) => *n,
        SqlType::Json => u32::MAX / 4,
        SqlType::Enum(labels) => labels
            .iter()
            .map(|l| l.chars().count() as u32)
            .max()
            .unwrap_or(0),
        SqlType::Date => 10,
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => 19 + fraction(*fsp),
        SqlType::Time { fsp } => 10 + fraction(*fsp),
    }
}

/// [`type_chars`] of expression `e` of type `t`: a literal number's own.
pub(super) fn expr_chars(e: &Expr, t: &SqlType) -> u32 {
    match e {
        Expr::Literal(v @ (Value::Int(_) | Value::UInt(_))) => v.to_string().len() as u32,
        _ => type_chars(t),
    }
}

/// The decimal digits of a numeric expression `e` of type `t` (MySQL's
/// `decimal_precision`): a DECIMAL's precision, an integer's digits.
pub(super) fn expr_precision(e: &Expr, t: &SqlType) -> u32 {
    match (e, t) {
        (Expr::Literal(v @ (Value::Int(_) | Value::UInt(_))), _) => {
            v.to_string().trim_start_matches('-').len() as u32
        }
        (_, SqlType::Decimal { precision, .. }) => u32::from(*precision),
        (_, SqlType::Int { unsigned, .. }) => {
            type_chars(t).saturating_sub(u32::from(!unsigned)).max(1)
        }
        _ => 65,
    }
}

/// The type MySQL gives a literal.
pub fn literal_type(v: &Value) -> SqlType {
    match v {
        Value::Null => SqlType::VarChar(0),
        // INT if it fits, as wide as its digits (MySQL's).
        Value::Int(i) => SqlType::Int {
            bytes: if i32::try_from(*i).is_ok() { 4 } else { 8 },
            unsigned: false,
            display_width: Some(i.to_string().len() as u8),
        },
        Value::UInt(_) => SqlType::Int {
            bytes: 8,
            unsigned: true,
            display_width: None,
        },
        Value::Double(_) => SqlType::Double,
        // As MariaDB counts a literal's digits: `0.5` has one before the
        // point too (DECIMAL(2,1)).
        Value::Decimal(d) => {
            let digits = d.mantissa().unsigned_abs().to_string().len() as u32;
            let integer_digits = digits.saturating_sub(d.scale()).max(1);
            SqlType::Decimal {
                precision: 65.min(integer_digits + d.scale()) as u8,
                scale: d.scale() as u8,
            }
        }
        Value::Text(s) => SqlType::VarChar(s.chars().count() as u32),
        Value::Bytes(b) => SqlType::VarBinary(b.len() as u32),
        Value::Date(_) => SqlType::Date,
        Value::DateTime(_) => SqlType::DateTime { fsp: 0 },
        Value::Time(_) => SqlType::Time { fsp: 0 },
    }
}

/// The common type of several branches (CASE, COALESCE, IF, UNION).
pub fn unify_types(tys: &[(SqlType, bool)]) -> (SqlType, bool) {
    let nullable = tys.iter().any(|t| t.1);
    let non_null: Vec<&SqlType> = tys
        .iter()
        .filter(|t| !(t.1 && matches!(t.0, SqlType::VarChar(0))))
        .map(|t| &t.0)
        .collect();
    if non_null.is_empty() {
        return (SqlType::VarChar(0), true);
    }
    if non_null.iter().any(|t| t.is_text() || t.is_binary()) {
        let len = non_null
            .iter()
            .map(|t| match t {
                SqlType::Json | SqlType::Enum(_) => 64,
                t if t.is_text() || t.is_binary() => type_chars(t),
                _ => 64,
            })
            .max()
            .unwrap_or(255);
        // One binary branch makes the result a binary string (MySQL).
        if non_null.iter().any(|t| t.is_binary()) {
            return (SqlType::VarBinary(len), nullable);
        }
        return (SqlType::VarChar(len), nullable);
    }
    let unsigned = |t: &SqlType| matches!(t, SqlType::Int { unsigned: true, .. } | SqlType::Bit(_));
    let signed = |t: &SqlType| {
        matches!(
            t,
            SqlType::Int {
                unsigned: false,
                ..
            }
        )
    };
    if non_null.iter().all(|t| t.is_integer()) {
        // Signed beside unsigned (a BIT is unsigned): a DECIMAL as wide
        // as the widest, as MariaDB's.
        if non_null.iter().any(|t| signed(t)) && non_null.iter().any(|t| unsigned(t)) {
            return (decimal_of(&non_null), nullable);
        }
        let unsigned = non_null.iter().all(|t| unsigned(t));
        let bytes = non_null
            .iter()
            .map(|t| match t {
                SqlType::Int { bytes, .. } => *bytes,
                _ => 2,
            })
            .max()
            .unwrap_or(8);
        return (
            SqlType::Int {
                bytes,
                unsigned,
                display_width: None,
            },
            nullable,
        );
    }
    if non_null.iter().any(|t| is_float(t)) {
        return (SqlType::Double, nullable);
    }
    if non_null
        .iter()
        .all(|t| t.is_integer() || matches!(t, SqlType::Decimal { .. }))
    {
        return (decimal_of(&non_null), nullable);
    }
    if non_null.iter().all(|t| **t == *non_null[0]) {
        return (non_null[0].clone(), nullable);
    }
    match temporal_common_type(&non_null) {
        Some(t) => (t, nullable),
        None => (SqlType::VarChar(255), nullable),
    }
}

/// The DECIMAL holding every value of integer and DECIMAL types `tys`:
/// the most digits before the point and the largest scale (MariaDB's).
fn decimal_of(tys: &[&SqlType]) -> SqlType {
    let scale = tys.iter().map(|t| type_scale(t)).max().unwrap_or(0);
    let int_part = tys.iter().map(|t| int_digits(t)).max().unwrap_or(1);
    SqlType::Decimal {
        precision: (int_part + u32::from(scale)).min(65) as u8,
        scale,
    }
}

/// The digits before the point of a number of integer or DECIMAL type
/// `t` (MariaDB's `decimal_int_part`; a BIT(n) counts n). An integer's are
/// its type's, whatever display width it has (MariaDB's for a column:
/// `INT(3)` holds 123456, and a DECIMAL that held fewer digits would cut
/// it).
fn int_digits(t: &SqlType) -> u32 {
    match t {
        SqlType::Decimal { precision, scale } => u32::from(precision.saturating_sub(*scale)),
        SqlType::Int {
            bytes, unsigned, ..
        } => u32::from(SqlType::int_display_width(*bytes, *unsigned, None))
            .saturating_sub(u32::from(!unsigned)),
        SqlType::Bit(n) => u32::from(*n),
        _ => 65,
    }
}

/// The common type of temporal branches, as MySQL's: TIMEs make a TIME,
/// TIMESTAMPs a TIMESTAMP, and DATEs, DATETIMEs and TIMESTAMPs together a
/// DATETIME, each of the largest fractional-seconds precision among them.
/// `None` for other mixes (a TIME beside a DATE: MySQL dates it today,
/// Ladle makes it a string).
fn temporal_common_type(tys: &[&SqlType]) -> Option<SqlType> {
    let fsp_of = |t: &SqlType| match t {
        SqlType::Time { fsp } | SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => *fsp,
        _ => 0,
    };
    let fsp = tys.iter().map(|t| fsp_of(t)).max().unwrap_or(0);
    if tys.iter().all(|t| matches!(t, SqlType::Time { .. })) {
        return Some(SqlType::Time { fsp });
    }
    if tys.iter().all(|t| matches!(t, SqlType::Timestamp { .. })) {
        return Some(SqlType::Timestamp { fsp });
    }
    let dated = |t: &&SqlType| {
        matches!(
            t,
            SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }
        )
    };
    tys.iter().all(dated).then_some(SqlType::DateTime { fsp })
}
