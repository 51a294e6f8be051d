//! What INSERT, UPDATE and DELETE share: resolving the table and its
//! columns, evaluating given values and subqueries, submitting a
//! statement's writes (or buffering them in its transaction), choosing the
//! rows a WHERE / ORDER BY / LIMIT names and the scan that reads them, and
//! the IGNORE adjustments of values.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Adjustment, Collation, Row, SqlType, TableId, TableSchema, Value};
use ladle_dataflow::{compile_row_expr, DataflowError, RowExpr};
use ladle_storage::{IndexRef, ScanSpec, StorageError, ValueMisfit, WriteOp};
use sqlparser::ast::{self, AssignmentTarget, BinaryOperator, Expr, TableFactor};

use super::overlay::candidate_rows;
use crate::error::{Result, ShimError, WireError, ER_DUP_ENTRY, ER_OPERAND_COLUMNS};
use crate::exec::Engine;
use crate::output::{Info, Output};
use crate::session::Session;

/// The cell at `pos`, or an internal error (never a panic inside a
/// storage commit) if the row is shorter than its schema.
pub(super) fn slot(row: &mut Row, pos: usize) -> Result<&mut Value, StorageError> {
    let len = row.len();
    row.get_mut(pos)
        .ok_or_else(|| StorageError::Internal(format!("row of {len} values has no column {pos}")))
}

pub(super) fn expr_err(e: DataflowError) -> StorageError {
    match e {
        DataflowError::Storage(s) => s,
        DataflowError::Interrupted { timeout: false } => StorageError::Interrupted,
        DataflowError::OutOfRange(m) => StorageError::OutOfRange(m),
        other => StorageError::Expression(other.to_string()),
    }
}

/// The table a DML statement writes. Inside a transaction the table is
/// held first (see [`crate::metadata_locks`]), so the schema returned is
/// the one its buffered ops will commit against.
pub(super) fn table(
    e: &Engine,
    s: &mut Session,
    name: &ast::ObjectName,
) -> Result<Arc<TableSchema>> {
    let schema = lookup_table(e, s, name)?;
    if !s.in_transaction() {
        return Ok(schema);
    }
    hold_for_transaction(e, s, schema.id)?;
    lookup_table(e, s, name)
}

/// The named table's schema now (nothing held).
pub(super) fn lookup_table(
    e: &Engine,
    s: &Session,
    name: &ast::ObjectName,
) -> Result<Arc<TableSchema>> {
    let (db, t) = e.resolve(s, name)?;
    e.storage.table(&db, &t).ok_or(ShimError::UnknownTable {
        database: db,
        table: t,
    })
}

/// Holds `table` for the session's open transaction (no-op outside one)
/// against schema changes until the transaction ends.
pub(crate) fn hold_for_transaction(e: &Engine, s: &mut Session, table: TableId) -> Result<()> {
    let timeout = crate::vars::lock_wait_timeout(s);
    let connection = s.connection_id;
    match &mut s.transaction {
        Some(tx) => e
            .metadata_locks
            .hold_shared(&mut tx.locks, connection, table, timeout),
        None => Ok(()),
    }
}

/// Buffers a statement's `ops` in the session's transaction. Each op's
/// table is held (see [`crate::metadata_locks`]) and must still have the
/// schema the op was built for: a schema change that committed before the
/// hold fails this statement (1412), not the transaction's COMMIT.
pub(super) fn buffer_in_transaction(
    e: &Engine,
    s: &mut Session,
    ops: impl IntoIterator<Item = WriteOp>,
) -> Result<()> {
    let ops: Vec<WriteOp> = ops.into_iter().collect();
    for op in &ops {
        let table = op.table();
        hold_for_transaction(e, s, table)?;
        let current = e.storage.table_by_id(table);
        if current.as_ref().map(|t| t.version) != Some(op.schema_version()) {
            let table = current.map_or_else(|| format!("#{table}"), |t| t.name.clone());
            return Err(StorageError::SchemaChanged { table }.into());
        }
    }
    e.lock_written_rows(s, &ops)?;
    if let Some(tx) = &mut s.transaction {
        tx.ops.extend(ops);
    }
    Ok(())
}

