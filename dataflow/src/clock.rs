//! The statement's clock. NOW() and its kin read the system clock, unless
//! the session running on this thread fixed it (`SET timestamp = n`, how
//! MySQL replays statements at the time they first ran): the shim fixes it
//! around each statement it runs ([`fix`]), and every evaluation on that
//! thread (constant expressions, reads filtering by NOW(), their fills)
//! sees the same instant.

use std::cell::Cell;

use chrono::{DateTime, NaiveDateTime, Utc};

thread_local! {
    /// Microseconds since the Unix epoch, if fixed.
    static FIXED: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Fixes this thread's clock at `micros` (since the Unix epoch; `None`:
/// the system clock) until the guard drops.
pub fn fix(micros: Option<i64>) -> FixedClock {
    FixedClock {
        previous: FIXED.with(|f| f.replace(micros)),
    }
}

/// Restores the clock [`fix`] replaced.
pub struct FixedClock {
    previous: Option<i64>,
}

impl Drop for FixedClock {
    fn drop(&mut self) {
        FIXED.with(|f| f.set(self.previous));
    }
}

/// Now, in microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    FIXED
        .with(Cell::get)
        .unwrap_or_else(|| Utc::now().timestamp_micros())
}

/// Now, as a UTC date and time (microseconds kept).
pub fn now_utc() -> NaiveDateTime {
    DateTime::from_timestamp_micros(now_micros())
        .unwrap_or_default()
        .naive_utc()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_clock_holds_until_its_guard_drops() {
        let real = now_micros();
        {
            let _outer = fix(Some(1_000_000_000_500_000));
            assert_eq!(now_micros(), 1_000_000_000_500_000);
            {
                let _inner = fix(None);
                assert!(now_micros() >= real);
            }
            assert_eq!(now_utc().to_string(), "2001-09-09 01:46:40.500");
        }
        assert!(now_micros() >= real);
    }
}
