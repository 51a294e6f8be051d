//! Multi-table UPDATE: `UPDATE a JOIN b ON ... SET a.x = b.y, b.z = 1
//! WHERE ...` and the comma form `UPDATE a, b SET ... WHERE a.id = b.aid`
//! (any join MySQL's table references allow, LEFT JOIN included).
//!
//! The statement is run as one write per target table through the
//! single-table write path ([`super::update::write_update`]), so keys,
//! CHECKs, FOREIGN KEYs, IGNORE and the counts are those of a plain
//! UPDATE. First, for each target, a SELECT over the statement's table
//! references and WHERE computes the identity (primary key, else every
//! column) of each row the join matches with the values its SET clause
//! gives it there. Every SELECT runs before any row changes, so each
//! value is computed from the rows as they were, as MariaDB does (`SET
//! a.x = a.x + 1, a.y = a.x` gives y the old x; MySQL gives no order for a
//! multi-table UPDATE's assignments). A row the join matches several times
//! is changed once, with the values of one of its matches, and counted
//! once, as in MySQL. The writes of all targets are one transaction: a
//! statement that fails changes nothing (outside a transaction, its own
//! one is rolled back; inside one, its ops are undone).
//!
//! MySQL refuses ORDER BY and LIMIT here (1221); MariaDB 10.11 takes them
//! but counts and changes rows inconsistently, so Ladle gives MySQL's error.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{TableSchema, Value};
use ladle_storage::ScanSpec;
use sqlparser::ast::{
    self, Assignment, AssignmentTarget, Expr, Ident, ObjectName, TableFactor, TableWithJoins,
};
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::through_view::ViewOfTable;
use super::update::{on_update_columns, write_update, JoinedStep, RowChange, SetValues};
use super::view_check::ViewCheck;
use super::write::{column_pos, identity_columns, is_default_keyword, lookup_table, table};
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::{Info, Output};
use crate::row_locking::LockedTable;
use crate::row_locks::Mode;
use crate::session::{Session, Transaction};

/// A multi-table UPDATE as parsed.
pub struct MultiUpdate {
    /// The table references (the comma form's items; one for a JOIN form).
    pub tables: Vec<TableWithJoins>,
    pub assignments: Vec<Assignment>,
    pub selection: Option<Expr>,
}

/// Whether `t` (an UPDATE's tokens, its modifiers left out) names several
/// tables before SET: a comma or a join at the top level.
pub fn is_multi_table_update(t: &[Token]) -> bool {
    use crate::tokens::word;
    let mut depth = 0usize;
    for (i, tok) in t.iter().enumerate().skip(1) {
        match tok {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => return true,
            Token::Word(_) if depth == 0 => match word(t, i).as_deref() {
                Some("SET") => return false,
                Some("JOIN" | "STRAIGHT_JOIN") => return true,
                _ => {}
            },
            _ => {}
        }
    }
    false
}

/// Parses `UPDATE refs SET assignments [WHERE cond]` (the modifiers left
/// out); ORDER BY or LIMIT after it is MySQL's 1221.
pub fn parse_multi_update(sql: &str) -> Result<MultiUpdate> {
    let mut parser = crate::sqltext::parser(sql)?;
    let (tables, assignments, selection, next) = crate::sqltext::contain_parser_panic(|| {
        parser.expect_keyword(Keyword::UPDATE)?;
        let tables = parser.parse_comma_separated(Parser::parse_table_and_joins)?;
        parser.expect_keyword(Keyword::SET)?;
        let assignments = parser.parse_comma_separated(Parser::parse_assignment)?;
        let selection = match parser.parse_keyword(Keyword::WHERE) {
            true => Some(parser.parse_expr()?),
            false => None,
        };
        let _ = parser.consume_token(&Token::SemiColon);
        Ok((tables, assignments, selection, parser.peek_token().token))
    })?;
    match next {
        Token::EOF => {}
        Token::Word(w) if w.keyword == Keyword::ORDER => {
            return Err(ShimError::WrongUsage("UPDATE", "ORDER BY"))
        }
        Token::Word(w) if w.keyword == Keyword::LIMIT => {
            return Err(ShimError::WrongUsage("UPDATE", "LIMIT"))
        }
        other => {
            return Err(ShimError::Parse(format!(
                "check the manual that corresponds to your MariaDB server version for the \
                 right syntax to use near '{other}' at line 1"
            )))
        }
    }
    let mut update = MultiUpdate {
        tables,
        assignments,
        selection,
    };
    let bounded = [
        ladle_dataflow::bound_depth(&mut update.tables),
        ladle_dataflow::bound_depth(&mut update.assignments),
        ladle_dataflow::bound_depth(&mut update.selection),
    ];
    if bounded.iter().any(|b| b.is_err()) {
        return Err(ShimError::TooDeep);
    }
    Ok(update)
}

