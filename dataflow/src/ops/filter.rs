//! Filter: passes rows whose predicate is true.

use std::fmt;

use ladle_common::{Row, RowDelta, Value};

use crate::expr::{EvalError, Expr, NumKind};
use crate::Result;

/// Keeps the rows for which `pred` is SQL-true, and marks those for which
/// it overflowed (see [`Filter::pass`]).
#[derive(Clone, Debug)]
pub(crate) struct Filter {
    /// Predicate over the input row.
    pub pred: Expr,
    /// The input columns `pred` reads that a row whose predicate
    /// overflowed is marked in: not those this node is looked up by
    /// ([`Filter::with_lookups`]), so a marked row keeps its key and a
    /// fill finds it where the write put it; another column when it reads
    /// only those.
    marks: Vec<usize>,
    /// The input's width.
    width: usize,
    /// Whether `pred` may overflow ([`Filter::may_mark`]) over the rows
    /// this filter sees; if not, no row leaves it marked.
    may_mark: bool,
}

/// What [`Filter::pass`] does with a row.
enum Verdict {
    Keep,
    Drop,
    /// The predicate overflowed: pass the row on with this marker.
    Mark(Value),
}

impl Filter {
    /// A filter on `pred` over rows whose columns hold values of kinds
    /// `input`, some perhaps overflow markers (`markers`, see
    /// `LNode::marker_columns`).
    pub fn new(pred: Expr, input: &[NumKind], markers: &[bool]) -> Filter {
        Filter {
            marks: pred.columns(),
            width: input.len(),
            may_mark: Filter::may_mark(&pred, input, markers),
            pred,
        }
    }

    /// This filter when looked up by the columns `lookups` (keys of a
    /// reader, a join, an aggregate downstream): it marks none of them.
    /// When `pred` reads only those (`WHERE a = ? AND a + 1 > 0`), the
    /// last other column carries the mark: MySQL fails on the row
    /// whichever columns its WHERE reads.
    pub fn with_lookups(mut self, lookups: &[usize]) -> Filter {
        self.marks.retain(|c| !lookups.contains(c));
        if self.marks.is_empty() {
            let other = (0..self.width).rev().find(|c| !lookups.contains(c));
            self.marks.extend(other);
        }
        self
    }

    /// Whether `pred` may overflow (MySQL's 1690) over rows whose columns
    /// hold values of kinds `input`, or reads a column that may hold an
    /// overflow marker (`markers`: a derived table's `a + 1 AS x`, which
    /// MySQL computes when its WHERE reads it), so rows may leave a filter
    /// on it marked and the view's reads must look for the marks.
    pub fn may_mark(pred: &Expr, input: &[NumKind], markers: &[bool]) -> bool {
        pred.may_overflow(input)
            || pred
                .columns()
                .iter()
                .any(|&c| markers.get(c) == Some(&true))
    }

    /// [`Filter::may_mark`] of this filter's predicate over its input.
    pub fn marks_rows(&self) -> bool {
        self.may_mark
    }

    fn verdict(&self, row: &[Value]) -> Verdict {
        // A row an earlier filter marked passes as it is: MySQL failed
        // on it before reaching this conjunct (or an outer query's WHERE,
        // HAVING), whichever column carries the mark by now.
        if row.iter().any(crate::expr::is_where_failed) {
            return Verdict::Keep;
        }
        // Reading a marker (a value computed below that overflowed) is
        // evaluating it: MySQL fails there.
        let verdict = match self.may_mark {
            true => self.pred.eval_bool_reading_markers(row, &[]),
            false => self.pred.eval_bool(row, &[]),
        };
        match verdict {
            Ok(true) => Verdict::Keep,
            Ok(false) => Verdict::Drop,
            Err(EvalError::OutOfRange(m)) if self.may_mark && !self.marks.is_empty() => {
                Verdict::Mark(crate::expr::where_failed_marker(&m))
            }
            // Other failures are MySQL's warnings: the row does not pass;
            // so does an overflow when every column is a key (known gap: a
            // mark there would move the row to another key), and one the
            // classification missed (the view's reads would not look for
            // its mark).
            Err(_) => Verdict::Drop,
        }
    }

