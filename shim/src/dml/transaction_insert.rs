//! INSERT inside a transaction: rows checked against the transaction's
//! own keys ([`super::transaction_keys`]) and buffered until commit.

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::{IdAllocator, IdBatches, OnConflict, StorageError, WriteOp};

use super::insert_returning::InsertReturning;
use super::overlay::coerce_lenient;
use super::transaction_keys::TransactionKeys;
use super::write::{coerce_row, positive_id, RowCounts};
use crate::error::{Result, ER_DUP_ENTRY};
use crate::exec::Engine;
use crate::output::{Info, Output};
use crate::session::Session;

/// [`TransactionKeys`] for an INSERT of `rows`: the current rows holding
/// their keys and, under ON DUPLICATE KEY UPDATE, the keys the rows they
/// collide with take when updated (an update can collide with a row no
/// proposed row shares a key with).
pub(super) fn upsert_keys<'a>(
    e: &Engine,
    s: &Session,
    schema: &'a TableSchema,
    rows: &[Row],
    on_conflict: &OnConflict,
) -> Result<TransactionKeys<'a>> {
    let OnConflict::Update(f) = on_conflict else {
        return TransactionKeys::new(e, s, schema, rows);
    };
    let first = TransactionKeys::new(e, s, schema, rows)?;
    let mut probe = rows.to_vec();
    for row in rows {
        if let Some(existing) = first.first_conflict(row) {
            if let Ok(updated) = f(&existing, row) {
                probe.push(coerce_lenient(schema, &updated));
            }
        }
    }
    if probe.len() == rows.len() {
        return Ok(first);
    }
    TransactionKeys::new(e, s, schema, &probe)
}

/// An INSERT inside a transaction, checked when it is issued (as InnoDB
/// does) against the table as the transaction sees it: committed rows with
/// the transaction's earlier writes replayed, plus the statement's own
/// earlier rows. A duplicate PRIMARY/UNIQUE key fails the statement with
/// 1062 (the transaction goes on); INSERT IGNORE drops the row with a
/// warning; REPLACE and ON DUPLICATE KEY UPDATE report the rows they will
/// replace or update. Only the rows that will be written are buffered, so
/// COMMIT applies exactly what the statements reported (it still validates
/// everything against the rows committed by then).
///
/// `generated[i]` says whether row `i` wants an AUTO_INCREMENT value
/// (rather than giving one), taken here, reserved as `id_batches` says
/// ([`RowIds`]). Also returns what `returning` lists for each row as the
/// statement leaves it (see `OpResult::rows`), evaluated as the row is
/// taken: one that fails fails the statement, which buffers nothing.
pub(super) fn insert_in_transaction(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    rows: Vec<Row>,
    rules: (OnConflict, Option<&InsertReturning>),
    ids: (Vec<bool>, IdBatches),
) -> Result<(Output, Vec<Row>)> {
    let mut first_generated = None;
    let taken = take_rows(e, s, schema, rows, rules, ids, &mut first_generated);
    // The first value a row the statement took generated, whether the
    // statement then fails or not (MariaDB's
    // `first_successful_insert_id_in_cur_stmt`).
    if let Some(id) = first_generated {
        s.last_insert_id = id;
    }
    taken
}

