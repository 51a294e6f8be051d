//! UPDATE (with IGNORE, ORDER BY and LIMIT) -> storage `WriteOp`s.

use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_dataflow::{compile_row_expr, DataflowError, RowExpr};
use ladle_storage::{IndexRef, RowUpdater, ScanSpec, StorageError, WriteOp};
use sqlparser::ast::{self, Expr};
use sqlparser::tokenizer::Token;

use super::overlay::{candidate_rows, coerce_lenient, transaction_wrote};
use super::transaction_keys::TransactionKeys;
use super::write::{
    choose_rows, coerce_row_strict, compile_assignments_as_written, expr_err, has_subquery,
    identity, identity_columns, inline_subqueries, refuse_empty_enum, scan_spec, single_table,
    slot, submit_with, table, RowCounts,
};
use crate::checks::TableChecks;
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::strict_warnings::StrictWarnings;
use crate::tokens::render_tokens;

/// The error of an UPDATE whose row failed with `err` (a CHECK, a value
/// that does not fit) after `changes` (the rows before it): the first of
/// those that collides (1062) or fails a FOREIGN KEY, else `err`.
pub(super) fn first_update_error(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    (changes, in_given_order): (&[(Row, Option<Row>)], bool),
    keyed: bool,
    err: ShimError,
) -> Result<ShimError> {
    if let Some(duplicate) = first_duplicate(e, s, schema, changes, in_given_order)? {
        return Ok(duplicate.error(e, s, schema, keyed));
    }
    if keyed {
        let new_rows: Vec<Row> = changes.iter().filter_map(|(_, n)| n.clone()).collect();
        if let Err(key_error) = crate::foreign_keys::check_child_rows(e, s, schema, &new_rows) {
            return Ok(key_error);
        }
        if let Err(key_error) = crate::foreign_keys::parent_effects(e, s, schema, changes) {
            return Ok(key_error);
        }
    }
    Ok(err)
}

/// What an UPDATE says beyond its table, SET and WHERE.
#[derive(Default)]
pub struct UpdateClauses<'a> {
    pub order_by: &'a [ast::OrderByExpr],
    pub limit: Option<u64>,
    /// UPDATE IGNORE: see [`crate::update_ignore`].
    pub ignore: bool,
}

/// The Notes an UPDATE's assignments raise, gathered as its rows are
/// visited.
#[derive(Default)]
pub(super) struct UpdateNotes {
    /// Rows the statement changed so far (the "at row" of a note).
    pub(super) rows_seen: usize,
    /// (column, row number) of each value rounded or cut.
    pub(super) found: Vec<(String, usize)>,
}

/// UPDATE of one table (a join view's is run before, see
/// [`super::update`]). A call of a function that does not exist is named
/// in the session's database (1305, see [`crate::error::ShimError::in_database`]).
pub(super) fn update(
    e: &Engine,
    s: &mut Session,
    target: ast::TableWithJoins,
    assignments: Vec<ast::Assignment>,
    selection: Option<Expr>,
    clauses: UpdateClauses<'_>,
) -> Result<Output> {
    let db = s.database.clone();
    // The WHERE is compiled once: a constant's conversion warns once.
    ladle_dataflow::constants_warn_once(|| {
        update_rows(e, s, target, assignments, selection, clauses)
    })
    .map_err(|err| err.in_database(db.as_deref()))
}

