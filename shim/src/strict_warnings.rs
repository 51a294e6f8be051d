//! Strict `sql_mode`'s warnings as errors (MariaDB's `abort_on_warning`):
//! in an INSERT without IGNORE under strict mode, a warning its values or
//! its RETURNING raise while evaluated is the statement's error, and the
//! statement writes nothing (`'1x' + 1`: 1292 "Truncated incorrect DOUBLE
//! value: '1x'"; `1 / 0`: 1365 "Division by 0", counted only under
//! ERROR_FOR_DIVISION_BY_ZERO, without which it raises nothing). Notes
//! (`'1 ' + 1`) stay notes.

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
    /// For an INSERT (`ignore`: INSERT IGNORE) in session `s`.
    pub fn for_insert(s: &Session, ignore: bool) -> StrictWarnings {
        StrictWarnings {
            fail: !ignore && crate::vars::strict_mode(s),
            division_by_zero: crate::vars::division_by_zero_warns(s),
        }
    }

    /// Runs `eval`; a warning it raises that fails the statement is the
    /// error instead of its value.
    pub fn evaluated<T>(self, eval: impl FnOnce() -> Result<T>) -> Result<T> {
        if !self.fail {
            return eval();
        }
        // Taken where `eval` runs (a RETURNING may run on the write's
        // thread), not from the statement's list.
        let (value, raised) = ladle_dataflow::eval_warnings_raised_by(eval);
        let value = value?;
        let failing = raised.into_iter().find(|(level, code, _)| {
            *level == "Warning"
                && (*code != ladle_dataflow::WARN_DIVISION_BY_ZERO || self.division_by_zero)
        });
        match failing {
            Some((_, code, message)) => Err(ShimError::Wire(crate::error::warning_as_error(
                code, message,
            ))),
            None => Ok(value),
        }
    }
}
