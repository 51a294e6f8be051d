//! Counting what a point-in-time WAL recovery drops: the write-ahead log
//! files are read before the recovery (RocksDB's log format: 32 KiB blocks
//! of framed fragments, each logical record one write batch that starts
//! with its first sequence number and its count of writes), and every
//! record numbered after the sequence the recovery reached was dropped,
//! as were bytes whose framing is damaged.
//!
//! Reads files only; it never touches RocksDB (a damaged WAL is exactly
//! what RocksDB will not read past).

use std::path::{Path, PathBuf};

/// RocksDB's `log::kBlockSize`.
const BLOCK: usize = 32 * 1024;
/// Checksum (4), length (2), type (1).
const HEADER: usize = 7;
/// The recyclable formats add the log number (4).
const RECYCLABLE_HEADER: usize = 11;
/// A write batch starts with its sequence number (8) and count (4).
const BATCH_HEADER: usize = 12;

/// What a point-in-time WAL recovery dropped: the write batches (one per
/// commit) numbered after the last consistent point, and the bytes of
/// log they and any unreadable damage took.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalRecoveryReport {
    /// Write batches after the last consistent point (each Ladle commit is
    /// one; the damaged one is among them when its framing survived).
    pub dropped_records: u64,
    /// Key writes in those batches (RocksDB sequence numbers).
    pub dropped_writes: u64,
    /// Bytes of log after the last consistent point: the dropped records
    /// and fragments too damaged to frame.
    pub dropped_bytes: u64,
    /// The RocksDB sequence number the recovery reached.
    pub recovered_sequence: u64,
    /// Every byte of the log files read.
    pub wal_bytes: u64,
}

/// One intact logical record: its first sequence number, its count of
/// writes and the bytes it took in the log (headers included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    sequence: u64,
    writes: u32,
    bytes: u64,
}

/// The records of every log file in a directory, before recovery.
#[derive(Debug, Default)]
pub(super) struct WalContents {
    records: Vec<Record>,
    /// Bytes in fragments whose framing is damaged.
    unreadable: u64,
    wal_bytes: u64,
}

impl WalContents {
    /// Reads the `.log` files of `dir` (unreadable files count as damage).
    pub fn read(dir: &Path) -> WalContents {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "log"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        let mut out = WalContents::default();
        for f in files {
            match std::fs::read(&f) {
                Ok(bytes) => out.scan(&bytes),
                Err(_) => {
                    let len = std::fs::metadata(&f).map_or(0, |m| m.len());
                    out.unreadable += len;
                    out.wal_bytes += len;
                }
            }
        }
        out
    }

    /// What a recovery that reached `recovered` dropped.
    pub fn dropped_after(&self, recovered: u64) -> WalRecoveryReport {
        let dropped = self.records.iter().filter(|r| r.sequence > recovered);
        let mut report = WalRecoveryReport {
            recovered_sequence: recovered,
            wal_bytes: self.wal_bytes,
            dropped_bytes: self.unreadable,
            ..Default::default()
        };
        for r in dropped {
            report.dropped_records += 1;
            report.dropped_writes += u64::from(r.writes);
            report.dropped_bytes += r.bytes;
        }
        report
    }

    /// Frames one log file's fragments into records.
    fn scan(&mut self, log: &[u8]) {
        self.wal_bytes += log.len() as u64;
        let mut pos = 0;
        // A record split over blocks: its payload and bytes so far.
        let mut pending: Option<(Vec<u8>, u64)> = None;
        while pos < log.len() {
            let block_left = BLOCK - pos % BLOCK;
            if block_left < HEADER {
                pos += block_left; // the block's zero trailer
                continue;
            }
            let Some(fragment) = Fragment::at(log, pos, block_left) else {
                // Damaged framing: what is left of the block is unreadable
                // (a preallocated, zeroed tail is not damage).
                let end = (pos + block_left).min(log.len());
                if log[pos..end].iter().any(|&b| b != 0) {
                    self.unreadable += (end - pos) as u64;
                }
                if let Some((_, bytes)) = pending.take() {
                    self.unreadable += bytes;
                }
                pos = end;
                continue;
            };
            pos += fragment.len;
            let len = fragment.len as u64;
            match fragment.kind {
                FragmentKind::Full => {
                    if let Some((_, bytes)) = pending.take() {
                        self.unreadable += bytes;
                    }
                    self.record(fragment.payload, len);
                }
                FragmentKind::First => {
                    if let Some((_, bytes)) = pending.take() {
                        self.unreadable += bytes;
                    }
                    pending = Some((fragment.payload.to_vec(), len));
                }
                FragmentKind::Middle | FragmentKind::Last => match pending.as_mut() {
                    Some((payload, bytes)) => {
                        payload.extend_from_slice(fragment.payload);
                        *bytes += len;
                        if fragment.kind == FragmentKind::Last {
                            if let Some((payload, bytes)) = pending.take() {
                                self.record(&payload, bytes);
                            }
                        }
                    }
                    None => self.unreadable += len,
                },
                FragmentKind::Meta => {}
            }
        }
        if let Some((_, bytes)) = pending {
            self.unreadable += bytes;
        }
    }

