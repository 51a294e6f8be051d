//! The last phases of a SELECT: the row the view stores (visible outputs,
//! key columns, order columns, columns read-time expressions need), its
//! collations, the reader's keys and range, and the [`PlannedView`] that
//! reads it, maintained whole or finished at read time.

use std::collections::HashMap;

use ladle_common::{Collation, Row, SqlType, Value};

use super::expr::{enum_index, unsupported, Scope};
use super::select_state::{Aggregation, Frame, ReadTimeFinish, SelectState};
use crate::expr::Expr;
use crate::ops::reader::OrderSpec;
use crate::plan::range::RangeIndex;
use crate::plan::{Count, LNode, LOp, PlannedView, ReadAgg};
use crate::{DataflowError, OutputColumn, Result};

/// The row the view stores, and how the query's outputs, keys, order and
/// read-time filter are found in it.
pub(super) struct StoredRow {
    pub(super) stored: Vec<Expr>,
    /// Each output column: a stored column, or an expression over stored
    /// columns computed at read time (NOW(), parameters).
    pub(super) output: Vec<Expr>,
    /// Stored columns the visible outputs take (the first ones).
    pub(super) visible_width: usize,
    pub(super) key: Vec<usize>,
    pub(super) order: OrderSpec,
    pub(super) read_filter: Option<Expr>,
}

impl StoredRow {
    /// Stored row: visible non-volatile outputs, key columns, order
    /// columns, columns read-time expressions need.
    pub(super) fn of(
        visible: &[Expr],
        key_post: &[usize],
        order_exprs: &[(Expr, bool)],
        frame: &Frame,
        read_filter: Option<Expr>,
    ) -> StoredRow {
        let mut stored: Vec<Expr> = Vec::new();
        let slot_of = |e: &Expr, stored: &mut Vec<Expr>| -> usize {
            match stored.iter().position(|x| x == e) {
                Some(p) => p,
                None => {
                    stored.push(e.clone());
                    stored.len() - 1
                }
            }
        };
        let mut output = Vec::new();
        let mut deferred = Vec::new();
        for (i, e) in visible.iter().enumerate() {
            if e.is_volatile() || e.has_params() {
                deferred.push(i);
                output.push(Expr::Literal(Value::Null));
            } else {
                let p = slot_of(e, &mut stored);
                output.push(Expr::Column(p));
            }
        }
        let visible_width = stored.len();
        let key: Vec<usize> = key_post
            .iter()
            .map(|&c| slot_of(&Expr::Column(c), &mut stored))
            .collect();
        let mut order: OrderSpec = Vec::new();
        for (e, desc) in order_exprs {
            // An ENUM column sorts by its label's index, as in MySQL.
            let by_index = match e {
                Expr::Column(c) => match frame.types.get(*c) {
                    Some((SqlType::Enum(labels), _)) => Some(enum_index(e, labels)),
                    _ => None,
                },
                _ => None,
            };
            let e = by_index.as_ref().unwrap_or(e);
            let p = slot_of(e, &mut stored);
            order.push((p, *desc, frame.collation_of(e)));
        }
        let remap = |e: &Expr, stored: &mut Vec<Expr>| -> Expr {
            let cols = e.columns();
            let mut map = HashMap::new();
            for c in cols {
                map.insert(c, slot_of(&Expr::Column(c), stored));
            }
            e.map_columns(&|c| Expr::Column(*map.get(&c).unwrap_or(&c)))
        };
        for i in deferred {
            output[i] = remap(&visible[i], &mut stored);
        }
        let read_filter = read_filter.map(|e| remap(&e, &mut stored));
        StoredRow {
            stored,
            output,
            visible_width,
            key,
            order,
            read_filter,
        }
    }
}

/// The reader's keys: per key, its parameter slots, name and type.
fn keys(
    key_frame: &[(usize, Vec<usize>)],
    scope: &Scope,
) -> (Vec<Vec<usize>>, Vec<String>, Vec<SqlType>) {
    (
        key_frame.iter().map(|k| k.1.clone()).collect(),
        key_frame
            .iter()
            .map(|k| scope.cols[k.0].name.clone())
            .collect(),
        key_frame
            .iter()
            .map(|k| scope.cols[k.0].ty.clone())
            .collect(),
    )
}

type Counts = (Option<Count>, Option<Count>);