/// Whether two names as written (`db.t`, `t`, an alias) are the same,
/// part by part, in any case.
pub(super) fn same_name(a: &[ast::Ident], b: &[ast::Ident]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.value.eq_ignore_ascii_case(&y.value))
}

pub(super) fn column_pos(schema: &TableSchema, name: &str, place: &str) -> Result<usize> {
    schema
        .column_index(name)
        .ok_or_else(|| ShimError::UnknownColumn(name.to_string(), place.to_string()))
}

pub(super) fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// The value an INSERT gives column `pos`: a generated column takes none
/// (it is computed), and a value other than NULL for one is error 1906, a
/// warning under IGNORE or outside strict mode (a dump's INSERTs carry the
/// generated values, under the dump's non-strict sql_mode).
pub(super) fn given_value(
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
        if !ignore && crate::vars::strict_mode(s) {
            return Err(ShimError::Wire(err));
        }
        s.add_warning("Warning", err.code.errno, err.message);
    }
    Ok(None)
}

/// Evaluates an INSERT value (a constant expression).
pub(super) fn value_of(e: &Engine, s: &Session, x: &Expr) -> Result<Value> {
    e.eval_constant(s, x)
}

/// The row counts a statement reports. Inside a transaction they are
/// computed when the statement runs, over the table as the transaction
/// sees it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RowCounts {
    /// Rows changed (MySQL's affected rows).
    pub(super) affected: u64,
    /// Rows found (for clients that set CLIENT_FOUND_ROWS, as Django does
    /// to tell an unchanged row from a missing one).
    pub(super) found: u64,
}

impl RowCounts {
    pub(super) fn both(n: u64) -> RowCounts {
        RowCounts {
            affected: n,
            found: n,
        }
    }

    pub(super) fn plus(self, affected: u64, found: u64) -> RowCounts {
        RowCounts {
            affected: self.affected + affected,
            found: self.found + found,
        }
    }

