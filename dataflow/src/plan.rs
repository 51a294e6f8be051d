//! The logical query graph the planner produces (no SQL AST, no state):
//! lowered into dataflow nodes by [`crate::graph::Graph::install`].

use std::sync::Arc;

use ladle_common::{Collation, TableSchema};

use crate::expr::Expr;
use crate::ops::{AggSpec, JoinKind};

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
    pub fn width(&self) -> usize {
        self.colls.len()
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

/// Aggregation done at read time over the rows a reader holds, for queries
/// whose WHERE has parameters that cannot be reader keys (`score > ?` or
/// `col IN (?, ?)` with GROUP BY): the view maintains the pre-aggregation
/// rows (keyed by any equality parameters), and each read filters them,
/// then aggregates what is left. Costs O(rows under the key) per read, but
/// one view serves every parameter value.
#[derive(Clone, Debug)]
pub(crate) struct ReadAgg {
    /// Stored rows laid out as group columns, then aggregate arguments
    /// (then any other columns, ignored here).
    pub ngroup: usize,
    pub aggs: Vec<AggSpec>,
    /// Collation of each group column.
    pub colls: Vec<Collation>,
    /// No GROUP BY: one row even over no input.
    pub scalar: bool,
    /// HAVING, over the aggregated row (group columns, then aggregates).
    pub having: Option<Expr>,
    /// The row returned onwards (what a maintained view would store).
    pub project: Vec<Expr>,
    /// SELECT DISTINCT over the projected rows.
    pub distinct: bool,
    /// ORDER BY over the projected rows.
    pub order: crate::ops::reader::OrderSpec,
}

impl ReadAgg {
    /// Aggregates `rows` (already filtered by the read-time WHERE) and
    /// applies HAVING, the projection, DISTINCT and ORDER BY.
    pub fn apply(
        &self,
        rows: Vec<ladle_common::Row>,
        params: &[ladle_common::Value],
    ) -> Result<Vec<ladle_common::Row>, crate::expr::EvalError> {
        let mut agg = crate::ops::Aggregate::new(
            self.ngroup,
            self.aggs.clone(),
            self.colls.clone(),
            self.scalar,
        );
        let grouped = agg.fill(&[], rows);
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
            if self.distinct && !seen.insert(row.clone()) {
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
