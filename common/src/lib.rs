//! Types shared by every Ladle crate: [`Value`], [`Row`], [`SqlType`],
//! [`Collation`] and the table schema ([`TableSchema`], [`ColumnSchema`],
//! [`IndexSchema`]).
//!
//! This crate depends on no other Ladle crate and knows nothing of SQL text,
//! RocksDB or the wire protocol. It holds the rules every layer must agree on:
//! how values compare (including string collations, see [`Value::cmp_collated`])
//! and how a value is coerced into a column's type ([`coerce`]).

mod bit;
mod coerce;
mod date_text;
mod general_ci_weights;
mod row_columns;
mod schema;
mod utf8;
mod value;

pub use bit::{bit_bytes, bit_literal, MAX_BIT_WIDTH};
pub use coerce::{
    coerce, coerce_adjusting, parse_datetime, parse_datetime_prefix, parse_datetime_prefix_len,
    parse_time, truncate_datetime, truncate_micros, truncation_note, Adjustment, CoerceError,
};
pub use row_columns::RowColumns;
pub use schema::{
    ColumnDefault, ColumnSchema, IndexSchema, TableId, TableSchema, HIDDEN_COLUMN_PREFIX,
};
pub use utf8::{escaped_bytes, utf8_replacing_invalid};
pub use value::{
    date_from_parts, date_parts, is_calendar_date, Collation, SqlType, Value, ZERO_DATE,
};

/// The largest packet (and so the largest value) Ladle accepts or builds,
/// reported as `@@max_allowed_packet`: a string function whose result would
/// be longer returns NULL with warning 1301, as in MySQL.
pub const MAX_ALLOWED_PACKET: u64 = 64 * 1024 * 1024;

/// The most bytes a GROUP_CONCAT result holds (MariaDB's default
/// `group_concat_max_len`); the rest is cut off, never half a character.
pub const GROUP_CONCAT_MAX_LEN: usize = 1 << 20;

/// A row: one value per column, in schema order.
pub type Row = Vec<Value>;

/// Log sequence number: the position of a committed write batch in the
/// change log. Strictly increasing; 0 means "before any write".
pub type Lsn = u64;

/// A row change. Delta semantics are defined once, here: a record is either
/// added (`Insert`) or removed (`Delete`); an UPDATE is a `Delete` of the old
/// row followed by an `Insert` of the new one.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RowDelta {
    Insert(Row),
    Delete(Row),
}

impl RowDelta {
    /// The row the change carries.
    pub fn row(&self) -> &Row {
        match self {
            RowDelta::Insert(r) | RowDelta::Delete(r) => r,
        }
    }

    /// +1 for an insert, -1 for a delete.
    pub fn sign(&self) -> i64 {
        match self {
            RowDelta::Insert(_) => 1,
            RowDelta::Delete(_) => -1,
        }
    }
}

/// The deltas one committed batch applied to one table, in order.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TableDeltas {
    pub table: TableId,
    pub deltas: Vec<RowDelta>,
}
