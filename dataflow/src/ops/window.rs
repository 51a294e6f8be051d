//! Window: keeps each window partition's rows in order and emits either
//! window function values appended to each row (ROW_NUMBER, RANK,
//! DENSE_RANK, aggregates over MySQL's default frame, LAG/LEAD), or only
//! the rows at positions `[offset, offset + limit)` of each partition
//! (top-k: `ORDER BY ... LIMIT` of a UNION branch or derived table).
//!
//! Input rows pass whole; output rows are `[input columns..., one column
//! per function]` (a top-k has no functions, so its rows are the input's).
//!
//! State is partial, partitioned by `key` (a subset of the PARTITION BY
//! columns; empty = one state partition). A state partition is either
//! absent (a hole: deltas for it are dropped) or holds every window
//! partition with that key, each as a `BTreeMap` ordered by the ORDER BY
//! values (normalized under their collations, DESC reversed) and then the
//! whole row, with a count per distinct row: an insert or delete is
//! located in O(log n). A change at position p re-emits the partition's
//! rows from p's peer group on (less the largest LEAD offset), because
//! their ROW_NUMBER, RANK or running aggregate change with it: that output
//! is inherent. Under a LIMIT only positions inside the window are
//! emitted, so a change costs O(log n + k) and at most one row enters and
//! one leaves it.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use ladle_common::{Collation, Row, RowDelta, Value};
use serde::{Serialize, Serializer};

use super::aggregate::AggSpec;
use super::reader::OrderSpec;
use super::{diff_rows, norm_key, project_cols, row_bytes, Aggregate, Captured, DirtyKeys};
use crate::hash::HashMap;

/// One window function, computed over the rows of the current row's
/// partition in ORDER BY order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum WinFn {
    RowNumber,
    Rank,
    DenseRank,
    /// An aggregate over the default frame: with ORDER BY, the partition's
    /// rows up to the current row and its peers; without, all of them.
    /// `spec.col` is the argument's input column.
    Agg(AggSpec),
    /// LAG (`lead` false) or LEAD of input column `col`, `offset` rows
    /// away; `default` past the partition's edge.
    Shift {
        col: usize,
        offset: usize,
        lead: bool,
        default: Value,
    },
    /// FIRST_VALUE (`nth` 1), NTH_VALUE (`nth`) or LAST_VALUE
    /// (`from_last`, `nth` 1) of input column `col` over the frame (the
    /// default frame, or the window's explicit one); NULL past its edge.
    Nth {
        col: usize,
        nth: usize,
        from_last: bool,
    },
    /// (RANK - 1) / (rows - 1), 0 for a partition of one row.
    PercentRank,
    /// Rows up to and including the current row's peers / rows.
    CumeDist,
    /// The current row's bucket of `n` nearly equal ones (the first
    /// `rows % n` one row larger).
    Ntile(usize),
}

impl WinFn {
    /// Whether its value depends on the partition's size (every row
    /// changes when a row comes or goes).
    fn reads_size(&self) -> bool {
        matches!(self, WinFn::PercentRank | WinFn::CumeDist | WinFn::Ntile(_))
    }

    /// Whether it reads the frame.
    fn framed(&self) -> bool {
        matches!(self, WinFn::Agg(_) | WinFn::Nth { .. })
    }
}

/// An explicit frame's bound: a row count (ROWS) or a distance in the
/// ORDER BY value (RANGE).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Bound {
    UnboundedPreceding,
    Preceding(f64),
    CurrentRow,
    Following(f64),
    UnboundedFollowing,
}

/// An explicit window frame (`ROWS|RANGE BETWEEN start AND end`) for the
/// aggregate functions; RANGE with a distance needs one ORDER BY value,
/// a number.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Frame {
    pub rows: bool,
    pub start: Bound,
    pub end: Bound,
}

/// One ORDER BY value as the ordered state keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SortVal {
    v: Value,
    desc: bool,
}

impl Ord for SortVal {
    fn cmp(&self, o: &SortVal) -> Ordering {
        let c = self.v.cmp(&o.v);
        if self.desc {
            c.reverse()
        } else {
            c
        }
    }
}

impl PartialOrd for SortVal {
    fn partial_cmp(&self, o: &SortVal) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A row's place in its partition: ORDER BY values, then the row itself
/// (a total order, so equal-sorting rows have a stable position).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    sort: Vec<SortVal>,
    row: Row,
}

/// One window partition's rows in order, each distinct row with its count.
type Ordered = BTreeMap<Entry, usize>;

/// One filled state partition: window partition key (normalized) -> its
/// rows. Saved in snapshots as the multiset of its input rows.
#[derive(Clone, Debug, Default)]
pub(crate) struct Partition {
    windows: HashMap<Vec<Value>, Ordered>,
    /// Input rows held (with multiplicity).
    rows: usize,
}

impl Partition {
    /// Input rows held (with multiplicity).
    pub fn len(&self) -> usize {
        self.rows
    }

    fn input_rows(&self) -> impl Iterator<Item = &Row> {
        self.windows
            .values()
            .flat_map(|o| o.iter())
            .flat_map(|(e, &n)| std::iter::repeat_n(&e.row, n))
    }
}

