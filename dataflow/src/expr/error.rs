//! [`EvalError`], and the markers a maintained view stores for a value
//! whose computation overflowed.

use ladle_common::Value;

/// An evaluation failure (the user's fault).
#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// A result outside its type's range (integer overflow): MySQL's 1690.
    OutOfRange(String),
    /// A scalar subquery without an aggregate found several rows at read
    /// time: MySQL's 1242.
    SubqueryRows,
    /// Any other bad input.
    Invalid(String),
}

pub type EvalResult<T = Value> = Result<T, EvalError>;

/// What a maintained view stores for a computed value that overflowed
/// (MySQL's 1690 in a projection evaluated when a write is propagated):
/// not NULL, which would be a wrong answer, but a NaN with a payload of
/// its own per message. No SQL value is a NaN (evaluation refuses
/// non-finite doubles), a NaN equals only itself under `Value`'s total
/// order, so an insert and its later delete still cancel out, and
/// arithmetic carries it (an aggregate over it keeps it). A read that
/// returns it fails with the error instead ([`out_of_range_in`]).
///
/// Two more stand for [`EvalError::SubqueryRows`] (MySQL's 1242): a scalar
/// subquery's value computed while a write propagates, from several rows
/// ([`subquery_rows_marker`]), and the same value once MySQL would have
/// evaluated it whether or not the query reads it (a GROUP BY key or an
/// aggregate's argument: [`subquery_rows_evaluated`]); a read returning
/// either fails with 1242.
///
/// The last four stand for a WHERE that overflowed (see
/// [`where_failed_marker`]).
const OUT_OF_RANGE_MARKERS: [(u64, &str); 10] = [
    (0x7ff8_0000_0000_1690, "BIGINT value is out of range"),
    (
        0x7ff8_0000_0001_1690,
        "BIGINT UNSIGNED value is out of range",
    ),
    (0x7ff8_0000_0002_1690, "DECIMAL value is out of range"),
    (0x7ff8_0000_0003_1690, "DOUBLE value is out of range"),
    (0x7ff8_0000_0000_1242, SUBQUERY_ROWS),
    (EVALUATED_ROWS, SUBQUERY_ROWS),
    (WHERE_FAILED, "BIGINT value is out of range"),
    (
        WHERE_FAILED + 0x1_0000,
        "BIGINT UNSIGNED value is out of range",
    ),
    (WHERE_FAILED + 0x2_0000, "DECIMAL value is out of range"),
    (WHERE_FAILED + 0x3_0000, "DOUBLE value is out of range"),
];

/// The bits of the first [`where_failed_marker`]; the others follow it,
/// one per message, as the plain markers do.
const WHERE_FAILED: u64 = 0x7ff8_0000_0010_1690;

/// Where the [`where_failed_marker`]s start in the table.
const WHERE_FAILED_AT: usize = 6;

/// The bits of [`subquery_rows_evaluated`].
const EVALUATED_ROWS: u64 = 0x7ff8_0000_0001_1242;

/// The message of the marker for [`EvalError::SubqueryRows`].
pub(crate) const SUBQUERY_ROWS: &str = "Subquery returns more than 1 row";

/// The marker standing for an [`EvalError::SubqueryRows`].
pub(crate) fn subquery_rows_marker() -> Value {
    out_of_range_marker(SUBQUERY_ROWS)
}

/// `v` as MySQL would have computed it even for a query that does not
/// read it: a subquery's several-rows marker becomes the evaluated one
/// (which a projection dropping it keeps, see `ops::Project`).
pub(crate) fn evaluated(v: Value) -> Value {
    match out_of_range_in(&v) {
        Some(SUBQUERY_ROWS) => subquery_rows_evaluated(),
        _ => v,
    }
}

/// The evaluated several-rows marker (see [`evaluated`]).
pub(crate) fn subquery_rows_evaluated() -> Value {
    Value::Double(f64::from_bits(EVALUATED_ROWS))
}

/// Whether `v` is [`subquery_rows_evaluated`].
pub(crate) fn is_evaluated_rows(v: &Value) -> bool {
    matches!(v, Value::Double(f) if f.to_bits() == EVALUATED_ROWS)
}

/// What a filter passes on for a row whose predicate overflowed (MySQL's
/// 1690 evaluating WHERE), in the columns the predicate reads: MySQL
/// evaluates WHERE whether or not the query reads those columns, so unlike
/// a plain marker this one is carried by a projection that drops its
/// column (`ops::Project`), and a read that finds it among the rows of the
/// keys it reads fails with 1690 (`read::read`). The same message as the
/// plain marker's, bits of its own.
pub(crate) fn where_failed_marker(message: &str) -> Value {
    let bits = OUT_OF_RANGE_MARKERS[WHERE_FAILED_AT..]
        .iter()
        .find(|(_, m)| message.starts_with(m))
        .map_or(WHERE_FAILED, |(b, _)| *b);
    Value::Double(f64::from_bits(bits))
}

/// Whether `v` is a [`where_failed_marker`].
pub(crate) fn is_where_failed(v: &Value) -> bool {
    match v {
        Value::Double(f) if f.is_nan() => OUT_OF_RANGE_MARKERS[WHERE_FAILED_AT..]
            .iter()
            .any(|(b, _)| *b == f.to_bits()),
        _ => false,
    }
}

/// The marker standing for an [`EvalError::OutOfRange`] with `message`.
pub(crate) fn out_of_range_marker(message: &str) -> Value {
    let bits = OUT_OF_RANGE_MARKERS
        .iter()
        .find(|(_, m)| message.starts_with(m))
        .map_or(OUT_OF_RANGE_MARKERS[0].0, |(b, _)| *b);
    Value::Double(f64::from_bits(bits))
}

/// The error message `v` stands for, if it is an out-of-range marker.
pub(crate) fn out_of_range_in(v: &Value) -> Option<&'static str> {
    match v {
        Value::Double(f) if f.is_nan() => OUT_OF_RANGE_MARKERS
            .iter()
            .find(|(b, _)| *b == f.to_bits())
            .map(|(_, m)| *m),
        _ => None,
    }
}