fn update_rows(
    e: &Engine,
    s: &mut Session,
    target: ast::TableWithJoins,
    assignments: Vec<ast::Assignment>,
    selection: Option<Expr>,
    clauses: UpdateClauses<'_>,
) -> Result<Output> {
    let UpdateClauses {
        order_by,
        limit,
        ignore,
    } = clauses;
    let mut target = target;
    let mut assignments = assignments;
    let mut selection = selection;
    let name = single_table(&target)?.clone();
    let mut through = None;
    if let Some(view) = super::through_view::view_of_table(e, s, &name, "UPDATE")? {
        let written = match &target.relation {
            ast::TableFactor::Table {
                alias: Some(alias), ..
            } => ast::ObjectName(vec![alias.name.clone()]),
            _ => name,
        };
        if view.join.is_some() {
            // Run as a multi-table UPDATE before this (see `super::update`).
            return Err(ShimError::Internal(
                "a join view's single-table UPDATE".into(),
            ));
        }
        selection = view.update(&written, &mut assignments, selection)?;
        if let ast::TableFactor::Table { name, .. } = &mut target.relation {
            *name = view.base.clone();
        }
        through = Some(view);
    }
    let schema = table(e, s, single_table(&target)?)?;
    let view_check = super::view_check::ViewCheck::of(through.as_ref(), &schema)?;
    for a in &mut assignments {
        inline_subqueries(e, s, &mut a.value)?;
    }
    if let Some(w) = &mut selection {
        ladle_dataflow::mark_where_is_null(w);
        inline_subqueries(e, s, w)?;
    }
    // Subqueries left read the row: computed per row (see `super::correlated`).
    let correlated = assignments.iter().any(|a| has_subquery(&a.value))
        || selection.as_ref().is_some_and(has_subquery);
    let mut written = Written::default();
    let (values, pred, scan) = if correlated {
        let rows =
            super::correlated::per_row(e, s, &target, &schema, &assignments, selection.as_ref())?;
        let scan = rows.scan(&schema, selection.as_ref());
        (SetValues::PerRow(rows), None, scan)
    } else {
        let mut compiled = Vec::new();
        for (pos, x, value) in compile_assignments_as_written(&schema, &assignments)? {
            compiled.push((pos, x));
            written.set.push(value);
        }
        let pred = selection
            .as_ref()
            .map(|w| compile_row_expr(w, Some(&schema)))
            .transpose()?;
        written.pred = selection.clone();
        (
            SetValues::Exprs(compiled),
            pred,
            scan_spec(&schema, selection.as_ref()),
        )
    };
    let on_update = on_update_columns(&schema, &values.columns());
    let now = crate::column_default::current_timestamp();
    let matches = |row: &Row| -> Result<bool> {
        match (&pred, &values) {
            (Some(p), _) => Ok(p.eval_predicate(row)?),
            (None, SetValues::PerRow(rows)) => Ok(rows.matches(row)?),
            (None, _) => Ok(true),
        }
    };
    let chosen = choose_rows(e, s, &schema, &scan, &matches, order_by, limit)?;
    // With ORDER BY the rows are changed, and their keys checked, in its
    // order, as InnoDB does (`SET id = id + 1 ORDER BY id DESC` shifts
    // keys without colliding).
    let scan = match (&chosen, &schema.primary_key) {
        (Some(c), Some(pk)) if !order_by.is_empty() && !pk.is_empty() => {
            ScanSpec::Keys(c.ordered.clone())
        }
        _ => scan,
    };
    let change = RowChange {
        pred,
        chosen: chosen.map(|c| c.set),
        ident_cols: identity_columns(&schema),
        values,
        on_update,
        now,
        checks: e.checks.for_table(&e.storage, &schema)?,
        view_check,
        schema: schema.clone(),
        strict: StrictWarnings::for_write(s, ignore),
        written,
    };
    write_update(e, s, &schema, scan, change, ignore)
}

/// Writes the rows `change` changes among those `scan` visits: the
/// single-table write path every UPDATE goes through (multi-table ones
/// once per target, see [`super::multi_update`]): values that do not
/// fit, duplicates, FOREIGN KEYs, CHECKs, the Notes and the counts.
pub(super) fn write_update(
    e: &Engine,
    s: &mut Session,
    schema: &Arc<TableSchema>,
    scan: ScanSpec,
    change: RowChange,
    ignore: bool,
) -> Result<Output> {
    let in_scan_order = matches!(scan, ScanSpec::Keys(_));
    // Assigned values a Note reports (a DECIMAL rounded, spaces cut), as
    // (column, row number among the rows the statement changes).
    let notes: Arc<parking_lot::Mutex<UpdateNotes>> = Arc::default();
    let updater = change.into_updater(notes.clone());
    // IGNORE, and non-strict `sql_mode` (''), adjust values that do not
    // fit with a warning; only IGNORE also skips rows that would collide.
    let lenient = ignore || !crate::vars::strict_mode(s);
    let updater = if lenient {
        lenient_updater(e, s, schema, &scan, updater, ignore)?
    } else {
        updater
    };
    let keyed = crate::foreign_keys::involved(e, schema)?;
    // The rows are visited here (the write, or COMMIT, visits them again)
    // in a transaction or when FOREIGN KEYs need the changes first.
    let visited = s.in_transaction() || keyed;
    let (counts, changes) = if visited {
        let order = (in_scan_order, keyed);
        visit_changes(e, s, schema, &scan, &updater, lenient, order)?
    } else {
        (RowCounts::default(), Vec::new())
    };
    let cascades = check_changes(e, s, schema, &changes, in_scan_order, keyed)?;
    // The notes are those of the visit above; else of the write's.
    let early = std::mem::take(&mut *notes.lock()).found;
    let (out, _) = submit_with(
        e,
        s,
        WriteOp::Update {
            table: schema.id,
            schema_version: schema.version,
            scan,
            update: updater,
        },
        cascades,
        counts,
    )?;
    let found = if visited {
        early
    } else {
        std::mem::take(&mut *notes.lock()).found
    };
    for (column, at_row) in found {
        s.add_warning(
            "Note",
            1265,
            format!("Data truncated for column '{column}' at row {at_row}"),
        );
    }
    Ok(out)
}

