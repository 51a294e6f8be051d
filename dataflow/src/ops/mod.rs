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

use std::collections::HashMap;

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
