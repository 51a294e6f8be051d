//! BIT(n) columns: which values fit `n` bits ([`bit_value`]) and what a
//! value that does not becomes outside strict mode ([`bit_clamped`]), as
//! MariaDB's `Field_bit` stores them.
//!
//! A BIT value is held as an unsigned integer (`Value::Int` when it fits
//! `i64`, else `Value::UInt`, as an UNSIGNED BIGINT column holds it), so
//! `b + 0`, comparisons and keys treat it as the number it is; only a
//! result column read straight from the table goes out as its bytes.

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;

use crate::Value;

/// The largest width MySQL and MariaDB allow, `BIT(64)`.
pub const MAX_BIT_WIDTH: u8 = 64;

/// Why a value does not fit a BIT column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitMisfit {
    /// More significant bits than the column holds (MariaDB's 1406; a
    /// negative integer is all ones, 64 bits).
    TooLong,
    /// A negative DECIMAL (MariaDB's 1264: it converts it as unsigned).
    Negative,
}

/// `v` as a BIT(`width`) stores it, or why it does not fit. A string is
/// its bytes read as a big-endian number (`'a'` is 97); a DECIMAL rounds
/// half away from zero; a DOUBLE is cut toward zero, as MariaDB does.
pub(crate) fn bit_value(v: &Value, width: u8) -> Result<Value, BitMisfit> {
    let bits: u64 = match v {
        Value::Int(i) => *i as u64,
        Value::UInt(u) => *u,
        Value::Decimal(d) => {
            if d.is_sign_negative() && !d.is_zero() {
                return Err(BitMisfit::Negative);
            }
            let rounded =
                d.round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
            rounded.to_u64().ok_or(BitMisfit::TooLong)?
        }
        Value::Double(f) => {
            let t = f.trunc();
            if t >= 0.0 {
                Decimal::try_from(t)
                    .ok()
                    .and_then(|d| d.to_u64())
                    .ok_or(BitMisfit::TooLong)?
            } else {
                (t as i64) as u64
            }
        }
        Value::Text(s) => bytes_number(s.as_bytes())?,
        Value::Bytes(b) => bytes_number(b)?,
        Value::Date(_) | Value::DateTime(_) | Value::Time(_) => {
            bytes_number(v.to_string().as_bytes())?
        }
        Value::Null => return Ok(Value::Null),
    };
    if width < MAX_BIT_WIDTH && bits >> width != 0 {
        return Err(BitMisfit::TooLong);
    }
    Ok(bit_number(bits))
}

/// What a value that does not fit BIT(`width`) (`why`) becomes outside
/// strict mode: every bit set (a negative DECIMAL: 0).
pub(crate) fn bit_clamped(width: u8, why: BitMisfit) -> Value {
    match why {
        BitMisfit::Negative => Value::Int(0),
        BitMisfit::TooLong => bit_number(max_bits(width)),
    }
}

/// The largest value of BIT(`width`).
fn max_bits(width: u8) -> u64 {
    if width >= MAX_BIT_WIDTH {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// `bits` as a BIT column holds it.
fn bit_number(bits: u64) -> Value {
    match i64::try_from(bits) {
        Ok(i) => Value::Int(i),
        Err(_) => Value::UInt(bits),
    }
}

/// Bytes read as a big-endian number; leading zero bytes do not count.
fn bytes_number(b: &[u8]) -> Result<u64, BitMisfit> {
    let significant = &b[b.iter().take_while(|&&x| x == 0).count()..];
    if significant.len() > 8 {
        return Err(BitMisfit::TooLong);
    }
    Ok(significant
        .iter()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
}

/// The `width`-bit value `v` (a number, as a BIT column holds it) as the
/// bytes MariaDB sends for it: big-endian, `(width + 7) / 8` of them.
pub fn bit_bytes(v: &Value, width: u8) -> Option<Vec<u8>> {
    let bits = match v {
        Value::Int(i) => *i as u64,
        Value::UInt(u) => *u,
        _ => return None,
    };
    let len = usize::from(width.clamp(1, MAX_BIT_WIDTH)).div_ceil(8);
    Some(bits.to_be_bytes()[8 - len..].to_vec())
}

/// `v` (a BIT column's number) as MariaDB writes a BIT default in SHOW
/// CREATE TABLE: `b'101'` (`b'0'` for zero).
pub fn bit_literal(v: &Value) -> Option<String> {
    let bits = match v {
        Value::Int(i) => *i as u64,
        Value::UInt(u) => *u,
        _ => return None,
    };
    Some(format!("b'{bits:b}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_fit_the_width_as_mariadb_stores_them() {
        let fits = |v: Value, w| bit_value(&v, w);
        assert_eq!(fits(Value::Int(7), 3), Ok(Value::Int(7)));
        assert_eq!(fits(Value::Int(9), 3), Err(BitMisfit::TooLong));
        assert_eq!(fits(Value::Int(-1), 3), Err(BitMisfit::TooLong));
        assert_eq!(fits(Value::Int(-1), 64), Ok(Value::UInt(u64::MAX)));
        assert_eq!(fits(Value::text("a"), 8), Ok(Value::Int(97)));
        assert_eq!(fits(Value::text("ab"), 8), Err(BitMisfit::TooLong));
        assert_eq!(fits(Value::text("7"), 3), Err(BitMisfit::TooLong));
        assert_eq!(fits(Value::text(""), 1), Ok(Value::Int(0)));
        assert_eq!(fits(Value::bytes([0, 7]), 3), Ok(Value::Int(7)));
        assert_eq!(
            fits(Value::Decimal(Decimal::new(25, 1)), 8),
            Ok(Value::Int(3))
        );
        assert_eq!(
            fits(Value::Decimal(Decimal::new(-4, 1)), 3),
            Err(BitMisfit::Negative)
        );
        assert_eq!(fits(Value::Double(3.6), 8), Ok(Value::Int(3)));
        assert_eq!(bit_clamped(3, BitMisfit::TooLong), Value::Int(7));
        assert_eq!(bit_clamped(64, BitMisfit::TooLong), Value::UInt(u64::MAX));
    }

    #[test]
    fn bytes_and_literals_show_the_bits() {
        assert_eq!(bit_bytes(&Value::Int(7), 3), Some(vec![7]));
        assert_eq!(bit_bytes(&Value::Int(258), 10), Some(vec![1, 2]));
        assert_eq!(bit_bytes(&Value::UInt(u64::MAX), 64), Some(vec![0xFF; 8]));
        assert_eq!(bit_literal(&Value::Int(9)).as_deref(), Some("b'1001'"));
        assert_eq!(bit_literal(&Value::Int(0)).as_deref(), Some("b'0'"));
    }
}