/// The columns `ON UPDATE CURRENT_TIMESTAMP` sets when a row changes, those
/// the SET clause assigns left out.
pub(super) fn on_update_columns(schema: &TableSchema, assigned: &[usize]) -> Vec<usize> {
    schema
        .columns
        .iter()
        .enumerate()
        .filter(|(i, c)| c.on_update_current_timestamp && !assigned.contains(i))
        .map(|(i, _)| i)
        .collect()
}

/// What an UPDATE does to one row: which rows it changes (WHERE, the rows
/// ORDER BY/LIMIT chose, the rows a join matched) and how (SET, ON UPDATE
/// columns, generated columns, CHECKs).
pub(super) struct RowChange {
    pub(super) pred: Option<RowExpr>,
    /// The identities of the rows ORDER BY/LIMIT chose, if they did.
    pub(super) chosen: Option<std::collections::HashSet<Vec<Value>>>,
    /// The columns `identity` is taken from (see [`super::write::identity`]).
    pub(super) ident_cols: Vec<usize>,
    pub(super) values: SetValues,
    pub(super) on_update: Vec<usize>,
    pub(super) now: Value,
    pub(super) checks: Arc<TableChecks>,
    /// The CHECK OPTION of the view the UPDATE writes through, if any.
    pub(super) view_check: Option<Arc<super::view_check::ViewCheck>>,
    pub(super) schema: Arc<TableSchema>,
    /// Strict mode without IGNORE: an empty ENUM value is refused, and a
    /// warning evaluating WHERE or SET fails the statement.
    pub(super) strict: StrictWarnings,
    pub(super) written: Written,
}

/// An UPDATE's WHERE and SET values as written (SET in
/// [`SetValues::Exprs`]' order; none for other values), for the text of a
/// 1690: MariaDB names the operation that overflowed.
#[derive(Default)]
pub(super) struct Written {
    pub(super) pred: Option<Expr>,
    pub(super) set: Vec<Expr>,
}

/// Where the new values of an UPDATE's SET columns come from.
pub(super) enum SetValues {
    /// (column, SET value) evaluated on the row, left to right (a later
    /// value sees an earlier assignment, as in MySQL's single-table UPDATE).
    Exprs(Vec<(usize, RowExpr)>),
    /// A multi-table UPDATE's values, computed over the join before any
    /// row changes: per row identity, the values of `columns` (in order).
    /// A row not in `by_row` is one the join did not match: left alone.
    Joined {
        columns: Vec<usize>,
        by_row: std::collections::HashMap<Vec<Value>, Vec<Value>>,
    },
    /// A single-table UPDATE with correlated subqueries: each matched
    /// row's WHERE and SET, its subquery values in place; a row without
    /// is not matched.
    PerRow(super::correlated::PerRow),
    /// A table without a primary key changed under several names: each
    /// name's [`SetValues::Joined`] (columns, by_row), applied in turn to
    /// the rows it matched, all keyed by the row as it was (a later name's
    /// values left, as in MariaDB).
    JoinedSteps(Vec<JoinedStep>),
}

/// One name's columns and values of a [`SetValues::JoinedSteps`].
pub(super) type JoinedStep = (
    Vec<usize>,
    std::collections::HashMap<Vec<Value>, Vec<Value>>,
);

