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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::{Lsn, Row, RowDelta, TableDeltas, TableId, Value};
use ladle_storage::snapshot::{CrashBefore, LoadedNode, NodeId, SnapshotError, SnapshotKind};
use ladle_storage::{Storage, StorageError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use ladle_storage::snapshot::{CompactionStats, SnapshotConfig, SnapshotStore};

use crate::engine::SnapshotTracker;
use crate::graph::{CapturedState, RestoredState};
use crate::ops::aggregate::{Group, GroupPatch, Partition};
use crate::ops::Captured;
use crate::{Dataflow, DataflowError, Result};

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

/// The newest usable snapshot, read, verified and decoded but not yet
/// installed ([`Dataflow::decode_snapshot`], then
/// [`Dataflow::install_snapshot`]).
pub struct DecodedSnapshot {
    /// None: no usable snapshot (a cold start).
    found: Option<Found>,
    /// Why epochs or nodes were not used, so far.
    rejected: Vec<String>,
    /// Reading, verifying and decoding.
    load: Duration,
}

/// A decoded epoch.
struct Found {
    epoch: u64,
    lsn: u64,
    bytes_read: u64,
    /// None if missing or undecodable (the reason is in `rejected`).
    meta: Option<EpochMeta>,
    /// Stable id -> state, and its rows.
    states: HashMap<String, RestoredState>,
    rows_of: HashMap<String, u64>,
    /// Interior nodes still being decoded when the readers were done.
    late: Option<Decoding>,
}

/// A decoded node, or None for the epoch metadata (decoded by the receiver).
type NodeResult = Option<std::result::Result<(RestoredState, u64), String>>;

/// Decodes a loaded node; the epoch metadata is left to the receiver.
fn decode_loaded(n: &LoadedNode) -> NodeResult {
    (n.node.as_str() != TABLES_NODE).then(|| decode_node(n))
}

/// Snapshot nodes decoding on worker threads, collected as they finish.
///
/// Interior nodes wait behind a gate that the first `receive` wanting one
/// opens: on a warm start that is once the views can answer, so their
/// decoding (the largest aggregates take tens of milliseconds) does not
/// compete for the cores with opening storage and installing the readers,
/// which is what the first answer waits for.
struct Decoding {
    nodes: Arc<Vec<LoadedNode>>,
    rx: std::sync::mpsc::Receiver<(usize, NodeResult, Duration)>,
    gate: Arc<Gate>,
    /// Per node: received.
    got: Vec<bool>,
    /// The interior nodes (not readers, not the epoch metadata); the
    /// workers hold them back until the gate opens.
    interior: Arc<HashSet<usize>>,
    /// Nodes that could not be decoded.
    failed: HashSet<usize>,
    /// Nodes received.
    done: u64,
    bytes: u64,
    rows: u64,
    meta: Option<EpochMeta>,
    states: HashMap<String, RestoredState>,
    rows_of: HashMap<String, u64>,
    rejected: Vec<String>,
}

/// Whether interior nodes may be decoded yet.
#[derive(Default)]
struct Gate {
    state: parking_lot::Mutex<GateState>,
    changed: parking_lot::Condvar,
}

#[derive(Clone, Copy, Default, PartialEq)]
enum GateState {
    #[default]
    Closed,
    Open,
    /// Nobody will collect them.
    Cancelled,
}

impl Gate {
    fn set(&self, to: GateState) {
        let mut state = self.state.lock();
        if *state == GateState::Closed {
            *state = to;
        }
        self.changed.notify_all();
    }

    /// Waits until the gate opens (true) or is cancelled (false).
    fn pass(&self) -> bool {
        let mut state = self.state.lock();
        while *state == GateState::Closed {
            self.changed.wait(&mut state);
        }
        *state == GateState::Open
    }
}

/// Lowers the calling thread's CPU priority to nice 10 (about a tenth of a
/// core's share against a normal thread): past the gate, decoding runs while
/// the views already answer, and on a small machine it would otherwise take
/// a core from the reads (and their clients) the warm start is for. Idle
/// cores still run it at full speed; not lower, so that a busy server still
/// finishes it (writes wait for it).
fn yield_to_serving() {
    use thread_priority::{set_current_thread_priority, ThreadPriority, ThreadPriorityValue};
    // 0..=99 maps onto nice 19..=-20 (Linux: per thread).
    if let Ok(nice_10) = ThreadPriorityValue::try_from(22u8) {
        if let Err(e) = set_current_thread_priority(ThreadPriority::Crossplatform(nice_10)) {
            tracing::debug!("cannot lower the snapshot decoding priority: {e}");
        }
    }
}

impl Decoding {
    /// Decodes `nodes` in `order` on `workers` threads; the `interior` ones
    /// (last in `order`) once the gate opens.
    fn start(
        nodes: Vec<LoadedNode>,
        order: Vec<usize>,
        interior: Arc<HashSet<usize>>,
        workers: usize,
        bytes: u64,
    ) -> Decoding {
        let nodes = Arc::new(nodes);
        let order = Arc::new(order);
        let gate = Arc::new(Gate::default());
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..workers {
            let (tx, next, nodes, order) = (tx.clone(), next.clone(), nodes.clone(), order.clone());
            let (gate, gated) = (gate.clone(), interior.clone());
            let spawned = std::thread::Builder::new()
                .name("ladle-decode".into())
                .spawn(move || {
                    let mut yielded = false;
                    loop {
                        let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = order.get(at) else { break };
                        if gated.contains(&i) {
                            if !gate.pass() {
                                break;
                            }
                            if !std::mem::replace(&mut yielded, true) {
                                yield_to_serving();
                            }
                        }
                        let t = Instant::now();
                        let decoded = decode_loaded(&nodes[i]);
                        if tx.send((i, decoded, t.elapsed())).is_err() {
                            break;
                        }
                    }
                });
            if let Err(e) = spawned {
                // Fewer threads, or none: `receive` then decodes the rest.
                tracing::warn!("cannot start a snapshot decoding thread: {e}");
            }
        }
        Decoding {
            got: vec![false; nodes.len()],
            gate,
            interior,
            failed: HashSet::new(),
            nodes,
            rx,
            done: 0,
            bytes,
            rows: 0,
            meta: None,
            states: HashMap::new(),
            rows_of: HashMap::new(),
            rejected: Vec::new(),
        }
    }

    /// Collects decoded nodes until every node `wanted` says yes to is in
    /// (and, when the threads are gone, decodes what is left here).
    fn receive(
        &mut self,
        progress: &mut dyn FnMut(&RecoveryProgress),
        wanted: impl Fn(usize) -> bool,
    ) {
        let mut missing: HashSet<usize> = (0..self.nodes.len()).filter(|&i| wanted(i)).collect();
        missing.retain(|&i| !self.got[i]);
        if missing.iter().any(|i| self.interior.contains(i)) {
            self.gate.set(GateState::Open);
        }
        while !missing.is_empty() {
            let (i, decoded, took) = match self.rx.recv() {
                Ok(m) => m,
                Err(_) => {
                    // Every worker is gone (none started, or one panicked).
                    let Some(&i) = missing.iter().next() else {
                        break;
                    };
                    let t = Instant::now();
                    (i, decode_loaded(&self.nodes[i]), t.elapsed())
                }
            };
            missing.remove(&i);
            self.take(i, decoded, took, progress);
        }
    }

    fn take(
        &mut self,
        i: usize,
        decoded: NodeResult,
        took: Duration,
        progress: &mut dyn FnMut(&RecoveryProgress),
    ) {
        let n = &self.nodes[i];
        if std::mem::replace(&mut self.got[i], true) {
            return;
        }
        self.done += 1;
        match decoded {
            None => match postcard::from_bytes::<EpochMeta>(&n.base) {
                Ok(m) => self.meta = Some(m),
                Err(e) => self.rejected.push(format!("epoch metadata: {e}")),
            },
            Some(Ok((state, rows))) => {
                let (kind, partitions) = match &state {
                    RestoredState::Reader(keys) => ("reader", keys.len()),
                    RestoredState::Aggregate(parts) => ("aggregate", parts.len()),
                };
                tracing::info!(
                    node = %n.node,
                    kind,
                    partitions,
                    rows,
                    files = 1 + n.deltas.len(),
                    bytes = n.base.len() + n.deltas.iter().map(|d| d.len()).sum::<usize>(),
                    decode_ms = format_args!("{:.1}", took.as_secs_f64() * 1e3),
                    "decoded snapshot node"
                );
                self.rows += rows;
                self.rows_of.insert(n.node.as_str().to_string(), rows);
                self.states.insert(n.node.as_str().to_string(), state);
            }
            Some(Err(e)) => {
                tracing::warn!(node = %n.node, "snapshot node unusable ({e}); it starts cold");
                self.rejected.push(format!("node {}: {e}", n.node));
                self.failed.insert(i);
            }
        }
        progress(&RecoveryProgress {
            phase: "restore",
            done: self.done,
            total: self.nodes.len() as u64,
            bytes: self.bytes,
            rows: self.rows,
        });
    }

    /// The states (and row counts) received so far, taken out.
    fn take_states(&mut self) -> (HashMap<String, RestoredState>, HashMap<String, u64>) {
        (
            std::mem::take(&mut self.states),
            std::mem::take(&mut self.rows_of),
        )
    }

    /// Stable ids of the interior nodes decoded or still to decode (not
    /// those that failed).
    fn interior_ids(&self) -> HashSet<String> {
        self.interior
            .iter()
            .filter(|i| !self.failed.contains(i))
            .map(|&i| self.nodes[i].node.as_str().to_string())
            .collect()
    }
}

impl Drop for Decoding {
    /// Gated workers stop instead of decoding what nobody will collect.
    fn drop(&mut self) {
        self.gate.set(GateState::Cancelled);
    }
}

/// Meta key: the change log was truncated below this LSN (big-endian u64).
const LOG_TRUNCATED_META: &str = "dataflow/snapshot/log-truncated-below";
/// Meta key: a random identity of the storage, recorded in every snapshot so
/// that snapshots are never restored over another database.
const STORAGE_ID_META: &str = "dataflow/snapshot/storage-id";
/// The snapshot node holding [`EpochMeta`].
const TABLES_NODE: &str = "tables";

/// What an epoch records besides node state.
#[derive(Serialize, Deserialize)]
struct EpochMeta {
    storage_id: String,
    /// (table id, schema version) of every table at S.
    tables: Vec<(TableId, u32)>,
}
const FORMAT: u8 = 3;
const KIND_READER: u8 = 0;
const KIND_AGGREGATE: u8 = 1;

/// A node file's payload (postcard): partitions saved whole, changes inside
/// partitions the previous state holds, and partitions that became holes. A
/// full file has only whole partitions.
#[derive(Serialize, Deserialize)]
struct Blob<P, X> {
    format: u8,
    kind: u8,
    /// Reader rows may be out of order (a compaction applied row deltas):
    /// they are sorted on restore.
    unsorted: bool,
    upserts: Vec<(Vec<Value>, P)>,
    patches: Vec<(Vec<Value>, X)>,
    removed: Vec<Vec<Value>>,
}

/// The same encoding, written from a capture without copying it.
#[derive(Serialize)]
struct BlobRef<'a, P, X> {
    format: u8,
    kind: u8,
    unsorted: bool,
    upserts: &'a [(Vec<Value>, Arc<P>)],
    patches: &'a [(Vec<Value>, X)],
    removed: &'a [Vec<Value>],
}