impl SelectState {
    /// Read-time aggregation (or a derived table's window): the view keeps
    /// the rows before it, and each read finishes the query over them.
    pub(super) fn read_time_view(
        self,
        late: ReadTimeFinish,
        row: StoredRow,
        columns: Vec<OutputColumn>,
        (limit, offset): Counts,
        distinct: bool,
        agg: Aggregation,
    ) -> Result<PlannedView> {
        if distinct && row.stored.len() > row.visible_width {
            return Err(unsupported(
                "DISTINCT with ORDER BY or filters on columns not selected",
            ));
        }
        if distinct && row.output.iter().any(|e| !matches!(e, Expr::Column(_))) {
            return Err(unsupported("DISTINCT with read-time expressions"));
        }
        let mut ra = late.finish;
        ra.project = row.stored;
        ra.distinct = distinct;
        ra.order = row.order;
        // A window's rows are kept in its order, so taking it is cheap.
        let ra_window = ra.window.is_some();
        let reader_order = ra
            .window
            .as_ref()
            .map(|w| w.order.clone())
            .unwrap_or_default();
        let (key_slots, key_names, key_types) = keys(&self.key_frame, &self.scope);
        Ok(PlannedView {
            plan: self.node,
            key: late.key,
            key_slots,
            key_names,
            key_types,
            order: reader_order,
            read_filter: late.filter,
            output: row.output,
            columns,
            limit,
            offset,
            empty_default: None,
            dedup: false,
            finish: Some(ra),
            // A window is taken in its own order, before the filter.
            range: if ra_window { None } else { agg.late_range },
            sorts_all_rows: false,
        })
    }

    /// The view maintains the query's rows (projected, DISTINCT), keyed
    /// and ordered for the reader; DISTINCT and ORDER BY are taken at read
    /// time when the stored rows carry more than the selected columns.
    pub(super) fn maintained_view(
        self,
        row: StoredRow,
        columns: Vec<OutputColumn>,
        (limit, offset): Counts,
        distinct: bool,
        agg: Aggregation,
        frame: &Frame,
    ) -> Result<PlannedView> {
        let StoredRow {
            mut stored,
            output,
            visible_width,
            key,
            order,
            read_filter,
        } = row;
        // DISTINCT whose stored rows carry more than the selected columns
        // (a read-time filter or range needs them, as in sysbench's
        // `SELECT DISTINCT c ... WHERE id BETWEEN ? AND ? ORDER BY c`): the
        // view keeps the rows, and DISTINCT and ORDER BY are taken at read
        // time over the selected columns. So too when a read-time filter
        // remains over selected or key columns (`a = ? AND a = ?`, whose
        // second equality is no key): it must run before DISTINCT merges
        // rows.
        let distinct_at_read =
            distinct && (stored.len() > visible_width + key.len() || read_filter.is_some());
        add_mark_carrier(&mut stored, &self.node);
        let sorts_all_rows = sorts_all_rows(&self.node, &stored, &key, &order);
        if distinct && output.iter().any(|e| !matches!(e, Expr::Column(_))) {
            return Err(unsupported("DISTINCT with read-time expressions"));
        }
        let stored_colls: Vec<Collation> = stored.iter().map(|e| frame.collation_of(e)).collect();
        // Each output is a stored column when DISTINCT (checked above).
        let output_colls: Vec<Collation> = output
            .iter()
            .map(|e| match e {
                Expr::Column(c) => stored_colls.get(*c).copied().unwrap_or(Collation::Binary),
                _ => Collation::Binary,
            })
            .collect();
        // No range on a column that may hold a marker: each row is read.
        let markers = self.node.marker_columns();
        let range = RangeIndex::of(read_filter.as_ref(), |c| match stored.get(c) {
            Some(Expr::Column(f)) if markers.get(*f) != Some(&true) => Some((
                frame.types.get(*f)?.0.clone(),
                stored_colls[c],
                match &agg.post {
                    None => self.scope.cols.get(*f)?.name.clone(),
                    Some(_) => columns
                        .iter()
                        .zip(&output)
                        .find(|(_, e)| **e == Expr::Column(c))
                        .map_or_else(|| format!("#{c}"), |(o, _)| o.name.clone()),
                },
            )),
            _ => None,
        })
        .map(|r| r.with_list_slot(self.narrowed_slot));
        let empty_default = if agg.empty_default_needed {
            Some(empty_aggregate_row(&self.node, &stored, &agg)?)
        } else {
            None
        };
        let mut node = LNode {
            op: LOp::Project(stored.clone()),
            inputs: vec![self.node],
            colls: stored_colls.clone(),
        };
        if distinct && !distinct_at_read {
            node = LNode {
                op: LOp::Aggregate {
                    ngroup: stored.len(),
                    aggs: vec![],
                    scalar: false,
                },
                inputs: vec![node],
                colls: stored_colls,
            };
        }
        let (key_slots, key_names, key_types) = keys(&self.key_frame, &self.scope);
        if distinct_at_read {
            // An ORDER BY column not selected (WordPress' `SELECT DISTINCT
            // t.term_id ... ORDER BY t.name`, which MariaDB accepts) is
            // carried after the selected ones: DISTINCT compares only
            // those (`distinct_colls`), each distinct row keeping the first
            // row's value to sort by, and the view's output drops it.
            let mut project = output.clone();
            let order_out = order
                .iter()
                .map(|&(slot, desc, coll)| {
                    let at = project.iter().position(|e| *e == Expr::Column(slot));
                    let at = at.unwrap_or_else(|| {
                        project.push(Expr::Column(slot));
                        project.len() - 1
                    });
                    (at, desc, coll)
                })
                .collect();
            let finish = ReadAgg {
                window: None,
                filter: None,
                aggregate: None,
                having: None,
                distinct_colls: output_colls,
                project,
                distinct: true,
                order: order_out,
            };
            return Ok(PlannedView {
                plan: node,
                key,
                key_slots,
                key_names,
                key_types,
                order: vec![],
                read_filter,
                output: (0..output.len()).map(Expr::Column).collect(),
                columns,
                limit,
                offset,
                empty_default,
                dedup: false,
                finish: Some(finish),
                range,
                sorts_all_rows,
            });
        }
        // Several lookups (IN lists, also when collapsed into `col = ?`)
        // may return equal rows; the reader merges them for DISTINCT.
        let dedup = distinct;
        Ok(PlannedView {
            plan: node,
            key,
            key_slots,
            key_names,
            key_types,
            order,
            read_filter,
            output,
            columns,
            limit,
            offset,
            empty_default,
            dedup,
            finish: None,
            range,
            sorts_all_rows,
        })
    }
}

