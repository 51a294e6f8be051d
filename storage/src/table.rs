//! A table as the storage layer sees it: its schema, the catalog record, the
//! row codec and how index entries are laid out in their column families.
//!
//! - primary family `t<id>`: primary key (or hidden row id) -> row
//! - secondary family `i<index id>`: (index columns ++ primary key) ->
//!   [`SecondaryValue`]: the primary key, or the primary key and the row.

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use ladle_common::{
    coerce, ColumnDefault, IndexSchema, Row, RowColumns, SqlType, TableSchema, Value,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::{cf, keys, IndexRef, Result, StorageError};

/// The catalog record of a table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct TableEntry {
    pub schema: TableSchema,
    /// Per column, the value rows written before the column existed read as
    /// (fixed when ADD COLUMN runs, so DEFAULT CURRENT_TIMESTAMP is stable).
    pub pads: Vec<Value>,
    /// Secondary entries carry the whole row (no primary read on lookup).
    pub secondary_full_row: bool,
}

/// Counters shared by every schema version of one table.
#[derive(Debug, Default)]
pub(crate) struct TableCounters {
    /// The next AUTO_INCREMENT value to hand out.
    pub auto_inc: Mutex<u64>,
    /// Committed row count (approximate after a restart).
    pub rows: AtomicI64,
}

/// A table's current schema plus what the storage layer needs to read and
/// write its rows. Replaced (not mutated) by DDL.
#[derive(Debug)]
pub(crate) struct TableState {
    pub entry: TableEntry,
    pub schema: Arc<TableSchema>,
    pub counters: Arc<TableCounters>,
    /// The primary index's column family name.
    primary_cf: String,
}

impl TableState {
    pub fn new(entry: TableEntry, counters: Arc<TableCounters>) -> TableState {
        TableState {
            primary_cf: cf::primary(entry.schema.id),
            schema: Arc::new(entry.schema.clone()),
            entry,
            counters,
        }
    }

    pub fn primary_cf(&self) -> &str {
        &self.primary_cf
    }

    /// Column positions of an index; the primary of a table without a
    /// primary key has none.
    pub fn index_columns(&self, index: IndexRef) -> Option<&[usize]> {
        match index {
            IndexRef::Primary => Some(self.schema.primary_key.as_deref().unwrap_or(&[])),
            IndexRef::Secondary(id) => self.secondary(id).map(|i| &i.columns[..]),
        }
    }

    pub fn secondary(&self, id: u64) -> Option<&IndexSchema> {
        self.schema.indexes.iter().find(|i| i.id == id)
    }

    pub fn index_cf(&self, index: IndexRef) -> String {
        match index {
            IndexRef::Primary => self.primary_cf.clone(),
            IndexRef::Secondary(id) => cf::secondary(id),
        }
    }

    /// The encoded primary key of a (coerced) row; `None` without a PK.
    pub fn primary_key(&self, row: &Row) -> Option<Vec<u8>> {
        let pk = self.schema.primary_key.as_ref()?;
        Some(self.encode_columns(pk, row))
    }

    pub fn encode_columns(&self, columns: &[usize], row: &Row) -> Vec<u8> {
        keys::encode_key(columns.iter().map(|&c| (&row[c], &self.schema.columns[c])))
    }

    /// The key of `row`'s entry in a secondary index.
    pub fn secondary_key(&self, index: &IndexSchema, row: &Row, pk: &[u8]) -> Vec<u8> {
        let mut k = self.encode_columns(&index.columns, row);
        k.extend_from_slice(pk);
        k
    }

    /// The value of a secondary entry.
    pub fn secondary_value(&self, pk: &[u8], row: &Row) -> Result<Vec<u8>> {
        if self.entry.secondary_full_row {
            let mut v = Vec::with_capacity(pk.len() + 64);
            v.push(1);
            v.extend_from_slice(&(pk.len() as u32).to_be_bytes());
            v.extend_from_slice(pk);
            v.extend_from_slice(&encode_row(row)?);
            Ok(v)
        } else {
            let mut v = Vec::with_capacity(pk.len() + 1);
            v.push(0);
            v.extend_from_slice(pk);
            Ok(v)
        }
    }

    /// Encodes key values given by a caller (lookups, ranges): coerced to
    /// the index's column types; `None` if one cannot be (matches nothing).
    pub fn encode_lookup_key(&self, columns: &[usize], key: &[Value]) -> Option<Vec<u8>> {
        if key.len() > columns.len() {
            return None;
        }
        let mut out = Vec::new();
        for (v, &c) in key.iter().zip(columns) {
            let column = &self.schema.columns[c];
            let v = coerce(v, column).ok()?;
            keys::encode_value(&mut out, &v, column);
        }
        Some(out)
    }

    /// Decodes a stored row, padding columns added after it was written.
    pub fn decode_row(&self, bytes: &[u8]) -> Result<Row> {
        let row: Row = postcard::from_bytes(bytes).map_err(|e| self.corrupt_row(e))?;
        Ok(self.pad_row(row, None))
    }

