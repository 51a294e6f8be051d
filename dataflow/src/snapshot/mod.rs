//! Snapshots of view state and warm restarts: [`Dataflow::snapshot`],
//! [`Dataflow::recover`] and [`Dataflow::compact_snapshots`], over the file
//! store [`SnapshotStore`] of `ladle_storage::snapshot`.
//!
//! # Consistent cut
//!
//! Deltas propagate synchronously inside storage's commit lock, so holding
//! that lock and the graph lock is a cut at the LSN S = `last_lsn()`: every
//! node reflects exactly the writes with LSN <= S (invariant 5 without
//! markers: there are no in-flight messages to align). Inside the locks only
//! cheap work happens: aggregate partitions are copy-on-write (`Arc`, cloned
//! on the next write) and reader rows are `Arc`s already, so a capture takes
//! references to the partitions that changed since the previous epoch (each
//! stateful node tracks its changed partition keys; inside large partitions
//! the changed aggregate groups are cloned and the applied reader row deltas
//! moved out). Serialization (postcard)
//! and file I/O run after the locks are released. The WAL is synced before
//! the epoch is published, so under asynchronous durability a snapshot is
//! never ahead of the writes a crash keeps.
//!
//! # Incremental epochs
//!
//! A node unchanged since the previous epoch is reused (no file); a changed
//! node gets a delta file: partitions filled since then saved whole,
//! tombstones of partitions that became holes, and for large partitions
//! (64+ groups or rows) only what changed inside them (the changed groups of
//! an aggregate partition; the row deltas applied to a reader key), falling
//! back to the whole partition once those exceed half its size. A node that
//! is new, or whose previous state the store does not hold, or whose chain
//! reached [`MAX_CHAIN_LEN`], gets a full file.
//! [`Dataflow::compact_snapshots`] merges long chains in the background.
//! Only filled partitions are saved: a restored node has exactly the
//! partitions it had (holes stay holes).
//!
//! # Node identity
//!
//! A node's snapshot id is its stable id (graph.rs): a hash of its
//! structure, state key, its ancestors' stable ids, and the id and schema
//! version of each base table below it; a reader's also covers its view's
//! signature. The engine records every installed view in the catalog and
//! reinstalls them on start, so the same nodes come back. State saved before
//! an ALTER TABLE or a DROP + CREATE never matches the new nodes: they start
//! cold. A node is restored only if every stateful node above it is too.
//!
//! # Recovery
//!
//! Base tables are already at the newest LSN L when the dataflow starts.
//! Recovery loads the newest epoch that verifies (the store falls back to the
//! previous one on a missing, truncated or corrupt file), restores state as
//! of S, and replays the change log (S, L] into the dataflow only, as ONE
//! batch through the normal propagation path under the commit lock: joins
//! compute "after the batch minus the batch's deltas" from storage, which is
//! at L, so one merged batch is exact where entry-by-entry replay would not
//! be. The log must be complete after S (LSNs are contiguous; a marker
//! records how far it was truncated), the storage must not be older than S,
//! and the epoch must belong to this storage (each epoch records a random
//! identity kept in the storage's catalog); otherwise, or if the snapshots
//! or the log cannot be read, everything starts cold. A table whose schema
//! version differs from the one recorded at S (ALTER, DROP + CREATE, new)
//! has cold views (their stable ids differ) and its deltas are left out of
//! the replay. Never a wrong answer: at worst a cold view.
//!
//! After each publish the change log is truncated below the oldest retained
//! epoch's S + 1.
//!
//! # Crash test hook
//!
//! If the environment variable `LADLE_SNAPSHOT_CRASH` is `capture`, `write`,
//! `manifest` or `rename`, [`Dataflow::snapshot`] aborts the process
//! (`std::process::abort`) at that phase: during the capture with the locks
//! held; after writing the first node file (the epoch metadata file is
//! written in every epoch, so this always triggers); after every node file
//! but before publishing; inside publish just before the `MANIFEST` rename.
//! For kill -9 tests only.

mod decode;
mod format;
mod recover;
mod take;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use ladle_storage::snapshot::{CompactionStats, SnapshotConfig, SnapshotStore};

pub use decode::DecodedSnapshot;

/// A node's chain (full file + deltas) longer than this gets a full file in
/// the next epoch even if compaction has not merged it.
pub(crate) const MAX_CHAIN_LEN: usize = 16;

/// Chains longer than this are merged by [`Dataflow::compact_snapshots`].
pub(crate) const COMPACT_CHAIN_LEN: usize = 4;

/// What one [`Dataflow::snapshot`] did.
#[derive(Clone, Debug, Default)]
pub struct SnapshotStats {
    pub epoch: u64,
    /// Every saved node reflects exactly the writes with LSN <= this.
    pub lsn: u64,
    /// Stateful nodes in the epoch.
    pub nodes: usize,
    /// Nodes that got a file in this epoch (the rest were reused).
    pub nodes_written: usize,
    /// Of those, full files (the rest are deltas).
    pub full_nodes: usize,
    /// Reader rows, aggregate groups and recorded row deltas written.
    pub rows_written: u64,
    /// Serialized bytes handed to the store (before compression).
    pub bytes_written: u64,
    /// How long the commit lock was held for the capture.
    pub capture: Duration,
    pub total: Duration,
}

/// Progress of [`Dataflow::recover`], reported as it goes.
#[derive(Clone, Debug)]
pub struct RecoveryProgress {
    /// "load" (reading and verifying files), "restore" (decoding node
    /// state) or "replay" (the change log after the snapshot).
    pub phase: &'static str,
    pub done: u64,
    pub total: u64,
    pub bytes: u64,
    pub rows: u64,
}

/// What one [`Dataflow::recover`] did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryStats {
    /// The epoch restored; None = cold start.
    pub epoch: Option<u64>,
    /// The snapshot's LSN (or storage's LSN on a cold start).
    pub lsn: u64,
    pub nodes_restored: usize,
    /// Stateful nodes left cold (new, changed, or depending on such).
    pub nodes_cold: usize,
    /// Reader rows and aggregate groups restored.
    pub rows_restored: u64,
    pub bytes_read: u64,
    /// Change-log entries (group commits) replayed, and their row deltas.
    pub replayed_batches: u64,
    pub replayed_deltas: u64,
    /// Reading, verifying and decoding the snapshot (no locks held).
    pub load: Duration,
    /// Installing the state and replaying the change log (commit lock held).
    pub replay: Duration,
    /// Why snapshot epochs or nodes were not used.
    pub rejected: Vec<String>,
}
