//! The dataflow graph: nodes in topological order (ids ascending), delta
//! propagation, upqueries (pulls) that fill holes, and eviction.
//!
//! Locking: the engine holds the graph lock around every method here.
//! Propagation reads base tables as they are right after the batch being
//! propagated ([`BaseReads`]: a storage snapshot from the propagation
//! worker, or the latest storage under the commit lock), minus the batch's
//! deltas for tables not yet propagated (`pending`). Pulls outside
//! propagation read the latest storage under the commit lock, after the
//! backlog is settled, so storage equals what the graph has processed. The
//! exception: a detached copy ([`Graph::detach`]) is pulled without locks;
//! the engine installs what it computed only if storage did not change
//! meanwhile. A batch is propagated through independent domains in
//! parallel (`domains.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ladle_common::{Collation, Row, RowDelta, TableDeltas, TableId, TableSchema, Value};
use ladle_storage::{IndexRef, SnapshotReads, Storage, StorageError};
use parking_lot::Mutex;

use crate::ops::JoinKind;
use crate::ops::{
    self, key_matches, project_cols, Aggregate, Filter, Join, Op, Project, Reader, ReaderState,
    Union,
};
use crate::plan::{LNode, LOp};
use crate::{DataflowError, Result};

mod domains;

pub(crate) type NodeId = usize;

/// Where pulls read base tables: the latest committed state ([`Storage`]),
/// or one consistent state while an asynchronous batch is propagated
/// ([`SnapshotReads`], the state right after the batch).
pub(crate) trait BaseReads: Sync {
    fn lookup(
        &self,
        table: TableId,
        index: IndexRef,
        key: &[Value],
    ) -> Result<Vec<Row>, StorageError>;
    fn scan(&self, table: TableId) -> Result<Vec<Row>, StorageError>;
}

/// Each source's own `lookup` and `scan` serve as its base reads.
macro_rules! base_reads_by_inherent_methods {
    ($($source:ty),* $(,)?) => {$(
        impl BaseReads for $source {
            fn lookup(
                &self,
                table: TableId,
                index: IndexRef,
                key: &[Value],
            ) -> Result<Vec<Row>, StorageError> {
                <$source>::lookup(self, table, index, key)
            }
            fn scan(&self, table: TableId) -> Result<Vec<Row>, StorageError> {
                <$source>::scan(self, table)
            }
        }
    )*};
}

base_reads_by_inherent_methods!(Storage, ladle_storage::ReadView, SnapshotReads<'_>);

pub(crate) struct Node {
    pub op: Op,
    pub parents: Vec<NodeId>,
    pub children: Vec<NodeId>,
    /// Output column collations.
    pub colls: Vec<Collation>,
    /// Sharing signature.
    pub sig: String,
    /// Identity that survives restarts (a hash of the node's structure, its
    /// state key, its ancestors' stable ids, and the id and schema version
    /// of every base table below it): the node's id in snapshots.
    pub stable: String,
    /// Views using the node.
    pub users: usize,
}

pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    by_sig: HashMap<String, NodeId>,
    storage: Arc<Storage>,
    schemas: HashMap<TableId, Arc<TableSchema>>,
    /// Deltas of the current batch not yet propagated, per table.
    pending: HashMap<TableId, Vec<RowDelta>>,
    /// Bumped by every install and uninstall (recorded in snapshots).
    pub version: u64,
    /// Set in a detached copy (see [`Graph::detach`]).
    detached: Option<Detached>,
    /// Interior nodes whose state [`Graph::evict`] cleared, since start.
    pub interior_evictions: u64,
}

/// What a detached copy of a view's ancestors knows about the real graph.
struct Detached {
    /// Real node id of each copied node (copies are renumbered densely).
    real: Vec<NodeId>,
    /// Aggregate partitions the pulls filled: (real node, partition key,
    /// input rows), to install in the real graph with [`Graph::install_fills`].
    fills: Vec<(NodeId, Vec<Value>, Vec<Row>)>,
    /// The real graph: aggregate partitions filled there are read from it
    /// (under its lock, briefly) instead of recomputed from storage.
    real_graph: Option<Arc<Mutex<Graph>>>,
    /// Partitions of the real graph the pulls read: the filled reader key
    /// depends on them, so they must still be filled when it is installed.
    read: Vec<(NodeId, Vec<Value>)>,
}