    /// [`TableState::decode_columns`] where `keep` is given, else
    /// [`TableState::decode_row`].
    pub fn decode(&self, bytes: &[u8], keep: Option<&[bool]>) -> Result<Row> {
        match keep {
            Some(keep) => self.decode_columns(bytes, keep),
            None => self.decode_row(bytes),
        }
    }

    /// [`TableState::decode_row`] keeping only the columns `keep` marks
    /// (the others read as NULL): a scan's reader that needs few columns
    /// does not allocate the rest.
    pub fn decode_columns(&self, bytes: &[u8], keep: &[bool]) -> Result<Row> {
        let mut de = postcard::Deserializer::from_bytes(bytes);
        let row = serde::de::DeserializeSeed::deserialize(RowColumns { keep }, &mut de)
            .map_err(|e| self.corrupt_row(e))?;
        Ok(self.pad_row(row, Some(keep)))
    }

    fn corrupt_row(&self, e: postcard::Error) -> StorageError {
        StorageError::Corruption(format!("row of table {}: {e}", self.schema.name))
    }

    /// Pads a row written before columns were added with their values; a
    /// column `keep` leaves out is NULL there too, as in the rest of a
    /// narrowed row (rows are compared with deltas narrowed the same way).
    fn pad_row(&self, mut row: Row, keep: Option<&[bool]>) -> Row {
        if row.len() < self.schema.columns.len() {
            let start = row.len();
            row.extend((start..self.schema.columns.len()).map(
                |i| match keep.and_then(|k| k.get(i)) {
                    Some(false) => Value::Null,
                    _ => self.entry.pads.get(i).cloned().unwrap_or(Value::Null),
                },
            ));
        }
        row
    }

    /// Bytes of a row's non-BLOB/TEXT content, for the row size limit.
    pub fn row_size(&self, row: &Row) -> usize {
        row.iter()
            .zip(&self.schema.columns)
            .filter(|(_, c)| !matches!(c.ty, SqlType::Blob(_) | SqlType::Text(_) | SqlType::Json))
            .map(|(v, _)| match v {
                Value::Null => 0,
                Value::Text(s) => s.len(),
                Value::Bytes(b) => b.len(),
                Value::Decimal(_) => 16,
                _ => 8,
            })
            .sum()
    }
}

/// The primary key (or row id) and row a secondary entry points at.
pub(crate) enum SecondaryValue<'a> {
    Pk(&'a [u8]),
    PkAndRow(&'a [u8], &'a [u8]),
}

pub(crate) fn parse_secondary_value(v: &[u8]) -> Result<SecondaryValue<'_>> {
    let bad = || StorageError::Corruption("malformed secondary index entry".into());
    match v.split_first() {
        Some((0, pk)) => Ok(SecondaryValue::Pk(pk)),
        Some((1, rest)) => {
            let len = u32::from_be_bytes(
                rest.get(..4)
                    .ok_or_else(bad)?
                    .try_into()
                    .map_err(|_| bad())?,
            ) as usize;
            let pk = rest.get(4..4 + len).ok_or_else(bad)?;
            Ok(SecondaryValue::PkAndRow(pk, &rest[4 + len..]))
        }
        _ => Err(bad()),
    }
}

pub(crate) fn encode_row(row: &Row) -> Result<Vec<u8>> {
    postcard::to_stdvec(row).map_err(|e| StorageError::Internal(format!("encoding a row: {e}")))
}

/// The value existing rows get for a column added by ALTER TABLE.
pub fn pad_value(column: &ladle_common::ColumnSchema) -> Value {
    match &column.default {
        ColumnDefault::Value(v) => coerce(v, column).unwrap_or(Value::Null),
        ColumnDefault::CurrentTimestamp => coerce(&now(), column).unwrap_or(Value::Null),
        // The shim computes a generated column's value for existing rows.
        ColumnDefault::None | ColumnDefault::Generated { .. } if column.nullable => Value::Null,
        // MySQL fills a NOT NULL column without a default with the type's
        // implicit default.
        ColumnDefault::None | ColumnDefault::Generated { .. } => implicit_default(&column.ty),
    }
}

fn implicit_default(ty: &SqlType) -> Value {
    match ty {
        SqlType::Int { .. } | SqlType::Year | SqlType::Bit(_) => Value::Int(0),
        SqlType::Float | SqlType::Double => Value::Double(0.0),
        SqlType::Decimal { scale, .. } => {
            Value::Decimal(rust_decimal::Decimal::new(0, u32::from(*scale)))
        }
        SqlType::Char(_) | SqlType::VarChar(_) | SqlType::Text(_) | SqlType::Json => {
            Value::text("")
        }
        SqlType::Enum(labels) => labels.first().map_or(Value::text(""), Value::text),
        SqlType::Binary(_) | SqlType::VarBinary(_) | SqlType::Blob(_) => Value::bytes([]),
        SqlType::Time { .. } => Value::Time(0),
        // '0000-00-00' has no representation; NULL is the closest.
        SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. } => Value::Null,
    }
}

/// The current time as a DATETIME value (whole seconds, UTC).
pub(crate) fn now() -> Value {
    let secs = chrono::Utc::now().timestamp();
    Value::DateTime(
        chrono::DateTime::from_timestamp(secs, 0)
            .unwrap_or_default()
            .naive_utc(),
    )
}
