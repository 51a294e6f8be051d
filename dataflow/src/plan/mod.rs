//! What the planner hands execution (no SQL AST, no state): the logical
//! query graph ([`LNode`]), lowered into dataflow nodes by
//! [`crate::graph::Graph::install`], and the specification of the reader
//! over it ([`PlannedView`], or a [`Constant`] for a query without FROM),
//! with the read-time work ([`ReadAgg`], [`range`]). The engine executes
//! these without importing the planner's internals.

pub(crate) mod range;
pub(crate) mod top_k;

use std::sync::Arc;

use ladle_common::{Collation, Row, SqlType, TableSchema, Value};

use crate::expr::{Expr, NumKind};
use crate::ops::reader::OrderSpec;
use crate::ops::{AggSpec, Frame, JoinKind, WinFn};
use crate::OutputColumn;
use range::RangeIndex;

#[derive(Clone, Debug)]
pub(crate) enum LOp {
    Base(Arc<TableSchema>),
    Filter(Expr),
    Project(Vec<Expr>),
    Join {
        kind: JoinKind,
        left_cols: Vec<usize>,
        right_cols: Vec<usize>,
    },
    /// Input laid out as group columns then aggregate arguments.
    Aggregate {
        ngroup: usize,
        aggs: Vec<AggSpec>,
        scalar: bool,
    },
    Union,
    /// Each partition's rows in ORDER BY order: the input's columns, then
    /// one per window function; only positions `[offset, offset + limit)`
    /// of each partition pass (see [`crate::ops::Window`]).
    Window {
        partition: Vec<usize>,
        order: OrderSpec,
        funcs: Vec<WinFn>,
        offset: usize,
        limit: Option<usize>,
        /// The aggregates' explicit frame.
        frame: Option<Frame>,
    },
    /// Constant rows (a FROM-less SELECT inside a UNION).
    Values(Vec<ladle_common::Row>),
}

#[derive(Clone, Debug)]
pub(crate) struct LNode {
    pub op: LOp,
    pub inputs: Vec<LNode>,
    /// Collation of each output column.
    pub colls: Vec<Collation>,
}

impl LNode {
    /// Moves the node out of `slot`, leaving an empty placeholder, so a new
    /// node can be built over it in place.
    pub fn take(slot: &mut LNode) -> LNode {
        std::mem::replace(
            slot,
            LNode {
                op: LOp::Union,
                inputs: vec![],
                colls: vec![],
            },
        )
    }

    pub fn width(&self) -> usize {
        self.colls.len()
    }

    /// Whether the tree has more than `limit` nodes (counting no further).
    pub fn has_more_nodes_than(&self, limit: usize) -> bool {
        let mut stack = vec![self];
        let mut count = 0;
        while let Some(n) = stack.pop() {
            count += 1;
            if count > limit {
                return true;
            }
            stack.extend(&n.inputs);
        }
        false
    }

    /// The table this node's rows come from when it is that table's rows
    /// behind filters only (their columns are its columns).
    pub fn filtered_table(&self) -> Option<&TableSchema> {
        let mut base = self;
        while let (LOp::Filter(_), [input]) = (&base.op, &base.inputs[..]) {
            base = input;
        }
        match &base.op {
            LOp::Base(t) => Some(t),
            _ => None,
        }
    }

    /// Whether a filter in the tree may mark the rows whose WHERE
    /// overflowed (see [`crate::ops::Filter::may_mark`]).
    pub fn may_mark_rows(&self) -> bool {
        self.filter_may_mark() || self.inputs.iter().any(LNode::may_mark_rows)
    }

    /// Whether this node is a filter that may mark rows, given the kinds
    /// of number its input's columns hold.
    pub fn filter_may_mark(&self) -> bool {
        match (&self.op, &self.inputs[..]) {
            (LOp::Filter(e), [input]) => {
                let (kinds, markers) = input.kinds_and_markers();
                crate::ops::Filter::may_mark(e, &kinds, &markers)
            }
            _ => false,
        }
    }