/// The state of one partition as saved, and how a patch applies to it.
trait SavedPartition: Serialize + Sized {
    type Patch: Serialize + DeserializeOwned;
    /// What the saved bytes decode into before becoming `Self`: the same
    /// encoding, in a form that is cheaper to build.
    type Saved: DeserializeOwned;
    const KIND: u8;
    fn from_saved(saved: Self::Saved) -> Self;
    fn apply(&mut self, patch: Self::Patch);
    /// Rows (reader rows or aggregate groups) held.
    fn rows(&self) -> u64;
}

/// A reader key's rows; a patch is the row deltas applied since the
/// previous epoch (only effective ones, so the result is the multiset
/// `rows + inserts - deletes`; the reader sorts on restore).
impl SavedPartition for Vec<Row> {
    type Patch = Vec<RowDelta>;
    type Saved = Vec<Row>;
    const KIND: u8 = KIND_READER;
    fn from_saved(saved: Vec<Row>) -> Vec<Row> {
        saved
    }
    fn apply(&mut self, patch: Vec<RowDelta>) {
        let mut net: HashMap<Row, i64> = HashMap::new();
        for d in patch {
            let sign = d.sign();
            let row = match d {
                RowDelta::Insert(r) | RowDelta::Delete(r) => r,
            };
            *net.entry(row).or_insert(0) += sign;
        }
        let mut remove: HashMap<&Row, i64> = net
            .iter()
            .filter(|(_, &c)| c < 0)
            .map(|(r, &c)| (r, -c))
            .collect();
        if !remove.is_empty() {
            self.retain(|r| match remove.get_mut(r) {
                Some(c) if *c > 0 => {
                    *c -= 1;
                    false
                }
                _ => true,
            });
        }
        for (r, c) in net {
            for _ in 0..c.max(0) {
                self.push(r.clone());
            }
        }
    }
    fn rows(&self) -> u64 {
        self.len() as u64
    }
}

