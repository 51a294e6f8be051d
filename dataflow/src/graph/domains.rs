//! Domains: the parts of the graph one batch can propagate through in
//! parallel.
//!
//! A domain is a connected component of the graph's stateful part: nodes
//! linked through anything but base tables and *replicable* nodes, the
//! stateless ones fed only by base tables and other replicable nodes (a
//! projection or filter of a table, a join of such). Those hold nothing, so
//! every domain can have its own copy, and views sharing only them are in
//! different domains; views sharing state (one vote count under several
//! queries) are in the same one. A domain is a single-threaded unit.
//!
//! A batch is propagated by moving each touched domain's nodes into a
//! [`Graph`] of its own (same node ids, the base tables and the replicable
//! nodes it needs copied, every other slot an empty placeholder),
//! propagating the batch through each on a worker of the pool, and moving
//! the nodes back. Every domain sees the batch's tables in the same order and
//! reads the same storage state, so the result is exactly the sequential
//! one; batches stay in LSN order (the caller propagates one merged batch at
//! a time, and the next starts when every domain is done with this one).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ladle_common::{TableDeltas, TableId};

use super::{BaseReads, Graph, Node, NodeId};
use crate::ops::Op;
use crate::{DataflowError, Result};

impl Node {
    /// An empty slot: no operator, no edges.
    fn placeholder() -> Node {
        Node {
            op: Op::Removed,
            parents: Vec::new(),
            children: Vec::new(),
            colls: Vec::new(),
            sig: String::new(),
            stable: String::new(),
            users: 0,
        }
    }
}

