//! Installing a view's plan into the graph (sharing nodes with the views
//! already installed), removing it, and describing it (EXPLAIN).

use std::sync::Arc;

use ladle_common::Collation;

use super::{choose_index, split_cols, stable_id, Graph, Node, NodeId};
use crate::expr::{Expr, NumKind};
use crate::ops::{
    self, Aggregate, Filter, Join, JoinKind, Op, Project, Reader, ReaderState, Union, Window,
};
use crate::plan::{LNode, LOp};
use crate::Result;

impl Graph {
    /// Lowers `plan` under a new reader keyed by `key` with `order`; returns
    /// the reader node and its shared state. `view` (the view's signature)
    /// goes into the reader's stable id.
    pub fn install(
        &mut self,
        plan: &LNode,
        key: Vec<usize>,
        order: ops::reader::OrderSpec,
        read_filter: Option<&Expr>,
        view: &str,
    ) -> Result<(NodeId, Arc<ReaderState>)> {
        self.version += 1;
        // Lower into a temporary list first, decide each stateful node's
        // state key from how it will be looked up, then intern bottom-up.
        let mut tmp: Vec<Tmp> = Vec::new();
        let top = lower(plan, &mut tmp);
        let mut requests: Vec<Vec<Vec<usize>>> = vec![Vec::new(); tmp.len()];
        requests[top].push(key.clone());
        for i in (0..tmp.len()).rev() {
            let reqs = std::mem::take(&mut requests[i]);
            let mut lookups: Vec<usize> = reqs.iter().flatten().copied().collect();
            lookups.sort_unstable();
            lookups.dedup();
            tmp[i].lookups = lookups;
            let state_key = decide_key(&tmp[i], &reqs);
            tmp[i].state_key = state_key.clone();
            tmp[i].drives = join_drives(&tmp, i, &reqs);
            for (p, cols) in route_requests(&tmp[i], &reqs, &state_key) {
                let parent = tmp[i].parents[p];
                if !requests[parent].contains(&cols) {
                    requests[parent].push(cols);
                }
            }
        }
        // Nor may a mark move a row in the reader's order (a range read
        // narrows by its first column) or hide it from the read-time
        // filter.
        let mut unmarked: Vec<usize> = order.iter().map(|o| o.0).collect();
        unmarked.extend(read_filter.map(Expr::columns).unwrap_or_default());
        keep_unmarked(&mut tmp, top, unmarked);
        name_unmarked_columns(&mut tmp);
        let mut ids: Vec<NodeId> = Vec::with_capacity(tmp.len());
        for t in &tmp {
            let parents: Vec<NodeId> = t.parents.iter().map(|&p| ids[p]).collect();
            let sig = format!("{}|key={:?}|parents={:?}", t.sig, t.state_key, parents);
            let parent_stables: Vec<&str> = parents
                .iter()
                .map(|&p| self.nodes[p].stable.as_str())
                .collect();
            let stable = stable_id(&format!(
                "{}|key={:?}|parents={:?}",
                t.sig, t.state_key, parent_stables
            ));
            if let Some(&id) = self.by_sig.get(&sig) {
                self.nodes[id].users += 1;
                if let Op::Join(j) = &mut self.nodes[id].op {
                    for d in &t.drives {
                        if !j.drives.iter().any(|x| x.0 == d.0) {
                            j.drives.push(d.clone());
                        }
                    }
                }
                ids.push(id);
                continue;
            }
            let op = self.new_op(t, &parents)?;
            let id = self.nodes.len();
            for &p in &parents {
                self.nodes[p].children.push(id);
            }
            self.nodes.push(Node {
                op,
                parents,
                children: vec![],
                colls: t.colls.clone(),
                sig: sig.clone(),
                stable,
                users: 1,
            });
            self.by_sig.insert(sig, id);
            ids.push(id);
        }
        let parent = ids[top];
        let colls = self.nodes[parent].colls.clone();
        let key_colls = key
            .iter()
            .map(|&k| colls.get(k).copied().unwrap_or_default())
            .collect();
        let stable = stable_id(&format!(
            "reader|view={view}|key={key:?}|order={order:?}|parent={}",
            self.nodes[parent].stable
        ));
        let shared = Arc::new(ReaderState::new(key_colls, order));
        let id = self.nodes.len();
        self.nodes[parent].children.push(id);
        self.nodes.push(Node {
            op: Op::Reader(Reader {
                key,
                shared: shared.clone(),
            }),
            parents: vec![parent],
            children: vec![],
            colls,
            sig: format!("reader{id}"),
            stable,
            users: 1,
        });
        Ok((id, shared))
    }