/// A stateful node's captured state (see [`Graph::capture`]).
pub(crate) enum CapturedState {
    Reader(ops::Captured<ops::reader::Rows, Vec<RowDelta>>),
    Aggregate(ops::Captured<ops::aggregate::Partition, ops::aggregate::GroupPatch>),
}

/// A stateful node's state as restored from a snapshot.
pub(crate) enum RestoredState {
    /// Normalized key -> rows, and whether they need sorting.
    Reader(Vec<(Vec<Value>, Vec<Row>, bool)>),
    /// Partition key -> partition.
    Aggregate(Vec<(Vec<Value>, ops::aggregate::Partition)>),
}

/// The stable id of a node with structural signature `text`.
pub(crate) fn stable_id(text: &str) -> String {
    use sha1::{Digest, Sha1};
    let digest = Sha1::digest(text.as_bytes());
    // 128 bits are plenty to tell nodes apart.
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

impl Graph {
    pub fn new(storage: Arc<Storage>) -> Graph {
        Graph {
            nodes: Vec::new(),
            by_sig: HashMap::new(),
            storage,
            schemas: HashMap::new(),
            pending: HashMap::new(),
            version: 0,
            detached: None,
            interior_evictions: 0,
        }
    }

    // ------------------------------------------------------- detached pulls

    /// Whether `n` or an ancestor computes values (a projection with an
    /// expression), whose overflow markers a read must look for.
    pub fn computes_values(&self, n: NodeId) -> bool {
        let mut stack = vec![n];
        let mut seen = HashSet::new();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            if matches!(&self.nodes[n].op, Op::Project(p) if p.computes()) {
                return true;
            }
            stack.extend(self.nodes[n].parents.iter().copied());
        }
        false
    }

    /// A copy of `root` and its ancestors without state (aggregates are all
    /// holes), renumbered so `root` is the last node, for upqueries that run
    /// without the graph and commit locks (engine.rs: `Inner::fill`). `None`
    /// when that would be unsound or slow: a reader or removed node on the
    /// way, or an aggregate partitioned by nothing (recomputing it would scan
    /// its whole input on every miss). Pulls on the copy read the aggregate
    /// partitions `real_graph` (this graph, behind its lock) has filled.
    pub fn detach(&self, root: NodeId, real_graph: Arc<Mutex<Graph>>) -> Option<Graph> {
        self.detach_with(root, false, Some(real_graph))
    }

    /// Like [`Graph::detach`]; with `allow_scans`, aggregates partitioned by
    /// nothing are copied too (a pull then recomputes them from their whole
    /// input: acceptable for one-off reads such as transaction overlays).
    /// Without `real_graph` every aggregate is recomputed from its input
    /// (needed when the copy's base reads differ from storage: overlays).
    pub fn detach_with(
        &self,
        root: NodeId,
        allow_scans: bool,
        real_graph: Option<Arc<Mutex<Graph>>>,
    ) -> Option<Graph> {
        let mut ids = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if !ids.contains(&n) {
                ids.push(n);
                stack.extend(self.nodes[n].parents.iter().copied());
            }
        }
        ids.sort_unstable();
        let mut nodes = Vec::with_capacity(ids.len());
        for &n in &ids {
            let node = &self.nodes[n];
            if !allow_scans && matches!(&node.op, Op::Aggregate(a) if a.key.is_empty()) {
                return None;
            }
            let parents = node
                .parents
                .iter()
                .map(|p| ids.binary_search(p).ok())
                .collect::<Option<Vec<NodeId>>>()?;
            nodes.push(Node {
                op: node.op.stateless_copy()?,
                parents,
                children: vec![],
                colls: node.colls.clone(),
                sig: String::new(),
                stable: String::new(),
                users: 1,
            });
        }
        // Only the copied base tables' schemas: the copy is cloned per miss.
        let schemas = nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Base { table, .. } => self.schemas.get(table).map(|s| (*table, s.clone())),
                _ => None,
            })
            .collect();
        Some(Graph {
            nodes,
            by_sig: HashMap::new(),
            storage: self.storage.clone(),
            schemas,
            pending: HashMap::new(),
            version: 0,
            detached: Some(Detached {
                real: ids,
                fills: Vec::new(),
                real_graph,
                read: Vec::new(),
            }),
            interior_evictions: 0,
        })
    }

    /// A fresh copy of a detached graph (its aggregates hold no state).
    pub fn copy_detached(&self) -> Graph {
        let nodes = self
            .nodes
            .iter()
            .map(|n| Node {
                op: n.op.stateless_copy().unwrap_or(Op::Removed),
                parents: n.parents.clone(),
                children: vec![],
                colls: n.colls.clone(),
                sig: String::new(),
                stable: String::new(),
                users: 1,
            })
            .collect();
        self.with_nodes(
            nodes,
            self.detached.as_ref().map(|d| Detached {
                real: d.real.clone(),
                fills: Vec::new(),
                real_graph: d.real_graph.clone(),
                read: Vec::new(),
            }),
        )
    }

    /// A graph over `nodes` (numbered like this one's, or a detached copy's)
    /// with this graph's storage and schemas, no sharing index and nothing
    /// pending.
    fn with_nodes(&self, nodes: Vec<Node>, detached: Option<Detached>) -> Graph {
        Graph {
            nodes,
            by_sig: HashMap::new(),
            storage: self.storage.clone(),
            schemas: self.schemas.clone(),
            pending: HashMap::new(),
            version: 0,
            detached,
            interior_evictions: 0,
        }
    }

    /// Makes pulls on this detached copy read base tables as if `overlay`
    /// (row deltas, in order) were applied on top of storage: `base_rows`
    /// undoes `pending`, so the overlay goes in inverted and reversed.
    pub fn set_overlay(&mut self, overlay: &[TableDeltas]) {
        self.pending.clear();
        for td in overlay {
            let inverted = td.deltas.iter().rev().map(|d| match d {
                RowDelta::Insert(r) => RowDelta::Delete(r.clone()),
                RowDelta::Delete(r) => RowDelta::Insert(r.clone()),
            });
            let p = self.pending.entry(td.table).or_default();
            // A later entry for the same table goes first: undo walks the
            // list backwards.
            let mut all: Vec<RowDelta> = inverted.collect();
            all.append(p);
            *p = all;
        }
    }

    /// The root of a detached copy (the last node).
    pub fn detached_root(&self) -> NodeId {
        self.nodes.len().saturating_sub(1)
    }

    /// The aggregate partitions pulls on this detached copy filled.
    pub fn take_fills(&mut self) -> Vec<(NodeId, Vec<Value>, Vec<Row>)> {
        self.detached
            .as_mut()
            .map(|d| std::mem::take(&mut d.fills))
            .unwrap_or_default()
    }

    /// The real graph's aggregate partitions pulls on this detached copy
    /// read.
    pub fn take_read(&mut self) -> Vec<(NodeId, Vec<Value>)> {
        self.detached
            .as_mut()
            .map(|d| std::mem::take(&mut d.read))
            .unwrap_or_default()
    }

    /// Whether every partition in `read` (from [`Graph::take_read`] on a
    /// detached copy) is still filled (not evicted since).
    pub fn still_filled(&self, read: &[(NodeId, Vec<Value>)]) -> bool {
        read.iter().all(|(n, sk)| {
            matches!(self.nodes.get(*n).map(|n| &n.op), Some(Op::Aggregate(a)) if a.is_filled(sk))
        })
    }

    /// Fills the aggregate partitions a detached pull computed, where they
    /// are still holes. Sound only when no batch touching the tables below
    /// them committed since the pull started reading storage: then the
    /// inputs are exactly what a pull here would read.
    pub fn install_fills(&mut self, fills: Vec<(NodeId, Vec<Value>, Vec<Row>)>) {
        for (n, sk, input) in fills {
            if let Some(Op::Aggregate(a)) = self.nodes.get_mut(n).map(|n| &mut n.op) {
                if a.lookup(&sk).is_none() {
                    a.fill(&sk, input);
                }
            }
        }
    }

    // ---------------------------------------------------------------- install

    /// Lowers `plan` under a new reader keyed by `key` with `order`; returns
    /// the reader node and its shared state. `view` (the view's signature)
    /// goes into the reader's stable id.
    pub fn install(
        &mut self,
        plan: &LNode,
        key: Vec<usize>,
        order: ops::reader::OrderSpec,
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
            let op = match &t.op {
                LOp::Base(s) => {
                    self.schemas.insert(s.id, s.clone());
                    Op::Base {
                        table: s.id,
                        name: s.name.clone(),
                    }
                }
                LOp::Filter(e) => Op::Filter(Filter::new(e.clone())),
                LOp::Project(es) => Op::Project(Project::new(es.clone())),
                LOp::Join {
                    kind,
                    left_cols,
                    right_cols,
                } => {
                    let lc = &self.nodes[parents[0]].colls;
                    Op::Join(Join {
                        kind: *kind,
                        left_cols: left_cols.clone(),
                        right_cols: right_cols.clone(),
                        colls: left_cols
                            .iter()
                            .map(|&c| lc.get(c).copied().unwrap_or_default())
                            .collect(),
                        right_width: self.nodes[parents[1]].colls.len(),
                        drives: t.drives.clone(),
                    })
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
                LOp::Values(rows) => Op::Values(rows.clone()),
                LOp::Union => Op::Union(Union {
                    inputs: parents.len(),
                }),
            };
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
    ) -> Result<String> {
        let (len, version) = (self.nodes.len(), self.version);
        let (reader, _) = self.install(plan, key, order, "explain")?;
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

    // ------------------------------------------------------------ propagation

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

    // ---------------------------------------------------------------- pulls

    /// Rows of node `n` whose `cols` equal `key`: answered from state where
    /// the node has it, otherwise computed from its parents (filling the
    /// node's state on the way: an upquery).
    pub fn pull(&mut self, n: NodeId, cols: &[usize], key: &[Value]) -> Result<Vec<Row>> {
        let storage = self.storage.clone();
        self.pull_from(&*storage, n, cols, key)
    }

    /// [`Graph::pull`] reading base tables from `src` (a propagation
    /// snapshot, or a transaction's read view).
    pub fn pull_from(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        key: &[Value],
    ) -> Result<Vec<Row>> {
        if key.iter().any(Value::is_null) {
            return Ok(vec![]);
        }
        crate::interrupt::check()?;
        let parents = self.nodes[n].parents.clone();
        let colls = self.nodes[n].colls.clone();
        match &self.nodes[n].op {
            Op::Base { table, .. } => self.base_rows(src, *table, cols, key),
            Op::Values(rows) => Ok(rows
                .iter()
                .filter(|r| key_matches(r, cols, key, &colls))
                .cloned()
                .collect()),
            Op::Filter(f) => {
                let f = f.clone();
                let rows = self.pull_from(src, parents[0], cols, key)?;
                let mut out = Vec::with_capacity(rows.len());
                for (i, r) in rows.into_iter().enumerate() {
                    if i % 16 == 15 {
                        crate::interrupt::check()?;
                    }
                    if f.keep(&r).unwrap_or(false) {
                        out.push(r);
                    }
                }
                Ok(out)
            }
            Op::Project(p) => {
                let p = p.clone();
                let mapped: Option<Vec<usize>> = cols.iter().map(|&c| p.source(c)).collect();
                match mapped {
                    Some(m) => Ok(self
                        .pull_from(src, parents[0], &m, key)?
                        .iter()
                        .map(|r| p.apply(r))
                        .collect()),
                    None => Ok(self
                        .pull_from(src, parents[0], &[], &[])?
                        .iter()
                        .map(|r| p.apply(r))
                        .filter(|r| key_matches(r, cols, key, &colls))
                        .collect()),
                }
            }
            Op::Union(_) => {
                let mut out = Vec::new();
                for p in parents {
                    out.extend(self.pull_from(src, p, cols, key)?);
                }
                Ok(out)
            }
            Op::Join(j) => {
                let j = j.clone();
                self.pull_join(src, n, &j, cols, key)
            }
            Op::Aggregate(_) => Ok(self
                .pull_aggregate(src, n, cols, std::slice::from_ref(&key.to_vec()))?
                .pop()
                .unwrap_or_default()),
            Op::Reader(_) | Op::Removed => Err(DataflowError::Internal(format!("pull from n{n}"))),
        }
    }

    /// Rows of `n` for each of `keys` (values of `cols`), exactly as one
    /// [`Graph::pull_from`] per key gives them. A join's upquery asks for
    /// every distinct join key of its other input at once, and at cold start
    /// that is thousands (a front page joins 40k stories with their
    /// authors): filters, projections and unions pass the whole set down,
    /// an aggregate fills its missing partitions from one pull, and a base
    /// table answers from one scan grouped by key (a hash join's build side)
    /// when that reads fewer rows than the lookups would seek.
    fn pull_keys(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        let few = keys.len() < SCAN_MIN_KEYS;
        if few || keys.iter().any(|k| k.iter().any(Value::is_null)) {
            return self.pull_each(src, n, cols, keys);
        }
        let parents = self.nodes[n].parents.clone();
        match &self.nodes[n].op {
            Op::Base { table, .. } => self.base_rows_for_keys(src, *table, cols, keys),
            Op::Filter(f) => {
                let f = f.clone();
                let per_key = self.pull_keys(src, parents[0], cols, keys)?;
                Ok(per_key
                    .into_iter()
                    .map(|rows| {
                        rows.into_iter()
                            .filter(|r| f.keep(r).unwrap_or(false))
                            .collect()
                    })
                    .collect())
            }
            Op::Project(p) => {
                let p = p.clone();
                match cols
                    .iter()
                    .map(|&c| p.source(c))
                    .collect::<Option<Vec<usize>>>()
                {
                    Some(m) => Ok(self
                        .pull_keys(src, parents[0], &m, keys)?
                        .into_iter()
                        .map(|rows| rows.iter().map(|r| p.apply(r)).collect())
                        .collect()),
                    None => self.pull_each(src, n, cols, keys),
                }
            }
            Op::Union(_) => {
                let mut out = vec![Vec::new(); keys.len()];
                for p in parents {
                    for (rows, more) in out.iter_mut().zip(self.pull_keys(src, p, cols, keys)?) {
                        rows.extend(more);
                    }
                }
                Ok(out)
            }
            Op::Aggregate(_) => self.pull_aggregate(src, n, cols, keys),
            _ => self.pull_each(src, n, cols, keys),
        }
    }

    /// [`Graph::pull_keys`] one key at a time.
    fn pull_each(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        keys.iter()
            .map(|k| self.pull_from(src, n, cols, k))
            .collect()
    }

    /// Rows of aggregate node `n` for each of `keys`, filling the partitions
    /// it lacks from one pull of its input (shared with the real graph's
    /// state when this is a detached copy).
    fn pull_aggregate(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        let parent = self.nodes[n].parents[0];
        let colls = self.nodes[n].colls.clone();
        let Op::Aggregate(a) = &self.nodes[n].op else {
            return Err(DataflowError::Internal(format!("n{n} is not an aggregate")));
        };
        let state_key = a.key.clone();
        let mut out: Vec<Option<Vec<Row>>> = Vec::with_capacity(keys.len());
        let mut state_keys = Vec::with_capacity(keys.len());
        let mut missing: HashSet<Vec<Value>> = HashSet::new();
        let mut missing_keys: Vec<Vec<Value>> = Vec::new();
        for key in keys {
            // Values of the state key for this lookup.
            let sk: Option<Vec<Value>> = if state_key.is_empty() {
                Some(vec![])
            } else if cols.len() == state_key.len() {
                state_key
                    .iter()
                    .map(|k| cols.iter().position(|c| c == k).map(|i| key[i].clone()))
                    .collect()
            } else {
                None
            };
            let Some(sk) = sk else {
                return Err(DataflowError::Internal(format!(
                    "aggregate n{n} looked up by {cols:?}, keyed by {state_key:?}"
                )));
            };
            let shared = match (self.aggregate_state(n, &sk), &mut self.detached) {
                (Some(rows), Some(d)) if d.real_graph.is_some() => {
                    d.read.push((d.real[n], sk.clone()));
                    Some(rows)
                }
                (rows, _) => rows,
            };
            // Each missing partition is pulled once, however many keys
            // map to it (every key of a lookup maps to the one partition
            // of an aggregate without GROUP BY).
            if shared.is_none() && missing.insert(sk.clone()) {
                missing_keys.push(sk.clone());
            }
            out.push(shared);
            state_keys.push(sk);
        }
        let inputs = self.pull_keys(src, parent, &state_key, &missing_keys)?;
        let mut filled: HashMap<Vec<Value>, Vec<Row>> = HashMap::with_capacity(inputs.len());
        for (sk, input) in missing_keys.into_iter().zip(inputs) {
            if let Some(d) = &mut self.detached {
                d.fills.push((d.real[n], sk.clone(), input.clone()));
            }
            if let Op::Aggregate(a) = &mut self.nodes[n].op {
                let rows = a.fill(&sk, input);
                filled.insert(sk, rows);
            }
        }
        Ok(out
            .into_iter()
            .zip(keys)
            .zip(&state_keys)
            .map(|((rows, key), sk)| {
                rows.or_else(|| filled.get(sk).cloned())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|r| key_matches(r, cols, key, &colls))
                    .collect()
            })
            .collect())
    }

    /// Aggregate `n`'s filled partition `sk`: its own, or (in a detached
    /// copy) the real graph's, read under that graph's lock.
    fn aggregate_state(&self, n: NodeId, sk: &[Value]) -> Option<Vec<Row>> {
        let Op::Aggregate(a) = &self.nodes[n].op else {
            return None;
        };
        if let Some(rows) = a.lookup(sk) {
            return Some(rows);
        }
        let d = self.detached.as_ref()?;
        let real = d.real_graph.as_ref()?;
        match real.lock().nodes.get(d.real[n]).map(|x| &x.op) {
            Some(Op::Aggregate(real)) => real.lookup(sk),
            _ => None,
        }
    }

    /// Rows of join node `n` whose `cols` equal `key`. Key columns of one
    /// input are pushed into that input's pull; with key columns on both
    /// inputs, the pull starts from the side chosen at install (`drives`),
    /// looks the other side up by join key and filters on the full key.
    ///
    /// LEFT joins: the key never holds NULL (`pull` returns nothing then),
    /// so rows matching a key on a right column are never NULL-extended:
    /// they are exactly the inner join's matching rows, and the right side
    /// can be filtered before joining.
    fn pull_join(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        j: &Join,
        cols: &[usize],
        key: &[Value],
    ) -> Result<Vec<Row>> {
        let (l, r) = (self.nodes[n].parents[0], self.nodes[n].parents[1]);
        let colls = self.nodes[n].colls.clone();
        let lw = self.nodes[l].colls.len();
        let (lcols, rcols) = split_cols(cols, lw);
        let pick = |sub: &[usize]| -> Vec<Value> { sub.iter().map(|&i| key[i].clone()).collect() };
        let lkey = pick(&lcols);
        let rkey = pick(&rcols);
        let lcols: Vec<usize> = lcols.iter().map(|&i| cols[i]).collect();
        let rcols: Vec<usize> = rcols.iter().map(|&i| cols[i] - lw).collect();
        let outer = matches!(j.kind, ops::JoinKind::Inner | ops::JoinKind::Left);
        if rcols.is_empty() {
            let left_rows = self.pull_from(src, l, &lcols, &lkey)?;
            return self.join_from_left(src, j, r, left_rows);
        }
        if lcols.is_empty() && outer {
            return self.join_from_right(src, j, l, r, &rcols, &rkey);
        }
        let drive = j.drives.iter().find(|d| d.0 == cols).map(|d| d.1);
        let mut out = match drive {
            Some(true) if outer => self.join_from_right(src, j, l, r, &rcols, &rkey)?,
            Some(false) => {
                let left_rows = self.pull_from(src, l, &lcols, &lkey)?;
                self.join_from_left(src, j, r, left_rows)?
            }
            _ => {
                let left_rows = self.pull_from(src, l, &[], &[])?;
                self.join_from_left(src, j, r, left_rows)?
            }
        };
        out.retain(|row| key_matches(row, cols, key, &colls));
        Ok(out)
    }

    /// Joins the right rows with `rcols == rkey` with their left matches
    /// (inner and LEFT joins: only matched rows), pulling the left input
    /// once for all distinct join keys.
    fn join_from_right(
        &mut self,
        src: &dyn BaseReads,
        j: &Join,
        l: NodeId,
        r: NodeId,
        rcols: &[usize],
        rkey: &[Value],
    ) -> Result<Vec<Row>> {
        let rrows = self.pull_from(src, r, rcols, rkey)?;
        let (keys, right_groups, _) = group_by_join_key(rrows, &j.right_cols, &j.colls);
        let left_groups = self.pull_keys(src, l, &j.left_cols, &keys)?;
        let mut out = Vec::new();
        for (ls, rs) in left_groups.iter().zip(&right_groups) {
            crate::interrupt::check()?;
            crate::interrupt::charge_bytes(j.output_bytes_bound(ls, rs))?;
            out.extend(j.join_rows(ls, rs));
        }
        Ok(out)
    }

    /// Joins `left_rows` with their right matches, pulling the right input
    /// once for all distinct join keys.
    fn join_from_left(
        &mut self,
        src: &dyn BaseReads,
        j: &Join,
        r: NodeId,
        left_rows: Vec<Row>,
    ) -> Result<Vec<Row>> {
        let (keys, left_groups, nulls) = group_by_join_key(left_rows, &j.left_cols, &j.colls);
        let mut out = j.join_rows(&nulls, &[]);
        let right_groups = self.pull_keys(src, r, &j.right_cols, &keys)?;
        for (ls, rs) in left_groups.iter().zip(&right_groups) {
            crate::interrupt::check()?;
            crate::interrupt::charge_bytes(j.output_bytes_bound(ls, rs))?;
            out.extend(j.join_rows(ls, rs));
        }
        Ok(out)
    }

    /// [`Graph::base_rows`] for each of `keys`. Many keys over a table that
    /// is small next to them are answered from one scan grouped by key:
    /// a scanned row costs a fraction of an index seek. Only integer key
    /// columns are grouped so: their normalized values compare exactly as
    /// a lookup does (text would need the collation's padding rules).
    fn base_rows_for_keys(
        &self,
        src: &dyn BaseReads,
        table: TableId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        let integer_keys = self
            .schemas
            .get(&table)
            .cloned()
            .or_else(|| self.storage.table_by_id(table))
            .is_some_and(|s| {
                cols.iter().enumerate().all(|(i, &c)| {
                    s.columns.get(c).is_some_and(|col| col.ty.is_integer())
                        && keys
                            .iter()
                            .all(|k| matches!(k[i], Value::Int(_) | Value::UInt(_)))
                })
            });
        let scan_rows = self.storage.estimate_rows(table);
        if cols.is_empty() || !integer_keys || (keys.len() as u64) * SEEK_COST_IN_ROWS < scan_rows {
            return keys
                .iter()
                .map(|k| self.base_rows(src, table, cols, k))
                .collect();
        }
        let binary = vec![Collation::Binary; cols.len()];
        let mut slot: HashMap<Vec<Value>, usize> = HashMap::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            slot.entry(ops::norm_key(k, &binary)).or_insert(i);
        }
        let mut out = vec![Vec::new(); keys.len()];
        for row in self.base_rows(src, table, &[], &[])? {
            let k = project_cols(&row, cols);
            if let Some(&i) = slot.get(&ops::norm_key(&k, &binary)) {
                out[i].push(row);
            }
        }
        // A key asked twice gets its first asking's rows.
        for (i, k) in keys.iter().enumerate() {
            let first = slot[&ops::norm_key(k, &binary)];
            if first != i {
                out[i] = out[first].clone();
            }
        }
        Ok(out)
    }

    /// Base table rows with `cols == key`, as of the batch position being
    /// propagated (storage minus pending deltas).
    fn base_rows(
        &self,
        src: &dyn BaseReads,
        table: TableId,
        cols: &[usize],
        key: &[Value],
    ) -> Result<Vec<Row>> {
        let schema = self
            .schemas
            .get(&table)
            .cloned()
            .or_else(|| self.storage.table_by_id(table));
        let colls: Vec<Collation> = schema
            .as_ref()
            .map(|s| {
                s.columns
                    .iter()
                    .map(|c| {
                        if c.ty.is_text() {
                            c.collation
                        } else {
                            Collation::Binary
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut rows = match schema.as_ref().and_then(|s| choose_index(s, cols)) {
            Some((index, perm)) if !cols.is_empty() => {
                let k: Vec<Value> = perm.iter().map(|&i| key[i].clone()).collect();
                src.lookup(table, index, &k)?
            }
            _ => src.scan(table)?,
        };
        if !cols.is_empty() {
            rows.retain(|r| key_matches(r, cols, key, &colls));
        }
        if let Some(p) = self.pending.get(&table) {
            let matching: Vec<&RowDelta> = p
                .iter()
                .filter(|d| cols.is_empty() || key_matches(d.row(), cols, key, &colls))
                .collect();
            rows = ops::undo(rows, &matching);
        }
        crate::interrupt::charge(&rows)?;
        Ok(rows)
    }

    // ------------------------------------------------------------ snapshots

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
                    Op::Reader(r) => r.shared.mark_all_dirty(),
                    _ => {}
                }
            }
            match &mut n.op {
                Op::Aggregate(a) => {
                    out.push((n.stable.clone(), CapturedState::Aggregate(a.capture())))
                }
                Op::Reader(r) => {
                    out.push((n.stable.clone(), CapturedState::Reader(r.shared.capture())))
                }
                _ => {}
            }
        }
        out
    }

    /// How many live stateful nodes (aggregates and readers) there are.
    pub fn stateful_nodes(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Aggregate(_) | Op::Reader(_)))
            .count()
    }

    /// Makes the next capture of every node full (a capture was not saved).
    pub fn mark_all_dirty(&mut self) {
        for n in &mut self.nodes {
            match &mut n.op {
                Op::Aggregate(a) => a.mark_all_dirty(),
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
            let stateful = matches!(self.nodes[i].op, Op::Aggregate(_) | Op::Reader(_));
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
        // Interior state: clear the largest aggregates and their dependents.
        while total > target {
            let Some((n, b)) = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| matches!(n.op, Op::Aggregate(_)))
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
            _ => (0, 0),
        }
    }
}

