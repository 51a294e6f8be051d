//! INSERT and REPLACE (with ON DUPLICATE KEY UPDATE, IGNORE and
//! auto-increment ids) -> storage `WriteOp`s; `INSERT ... SET` rewritten to
//! `VALUES`.

use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::{IdBatches, OnConflict, StorageError, WriteOp};
use sqlparser::ast::{self, AssignmentTarget, OnInsert, SetExpr};
use sqlparser::tokenizer::Token;

use super::insert_ids::{reserve_ids, use_up_ids, RowSource};
use super::insert_returning::InsertReturning;
use super::overlay::coerce_lenient;
use super::transaction_insert::{insert_in_transaction, upsert_keys};
use super::transaction_keys::TransactionKeys;
use super::upsert::{conflict_rule, note_upserted_values, upsert_note_key, UpsertNotes};
use super::write::{
    adjust_ignored_values, coerce_row, coerce_row_strict, column_pos, given_value, has_subquery,
    implicit_default, is_default_keyword, null_before_value_error, positive_id, refuse_empty_enum,
    submit_with, table, value_of, value_with_subqueries, RowCounts,
};
use crate::column_default::default_value;
use crate::error::{Result, ShimError, ER_NO_DEFAULT_FOR_FIELD, ER_VIEW_CHECK_FAILED};
use crate::exec::Engine;
use crate::output::{Info, Output};
use crate::session::Session;
use crate::strict_warnings::StrictWarnings;
use crate::tokens::render_token;

/// INSERT and REPLACE. A call of a function that does not exist is
/// named in the session's database (1305, see [`crate::error::ShimError::in_database`]).
pub fn insert(e: &Engine, s: &mut Session, ins: ast::Insert) -> Result<Output> {
    let db = s.database.clone();
    insert_into(e, s, ins).map_err(|err| err.in_database(db.as_deref()))
}

/// A VALUES list's rows of `width` values each (`None` for DEFAULT);
/// `no_columns`: the statement names no columns, so `VALUES ()` is a row
/// of every column's default. `strict`: the warnings that fail it.
fn values_rows(
    e: &Engine,
    s: &mut Session,
    v: &ast::Values,
    no_columns: bool,
    width: usize,
    strict: StrictWarnings,
) -> Result<Vec<Vec<Option<Value>>>> {
    let mut given = Vec::with_capacity(v.rows.len());
    for row in &v.rows {
        if row.is_empty() && no_columns {
            given.push(vec![None; width]);
            continue;
        }
        if row.len() != width {
            return Err(StorageError::ColumnCount.into());
        }
        let mut out = Vec::with_capacity(row.len());
        for x in row {
            out.push(if is_default_keyword(x) {
                None
            } else if has_subquery(x) {
                let rows = v.rows.len();
                Some(strict.evaluated(|| value_with_subqueries(e, s, x, rows))?)
            } else {
                Some(strict.evaluated(|| value_of(e, s, x))?)
            });
        }
        given.push(out);
    }
    Ok(given)
}

