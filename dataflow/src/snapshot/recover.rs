//! Recovery: the newest verified epoch decoded, installed into the
//! graph, and the change log after it replayed (see the module docs).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use ladle_common::{Lsn, TableDeltas, TableId};
use ladle_storage::snapshot::{LoadedNode, SnapshotStore};
use ladle_storage::Storage;

use crate::graph::{Graph, RestoredState};
use crate::{Dataflow, Result};

use super::decode::{DecodedSnapshot, Decoding, Found};
use super::format::{
    blob_kind, log_truncated_below, storage_id, table_versions, KIND_READER, TABLES_NODE,
};
use super::{RecoveryProgress, RecoveryStats};

/// What recovery restored and replayed under the lock.
struct Replayed {
    restored: usize,
    rows: u64,
    cold: usize,
    batches: u64,
    deltas: u64,
}

impl Dataflow {
    /// Call once at start, after [`Dataflow::new`] and before serving: loads
    /// the newest verified epoch, restores the state of nodes whose stable
    /// id matches, replays the change log after the epoch's LSN into the
    /// dataflow only (not into base tables), reports progress. No usable
    /// snapshot => cold start (Ok with epoch None). The same as
    /// [`Dataflow::decode_snapshot`] then [`Dataflow::install_snapshot`].
    pub fn recover(
        &self,
        store: &SnapshotStore,
        progress: &mut dyn FnMut(&RecoveryProgress),
    ) -> Result<RecoveryStats> {
        let decoded = Dataflow::decode_snapshot(store, progress);
        self.install_snapshot(decoded, progress, &mut || {})
    }