/// Fewer keys than this are pulled one by one: grouping a scan pays off
/// only for many.
const SCAN_MIN_KEYS: usize = 16;

/// How many scanned rows one index lookup costs (a RocksDB seek and
/// iterator set-up against decoding one row in sequence). A base table
/// with fewer rows than this many per key asked is scanned once instead.
/// On the Lobsters front page at scale 1 (40k stories, 9 votes each),
/// 8 and 32 (which scans the votes too) cost the same CPU.
const SEEK_COST_IN_ROWS: u64 = 8;

/// `rows` grouped by their values of `cols` (normalized by `colls`), in
/// first-seen order: the distinct keys, each key's rows, and the rows with
/// a NULL key column (which match nothing).
fn group_by_join_key(
    rows: Vec<Row>,
    cols: &[usize],
    colls: &[Collation],
) -> (Vec<Vec<Value>>, Vec<Vec<Row>>, Vec<Row>) {
    let mut keys = Vec::new();
    let mut groups: Vec<Vec<Row>> = Vec::new();
    let mut index: HashMap<Vec<Value>, usize> = HashMap::new();
    let mut nulls = Vec::new();
    for row in rows {
        let key = project_cols(&row, cols);
        if key.iter().any(Value::is_null) {
            nulls.push(row);
            continue;
        }
        match index.entry(ops::norm_key(&key, colls)) {
            std::collections::hash_map::Entry::Occupied(e) => groups[*e.get()].push(row),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(keys.len());
                keys.push(key);
                groups.push(vec![row]);
            }
        }
    }
    (keys, groups, nulls)
}

