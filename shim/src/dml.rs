//! INSERT / REPLACE / UPDATE / DELETE / TRUNCATE -> storage `WriteOp`s.
//!
//! UPDATE and DELETE read rows through `ScanSpec::Prefix` when the WHERE
//! clause has `column = literal` conjuncts covering a prefix of the primary
//! key or of a secondary index (text columns only under a binary collation,
//! since a case-insensitive match may not share the key's bytes), and
//! through `ScanSpec::Full` otherwise; the full WHERE is always re-checked
//! on each row.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Adjustment, Collation, Row, SqlType, TableSchema, Value};
use ladle_dataflow::{compile_row_expr, DataflowError, RowExpr};
use ladle_storage::{IndexRef, OnConflict, RowFilter, RowUpdater, ScanSpec, StorageError, WriteOp};
use sqlparser::ast::{
    self, AssignmentTarget, BinaryOperator, Expr, OnInsert, SetExpr, TableFactor,
};
use sqlparser::tokenizer::Token;

use crate::ddl::default_value;
use crate::error::{
    Result, ShimError, WireError, ER_DUP_ENTRY, ER_NO_DEFAULT_FOR_FIELD, ER_OPERAND_COLUMNS,
};
use crate::exec::{Engine, Info, Output};
use crate::session::{Session, Transaction};

/// The cell at `pos`, or an internal error (never a panic inside a
/// storage commit) if the row is shorter than its schema.
fn slot(row: &mut Row, pos: usize) -> Result<&mut Value, StorageError> {
    let len = row.len();
    row.get_mut(pos)
        .ok_or_else(|| StorageError::Internal(format!("row of {len} values has no column {pos}")))
}

fn expr_err(e: DataflowError) -> StorageError {
    match e {
        DataflowError::Storage(s) => s,
        DataflowError::OutOfRange(m) => StorageError::OutOfRange(m),
        other => StorageError::Expression(other.to_string()),
    }
}

fn table(e: &Engine, s: &Session, name: &ast::ObjectName) -> Result<Arc<TableSchema>> {
    let (db, t) = e.resolve(s, name)?;
    e.storage.table(&db, &t).ok_or(ShimError::UnknownTable {
        database: db,
        table: t,
    })
}

fn column_pos(schema: &TableSchema, name: &str, place: &str) -> Result<usize> {
    schema
        .column_index(name)
        .ok_or_else(|| ShimError::UnknownColumn(name.to_string(), place.to_string()))
}

fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// The value an INSERT gives column `pos`: a generated column takes none
/// (it is computed), and a value other than NULL for one is error 1906, a
/// warning under IGNORE.
fn given_value(
    s: &mut Session,
    schema: &TableSchema,
    pos: usize,
    v: Option<Value>,
    ignore: bool,
) -> Result<Option<Value>> {
    let Some(column) = schema
        .columns
        .get(pos)
        .filter(|c| c.default.generation().is_some())
    else {
        return Ok(v);
    };
    if v.as_ref().is_some_and(|v| !v.is_null()) {
        let err = crate::checks::generated_value_given(schema, &column.name);
        if !ignore {
            return Err(ShimError::Wire(err));
        }
        s.add_warning("Warning", err.code.errno, err.message);
    }
    Ok(None)
}

/// Evaluates an INSERT value (a constant expression).
fn value_of(e: &Engine, s: &Session, x: &Expr) -> Result<Value> {
    e.eval_constant(s, x)
}