    /// `row` if the predicate holds; if evaluating it overflowed (MySQL
    /// fails the statement with 1690), `row` with the columns the
    /// predicate reads (but keys, see `marks`) set to a marker
    /// (`expr::where_failed_marker`) that downstream operators carry to
    /// the view, whose reads of the key the row lands under then fail;
    /// `None` if it is false or NULL. The same
    /// row always gives the same answer, so an insert and its delete, or a
    /// write and a fill, agree.
    pub fn pass(&self, mut row: Row) -> Option<Row> {
        match self.verdict(&row) {
            Verdict::Keep => Some(row),
            Verdict::Drop => None,
            Verdict::Mark(m) => {
                for &c in &self.marks {
                    if let Some(v) = row.get_mut(c) {
                        *v = m.clone();
                    }
                }
                Some(row)
            }
        }
    }

    /// Pure core: each delta passes (perhaps marked) or not, sign preserved.
    pub fn on_input(&self, deltas: Vec<RowDelta>) -> Result<Vec<RowDelta>> {
        let mut out = Vec::with_capacity(deltas.len());
        for d in deltas {
            let passed = match d {
                RowDelta::Insert(r) => self.pass(r).map(RowDelta::Insert),
                RowDelta::Delete(r) => self.pass(r).map(RowDelta::Delete),
            };
            out.extend(passed);
        }
        Ok(out)
    }

    /// Upquery: of the parent's rows for a key, the ones that pass, as in
    /// `on_input`. Checks for an interrupted read every 16 rows.
    pub fn pull(&self, parent_rows: Vec<Row>) -> Result<Vec<Row>> {
        let mut out = Vec::with_capacity(parent_rows.len());
        for (i, r) in parent_rows.into_iter().enumerate() {
            if i % 16 == 15 {
                crate::interrupt::check()?;
            }
            out.extend(self.pass(r));
        }
        Ok(out)
    }

