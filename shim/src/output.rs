//! What a statement produces ([`Output`], with the `Info` line and the
//! statement [`Kind`] the metrics count) and the column builders for result
//! sets the shim makes itself.

use ladle_common::SqlType;
use ladle_dataflow::{OutputColumn, ResultRows};

/// What a statement produced.
#[derive(Debug)]
pub enum Output {
    Rows {
        columns: Vec<OutputColumn>,
        /// Shared with a view's reader for plain view reads.
        rows: ResultRows,
    },
    Done {
        affected_rows: u64,
        last_insert_id: u64,
        info: Info,
    },
}

impl Output {
    pub fn ok() -> Output {
        Output::affected(0)
    }
    pub fn affected(n: u64) -> Output {
        Output::Done {
            affected_rows: n,
            last_insert_id: 0,
            info: Info::None,
        }
    }
}

/// What an OK packet's info string (`mysql_info()`) reports; the
/// statement's warning count is filled in when the packet is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Info {
    None,
    /// A multi-row INSERT or REPLACE, or INSERT ... SELECT: rows given, and
    /// rows that met a duplicate key (skipped by IGNORE, replaced by
    /// REPLACE, updated by ON DUPLICATE KEY UPDATE).
    Records {
        records: u64,
        duplicates: u64,
    },
    /// An UPDATE: rows its WHERE matched, rows it changed.
    Matched {
        matched: u64,
        changed: u64,
    },
}

impl Info {
    /// The text MySQL sends (two spaces between items), or `""`.
    pub fn render(self, warnings: u16) -> String {
        match self {
            Info::None => String::new(),
            Info::Records {
                records,
                duplicates,
            } => format!("Records: {records}  Duplicates: {duplicates}  Warnings: {warnings}"),
            Info::Matched { matched, changed } => {
                format!("Rows matched: {matched}  Changed: {changed}  Warnings: {warnings}")
            }
        }
    }
}

/// Statement kinds, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Select,
    Insert,
    Update,
    Delete,
    Ddl,
    Transaction,
    Show,
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Select => "select",
            Kind::Insert => "insert",
            Kind::Update => "update",
            Kind::Delete => "delete",
            Kind::Ddl => "ddl",
            Kind::Transaction => "transaction",
            Kind::Show => "show",
            Kind::Other => "other",
        }
    }
}

/// A result column of the given type (for shim-built result sets).
pub fn column(name: &str, ty: SqlType) -> OutputColumn {
    OutputColumn {
        name: name.to_string(),
        table: String::new(),
        origin: None,
        ty,
        nullable: true,
        decimals: None,
        stored: false,
    }
}

pub fn text_column(name: &str) -> OutputColumn {
    column(name, SqlType::VarChar(255))
}

pub fn int_column(name: &str) -> OutputColumn {
    column(
        name,
        SqlType::Int {
            bytes: 8,
            unsigned: false,
            display_width: None,
        },
    )
}
