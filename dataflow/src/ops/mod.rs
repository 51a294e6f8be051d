//! Dataflow operators, one per file. Each is a pure core: it maps input
//! deltas (and its own state) to output deltas; the graph
//! ([`crate::graph`]) routes deltas, performs lookups and fills holes.
//!
//! Delta semantics come from [`ladle_common::RowDelta`]: a record is added
//! or removed; an update is a removal then an addition.

pub(crate) mod aggregate;
pub(crate) mod filter;
pub(crate) mod join;
pub(crate) mod project;
pub(crate) mod reader;
pub(crate) mod union;
pub(crate) mod window;

#[cfg(test)]
pub(crate) mod harness;

use ladle_common::{Collation, Row, RowDelta, TableId, Value};

use crate::hash::HashMap;

pub(crate) use aggregate::{AggKind, AggSpec, Aggregate};
pub(crate) use filter::Filter;
pub(crate) use join::{Join, JoinKind};
pub(crate) use project::Project;
pub(crate) use reader::{Reader, ReaderState};
pub(crate) use union::Union;
pub(crate) use window::{Bound, Frame, WinFn, Window};

/// The closed set of operators a node can hold.
pub(crate) enum Op {
    /// A base table: its rows live in storage; the node is stateless.
    Base {
        table: TableId,
        name: String,
    },
    Filter(Filter),
    Project(Project),
    Join(Join),
    Aggregate(Aggregate),
    Union(Union),
    /// Rows kept in order per partition: window functions and top-k.
    Window(Box<Window>),
    Reader(Reader),
    /// Constant rows: never changes.
    Values(Vec<Row>),
    /// A removed node (ids stay stable).
    Removed,
}

impl Op {
    /// A copy of the operator without its state (an aggregate comes back
    /// with every partition a hole), for pulls on a detached copy of part of
    /// the graph; `None` for readers and removed nodes.
    pub fn stateless_copy(&self) -> Option<Op> {
        Some(match self {
            Op::Base { table, name } => Op::Base {
                table: *table,
                name: name.clone(),
            },
            Op::Filter(f) => Op::Filter(f.clone()),
            Op::Project(p) => Op::Project(p.clone()),
            Op::Join(j) => Op::Join(j.clone()),
            Op::Aggregate(a) => Op::Aggregate(a.stateless_copy()),
            Op::Window(w) => Op::Window(Box::new(w.stateless_copy())),
            Op::Union(u) => Op::Union(Union { inputs: u.inputs }),
            Op::Values(rows) => Op::Values(rows.clone()),
            Op::Reader(_) | Op::Removed => return None,
        })
    }

    /// The columns partitioning a partially stateful interior node's state
    /// (an aggregate or a window); `None` for other nodes.
    pub fn state_key(&self) -> Option<&[usize]> {
        match self {
            Op::Aggregate(a) => Some(&a.key),
            Op::Window(w) => Some(&w.key),
            _ => None,
        }
    }

    /// A partially stateful node's output rows for state partition `sk`,
    /// or `None` for a hole (or another kind of node).
    pub fn lookup_partition(&self, sk: &[Value]) -> Option<Vec<Row>> {
        match self {
            Op::Aggregate(a) => a.lookup(sk),
            Op::Window(w) => w.lookup(sk),
            _ => None,
        }
    }

    /// Whether state partition `sk` of a partially stateful node is filled.
    pub fn is_filled(&self, sk: &[Value]) -> bool {
        match self {
            Op::Aggregate(a) => a.is_filled(sk),
            Op::Window(w) => w.is_filled(sk),
            _ => false,
        }
    }

    /// Fills state partition `sk` from its input rows; returns its output
    /// rows (nothing for a node without partial state).
    pub fn fill_partition(&mut self, sk: &[Value], input: Vec<Row>) -> Vec<Row> {
        match self {
            Op::Aggregate(a) => a.fill(sk, input),
            Op::Window(w) => w.fill(sk, input),
            _ => vec![],
        }
    }

    /// What filling a partition from `input` may hold beyond the input
    /// (see [`Op::fill_partition`]), charged to the statement before the
    /// fill (see `interrupt::charge`).
    pub fn fill_bytes_bound(&self, input: &[Row]) -> usize {
        match self {
            Op::Aggregate(a) => a.fill_bytes_bound(input),
            _ => 0,
        }
    }

