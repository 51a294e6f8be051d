//! Row locks: InnoDB's record locks, reduced to what Ladle's statements
//! need. A row is named by its table and its identity (the PRIMARY KEY
//! values, or every column of a table without one); a lock on it is
//! *shared* (`FOR SHARE`, `LOCK IN SHARE MODE`) or *exclusive* (`FOR
//! UPDATE`, and the rows an UPDATE / DELETE / INSERT of a transaction
//! writes). Locks belong to a connection and are held by a [`HeldLocks`]:
//! the open transaction's (released when it ends: COMMIT, ROLLBACK,
//! disconnect, KILL) or the running autocommit statement's (released when
//! it ends).
//!
//! A request that conflicts with a lock another connection holds waits
//! (up to `innodb_lock_wait_timeout`, then 1205), fails at once (`NOWAIT`,
//! 3572) or skips the row (`SKIP LOCKED`). Before it waits, the waiter
//! records whom it waits for; a wait that would close a cycle of waits is
//! a deadlock, and the requester is the victim (1213).
//!
//! Cost when nobody holds a lock: [`RowLocks::any_held`] is one atomic load,
//! which every commit's check reads before looking at the lock table.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::{TableId, Value};
use parking_lot::{Condvar, Mutex};

use crate::error::{Result, ShimError};

/// A row: its table and identity (PRIMARY KEY values in key order, or the
/// whole row for a table without a primary key).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowKey {
    pub table: TableId,
    pub key: Vec<Value>,
}

/// Who holds a lock: a connection (its transaction and its statements).
pub type Owner = u32;

/// How a row is locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// What a request does when another connection holds a conflicting lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Waits up to this long, then 1205.
    Block(Duration),
    /// `NOWAIT`: 3572 at once.
    Nowait,
    /// `SKIP LOCKED`: the row is left out.
    SkipLocked,
}

/// A granted (or skipped) request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granted {
    /// Held now; `waited` if another connection's lock was in the way
    /// first (what the row holds may have changed meanwhile).
    Held { waited: bool },
    /// `SKIP LOCKED` and another connection holds it.
    Skipped,
}

/// The process's row locks.
#[derive(Default)]
pub struct RowLocks {
    /// How many rows are locked now (entries of `state.rows`).
    locked_rows: AtomicUsize,
    state: Mutex<LockTable>,
    released: Condvar,
}

#[derive(Default)]
struct LockTable {
    rows: HashMap<RowKey, RowLock>,
    /// Each waiting connection -> the connections holding what it waits for.
    waits_for: HashMap<Owner, Vec<Owner>>,
}

/// One row's holders: one exclusive owner, or any number of shared ones.
#[derive(Default)]
struct RowLock {
    exclusive: Option<Owner>,
    shared: HashSet<Owner>,
}

impl RowLock {
    /// The other connections whose hold conflicts with `owner` taking `mode`.
    fn blockers(&self, owner: Owner, mode: Mode) -> Vec<Owner> {
        let mut by: Vec<Owner> = self.exclusive.filter(|&x| x != owner).into_iter().collect();
        if mode == Mode::Exclusive {
            by.extend(self.shared.iter().copied().filter(|&x| x != owner));
        }
        by
    }

    fn is_free(&self) -> bool {
        self.exclusive.is_none() && self.shared.is_empty()
    }
}

/// How often a waiter looks at its KILL flag.
const POLL: Duration = Duration::from_millis(100);

impl RowLocks {
    /// Whether any row is locked (one atomic load: the hot path's test).
    pub fn any_held(&self) -> bool {
        self.locked_rows.load(Ordering::Acquire) > 0
    }

    /// Whether a connection other than `owner` holds `row` (any mode): a
    /// write of the row by `owner` would have to wait.
    pub fn held_by_other(&self, owner: Owner, row: &RowKey) -> bool {
        self.state
            .lock()
            .rows
            .get(row)
            .is_some_and(|l| !l.blockers(owner, Mode::Exclusive).is_empty())
    }