    /// The operator (with empty state) of plan node `t` over `parents`.
    fn new_op(&mut self, t: &Tmp, parents: &[NodeId]) -> Result<Op> {
        Ok(match &t.op {
            LOp::Base(s) => {
                self.schemas.insert(s.id, s.clone());
                Op::Base {
                    table: s.id,
                    name: s.name.clone(),
                }
            }
            LOp::Filter(e) => Op::Filter(
                Filter::new(e.clone(), &t.input_kinds, &t.input_markers).with_lookups(&t.lookups),
            ),
            LOp::Project(es) => Op::Project(Project::new(es.clone()).with_lookups(&t.lookups)),
            LOp::Join {
                kind,
                left_cols,
                right_cols,
            } => {
                let lc = &self.nodes[parents[0]].colls;
                Op::Join(
                    Join {
                        kind: *kind,
                        left_cols: left_cols.clone(),
                        right_cols: right_cols.clone(),
                        colls: left_cols
                            .iter()
                            .map(|&c| lc.get(c).copied().unwrap_or_default())
                            .collect(),
                        right_width: self.nodes[parents[1]].colls.len(),
                        drives: t.drives.clone(),
                        carrier: None,
                        right_marks: false,
                    }
                    .with_lookups(&t.lookups, lc.len(), t.right_marks),
                )
            }
            LOp::Aggregate {
                ngroup,
                aggs,
                scalar,
            } => {
                let mut a = Aggregate::new(*ngroup, aggs.clone(), t.colls.clone(), *scalar);
                a.key = t.state_key.clone();
                Op::Aggregate(a)
            }
            LOp::Window {
                partition,
                order,
                funcs,
                offset,
                limit,
                frame,
            } => {
                let mut w = Window::try_new(
                    partition.clone(),
                    order.clone(),
                    funcs.clone(),
                    *offset,
                    *limit,
                    self.nodes[parents[0]].colls.clone(),
                )?;
                w.key = t.state_key.clone();
                w.frame = frame.clone();
                Op::Window(Box::new(w))
            }
            LOp::Values(rows) => Op::Values(rows.clone()),
            LOp::Union => Op::Union(Union {
                inputs: parents.len(),
            }),
        })
    }

    /// Removes a reader and every node no other view uses.
    pub fn uninstall(&mut self, reader: NodeId) {
        self.version += 1;
        let mut stack = vec![reader];
        while let Some(n) = stack.pop() {
            let node = &mut self.nodes[n];
            node.users = node.users.saturating_sub(1);
            let parents = node.parents.clone();
            if node.users == 0 {
                if let Op::Reader(r) = &node.op {
                    r.shared.clear();
                }
                node.op = Op::Removed;
                self.by_sig.remove(&node.sig.clone());
                for &p in &parents {
                    self.nodes[p].children.retain(|&c| c != n);
                }
            }
            stack.extend(parents);
        }
    }

    /// Describes the view `plan` would become without keeping it: installs
    /// it (sharing existing nodes), describes it, and takes it out again,
    /// dropping the nodes it added. The caller holds the graph lock
    /// throughout, so no delta or pull ever sees them.
    pub fn describe_uninstalled(
        &mut self,
        plan: &LNode,
        key: Vec<usize>,
        order: ops::reader::OrderSpec,
        read_filter: Option<&Expr>,
    ) -> Result<String> {
        let (len, version) = (self.nodes.len(), self.version);
        let (reader, _) = self.install(plan, key, order, read_filter, "explain")?;
        let text = self.describe(reader);
        self.uninstall(reader);
        // Every node the install added is unused again (removed by
        // uninstall), so the graph is as it was.
        if self.nodes[len..]
            .iter()
            .all(|n| matches!(n.op, Op::Removed))
        {
            self.nodes.truncate(len);
            self.version = version;
        }
        Ok(text)
    }