    fn record(&mut self, batch: &[u8], bytes: u64) {
        let Some(head) = batch.get(..BATCH_HEADER) else {
            self.unreadable += bytes;
            return;
        };
        let mut sequence = [0u8; 8];
        sequence.copy_from_slice(&head[..8]);
        let mut writes = [0u8; 4];
        writes.copy_from_slice(&head[8..]);
        self.records.push(Record {
            sequence: u64::from_le_bytes(sequence),
            writes: u32::from_le_bytes(writes),
            bytes,
        });
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FragmentKind {
    Full,
    First,
    Middle,
    Last,
    /// Compression or timestamp-size records: no writes.
    Meta,
}

/// One physical fragment: its kind, payload and length with its header.
struct Fragment<'a> {
    kind: FragmentKind,
    payload: &'a [u8],
    len: usize,
}

impl<'a> Fragment<'a> {
    /// The fragment at `pos`, `None` if its framing is not one RocksDB
    /// writes (or the block is zero-filled from here).
    fn at(log: &'a [u8], pos: usize, block_left: usize) -> Option<Fragment<'a>> {
        let head = log.get(pos..pos + HEADER)?;
        let payload_len = usize::from(u16::from_le_bytes([head[4], head[5]]));
        let (kind, header) = match head[6] {
            1 => (FragmentKind::Full, HEADER),
            2 => (FragmentKind::First, HEADER),
            3 => (FragmentKind::Middle, HEADER),
            4 => (FragmentKind::Last, HEADER),
            5 => (FragmentKind::Full, RECYCLABLE_HEADER),
            6 => (FragmentKind::First, RECYCLABLE_HEADER),
            7 => (FragmentKind::Middle, RECYCLABLE_HEADER),
            8 => (FragmentKind::Last, RECYCLABLE_HEADER),
            9 | 10 => (FragmentKind::Meta, HEADER),
            _ => return None,
        };
        let len = header + payload_len;
        if len > block_left {
            return None;
        }
        let payload = log.get(pos + header..pos + len)?;
        Some(Fragment { kind, payload, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of write batches (sequence, writes, payload size), framed as
    /// RocksDB frames them (checksums left zero: not read here).
    fn log_of(batches: &[(u64, u32, usize)]) -> Vec<u8> {
        let mut log = Vec::new();
        for &(sequence, writes, size) in batches {
            let mut batch = sequence.to_le_bytes().to_vec();
            batch.extend_from_slice(&writes.to_le_bytes());
            batch.resize(BATCH_HEADER + size, 0xAB);
            let mut rest = &batch[..];
            let mut first = true;
            loop {
                let left = BLOCK - log.len() % BLOCK;
                if left < HEADER {
                    log.resize(log.len() + left, 0);
                    continue;
                }
                let n = rest.len().min(left - HEADER);
                let last = n == rest.len();
                let kind = match (first, last) {
                    (true, true) => 1,
                    (true, false) => 2,
                    (false, false) => 3,
                    (false, true) => 4,
                };
                log.extend_from_slice(&[0, 0, 0, 0]);
                log.extend_from_slice(&(n as u16).to_le_bytes());
                log.push(kind);
                log.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                first = false;
                if last {
                    break;
                }
            }
        }
        log
    }

    #[test]
    fn records_after_the_recovered_sequence_are_dropped() {
        // 40 KB batches span blocks (first, middle, last fragments).
        let batches = [(1, 3, 100), (4, 2, 40_000), (6, 1, 10), (7, 5, 70_000)];
        let log = log_of(&batches);
        let mut wal = WalContents::default();
        wal.scan(&log);
        assert_eq!(wal.unreadable, 0);
        assert_eq!(wal.records.len(), 4);
        // Every byte is in a record but the blocks' zero trailers.
        let in_records: u64 = wal.records.iter().map(|r| r.bytes).sum();
        assert_eq!(in_records + trailer_bytes(&log), log.len() as u64);
        let r = wal.dropped_after(5);
        assert_eq!((r.dropped_records, r.dropped_writes), (2, 6));
        assert_eq!(r.recovered_sequence, 5);
        assert_eq!(wal.dropped_after(11).dropped_records, 0);
        assert_eq!(wal.dropped_after(0).dropped_writes, 11);
    }

    /// Bytes in block trailers too short for a header (zeros).
    fn trailer_bytes(log: &[u8]) -> u64 {
        let mut pos = 0;
        let mut n = 0;
        while pos < log.len() {
            let left = BLOCK - pos % BLOCK;
            if left < HEADER {
                n += left as u64;
                pos += left;
                continue;
            }
            pos += Fragment::at(log, pos, left).expect("framed").len;
        }
        n
    }

    #[test]
    fn damaged_framing_counts_as_unreadable_and_never_panics() {
        let log = log_of(&[(1, 1, 50), (2, 1, 50), (3, 1, 50), (4, 1, 50)]);
        let mut damaged = log.clone();
        // The third record's header: a type RocksDB never writes.
        let third = 2 * (HEADER + BATCH_HEADER + 50);
        damaged[third + 6] = 0x77;
        let mut wal = WalContents::default();
        wal.scan(&damaged);
        assert_eq!(wal.records.len(), 2, "the rest of the block is skipped");
        assert_eq!(wal.unreadable, (log.len() - third) as u64);
        let r = wal.dropped_after(2);
        assert_eq!(r.dropped_records, 0);
        assert_eq!(r.dropped_bytes, (log.len() - third) as u64);
        // Any truncation or flipped byte: no panic.
        for cut in 0..log.len() {
            WalContents::default().scan(&log[..cut]);
        }
        for i in 0..log.len() {
            let mut flipped = log.clone();
            flipped[i] ^= 0xFF;
            WalContents::default().scan(&flipped);
        }
    }

    #[test]
    fn a_zeroed_tail_is_not_damage() {
        let mut log = log_of(&[(1, 1, 50)]);
        log.resize(BLOCK * 2, 0);
        let mut wal = WalContents::default();
        wal.scan(&log);
        assert_eq!((wal.records.len(), wal.unreadable), (1, 0));
    }
}
