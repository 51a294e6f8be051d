//! Range parameters (`col BETWEEN ? AND ?`, `col > ?`, `col <= ?`, ...)
//! answered from the reader's order instead of a filter over the key's
//! rows.
//!
//! A view whose read-time filter bounds one stored column by parameters
//! keeps each key's rows ordered by that column first (then by its ORDER
//! BY): [`RangeIndex::reader_order`]. A read finds the rows between the
//! bounds by binary search ([`RangeIndex::narrow`]): O(log² n) to place
//! the bounds, then only the rows inside are filtered, aggregated, sorted
//! by the ORDER BY and returned; the read-time filter still runs on them,
//! so the narrowing only has to keep every row that can match.
//!
//! It may skip a row only where the SQL comparison the filter makes
//! ([`crate::expr::compare`] under the comparison's collation) is monotonic
//! in the column's stored order: numbers against any bound (compared as
//! numbers), text against text under the column's own collation, dates
//! against dates or text that reads as one. Other bounds (a number against
//! a text column, a binary string, text under another collation) do not
//! narrow. NULL sorts first: no bound keeps a NULL, and a NULL bound keeps
//! nothing (the comparison is unknown for every row).
//!
//! The key's rows are still all cached (the reader is keyed by the
//! equality columns, or holds one entry for the whole result when there
//! are none); filling only the intervals read is not done here.

use std::cmp::Ordering;

use ladle_common::{Collation, SqlType, Value};

use crate::expr::{CmpOp, Expr, LogicOp};
use crate::ops::reader::{OrderSpec, Rows};

/// How the stored values of the range column compare with bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Number,
    Text,
    Date,
}

impl Class {
    fn of(ty: &SqlType) -> Option<Class> {
        match ty {
            SqlType::Int { .. }
            | SqlType::Year
            | SqlType::Bit(_)
            | SqlType::Decimal { .. }
            | SqlType::Float
            | SqlType::Double => Some(Class::Number),
            SqlType::Char(_) | SqlType::VarChar(_) | SqlType::Text(_) => Some(Class::Text),
            SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. } => {
                Some(Class::Date)
            }
            _ => None,
        }
    }
}

/// One bound: a parameter slot, whether it is inclusive, and the
/// collation of the comparison it comes from.
#[derive(Clone, Debug)]
struct Bound {
    slot: usize,
    inclusive: bool,
    coll: Collation,
}

/// A stored column bounded by parameters in a view's read-time filter.
#[derive(Clone, Debug)]
pub(crate) struct RangeIndex {
    /// The stored column, and its name (for EXPLAIN and SHOW VIEWS).
    pub col: usize,
    pub name: String,
    /// Its collation (the reader's order on it).
    coll: Collation,
    class: Class,
    lower: Vec<Bound>,
    upper: Vec<Bound>,
    /// A parameter slot the filter compares the column with for equality
    /// (`col = ?`) that may be bound to an IN list: the read narrows once
    /// per element and keeps a row if any element's filter holds (see
    /// [`RangeIndex::with_list_slot`]).
    pub list_slot: Option<usize>,
}

impl RangeIndex {
    /// The range bounds of `filter` (a conjunction over stored columns),
    /// on the first column that has any and whose type and collation are
    /// known (`col_type` gives them, and the column's name).
    pub fn of(
        filter: Option<&Expr>,
        col_type: impl Fn(usize) -> Option<(SqlType, Collation, String)>,
    ) -> Option<RangeIndex> {
        let mut conj = Vec::new();
        conjuncts(filter?, &mut conj);
        let mut found: Option<RangeIndex> = None;
        for c in conj {
            for (col, bound, lower) in bounds_of(c) {
                if let Some(r) = &mut found {
                    if r.col == col {
                        if lower {
                            r.lower.push(bound);
                        } else {
                            r.upper.push(bound);
                        }
                    }
                    continue;
                }
                let Some((ty, coll, name)) = col_type(col) else {
                    continue;
                };
                let Some(class) = Class::of(&ty) else {
                    continue;
                };
                let mut r = RangeIndex {
                    col,
                    name,
                    coll,
                    class,
                    lower: vec![],
                    upper: vec![],
                    list_slot: None,
                };
                if lower {
                    r.lower.push(bound);
                } else {
                    r.upper.push(bound);
                }
                found = Some(r);
            }
        }
        found
    }

    /// Lets an IN list bound to `slot` be read by this index, when the
    /// filter bounds the column by `col = ?slot` (both bounds, inclusive).
    /// The planner offers the slot only for plain views (no aggregation,
    /// DISTINCT or window at read time), where a row is kept once if any
    /// element matches it.
    pub fn with_list_slot(mut self, slot: Option<usize>) -> RangeIndex {
        let eq = |s: usize| {
            let has = |bs: &[Bound]| bs.iter().any(|b| b.slot == s && b.inclusive);
            has(&self.lower) && has(&self.upper)
        };
        self.list_slot = slot.filter(|&s| eq(s));
        self
    }

