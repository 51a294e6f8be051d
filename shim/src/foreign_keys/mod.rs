//! FOREIGN KEY constraints, enforced as InnoDB does.
//!
//! A key is declared in CREATE TABLE (table constraint or a column's
//! REFERENCES, which MariaDB honours) or by ALTER TABLE ADD FOREIGN KEY,
//! kept in the catalog beside its (child) table, and shown by SHOW CREATE
//! TABLE and information_schema. The child gets an index on the key's
//! columns when none starts with them (as InnoDB creates one), so the
//! parent side finds referencing rows by lookup.
//!
//! Enforcement, unless the session set `foreign_key_checks = 0` (dumps and
//! fixtures do):
//! - a row a child INSERT/UPDATE writes whose key columns are all non-NULL
//!   must match a parent row, else 1452;
//! - a parent DELETE, or an UPDATE changing referenced columns, applies the
//!   key's action to the referencing rows: RESTRICT / NO ACTION fail with
//!   1451, CASCADE deletes (or updates) them, SET NULL clears their key
//!   columns; cascades recurse (at most 15 levels, InnoDB's limit) and are
//!   written in the same atomic batch as the statement;
//! - TRUNCATE (1701) and DROP TABLE (1451) of a referenced parent fail.
//!
//! The checks run when the statement runs, over committed rows plus the
//! open transaction's own writes, and again when its rows are committed
//! ([`commit_check`], under the commit lock, over the state being
//! committed): Ladle takes no row locks, so another connection may delete
//! a parent row between a child's INSERT and its COMMIT, or add a child
//! row to a parent this transaction deletes. InnoDB would have locked the
//! parent row (the other connection waits, or this one does); Ladle fails
//! the COMMIT (or the autocommit statement) with the error the statement
//! would have got, 1452 or 1451, and applies none of it; the other
//! connection's commit stands.

use std::sync::Arc;

use ladle_common::{Row, RowDelta, TableId, TableSchema, Value};
use ladle_storage::{CommitCheck, IndexRef, ScanSpec, SnapshotReads, StorageError, WriteOp};

use crate::error::{self, Result, ShimError, WireError};
use crate::exec::Engine;
use crate::session::Session;

mod keys;

use keys::meta_key;
pub use keys::{Action, ForeignKey, ForeignKeyCache, KeyDeclaration};

impl ForeignKey {
    /// Builds a key from its declaration; `existing` names the table's
    /// other keys (for the `<table>_ibfk_<n>` name of an unnamed one).
    pub fn from_ast(
        e: &Engine,
        s: &Session,
        table: &str,
        existing: &[ForeignKey],
        decl: KeyDeclaration<'_>,
    ) -> Result<ForeignKey> {
        let KeyDeclaration {
            name,
            columns,
            parent,
            parent_columns,
            on_delete,
            on_update,
        } = decl;
        let (parent_database, parent_table) = e.resolve(s, parent)?;
        let name = match name {
            Some(n) => n.value.clone(),
            None => (1..)
                .map(|n| format!("{table}_ibfk_{n}"))
                .find(|n| !existing.iter().any(|k| k.name.eq_ignore_ascii_case(n)))
                .unwrap_or_default(),
        };
        if columns.len() != parent_columns.len() || columns.is_empty() {
            return Err(wire(
                error::ER_WRONG_FK_DEF,
                format!("Incorrect foreign key definition for '{name}': Key reference and table reference don't match"),
            ));
        }
        Ok(ForeignKey {
            name,
            columns: columns.iter().map(|c| c.value.clone()).collect(),
            parent_database,
            parent_table,
            parent_columns: parent_columns.iter().map(|c| c.value.clone()).collect(),
            on_delete: Action::from_ast(on_delete)?,
            on_update: Action::from_ast(on_update)?,
        })
    }
}

/// The keys declared on child table `table`.
pub fn of_table(e: &Engine, table: TableId) -> Result<Vec<ForeignKey>> {
    Ok(e.foreign_keys
        .all(&e.storage)?
        .iter()
        .filter(|(t, _)| *t == table)
        .map(|(_, k)| k.clone())
        .collect())
}

/// Whether `table` has keys or is referenced by one (its writes then need
/// the rows they change computed up front).
pub fn involved(e: &Engine, table: &TableSchema) -> Result<bool> {
    Ok(e.foreign_keys.all(&e.storage)?.iter().any(|(child, k)| {
        *child == table.id
            || (k.parent_database == table.database
                && k.parent_table.eq_ignore_ascii_case(&table.name))
    }))
}

