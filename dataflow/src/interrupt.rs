//! Stopping a read that runs too long or whose client stopped waiting:
//! the caller marks the thread that runs a statement with an interrupt
//! flag (set by `KILL QUERY`, `KILL CONNECTION` or a client that went
//! away) and, for a SELECT, a deadline (`max_execution_time`); upqueries
//! check both as they pull rows through the graph and end the read with
//! [`DataflowError::Interrupted`], the way a pull ends when an expression
//! fails to evaluate.
//!
//! The same pulls charge the rows they materialize (base-table reads and
//! join results) to the statement's working-set budget ([`watch_memory`]):
//! a read that would hold more than its budget ends with
//! [`DataflowError::OutOfMemory`] (MySQL's 1041) instead of growing the
//! process until the kernel kills it. The charge is cumulative over the
//! statement, an upper bound on what it holds at once.
//!
//! An optimistic fill also ends early once it is known to be lost
//! ([`watch_lost`]): a write it would have to discard committed meanwhile.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ladle_common::Row;

use crate::ops::row_bytes;
use crate::{DataflowError, Result};

#[derive(Default)]
struct Watch {
    flag: Option<Arc<AtomicBool>>,
    deadline: Option<Instant>,
    memory: Option<Budget>,
    /// Whether the work under way is already lost (see [`watch_lost`]).
    lost: Option<Rc<dyn Fn() -> bool>>,
}

/// A statement's working-set budget and what it has charged so far.
#[derive(Clone, Copy)]
struct Budget {
    limit: usize,
    used: usize,
}

thread_local! {
    static WATCH: RefCell<Watch> = RefCell::new(Watch::default());
}

/// Restores what its `watch_*` call changed when dropped.
pub struct WatchGuard(Restore);

enum Restore {
    Flag(Option<Arc<AtomicBool>>),
    Deadline(Option<Instant>),
    /// The budget this guard installed ends.
    Memory,
    Lost(Option<Rc<dyn Fn() -> bool>>),
    Nothing,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        WATCH.with(|w| {
            let mut w = w.borrow_mut();
            match &mut self.0 {
                Restore::Flag(flag) => w.flag = flag.take(),
                Restore::Deadline(deadline) => w.deadline = *deadline,
                Restore::Memory => w.memory = None,
                Restore::Lost(lost) => w.lost = lost.take(),
                Restore::Nothing => {}
            }
        });
    }
}

/// Until the guard is dropped, reads on this thread stop once `flag` is
/// set.
pub fn watch_flag(flag: Arc<AtomicBool>) -> WatchGuard {
    WATCH.with(|w| WatchGuard(Restore::Flag(w.borrow_mut().flag.replace(flag))))
}

/// Until the guard is dropped, reads on this thread stop at `deadline`.
pub fn watch_deadline(deadline: Option<Instant>) -> WatchGuard {
    WATCH.with(|w| {
        let mut w = w.borrow_mut();
        WatchGuard(Restore::Deadline(std::mem::replace(
            &mut w.deadline,
            deadline,
        )))
    })
}

/// Until the guard is dropped, reads on this thread end with
/// [`DataflowError::FillLost`] once `lost` says their result will be
/// discarded anyway: an optimistic fill a write raced (see
/// `read::fill`). A cold fill of a whole view takes seconds, and under a
/// write load some write always commits meanwhile; finishing it would
/// spend those seconds for nothing before the retry.
pub fn watch_lost(lost: impl Fn() -> bool + 'static) -> WatchGuard {
    let lost: Rc<dyn Fn() -> bool> = Rc::new(lost);
    WATCH.with(|w| WatchGuard(Restore::Lost(w.borrow_mut().lost.replace(lost))))
}

/// Until the guard is dropped, reads on this thread may materialize
/// `limit` bytes of rows in all (see [`charge`]). A budget already being
/// watched (an outer fill of the same statement) is kept: the statement's
/// charges add up.
pub fn watch_memory(limit: usize) -> WatchGuard {
    WATCH.with(|w| {
        let mut w = w.borrow_mut();
        if w.memory.is_some() {
            return WatchGuard(Restore::Nothing);
        }
        w.memory = Some(Budget { limit, used: 0 });
        WatchGuard(Restore::Memory)
    })
}

/// Charges `rows`, just materialized by a pull, to the statement's budget
/// (see [`charge_bytes`]).
pub fn charge(rows: &[Row]) -> Result<()> {
    charge_bytes(rows.iter().map(|r| row_bytes(r)).sum())
}

