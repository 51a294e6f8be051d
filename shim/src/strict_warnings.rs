//! Strict `sql_mode`'s warnings as errors (MariaDB's `abort_on_warning`):
//! in an INSERT or UPDATE without IGNORE under strict mode, a warning its
//! values, its UPDATE's WHERE, its ON DUPLICATE KEY UPDATE or its
//! RETURNING raise while evaluated is the statement's error, and the
//! statement writes nothing (`'1x' + 1`: 1292 "Truncated incorrect DOUBLE
//! value: '1x'"; `1 / 0`: 1365 "Division by 0", counted only under
//! ERROR_FOR_DIVISION_BY_ZERO, without which it raises nothing). Notes
//! (`'1 ' + 1`) stay notes.

use ladle_storage::StorageError;

use crate::error::{Result, ShimError};
use crate::session::Session;

/// Whether warnings fail what a statement evaluates, and which.
#[derive(Clone, Copy, Debug, Default)]
pub struct StrictWarnings {
    /// Strict mode without IGNORE.
    fail: bool,
    /// A division by zero counts (ERROR_FOR_DIVISION_BY_ZERO).
    division_by_zero: bool,
}

impl StrictWarnings {
    /// For an INSERT or UPDATE (`ignore`: with IGNORE) in session `s`.
    pub fn for_write(s: &Session, ignore: bool) -> StrictWarnings {
        StrictWarnings {
            fail: !ignore && crate::vars::strict_mode(s),
            division_by_zero: crate::vars::division_by_zero_warns(s),
        }
    }

    /// Strict mode without IGNORE: values that do not fit are refused.
    pub fn strict(self) -> bool {
        self.fail
    }

    /// Runs `eval`; a warning it raises that fails the statement is the
    /// error instead of its value.
    pub fn evaluated<T>(self, eval: impl FnOnce() -> Result<T>) -> Result<T> {
        self.checked(eval, |code, message| {
            ShimError::Wire(crate::error::warning_as_error(code, message))
        })
    }

    /// [`Self::evaluated`] inside a write's row function (an UPDATE's SET
    /// and WHERE, an ON DUPLICATE KEY UPDATE), which fails with storage's
    /// error.
    pub fn evaluated_in_write<T>(
        self,
        eval: impl FnOnce() -> std::result::Result<T, StorageError>,
    ) -> std::result::Result<T, StorageError> {
        self.checked(eval, |code, message| StorageError::StrictWarning {
            code,
            message,
        })
    }

    fn checked<T, E>(
        self,
        eval: impl FnOnce() -> std::result::Result<T, E>,
        error: impl FnOnce(u16, String) -> E,
    ) -> std::result::Result<T, E> {
        if !self.fail {
            return eval();
        }
        // Taken where `eval` runs (a RETURNING or an UPDATE's row function
        // may run on the write's thread), not from the statement's list.
        let (value, raised) = ladle_dataflow::eval_warnings_raised_by(eval);
        let value = value?;
        let failing = raised.into_iter().find(|(level, code, _)| {
            *level == "Warning"
                && (*code != ladle_dataflow::WARN_DIVISION_BY_ZERO || self.division_by_zero)
        });
        match failing {
            Some((_, code, message)) => Err(error(code, message)),
            None => Ok(value),
        }
    }
}
