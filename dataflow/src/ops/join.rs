//! Equi-join (inner, left outer, semi, anti).
//!
//! Maintenance is per join key: for every key touched by a batch, the
//! graph looks up both inputs' current rows for that key (`L_new`, `R_new`);
//! the rows before the batch are those minus the batch's deltas (`L_old`,
//! `R_old`), and the output delta is `join(L_new, R_new) - join(L_old,
//! R_old)`. This is exact for self-joins and for batches touching both sides.

use std::fmt;

use ladle_common::{Collation, Row, RowDelta, Value};

use super::{diff_rows, norm_key, project_cols, row_bytes, undo};
use crate::hash::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum JoinKind {
    Inner,
    Left,
    /// Left rows with at least one match (IN / EXISTS); outputs left columns.
    Semi,
    /// Left rows with no match (NOT EXISTS); outputs left columns.
    Anti,
}

#[derive(Clone, Debug)]
pub(crate) struct Join {
    pub kind: JoinKind,
    /// Join columns of the left input.
    pub left_cols: Vec<usize>,
    /// Join columns of the right input (pairwise equal to `left_cols`).
    pub right_cols: Vec<usize>,
    /// Collation of each join column pair.
    pub colls: Vec<Collation>,
    /// Width of the right input (for NULL padding).
    pub right_width: usize,
    /// For lookups whose key columns come from both inputs: the key columns
    /// and whether the pull starts from the right input (decided at install
    /// from which side's key columns reach an index).
    pub drives: Vec<(Vec<usize>, bool)>,
    /// A semi- or anti-join's: the left column its output carries the mark
    /// of a right row whose WHERE overflowed in (see [`Join::join_rows`]):
    /// the last one it is not looked up by ([`Join::with_lookups`]), so a
    /// marked row keeps its key; `None` when it is looked up by all.
    pub carrier: Option<usize>,
    /// Whether right rows may be marked (a filter below may mark rows):
    /// if not, a semi- or anti-join does not look for marks.
    pub right_marks: bool,
}

/// The deltas of one batch at a join, grouped by normalized join key.
pub(crate) struct KeyedDeltas<'a> {
    pub key: Vec<Value>,
    pub left: Vec<&'a RowDelta>,
    pub right: Vec<&'a RowDelta>,
}

impl Join {
    /// This join when looked up by the output columns `lookups` (keys of a
    /// reader, a join, an aggregate downstream): a semi- or anti-join
    /// carries a mark in the last left column that is none of them, when
    /// its right rows may be marked (`right_marks`).
    pub fn with_lookups(mut self, lookups: &[usize], left_width: usize, right_marks: bool) -> Join {
        self.right_marks = right_marks;
        self.carrier = match self.kind {
            JoinKind::Semi | JoinKind::Anti => (0..left_width).rev().find(|c| !lookups.contains(c)),
            JoinKind::Inner | JoinKind::Left => None,
        };
        self
    }