/// Charges `bytes` of rows a pull materializes (or is about to) to the
/// statement's budget: `Err(OutOfMemory)` once the statement's rows pass
/// it. Free without a budget (writes' propagation, tests).
pub fn charge_bytes(bytes: usize) -> Result<()> {
    WATCH.with(|w| {
        let mut w = w.borrow_mut();
        let Some(b) = w.memory.as_mut() else {
            return Ok(());
        };
        b.used = b.used.saturating_add(bytes);
        if b.used > b.limit {
            return Err(DataflowError::OutOfMemory { limit: b.limit });
        }
        Ok(())
    })
}

/// What the thread's statement has charged so far (0 without a budget): a
/// mark for [`give_back_to`].
pub fn charged() -> usize {
    WATCH.with(|w| w.borrow().memory.as_ref().map_or(0, |b| b.used))
}

/// Forgets the charges made since `mark` (from [`charged`]): the rows an
/// abandoned attempt materialized (an optimistic fill that lost a race)
/// were dropped with it, so a retry starts from what the statement still
/// holds rather than paying for the same rows twice.
pub fn give_back_to(mark: usize) {
    WATCH.with(|w| {
        if let Some(b) = w.borrow_mut().memory.as_mut() {
            b.used = b.used.min(mark);
        }
    })
}

/// The interrupt flag this thread's statement watches, if any: for work
/// the statement hands to another thread (a write's row functions, which
/// run inside a group commit, maybe on another statement's thread).
pub fn flag() -> Option<Arc<AtomicBool>> {
    WATCH.with(|w| w.borrow().flag.clone())
}

/// `Err(Interrupted)` once the thread's flag is set or its deadline
/// passed; `Err(FillLost)` once the work is known to be lost (see
/// [`watch_lost`]).
pub fn check() -> Result<()> {
    let lost = WATCH.with(|w| {
        let w = w.borrow();
        if w.flag.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(DataflowError::Interrupted { timeout: false });
        }
        if w.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(DataflowError::Interrupted { timeout: true });
        }
        Ok(w.lost.clone())
    })?;
    // Called outside the borrow: the test may itself read (it must not,
    // but a re-entrant borrow would panic rather than deadlock).
    match lost {
        Some(lost) if lost() => Err(DataflowError::FillLost),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladle_common::Value;

    #[test]
    fn a_lost_fill_stops_at_the_next_check_while_watched() {
        let lost = Arc::new(AtomicBool::new(false));
        {
            let seen = lost.clone();
            let _g = watch_lost(move || seen.load(Ordering::SeqCst));
            assert!(check().is_ok());
            lost.store(true, Ordering::SeqCst);
            assert!(matches!(check(), Err(DataflowError::FillLost)));
        }
        assert!(check().is_ok(), "the watch ends with its guard");
    }

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

    #[test]
    fn rows_past_the_budget_end_the_read_and_nesting_keeps_the_outer_budget() {
        let row: Row = vec![Value::Int(1), Value::Text("x".repeat(100).into())];
        let one = row_bytes(&row);
        assert!(
            charge(&vec![row.clone(); 1000]).is_ok(),
            "no budget, no limit"
        );
        {
            let _g = watch_memory(one * 3);
            assert!(charge(&[row.clone(), row.clone()]).is_ok());
            {
                // An inner fill of the same statement adds to its charges.
                let _inner = watch_memory(usize::MAX);
                assert!(charge(std::slice::from_ref(&row)).is_ok());
                assert!(matches!(
                    charge(std::slice::from_ref(&row)),
                    Err(DataflowError::OutOfMemory { .. })
                ));
            }
        }
        assert!(
            charge(&vec![row.clone(); 1000]).is_ok(),
            "the budget ends with its guard"
        );
        let _g = watch_memory(one);
        assert!(charge(std::slice::from_ref(&row)).is_ok());
        assert!(charge(std::slice::from_ref(&row)).is_err());
    }

    #[test]
    fn an_abandoned_attempt_gives_its_charges_back() {
        let row: Row = vec![Value::Int(1), Value::Text("x".repeat(100).into())];
        let one = row_bytes(&row);
        let _g = watch_memory(one * 3);
        assert!(charge(std::slice::from_ref(&row)).is_ok());
        for _attempt in 0..5 {
            let mark = charged();
            assert!(charge(&[row.clone(), row.clone()]).is_ok());
            give_back_to(mark);
        }
        assert_eq!(charged(), one);
        assert!(charge(&[row.clone(), row.clone(), row.clone()]).is_err());
    }
}
