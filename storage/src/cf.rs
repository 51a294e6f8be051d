//! Column-family names: the only place they are spelled.

use ladle_common::TableId;

use crate::engine::CfKind;

/// Databases, tables, indexes, meta records, counters, format version.
pub(crate) const CATALOG: &str = "catalog";
/// LSN -> the batch's row deltas.
pub(crate) const CHANGE_LOG: &str = "changelog";

/// The primary index of a table: key -> the row.
pub(crate) fn primary(table: TableId) -> String {
    format!("t{table}")
}

/// A secondary index: (index columns, primary key) -> primary key or row.
pub(crate) fn secondary(index_id: u64) -> String {
    format!("i{index_id}")
}

/// How a column family is tuned, by its name.
pub(crate) fn kind(name: &str) -> CfKind {
    if name == CATALOG || name == CHANGE_LOG || name == "default" {
        CfKind::System
    } else {
        CfKind::Index
    }
}

/// Catalog record keys.
pub(crate) mod catalog_key {
    use ladle_common::TableId;

    pub const FORMAT: &[u8] = b"format";
    pub const EPOCH: &[u8] = b"epoch";
    pub const IDS: &[u8] = b"ids";
    pub const LSN: &[u8] = b"lsn";
    pub const DATABASE: &str = "db/";
    pub const TABLE: &str = "table/";
    pub const META: &str = "meta/";
    pub const AUTO_INC: &str = "autoinc/";
    pub const BUILDING: &str = "building/";

    pub fn database(name: &str) -> Vec<u8> {
        format!("{DATABASE}{name}").into_bytes()
    }
    pub fn table(id: TableId) -> Vec<u8> {
        format!("{TABLE}{id:020}").into_bytes()
    }
    pub fn meta(key: &str) -> Vec<u8> {
        format!("{META}{key}").into_bytes()
    }
    pub fn auto_inc(id: TableId) -> Vec<u8> {
        format!("{AUTO_INC}{id:020}").into_bytes()
    }
    pub fn building(index_id: u64) -> Vec<u8> {
        format!("{BUILDING}{index_id:020}").into_bytes()
    }
}