impl Serialize for Partition {
    /// As the sequence of its input rows: what `Vec<Row>` encodes to.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        // Postcard needs the length first: the iterator's is not exact.
        let mut seq = s.serialize_seq(Some(self.rows))?;
        for r in self.input_rows() {
            seq.serialize_element(r)?;
        }
        seq.end()
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Window {
    /// PARTITION BY input columns.
    pub partition: Vec<usize>,
    /// ORDER BY: input column, descending, collation.
    pub order: OrderSpec,
    /// Window functions, one output column each after the input's.
    pub funcs: Vec<WinFn>,
    /// Only positions `[offset, offset + limit)` of each partition pass.
    pub offset: usize,
    pub limit: Option<usize>,
    /// Collations of the input columns.
    pub colls: Vec<Collation>,
    /// Input columns partitioning the state (a subset of `partition`).
    pub key: Vec<usize>,
    /// The aggregates' explicit frame (default: MySQL's, see [`WinFn::Agg`]).
    pub frame: Option<Frame>,
    /// Computes the `Agg` functions (their specs, in order).
    aggs: Aggregate,
    /// Normalized state key -> partition; copy-on-write so a snapshot
    /// captures them by reference.
    state: HashMap<Vec<Value>, Arc<Partition>>,
    bytes: usize,
    /// Partitions changed since the last capture (and the row deltas
    /// applied inside large ones).
    dirty: DirtyKeys<Vec<RowDelta>>,
}

impl Window {
    /// Checks that every column named exists in an input `colls.len()`
    /// wide.
    pub fn try_new(
        partition: Vec<usize>,
        order: OrderSpec,
        funcs: Vec<WinFn>,
        offset: usize,
        limit: Option<usize>,
        colls: Vec<Collation>,
    ) -> crate::Result<Window> {
        let width = colls.len();
        let cols = partition
            .iter()
            .copied()
            .chain(order.iter().map(|o| o.0))
            .chain(funcs.iter().filter_map(|f| match f {
                WinFn::Agg(a) => Some(a.col),
                WinFn::Shift { col, .. } => Some(*col),
                _ => None,
            }));
        for c in cols {
            if c >= width {
                return Err(crate::DataflowError::Internal(format!(
                    "window column {c} of an input {width} wide"
                )));
            }
        }
        let specs = funcs
            .iter()
            .filter_map(|f| match f {
                WinFn::Agg(a) => Some(a.clone()),
                _ => None,
            })
            .collect();
        Ok(Window {
            partition,
            order,
            funcs,
            offset,
            limit,
            colls,
            key: vec![],
            frame: None,
            aggs: Aggregate::new(0, specs, vec![], true),
            state: HashMap::default(),
            bytes: 0,
            dirty: DirtyKeys::default(),
        })
    }

    /// The same operator with no state (every partition a hole).
    pub fn stateless_copy(&self) -> Window {
        Window {
            partition: self.partition.clone(),
            order: self.order.clone(),
            funcs: self.funcs.clone(),
            offset: self.offset,
            limit: self.limit,
            colls: self.colls.clone(),
            key: self.key.clone(),
            frame: self.frame.clone(),
            aggs: self.aggs.stateless_copy(),
            state: HashMap::default(),
            bytes: 0,
            dirty: DirtyKeys::default(),
        }
    }

    pub fn state_bytes(&self) -> usize {
        self.bytes
    }

    pub fn filled_keys(&self) -> usize {
        self.state.len()
    }

    /// Drops every partition (all holes).
    pub fn clear(&mut self) {
        if !self.state.is_empty() {
            self.dirty.mark_all();
        }
        self.state.clear();
        self.bytes = 0;
    }

    /// The partitions changed since the previous call (all of them the
    /// first time), by reference.
    pub fn capture(&mut self) -> Captured<Partition, Vec<RowDelta>> {
        let changed = self.dirty.take();
        Captured::of(
            changed,
            |k| self.state.get(k).cloned(),
            |_, log| log,
            || {
                self.state
                    .iter()
                    .map(|(k, p)| (k.clone(), p.clone()))
                    .collect()
            },
        )
    }

    /// Forces the next capture to be full.
    pub fn mark_all_dirty(&mut self) {
        self.dirty.mark_all();
    }

    /// Replaces the state by `parts` (state key -> input rows, restored
    /// from a snapshot); the partitions not in it are holes.
    pub fn restore(&mut self, parts: Vec<(Vec<Value>, Vec<Row>)>) {
        self.state.clear();
        self.bytes = 0;
        for (pk, rows) in parts {
            let part = self.build(rows);
            self.state.insert(pk, Arc::new(part));
        }
        self.dirty.reset_clean();
    }

    fn coll(&self, c: usize) -> Collation {
        self.colls.get(c).copied().unwrap_or(Collation::Binary)
    }

    fn state_key_of(&self, row: &[Value]) -> Vec<Value> {
        let colls: Vec<Collation> = self.key.iter().map(|&c| self.coll(c)).collect();
        norm_key(&project_cols(row, &self.key), &colls)
    }

    fn window_key_of(&self, row: &[Value]) -> Vec<Value> {
        let colls: Vec<Collation> = self.partition.iter().map(|&c| self.coll(c)).collect();
        norm_key(&project_cols(row, &self.partition), &colls)
    }

