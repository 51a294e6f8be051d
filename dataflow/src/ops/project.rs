//! Project: computes output columns from each input row.

use std::fmt;

use ladle_common::{Collation, Row, RowDelta, Value};

use crate::expr::Expr;
use crate::Result;

#[derive(Clone, Debug)]
pub(crate) struct Project {
    /// One expression per output column, over the input row.
    pub exprs: Vec<Expr>,
    /// The output column that carries the mark of a row whose WHERE
    /// overflowed when no output reads a marked column (see
    /// [`Project::carry_where_failed`]): the last one this node is not
    /// looked up by (the last one when it is looked up by all).
    carrier: Option<usize>,
}

impl Project {
    pub fn new(exprs: Vec<Expr>) -> Project {
        let carrier = exprs.len().checked_sub(1);
        Project { exprs, carrier }
    }

    /// This projection when looked up by the output columns `lookups`
    /// (keys of a reader, a join, an aggregate downstream): a mark is
    /// carried in none of them, so a marked row keeps its key, unless every
    /// output is one (then the row moves to the mark's key: see
    /// [`unmoved`]).
    pub fn with_lookups(mut self, lookups: &[usize]) -> Project {
        let last = self.exprs.len().checked_sub(1);
        self.carrier = (0..self.exprs.len())
            .rev()
            .find(|c| !lookups.contains(c))
            .or(last);
        self
    }

    /// `out` (projected from `row`) keeping the mark of a row whose WHERE
    /// overflowed (`expr::where_failed_marker`) that no output read: MySQL
    /// fails on the row whichever columns the query reads, so the carrier
    /// column becomes the mark.
    fn carry_where_failed(&self, row: &[Value], out: &mut Row) {
        let Some(m) = row.iter().find(|v| crate::expr::is_where_failed(v)) else {
            return;
        };
        if out.iter().any(crate::expr::is_where_failed) {
            return;
        }
        if let Some(slot) = self.carrier.and_then(|c| out.get_mut(c)) {
            *slot = m.clone();
        }
    }

    pub fn apply(&self, row: &[ladle_common::Value]) -> Row {
        // Never an error, so that an insert and its later delete always
        // project alike: an overflow becomes its marker (a read returning
        // it fails with 1690), so do a scalar subquery's several rows
        // (1242), any other failure NULL.
        let has_marker = row
            .iter()
            .any(|v| crate::expr::out_of_range_in(v).is_some());
        if has_marker {
            if let Some(m) = self.dropped_subquery_rows(row) {
                return vec![m; self.exprs.len()];
            }
        }
        let mut out: Row = self
            .exprs
            .iter()
            .map(|e| {
                if has_marker {
                    // MySQL evaluates the overflowing operand and fails:
                    // an expression over a marker (`MIN(d) IS NULL`) is one.
                    let marker = e.columns().into_iter().find_map(|c| {
                        row.get(c)
                            .filter(|v| crate::expr::out_of_range_in(v).is_some())
                    });
                    if let Some(m) = marker {
                        return m.clone();
                    }
                }
                eval_or_marker(e, row)
            })
            .collect();
        if has_marker {
            self.carry_where_failed(row, &mut out);
        }
        out
    }

    /// Output columns that copy an input column no other output reads:
    /// [`Project::apply_owned`] moves those instead of cloning them.
    pub(crate) fn movable(&self) -> Vec<Option<usize>> {
        let mut reads = Vec::<usize>::new();
        for e in &self.exprs {
            reads.extend(e.columns());
        }
        self.exprs
            .iter()
            .map(|e| match e {
                Expr::Column(i) if reads.iter().filter(|&&c| c == *i).count() == 1 => Some(*i),
                _ => None,
            })
            .collect()
    }

