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

#[cfg(test)]
pub(crate) mod harness;

use std::collections::{HashMap, HashSet};

use ladle_common::{Collation, Row, RowDelta, TableId, Value};

pub(crate) use aggregate::{AggKind, AggSpec, Aggregate};
pub(crate) use filter::Filter;
pub(crate) use join::{Join, JoinKind};
pub(crate) use project::Project;
pub(crate) use reader::{Reader, ReaderState};
pub(crate) use union::Union;

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
    Reader(Reader),
    /// Constant rows: never changes.
    Values(Vec<Row>),
    /// A removed node (ids stay stable).
    Removed,
}

impl Op {
    /// One-line description for EXPLAIN.
    pub fn describe(&self) -> String {
        match self {
            Op::Base { name, table } => format!("Base {name} (table {table})"),
            Op::Filter(f) => f.to_string(),
            Op::Project(p) => p.to_string(),
            Op::Join(j) => j.to_string(),
            Op::Aggregate(a) => a.to_string(),
            Op::Union(u) => u.to_string(),
            Op::Reader(r) => r.to_string(),
            Op::Values(rows) => format!("Values ({} rows)", rows.len()),
            Op::Removed => "Removed".into(),
        }
    }

    /// Bytes of state held.
    pub fn state_bytes(&self) -> usize {
        match self {
            Op::Aggregate(a) => a.state_bytes(),
            Op::Reader(r) => r.shared.bytes(),
            _ => 0,
        }
    }
}

/// Approximate heap size of a row.
pub(crate) fn row_bytes(r: &[Value]) -> usize {
    48 + r
        .iter()
        .map(|v| {
            24 + match v {
                Value::Text(s) => s.len() + 16,
                Value::Bytes(b) => b.len() + 16,
                _ => 0,
            }
        })
        .sum::<usize>()
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
    let mut counts: HashMap<Row, i64> = HashMap::new();
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

/// The partition keys of a stateful node changed (filled, updated, evicted
/// or cleared) since its state was last captured for a snapshot, so the
/// next snapshot epoch writes only those (see `crate::snapshot`).
///
/// `all` means "write the whole state": there is no previous capture, or
/// tracking gave up because more keys changed than the node holds (which
/// also bounds the set's memory when snapshots are never taken).
#[derive(Clone, Debug)]
pub(crate) struct DirtyKeys {
    keys: HashSet<Vec<Value>>,
    all: bool,
}

/// What changed since the last capture.
pub(crate) enum Changed {
    All,
    Keys(HashSet<Vec<Value>>),
}

impl Default for DirtyKeys {
    fn default() -> DirtyKeys {
        DirtyKeys {
            keys: HashSet::new(),
            all: true,
        }
    }
}

impl DirtyKeys {
    /// Records that partition `key` (normalized) changed; `filled` is how
    /// many partitions the node holds now.
    pub fn mark(&mut self, key: &[Value], filled: usize) {
        if self.all || self.keys.contains(key) {
            return;
        }
        self.keys.insert(key.to_vec());
        if self.keys.len() > filled.max(1024) {
            self.mark_all();
        }
    }

    pub fn mark_all(&mut self) {
        self.all = true;
        self.keys = HashSet::new();
    }

    /// Hands over the changes and starts tracking afresh (nothing changed).
    pub fn take(&mut self) -> Changed {
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
        self.keys = HashSet::new();
    }
}

/// A stateful node's state (or the part of it that changed) captured for a
/// snapshot: cheap `Arc` clones of partitions, taken under the graph lock
/// and serialized after it is released.
pub(crate) struct Captured<P> {
    /// The whole state (`upserts` holds every partition, `removed` is empty).
    pub full: bool,
    pub upserts: Vec<(Vec<Value>, std::sync::Arc<P>)>,
    /// Partitions that became holes since the previous capture.
    pub removed: Vec<Vec<Value>>,
}

impl<P> Captured<P> {
    /// Builds a capture from `changed` over a map of partitions.
    pub fn of(
        changed: Changed,
        get: impl Fn(&[Value]) -> Option<std::sync::Arc<P>>,
        all: impl FnOnce() -> Vec<(Vec<Value>, std::sync::Arc<P>)>,
    ) -> Captured<P> {
        match changed {
            Changed::All => Captured {
                full: true,
                upserts: all(),
                removed: vec![],
            },
            Changed::Keys(keys) => {
                let mut upserts = Vec::new();
                let mut removed = Vec::new();
                for k in keys {
                    match get(&k) {
                        Some(p) => upserts.push((k, p)),
                        None => removed.push(k),
                    }
                }
                Captured {
                    full: false,
                    upserts,
                    removed,
                }
            }
        }
    }
}
