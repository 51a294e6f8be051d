//! The group-commit queue: callers queue their ops; the first caller that
//! finds no leader active becomes the leader, takes everyone queued so far
//! and commits them as one group, then hands the lead to the oldest waiter.
//! What committing a group means is the caller's (`Storage::commit_group`);
//! this module only orders callers and delivers outcomes.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Result, StorageError};
use crate::hooks::CommitCheck;
use crate::ops::{WriteOp, WriteResult};

/// Where a leader leaves a caller's outcome, and how it wakes the caller.
#[derive(Default)]
struct SlotInner {
    result: Mutex<Option<Result<WriteResult>>>,
    /// Waited on with the queue lock held; signalled when `result` is set
    /// or when this caller should become the next leader.
    wake: Condvar,
}

/// A caller's place for its outcome.
#[derive(Clone, Default)]
pub(crate) struct Slot(Arc<SlotInner>);

impl Slot {
    /// Delivers the caller's outcome (woken when the leader's turn ends).
    pub(crate) fn fill(&self, outcome: Result<WriteResult>) {
        *self.0.result.lock() = Some(outcome);
    }
}

/// A caller waiting in the commit queue.
pub(crate) struct Pending {
    pub(crate) ops: Vec<WriteOp>,
    pub(crate) check: Option<CommitCheck>,
    pub(crate) slot: Slot,
}

/// Callers waiting for a leader to commit their ops.
#[derive(Default)]
struct QueueState {
    pending: Vec<Pending>,
    /// A leader is committing a group; newcomers wait for it to finish.
    leading: bool,
}

#[derive(Default)]
pub(crate) struct CommitQueue {
    state: Mutex<QueueState>,
}

impl CommitQueue {
    /// Queues `ops` and returns their outcome once a leader committed them.
    /// When no leader is active this caller leads: `commit` gets the group
    /// (this caller's ops included) and fills every caller's slot.
    pub(crate) fn submit(
        &self,
        ops: Vec<WriteOp>,
        check: Option<CommitCheck>,
        commit: impl Fn(Vec<Pending>),
    ) -> Result<WriteResult> {
        let slot = Slot::default();
        let mut q = self.state.lock();
        q.pending.push(Pending {
            ops,
            check,
            slot: slot.clone(),
        });
        loop {
            if let Some(done) = slot.0.result.lock().take() {
                return done;
            }
            if !q.leading {
                // Lead: take everyone queued so far, commit them together.
                q.leading = true;
                let group = std::mem::take(&mut q.pending);
                drop(q);
                {
                    let _leader = LeaderGuard {
                        queue: self,
                        slots: group.iter().map(|p| p.slot.clone()).collect(),
                    };
                    commit(group);
                }
                q = self.state.lock();
                continue;
            }
            slot.0.wake.wait(&mut q);
        }
    }
}

/// Ends a leader's turn, also when a caller's closure panicked: every caller
/// of the group gets an outcome and the waiters wake up.
struct LeaderGuard<'a> {
    queue: &'a CommitQueue,
    slots: Vec<Slot>,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        for slot in &self.slots {
            let mut s = slot.0.result.lock();
            if s.is_none() {
                *s = Some(Err(StorageError::Internal(
                    "the commit leader panicked".into(),
                )));
            }
        }
        let mut q = self.queue.state.lock();
        q.leading = false;
        // Wake the callers of this group, and the oldest waiter, which
        // leads the next group. Nobody else needs to wake.
        for slot in &self.slots {
            slot.0.wake.notify_one();
        }
        if let Some(next) = q.pending.first() {
            next.slot.0.wake.notify_one();
        }
        drop(q);
    }
}
