//! Grouped aggregation (COUNT, SUM, AVG, MIN, MAX, GROUP_CONCAT, and their
//! DISTINCT forms); DISTINCT is an Aggregate with no aggregate columns.
//!
//! Input rows are laid out as `[group columns..., aggregate arguments...]`;
//! output rows as `[group columns..., aggregate values...]`.
//!
//! State is partial: it is partitioned by `key` (a subset of the group
//! columns, possibly empty = one partition). A partition is either absent (a
//! hole: deltas for it are dropped, nothing downstream depends on it) or
//! holds every group with that key. MIN/MAX/GROUP_CONCAT keep a multiset of
//! values per group so deleting the current extreme is exact.

use std::collections::hash_map::Entry;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use ladle_common::{Collation, Row, RowDelta, Value};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

mod exact_sum;

use exact_sum::ExactSum;

use super::{norm_key, project_cols, row_bytes, Captured, DirtyKeys};
use crate::expr::ArithOp;
use crate::hash::{HashMap, HashSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum AggKind {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    GroupConcat,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AggSpec {
    pub kind: AggKind,
    /// Input column of the argument (unused for COUNT(*)).
    pub col: usize,
    pub distinct: bool,
    /// Whether the argument is a floating-point type (SUM/AVG give DOUBLE).
    pub float: bool,
    /// Scale of a DECIMAL argument (AVG adds 4).
    pub scale: u32,
    /// GROUP_CONCAT separator and order (true = descending).
    pub separator: String,
    pub desc: bool,
    /// Collation of the argument (MIN/MAX of text, DISTINCT).
    pub collation: Collation,
    /// AVG of an exact argument gives the quotient's full digits
    /// ([`ExactSum::avg_exact`]) for the planner to round where they are
    /// shown; otherwise the mean rounded to `scale + 4`.
    pub exact_avg: bool,
}

impl AggSpec {
    pub fn new(kind: AggKind, col: usize) -> AggSpec {
        AggSpec {
            kind,
            col,
            distinct: false,
            float: false,
            scale: 0,
            separator: ",".into(),
            desc: false,
            collation: Collation::Binary,
            exact_avg: false,
        }
    }

    /// AVG of the exact sum `s`: see [`AggSpec::exact_avg`].
    fn avg_of(&self, s: &ExactSum) -> Value {
        if self.exact_avg {
            s.avg_exact(self.scale)
        } else {
            s.avg(self.scale + 4)
        }
    }
}

/// A multiset of values, ordered (for MIN/MAX/GROUP_CONCAT) and keyed by
/// the collation-normalized value.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Multiset {
    /// normalized -> (representative, count)
    items: BTreeMap<Value, (Value, i64)>,
}

impl Multiset {
    fn add(&mut self, v: &Value, coll: Collation, n: i64) {
        let k = v.key_normalized(coll);
        let e = self
            .items
            .entry(k.clone())
            .or_insert_with(|| (v.clone(), 0));
        e.1 += n;
        if e.1 <= 0 {
            self.items.remove(&k);
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Acc {
    Count(i64),
    /// Sum of exact values and of doubles; `n` non-NULL inputs. Only
    /// restored from snapshots taken before `ExactSum` and `FloatSum`
    /// existed (an exact one turns into `ExactSum` at its next input).
    Sum {
        exact: Decimal,
        float: f64,
        n: i64,
    },
    Set(Multiset),
    /// An aggregate over a column (any but COUNT(*); `inner` accumulates
    /// its other inputs) some of whose inputs are overflow markers (a
    /// computed value that overflowed, see `expr::out_of_range_marker`):
    /// `markers` of them. Its output is the marker while any is left, so
    /// the read fails with 1690 as MySQL's query does: MySQL evaluates the
    /// argument of SUM, MIN, COUNT, GROUP_CONCAT... for every row. (Last,
    /// so snapshots taken before it still decode.)
    Overflowed {
        inner: Box<Acc>,
        markers: i64,
    },
    /// SUM/AVG of doubles, `n` non-NULL inputs: a compensated sum
    /// (Neumaier's), `sum + comp`. A maintained sum adds and takes away in
    /// the order writes come, so a plain one keeps the rounding error of
    /// every value it ever saw: (1e15 + 0.3) - 1e15 was 0.25. (Last, so
    /// snapshots taken before it still decode; their float sums stay `Sum`.)
    FloatSum {
        sum: f64,
        comp: f64,
        n: i64,
    },
    /// SUM/AVG of integers and DECIMALs, exact past the DECIMAL range (see
    /// [`ExactSum`]): a narrower sum had silently stopped adding the value
    /// that overflowed it. (Last, so earlier snapshots still decode.)
    ExactSum(ExactSum),
    /// [`Acc::Overflowed`] for the markers of a scalar subquery's several
    /// rows (`expr::subquery_rows_marker`): the read fails with 1242.
    /// (Last, so earlier snapshots still decode.)
    ManyRows {
        inner: Box<Acc>,
        markers: i64,
    },
}

/// Adds `x` to the compensated sum `(sum, comp)` (Neumaier): `comp` keeps
/// the low-order bits each addition rounds away.
fn add_compensated(sum: &mut f64, comp: &mut f64, x: f64) {
    let t = *sum + x;
    if sum.abs() >= x.abs() {
        *comp += (*sum - t) + x;
    } else {
        *comp += (x - t) + *sum;
    }
    *sum = t;
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Group {
    /// Group column values of the first row seen.
    rep: Row,
    rows: i64,
    accs: Vec<Acc>,
}

#[derive(Clone, Debug)]
pub(crate) struct Aggregate {
    /// Number of group columns (the input's leading columns).
    pub ngroup: usize,
    pub aggs: Vec<AggSpec>,
    /// Collations of the group columns.
    pub colls: Vec<Collation>,
    /// Positions (within the group columns) partitioning the state.
    pub key: Vec<usize>,
    /// No GROUP BY: exactly one output row even over no input.
    pub scalar: bool,
    /// partition key -> (group key -> group). Partitions are copy-on-write
    /// so a snapshot captures them by reference under the graph lock.
    state: HashMap<Vec<Value>, Arc<Partition>>,
    bytes: usize,
    /// Partitions (and groups inside large ones) changed since the last
    /// snapshot capture.
    dirty: DirtyKeys<HashSet<Vec<Value>>>,
}

/// One filled partition of an aggregate's state: group key -> group.
pub(crate) type Partition = HashMap<Vec<Value>, Group>;

/// A partition being filled row by row ([`Aggregate::fill_row`]) before
/// it is installed ([`Aggregate::finish_fill`]).
#[derive(Default)]
pub(crate) struct PartitionFill {
    groups: Partition,
    /// At most what the groups hold (as [`Aggregate::fill_bytes_bound`]
    /// counts them), charged to the statement by a streaming fill.
    pub bytes: usize,
}

/// Changed groups of a partition: the group's new state, or None (gone).
pub(crate) type GroupPatch = Vec<(Vec<Value>, Option<Group>)>;

impl Aggregate {
    pub fn new(
        ngroup: usize,
        aggs: Vec<AggSpec>,
        colls: Vec<Collation>,
        scalar: bool,
    ) -> Aggregate {
        Aggregate {
            ngroup,
            aggs,
            colls,
            key: vec![],
            scalar,
            state: HashMap::default(),
            bytes: 0,
            dirty: DirtyKeys::default(),
        }
    }

    /// The same aggregate with no state (every partition a hole).
    pub fn stateless_copy(&self) -> Aggregate {
        let mut a = Aggregate::new(
            self.ngroup,
            self.aggs.clone(),
            self.colls.clone(),
            self.scalar,
        );
        a.key = self.key.clone();
        a
    }

    /// Whether an output value may be an overflow marker (an exact SUM or
    /// AVG past the DECIMAL range), which a read must look for.
    pub fn may_overflow(&self) -> bool {
        self.aggs
            .iter()
            .any(|a| matches!(a.kind, AggKind::Sum | AggKind::Avg) && !a.float)
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
    /// first time), by reference: cheap enough for the commit lock.
    pub fn capture(&mut self) -> Captured<Partition, GroupPatch> {
        let changed = self.dirty.take();
        Captured::of(
            changed,
            |k| self.state.get(k).cloned(),
            |part: &Partition, groups: HashSet<Vec<Value>>| {
                groups
                    .into_iter()
                    .map(|gk| {
                        let g = part.get(&gk).cloned();
                        (gk, g)
                    })
                    .collect()
            },
            || {
                self.state
                    .iter()
                    .map(|(k, p)| (k.clone(), p.clone()))
                    .collect()
            },
        )
    }

    /// Forces the next capture to be full (the previous one was not saved).
    pub fn mark_all_dirty(&mut self) {
        self.dirty.mark_all();
    }

    /// Replaces the state by `parts` (restored from a snapshot); the
    /// partitions not in it are holes.
    pub fn restore(&mut self, parts: Vec<(Vec<Value>, Partition)>) {
        self.state.clear();
        self.bytes = 0;
        for (pk, part) in parts {
            self.bytes += partition_bytes(&part);
            self.state.insert(pk, Arc::new(part));
        }
        self.dirty.reset_clean();
    }

    /// Collations of the group columns, as [`Aggregate::fill_row`] takes them.
    pub fn group_colls(&self) -> Vec<Collation> {
        (0..self.ngroup)
            .map(|i| self.colls.get(i).copied().unwrap_or(Collation::Binary))
            .collect()
    }

    fn key_colls(&self) -> Vec<Collation> {
        let g = self.group_colls();
        self.key.iter().map(|&i| g[i]).collect()
    }

    /// Normalized partition key of an input (or output) row.
    fn partition_of(&self, row: &[Value]) -> Vec<Value> {
        norm_key(&project_cols(row, &self.key), &self.key_colls())
    }

    fn new_group(&self, rep: Row) -> Group {
        let accs = self
            .aggs
            .iter()
            .map(|a| match a.kind {
                AggKind::CountStar => Acc::Count(0),
                AggKind::Count if !a.distinct => Acc::Count(0),
                AggKind::Sum | AggKind::Avg if !a.distinct && a.float => Acc::FloatSum {
                    sum: 0.0,
                    comp: 0.0,
                    n: 0,
                },
                AggKind::Sum | AggKind::Avg if !a.distinct => Acc::ExactSum(ExactSum::new(a.scale)),
                _ => Acc::Set(Multiset::default()),
            })
            .collect();
        Group { rep, rows: 0, accs }
    }

    fn apply(&self, g: &mut Group, row: &[Value], sign: i64) {
        g.rows += sign;
        // A row whose WHERE overflowed (`ops::Filter::pass`), wherever its
        // mark is: MySQL failed on it, so every aggregate over it does.
        let where_failed = row.iter().any(crate::expr::is_where_failed);
        for (a, acc) in self.aggs.iter().zip(g.accs.iter_mut()) {
            let v = row.get(a.col).cloned().unwrap_or(Value::Null);
            // COUNT(*) reads no value, but keeps a scalar subquery's
            // several rows (a row made of that marker, see `Project`).
            let marker = where_failed
                || match crate::expr::out_of_range_in(&v) {
                    Some(m) => a.kind != AggKind::CountStar || m == crate::expr::SUBQUERY_ROWS,
                    None => false,
                };
            let acc = match acc {
                Acc::Overflowed { inner, markers } | Acc::ManyRows { inner, markers } => {
                    if marker {
                        *markers += sign;
                        if *markers == 0 {
                            let inner = std::mem::replace(inner.as_mut(), Acc::Count(0));
                            *acc = inner;
                        }
                        continue;
                    }
                    inner.as_mut()
                }
                _ if marker => {
                    let inner = Box::new(std::mem::replace(acc, Acc::Count(0)));
                    *acc = if crate::expr::out_of_range_in(&v) == Some(crate::expr::SUBQUERY_ROWS) {
                        Acc::ManyRows {
                            inner,
                            markers: sign,
                        }
                    } else {
                        Acc::Overflowed {
                            inner,
                            markers: sign,
                        }
                    };
                    continue;
                }
                other => other,
            };
            if let Acc::Sum { exact, n, .. } = acc {
                if !a.float {
                    let s = ExactSum::of(*exact, *n);
                    *acc = Acc::ExactSum(s);
                }
            }
            match acc {
                Acc::Count(c) => {
                    if a.kind == AggKind::CountStar || !v.is_null() {
                        *c += sign;
                    }
                }
                Acc::Sum { float, n, .. } => {
                    if v.is_null() {
                        continue;
                    }
                    *n += sign;
                    // Exact ones became `ExactSum` above.
                    *float += sign as f64 * crate::expr::value_to_f64(&v).unwrap_or(0.0);
                }
                Acc::ExactSum(s) => {
                    if !v.is_null() {
                        s.add(exact_value(&v), sign);
                    }
                }
                Acc::Set(m) => {
                    if !v.is_null() {
                        m.add(&v, a.collation, sign);
                    }
                }
                Acc::FloatSum { sum, comp, n } => {
                    if v.is_null() {
                        continue;
                    }
                    *n += sign;
                    let x = crate::expr::value_to_f64(&v).unwrap_or(0.0);
                    add_compensated(sum, comp, sign as f64 * x);
                    if *n == 0 {
                        // Nothing left: no rounding error either.
                        (*sum, *comp) = (0.0, 0.0);
                    }
                }
                Acc::Overflowed { .. } | Acc::ManyRows { .. } => {}
            }
        }
    }

    fn output(&self, g: &Group) -> Row {
        // A GROUP BY key MySQL computed for every row.
        let mut row: Row = g.rep.iter().cloned().map(crate::expr::evaluated).collect();
        for (a, acc) in self.aggs.iter().zip(&g.accs) {
            row.push(match (a.kind, acc) {
                (_, Acc::Count(c)) => Value::Int(*c),
                (_, Acc::Sum { exact, n, .. }) if !a.float => {
                    let s = ExactSum::of(*exact, *n);
                    match a.kind {
                        AggKind::Sum => s.sum(a.scale),
                        _ => a.avg_of(&s),
                    }
                }
                (AggKind::Sum, Acc::Sum { float, n, .. }) => {
                    if *n == 0 {
                        Value::Null
                    } else {
                        Value::Double(*float)
                    }
                }
                (_, Acc::Sum { float, n, .. }) => float_avg(*n, *float),
                (AggKind::Sum, Acc::ExactSum(s)) => s.sum(a.scale),
                (_, Acc::ExactSum(s)) => a.avg_of(s),
                (AggKind::Sum, Acc::FloatSum { sum, comp, n }) => {
                    if *n == 0 {
                        Value::Null
                    } else {
                        Value::Double(sum + comp)
                    }
                }
                (_, Acc::FloatSum { sum, comp, n }) => float_avg(*n, sum + comp),
                (_, Acc::Set(m)) => set_output(a, m),
                // COUNT(*) reads no value: only rows whose WHERE failed
                // overflow it, and MySQL failed on those whether or not
                // the query reads the count (a hidden one, see the
                // planner's GROUP BY without an aggregate), so its marker
                // is the one projections carry.
                (AggKind::CountStar, Acc::Overflowed { .. }) => {
                    crate::expr::where_failed_marker("BIGINT value is out of range")
                }
                (_, Acc::Overflowed { .. }) => {
                    crate::expr::out_of_range_marker("BIGINT value is out of range")
                }
                (_, Acc::ManyRows { .. }) => crate::expr::subquery_rows_evaluated(),
            });
        }
        row
    }

    /// An empty accumulator for one running group (window aggregates feed
    /// it row by row with [`Aggregate::accumulate`]).
    pub fn accumulator(&self) -> Group {
        self.new_group(vec![])
    }

    /// Adds `row` (laid out as this aggregate's input) to `g`.
    pub fn accumulate(&self, g: &mut Group, row: &[Value]) {
        self.apply(g, row, 1);
    }

    /// The aggregate values of `g` after its group columns.
    pub fn values(&self, g: &Group) -> Row {
        let mut row = self.output(g);
        row.drain(..g.rep.len().min(row.len()));
        row
    }

    /// The output row of a group over no rows (scalar aggregates).
    pub fn empty_row(&self) -> Row {
        let g = self.new_group(vec![Value::Null; self.ngroup]);
        self.output(&g)
    }

    /// Pure core: updates filled partitions, returns output deltas.
    pub fn on_input(&mut self, deltas: Vec<RowDelta>) -> Vec<RowDelta> {
        let gcolls = self.group_colls();
        // group key -> (partition, old output)
        let mut touched: Vec<(Vec<Value>, Vec<Value>, Option<Row>)> = Vec::new();
        let mut seen: HashMap<(Vec<Value>, Vec<Value>), ()> = HashMap::default();
        for d in deltas {
            let row = d.row();
            let pk = self.partition_of(row);
            let Some(part) = self.state.get(&pk) else {
                continue;
            };
            let gk = norm_key(&row[..self.ngroup.min(row.len())], &gcolls);
            let size = part.len();
            self.dirty
                .mark_inside(&pk, self.state.len(), size, |groups| {
                    if !groups.contains(&gk) {
                        groups.insert(gk.clone());
                    }
                    groups.len() * 2 <= size
                });
            if seen.insert((pk.clone(), gk.clone()), ()).is_none() {
                let old = match part.get(&gk) {
                    Some(g) if g.rows > 0 || self.scalar => Some(self.output(g)),
                    _ => None,
                };
                touched.push((pk.clone(), gk.clone(), old));
            }
            let mut g = match self
                .state
                .get_mut(&pk)
                .and_then(|p| Arc::make_mut(p).remove(&gk))
            {
                Some(g) => g,
                None => {
                    self.bytes += row_bytes(row);
                    self.new_group(row[..self.ngroup.min(row.len())].to_vec())
                }
            };
            self.apply(&mut g, row, d.sign());
            if let Some(p) = self.state.get_mut(&pk) {
                Arc::make_mut(p).insert(gk, g);
            }
        }
        let mut out = Vec::new();
        for (pk, gk, old) in touched {
            let Some(part) = self.state.get_mut(&pk) else {
                continue;
            };
            let new = match part.get(&gk) {
                Some(g) if g.rows > 0 || self.scalar => Some(g.rep.clone()),
                _ => None,
            };
            if new.is_none() && part.contains_key(&gk) {
                if let Some(g) = Arc::make_mut(part).remove(&gk) {
                    self.bytes = self.bytes.saturating_sub(row_bytes(&g.rep));
                }
            }
            let new = new.and_then(|_| {
                self.state
                    .get(&pk)
                    .and_then(|p| p.get(&gk))
                    .map(|g| self.output(g))
            });
            if old == new {
                continue;
            }
            if let Some(o) = old {
                out.push(RowDelta::Delete(o));
            }
            if let Some(n) = new {
                out.push(RowDelta::Insert(n));
            }
        }
        out
    }

    /// Whether partition `key` (values of the key columns) is filled.
    pub fn is_filled(&self, key: &[Value]) -> bool {
        self.state.contains_key(&norm_key(key, &self.key_colls()))
    }

    /// Partition `key`'s output rows, or `None` for a hole.
    pub fn lookup(&self, key: &[Value]) -> Option<Vec<Row>> {
        let pk = norm_key(key, &self.key_colls());
        self.state.get(&pk).map(|p| {
            p.values()
                .filter(|g| g.rows > 0 || self.scalar)
                .map(|g| self.output(g))
                .collect()
        })
    }

    /// Fills partition `key` from every input row with that key; returns
    /// its output rows.
    pub fn fill(&mut self, key: &[Value], rows: Vec<Row>) -> Vec<Row> {
        let gcolls = self.group_colls();
        let mut fill = PartitionFill::default();
        for row in rows {
            self.fill_row(&mut fill, row, &gcolls);
        }
        self.finish_fill(key, fill)
    }

    /// Adds input `row` to a partition being filled (see
    /// [`Aggregate::fill`]; `gcolls` from [`Aggregate::group_colls`]).
    /// The row is dropped once added, and the first of a group becomes its
    /// representative: a fill holds its input or its groups, not both
    /// (rows of 5,000 group columns are 120 KB).
    pub fn fill_row(&self, fill: &mut PartitionFill, mut row: Row, gcolls: &[Collation]) {
        let ngroup = self.ngroup.min(row.len());
        // Signed integers and NULLs are their own normalized key: a row of
        // a group already seen is added without building its key (a cold
        // front page adds 480k rows to 74k groups).
        if row[..ngroup]
            .iter()
            .all(|v| matches!(v, Value::Int(_) | Value::Null))
        {
            if let Some(g) = fill.groups.get_mut(&row[..ngroup]) {
                self.apply(g, &row, 1);
                return;
            }
        }
        let gk = norm_key(&row[..ngroup], gcolls);
        match fill.groups.entry(gk) {
            Entry::Occupied(mut g) => self.apply(g.get_mut(), &row, 1),
            Entry::Vacant(slot) => {
                let mut g = self.new_group(vec![]);
                self.apply(&mut g, &row, 1);
                row.truncate(ngroup);
                row.shrink_to_fit();
                fill.bytes += 3 * row_bytes(&row) + 64 * self.aggs.len();
                g.rep = row;
                slot.insert(g);
            }
        }
    }

    /// Installs the partition `key` that [`Aggregate::fill_row`] built and
    /// returns its output rows.
    pub fn finish_fill(&mut self, key: &[Value], fill: PartitionFill) -> Vec<Row> {
        let pk = norm_key(key, &self.key_colls());
        let mut part = fill.groups;
        if self.scalar && part.is_empty() {
            part.insert(vec![], self.new_group(vec![]));
        }
        let out = part.values().map(|g| self.output(g)).collect();
        self.install_normalized(pk, Arc::new(part));
        out
    }

    /// At most what [`Aggregate::fill`] builds from `rows` beyond them:
    /// each group holds its group columns twice (as found and normalized)
    /// and its output row once more; every row may be a group of its own.
    /// 5,000 GROUP BY expressions over 1,000 rows are 360 MB.
    pub fn fill_bytes_bound(&self, rows: &[Row]) -> usize {
        rows.iter()
            .map(|r| 3 * row_bytes(&r[..self.ngroup.min(r.len())]) + 64 * self.aggs.len())
            .sum()
    }

    /// Partition `key` as filled here, shared (see [`Aggregate::install`]).
    pub fn partition(&self, key: &[Value]) -> Option<Arc<Partition>> {
        self.state.get(&norm_key(key, &self.key_colls())).cloned()
    }

    /// Installs partition `key` as a copy of this node computed it from
    /// the same input ([`Aggregate::fill`] on a detached copy): the same
    /// state a fill here would build, without building it again.
    pub fn install(&mut self, key: &[Value], part: Arc<Partition>) {
        let pk = norm_key(key, &self.key_colls());
        self.install_normalized(pk, part);
    }

    fn install_normalized(&mut self, pk: Vec<Value>, part: Arc<Partition>) {
        self.bytes += partition_bytes(&part);
        self.dirty.mark(&pk, self.state.len() + 1);
        if let Some(old) = self.state.insert(pk, part) {
            self.bytes = self.bytes.saturating_sub(partition_bytes(&old));
        }
    }
}

/// Approximate heap size of a partition (memory accounting).
fn partition_bytes(part: &Partition) -> usize {
    64 + part
        .iter()
        .map(|(key, g)| row_bytes(key) + row_bytes(&g.rep) + 32 * g.accs.len())
        .sum::<usize>()
}

fn float_avg(n: i64, sum: f64) -> Value {
    if n == 0 {
        return Value::Null;
    }
    Value::Double(sum / n as f64)
}

/// A SUM/AVG input of an exact type as a DECIMAL.
fn exact_value(v: &Value) -> Decimal {
    match v {
        Value::Int(i) => Decimal::from(*i),
        Value::UInt(u) => Decimal::from(*u),
        Value::Decimal(d) => *d,
        other => {
            Decimal::try_from(crate::expr::value_to_f64(other).unwrap_or(0.0)).unwrap_or_default()
        }
    }
}

fn set_output(a: &AggSpec, m: &Multiset) -> Value {
    match a.kind {
        AggKind::Min => m
            .items
            .values()
            .next()
            .map(|(v, _)| v.clone())
            .unwrap_or(Value::Null),
        AggKind::Max => m
            .items
            .values()
            .next_back()
            .map(|(v, _)| v.clone())
            .unwrap_or(Value::Null),
        AggKind::Count => Value::Int(m.items.len() as i64),
        AggKind::Sum | AggKind::Avg if a.float => {
            if m.items.is_empty() {
                return Value::Null;
            }
            let mut acc = Value::Int(0);
            for (v, _) in m.items.values() {
                acc = crate::expr::arith_values(ArithOp::Add, &acc, v).unwrap_or(Value::Null);
            }
            let sum = crate::expr::value_to_f64(&acc).unwrap_or(0.0);
            if a.kind == AggKind::Sum {
                Value::Double(sum)
            } else {
                Value::Double(sum / m.items.len() as f64)
            }
        }
        AggKind::Sum | AggKind::Avg => {
            let mut s = ExactSum::new(a.scale);
            for (v, _) in m.items.values() {
                s.add(exact_value(v), 1);
            }
            if a.kind == AggKind::Sum {
                s.sum(a.scale)
            } else {
                a.avg_of(&s)
            }
        }
        AggKind::GroupConcat => {
            if m.items.is_empty() {
                return Value::Null;
            }
            let iter: Box<dyn Iterator<Item = &(Value, i64)>> = if a.desc {
                Box::new(m.items.values().rev())
            } else {
                Box::new(m.items.values())
            };
            Value::text(group_concat(iter, a.distinct, &a.separator))
        }
        AggKind::CountStar => Value::Int(0),
    }
}

/// The values joined by `separator` (each as often as it occurs, once if
/// `distinct`), cut at [`ladle_common::GROUP_CONCAT_MAX_LEN`] bytes as MariaDB cuts it:
/// built no further than that, however many rows the group has.
fn group_concat<'a>(
    items: impl Iterator<Item = &'a (Value, i64)>,
    distinct: bool,
    separator: &str,
) -> String {
    let max = ladle_common::GROUP_CONCAT_MAX_LEN;
    let mut out = String::new();
    let mut first = true;
    'items: for (v, n) in items {
        let times = if distinct { 1 } else { *n };
        for _ in 0..times {
            if !first {
                out.push_str(separator);
            }
            first = false;
            out.push_str(&v.to_string());
            if out.len() >= max {
                break 'items;
            }
        }
    }
    if out.len() > max {
        let cut = (0..=max)
            .rev()
            .find(|&i| out.is_char_boundary(i))
            .unwrap_or(0);
        out.truncate(cut);
    }
    out
}

impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let aggs: Vec<String> = self
            .aggs
            .iter()
            .map(|a| {
                format!(
                    "{:?}{}(#{})",
                    a.kind,
                    if a.distinct { " DISTINCT" } else { "" },
                    a.col
                )
            })
            .collect();
        if self.aggs.is_empty() {
            write!(
                f,
                "Distinct over {} columns, state keyed by {:?}",
                self.ngroup, self.key
            )
        } else {
            write!(
                f,
                "Aggregate group by {} columns [{}], state keyed by {:?}",
                self.ngroup,
                aggs.join(", "),
                self.key
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::harness::{assert_emits, Harness};

    fn agg(aggs: Vec<AggSpec>, scalar: bool) -> Aggregate {
        let mut a = Aggregate::new(
            if scalar { 0 } else { 1 },
            aggs,
            vec![Collation::GeneralCi],
            scalar,
        );
        a.fill(&[], vec![]);
        a
    }

    #[test]
    fn count_and_sum_per_group() {
        let mut a = agg(
            vec![
                AggSpec::new(AggKind::CountStar, 0),
                AggSpec::new(AggKind::Sum, 1),
            ],
            false,
        );
        let mut h = Harness::new(move |_, d| a.on_input(d));
        assert_emits(&mut h, "+ a 1\n+ a 2\n+ b 5", "+ a 2 3\n+ b 1 5");
        assert_emits(&mut h, "- a 1", "- a 2 3\n+ a 1 2");
        // The group becomes empty: its row disappears.
        assert_emits(&mut h, "- b 5", "- b 1 5");
        // An update moving a row between groups (halves on different groups).
        assert_emits(&mut h, "- a 2\n+ c 2", "- a 1 2\n+ c 1 2");
        // Case-insensitive grouping: 'C' is group 'c'.
        assert_emits(&mut h, "+ C 1", "- c 1 2\n+ c 2 3");
    }

    #[test]
    fn sum_over_an_overflow_marker_is_the_marker_until_it_goes() {
        let mut a = agg(vec![AggSpec::new(AggKind::Sum, 1)], false);
        let marker = crate::expr::out_of_range_marker("BIGINT value is out of range");
        let g = Value::text("g");
        let sums = |out: Vec<RowDelta>| -> Vec<(bool, Value)> {
            out.into_iter()
                .map(|d| (matches!(d, RowDelta::Insert(_)), d.row()[1].clone()))
                .collect()
        };
        let first = a.on_input(vec![RowDelta::Insert(vec![g.clone(), Value::Int(1)])]);
        assert_eq!(sums(first), vec![(true, Value::Decimal(1.into()))]);
        let out = sums(a.on_input(vec![RowDelta::Insert(vec![g.clone(), marker.clone()])]));
        assert_eq!(out.len(), 2);
        assert!(crate::expr::out_of_range_in(&out[1].1).is_some() && out[1].0);
        // More rows meanwhile are summed; the marker leaves, the sum is back.
        a.on_input(vec![RowDelta::Insert(vec![g.clone(), Value::Int(2)])]);
        let out = sums(a.on_input(vec![RowDelta::Delete(vec![g.clone(), marker])]));
        assert_eq!(out.last(), Some(&(true, Value::Decimal(3.into()))));
    }

    #[test]
    fn every_aggregate_but_count_star_over_a_marker_is_the_marker() {
        let kinds = [
            AggKind::CountStar,
            AggKind::Count,
            AggKind::Min,
            AggKind::Max,
            AggKind::GroupConcat,
        ];
        let mut a = agg(kinds.iter().map(|&k| AggSpec::new(k, 1)).collect(), false);
        let marker = crate::expr::out_of_range_marker("BIGINT value is out of range");
        let g = Value::text("g");
        a.on_input(vec![RowDelta::Insert(vec![g.clone(), Value::Int(1)])]);
        let out = a.on_input(vec![RowDelta::Insert(vec![g.clone(), marker.clone()])]);
        let now = out.last().unwrap().row().to_vec();
        assert_eq!(now[1], Value::Int(2), "COUNT(*) reads no argument");
        for (k, v) in kinds.iter().zip(&now[1..]).skip(1) {
            assert!(crate::expr::out_of_range_in(v).is_some(), "{k:?}: {v:?}");
        }
        let out = a.on_input(vec![RowDelta::Delete(vec![g.clone(), marker])]);
        assert_eq!(
            out.last().unwrap().row()[1..],
            [
                Value::Int(1),
                Value::Int(1),
                Value::Int(1),
                Value::Int(1),
                Value::text("1")
            ]
        );
    }

    #[test]
    fn min_max_survive_deleting_the_extreme() {
        let mut a = agg(
            vec![AggSpec::new(AggKind::Min, 1), AggSpec::new(AggKind::Max, 1)],
            false,
        );
        let mut h = Harness::new(move |_, d| a.on_input(d));
        assert_emits(&mut h, "+ g 5\n+ g 1\n+ g 9", "+ g 1 9");
        assert_emits(&mut h, "- g 9", "- g 1 9\n+ g 1 5");
        assert_emits(&mut h, "- g 1", "- g 1 5\n+ g 5 5");
        assert_emits(&mut h, "+ g 5\n- g 5", "");
    }

    #[test]
    fn scalar_aggregate_keeps_one_row() {
        let mut a = agg(
            vec![
                AggSpec::new(AggKind::CountStar, 0),
                AggSpec::new(AggKind::Sum, 0),
            ],
            true,
        );
        assert_eq!(
            a.lookup(&[]).unwrap(),
            vec![vec![Value::Int(0), Value::Null]]
        );
        let mut h = Harness::new(move |_, d| a.on_input(d));
        assert_emits(&mut h, "+ 4", "- 0 NULL\n+ 1 4");
        assert_emits(&mut h, "- 4", "- 1 4\n+ 0 NULL");
    }

    #[test]
    fn group_concat_stops_at_its_maximum_length() {
        let max = ladle_common::GROUP_CONCAT_MAX_LEN;
        // A billion copies of one value: built only as far as the cut.
        let many = [(Value::text("ab"), 1_000_000_000)];
        let s = group_concat(many.iter(), false, ",");
        assert_eq!(s.len(), max);
        assert!(s.starts_with("ab,ab,"));
        assert_eq!(group_concat(many.iter(), true, ","), "ab");
        // A two-byte character across the cut is left out whole.
        // (The second copy starts at an odd byte: max itself is inside
        // one of its characters.)
        let wide = [(Value::text("é".repeat(max / 4)), 3)];
        let s = group_concat(wide.iter(), false, ",");
        assert_eq!(s.len(), max - 1);
        assert_eq!(s.matches(',').count(), 1);
        assert!(s.ends_with('é'));
    }

    #[test]
    fn count_distinct_and_group_concat() {
        let mut d = AggSpec::new(AggKind::Count, 1);
        d.distinct = true;
        let g = AggSpec::new(AggKind::GroupConcat, 1);
        let mut a = agg(vec![d, g], false);
        let mut h = Harness::new(move |_, d| a.on_input(d));
        assert_emits(&mut h, "+ g x\n+ g x\n+ g y", "+ g 2 x,x,y");
        assert_emits(&mut h, "- g x", "- g 2 x,x,y\n+ g 2 x,y");
        assert_emits(&mut h, "- g y", "- g 2 x,y\n+ g 1 x");
    }

    #[test]
    fn holes_drop_deltas() {
        let mut a = Aggregate::new(
            1,
            vec![AggSpec::new(AggKind::CountStar, 0)],
            vec![Collation::Binary],
            false,
        );
        a.key = vec![0];
        a.fill(&[Value::text("a")], vec![]);
        let mut h = Harness::new(move |_, d| a.on_input(d));
        assert_emits(&mut h, "+ a 1\n+ b 1", "+ a 1");
    }
}