    fn sort_of(&self, row: &[Value]) -> Vec<SortVal> {
        self.order
            .iter()
            .map(|&(c, desc, coll)| SortVal {
                v: row.get(c).unwrap_or(&Value::Null).key_normalized(coll),
                desc,
            })
            .collect()
    }

    /// One past the last position a partition emits.
    fn end(&self) -> usize {
        self.limit
            .map_or(usize::MAX, |l| self.offset.saturating_add(l))
    }

    /// How many rows before a changed one's peer group read it (LEAD's
    /// offset, a frame reaching past the current row).
    fn max_lead(&self) -> usize {
        let frame = match &self.frame {
            Some(f) if self.funcs.iter().any(WinFn::framed) => match (&f.end, f.rows) {
                (Bound::CurrentRow | Bound::Preceding(_) | Bound::UnboundedPreceding, _) => 0,
                (Bound::Following(n), true) => *n as usize,
                _ => usize::MAX,
            },
            _ => 0,
        };
        self.funcs
            .iter()
            .map(|f| match f {
                WinFn::Shift {
                    offset, lead: true, ..
                } => *offset,
                _ => 0,
            })
            .chain([frame])
            .chain(
                self.funcs
                    .iter()
                    .filter(|f| f.reads_size())
                    .map(|_| usize::MAX),
            )
            .max()
            .unwrap_or(0)
    }

    /// The rows `[lo, hi)` of the frame of the row at `p`, whose peers are
    /// `[i, j)`.
    fn frame_range(
        &self,
        f: &Frame,
        rows: &[&Entry],
        p: usize,
        i: usize,
        j: usize,
    ) -> (usize, usize) {
        let n = rows.len();
        let count = |d: f64| d as usize;
        let lo = match f.start {
            Bound::UnboundedPreceding => 0,
            Bound::UnboundedFollowing => n,
            Bound::CurrentRow if f.rows => p,
            Bound::CurrentRow => i,
            Bound::Preceding(d) if f.rows => p.saturating_sub(count(d)),
            Bound::Following(d) if f.rows => p.saturating_add(count(d)),
            Bound::Preceding(d) => self.range_edge(rows, p, -d, true).unwrap_or(i),
            Bound::Following(d) => self.range_edge(rows, p, d, true).unwrap_or(i),
        };
        let hi = match f.end {
            Bound::UnboundedPreceding => 0,
            Bound::UnboundedFollowing => n,
            Bound::CurrentRow if f.rows => p + 1,
            Bound::CurrentRow => j,
            Bound::Preceding(d) if f.rows => (p + 1).saturating_sub(count(d)),
            Bound::Following(d) if f.rows => p.saturating_add(count(d)).saturating_add(1),
            Bound::Preceding(d) => self.range_edge(rows, p, -d, false).unwrap_or(j),
            Bound::Following(d) => self.range_edge(rows, p, d, false).unwrap_or(j),
        };
        let lo = lo.min(n);
        (lo, hi.min(n).max(lo))
    }

    /// RANGE: the first row (`start`) or one past the last row whose ORDER
    /// BY value is within `delta` of row `p`'s, in the order's direction;
    /// `None` when `p`'s value is NULL (its frame is its peers).
    fn range_edge(&self, rows: &[&Entry], p: usize, delta: f64, start: bool) -> Option<usize> {
        let desc = self.order.first().is_some_and(|o| o.1);
        let pos = |e: &Entry| -> f64 {
            match e.sort.first().map(|s| &s.v) {
                None | Some(Value::Null) => {
                    if desc {
                        f64::INFINITY
                    } else {
                        f64::NEG_INFINITY
                    }
                }
                Some(v) => {
                    let x = crate::expr::value_to_f64(v).unwrap_or(0.0);
                    if desc {
                        -x
                    } else {
                        x
                    }
                }
            }
        };
        if matches!(rows[p].sort.first().map(|s| &s.v), None | Some(Value::Null)) {
            return None;
        }
        let t = pos(rows[p]) + delta;
        Some(if start {
            rows.partition_point(|q| pos(q) < t)
        } else {
            rows.partition_point(|q| pos(q) <= t)
        })
    }

    /// A partition holding `rows`; charged to the state's bytes.
    fn build(&mut self, rows: Vec<Row>) -> Partition {
        let mut part = Partition::default();
        for row in rows {
            self.insert(&mut part, row);
        }
        self.bytes += 64;
        part
    }

    /// Adds `row` to `part` (accounting its bytes).
    fn insert(&mut self, part: &mut Partition, row: Row) {
        let wk = self.window_key_of(&row);
        let e = Entry {
            sort: self.sort_of(&row),
            row,
        };
        let ord = part.windows.entry(wk).or_default();
        part.rows += 1;
        match ord.get_mut(&e) {
            Some(n) => *n += 1,
            None => {
                self.bytes += entry_bytes(&e);
                ord.insert(e, 1);
            }
        }
    }

    /// Rows of `ord` that sort before `sort` (the start of its peer group),
    /// counted up to `cap`.
    fn count_before(ord: &Ordered, sort: &[SortVal], cap: usize) -> usize {
        let bound = Entry {
            sort: sort.to_vec(),
            row: vec![],
        };
        let mut n = 0;
        for (_, c) in ord.range(..bound) {
            n += c;
            if n >= cap {
                break;
            }
        }
        n
    }