    /// [`Project::apply`] of an owned row: the columns `movable` names
    /// (from [`Project::movable`]) move into the output instead of being
    /// cloned (a fill projects every row of a table: each clone of a
    /// string is an atomic count update, 5% of a cold front page).
    pub(crate) fn apply_owned(&self, mut row: Row, movable: &[Option<usize>]) -> Row {
        if row
            .iter()
            .any(|v| crate::expr::out_of_range_in(v).is_some())
        {
            return self.apply(&row);
        }
        let mut out = Vec::with_capacity(self.exprs.len());
        for (e, m) in self.exprs.iter().zip(movable) {
            out.push(match m {
                Some(i) => row
                    .get_mut(*i)
                    .map_or(Value::Null, |v| std::mem::replace(v, Value::Null)),
                None => eval_or_marker(e, &row),
            });
        }
        out
    }

    /// [`Project::apply_owned`] of every row.
    fn apply_all(&self, rows: Vec<Row>) -> Vec<Row> {
        let movable = self.movable();
        rows.into_iter()
            .map(|r| self.apply_owned(r, &movable))
            .collect()
    }

    /// A scalar subquery's several-rows marker MySQL evaluated whether or
    /// not it is read (a GROUP BY key, an aggregate: see
    /// `expr::evaluated`) in a column of `row` that no output reads: the
    /// statement fails (1242) even when the outer query reads another. The
    /// whole output row then is that marker, for the read to fail on (an
    /// aggregate keeps it, COUNT(*) too).
    fn dropped_subquery_rows(&self, row: &[Value]) -> Option<Value> {
        let read: Vec<usize> = self.exprs.iter().flat_map(|e| e.columns()).collect();
        row.iter().enumerate().find_map(|(i, v)| {
            (crate::expr::is_evaluated_rows(v) && !read.contains(&i)).then(|| v.clone())
        })
    }

    /// Whether some output column is computed (not a copy of an input
    /// column), so may hold an overflow marker.
    pub fn computes(&self) -> bool {
        // A literal is no computation: it cannot overflow (a top-k's
        // narrowing projection puts NULL in place of unread columns).
        self.exprs.iter().any(|e| match e {
            Expr::Column(_) => false,
            Expr::Literal(v) => crate::expr::out_of_range_in(v).is_some(),
            _ => true,
        })
    }

    /// Approximate heap size of the values `rows` (this node's output)
    /// hold in computed columns: what projecting them added to the input,
    /// whose values the pull that read it already charged (see
    /// `interrupt::charge`). A projection of 5,000 expressions over a
    /// three-column table materializes rows 1,600 times as wide.
    pub fn computed_bytes(&self, rows: &[Row]) -> usize {
        let computed: Vec<usize> = (0..self.exprs.len())
            .filter(|&i| self.source(i).is_none())
            .collect();
        if computed.is_empty() {
            return 0;
        }
        rows.iter()
            .map(|r| {
                computed
                    .iter()
                    .filter_map(|&i| r.get(i))
                    .map(super::value_bytes)
                    .sum::<usize>()
            })
            .sum()
    }

    /// Output column `col` if it is a plain copy of an input column.
    pub fn source(&self, col: usize) -> Option<usize> {
        match self.exprs.get(col) {
            Some(Expr::Column(i)) => Some(*i),
            _ => None,
        }
    }

    pub fn on_input(&self, deltas: Vec<RowDelta>) -> Result<Vec<RowDelta>> {
        let movable = self.movable();
        Ok(deltas
            .into_iter()
            .map(|d| match d {
                RowDelta::Insert(r) => RowDelta::Insert(self.apply_owned(r, &movable)),
                RowDelta::Delete(r) => RowDelta::Delete(self.apply_owned(r, &movable)),
            })
            .collect())
    }

    /// The parent's columns `cols` pass through unchanged, if they all do
    /// (a key on them can be pushed into the parent's pull).
    fn parent_cols(&self, cols: &[usize]) -> Option<Vec<usize>> {
        cols.iter().map(|&c| self.source(c)).collect()
    }