impl SetValues {
    /// The columns the SET clause assigns.
    pub(super) fn columns(&self) -> Vec<usize> {
        match self {
            SetValues::Exprs(compiled) => compiled.iter().map(|(p, _)| *p).collect(),
            SetValues::Joined { columns, .. } => columns.clone(),
            SetValues::PerRow(rows) => rows.columns().to_vec(),
            SetValues::JoinedSteps(steps) => {
                let mut all: Vec<usize> = steps.iter().flat_map(|(c, _)| c.clone()).collect();
                all.sort_unstable();
                all.dedup();
                all
            }
        }
    }
}

impl RowChange {
    /// The write's error for `e`, raised evaluating `written` over `row`:
    /// a 1690 names the operation that overflowed, as MariaDB's does.
    fn error_in(&self, e: DataflowError, written: Option<&Expr>, row: &Row) -> StorageError {
        match (e, written) {
            (DataflowError::OutOfRange(m), Some(w)) => StorageError::OutOfRange(
                crate::out_of_range::message_naming_operation(m, w, &self.schema, row),
            ),
            (e, _) => expr_err(e),
        }
    }

    /// The storage updater: a row's new value, `None` for a row the UPDATE
    /// leaves alone; the values it rounds or cuts are counted in `notes`.
    fn into_updater(self, notes: Arc<parking_lot::Mutex<UpdateNotes>>) -> RowUpdater {
        let assigned = self.values.columns();
        Arc::new(move |row: &Row| {
            let strict = self.strict;
            if let Some(p) = &self.pred {
                let matched = strict.evaluated_in_write(|| {
                    p.eval_predicate(row)
                        .map_err(|e| self.error_in(e, self.written.pred.as_ref(), row))
                })?;
                if !matched {
                    return Ok(None);
                }
            }
            if let Some(set) = &self.chosen {
                if !set.contains(&identity(row, &self.ident_cols)) {
                    return Ok(None);
                }
            }
            let mut new = row.clone();
            match &self.values {
                SetValues::Exprs(compiled) => {
                    for (i, (pos, x)) in compiled.iter().enumerate() {
                        let v = strict.evaluated_in_write(|| {
                            x.eval(&new)
                                .map_err(|e| self.error_in(e, self.written.set.get(i), &new))
                        })?;
                        *slot(&mut new, *pos)? = v;
                    }
                }
                SetValues::PerRow(rows) => {
                    let Some(exprs) = rows.of(row) else {
                        return Ok(None);
                    };
                    if let Some(p) = &exprs.pred {
                        let eval = || p.eval_predicate(row).map_err(expr_err);
                        if !strict.evaluated_in_write(eval)? {
                            return Ok(None);
                        }
                    }
                    for (pos, x) in &exprs.set {
                        let v = strict.evaluated_in_write(|| x.eval(&new).map_err(expr_err))?;
                        *slot(&mut new, *pos)? = v;
                    }
                }
                SetValues::Joined { columns, by_row } => {
                    let Some(values) = by_row.get(&identity(row, &self.ident_cols)) else {
                        return Ok(None);
                    };
                    for (pos, v) in columns.iter().zip(values) {
                        *slot(&mut new, *pos)? = v.clone();
                    }
                }
                SetValues::JoinedSteps(steps) => {
                    let id = identity(row, &self.ident_cols);
                    let mut matched = false;
                    for (columns, by_row) in steps {
                        if let Some(values) = by_row.get(&id) {
                            matched = true;
                            for (pos, v) in columns.iter().zip(values) {
                                *slot(&mut new, *pos)? = v.clone();
                            }
                        }
                    }
                    if !matched {
                        return Ok(None);
                    }
                }
            }
            if new != *row {
                for &p in &self.on_update {
                    *slot(&mut new, p)? = self.now.clone();
                }
            }
            let schema = &self.schema;
            self.checks.fill_generated(schema, &mut new)?;
            self.checks.verify_uncoerced(schema, &new)?;
            if let Some(check) = &self.view_check {
                check.verify(schema, &new)?;
            }
            if strict.strict() {
                refuse_empty_enum(schema, &new, Some(row))?;
            }
            let mut noted = notes.lock();
            noted.rows_seen += 1;
            for pos in &assigned {
                if let (Some(v), Some(c)) = (new.get(*pos), schema.columns.get(*pos)) {
                    if ladle_common::truncation_note(v, c) {
                        let at_row = noted.rows_seen;
                        noted.found.push((c.name.clone(), at_row));
                    }
                }
            }
            Ok(Some(new))
        })
    }
}