pub fn insert(e: &Engine, s: &mut Session, mut ins: ast::Insert) -> Result<Output> {
    let schema = table(e, s, &ins.table_name)?;
    let returning = ins
        .returning
        .take()
        .map(|items| crate::returning::Returning::compile(&schema, &items))
        .transpose()?;
    let targets: Vec<usize> = if ins.columns.is_empty() {
        (0..schema.columns.len()).collect()
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
    // MySQL reports "Records: .." for a multi-row VALUES or a SELECT.
    let many = !matches!(source.body.as_ref(), SetExpr::Values(v) if v.rows.len() == 1);
    match source.body.as_ref() {
        SetExpr::Values(v) => {
            for row in &v.rows {
                if row.len() != targets.len() {
                    return Err(StorageError::ColumnCount.into());
                }
                let mut out = Vec::with_capacity(row.len());
                for x in row {
                    out.push(if is_default_keyword(x) {
                        None
                    } else {
                        Some(value_of(e, s, x)?)
                    });
                }
                given.push(out);
            }
        }
        _ => {
            // INSERT ... SELECT: run the query, then insert its rows.
            let Output::Rows { rows, .. } = e.select_for_write(s, &source)? else {
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
                AssignmentTarget::ColumnName(n) => Some(crate::exec::last_part(n)),
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
    let rules = e.checks.for_table(&e.storage, &schema)?;
    for row in &mut rows {
        rules.fill_generated(&schema, row)?;
    }
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
        return insert_rows(e, s, &ins, schema, rows, records, many, returning);
    }
    // The checks below run a phase at a time over all rows; MariaDB runs
    // them a row at a time, so when one fails, the error is the first
    // failing row's first failure.
    let kept = rows.clone();
    match insert_rows(e, s, &ins, schema.clone(), rows, records, many, returning) {
        Err(err) if is_row_error(&err) => {
            Err(first_row_error(e, s, &ins, &schema, &kept)?.unwrap_or(err))
        }
        other => other,
    }
}

/// [`TransactionKeys`] for an INSERT of `rows`: the current rows holding
/// their keys and, under ON DUPLICATE KEY UPDATE, the keys the rows they
/// collide with take when updated (an update can collide with a row no
/// proposed row shares a key with).
fn upsert_keys<'a>(
    e: &Engine,
    s: &Session,
    schema: &'a TableSchema,
    rows: &[Row],
    on_conflict: &OnConflict,
) -> Result<TransactionKeys<'a>> {
    let OnConflict::Update(f) = on_conflict else {
        return TransactionKeys::new(e, s, schema, rows);
    };
    let first = TransactionKeys::new(e, s, schema, rows)?;
    let mut probe = rows.to_vec();
    for row in rows {
        if let Some(existing) = first.first_conflict(row) {
            if let Ok(updated) = f(&existing, row) {
                probe.push(coerce_lenient(schema, &updated));
            }
        }
    }
    if probe.len() == rows.len() {
        return Ok(first);
    }
    TransactionKeys::new(e, s, schema, &probe)
}

/// An error one row of an INSERT can fail with (a value, NOT NULL, CHECK,
/// duplicate key or foreign key).
fn is_row_error(err: &ShimError) -> bool {
    matches!(
        err.mysql_code().errno,
        1048 | 1062 | 1264 | 1265 | 1292 | 1366 | 1406 | 1452 | 4025
    )
}

/// The error MariaDB reports for an INSERT of `rows` (not IGNORE): each row
/// in order is converted to the column types, checked for NOT NULL and the
/// CHECK constraints, then against the keys (as the session sees the
/// table, with the rows before it written) and its foreign keys; the
/// first failure is the statement's error. None if no row fails.
fn first_row_error(
    e: &Engine,
    s: &Session,
    ins: &ast::Insert,
    schema: &Arc<TableSchema>,
    rows: &[Row],
) -> Result<Option<ShimError>> {
    let checks = e.checks.for_table(&e.storage, schema)?;
    let on_conflict = conflict_rule(schema, ins, &checks, &UpsertNotes::default())?;
    let lenient: Vec<Row> = rows.iter().map(|r| coerce_lenient(schema, r)).collect();
    let mut keys = upsert_keys(e, s, schema, &lenient, &on_conflict)?;
    let fail = |err: ShimError| Ok(Some(err));
    for row in rows {
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
fn insert_rows(
    e: &Engine,
    s: &mut Session,
    ins: &ast::Insert,
    schema: Arc<TableSchema>,
    mut rows: Vec<Row>,
    records: u64,
    many: bool,
    returning: Option<crate::returning::Returning>,
) -> Result<Output> {
    // A plain INSERT writes every row it is given, so its RETURNING rows
    // are known before the write; IGNORE, REPLACE and ON DUPLICATE KEY
    // UPDATE return what the write did with each row (see
    // `OpResult::rows`).
    let plain = !(ins.ignore || ins.replace_into || ins.on.is_some());
    // Outside strict mode (`sql_mode=''`) values are adjusted as IGNORE
    // adjusts them, but a NULL for a NOT NULL column still fails a
    // single-row INSERT (MariaDB's rule).
    if ins.ignore || !crate::vars::strict_mode(s) {
        adjust_ignored_values(s, &schema, &mut rows, ins.ignore || many);
    } else if let Some(err) = rows
        .iter()
        .find_map(|r| refuse_empty_enum(&schema, r, None).err())
    {
        return Err(err.into());
    }
    // INSERT IGNORE processes every row, so MySQL reports the last one's
    // explicit id even when a constraint skipped it (see OpResult).
    let ignore_last_id = match schema.auto_increment_column() {
        Some(ai) if ins.ignore && rows.iter().all(|r| positive_id(&r[ai]).is_some()) => rows
            .last()
            .and_then(|r| ladle_common::coerce(&r[ai], &schema.columns[ai]).ok())
            .as_ref()
            .and_then(positive_id),
        _ => None,
    };
    let checks = e.checks.for_table(&e.storage, &schema)?;
    let upsert_notes = UpsertNotes::default();
    let on_conflict = conflict_rule(&schema, ins, &checks, &upsert_notes)?;
    let upserted: Vec<Row> = match &on_conflict {
        OnConflict::Update(_) => rows.iter().map(|r| upsert_note_key(&schema, r)).collect(),
        _ => Vec::new(),
    };
    let replaces = !matches!(on_conflict, OnConflict::Error | OnConflict::Ignore);
    let replacing_keyed =
        matches!(on_conflict, OnConflict::Replace) && crate::foreign_keys::involved(e, &schema)?;
    if !checks.is_empty() {
        let given = if replacing_keyed {
            rows.clone()
        } else {
            Vec::new()
        };
        rows = match check_inserted_rows(e, s, &schema, &checks, rows, &on_conflict) {
            Ok(rows) => rows,
            // An earlier row's replaced row may be referenced (1451).
            Err(err) if replacing_keyed => {
                let replaced = replaced_rows(e, s, &schema, &given)?;
                return Err(first_replace_error(
                    e, s, &schema, &checks, &given, &replaced, err,
                ));
            }
            Err(err) => return Err(err),
        };
    }
    let orphans = orphan_rows(e, s, &schema, &rows, &on_conflict)?;
    if !orphans.is_empty() {
        rows = drop_orphans(e, s, &schema, rows, orphans, &on_conflict)?;
    }
    // RETURNING reports generated ids, so they are taken now, as a
    // transaction takes them.
    let generated = reserve_ids(e, s, &schema, &mut rows, returning.is_some() && plain)?;
    let returned = match &returning {
        Some(r) if plain => {
            let stored: Vec<Row> = rows.iter().map(|r| coerce_lenient(&schema, r)).collect();
            Some(r.output(&stored)?)
        }
        _ => None,
    };
    let first_generated = schema.auto_increment_column().and_then(|ai| {
        rows.iter()
            .zip(&generated)
            .find(|(_, g)| **g)
            .and_then(|(r, _)| r[ai].as_i64())
    });
    // REPLACE deletes the rows it replaces, so their referencing rows get
    // the foreign keys' ON DELETE actions (as InnoDB's REPLACE does).
    let cascades = if replacing_keyed {
        let replaced = replaced_rows(e, s, &schema, &rows)?;
        let changes: Vec<(Row, Option<Row>)> = replaced.iter().map(|(_, c)| c.clone()).collect();
        match crate::foreign_keys::parent_effects(e, s, &schema, &changes) {
            Ok(cascades) => cascades,
            Err(err) => {
                return Err(first_replace_error(
                    e, s, &schema, &checks, &rows, &replaced, err,
                ))
            }
        }
    } else {
        Vec::new()
    };
    let (out, written) = if s.in_transaction() {
        let out = insert_in_transaction(e, s, &schema, rows, on_conflict, generated)?;
        if let Some(tx) = &mut s.transaction {
            tx.ops.extend(cascades);
        }
        out
    } else {
        submit_with(
            e,
            s,
            WriteOp::Insert {
                table: schema.id,
                rows,
                on_conflict,
            },
            cascades,
            RowCounts::default(),
        )?
    };
    // A value ON DUPLICATE KEY UPDATE rounded: a Note at the row that
    // led to the update (after the inserted values' Notes; MariaDB
    // interleaves them by row).
    let upsert_notes = std::mem::take(&mut *upsert_notes.lock());
    for (i, row) in upserted.iter().enumerate() {
        for column in upsert_notes.get(row).into_iter().flatten() {
            s.add_warning(
                "Note",
                1265,
                format!("Data truncated for column '{column}' at row {}", i + 1),
            );
        }
    }
    if let Some(result) = returned {
        if let Some(id) = first_generated.filter(|_| !s.in_transaction()) {
            s.last_insert_id = id as u64;
        }
        return Ok(result);
    }
    if let Some(r) = &returning {
        return r.output(&written);
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

/// The info of a multi-row INSERT that was given `records` rows and
/// changed `affected`: as MySQL counts duplicates, the rows IGNORE skipped,
/// or the rows REPLACE deleted / ON DUPLICATE KEY UPDATE changed (each
/// counts twice in `affected`; an update that changes nothing is not
/// counted).
fn records_info(records: u64, affected: u64, ignore: bool, replaces: bool) -> Info {
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

/// What an INSERT does with a row whose key is taken: REPLACE, ON
/// DUPLICATE KEY UPDATE (whose changed row must pass the table's CHECKs),
/// IGNORE, or fail.
/// The columns whose ON DUPLICATE KEY UPDATE value was rounded or cut
/// (a Note each), by the proposed row (as stored) that led to the update.
type UpsertNotes = Arc<parking_lot::Mutex<HashMap<Row, Vec<String>>>>;

/// A proposed row as [`UpsertNotes`] holds it: as stored, without its
/// AUTO_INCREMENT value (storage may generate it after the shim saw it).
fn upsert_note_key(schema: &TableSchema, row: &Row) -> Row {
    let mut key = coerce_lenient(schema, row);
    if let Some(v) = schema.auto_increment_column().and_then(|c| key.get_mut(c)) {
        *v = Value::Null;
    }
    key
}

fn conflict_rule(
    schema: &Arc<TableSchema>,
    ins: &ast::Insert,
    checks: &Arc<crate::checks::TableChecks>,
    notes: &UpsertNotes,
) -> Result<OnConflict> {
    Ok(if ins.replace_into {
        OnConflict::Replace
    } else if let Some(OnInsert::DuplicateKeyUpdate(assignments)) = &ins.on {
        let compiled = compile_assignments(schema, assignments)?;
        let (checks, schema) = (checks.clone(), schema.clone());
        let notes = notes.clone();
        let updater: ladle_storage::ConflictUpdater =
            Arc::new(move |existing: &Row, proposed: &Row| {
                let mut new = existing.clone();
                let mut rounded = Vec::new();
                for (pos, x) in &compiled {
                    let v = x.eval_with_proposed(&new, proposed).map_err(expr_err)?;
                    if let Some(c) = schema.columns.get(*pos) {
                        if ladle_common::truncation_note(&v, c) {
                            rounded.push(c.name.clone());
                        }
                    }
                    *slot(&mut new, *pos)? = v;
                }
                checks.fill_generated(&schema, &mut new)?;
                checks.verify_uncoerced(&schema, &new)?;
                // Run again for the same row (a transaction's COMMIT),
                // the update notes what it noted the first time.
                notes
                    .lock()
                    .insert(upsert_note_key(&schema, proposed), rounded);
                Ok(new)
            });
        OnConflict::Update(updater)
    } else if ins.ignore {
        OnConflict::Ignore
    } else {
        OnConflict::Error
    })
}

/// Inside a transaction the write is buffered until COMMIT, but clients
/// (ORMs) need generated keys now: reserves AUTO_INCREMENT values from
/// storage for the rows that ask for one (also outside a transaction when
/// `now`: RETURNING reports them). Says which rows got one.
fn reserve_ids(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    rows: &mut [Row],
    now: bool,
) -> Result<Vec<bool>> {
    let mut generated = vec![false; rows.len()];
    let Some(ai) = schema
        .auto_increment_column()
        .filter(|_| now || s.in_transaction())
    else {
        return Ok(generated);
    };
    let need: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r[ai].is_null() || r[ai].as_i64() == Some(0))
        .map(|(i, _)| i)
        .collect();
    if !need.is_empty() {
        let first = e
            .storage
            .reserve_auto_increment(schema.id, need.len() as u64)?;
        for (k, &i) in need.iter().enumerate() {
            let v = first + k as u64;
            rows[i][ai] = i64::try_from(v).map(Value::Int).unwrap_or(Value::UInt(v));
            generated[i] = true;
        }
    }
    Ok(generated)
}

/// The current rows a REPLACE of `rows` deletes (each row sharing a
/// PRIMARY or UNIQUE key with one of them), as the session sees the table.
/// The error a REPLACE on a referenced table that failed with `err` (its
/// replaced rows fail a FOREIGN KEY, or a row fails a CHECK) reports:
/// InnoDB takes the rows one at a time, each checked for values that do
/// not fit (1264, 1406...), then CHECKs (4025), then the rows it replaces
/// (1451), so the first row failing any of them decides. `replaced` is
/// [`replaced_rows`]'s answer.
fn first_replace_error(
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
            Err(value_error) => return null_before_value_error(schema, row, value_error),
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

/// A row a REPLACE deletes: the position of the row replacing it, and the
/// deleted row as a change (new `None`).
type ReplacedRow = (usize, (Row, Option<Row>));

/// The rows a REPLACE of `rows` deletes.
fn replaced_rows(
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
fn orphan_rows(
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
fn drop_orphans(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    rows: Vec<Row>,
    orphans: Vec<(usize, ShimError)>,
    on_conflict: &OnConflict,
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
    first_statement_error(e, s, schema, &rows[..=first], on_conflict)?;
    Err(err)
}

/// Plays `rows` (in order) against the table's keys as the session sees
/// it, as the statement will: the first duplicate-key error a plain INSERT
/// or an ON DUPLICATE KEY UPDATE's changed row meets (or a CHECK the
/// update fails), if any. For precedence: MariaDB stops at the first
/// failing row.
fn first_statement_error(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    rows: &[Row],
    on_conflict: &OnConflict,
) -> Result<()> {
    let rows: Vec<Row> = rows.iter().map(|r| coerce_lenient(schema, r)).collect();
    let mut keys = TransactionKeys::new(e, s, schema, &rows)?;
    for r in &rows {
        match on_conflict {
            OnConflict::Error => {
                if keys.conflicts(r) > 0 {
                    return Err(keys.duplicate_error(r).into());
                }
                keys.add(r);
            }
            OnConflict::Update(f) => match keys.first_conflict(r) {
                Some(existing) => {
                    let new = coerce_lenient(schema, &f(&existing, r)?);
                    keys.remove_conflicting(&existing);
                    if keys.conflicts(&new) > 0 {
                        return Err(keys.duplicate_error(&new).into());
                    }
                    keys.add(&new);
                }
                None => keys.add(r),
            },
            OnConflict::Replace => {
                while let Some(victim) = keys.first_conflict(r) {
                    keys.remove_conflicting(&victim);
                }
                keys.add(r);
            }
            OnConflict::Ignore => {
                if keys.conflicts(r) == 0 {
                    keys.add(r);
                }
            }
        }
    }
    Ok(())
}

/// CHECK constraints on an INSERT's rows, in row order as MariaDB applies
/// them: a failing row fails the statement with 4025, unless an earlier
/// row already failed it with a duplicate key (1062) — or, for a
/// multi-row INSERT IGNORE, is skipped with a warning (a single-row INSERT
/// IGNORE still fails, MariaDB's rule). Returns the rows to write.
fn check_inserted_rows(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    checks: &crate::checks::TableChecks,
    rows: Vec<Row>,
    on_conflict: &OnConflict,
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
        if !ignore {
            // An earlier row's failure is the error MariaDB reports.
            first_statement_error(e, s, schema, &rows[..i], on_conflict)?;
        }
        return Err(failed.into());
    }
    Ok(kept)
}

/// An INSERT inside a transaction, checked when it is issued (as InnoDB
/// does) against the table as the transaction sees it: committed rows with
/// the transaction's earlier writes replayed, plus the statement's own
/// earlier rows. A duplicate PRIMARY/UNIQUE key fails the statement with
/// 1062 (the transaction goes on); INSERT IGNORE drops the row with a
/// warning; REPLACE and ON DUPLICATE KEY UPDATE report the rows they will
/// replace or update. Only the rows that will be written are buffered, so
/// COMMIT applies exactly what the statements reported (it still validates
/// everything against the rows committed by then).
///
/// `generated[i]` says whether row `i`'s AUTO_INCREMENT value was reserved
/// for it (rather than given by the statement). Also returns the rows as
/// the statement leaves them (see `OpResult::rows`).
fn insert_in_transaction(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    rows: Vec<Row>,
    on_conflict: OnConflict,
    generated: Vec<bool>,
) -> Result<(Output, Vec<Row>)> {
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|r| coerce_row(schema, &r))
        .collect::<Result<_>>()?;
    // NOT NULL at the statement (1048 there, as MariaDB), not at COMMIT.
    for row in &rows {
        ladle_storage::check_not_null(schema, row, true)?;
    }
    let mut keys = upsert_keys(e, s, schema, &rows, &on_conflict)?;
    let mut kept = Vec::with_capacity(rows.len());
    let mut written = Vec::new();
    let returns = !matches!(on_conflict, OnConflict::Error);
    let mut counts = RowCounts::default();
    let mut first_generated = None;
    let mut insert_id = 0;
    let ai = schema.auto_increment_column();
    // The reserved values go to the rows in order; a row IGNORE skips, or
    // ON DUPLICATE KEY UPDATE turns into an update, gives its value back to
    // the next row, as outside a transaction (see storage's `insert`).
    let mut next_generated = ai.and_then(|c| {
        rows.iter()
            .zip(&generated)
            .find(|(_, g)| **g)
            .and_then(|(r, _)| positive_id(&r[c]))
    });
    for (mut row, was_generated) in rows.into_iter().zip(generated) {
        if let (true, Some(c), Some(v)) = (was_generated, ai, next_generated) {
            row[c] = ladle_common::coerce(&Value::UInt(v), &schema.columns[c])
                .map_err(StorageError::from)?;
        }
        let conflicts = keys.conflicts(&row);
        let id = ai.and_then(|c| positive_id(&row[c]));
        match (&on_conflict, conflicts) {
            (_, 0) => counts = counts.plus(1, 1),
            (OnConflict::Error, _) => {
                return Err(keys.duplicate_error(&row).into());
            }
            (OnConflict::Ignore, _) => {
                s.add_warning(
                    "Warning",
                    ER_DUP_ENTRY.errno,
                    keys.duplicate_error(&row).to_string(),
                );
                // The last row processed, written or not (as storage).
                if first_generated.is_none() {
                    insert_id = id.unwrap_or(insert_id);
                }
                continue;
            }
            (OnConflict::Replace, n) => counts = counts.plus(1 + n as u64, 1 + n as u64),
            (OnConflict::Update(f), _) => {
                // The existing row is updated (COMMIT evaluates the
                // assignments again against the row as it is then). Its id
                // is the one reported.
                if let Some(existing) = keys.first_conflict(&row) {
                    // Strictly, as the write will be: a value the column
                    // cannot take fails the statement now, not the COMMIT.
                    let new = coerce_row(schema, &f(&existing, &row)?)?;
                    ladle_storage::check_not_null(schema, &new, true)?;
                    if new == existing {
                        counts = counts.plus(0, 1);
                    } else {
                        counts = counts.plus(2, 2);
                    }
                    if first_generated.is_none() {
                        insert_id = ai
                            .and_then(|c| positive_id(&existing[c]))
                            .unwrap_or(insert_id);
                    }
                    // The updated row may repeat another row's key (one
                    // `keys` may not know yet: the row updated was
                    // inserted by this statement). Learnt while `existing`
                    // is held, so its older version is not.
                    keys.learn(
                        TransactionKeys::new(e, s, schema, std::slice::from_ref(&new))?.rows(),
                    );
                    keys.remove_conflicting(&existing);
                    if keys.conflicts(&new) > 0 {
                        return Err(keys.duplicate_error(&new).into());
                    }
                    keys.add(&new);
                    written.push(new);
                }
                kept.push(row);
                continue;
            }
        }
        if let (Some(id), false) = (id, was_generated) {
            e.storage.note_auto_increment(schema.id, id)?;
        }
        if was_generated {
            next_generated = next_generated.map(|v| v + 1);
        }
        if was_generated && first_generated.is_none() {
            first_generated = id;
            insert_id = id.unwrap_or(0);
        } else if first_generated.is_none() {
            insert_id = id.unwrap_or(insert_id);
        }
        keys.remove_conflicting(&row);
        keys.add(&row);
        if returns {
            written.push(row.clone());
        }
        kept.push(row);
    }
    if let Some(id) = first_generated {
        s.last_insert_id = id;
    }
    if first_generated.is_none() && counts.affected == 0 {
        insert_id = 0;
    }
    if !kept.is_empty() {
        if let Some(tx) = &mut s.transaction {
            tx.ops.push(WriteOp::Insert {
                table: schema.id,
                rows: kept,
                on_conflict,
            });
        }
    }
    let out = Output::Done {
        affected_rows: counts.reported(s),
        last_insert_id: insert_id,
        info: Info::None,
    };
    Ok((out, written))
}

/// A row's values coerced to its table's column types (the error a write
/// of it would fail with, otherwise).
fn coerce_row(schema: &TableSchema, row: &Row) -> Result<Row> {
    if row.len() != schema.columns.len() {
        return Err(StorageError::ColumnCount.into());
    }
    row.iter()
        .zip(&schema.columns)
        .map(|(v, c)| ladle_common::coerce(v, c).map_err(|e| StorageError::from(e).into()))
        .collect()
}

fn positive_id(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok().filter(|&i| i > 0),
        Value::UInt(u) => Some(*u),
        _ => None,
    }
}

/// The PRIMARY and UNIQUE keys of a table as an open transaction sees it,
/// for checking one INSERT statement's rows: every current row holding a
/// key some new row has (committed rows with the transaction's buffered
/// writes replayed), and the statement's own rows as they are added.
struct TransactionKeys<'a> {
    schema: &'a TableSchema,
    /// PRIMARY first, then each UNIQUE key.
    keys: Vec<UniqueKey>,
}

/// One unique key: its name, its columns, and the row holding each
/// normalized key value.
struct UniqueKey {
    name: String,
    columns: Vec<usize>,
    rows: HashMap<Vec<Value>, Row>,
}

impl<'a> TransactionKeys<'a> {
    fn new(
        e: &Engine,
        s: &Session,
        schema: &'a TableSchema,
        new_rows: &[Row],
    ) -> Result<TransactionKeys<'a>> {
        let mut defs: Vec<(String, Option<IndexRef>, Vec<usize>)> = Vec::new();
        if let Some(pk) = &schema.primary_key {
            defs.push(("PRIMARY".into(), Some(IndexRef::Primary), pk.clone()));
        }
        for idx in schema.indexes.iter().filter(|i| i.unique) {
            defs.push((
                idx.name.clone(),
                Some(IndexRef::Secondary(idx.id)),
                idx.columns.clone(),
            ));
        }
        let mut me = TransactionKeys {
            schema,
            keys: defs
                .iter()
                .map(|(name, _, columns)| UniqueKey {
                    name: name.clone(),
                    columns: columns.clone(),
                    rows: HashMap::new(),
                })
                .collect(),
        };
        if defs.is_empty() {
            return Ok(me);
        }
        // The transaction's ops on the table, and whether each only adds
        // rows it holds (a plain INSERT or INSERT IGNORE, whose rows were
        // checked when it ran): then no committed row changed.
        let ops: Vec<&WriteOp> = s
            .transaction
            .iter()
            .flat_map(|tx| tx.ops.iter())
            .filter(|op| match op {
                WriteOp::Insert { table, .. }
                | WriteOp::Update { table, .. }
                | WriteOp::Delete { table, .. } => *table == schema.id,
            })
            .collect();
        let only_added = ops.iter().all(|op| {
            matches!(
                op,
                WriteOp::Insert {
                    on_conflict: OnConflict::Error | OnConflict::Ignore,
                    ..
                }
            )
        });
        if let (Some(tx), false) = (&s.transaction, only_added) {
            // The transaction changed or removed rows: its view of the rows
            // holding the new rows' keys is those committed rows (and the
            // ones its ops touched) with its ops replayed.
            let lookups: Vec<ScanSpec> = defs
                .iter()
                .filter_map(|(_, index, cols)| Some((index.as_ref()?, cols)))
                .flat_map(|(index, cols)| {
                    new_rows.iter().filter_map(move |row| {
                        Some(ScanSpec::Prefix {
                            index: *index,
                            key: key_values(row, cols)?,
                        })
                    })
                })
                .collect();
            for r in transaction_rows(e, tx, schema, &lookups)? {
                me.add(&r);
            }
        } else {
            // Committed rows by key lookups, plus the rows the transaction
            // added that share a key with the new rows, from its index of
            // them (so a bulk load in a transaction stays O(rows) overall).
            if let Some(tx) = &s.transaction {
                let mut all = tx.added_keys.borrow_mut();
                let added = all.entry(schema.id).or_default();
                me.catch_up(added, &tx.ops);
                for (i, (_, _, cols)) in defs.iter().enumerate() {
                    for row in new_rows {
                        let found = me
                            .normalized(row, cols)
                            .and_then(|k| added.keys.get(i).and_then(|m| m.get(&k)).cloned());
                        if let Some(r) = found {
                            me.add(&r);
                        }
                    }
                }
            }
            for (_, index, cols) in &defs {
                let Some(index) = index else { continue };
                for row in new_rows {
                    if let Some(k) = key_values(row, cols) {
                        for r in e.storage.lookup(schema.id, *index, &k)? {
                            me.add(&r);
                        }
                    }
                }
            }
        }
        Ok(me)
    }

    /// Brings `added` (this table's index of rows the transaction's plain
    /// INSERTs added) up to date with `ops` (ROLLBACK TO SAVEPOINT clears
    /// the index, see `Transaction::rollback_to`).
    fn catch_up(&self, added: &mut crate::session::AddedKeys, ops: &[WriteOp]) {
        if added.keys.len() != self.keys.len() || added.ops_seen > ops.len() {
            *added = crate::session::AddedKeys {
                ops_seen: 0,
                keys: vec![HashMap::new(); self.keys.len()],
            };
        }
        for op in &ops[added.ops_seen..] {
            if let WriteOp::Insert { table, rows, .. } = op {
                if *table == self.schema.id {
                    for r in rows {
                        let r = coerce_lenient(self.schema, r);
                        for (i, key) in self.keys.iter().enumerate() {
                            if let Some(k) = self.normalized(&r, &key.columns) {
                                added.keys[i].insert(k, r.clone());
                            }
                        }
                    }
                }
            }
        }
        added.ops_seen = ops.len();
    }

    fn normalized(&self, row: &Row, cols: &[usize]) -> Option<Vec<Value>> {
        Some(
            key_values(row, cols)?
                .iter()
                .zip(cols)
                .map(|(v, &c)| v.key_normalized(self.schema.columns[c].collation))
                .collect(),
        )
    }

    /// How many distinct current rows share a unique key with `row`.
    fn conflicts(&self, row: &Row) -> usize {
        let mut found: Vec<&Row> = Vec::new();
        for key in &self.keys {
            if let Some(r) = self
                .normalized(row, &key.columns)
                .and_then(|k| key.rows.get(&k))
            {
                if !found.contains(&r) {
                    found.push(r);
                }
            }
        }
        found.len()
    }

    /// The first current row `row` collides with (the one ON DUPLICATE
    /// KEY UPDATE updates).
    fn first_conflict(&self, row: &Row) -> Option<Row> {
        self.keys
            .iter()
            .find_map(|key| key.rows.get(&self.normalized(row, &key.columns)?).cloned())
    }

    /// MySQL's 1062 for the first key of `row` that collides.
    fn duplicate_error(&self, row: &Row) -> StorageError {
        for key in &self.keys {
            if self
                .normalized(row, &key.columns)
                .is_some_and(|k| key.rows.contains_key(&k))
            {
                let value = key
                    .columns
                    .iter()
                    .map(|&c| row[c].to_string())
                    .collect::<Vec<_>>()
                    .join("-");
                return StorageError::DuplicateKey {
                    key: key.name.clone(),
                    value,
                };
            }
        }
        StorageError::Internal("no duplicate key to report".into())
    }

    /// Also knows `rows` (current rows found later), except a row whose
    /// primary key it already holds: its version here is the newer one.
    fn learn(&mut self, rows: Vec<Row>) {
        let Some(pk) = self.schema.primary_key.as_ref().filter(|pk| !pk.is_empty()) else {
            return;
        };
        for r in rows {
            let held = self.keys.first().is_some_and(|primary| {
                primary.columns == *pk
                    && self
                        .normalized(&r, pk)
                        .is_some_and(|k| primary.rows.contains_key(&k))
            });
            if !held {
                self.add(&r);
            }
        }
    }

    /// Forgets the rows `row` replaces (REPLACE deletes them).
    fn remove_conflicting(&mut self, row: &Row) {
        let victims: Vec<Row> = self
            .keys
            .iter()
            .filter_map(|key| key.rows.get(&self.normalized(row, &key.columns)?).cloned())
            .collect();
        for v in victims {
            let normalized: Vec<Option<Vec<Value>>> = self
                .keys
                .iter()
                .map(|key| self.normalized(&v, &key.columns))
                .collect();
            for (key, k) in self.keys.iter_mut().zip(normalized) {
                if let Some(k) = k {
                    key.rows.remove(&k);
                }
            }
        }
    }

    /// Every row it knows.
    fn rows(self) -> Vec<Row> {
        let mut out: Vec<Row> = Vec::new();
        for key in self.keys {
            for (_, r) in key.rows {
                if !out.contains(&r) {
                    out.push(r);
                }
            }
        }
        out
    }

    fn add(&mut self, row: &Row) {
        let normalized: Vec<Option<Vec<Value>>> = self
            .keys
            .iter()
            .map(|key| self.normalized(row, &key.columns))
            .collect();
        for (key, k) in self.keys.iter_mut().zip(normalized) {
            if let Some(k) = k {
                key.rows.insert(k, row.clone());
            }
        }
    }
}

/// The first row an UPDATE would fail on with 1062, checked as InnoDB
/// does: a changed row whose PRIMARY/UNIQUE key repeats another row's (as
/// the statement sees the table, with the rows before it updated and the
/// rows after it not yet). Returns the rows changed before it in that
/// order, the failing row, and the error; None when no row collides.
fn first_duplicate<'c>(
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

/// The error of an UPDATE whose row failed with `err` (a CHECK, a value
/// that does not fit) after `changes` (the rows before it): the first of
/// those that collides (1062) or fails a FOREIGN KEY, else `err`.
fn first_update_error(
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

/// Where an UPDATE fails with 1062 (see [`first_duplicate`]).
struct UpdateDuplicate<'c> {
    /// The rows changed before the failing one, in the order InnoDB
    /// changes them.
    before: Vec<&'c (Row, Option<Row>)>,
    failing: &'c (Row, Option<Row>),
    error: ShimError,
}

impl UpdateDuplicate<'_> {
    /// The statement's error: InnoDB checks each row's FOREIGN KEYs as it
    /// changes it, so a row changed before the failing one fails first
    /// with 1452 (child side) or 1451 (parent side), and the failing row
    /// itself with 1451 (its referenced key is checked before its new
    /// entry is inserted) but not 1452 (its new entry goes in first).
    fn error(self, e: &Engine, s: &Session, schema: &TableSchema, keyed: bool) -> ShimError {
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

/// The key values of `row` for `cols`, or None if any is NULL (NULLs never
/// collide).
fn key_values(row: &Row, cols: &[usize]) -> Option<Vec<Value>> {
    cols.iter()
        .map(|&c| row.get(c).filter(|v| !v.is_null()).cloned())
        .collect()
}

fn compile_assignments(
    schema: &TableSchema,
    assignments: &[ast::Assignment],
) -> Result<Vec<(usize, RowExpr)>> {
    assignments
        .iter()
        .map(|a| {
            let name = match &a.target {
                AssignmentTarget::ColumnName(n) => crate::exec::last_part(n),
                AssignmentTarget::Tuple(_) => {
                    return Err(ShimError::Unsupported("tuple assignment".into()))
                }
            };
            let pos = column_pos(schema, &name, "field list")?;
            // A generated column is computed: DEFAULT leaves it to that,
            // any other value is error 1906.
            let generated = schema.columns.get(pos);
            if generated.is_some_and(|c| c.default.generation().is_some()) {
                if is_default_keyword(&a.value) {
                    return Ok(None);
                }
                return Err(ShimError::Wire(crate::checks::generated_value_given(
                    schema, &name,
                )));
            }
            Ok(Some((pos, compile_row_expr(&a.value, Some(schema))?)))
        })
        .filter_map(Result::transpose)
        .collect()
}

/// The row counts a statement reports. Inside a transaction they are
/// computed when the statement runs, over the table as the transaction
/// sees it.
#[derive(Clone, Copy, Debug, Default)]
struct RowCounts {
    /// Rows changed (MySQL's affected rows).
    affected: u64,
    /// Rows found (for clients that set CLIENT_FOUND_ROWS, as Django does
    /// to tell an unchanged row from a missing one).
    found: u64,
}

impl RowCounts {
    fn both(n: u64) -> RowCounts {
        RowCounts {
            affected: n,
            found: n,
        }
    }

    fn plus(self, affected: u64, found: u64) -> RowCounts {
        RowCounts {
            affected: self.affected + affected,
            found: self.found + found,
        }
    }

    /// The count the session's client asked for.
    fn reported(self, s: &Session) -> u64 {
        if s.found_rows {
            self.found
        } else {
            self.affected
        }
    }
}

/// Applies `op` now (autocommit) or buffers it in the open transaction
/// (reporting `in_transaction`, its counts computed when it ran), with
/// `cascades` (foreign key actions) written after it in the same atomic
/// batch; the statement reports `op`'s counts.
/// Also returns the op's `OpResult::rows` (none inside a transaction).
fn submit_with(
    e: &Engine,
    s: &mut Session,
    op: WriteOp,
    cascades: Vec<WriteOp>,
    in_transaction: RowCounts,
) -> Result<(Output, Vec<Row>)> {
    // An UPDATE reports the rows it matched and changed.
    let is_update = matches!(op, WriteOp::Update { .. });
    let info = |c: RowCounts| {
        if is_update {
            Info::Matched {
                matched: c.found,
                changed: c.affected,
            }
        } else {
            Info::None
        }
    };
    let info_in_transaction = info(in_transaction);
    if let Some(tx) = &mut s.transaction {
        tx.ops.push(op);
        tx.ops.extend(cascades);
        let out = Output::Done {
            affected_rows: in_transaction.reported(s),
            last_insert_id: 0,
            info: info_in_transaction,
        };
        return Ok((out, Vec::new()));
    }
    let start = std::time::Instant::now();
    let mut ops = vec![op];
    ops.extend(cascades);
    let check = crate::foreign_keys::commit_check(e, s, &ops)?;
    let res = e.storage.write_checked(ops, check)?;
    s.wrote(res.lsn);
    e.metrics
        .commit_seconds
        .observe(start.elapsed().as_secs_f64());
    let r = res.ops.into_iter().next().unwrap_or_default();
    if let Some(id) = r.last_insert_id {
        s.last_insert_id = id;
    }
    for duplicate in r.ignored {
        s.add_warning("Warning", ER_DUP_ENTRY.errno, duplicate);
    }
    let counts = RowCounts {
        affected: r.affected_rows,
        found: r.found_rows,
    };
    let out = Output::Done {
        affected_rows: counts.reported(s),
        last_insert_id: r.insert_id,
        info: info(counts),
    };
    Ok((out, r.rows))
}

/// The rows an UPDATE/DELETE considers: committed rows, or inside a
/// transaction the table as the transaction's buffered ops leave it (so
/// counts and ORDER BY ... LIMIT see the transaction's own writes).
fn candidate_rows(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    scan: &ScanSpec,
) -> Result<Vec<Row>> {
    let Some(tx) = s.transaction.as_ref().filter(|t| !t.ops.is_empty()) else {
        return Ok(match scan {
            ScanSpec::Full => e.storage.scan(schema.id)?,
            ScanSpec::Prefix { index, key } => e.storage.lookup(schema.id, *index, key)?,
            ScanSpec::Keys(keys) => {
                let mut rows = Vec::with_capacity(keys.len());
                for key in keys {
                    rows.extend(e.storage.lookup(schema.id, IndexRef::Primary, key)?);
                }
                rows
            }
        });
    };
    let rows = transaction_rows(e, tx, schema, std::slice::from_ref(scan))?;
    match (scan, &schema.primary_key) {
        // In the order given, as storage visits them.
        (ScanSpec::Keys(keys), Some(pk)) => {
            let mut by_key: HashMap<Vec<Value>, Row> = rows
                .into_iter()
                .map(|r| (pk.iter().map(|&c| r[c].clone()).collect(), r))
                .collect();
            Ok(keys.iter().filter_map(|k| by_key.remove(k)).collect())
        }
        _ => Ok(rows),
    }
}

/// Rows of `schema`'s table as the open transaction `tx` leaves them: at
/// least every row one of `scans` finds in that state (callers filter
/// further). Reads only what the scans and the transaction's own ops on
/// the table look up, when each of those is a key lookup and the ops only
/// insert, update or delete by their own scans (a REPLACE or ON DUPLICATE
/// KEY UPDATE reaches rows by any unique key): a row the transaction
/// changed was found by one of its ops' scans, and any other row is as
/// committed. Otherwise it replays the ops over the whole table. (sysbench
/// `oltp_read_write`'s UPDATE, DELETE and INSERT by primary key each read
/// the whole table before: 2 ms of CPU per statement at 40k rows.)
fn transaction_rows(
    e: &Engine,
    tx: &Transaction,
    schema: &TableSchema,
    scans: &[ScanSpec],
) -> Result<Vec<Row>> {
    let mut lookups: Vec<&ScanSpec> = scans.iter().collect();
    let by_own_scans = tx.ops.iter().all(|op| match op {
        WriteOp::Insert {
            table, on_conflict, ..
        } => *table != schema.id || matches!(on_conflict, OnConflict::Error | OnConflict::Ignore),
        WriteOp::Update { table, scan, .. } | WriteOp::Delete { table, scan, .. } => {
            if *table == schema.id {
                lookups.push(scan);
            }
            true
        }
    });
    let pk = schema.primary_key.as_deref().filter(|pk| !pk.is_empty());
    let keyed = lookups.iter().all(|s| matches!(s, ScanSpec::Prefix { .. }));
    let (Some(pk), true, true) = (pk, by_own_scans, keyed) else {
        return replay(tx, schema, e.storage.scan(schema.id)?);
    };
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::new();
    for scan in lookups {
        if let ScanSpec::Prefix { index, key } = scan {
            for r in e.storage.lookup(schema.id, *index, key)? {
                if seen.insert(key_values(&r, pk)) {
                    rows.push(r);
                }
            }
        }
    }
    replay(tx, schema, rows)
}

/// Whether the open transaction wrote `table`.
pub(crate) fn transaction_wrote(s: &Session, table: ladle_common::TableId) -> bool {
    s.transaction.as_ref().is_some_and(|tx| {
        tx.ops.iter().any(|op| match op {
            WriteOp::Insert { table: t, .. }
            | WriteOp::Update { table: t, .. }
            | WriteOp::Delete { table: t, .. } => *t == table,
        })
    })
}

/// Every row of `schema`'s table as the session sees it: committed rows
/// with the open transaction's writes replayed.
pub(crate) fn table_as_transaction_sees(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
) -> Result<Vec<Row>> {
    candidate_rows(e, s, schema, &ScanSpec::Full)
}

/// `rows` (a table's committed rows) as the transaction's buffered ops
/// leave them.
fn replay(tx: &Transaction, schema: &TableSchema, rows: Vec<Row>) -> Result<Vec<Row>> {
    replay_noting(tx, schema, rows, &mut Vec::new())
}

/// [`replay`], also pushing to `touched` every row an op wrote or removed
/// on the way (an inserted row a later op deleted is gone from the result
/// but still hides a snapshot's row with its key: see [`snapshot_overlay`]).
fn replay_noting(
    tx: &Transaction,
    schema: &TableSchema,
    mut rows: Vec<Row>,
    touched: &mut Vec<Row>,
) -> Result<Vec<Row>> {
    for op in &tx.ops {
        match op {
            WriteOp::Insert {
                table,
                rows: new,
                on_conflict,
            } if *table == schema.id => {
                for r in new {
                    let coerced = coerce_lenient(schema, r);
                    match on_conflict {
                        OnConflict::Replace => {
                            let gone = colliding(schema, &rows, &coerced);
                            let mut i = 0;
                            rows.retain(|r| {
                                i += 1;
                                let keep = !gone.contains(&(i - 1));
                                if !keep {
                                    touched.push(r.clone());
                                }
                                keep
                            });
                            touched.push(coerced.clone());
                            rows.push(coerced);
                        }
                        OnConflict::Update(f) => match colliding(schema, &rows, &coerced).first() {
                            Some(&i) => {
                                let updated = coerce_lenient(schema, &f(&rows[i], &coerced)?);
                                if updated != rows[i] {
                                    touched.push(rows[i].clone());
                                    touched.push(updated.clone());
                                }
                                rows[i] = updated;
                            }
                            None => {
                                touched.push(coerced.clone());
                                rows.push(coerced);
                            }
                        },
                        // Checked when the statement ran: an IGNORE op
                        // holds only the rows that did not collide.
                        OnConflict::Error | OnConflict::Ignore => {
                            touched.push(coerced.clone());
                            rows.push(coerced);
                        }
                    }
                }
            }
            WriteOp::Update { table, update, .. } if *table == schema.id => {
                for r in rows.iter_mut() {
                    if let Some(n) = update(r)? {
                        // Typed as COMMIT will store it (`i / 2` of an INT
                        // column reads back as an integer, not a decimal).
                        let n = coerce_lenient(schema, &n);
                        if n != *r {
                            touched.push(r.clone());
                            touched.push(n.clone());
                        }
                        *r = n;
                    }
                }
            }
            WriteOp::Delete { table, filter, .. } if *table == schema.id => {
                let mut kept = Vec::with_capacity(rows.len());
                for r in rows {
                    if filter(&r)? {
                        touched.push(r);
                    } else {
                        kept.push(r);
                    }
                }
                rows = kept;
            }
            _ => {}
        }
    }
    Ok(rows)
}

/// Strict mode refuses `''` for an ENUM without that label (1265), though
/// the write takes it: it is the empty value (index 0) IGNORE and a
/// non-strict `sql_mode` store for a value that is no label. A value the
/// row had before (`old`, an UPDATE's) is kept, as MariaDB copies it.
fn refuse_empty_enum(
    schema: &TableSchema,
    row: &Row,
    old: Option<&Row>,
) -> std::result::Result<(), StorageError> {
    for (i, (v, c)) in row.iter().zip(&schema.columns).enumerate() {
        empty_enum_check(v, c, old.and_then(|o| o.get(i)))?;
    }
    Ok(())
}

/// [`refuse_empty_enum`] of one value (`old`: the column's value before).
fn empty_enum_check(
    v: &Value,
    c: &ladle_common::ColumnSchema,
    old: Option<&Value>,
) -> std::result::Result<(), StorageError> {
    let SqlType::Enum(labels) = &c.ty else {
        return Ok(());
    };
    let empty = matches!(v, Value::Text(t) if t.is_empty());
    if empty && !labels.iter().any(String::is_empty) && old != Some(v) {
        return Err(StorageError::BadValue(
            ladle_common::CoerceError::Incorrect {
                ty: "enum".into(),
                value: String::new(),
                column: c.name.clone(),
            },
        ));
    }
    Ok(())
}

/// The error of a row whose values fail to coerce with `value_error`:
/// MariaDB fills the columns in order, so a NULL for a NOT NULL column
/// before the failing one fails first (1048).
fn null_before_value_error(schema: &TableSchema, row: &Row, value_error: ShimError) -> ShimError {
    let failing = row
        .iter()
        .zip(&schema.columns)
        .position(|(v, c)| {
            empty_enum_check(v, c, None).is_err() || ladle_common::coerce(v, c).is_err()
        })
        .unwrap_or(row.len());
    match ladle_storage::check_not_null(schema, &row[..failing], true) {
        Err(null) => null.into(),
        Ok(()) => value_error,
    }
}

/// [`coerce_row`] as strict mode writes `row` (replacing `old`, if any):
/// `''` is refused for an ENUM (see [`refuse_empty_enum`]), column by
/// column with the other values' errors.
fn coerce_row_strict(schema: &TableSchema, row: &Row, old: Option<&Row>) -> Result<Row> {
    if row.len() != schema.columns.len() {
        return Err(StorageError::ColumnCount.into());
    }
    row.iter()
        .zip(&schema.columns)
        .enumerate()
        .map(|(i, (v, c))| {
            empty_enum_check(v, c, old.and_then(|o| o.get(i)))?;
            Ok(ladle_common::coerce(v, c).map_err(StorageError::from)?)
        })
        .collect()
}

/// `row` coerced to the table's column types, each value that does not
/// coerce left as it is (COMMIT will report it).
fn coerce_lenient(schema: &TableSchema, row: &Row) -> Row {
    row.iter()
        .zip(&schema.columns)
        .map(|(v, c)| ladle_common::coerce(v, c).unwrap_or_else(|_| v.clone()))
        .collect()
}

/// Positions in `rows` of the rows sharing a PRIMARY or UNIQUE key with
/// `row`, those sharing the PRIMARY key first.
fn colliding(schema: &TableSchema, rows: &[Row], row: &Row) -> Vec<usize> {
    let mut keys: Vec<&[usize]> = Vec::new();
    if let Some(pk) = &schema.primary_key {
        keys.push(pk);
    }
    keys.extend(
        schema
            .indexes
            .iter()
            .filter(|i| i.unique)
            .map(|i| &i.columns[..]),
    );
    let normalized = |r: &Row, cols: &[usize]| -> Option<Vec<Value>> {
        Some(
            key_values(r, cols)?
                .iter()
                .zip(cols)
                .map(|(v, &c)| v.key_normalized(schema.columns[c].collation))
                .collect(),
        )
    };
    let wanted: Vec<(&[usize], Vec<Value>)> = keys
        .iter()
        .filter_map(|cols| Some((*cols, normalized(row, cols)?)))
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    // In key order (PRIMARY first, then each UNIQUE key), as storage finds
    // them: ON DUPLICATE KEY UPDATE updates the first.
    let mut out: Vec<usize> = Vec::new();
    for (cols, k) in &wanted {
        for (i, r) in rows.iter().enumerate() {
            if !out.contains(&i) && normalized(r, cols).as_ref() == Some(k) {
                out.push(i);
            }
        }
    }
    out
}

/// An open transaction's uncommitted effect on the `tables` a SELECT reads,
/// as row deltas over committed state (deletes, then inserts), so the
/// transaction reads its own writes. Empty when it wrote none of them.
///
/// Each written table is replayed whole ([`replay`]) and diffed
/// against its committed rows: O(table size) per such read, the price of
/// reading inside a transaction that wrote to the table.
pub(crate) fn transaction_overlay(
    e: &Engine,
    s: &Session,
    tables: &[ladle_common::TableId],
) -> Result<Vec<ladle_common::TableDeltas>> {
    let mut out = Vec::new();
    for w in written_tables(e, s, tables)? {
        let deltas = row_diff(w.committed, w.replayed);
        if !deltas.is_empty() {
            out.push(ladle_common::TableDeltas {
                table: w.id,
                deltas,
            });
        }
    }
    Ok(out)
}

/// Like [`transaction_overlay`] for a REPEATABLE READ transaction: the
/// deltas turn `view` (its read view) into what the transaction reads. The
/// rows its writes touched (those its replay changes in the latest
/// committed state, by primary key; by whole row without one) read as the
/// transaction left them, the others as `view` has them, as InnoDB shows a
/// row a transaction updated in its own version and every other row in
/// the read view's.
pub(crate) fn snapshot_overlay(
    e: &Engine,
    s: &Session,
    tables: &[ladle_common::TableId],
    view: &ladle_storage::ReadView,
) -> Result<Vec<ladle_common::TableDeltas>> {
    let mut out = Vec::new();
    for WrittenTable {
        id: t,
        schema,
        committed,
        replayed,
        touched,
    } in written_tables(e, s, tables)?
    {
        let seen = view.scan(t)?;
        let desired = match &schema.primary_key {
            Some(pk) if !pk.is_empty() => {
                // A key the transaction wrote shows the transaction's own
                // version of its row (or none, if it ends up deleted), as
                // InnoDB's read view sees its own changes; every other key
                // the snapshot's.
                let key = |r: &Row| -> Vec<Value> {
                    pk.iter()
                        .map(|&c| r[c].key_normalized(schema.columns[c].collation))
                        .collect()
                };
                let touched: std::collections::HashSet<Vec<Value>> =
                    touched.iter().map(key).collect();
                let mut rows: Vec<Row> = seen
                    .iter()
                    .filter(|r| !touched.contains(&key(r)))
                    .cloned()
                    .collect();
                rows.extend(replayed.into_iter().filter(|r| touched.contains(&key(r))));
                rows
            }
            _ => {
                // No key to follow a row by: apply the change to the rows
                // the view has (a delete of a row it lacks is a no-op).
                let mut rows = seen.clone();
                for d in row_diff(committed, replayed) {
                    match d {
                        ladle_common::RowDelta::Delete(r) => {
                            if let Some(i) = rows.iter().position(|x| *x == r) {
                                rows.swap_remove(i);
                            }
                        }
                        ladle_common::RowDelta::Insert(r) => rows.push(r),
                    }
                }
                rows
            }
        };
        let deltas = row_diff(seen, desired);
        if !deltas.is_empty() {
            out.push(ladle_common::TableDeltas { table: t, deltas });
        }
    }
    Ok(out)
}

/// A table the open transaction wrote.
struct WrittenTable {
    id: ladle_common::TableId,
    schema: Arc<TableSchema>,
    /// Its latest committed rows.
    committed: Vec<Row>,
    /// Those rows with the transaction's ops replayed.
    replayed: Vec<Row>,
    /// Every row the ops wrote or removed on the way (see
    /// [`replay_noting`]).
    touched: Vec<Row>,
}

/// The `tables` the open transaction wrote.
fn written_tables(
    e: &Engine,
    s: &Session,
    tables: &[ladle_common::TableId],
) -> Result<Vec<WrittenTable>> {
    let Some(tx) = s.transaction.as_ref().filter(|t| !t.ops.is_empty()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for &t in tables {
        let written = tx.ops.iter().any(|op| match op {
            WriteOp::Insert { table, .. }
            | WriteOp::Update { table, .. }
            | WriteOp::Delete { table, .. } => *table == t,
        });
        let Some(schema) = written.then(|| e.storage.table_by_id(t)).flatten() else {
            continue;
        };
        let committed = e.storage.scan(t)?;
        let mut touched = Vec::new();
        let replayed = replay_noting(tx, &schema, committed.clone(), &mut touched)?;
        out.push(WrittenTable {
            id: t,
            schema,
            committed,
            replayed,
            touched,
        });
    }
    Ok(out)
}

/// The row deltas (deletes, then inserts) that turn the multiset `base`
/// into `desired`; a row in both cancels out.
fn row_diff(base: Vec<Row>, desired: Vec<Row>) -> Vec<ladle_common::RowDelta> {
    let mut count: HashMap<Row, i64> = HashMap::new();
    for r in desired {
        *count.entry(r).or_default() += 1;
    }
    for r in base {
        *count.entry(r).or_default() -= 1;
    }
    let mut deltas = Vec::new();
    for (r, n) in &count {
        for _ in 0..(-n).max(0) {
            deltas.push(ladle_common::RowDelta::Delete(r.clone()));
        }
    }
    for (r, n) in count {
        for _ in 0..n.max(0) {
            deltas.push(ladle_common::RowDelta::Insert(r.clone()));
        }
    }
    deltas
}

/// Evaluates the uncorrelated subqueries of an UPDATE/DELETE expression
/// once, before any row is visited (as MySQL does), and puts their values in
/// their place: a scalar subquery becomes its value (NULL for no row, 1242
/// for several), `x [NOT] IN (subquery)` a list of values, `[NOT] EXISTS` a
/// boolean. A correlated subquery does not plan on its own and is refused.
fn inline_subqueries(e: &Engine, s: &mut Session, expr: &mut Expr) -> Result<()> {
    use std::ops::ControlFlow;
    let mut failure = None;
    let _ = ast::visit_expressions_mut(expr, |x| {
        let replaced = match x {
            Expr::Subquery(q) => subquery_rows(e, s, q).and_then(|rows| match rows.len() {
                0 => Ok(Expr::Value(ast::Value::Null)),
                1 => one_column(&rows[0]).map(ladle_dataflow::value_expr),
                _ => Err(DataflowError::SubqueryRows.into()),
            }),
            Expr::InSubquery {
                expr: lhs,
                subquery,
                negated,
            } => subquery_rows(e, s, subquery).and_then(|rows| {
                if rows.is_empty() {
                    // `x IN (empty)` is false and NOT IN true, even for NULL x.
                    return Ok(Expr::Value(ast::Value::Boolean(*negated)));
                }
                let list = rows
                    .iter()
                    .map(|r| one_column(r).map(ladle_dataflow::value_expr))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Expr::InList {
                    expr: lhs.clone(),
                    list,
                    negated: *negated,
                })
            }),
            Expr::Exists { subquery, negated } => subquery_rows(e, s, subquery)
                .map(|rows| Expr::Value(ast::Value::Boolean(rows.is_empty() == *negated))),
            _ => return ControlFlow::Continue(()),
        };
        match replaced {
            Ok(v) => {
                *x = v;
                ControlFlow::Continue(())
            }
            Err(err) => {
                failure = Some(err);
                ControlFlow::Break(())
            }
        }
    });
    match failure {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

fn subquery_rows(e: &Engine, s: &mut Session, q: &ast::Query) -> Result<Vec<Row>> {
    match e.select_for_write(s, q) {
        Ok(Output::Rows { rows, .. }) => Ok(rows.into_vec()),
        Ok(_) => Err(ShimError::Unsupported(
            "this subquery in UPDATE/DELETE".into(),
        )),
        // Columns of the updated table: a correlated subquery.
        Err(ShimError::Dataflow(DataflowError::UnknownColumn(..))) => Err(ShimError::Unsupported(
            "correlated subquery in UPDATE/DELETE".into(),
        )),
        Err(err) => Err(err),
    }
}

fn one_column(row: &Row) -> Result<&Value> {
    match row.as_slice() {
        [v] => Ok(v),
        _ => Err(ShimError::Wire(WireError {
            code: ER_OPERAND_COLUMNS,
            message: "Operand should contain 1 column(s)".into(),
        })),
    }
}

fn single_table(t: &ast::TableWithJoins) -> Result<&ast::ObjectName> {
    if !t.joins.is_empty() {
        return Err(ShimError::Unsupported("multi-table UPDATE/DELETE".into()));
    }
    match &t.relation {
        TableFactor::Table { name, .. } => Ok(name),
        _ => Err(ShimError::Unsupported(
            "UPDATE/DELETE of a derived table".into(),
        )),
    }
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
struct UpdateNotes {
    /// Rows the statement changed so far (the "at row" of a note).
    rows_seen: usize,
    /// (column, row number) of each value rounded or cut.
    found: Vec<(String, usize)>,
}

pub fn update(
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
    let schema = table(e, s, single_table(&target)?)?;
    let mut assignments = assignments;
    let mut selection = selection;
    for a in &mut assignments {
        inline_subqueries(e, s, &mut a.value)?;
    }
    if let Some(w) = &mut selection {
        inline_subqueries(e, s, w)?;
    }
    let compiled = compile_assignments(&schema, &assignments)?;
    let pred = selection
        .as_ref()
        .map(|w| compile_row_expr(w, Some(&schema)))
        .transpose()?;
    let scan = scan_spec(&schema, selection.as_ref());
    let assigned: Vec<usize> = compiled.iter().map(|(p, _)| *p).collect();
    let on_update: Vec<usize> = schema
        .columns
        .iter()
        .enumerate()
        .filter(|(i, c)| c.on_update_current_timestamp && !assigned.contains(i))
        .map(|(i, _)| i)
        .collect();
    let now = crate::ddl::current_timestamp();
    let chosen = choose_rows(e, s, &schema, &scan, pred.as_ref(), order_by, limit)?;
    // With ORDER BY the rows are changed, and their keys checked, in its
    // order, as InnoDB does (`SET id = id + 1 ORDER BY id DESC` shifts
    // keys without colliding).
    let scan = match (&chosen, &schema.primary_key) {
        (Some(c), Some(pk)) if !order_by.is_empty() && !pk.is_empty() => {
            ScanSpec::Keys(c.ordered.clone())
        }
        _ => scan,
    };
    let in_scan_order = matches!(scan, ScanSpec::Keys(_));
    let chosen = chosen.map(|c| c.set);
    let ident_cols = identity_columns(&schema);
    let checks = e.checks.for_table(&e.storage, &schema)?;
    let checked_schema = schema.clone();
    let strict = !ignore && crate::vars::strict_mode(s);
    // Assigned values a Note reports (a DECIMAL rounded, spaces cut), as
    // (column, row number among the rows the statement changes).
    let notes: Arc<parking_lot::Mutex<UpdateNotes>> = Arc::default();
    let noted = notes.clone();
    let updater: RowUpdater = Arc::new(move |row: &Row| {
        if let Some(p) = &pred {
            if !p.eval_predicate(row).map_err(expr_err)? {
                return Ok(None);
            }
        }
        if let Some(set) = &chosen {
            if !set.contains(&identity(row, &ident_cols)) {
                return Ok(None);
            }
        }
        let mut new = row.clone();
        for (pos, x) in &compiled {
            let v = x.eval(&new).map_err(expr_err)?;
            *slot(&mut new, *pos)? = v;
        }
        if new != *row {
            for &p in &on_update {
                *slot(&mut new, p)? = now.clone();
            }
        }
        checks.fill_generated(&checked_schema, &mut new)?;
        checks.verify_uncoerced(&checked_schema, &new)?;
        if strict {
            refuse_empty_enum(&checked_schema, &new, Some(row))?;
        }
        let mut noted = noted.lock();
        noted.rows_seen += 1;
        for (pos, _) in &compiled {
            if let (Some(v), Some(c)) = (new.get(*pos), checked_schema.columns.get(*pos)) {
                if ladle_common::truncation_note(v, c) {
                    let at_row = noted.rows_seen;
                    noted.found.push((c.name.clone(), at_row));
                }
            }
        }
        Ok(Some(new))
    });
    // IGNORE, and non-strict `sql_mode` (''), adjust values that do not
    // fit with a warning; only IGNORE also skips rows that would collide.
    let lenient = ignore || !crate::vars::strict_mode(s);
    let updater = if lenient {
        use crate::update_ignore::{adjust_values, skip_duplicates, KeyHolders};
        let visited = candidate_rows(e, s, &schema, &scan)?;
        let (updater, warnings) = adjust_values(&schema, &visited, updater)?;
        for (code, message) in warnings {
            s.add_warning("Warning", code, message);
        }
        let lookup = |index: IndexRef, key: &[Value]| -> Result<Vec<Row>> {
            Ok(e.storage.lookup(schema.id, index, key)?)
        };
        if !ignore {
            updater
        } else if transaction_wrote(s, schema.id) {
            let table = candidate_rows(e, s, &schema, &ScanSpec::Full)?;
            skip_duplicates(&schema, KeyHolders::Rows(&table), visited, updater)?
        } else {
            skip_duplicates(&schema, KeyHolders::Lookup(&lookup), visited, updater)?
        }
    } else {
        updater
    };
    let mut counts = RowCounts::default();
    let keyed = crate::foreign_keys::involved(e, &schema)?;
    let mut changes = Vec::new();
    if s.in_transaction() || keyed {
        for row in candidate_rows(e, s, &schema, &scan)? {
            // Strictly (the write will be), unless IGNORE or a non-strict
            // sql_mode adjusts it.
            let updated = updater(&row)
                .map_err(ShimError::from)
                .and_then(|new| match new {
                    Some(new) if lenient => Ok(Some(coerce_lenient(&schema, &new))),
                    Some(new) => coerce_row_strict(&schema, &new, Some(&row)).map(Some),
                    None => Ok(None),
                });
            let new = match updated {
                Ok(new) => new,
                // The rows before this one were changed first (InnoDB
                // goes row by row): their own failure comes first.
                Err(err) => {
                    let changed = (changes.as_slice(), in_scan_order);
                    return Err(first_update_error(e, s, &schema, changed, keyed, err)?);
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
    }
    if s.in_transaction() {
        for (_, new) in &changes {
            if let Some(new) = new {
                ladle_storage::check_not_null(&schema, new, true)?;
            }
        }
    }
    // Outside a transaction storage finds a duplicate itself, but the
    // FOREIGN KEY checks below run first, so a keyed table's is found here.
    if s.in_transaction() || keyed {
        if let Some(duplicate) = first_duplicate(e, s, &schema, &changes, in_scan_order)? {
            return Err(duplicate.error(e, s, &schema, keyed));
        }
    }
    let mut cascades = Vec::new();
    if keyed {
        let new_rows: Vec<Row> = changes.iter().filter_map(|(_, n)| n.clone()).collect();
        crate::foreign_keys::check_child_rows(e, s, &schema, &new_rows)?;
        cascades = crate::foreign_keys::parent_effects(e, s, &schema, &changes)?;
    }
    // The rows were visited above (the write, or COMMIT, visits them
    // again): the notes are those of that visit; else of the write's.
    let visited = s.in_transaction() || keyed;
    let early = std::mem::take(&mut *notes.lock()).found;
    let (out, _) = submit_with(
        e,
        s,
        WriteOp::Update {
            table: schema.id,
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

pub fn delete(e: &Engine, s: &mut Session, mut d: ast::Delete) -> Result<Output> {
    if let Some(single) = multi_table_delete(e, s, &d)? {
        d = single;
    }
    let returning_items = d.returning.take();
    if let Some(w) = &mut d.selection {
        inline_subqueries(e, s, w)?;
    }
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    if from.len() != 1 || !d.tables.is_empty() || d.using.is_some() {
        return Err(ShimError::Unsupported("multi-table DELETE".into()));
    }
    let schema = table(e, s, single_table(&from[0])?)?;
    let returning = returning_items
        .map(|items| crate::returning::Returning::compile(&schema, &items))
        .transpose()?;
    let limit = match &d.limit {
        None => None,
        Some(x) => match e.eval_constant(s, x)?.as_i64() {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Err(ShimError::WrongArguments("LIMIT".into())),
        },
    };
    let pred = d
        .selection
        .as_ref()
        .map(|w| compile_row_expr(w, Some(&schema)))
        .transpose()?;
    let scan = scan_spec(&schema, d.selection.as_ref());
    let chosen =
        choose_rows(e, s, &schema, &scan, pred.as_ref(), &d.order_by, limit)?.map(|c| c.set);
    let ident_cols = identity_columns(&schema);
    let filter: RowFilter = Arc::new(move |row: &Row| {
        if let Some(p) = &pred {
            if !p.eval_predicate(row).map_err(expr_err)? {
                return Ok(false);
            }
        }
        if let Some(set) = &chosen {
            return Ok(set.contains(&identity(row, &ident_cols)));
        }
        Ok(true)
    });
    let mut deleted = 0;
    let keyed = crate::foreign_keys::involved(e, &schema)?;
    let mut gone = Vec::new();
    let mut returned_rows = Vec::new();
    if s.in_transaction() || keyed || returning.is_some() {
        for row in candidate_rows(e, s, &schema, &scan)? {
            if filter(&row)? {
                deleted += 1;
                if returning.is_some() {
                    returned_rows.push(row.clone());
                }
                if keyed {
                    gone.push((row, None));
                }
            }
        }
    }
    // Outside a transaction the write deletes only the rows listed (as
    // they were read): a row another connection changes in between is
    // kept, though listed, as Ladle takes no row lock to prevent that.
    let filter: RowFilter = match &returning {
        Some(_) if !s.in_transaction() => {
            let listed: std::collections::HashSet<Row> = returned_rows.iter().cloned().collect();
            Arc::new(move |row: &Row| Ok(listed.contains(row) && filter(row)?))
        }
        _ => filter,
    };
    let cascades = crate::foreign_keys::parent_effects(e, s, &schema, &gone)?;
    let (out, _) = submit_with(
        e,
        s,
        WriteOp::Delete {
            table: schema.id,
            scan,
            filter,
        },
        cascades,
        RowCounts::both(deleted),
    )?;
    match returning {
        Some(r) => r.output(&returned_rows),
        None => Ok(out),
    }
}

/// `DELETE t FROM t JOIN u ON ... WHERE ...` (one target; Django's form
/// for a delete through a relation) as `DELETE FROM t WHERE pk IN (SELECT
/// t.pk FROM t JOIN u ON ... WHERE ...)`, whose subquery runs first, as any
/// uncorrelated subquery in a DELETE. `None` for a single-table DELETE.
/// Several targets, a target without a one-column primary key, and USING
/// are refused (1235).
fn multi_table_delete(e: &Engine, s: &Session, d: &ast::Delete) -> Result<Option<ast::Delete>> {
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let joined = from.len() > 1 || from.iter().any(|t| !t.joins.is_empty());
    if d.tables.is_empty() && d.using.is_none() && !joined {
        return Ok(None);
    }
    let unsupported =
        |what: &str| Err(ShimError::Unsupported(format!("multi-table DELETE {what}")));
    let target = match d.tables.as_slice() {
        [t] if d.using.is_none() && d.returning.is_none() && d.limit.is_none() => t,
        [_] => return unsupported("with USING, RETURNING or LIMIT"),
        _ => return unsupported("of several tables"),
    };
    let target_name = target
        .0
        .last()
        .map(|i| i.value.as_str())
        .unwrap_or_default();
    // The target is named by its alias in FROM, or by its table name.
    let factors = from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)));
    let mut found = None;
    for f in factors {
        if let TableFactor::Table { name, alias, .. } = f {
            let shown = match alias {
                Some(a) => a.name.value.as_str(),
                None => name.0.last().map(|i| i.value.as_str()).unwrap_or_default(),
            };
            if shown.eq_ignore_ascii_case(target_name) {
                found = Some((name.clone(), shown.to_string()));
                break;
            }
        }
    }
    let Some((name, shown)) = found else {
        return Err(ShimError::UnknownTable {
            database: s.database.clone().unwrap_or_default(),
            table: target_name.to_string(),
        });
    };
    let schema = table(e, s, &name)?;
    let pk = match schema.primary_key.as_deref() {
        Some([c]) => schema.columns[*c].name.clone(),
        _ => return unsupported("of a table without a one-column primary key"),
    };
    let key = |q: &str| Expr::CompoundIdentifier(vec![ast::Ident::new(q), ast::Ident::new(&pk)]);
    let tables: Vec<String> = from.iter().map(|t| t.to_string()).collect();
    let select_text = format!("SELECT {} FROM {}", key(&shown), tables.join(", "));
    let mut select = match sqlparser::parser::Parser::parse_sql(
        &sqlparser::dialect::MySqlDialect {},
        &select_text,
    )
    .ok()
    .and_then(|mut v| v.pop())
    {
        Some(ast::Statement::Query(q)) => *q,
        _ => return unsupported("of this FROM clause"),
    };
    if let ast::SetExpr::Select(sel) = &mut *select.body {
        sel.selection = d.selection.clone();
    }
    let mut single = d.clone();
    single.tables = vec![];
    single.from = ast::FromTable::WithFromKeyword(vec![ast::TableWithJoins {
        relation: TableFactor::Table {
            name: name.clone(),
            alias: None,
            args: None,
            with_hints: vec![],
            version: None,
            with_ordinality: false,
            partitions: vec![],
        },
        joins: vec![],
    }]);
    single.selection = Some(Expr::InSubquery {
        expr: Box::new(key(&schema.name)),
        subquery: Box::new(select),
        negated: false,
    });
    Ok(Some(single))
}

/// TRUNCATE TABLE: every row deleted and AUTO_INCREMENT restarted, as in
/// MySQL. It is DDL there (never part of a transaction; the caller commits
/// an open one first), so it writes directly.
pub fn truncate(e: &Engine, s: &mut Session, name: &ast::ObjectName) -> Result<u64> {
    let schema = table(e, s, name)?;
    crate::foreign_keys::check_parent_removable(e, s, &schema, true)?;
    let filter: RowFilter = Arc::new(|_| Ok(true));
    let res = e.storage.write(vec![WriteOp::Delete {
        table: schema.id,
        scan: ScanSpec::Full,
        filter,
    }])?;
    s.wrote(res.lsn);
    e.storage.reset_auto_increment(schema.id)?;
    Ok(res
        .ops
        .into_iter()
        .next()
        .map(|r| r.affected_rows)
        .unwrap_or(0))
}

/// INSERT IGNORE stores what MySQL's non-strict mode would, with a warning
/// each, instead of failing: numbers clamped to the column's range (1264),
/// strings cut to its length or to their numeric prefix (1265), non-numbers
/// as 0 (1366), NULL in a NOT NULL column as the type's implicit default
/// (1048). Values with no such adjustment are left for the write to refuse.
/// Without `nulls`, a NULL for a NOT NULL column is left for the write to
/// refuse.
fn adjust_ignored_values(s: &mut Session, schema: &TableSchema, rows: &mut [Row], nulls: bool) {
    for (i, row) in rows.iter_mut().enumerate() {
        for (code, message) in adjust_ignored_row(schema, row, None, i + 1, nulls) {
            s.add_warning("Warning", code, message);
        }
    }
}

/// One row of [`adjust_ignored_values`] (row number `at_row` in the
/// warnings): the warnings (code, message) its adjustments raise. `old`:
/// the row an UPDATE changes (a value it keeps raises no warning).
pub(crate) fn adjust_ignored_row(
    schema: &TableSchema,
    row: &mut Row,
    old: Option<&Row>,
    at_row: usize,
    nulls: bool,
) -> Vec<(u16, String)> {
    let mut warnings = Vec::new();
    for (i, (v, col)) in row.iter_mut().zip(&schema.columns).enumerate() {
        // '' for an ENUM is its empty value, stored with "Data truncated".
        if empty_enum_check(v, col, old.and_then(|o| o.get(i))).is_err() {
            warnings.push((
                1265,
                format!("Data truncated for column '{}' at row {at_row}", col.name),
            ));
            continue;
        }
        if v.is_null() {
            if nulls && !col.nullable && !col.auto_increment {
                if let Some(implicit) = implicit_default(&col.ty) {
                    warnings.push((1048, format!("Column '{}' cannot be null", col.name)));
                    *v = implicit;
                }
            }
            continue;
        }
        let Ok((adjusted, Some(how))) = ladle_common::coerce_adjusting(v, col) else {
            continue;
        };
        let (code, message) = match how {
            Adjustment::Clamped => (
                1264,
                format!(
                    "Out of range value for column '{}' at row {at_row}",
                    col.name
                ),
            ),
            Adjustment::Truncated => (
                1265,
                format!("Data truncated for column '{}' at row {at_row}", col.name),
            ),
            Adjustment::Replaced => (
                1366,
                format!(
                    "Incorrect string value for column `{}`.`{}`.`{}` at row {at_row}",
                    schema.database, schema.name, col.name
                ),
            ),
            Adjustment::Zeroed => (
                1366,
                format!(
                    "Incorrect {} value: '{v}' for column `{}`.`{}`.`{}` at row {at_row}",
                    incorrect_kind(&col.ty),
                    schema.database,
                    schema.name,
                    col.name
                ),
            ),
        };
        warnings.push((code, message));
        *v = adjusted;
    }
    warnings
}

/// The value a NOT NULL column takes for NULL in non-strict mode (a
/// TIMESTAMP's, which depends on explicit_defaults_for_timestamp, is left
/// out: the write refuses the NULL).
fn implicit_default(ty: &SqlType) -> Option<Value> {
    match ty {
        SqlType::Int { .. } | SqlType::Year => Some(Value::Int(0)),
        SqlType::Float | SqlType::Double => Some(Value::Double(0.0)),
        SqlType::Decimal { .. } => Some(Value::Decimal(rust_decimal::Decimal::ZERO)),
        SqlType::Char(_) | SqlType::VarChar(_) | SqlType::Text(_) | SqlType::Json => {
            Some(Value::text(""))
        }
        SqlType::Binary(_) | SqlType::VarBinary(_) | SqlType::Blob(_) => Some(Value::bytes(b"")),
        SqlType::Date => Some(Value::zero_date()),
        SqlType::DateTime { .. } => Some(Value::zero_datetime()),
        SqlType::Time { .. } => Some(Value::Time(0)),
        SqlType::Enum(labels) => labels.first().map(Value::text),
        _ => None,
    }
}

/// How MySQL names a numeric type in "Incorrect ... value".
fn incorrect_kind(ty: &SqlType) -> &'static str {
    match ty {
        SqlType::Int { .. } => "integer",
        SqlType::Decimal { .. } => "decimal",
        _ => "double",
    }
}

/// `INSERT [IGNORE] [INTO] t SET a = x, b = y [ON DUPLICATE KEY UPDATE ...]`
/// (which the SQL parser does not accept) as the equivalent
/// `INSERT ... (a, b) VALUES (x, y) ...`; `None` for any other statement.
pub fn rewrite_insert_set(t: &[Token]) -> Option<String> {
    use crate::exec::word;
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

/// Tokens (without whitespace) as SQL text again.
pub fn render_tokens(toks: &[Token]) -> String {
    toks.iter().map(render_token).collect::<Vec<_>>().join(" ")
}

/// `UPDATE [LOW_PRIORITY] [IGNORE] ...` without its modifiers, and whether
/// IGNORE was among them (LOW_PRIORITY means nothing without table locks).
pub fn strip_update_modifiers(t: &[Token]) -> (std::borrow::Cow<'_, [Token]>, bool) {
    use crate::exec::word;
    let mut end = 1;
    let mut ignore = false;
    while let Some(w) = word(t, end) {
        match w.as_str() {
            "LOW_PRIORITY" => {}
            "IGNORE" => ignore = true,
            _ => break,
        }
        end += 1;
    }
    if end == 1 {
        return (std::borrow::Cow::Borrowed(t), false);
    }
    let mut kept = vec![t[0].clone()];
    kept.extend_from_slice(&t[end..]);
    (std::borrow::Cow::Owned(kept), ignore)
}

fn render_token(t: &Token) -> String {
    match t {
        Token::SingleQuotedString(s) => crate::params::quote(s),
        other => other.to_string(),
    }
}

/// The columns identifying a row: the primary key, or every column.
fn identity_columns(schema: &TableSchema) -> Vec<usize> {
    match &schema.primary_key {
        Some(pk) => pk.clone(),
        None => (0..schema.columns.len()).collect(),
    }
}

fn identity(row: &Row, cols: &[usize]) -> Vec<Value> {
    cols.iter()
        .map(|&c| row.get(c).cloned().unwrap_or(Value::Null))
        .collect()
}

/// UPDATE/DELETE ... [ORDER BY ...] LIMIT n: the identities of the rows to
/// touch, chosen from committed state (matching rows, sorted, first n).
/// `None` when there is no ORDER BY and no LIMIT (every matching row).
fn choose_rows(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    scan: &ScanSpec,
    pred: Option<&RowExpr>,
    order_by: &[ast::OrderByExpr],
    limit: Option<u64>,
) -> Result<Option<ChosenRows>> {
    if order_by.is_empty() && limit.is_none() {
        return Ok(None);
    }
    let keys: Vec<(RowExpr, bool)> = order_by
        .iter()
        .map(|o| {
            Ok((
                compile_row_expr(&o.expr, Some(schema))?,
                o.asc == Some(false),
            ))
        })
        .collect::<Result<_>>()?;
    let rows = candidate_rows(e, s, schema, scan)?;
    let mut keyed: Vec<(Vec<Value>, Row)> = Vec::new();
    for r in rows {
        if let Some(p) = pred {
            if !p.eval_predicate(&r)? {
                continue;
            }
        }
        let k = keys
            .iter()
            .map(|(x, _)| x.eval(&r))
            .collect::<Result<Vec<_>, _>>()?;
        keyed.push((k, r));
    }
    keyed.sort_by(|a, b| {
        for (i, (_, desc)) in keys.iter().enumerate() {
            let o = a.0[i].cmp_collated(&b.0[i], Collation::GeneralCi);
            let o = if *desc { o.reverse() } else { o };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    let n = limit.map_or(keyed.len(), |l| usize::try_from(l).unwrap_or(usize::MAX));
    let cols = identity_columns(schema);
    let ordered: Vec<Vec<Value>> = keyed
        .into_iter()
        .take(n)
        .map(|(_, r)| identity(&r, &cols))
        .collect();
    Ok(Some(ChosenRows {
        set: ordered.iter().cloned().collect(),
        ordered,
    }))
}

/// The rows an UPDATE/DELETE with ORDER BY or LIMIT changes, by identity
/// (see [`identity_columns`]).
struct ChosenRows {
    set: std::collections::HashSet<Vec<Value>>,
    /// In ORDER BY order.
    ordered: Vec<Vec<Value>>,
}

/// Splits `UPDATE ... [ORDER BY ...] [LIMIT n]` (which the SQL parser does
/// not accept) into the plain UPDATE text, the ORDER BY text and the LIMIT
/// text; `None` when the statement has neither clause.
pub fn split_update_order_limit(t: &[Token]) -> Option<(String, Option<String>, Option<String>)> {
    use crate::exec::word;
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

/// Splits a statement at its top-level `RETURNING` (MariaDB's, the last
/// clause) into the text before it and the list after it; `None` without
/// one.
pub fn split_returning(t: &[Token]) -> Option<(String, String)> {
    let mut depth = 0usize;
    let at = (0..t.len()).find(|&i| {
        match &t[i] {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth == 0 && crate::exec::word(t, i).as_deref() == Some("RETURNING")
    })?;
    let end = t.len() - usize::from(matches!(t.last(), Some(Token::SemiColon)));
    Some((
        render_tokens(&t[..at]),
        render_tokens(&t[at + 1..end.max(at + 1)]),
    ))
}

/// Picks the index whose leading columns the WHERE clause pins with
/// equalities to constants; `Full` when none does.
pub fn scan_spec(schema: &TableSchema, selection: Option<&Expr>) -> ScanSpec {
    let mut eq: HashMap<usize, Value> = HashMap::new();
    if let Some(w) = selection {
        collect_equalities(schema, w, &mut eq);
    }
    if eq.is_empty() {
        return ScanSpec::Full;
    }
    let mut best: Option<(usize, IndexRef, Vec<usize>)> = None;
    let mut consider = |index: IndexRef, cols: &[usize]| {
        let n = cols.iter().take_while(|c| eq.contains_key(c)).count();
        if n > 0 && !matches!(&best, Some((b, _, _)) if n <= *b) {
            best = Some((n, index, cols[..n].to_vec()));
        }
    };
    if let Some(pk) = &schema.primary_key {
        consider(IndexRef::Primary, pk);
    }
    for idx in &schema.indexes {
        consider(IndexRef::Secondary(idx.id), &idx.columns);
    }
    match best {
        Some((_, index, cols)) => ScanSpec::Prefix {
            index,
            key: cols.iter().map(|c| eq[c].clone()).collect(),
        },
        None => ScanSpec::Full,
    }
}

fn collect_equalities(schema: &TableSchema, w: &Expr, eq: &mut HashMap<usize, Value>) {
    match w {
        Expr::Nested(x) => collect_equalities(schema, x, eq),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            collect_equalities(schema, left, eq);
            collect_equalities(schema, right, eq);
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            let (col, val) = match (column_of(schema, left), constant(right)) {
                (Some(c), Some(v)) => (c, v),
                _ => match (column_of(schema, right), constant(left)) {
                    (Some(c), Some(v)) => (c, v),
                    _ => return,
                },
            };
            let c = &schema.columns[col];
            let text_ci = c.ty.is_text() && c.collation == Collation::GeneralCi;
            if !val.is_null() && !text_ci {
                eq.entry(col).or_insert(val);
            }
        }
        _ => {}
    }
}

fn column_of(schema: &TableSchema, e: &Expr) -> Option<usize> {
    match e {
        Expr::Identifier(i) => schema.column_index(&i.value),
        Expr::CompoundIdentifier(ids) => schema.column_index(&ids.last()?.value),
        Expr::Nested(x) => column_of(schema, x),
        _ => None,
    }
}

/// The value of an expression that refers to no column, evaluated as the
/// view engine does.
fn constant(e: &Expr) -> Option<Value> {
    ladle_dataflow::compile_row_expr(e, None)
        .ok()?
        .eval(&Vec::new())
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladle_common::{ColumnSchema, IndexSchema, SqlType};
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn schema() -> TableSchema {
        TableSchema {
            id: 1,
            database: "d".into(),
            name: "t".into(),
            columns: vec![
                ColumnSchema::new(
                    "a",
                    SqlType::Int {
                        bytes: 4,
                        unsigned: false,
                        display_width: None,
                    },
                ),
                ColumnSchema::new(
                    "b",
                    SqlType::Int {
                        bytes: 4,
                        unsigned: false,
                        display_width: None,
                    },
                ),
                ColumnSchema::new("name", SqlType::VarChar(10)),
            ],
            primary_key: Some(vec![0, 1]),
            indexes: vec![IndexSchema {
                id: 7,
                name: "by_b".into(),
                columns: vec![1],
                unique: false,
            }],
            version: 0,
        }
    }

    fn spec(where_sql: &str) -> ScanSpec {
        let e = Parser::new(&MySqlDialect {})
            .try_with_sql(where_sql)
            .unwrap()
            .parse_expr()
            .unwrap();
        scan_spec(&schema(), Some(&e))
    }

    #[test]
    fn insert_set_becomes_insert_values() {
        let t = crate::exec::tokens("INSERT IGNORE INTO d.t SET a = 1, b = CONCAT('x''y', (2)) ON DUPLICATE KEY UPDATE a = 2").unwrap();
        let sql = rewrite_insert_set(&t).unwrap();
        assert_eq!(sql, "INSERT IGNORE INTO d . t (a, b) VALUES (1, CONCAT ( 'x''y' , ( 2 ) )) ON DUPLICATE KEY UPDATE a = 2");
        assert!(Parser::parse_sql(&MySqlDialect {}, &sql).is_ok());
        let t = crate::exec::tokens("INSERT INTO t VALUES (1)").unwrap();
        assert!(rewrite_insert_set(&t).is_none());
    }

    #[test]
    fn equalities_on_a_key_prefix_use_the_index() {
        match spec("a = 1 AND b = -2 AND name = 'x'") {
            ScanSpec::Prefix {
                index: IndexRef::Primary,
                key,
            } => assert_eq!(key, vec![Value::Int(1), Value::Int(-2)]),
            other => panic!("{other:?}"),
        }
        match spec("(b = 3) AND a > 1") {
            ScanSpec::Prefix {
                index: IndexRef::Secondary(7),
                key,
            } => assert_eq!(key, vec![Value::Int(3)]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(spec("a = 1 OR b = 2"), ScanSpec::Full));
        assert!(matches!(spec("name = 'x'"), ScanSpec::Full));
    }
}