/// The keys (with their child tables) referencing `parent`.
fn referencing(e: &Engine, parent: &TableSchema) -> Result<Vec<(Arc<TableSchema>, ForeignKey)>> {
    let mut out = Vec::new();
    for (child, k) in e.foreign_keys.all(&e.storage)?.iter() {
        if k.parent_database == parent.database && k.parent_table.eq_ignore_ascii_case(&parent.name)
        {
            if let Some(schema) = e.storage.table_by_id(*child) {
                out.push((schema, k.clone()));
            }
        }
    }
    Ok(out)
}

/// Records `keys` as `child`'s keys, after checking each parent and its
/// columns exist (unless checks are off), and gives the child an index on
/// each key's columns where none starts with them.
pub fn store(e: &Engine, s: &Session, child: &TableSchema, keys: &[ForeignKey]) -> Result<()> {
    // The child as it is now: an earlier call for the same statement (ALTER
    // TABLE stores the new key, checks the rows, then stores all keys) may
    // have given it the key's index since `child` was read.
    let current = e.storage.table_by_id(child.id);
    let child: &TableSchema = current.as_deref().unwrap_or(child);
    for k in keys {
        validate(e, s, child, k)?;
        if let Some(index) = key_index(child, k)? {
            let t = e
                .storage
                .create_index(&child.database, &child.name, index)?;
            e.dataflow.table_changed(t.id);
        }
    }
    let (key, value) = meta_record(child.id, keys)?;
    match value {
        None => e.storage.delete_meta(&key)?,
        Some(bytes) => e.storage.put_meta(&key, &bytes)?,
    }
    e.foreign_keys.invalidate();
    Ok(())
}

/// Checks that key `k`'s columns exist in `child`, and (unless checks are
/// off) that its parent and the parent's columns do.
pub fn validate(e: &Engine, s: &Session, child: &TableSchema, k: &ForeignKey) -> Result<()> {
    positions(child, &k.columns)?;
    if checks_enabled(s) {
        let parent = parent_schema(e, child, k)?;
        positions(&parent, &k.parent_columns)?;
    }
    Ok(())
}

/// The index InnoDB gives `child` for key `k` (id 0), unless an index (or
/// the primary key) starts with the key's columns.
pub fn key_index(child: &TableSchema, k: &ForeignKey) -> Result<Option<ladle_common::IndexSchema>> {
    let cols = positions(child, &k.columns)?;
    let indexed = child
        .primary_key
        .as_ref()
        .is_some_and(|pk| pk.starts_with(&cols))
        || child.indexes.iter().any(|i| i.columns.starts_with(&cols));
    if indexed {
        return Ok(None);
    }
    // Named after the constraint, or after the first column for an
    // unnamed (`<table>_ibfk_<n>`) key, as InnoDB names it.
    let auto = format!("{}_ibfk_", child.name);
    let preferred = if k.name.starts_with(&auto) {
        k.columns[0].clone()
    } else {
        k.name.clone()
    };
    let name = (0..)
        .map(|n| {
            if n == 0 {
                preferred.clone()
            } else {
                format!("{preferred}_{n}")
            }
        })
        .find(|n| child.index(n).is_none())
        .unwrap_or(preferred);
    Ok(Some(ladle_common::IndexSchema {
        id: 0,
        name,
        columns: cols,
        unique: false,
    }))
}

/// The catalog meta record holding `keys` as table `table`'s keys (`None`:
/// the record is deleted), for a schema change that writes it itself.
pub fn meta_record(table: TableId, keys: &[ForeignKey]) -> Result<(String, Option<Vec<u8>>)> {
    Ok((
        meta_key(table),
        crate::checks::encoded_list(keys, "FOREIGN KEYs")?,
    ))
}

/// Every table's keys as `(child table, key)`.
pub fn all(e: &Engine) -> Result<Vec<(TableId, ForeignKey)>> {
    Ok(e.foreign_keys.all(&e.storage)?.to_vec())
}

/// Forgets the cached keys (a schema change wrote their records itself).
pub fn invalidate(e: &Engine) {
    e.foreign_keys.invalidate();
}