impl Graph {
    /// Per node: stateless and fed only by base tables and other such nodes
    /// (see the module doc). Ids are topological: parents come first.
    fn replicable(&self) -> Vec<bool> {
        let mut out = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            out[i] = matches!(
                node.op,
                Op::Filter(_) | Op::Project(_) | Op::Join(_) | Op::Union(_)
            ) && node
                .parents
                .iter()
                .all(|&p| matches!(self.nodes[p].op, Op::Base { .. }) || out[p]);
        }
        out
    }

    /// The domains, each a sorted list of node ids; base tables, replicable
    /// and removed nodes belong to none.
    pub fn domains(&self) -> Vec<Vec<NodeId>> {
        self.domains_of(&self.replicable())
    }

    /// [`Graph::domains`] given [`Graph::replicable`].
    fn domains_of(&self, replicable: &[bool]) -> Vec<Vec<NodeId>> {
        let n = self.nodes.len();
        let mut root: Vec<NodeId> = (0..n).collect();
        fn find(root: &mut [NodeId], mut x: NodeId) -> NodeId {
            while root[x] != x {
                root[x] = root[root[x]];
                x = root[x];
            }
            x
        }
        let in_domain = |i: NodeId| {
            !replicable[i] && !matches!(self.nodes[i].op, Op::Base { .. } | Op::Removed)
        };
        for (i, node) in self.nodes.iter().enumerate() {
            if !in_domain(i) {
                continue;
            }
            for &p in &node.parents {
                if in_domain(p) {
                    let (a, b) = (find(&mut root, i), find(&mut root, p));
                    root[a.max(b)] = a.min(b);
                }
            }
        }
        let mut by_root: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
        for i in 0..n {
            if in_domain(i) {
                let r = find(&mut root, i);
                by_root.entry(r).or_default().push(i);
            }
        }
        let mut out: Vec<Vec<NodeId>> = by_root.into_values().collect();
        out.sort_unstable_by_key(|d| d[0]);
        out
    }

    /// Propagates `changes` like [`Graph::on_commit_with`], the touched
    /// domains in parallel on `pool` when the batch has at least
    /// `min_deltas` row deltas (`DataflowConfig::parallel_min_deltas`).
    /// `src` is read from several threads.
    pub fn on_commit_parallel(
        &mut self,
        changes: &[TableDeltas],
        src: &dyn BaseReads,
        pool: &rayon::ThreadPool,
        min_deltas: usize,
    ) -> Result<()> {
        let workers = pool.current_num_threads();
        let rows: usize = changes.iter().map(|c| c.deltas.len()).sum();
        if workers < 2 || self.detached.is_some() || rows < min_deltas {
            return self.on_commit_with(changes, src);
        }
        let tables: Vec<TableId> = changes.iter().map(|c| c.table).collect();
        // Nodes the batch reaches (ids are topological).
        let mut reached = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            reached[i] = match node.op {
                Op::Base { table, .. } => tables.contains(&table),
                _ => node.parents.iter().any(|&p| reached[p]),
            };
        }
        let replicable = self.replicable();
        let mut touched: Vec<Vec<NodeId>> = self
            .domains_of(&replicable)
            .into_iter()
            .filter(|d| d.iter().any(|&n| reached[n]))
            .collect();
        if touched.len() < 2 {
            return self.on_commit_with(changes, src);
        }
        // One part per worker; the largest domains first, each to the part
        // with the fewest nodes so far.
        touched.sort_unstable_by_key(|d| std::cmp::Reverse(d.len()));
        let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); workers.min(touched.len())];
        for d in touched {
            if let Some(part) = members.iter_mut().min_by_key(|m| m.len()) {
                part.extend(d);
            }
        }
        for m in &mut members {
            m.sort_unstable();
        }
        let mut parts: Vec<Graph> = members
            .iter()
            .map(|m| self.split_off(m, &replicable))
            .collect();
        let mut results: Vec<Result<()>> = parts.iter().map(|_| Ok(())).collect();
        // A panic in one domain must not lose the nodes moved out: catch
        // it, put every node back, and report an error (the caller clears
        // the views' state).
        let ran = catch_unwind(AssertUnwindSafe(|| {
            pool.scope(|s| {
                for (part, result) in parts.iter_mut().zip(results.iter_mut()) {
                    s.spawn(move |_| *result = part.on_commit_with(changes, src));
                }
            })
        }));
        for (part, m) in parts.iter_mut().zip(&members) {
            self.rejoin(part, m);
        }
        match ran {
            Ok(()) => results.into_iter().collect(),
            Err(_) => Err(DataflowError::Internal(
                "propagation panicked in a domain".into(),
            )),
        }
    }

    /// Moves the nodes `members` (sorted) out into a graph of their own with
    /// the same ids; base tables and the replicable nodes feeding `members`
    /// are copied (their children cut to the part's nodes), every other slot
    /// is a placeholder.
    fn split_off(&mut self, members: &[NodeId], replicable: &[bool]) -> Graph {
        let is_member = |n: NodeId| members.binary_search(&n).is_ok();
        // Replicable nodes the part needs: those with a child in it (ids
        // are topological, so children are seen first walking down).
        let mut needed = vec![false; self.nodes.len()];
        for i in (0..self.nodes.len()).rev() {
            needed[i] = replicable[i]
                && self.nodes[i]
                    .children
                    .iter()
                    .any(|&c| is_member(c) || needed[c]);
        }
        let in_part = |c: &NodeId| is_member(*c) || needed[*c];
        let nodes = self
            .nodes
            .iter_mut()
            .enumerate()
            .map(|(i, node)| {
                if is_member(i) {
                    return std::mem::replace(node, Node::placeholder());
                }
                let copy = match &node.op {
                    Op::Base { .. } => node.op.stateless_copy(),
                    _ if needed[i] => node.op.stateless_copy(),
                    _ => None,
                };
                match copy {
                    Some(op) => Node {
                        op,
                        parents: node.parents.clone(),
                        children: node.children.iter().copied().filter(in_part).collect(),
                        colls: node.colls.clone(),
                        ..Node::placeholder()
                    },
                    None => Node::placeholder(),
                }
            })
            .collect();
        self.with_nodes(nodes, None)
    }

    /// Moves the nodes `members` back from `part` (see [`Graph::split_off`]).
    fn rejoin(&mut self, part: &mut Graph, members: &[NodeId]) {
        for &n in members {
            self.nodes[n] = std::mem::replace(&mut part.nodes[n], Node::placeholder());
        }
    }
}
