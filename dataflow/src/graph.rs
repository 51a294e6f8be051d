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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ladle_common::{Collation, Row, RowDelta, TableDeltas, TableId, TableSchema, Value};
use ladle_storage::{IndexRef, SnapshotReads, Storage, StorageError};
use parking_lot::Mutex;

use crate::ops::{self, Op};
use crate::Result;

mod columns;
mod domains;
mod fold;
mod install;
mod propagate;
mod pull;
mod state;

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
    /// [`BaseReads::scan`] decoding only the columns `keep` marks: the
    /// others come back NULL. No default: a caller takes rows out of the
    /// result by equality with rows narrowed the same way, so a source
    /// returning whole rows here would be wrong, not slow.
    fn scan_columns(&self, table: TableId, keep: &[bool]) -> Result<Vec<Row>, StorageError>;
    /// Hands each row of `table` to `each` as it is read, in primary-key
    /// order, until `each` returns false; with `keep`, decoding only the
    /// columns it marks (exactly as `scan_columns`). A source that cannot
    /// stream collects the rows first.
    fn scan_each(
        &self,
        table: TableId,
        keep: Option<&[bool]>,
        each: ladle_storage::RowSink<'_>,
    ) -> Result<(), StorageError> {
        let rows = match keep {
            Some(keep) => self.scan_columns(table, keep)?,
            None => self.scan(table)?,
        };
        for row in rows {
            if !each(row) {
                break;
            }
        }
        Ok(())
    }
    /// [`BaseReads::lookup`] for each of `keys`; with `keep`, the columns
    /// it leaves out come back NULL, exactly (see `scan_columns`).
    fn lookup_many(
        &self,
        table: TableId,
        index: IndexRef,
        keys: &[Vec<Value>],
        keep: Option<&[bool]>,
    ) -> Result<Vec<Vec<Row>>, StorageError> {
        let narrow = |mut row: Row| {
            if let Some(keep) = keep {
                for (v, _) in row.iter_mut().zip(keep).filter(|(_, k)| !**k) {
                    *v = Value::Null;
                }
            }
            row
        };
        keys.iter()
            .map(|k| {
                Ok(self
                    .lookup(table, index, k)?
                    .into_iter()
                    .map(narrow)
                    .collect())
            })
            .collect()
    }
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
            fn scan_columns(
                &self,
                table: TableId,
                keep: &[bool],
            ) -> Result<Vec<Row>, StorageError> {
                <$source>::scan_columns(self, table, Some(keep))
            }
            fn scan_each(
                &self,
                table: TableId,
                keep: Option<&[bool]>,
                each: ladle_storage::RowSink<'_>,
            ) -> Result<(), StorageError> {
                <$source>::scan_each(self, table, keep, each)
            }
            fn lookup_many(
                &self,
                table: TableId,
                index: IndexRef,
                keys: &[Vec<Value>],
                keep: Option<&[bool]>,
            ) -> Result<Vec<Vec<Row>>, StorageError> {
                <$source>::lookup_many(self, table, index, keys, keep)
            }
        }
    )*};
}

base_reads_by_inherent_methods!(Storage, SnapshotReads<'_>);

/// A REPEATABLE READ transaction's read view. A table created after the
/// view was taken has no rows in it: the shim refuses to read such a table
/// in the view (1412), except a statement's own scratch tables (a
/// recursive CTE's), whose rows all come from the overlay.
impl BaseReads for ladle_storage::ReadView {
    fn lookup(
        &self,
        table: TableId,
        index: IndexRef,
        key: &[Value],
    ) -> Result<Vec<Row>, StorageError> {
        if self.schema(table).is_none() {
            return Ok(Vec::new());
        }
        ladle_storage::ReadView::lookup(self, table, index, key)
    }
    fn scan(&self, table: TableId) -> Result<Vec<Row>, StorageError> {
        if self.schema(table).is_none() {
            return Ok(Vec::new());
        }
        ladle_storage::ReadView::scan(self, table)
    }
    fn scan_columns(&self, table: TableId, keep: &[bool]) -> Result<Vec<Row>, StorageError> {
        if self.schema(table).is_none() {
            return Ok(Vec::new());
        }
        ladle_storage::ReadView::scan_columns(self, table, Some(keep))
    }
}

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
    /// Set while a committed batch propagates: a top-k window then answers
    /// a lookup from its filled partitions only (see `pull_top_k_by`).
    propagating: bool,
}

/// A state partition an aggregate or window node filled, moved from a
/// detached copy's node to the real one (see [`Graph::install_fills`]).
pub(crate) enum FilledPartition {
    Aggregate(Arc<ops::aggregate::Partition>),
    Window(Arc<ops::window::Partition>),
}

impl FilledPartition {
    /// Node `op`'s filled state partition `sk`, shared; `None` for a hole
    /// (or a node of another kind).
    pub(crate) fn of(op: &Op, sk: &[Value]) -> Option<FilledPartition> {
        match op {
            Op::Aggregate(a) => a.partition(sk).map(FilledPartition::Aggregate),
            Op::Window(w) => w.partition(sk).map(FilledPartition::Window),
            _ => None,
        }
    }

    /// Installs it as partition `sk` of `op`, a copy of the node that
    /// filled it; a node of another kind is left alone.
    fn install(self, op: &mut Op, sk: &[Value]) {
        match (op, self) {
            (Op::Aggregate(a), FilledPartition::Aggregate(p)) => a.install(sk, p),
            (Op::Window(w), FilledPartition::Window(p)) => w.install(sk, p),
            _ => {}
        }
    }
}