/// Runs a multi-table UPDATE (`ignore`: UPDATE IGNORE). A call of a
/// function that does not exist is named in the session's database.
pub fn multi_update(
    e: &Engine,
    s: &mut Session,
    update: MultiUpdate,
    ignore: bool,
) -> Result<Output> {
    let db = s.database.clone();
    let mut update = update;
    let checked = super::through_view::merge_target_views(
        e,
        s,
        (
            &mut update.tables,
            &mut update.assignments,
            &mut update.selection,
        ),
    )?;
    in_one_transaction(e, s, |e, s| {
        update_targets(e, s, (&update, &checked), ignore)
    })
    .map_err(|err| err.in_database(db.as_deref()))
}

/// Runs `run` so that its writes are atomic: in the session's transaction
/// (undone if it fails), else in a transaction of its own, committed when
/// it succeeds.
pub(super) fn in_one_transaction(
    e: &Engine,
    s: &mut Session,
    run: impl FnOnce(&Engine, &mut Session) -> Result<Output>,
) -> Result<Output> {
    let own = !s.in_transaction();
    if own {
        s.transaction = Some(Transaction::for_statement(s.connection_id));
    }
    let mark = s
        .transaction
        .as_ref()
        .map_or(0, Transaction::statement_mark);
    match run(e, s) {
        Ok(out) => {
            if own {
                e.commit(s)?;
            }
            Ok(out)
        }
        Err(err) => {
            if own {
                s.transaction = None;
            } else if let Some(tx) = s.transaction.as_mut() {
                tx.undo_statement(mark);
            }
            Err(err)
        }
    }
}

/// A table of the statement's references that SET assigns to.
struct Target {
    /// How the statement names it (alias, else its name as written).
    qualifier: Vec<Ident>,
    schema: Arc<TableSchema>,
    /// The columns assigned, and their values (in SET's order).
    columns: Vec<usize>,
    values: Vec<Expr>,
}

/// Computes every target's changes over the join, then writes them.
/// `checked`: the targets that are views WITH CHECK OPTION (see
/// [`super::through_view::merge_target_views`]).
fn update_targets(
    e: &Engine,
    s: &mut Session,
    (update, checked): (&MultiUpdate, &[(Vec<Ident>, ViewOfTable)]),
    ignore: bool,
) -> Result<Output> {
    let targets = targets(e, s, update)?;
    lock_targets(e, s, update, &targets)?;
    let mut changes = Vec::with_capacity(targets.len());
    for target in &targets {
        changes.push(joined_values(e, s, update, target)?);
    }
    let (mut affected_rows, mut matched, mut changed) = (0, 0, 0);
    let now = crate::column_default::current_timestamp();
    for write in one_write_per_table(targets, changes, checked)? {
        if write.steps.iter().all(|(_, by_row)| by_row.is_empty()) {
            continue;
        }
        let schema = write.schema;
        // Counted per name, as MariaDB writes each name in turn.
        let counted = (write.steps.len() > 1).then(|| counts_per_name(&schema, &write.steps));
        // A keyed table's matched rows are read by key, in key order (as
        // InnoDB changes them); another's by a scan.
        let scan = match (&schema.primary_key, write.steps.as_slice()) {
            (Some(pk), [(_, by_row)]) if !pk.is_empty() => {
                let mut keys: Vec<Vec<Value>> = by_row.keys().cloned().collect();
                keys.sort();
                ScanSpec::Keys(keys)
            }
            _ => ScanSpec::Full,
        };
        let mut steps = write.steps;
        let values = match steps.len() {
            1 => {
                let (columns, by_row) = steps.remove(0);
                SetValues::Joined { columns, by_row }
            }
            _ => SetValues::JoinedSteps(steps),
        };
        let change = RowChange {
            pred: None,
            chosen: None,
            ident_cols: identity_columns(&schema),
            on_update: on_update_columns(&schema, &values.columns()),
            values,
            now: now.clone(),
            checks: e.checks.for_table(&e.storage, &schema)?,
            view_check: write.view_check,
            schema: schema.clone(),
            strict: crate::strict_warnings::StrictWarnings::for_write(s, ignore),
            written: Default::default(),
        };
        if let Output::Done {
            affected_rows: a,
            info:
                Info::Matched {
                    matched: m,
                    changed: c,
                },
            ..
        } = write_update(e, s, &schema, scan, change, ignore)?
        {
            match counted {
                // Affected rows are the changed ones, or the matched ones
                // for a client that asks for found rows.
                Some((m, c)) => {
                    affected_rows += if s.found_rows { m } else { c };
                    matched += m;
                    changed += c;
                }
                None => {
                    affected_rows += a;
                    matched += m;
                    changed += c;
                }
            }
        }
    }
    Ok(Output::Done {
        affected_rows,
        last_insert_id: 0,
        info: Info::Matched { matched, changed },
    })
}