    pub fn describe(&self, reader: NodeId) -> String {
        let mut ids = Vec::new();
        let mut stack = vec![reader];
        while let Some(n) = stack.pop() {
            if !ids.contains(&n) {
                ids.push(n);
                stack.extend(self.nodes[n].parents.iter().copied());
            }
        }
        ids.sort();
        let mut out = String::new();
        for n in ids {
            let node = &self.nodes[n];
            out.push_str(&format!("n{n}: {}", node.op.describe()));
            let (keys, bytes) = self.node_state(n);
            if bytes > 0 {
                out.push_str(&format!(" [{keys} filled partitions, {bytes} bytes]"));
            }
            if !node.parents.is_empty() {
                let ps: Vec<String> = node.parents.iter().map(|p| format!("n{p}")).collect();
                out.push_str(&format!(" <- {}", ps.join(", ")));
            }
            out.push('\n');
        }
        out
    }
}

/// A node of a plan being installed.
struct Tmp {
    op: LOp,
    parents: Vec<usize>,
    colls: Vec<Collation>,
    sig: String,
    state_key: Vec<usize>,
    /// Width of each parent.
    parent_widths: Vec<usize>,
    /// Join pull directions (see [`Join::drives`]).
    drives: Vec<(Vec<usize>, bool)>,
    /// The columns this node is looked up by (every request it receives),
    /// and those no mark may replace (`keep_unmarked`).
    lookups: Vec<usize>,
    /// A filter's: the kinds of number its input's columns hold, which
    /// decide whether it may mark rows (`Filter::may_mark`).
    input_kinds: Vec<NumKind>,
    /// A filter's: which input columns may hold overflow markers, which
    /// it may mark rows for too (`LNode::marker_columns`).
    input_markers: Vec<bool>,
    /// A semi- or anti-join's: whether a filter below its right input may
    /// mark rows, which it then carries (`Join::with_lookups`).
    right_marks: bool,
}

/// Adds columns `cols` of node `top`, and those they come from below it,
/// to the columns each node is looked up by (`Tmp::lookups`), which no
/// mark may replace (see `name_unmarked_columns`).
fn keep_unmarked(tmp: &mut [Tmp], top: usize, cols: Vec<usize>) {
    let mut keep: Vec<Vec<usize>> = vec![vec![]; tmp.len()];
    keep[top] = cols;
    for i in (0..tmp.len()).rev() {
        let cols = std::mem::take(&mut keep[i]);
        let t = &mut tmp[i];
        for &c in &cols {
            if !t.lookups.contains(&c) {
                t.lookups.push(c);
            }
        }
        t.lookups.sort_unstable();
        let lw = t.parent_widths.first().copied().unwrap_or(0);
        let from: Vec<(usize, usize)> = match &t.op {
            LOp::Filter(_) | LOp::Window { .. } => cols.iter().map(|&c| (0, c)).collect(),
            LOp::Project(es) => cols
                .iter()
                .flat_map(|&c| es.get(c).map(Expr::columns).unwrap_or_default())
                .map(|c| (0, c))
                .collect(),
            LOp::Aggregate { ngroup, .. } => cols
                .iter()
                .filter(|&&c| c < *ngroup)
                .map(|&c| (0, c))
                .collect(),
            LOp::Union => (0..t.parents.len())
                .flat_map(|p| cols.iter().map(move |&c| (p, c)))
                .collect(),
            LOp::Join { .. } => cols
                .iter()
                .map(|&c| if c < lw { (0, c) } else { (1, c - lw) })
                .collect(),
            LOp::Base(_) | LOp::Values(_) => vec![],
        };
        for (p, c) in from {
            let (Some(&parent), Some(&width)) = (t.parents.get(p), t.parent_widths.get(p)) else {
                continue;
            };
            if c < width && !keep[parent].contains(&c) {
                keep[parent].push(c);
            }
        }
    }
}

