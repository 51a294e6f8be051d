//! Named (user-level) locks: `GET_LOCK`, `RELEASE_LOCK`, `IS_FREE_LOCK`,
//! `IS_USED_LOCK` and `RELEASE_ALL_LOCKS`, as MySQL 8.0 has them.
//!
//! A lock belongs to a connection (its id), not to a transaction: COMMIT
//! and ROLLBACK leave it, the connection's end (disconnect, KILL,
//! COM_RESET_CONNECTION, COM_CHANGE_USER) releases all of its locks. A
//! connection may take the same lock again; each take is one level and
//! `RELEASE_LOCK` gives back one (MySQL 5.7+). Names are compared without
//! regard to case, as MySQL compares them, and are 1 to 64 characters
//! (3057 otherwise).
//!
//! A waiter polls for KILL QUERY / its client leaving every few
//! milliseconds (the statement's interrupt flag), and a wait that would
//! close a circle of connections each waiting for a lock the next one holds
//! is refused with 3058 at once, as MySQL 8's deadlock detector refuses it.
//! The wait holds nothing but its statement thread (see
//! [`crate::statement_threads`]: a waiting statement does not keep a
//! thread from others).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ladle_common::Value;
use parking_lot::{Condvar, Mutex};

use crate::error::{MysqlCode, WireError};

/// MySQL's ER_USER_LOCK_WRONG_NAME: an empty, NULL or too long name.
pub const ER_USER_LOCK_WRONG_NAME: MysqlCode = MysqlCode {
    errno: 3057,
    sqlstate: "42000",
};
/// MySQL's ER_USER_LOCK_DEADLOCK: the wait would close a circle.
pub const ER_USER_LOCK_DEADLOCK: MysqlCode = MysqlCode {
    errno: 3058,
    sqlstate: "HY000",
};

/// The longest lock name, in characters (MySQL's NAME_CHAR_LEN).
const MAX_NAME_CHARS: usize = 64;

/// How often a waiter looks at its interrupt flag.
const POLL: Duration = Duration::from_millis(10);

/// The server's named locks.
#[derive(Debug, Default)]
pub struct NamedLocks {
    table: Mutex<LockTable>,
    /// Signalled whenever a lock is released.
    released: Condvar,
}

/// Who holds what and who waits for what.
#[derive(Debug, Default)]
struct LockTable {
    /// By lower-case name: the holder's connection id and its levels.
    held: HashMap<String, (u32, u64)>,
    /// By connection id: the (lower-case) name it waits for.
    waiting: HashMap<u32, String>,
}

/// How a `GET_LOCK` ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Acquired {
    Granted,
    TimedOut,
    /// KILL QUERY, the client leaving, or `max_execution_time`.
    Interrupted,
    /// Waiting would close a circle of waits (3058).
    Deadlock,
}

impl LockTable {
    /// Whether `owner` waiting for `key` would close a circle: following
    /// "holder of the lock waited for" from `key` reaches `owner`.
    fn closes_circle(&self, owner: u32, key: &str) -> bool {
        let mut key = key;
        // A circle never passes more connections than there are waiters.
        for _ in 0..=self.waiting.len() {
            let Some((holder, _)) = self.held.get(key) else {
                return false;
            };
            if *holder == owner {
                return true;
            }
            match self.waiting.get(holder) {
                Some(next) => key = next,
                None => return false,
            }
        }
        false
    }

    /// Takes `key` for `owner` if it is free or already `owner`'s.
    fn try_take(&mut self, owner: u32, key: &str) -> bool {
        match self.held.get_mut(key) {
            Some((holder, levels)) if *holder == owner => {
                *levels += 1;
                true
            }
            Some(_) => false,
            None => {
                self.held.insert(key.to_string(), (owner, 1));
                true
            }
        }
    }
}

impl NamedLocks {
    /// `GET_LOCK`: takes lock `key` (a checked name, see [`lock_key`]) for
    /// connection `owner`, waiting up to `timeout` (`None`: for ever) while
    /// another connection holds it. `interrupted` says whether the
    /// statement was stopped.
    pub fn acquire(
        &self,
        owner: u32,
        key: &str,
        timeout: Option<Duration>,
        interrupted: impl Fn() -> bool,
    ) -> Acquired {
        // (A stopped statement takes nothing, not even a free lock: its
        // connection may already have released what it held for good.)
        if interrupted() {
            return Acquired::Interrupted;
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut table = self.table.lock();
        if table.try_take(owner, key) {
            return Acquired::Granted;
        }
        if table.closes_circle(owner, key) {
            return Acquired::Deadlock;
        }
        table.waiting.insert(owner, key.to_string());
        let outcome = loop {
            if interrupted() {
                break Acquired::Interrupted;
            }
            if table.try_take(owner, key) {
                break Acquired::Granted;
            }
            let slice = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left.min(POLL),
                    _ => break Acquired::TimedOut,
                },
                None => POLL,
            };
            self.released.wait_for(&mut table, slice);
        };
        table.waiting.remove(&owner);
        outcome
    }

    /// `RELEASE_LOCK`: gives back one level of `key`. `Some(true)` when
    /// `owner` held it, `Some(false)` when another connection does, `None`
    /// when nobody does.
    pub fn release(&self, owner: u32, key: &str) -> Option<bool> {
        let mut table = self.table.lock();
        let (holder, levels) = table.held.get_mut(key)?;
        if *holder != owner {
            return Some(false);
        }
        *levels -= 1;
        if *levels == 0 {
            table.held.remove(key);
            self.released.notify_all();
        }
        Some(true)
    }

    /// `RELEASE_ALL_LOCKS` and a connection's end: gives back every lock
    /// `owner` holds; the levels released.
    pub fn release_all(&self, owner: u32) -> u64 {
        let mut table = self.table.lock();
        let mut released = 0;
        table.held.retain(|_, (holder, levels)| {
            if *holder == owner {
                released += *levels;
                false
            } else {
                true
            }
        });
        if released > 0 {
            self.released.notify_all();
        }
        released
    }

    /// Whether connection `owner` holds any lock.
    pub fn holds_any(&self, owner: u32) -> bool {
        self.table.lock().held.values().any(|(h, _)| *h == owner)
    }

    /// The connection holding `key` (`IS_USED_LOCK`, `IS_FREE_LOCK`).
    pub fn holder(&self, key: &str) -> Option<u32> {
        self.table.lock().held.get(key).map(|(holder, _)| *holder)
    }
}

