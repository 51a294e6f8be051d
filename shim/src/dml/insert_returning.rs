//! An INSERT's RETURNING, evaluated a row at a time as the statement
//! leaves each row in the table, as MariaDB's row loop evaluates it: by
//! the write itself outside a transaction (see `WriteOp::Insert::returning`),
//! so the rows carry the AUTO_INCREMENT values the write generated; by the
//! statement's own row loop inside one. A row whose RETURNING fails fails
//! the statement there, before anything of it is committed or buffered.

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
    /// left in the table: `LAST_INSERT_ID()` after a RETURNING that fails
    /// (MariaDB's `first_successful_insert_id_in_cur_stmt`, kept though
    /// the statement is rolled back).
    first_generated: Option<u64>,
    /// RETURNING's error, as the statement reports it (storage carries
    /// only its text), until [`InsertReturning::failed`] takes it.
    error: Option<ShimError>,
    /// RETURNING failed the statement.
    failed: bool,
}

/// A compiled RETURNING list, and what its evaluation saw.
pub(super) struct InsertReturning {
    returning: Arc<Returning>,
    seen: Arc<Mutex<Seen>>,
}

impl InsertReturning {
    pub(super) fn new(returning: Returning) -> Self {
        InsertReturning {
            returning: Arc::new(returning),
            seen: Arc::default(),
        }
    }

    /// The row function for `WriteOp::Insert::returning`.
    pub(super) fn row_function(&self) -> RowReturning {
        let (returning, seen) = (Arc::clone(&self.returning), Arc::clone(&self.seen));
        Arc::new(move |row: &Row, generated: Option<u64>| {
            let mut seen = seen.lock();
            if seen.first_generated.is_none() {
                seen.first_generated = generated;
            }
            returning.values(row).map_err(|err| {
                let text = StorageError::Expression(err.to_string());
                seen.error = Some(err);
                seen.failed = true;
                text
            })
        })
    }

    /// The statement's error for a write that failed with `err`:
    /// RETURNING's own, when it is what failed (`LAST_INSERT_ID()` then
    /// moves as in MariaDB), else `err`.
    pub(super) fn failed(&self, s: &mut Session, err: ShimError) -> ShimError {
        let mut seen = self.seen.lock();
        let Some(returning_error) = seen.error.take() else {
            return err;
        };
        if let Some(id) = seen.first_generated {
            s.last_insert_id = id;
        }
        returning_error
    }

    /// What RETURNING lists for `row`, which a statement inside a
    /// transaction takes; `first_generated`: the first AUTO_INCREMENT value
    /// the statement generated for a row it took (this one's included),
    /// `LAST_INSERT_ID()` if RETURNING fails.
    pub(super) fn values_in_transaction(
        &self,
        s: &mut Session,
        row: &Row,
        first_generated: Option<u64>,
    ) -> Result<Row> {
        self.returning.values(row).inspect_err(|_| {
            self.seen.lock().failed = true;
            if let Some(id) = first_generated {
                s.last_insert_id = id;
            }
        })
    }

    /// Whether RETURNING failed the statement (its error is the
    /// statement's: no other row's comes first).
    pub(super) fn failed_statement(&self) -> bool {
        self.seen.lock().failed
    }

    /// The result set of the rows listed.
    pub(super) fn result(&self, listed: Vec<Row>) -> Output {
        self.returning.result(listed)
    }
}