    /// The output rows of window partition `ord` at positions from `from`
    /// on (inside the LIMIT), appended to `out`.
    fn emit(&self, ord: &Ordered, from: usize, out: &mut Vec<Row>) {
        let start = from.max(self.offset);
        let end = self.end();
        if start >= end {
            return;
        }
        if self.funcs.is_empty() {
            let mut pos = 0usize;
            for (e, &n) in ord {
                if pos >= end {
                    break;
                }
                for _ in 0..n {
                    if pos >= start && pos < end {
                        out.push(e.row.clone());
                    }
                    pos += 1;
                }
            }
            return;
        }
        let rows: Vec<&Entry> = ord
            .iter()
            .flat_map(|(e, &n)| std::iter::repeat_n(e, n))
            .collect();
        let mut acc = (!self.aggs.aggs.is_empty()).then(|| self.aggs.accumulator());
        let mut agg_vals: Row = Vec::new();
        let mut dense = 0i64;
        let mut i = 0;
        while i < rows.len() && i < end {
            // The peer group [i, j): rows equal in ORDER BY.
            let mut j = i + 1;
            while j < rows.len() && rows[j].sort == rows[i].sort {
                j += 1;
            }
            dense += 1;
            let rank = i as i64 + 1;
            if let (Some(g), None) = (&mut acc, &self.frame) {
                for r in &rows[i..j] {
                    self.aggs.accumulate(g, &r.row);
                }
                if j > start {
                    agg_vals = self.aggs.values(g);
                }
            }
            for (p, r) in rows.iter().enumerate().take(j.min(end)).skip(i.max(start)) {
                if let (Some(_), Some(f)) = (&acc, &self.frame) {
                    // An explicit frame: its rows aggregated afresh.
                    let (lo, hi) = self.frame_range(f, &rows, p, i, j);
                    let mut g = self.aggs.accumulator();
                    for q in &rows[lo..hi] {
                        self.aggs.accumulate(&mut g, &q.row);
                    }
                    agg_vals = self.aggs.values(&g);
                }
                let mut row = r.row.clone();
                let mut next_agg = agg_vals.iter();
                for f in &self.funcs {
                    row.push(match f {
                        WinFn::RowNumber => Value::Int(p as i64 + 1),
                        WinFn::Rank => Value::Int(rank),
                        WinFn::DenseRank => Value::Int(dense),
                        WinFn::Agg(_) => next_agg.next().cloned().unwrap_or(Value::Null),
                        WinFn::Shift {
                            col,
                            offset,
                            lead,
                            default,
                        } => {
                            let q = if *lead {
                                p.checked_add(*offset)
                            } else {
                                p.checked_sub(*offset)
                            };
                            match q.and_then(|q| rows.get(q)) {
                                Some(e) => e.row.get(*col).cloned().unwrap_or(Value::Null),
                                None => default.clone(),
                            }
                        }
                        WinFn::Nth {
                            col,
                            nth,
                            from_last,
                        } => {
                            let (lo, hi) = match &self.frame {
                                Some(f) => self.frame_range(f, &rows, p, i, j),
                                None => (0, j),
                            };
                            let q = if *from_last {
                                hi.checked_sub(*nth).filter(|q| *q >= lo)
                            } else {
                                lo.checked_add(nth - 1).filter(|q| *q < hi)
                            };
                            q.and_then(|q| rows[q].row.get(*col).cloned())
                                .unwrap_or(Value::Null)
                        }
                        WinFn::PercentRank => Value::Double(if rows.len() > 1 {
                            (rank - 1) as f64 / (rows.len() - 1) as f64
                        } else {
                            0.0
                        }),
                        WinFn::CumeDist => Value::Double(j as f64 / rows.len() as f64),
                        WinFn::Ntile(n) => Value::Int(ntile(p, rows.len(), *n) as i64),
                    });
                }
                out.push(row);
            }
            i = j;
        }
    }

    /// Pure core: updates filled partitions, returns output deltas.
    pub fn on_input(&mut self, deltas: Vec<RowDelta>) -> Vec<RowDelta> {
        // Per touched window partition: its smallest changed ORDER BY values.
        let mut touched: Vec<(Vec<Value>, Vec<Value>, Vec<SortVal>)> = Vec::new();
        let mut index: HashMap<(Vec<Value>, Vec<Value>), usize> = HashMap::default();
        let mut kept = Vec::with_capacity(deltas.len());
        for d in deltas {
            let sk = self.state_key_of(d.row());
            if !self.state.contains_key(&sk) {
                continue;
            }
            let wk = self.window_key_of(d.row());
            let sort = self.sort_of(d.row());
            match index.entry((sk.clone(), wk.clone())) {
                std::collections::hash_map::Entry::Occupied(e) => {
                    let t = &mut touched[*e.get()];
                    if sort < t.2 {
                        t.2 = sort;
                    }
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(touched.len());
                    touched.push((sk, wk, sort));
                }
            }
            kept.push(d);
        }
        if kept.is_empty() {
            return vec![];
        }
        // Rows before each partition's first change keep their output.
        let lead = self.max_lead();
        let mut old = Vec::new();
        let mut froms = Vec::with_capacity(touched.len());
        for (sk, wk, min) in &touched {
            let from = match self.state.get(sk).and_then(|p| p.windows.get(wk)) {
                Some(ord) => {
                    let from = Self::count_before(ord, min, self.end()).saturating_sub(lead);
                    self.emit(ord, from, &mut old);
                    from
                }
                None => 0,
            };
            froms.push(from);
        }
        for d in kept {
            self.apply(d);
        }
        let mut new = Vec::new();
        for ((sk, wk, _), from) in touched.iter().zip(froms) {
            if let Some(ord) = self.state.get(sk).and_then(|p| p.windows.get(wk)) {
                self.emit(ord, from, &mut new);
            }
        }
        diff_rows(old, new)
    }