/// [`insert_in_transaction`]'s row loop; `first_generated`: the first
/// AUTO_INCREMENT value a row it took was given.
fn take_rows(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    rows: Vec<Row>,
    (on_conflict, returning): (OnConflict, Option<&InsertReturning>),
    (generated, id_batches): (Vec<bool>, IdBatches),
    first_generated: &mut Option<u64>,
) -> Result<(Output, Vec<Row>)> {
    let statement_rows = rows.len();
    let (rows, failure) = checked_rows(schema, &rows);
    let mut keys = upsert_keys(e, s, schema, &rows, &on_conflict)?;
    let mut kept = Vec::with_capacity(rows.len());
    let mut listed = Vec::new();
    let mut counts = RowCounts::default();
    let mut insert_id = 0;
    let ai = schema.auto_increment_column();
    let mut ids = RowIds::new(e, schema, (id_batches, statement_rows));
    for (i, (mut row, was_generated)) in rows.into_iter().zip(generated).enumerate() {
        let taken = ids.fill(&mut row, was_generated)?;
        let conflicts = keys.conflicts(&row);
        let id = ai.and_then(|c| positive_id(&row[c]));
        match (&on_conflict, conflicts) {
            (_, 0) => counts = counts.plus(1, 1),
            (OnConflict::Error, _) => {
                return Err(keys.duplicate_error(&row).into());
            }
            (OnConflict::Ignore, _) => {
                s.add_warning(
                    "Warning",
                    ER_DUP_ENTRY.errno,
                    keys.duplicate_error(&row).to_string(),
                );
                ids.skipped(taken);
                // The last row processed, written or not (as storage).
                if first_generated.is_none() {
                    insert_id = id.unwrap_or(insert_id);
                }
                continue;
            }
            (OnConflict::Replace, n) => counts = counts.plus(1 + n as u64, 1 + n as u64),
            (OnConflict::Update(f), _) => {
                // The existing row is updated (COMMIT evaluates the
                // assignments again against the row as it is then). Its id
                // is the one reported.
                if let Some(existing) = keys.first_conflict(&row) {
                    // Strictly, as the write will be: a value the column
                    // cannot take fails the statement now, not the COMMIT.
                    let new =
                        coerce_row(schema, &f(&existing, &row)?).map_err(|e| e.at_row(i + 1))?;
                    ladle_storage::check_not_null(schema, &new, true)?;
                    if new == existing {
                        counts = counts.plus(0, 1);
                    } else {
                        counts = counts.plus(2, 2);
                    }
                    if first_generated.is_none() {
                        insert_id = ai
                            .and_then(|c| positive_id(&existing[c]))
                            .unwrap_or(insert_id);
                    }
                    // The updated row may repeat another row's key (one
                    // `keys` may not know yet: the row updated was
                    // inserted by this statement). Learnt while `existing`
                    // is held, so its older version is not.
                    keys.learn(
                        TransactionKeys::new(e, s, schema, std::slice::from_ref(&new))?.rows(),
                    );
                    keys.remove_conflicting(&existing);
                    if keys.conflicts(&new) > 0 {
                        return Err(keys.duplicate_error(&new).into());
                    }
                    keys.add(&new);
                    list(returning, &new, &mut listed)?;
                }
                ids.skipped(taken);
                kept.push(row);
                continue;
            }
        }
        if let (Some(id), false) = (id, was_generated) {
            e.storage.note_auto_increment(schema.id, id)?;
        }
        if was_generated && first_generated.is_none() {
            *first_generated = id;
            insert_id = id.unwrap_or(0);
        } else if first_generated.is_none() {
            insert_id = id.unwrap_or(insert_id);
        }
        keys.remove_conflicting(&row);
        keys.add(&row);
        list(returning, &row, &mut listed)?;
        kept.push(row);
    }
    if let Some(err) = failure {
        return Err(err);
    }
    if first_generated.is_none() && counts.affected == 0 {
        insert_id = 0;
    }
    if !kept.is_empty() {
        let op = WriteOp::Insert {
            table: schema.id,
            schema_version: schema.version,
            rows: kept,
            on_conflict,
            auto_value_on_zero: crate::vars::auto_value_on_zero(s),
            id_batches: IdBatches::PerRow,
            returning: None,
        };
        super::write::buffer_in_transaction(e, s, [op])?;
    }
    let out = Output::Done {
        affected_rows: counts.reported(s),
        last_insert_id: insert_id,
        info: Info::None,
    };
    Ok((out, listed))
}

/// Adds what `returning` lists for `row` to `listed` (see
/// [`InsertReturning::values_of`]).
fn list(returning: Option<&InsertReturning>, row: &Row, listed: &mut Vec<Row>) -> Result<()> {
    if let Some(returning) = returning {
        listed.push(returning.values_of(row)?);
    }
    Ok(())
}

/// `rows` converted to the column types and checked for NOT NULL (1048 at
/// the statement, as MariaDB, not at COMMIT), up to the first that fails,
/// and that row's error. MariaDB checks them a row at a time, before the
/// row takes an AUTO_INCREMENT value: the rows before the failing one are
/// still taken in turn (their ids used up, a key error first).
fn checked_rows(schema: &TableSchema, rows: &[Row]) -> (Vec<Row>, Option<crate::error::ShimError>) {
    let mut checked = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let row = coerce_row(schema, r).map_err(|e| e.at_row(i + 1));
        match row.and_then(|row| {
            ladle_storage::check_not_null(schema, &row, true)?;
            Ok(row)
        }) {
            Ok(row) => checked.push(row),
            Err(err) => return (checked, Some(err)),
        }
    }
    (checked, None)
}

/// The AUTO_INCREMENT values an INSERT in a transaction gives the rows that
/// want one, in order, each taken from storage as its commit would take
/// it (InnoDB's batches, see [`IdAllocator`]). A row
/// IGNORE skips, or ON DUPLICATE KEY UPDATE turns into an update, gives its
/// value back to the next row, as outside a transaction (see storage's
/// `insert`).
struct RowIds<'a> {
    e: &'a Engine,
    schema: &'a TableSchema,
    ids: IdAllocator,
}

impl<'a> RowIds<'a> {
    fn new(
        e: &'a Engine,
        schema: &'a TableSchema,
        (batches, statement_rows): (IdBatches, usize),
    ) -> Self {
        RowIds {
            e,
            schema,
            ids: IdAllocator::new(batches, statement_rows),
        }
    }

    /// Gives `row` its value if it `wants` one; the value taken from
    /// storage for it, if it was (for [`Self::skipped`] and
    /// [`Self::written`]).
    fn fill(&mut self, row: &mut Row, wants: bool) -> Result<Option<u64>> {
        let Some(c) = self.schema.auto_increment_column() else {
            return Ok(None);
        };
        let given = positive_id(&row[c]);
        if !wants {
            if let Some(explicit) = given {
                self.ids.follow(explicit);
            }
            self.ids.row_done();
            return Ok(None);
        }
        let (e, table) = (self.e, self.schema.id);
        let v = self.ids.take(|at_least, size| {
            e.storage
                .reserve_auto_increment_batch(table, at_least, size)
        })?;
        self.ids.row_done();
        row[c] = ladle_common::coerce(&Value::UInt(v), &self.schema.columns[c])
            .map_err(StorageError::from)?;
        Ok(Some(v))
    }

    /// The row [`Self::fill`] took `taken` for was not written.
    fn skipped(&mut self, taken: Option<u64>) {
        if let Some(v) = taken {
            self.ids.give_back(v);
        }
    }
}