/// Rows whose WHERE overflowed leave a filter marked, in columns other than
/// those it is looked up by, and projections carry the mark in such a
/// column too (see `Filter::pass`, `Project::apply`), as does a semi- or
/// anti-join a right row's (`Join::join_rows`): below and above such a
/// filter, those columns are part of what a filter, projection or such a
/// join is, so only nodes that mark alike are shared.
fn name_unmarked_columns(tmp: &mut [Tmp]) {
    let mut marks = vec![false; tmp.len()];
    for i in 0..tmp.len() {
        let t = &tmp[i];
        let here = matches!(&t.op, LOp::Filter(e) if Filter::may_mark(e, &t.input_kinds, &t.input_markers));
        marks[i] = here || t.parents.iter().any(|&p| marks[p]);
        // A semi- or anti-join outputs none of its right input's columns:
        // it carries a right row's mark in a left column.
        let semi = matches!(
            t.op,
            LOp::Join {
                kind: JoinKind::Semi | JoinKind::Anti,
                ..
            }
        );
        let right_marks = semi && t.parents.get(1).is_some_and(|&p| marks[p]);
        if right_marks || marks[i] && matches!(t.op, LOp::Filter(_) | LOp::Project(_)) {
            let unmarked = format!("|unmarked={:?}", t.lookups);
            tmp[i].sig.push_str(&unmarked);
        }
        tmp[i].right_marks = right_marks;
    }
}

fn lower(n: &LNode, tmp: &mut Vec<Tmp>) -> usize {
    let parents: Vec<usize> = n.inputs.iter().map(|i| lower(i, tmp)).collect();
    let parent_widths = n.inputs.iter().map(|i| i.width()).collect();
    let (input_kinds, input_markers) = match (&n.op, &n.inputs[..]) {
        (LOp::Filter(_), [input]) => input.kinds_and_markers(),
        _ => (vec![], vec![]),
    };
    let sig = match &n.op {
        LOp::Base(s) => format!("base:{}:v{}", s.id, s.version),
        other => format!("{other:?}"),
    };
    tmp.push(Tmp {
        op: n.op.clone(),
        parents,
        colls: n.colls.clone(),
        sig,
        state_key: vec![],
        parent_widths,
        drives: vec![],
        lookups: vec![],
        input_kinds,
        input_markers,
        right_marks: false,
    });
    tmp.len() - 1
}

/// The state key of a stateful node, from the lookups it will receive.
fn decide_key(t: &Tmp, reqs: &[Vec<usize>]) -> Vec<usize> {
    match &t.op {
        LOp::Aggregate { ngroup, .. } => {
            if reqs.len() == 1 && !reqs[0].is_empty() && reqs[0].iter().all(|c| c < ngroup) {
                reqs[0].clone()
            } else {
                vec![]
            }
        }
        LOp::Window { partition, .. } => {
            let within = |r: &&Vec<usize>| !r.is_empty() && r.iter().all(|c| partition.contains(c));
            match reqs.iter().find(within) {
                Some(r) if reqs.len() == 1 || is_top_k(&t.op) => r.clone(),
                _ => vec![],
            }
        }
        _ => vec![],
    }
}

/// A window that only passes each partition's first rows (no window
/// functions): a top-k. Looked up by columns other than its partition's,
/// it still keeps state per partition (see `Graph::pull_top_k_by`).
fn is_top_k(op: &LOp) -> bool {
    matches!(op, LOp::Window { funcs, limit: Some(_), .. } if funcs.is_empty())
}