    /// Applies one delta to its (filled) state partition.
    fn apply(&mut self, d: RowDelta) {
        let sk = self.state_key_of(d.row());
        let wk = self.window_key_of(d.row());
        let sort = self.sort_of(d.row());
        let filled = self.state.len();
        let Some(part) = self.state.get_mut(&sk) else {
            return;
        };
        let size = part.rows;
        let part = Arc::make_mut(part);
        let e = Entry {
            sort,
            row: d.row().clone(),
        };
        let applied = match &d {
            RowDelta::Insert(_) => {
                let ord = part.windows.entry(wk).or_default();
                match ord.get_mut(&e) {
                    Some(n) => *n += 1,
                    None => {
                        self.bytes += entry_bytes(&e);
                        ord.insert(e, 1);
                    }
                }
                part.rows += 1;
                true
            }
            RowDelta::Delete(_) => {
                let Some(ord) = part.windows.get_mut(&wk) else {
                    return;
                };
                let Some(n) = ord.get_mut(&e) else {
                    return;
                };
                *n -= 1;
                if *n == 0 {
                    ord.remove(&e);
                    self.bytes = self.bytes.saturating_sub(entry_bytes(&e));
                    if ord.is_empty() {
                        part.windows.remove(&wk);
                    }
                }
                part.rows -= 1;
                true
            }
        };
        if applied {
            self.dirty.mark_inside(&sk, filled, size, |log| {
                log.push(d);
                log.len() * 2 <= size
            });
        }
    }

    /// Whether state partition `key` (values of the key columns) is filled.
    pub fn is_filled(&self, key: &[Value]) -> bool {
        let colls: Vec<Collation> = self.key.iter().map(|&c| self.coll(c)).collect();
        self.state.contains_key(&norm_key(key, &colls))
    }

    /// State partition `key`'s output rows, or `None` for a hole.
    pub fn lookup(&self, key: &[Value]) -> Option<Vec<Row>> {
        let colls: Vec<Collation> = self.key.iter().map(|&c| self.coll(c)).collect();
        let part = self.state.get(&norm_key(key, &colls))?;
        let mut out = Vec::new();
        for ord in part.windows.values() {
            self.emit(ord, 0, &mut out);
        }
        Some(out)
    }

    /// State partition `key`'s output rows that `keep` accepts, or `None`
    /// for a hole; a top-k clones no other row (the join above it looks
    /// one row up by its join key on every write to its other side).
    pub fn lookup_matching(&self, key: &[Value], keep: impl Fn(&Row) -> bool) -> Option<Vec<Row>> {
        if !self.funcs.is_empty() {
            let rows = self.lookup(key)?;
            return Some(rows.into_iter().filter(|r| keep(r)).collect());
        }
        let colls: Vec<Collation> = self.key.iter().map(|&c| self.coll(c)).collect();
        let part = self.state.get(&norm_key(key, &colls))?;
        let (start, end) = (self.offset, self.end());
        let mut out = Vec::new();
        for ord in part.windows.values() {
            let mut pos = 0usize;
            for (e, &n) in ord {
                if pos >= end {
                    break;
                }
                let inside = pos.max(start)..(pos + n).min(end);
                if !inside.is_empty() && keep(&e.row) {
                    out.extend(std::iter::repeat_n(e.row.clone(), inside.len()));
                }
                pos += n;
            }
        }
        Some(out)
    }

    /// Fills state partition `key` from every input row with that key;
    /// returns its output rows.
    pub fn fill(&mut self, key: &[Value], rows: Vec<Row>) -> Vec<Row> {
        let colls: Vec<Collation> = self.key.iter().map(|&c| self.coll(c)).collect();
        let pk = norm_key(key, &colls);
        let part = self.build(rows);
        let mut out = Vec::new();
        for ord in part.windows.values() {
            self.emit(ord, 0, &mut out);
        }
        self.dirty.mark(&pk, self.state.len() + 1);
        if let Some(old) = self.state.insert(pk, Arc::new(part)) {
            self.bytes = self.bytes.saturating_sub(partition_bytes(&old));
        }
        out
    }

    /// State partition `key` as filled here, shared (see [`Window::install`]).
    pub fn partition(&self, key: &[Value]) -> Option<Arc<Partition>> {
        let colls: Vec<Collation> = self.key.iter().map(|&c| self.coll(c)).collect();
        self.state.get(&norm_key(key, &colls)).cloned()
    }

