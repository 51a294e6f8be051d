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