    /// The count the session's client asked for.
    pub(super) fn reported(self, s: &Session) -> u64 {
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
/// Also returns the op's `OpResult::rows` (what an INSERT's RETURNING
/// listed; none inside a transaction).
pub(super) fn submit_with(
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
    if s.in_transaction() {
        buffer_in_transaction(e, s, std::iter::once(op).chain(cascades))?;
        let out = Output::Done {
            affected_rows: in_transaction.reported(s),
            last_insert_id: 0,
            info: info_in_transaction,
        };
        return Ok((out, Vec::new()));
    }
    let start = std::time::Instant::now();
    let mut ops = vec![interruptible(op)];
    ops.extend(cascades);
    let check = crate::foreign_keys::commit_check(e, s, &ops)?;
    // Rows another transaction holds stop the write: it waits for them and
    // the statement runs again (see `crate::row_locking`).
    let blocked = Arc::default();
    let check = e.row_lock_check(s, check, &blocked);
    let res = match e.storage.write_checked(ops, check) {
        Err(StorageError::RowLocked) => {
            e.wait_for_blocked(s, &blocked)?;
            return Err(crate::row_locking::rerun(s));
        }
        other => other?,
    };
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

/// `op`, whose row functions end the write with 1317 (nothing written)
/// once its statement is interrupted (KILL QUERY, the client gone), as
/// MariaDB's row loop notices a kill. They run inside the commit, maybe on
/// another statement's thread (group commit), so they watch the
/// statement's flag itself rather than the thread's.
fn interruptible(op: WriteOp) -> WriteOp {
    use std::sync::atomic::Ordering;
    let Some(flag) = ladle_dataflow::interrupt::flag() else {
        return op;
    };
    match op {
        WriteOp::Update {
            table,
            schema_version,
            scan,
            update,
        } => WriteOp::Update {
            table,
            schema_version,
            scan,
            update: Arc::new(move |row: &Row| {
                if flag.load(Ordering::Relaxed) {
                    return Err(StorageError::Interrupted);
                }
                update(row)
            }),
        },
        WriteOp::Delete {
            table,
            schema_version,
            scan,
            filter,
        } => WriteOp::Delete {
            table,
            schema_version,
            scan,
            filter: Arc::new(move |row: &Row| {
                if flag.load(Ordering::Relaxed) {
                    return Err(StorageError::Interrupted);
                }
                filter(row)
            }),
        },
        insert @ WriteOp::Insert { .. } => insert,
    }
}

/// Evaluates the uncorrelated subqueries of an UPDATE/DELETE expression
/// once, before any row is visited (as MySQL does), and puts their values in
/// their place: a scalar subquery becomes its value (NULL for no row, 1242
/// for several), `x [NOT] IN (subquery)` a list of values, `[NOT] EXISTS` a
/// boolean. A correlated subquery does not plan on its own: it is left in
/// place, for [`super::correlated`] (an INSERT refuses it). An IN
/// subquery with a LIMIT is MariaDB's 1235.
pub(super) fn inline_subqueries(e: &Engine, s: &mut Session, expr: &mut Expr) -> Result<()> {
    use std::ops::ControlFlow;
    let mut failure = None;
    let _ = ast::visit_expressions_mut(expr, |x| {
        let replaced = match x {
            Expr::Subquery(q) => subquery_rows(e, s, q).and_then(|rows| match rows.len() {
                0 => Ok(Expr::Value(ast::Value::Null)),
                1 => one_column(&rows[0]).map(ladle_dataflow::value_expr),
                _ => Err(DataflowError::SubqueryRows.into()),
            }),
            Expr::InSubquery { subquery, .. }
                if subquery.limit.is_some() || subquery.offset.is_some() =>
            {
                Err(ShimError::Unsupported(
                    "LIMIT & IN/ALL/ANY/SOME subquery".into(),
                ))
            }
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
            // Reads the statement's row: left for the per-row SELECT.
            Err(ShimError::Dataflow(DataflowError::UnknownColumn(..))) => ControlFlow::Continue(()),
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

/// Whether `x` holds a subquery (scalar, IN or EXISTS).
pub(super) fn has_subquery(x: &Expr) -> bool {
    ast::visit_expressions(x, |e| match e {
        Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. } => {
            std::ops::ControlFlow::Break(())
        }
        _ => std::ops::ControlFlow::Continue(()),
    })
    .is_break()
}

/// A VALUES expression with subqueries (Django's
/// `create(n=Subquery(...))`): each evaluated once, before the row is
/// inserted, as in UPDATE. Only in a one-row VALUES: MySQL evaluates a
/// later row's subqueries after the earlier rows are in.
pub(super) fn value_with_subqueries(
    e: &Engine,
    s: &mut Session,
    x: &Expr,
    rows: usize,
) -> Result<Value> {
    if rows > 1 {
        return Err(ShimError::Unsupported(
            "subqueries in a VALUES list of several rows".into(),
        ));
    }
    let mut x = x.clone();
    inline_subqueries(e, s, &mut x)?;
    if has_subquery(&x) {
        return Err(ShimError::Unsupported(
            "correlated subquery in INSERT".into(),
        ));
    }
    value_of(e, s, &x)
}

pub(super) fn subquery_rows(e: &Engine, s: &mut Session, q: &ast::Query) -> Result<Vec<Row>> {
    match e.select_for_write(s, q) {
        Ok(Output::Rows { rows, .. }) => Ok(rows.into_vec()),
        Ok(_) => Err(ShimError::Unsupported(
            "this subquery in UPDATE/DELETE".into(),
        )),
        // (Columns of the updated table, UnknownColumn: a correlated
        // subquery; see `inline_subqueries`.)
        Err(err) => Err(err),
    }
}

pub(super) fn one_column(row: &Row) -> Result<&Value> {
    match row.as_slice() {
        [v] => Ok(v),
        _ => Err(ShimError::Wire(WireError {
            code: ER_OPERAND_COLUMNS,
            message: "Operand should contain 1 column(s)".into(),
        })),
    }
}

pub(super) fn single_table(t: &ast::TableWithJoins) -> Result<&ast::ObjectName> {
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

/// INSERT IGNORE stores what MySQL's non-strict mode would, with a warning
/// each, instead of failing: numbers clamped to the column's range (1264),
/// strings cut to its length or to their numeric prefix (1265), non-numbers
/// as 0 (1366), NULL in a NOT NULL column as the type's implicit default
/// (1048). Values with no such adjustment are left for the write to refuse.
/// Without `nulls`, a NULL for a NOT NULL column is left for the write to
/// refuse.
pub(super) fn adjust_ignored_values(
    s: &mut Session,
    schema: &TableSchema,
    rows: &mut [Row],
    nulls: bool,
) {
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
pub(super) fn implicit_default(ty: &SqlType) -> Option<Value> {
    match ty {
        SqlType::Int { .. } | SqlType::Year | SqlType::Bit(_) => Some(Value::Int(0)),
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
pub(super) fn incorrect_kind(ty: &SqlType) -> &'static str {
    match ty {
        SqlType::Int { .. } => "integer",
        SqlType::Decimal { .. } => "decimal",
        _ => "double",
    }
}

/// The columns identifying a row: the primary key, or every column.
pub(super) fn identity_columns(schema: &TableSchema) -> Vec<usize> {
    match &schema.primary_key {
        Some(pk) => pk.clone(),
        None => (0..schema.columns.len()).collect(),
    }
}

pub(super) fn identity(row: &Row, cols: &[usize]) -> Vec<Value> {
    cols.iter()
        .map(|&c| row.get(c).cloned().unwrap_or(Value::Null))
        .collect()
}

/// UPDATE/DELETE ... [ORDER BY ...] LIMIT n: the identities of the rows to
/// touch, chosen from committed state (matching rows, sorted, first n).
/// `None` when there is no ORDER BY and no LIMIT (every matching row).
pub(super) fn choose_rows(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    scan: &ScanSpec,
    matches: &dyn Fn(&Row) -> Result<bool>,
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
        ladle_dataflow::interrupt::check()?;
        if !matches(&r)? {
            continue;
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
pub(super) struct ChosenRows {
    pub(super) set: std::collections::HashSet<Vec<Value>>,
    /// In ORDER BY order.
    pub(super) ordered: Vec<Vec<Value>>,
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

pub(super) fn collect_equalities(schema: &TableSchema, w: &Expr, eq: &mut HashMap<usize, Value>) {
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

pub(super) fn column_of(schema: &TableSchema, e: &Expr) -> Option<usize> {
    match e {
        Expr::Identifier(i) => schema.column_index(&i.value),
        Expr::CompoundIdentifier(ids) => schema.column_index(&ids.last()?.value),
        Expr::Nested(x) => column_of(schema, x),
        _ => None,
    }
}

/// The value of an expression that refers to no column, evaluated as the
/// view engine does.
pub(super) fn constant(e: &Expr) -> Option<Value> {
    ladle_dataflow::compile_row_expr(e, None)
        .ok()?
        .eval(&Vec::new())
        .ok()
}

/// Strict mode refuses `''` for an ENUM without that label (1265), though
/// the write takes it: it is the empty value (index 0) IGNORE and a
/// non-strict `sql_mode` store for a value that is no label. A value the
/// row had before (`old`, an UPDATE's) is kept, as MariaDB copies it.
pub(super) fn refuse_empty_enum(
    schema: &TableSchema,
    row: &Row,
    old: Option<&Row>,
) -> std::result::Result<(), StorageError> {
    for (i, (v, c)) in row.iter().zip(&schema.columns).enumerate() {
        empty_enum_check(v, c, old.and_then(|o| o.get(i))).map_err(|e| misfit(schema, v, c, e))?;
    }
    Ok(())
}

/// [`refuse_empty_enum`] of one value (`old`: the column's value before).
pub(super) fn empty_enum_check(
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
pub(super) fn null_before_value_error(
    schema: &TableSchema,
    row: &Row,
    value_error: ShimError,
) -> ShimError {
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
pub(super) fn coerce_row_strict(schema: &TableSchema, row: &Row, old: Option<&Row>) -> Result<Row> {
    if row.len() != schema.columns.len() {
        return Err(StorageError::ColumnCount.into());
    }
    row.iter()
        .zip(&schema.columns)
        .enumerate()
        .map(|(i, (v, c))| {
            empty_enum_check(v, c, old.and_then(|o| o.get(i)))
                .map_err(|e| misfit(schema, v, c, e))?;
            Ok(ladle_common::coerce(v, c).map_err(|e| misfit(schema, v, c, e.into()))?)
        })
        .collect()
}

/// A value of `schema`'s column `c` that does not fit it (`e`), with what
/// MariaDB's message names (the row is numbered by the caller's loop: see
/// [`ShimError::at_row`]).
fn misfit(
    schema: &TableSchema,
    v: &Value,
    c: &ladle_common::ColumnSchema,
    e: StorageError,
) -> StorageError {
    match e {
        StorageError::BadValue(error) => StorageError::BadValueAt(Box::new(ValueMisfit {
            error,
            value: v.clone(),
            column: c.clone(),
            database: schema.database.clone(),
            table: schema.name.clone(),
            row: 0,
        })),
        other => other,
    }
}

/// A row's values coerced to its table's column types (the error a write
/// of it would fail with, otherwise).
pub(super) fn coerce_row(schema: &TableSchema, row: &Row) -> Result<Row> {
    if row.len() != schema.columns.len() {
        return Err(StorageError::ColumnCount.into());
    }
    row.iter()
        .zip(&schema.columns)
        .map(|(v, c)| ladle_common::coerce(v, c).map_err(|e| misfit(schema, v, c, e.into()).into()))
        .collect()
}

pub(super) fn positive_id(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok().filter(|&i| i > 0),
        Value::UInt(u) => Some(*u),
        _ => None,
    }
}

pub(super) fn compile_assignments(
    schema: &TableSchema,
    assignments: &[ast::Assignment],
) -> Result<Vec<(usize, RowExpr)>> {
    Ok(compile_assignments_as_written(schema, assignments)?
        .into_iter()
        .map(|(pos, x, _)| (pos, x))
        .collect())
}

/// [`compile_assignments`], each with the value as written (`DEFAULT`
/// spelled out), for the text of its errors.
pub(super) fn compile_assignments_as_written(
    schema: &TableSchema,
    assignments: &[ast::Assignment],
) -> Result<Vec<(usize, RowExpr, Expr)>> {
    assignments
        .iter()
        .map(|a| {
            let name = match &a.target {
                AssignmentTarget::ColumnName(n) => crate::sqltext::last_part(n),
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
            let value = with_defaults(schema, pos, &a.value)?;
            let compiled = compile_row_expr(&value, Some(schema))?;
            Ok(Some((pos, compiled, value)))
        })
        .filter_map(Result::transpose)
        .collect()
}

/// `value`, a SET value for column `pos`, with `DEFAULT` and
/// `DEFAULT(col)` replaced by the defaults they stand for.
pub(super) fn with_defaults(schema: &TableSchema, pos: usize, value: &Expr) -> Result<Expr> {
    use crate::column_default::{default_literal, replace_default_calls};
    if is_default_keyword(value) {
        let column = schema
            .columns
            .get(pos)
            .ok_or_else(|| ShimError::Internal(format!("no column {pos}")))?;
        return default_literal(column);
    }
    let mut value = value.clone();
    replace_default_calls(&mut value, &|parts| {
        let name = parts.last().map_or("", |p| p.value.as_str());
        let pos = column_pos(schema, name, "field list")?;
        Ok(schema.columns[pos].clone())
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladle_common::{ColumnSchema, IndexSchema, SqlType};
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    pub(super) fn schema() -> TableSchema {
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

    pub(super) fn spec(where_sql: &str) -> ScanSpec {
        let e = Parser::new(&MySqlDialect {})
            .try_with_sql(where_sql)
            .unwrap()
            .parse_expr()
            .unwrap();
        scan_spec(&schema(), Some(&e))
    }

    #[test]
    pub(super) fn equalities_on_a_key_prefix_use_the_index() {
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