/// Forgets a dropped child table's keys.
pub fn forget(e: &Engine, table: TableId) -> Result<()> {
    e.storage.delete_meta(&meta_key(table))?;
    e.foreign_keys.invalidate();
    Ok(())
}

/// DROP TABLE / TRUNCATE of `parent`: refused while another table's key
/// references it (1451 / 1701), unless checks are off.
pub fn check_parent_removable(
    e: &Engine,
    s: &Session,
    parent: &TableSchema,
    truncate: bool,
) -> Result<()> {
    if !checks_enabled(s) {
        return Ok(());
    }
    let Some((child, k)) = referencing(e, parent)?
        .into_iter()
        .find(|(child, _)| child.id != parent.id)
    else {
        return Ok(());
    };
    if truncate {
        return Err(wire(
            error::ER_TRUNCATE_ILLEGAL_FK,
            format!(
                "Cannot truncate a table referenced in a foreign key constraint (`{}`.`{}`, {})",
                child.database,
                child.name,
                k.clause(&child.database, true)
            ),
        ));
    }
    Err(wire(
        error::ER_ROW_IS_REFERENCED,
        "Cannot delete or update a parent row: a foreign key constraint fails".into(),
    ))
}

/// Whether the session checks keys (`SET foreign_key_checks = 0` turns
/// them off).
fn checks_enabled(s: &Session) -> bool {
    match s.variables.get("foreign_key_checks") {
        Some(Value::Int(0)) | Some(Value::UInt(0)) => false,
        Some(Value::Text(t)) => !(t.eq_ignore_ascii_case("OFF") || t.as_ref() == "0"),
        _ => true,
    }
}