    /// Upquery: this projection's rows whose `cols` equal `key` (compared
    /// under `colls`, the output collations). A key on passed-through
    /// columns is pushed into the parent's pull (`parent(cols, key)`);
    /// otherwise the parent is read whole and the projected rows filtered.
    pub fn pull(
        &self,
        cols: &[usize],
        key: &[Value],
        colls: &[Collation],
        parent: impl FnOnce(&[usize], &[Value]) -> Result<Vec<Row>>,
    ) -> Result<Vec<Row>> {
        Ok(match self.parent_cols(cols) {
            Some(m) => unmoved(self.apply_all(parent(&m, key)?), cols),
            None => {
                let mut rows = self.apply_all(parent(&[], &[])?);
                rows.retain(|r| super::key_matches(r, cols, key, colls));
                rows
            }
        })
    }

    /// [`Project::pull`] for several keys at once, when the key columns all
    /// pass through (`parent(cols, keys)` gives the parent's rows per key);
    /// `None` when they do not, and each key is pulled on its own.
    pub fn pull_keys(
        &self,
        cols: &[usize],
        keys: &[Vec<Value>],
        parent: impl FnOnce(&[usize], &[Vec<Value>]) -> Result<Vec<Vec<Row>>>,
    ) -> Option<Result<Vec<Vec<Row>>>> {
        let m = self.parent_cols(cols)?;
        Some(parent(&m, keys).map(|per_key| {
            per_key
                .into_iter()
                .map(|rows| unmoved(self.apply_all(rows), cols))
                .collect()
        }))
    }
}

/// `rows`, pulled by the key on `cols`, but those whose mark of an
/// overflowed WHERE is in a key column (no other column could carry it,
/// see [`Project::with_lookups`]): that row is under the mark's key, not
/// the one pulled, as the write that brought it put it (a fill must
/// agree, or the row is never retracted). Such a row is lost to the read,
/// as before marks existed (known gap).
fn unmoved(mut rows: Vec<Row>, cols: &[usize]) -> Vec<Row> {
    rows.retain(|r| {
        !cols
            .iter()
            .any(|&c| r.get(c).is_some_and(crate::expr::is_where_failed))
    });
    rows
}

/// `e` over `row`, never an error (see [`Project::apply`]).
fn eval_or_marker(e: &Expr, row: &[Value]) -> Value {
    match e.eval(row) {
        Ok(v) => v,
        Err(crate::expr::EvalError::OutOfRange(m)) => crate::expr::out_of_range_marker(&m),
        // A scalar subquery's several rows (1242 when read).
        Err(crate::expr::EvalError::SubqueryRows) => crate::expr::subquery_rows_marker(),
        Err(_) => Value::Null,
    }
}

