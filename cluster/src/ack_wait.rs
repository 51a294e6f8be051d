//! Writers waiting on the primary for their commit to be confirmed by the
//! synchronous replicas.
//!
//! Each waiter parks its own thread and is woken alone, once the position
//! the replicas confirmed reaches its entry. (A condition variable shared
//! by every writer woke all of them at each replica acknowledgement, and
//! each woken writer took the replica list's lock to re-check: with 16
//! connections most of the primary's CPU went to those wake-ups.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::Thread;
use std::time::Instant;

use ladle_common::Lsn;
use parking_lot::Mutex;

/// How a wait for confirmation ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Confirmation {
    Confirmed,
    /// The caller's `give_up` said so (the role or the term changed).
    GaveUp,
    TimedOut,
}

#[derive(Default)]
pub(crate) struct AckWaiters {
    /// The newest LSN that enough distinct replicas have persisted. Only
    /// grows: a position once confirmed stays confirmed, whoever leaves.
    confirmed: AtomicU64,
    /// Parked writers and the LSN each waits for.
    waiting: Mutex<Vec<(Lsn, Thread)>>,
}

impl AckWaiters {
    /// Publishes `lsn` as confirmed and wakes the writers it covers.
    pub(crate) fn confirm(&self, lsn: Lsn) {
        if self.confirmed.fetch_max(lsn, Ordering::AcqRel) >= lsn {
            return;
        }
        self.waiting.lock().retain(|(wanted, thread)| {
            let covered = *wanted <= lsn;
            if covered {
                thread.unpark();
            }
            !covered
        });
    }

    /// Wakes every waiter to re-check its `give_up` (the role changed).
    pub(crate) fn wake_all(&self) {
        for (_, thread) in self.waiting.lock().iter() {
            thread.unpark();
        }
    }

    /// Blocks this thread until `lsn` is confirmed, `give_up()` holds or
    /// `deadline` passes.
    pub(crate) fn wait(
        &self,
        lsn: Lsn,
        deadline: Instant,
        give_up: impl Fn() -> bool,
    ) -> Confirmation {
        let me = std::thread::current();
        let mut registered = false;
        let outcome = loop {
            if give_up() {
                break Confirmation::GaveUp;
            }
            if self.confirmed.load(Ordering::Acquire) >= lsn {
                break Confirmation::Confirmed;
            }
            if !registered {
                // Registered before the check above is repeated, so a
                // confirmation in between either is seen by that check or
                // finds this thread in the list.
                self.waiting.lock().push((lsn, me.clone()));
                registered = true;
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                break Confirmation::TimedOut;
            }
            std::thread::park_timeout(deadline - now);
        };
        if registered {
            let id = me.id();
            self.waiting.lock().retain(|(_, t)| t.id() != id);
        }
        outcome
    }
}

/// The newest LSN that `needed` distinct replicas have all persisted, from
/// each replica stream's (node id, acknowledged LSN) (a replica that
/// reconnected may still have its old stream listed); 0 when fewer are
/// connected, or none are needed (nothing waits then).
pub(crate) fn confirmed_by(acks: impl IntoIterator<Item = (u64, Lsn)>, needed: usize) -> Lsn {
    let mut newest: Vec<(u64, Lsn)> = acks.into_iter().collect();
    newest.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    newest.dedup_by_key(|(node, _)| *node);
    let mut acked: Vec<Lsn> = newest.into_iter().map(|(_, lsn)| lsn).collect();
    acked.sort_unstable_by(|a, b| b.cmp(a));
    match needed {
        0 => 0,
        n => acked.get(n - 1).copied().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_confirmed_position_counts_distinct_replicas() {
        // Node 2's old stream (acked 9) and its new one (acked 4): one node.
        let acks = [(2, 9), (3, 5), (2, 4)];
        assert_eq!(confirmed_by(acks, 1), 9);
        assert_eq!(confirmed_by(acks, 2), 5);
        assert_eq!(confirmed_by(acks, 3), 0);
        assert_eq!(confirmed_by(acks, 0), 0);
    }

    #[test]
    fn a_writer_wakes_when_its_position_is_confirmed_and_not_before() {
        let waiters = Arc::new(AckWaiters::default());
        let far = Instant::now() + Duration::from_secs(30);
        let early = {
            let w = waiters.clone();
            std::thread::spawn(move || w.wait(5, far, || false))
        };
        let late = {
            let w = waiters.clone();
            std::thread::spawn(move || w.wait(9, far, || false))
        };
        while waiters.waiting.lock().len() < 2 {
            std::thread::yield_now();
        }
        waiters.confirm(7);
        assert_eq!(early.join().unwrap(), Confirmation::Confirmed);
        // The later writer is still parked, alone in the list.
        assert_eq!(waiters.waiting.lock().len(), 1);
        assert!(!late.is_finished());
        waiters.confirm(9);
        assert_eq!(late.join().unwrap(), Confirmation::Confirmed);
        assert!(waiters.waiting.lock().is_empty());
    }

    #[test]
    fn a_writer_gives_up_on_a_role_change_or_times_out() {
        let waiters = Arc::new(AckWaiters::default());
        let demoted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let w = waiters.clone();
        let d = demoted.clone();
        let far = Instant::now() + Duration::from_secs(30);
        let writer = std::thread::spawn(move || w.wait(3, far, || d.load(Ordering::Acquire)));
        while waiters.waiting.lock().is_empty() {
            std::thread::yield_now();
        }
        demoted.store(true, Ordering::Release);
        waiters.wake_all();
        assert_eq!(writer.join().unwrap(), Confirmation::GaveUp);
        assert!(waiters.waiting.lock().is_empty());
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(waiters.wait(3, soon, || false), Confirmation::TimedOut);
        assert_eq!(waiters.wait(0, soon, || false), Confirmation::Confirmed);
    }
}