/// An aggregate partition; a patch is the new state of changed groups.
impl SavedPartition for Partition {
    type Patch = GroupPatch;
    /// A map is encoded as its length and then its entries, exactly like a
    /// sequence of pairs. Decoded as pairs, the map is then built at its
    /// final size: serde's map visitor starts from a capped size hint and
    /// grows, rehashing every key (SipHash of normalized values) each time:
    /// a 100k-group partition decoded in 49 ms, now 31.
    type Saved = Vec<(Vec<Value>, Group)>;
    const KIND: u8 = KIND_AGGREGATE;
    fn from_saved(saved: Vec<(Vec<Value>, Group)>) -> Partition {
        let mut part = Partition::with_capacity(saved.len());
        part.extend(saved);
        part
    }
    fn apply(&mut self, patch: GroupPatch) {
        for (gk, g) in patch {
            match g {
                Some(g) => {
                    self.insert(gk, g);
                }
                None => {
                    self.remove(&gk);
                }
            }
        }
    }
    fn rows(&self) -> u64 {
        self.len() as u64
    }
}

/// What recovery restored and replayed under the lock.
struct Replayed {
    restored: usize,
    rows: u64,
    cold: usize,
    batches: u64,
    deltas: u64,
}

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

/// Maps a snapshot store error to this crate's: damage and I/O are the
/// environment's; anything else is a bug of the coordinator here.
fn snap_err(e: SnapshotError) -> DataflowError {
    match e {
        SnapshotError::Io { .. } => DataflowError::Storage(StorageError::Io(e.to_string())),
        SnapshotError::Corrupt { .. } => {
            DataflowError::Storage(StorageError::Corruption(e.to_string()))
        }
        other => DataflowError::Internal(format!("snapshot: {other}")),
    }
}