    /// The reader's order: the range column first, then `order`.
    pub fn reader_order(&self, order: &OrderSpec) -> OrderSpec {
        let mut o = vec![(self.col, false, self.coll)];
        o.extend(order.iter().cloned());
        o
    }

    /// Whether rows in the reader's order are already in `order` (it is
    /// empty, or starts with the range column ascending).
    pub fn leads(&self, order: &OrderSpec) -> bool {
        order
            .first()
            .is_none_or(|&(c, desc, coll)| c == self.col && !desc && coll == self.coll)
    }

    /// The positions `start..end` of `rows` (sorted by
    /// [`RangeIndex::reader_order`]) outside which no row satisfies the
    /// bounds under `params`.
    pub fn narrow(&self, rows: &Rows, params: &[Value]) -> (usize, usize) {
        let (mut start, mut end) = (0, rows.len());
        let col = |r: &[Value]| r.get(self.col).cloned().unwrap_or(Value::Null);
        // Rows below a lower bound, and rows not above an upper one, form a
        // prefix (NULLs sort first and count as both: the filter drops
        // them); `equal_in_prefix` says on which side a row equal to the
        // bound falls.
        let bounds = self
            .lower
            .iter()
            .map(|b| (b, false))
            .chain(self.upper.iter().map(|b| (b, true)));
        for (b, is_upper) in bounds {
            let Some(v) = params.get(b.slot) else {
                continue;
            };
            match self.comparable(v, b.coll) {
                None => continue,
                Some(false) => return (0, 0),
                Some(true) => {}
            }
            let equal_in_prefix = b.inclusive == is_upper;
            let prefix = rows.partition_point(|r| match crate::expr::compare(&col(r), v, b.coll) {
                None | Some(Ordering::Less) => true,
                Some(Ordering::Equal) => equal_in_prefix,
                Some(Ordering::Greater) => false,
            });
            if is_upper {
                end = end.min(prefix);
            } else {
                start = start.max(prefix);
            }
        }
        (start, end.max(start))
    }

    /// Whether bound `v` (compared under `coll`) may narrow: `Some(true)`
    /// yes, `None` no (keep every row), `Some(false)` it is NULL (no row
    /// satisfies it).
    fn comparable(&self, v: &Value, coll: Collation) -> Option<bool> {
        if v.is_null() {
            return Some(false);
        }
        let ok = match self.class {
            // A number column against anything compares numerically (a
            // string or date bound is read as a number).
            Class::Number => !matches!(v, Value::Bytes(_)),
            Class::Text => matches!(v, Value::Text(_)) && coll == self.coll,
            Class::Date => match v {
                Value::Date(_) | Value::DateTime(_) => true,
                Value::Text(s) => ladle_common::parse_datetime_prefix(s).is_some(),
                _ => false,
            },
        };
        ok.then_some(true)
    }

    /// For EXPLAIN: the bounds as text (`?n`: parameter slot n).
    pub fn describe(&self) -> String {
        let lo = self
            .lower
            .iter()
            .map(|b| format!("{} ?{}", if b.inclusive { ">=" } else { ">" }, b.slot));
        let hi = self
            .upper
            .iter()
            .map(|b| format!("{} ?{}", if b.inclusive { "<=" } else { "<" }, b.slot));
        format!(
            "{} {}",
            self.name,
            lo.chain(hi).collect::<Vec<_>>().join(" AND ")
        )
    }
}

fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Logic(LogicOp::And, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// The bounds one conjunct sets: (column, bound, whether it is a lower
/// bound).
fn bounds_of(e: &Expr) -> Vec<(usize, Bound, bool)> {
    match e {
        Expr::Cmp {
            op,
            left,
            right,
            collation,
        } => {
            let (col, slot, op) = match (&**left, &**right) {
                (Expr::Column(c), Expr::Param(s)) => (*c, *s, *op),
                (Expr::Param(s), Expr::Column(c)) => (*c, *s, flip(*op)),
                _ => return vec![],
            };
            let b = |inclusive| Bound {
                slot,
                inclusive,
                coll: *collation,
            };
            match op {
                CmpOp::Gt => vec![(col, b(false), true)],
                CmpOp::Ge => vec![(col, b(true), true)],
                CmpOp::Lt => vec![(col, b(false), false)],
                CmpOp::Le => vec![(col, b(true), false)],
                CmpOp::Eq => vec![(col, b(true), true), (col, b(true), false)],
                CmpOp::Ne | CmpOp::NullSafeEq => vec![],
            }
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
            collation,
        } => match (&**expr, &**low, &**high) {
            (Expr::Column(c), Expr::Param(l), Expr::Param(h)) => {
                let b = |slot| Bound {
                    slot,
                    inclusive: true,
                    coll: *collation,
                };
                vec![(*c, b(*l), true), (*c, b(*h), false)]
            }
            _ => vec![],
        },
        _ => vec![],
    }
}

/// `? op col` as `col op' ?`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::reader::cmp_rows;

    fn between(coll: Collation) -> Expr {
        Expr::Between {
            expr: Box::new(Expr::Column(1)),
            low: Box::new(Expr::Param(0)),
            high: Box::new(Expr::Param(1)),
            negated: false,
            collation: coll,
        }
    }

    fn sorted(r: &RangeIndex, vals: Vec<Value>) -> Rows {
        let order = r.reader_order(&vec![]);
        let mut rows: Vec<Vec<Value>> = vals
            .into_iter()
            .enumerate()
            .map(|(i, v)| vec![Value::Int(i as i64), v])
            .collect();
        rows.sort_by(|a, b| cmp_rows(a, b, &order).then_with(|| a.cmp(b)));
        Rows::from(rows)
    }

    /// The second column of rows `start..end`.
    fn taken(rows: &Rows, (start, end): (usize, usize)) -> Vec<Value> {
        rows.range(start, end).map(|r| r[1].clone()).collect()
    }

    #[test]
    fn numbers_narrow_to_the_bounds_nulls_never_kept() {
        let int = SqlType::Int {
            bytes: 4,
            unsigned: false,
            display_width: None,
        };
        let f = between(Collation::Binary);
        let r = RangeIndex::of(Some(&f), |_| {
            Some((int.clone(), Collation::Binary, "n".into()))
        })
        .expect("a range");
        let rows = sorted(
            &r,
            [None, Some(1), Some(3), Some(3), Some(5), None, Some(9)]
                .iter()
                .map(|v| v.map(Value::Int).unwrap_or(Value::Null))
                .collect(),
        );
        let p = |a: Value, b: Value| taken(&rows, r.narrow(&rows, &[a, b]));
        let ints = |v: &[i64]| v.iter().map(|&x| Value::Int(x)).collect::<Vec<_>>();
        assert_eq!(p(Value::Int(3), Value::Int(5)), ints(&[3, 3, 5]));
        assert_eq!(p(Value::Int(2), Value::Int(4)), ints(&[3, 3]));
        assert_eq!(p(Value::Int(6), Value::Int(2)), ints(&[]));
        assert_eq!(p(Value::Int(-9), Value::Int(0)), ints(&[]));
        assert_eq!(p(Value::Int(9), Value::Int(99)), ints(&[9]));
        assert_eq!(p(Value::Null, Value::Int(99)), ints(&[]));
        assert_eq!(p(Value::text("2.5"), Value::Double(3.0)), ints(&[3, 3]));
        // Exclusive bounds, written either way round.
        let gt = Expr::Logic(
            LogicOp::And,
            Box::new(Expr::Cmp {
                op: CmpOp::Lt,
                left: Box::new(Expr::Param(0)),
                right: Box::new(Expr::Column(1)),
                collation: Collation::Binary,
            }),
            Box::new(Expr::Cmp {
                op: CmpOp::Lt,
                left: Box::new(Expr::Column(1)),
                right: Box::new(Expr::Param(1)),
                collation: Collation::Binary,
            }),
        );
        let r = RangeIndex::of(Some(&gt), |_| {
            Some((int.clone(), Collation::Binary, "n".into()))
        })
        .expect("a range");
        assert_eq!(
            taken(&rows, r.narrow(&rows, &[Value::Int(1), Value::Int(9)])),
            ints(&[3, 3, 5])
        );
    }

    #[test]
    fn text_narrows_only_under_the_column_collation() {
        let f = between(Collation::GeneralCi);
        let r = RangeIndex::of(Some(&f), |_| {
            Some((SqlType::VarChar(9), Collation::GeneralCi, "s".into()))
        })
        .expect("a range");
        let rows = sorted(
            &r,
            ["a", "B", "b", "C", "d"].iter().map(Value::text).collect(),
        );
        let got = taken(
            &rows,
            r.narrow(&rows, &[Value::text("b"), Value::text("c")]),
        );
        assert_eq!(got.len(), 3, "{got:?}");
        // A number bound does not narrow a text column (it compares as a
        // number): every row is kept for the filter.
        assert_eq!(r.narrow(&rows, &[Value::Int(0), Value::Int(1)]), (0, 5));
        // A comparison under another collation does not narrow either.
        let r = RangeIndex::of(Some(&between(Collation::Binary)), |_| {
            Some((SqlType::VarChar(9), Collation::GeneralCi, "s".into()))
        })
        .expect("a range");
        assert_eq!(
            r.narrow(&rows, &[Value::text("b"), Value::text("c")]),
            (0, 5)
        );
    }
}
