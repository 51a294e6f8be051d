//! DELETE (single- and multi-table, with RETURNING) and TRUNCATE.

use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_dataflow::compile_row_expr;
use ladle_storage::{RowFilter, ScanSpec, WriteOp};
use sqlparser::ast::{self, Expr, TableFactor};
use sqlparser::tokenizer::Token;

use super::overlay::candidate_rows;
use super::write::{
    choose_rows, expr_err, has_subquery, identity, identity_columns, inline_subqueries, scan_spec,
    single_table, submit_with, table, RowCounts,
};
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::tokens::render_tokens;

/// DELETE. A call of a function that does not exist is named in the
/// session's database (1305, see [`crate::error::ShimError::in_database`]).
pub fn delete(e: &Engine, s: &mut Session, d: ast::Delete) -> Result<Output> {
    delete_ignore(e, s, d, false)
}

/// DELETE, with IGNORE if `ignore`: a row a child row still references
/// is kept, with warning 1451, and the others are deleted (MariaDB's).
pub fn delete_ignore(e: &Engine, s: &mut Session, d: ast::Delete, ignore: bool) -> Result<Output> {
    let db = s.database.clone();
    // The WHERE is compiled once: a constant's conversion warns once.
    ladle_dataflow::constants_warn_once(|| delete_rows(e, s, d, ignore))
        .map_err(|err| err.in_database(db.as_deref()))
}

