//! Taking a snapshot: the consistent cut under the locks, then the files
//! written after them; and compaction of delta chains.

use std::collections::HashSet;
use std::time::Instant;

use ladle_common::{Lsn, TableId};
use ladle_storage::snapshot::{
    CompactionStats, CrashBefore, NodeId, SnapshotError, SnapshotKind, SnapshotStore,
};

use crate::engine::SnapshotTracker;
use crate::graph::CapturedState;
use crate::{Dataflow, DataflowError, Result};

use super::format::{
    capture_rows, encode_capture, encode_err, log_truncated_below, merge_blobs, snap_err,
    storage_id, table_versions, EpochMeta, SavedPartition, KIND_AGGREGATE, KIND_READER,
    KIND_WINDOW, LOG_TRUNCATED_META, TABLES_NODE,
};
use super::{SnapshotStats, COMPACT_CHAIN_LEN, MAX_CHAIN_LEN};

#[derive(Clone, Copy, PartialEq, Eq)]
enum CrashPoint {
    Capture,
    Write,
    Manifest,
    Rename,
}

fn crash_point() -> Option<CrashPoint> {
    match std::env::var("LADLE_SNAPSHOT_CRASH").ok()?.as_str() {
        "capture" => Some(CrashPoint::Capture),
        "write" => Some(CrashPoint::Write),
        "manifest" => Some(CrashPoint::Manifest),
        "rename" => Some(CrashPoint::Rename),
        _ => None,
    }
}

fn crash_if(configured: Option<CrashPoint>, at: CrashPoint) {
    if configured == Some(at) {
        eprintln!("LADLE_SNAPSHOT_CRASH: aborting the process as asked");
        std::process::abort();
    }
}