/// The writes of an UPDATE's targets: one per target, but one per table
/// without a primary key changed under several names, its names' values
/// applied in turn (a row is identified by all its columns, which the
/// first name's write would change under the second's).
struct TableWrite {
    schema: Arc<TableSchema>,
    steps: Vec<JoinedStep>,
    /// The CHECK OPTION of the view the table is written through, if any
    /// (of the first such name).
    view_check: Option<Arc<ViewCheck>>,
}

fn one_write_per_table(
    targets: Vec<Target>,
    changes: Vec<HashMap<Vec<Value>, Vec<Value>>>,
    checked: &[(Vec<Ident>, ViewOfTable)],
) -> Result<Vec<TableWrite>> {
    let mut writes: Vec<TableWrite> = Vec::new();
    for (target, by_row) in targets.into_iter().zip(changes) {
        let view = checked
            .iter()
            .find(|(q, _)| super::write::same_name(q, &target.qualifier))
            .map(|(_, view)| view);
        let view_check = ViewCheck::of(view, &target.schema)?;
        let keyless = target
            .schema
            .primary_key
            .as_ref()
            .is_none_or(|pk| pk.is_empty());
        let same = writes
            .iter_mut()
            .find(|w| keyless && w.schema.id == target.schema.id);
        match same {
            Some(w) => {
                w.steps.push((target.columns, by_row));
                w.view_check = w.view_check.take().or(view_check);
            }
            None => writes.push(TableWrite {
                schema: target.schema,
                steps: vec![(target.columns, by_row)],
                view_check,
            }),
        }
    }
    Ok(writes)
}

/// (matched, changed) of a table without a primary key changed under
/// several names, counted as MariaDB counts writing each name in turn: a
/// row each time a name matches it, and changed each time that name's
/// values differ from the row as the names before it left it.
fn counts_per_name(schema: &TableSchema, steps: &[JoinedStep]) -> (u64, u64) {
    let mut rows: Vec<&Vec<Value>> = steps.iter().flat_map(|(_, b)| b.keys()).collect();
    rows.sort();
    rows.dedup();
    let (mut matched, mut changed) = (0, 0);
    for original in rows {
        // Without a primary key the identity is the whole row.
        let mut row = original.clone();
        for (columns, by_row) in steps {
            let Some(values) = by_row.get(original) else {
                continue;
            };
            matched += 1;
            let mut new = row.clone();
            for (&pos, v) in columns.iter().zip(values) {
                if let (Some(slot), Some(c)) = (new.get_mut(pos), schema.columns.get(pos)) {
                    *slot = ladle_common::coerce(v, c).unwrap_or_else(|_| v.clone());
                }
            }
            if new != row {
                changed += 1;
            }
            row = new;
        }
    }
    (matched, changed)
}

/// Locks, exclusive, the rows of the targets the join matches, before
/// their values are computed: as InnoDB locks the rows an UPDATE reads, so
/// the values are computed from the latest rows and no other transaction
/// changes those rows before this one ends (two concurrent `SET c.n = c.n
/// + s.step` both count).
fn lock_targets(
    e: &Engine,
    s: &mut Session,
    update: &MultiUpdate,
    targets: &[Target],
) -> Result<()> {
    let tables: Vec<LockedTable> = targets
        .iter()
        .map(|t| LockedTable {
            qualifier: t.qualifier.clone(),
            schema: Arc::clone(&t.schema),
        })
        .collect();
    // (The keys query replaces the select list.)
    let query = join_query(Vec::new(), update)?;
    let db = e.query_database(s, &query)?;
    e.lock_rows_read_by(s, &query, &db, &tables, Mode::Exclusive, None)?;
    Ok(())
}

/// A base table of the statement's references: how it is named there
/// (alias, else its name as written) and its name.
struct Named {
    qualifier: Vec<Ident>,
    name: ObjectName,
    /// Given an alias, a table is named by the alias only.
    aliased: bool,
}

