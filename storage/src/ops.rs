//! What callers ask of storage (write ops, the rows an UPDATE or DELETE
//! considers, the index a read uses) and what a write returns.

use std::sync::Arc;

use ladle_common::{Lsn, Row, TableId, TableSchema, Value};

use crate::error::Result;

/// Which index of a table a read uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexRef {
    /// The primary key (or the hidden row id of a table without one).
    Primary,
    /// A secondary index, by [`IndexSchema::id`].
    Secondary(u64),
}

/// Rows an UPDATE or DELETE considers.
#[derive(Clone, Debug)]
pub enum ScanSpec {
    /// Every row of the table.
    Full,
    /// Rows whose index columns start with `key` (a prefix of the index's
    /// columns, or all of them).
    Prefix { index: IndexRef, key: Vec<Value> },
    /// The rows with these primary keys, visited in this order (an UPDATE
    /// with ORDER BY, which InnoDB applies row by row in that order).
    Keys(Vec<Vec<Value>>),
}

/// Decides whether a row matches (DELETE/UPDATE WHERE).
pub type RowFilter = Arc<dyn Fn(&Row) -> Result<bool> + Send + Sync>;
/// Computes the new row for a matching row, or `None` if it does not match.
pub type RowUpdater = Arc<dyn Fn(&Row) -> Result<Option<Row>> + Send + Sync>;
/// ON DUPLICATE KEY UPDATE: `(existing, proposed) -> new row`.
pub type ConflictUpdater = Arc<dyn Fn(&Row, &Row) -> Result<Row> + Send + Sync>;
/// An INSERT's RETURNING: `(row, generated) -> the values listed for it`,
/// for each row the op leaves in the table, as stored, with the
/// AUTO_INCREMENT value the op generated for it, if it did.
pub type RowReturning = Arc<dyn Fn(&Row, Option<u64>) -> Result<Row> + Send + Sync>;

/// What an INSERT does when it meets an existing PRIMARY/UNIQUE key.
#[derive(Clone)]
pub enum OnConflict {
    Error,
    /// INSERT IGNORE: skip the row.
    Ignore,
    /// REPLACE: delete every conflicting row, then insert.
    Replace,
    /// INSERT ... ON DUPLICATE KEY UPDATE.
    Update(ConflictUpdater),
}

/// How an INSERT reserves AUTO_INCREMENT values, as MariaDB's handler
/// asks InnoDB for them (`innodb_autoinc_lock_mode=1`): a row that wants a
/// value takes the next one of the statement's current batch; when the
/// batch is used up, the table's counter moves past a new batch. Values a
/// batch reserved and no written row kept (the statement failed, or ended
/// early) are gone, as in MariaDB: a failed statement leaves a gap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdBatches {
    /// The statement's row count is known (a VALUES list): the first batch
    /// holds one value per row of the op; when explicit ids overtook it, a
    /// later one holds one per row not yet written.
    #[default]
    PerRow,
    /// As [`IdBatches::PerRow`] for a VALUES list of this many rows, some
    /// of which the front end may have dropped before the write (INSERT
    /// IGNORE skipping a row that fails a CHECK or FOREIGN KEY): the first
    /// batch holds one value per listed row, as MariaDB's.
    Listed(u64),
    /// The row count is unknown (INSERT ... SELECT): batches of 1, 2, 4,
    /// 8... values, at most [`IdBatches::MAX`] each.
    Growing,
}

impl IdBatches {
    /// The largest batch (MariaDB's `AUTO_INC_DEFAULT_NB_MAX`).
    pub const MAX: u64 = 65535;

    /// The size of the statement's batch number `taken` (0 for the
    /// first) for an op of `rows` rows (later batches are sized by
    /// [`crate::IdAllocator`] while the first one's rows last).
    pub fn size(self, taken: u32, rows: usize) -> u64 {
        match self {
            IdBatches::PerRow if taken == 0 => (rows as u64).max(1),
            IdBatches::Listed(n) if taken == 0 => n.max(1),
            _ => 1u64.checked_shl(taken).unwrap_or(Self::MAX).min(Self::MAX),
        }
    }
}

