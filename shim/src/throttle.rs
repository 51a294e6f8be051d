//! Per-host blocking after failed logins, in the manner of MySQL's
//! `max_connect_errors`: a host whose logins failed that many times in a
//! row is refused with error 1129 before the greeting until `FLUSH HOSTS`
//! (or a server restart); a successful login resets its count.
//!
//! Unlike MySQL, which counts only protocol errors and leaves password
//! guessing unthrottled, the failures counted are the logins refused with
//! 1045 (wrong password, unknown user): the point is to stop a password
//! being guessed at thousands of handshakes a second. Loopback clients are
//! counted too (as `localhost`), so an established session can always
//! `FLUSH HOSTS`.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Hosts remembered at most; past it, hosts that are not blocked are
/// forgotten (a flood of addresses cannot grow the table without bound).
const MAX_HOSTS: usize = 65_536;

/// Failed logins in a row, per client host.
#[derive(Default)]
pub struct HostErrors {
    failures: Mutex<HashMap<String, u64>>,
}

impl HostErrors {
    /// Whether `host` is blocked under `max` (`@@max_connect_errors`).
    pub fn blocked(&self, host: &str, max: u64) -> bool {
        self.failures.lock().get(host).is_some_and(|&n| n >= max)
    }

    /// Counts a failed login from `host`.
    pub fn failed(&self, host: &str, max: u64) {
        let mut f = self.failures.lock();
        if f.len() >= MAX_HOSTS && !f.contains_key(host) {
            f.retain(|_, n| *n >= max);
        }
        *f.entry(host.to_string()).or_insert(0) += 1;
    }

    /// A successful login from `host`: its count starts again.
    pub fn succeeded(&self, host: &str) {
        let mut f = self.failures.lock();
        if !f.is_empty() {
            f.remove(host);
        }
    }

    /// `FLUSH HOSTS`: every host is unblocked.
    pub fn flush(&self) {
        self.failures.lock().clear();
    }

    /// The message of error 1129 for `host`.
    pub fn blocked_message(host: &str) -> String {
        format!(
            "Host '{host}' is blocked because of many connection errors; unblock with 'mariadb-admin flush-hosts'"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_max_failures_in_a_row() {
        let h = HostErrors::default();
        h.failed("10.0.0.1", 2);
        assert!(!h.blocked("10.0.0.1", 2));
        h.succeeded("10.0.0.1");
        h.failed("10.0.0.1", 2);
        assert!(!h.blocked("10.0.0.1", 2));
        h.failed("10.0.0.1", 2);
        assert!(h.blocked("10.0.0.1", 2));
        assert!(!h.blocked("10.0.0.2", 2));
        h.flush();
        assert!(!h.blocked("10.0.0.1", 2));
    }
}