fn named_tables(tables: &[TableWithJoins]) -> Vec<Named> {
    fn walk(f: &TableFactor, out: &mut Vec<Named>) {
        match f {
            TableFactor::Table { name, alias, .. } => out.push(Named {
                qualifier: match alias {
                    Some(a) => vec![a.name.clone()],
                    None => name.0.clone(),
                },
                name: name.clone(),
                aliased: alias.is_some(),
            }),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => walk_all(std::slice::from_ref(table_with_joins), out),
            _ => {}
        }
    }
    fn walk_all(tables: &[TableWithJoins], out: &mut Vec<Named>) {
        for t in tables {
            walk(&t.relation, out);
            for j in &t.joins {
                walk(&j.relation, out);
            }
        }
    }
    let mut out = Vec::new();
    walk_all(tables, &mut out);
    out
}

/// Whether `qualifier` (as a column reference writes it: `t`, `db.t`)
/// names `table`.
fn names(table: &Named, qualifier: &[Ident]) -> bool {
    let same = super::write::same_name;
    same(&table.qualifier, qualifier)
        || (!table.aliased && table.qualifier.len() == 2 && same(&table.qualifier[1..], qualifier))
}

/// The statement's tables with their schemas (None for a view or a
/// missing table: the SELECT over the references reports a missing one).
struct References {
    named: Vec<Named>,
    schemas: Vec<Option<Arc<TableSchema>>>,
}

impl References {
    fn new(e: &Engine, s: &Session, update: &MultiUpdate) -> References {
        let named = named_tables(&update.tables);
        let schemas = named
            .iter()
            .map(|n| lookup_table(e, s, &n.name).ok())
            .collect();
        References { named, schemas }
    }

    /// The table (its place in FROM) a column reference `parts` (`c`,
    /// `t.c`) in `place` names. A column named without its table must be
    /// in exactly one table (1054, 1052 as MySQL).
    fn table_of(&self, parts: &[Ident], place: &str) -> Result<usize> {
        let (column, qualifier) = parts
            .split_last()
            .ok_or_else(|| ShimError::Parse(format!("near {place}")))?;
        let written = parts
            .iter()
            .map(|p| p.value.as_str())
            .collect::<Vec<_>>()
            .join(".");
        let has_column = |i: &usize| {
            self.schemas[*i]
                .as_ref()
                .is_some_and(|sc| sc.column_index(&column.value).is_some())
        };
        let found: Vec<usize> = match qualifier.is_empty() {
            true => (0..self.named.len()).filter(has_column).collect(),
            false => (0..self.named.len())
                .filter(|&i| names(&self.named[i], qualifier))
                .collect(),
        };
        match found.as_slice() {
            [] => Err(ShimError::UnknownColumn(written, place.into())),
            [one] => Ok(*one),
            _ if qualifier.is_empty() => Err(ladle_dataflow::DataflowError::AmbiguousColumn(
                column.value.clone(),
                place.into(),
            )
            .into()),
            // Two tables under one name: the SELECT's 1066.
            _ => Err(ShimError::Wire(crate::error::WireError {
                code: crate::error::ER_NONUNIQ_TABLE,
                message: format!("Not unique table/alias: '{}'", last_name(qualifier)),
            })),
        }
    }

    /// The column a reference `parts` names (see [`Self::table_of`]).
    fn column_of(&self, parts: &[Ident], place: &str) -> Result<ladle_common::ColumnSchema> {
        let at = self.table_of(parts, place)?;
        let name = parts.last().map_or("", |p| p.value.as_str());
        self.schemas[at]
            .as_ref()
            .and_then(|sc| sc.columns.get(sc.column_index(name)?).cloned())
            .ok_or_else(|| ShimError::UnknownColumn(name.into(), place.into()))
    }
}

/// How MariaDB's messages name a table reference: by its last part.
fn last_name(parts: &[Ident]) -> String {
    parts.last().map_or("", |p| p.value.as_str()).to_string()
}

/// The tables SET assigns to, in FROM's order (the order MariaDB writes
/// them in: where one table is changed under two names, the later name's
/// values are the ones left), each with its columns and values.
fn targets(e: &Engine, s: &mut Session, update: &MultiUpdate) -> Result<Vec<Target>> {
    let refs = References::new(e, s, update);
    let mut targets: Vec<(usize, Target)> = Vec::new();
    for a in &update.assignments {
        let parts = match &a.target {
            AssignmentTarget::ColumnName(n) => &n.0,
            AssignmentTarget::Tuple(_) => {
                return Err(ShimError::Unsupported("tuple assignment".into()))
            }
        };
        let at = refs.table_of(parts, "SET")?;
        let pos = match targets.iter().position(|(i, _)| *i == at) {
            Some(pos) => pos,
            None => {
                // A target's schema is held for the transaction the write
                // runs in, as a single-table UPDATE's is.
                let schema = table(e, s, &refs.named[at].name)?;
                let qualifier = refs.named[at].qualifier.clone();
                targets.push((
                    at,
                    Target {
                        qualifier,
                        schema,
                        columns: Vec::new(),
                        values: Vec::new(),
                    },
                ));
                targets.len() - 1
            }
        };
        let mut value = a.value.clone();
        crate::column_default::replace_default_calls(&mut value, &|p| refs.column_of(p, "SET"))?;
        assign(&mut targets[pos].1, parts, value)?;
    }
    targets.sort_by_key(|(at, _)| *at);
    let targets: Vec<Target> = targets.into_iter().map(|(_, t)| t).collect();
    check_one_table_twice(&targets)?;
    Ok(targets)
}

