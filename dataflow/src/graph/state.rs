//! Node state as a whole: capturing and restoring it for snapshots,
//! measuring and evicting it under the memory limit.

use std::collections::{HashMap, HashSet};

use ladle_common::TableId;

use super::{CapturedState, Graph, NodeId, RestoredState};
use crate::ops::Op;

impl Graph {
    /// Captures every live stateful node's changes since the previous
    /// capture (by reference: copy-on-write partitions and `Arc` rows), with
    /// its stable id. Cheap; the caller holds the commit and graph locks, so
    /// the result is a consistent cut. Nodes for which `incremental` says no
    /// are captured whole.
    pub fn capture(&mut self, incremental: &dyn Fn(&str) -> bool) -> Vec<(String, CapturedState)> {
        let mut out = Vec::new();
        for n in &mut self.nodes {
            if !incremental(&n.stable) {
                match &mut n.op {
                    Op::Aggregate(a) => a.mark_all_dirty(),
                    Op::Window(w) => w.mark_all_dirty(),
                    Op::Reader(r) => r.shared.mark_all_dirty(),
                    _ => {}
                }
            }
            match &mut n.op {
                Op::Aggregate(a) => {
                    out.push((n.stable.clone(), CapturedState::Aggregate(a.capture())))
                }
                Op::Window(w) => out.push((n.stable.clone(), CapturedState::Window(w.capture()))),
                Op::Reader(r) => {
                    out.push((n.stable.clone(), CapturedState::Reader(r.shared.capture())))
                }
                _ => {}
            }
        }
        out
    }