impl fmt::Display for Project {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cols: Vec<String> = self.exprs.iter().map(|e| e.to_string()).collect();
        write!(f, "Project [{}]", cols.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::ArithOp;
    use crate::ops::harness::{assert_emits, Harness};
    use ladle_common::Value;

    #[test]
    fn moving_columns_projects_as_cloning_them() {
        use crate::expr::out_of_range_marker;
        let text = |s: &str| Value::Text(s.into());
        // Column 0 is read twice (moved by neither), column 2 once (moved),
        // column 1 by an expression only.
        let p = Project::new(vec![
            Expr::Column(0),
            Expr::Column(2),
            Expr::Arith(
                ArithOp::Add,
                Box::new(Expr::Column(1)),
                Box::new(Expr::Column(0)),
            ),
            Expr::Column(0),
        ]);
        assert_eq!(p.movable(), vec![None, Some(2), None, None]);
        let rows = vec![
            vec![Value::Int(1), Value::Int(2), text("a")],
            vec![Value::Null, Value::Int(5), text("b")],
            vec![Value::Int(i64::MAX), Value::Int(1), text("c")],
            // A marker takes the cloning path whole.
            vec![
                out_of_range_marker("BIGINT value is out of range"),
                Value::Int(1),
                text("d"),
            ],
        ];
        let cloned: Vec<Row> = rows.iter().map(|r| p.apply(r)).collect();
        assert_eq!(p.apply_all(rows), cloned);
        assert_eq!(
            cloned[0],
            vec![Value::Int(1), text("a"), Value::Int(3), Value::Int(1)]
        );
    }

    #[test]
    fn project_maps_both_signs() {
        let p = Project::new(vec![
            Expr::Column(1),
            Expr::Arith(
                ArithOp::Add,
                Box::new(Expr::Column(0)),
                Box::new(Expr::Literal(Value::Int(1))),
            ),
        ]);
        let mut h = Harness::new(move |_, d| p.on_input(d).unwrap());
        assert_emits(&mut h, "+ 1 a\n- 2 b", "+ a 2\n- b 3");
    }

    #[test]
    fn a_scalar_subquerys_several_rows_project_to_their_marker() {
        use crate::expr::{subquery_rows_evaluated, Func, SUBQUERY_ROWS};
        let single = Expr::Call(Func::SingleRow, vec![Expr::Column(0), Expr::Column(1)]);
        let p = Project::new(vec![single, Expr::Column(2)]);
        let one = p.apply(&[Value::Int(1), Value::Int(7), Value::Int(0)]);
        assert_eq!(one, vec![Value::Int(7), Value::Int(0)]);
        let many = p.apply(&[Value::Int(2), Value::Int(7), Value::Int(0)]);
        assert_eq!(crate::expr::out_of_range_in(&many[0]), Some(SUBQUERY_ROWS));
        assert_eq!(many[1], Value::Int(0));
        // Dropped: the unevaluated marker goes, the evaluated one (a GROUP
        // BY key's) takes the whole row.
        let drop = Project::new(vec![Expr::Column(1)]);
        let lazy = crate::expr::subquery_rows_marker();
        assert_eq!(drop.apply(&[lazy, Value::Int(3)]), vec![Value::Int(3)]);
        let row = drop.apply(&[subquery_rows_evaluated(), Value::Int(3)]);
        assert!(crate::expr::is_evaluated_rows(&row[0]), "{row:?}");
    }

    #[test]
    fn overflow_projects_to_a_marker_equal_in_both_signs() {
        let p = Project::new(vec![Expr::Arith(
            ArithOp::Mul,
            Box::new(Expr::Column(0)),
            Box::new(Expr::Literal(Value::Int(2))),
        )]);
        let big = vec![Value::Int(i64::MAX)];
        let out = p
            .on_input(vec![RowDelta::Insert(big.clone()), RowDelta::Delete(big)])
            .unwrap();
        let (RowDelta::Insert(a), RowDelta::Delete(b)) = (&out[0], &out[1]) else {
            panic!("signs kept: {out:?}");
        };
        assert_eq!(a, b, "an insert and its delete cancel out");
        assert_eq!(
            crate::expr::out_of_range_in(&a[0]),
            Some("BIGINT value is out of range")
        );
        // Arithmetic over the marker keeps it.
        let again = crate::expr::arith_values(ArithOp::Add, &a[0], &Value::Int(1)).unwrap();
        assert!(crate::expr::out_of_range_in(&again).is_some());
    }

    #[test]
    fn project_carries_a_where_mark_out_of_its_keys() {
        let m = crate::expr::where_failed_marker("BIGINT value is out of range");
        let row = vec![Value::Int(1), m.clone()];
        let pull = |p: &Project| {
            p.pull(&[0], &[Value::Int(1)], &[Collation::Binary], |_, _| {
                Ok(vec![row.clone()])
            })
            .unwrap()
        };
        // (id, a) -> (id, NULL) looked up by id: the mark goes to the
        // column of its own, the row stays under its key.
        let carried =
            Project::new(vec![Expr::Column(0), Expr::Literal(Value::Null)]).with_lookups(&[0]);
        assert_eq!(carried.apply(&row), vec![Value::Int(1), m.clone()]);
        assert_eq!(pull(&carried), vec![vec![Value::Int(1), m.clone()]]);
        // (id, a) -> (id): nowhere else, the row moves to the mark's key,
        // where the write put it; a pull by id leaves it out alike.
        let only_key = Project::new(vec![Expr::Column(0)]).with_lookups(&[0]);
        assert_eq!(only_key.apply(&row), vec![m]);
        assert!(pull(&only_key).is_empty());
    }
}