    /// Groups a batch's deltas by join key. Rows with a NULL join column
    /// never match and are returned separately (left side only matters).
    pub fn group<'a>(
        &self,
        left: &'a [RowDelta],
        right: &'a [RowDelta],
    ) -> (Vec<KeyedDeltas<'a>>, Vec<&'a RowDelta>) {
        let mut order: Vec<Vec<Value>> = Vec::new();
        let mut map: HashMap<Vec<Value>, KeyedDeltas<'a>> = HashMap::default();
        let mut null_left = Vec::new();
        for (side, deltas, cols) in [(0, left, &self.left_cols), (1, right, &self.right_cols)] {
            for d in deltas {
                let key = project_cols(d.row(), cols);
                if key.iter().any(Value::is_null) {
                    if side == 0 {
                        null_left.push(d);
                    }
                    continue;
                }
                let nk = norm_key(&key, &self.colls);
                let e = map.entry(nk.clone()).or_insert_with(|| {
                    order.push(nk);
                    KeyedDeltas {
                        key,
                        left: vec![],
                        right: vec![],
                    }
                });
                if side == 0 {
                    e.left.push(d);
                } else {
                    e.right.push(d);
                }
            }
        }
        let groups = order.into_iter().filter_map(|k| map.remove(&k)).collect();
        (groups, null_left)
    }

    /// Bytes (as [`row_bytes`] counts them) of what [`Join::join_rows`]
    /// would return for these rows, at most: known before the product is
    /// built, so a read can refuse one too large to hold.
    pub fn output_bytes_bound(&self, left: &[Row], right: &[Row]) -> usize {
        let bytes = |rows: &[Row]| rows.iter().map(|r| row_bytes(r)).sum::<usize>();
        match self.kind {
            JoinKind::Inner | JoinKind::Left => bytes(left)
                .saturating_mul(right.len().max(1))
                .saturating_add(bytes(right).saturating_mul(left.len())),
            JoinKind::Semi | JoinKind::Anti => bytes(left),
        }
    }

    /// Output rows for the rows of one key.
    pub fn join_rows(&self, left: &[Row], right: &[Row]) -> Vec<Row> {
        let mut out = Vec::new();
        match self.kind {
            JoinKind::Inner | JoinKind::Left => {
                for l in left {
                    if right.is_empty() {
                        if self.kind == JoinKind::Left {
                            let mut row = l.clone();
                            row.extend(std::iter::repeat_n(Value::Null, self.right_width));
                            out.push(row);
                        }
                        continue;
                    }
                    for r in right {
                        let mut row = l.clone();
                        row.extend(r.iter().cloned());
                        out.push(row);
                    }
                }
            }
            JoinKind::Semi | JoinKind::Anti => {
                let (marked, right) = match self.right_marks {
                    true => marked_match(right),
                    false => (None, !right.is_empty()),
                };
                if let Some((m, c)) = marked.zip(self.carrier) {
                    out.extend(left.iter().map(|l| carry_mark(l, c, m)));
                } else if right == (self.kind == JoinKind::Semi) {
                    out.extend(left.iter().cloned());
                }
            }
        }
        out
    }

    /// Pure core for one key: given both inputs' current rows for the key
    /// and the batch's deltas for it, the output deltas.
    pub fn diff_key(&self, l_new: Vec<Row>, r_new: Vec<Row>, g: &KeyedDeltas<'_>) -> Vec<RowDelta> {
        let l_old = undo(l_new.clone(), &g.left);
        let r_old = undo(r_new.clone(), &g.right);
        diff_rows(
            self.join_rows(&l_old, &r_old),
            self.join_rows(&l_new, &r_new),
        )
    }

    /// Output for left rows whose join key is NULL (they never match).
    pub fn null_key_rows(&self, deltas: &[&RowDelta]) -> Vec<RowDelta> {
        let mut out = Vec::new();
        for d in deltas {
            let rows = self.join_rows(&[d.row().clone()], &[]);
            for r in rows {
                out.push(if d.sign() > 0 {
                    RowDelta::Insert(r)
                } else {
                    RowDelta::Delete(r)
                });
            }
        }
        out
    }
}

/// A semi- or anti-join's right rows of one key: the mark of
/// one whose WHERE overflowed (a filter marked it, see
/// `ops::Filter::pass`), and whether any other is there. MySQL
/// evaluates the subquery's WHERE on the rows of the key (and fails on
/// such a row) however the rest of them answer, so a mark wins; with
/// no column to carry it in, the marked row counts as absent (known
/// gap: MySQL fails).
fn marked_match<'r>(right: &'r [Row]) -> (Option<&'r Value>, bool) {
    let mark = |r: &'r Row| r.iter().find(|v| crate::expr::is_where_failed(v));
    let marked = right.iter().find_map(mark);
    let unmarked = right.iter().any(|r| mark(r).is_none());
    (marked, unmarked)
}

/// Left row `l` carrying mark `m` in column `c`, unless a mark is in it
/// already (an earlier WHERE failed on it).
fn carry_mark(l: &Row, c: usize, m: &Value) -> Row {
    let mut row = l.clone();
    if !row.iter().any(crate::expr::is_where_failed) {
        if let Some(v) = row.get_mut(c) {
            *v = m.clone();
        }
    }
    row
}

impl fmt::Display for Join {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Join {:?} on left{:?} = right{:?}",
            self.kind, self.left_cols, self.right_cols
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::harness::{assert_emits, parse_row, Harness};

    /// A join of two-column inputs on their first columns.
    fn on_first_column(kind: JoinKind) -> Join {
        Join {
            kind,
            left_cols: vec![0],
            right_cols: vec![0],
            colls: vec![Collation::GeneralCi],
            right_width: 2,
            drives: vec![],
            carrier: None,
            right_marks: false,
        }
    }