/// `updater` under IGNORE or a non-strict `sql_mode`: values that do not
/// fit adjusted (with warnings now), and with IGNORE the rows that would
/// collide skipped.
fn lenient_updater(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    scan: &ScanSpec,
    updater: RowUpdater,
    ignore: bool,
) -> Result<RowUpdater> {
    use crate::update_ignore::{
        adjust_values, skip_duplicates, skip_view_check_failures, KeyHolders,
    };
    let visited = candidate_rows(e, s, schema, scan)?;
    let (updater, mut warnings) = if ignore {
        skip_view_check_failures(&visited, updater)
    } else {
        (updater, Vec::new())
    };
    let (updater, adjusted) = adjust_values(schema, &visited, updater)?;
    warnings.extend(adjusted);
    for (code, message) in warnings {
        s.add_warning("Warning", code, message);
    }
    let lookup = |index: IndexRef, key: &[Value]| -> Result<Vec<Row>> {
        Ok(e.storage.lookup(schema.id, index, key)?)
    };
    if !ignore {
        return Ok(updater);
    }
    let updater = if crate::foreign_keys::involved(e, schema)? {
        skip_foreign_key_failures(e, s, schema, &visited, updater)?
    } else {
        updater
    };
    if transaction_wrote(s, schema.id) {
        let table = candidate_rows(e, s, schema, &ScanSpec::Full)?;
        skip_duplicates(schema, KeyHolders::Rows(&table), visited, updater)
    } else {
        skip_duplicates(schema, KeyHolders::Lookup(&lookup), visited, updater)
    }
}

/// UPDATE IGNORE's rule for FOREIGN KEYs: `update` leaving as it was
/// (matched, not changed, no warning: MariaDB's) each row of `visited`
/// whose new version has no parent row (1452) or whose old key a child
/// row still references (1451). Each row is checked alone, against the
/// table as the statement found it.
fn skip_foreign_key_failures(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    visited: &[Row],
    update: RowUpdater,
) -> Result<RowUpdater> {
    use crate::error::{ER_NO_REFERENCED_ROW, ER_ROW_IS_REFERENCED};
    let ident_cols = identity_columns(schema);
    let mut refused = std::collections::HashSet::new();
    for row in visited {
        let Some(new) = update(row)? else { continue };
        if new == *row {
            continue;
        }
        let checked =
            crate::foreign_keys::check_child_rows(e, s, schema, std::slice::from_ref(&new))
                .and_then(move |()| {
                    crate::foreign_keys::parent_effects(e, s, schema, &[(row.clone(), Some(new))])
                });
        match checked {
            Ok(_) => {}
            Err(err)
                if [ER_NO_REFERENCED_ROW, ER_ROW_IS_REFERENCED]
                    .iter()
                    .any(|c| c.errno == err.mysql_code().errno) =>
            {
                refused.insert(identity(row, &ident_cols));
            }
            Err(err) => return Err(err),
        }
    }
    if refused.is_empty() {
        return Ok(update);
    }
    Ok(Arc::new(move |row: &Row| {
        if refused.contains(&identity(row, &ident_cols)) {
            Ok(Some(row.clone()))
        } else {
            update(row)
        }
    }))
}

/// A row an UPDATE changed: (old, new).
type RowChanged = (Row, Option<Row>);

/// Runs `updater` over the rows `scan` visits (as the transaction sees
/// them), coercing each new row strictly unless `lenient`: the rows found
/// and changed, and the changes (old, new). `(in_scan_order, keyed)` say
/// how a failing row's error is chosen ([`first_update_error`]).
fn visit_changes(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    scan: &ScanSpec,
    updater: &RowUpdater,
    lenient: bool,
    (in_scan_order, keyed): (bool, bool),
) -> Result<(RowCounts, Vec<RowChanged>)> {
    let mut counts = RowCounts::default();
    let mut changes = Vec::new();
    for row in candidate_rows(e, s, schema, scan)? {
        // KILL QUERY or the client gone: 1317, nothing of this statement
        // buffered (the transaction's earlier writes stay, as in InnoDB).
        ladle_dataflow::interrupt::check()?;
        // Strictly (the write will be), unless IGNORE or a non-strict
        // sql_mode adjusts it.
        let updated = updater(&row)
            .map_err(ShimError::from)
            .and_then(|new| match new {
                Some(new) if lenient => Ok(Some(coerce_lenient(schema, &new))),
                // Numbered among the rows matched, as storage numbers them.
                Some(new) => coerce_row_strict(schema, &new, Some(&row))
                    .map(Some)
                    .map_err(|e| e.at_row(counts.found as usize + 1)),
                None => Ok(None),
            });
        let new = match updated {
            Ok(new) => new,
            // The rows before this one were changed first (InnoDB
            // goes row by row): their own failure comes first.
            Err(err) => {
                let changed = (changes.as_slice(), in_scan_order);
                return Err(first_update_error(e, s, schema, changed, keyed, err)?);
            }
        };
        if let Some(new) = new {
            counts.found += 1;
            if new != row {
                counts.affected += 1;
                changes.push((row, Some(new)));
            }
        }
    }
    Ok((counts, changes))
}

