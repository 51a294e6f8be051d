//! Callers' hooks into the commit: a per-write check, the commit observer
//! (the dataflow) and the cluster's write gate.

use std::sync::Arc;

use ladle_common::{Lsn, RowDelta, TableDeltas, TableId};

use crate::error::Result;
use crate::view::SnapshotReads;

/// A caller's check of the state its write would commit, run by the
/// commit leader under the commit lock right after the caller's ops are
/// applied to the group ([`Storage::write_checked`](crate::Storage::write_checked)): the reads see the
/// group's changes so far, this caller's included, over the committed
/// state; the row deltas are this caller's. An error fails the caller's
/// write alone (nothing of it is applied), as a failing op does.
pub type CommitCheck =
    Arc<dyn Fn(&SnapshotReads<'_>, &[(TableId, RowDelta)]) -> Result<()> + Send + Sync>;

/// Told about every committed batch, in LSN order.
pub trait CommitObserver: Send + Sync {
    /// Called inside the commit critical section, after the batch is in
    /// RocksDB (and synced under `Durability::Sync`), before the writers are
    /// acknowledged and before [`Storage::last_lsn`](crate::Storage::last_lsn)
    /// moves to `lsn`. Reads of storage from inside see the batch applied.
    /// The batch is handed over: storage no longer needs it.
    fn on_commit(&self, lsn: Lsn, changes: Vec<TableDeltas>);

    /// Called as [`CommitObserver::on_commit`] for a run of batches a
    /// replica wrote together ([`Storage::apply_replicated_run`](crate::Storage::apply_replicated_run)),
    /// in LSN order: storage already holds the whole run, never the state
    /// between two of its batches. The default tells them one by one,
    /// which is right for an observer that does not read storage; one that
    /// does (the dataflow, whose joins look up their other input) must
    /// treat the run as one batch against the state after the last.
    fn on_commit_run(&self, entries: Vec<(Lsn, Vec<TableDeltas>)>) {
        for (lsn, changes) in entries {
            self.on_commit(lsn, changes);
        }
    }

    /// Called with the commit lock held, before [`Storage::exclusive`](crate::Storage::exclusive) runs
    /// its closure and before every schema change: an observer that
    /// processes batches after `on_commit` returns (asynchronously) must
    /// finish every batch it was told of, so storage and the observer agree
    /// while the lock is held.
    fn settle(&self) {}
}

/// Decides whether writes are taken and when a committed write may be
/// acknowledged (a cluster's primary waits for its synchronous replicas).
/// Without a gate every write is taken and acknowledged once durable.
pub trait WriteGate: Send + Sync {
    /// Before a write is queued: an error refuses it (nothing is written).
    fn admit(&self) -> Result<()>;
    /// After the write's batch committed at `lsn` (durable locally, the
    /// commit lock released): returns once the write may be acknowledged,
    /// or an error the client gets instead (the write may still survive).
    fn acknowledge(&self, lsn: Lsn) -> Result<()>;
}