    /// The first half of [`Dataflow::recover`]: reads, verifies and decodes
    /// the newest usable epoch. Needs neither storage nor the graph, so a
    /// server runs it while storage opens and views are reinstalled. Never
    /// fails: an unreadable store means a cold start.
    pub fn decode_snapshot(
        store: &SnapshotStore,
        progress: &mut dyn FnMut(&RecoveryProgress),
    ) -> DecodedSnapshot {
        let started = Instant::now();
        progress(&RecoveryProgress {
            phase: "load",
            done: 0,
            total: 1,
            bytes: 0,
            rows: 0,
        });
        let mut rejected = Vec::new();
        // A store that cannot be read means a cold start, not a failed one.
        let loaded = store.load_latest().unwrap_or_else(|e| {
            tracing::warn!("cannot load snapshots ({e}); cold start");
            rejected.push(format!("loading snapshots: {e}"));
            None
        });
        let Some(snap) = loaded else {
            return DecodedSnapshot {
                found: None,
                rejected,
                load: started.elapsed(),
            };
        };
        rejected.extend(
            snap.rejected
                .iter()
                .map(|r| format!("epoch {}: {}", r.epoch, r.reason)),
        );
        progress(&RecoveryProgress {
            phase: "load",
            done: 1,
            total: 1,
            bytes: snap.bytes_read,
            rows: 0,
        });

        // Decode outside the locks, node by node on up to four threads:
        // the epoch metadata and the readers first (they answer reads, so
        // serving can start once they are in: see `install_snapshot`), each
        // group largest first so the biggest node starts at once and the
        // others fill the threads.
        let is_reader = |n: &LoadedNode| blob_kind(&n.base).ok() == Some(KIND_READER);
        let needed_first = |n: &LoadedNode| n.node.as_str() == TABLES_NODE || is_reader(n);
        let mut order: Vec<usize> = (0..snap.nodes.len()).collect();
        order.sort_by_key(|&i| {
            let n = &snap.nodes[i];
            let size = n.base.len() + n.deltas.iter().map(|d| d.len()).sum::<usize>();
            (!needed_first(n), std::cmp::Reverse(size))
        });
        let interior: Arc<HashSet<usize>> = Arc::new(
            (0..snap.nodes.len())
                .filter(|&i| {
                    snap.nodes[i].node.as_str() != TABLES_NODE && !is_reader(&snap.nodes[i])
                })
                .collect(),
        );
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4)
            .min(snap.nodes.len().max(1));
        let mut decoding = Decoding::start(
            snap.nodes,
            order,
            interior.clone(),
            workers,
            snap.bytes_read,
        );
        decoding.receive(progress, |i| !interior.contains(&i));
        rejected.append(&mut decoding.rejected);
        // Interior state stays with `decoding` (not decoded yet): it is
        // installed after the readers.
        let (mut states, mut rows_of) = (HashMap::new(), HashMap::new());
        for (i, n) in decoding.nodes.iter().enumerate() {
            let id = n.node.as_str();
            if !decoding.interior.contains(&i) {
                states.extend(decoding.states.remove_entry(id));
                rows_of.extend(decoding.rows_of.remove_entry(id));
            }
        }
        DecodedSnapshot {
            found: Some(Found {
                epoch: snap.epoch,
                lsn: snap.lsn,
                bytes_read: snap.bytes_read,
                meta: decoding.meta.take(),
                states,
                rows_of,
                late: Some(decoding).filter(|d| !d.interior.is_empty()),
            }),
            rejected,
            load: started.elapsed(),
        }
    }

    /// The second half of [`Dataflow::recover`]: installs decoded state
    /// into the graph (if the snapshot belongs to this storage and the
    /// change log after it is complete) and replays the change log.
    ///
    /// `servable` is called once the views can answer reads while the rest
    /// is still being installed: when there is nothing to replay, right after
    /// the readers (which hold the current answers) are in, before interior
    /// state still decoding is (writes and reader misses wait for it: both
    /// need the locks held here). It is not called otherwise; the views can
    /// answer once this returns.
    pub fn install_snapshot(
        &self,
        decoded: DecodedSnapshot,
        progress: &mut dyn FnMut(&RecoveryProgress),
        servable: &mut dyn FnMut(),
    ) -> Result<RecoveryStats> {
        let inner = &self.inner;
        let mut tracker = inner.snapshots.lock();
        tracker.last = None;
        let mut stats = RecoveryStats {
            rejected: decoded.rejected,
            load: decoded.load,
            ..RecoveryStats::default()
        };
        let Some(snap) = decoded.found else {
            stats.lsn = inner.storage.last_lsn();
            stats.nodes_cold = inner.graph.lock().stateful_nodes();
            return Ok(stats);
        };
        let mut rejected_later = Vec::new();
        stats.bytes_read = snap.bytes_read;
        stats.lsn = snap.lsn;
        let mut states = snap.states;
        let mut rows_of = snap.rows_of;
        let mut late = snap.late;
        let this_storage = storage_id(&inner.storage)?;
        let tables_at_s: Option<HashSet<(TableId, u32)>> = match snap.meta {
            Some(m) if m.storage_id == this_storage => Some(m.tables.into_iter().collect()),
            Some(_) => {
                stats
                    .rejected
                    .push("the snapshot belongs to another database".into());
                None
            }
            None => None,
        };

        let truncated_below = log_truncated_below(&inner.storage)?;
        let replay_started = Instant::now();
        let outcome = inner.storage.exclusive(|| -> Result<Option<Replayed>> {
            let last = inner.storage.last_lsn();
            let mut g = inner.graph.lock();
            let usable = |why: &str| -> String {
                tracing::warn!(
                    epoch = snap.epoch,
                    "snapshot not restorable ({why}); cold start"
                );
                format!("epoch {}: {why}", snap.epoch)
            };
            let Some(tables_at_s) = &tables_at_s else {
                rejected_later.push(usable("no usable epoch metadata"));
                g.restore(HashMap::new());
                return Ok(None);
            };
            if last < snap.lsn {
                rejected_later.push(usable("storage is older than the snapshot"));
                g.restore(HashMap::new());
                return Ok(None);
            }
            if snap.lsn + 1 < truncated_below {
                rejected_later.push(usable("the change log after it was truncated"));
                g.restore(HashMap::new());
                return Ok(None);
            }
            let (batch, batches, deltas) =
                match log_after(&inner.storage, snap.lsn, last, tables_at_s) {
                    Ok(log) => log,
                    Err(why) => {
                        rejected_later.push(usable(&why));
                        g.restore(HashMap::new());
                        return Ok(None);
                    }
                };
            let (restored, cold) = restore_states(
                &mut g,
                std::mem::take(&mut states),
                late.as_mut(),
                batch.is_empty(),
                &mut rows_of,
                &mut rejected_later,
                progress,
                servable,
            );
            progress(&RecoveryProgress {
                phase: "replay",
                done: 0,
                total: batches,
                bytes: 0,
                rows: deltas,
            });
            if !batch.is_empty() {
                if let Err(e) = g.on_commit(&batch) {
                    tracing::error!("replaying the change log failed ({e}); cold start");
                    g.clear_all();
                    return Ok(None);
                }
            }
            g.evict(inner.config.memory_limit);
            progress(&RecoveryProgress {
                phase: "replay",
                done: batches,
                total: batches,
                bytes: 0,
                rows: deltas,
            });
            let replayed = Replayed {
                restored: restored.len(),
                rows: restored.iter().filter_map(|id| rows_of.get(id)).sum(),
                cold,
                batches,
                deltas,
            };
            tracker.last = Some((snap.epoch, restored.into_iter().collect()));
            Ok(Some(replayed))
        })?;
        stats.replay = replay_started.elapsed();
        stats.rejected.extend(rejected_later);
        match outcome {
            Some(r) => {
                stats.epoch = Some(snap.epoch);
                stats.nodes_restored = r.restored;
                stats.nodes_cold = r.cold;
                stats.rows_restored = r.rows;
                stats.replayed_batches = r.batches;
                stats.replayed_deltas = r.deltas;
            }
            None => {
                stats.nodes_cold = inner.graph.lock().stateful_nodes();
            }
        }
        tracing::info!(
            epoch = ?stats.epoch,
            lsn = stats.lsn,
            restored = stats.nodes_restored,
            cold = stats.nodes_cold,
            rows = stats.rows_restored,
            replayed = stats.replayed_batches,
            load_ms = stats.load.as_millis() as u64,
            replay_ms = stats.replay.as_millis() as u64,
            "recovery done"
        );
        Ok(stats)
    }
}