/// The index whose longest run of leading columns lies within `cols`, and
/// the positions in `cols` of that run, in index order (a prefix lookup). Storage encodes text
/// index keys under the column's collation, so case-insensitive columns use
/// their index too (rows are re-checked with `key_matches`).
fn choose_index(s: &TableSchema, cols: &[usize]) -> Option<(IndexRef, Vec<usize>)> {
    if cols.iter().any(|&c| c >= s.columns.len()) {
        return None;
    }
    // Positions in `cols` of the index's leading columns, as far as they are
    // all key columns: a prefix lookup on them, and the caller filters on the
    // rest (e.g. key `(user_id, is_deleted)` uses an index on `user_id`
    // instead of scanning the table).
    let lead = |idx_cols: &[usize]| -> Vec<usize> {
        idx_cols
            .iter()
            .take(cols.len())
            .map_while(|ic| cols.iter().position(|c| c == ic))
            .collect()
    };
    let pk = s.primary_key.iter().map(|pk| (IndexRef::Primary, pk));
    let secondary = s
        .indexes
        .iter()
        .map(|idx| (IndexRef::Secondary(idx.id), &idx.columns));
    let mut best: Option<(IndexRef, Vec<usize>)> = None;
    for (index, idx_cols) in pk.chain(secondary) {
        let p = lead(idx_cols);
        // Longest prefix wins; on a tie the primary key, then the first index.
        let better = match &best {
            Some((_, b)) => p.len() > b.len(),
            None => !p.is_empty(),
        };
        if better {
            best = Some((index, p));
        }
    }
    best
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
}

fn lower(n: &LNode, tmp: &mut Vec<Tmp>) -> usize {
    let parents: Vec<usize> = n.inputs.iter().map(|i| lower(i, tmp)).collect();
    let parent_widths = n.inputs.iter().map(|i| i.width()).collect();
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
        _ => vec![],
    }
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
        LOp::Aggregate { .. } => out.push((0, state_key.to_vec())),
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

/// Positions in `cols` of the left input's columns and of the right's.
fn split_cols(cols: &[usize], lw: usize) -> (Vec<usize>, Vec<usize>) {
    (0..cols.len()).partition(|&i| cols[i] < lw)
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
        LOp::Values(_) => false,
    }
}
