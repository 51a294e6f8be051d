//! Reading catalog format version 2 (before declared display widths and
//! fractional-seconds precisions were kept): frozen copies of the record
//! types as version 2 encoded them, and their conversion to the current
//! ones. A version-2 directory is rewritten as version 3 when opened.
//!
//! Only the table record changed between the two versions: `SqlType::Int`
//! gained `display_width` and DATETIME, TIMESTAMP and TIME gained `fsp`.
//! Values, defaults, collations and indexes encode as before, so the
//! current types are reused for them.

use ladle_common::{
    Collation, ColumnDefault, ColumnSchema, IndexSchema, SqlType, TableId, TableSchema, Value,
};
use serde::Deserialize;

use crate::table::TableEntry;

/// `SqlType` as format version 2 encoded it (variant order matters).
#[derive(Deserialize)]
enum SqlTypeV2 {
    Int { bytes: u8, unsigned: bool },
    Float,
    Double,
    Decimal { precision: u8, scale: u8 },
    Char(u32),
    VarChar(u32),
    Text(u32),
    Binary(u32),
    VarBinary(u32),
    Blob(u32),
    Date,
    DateTime,
    Timestamp,
    Time,
    Year,
    Enum(Vec<String>),
    Json,
}

#[derive(Deserialize)]
struct ColumnSchemaV2 {
    name: String,
    ty: SqlTypeV2,
    nullable: bool,
    default: ColumnDefault,
    auto_increment: bool,
    collation: Collation,
    on_update_current_timestamp: bool,
}

#[derive(Deserialize)]
struct TableSchemaV2 {
    id: TableId,
    database: String,
    name: String,
    columns: Vec<ColumnSchemaV2>,
    primary_key: Option<Vec<usize>>,
    indexes: Vec<IndexSchema>,
    version: u32,
}

/// The table record of format version 2.
#[derive(Deserialize)]
pub(super) struct TableEntryV2 {
    schema: TableSchemaV2,
    pads: Vec<Value>,
    secondary_full_row: bool,
}

impl From<SqlTypeV2> for SqlType {
    /// Version 2 kept neither: every integer had its default display width
    /// and every temporal type precision 0.
    fn from(t: SqlTypeV2) -> SqlType {
        match t {
            SqlTypeV2::Int { bytes, unsigned } => SqlType::Int {
                bytes,
                unsigned,
                display_width: None,
            },
            SqlTypeV2::Float => SqlType::Float,
            SqlTypeV2::Double => SqlType::Double,
            SqlTypeV2::Decimal { precision, scale } => SqlType::Decimal { precision, scale },
            SqlTypeV2::Char(n) => SqlType::Char(n),
            SqlTypeV2::VarChar(n) => SqlType::VarChar(n),
            SqlTypeV2::Text(n) => SqlType::Text(n),
            SqlTypeV2::Binary(n) => SqlType::Binary(n),
            SqlTypeV2::VarBinary(n) => SqlType::VarBinary(n),
            SqlTypeV2::Blob(n) => SqlType::Blob(n),
            SqlTypeV2::Date => SqlType::Date,
            SqlTypeV2::DateTime => SqlType::DateTime { fsp: 0 },
            SqlTypeV2::Timestamp => SqlType::Timestamp { fsp: 0 },
            SqlTypeV2::Time => SqlType::Time { fsp: 0 },
            SqlTypeV2::Year => SqlType::Year,
            SqlTypeV2::Enum(labels) => SqlType::Enum(labels),
            SqlTypeV2::Json => SqlType::Json,
        }
    }
}

impl From<TableEntryV2> for TableEntry {
    fn from(e: TableEntryV2) -> TableEntry {
        let s = e.schema;
        let columns = s
            .columns
            .into_iter()
            .map(|c| ColumnSchema {
                name: c.name,
                ty: c.ty.into(),
                nullable: c.nullable,
                default: c.default,
                auto_increment: c.auto_increment,
                collation: c.collation,
                on_update_current_timestamp: c.on_update_current_timestamp,
            })
            .collect();
        TableEntry {
            schema: TableSchema {
                id: s.id,
                database: s.database,
                name: s.name,
                columns,
                primary_key: s.primary_key,
                indexes: s.indexes,
                version: s.version,
            },
            pads: e.pads,
            secondary_full_row: e.secondary_full_row,
        }
    }
}