    /// Whether each output column may hold an overflow marker (a computed
    /// value that overflowed, `expr::out_of_range_marker`): one a
    /// projection computes by an expression that may overflow or that
    /// reads such a column, and what carries it on (a group key, an
    /// aggregate of it, a join's or union's column). A filter reading one
    /// may mark rows (`ops::Filter::may_mark`).
    pub fn marker_columns(&self) -> Vec<bool> {
        self.kinds_and_markers().1
    }

    /// The kind of number each output column holds, as far as overflowing
    /// goes ([`NumKind`]): a base table's by its type; a computed column's
    /// by its expression, or any if it may hold an overflow marker (its
    /// expression may overflow or reads a column of any kind); an
    /// aggregate's or window function's, any. With
    /// [`LNode::marker_columns`], in one walk down the tree (each needs
    /// its inputs' both).
    pub fn kinds_and_markers(&self) -> (Vec<NumKind>, Vec<bool>) {
        let inputs: Vec<(Vec<NumKind>, Vec<bool>)> =
            self.inputs.iter().map(LNode::kinds_and_markers).collect();
        let no_input = (vec![], vec![]);
        let (kinds0, markers0) = inputs.first().unwrap_or(&no_input);
        let concat = || -> (Vec<NumKind>, Vec<bool>) {
            let kinds = inputs.iter().flat_map(|i| i.0.clone()).collect();
            (kinds, inputs.iter().flat_map(|i| i.1.clone()).collect())
        };
        let (mut kinds, mut markers): (Vec<NumKind>, Vec<bool>) = match &self.op {
            LOp::Base(t) => (
                t.columns.iter().map(|c| NumKind::of_type(&c.ty)).collect(),
                vec![],
            ),
            LOp::Filter(e) => {
                let mut kinds = kinds0.clone();
                // A marked row holds the marker in the columns it reads.
                if crate::ops::Filter::may_mark(e, kinds0, markers0) {
                    for c in e.columns() {
                        if let Some(k) = kinds.get_mut(c) {
                            *k = NumKind::Any;
                        }
                    }
                }
                (kinds, markers0.clone())
            }
            // An expression over a marker is the marker (`ops::Project`).
            LOp::Project(es) => {
                let reads =
                    |e: &Expr, any: &dyn Fn(usize) -> bool| e.columns().into_iter().any(any);
                let kinds = es
                    .iter()
                    .map(|e| {
                        let marked = e.may_overflow(kinds0)
                            || reads(e, &|c| kinds0.get(c) == Some(&NumKind::Any));
                        match marked {
                            true => NumKind::Any,
                            false => e.num_kind(kinds0),
                        }
                    })
                    .collect();
                let markers = es
                    .iter()
                    .map(|e| {
                        e.may_overflow(kinds0) || reads(e, &|c| markers0.get(c) == Some(&true))
                    })
                    .collect();
                (kinds, markers)
            }
            // Left then right (a semi- or anti-join's width drops the right).
            LOp::Join { .. } => concat(),
            LOp::Aggregate { ngroup, aggs, .. } => {
                let group = markers0.iter().take(*ngroup).copied();
                let read = aggs.iter().map(|a| markers0.get(a.col) == Some(&true));
                (
                    kinds0.iter().take(*ngroup).copied().collect(),
                    group.chain(read).collect(),
                )
            }
            LOp::Union => inputs
                .iter()
                .cloned()
                .reduce(|a, b| {
                    (
                        a.0.iter().zip(&b.0).map(|(x, y)| x.or(*y)).collect(),
                        a.1.iter().zip(&b.1).map(|(x, y)| *x || *y).collect(),
                    )
                })
                .unwrap_or_default(),
            LOp::Window { .. } => (kinds0.clone(), markers0.clone()),
            LOp::Values(_) => no_input.clone(),
        };
        kinds.resize(self.width(), NumKind::Any);
        markers.resize(self.width(), false);
        (kinds, markers)
    }

    pub fn tables(&self, out: &mut Vec<u64>) {
        if let LOp::Base(t) = &self.op {
            if !out.contains(&t.id) {
                out.push(t.id);
            }
        }
        for i in &self.inputs {
            i.tables(out);
        }
    }
}