/// The table key of lock name `name` (its lower-case form), or 3057 for a
/// NULL, empty or longer than 64 characters name, as MySQL 8 refuses it.
pub fn lock_key(name: &Value) -> Result<String, WireError> {
    let text = match name {
        Value::Null => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        v => Some(v.to_string()),
    };
    match text {
        Some(t) if !t.is_empty() && t.chars().count() <= MAX_NAME_CHARS => Ok(t.to_lowercase()),
        other => Err(WireError {
            code: ER_USER_LOCK_WRONG_NAME,
            message: format!(
                "Incorrect user-level lock name '{}'.",
                other.as_deref().unwrap_or("NULL")
            ),
        }),
    }
}

/// The 3058 a wait closing a circle gets.
pub fn deadlock_error() -> WireError {
    WireError {
        code: ER_USER_LOCK_DEADLOCK,
        message: "Deadlock found when trying to get user-level lock; try rolling back \
                  transaction/releasing locks and restarting lock acquisition."
            .into(),
    }
}

/// `GET_LOCK`'s wait for a timeout argument in seconds: a negative one
/// waits for ever (MySQL 5.7+), NULL is 0.
pub fn wait_for(seconds: Option<f64>) -> Option<Duration> {
    match seconds {
        Some(s) if s < 0.0 => None,
        Some(s) if s.is_finite() => Some(Duration::from_secs_f64(s.min(1e9))),
        Some(_) => None,
        None => Some(Duration::ZERO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_counted_and_released_one_at_a_time() {
        let locks = NamedLocks::default();
        let never = || false;
        assert_eq!(locks.acquire(1, "a", None, never), Acquired::Granted);
        assert_eq!(locks.acquire(1, "a", None, never), Acquired::Granted);
        assert_eq!(
            locks.acquire(2, "a", Some(Duration::ZERO), never),
            Acquired::TimedOut
        );
        assert_eq!(locks.release(2, "a"), Some(false));
        assert_eq!(locks.release(1, "a"), Some(true));
        assert_eq!(locks.holder("a"), Some(1));
        assert_eq!(locks.release(1, "a"), Some(true));
        assert_eq!(locks.release(1, "a"), None);
        assert_eq!(locks.acquire(1, "b", None, never), Acquired::Granted);
        assert_eq!(locks.acquire(1, "c", None, never), Acquired::Granted);
        assert_eq!(locks.acquire(1, "c", None, never), Acquired::Granted);
        assert_eq!(locks.release_all(1), 3);
        assert_eq!(locks.holder("b"), None);
        assert_eq!(locks.acquire(1, "b", None, || true), Acquired::Interrupted);
        assert_eq!(locks.holder("b"), None);
    }

    #[test]
    fn a_wait_closing_a_circle_is_refused() {
        let locks = std::sync::Arc::new(NamedLocks::default());
        assert_eq!(locks.acquire(1, "a", None, || false), Acquired::Granted);
        assert_eq!(locks.acquire(2, "b", None, || false), Acquired::Granted);
        let waiter = {
            let locks = std::sync::Arc::clone(&locks);
            std::thread::spawn(move || locks.acquire(1, "b", None, || false))
        };
        while locks.table.lock().waiting.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(locks.acquire(2, "a", None, || false), Acquired::Deadlock);
        assert_eq!(locks.release_all(2), 1);
        assert_eq!(waiter.join().unwrap(), Acquired::Granted);
        assert_eq!(locks.holder("b"), Some(1));
    }

    #[test]
    fn names_are_checked_and_case_blind() {
        assert_eq!(lock_key(&Value::text("Ab")).unwrap(), "ab");
        assert_eq!(lock_key(&Value::Int(7)).unwrap(), "7");
        for bad in [Value::Null, Value::text(""), Value::text("x".repeat(65))] {
            assert_eq!(lock_key(&bad).unwrap_err().code.errno, 3057);
        }
        assert!(lock_key(&Value::text("x".repeat(64))).is_ok());
    }
}