fn insert_into(e: &Engine, s: &mut Session, mut ins: ast::Insert) -> Result<Output> {
    let view = super::through_view::insert_into_base(e, s, &mut ins)?;
    let schema = table(e, s, &ins.table_name)?;
    let view_check = super::view_check::ViewCheck::of(view.as_ref(), &schema)?;
    let returning = ins
        .returning
        .take()
        .map(|items| crate::returning::Returning::compile(&schema, &items))
        .transpose()?
        .map(|r| r.failing_on_warnings(StrictWarnings::for_write(s, ins.ignore)))
        .map(InsertReturning::new);
    let targets: Vec<usize> = if ins.columns.is_empty() {
        // Every column a client sees (not a functional key part's).
        (0..schema.columns.len())
            .filter(|&c| !schema.columns[c].is_hidden())
            .collect()
    } else {
        ins.columns
            .iter()
            .map(|c| column_pos(&schema, &c.value, "field list"))
            .collect::<Result<_>>()?
    };
    let source = ins
        .source
        .take()
        .ok_or_else(|| ShimError::Unsupported("INSERT without VALUES".into()))?;
    let mut given: Vec<Vec<Option<Value>>> = Vec::new();
    let src = RowSource::of(&source.body);
    match source.body.as_ref() {
        SetExpr::Values(v) => {
            let strict = StrictWarnings::for_write(s, ins.ignore);
            given = values_rows(e, s, v, ins.columns.is_empty(), targets.len(), strict)?;
        }
        _ => {
            // INSERT ... SELECT: run the query, then insert its rows.
            let recursive = source.with.as_ref().is_some_and(|w| w.recursive);
            let selected = if recursive && s.database.is_none() {
                // With no current database its hidden tables may live in
                // the target's (MySQL needs none for them).
                let (home, _) = e.resolve(s, &ins.table_name)?;
                crate::recursive_cte::select_homed(e, s, &source, Some(home))?
            } else {
                e.select_for_write(s, &source)?
            };
            let Output::Rows { rows, .. } = selected else {
                return Err(ShimError::Internal("SELECT produced no rows".into()));
            };
            for r in rows.into_vec() {
                if r.len() != targets.len() {
                    return Err(StorageError::ColumnCount.into());
                }
                given.push(r.into_iter().map(Some).collect());
            }
        }
    }
    let records = given.len() as u64;
    // MariaDB counts a column ON DUPLICATE KEY UPDATE assigns as given: an
    // inserted row gets its implicit default, without 1364.
    let assigned: Vec<String> = match &ins.on {
        Some(OnInsert::DuplicateKeyUpdate(assignments)) => assignments
            .iter()
            .filter_map(|a| match &a.target {
                AssignmentTarget::ColumnName(n) => Some(crate::sqltext::last_part(n)),
                AssignmentTarget::Tuple(_) => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let mut rows: Vec<Row> = Vec::with_capacity(given.len());
    for g in given {
        let mut row: Vec<Option<Value>> = vec![None; schema.columns.len()];
        for (v, &t) in g.into_iter().zip(&targets) {
            row[t] = given_value(s, &schema, t, v, ins.ignore)?;
        }
        let mut full = Vec::with_capacity(row.len());
        for (v, col) in row.into_iter().zip(&schema.columns) {
            full.push(match v {
                Some(v) => v,
                None => match default_value(col) {
                    Some(d) => d,
                    None if assigned.iter().any(|a| a.eq_ignore_ascii_case(&col.name)) => {
                        match implicit_default(&col.ty) {
                            Some(d) => d,
                            None => {
                                return Err(StorageError::NoDefault {
                                    column: col.name.clone(),
                                }
                                .into())
                            }
                        }
                    }
                    // IGNORE gives a NOT NULL column without a default
                    // its type's implicit default, with a warning.
                    None => match implicit_default(&col.ty).filter(|_| ins.ignore) {
                        Some(d) => {
                            // Once per statement, as MariaDB warns.
                            if rows.is_empty() {
                                s.add_warning(
                                    "Warning",
                                    ER_NO_DEFAULT_FOR_FIELD.errno,
                                    format!("Field '{}' doesn't have a default value", col.name),
                                );
                            }
                            d
                        }
                        None => {
                            return Err(StorageError::NoDefault {
                                column: col.name.clone(),
                            }
                            .into())
                        }
                    },
                },
            });
        }
        rows.push(full);
    }
    let rows = view_checked_rows(e, s, &ins, &schema, view_check.as_deref(), rows)?;
    // Rounded DECIMALs and trailing spaces cut: a Note each, as MariaDB.
    for (i, row) in rows.iter().enumerate() {
        for (v, col) in row.iter().zip(&schema.columns) {
            if ladle_common::truncation_note(v, col) {
                s.add_warning(
                    "Note",
                    1265,
                    format!("Data truncated for column '{}' at row {}", col.name, i + 1),
                );
            }
        }
    }
    // Outside strict mode (`sql_mode=''`) values are adjusted as IGNORE
    // adjusts them (see `insert_rows`), with no strict checks first.
    if ins.ignore || !crate::vars::strict_mode(s) {
        return insert_rows(e, s, &ins, schema, rows, records, src, returning.as_ref());
    }
    // The checks below run a phase at a time over all rows; MariaDB runs
    // them a row at a time, so when one fails, the error is the first
    // failing row's first failure.
    let kept = rows.clone();
    let returning = returning.as_ref();
    match insert_rows(e, s, &ins, schema.clone(), rows, records, src, returning) {
        // RETURNING fails the row it lists, before any later row's error.
        Err(err) if is_row_error(&err) && !returning.is_some_and(|r| r.failed_statement()) => {
            Err(first_row_error(e, s, &ins, &schema, &kept)?.unwrap_or(err))
        }
        other => other,
    }
}

/// `rows` with their generated columns filled, each checked against the
/// CHECK OPTION of the view `ins` writes through (if any): under IGNORE a
/// row the view would not show is dropped with warning 1369, as MySQL and
/// MariaDB drop it; otherwise it is the statement's error.
fn view_checked_rows(
    e: &Engine,
    s: &mut Session,
    ins: &ast::Insert,
    schema: &TableSchema,
    view_check: Option<&super::view_check::ViewCheck>,
    rows: Vec<Row>,
) -> Result<Vec<Row>> {
    let rules = e.checks.for_table(&e.storage, schema)?;
    let mut kept = Vec::with_capacity(rows.len());
    for mut row in rows {
        rules.fill_generated(schema, &mut row)?;
        match super::view_check::verify(view_check, schema, &row) {
            Ok(()) => kept.push(row),
            Err(err @ StorageError::ViewCheckFailed(_)) if ins.ignore => {
                s.add_warning("Warning", ER_VIEW_CHECK_FAILED.errno, err.to_string());
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(kept)
}

/// An error one row of an INSERT can fail with (a value, NOT NULL, CHECK,
/// duplicate key, foreign key, or an ON DUPLICATE KEY UPDATE expression out
/// of range: a later row's update may be evaluated before an earlier row's
/// value is checked, e.g. when foreign keys look at what the update writes).
pub(super) fn is_row_error(err: &ShimError) -> bool {
    matches!(
        err.mysql_code().errno,
        1048 | 1062 | 1264 | 1265 | 1292 | 1366 | 1406 | 1452 | 1690 | 4025
    )
}

/// The error MariaDB reports for an INSERT of `rows` (not IGNORE): each row
/// in order is converted to the column types, checked for NOT NULL and the
/// CHECK constraints, then against the keys (as the session sees the
/// table, with the rows before it written) and its foreign keys; the
/// first failure is the statement's error. None if no row fails.
pub(super) fn first_row_error(
    e: &Engine,
    s: &Session,
    ins: &ast::Insert,
    schema: &Arc<TableSchema>,
    rows: &[Row],
) -> Result<Option<ShimError>> {
    let checks = e.checks.for_table(&e.storage, schema)?;
    let strict = StrictWarnings::for_write(s, ins.ignore);
    let on_conflict = conflict_rule(schema, ins, &checks, &UpsertNotes::default(), strict)?;
    let lenient: Vec<Row> = rows.iter().map(|r| coerce_lenient(schema, r)).collect();
    let mut keys = upsert_keys(e, s, schema, &lenient, &on_conflict)?;
    let fail = |err: ShimError| Ok(Some(err));
    for (i, row) in rows.iter().enumerate() {
        let fail = |err: ShimError| fail(err.at_row(i + 1));
        let row = match coerce_row_strict(schema, row, None) {
            Ok(r) => r,
            Err(err) => return fail(null_before_value_error(schema, row, err)),
        };
        if let Err(err) = ladle_storage::check_not_null(schema, &row, true) {
            return fail(err.into());
        }
        if let Err(err) = checks.verify(&row) {
            return fail(err.into());
        }
        let written = match (&on_conflict, keys.first_conflict(&row)) {
            (OnConflict::Error, Some(_)) => return fail(keys.duplicate_error(&row).into()),
            (OnConflict::Update(f), Some(existing)) => {
                let new = match f(&existing, &row).map_err(ShimError::from) {
                    Ok(new) => new,
                    Err(err) => return fail(err),
                };
                let new = match coerce_row_strict(schema, &new, Some(&existing)) {
                    Ok(n) => n,
                    Err(err) => return fail(err),
                };
                if let Err(err) = ladle_storage::check_not_null(schema, &new, true) {
                    return fail(err.into());
                }
                keys.remove_conflicting(&existing);
                if keys.conflicts(&new) > 0 {
                    return fail(keys.duplicate_error(&new).into());
                }
                if new == existing {
                    // Left as it was: it still holds its keys.
                    keys.add(&existing);
                }
                (new != existing).then_some(new)
            }
            (OnConflict::Replace, Some(_)) => {
                while let Some(victim) = keys.first_conflict(&row) {
                    keys.remove_conflicting(&victim);
                }
                Some(row)
            }
            _ => Some(row),
        };
        if let Some(written) = written {
            if let Some((_, err)) =
                crate::foreign_keys::orphans(e, s, schema, std::slice::from_ref(&written))?
                    .into_iter()
                    .next()
            {
                return fail(err);
            }
            keys.add(&written);
        }
    }
    Ok(None)
}

/// The rest of an INSERT once its rows are complete (defaults filled).
#[allow(clippy::too_many_arguments)]
pub(super) fn insert_rows(
    e: &Engine,
    s: &mut Session,
    ins: &ast::Insert,
    schema: Arc<TableSchema>,
    mut rows: Vec<Row>,
    records: u64,
    src: RowSource,
    returning: Option<&InsertReturning>,
) -> Result<Output> {
    let many = src != RowSource::OneRow;
    let batches = src.id_batches(records);
    // Outside strict mode (`sql_mode=''`) values are adjusted as IGNORE
    // adjusts them, but a NULL for a NOT NULL column still fails a
    // single-row INSERT (MariaDB's rule).
    let strict = !ins.ignore && crate::vars::strict_mode(s);
    if !strict {
        adjust_ignored_values(s, &schema, &mut rows, ins.ignore || many);
    }
    let ignore_last_id = ignore_last_id(ins, &schema, &rows);
    let checks = e.checks.for_table(&e.storage, &schema)?;
    let upsert_notes = UpsertNotes::default();
    let on_conflict = conflict_rule(
        &schema,
        ins,
        &checks,
        &upsert_notes,
        StrictWarnings::for_write(s, ins.ignore),
    )?;
    let upserted: Vec<Row> = match &on_conflict {
        OnConflict::Update(_) => rows.iter().map(|r| upsert_note_key(&schema, r)).collect(),
        _ => Vec::new(),
    };
    let replaces = !matches!(on_conflict, OnConflict::Error | OnConflict::Ignore);
    let replacing_keyed =
        matches!(on_conflict, OnConflict::Replace) && crate::foreign_keys::involved(e, &schema)?;
    let empty_enum = strict
        .then(|| {
            rows.iter().enumerate().find_map(|(i, r)| {
                refuse_empty_enum(&schema, r, None)
                    .err()
                    .map(|e| (i, e.at_row(i + 1)))
            })
        })
        .flatten();
    if let Some((i, err)) = empty_enum {
        use_up_ids(e, s, &schema, (&rows[..i], None), batches)?;
        // A REPLACE takes its rows in order: an earlier row's replaced row
        // may be referenced (1451) and fail first.
        if replacing_keyed {
            let replaced = replaced_rows(e, s, &schema, &rows)?;
            let err = err.into();
            return Err(first_replace_error(
                e, s, &schema, &checks, &rows, &replaced, err,
            ));
        }
        return Err(err.into());
    }
    if !checks.is_empty() {
        let conflict = (&on_conflict, returning, replacing_keyed);
        rows = checked_rows(e, s, &schema, &checks, rows, (conflict, batches))?;
    }
    let orphans = orphan_rows(e, s, &schema, &rows, &on_conflict)?;
    if !orphans.is_empty() {
        let rules = (&on_conflict, returning);
        rows = drop_orphans(e, s, &schema, rows, orphans, (rules, batches))?;
    }
    let generated = reserve_ids(s, &schema, &rows);
    let cascades = if replacing_keyed {
        replace_cascades(e, s, &schema, &checks, &rows)?
    } else {
        Vec::new()
    };
    let (out, listed) = if s.in_transaction() {
        let rules = (on_conflict, returning);
        let (out, listed) =
            insert_in_transaction(e, s, &schema, rows, rules, (generated, batches))?;
        super::write::buffer_in_transaction(e, s, cascades)?;
        (out, returning.and_then(|r| r.result(listed)))
    } else {
        // Without RETURNING, several rows' write still reports the first
        // value a row took: LAST_INSERT_ID() if a later row fails it.
        let ids_only = InsertReturning::ids_only();
        let watched = returning
            .or_else(|| (many && schema.auto_increment_column().is_some()).then_some(&ids_only));
        let op = WriteOp::Insert {
            table: schema.id,
            schema_version: schema.version,
            rows,
            on_conflict,
            auto_value_on_zero: crate::vars::auto_value_on_zero(s),
            id_batches: batches,
            returning: watched.map(InsertReturning::row_function),
        };
        let (out, listed) =
            submit_with(e, s, op, cascades, RowCounts::default()).map_err(|err| match watched {
                Some(r) => r.failed(s, err),
                None => err,
            })?;
        (out, returning.and_then(|r| r.result(listed)))
    };
    note_upserted_values(s, &schema, &upsert_notes, &upserted);
    if let Some(result) = listed {
        return Ok(result);
    }
    let out = match out {
        Output::Done {
            affected_rows,
            last_insert_id,
            ..
        } if many => Output::Done {
            affected_rows,
            last_insert_id,
            info: records_info(records, affected_rows, ins.ignore, replaces),
        },
        other => other,
    };
    Ok(match (out, ignore_last_id) {
        (
            Output::Done {
                affected_rows,
                info,
                ..
            },
            Some(id),
        ) if affected_rows > 0 => Output::Done {
            affected_rows,
            last_insert_id: id,
            info,
        },
        (out, _) => out,
    })
}

/// INSERT IGNORE processes every row, so MySQL reports the last one's
/// explicit id even when a constraint skipped it (see OpResult): that id,
/// when every row gives one.
fn ignore_last_id(ins: &ast::Insert, schema: &TableSchema, rows: &[Row]) -> Option<u64> {
    match schema.auto_increment_column() {
        Some(ai) if ins.ignore && rows.iter().all(|r| positive_id(&r[ai]).is_some()) => rows
            .last()
            .and_then(|r| ladle_common::coerce(&r[ai], &schema.columns[ai]).ok())
            .as_ref()
            .and_then(positive_id),
        _ => None,
    }
}

/// `rows` past the table's CHECK constraints ([`check_inserted_rows`]);
/// for a REPLACE on a table with foreign keys (`replacing_keyed`), an
/// earlier row's replaced row may be referenced (1451) and fail first.
fn checked_rows(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    checks: &crate::checks::TableChecks,
    rows: Vec<Row>,
    ((on_conflict, returning, replacing_keyed), batches): (
        (&OnConflict, Option<&InsertReturning>, bool),
        IdBatches,
    ),
) -> Result<Vec<Row>> {
    let given = if replacing_keyed {
        rows.clone()
    } else {
        Vec::new()
    };
    let rules = (on_conflict, returning);
    match check_inserted_rows(e, s, schema, checks, rows, (rules, batches)) {
        Ok(rows) => Ok(rows),
        Err(err) if replacing_keyed => {
            let replaced = replaced_rows(e, s, schema, &given)?;
            Err(first_replace_error(
                e, s, schema, checks, &given, &replaced, err,
            ))
        }
        Err(err) => Err(err),
    }
}

/// REPLACE deletes the rows it replaces, so their referencing rows get
/// the foreign keys' ON DELETE actions (as InnoDB's REPLACE does).
fn replace_cascades(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    checks: &crate::checks::TableChecks,
    rows: &[Row],
) -> Result<Vec<WriteOp>> {
    let replaced = replaced_rows(e, s, schema, rows)?;
    let changes: Vec<(Row, Option<Row>)> = replaced.iter().map(|(_, c)| c.clone()).collect();
    crate::foreign_keys::parent_effects(e, s, schema, &changes)
        .map_err(|err| first_replace_error(e, s, schema, checks, rows, &replaced, err))
}

/// The info of a multi-row INSERT that was given `records` rows and
/// changed `affected`: as MySQL counts duplicates, the rows IGNORE skipped,
/// or the rows REPLACE deleted / ON DUPLICATE KEY UPDATE changed (each
/// counts twice in `affected`; an update that changes nothing is not
/// counted).
pub(super) fn records_info(records: u64, affected: u64, ignore: bool, replaces: bool) -> Info {
    let duplicates = if ignore {
        records.saturating_sub(affected)
    } else if replaces {
        affected.saturating_sub(records)
    } else {
        0
    };
    Info::Records {
        records,
        duplicates,
    }
}

/// The current rows a REPLACE of `rows` deletes (each row sharing a
/// PRIMARY or UNIQUE key with one of them), as the session sees the table.
/// The error a REPLACE on a referenced table that failed with `err` (its
/// replaced rows fail a FOREIGN KEY, or a row fails a CHECK) reports:
/// InnoDB takes the rows one at a time, each checked for values that do
/// not fit (1264, 1406...), then CHECKs (4025), then the rows it replaces
/// (1451), so the first row failing any of them decides. `replaced` is
/// [`replaced_rows`]'s answer.
pub(super) fn first_replace_error(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    checks: &crate::checks::TableChecks,
    rows: &[Row],
    replaced: &[ReplacedRow],
    err: ShimError,
) -> ShimError {
    let strict = crate::vars::strict_mode(s);
    for (i, row) in rows.iter().enumerate() {
        let coerced = if strict {
            coerce_row_strict(schema, row, None)
        } else {
            coerce_row(schema, row)
        };
        let coerced = match coerced {
            Ok(r) => r,
            Err(value_error) => {
                return null_before_value_error(schema, row, value_error).at_row(i + 1)
            }
        };
        if let Err(null) = ladle_storage::check_not_null(schema, &coerced, true) {
            return null.into();
        }
        if let Err(check_error) = checks.verify(&coerced) {
            return check_error.into();
        }
        let upto: Vec<(Row, Option<Row>)> = replaced
            .iter()
            .filter(|(at, _)| *at <= i)
            .map(|(_, c)| c.clone())
            .collect();
        if let Err(key_error) = crate::foreign_keys::parent_effects(e, s, schema, &upto) {
            return key_error;
        }
    }
    err
}

/// The rows a REPLACE of `rows` deletes.
pub(super) fn replaced_rows(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    rows: &[Row],
) -> Result<Vec<ReplacedRow>> {
    let rows: Vec<Row> = rows.iter().map(|r| coerce_lenient(schema, r)).collect();
    let mut keys = TransactionKeys::new(e, s, schema, &rows)?;
    let mut gone = Vec::new();
    // Rows this statement wrote itself: replacing one of them deletes no
    // parent row (an identical row already in the table is one, though).
    let mut own: Vec<&Row> = Vec::new();
    for (at, row) in rows.iter().enumerate() {
        while let Some(victim) = keys.first_conflict(row) {
            keys.remove_conflicting(&victim);
            match own.iter().position(|r| **r == victim) {
                Some(i) => {
                    own.swap_remove(i);
                }
                None => gone.push((at, (victim, None))),
            }
        }
        keys.add(row);
        own.push(row);
    }
    Ok(gone)
}

/// The rows of an INSERT that reference no parent row, by index in `rows`,
/// each with its 1452 error. Under ON DUPLICATE KEY UPDATE a row whose key
/// is taken is not written: the row it updates is checked instead (when
/// the update changes it), as InnoDB checks what it writes — in and out of
/// a transaction, so a transaction does not learn of it only at COMMIT.
pub(super) fn orphan_rows(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    rows: &[Row],
    on_conflict: &OnConflict,
) -> Result<Vec<(usize, ShimError)>> {
    let OnConflict::Update(f) = on_conflict else {
        return crate::foreign_keys::orphans(e, s, schema, rows);
    };
    if !crate::foreign_keys::involved(e, schema)? {
        return Ok(Vec::new());
    }
    let coerced: Vec<Row> = rows.iter().map(|r| coerce_lenient(schema, r)).collect();
    let mut keys = TransactionKeys::new(e, s, schema, &coerced)?;
    let mut written: Vec<(usize, Row)> = Vec::with_capacity(rows.len());
    for (i, r) in coerced.iter().enumerate() {
        match keys.first_conflict(r) {
            Some(existing) => {
                let new = coerce_lenient(schema, &f(&existing, r)?);
                keys.remove_conflicting(&existing);
                keys.add(&new);
                if new != existing {
                    written.push((i, new));
                }
            }
            None => {
                keys.add(r);
                written.push((i, rows[i].clone()));
            }
        }
    }
    let checked: Vec<Row> = written.iter().map(|(_, r)| r.clone()).collect();
    Ok(crate::foreign_keys::orphans(e, s, schema, &checked)?
        .into_iter()
        .map(|(k, err)| (written[k].0, err))
        .collect())
}

/// Rows referencing no parent row (`orphans`, with their 1452 errors):
/// INSERT IGNORE skips them with a warning; otherwise the statement fails
/// with the first one's 1452, unless that row or an earlier one fails it
/// first (a duplicate key: MariaDB checks keys before foreign keys).
pub(super) fn drop_orphans(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    rows: Vec<Row>,
    orphans: Vec<(usize, ShimError)>,
    ((on_conflict, returning), batches): ((&OnConflict, Option<&InsertReturning>), IdBatches),
) -> Result<Vec<Row>> {
    if matches!(on_conflict, OnConflict::Ignore) {
        let mut skip = Vec::with_capacity(orphans.len());
        for (i, err) in orphans {
            s.add_warning("Warning", err.mysql_code().errno, err.to_string());
            skip.push(i);
        }
        return Ok(rows
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !skip.contains(i))
            .map(|(_, r)| r)
            .collect());
    }
    let Some((first, err)) = orphans.into_iter().next() else {
        return Ok(rows);
    };
    // The row took its value before its parent was looked for.
    let written = use_up_ids(e, s, schema, (&rows[..first], rows.get(first)), batches)?;
    let rules = (on_conflict, returning);
    first_statement_error(e, s, schema, (&written, rows.get(first)), rules)?;
    Err(err)
}

/// Plays the rows before the one that fails the statement in the front
/// end (`written`, with the AUTO_INCREMENT values they took) and that row
/// (`failing`, if its keys are checked before its failure), in order,
/// against the table's keys as the session sees them, as the statement
/// will: the first duplicate-key error a plain INSERT or an ON DUPLICATE
/// KEY UPDATE's changed row meets (or a CHECK the update fails), or the
/// error of a written row's RETURNING, if any. For precedence: MariaDB
/// stops at the first failing row, and evaluates a row's RETURNING once
/// it wrote the row.
pub(super) fn first_statement_error(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    (written, failing): (&[Row], Option<&Row>),
    (on_conflict, returning): (&OnConflict, Option<&InsertReturning>),
) -> Result<()> {
    let rows: Vec<Row> = written
        .iter()
        .chain(failing)
        .map(|r| coerce_lenient(schema, r))
        .collect();
    let mut keys = TransactionKeys::new(e, s, schema, &rows)?;
    for (i, r) in rows.iter().enumerate() {
        let left = match on_conflict {
            OnConflict::Error => {
                if keys.conflicts(r) > 0 {
                    return Err(keys.duplicate_error(r).into());
                }
                keys.add(r);
                Some(r.clone())
            }
            OnConflict::Update(f) => match keys.first_conflict(r) {
                Some(existing) => {
                    let new = coerce_lenient(schema, &f(&existing, r)?);
                    keys.remove_conflicting(&existing);
                    if keys.conflicts(&new) > 0 {
                        return Err(keys.duplicate_error(&new).into());
                    }
                    keys.add(&new);
                    Some(new)
                }
                None => {
                    keys.add(r);
                    Some(r.clone())
                }
            },
            OnConflict::Replace => {
                while let Some(victim) = keys.first_conflict(r) {
                    keys.remove_conflicting(&victim);
                }
                keys.add(r);
                Some(r.clone())
            }
            OnConflict::Ignore => (keys.conflicts(r) == 0).then(|| {
                keys.add(r);
                r.clone()
            }),
        };
        if let (Some(left), Some(returning), true) = (left, returning, i < written.len()) {
            returning.values_of(&left)?;
        }
    }
    Ok(())
}

/// CHECK constraints on an INSERT's rows, in row order as MariaDB applies
/// them: a failing row fails the statement with 4025, unless an earlier
/// row already failed it with a duplicate key (1062) — or, for a
/// multi-row INSERT IGNORE, is skipped with a warning (a single-row INSERT
/// IGNORE still fails, MariaDB's rule). Returns the rows to write.
pub(super) fn check_inserted_rows(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    checks: &crate::checks::TableChecks,
    rows: Vec<Row>,
    ((on_conflict, returning), batches): ((&OnConflict, Option<&InsertReturning>), IdBatches),
) -> Result<Vec<Row>> {
    let ignore = matches!(on_conflict, OnConflict::Ignore);
    let multi = rows.len() > 1;
    let mut kept = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let Err(failed) = checks.verify_uncoerced(schema, row) else {
            kept.push(row.clone());
            continue;
        };
        if ignore && multi {
            s.add_warning(
                "Warning",
                crate::error::ER_CONSTRAINT_FAILED.errno,
                failed.to_string(),
            );
            continue;
        }
        // The rows before it took their values; it fails before it does.
        let written = use_up_ids(e, s, schema, (&rows[..i], None), batches)?;
        if !ignore {
            // An earlier row's failure is the error MariaDB reports.
            let rules = (on_conflict, returning);
            first_statement_error(e, s, schema, (&written, None), rules)?;
        }
        return Err(failed.into());
    }
    Ok(kept)
}

/// `INSERT [IGNORE] [INTO] t SET a = x, b = y [ON DUPLICATE KEY UPDATE ...]`
/// (which the SQL parser does not accept) as the equivalent
/// `INSERT ... (a, b) VALUES (x, y) ...`; `None` for any other statement.
pub fn rewrite_insert_set(t: &[Token]) -> Option<String> {
    use crate::tokens::word;
    let mut i = 1;
    while matches!(
        word(t, i).as_deref(),
        Some("LOW_PRIORITY" | "DELAYED" | "HIGH_PRIORITY" | "IGNORE" | "INTO")
    ) {
        i += 1;
    }
    if !matches!(t.get(i), Some(Token::Word(_))) {
        return None;
    }
    i += 1;
    if matches!(t.get(i), Some(Token::Period)) {
        i += 2;
    }
    if word(t, i).as_deref() != Some("SET") {
        return None;
    }
    let set_at = i;
    i += 1;
    let mut assignments: Vec<Vec<&Token>> = vec![Vec::new()];
    let mut depth = 0usize;
    while i < t.len() {
        match &t[i] {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                assignments.push(Vec::new());
                i += 1;
                continue;
            }
            _ if depth == 0
                && word(t, i).as_deref() == Some("ON")
                && word(t, i + 1).as_deref() == Some("DUPLICATE") =>
            {
                break
            }
            _ => {}
        }
        if let Some(a) = assignments.last_mut() {
            a.push(&t[i]);
        }
        i += 1;
    }
    let render = |toks: &[&Token]| {
        toks.iter()
            .map(|x| render_token(x))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut cols = Vec::new();
    let mut vals = Vec::new();
    for a in &assignments {
        let eq = a.iter().position(|x| matches!(x, Token::Eq))?;
        if eq == 0 || eq + 1 >= a.len() {
            return None;
        }
        cols.push(render(&a[..eq]));
        vals.push(render(&a[eq + 1..]));
    }
    let head: Vec<&Token> = t[..set_at].iter().collect();
    let tail: Vec<&Token> = t[i..].iter().collect();
    Some(format!(
        "{} ({}) VALUES ({}) {}",
        render(&head),
        cols.join(", "),
        vals.join(", "),
        render(&tail)
    ))
}

/// A row a REPLACE deletes: the position of the row replacing it, and the
/// deleted row as a change (new `None`).
type ReplacedRow = (usize, (Row, Option<Row>));

#[cfg(test)]
mod tests {
    use super::rewrite_insert_set;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    #[test]
    pub(super) fn insert_set_becomes_insert_values() {
        let t = crate::tokens::tokens("INSERT IGNORE INTO d.t SET a = 1, b = CONCAT('x''y', (2)) ON DUPLICATE KEY UPDATE a = 2").unwrap();
        let sql = rewrite_insert_set(&t).unwrap();
        assert_eq!(sql, "INSERT IGNORE INTO d . t (a, b) VALUES (1, CONCAT ( 'x''y' , ( 2 ) )) ON DUPLICATE KEY UPDATE a = 2");
        assert!(Parser::parse_sql(&MySqlDialect {}, &sql).is_ok());
        let t = crate::tokens::tokens("INSERT INTO t VALUES (1)").unwrap();
        assert!(rewrite_insert_set(&t).is_none());
    }
}