fn delete_rows(e: &Engine, s: &mut Session, mut d: ast::Delete, ignore: bool) -> Result<Output> {
    if let Some(mut singles) = multi_table_delete(e, s, &d)? {
        match singles.pop() {
            Some(single) if singles.is_empty() => d = single,
            Some(last) => {
                singles.push(last);
                return delete_several(e, s, singles);
            }
            None => {
                return Err(ShimError::Unsupported(
                    "multi-table DELETE of no table".into(),
                ))
            }
        }
    }
    through_view(e, s, &mut d)?;
    let returning_items = d.returning.take();
    if let Some(w) = &mut d.selection {
        ladle_dataflow::mark_where_is_null(w);
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
    // Subqueries left read the row: computed per row (see `super::correlated`).
    let (pred, per_row, scan) = match &d.selection {
        Some(w) if has_subquery(w) => {
            let rows = super::correlated::per_row(e, s, &from[0], &schema, &[], Some(w))?;
            let scan = rows.scan(&schema, Some(w));
            (None, Some(Arc::new(rows)), scan)
        }
        w => (
            w.as_ref()
                .map(|w| compile_row_expr(w, Some(&schema)))
                .transpose()?,
            None,
            scan_spec(&schema, w.as_ref()),
        ),
    };
    let matches = |row: &Row| -> Result<bool> {
        match (&pred, &per_row) {
            (Some(p), _) => Ok(p.eval_predicate(row)?),
            (None, Some(rows)) => Ok(rows.matches(row)?),
            (None, None) => Ok(true),
        }
    };
    let chosen = choose_rows(e, s, &schema, &scan, &matches, &d.order_by, limit)?.map(|c| c.set);
    let ident_cols = identity_columns(&schema);
    let filter: RowFilter = Arc::new(move |row: &Row| {
        if let Some(p) = &pred {
            if !p.eval_predicate(row).map_err(expr_err)? {
                return Ok(false);
            }
        }
        if let Some(rows) = &per_row {
            if !rows.matches(row).map_err(expr_err)? {
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
            // Stopped by KILL QUERY or a gone client (1317) before
            // anything is buffered or written.
            ladle_dataflow::interrupt::check()?;
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
    let filter: RowFilter = if ignore && keyed {
        let referenced = referenced_rows(e, s, &schema, &mut gone)?;
        deleted -= referenced.len() as u64;
        let ident_cols = identity_columns(&schema);
        let kept: std::collections::HashSet<Vec<Value>> = referenced.into_iter().collect();
        Arc::new(move |row: &Row| Ok(!kept.contains(&identity(row, &ident_cols)) && filter(row)?))
    } else {
        filter
    };
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
    // The rows are known before the write: a RETURNING that fails for one
    // fails the statement with nothing deleted, as in MariaDB (whose row
    // loop rolls the statement back).
    let listed = returning.map(|r| r.output(&returned_rows)).transpose()?;
    let (out, _) = submit_with(
        e,
        s,
        WriteOp::Delete {
            table: schema.id,
            schema_version: schema.version,
            scan,
            filter,
        },
        cascades,
        RowCounts::both(deleted),
    )?;
    Ok(listed.unwrap_or(out))
}

/// DELETE IGNORE's rule: takes out of `gone` (rows to delete, as (row,
/// None)) each row a child row still references, with warning 1451, and
/// returns their identities. Each row is checked alone, against the
/// tables as the statement found them.
fn referenced_rows(
    e: &Engine,
    s: &mut Session,
    schema: &TableSchema,
    gone: &mut Vec<(Row, Option<Row>)>,
) -> Result<Vec<Vec<Value>>> {
    let ident_cols = identity_columns(schema);
    let mut referenced = Vec::new();
    let mut kept = Vec::new();
    for change in gone.drain(..) {
        match crate::foreign_keys::parent_effects(e, s, schema, std::slice::from_ref(&change)) {
            Err(err) if err.mysql_code().errno == crate::error::ER_ROW_IS_REFERENCED.errno => {
                s.add_warning("Warning", err.mysql_code().errno, err.to_string());
                referenced.push(identity(&change.0, &ident_cols));
            }
            Err(err) => return Err(err),
            Ok(_) => kept.push(change),
        }
    }
    *gone = kept;
    Ok(referenced)
}

/// `DELETE a, b FROM t a, t b WHERE ...` (several targets; WordPress
/// deletes expired transients with their timeouts so): every target's
/// rows are chosen (its subquery run) before any row is deleted, then the
/// deletes run as one transaction (the session's, else one of their own),
/// counted together as in MySQL.
fn delete_several(e: &Engine, s: &mut Session, mut singles: Vec<ast::Delete>) -> Result<Output> {
    for d in &mut singles {
        if let Some(w) = &mut d.selection {
            inline_subqueries(e, s, w)?;
        }
    }
    super::multi_update::in_one_transaction(e, s, |e, s| {
        let mut total = 0;
        for d in singles {
            if let Output::Done { affected_rows, .. } = delete_rows(e, s, d, false)? {
                total += affected_rows;
            }
        }
        Ok(Output::affected(total))
    })
}

/// A DELETE from a view as a DELETE from its base table (see
/// [`super::through_view`]).
fn through_view(e: &Engine, s: &Session, d: &mut ast::Delete) -> Result<()> {
    let from = match &mut d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let [only] = from.as_mut_slice() else {
        return Ok(());
    };
    let ast::TableFactor::Table { name, .. } = &mut only.relation else {
        return Ok(());
    };
    if !only.joins.is_empty() || !d.tables.is_empty() {
        return Ok(());
    }
    if let Some(view) = super::through_view::view_of_table(e, s, name, "DELETE")? {
        if view.join.is_some() {
            return Err(ShimError::JoinViewDelete(view.name));
        }
        d.selection = view.where_over_base(name, d.selection.take())?;
        *name = view.base;
    }
    Ok(())
}

/// `DELETE t FROM t JOIN u ON ... WHERE ...` (Django's form for a delete
/// through a relation) as `DELETE FROM t WHERE pk IN (SELECT t.pk FROM t
/// JOIN u ON ... WHERE ...)`, whose subquery runs first, as any
/// uncorrelated subquery in a DELETE; one such DELETE per target. `None`
/// for a single-table DELETE. A target without a one-column primary key,
/// USING, RETURNING and LIMIT are refused (1235).
pub(super) fn multi_table_delete(
    e: &Engine,
    s: &Session,
    d: &ast::Delete,
) -> Result<Option<Vec<ast::Delete>>> {
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let joined = from.len() > 1 || from.iter().any(|t| !t.joins.is_empty());
    if d.tables.is_empty() && d.using.is_none() && !joined {
        return Ok(None);
    }
    if d.using.is_some() || d.returning.is_some() || d.limit.is_some() {
        return Err(ShimError::Unsupported(
            "multi-table DELETE with USING, RETURNING or LIMIT".into(),
        ));
    }
    if d.tables.is_empty() {
        return Err(ShimError::Unsupported(
            "multi-table DELETE without target tables".into(),
        ));
    }
    d.tables
        .iter()
        .map(|t| delete_of_target(e, s, d, from, t))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The single-table DELETE of one target of a multi-table DELETE.
fn delete_of_target(
    e: &Engine,
    s: &Session,
    d: &ast::Delete,
    from: &[ast::TableWithJoins],
    target: &ast::ObjectName,
) -> Result<ast::Delete> {
    let unsupported =
        |what: &str| Err(ShimError::Unsupported(format!("multi-table DELETE {what}")));
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
    let schema = super::write::lookup_table(e, s, &name)?;
    let pk = match schema.primary_key.as_deref() {
        Some([c]) => schema.columns[*c].name.clone(),
        _ => return unsupported("of a table without a one-column primary key"),
    };
    // Quoted: a TEMPORARY table's stored name (`#tmp#7#t`) is no bare word.
    let key = |q: &str| {
        Expr::CompoundIdentifier(vec![
            ast::Ident::with_quote('`', q),
            ast::Ident::with_quote('`', &pk),
        ])
    };
    let tables: Vec<String> = from.iter().map(|t| t.to_string()).collect();
    let select_text = format!("SELECT {} FROM {}", key(&shown), tables.join(", "));
    let mut select = match ladle_dataflow::parse_sql(&select_text)
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
    Ok(single)
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
        schema_version: schema.version,
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
        depth == 0 && crate::tokens::word(t, i).as_deref() == Some("RETURNING")
    })?;
    let end = t.len() - usize::from(matches!(t.last(), Some(Token::SemiColon)));
    Some((
        render_tokens(&t[..at]),
        render_tokens(&t[at + 1..end.max(at + 1)]),
    ))
}