/// A LIMIT/OFFSET value: a constant or a parameter slot.
#[derive(Clone, Debug)]
pub(crate) enum Count {
    Const(u64),
    Slot(usize),
}

/// Everything needed to install and read a view.
#[derive(Clone, Debug)]
pub(crate) struct PlannedView {
    /// The plan producing the reader's stored rows.
    pub plan: LNode,
    /// Reader key columns (of the stored row).
    pub key: Vec<usize>,
    /// Per key column, the parameter slots giving its values (several for IN).
    pub key_slots: Vec<Vec<usize>>,
    pub key_names: Vec<String>,
    pub key_types: Vec<SqlType>,
    pub order: OrderSpec,
    pub read_filter: Option<Expr>,
    /// Output columns computed from the stored row (and parameters).
    pub output: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
    pub limit: Option<Count>,
    pub offset: Option<Count>,
    /// Stored row to return for a key with no rows (aggregates without GROUP BY).
    pub empty_default: Option<Row>,
    /// Several lookups may return equal rows that DISTINCT must merge.
    pub dedup: bool,
    /// Aggregation at read time, after `read_filter` and before
    /// OFFSET/LIMIT and `output` (see [`ReadAgg`]).
    pub finish: Option<ReadAgg>,
    /// A stored column `read_filter` bounds by parameters: the reader
    /// orders each key's rows by it first, and a read takes only the rows
    /// between the bounds (see [`range`]).
    pub range: Option<RangeIndex>,
    /// MySQL sorts the rows of the keys read (no index gives ORDER BY,
    /// see `planner::layout::sorts_all_rows`), so it evaluates WHERE on
    /// each of them before the LIMIT: a read fails on any marked row of
    /// its keys, not only on the page's.
    pub sorts_all_rows: bool,
}

impl PlannedView {
    /// The order the reader keeps each key's rows in.
    pub fn reader_order(&self) -> OrderSpec {
        match &self.range {
            Some(r) => r.reader_order(&self.order),
            None => self.order.clone(),
        }
    }
}

/// A query without FROM: evaluated directly.
#[derive(Clone, Debug)]
pub(crate) struct Constant {
    pub exprs: Vec<Expr>,
    pub filter: Option<Expr>,
    pub columns: Vec<OutputColumn>,
}

pub(crate) enum Planned {
    View(Box<PlannedView>),
    Constant(Constant),
}

/// Where a parameter slot's value comes from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// The caller's n-th `?`.
    User(usize),
    /// A literal extracted from the query text.
    Literal(Value),
    /// The elements of a `col IN (...)` list rewritten as `col = ?`: the
    /// view is keyed by `col` and read once per distinct element.
    List(Vec<Source>),
}

/// Work done at read time over the rows a reader holds, for queries whose
/// WHERE has parameters that cannot be reader keys (`score > ?` or
/// `col IN (?, ?)` with GROUP BY), or whose FROM is a derived table with
/// ORDER BY ... LIMIT: the view maintains the rows before that step (keyed
/// by any equality parameters), and each read takes the derived table's
/// window, filters, aggregates what is left, and so on. Costs O(rows under
/// the key) per read, but one view serves every parameter value.
#[derive(Clone, Debug)]
pub(crate) struct ReadAgg {
    /// The derived table's ORDER BY/OFFSET/LIMIT, first.
    pub window: Option<Window>,
    /// WHERE conditions over the stored rows (after the window).
    pub filter: Option<Expr>,
    pub aggregate: Option<ReadAggregate>,
    /// HAVING, over the aggregated row (group columns, then aggregates).
    pub having: Option<Expr>,
    /// The row returned onwards (what a maintained view would store).
    pub project: Vec<Expr>,
    /// SELECT DISTINCT over the projected rows.
    pub distinct: bool,
    /// Collation of each projected column: DISTINCT merges rows equal
    /// under it ('a' and 'A' under utf8mb4_general_ci).
    pub distinct_colls: Vec<Collation>,
    /// ORDER BY over the projected rows.
    pub order: crate::ops::reader::OrderSpec,
}

