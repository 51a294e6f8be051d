//! Reading, verifying and decoding an epoch's node files, on up to four
//! threads, the readers first (see `Dataflow::decode_snapshot`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_storage::snapshot::LoadedNode;

use crate::graph::RestoredState;

use super::format::{decode_node, EpochMeta, TABLES_NODE};
use super::RecoveryProgress;

/// The newest usable snapshot, read, verified and decoded but not yet
/// installed ([`Dataflow::decode_snapshot`], then
/// [`Dataflow::install_snapshot`]).
pub struct DecodedSnapshot {
    /// None: no usable snapshot (a cold start).
    pub(super) found: Option<Found>,
    /// Why epochs or nodes were not used, so far.
    pub(super) rejected: Vec<String>,
    /// Reading, verifying and decoding.
    pub(super) load: Duration,
}

/// A decoded epoch.
pub(super) struct Found {
    pub(super) epoch: u64,
    pub(super) lsn: u64,
    pub(super) bytes_read: u64,
    /// None if missing or undecodable (the reason is in `rejected`).
    pub(super) meta: Option<EpochMeta>,
    /// Stable id -> state, and its rows.
    pub(super) states: HashMap<String, RestoredState>,
    pub(super) rows_of: HashMap<String, u64>,
    /// Interior nodes still being decoded when the readers were done.
    pub(super) late: Option<Decoding>,
}

/// A decoded node, or None for the epoch metadata (decoded by the receiver).
pub(super) type NodeResult = Option<std::result::Result<(RestoredState, u64), String>>;

/// Decodes a loaded node; the epoch metadata is left to the receiver.
pub(super) fn decode_loaded(n: &LoadedNode) -> NodeResult {
    (n.node.as_str() != TABLES_NODE).then(|| decode_node(n))
}

/// Snapshot nodes decoding on worker threads, collected as they finish.
///
/// Interior nodes wait behind a gate that the first `receive` wanting one
/// opens: on a warm start that is once the views can answer, so their
/// decoding (the largest aggregates take tens of milliseconds) does not
/// compete for the cores with opening storage and installing the readers,
/// which is what the first answer waits for.
pub(super) struct Decoding {
    pub(super) nodes: Arc<Vec<LoadedNode>>,
    pub(super) rx: std::sync::mpsc::Receiver<(usize, NodeResult, Duration)>,
    pub(super) gate: Arc<Gate>,
    /// Per node: received.
    pub(super) got: Vec<bool>,
    /// The interior nodes (not readers, not the epoch metadata); the
    /// workers hold them back until the gate opens.
    pub(super) interior: Arc<HashSet<usize>>,
    /// Nodes that could not be decoded.
    pub(super) failed: HashSet<usize>,
    /// Nodes received.
    pub(super) done: u64,
    pub(super) bytes: u64,
    pub(super) rows: u64,
    pub(super) meta: Option<EpochMeta>,
    pub(super) states: HashMap<String, RestoredState>,
    pub(super) rows_of: HashMap<String, u64>,
    pub(super) rejected: Vec<String>,
}

/// Whether interior nodes may be decoded yet.
#[derive(Default)]
pub(super) struct Gate {
    pub(super) state: parking_lot::Mutex<GateState>,
    pub(super) changed: parking_lot::Condvar,
}

#[derive(Clone, Copy, Default, PartialEq)]
pub(super) enum GateState {
    #[default]
    Closed,
    Open,
    /// Nobody will collect them.
    Cancelled,
}

impl Gate {
    pub(super) fn set(&self, to: GateState) {
        let mut state = self.state.lock();
        if *state == GateState::Closed {
            *state = to;
        }
        self.changed.notify_all();
    }

    /// Waits until the gate opens (true) or is cancelled (false).
    pub(super) fn pass(&self) -> bool {
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
pub(super) fn yield_to_serving() {
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
    pub(super) fn start(
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
    pub(super) fn receive(
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

    pub(super) fn take(
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
                    RestoredState::Window(parts) => ("window", parts.len()),
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
    pub(super) fn take_states(&mut self) -> (HashMap<String, RestoredState>, HashMap<String, u64>) {
        (
            std::mem::take(&mut self.states),
            std::mem::take(&mut self.rows_of),
        )
    }

    /// Stable ids of the interior nodes decoded or still to decode (not
    /// those that failed).
    pub(super) fn interior_ids(&self) -> HashSet<String> {
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