/// One statement's effect, resolved and validated inside the commit.
#[derive(Clone)]
pub enum WriteOp {
    /// Full rows in schema order. `Value::Null` in an AUTO_INCREMENT column
    /// (or 0, when `auto_value_on_zero`) allocates the next value. Values
    /// are coerced to column types.
    Insert {
        table: TableId,
        /// The table's [`TableSchema::version`] the statement built this op
        /// for: a commit after a schema change fails with
        /// [`crate::StorageError::SchemaChanged`] instead of writing rows laid
        /// out for the old columns.
        schema_version: u32,
        rows: Vec<Row>,
        on_conflict: OnConflict,
        /// MySQL's default: a 0 in the AUTO_INCREMENT column generates a
        /// value; `false` under sql_mode NO_AUTO_VALUE_ON_ZERO (which dumps
        /// set), where the 0 is stored.
        auto_value_on_zero: bool,
        /// How the statement reserves the AUTO_INCREMENT values it
        /// generates (what the next id after a statement shows).
        id_batches: IdBatches,
        /// RETURNING, called inside the commit for each row as the op
        /// leaves it in the table, in order (see [`OpResult::rows`]), as
        /// MariaDB's row loop evaluates it: an error fails the op there,
        /// before its later rows, and nothing of it is written.
        returning: Option<RowReturning>,
    },
    Update {
        table: TableId,
        /// The table's [`TableSchema::version`] the statement built this op
        /// for: a commit after a schema change fails with
        /// [`crate::StorageError::SchemaChanged`] instead of writing rows laid
        /// out for the old columns.
        schema_version: u32,
        scan: ScanSpec,
        update: RowUpdater,
    },
    Delete {
        table: TableId,
        /// The table's [`TableSchema::version`] the statement built this op
        /// for: a commit after a schema change fails with
        /// [`crate::StorageError::SchemaChanged`] instead of writing rows laid
        /// out for the old columns.
        schema_version: u32,
        scan: ScanSpec,
        filter: RowFilter,
    },
}

impl WriteOp {
    /// The table the op writes.
    pub fn table(&self) -> TableId {
        match self {
            WriteOp::Insert { table, .. }
            | WriteOp::Update { table, .. }
            | WriteOp::Delete { table, .. } => *table,
        }
    }

    /// The [`TableSchema::version`] the op was built for.
    pub fn schema_version(&self) -> u32 {
        match self {
            WriteOp::Insert { schema_version, .. }
            | WriteOp::Update { schema_version, .. }
            | WriteOp::Delete { schema_version, .. } => *schema_version,
        }
    }
}

/// The outcome of one [`WriteOp`], with MySQL's counting rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpResult {
    /// Rows the op changed (MySQL's affected rows): an UPDATE that leaves
    /// a row as it was does not count it; an ON DUPLICATE KEY UPDATE
    /// counts 2 for a row it changed.
    pub affected_rows: u64,
    /// Rows the op found (what a client that set CLIENT_FOUND_ROWS is
    /// told): like `affected_rows`, but an UPDATE counts every row its
    /// WHERE matched, and an ON DUPLICATE KEY UPDATE that changed nothing
    /// counts 1.
    pub found_rows: u64,
    /// The first AUTO_INCREMENT value this op generated for a row it
    /// wrote, if any: what `LAST_INSERT_ID()` becomes. A value generated
    /// for a row that was then ignored or turned into an update does not
    /// count (MySQL's `first_successful_insert_id`).
    pub last_insert_id: Option<u64>,
    /// The insert id of the OK packet (`mysql_insert_id()`): the first
    /// generated value if there is one; else, if the op wrote any row, the
    /// AUTO_INCREMENT column of the last row it processed (an explicit id,
    /// a row INSERT IGNORE skipped, or the row an ON DUPLICATE KEY UPDATE
    /// changed); else 0.
    pub insert_id: u64,
    /// Rows an INSERT IGNORE skipped: one duplicate-key message each
    /// ("Duplicate entry '1' for key 'PRIMARY'"), which the front end
    /// reports as warnings.
    pub ignored: Vec<String>,
    /// For an INSERT with `returning`: what it gave for each row the op
    /// left in the table, in order: the row written (coerced, its
    /// AUTO_INCREMENT value filled; under REPLACE the new row), or the row
    /// an ON DUPLICATE KEY UPDATE left (changed or not); nothing for a row
    /// IGNORE skipped. What MariaDB's `RETURNING` lists.
    pub rows: Vec<Row>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteResult {
    /// The LSN of the group commit that made the write durable.
    pub lsn: Lsn,
    pub ops: Vec<OpResult>,
}

/// ALTER TABLE's new shape of a table, for [`crate::Storage::alter_table`].
#[derive(Clone, Debug)]
pub struct TableChange {
    /// The new schema, under the same id. An index kept from the old schema
    /// keeps its id; a new one has id 0 (storage assigns it). A different
    /// database or name renames the table.
    pub schema: TableSchema,
    /// The rows change (columns dropped, moved, converted, the primary key):
    /// every row goes through the caller's conversion and is written again.
    /// Without it only the catalog record changes (and new indexes are
    /// built).
    pub rewrite_rows: bool,
    /// Meta records written in the same batch as the schema: `Some` puts,
    /// `None` deletes (constraints kept beside the table).
    pub meta: Vec<(String, Option<Vec<u8>>)>,
}