    /// How many live stateful nodes (aggregates, windows and readers)
    /// there are.
    pub fn stateful_nodes(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Aggregate(_) | Op::Window(_) | Op::Reader(_)))
            .count()
    }

    /// Makes the next capture of every node full (a capture was not saved).
    pub fn mark_all_dirty(&mut self) {
        for n in &mut self.nodes {
            match &mut n.op {
                Op::Aggregate(a) => a.mark_all_dirty(),
                Op::Window(w) => w.mark_all_dirty(),
                Op::Reader(r) => r.shared.mark_all_dirty(),
                _ => {}
            }
        }
    }

    /// Clears every node's state, then restores the nodes whose stable id is
    /// in `states`, but only where every stateful ancestor is restored too (a
    /// filled key needs its ancestors' partitions filled). Returns the stable
    /// ids restored and the number of stateful nodes left cold.
    pub fn restore(&mut self, states: HashMap<String, RestoredState>) -> (Vec<String>, usize) {
        let (restored, cold, _) = self.restore_early(states, &HashSet::new());
        (restored, cold)
    }

    /// Like [`Graph::restore`], except that the stateful nodes whose stable
    /// ids are in `later` are taken as restored (for their descendants) but
    /// left empty: their state comes with [`Graph::restore_late`]. Returns
    /// the restored stable ids, the cold nodes, and the deferred ids.
    pub fn restore_early(
        &mut self,
        mut states: HashMap<String, RestoredState>,
        later: &HashSet<String>,
    ) -> (Vec<String>, usize, HashSet<String>) {
        self.clear_all();
        let mut complete = vec![true; self.nodes.len()];
        let mut restored = Vec::new();
        let mut deferred = HashSet::new();
        let mut cold = 0;
        for i in 0..self.nodes.len() {
            let parents_complete = self.nodes[i].parents.iter().all(|&p| complete[p]);
            let stable = self.nodes[i].stable.clone();
            if parents_complete && later.contains(&stable) {
                deferred.insert(stable);
                continue;
            }
            let ok = match &mut self.nodes[i].op {
                Op::Aggregate(a) => match states.remove(&stable) {
                    Some(RestoredState::Aggregate(parts)) if parents_complete => {
                        a.restore(parts);
                        true
                    }
                    _ => false,
                },
                Op::Window(w) => match states.remove(&stable) {
                    Some(RestoredState::Window(parts)) if parents_complete => {
                        w.restore(parts);
                        true
                    }
                    _ => false,
                },
                Op::Reader(r) => match states.remove(&stable) {
                    Some(RestoredState::Reader(entries)) if parents_complete => {
                        r.shared.restore(entries);
                        true
                    }
                    _ => false,
                },
                Op::Removed => continue,
                _ => parents_complete,
            };
            let stateful = matches!(
                self.nodes[i].op,
                Op::Aggregate(_) | Op::Window(_) | Op::Reader(_)
            );
            if stateful {
                if ok {
                    restored.push(stable);
                } else {
                    cold += 1;
                }
            }
            complete[i] = ok;
        }
        (restored, cold, deferred)
    }

    /// Installs the state [`Graph::restore_early`] deferred (`deferred`).
    /// If any of it is missing, nodes restored early may depend on it, so
    /// every node starts cold instead: None.
    pub fn restore_late(
        &mut self,
        mut states: HashMap<String, RestoredState>,
        deferred: &HashSet<String>,
    ) -> Option<Vec<String>> {
        let mut restored = Vec::new();
        for node in &mut self.nodes {
            if !deferred.contains(&node.stable) {
                continue;
            }
            match (&mut node.op, states.remove(&node.stable)) {
                (Op::Aggregate(a), Some(RestoredState::Aggregate(parts))) => a.restore(parts),
                (Op::Window(w), Some(RestoredState::Window(parts))) => w.restore(parts),
                (Op::Reader(r), Some(RestoredState::Reader(entries))) => r.shared.restore(entries),
                _ => {
                    self.clear_all();
                    return None;
                }
            }
            restored.push(node.stable.clone());
        }
        Some(restored)
    }

    // -------------------------------------------------------------- memory

    pub fn state_bytes(&self) -> usize {
        self.nodes.iter().map(|n| n.op.state_bytes()).sum()
    }

    /// Evicts reader keys (least recently used first), then interior state
    /// (with everything downstream of it), until under `limit`.
    pub fn evict(&mut self, limit: usize) {
        let mut total = self.state_bytes();
        if total <= limit {
            return;
        }
        let target = limit - limit / 10;
        // Readers, oldest first.
        let mut readers: Vec<(u64, NodeId)> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match &n.op {
                Op::Reader(r) => r.shared.oldest().map(|o| (o, i)),
                _ => None,
            })
            .collect();
        readers.sort();
        for (_, i) in readers {
            if total <= target {
                return;
            }
            if let Op::Reader(r) = &self.nodes[i].op {
                let freed = r.shared.evict(total - target);
                total = total.saturating_sub(freed);
            }
        }
        // Interior state: clear the largest aggregates (or windows) and
        // their dependents.
        while total > target {
            let Some((n, b)) = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| matches!(n.op, Op::Aggregate(_) | Op::Window(_)))
                .map(|(i, n)| (i, n.op.state_bytes()))
                .max_by_key(|x| x.1)
            else {
                return;
            };
            if b == 0 {
                return;
            }
            self.clear_downstream(n);
            self.interior_evictions += 1;
            total = self.state_bytes();
        }
    }

    /// Drops all state (every key becomes a hole).
    pub fn clear_all(&mut self) {
        for n in &mut self.nodes {
            match &mut n.op {
                Op::Aggregate(a) => a.clear(),
                Op::Window(w) => w.clear(),
                Op::Reader(r) => r.shared.clear(),
                _ => {}
            }
        }
    }

    fn clear_downstream(&mut self, n: NodeId) {
        let mut stack = vec![n];
        let mut seen = Vec::new();
        while let Some(x) = stack.pop() {
            if seen.contains(&x) {
                continue;
            }
            seen.push(x);
            match &mut self.nodes[x].op {
                Op::Aggregate(a) => a.clear(),
                Op::Window(w) => w.clear(),
                Op::Reader(r) => r.shared.clear(),
                _ => {}
            }
            stack.extend(self.nodes[x].children.iter().copied());
        }
    }

    pub fn forget_schema(&mut self, t: TableId) {
        self.schemas.remove(&t);
    }

    pub fn node_state(&self, n: NodeId) -> (usize, usize) {
        match &self.nodes[n].op {
            Op::Aggregate(a) => (a.filled_keys(), a.state_bytes()),
            Op::Window(w) => (w.filled_keys(), w.state_bytes()),
            _ => (0, 0),
        }
    }
}