/// A table changed under two names: MariaDB's 1706 when either assigns
/// its primary key.
fn check_one_table_twice(targets: &[Target]) -> Result<()> {
    for (i, a) in targets.iter().enumerate() {
        for b in targets[i + 1..]
            .iter()
            .filter(|b| b.schema.id == a.schema.id)
        {
            // Without one, the names' writes are one (see `one_write_per_table`).
            let Some(pk) = a.schema.primary_key.as_ref().filter(|pk| !pk.is_empty()) else {
                continue;
            };
            if a.columns.iter().chain(&b.columns).any(|c| pk.contains(c)) {
                return Err(ShimError::KeyUpdateUnderTwoNames(
                    last_name(&a.qualifier),
                    last_name(&b.qualifier),
                ));
            }
        }
    }
    Ok(())
}

/// Adds an assignment of `value` to column `parts` to `target`'s columns
/// and values: `DEFAULT` is the column's default; a generated column
/// takes only DEFAULT (which leaves it to its expression), any other
/// value is 1906.
fn assign(target: &mut Target, parts: &[Ident], value: Expr) -> Result<()> {
    let written = || {
        let names: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
        ShimError::UnknownColumn(names.join("."), "SET".into())
    };
    let column = parts.last().ok_or_else(written)?;
    let pos = column_pos(&target.schema, &column.value, "SET").map_err(|_| written())?;
    let schema_column = &target.schema.columns[pos];
    if schema_column.default.generation().is_some() {
        if is_default_keyword(&value) {
            return Ok(());
        }
        return Err(ShimError::Wire(crate::checks::generated_value_given(
            &target.schema,
            &column.value,
        )));
    }
    let value = match is_default_keyword(&value) {
        true => crate::column_default::default_literal(schema_column)?,
        false => value,
    };
    target.columns.push(pos);
    target.values.push(value);
    Ok(())
}

/// Per row of `target` the join matches: its identity -> the values SET
/// gives it (those of the first match the SELECT returns). Rows a LEFT
/// JOIN made up for the target (a NULL primary key) match nothing.
fn joined_values(
    e: &Engine,
    s: &mut Session,
    update: &MultiUpdate,
    target: &Target,
) -> Result<HashMap<Vec<Value>, Vec<Value>>> {
    let ident_cols = identity_columns(&target.schema);
    let column_ref = |pos: usize| -> Result<Expr> {
        let c = target
            .schema
            .columns
            .get(pos)
            .ok_or_else(|| ShimError::Internal(format!("no column {pos}")))?;
        let mut parts = target.qualifier.clone();
        parts.push(Ident::with_quote('`', c.name.clone()));
        Ok(Expr::CompoundIdentifier(parts))
    };
    let mut items = Vec::new();
    for &c in &ident_cols {
        items.push(column_ref(c)?);
    }
    items.extend(target.values.iter().cloned());
    let query = join_query(items, update)?;
    let rows = match e.select_for_write(s, &query)? {
        Output::Rows { rows, .. } => rows.into_vec(),
        _ => return Err(ShimError::Internal("multi-table UPDATE's join".into())),
    };
    let keyed = target.schema.primary_key.is_some();
    let n = ident_cols.len();
    let mut by_row = HashMap::new();
    for row in rows {
        let (ident, values) = row.split_at(n.min(row.len()));
        if keyed && ident.iter().any(|v| matches!(v, Value::Null)) {
            continue;
        }
        by_row
            .entry(ident.to_vec())
            .or_insert_with(|| values.to_vec());
    }
    Ok(by_row)
}

/// `SELECT items FROM <the statement's references> WHERE <its WHERE>`,
/// each item named apart (`c0`, `c1`, ...).
fn join_query(items: Vec<Expr>, update: &MultiUpdate) -> Result<ast::Query> {
    super::correlated::select_over(items, update.tables.clone(), update.selection.clone())
}
