//! Stopping a read that runs too long or whose client stopped waiting:
//! the caller marks the thread that runs a statement with an interrupt
//! flag (set by `KILL QUERY`, `KILL CONNECTION` or a client that went
//! away) and, for a SELECT, a deadline (`max_execution_time`); upqueries
//! check both as they pull rows through the graph and end the read with
//! [`DataflowError::Interrupted`], the way a pull ends when an expression
//! fails to evaluate.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::{DataflowError, Result};

#[derive(Default)]
struct Watch {
    flag: Option<Arc<AtomicBool>>,
    deadline: Option<Instant>,
}

thread_local! {
    static WATCH: RefCell<Watch> = RefCell::new(Watch::default());
}

/// Restores the thread's previous watch when dropped.
pub struct WatchGuard {
    flag: Option<Arc<AtomicBool>>,
    deadline: Option<Instant>,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        WATCH.with(|w| {
            let mut w = w.borrow_mut();
            w.flag = self.flag.take();
            w.deadline = self.deadline;
        });
    }
}

/// Until the guard is dropped, reads on this thread stop once `flag` is
/// set.
pub fn watch_flag(flag: Arc<AtomicBool>) -> WatchGuard {
    WATCH.with(|w| {
        let mut w = w.borrow_mut();
        let guard = WatchGuard {
            flag: w.flag.take(),
            deadline: w.deadline,
        };
        w.flag = Some(flag);
        guard
    })
}

/// Until the guard is dropped, reads on this thread stop at `deadline`.
pub fn watch_deadline(deadline: Option<Instant>) -> WatchGuard {
    WATCH.with(|w| {
        let mut w = w.borrow_mut();
        let guard = WatchGuard {
            flag: w.flag.clone(),
            deadline: w.deadline,
        };
        w.deadline = deadline;
        guard
    })
}

/// `Err(Interrupted)` once the thread's flag is set or its deadline passed.
pub fn check() -> Result<()> {
    WATCH.with(|w| {
        let w = w.borrow();
        if w.flag.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(DataflowError::Interrupted { timeout: false });
        }
        if w.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(DataflowError::Interrupted { timeout: true });
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_deadlines_stop_reads_while_watched() {
        assert!(check().is_ok());
        let flag = Arc::new(AtomicBool::new(false));
        {
            let _g = watch_flag(flag.clone());
            assert!(check().is_ok());
            flag.store(true, Ordering::SeqCst);
            assert!(matches!(
                check(),
                Err(DataflowError::Interrupted { timeout: false })
            ));
        }
        assert!(check().is_ok());
        {
            let _g = watch_deadline(Some(Instant::now()));
            assert!(matches!(
                check(),
                Err(DataflowError::Interrupted { timeout: true })
            ));
        }
        assert!(check().is_ok());
    }
}