fn wire(code: error::MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

fn positions(schema: &TableSchema, cols: &[String]) -> Result<Vec<usize>> {
    cols.iter()
        .map(|c| {
            schema
                .column_index(c)
                .ok_or_else(|| ShimError::UnknownColumn(c.clone(), "foreign key".into()))
        })
        .collect()
}

/// The key's parent table; a TEMPORARY one cannot be a parent (as in
/// MariaDB: the key would outlive it, and reach it from other
/// connections).
fn parent_schema(e: &Engine, child: &TableSchema, k: &ForeignKey) -> Result<Arc<TableSchema>> {
    e.storage
        .table(&k.parent_database, &k.parent_table)
        .filter(|_| {
            !e.temporary_tables
                .contains(&k.parent_database, &k.parent_table)
        })
        .ok_or_else(|| {
            wire(
                error::ER_CANT_CREATE_TABLE,
                format!(
                    "Can't create table `{}`.`{}` (errno: 150 \"Foreign key constraint is incorrectly formed\")",
                    child.database, child.name
                ),
            )
        })
}

/// Rows of `schema` whose columns `cols` equal `key` (coerced to those
/// columns' types), as the session sees the table: committed rows plus the
/// open transaction's writes.
fn rows_matching(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    cols: &[usize],
    key: &[Value],
) -> Result<Vec<Row>> {
    let key: Vec<Value> = key
        .iter()
        .zip(cols)
        .map(|(v, &c)| ladle_common::coerce(v, &schema.columns[c]).unwrap_or_else(|_| v.clone()))
        .collect();
    let normalized = |r: &Row| -> bool {
        cols.iter().zip(&key).all(|(&c, k)| {
            let coll = schema.columns[c].collation;
            r[c].key_normalized(coll) == k.key_normalized(coll)
        })
    };
    if crate::dml::overlay::transaction_wrote(s, schema.id) {
        let rows = crate::dml::overlay::table_as_transaction_sees(e, s, schema)?;
        return Ok(rows.into_iter().filter(|r| normalized(r)).collect());
    }
    let found = match index_for(schema, cols) {
        Some((index, order)) => {
            let prefix: Vec<Value> = order.iter().map(|&i| key[i].clone()).collect();
            e.storage.lookup(schema.id, index, &prefix)?
        }
        None => e.storage.scan(schema.id)?,
    };
    Ok(found.into_iter().filter(|r| normalized(r)).collect())
}

/// An index whose leading columns are exactly `cols` (in any order), and
/// for each of its leading columns the position in `cols`.
fn index_for(schema: &TableSchema, cols: &[usize]) -> Option<(IndexRef, Vec<usize>)> {
    let order = |index_cols: &[usize]| -> Option<Vec<usize>> {
        let lead = index_cols.get(..cols.len())?;
        lead.iter()
            .map(|c| cols.iter().position(|x| x == c))
            .collect()
    };
    if let Some(o) = schema.primary_key.as_deref().and_then(order) {
        return Some((IndexRef::Primary, o));
    }
    schema
        .indexes
        .iter()
        .find_map(|i| Some((IndexRef::Secondary(i.id), order(&i.columns)?)))
}

/// The key values of `row` for `cols`, or None if any is NULL (such a row
/// references nothing).
fn key_of(row: &Row, cols: &[usize]) -> Option<Vec<Value>> {
    cols.iter()
        .map(|&c| row.get(c).filter(|v| !v.is_null()).cloned())
        .collect()
}

/// Child side: every row in `rows` (as `schema`'s table will hold them)
/// must reference an existing parent row, else 1452.
pub fn check_child_rows(e: &Engine, s: &Session, schema: &TableSchema, rows: &[Row]) -> Result<()> {
    match orphans(e, s, schema, rows)?.into_iter().next() {
        Some((_, err)) => Err(err),
        None => Ok(()),
    }
}

/// The rows of `rows` that reference no parent row, in order, each with
/// its 1452 error.
pub fn orphans(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    rows: &[Row],
) -> Result<Vec<(usize, ShimError)>> {
    let keys = of_table(e, schema.id)?;
    orphans_of(e, s, schema, &keys, rows)
}

/// [`orphans`] for keys `keys` of `schema` (not necessarily stored yet).
pub fn orphans_of(
    e: &Engine,
    s: &Session,
    schema: &TableSchema,
    keys: &[ForeignKey],
    rows: &[Row],
) -> Result<Vec<(usize, ShimError)>> {
    let mut out: Vec<(usize, ShimError)> = Vec::new();
    if !checks_enabled(s) {
        return Ok(out);
    }
    for k in keys {
        let cols = positions(schema, &k.columns)?;
        let parent = e
            .storage
            .table(&k.parent_database, &k.parent_table)
            .ok_or_else(|| child_error(schema, k))?;
        let parent_cols = positions(&parent, &k.parent_columns)?;
        for (i, row) in rows.iter().enumerate() {
            if out.iter().any(|(j, _)| *j == i) {
                continue;
            }
            let coerced: Row = row
                .iter()
                .zip(&schema.columns)
                .map(|(v, c)| ladle_common::coerce(v, c).unwrap_or_else(|_| v.clone()))
                .collect();
            let Some(key) = key_of(&coerced, &cols) else {
                continue;
            };
            // A row referencing itself (or another row of the same
            // statement) in a self-referencing table.
            if parent.id == schema.id
                && rows.iter().any(|r| {
                    parent_cols
                        .iter()
                        .zip(&key)
                        .all(|(&c, k)| r.get(c).is_some_and(|v| v == k))
                })
            {
                continue;
            }
            if rows_matching(e, s, &parent, &parent_cols, &key)?.is_empty() {
                out.push((i, child_error(schema, k)));
            }
        }
    }
    out.sort_by_key(|(i, _)| *i);
    Ok(out)
}

fn child_error(schema: &TableSchema, k: &ForeignKey) -> ShimError {
    wire(error::ER_NO_REFERENCED_ROW, child_message(schema, k))
}

fn child_message(schema: &TableSchema, k: &ForeignKey) -> String {
    violation_message("add or update a child", schema, k)
}

/// InnoDB's message for a violation of `k` (a key of table `child`).
fn violation_message(what: &str, child: &TableSchema, k: &ForeignKey) -> String {
    format!(
        "Cannot {what} row: a foreign key constraint fails (`{}`.`{}`, {})",
        child.database,
        child.name,
        k.clause(&child.database, false)
    )
}

fn parent_error(child: &TableSchema, k: &ForeignKey) -> ShimError {
    wire(error::ER_ROW_IS_REFERENCED, parent_message(child, k))
}

fn parent_message(child: &TableSchema, k: &ForeignKey) -> String {
    violation_message("delete or update a parent", child, k)
}

/// One FOREIGN KEY as [`commit_check`] verifies it.
struct CommittedKey {
    child: Arc<TableSchema>,
    child_cols: Vec<usize>,
    parent: Arc<TableSchema>,
    parent_cols: Vec<usize>,
    /// The 1452 and 1451 messages.
    orphan: String,
    referenced: String,
}

impl CommittedKey {
    /// Rows of `table` whose `cols` equal `key` (coerced to their types),
    /// in the state being committed.
    fn matching(
        reads: &SnapshotReads<'_>,
        table: &TableSchema,
        cols: &[usize],
        key: &[Value],
    ) -> ladle_storage::Result<Vec<Row>> {
        let key: Vec<Value> = key
            .iter()
            .zip(cols)
            .map(|(v, &c)| ladle_common::coerce(v, &table.columns[c]).unwrap_or_else(|_| v.clone()))
            .collect();
        let found = match index_for(table, cols) {
            Some((index, order)) => {
                let prefix: Vec<Value> = order.iter().map(|&i| key[i].clone()).collect();
                reads.lookup(table.id, index, &prefix)?
            }
            None => reads.scan(table.id)?,
        };
        Ok(found
            .into_iter()
            .filter(|r| {
                cols.iter().zip(&key).all(|(&c, k)| {
                    let coll = table.columns[c].collation;
                    r[c].key_normalized(coll) == k.key_normalized(coll)
                })
            })
            .collect())
    }

    /// Whether `deltas` hold a row of `table` with `key` in `cols` on the
    /// `inserted` side: a row whose key an UPDATE kept (InnoDB does not
    /// check those).
    fn kept(
        deltas: &[(TableId, RowDelta)],
        table: &TableSchema,
        cols: &[usize],
        key: &[Value],
        inserted: bool,
    ) -> bool {
        deltas.iter().any(|(t, d)| {
            *t == table.id
                && matches!(d, RowDelta::Insert(_)) == inserted
                && key_of(d.row(), cols).is_some_and(|k| {
                    k.iter().zip(key).zip(cols).all(|((a, b), &c)| {
                        let coll = table.columns[c].collation;
                        a.key_normalized(coll) == b.key_normalized(coll)
                    })
                })
        })
    }

    fn verify(
        &self,
        reads: &SnapshotReads<'_>,
        deltas: &[(TableId, RowDelta)],
    ) -> ladle_storage::Result<()> {
        for (table, delta) in deltas {
            match delta {
                // A child row written: its parent must be there.
                RowDelta::Insert(row) if *table == self.child.id => {
                    let Some(key) = key_of(row, &self.child_cols) else {
                        continue;
                    };
                    if Self::kept(deltas, &self.child, &self.child_cols, &key, false) {
                        continue;
                    }
                    if Self::matching(reads, &self.parent, &self.parent_cols, &key)?.is_empty() {
                        return Err(StorageError::NoReferencedRow(self.orphan.clone()));
                    }
                }
                // A parent row removed: unless its key is still there, no
                // child may reference it.
                RowDelta::Delete(row) if *table == self.parent.id => {
                    let Some(key) = key_of(row, &self.parent_cols) else {
                        continue;
                    };
                    if Self::kept(deltas, &self.parent, &self.parent_cols, &key, true)
                        || !Self::matching(reads, &self.parent, &self.parent_cols, &key)?.is_empty()
                    {
                        continue;
                    }
                    if !Self::matching(reads, &self.child, &self.child_cols, &key)?.is_empty() {
                        return Err(StorageError::RowIsReferenced(self.referenced.clone()));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The check the commit of `ops` (a transaction's, or an autocommit
/// statement's with its cascades) runs under the commit lock: every
/// FOREIGN KEY with a child or parent among the written tables holds in
/// the state being committed (see the module docs). `None` when no key is
/// involved or the session turned checks off.
pub fn commit_check(e: &Engine, s: &Session, ops: &[WriteOp]) -> Result<Option<CommitCheck>> {
    if !checks_enabled(s) || ops.is_empty() {
        return Ok(None);
    }
    let all = e.foreign_keys.all(&e.storage)?;
    if all.is_empty() {
        return Ok(None);
    }
    let mut written: Vec<TableId> = ops.iter().map(WriteOp::table).collect();
    written.sort_unstable();
    written.dedup();
    let mut keys = Vec::new();
    for (child_id, k) in all.iter() {
        let Some(child) = e.storage.table_by_id(*child_id) else {
            continue;
        };
        let Some(parent) = e.storage.table(&k.parent_database, &k.parent_table) else {
            continue;
        };
        if !written.contains(&child.id) && !written.contains(&parent.id) {
            continue;
        }
        keys.push(CommittedKey {
            child_cols: positions(&child, &k.columns)?,
            parent_cols: positions(&parent, &k.parent_columns)?,
            orphan: child_message(&child, k),
            referenced: parent_message(&child, k),
            child,
            parent,
        });
    }
    if keys.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(move |reads, deltas| {
        keys.iter().try_for_each(|k| k.verify(reads, deltas))
    })))
}

/// Parent side: `changes` are rows of `parent` a statement deletes (new
/// `None`) or updates (new `Some`). Checks each referencing key's action
/// and returns the writes its cascades make (to go in the same batch as
/// the statement).
pub fn parent_effects(
    e: &Engine,
    s: &Session,
    parent: &TableSchema,
    changes: &[(Row, Option<Row>)],
) -> Result<Vec<WriteOp>> {
    let mut out = Vec::new();
    if checks_enabled(s) {
        effects(e, s, parent, changes, 0, &mut out)?;
    }
    Ok(out)
}

fn effects(
    e: &Engine,
    s: &Session,
    parent: &TableSchema,
    changes: &[(Row, Option<Row>)],
    depth: usize,
    out: &mut Vec<WriteOp>,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    for (child, k) in referencing(e, parent)? {
        let parent_cols = positions(parent, &k.parent_columns)?;
        let child_cols = positions(&child, &k.columns)?;
        let mut child_changes: Vec<(Row, Option<Row>)> = Vec::new();
        for (old, new) in changes {
            let Some(old_key) = key_of(old, &parent_cols) else {
                continue;
            };
            let new_key = new.as_ref().map(|n| key_of(n, &parent_cols));
            if new_key
                .as_ref()
                .is_some_and(|nk| nk.as_ref() == Some(&old_key))
            {
                continue; // the referenced values did not change
            }
            let action = if new.is_some() {
                k.on_update
            } else {
                k.on_delete
            };
            let children = rows_matching(e, s, &child, &child_cols, &old_key)?;
            // Rows of the statement's own table it is itself removing.
            let children: Vec<Row> = children
                .into_iter()
                .filter(|r| !(child.id == parent.id && changes.iter().any(|(o, _)| o == r)))
                .collect();
            if children.is_empty() {
                continue;
            }
            if depth >= 15 {
                return Err(wire(
                    error::ER_ROW_IS_REFERENCED,
                    "Foreign key cascade delete/update exceeds max depth of 15.".into(),
                ));
            }
            for r in children {
                let replacement = match (action, new_key.as_ref()) {
                    (Action::Restrict | Action::NoAction, _) => {
                        return Err(parent_error(&child, &k))
                    }
                    (Action::Cascade, None) => None,
                    (Action::Cascade, Some(nk)) => {
                        let mut n = r.clone();
                        for (i, &c) in child_cols.iter().enumerate() {
                            n[c] = nk.as_ref().map_or(Value::Null, |nk| nk[i].clone());
                        }
                        Some(n)
                    }
                    (Action::SetNull, _) => {
                        let mut n = r.clone();
                        for &c in &child_cols {
                            if !child.columns[c].nullable {
                                return Err(parent_error(&child, &k));
                            }
                            n[c] = Value::Null;
                        }
                        Some(n)
                    }
                };
                child_changes.push((r, replacement));
            }
        }
        for (old, new) in &child_changes {
            out.push(row_write(&child, old, new.clone()));
        }
        effects(e, s, &child, &child_changes, depth + 1, out)?;
    }
    Ok(())
}

/// The write replacing (or deleting) exactly `old` in `table`.
fn row_write(table: &TableSchema, old: &Row, new: Option<Row>) -> WriteOp {
    let target = old.clone();
    let scan = match &table.primary_key {
        Some(pk) => ScanSpec::Prefix {
            index: IndexRef::Primary,
            key: pk.iter().map(|&c| old[c].clone()).collect(),
        },
        None => ScanSpec::Full,
    };
    match new {
        None => WriteOp::Delete {
            table: table.id,
            schema_version: table.version,
            scan,
            filter: Arc::new(move |r: &Row| Ok(*r == target)),
        },
        Some(new) => WriteOp::Update {
            table: table.id,
            schema_version: table.version,
            scan,
            update: Arc::new(move |r: &Row| Ok((*r == target).then(|| new.clone()))),
        },
    }
}