    /// Installs state partition `key` as a copy of this node computed it
    /// from the same input ([`Window::fill`] on a detached copy).
    pub fn install(&mut self, key: &[Value], part: Arc<Partition>) {
        let colls: Vec<Collation> = self.key.iter().map(|&c| self.coll(c)).collect();
        let pk = norm_key(key, &colls);
        self.bytes += partition_bytes(&part);
        self.dirty.mark(&pk, self.state.len() + 1);
        if let Some(old) = self.state.insert(pk, part) {
            self.bytes = self.bytes.saturating_sub(partition_bytes(&old));
        }
    }

    /// Checks the state's bookkeeping (tests).
    #[cfg(test)]
    fn check_invariants(&self) {
        let mut bytes = 0;
        for (pk, part) in &self.state {
            bytes += partition_bytes(part);
            let mut rows = 0;
            for (wk, ord) in &part.windows {
                assert!(!ord.is_empty(), "an empty window partition is kept");
                for (e, &n) in ord {
                    assert!(n > 0);
                    assert_eq!(&self.state_key_of(&e.row), pk);
                    assert_eq!(&self.window_key_of(&e.row), wk);
                    assert_eq!(e.sort, self.sort_of(&e.row));
                    rows += n;
                }
            }
            assert_eq!(rows, part.rows);
        }
        assert_eq!(bytes, self.bytes);
    }
}

/// NTILE(n): the 1-based bucket of position `p` of `len` rows, the first
/// `len % n` buckets one row larger.
fn ntile(p: usize, len: usize, n: usize) -> usize {
    let n = n.max(1);
    let (size, extra) = (len / n, len % n);
    let big = extra * (size + 1);
    if p < big {
        p / (size + 1) + 1
    } else {
        extra + (p - big) / size.max(1) + 1
    }
}

fn entry_bytes(e: &Entry) -> usize {
    row_bytes(&e.row) + 24 * e.sort.len() + 48
}

/// Approximate heap size of a partition (memory accounting).
fn partition_bytes(part: &Partition) -> usize {
    64 + part
        .windows
        .values()
        .flat_map(|o| o.keys())
        .map(entry_bytes)
        .sum::<usize>()
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order: Vec<String> = self
            .order
            .iter()
            .map(|(c, desc, _)| format!("#{c}{}", if *desc { " DESC" } else { "" }))
            .collect();
        let funcs: Vec<String> = self
            .funcs
            .iter()
            .map(|f| match f {
                WinFn::RowNumber => "ROW_NUMBER".to_string(),
                WinFn::Rank => "RANK".into(),
                WinFn::DenseRank => "DENSE_RANK".into(),
                WinFn::Agg(a) => format!("{:?}(#{})", a.kind, a.col),
                WinFn::Shift {
                    col, offset, lead, ..
                } => format!("{}(#{col}, {offset})", if *lead { "LEAD" } else { "LAG" }),
                WinFn::Nth {
                    col,
                    nth,
                    from_last,
                } => format!(
                    "{}(#{col}, {nth})",
                    if *from_last { "NTH_LAST" } else { "NTH" }
                ),
                WinFn::PercentRank => "PERCENT_RANK".into(),
                WinFn::CumeDist => "CUME_DIST".into(),
                WinFn::Ntile(n) => format!("NTILE({n})"),
            })
            .collect();
        write!(
            f,
            "Window partition by {:?} order by [{}]",
            self.partition,
            order.join(", ")
        )?;
        if !funcs.is_empty() {
            write!(f, " [{}]", funcs.join(", "))?;
        }
        if self.limit.is_some() || self.offset > 0 {
            write!(f, " rows {}..", self.offset)?;
            if let Some(l) = self.limit {
                write!(f, "{}", self.offset.saturating_add(l))?;
            }
        }
        if let Some(fr) = &self.frame {
            write!(
                f,
                " {} {:?}..{:?}",
                if fr.rows { "ROWS" } else { "RANGE" },
                fr.start,
                fr.end
            )?;
        }
        write!(f, ", state keyed by {:?}", self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::harness::{assert_emits, parse_row, Harness};
    use crate::ops::AggKind;

    /// A window over rows `[partition, order, value]`.
    fn window(funcs: Vec<WinFn>, offset: usize, limit: Option<usize>) -> Window {
        let mut w = Window::try_new(
            vec![0],
            vec![(1, false, Collation::Binary)],
            funcs,
            offset,
            limit,
            vec![Collation::GeneralCi, Collation::Binary, Collation::Binary],
        )
        .unwrap();
        w.fill(&[], vec![]);
        w
    }

    fn checked(mut w: Window) -> impl FnMut(usize, Vec<RowDelta>) -> Vec<RowDelta> {
        move |_, d| {
            let out = w.on_input(d);
            w.check_invariants();
            out
        }
    }

    #[test]
    fn row_number_renumbers_the_rows_after_a_change() {
        let w = window(vec![WinFn::RowNumber], 0, None);
        let mut h = Harness::new(checked(w));
        assert_emits(
            &mut h,
            "+ a 10 x\n+ a 20 y\n+ b 5 z",
            "+ a 10 x 1\n+ a 20 y 2\n+ b 5 z 1",
        );
        // A row sorting first shifts every other row of its partition only.
        assert_emits(
            &mut h,
            "+ a 1 w",
            "+ a 1 w 1\n- a 10 x 1\n+ a 10 x 2\n- a 20 y 2\n+ a 20 y 3",
        );
        // Appending at the end re-emits nothing else.
        assert_emits(&mut h, "+ A 30 v", "+ A 30 v 4");
        assert_emits(
            &mut h,
            "- a 10 x",
            "- a 10 x 2\n- a 20 y 3\n+ a 20 y 2\n- A 30 v 4\n+ A 30 v 3",
        );
        // An update moving a row across partitions (halves on both).
        assert_emits(
            &mut h,
            "- b 5 z\n+ a 25 z",
            "- b 5 z 1\n+ a 25 z 3\n- A 30 v 3\n+ A 30 v 4",
        );
    }

    #[test]
    fn rank_and_dense_rank_count_peers() {
        let w = window(vec![WinFn::Rank, WinFn::DenseRank], 0, None);
        let mut h = Harness::new(checked(w));
        assert_emits(
            &mut h,
            "+ a 1 x\n+ a 1 y\n+ a 2 z",
            "+ a 1 x 1 1\n+ a 1 y 1 1\n+ a 2 z 3 2",
        );
        // A duplicate row is a peer of itself.
        assert_emits(&mut h, "+ a 1 x", "+ a 1 x 1 1\n- a 2 z 3 2\n+ a 2 z 4 2");
        assert_emits(
            &mut h,
            "- a 1 x\n- a 1 x",
            "- a 1 x 1 1\n- a 1 x 1 1\n- a 2 z 4 2\n+ a 2 z 2 2",
        );
    }

    #[test]
    fn running_sum_includes_peers_and_whole_partition_without_order() {
        let mut w = window(vec![WinFn::Agg(AggSpec::new(AggKind::Sum, 2))], 0, None);
        let mut h = Harness::new(move |_, d| w.on_input(d));
        assert_emits(
            &mut h,
            "+ a 1 5\n+ a 1 6\n+ a 2 1",
            "+ a 1 5 11\n+ a 1 6 11\n+ a 2 1 12",
        );
        assert_emits(&mut h, "+ a 3 1", "+ a 3 1 13");
        assert_emits(
            &mut h,
            "- a 1 6",
            "- a 1 6 11\n- a 1 5 11\n+ a 1 5 5\n- a 2 1 12\n+ a 2 1 6\n- a 3 1 13\n+ a 3 1 7",
        );
        let mut all = Window::try_new(
            vec![0],
            vec![],
            vec![WinFn::Agg(AggSpec::new(AggKind::Max, 2))],
            0,
            None,
            vec![Collation::Binary; 3],
        )
        .unwrap();
        all.fill(&[], vec![]);
        let mut h = Harness::new(move |_, d| all.on_input(d));
        assert_emits(&mut h, "+ a 1 5\n+ a 2 3", "+ a 1 5 5\n+ a 2 3 5");
        assert_emits(&mut h, "- a 1 5", "- a 2 3 5\n- a 1 5 5\n+ a 2 3 3");
    }

    #[test]
    fn lag_and_lead_read_their_neighbours() {
        let w = window(
            vec![
                WinFn::Shift {
                    col: 2,
                    offset: 1,
                    lead: false,
                    default: Value::Null,
                },
                WinFn::Shift {
                    col: 2,
                    offset: 1,
                    lead: true,
                    default: Value::Int(0),
                },
            ],
            0,
            None,
        );
        let mut h = Harness::new(checked(w));
        assert_emits(&mut h, "+ a 1 5\n+ a 3 7", "+ a 1 5 NULL 7\n+ a 3 7 5 0");
        // Inserted between: the row before sees a new LEAD.
        assert_emits(
            &mut h,
            "+ a 2 6",
            "- a 1 5 NULL 7\n+ a 1 5 NULL 6\n+ a 2 6 5 7\n- a 3 7 5 0\n+ a 3 7 6 0",
        );
    }

    #[test]
    fn explicit_frames_aggregate_their_rows() {
        // SUM over ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING.
        let mut w = window(vec![WinFn::Agg(AggSpec::new(AggKind::Sum, 2))], 0, None);
        w.frame = Some(Frame {
            rows: true,
            start: Bound::Preceding(1.0),
            end: Bound::Following(1.0),
        });
        let mut h = Harness::new(checked(w));
        assert_emits(
            &mut h,
            "+ a 1 1\n+ a 2 10\n+ a 3 100",
            "+ a 1 1 11\n+ a 2 10 111\n+ a 3 100 110",
        );
        // A row at the end changes its neighbour's frame too.
        assert_emits(
            &mut h,
            "+ a 4 1000",
            "- a 3 100 110\n+ a 3 100 1110\n+ a 4 1000 1100",
        );
        // MAX over RANGE BETWEEN CURRENT ROW AND 1 FOLLOWING (values 1..4).
        let mut w = window(vec![WinFn::Agg(AggSpec::new(AggKind::Max, 2))], 0, None);
        w.frame = Some(Frame {
            rows: false,
            start: Bound::CurrentRow,
            end: Bound::Following(1.0),
        });
        let mut h = Harness::new(checked(w));
        assert_emits(
            &mut h,
            "+ a 1 5\n+ a 1 2\n+ a 3 7",
            "+ a 1 5 5\n+ a 1 2 5\n+ a 3 7 7",
        );
        assert_emits(
            &mut h,
            "+ a 2 9",
            "- a 1 5 5\n+ a 1 5 9\n- a 1 2 5\n+ a 1 2 9\n+ a 2 9 9",
        );
    }

    #[test]
    fn value_and_distribution_functions() {
        let w = window(
            vec![
                WinFn::Nth {
                    col: 2,
                    nth: 1,
                    from_last: false,
                },
                WinFn::Nth {
                    col: 2,
                    nth: 1,
                    from_last: true,
                },
                WinFn::Ntile(2),
            ],
            0,
            None,
        );
        let mut h = Harness::new(checked(w));
        // LAST_VALUE over the default frame is the last peer's.
        assert_emits(
            &mut h,
            "+ a 1 x\n+ a 2 y\n+ a 2 z",
            "+ a 1 x x x 1\n+ a 2 y x z 1\n+ a 2 z x z 2",
        );
        // A new first row changes every FIRST_VALUE and NTILE.
        assert_emits(
            &mut h,
            "+ a 0 w",
            "+ a 0 w w w 1\n- a 1 x x x 1\n+ a 1 x w x 1\n- a 2 y x z 1\n+ a 2 y w z 2\n- a 2 z x z 2\n+ a 2 z w z 2",
        );
        assert_eq!(
            (0..7).map(|p| ntile(p, 7, 3)).collect::<Vec<_>>(),
            vec![1, 1, 1, 2, 2, 3, 3]
        );
    }

    #[test]
    fn top_k_lets_one_row_in_and_one_out() {
        let w = window(vec![], 1, Some(2));
        let mut h = Harness::new(checked(w));
        assert_emits(
            &mut h,
            "+ a 1 x\n+ a 2 y\n+ a 3 z\n+ a 4 v",
            "+ a 2 y\n+ a 3 z",
        );
        // Past the window: nothing.
        assert_emits(&mut h, "+ a 9 u", "");
        // Inside: one enters, one leaves.
        assert_emits(&mut h, "+ a 0 t", "+ a 1 x\n- a 3 z");
        assert_emits(&mut h, "- a 1 x", "- a 1 x\n+ a 3 z");
        // Another partition has its own window.
        assert_emits(&mut h, "+ b 1 x\n+ b 2 y", "+ b 2 y");
    }

    #[test]
    fn lookup_matching_is_the_partitions_output_filtered() {
        let mut w = Window::try_new(
            vec![0],
            vec![(1, false, Collation::Binary)],
            vec![],
            1,
            Some(3),
            vec![Collation::Binary; 2],
        )
        .unwrap();
        w.key = vec![0];
        let input = ["a 1", "a 2", "a 2", "a 3", "a 4", "a 5"];
        let out = w.fill(
            &[Value::text("a")],
            input.iter().map(|r| parse_row(r)).collect(),
        );
        // Positions 1..4: both 2s and the 3.
        assert_eq!(
            out,
            vec![parse_row("a 2"), parse_row("a 2"), parse_row("a 3")]
        );
        let is = |n: i64| move |r: &Row| r[1] == Value::Int(n);
        let a = [Value::text("a")];
        assert_eq!(
            w.lookup_matching(&a, is(2)),
            Some(vec![parse_row("a 2"); 2])
        );
        assert_eq!(w.lookup_matching(&a, is(3)), Some(vec![parse_row("a 3")]));
        assert_eq!(w.lookup_matching(&a, is(4)), Some(vec![]));
        assert_eq!(w.lookup_matching(&a, is(1)), Some(vec![]));
        assert_eq!(w.lookup_matching(&a, is(5)), Some(vec![]));
        assert_eq!(w.lookup_matching(&[Value::text("b")], is(2)), None);
    }

    #[test]
    fn holes_drop_deltas_and_fill_computes() {
        let mut w = Window::try_new(
            vec![0],
            vec![(1, true, Collation::Binary)],
            vec![WinFn::RowNumber],
            0,
            None,
            vec![Collation::Binary; 2],
        )
        .unwrap();
        w.key = vec![0];
        let mut out = w.fill(
            &[Value::text("a")],
            vec![parse_row("a 1"), parse_row("a 2")],
        );
        out.sort();
        assert_eq!(out, vec![parse_row("a 1 2"), parse_row("a 2 1")]);
        assert!(w.is_filled(&[Value::text("a")]));
        assert!(w.lookup(&[Value::text("b")]).is_none());
        let mut h = Harness::new(checked(w));
        assert_emits(
            &mut h,
            "+ a 3\n+ b 1",
            "+ a 3 1\n- a 2 1\n+ a 2 2\n- a 1 2\n+ a 1 3",
        );
    }

    #[test]
    fn snapshot_encoding_is_the_input_rows() {
        let mut w = window(vec![WinFn::RowNumber], 0, None);
        w.on_input(vec![
            RowDelta::Insert(parse_row("a 1 x")),
            RowDelta::Insert(parse_row("a 1 x")),
        ]);
        let c = w.capture();
        let (_, part) = &c.upserts[0];
        let bytes = postcard::to_stdvec(&**part).unwrap();
        let rows: Vec<Row> = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(rows, vec![parse_row("a 1 x"), parse_row("a 1 x")]);
        let mut again = w.stateless_copy();
        again.restore(vec![(vec![], rows)]);
        again.check_invariants();
        assert_eq!(again.lookup(&[]).unwrap().len(), 2);
        assert_eq!(again.state_bytes(), w.state_bytes());
    }
}
