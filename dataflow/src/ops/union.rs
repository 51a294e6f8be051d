//! Union (ALL): forwards deltas from every input unchanged. UNION DISTINCT
//! is a Union followed by a distinct Aggregate.

use std::fmt;

use ladle_common::{Row, RowDelta};

use crate::Result;

#[derive(Clone, Debug, Default)]
pub(crate) struct Union {
    /// Number of inputs.
    pub inputs: usize,
}

impl Union {
    pub fn on_input(&self, inputs: Vec<Vec<RowDelta>>) -> Vec<RowDelta> {
        inputs.into_iter().flatten().collect()
    }

    /// Upquery: every input's rows for the key, input by input
    /// (`input(i)` pulls input `i`).
    pub fn pull(&self, mut input: impl FnMut(usize) -> Result<Vec<Row>>) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        for i in 0..self.inputs {
            out.extend(input(i)?);
        }
        Ok(out)
    }

    /// [`Union::pull`] for several keys at once (`input(i)` gives input
    /// `i`'s rows per key).
    pub fn pull_keys(
        &self,
        keys: usize,
        mut input: impl FnMut(usize) -> Result<Vec<Vec<Row>>>,
    ) -> Result<Vec<Vec<Row>>> {
        let mut out = vec![Vec::new(); keys];
        for i in 0..self.inputs {
            for (rows, more) in out.iter_mut().zip(input(i)?) {
                rows.extend(more);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Union {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Union ALL of {}", self.inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::harness::{assert_emits, Harness};

    #[test]
    fn union_forwards_all_inputs() {
        let u = Union { inputs: 2 };
        let mut h = Harness::new(move |from, d| {
            let mut inputs = vec![vec![], vec![]];
            inputs[from] = d;
            u.on_input(inputs)
        });
        assert_emits(&mut h, "+ 1 a\n- 2 b", "+ 1 a\n- 2 b");
        h.from = 1;
        assert_emits(&mut h, "+ 1 a", "+ 1 a");
    }
}
