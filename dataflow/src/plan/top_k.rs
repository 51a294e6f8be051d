//! A view's `ORDER BY ... LIMIT` taken below the LEFT JOINs that cannot
//! change it, so the view keeps (and joins) only each key's first rows.
//!
//! Lobsters' recent comments, `SELECT c.*, COALESCE(v.score, 0) FROM
//! comments c LEFT JOIN (SELECT comment_id, SUM(vote) ... GROUP BY
//! comment_id) v ON v.comment_id = c.id WHERE c.is_deleted = ? AND ...
//! ORDER BY c.id DESC LIMIT 40`, otherwise keeps all 120k comments joined
//! with their vote counts under one reader key, and its cold fill aggregates
//! every vote. Each comment gives exactly one joined row (the right side has
//! at most one row per join key), and the order and key read only comment
//! columns, so the first 40 joined rows are the first 40 comments' rows: a
//! top-k [`LOp::Window`] over the comments, partitioned by the reader key,
//! finds them, and only those are joined.
//!
//! The window keeps `k` rows per partition flowing on, where `k` bounds
//! the LIMIT plus OFFSET of every read of the view (the engine puts it in
//! the view's signature), so the reader's own ORDER BY / OFFSET / LIMIT
//! still pick the answer from them.

use ladle_common::{Collation, Value};

use super::{LNode, LOp, PlannedView};
use crate::expr::Expr;
use crate::ops::reader::OrderSpec;
use crate::ops::JoinKind;

/// The largest `k` worth a top-k: past it the window keeps nearly what the
/// reader would, and every change to a partition re-emits up to `k` rows.
pub(crate) const MAX_TOP_K: usize = 1024;

/// The window size serving a read of `limit` rows after `offset`: a power of
/// two, so nearby limits share one view, or `None` past [`MAX_TOP_K`].
pub(crate) fn bound(limit: u64, offset: u64) -> Option<usize> {
    let rows = usize::try_from(limit.checked_add(offset)?).ok()?;
    let k = rows.max(64).checked_next_power_of_two()?;
    (k <= MAX_TOP_K).then_some(k)
}

/// Puts a top-`k` window below the LEFT JOINs of `pv` that keep one row per
/// left row, when its key and order read only their left inputs; returns
/// whether it did. Every read of the view must take at most `k` rows
/// (LIMIT plus OFFSET) per key.
pub(crate) fn push_below_left_joins(pv: &mut PlannedView, k: usize) -> bool {
    let reads_rows_as_stored = pv.read_filter.is_none()
        && pv.finish.is_none()
        && pv.range.is_none()
        && !pv.dedup
        && pv.empty_default.is_none();
    // Without a key the window would keep one partition for the whole
    // input, which a miss must fill under the graph lock (see
    // `Graph::detach`): the whole-table fill this is meant to avoid.
    if !reads_rows_as_stored || pv.key.is_empty() || pv.order.is_empty() || pv.limit.is_none() {
        return false;
    }
    let wanted = Wanted {
        partition: pv.key.clone(),
        order: pv.order.clone(),
        read: vec![true; pv.plan.width()],
    };
    descend(&mut pv.plan, wanted, k, false)
}

/// What the rows of one node must give the window: its partition and order
/// columns, and which columns anything above reads.
#[derive(Clone, Debug)]
struct Wanted {
    partition: Vec<usize>,
    order: OrderSpec,
    read: Vec<bool>,
}

impl Wanted {
    /// The same wants of a projection's input, if every partition and order
    /// column is an input column.
    fn through_project(&self, es: &[Expr], input_width: usize) -> Option<Wanted> {
        let column = |c: usize| match es.get(c) {
            Some(Expr::Column(i)) => Some(*i),
            _ => None,
        };
        let mut read = vec![false; input_width];
        for (c, e) in es.iter().enumerate() {
            if self.read.get(c).copied().unwrap_or(true) {
                for i in e.columns() {
                    *read.get_mut(i)? = true;
                }
            }
        }
        Some(Wanted {
            partition: self
                .partition
                .iter()
                .map(|&c| column(c))
                .collect::<Option<_>>()?,
            order: self
                .order
                .iter()
                .map(|&(c, desc, coll)| Some((column(c)?, desc, coll)))
                .collect::<Option<_>>()?,
            read,
        })
    }

    /// The wants of a join's left input (`lw` wide), if the partition and
    /// order lie within it.
    fn left_of(&self, lw: usize, left_cols: &[usize]) -> Option<Wanted> {
        let within = |c: &usize| *c < lw;
        if !self.partition.iter().all(within) || !self.order.iter().all(|o| within(&o.0)) {
            return None;
        }
        let mut read = self.read[..lw.min(self.read.len())].to_vec();
        read.resize(lw, true);
        for &c in left_cols {
            *read.get_mut(c)? = true;
        }
        Some(Wanted {
            partition: self.partition.clone(),
            order: self.order.clone(),
            read,
        })
    }
}