    /// [`Filter::pull`] for several keys at once: the parent's rows per key.
    pub fn pull_keys(&self, parent_rows: Vec<Vec<Row>>) -> Vec<Vec<Row>> {
        parent_rows
            .into_iter()
            .map(|rows| rows.into_iter().filter_map(|r| self.pass(r)).collect())
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
    use crate::expr::{ArithOp, CmpOp, LogicOp};
    use crate::ops::harness::{assert_emits, Harness};
    use ladle_common::{Collation, Value};

    #[test]
    fn filter_passes_matching_deltas_of_both_signs() {
        let f = Filter::new(
            Expr::Cmp {
                op: CmpOp::Gt,
                left: Box::new(Expr::Column(0)),
                right: Box::new(Expr::Literal(Value::Int(5))),
                collation: Collation::GeneralCi,
            },
            &[],
            &[],
        );
        let mut h = Harness::new(move |_, d| f.on_input(d).unwrap());
        assert_emits(&mut h, "+ 6 a\n+ 1 b\n- 7 c", "+ 6 a\n- 7 c");
        // An update crossing the boundary: old half passes, new half does not.
        assert_emits(&mut h, "- 6 a\n+ 2 a", "- 6 a");
        assert_emits(&mut h, "- 2 a\n+ 9 a", "+ 9 a");
    }

    /// `a + 1 > 0` over rows `(id INT, a BIGINT)`, looked up by `lookups`.
    fn overflowing(lookups: &[usize]) -> Filter {
        let a_plus_1 = Expr::Arith(
            ArithOp::Add,
            Box::new(Expr::Column(1)),
            Box::new(Expr::Literal(Value::Int(1))),
        );
        Filter::new(
            Expr::Cmp {
                op: CmpOp::Gt,
                left: Box::new(a_plus_1),
                right: Box::new(Expr::Literal(Value::Int(0))),
                collation: Collation::GeneralCi,
            },
            &[NumKind::Int(32), NumKind::Int(64)],
            &[],
        )
        .with_lookups(lookups)
    }

    #[test]
    fn filter_marks_an_overflowing_row_alike_on_every_path() {
        let f = overflowing(&[0]);
        assert!(f.marks_rows());
        let row = |id: i64, a: i64| vec![Value::Int(id), Value::Int(a)];
        let rows = vec![row(1, i64::MAX), row(2, 1), row(3, -5)];
        let inserted = f
            .on_input(rows.iter().cloned().map(RowDelta::Insert).collect())
            .unwrap();
        // Row 1 passes marked in `a`, keeping its key; 2 passes; 3 does not.
        let kept: Vec<Row> = inserted.iter().map(|d| d.row().clone()).collect();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0][0], Value::Int(1));
        assert!(crate::expr::is_where_failed(&kept[0][1]));
        assert_eq!(
            crate::expr::out_of_range_in(&kept[0][1]),
            Some("BIGINT value is out of range")
        );
        assert_eq!(kept[1], row(2, 1));
        // Its delete retracts exactly that row; a fill finds the same rows.
        let deleted = f
            .on_input(vec![RowDelta::Delete(row(1, i64::MAX))])
            .unwrap();
        assert_eq!(deleted, vec![RowDelta::Delete(kept[0].clone())]);
        assert_eq!(f.pull(rows.clone()).unwrap(), kept);
        assert_eq!(f.pull_keys(vec![rows, vec![]]), vec![kept.clone(), vec![]]);
        // A later filter passes the marked row as it is.
        assert_eq!(
            overflowing(&[0]).pull(vec![kept[0].clone()]).unwrap(),
            vec![kept[0].clone()]
        );
    }

    /// What `f` emits for the row `(1, BIGINT's largest)` inserted.
    fn insert_max(f: &Filter) -> Vec<RowDelta> {
        let row = vec![Value::Int(1), Value::Int(i64::MAX)];
        f.on_input(vec![RowDelta::Insert(row)]).unwrap()
    }

    #[test]
    fn filter_marks_another_column_when_its_predicate_reads_only_keys() {
        // Looked up by `a` itself: a mark there would move the row to
        // another key, so `id` carries it.
        let out = insert_max(&overflowing(&[1]));
        let [RowDelta::Insert(row)] = &out[..] else {
            panic!("{out:?}");
        };
        assert!(crate::expr::is_where_failed(&row[0]));
        assert_eq!(row[1], Value::Int(i64::MAX));
    }

    #[test]
    fn filter_drops_an_overflowing_row_whose_every_column_is_a_key() {
        // No column could carry the mark without moving the row: it is
        // dropped, as before marks existed (known gap).
        assert!(insert_max(&overflowing(&[0, 1])).is_empty());
    }

    #[test]
    fn filter_that_cannot_overflow_marks_nothing() {
        // `a + 1 > 0` over an INT `a` fits BIGINT: no row is ever marked.
        let f = Filter::new(
            overflowing(&[0]).pred,
            &[NumKind::Int(32), NumKind::Int(32)],
            &[],
        );
        assert!(!f.marks_rows());
        // A row such a filter cannot see (an INT column holds no BIGINT)
        // is dropped, as before marks existed, rather than marked for a
        // view whose reads do not look for marks.
        assert!(insert_max(&f).is_empty());
    }

    #[test]
    fn filter_reading_a_computed_overflow_marks_the_row_unless_it_stops_before() {
        // `x < 3` over a derived table's `a + 1 AS x` (column 1), which
        // overflowed for this row: MySQL computes x to compare it.
        let x_lt_3 = Expr::Cmp {
            op: CmpOp::Lt,
            left: Box::new(Expr::Column(1)),
            right: Box::new(Expr::Literal(Value::Int(3))),
            collation: Collation::GeneralCi,
        };
        let kinds = [NumKind::Int(32), NumKind::Any];
        let f = Filter::new(x_lt_3.clone(), &kinds, &[false, true]).with_lookups(&[0]);
        assert!(f.marks_rows());
        let marker = crate::expr::out_of_range_marker("BIGINT value is out of range");
        let out = f
            .on_input(vec![RowDelta::Insert(vec![Value::Int(1), marker.clone()])])
            .unwrap();
        let [RowDelta::Insert(row)] = &out[..] else {
            panic!("{out:?}");
        };
        assert_eq!(row[0], Value::Int(1));
        assert!(crate::expr::is_where_failed(&row[1]));
        // `id < 0 AND x < 3`: the row fails before x is read.
        let id_lt_0 = Expr::Cmp {
            op: CmpOp::Lt,
            left: Box::new(Expr::Column(0)),
            right: Box::new(Expr::Literal(Value::Int(0))),
            collation: Collation::GeneralCi,
        };
        let both = Expr::Logic(LogicOp::And, Box::new(id_lt_0), Box::new(x_lt_3));
        let f = Filter::new(both, &kinds, &[false, true]).with_lookups(&[0]);
        let row = vec![Value::Int(1), marker];
        assert!(f.on_input(vec![RowDelta::Insert(row)]).unwrap().is_empty());
    }
}
