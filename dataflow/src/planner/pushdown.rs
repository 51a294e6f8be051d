//! Predicate pushdown: a WHERE conjunct is applied at the lowest join input
//! that holds every column it reads, so a join keeps (and an upquery reads)
//! only the rows that pass. Without it `FROM ck a, ck b, ck c WHERE a.id < 3
//! AND b.id < 3 AND c.id < 3` built the whole 2,000³-row cross product
//! before filtering it, and ran the server out of memory.

use crate::expr::Expr;
use crate::ops::JoinKind;
use crate::plan::{LNode, LOp};

/// `node` with `filter` (an expression over `node`'s columns) applied as
/// low as it can go: into a join's left input when it reads only left
/// columns; into an inner join's right input when it reads only right ones
/// (not a LEFT join's, whose NULL-extended rows the WHERE must see). A
/// filter reading no column (`WHERE 1 = 0`) stays on top.
pub(crate) fn filter_below_joins(mut node: LNode, filter: Expr) -> LNode {
    let cols = filter.columns();
    if let (LOp::Join { kind, .. }, false) = (&node.op, cols.is_empty()) {
        let left_width = node.inputs[0].width();
        if cols.iter().all(|&c| c < left_width) {
            let left = LNode::take(&mut node.inputs[0]);
            node.inputs[0] = filter_below_joins(left, filter);
            return node;
        }
        if *kind == JoinKind::Inner && cols.iter().all(|&c| c >= left_width) {
            let right_filter = filter.map_columns(&|c| Expr::Column(c - left_width));
            let right = LNode::take(&mut node.inputs[1]);
            node.inputs[1] = filter_below_joins(right, right_filter);
            return node;
        }
    }
    let colls = node.colls.clone();
    LNode {
        op: LOp::Filter(filter),
        inputs: vec![node],
        colls,
    }
}