/// Checks the changes visited before the write: NOT NULL in a
/// transaction, duplicates, FOREIGN KEYs; the cascades the keys call for.
fn check_changes(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    changes: &[(Row, Option<Row>)],
    in_scan_order: bool,
    keyed: bool,
) -> Result<Vec<WriteOp>> {
    if s.in_transaction() {
        for (_, new) in changes {
            if let Some(new) = new {
                ladle_storage::check_not_null(schema, new, true)?;
            }
        }
    }
    // Outside a transaction storage finds a duplicate itself, but the
    // FOREIGN KEY checks below run first, so a keyed table's is found here.
    if s.in_transaction() || keyed {
        if let Some(duplicate) = first_duplicate(e, s, schema, changes, in_scan_order)? {
            return Err(duplicate.error(e, s, schema, keyed));
        }
    }
    let mut cascades = Vec::new();
    if keyed {
        let new_rows: Vec<Row> = changes.iter().filter_map(|(_, n)| n.clone()).collect();
        crate::foreign_keys::check_child_rows(e, s, schema, &new_rows)?;
        cascades = crate::foreign_keys::parent_effects(e, s, schema, changes)?;
    }
    Ok(cascades)
}

/// `UPDATE [LOW_PRIORITY] [IGNORE] ...` without its modifiers, and whether
/// IGNORE was among them (LOW_PRIORITY means nothing without table locks).
pub fn strip_update_modifiers(t: &[Token]) -> (std::borrow::Cow<'_, [Token]>, bool) {
    strip_modifiers(t, &["LOW_PRIORITY", "IGNORE"])
}

/// `DELETE [LOW_PRIORITY] [QUICK] [IGNORE] ...` without its modifiers, and
/// whether IGNORE was among them (QUICK is an index-merging hint of MyISAM).
pub fn strip_delete_modifiers(t: &[Token]) -> (std::borrow::Cow<'_, [Token]>, bool) {
    strip_modifiers(t, &["LOW_PRIORITY", "QUICK", "IGNORE"])
}

/// A statement without the `modifiers` after its first word, and whether
/// IGNORE was among them.
fn strip_modifiers<'t>(
    t: &'t [Token],
    modifiers: &[&str],
) -> (std::borrow::Cow<'t, [Token]>, bool) {
    use crate::tokens::word;
    let mut end = 1;
    let mut ignore = false;
    while let Some(w) = word(t, end).filter(|w| modifiers.contains(&w.as_str())) {
        ignore |= w == "IGNORE";
        end += 1;
    }
    if end == 1 {
        return (std::borrow::Cow::Borrowed(t), false);
    }
    let mut kept = vec![t[0].clone()];
    kept.extend_from_slice(&t[end..]);
    (std::borrow::Cow::Owned(kept), ignore)
}

/// Splits `UPDATE ... [ORDER BY ...] [LIMIT n]` (which the SQL parser does
/// not accept) into the plain UPDATE text, the ORDER BY text and the LIMIT
/// text; `None` when the statement has neither clause.
pub fn split_update_order_limit(t: &[Token]) -> Option<(String, Option<String>, Option<String>)> {
    use crate::tokens::word;
    let mut depth = 0usize;
    let mut order_at = None;
    let mut limit_at = None;
    for i in 0..t.len() {
        match &t[i] {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ if depth == 0
                && word(t, i).as_deref() == Some("ORDER")
                && word(t, i + 1).as_deref() == Some("BY") =>
            {
                order_at = Some(i)
            }
            _ if depth == 0 && word(t, i).as_deref() == Some("LIMIT") => limit_at = Some(i),
            _ => {}
        }
    }
    if order_at.is_none() && limit_at.is_none() {
        return None;
    }
    let render = render_tokens;
    let base_end = order_at.or(limit_at)?;
    let order = order_at.map(|o| render(&t[o + 2..limit_at.filter(|l| *l > o).unwrap_or(t.len())]));
    let limit = limit_at.map(|l| render(&t[l + 1..]));
    Some((render(&t[..base_end]), order, limit))
}

