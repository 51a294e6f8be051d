//! Delta propagation: a committed batch flows from the base nodes through
//! every node below them, in topological order.

use std::collections::BTreeMap;

use ladle_common::{RowDelta, TableDeltas, TableId};

use super::{BaseReads, Graph, NodeId};
use crate::ops::Op;
use crate::Result;

impl Graph {
    /// Propagates one committed batch, one table at a time, reading the
    /// latest storage (the caller holds the commit lock, so storage is at
    /// the batch).
    pub fn on_commit(&mut self, changes: &[TableDeltas]) -> Result<()> {
        let storage = self.storage.clone();
        self.on_commit_with(changes, &*storage)
    }

    /// Propagates `changes` (one batch, or several merged in LSN order)
    /// reading base tables from `src`, which must be the state right after
    /// them.
    pub fn on_commit_with(&mut self, changes: &[TableDeltas], src: &dyn BaseReads) -> Result<()> {
        let mut order: Vec<TableId> = Vec::new();
        self.pending.clear();
        for c in changes {
            if !order.contains(&c.table) {
                order.push(c.table);
            }
            self.pending
                .entry(c.table)
                .or_default()
                .extend(c.deltas.iter().cloned());
        }
        let mut result = Ok(());
        self.propagating = true;
        for t in order {
            let deltas = self.pending.remove(&t).unwrap_or_default();
            let bases: Vec<NodeId> = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| matches!(n.op, Op::Base { table, .. } if table == t))
                .map(|(i, _)| i)
                .collect();
            for b in bases {
                if let Err(e) = self.propagate(src, b, deltas.clone()) {
                    result = Err(e);
                }
            }
        }
        self.pending.clear();
        self.propagating = false;
        result
    }

    fn propagate(
        &mut self,
        src: &dyn BaseReads,
        start: NodeId,
        deltas: Vec<RowDelta>,
    ) -> Result<()> {
        let mut inbox: BTreeMap<NodeId, Vec<(usize, Vec<RowDelta>)>> = BTreeMap::new();
        self.emit(start, deltas, &mut inbox);
        while let Some((n, inputs)) = inbox.pop_first() {
            let out = self.process(src, n, inputs)?;
            self.emit(n, out, &mut inbox);
        }
        Ok(())
    }

    fn emit(
        &self,
        from: NodeId,
        deltas: Vec<RowDelta>,
        inbox: &mut BTreeMap<NodeId, Vec<(usize, Vec<RowDelta>)>>,
    ) {
        if deltas.is_empty() {
            return;
        }
        let children = &self.nodes[from].children;
        for (k, &c) in children.iter().enumerate() {
            // A node reading `from` twice (a self-join) is listed twice but
            // must get each input once, or it sees every delta doubled.
            if children[..k].contains(&c) {
                continue;
            }
            for (i, &p) in self.nodes[c].parents.iter().enumerate() {
                if p == from {
                    inbox.entry(c).or_default().push((i, deltas.clone()));
                }
            }
        }
    }

    fn process(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        inputs: Vec<(usize, Vec<RowDelta>)>,
    ) -> Result<Vec<RowDelta>> {
        let nparents = self.nodes[n].parents.len();
        let mut per: Vec<Vec<RowDelta>> = vec![Vec::new(); nparents.max(1)];
        for (i, d) in inputs {
            per[i].extend(d);
        }
        match &mut self.nodes[n].op {
            Op::Base { .. } | Op::Values(_) | Op::Removed => {
                Ok(per.into_iter().flatten().collect())
            }
            Op::Filter(f) => f.on_input(per.swap_remove(0)),
            Op::Project(p) => p.on_input(per.swap_remove(0)),
            Op::Union(u) => Ok(u.on_input(per)),
            Op::Aggregate(a) => Ok(a.on_input(per.swap_remove(0))),
            Op::Window(w) => Ok(w.on_input(per.swap_remove(0))),
            Op::Reader(r) => {
                r.on_input(per.swap_remove(0));
                Ok(vec![])
            }
            Op::Join(j) => {
                let j = j.clone();
                let (l, r) = (self.nodes[n].parents[0], self.nodes[n].parents[1]);
                let right = per.pop().unwrap_or_default();
                let left = per.pop().unwrap_or_default();
                let (groups, nulls) = j.group(&left, &right);
                let mut out = j.null_key_rows(&nulls);
                for g in &groups {
                    let lrows = self.pull_from(src, l, &j.left_cols, &g.key)?;
                    let rrows = self.pull_from(src, r, &j.right_cols, &g.key)?;
                    out.extend(j.diff_key(lrows, rrows, g));
                }
                Ok(out)
            }
        }
    }
}