/// What a detached copy of a view's ancestors knows about the real graph.
struct Detached {
    /// Real node id of each copied node (copies are renumbered densely).
    real: Vec<NodeId>,
    /// Aggregate partitions the pulls filled: (real node, partition key,
    /// the partition), to install in the real graph with [`Graph::install_fills`].
    fills: Vec<(NodeId, Vec<Value>, FilledPartition)>,
    /// The real graph: aggregate partitions filled there are read from it
    /// (under its lock, briefly) instead of recomputed from storage.
    real_graph: Option<Arc<Mutex<Graph>>>,
    /// Partitions of the real graph the pulls read: the filled reader key
    /// depends on them, so they must still be filled when it is installed.
    read: Vec<(NodeId, Vec<Value>)>,
    /// [`Graph::columns_read`] of every node, computed on the first base
    /// read (a copy's nodes never change): once per base read, it walked
    /// the whole copy, quadratic in a union of thousands of SELECTs.
    columns_read: std::sync::OnceLock<Option<Vec<Option<Vec<bool>>>>>,
}

/// A stateful node's captured state (see [`Graph::capture`]).
pub(crate) enum CapturedState {
    Reader(ops::Captured<ops::reader::Rows, Vec<RowDelta>>),
    Aggregate(ops::Captured<ops::aggregate::Partition, ops::aggregate::GroupPatch>),
    Window(ops::Captured<ops::window::Partition, Vec<RowDelta>>),
}

/// A stateful node's state as restored from a snapshot.
pub(crate) enum RestoredState {
    /// Normalized key -> rows, and whether they need sorting.
    Reader(Vec<(Vec<Value>, Vec<Row>, bool)>),
    /// Partition key -> partition.
    Aggregate(Vec<(Vec<Value>, ops::aggregate::Partition)>),
    /// State key -> the partition's input rows.
    Window(Vec<(Vec<Value>, Vec<Row>)>),
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
            propagating: false,
        }
    }

    // ------------------------------------------------------- detached pulls

    /// Whether `n` or an ancestor computes values (a projection with an
    /// expression, an exact SUM or AVG, a filter that may mark rows), whose
    /// overflow markers a read must look for.
    pub fn computes_values(&self, n: NodeId) -> bool {
        self.any_ancestor(n, |op| match op {
            Op::Project(p) => p.computes(),
            Op::Aggregate(a) => a.may_overflow(),
            Op::Filter(f) => f.marks_rows(),
            _ => false,
        })
    }

    /// Whether `n` or an ancestor is a filter that may mark the rows whose
    /// WHERE overflowed (`ops::Filter::pass`), which a read of `n`'s view
    /// must look for in the rows it returns.
    pub fn marks_rows(&self, n: NodeId) -> bool {
        self.any_ancestor(n, |op| matches!(op, Op::Filter(f) if f.marks_rows()))
    }

    /// Whether `n` or an ancestor's operator satisfies `test`.
    fn any_ancestor(&self, n: NodeId, test: impl Fn(&Op) -> bool) -> bool {
        let mut stack = vec![n];
        let mut seen = HashSet::new();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            if test(&self.nodes[n].op) {
                return true;
            }
            stack.extend(self.nodes[n].parents.iter().copied());
        }
        false
    }

    /// A copy of `root` and its ancestors without state (aggregates are all
    /// holes), renumbered so `root` is the last node, for upqueries that run
    /// without the graph and commit locks (`read::Context::fill`). `None`
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
        let mut seen = HashSet::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if seen.insert(n) {
                ids.push(n);
                stack.extend(self.nodes[n].parents.iter().copied());
            }
        }
        ids.sort_unstable();
        let mut nodes = Vec::with_capacity(ids.len());
        for &n in &ids {
            let node = &self.nodes[n];
            if !allow_scans && node.op.state_key().is_some_and(|k| k.is_empty()) {
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
                columns_read: std::sync::OnceLock::new(),
            }),
            interior_evictions: 0,
            propagating: false,
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
                columns_read: d.columns_read.clone(),
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
            propagating: false,
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
    pub fn take_fills(&mut self) -> Vec<(NodeId, Vec<Value>, FilledPartition)> {
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
        read.iter()
            .all(|(n, sk)| self.nodes.get(*n).is_some_and(|n| n.op.is_filled(sk)))
    }

    /// Fills the aggregate partitions a detached pull computed, where they
    /// are still holes. Sound only when no batch touching the tables below
    /// them committed since the pull started reading storage: then the
    /// inputs are exactly what a pull here would read.
    ///
    /// The partitions themselves move: computing them again here, under the
    /// commit and graph locks, held up every write and every other fill's
    /// install (a cold front page's 80k partitions, 9% of its fill).
    pub fn install_fills(&mut self, fills: Vec<(NodeId, Vec<Value>, FilledPartition)>) {
        for (n, sk, part) in fills {
            if let Some(node) = self.nodes.get_mut(n) {
                if node.op.state_key().is_some() && !node.op.is_filled(&sk) {
                    part.install(&mut node.op, &sk);
                }
            }
        }
    }
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

/// Positions in `cols` of the left input's columns and of the right's.
fn split_cols(cols: &[usize], lw: usize) -> (Vec<usize>, Vec<usize>) {
    (0..cols.len()).partition(|&i| cols[i] < lw)
}