/// The first row an UPDATE would fail on with 1062, checked as InnoDB
/// does: a changed row whose PRIMARY/UNIQUE key repeats another row's (as
/// the statement sees the table, with the rows before it updated and the
/// rows after it not yet). Returns the rows changed before it in that
/// order, the failing row, and the error; None when no row collides.
pub(super) fn first_duplicate<'c>(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    changes: &'c [(Row, Option<Row>)],
    in_given_order: bool,
) -> Result<Option<UpdateDuplicate<'c>>> {
    let mut key_columns: Vec<usize> = schema.primary_key.clone().unwrap_or_default();
    for idx in schema.indexes.iter().filter(|i| i.unique) {
        key_columns.extend(&idx.columns);
    }
    // Only a change to a key column can make a duplicate.
    let rekeyed = |old: &Row, new: &Row| key_columns.iter().any(|&c| old[c] != new[c]);
    let new_rows: Vec<Row> = changes
        .iter()
        .filter_map(|(old, new)| new.as_ref().filter(|n| rekeyed(old, n)).cloned())
        .collect();
    if new_rows.is_empty() {
        return Ok(None);
    }
    let mut keys = TransactionKeys::new(e, s, schema, &new_rows)?;
    // Row by row in primary key order, as InnoDB scans and updates (and as
    // storage does outside a transaction; the transaction's own rows come
    // after the committed ones in `changes`): `SET id = id + 1` over ids 1
    // and 2 fails on the first row, whose new id the second still holds.
    let mut ordered: Vec<&(Row, Option<Row>)> = changes.iter().collect();
    if let (Some(pk), false) = (&schema.primary_key, in_given_order) {
        ordered.sort_by(|(a, _), (b, _)| {
            pk.iter()
                .map(|&c| a[c].cmp(&b[c]))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    for (at, (old, new)) in ordered.iter().enumerate() {
        let Some(new) = new.as_ref().filter(|n| rekeyed(old, n)) else {
            continue;
        };
        keys.remove_conflicting(old);
        if keys.conflicts(new) > 0 {
            return Ok(Some(UpdateDuplicate {
                before: ordered[..at].to_vec(),
                failing: ordered[at],
                error: keys.duplicate_error(new).into(),
            }));
        }
        keys.add(new);
    }
    Ok(None)
}

/// Where an UPDATE fails with 1062 (see [`first_duplicate`]).
pub(super) struct UpdateDuplicate<'c> {
    /// The rows changed before the failing one, in the order InnoDB
    /// changes them.
    pub(super) before: Vec<&'c (Row, Option<Row>)>,
    pub(super) failing: &'c (Row, Option<Row>),
    pub(super) error: ShimError,
}

impl UpdateDuplicate<'_> {
    /// The statement's error: InnoDB checks each row's FOREIGN KEYs as it
    /// changes it, so a row changed before the failing one fails first
    /// with 1452 (child side) or 1451 (parent side), and the failing row
    /// itself with 1451 (its referenced key is checked before its new
    /// entry is inserted) but not 1452 (its new entry goes in first).
    pub(super) fn error(
        self,
        e: &Engine,
        s: &Session,
        schema: &TableSchema,
        keyed: bool,
    ) -> ShimError {
        if keyed {
            let new_rows: Vec<Row> = self.before.iter().filter_map(|(_, n)| n.clone()).collect();
            if let Err(err) = crate::foreign_keys::check_child_rows(e, s, schema, &new_rows) {
                return err;
            }
            let mut changed: Vec<(Row, Option<Row>)> = self.before.into_iter().cloned().collect();
            changed.push(self.failing.clone());
            if let Err(err) = crate::foreign_keys::parent_effects(e, s, schema, &changed) {
                return err;
            }
        }
        self.error
    }
}
