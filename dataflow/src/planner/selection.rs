//! WHERE: each conjunct becomes a reader key (`col = ?`, `col IN (?, ...)`),
//! a keyed semi-join, a read-time filter, a semi/anti-join or joined
//! subquery column, or a filter maintained as low in the joins as it can go.

use sqlparser::ast;

use super::expr::{
    collect_aggregates, collect_bare_columns, unsupported, visit_children, volatile, ExprCx, Scope,
};
use super::pushdown::filter_below_joins;
use super::query::Planner;
use super::select_state::SelectState;
use super::syntax::{as_column, as_slot, has_placeholder, has_placeholder_deep, has_subquery};
use crate::plan::LNode;
use crate::{DataflowError, Result};

/// The key column to narrow by at read time instead of keying by it, when a
/// one-table query's two `col = ?` keys are exactly the columns of one of the
/// table's two-column indexes (`user_id = ? AND story_id = ?` on an index
/// `(user_id, story_id)`): the view is keyed by the index's leading column
/// and each key holds that prefix's rows ordered by the other column, which
/// a read narrows by binary search ([`RangeIndex`](crate::plan::range::RangeIndex)), as the index itself is
/// laid out. One fill (an index prefix scan) then serves every second value,
/// and an IN list of them (a page's 25 stories) reads one key: keyed by both
/// columns, each (user, story) pair was its own miss and its own, mostly
/// empty, entry. The index is the application's statement that rows are
/// found by its leading column first.
pub(super) fn index_prefix_key(node: &LNode, key_frame: &[(usize, Vec<usize>)]) -> Option<usize> {
    let [(a, sa), (b, sb)] = key_frame else {
        return None;
    };
    if sa.len() != 1 || sb.len() != 1 {
        return None;
    }
    let t = node.filtered_table()?;
    let pk = t.primary_key.iter().map(|k| &k[..]);
    let secondary = t.indexes.iter().map(|i| &i.columns[..]);
    pk.chain(secondary).find_map(|cols| match cols {
        [lead, rest] if (*lead, *rest) == (*a, *b) => Some(*b),
        [lead, rest] if (*lead, *rest) == (*b, *a) => Some(*a),
        _ => None,
    })
}

impl SelectState {
    /// Keys by the leading column of a two-column index the two `col = ?`
    /// keys cover, narrowing by the other at read time (see
    /// [`index_prefix_key`]).
    pub(super) fn narrow_by_index_prefix(&mut self) {
        if let Some(narrowed) = index_prefix_key(&self.node, &self.key_frame) {
            self.narrowed_slot = self
                .key_frame
                .iter()
                .find(|k| k.0 == narrowed)
                .and_then(|k| k.1.first().copied());
            self.key_frame.retain(|k| k.0 != narrowed);
            self.read_filters.extend(
                self.key_conjuncts
                    .drain(..)
                    .filter(|(col, _)| *col == narrowed)
                    .map(|(_, c)| c),
            );
        }
    }
}