/// Walks down from `node` through projections and qualifying LEFT JOINs'
/// left inputs; places the window at the lowest point reached below a join.
fn descend(node: &mut LNode, wanted: Wanted, k: usize, below_join: bool) -> bool {
    let next = match &node.op {
        LOp::Project(es) => wanted
            .through_project(es, node.inputs[0].width())
            .map(|w| (w, below_join)),
        LOp::Join {
            kind: JoinKind::Left,
            left_cols,
            right_cols,
        } if unique_on(&node.inputs[1], &join_keys(node, left_cols, right_cols))
            && looked_up_by_index(&node.inputs[0], left_cols) =>
        {
            wanted
                .left_of(node.inputs[0].width(), left_cols)
                .map(|w| (w, true))
        }
        _ => None,
    };
    if let Some((w, below)) = next {
        if descend(&mut node.inputs[0], w, k, below) {
            return true;
        }
    }
    // Below a filter that marks the rows whose WHERE overflowed, a
    // projection may carry the mark in an ORDER BY column, and the window
    // would order by it.
    if below_join && !node.may_mark_rows() {
        place(node, wanted, k);
        return true;
    }
    false
}

/// The right input's join columns, each with the collation the join
/// compares it under (its left partner's).
fn join_keys(join: &LNode, left_cols: &[usize], right_cols: &[usize]) -> Vec<(usize, Collation)> {
    let left = &join.inputs[0].colls;
    right_cols
        .iter()
        .zip(left_cols)
        .map(|(&r, l)| (r, left.get(*l).copied().unwrap_or_default()))
        .collect()
}

/// Replaces `node` by a top-`k` window over it, reading only the columns
/// something above reads (the others become NULL, so a base table's scan
/// decodes none of its unread TEXT columns, and the window keeps none).
fn place(node: &mut LNode, wanted: Wanted, k: usize) {
    let colls = node.colls.clone();
    let mut input = LNode::take(node);
    if wanted.read.iter().any(|r| !r) {
        let es = (0..input.width())
            .map(|c| match wanted.read.get(c) {
                Some(false) => Expr::Literal(Value::Null),
                _ => Expr::Column(c),
            })
            .collect();
        input = LNode {
            op: LOp::Project(es),
            inputs: vec![input],
            colls: colls.clone(),
        };
    }
    *node = LNode {
        op: LOp::Window {
            partition: wanted.partition,
            order: wanted.order,
            funcs: vec![],
            offset: 0,
            limit: Some(k),
            frame: None,
        },
        inputs: vec![input],
        colls,
    };
}

/// Whether `node` has at most one row matching any values of its columns
/// `keys` compared under their collations: a group of an aggregate grouped
/// by (a subset of) them under the same or a finer collation, or a base
/// table's row by a primary or unique key over integer columns (text keys
/// may match under a collation other than the index's).
fn unique_on(node: &LNode, keys: &[(usize, Collation)]) -> bool {
    let has = |c: usize| keys.iter().any(|k| k.0 == c);
    match &node.op {
        LOp::Aggregate { ngroup, .. } => (0..*ngroup).all(|g| {
            keys.iter().any(|&(c, coll)| {
                c == g && (coll == Collation::Binary || Some(&coll) == node.colls.get(g))
            })
        }),
        LOp::Filter(_) => unique_on(&node.inputs[0], keys),
        LOp::Project(es) => {
            let mapped: Vec<(usize, Collation)> = keys
                .iter()
                .filter_map(|&(c, coll)| match es.get(c) {
                    Some(Expr::Column(i)) => Some((*i, coll)),
                    _ => None,
                })
                .collect();
            unique_on(&node.inputs[0], &mapped)
        }
        LOp::Base(s) => {
            let integer = |c: &usize| s.columns.get(*c).is_some_and(|col| col.ty.is_integer());
            let covered = |key: &[usize]| !key.is_empty() && key.iter().all(|&c| has(c));
            let mut unique_keys = s.primary_key.iter().map(|pk| &pk[..]).chain(
                s.indexes
                    .iter()
                    .filter(|i| i.unique)
                    .map(|i| &i.columns[..]),
            );
            unique_keys.any(|key| covered(key) && key.iter().all(integer))
        }
        _ => false,
    }
}

/// Whether a lookup of `node` by `cols` reaches a base table's index (the
/// join finds a changed right row's left partner this way: the window is
/// looked up by it on every write to the right side).
fn looked_up_by_index(node: &LNode, cols: &[usize]) -> bool {
    match &node.op {
        LOp::Filter(_) => looked_up_by_index(&node.inputs[0], cols),
        LOp::Project(es) => cols
            .iter()
            .map(|&c| match es.get(c) {
                Some(Expr::Column(i)) => Some(*i),
                _ => None,
            })
            .collect::<Option<Vec<usize>>>()
            .is_some_and(|m| looked_up_by_index(&node.inputs[0], &m)),
        LOp::Base(s) => {
            let leads = |key: &[usize]| key.first().is_some_and(|c| cols.contains(c));
            s.primary_key.as_deref().is_some_and(leads)
                || s.indexes.iter().any(|i| leads(&i.columns))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