    /// One-line description for EXPLAIN.
    pub fn describe(&self) -> String {
        match self {
            Op::Base { name, table } => format!("Base {name} (table {table})"),
            Op::Filter(f) => f.to_string(),
            Op::Project(p) => p.to_string(),
            Op::Join(j) => j.to_string(),
            Op::Aggregate(a) => a.to_string(),
            Op::Union(u) => u.to_string(),
            Op::Window(w) => w.to_string(),
            Op::Reader(r) => r.to_string(),
            Op::Values(rows) => format!("Values ({} rows)", rows.len()),
            Op::Removed => "Removed".into(),
        }
    }

    /// Bytes of state held.
    pub fn state_bytes(&self) -> usize {
        match self {
            Op::Aggregate(a) => a.state_bytes(),
            Op::Window(w) => w.state_bytes(),
            Op::Reader(r) => r.shared.bytes(),
            _ => 0,
        }
    }
}

/// Approximate heap size of a row.
pub(crate) fn row_bytes(r: &[Value]) -> usize {
    48 + r.iter().map(value_bytes).sum::<usize>()
}

/// Approximate heap size of one value in a row.
pub(crate) fn value_bytes(v: &Value) -> usize {
    24 + match v {
        Value::Text(s) => s.len() + 16,
        Value::Bytes(b) => b.len() + 16,
        _ => 0,
    }
}

/// A hash key that agrees with SQL equality under the columns' collations.
pub(crate) fn norm_key(vals: &[Value], colls: &[Collation]) -> Vec<Value> {
    vals.iter()
        .enumerate()
        .map(|(i, v)| v.key_normalized(colls.get(i).copied().unwrap_or(Collation::Binary)))
        .collect()
}

/// The values of `cols` in `row`.
pub(crate) fn project_cols(row: &[Value], cols: &[usize]) -> Vec<Value> {
    cols.iter()
        .map(|&c| row.get(c).cloned().unwrap_or(Value::Null))
        .collect()
}

/// Whether `row[cols]` equals `key` under SQL equality (NULL never equal).
pub(crate) fn key_matches(
    row: &[Value],
    cols: &[usize],
    key: &[Value],
    colls: &[Collation],
) -> bool {
    cols.iter().zip(key).all(|(&c, k)| {
        let coll = colls.get(c).copied().unwrap_or(Collation::Binary);
        match row.get(c) {
            Some(v) => crate::expr::compare(v, k, coll) == Some(std::cmp::Ordering::Equal),
            None => false,
        }
    })
}

/// Multiset difference `new - old` as deltas (deletions first).
pub(crate) fn diff_rows(old: Vec<Row>, new: Vec<Row>) -> Vec<RowDelta> {
    let mut counts: HashMap<Row, i64> = HashMap::default();
    for r in old {
        *counts.entry(r).or_insert(0) -= 1;
    }
    for r in new {
        *counts.entry(r).or_insert(0) += 1;
    }
    let mut dels = Vec::new();
    let mut ins = Vec::new();
    for (r, c) in counts {
        for _ in 0..c.unsigned_abs() {
            if c < 0 {
                dels.push(RowDelta::Delete(r.clone()));
            } else {
                ins.push(RowDelta::Insert(r.clone()));
            }
        }
    }
    dels.extend(ins);
    dels
}

/// `rows` with `deltas` undone (the multiset before the deltas).
pub(crate) fn undo(mut rows: Vec<Row>, deltas: &[&RowDelta]) -> Vec<Row> {
    for d in deltas.iter().rev() {
        match d {
            RowDelta::Insert(r) => {
                if let Some(p) = rows.iter().position(|x| x == r) {
                    rows.swap_remove(p);
                }
            }
            RowDelta::Delete(r) => rows.push(r.clone()),
        }
    }
    rows
}

/// Partitions below this size are saved whole when they change; larger ones
/// record what changed inside them (groups, rows) so a delta stays small.
pub(crate) const SMALL_PARTITION: usize = 64;

/// What changed in each partition of a stateful node (filled, updated,
/// evicted or cleared) since its state was last captured for a snapshot, so
/// the next snapshot epoch writes only that (see `crate::snapshot`).
///
/// Per partition key: `None` = rewrite it whole (or it became a hole);
/// `Some(sub)` = only the changes in `sub` (changed group keys, or applied
/// row deltas). `all` means "write the whole state": there is no previous
/// capture, or tracking gave up because more keys changed than the node
/// holds (which also bounds memory when snapshots are never taken).
#[derive(Clone, Debug)]
pub(crate) struct DirtyKeys<S> {
    keys: HashMap<Vec<Value>, Option<S>>,
    all: bool,
}