/// The change log after `s` up to `last`, as one batch, without the
/// deltas of tables whose schema changed since `s` (their views start
/// cold: other stable ids); with its entry and row-delta counts. `Err`
/// with the reason when the log cannot be read or has a gap.
fn log_after(
    storage: &Storage,
    s: Lsn,
    last: Lsn,
    tables_at_s: &HashSet<(TableId, u32)>,
) -> std::result::Result<(Vec<TableDeltas>, u64, u64), String> {
    let current: HashSet<(TableId, u32)> = table_versions(storage).into_iter().collect();
    let mut batch: Vec<TableDeltas> = Vec::new();
    let mut next = s + 1;
    let mut batches = 0u64;
    let mut deltas = 0u64;
    let mut gap = None;
    let read = storage.read_log(s, &mut |lsn, entry| {
        if lsn != next {
            gap.get_or_insert(next);
        }
        next = lsn + 1;
        batches += 1;
        for td in entry {
            let version = current.iter().find(|t| t.0 == td.table).map(|t| t.1);
            if version.is_some_and(|v| tables_at_s.contains(&(td.table, v))) {
                deltas += td.deltas.len() as u64;
                batch.push(td);
            }
        }
        Ok(())
    });
    if let Err(e) = read {
        return Err(format!("the change log after it cannot be read: {e}"));
    }
    if gap.is_some() || next != last + 1 {
        return Err("the change log after it has a gap".into());
    }
    Ok((batch, batches, deltas))
}

/// Restores the decoded `states` (and, once decoded, `late`'s interior
/// states) into the graph; returns the stable ids restored and the number
/// of stateful nodes left cold. With `nothing_to_replay`, the readers hold
/// the current answers: `servable` is called once they are in, before the
/// interior state still decoding.
#[allow(clippy::too_many_arguments)]
fn restore_states(
    g: &mut Graph,
    mut states: HashMap<String, RestoredState>,
    mut late: Option<&mut Decoding>,
    nothing_to_replay: bool,
    rows_of: &mut HashMap<String, u64>,
    rejected: &mut Vec<String>,
    progress: &mut dyn FnMut(&RecoveryProgress),
    servable: &mut dyn FnMut(),
) -> (Vec<String>, usize) {
    let (mut restored, mut cold, deferred) = match late.as_deref_mut() {
        Some(l) if nothing_to_replay => {
            // Nothing to replay: the readers hold the current answers.
            let later = l.interior_ids();
            let early = g.restore_early(std::mem::take(&mut states), &later);
            servable();
            l.receive(progress, |_| true);
            early
        }
        Some(l) => {
            l.receive(progress, |_| true);
            let (late_states, late_rows) = l.take_states();
            states.extend(late_states);
            rows_of.extend(late_rows);
            let (restored, cold) = g.restore(std::mem::take(&mut states));
            (restored, cold, HashSet::new())
        }
        None => {
            let (restored, cold) = g.restore(std::mem::take(&mut states));
            (restored, cold, HashSet::new())
        }
    };
    if let Some(l) = late {
        let (late_states, late_rows) = l.take_states();
        rows_of.extend(late_rows);
        rejected.append(&mut l.rejected);
        if !deferred.is_empty() {
            match g.restore_late(late_states, &deferred) {
                Some(more) => restored.extend(more),
                None => {
                    tracing::warn!("interior snapshot state is missing; views start cold");
                    restored.clear();
                    cold = g.stateful_nodes();
                }
            }
        }
    }
    (restored, cold)
}