impl Dataflow {
    /// Takes a consistent cut of every stateful node (briefly holding the
    /// commit lock), then serializes and writes what changed since the
    /// previous epoch into a new epoch of `store` on the calling thread,
    /// publishes it, and truncates storage's change log below the oldest
    /// retained epoch's LSN + 1. Safe to call concurrently with reads and
    /// writes; concurrent calls are serialized.
    pub fn snapshot(&self, store: &SnapshotStore) -> Result<SnapshotStats> {
        let started = Instant::now();
        let inner = &self.inner;
        let mut tracker = inner.snapshots.lock();
        let crash = crash_point();
        let prev = store.latest_manifest();
        // Deltas apply on the store's newest epoch: only if that is the
        // epoch our change tracking is relative to.
        let base: Option<(&HashSet<String>, &ladle_storage::snapshot::Manifest)> =
            match (&tracker.last, &prev) {
                (Some((epoch, nodes)), Some(m)) if m.epoch == *epoch => Some((nodes, m)),
                _ => None,
            };
        let incremental = |stable: &str| -> bool {
            let Some((nodes, m)) = base else {
                return false;
            };
            nodes.contains(stable)
                && NodeId::new(stable)
                    .ok()
                    .and_then(|id| m.chain(&id).map(|c| c.files.len() < MAX_CHAIN_LEN))
                    .unwrap_or(false)
        };
        let (lsn, graph_version, captured, tables, capture) = inner.storage.exclusive(|| {
            let mut g = inner.graph.lock();
            let t = Instant::now();
            let lsn = inner.storage.last_lsn();
            let captured = g.capture(&incremental);
            let tables = table_versions(&inner.storage);
            crash_if(crash, CrashPoint::Capture);
            (lsn, g.version, captured, tables, t.elapsed())
        });
        // Under asynchronous durability the writes up to S may not be on
        // disk yet; a snapshot must never be ahead of what survives a crash
        // (recovery would otherwise see LSNs reused by later writes).
        let synced = inner.storage.sync_wal().map_err(DataflowError::from);
        let written = synced.and_then(|()| {
            self.write_epoch(
                store,
                &mut tracker,
                crash,
                lsn,
                graph_version,
                &captured,
                &tables,
            )
        });
        let mut stats = match written {
            Ok(s) => s,
            Err(e) => {
                // The captured changes were not saved: the next epoch must
                // write every node whole.
                tracker.last = None;
                inner.graph.lock().mark_all_dirty();
                return Err(e);
            }
        };
        drop(captured);
        if let Some(oldest) = store.oldest_retained_lsn() {
            let below = oldest + 1;
            if below > log_truncated_below(&inner.storage)? {
                // Marker first: a crash between leaves the marker ahead of the
                // log, which only makes recovery more cautious.
                inner
                    .storage
                    .put_meta(LOG_TRUNCATED_META, &below.to_be_bytes())?;
                inner.storage.truncate_log(below)?;
            }
        }
        stats.capture = capture;
        stats.total = started.elapsed();
        tracing::info!(
            epoch = stats.epoch,
            lsn = stats.lsn,
            nodes = stats.nodes,
            written = stats.nodes_written,
            full = stats.full_nodes,
            bytes = stats.bytes_written,
            capture_us = capture.as_micros() as u64,
            total_ms = stats.total.as_millis() as u64,
            "snapshot published"
        );
        Ok(stats)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_epoch(
        &self,
        store: &SnapshotStore,
        tracker: &mut SnapshotTracker,
        crash: Option<CrashPoint>,
        lsn: Lsn,
        graph_version: u64,
        captured: &[(String, CapturedState)],
        tables: &[(TableId, u32)],
    ) -> Result<SnapshotStats> {
        let mut epoch = store.retained().last().map_or(1, |e| e.epoch + 1);
        let writer = loop {
            match store.begin_epoch(epoch, lsn, graph_version) {
                Ok(w) => break w,
                // A newer, unpublished epoch number was seen: skip past it.
                Err(SnapshotError::EpochNotNewer { last, .. }) if last >= epoch => epoch = last + 1,
                Err(e) => return Err(snap_err(e)),
            }
        };
        let mut stats = SnapshotStats {
            epoch,
            lsn,
            ..SnapshotStats::default()
        };
        let mut ids = HashSet::new();
        for (stable, state) in captured {
            if !ids.insert(stable.clone()) {
                tracing::warn!(node = %stable, "two nodes with one stable id; saving the first");
                continue;
            }
            let (full, changed, rows, bytes) = match state {
                CapturedState::Reader(c) => (
                    c.full,
                    !c.is_empty(),
                    capture_rows(c, |rows| rows.len() as u64, |log| log.len() as u64),
                    encode_capture(KIND_READER, c)?,
                ),
                CapturedState::Aggregate(c) => (
                    c.full,
                    !c.is_empty(),
                    capture_rows(c, |p| p.rows(), |groups| groups.len() as u64),
                    encode_capture(KIND_AGGREGATE, c)?,
                ),
                CapturedState::Window(c) => (
                    c.full,
                    !c.is_empty(),
                    capture_rows(c, |p| p.len() as u64, |log| log.len() as u64),
                    encode_capture(KIND_WINDOW, c)?,
                ),
            };
            stats.nodes += 1;
            if !full && !changed {
                writer.reuse_node(stable.as_str()).map_err(snap_err)?;
                continue;
            }
            let kind = if full {
                stats.full_nodes += 1;
                SnapshotKind::Full
            } else {
                SnapshotKind::Delta
            };
            writer
                .write_node(stable.as_str(), kind, &bytes)
                .map_err(snap_err)?;
            stats.nodes_written += 1;
            stats.rows_written += rows;
            stats.bytes_written += bytes.len() as u64;
            crash_if(crash, CrashPoint::Write);
        }
        let meta = EpochMeta {
            storage_id: storage_id(&self.inner.storage)?,
            tables: tables.to_vec(),
        };
        let tables_blob = postcard::to_stdvec(&meta).map_err(encode_err)?;
        writer
            .write_node(TABLES_NODE, SnapshotKind::Full, &tables_blob)
            .map_err(snap_err)?;
        stats.bytes_written += tables_blob.len() as u64;
        crash_if(crash, CrashPoint::Write);
        crash_if(crash, CrashPoint::Manifest);
        if crash == Some(CrashPoint::Rename) {
            writer.crash_at(CrashBefore::Rename).map_err(snap_err)?;
            crash_if(crash, CrashPoint::Rename);
            return Err(DataflowError::Internal("unreachable: crash hook".into()));
        }
        writer.publish().map_err(snap_err)?;
        tracker.last = Some((epoch, ids));
        Ok(stats)
    }

    /// Background merge of long delta chains
    /// ([`SnapshotStore::compact`] with this crate's merge function).
    pub fn compact_snapshots(&self, store: &SnapshotStore) -> Result<CompactionStats> {
        store
            .compact(COMPACT_CHAIN_LEN, merge_blobs)
            .map_err(snap_err)
    }
}