/// Whether MySQL sorts the rows of a key read to answer ORDER BY, so
/// evaluates WHERE on every one of them before the LIMIT stops it: when a
/// filter of `node` may mark rows, the view reads one table (`node` is its
/// filters over it) and no index gives the order. An index does when,
/// after some of its leading columns the reader's key fixes, it goes on
/// with the ORDER BY columns, all in one direction (a secondary index
/// ends with the primary key, as in InnoDB). Known gap: over joins and
/// aggregates only the page's rows are looked at.
fn sorts_all_rows(node: &LNode, stored: &[Expr], key: &[usize], order: &OrderSpec) -> bool {
    if order.is_empty() || !node.may_mark_rows() {
        return false;
    }
    let Some(t) = node.filtered_table() else {
        return false;
    };
    let table_column = |c: usize| match stored.get(c) {
        Some(Expr::Column(f)) => Some(*f),
        _ => None,
    };
    let Some(ordered) = order
        .iter()
        .map(|o| table_column(o.0))
        .collect::<Option<Vec<usize>>>()
    else {
        // An ORDER BY expression: no index holds it.
        return true;
    };
    if order.iter().any(|o| o.1 != order[0].1) {
        return true;
    }
    let fixed: Vec<usize> = key.iter().filter_map(|&k| table_column(k)).collect();
    let pk = t.primary_key.clone().unwrap_or_default();
    let secondary = t.indexes.iter().map(|i| {
        let mut cols = i.columns.clone();
        cols.extend(pk.iter().filter(|c| !i.columns.contains(c)));
        cols
    });
    let gives_order = |cols: &Vec<usize>| {
        (0..=cols.len())
            .take_while(|&skip| cols[..skip].iter().all(|c| fixed.contains(c)))
            .any(|skip| cols[skip..].starts_with(&ordered))
    };
    !std::iter::once(pk.clone())
        .filter(|k| !k.is_empty())
        .chain(secondary)
        .any(|cols| gives_order(&cols))
}

/// A stored column of its own (NULL) for the mark of a row whose WHERE
/// overflowed, when a filter of `node` may mark one: the final projection
/// carries it in its last column (`ops::Project::with_lookups`), which
/// then moves no key (`SELECT id ... WHERE id = ?`) and no ORDER BY column
/// (`ORDER BY id LIMIT 1` would read another row first).
fn add_mark_carrier(stored: &mut Vec<Expr>, node: &LNode) {
    if node.may_mark_rows() {
        stored.push(Expr::Literal(Value::Null));
    }
}

/// The stored row of the aggregate over no input (group columns NULL), for
/// a key with no rows.
fn empty_aggregate_row(node: &LNode, stored: &[Expr], agg: &Aggregation) -> Result<Row> {
    agg.post
        .as_ref()
        .ok_or_else(|| DataflowError::Internal("no aggregate".into()))?;
    let LOp::Aggregate { ngroup, aggs, .. } = &node.op else {
        return Err(unsupported(
            "HAVING on an aggregate without GROUP BY with parameters",
        ));
    };
    let a = crate::ops::Aggregate::new(*ngroup, aggs.clone(), vec![], true);
    let row = a.empty_row();
    Ok(stored
        .iter()
        .map(|e| e.eval(&row).unwrap_or(Value::Null))
        .collect::<Row>())
}
