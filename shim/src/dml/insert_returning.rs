//! An INSERT's RETURNING, evaluated a row at a time as the statement
//! leaves each row in the table, as MariaDB's row loop evaluates it: by
//! the write itself outside a transaction (see `WriteOp::Insert::returning`),
//! so the rows carry the AUTO_INCREMENT values the write generated; by the
//! statement's own row loop inside one. A row whose RETURNING fails fails
//! the statement there, before anything of it is committed or buffered.
//! Without RETURNING, the same row function watches the AUTO_INCREMENT
//! values a multi-row write takes ([`InsertReturning::ids_only`]).

use std::sync::Arc;

use ladle_common::Row;
use ladle_storage::{RowReturning, StorageError};
use parking_lot::Mutex;

use crate::error::{Result, ShimError};
use crate::output::Output;
use crate::returning::Returning;
use crate::session::Session;

/// What the write's calls of RETURNING saw, for the statement to report
/// once the write ends.
#[derive(Default)]
struct Seen {
    /// The first AUTO_INCREMENT value the write generated for a row it
    /// left in the table: `LAST_INSERT_ID()` after a write that fails
    /// (MariaDB's `first_successful_insert_id_in_cur_stmt`, kept though
    /// the statement is rolled back).
    first_generated: Option<u64>,
    /// RETURNING's error, as the statement reports it (storage carries
    /// only its text), until [`InsertReturning::failed`] takes it.
    error: Option<ShimError>,
    /// RETURNING failed the statement.
    failed: bool,
}

/// A compiled RETURNING list (or none: a statement without RETURNING
/// still watches the AUTO_INCREMENT values its rows take), and what its
/// evaluation saw.
pub(super) struct InsertReturning {
    returning: Option<Arc<Returning>>,
    seen: Arc<Mutex<Seen>>,
}

impl InsertReturning {
    pub(super) fn new(returning: Returning) -> Self {
        InsertReturning {
            returning: Some(Arc::new(returning)),
            seen: Arc::default(),
        }
    }

    /// No RETURNING: the row function only notes the first value a row
    /// took, `LAST_INSERT_ID()` if a later row fails the write (each row
    /// listed as an empty row, which the statement drops).
    pub(super) fn ids_only() -> Self {
        InsertReturning {
            returning: None,
            seen: Arc::default(),
        }
    }

    /// The row function for `WriteOp::Insert::returning`.
    pub(super) fn row_function(&self) -> RowReturning {
        let (returning, seen) = (self.returning.clone(), Arc::clone(&self.seen));
        Arc::new(move |row: &Row, generated: Option<u64>| {
            let mut seen = seen.lock();
            if seen.first_generated.is_none() {
                seen.first_generated = generated;
            }
            let Some(returning) = &returning else {
                return Ok(Row::new());
            };
            returning.values(row).map_err(|err| {
                let text = StorageError::Expression(err.to_string());
                seen.error = Some(err);
                seen.failed = true;
                text
            })
        })
    }

    /// The statement's error for a write that failed with `err`:
    /// RETURNING's own, when it is what failed, else `err`. Either way
    /// `LAST_INSERT_ID()` moves to the first value a row the write left
    /// in the table took, as in MariaDB (its
    /// `first_successful_insert_id_in_cur_stmt`, kept though the statement
    /// is rolled back).
    pub(super) fn failed(&self, s: &mut Session, err: ShimError) -> ShimError {
        let mut seen = self.seen.lock();
        if let Some(id) = seen.first_generated {
            s.last_insert_id = id;
        }
        seen.error.take().unwrap_or(err)
    }

    /// What RETURNING lists for `row`, evaluated by the statement rather
    /// than the write: for a row a statement inside a transaction takes,
    /// or one written before the row that fails the statement in the
    /// front end (the caller moves `LAST_INSERT_ID()` if it fails).
    pub(super) fn values_of(&self, row: &Row) -> Result<Row> {
        let Some(returning) = &self.returning else {
            return Ok(Row::new());
        };
        returning
            .values(row)
            .inspect_err(|_| self.seen.lock().failed = true)
    }

    /// Whether RETURNING failed the statement (its error is the
    /// statement's: no other row's comes first).
    pub(super) fn failed_statement(&self) -> bool {
        self.seen.lock().failed
    }

    /// The result set of the rows listed, if the statement has RETURNING.
    pub(super) fn result(&self, listed: Vec<Row>) -> Option<Output> {
        Some(self.returning.as_ref()?.result(listed))
    }
}