    /// A join harness over in-memory inputs: the closure keeps both sides'
    /// current multisets and performs the per-key lookups itself.
    fn harness(
        kind: JoinKind,
        left: &str,
        right: &str,
    ) -> Harness<impl FnMut(usize, Vec<RowDelta>) -> Vec<RowDelta>> {
        let j = on_first_column(kind).with_lookups(&[0], 2, true);
        let mut sides: [Vec<Row>; 2] = [
            left.lines()
                .filter(|l| !l.trim().is_empty())
                .map(parse_row)
                .collect(),
            right
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(parse_row)
                .collect(),
        ];
        Harness::new(move |from, deltas: Vec<RowDelta>| {
            for d in &deltas {
                match d {
                    RowDelta::Insert(r) => sides[from].push(r.clone()),
                    RowDelta::Delete(r) => {
                        if let Some(p) = sides[from].iter().position(|x| x == r) {
                            sides[from].swap_remove(p);
                        }
                    }
                }
            }
            let (l, r) = if from == 0 {
                (deltas.clone(), vec![])
            } else {
                (vec![], deltas.clone())
            };
            let (groups, nulls) = j.group(&l, &r);
            let mut out = j.null_key_rows(&nulls);
            for g in &groups {
                let pick = |rows: &Vec<Row>| -> Vec<Row> {
                    rows.iter()
                        .filter(|x| {
                            super::super::key_matches(x, &[0], &g.key, &[Collation::GeneralCi])
                        })
                        .cloned()
                        .collect()
                };
                out.extend(j.diff_key(pick(&sides[0]), pick(&sides[1]), g));
            }
            out
        })
    }

    #[test]
    fn inner_join_both_sides() {
        let mut h = harness(JoinKind::Inner, "1 a\n2 b", "1 x");
        assert_emits(&mut h, "+ 1 c", "+ 1 c 1 x");
        assert_emits(&mut h, "- 2 b", "");
        h.from = 1;
        assert_emits(&mut h, "+ 2 y", "");
        assert_emits(&mut h, "- 1 x", "- 1 a 1 x\n- 1 c 1 x");
        // An update moving a right row from key 1 to key 2 (nothing on 1 now).
        assert_emits(&mut h, "+ 1 z", "+ 1 a 1 z\n+ 1 c 1 z");
        assert_emits(&mut h, "- 1 z\n+ 2 z", "- 1 a 1 z\n- 1 c 1 z");
    }

    #[test]
    fn left_join_pads_and_unpads() {
        let mut h = harness(JoinKind::Left, "1 a", "");
        assert_emits(&mut h, "+ 2 b", "+ 2 b NULL NULL");
        assert_emits(&mut h, "+ NULL n", "+ NULL n NULL NULL");
        h.from = 1;
        assert_emits(&mut h, "+ 1 x", "- 1 a NULL NULL\n+ 1 a 1 x");
        assert_emits(&mut h, "+ 1 y", "+ 1 a 1 y");
        assert_emits(
            &mut h,
            "- 1 x\n- 1 y",
            "- 1 a 1 x\n- 1 a 1 y\n+ 1 a NULL NULL",
        );
    }

    #[test]
    fn semi_and_anti() {
        let mut h = harness(JoinKind::Semi, "1 a\n2 b", "");
        h.from = 1;
        assert_emits(&mut h, "+ 1 x", "+ 1 a");
        assert_emits(&mut h, "+ 1 y", "");
        assert_emits(&mut h, "- 1 x\n- 1 y", "- 1 a");
        let mut h = harness(JoinKind::Anti, "1 a\n2 b", "");
        h.from = 1;
        assert_emits(&mut h, "+ 1 x", "- 1 a");
        h.from = 0;
        assert_emits(&mut h, "+ 3 c\n+ 1 d", "+ 3 c");
    }

    /// A right row whose WHERE overflowed (marked) marks every left row of
    /// its key, whatever the other right rows of the key; looked up by
    /// every left column, the join drops it instead.
    #[test]
    fn semi_and_anti_carry_a_right_rows_mark() {
        let m = crate::expr::where_failed_marker("BIGINT value is out of range");
        let row = |v: &[i64]| -> Row { v.iter().map(|&x| Value::Int(x)).collect() };
        let marked = vec![Value::Int(1), m.clone()];
        let left = [row(&[1, 10])];
        for kind in [JoinKind::Semi, JoinKind::Anti] {
            let j = on_first_column(kind);
            let carried = j.clone().with_lookups(&[0], 2, true);
            let out = carried.join_rows(&left, &[row(&[1, 5]), marked.clone()]);
            assert_eq!(out, vec![vec![Value::Int(1), m.clone()]]);
            let dropped = j.with_lookups(&[0, 1], 2, true);
            let out = dropped.join_rows(&left, std::slice::from_ref(&marked));
            let expect = match kind {
                JoinKind::Anti => left.to_vec(),
                _ => vec![],
            };
            assert_eq!(out, expect);
        }
    }
}
