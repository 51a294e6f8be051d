//! AUTO_INCREMENT for an INSERT in the front end: how the statement's
//! values are reserved ([`RowSource::id_batches`]), and which rows take
//! one inside a transaction, where the statement reports them before the
//! write ([`reserve_ids`]).

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::{IdAllocator, IdBatches};
use sqlparser::ast::SetExpr;

use crate::error::Result;
use crate::exec::Engine;
use crate::session::Session;

/// Where an INSERT's rows come from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum RowSource {
    /// A VALUES list of one row.
    OneRow,
    /// A VALUES list of several rows: MySQL reports "Records: ..".
    Rows,
    /// A SELECT: "Records: .." too, and a row count unknown in advance.
    Select,
}

impl RowSource {
    /// Where the rows of an INSERT whose source is `body` come from.
    pub(super) fn of(body: &SetExpr) -> Self {
        match body {
            SetExpr::Values(v) if v.rows.len() == 1 => RowSource::OneRow,
            SetExpr::Values(_) => RowSource::Rows,
            _ => RowSource::Select,
        }
    }

    /// How a statement of `records` rows reserves AUTO_INCREMENT values:
    /// InnoDB's batches of 1, 2, 4... for a SELECT, one per row for a
    /// VALUES list.
    pub(super) fn id_batches(self, records: u64) -> IdBatches {
        match self {
            RowSource::Select => IdBatches::Growing,
            RowSource::OneRow | RowSource::Rows => IdBatches::Listed(records),
        }
    }
}

/// Inside a transaction the write is buffered until COMMIT, but clients
/// (ORMs, RETURNING) need generated keys now: says which rows ask for an
/// AUTO_INCREMENT value, which
/// [`super::transaction_insert::insert_in_transaction`] takes for them as
/// a commit would (none outside a transaction: the write takes them).
pub(super) fn reserve_ids(s: &Session, schema: &TableSchema, rows: &[Row]) -> Vec<bool> {
    let Some(ai) = schema
        .auto_increment_column()
        .filter(|_| s.in_transaction())
    else {
        return vec![false; rows.len()];
    };
    let on_zero = crate::vars::auto_value_on_zero(s);
    rows.iter()
        .map(|r| r[ai].is_null() || (on_zero && r[ai].as_i64() == Some(0)))
        .collect()
}

/// The AUTO_INCREMENT values used up when a statement failed in the
/// front end, before its write: `written` (the rows before the failing
/// one) took theirs, and so did `failed`, the failing row, when it fails
/// after taking its value (a FOREIGN KEY, 1452; a CHECK, 4025, or a value
/// fails before). A row among them whose values fail ends the statement
/// there. MariaDB's rows had taken them (see [`ladle_storage::IdBatches`]),
/// so the counter moves as their write would have moved it: an explicit
/// value of a written row moves it too, the failing row's does not. The
/// first value a written row took is `LAST_INSERT_ID()` after the failed
/// statement, as in MariaDB (its `first_successful_insert_id_in_cur_stmt`).
/// Returns the written rows with the values they took.
pub(super) fn use_up_ids(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    (written, failed): (&[Row], Option<&Row>),
    batches: IdBatches,
) -> Result<Vec<Row>> {
    let mut with_ids = written.to_vec();
    let Some(ai) = schema.auto_increment_column() else {
        return Ok(with_ids);
    };
    let on_zero = crate::vars::auto_value_on_zero(s);
    let strict = crate::vars::strict_mode(s);
    let mut ids = IdAllocator::new(batches, written.len());
    let mut first_written = None;
    let rows = written.iter().map(|r| (r, true));
    for (i, (r, was_written)) in rows.chain(failed.map(|r| (r, false))).enumerate() {
        // A row whose values do not fit (strict mode) or break NOT NULL
        // fails the statement first, before it takes a value.
        let fits = if strict {
            super::write::coerce_row_strict(schema, r, None)
        } else {
            super::write::coerce_row(schema, r)
        };
        if !fits.is_ok_and(|row| ladle_storage::check_not_null(schema, &row, true).is_ok()) {
            break;
        }
        if r[ai].is_null() || (on_zero && r[ai].as_i64() == Some(0)) {
            let id = ids.take(|at_least, size| {
                e.storage
                    .reserve_auto_increment_batch(schema.id, at_least, size)
            })?;
            if was_written {
                first_written.get_or_insert(id);
                with_ids[i][ai] = Value::UInt(id);
            }
        } else if let Some(explicit) = super::write::positive_id(&r[ai]) {
            ids.follow(explicit);
            if was_written {
                e.storage.note_auto_increment(schema.id, explicit)?;
            }
        }
        ids.row_done();
    }
    if let Some(id) = first_written {
        s.last_insert_id = id;
    }
    Ok(with_ids)
}