    /// Locks `row` in `mode` for `held`'s connection, waiting as `wait`
    /// says. A shared lock is upgraded in place when exclusive is asked for.
    pub fn lock(
        self: &Arc<Self>,
        held: &mut HeldLocks,
        row: RowKey,
        mode: Mode,
        wait: Wait,
    ) -> Result<Granted> {
        let owner = held.owner;
        let mut table = self.state.lock();
        let mut waited = false;
        let deadline = Instant::now()
            + match wait {
                Wait::Block(d) => d,
                Wait::Nowait | Wait::SkipLocked => Duration::ZERO,
            };
        loop {
            let blockers = table
                .rows
                .get(&row)
                .map(|l| l.blockers(owner, mode))
                .unwrap_or_default();
            if blockers.is_empty() {
                break;
            }
            match wait {
                Wait::Nowait => return Err(ShimError::LockNowait),
                Wait::SkipLocked => return Ok(Granted::Skipped),
                Wait::Block(_) => {}
            }
            if table.closes_cycle(owner, &blockers) {
                table.waits_for.remove(&owner);
                return Err(ShimError::Deadlock);
            }
            table.waits_for.insert(owner, blockers);
            waited = true;
            let now = Instant::now();
            let stop = if now >= deadline {
                Some(ShimError::LockWaitTimeout)
            } else {
                ladle_dataflow::interrupt::check()
                    .err()
                    .map(ShimError::from)
            };
            if let Some(err) = stop {
                table.waits_for.remove(&owner);
                return Err(err);
            }
            self.released.wait_for(&mut table, POLL.min(deadline - now));
        }
        table.waits_for.remove(&owner);
        let lock = table.rows.entry(row.clone()).or_default();
        let fresh = lock.is_free();
        let new_hold = match mode {
            Mode::Exclusive => {
                let had = lock.exclusive == Some(owner) || lock.shared.remove(&owner);
                lock.exclusive = Some(owner);
                !had
            }
            Mode::Shared => lock.exclusive != Some(owner) && lock.shared.insert(owner),
        };
        if fresh {
            self.locked_rows.fetch_add(1, Ordering::AcqRel);
        }
        drop(table);
        if new_hold {
            held.rows.push(row);
        }
        held.locks.get_or_insert_with(|| Arc::clone(self));
        Ok(Granted::Held { waited })
    }

    /// Releases every lock `owner` holds on `rows`.
    fn release(&self, owner: Owner, rows: &[RowKey]) {
        let mut table = self.state.lock();
        for row in rows {
            let Some(lock) = table.rows.get_mut(row) else {
                continue;
            };
            if lock.exclusive == Some(owner) {
                lock.exclusive = None;
            }
            lock.shared.remove(&owner);
            if lock.is_free() {
                table.rows.remove(row);
                self.locked_rows.fetch_sub(1, Ordering::AcqRel);
            }
        }
        drop(table);
        self.released.notify_all();
    }
}

impl LockTable {
    /// Whether `owner` waiting for `blockers` would close a cycle: some
    /// blocker (transitively) waits for `owner`.
    fn closes_cycle(&self, owner: Owner, blockers: &[Owner]) -> bool {
        let mut seen = HashSet::new();
        let mut stack: Vec<Owner> = blockers.to_vec();
        while let Some(o) = stack.pop() {
            if o == owner {
                return true;
            }
            if seen.insert(o) {
                if let Some(next) = self.waits_for.get(&o) {
                    stack.extend(next.iter().copied());
                }
            }
        }
        false
    }
}

/// The row locks one connection's transaction (or autocommit statement)
/// holds; released when this drops or [`HeldLocks::release`] runs.
pub struct HeldLocks {
    locks: Option<Arc<RowLocks>>,
    owner: Owner,
    rows: Vec<RowKey>,
}