impl Planner<'_> {
    /// WHERE's conjuncts (those FROM did not take as join conditions):
    /// keys, read-time filters, semi-joins, filters.
    pub(super) fn select_where(
        &self,
        st: &mut SelectState,
        conj: Vec<ast::Expr>,
        top: bool,
    ) -> Result<()> {
        for c in conj {
            own_aggregate_refused(&c, &st.scope)?;
            if st.window.is_some() {
                if has_subquery(&c) {
                    return Err(unsupported(
                        "subqueries in WHERE over a derived table with LIMIT",
                    ));
                }
                st.read_filters.push(c);
                continue;
            }
            if top {
                if let Some((col, slots)) = self.key_conjunct(&c, &st.scope) {
                    // A derived table's computed column that may overflow
                    // (`a + 1 AS x`) keys no view: MySQL computes it for
                    // each row to compare, failing on one that overflows,
                    // while a key would file that row under its marker.
                    // Each read checks every row instead.
                    if st.node.marker_columns().get(col) == Some(&true) {
                        st.read_filters.push(c);
                        continue;
                    }
                    if let Some(k) = st.key_frame.iter_mut().find(|k| k.0 == col) {
                        // `a = ? AND a = ?`: keep both as a read-time check.
                        let _ = k;
                        st.read_filters.push(c);
                    } else {
                        if slots.len() == 1 {
                            st.key_conjuncts.push((col, c.clone()));
                        }
                        st.key_frame.push((col, slots));
                    }
                    continue;
                }
            }
            if top && has_placeholder_deep(&c) {
                let keyed = match &c {
                    ast::Expr::InSubquery {
                        expr,
                        subquery,
                        negated: false,
                    } if !has_placeholder(expr) => Some((Some(&**expr), subquery)),
                    ast::Expr::Exists {
                        subquery,
                        negated: false,
                    } => Some((None, subquery)),
                    _ => None,
                };
                if let Some((in_expr, sub)) = keyed {
                    self.keyed_semi(
                        &mut st.node,
                        &mut st.scope,
                        &mut st.key_frame,
                        in_expr,
                        sub,
                        st.nsub,
                    )?;
                    st.nsub += 1;
                    continue;
                }
            }
            if has_placeholder(&c) {
                if !top || has_subquery(&c) {
                    return Err(unsupported("parameters in a subquery"));
                }
                st.read_filters.push(c);
                continue;
            }
            // A semi/anti-join where the shape allows; otherwise the
            // subqueries (correlated or not) join in as columns to filter on.
            let c = if has_subquery(&c) {
                match self.subquery_condition(c, &mut st.node, &mut st.scope, &mut st.nsub)? {
                    Some(c) => c,
                    None => continue,
                }
            } else {
                c
            };
            let e = ExprCx::row(&st.scope).compile(&c)?;
            if e.is_volatile() {
                if !top {
                    return Err(volatile(
                        "NOW()/RAND() or a scalar subquery without an aggregate in a subquery's WHERE",
                    ));
                }
                st.read_filters.push(c);
                continue;
            }
            st.node = filter_below_joins(LNode::take(&mut st.node), e);
        }
        Ok(())
    }

    /// `col = ?`, `? = col`, `col IN (?, ...)` on a FROM column.
    pub(super) fn key_conjunct(&self, c: &ast::Expr, scope: &Scope) -> Option<(usize, Vec<usize>)> {
        match c {
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Eq,
                right,
            } => {
                let (col, slot) = match (
                    as_column(left),
                    as_slot(right),
                    as_column(right),
                    as_slot(left),
                ) {
                    (Some(col), Some(slot), _, _) => (col, slot),
                    (_, _, Some(col), Some(slot)) => (col, slot),
                    _ => return None,
                };
                Some((scope.resolve(col).ok()?, vec![slot]))
            }
            ast::Expr::InList {
                expr,
                list,
                negated: false,
            } if !list.is_empty() => {
                let col = scope.resolve(as_column(expr)?).ok()?;
                let slots: Option<Vec<usize>> = list.iter().map(as_slot).collect();
                Some((col, slots?))
            }
            ast::Expr::Nested(x) => self.key_conjunct(x, scope),
            _ => None,
        }
    }
}

/// MySQL's 1111 for WHERE conjunct `c` calling an aggregate of this
/// query's rows: of its columns (`WHERE a = MAX(a)`) or of none
/// (`COUNT(*)`). One of an enclosing query's columns is that query's (a
/// correlated subquery's `WHERE x = MAX(outer.a)`), and one in a nested
/// subquery its own.
fn own_aggregate_refused(c: &ast::Expr, scope: &Scope) -> Result<()> {
    let mut aggregates = Vec::new();
    collect_aggregates(c, &mut aggregates);
    for a in &aggregates {
        let mut columns = Vec::new();
        visit_children(a, &mut |arg| collect_bare_columns(arg, &mut columns));
        if columns.iter().all(|col| scope.resolve(col).is_ok()) {
            return Err(DataflowError::InvalidGroupFunction);
        }
    }
    Ok(())
}