/// What changed since the last capture.
pub(crate) enum Changed<S> {
    All,
    Keys(HashMap<Vec<Value>, Option<S>>),
}

impl<S> Default for DirtyKeys<S> {
    fn default() -> DirtyKeys<S> {
        DirtyKeys {
            keys: HashMap::default(),
            all: true,
        }
    }
}

impl<S: Default> DirtyKeys<S> {
    /// Records that partition `key` (normalized) changed as a whole;
    /// `filled` is how many partitions the node holds now.
    pub fn mark(&mut self, key: &[Value], filled: usize) {
        if self.all {
            return;
        }
        match self.keys.get_mut(key) {
            Some(e) => *e = None,
            None => {
                self.keys.insert(key.to_vec(), None);
                self.check_size(filled);
            }
        }
    }

    /// Records a change inside partition `key`: `record` adds it to the
    /// partition's changes and returns whether they are still worth keeping
    /// apart (else the partition is rewritten whole). Small partitions
    /// (`size` below [`SMALL_PARTITION`]) are always rewritten whole.
    pub fn mark_inside(
        &mut self,
        key: &[Value],
        filled: usize,
        size: usize,
        record: impl FnOnce(&mut S) -> bool,
    ) {
        if self.all {
            return;
        }
        if size < SMALL_PARTITION {
            return self.mark(key, filled);
        }
        // The common case, a partition already tracked, allocates nothing.
        if let Some(e) = self.keys.get_mut(key) {
            if let Some(sub) = e {
                if !record(sub) {
                    *e = None;
                }
            }
            return;
        }
        let mut sub = S::default();
        let keep = record(&mut sub);
        self.keys.insert(key.to_vec(), keep.then_some(sub));
        self.check_size(filled);
    }

    fn check_size(&mut self, filled: usize) {
        if self.keys.len() > filled.max(1024) {
            self.mark_all();
        }
    }

    pub fn mark_all(&mut self) {
        self.all = true;
        self.keys = HashMap::default();
    }

    /// Hands over the changes and starts tracking afresh (nothing changed).
    pub fn take(&mut self) -> Changed<S> {
        let all = std::mem::replace(&mut self.all, false);
        let keys = std::mem::take(&mut self.keys);
        if all {
            Changed::All
        } else {
            Changed::Keys(keys)
        }
    }

    /// State was replaced by a snapshot's: nothing changed relative to it.
    pub fn reset_clean(&mut self) {
        self.all = false;
        self.keys = HashMap::default();
    }
}

/// A stateful node's state (or what changed in it) captured for a snapshot:
/// cheap `Arc` clones of whole partitions and the recorded changes inside
/// others, taken under the graph lock and serialized after it is released.
pub(crate) struct Captured<P, X> {
    /// The whole state (`upserts` holds every partition; nothing else).
    pub full: bool,
    /// Partitions saved whole.
    pub upserts: Vec<(Vec<Value>, std::sync::Arc<P>)>,
    /// Changes inside partitions the previous epoch holds.
    pub patches: Vec<(Vec<Value>, X)>,
    /// Partitions that became holes since the previous capture.
    pub removed: Vec<Vec<Value>>,
}

impl<P, X> Captured<P, X> {
    /// Builds a capture from `changed` over a map of partitions: `get` gives
    /// a filled partition, `patch` the patch for recorded changes inside one.
    pub fn of<S>(
        changed: Changed<S>,
        get: impl Fn(&[Value]) -> Option<std::sync::Arc<P>>,
        patch: impl Fn(&P, S) -> X,
        all: impl FnOnce() -> Vec<(Vec<Value>, std::sync::Arc<P>)>,
    ) -> Captured<P, X> {
        match changed {
            Changed::All => Captured {
                full: true,
                upserts: all(),
                patches: vec![],
                removed: vec![],
            },
            Changed::Keys(keys) => {
                let mut c = Captured {
                    full: false,
                    upserts: vec![],
                    patches: vec![],
                    removed: vec![],
                };
                for (k, sub) in keys {
                    match (get(&k), sub) {
                        (None, _) => c.removed.push(k),
                        (Some(p), None) => c.upserts.push((k, p)),
                        (Some(p), Some(sub)) => {
                            let x = patch(&p, sub);
                            c.patches.push((k, x));
                        }
                    }
                }
                c
            }
        }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        !self.full && self.upserts.is_empty() && self.patches.is_empty() && self.removed.is_empty()
    }
}
