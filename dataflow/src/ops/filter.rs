//! Filter: passes rows whose predicate is true.

use std::fmt;

use ladle_common::{Row, RowDelta};

use crate::expr::Expr;
use crate::Result;

/// Keeps the rows for which `pred` is SQL-true.
#[derive(Clone, Debug)]
pub(crate) struct Filter {
    /// Predicate over the input row.
    pub pred: Expr,
}

impl Filter {
    pub fn new(pred: Expr) -> Filter {
        Filter { pred }
    }

    pub fn keep(&self, row: &[ladle_common::Value]) -> Result<bool> {
        self.pred
            .eval_bool(row, &[])
            .map_err(crate::DataflowError::from)
    }

    /// Pure core: each delta passes or not, sign preserved.
    pub fn on_input(&self, deltas: Vec<RowDelta>) -> Result<Vec<RowDelta>> {
        let mut out = Vec::with_capacity(deltas.len());
        for d in deltas {
            // A row whose predicate fails to evaluate (overflow) is filtered
            // out, as MySQL would fail the query; never half-apply an update.
            if self.keep(d.row()).unwrap_or(false) {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// Upquery: of the parent's rows for a key, the ones that pass (an
    /// error evaluating the predicate drops the row, as in `on_input`).
    /// Checks for an interrupted read every 16 rows.
    pub fn pull(&self, parent_rows: Vec<Row>) -> Result<Vec<Row>> {
        let mut out = Vec::with_capacity(parent_rows.len());
        for (i, r) in parent_rows.into_iter().enumerate() {
            if i % 16 == 15 {
                crate::interrupt::check()?;
            }
            if self.keep(&r).unwrap_or(false) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// [`Filter::pull`] for several keys at once: the parent's rows per key.
    pub fn pull_keys(&self, parent_rows: Vec<Vec<Row>>) -> Vec<Vec<Row>> {
        parent_rows
            .into_iter()
            .map(|rows| {
                rows.into_iter()
                    .filter(|r| self.keep(r).unwrap_or(false))
                    .collect()
            })
            .collect()
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Filter {}", self.pred)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::CmpOp;
    use crate::ops::harness::{assert_emits, Harness};
    use ladle_common::{Collation, Value};

    #[test]
    fn filter_passes_matching_deltas_of_both_signs() {
        let f = Filter::new(Expr::Cmp {
            op: CmpOp::Gt,
            left: Box::new(Expr::Column(0)),
            right: Box::new(Expr::Literal(Value::Int(5))),
            collation: Collation::GeneralCi,
        });
        let mut h = Harness::new(move |_, d| f.on_input(d).unwrap());
        assert_emits(&mut h, "+ 6 a\n+ 1 b\n- 7 c", "+ 6 a\n- 7 c");
        // An update crossing the boundary: old half passes, new half does not.
        assert_emits(&mut h, "- 6 a\n+ 2 a", "- 6 a");
        assert_emits(&mut h, "- 2 a\n+ 9 a", "+ 9 a");
    }
}