fn encode_err(e: postcard::Error) -> DataflowError {
    DataflowError::Internal(format!("encoding snapshot state: {e}"))
}

/// (table id, schema version) of every table.
fn table_versions(storage: &Storage) -> Vec<(TableId, u32)> {
    let mut out = Vec::new();
    for db in storage.databases() {
        for t in storage.tables(&db) {
            out.push((t.id, t.version));
        }
    }
    out.sort_unstable();
    out
}

/// The storage's identity, created on first use.
fn storage_id(storage: &Storage) -> Result<String> {
    if let Some((_, v)) = storage
        .list_meta(STORAGE_ID_META)?
        .into_iter()
        .find(|(k, _)| k == STORAGE_ID_META)
    {
        return Ok(String::from_utf8_lossy(&v).into_owned());
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let id = crate::graph::stable_id(&format!("{nanos}/{}/{:p}", std::process::id(), storage));
    storage.put_meta(STORAGE_ID_META, id.as_bytes())?;
    Ok(id)
}

/// The LSN below which the change log may have been truncated.
fn log_truncated_below(storage: &Storage) -> Result<Lsn> {
    Ok(storage
        .list_meta(LOG_TRUNCATED_META)?
        .into_iter()
        .find(|(k, _)| k == LOG_TRUNCATED_META)
        .and_then(|(_, v)| v.try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0))
}

/// Encodes a capture as a blob of `kind`. A reader captures its rows as the
/// persistent vector it holds ([`crate::ops::reader::Rows`]), which
/// serializes as the same sequence as the `Vec<Row>` restore decodes.
fn encode_capture<P: Serialize, X: Serialize>(kind: u8, c: &Captured<P, X>) -> Result<Vec<u8>> {
    postcard::to_stdvec(&BlobRef {
        format: FORMAT,
        kind,
        unsorted: false,
        upserts: &c.upserts,
        patches: &c.patches,
        removed: &c.removed,
    })
    .map_err(encode_err)
}

/// Rows (or groups) a capture writes, and whether it is empty.
fn capture_rows<P, X>(
    c: &Captured<P, X>,
    part_rows: impl Fn(&P) -> u64,
    patch_rows: impl Fn(&X) -> u64,
) -> u64 {
    c.upserts.iter().map(|(_, p)| part_rows(p)).sum::<u64>()
        + c.patches.iter().map(|(_, x)| patch_rows(x)).sum::<u64>()
}

/// A blob's (format, kind) header.
fn blob_kind(bytes: &[u8]) -> std::result::Result<u8, String> {
    let ((format, kind), _) = postcard::take_from_bytes::<(u8, u8)>(bytes)
        .map_err(|e| format!("undecodable node state: {e}"))?;
    if format != FORMAT {
        return Err(format!("node state format {format}, expected {FORMAT}"));
    }
    Ok(kind)
}

/// Applies `deltas` on the full `base`: the node's partitions, each with
/// whether a patch touched it (reader rows then need sorting).
fn apply_chain<P: SavedPartition>(
    base: &[u8],
    deltas: &[&[u8]],
) -> std::result::Result<Vec<(Vec<Value>, P, bool)>, String> {
    let decode = |bytes: &[u8]| -> std::result::Result<Blob<P::Saved, P::Patch>, String> {
        let b: Blob<P::Saved, P::Patch> =
            postcard::from_bytes(bytes).map_err(|e| format!("undecodable node state: {e}"))?;
        if b.format != FORMAT || b.kind != P::KIND {
            return Err("node state of another kind in the chain".into());
        }
        Ok(b)
    };
    let b = decode(base)?;
    if !b.patches.is_empty() || !b.removed.is_empty() {
        return Err("a chain's base holds changes, not whole state".into());
    }
    let unsorted = b.unsorted;
    if deltas.is_empty() {
        return Ok(b
            .upserts
            .into_iter()
            .map(|(k, p)| (k, P::from_saved(p), unsorted))
            .collect());
    }
    let mut map: HashMap<Vec<Value>, (P, bool)> = b
        .upserts
        .into_iter()
        .map(|(k, p)| (k, (P::from_saved(p), unsorted)))
        .collect();
    for d in deltas {
        let d = decode(d)?;
        for k in d.removed {
            map.remove(&k);
        }
        map.extend(
            d.upserts
                .into_iter()
                .map(|(k, p)| (k, (P::from_saved(p), false))),
        );
        for (k, patch) in d.patches {
            let e = map
                .get_mut(&k)
                .ok_or("a change to a partition the previous state lacks")?;
            e.0.apply(patch);
            e.1 = true;
        }
    }
    Ok(map.into_iter().map(|(k, (p, u))| (k, p, u)).collect())
}

/// Decodes a loaded node chain into restorable state and its row count.
fn decode_node(n: &LoadedNode) -> std::result::Result<(RestoredState, u64), String> {
    let deltas: Vec<&[u8]> = n.deltas.iter().map(|d| d.as_slice()).collect();
    match blob_kind(&n.base)? {
        KIND_READER => {
            let keys = apply_chain::<Vec<Row>>(&n.base, &deltas)?;
            let rows = keys.iter().map(|k| k.1.rows()).sum();
            Ok((RestoredState::Reader(keys), rows))
        }
        KIND_AGGREGATE => {
            let parts = apply_chain::<Partition>(&n.base, &deltas)?;
            let rows = parts.iter().map(|p| p.1.rows()).sum();
            let parts = parts.into_iter().map(|(k, p, _)| (k, p)).collect();
            Ok((RestoredState::Aggregate(parts), rows))
        }
        k => Err(format!("unknown node state kind {k}")),
    }
}

/// The compaction merge: base + deltas -> one full blob. On failure (never
/// for verified files written here) returns an empty blob, which recovery
/// rejects, so the node starts cold instead of wrong.
fn merge_blobs(base: &[u8], deltas: &[&[u8]]) -> Vec<u8> {
    fn full<P: SavedPartition>(
        base: &[u8],
        deltas: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String> {
        let parts = apply_chain::<P>(base, deltas)?;
        postcard::to_stdvec(&Blob::<P, P::Patch> {
            format: FORMAT,
            kind: P::KIND,
            unsorted: parts.iter().any(|p| p.2),
            upserts: parts.into_iter().map(|(k, p, _)| (k, p)).collect(),
            patches: vec![],
            removed: vec![],
        })
        .map_err(|e| e.to_string())
    }
    let merged = match blob_kind(base) {
        Ok(KIND_READER) => full::<Vec<Row>>(base, deltas),
        Ok(KIND_AGGREGATE) => full::<Partition>(base, deltas),
        Ok(_) if deltas.is_empty() => Ok(base.to_vec()),
        Ok(k) => Err(format!("unknown node state kind {k}")),
        Err(e) => Err(e),
    };
    merged.unwrap_or_else(|e| {
        tracing::warn!("cannot merge a snapshot chain ({e}); the node will start cold");
        Vec::new()
    })
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
            // Tables whose schema is as at S: the others' views have other
            // stable ids and start cold, so their deltas are left out.
            let current: HashSet<(TableId, u32)> =
                table_versions(&inner.storage).into_iter().collect();
            let mut batch: Vec<TableDeltas> = Vec::new();
            let mut next = snap.lsn + 1;
            let mut batches = 0u64;
            let mut deltas = 0u64;
            let mut gap = None;
            let read = inner.storage.read_log(snap.lsn, &mut |lsn, entry| {
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
                rejected_later.push(usable(&format!(
                    "the change log after it cannot be read: {e}"
                )));
                g.restore(HashMap::new());
                return Ok(None);
            }
            if gap.is_some() || next != last + 1 {
                rejected_later.push(usable("the change log after it has a gap"));
                g.restore(HashMap::new());
                return Ok(None);
            }
            let (mut restored, mut cold, deferred) = match late.as_mut() {
                Some(l) if batch.is_empty() => {
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
            if let Some(l) = late.as_mut() {
                let (late_states, late_rows) = l.take_states();
                rows_of.extend(late_rows);
                rejected_later.append(&mut l.rejected);
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

    /// Background merge of long delta chains
    /// ([`SnapshotStore::compact`] with this crate's merge function).
    pub fn compact_snapshots(&self, store: &SnapshotStore) -> Result<CompactionStats> {
        store
            .compact(COMPACT_CHAIN_LEN, merge_blobs)
            .map_err(snap_err)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
        rows.sort();
        rows
    }

    proptest! {
        /// A reader patch (the effective row deltas, in order) applied to
        /// the previous rows gives the rows the live reader has.
        #[test]
        fn reader_patch_equals_applying_the_deltas(
            base in proptest::collection::vec(0i64..6, 0..20),
            ops in proptest::collection::vec((any::<bool>(), 0i64..6), 0..40),
        ) {
            let base: Vec<Row> = base.into_iter().map(|v| vec![Value::Int(v)]).collect();
            let mut live = base.clone();
            let mut log = Vec::new();
            for (insert, v) in ops {
                let row = vec![Value::Int(v)];
                if insert {
                    live.push(row.clone());
                    log.push(RowDelta::Insert(row));
                } else if let Some(p) = live.iter().position(|r| *r == row) {
                    live.remove(p);
                    log.push(RowDelta::Delete(row));
                }
            }
            let mut restored = base;
            restored.apply(log);
            prop_assert_eq!(sorted(restored), sorted(live));
        }
    }

    #[test]
    fn merge_applies_upserts_patches_and_tombstones() {
        let key = |k: i64| vec![Value::Int(k)];
        let rows = |vs: &[i64]| -> Vec<Row> { vs.iter().map(|&v| vec![Value::Int(v)]).collect() };
        let blob = |upserts: Vec<(Vec<Value>, Vec<Row>)>,
                    patches: Vec<(Vec<Value>, Vec<RowDelta>)>,
                    removed: Vec<Vec<Value>>| {
            postcard::to_stdvec(&Blob::<Vec<Row>, Vec<RowDelta>> {
                format: FORMAT,
                kind: KIND_READER,
                unsorted: false,
                upserts,
                patches,
                removed,
            })
            .unwrap()
        };
        let base = blob(
            vec![(key(1), rows(&[1, 2])), (key(2), rows(&[5]))],
            vec![],
            vec![],
        );
        let d1 = blob(
            vec![(key(3), rows(&[7]))],
            vec![(
                key(1),
                vec![
                    RowDelta::Delete(vec![Value::Int(1)]),
                    RowDelta::Insert(vec![Value::Int(9)]),
                ],
            )],
            vec![key(2)],
        );
        let merged = merge_blobs(&base, &[&d1]);
        let map: HashMap<Vec<Value>, (Vec<Row>, bool)> = apply_chain::<Vec<Row>>(&merged, &[])
            .unwrap()
            .into_iter()
            .map(|(k, p, u)| (k, (p, u)))
            .collect();
        assert_eq!(map.len(), 2);
        // The patched key may be out of order: flagged for sorting.
        assert!(map[&key(1)].1);
        assert_eq!(sorted(map[&key(1)].0.clone()), rows(&[2, 9]));
        assert_eq!(map[&key(3)].0, rows(&[7]));
        // A patch for a partition the base lacks is refused (cold, not wrong).
        let bad = blob(vec![], vec![(key(4), vec![])], vec![]);
        assert!(apply_chain::<Vec<Row>>(&base, &[&bad]).is_err());
        assert!(merge_blobs(&base, &[&bad]).is_empty());
    }

    /// Interior nodes are decoded only once something wants them: before
    /// that they would compete with opening storage and the first reads.
    #[test]
    fn interior_nodes_wait_behind_the_gate() {
        let node = |id: &str, kind: u8| LoadedNode {
            node: NodeId::new(id).unwrap(),
            base: postcard::to_stdvec(&Blob::<Vec<Row>, Vec<RowDelta>> {
                format: FORMAT,
                kind,
                unsorted: false,
                upserts: vec![(vec![Value::Int(1)], vec![vec![Value::Int(2)]])],
                patches: vec![],
                removed: vec![],
            })
            .unwrap(),
            deltas: vec![],
        };
        let nodes = vec![
            node("reader", KIND_READER),
            node("aggregate", KIND_AGGREGATE),
        ];
        let mut d = Decoding::start(nodes, vec![0, 1], Arc::new(HashSet::from([1])), 2, 0);
        d.receive(&mut |_| {}, |i| i == 0);
        assert!(d.got[0] && d.states.contains_key("reader"));
        // Both workers are free; only the gate holds the aggregate back.
        std::thread::sleep(Duration::from_millis(100));
        assert!(d.rx.try_recv().is_err(), "decoded before the gate opened");
        d.receive(&mut |_| {}, |_| true);
        assert!(d.got[1]);
    }
}