impl HeldLocks {
    /// Holds nothing yet, for connection `owner`.
    pub fn new(owner: Owner) -> HeldLocks {
        HeldLocks {
            locks: None,
            owner,
            rows: Vec::new(),
        }
    }

    /// Whether it holds any lock.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// How many row locks it holds.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Releases every lock held (the transaction or statement ended).
    pub fn release(&mut self) {
        if let Some(locks) = &self.locks {
            if !self.rows.is_empty() {
                locks.release(self.owner, &self.rows);
            }
        }
        self.rows.clear();
    }
}

impl Drop for HeldLocks {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(k: i64) -> RowKey {
        RowKey {
            table: 1,
            key: vec![Value::Int(k)],
        }
    }

    const SHORT: Wait = Wait::Block(Duration::from_millis(200));
    const LONG: Wait = Wait::Block(Duration::from_secs(30));

    #[test]
    fn exclusive_conflicts_and_shared_does_not() {
        let locks = Arc::new(RowLocks::default());
        assert!(!locks.any_held());
        let (mut a, mut b) = (HeldLocks::new(1), HeldLocks::new(2));
        locks.lock(&mut a, row(1), Mode::Shared, SHORT).unwrap();
        locks.lock(&mut b, row(1), Mode::Shared, SHORT).unwrap();
        assert!(locks.any_held());
        assert!(matches!(
            locks.lock(&mut b, row(1), Mode::Exclusive, SHORT),
            Err(ShimError::LockWaitTimeout)
        ));
        assert!(matches!(
            locks.lock(&mut b, row(1), Mode::Exclusive, Wait::Nowait),
            Err(ShimError::LockNowait)
        ));
        a.release();
        // Upgraded in place, held once.
        let got = locks.lock(&mut b, row(1), Mode::Exclusive, SHORT).unwrap();
        assert_eq!(got, Granted::Held { waited: false });
        assert_eq!(b.rows.len(), 1);
        assert!(locks.held_by_other(1, &row(1)) && !locks.held_by_other(2, &row(1)));
        assert_eq!(
            locks
                .lock(&mut a, row(1), Mode::Shared, Wait::SkipLocked)
                .unwrap(),
            Granted::Skipped
        );
        drop(b);
        assert!(!locks.any_held());
    }

    #[test]
    fn a_waiter_proceeds_when_the_holder_releases() {
        let locks = Arc::new(RowLocks::default());
        let mut a = HeldLocks::new(1);
        locks.lock(&mut a, row(1), Mode::Exclusive, SHORT).unwrap();
        let waiter = {
            let locks = Arc::clone(&locks);
            std::thread::spawn(move || {
                let mut b = HeldLocks::new(2);
                locks.lock(&mut b, row(1), Mode::Exclusive, LONG).unwrap()
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        a.release();
        assert_eq!(waiter.join().unwrap(), Granted::Held { waited: true });
        assert!(!locks.any_held());
    }

    #[test]
    fn the_request_closing_a_cycle_is_the_deadlock_victim() {
        let locks = Arc::new(RowLocks::default());
        let (mut a, mut b) = (HeldLocks::new(1), HeldLocks::new(2));
        locks.lock(&mut a, row(1), Mode::Exclusive, SHORT).unwrap();
        locks.lock(&mut b, row(2), Mode::Exclusive, SHORT).unwrap();
        let waiter = {
            let locks = Arc::clone(&locks);
            std::thread::spawn(move || {
                let got = locks.lock(&mut a, row(2), Mode::Exclusive, LONG);
                (got.map_err(|e| e.to_string()), a)
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(matches!(
            locks.lock(&mut b, row(1), Mode::Exclusive, LONG),
            Err(ShimError::Deadlock)
        ));
        // The victim rolls back: its locks go and the other proceeds.
        drop(b);
        let (got, a) = waiter.join().unwrap();
        assert_eq!(got, Ok(Granted::Held { waited: true }));
        drop(a);
        assert!(!locks.any_held());
        assert!(locks.state.lock().waits_for.is_empty());
    }
}
