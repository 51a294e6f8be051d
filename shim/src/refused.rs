//! Statements Ladle refuses (1235: not supported yet; 1064: it does not
//! parse them) are logged at info with the reason and the statement's
//! first [`SHOWN_BYTES`] bytes, so that an operator can find what their
//! application sends that Ladle refuses. At most [`PER_WINDOW`] lines per
//! [`WINDOW`] for the whole server, so that no client can flood the log;
//! the next line logged says how many were left out meanwhile.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{WireError, ER_NOT_SUPPORTED_YET, ER_PARSE};

/// Bytes of a refused statement the log line shows.
pub(crate) const SHOWN_BYTES: usize = 200;
/// Lines logged per window at most.
const PER_WINDOW: u32 = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// The rate limit's state: when the current window began, the lines
/// logged in it, and the refusals left out since the last line.
struct Limit {
    start: Option<Instant>,
    logged: u32,
    left_out: u64,
}

static LIMIT: Mutex<Limit> = Mutex::new(Limit {
    start: None,
    logged: 0,
    left_out: 0,
});

/// Logs `err` for statement `sql` of connection `connection` when it is a
/// refusal (1235, 1064) and the rate limit allows.
pub(crate) fn note(connection: u32, sql: &str, err: &WireError) {
    let code = err.code.errno;
    if code != ER_NOT_SUPPORTED_YET.errno && code != ER_PARSE.errno {
        return;
    }
    let admitted = admit(
        &mut LIMIT.lock().unwrap_or_else(|p| p.into_inner()),
        Instant::now(),
    );
    let Some(left_out) = admitted else {
        return;
    };
    let statement = shown(sql);
    tracing::info!(
        connection,
        errno = code,
        reason = %err.message,
        statement = %statement,
        left_out,
        "statement refused"
    );
}

/// Whether a line may be logged at `now`: `Some(refusals left out since
/// the last line)`, or `None` (counted as left out).
fn admit(l: &mut Limit, now: Instant) -> Option<u64> {
    if l.start.is_none_or(|s| now.duration_since(s) >= WINDOW) {
        l.start = Some(now);
        l.logged = 0;
    }
    if l.logged >= PER_WINDOW {
        l.left_out += 1;
        return None;
    }
    l.logged += 1;
    Some(std::mem::take(&mut l.left_out))
}

/// `sql` on one line, cut to [`SHOWN_BYTES`] at a character boundary
/// (marked with `...`).
fn shown(sql: &str) -> String {
    let one_line: String = sql
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.len() <= SHOWN_BYTES {
        return one_line;
    }
    let mut end = SHOWN_BYTES;
    while !one_line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &one_line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_statement_is_cut_at_a_character_boundary() {
        let sql = format!("SELECT '{}'", "é".repeat(300));
        let s = shown(&sql);
        assert!(s.len() <= SHOWN_BYTES + 3, "{}", s.len());
        assert!(s.ends_with("..."));
        assert_eq!(shown("SELECT\n1\t"), "SELECT 1");
    }

    #[test]
    fn lines_past_the_limit_are_counted_and_reported_by_the_next() {
        let t0 = Instant::now();
        let mut l = Limit {
            start: None,
            logged: 0,
            left_out: 0,
        };
        for _ in 0..PER_WINDOW {
            assert_eq!(admit(&mut l, t0), Some(0));
        }
        assert_eq!(admit(&mut l, t0 + Duration::from_secs(1)), None);
        assert_eq!(admit(&mut l, t0 + Duration::from_secs(2)), None);
        assert_eq!(admit(&mut l, t0 + WINDOW), Some(2));
        assert_eq!(admit(&mut l, t0 + WINDOW), Some(0));
    }
}
