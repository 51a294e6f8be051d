//! Table schemas as the catalog stores them.

use serde::{Deserialize, Serialize};

use crate::{Collation, SqlType, Value};

/// A table's identity, unique for the lifetime of a data directory (never
/// reused after DROP TABLE).
pub type TableId = u64;

/// A column's DEFAULT clause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ColumnDefault {
    /// No DEFAULT: NULL for nullable columns; an error for NOT NULL columns
    /// omitted from an INSERT (MySQL 1364, "Field doesn't have a default").
    None,
    Value(Value),
    /// DEFAULT CURRENT_TIMESTAMP / NOW().
    CurrentTimestamp,
    /// `GENERATED ALWAYS AS (expr) STORED | VIRTUAL`: the value is computed
    /// from the row's other columns on every write (a generated column has
    /// no DEFAULT). Both kinds are stored; `stored` is what was declared.
    /// Kept last so catalogs written before it still decode.
    Generated {
        /// The expression, as SQL text over the table's columns.
        expr: String,
        stored: bool,
    },
}

impl ColumnDefault {
    /// The generation expression of a generated column.
    pub fn generation(&self) -> Option<&str> {
        match self {
            ColumnDefault::Generated { expr, .. } => Some(expr),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnSchema {
    pub name: String,
    pub ty: SqlType,
    pub nullable: bool,
    pub default: ColumnDefault,
    pub auto_increment: bool,
    /// String comparison rule; ignored for non-text columns.
    pub collation: Collation,
    /// `ON UPDATE CURRENT_TIMESTAMP`.
    pub on_update_current_timestamp: bool,
}

impl ColumnSchema {
    /// How the column's values compare: by its collation when it holds
    /// text, byte for byte otherwise.
    pub fn compare_collation(&self) -> Collation {
        if self.ty.is_text() {
            self.collation
        } else {
            Collation::Binary
        }
    }

    /// A nullable column with no default and the default collation.
    pub fn new(name: impl Into<String>, ty: SqlType) -> ColumnSchema {
        let collation = if ty.is_binary() {
            Collation::Binary
        } else {
            Collation::GeneralCi
        };
        ColumnSchema {
            name: name.into(),
            ty,
            nullable: true,
            default: ColumnDefault::None,
            auto_increment: false,
            collation,
            on_update_current_timestamp: false,
        }
    }

    pub fn not_null(mut self) -> ColumnSchema {
        self.nullable = false;
        self
    }

    /// Whether this is the hidden generated column behind a functional key
    /// part (MySQL 8's `KEY idx ((expr))`): named
    /// `!hidden!<index>!<part>!<n>`, it is indexed like any column but
    /// left out of `SELECT *`, DESCRIBE and INSERT without a column list.
    pub fn is_hidden(&self) -> bool {
        self.name.starts_with(HIDDEN_COLUMN_PREFIX) && self.default.generation().is_some()
    }
}

/// How the name of a functional key part's hidden column begins (as in
/// MySQL; a column name cannot contain `!` unquoted, and Ladle refuses it
/// quoted too).
pub const HIDDEN_COLUMN_PREFIX: &str = "!hidden!";

/// A secondary (or unique) index over some columns of a table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexSchema {
    /// Unique within the data directory; names the index's column family.
    pub id: u64,
    pub name: String,
    /// Positions of the indexed columns in the table's column list.
    pub columns: Vec<usize>,
    pub unique: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableSchema {
    pub id: TableId,
    pub database: String,
    pub name: String,
    pub columns: Vec<ColumnSchema>,
    /// Positions of the PRIMARY KEY columns; `None` for a table without one
    /// (storage then keys rows by a hidden (epoch, sequence) row id).
    pub primary_key: Option<Vec<usize>>,
    /// Secondary indexes (UNIQUE and plain KEY/INDEX), excluding the primary.
    pub indexes: Vec<IndexSchema>,
    /// Bumped by every ALTER TABLE; rows written under an older version are
    /// padded with the added columns' defaults when read.
    pub version: u32,
}

impl TableSchema {
    /// Position of the column named `name` (case-insensitive, as in MySQL).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The index named `name` (case-insensitive).
    pub fn index(&self, name: &str) -> Option<&IndexSchema> {
        self.indexes
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(name))
    }

    /// The column with AUTO_INCREMENT, if any.
    pub fn auto_increment_column(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.auto_increment)
    }
}
