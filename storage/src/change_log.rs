//! The change log's half of [`Storage`]: reading entries back (from
//! RocksDB, or the newest ones from memory for replication streams), and
//! truncating what no replica needs. Entries are written with the batches
//! they log (`Storage::persist_entries`).

use std::sync::atomic::Ordering;

use ladle_common::{Lsn, TableDeltas};

use crate::error::{Result, StorageError};
use crate::storage::Storage;
use crate::{cf, engine, keys};

/// A change-log entry: its LSN and the row changes committed there.
pub type LogEntry = (Lsn, Vec<TableDeltas>);

impl Storage {
    /// The oldest change-log entry kept (`None`: the log is empty).
    pub fn first_log_lsn(&self) -> Result<Option<Lsn>> {
        let mut first = None;
        self.engine.with_consistent(&mut |r| {
            r.scan(cf::CHANGE_LOG, &[], None, &mut |k, _| {
                first = keys::decode_lsn(k);
                Ok(false)
            })
        })?;
        Ok(first)
    }

    /// Keeps change-log entries with LSN > `lsn` through `truncate_log`
    /// (what a replica has not yet acknowledged); `u64::MAX` removes it.
    pub fn set_log_floor(&self, lsn: Lsn) {
        self.log_floor.store(lsn, Ordering::Release);
    }

    /// Lowers the floor of [`Storage::set_log_floor`] to `lsn` at once, if
    /// it is higher.
    pub fn lower_log_floor(&self, lsn: Lsn) {
        self.log_floor.fetch_min(lsn, Ordering::AcqRel);
    }

    /// Calls `f` for every logged batch with LSN > `after`, in order.
    pub fn read_log(
        &self,
        after: Lsn,
        f: &mut dyn FnMut(Lsn, Vec<TableDeltas>) -> Result<()>,
    ) -> Result<()> {
        const CHUNK: usize = 256;
        let mut next = match after.checked_add(1) {
            Some(n) => n,
            None => return Ok(()),
        };
        loop {
            let mut chunk: Vec<(Lsn, Vec<TableDeltas>)> = Vec::new();
            let start = keys::lsn_key(next);
            self.engine.with_consistent(&mut |r| {
                chunk.clear();
                r.scan(cf::CHANGE_LOG, &start, None, &mut |k, v| {
                    let lsn = keys::decode_lsn(k)
                        .ok_or_else(|| StorageError::Corruption("bad change-log key".into()))?;
                    let deltas: Vec<TableDeltas> = postcard::from_bytes(v).map_err(|e| {
                        StorageError::Corruption(format!("change-log entry {lsn}: {e}"))
                    })?;
                    chunk.push((lsn, deltas));
                    Ok(chunk.len() < CHUNK)
                })
            })?;
            let done = chunk.len() < CHUNK;
            for (lsn, deltas) in chunk {
                next = lsn + 1;
                f(lsn, deltas)?;
            }
            if done {
                return Ok(());
            }
        }
    }

    /// Keeps the newest `entries` change-log entries in memory from now on
    /// (0: none), for [`Storage::read_recent_log`].
    pub fn keep_recent_log(&self, entries: usize) {
        self.recent_log.set_capacity(entries);
    }

    /// Up to `max` change-log entries after `after`, as [`Storage::read_log`]
    /// gives them, if they are all among those kept in memory (see
    /// [`Storage::keep_recent_log`]); `None` when they must be read from
    /// storage. Never touches the disk.
    pub fn read_recent_log(&self, after: Lsn, max: usize) -> Option<Result<Vec<LogEntry>>> {
        let kept = self.recent_log.read(after, max)?;
        Some(
            kept.into_iter()
                .map(|(lsn, bytes)| {
                    postcard::from_bytes(&bytes)
                        .map(|deltas| (lsn, deltas))
                        .map_err(|e| {
                            StorageError::Corruption(format!("change-log entry {lsn}: {e}"))
                        })
                })
                .collect(),
        )
    }

    /// Drops log entries with LSN < `below` (and at most up to the floor
    /// set by [`Storage::set_log_floor`]).
    pub fn truncate_log(&self, below: Lsn) -> Result<()> {
        let below = below.min(self.log_floor.load(Ordering::Acquire).saturating_add(1));
        let end = keys::lsn_key(below);
        loop {
            let mut batch = engine::Batch::default();
            self.engine.with_consistent(&mut |r| {
                batch = engine::Batch::default();
                r.scan(cf::CHANGE_LOG, &[], Some(&end), &mut |k, _| {
                    batch.delete(cf::CHANGE_LOG, k.to_vec());
                    Ok(batch.ops.len() < 10_000)
                })
            })?;
            if batch.is_empty() {
                return Ok(());
            }
            self.engine.write(batch, false)?;
        }
    }
}
