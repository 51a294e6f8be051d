//! The newest change-log entries, kept in memory for a cluster primary's
//! replication streams: a replica that keeps up is sent each entry from
//! here, not read back from RocksDB on a blocking thread (an iterator and
//! two thread hand-offs per entry). Off (nothing kept) on a single node.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ladle_common::Lsn;
use parking_lot::Mutex;

/// At most this many bytes of encoded entries are kept, whatever the count.
const MAX_BYTES: usize = 32 << 20;

#[derive(Default)]
pub(crate) struct RecentLog {
    /// Entries kept at most; 0 keeps none.
    capacity: AtomicUsize,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// Consecutive LSNs, oldest first, each entry as the change log stores it.
    entries: VecDeque<(Lsn, Arc<[u8]>)>,
    bytes: usize,
}

impl RecentLog {
    pub(crate) fn set_capacity(&self, entries: usize) {
        self.capacity.store(entries, Ordering::Release);
        if entries == 0 {
            *self.kept.lock() = Kept::default();
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.capacity.load(Ordering::Acquire) > 0
    }

    /// Keeps entries just made durable, in LSN order after those kept.
    pub(crate) fn push(&self, entries: Vec<(Lsn, Arc<[u8]>)>) {
        let capacity = self.capacity.load(Ordering::Acquire);
        let mut kept = self.kept.lock();
        for (lsn, bytes) in entries {
            if kept
                .entries
                .back()
                .is_some_and(|(last, _)| *last + 1 != lsn)
            {
                // Not consecutive (a restart of the stream of LSNs): start over.
                *kept = Kept::default();
            }
            kept.bytes += bytes.len();
            kept.entries.push_back((lsn, bytes));
        }
        while kept.entries.len() > capacity || kept.bytes > MAX_BYTES {
            let Some((_, old)) = kept.entries.pop_front() else {
                break;
            };
            kept.bytes -= old.len();
        }
    }

    /// Up to `max` entries after `after`, if they are all kept here: `None`
    /// when the first of them is not (older, or kept nowhere yet).
    /// `Some(empty)` when `after` is the newest entry kept.
    pub(crate) fn read(&self, after: Lsn, max: usize) -> Option<Vec<(Lsn, Arc<[u8]>)>> {
        let kept = self.kept.lock();
        let (first, _) = kept.entries.front()?;
        let (last, _) = kept.entries.back()?;
        if after < first.saturating_sub(1) || after > *last {
            return None;
        }
        let skip = (after + 1 - first) as usize;
        Some(kept.entries.iter().skip(skip).take(max).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(lsn: Lsn) -> (Lsn, Arc<[u8]>) {
        (lsn, Arc::from(vec![lsn as u8; 10]))
    }

    fn lsns(read: Option<Vec<(Lsn, Arc<[u8]>)>>) -> Option<Vec<Lsn>> {
        read.map(|v| v.into_iter().map(|(l, _)| l).collect())
    }

    #[test]
    fn keeps_the_newest_consecutive_entries() {
        let log = RecentLog::default();
        log.push(vec![entry(1)]);
        assert_eq!(lsns(log.read(0, 10)), None, "off: nothing kept");
        log.set_capacity(3);
        log.push((5..=9).map(entry).collect());
        assert_eq!(lsns(log.read(6, 10)), Some(vec![7, 8, 9]));
        assert_eq!(lsns(log.read(7, 1)), Some(vec![8]));
        assert_eq!(lsns(log.read(9, 10)), Some(vec![]));
        assert_eq!(lsns(log.read(5, 10)), None, "6 is no longer kept");
        assert_eq!(lsns(log.read(10, 10)), None, "10 is not written yet");
        // A gap (a restarted sequence) drops what was kept.
        log.push(vec![entry(20)]);
        assert_eq!(lsns(log.read(19, 10)), Some(vec![20]));
        assert_eq!(lsns(log.read(8, 10)), None);
    }
}