/// The lookups a node makes on its parents, given its own lookups.
fn route_requests(t: &Tmp, reqs: &[Vec<usize>], state_key: &[usize]) -> Vec<(usize, Vec<usize>)> {
    let mut out = Vec::new();
    match &t.op {
        LOp::Base(_) | LOp::Values(_) => {}
        LOp::Filter(_) => out.extend(reqs.iter().map(|r| (0, r.clone()))),
        LOp::Project(es) => {
            for r in reqs {
                let m: Option<Vec<usize>> = r
                    .iter()
                    .map(|&c| match es.get(c) {
                        Some(crate::expr::Expr::Column(i)) => Some(*i),
                        _ => None,
                    })
                    .collect();
                out.push((0, m.unwrap_or_default()));
            }
        }
        LOp::Union => {
            for r in reqs {
                for p in 0..t.parents.len() {
                    out.push((p, r.clone()));
                }
            }
        }
        LOp::Aggregate { .. } | LOp::Window { .. } => {
            out.push((0, state_key.to_vec()));
            // A top-k looked up by other columns pulls its input by them
            // first (see `Graph::pull_top_k_by`).
            if is_top_k(&t.op) && !state_key.is_empty() {
                let determines = |r: &Vec<usize>| {
                    r.len() == state_key.len() && state_key.iter().all(|k| r.contains(k))
                };
                out.extend(
                    reqs.iter()
                        .filter(|r| !determines(r))
                        .map(|r| (0, r.clone())),
                );
            }
        }
        LOp::Join {
            kind,
            left_cols,
            right_cols,
        } => {
            let lw = t.parent_widths[0];
            // Delta processing looks up both sides by the join columns.
            out.push((0, left_cols.clone()));
            out.push((1, right_cols.clone()));
            let outer = matches!(kind, JoinKind::Inner | JoinKind::Left);
            for r in reqs {
                let (lp, rp) = split_cols(r, lw);
                let lc: Vec<usize> = lp.iter().map(|&i| r[i]).collect();
                let rc: Vec<usize> = rp.iter().map(|&i| r[i] - lw).collect();
                if rc.is_empty() {
                    out.push((0, lc));
                } else if lc.is_empty() && outer {
                    out.push((1, rc));
                } else {
                    match t.drives.iter().find(|d| &d.0 == r).map(|d| d.1) {
                        Some(true) if outer => out.push((1, rc)),
                        Some(false) => out.push((0, lc)),
                        _ => out.push((0, vec![])),
                    }
                }
            }
        }
    }
    out
}

/// For each lookup of join `i` by key columns from both inputs: whether to
/// start from the right input (its key columns reach an index and the
/// left's do not) or from the left.
fn join_drives(tmp: &[Tmp], i: usize, reqs: &[Vec<usize>]) -> Vec<(Vec<usize>, bool)> {
    let t = &tmp[i];
    let LOp::Join { kind, .. } = &t.op else {
        return vec![];
    };
    if !matches!(kind, JoinKind::Inner | JoinKind::Left) {
        return vec![];
    }
    let lw = t.parent_widths[0];
    let mut out = Vec::new();
    for r in reqs {
        let (lp, rp) = split_cols(r, lw);
        if lp.is_empty() || rp.is_empty() {
            continue;
        }
        let lc: Vec<usize> = lp.iter().map(|&k| r[k]).collect();
        let rc: Vec<usize> = rp.iter().map(|&k| r[k] - lw).collect();
        let from_right = selective(tmp, t.parents[1], &rc) && !selective(tmp, t.parents[0], &lc);
        out.push((r.clone(), from_right));
    }
    out
}

/// Whether a lookup of plan node `i` by `cols` reaches storage through an
/// index (reads few rows) rather than scanning a table.
fn selective(tmp: &[Tmp], i: usize, cols: &[usize]) -> bool {
    if cols.is_empty() {
        return false;
    }
    let t = &tmp[i];
    match &t.op {
        LOp::Base(s) => choose_index(s, cols).is_some(),
        LOp::Filter(_) => selective(tmp, t.parents[0], cols),
        LOp::Project(es) => cols
            .iter()
            .map(|&c| match es.get(c) {
                Some(crate::expr::Expr::Column(x)) => Some(*x),
                _ => None,
            })
            .collect::<Option<Vec<usize>>>()
            .is_some_and(|m| selective(tmp, t.parents[0], &m)),
        LOp::Union => t.parents.iter().all(|&p| selective(tmp, p, cols)),
        LOp::Join { kind, .. } => {
            let lw = t.parent_widths[0];
            let (lp, rp) = split_cols(cols, lw);
            let lc: Vec<usize> = lp.iter().map(|&k| cols[k]).collect();
            let rc: Vec<usize> = rp.iter().map(|&k| cols[k] - lw).collect();
            selective(tmp, t.parents[0], &lc)
                || (matches!(kind, JoinKind::Inner | JoinKind::Left)
                    && selective(tmp, t.parents[1], &rc))
        }
        LOp::Aggregate { ngroup, .. } => {
            cols.iter().all(|c| c < ngroup) && selective(tmp, t.parents[0], cols)
        }
        LOp::Window { partition, .. } => {
            cols.iter().all(|c| partition.contains(c)) && selective(tmp, t.parents[0], cols)
        }
        LOp::Values(_) => false,
    }
}