/// A derived table's ORDER BY ... LIMIT over the stored rows.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    pub order: crate::ops::reader::OrderSpec,
    pub offset: Option<Count>,
    pub limit: Option<Count>,
}

/// GROUP BY and aggregates at read time.
#[derive(Clone, Debug)]
pub(crate) struct ReadAggregate {
    /// Computes the input layout (group columns, then aggregate
    /// arguments) from a stored row; `None` when stored rows are laid out
    /// so already (then any further columns are ignored).
    pub pre: Option<Vec<Expr>>,
    pub ngroup: usize,
    pub aggs: Vec<AggSpec>,
    /// Collation of each group column.
    pub colls: Vec<Collation>,
    /// No GROUP BY: one row even over no input.
    pub scalar: bool,
}

fn count(
    c: &Option<Count>,
    params: &[ladle_common::Value],
) -> Result<Option<usize>, crate::expr::EvalError> {
    Ok(match c {
        None => None,
        Some(Count::Const(n)) => Some(*n as usize),
        Some(Count::Slot(s)) => match params.get(*s).and_then(count_of) {
            Some(n) => Some(n),
            _ => {
                return Err(crate::expr::EvalError::Invalid(
                    "LIMIT must be a non-negative integer".into(),
                ))
            }
        },
    })
}

/// A LIMIT or OFFSET value as a count: any non-negative integer, up to
/// 18446744073709551615 (what ORMs write for "no limit" after an OFFSET).
pub(crate) fn count_of(v: &ladle_common::Value) -> Option<usize> {
    match v {
        ladle_common::Value::UInt(u) => Some(usize::try_from(*u).unwrap_or(usize::MAX)),
        other => other.as_i64().and_then(|n| usize::try_from(n).ok()),
    }
}

impl ReadAgg {
    /// Applies the window, the filter, the aggregation, HAVING, the
    /// projection, DISTINCT and ORDER BY to `rows` (already filtered by the
    /// view's read-time filter, if any).
    pub fn apply(
        &self,
        mut rows: Vec<ladle_common::Row>,
        params: &[ladle_common::Value],
    ) -> Result<Vec<ladle_common::Row>, crate::expr::EvalError> {
        if let Some(w) = &self.window {
            rows.sort_by(|a, b| crate::ops::reader::cmp_rows(a, b, &w.order));
            let offset = count(&w.offset, params)?.unwrap_or(0);
            let limit = count(&w.limit, params)?.unwrap_or(usize::MAX);
            rows = rows.into_iter().skip(offset).take(limit).collect();
        }
        if let Some(f) = &self.filter {
            let mut kept = Vec::with_capacity(rows.len());
            for r in rows {
                if f.eval_bool(&r, params)? {
                    kept.push(r);
                }
            }
            rows = kept;
        }
        let grouped = match &self.aggregate {
            None => rows,
            Some(a) => {
                if let Some(pre) = &a.pre {
                    rows = rows
                        .iter()
                        .map(|r| pre.iter().map(|e| e.eval_params(r, params)).collect())
                        .collect::<Result<_, _>>()?;
                }
                let mut agg =
                    crate::ops::Aggregate::new(a.ngroup, a.aggs.clone(), a.colls.clone(), a.scalar);
                agg.fill(&[], rows)
            }
        };
        let mut out = Vec::with_capacity(grouped.len());
        let mut seen = std::collections::HashSet::new();
        for g in grouped {
            if let Some(h) = &self.having {
                if !h.eval_bool(&g, params)? {
                    continue;
                }
            }
            let row = self
                .project
                .iter()
                .map(|e| e.eval_params(&g, params))
                .collect::<Result<ladle_common::Row, _>>()?;
            // DISTINCT compares the selected columns: those after them
            // are ORDER BY columns not selected.
            let selected = &row[..self.distinct_colls.len().min(row.len())];
            if self.distinct && !seen.insert(crate::ops::norm_key(selected, &self.distinct_colls)) {
                continue;
            }
            out.push(row);
        }
        if !self.order.is_empty() {
            out.sort_by(|a, b| crate::ops::reader::cmp_rows(a, b, &self.order));
        }
        Ok(out)
    }
}
