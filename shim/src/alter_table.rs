//! ALTER TABLE and RENAME TABLE: each operation applied to the table's
//! new shape ([`crate::alter::Shape`], with the foreign keys beside it),
//! then the new schema, the rows converted to it and the constraint
//! records written by storage in one batch ([`Storage::alter_table`]), so a
//! statement changes all or nothing. The statement's text is parsed in
//! [`crate::alter`].
//!
//! [`Storage::alter_table`]: ladle_storage::Storage::alter_table

use std::collections::BTreeMap;

use ladle_common::{ColumnDefault, IndexSchema, Row, TableId, Value};
use ladle_storage::{StorageError, TableChange};
use sqlparser::ast::{self, AlterTableOperation, CreateIndex, TableConstraint};
use sqlparser::tokenizer::Token;

use crate::alter::{Op, Shape};
use crate::checks::{CheckConstraint, TableChecks};
use crate::ddl::{
    column_def, existing_table, index_name, key_rank, positions, wire, ColumnCheck,
    ColumnDefResult, ColumnReference,
};
use crate::error::{self, Result, ShimError};
use crate::exec::Engine;
use crate::foreign_keys::{ForeignKey, KeyDeclaration};
use crate::functional_index::{IndexDecl, KeyPart, PRIMARY};
use crate::output::Output;
use crate::session::Session;
use crate::table_notes::TableNotes;
use crate::tokens::{ident, qualified_name, word};

/// `ALTER TABLE ...` from its text (MySQL's forms sqlparser does not
/// parse: DROP INDEX, DROP FOREIGN KEY, RENAME INDEX, table options).
pub fn alter_statement(e: &Engine, s: &mut Session, sql: &str) -> Result<Output> {
    let (name, ops) = crate::alter::parse(sql)?;
    alter_table(e, s, &name, ops)
}

/// `RENAME TABLE a TO b [, c TO d ...]`, one pair after another (so
/// `a TO tmp, b TO a, tmp TO b` swaps two tables). As in MariaDB, the
/// statement renames all or nothing: every pair is checked against the
/// names the pairs before it leave (a missing source 1146, a taken
/// target 1050, also `a TO a`) before any is renamed.
pub fn rename_tables(e: &Engine, s: &mut Session, sql: &str) -> Result<Output> {
    let pairs = crate::alter::parse_rename(sql)?;
    check_renames(e, s, &pairs)?;
    for (from, to) in pairs {
        alter_table(e, s, &from, vec![Op::RenameTable(to)])?;
    }
    Ok(Output::ok())
}

/// The errors [`rename_tables`]' pairs would meet, found before any is
/// renamed.
fn check_renames(
    e: &Engine,
    s: &Session,
    pairs: &[(ast::ObjectName, ast::ObjectName)],
) -> Result<()> {
    // The names the pairs so far took away and brought.
    let mut gone: Vec<(String, String)> = Vec::new();
    let mut taken: Vec<(String, String)> = Vec::new();
    let exists = |gone: &[(String, String)], taken: &[(String, String)], n: &(String, String)| {
        taken.contains(n) || (!gone.contains(n) && e.storage.table(&n.0, &n.1).is_some())
    };
    for (from, to) in pairs {
        let from = e.resolve(s, from)?;
        let to = e.resolve(s, to)?;
        if !exists(&gone, &taken, &from) {
            let (database, table) = from;
            return Err(ShimError::UnknownTable { database, table });
        }
        if exists(&gone, &taken, &to) {
            return Err(StorageError::TableExists(to.1).into());
        }
        if !e.storage.databases().contains(&to.0) {
            return Err(ShimError::Wire(crate::error::rename_into_missing_database(
                &from, &to,
            )));
        }
        taken.retain(|n| *n != from);
        gone.push(from);
        gone.retain(|n| *n != to);
        taken.push(to);
    }
    Ok(())
}

/// ALTER TABLE: every operation is applied to the table's new shape
/// ([`Shape`]), then storage writes the new schema, the rows converted to
/// it and the constraint records in one batch: the statement changes all
/// or nothing. A lone ADD INDEX builds the index in bounded batches.
pub fn alter_table(
    e: &Engine,
    s: &mut Session,
    name: &ast::ObjectName,
    ops: Vec<Op>,
) -> Result<Output> {
    let (db, table) = e.resolve(s, name)?;
    let old = existing_table(e, &db, &table)?;
    if let [Op::Parsed(AlterTableOperation::AddConstraint(
        tc @ (TableConstraint::Index { .. } | TableConstraint::Unique { .. }),
    ))] = ops.as_slice()
    {
        let (iname, cols, unique) = match tc {
            TableConstraint::Unique {
                name,
                index_name,
                columns,
                ..
            } => (index_name.as_ref().or(name.as_ref()), columns, true),
            TableConstraint::Index { name, columns, .. } => (name.as_ref(), columns, false),
            _ => return Err(ShimError::Internal("not an index".into())),
        };
        let pos = positions(&old.columns, cols)?;
        let n = iname
            .map(|i| i.value.clone())
            .unwrap_or_else(|| index_name(&old.indexes, &old.columns, &pos));
        let t = e.storage.create_index(
            &db,
            &table,
            IndexSchema {
                id: 0,
                name: n,
                columns: pos,
                unique,
            },
        )?;
        e.dataflow.table_changed(t.id);
        return Ok(Output::ok());
    }
    let mut alter = Alter {
        e,
        shape: Shape::new(&old, crate::checks::load(&e.storage, old.id)?),
        keys: crate::foreign_keys::of_table(e, old.id)?,
        all_keys: crate::foreign_keys::all(e)?,
        keys_changed: false,
        added_keys: Vec::new(),
        others: BTreeMap::new(),
        auto_increment: None,
        notes: crate::table_notes::load(&e.storage, old.id)?,
    };
    for op in ops {
        alter.apply(s, op)?;
    }
    let out = alter.finish(s, &db, &table)?;
    // A renamed TEMPORARY table stays temporary (and its connection's).
    if e.temporary_tables.contains(&db, &table) {
        if let Some(now) = e.storage.table_by_id(old.id) {
            e.temporary_tables
                .rename((&db, &table), (&now.database, &now.name));
        }
    }
    Ok(out)
}

/// `CREATE [UNIQUE] INDEX name ON t (parts)`: an index over columns is
/// built in bounded batches; one with `(expr)` parts is ALTER TABLE ADD
/// INDEX (its hidden columns change the table's shape).
pub fn create_index(e: &Engine, s: &mut Session, ci: CreateIndex) -> Result<Output> {
    let (db, table) = e.resolve(s, &ci.table_name)?;
    let schema = existing_table(e, &db, &table)?;
    let parts = ci
        .columns
        .iter()
        .map(|o| crate::functional_index::created_part(&o.expr))
        .collect::<Result<Vec<_>>>()?;
    // `(expr)` key parts: the index and its hidden columns are added as
    // ALTER TABLE ... ADD INDEX adds them.
    if parts.iter().any(|p| matches!(p, KeyPart::Expression(_))) {
        let name = ci.name.as_ref().map(crate::sqltext::last_part);
        if let Some(n) = name.as_deref().filter(|n| schema.index(n).is_some()) {
            if ci.if_not_exists {
                s.warn(1061, format!("Duplicate key name '{n}'"));
                return Ok(Output::ok());
            }
        }
        let decl = IndexDecl {
            name,
            unique: ci.unique,
            primary: false,
            parts,
            descending: ci.columns.iter().map(|o| o.asc == Some(false)).collect(),
            prefixes: ci
                .columns
                .iter()
                .map(|o| crate::functional_index::created_prefix(&o.expr))
                .collect(),
        };
        return alter_table(e, s, &ci.table_name, vec![Op::AddFunctionalIndex(decl)]);
    }
    let names: Vec<ast::Ident> = parts
        .into_iter()
        .filter_map(|p| match p {
            KeyPart::Column(c) => Some(ast::Ident::new(c)),
            KeyPart::Expression(_) => None,
        })
        .collect();
    let pos = positions(&schema.columns, &names)?;
    let name = ci
        .name
        .as_ref()
        .map(crate::sqltext::last_part)
        .unwrap_or_else(|| index_name(&schema.indexes, &schema.columns, &pos));
    if ci.if_not_exists && schema.index(&name).is_some() {
        s.warn(1061, format!("Duplicate key name '{name}'"));
        return Ok(Output::ok());
    }
    let descending: Vec<String> = ci
        .columns
        .iter()
        .zip(&names)
        .filter(|(o, _)| o.asc == Some(false))
        .map(|(_, n)| n.value.clone())
        .collect();
    let prefixes: Vec<(String, u32)> = ci
        .columns
        .iter()
        .zip(&names)
        .filter_map(|(o, n)| {
            Some((
                n.value.clone(),
                crate::functional_index::created_prefix(&o.expr)?,
            ))
        })
        .collect();
    let t = e.storage.create_index(
        &db,
        &table,
        IndexSchema {
            id: 0,
            name: name.clone(),
            columns: pos,
            unique: ci.unique,
        },
    )?;
    crate::table_notes::update(&e.storage, t.id, |n| {
        n.add_index(&name, &descending);
        n.set_prefixes(&name, &prefixes);
    })?;
    e.dataflow.table_changed(t.id);
    Ok(Output::ok())
}

/// `DROP INDEX name ON table`.
pub fn drop_index(e: &Engine, s: &mut Session, t: &[Token]) -> Result<Output> {
    let if_exists = word(t, 2).as_deref() == Some("IF") && word(t, 3).as_deref() == Some("EXISTS");
    let at = if if_exists { 4 } else { 2 };
    let name = ident(t, at).ok_or_else(|| ShimError::Parse("near DROP INDEX".into()))?;
    if word(t, at + 1).as_deref() != Some("ON") {
        return Err(ShimError::Parse("DROP INDEX needs ON table".into()));
    }
    let mut i = at + 2;
    let (db, table) = qualified_name(t, &mut i)
        .ok_or_else(|| ShimError::Parse("near DROP INDEX ... ON".into()))?;
    let db = match db {
        Some(d) => d,
        None => s.database.clone().ok_or(ShimError::NoDatabase)?,
    };
    let found = e.storage.table(&db, &table);
    let missing = found
        .as_ref()
        .is_some_and(|schema| schema.index(&name).is_none());
    if if_exists && missing {
        s.warn(
            error::ER_CANT_DROP_FIELD_OR_KEY.errno,
            format!("Can't DROP INDEX `{name}`; check that it exists"),
        );
        return Ok(Output::ok());
    }
    // An index with functional key parts takes its hidden columns along:
    // a change of the table's shape.
    let functional = found.is_some_and(|schema| {
        schema
            .indexes
            .iter()
            .position(|i| i.name.eq_ignore_ascii_case(&name))
            .is_some_and(|at| !crate::functional_index::hidden_columns_of(&schema, at).is_empty())
    });
    if functional {
        let table = ast::ObjectName(vec![ast::Ident::new(db), ast::Ident::new(table.as_str())]);
        return alter_table(e, s, &table, vec![Op::DropIndex { name, if_exists }]);
    }
    let schema = e.storage.drop_index(&db, &table, &name)?;
    crate::table_notes::update(&e.storage, schema.id, |n| n.drop_index(&name))?;
    e.dataflow.table_changed(schema.id);
    Ok(Output::ok())
}

/// One ALTER TABLE statement under way: the table's new shape and its
/// foreign keys.
struct Alter<'a> {
    e: &'a Engine,
    shape: Shape,
    /// The table's keys as the statement leaves them.
    keys: Vec<ForeignKey>,
    /// Every table's keys before the statement, as (child, key).
    all_keys: Vec<(TableId, ForeignKey)>,
    keys_changed: bool,
    /// Keys this statement adds (existing rows must satisfy them).
    added_keys: Vec<ForeignKey>,
    /// Other tables' keys naming this table's new name or columns.
    others: BTreeMap<TableId, Vec<ForeignKey>>,
    auto_increment: Option<u64>,
    /// The table's comments and default collation as the statement leaves
    /// them.
    notes: TableNotes,
}

impl Alter<'_> {
    fn apply(&mut self, s: &mut Session, op: Op) -> Result<()> {
        use AlterTableOperation as A;
        match op {
            Op::Parsed(A::AddColumn {
                column_def,
                column_position,
                if_not_exists,
                ..
            }) => self.add_column(s, &column_def, column_position.as_ref(), if_not_exists),
            Op::AddColumnIfNotExists(def, position) => {
                self.add_column(s, &def, position.as_ref(), true)
            }
            Op::Parsed(A::DropColumn {
                column_name,
                if_exists,
                ..
            }) => self.drop_column(s, &column_name.value, if_exists),
            Op::Parsed(A::RenameColumn {
                old_column_name,
                new_column_name,
            }) => {
                let at = self.shape.column(&old_column_name.value)?;
                self.rename_column(at, &new_column_name.value)
            }
            Op::Redefine { old, def, position } => self.redefine(s, &old, &def, position),
            Op::Parsed(A::AlterColumn { column_name, op }) => {
                let at = self.shape.column(&column_name.value)?;
                let column = &mut self.shape.schema.columns[at];
                match op {
                    ast::AlterColumnOperation::SetDefault { value } => {
                        column.default =
                            crate::column_default::default_of(self.e, s, column, &value)?;
                        let sql = crate::column_default::default_expression(&value);
                        self.notes
                            .set_default_expression(&column_name.value, sql.as_deref());
                    }
                    ast::AlterColumnOperation::DropDefault => {
                        column.default = ColumnDefault::None;
                        self.notes.set_default_expression(&column_name.value, None);
                    }
                    other => {
                        return Err(ShimError::Parse(format!(
                            "ALTER COLUMN {other} is not MySQL syntax"
                        )))
                    }
                }
                Ok(())
            }
            Op::Parsed(A::AddConstraint(tc)) => self.add_constraint(s, tc),
            Op::Parsed(A::DropConstraint {
                name, if_exists, ..
            }) => self.drop_constraint(s, &name.value, if_exists, false),
            Op::DropConstraint {
                name,
                if_exists,
                check_only,
            } => self.drop_constraint(s, &name, if_exists, check_only),
            Op::Parsed(A::DropPrimaryKey) => self.drop_primary_key(),
            Op::AddFunctionalIndex(decl) if decl.primary => {
                let columns = &self.shape.schema.columns;
                let pos = crate::functional_index::primary_key(columns, &decl)?;
                let descending = decl.descending_columns(columns, &pos);
                let prefixes = decl.prefix_columns(columns, &pos);
                self.shape.set_primary_key(pos)?;
                self.notes.add_index(PRIMARY, &descending);
                self.notes.set_prefixes(PRIMARY, &prefixes);
                Ok(())
            }
            Op::AddFunctionalIndex(decl) => {
                let mut schema = self.shape.schema.clone();
                let index = crate::functional_index::add_index(&mut schema, &decl)?;
                let before = self.shape.schema.columns.len();
                let descending = decl.descending_columns(&schema.columns, &index.columns);
                let prefixes = decl.prefix_columns(&schema.columns, &index.columns);
                for column in schema.columns.drain(before..) {
                    self.shape.add_column(column, None)?;
                }
                self.notes.add_index(&index.name, &descending);
                self.notes.set_prefixes(&index.name, &prefixes);
                self.shape.add_index(index)
            }
            Op::DropIndex { name, if_exists } => self.drop_index(s, &name, if_exists),
            Op::DropForeignKey { name, if_exists } => {
                let before = self.keys.len();
                self.keys.retain(|k| !k.name.eq_ignore_ascii_case(&name));
                if self.keys.len() == before {
                    return missing(s, "FOREIGN KEY", &name, if_exists);
                }
                self.keys_changed = true;
                Ok(())
            }
            Op::RenameIndex { from, to } => {
                let Some(at) = self
                    .shape
                    .schema
                    .indexes
                    .iter()
                    .position(|i| i.name.eq_ignore_ascii_case(&from))
                else {
                    return Err(wire((
                        error::ER_KEY_DOES_NOT_EXIST,
                        format!(
                            "Key '{from}' doesn't exist in table '{}'",
                            self.shape.schema.name
                        ),
                    )));
                };
                let index = self.shape.schema.indexes.remove(at);
                self.notes.rename_index(&index.name, &to);
                self.shape.add_index(IndexSchema { name: to, ..index })
            }
            Op::Parsed(A::RenameTable { table_name }) | Op::RenameTable(table_name) => {
                self.rename_table(s, &table_name)
            }
            Op::AutoIncrement(n) => {
                self.auto_increment = Some(n);
                Ok(())
            }
            Op::Comment(text) => {
                self.notes.comment = text;
                Ok(())
            }
            Op::Charset(spec) => {
                let collation = spec.collation()?;
                self.notes.set_collation(&collation);
                if spec.convert {
                    for at in self.shape.convert_text_columns(collation.compare) {
                        let column = &self.shape.schema.columns[at].name;
                        self.notes.set_column_collation(column, Some(&collation));
                    }
                }
                Ok(())
            }
            Op::Engine(name) => crate::ddl::check_engine(s, &name, None),
            Op::Ignored => Ok(()),
            Op::Parsed(other) => Err(ShimError::Unsupported(format!("ALTER TABLE {other}"))),
        }
    }

    fn add_column(
        &mut self,
        s: &mut Session,
        def: &ast::ColumnDef,
        position: Option<&ast::MySQLColumnPosition>,
        if_not_exists: bool,
    ) -> Result<()> {
        if self.shape.schema.column_index(&def.name.value).is_some() {
            if if_not_exists {
                s.warn(1060, format!("Duplicate column name '{}'", def.name.value));
                return Ok(());
            }
            return Err(StorageError::ColumnExists(def.name.value.clone()).into());
        }
        let mut r = column_def(self.e, s, def)?;
        self.take_table_collation(&mut r);
        self.notes.set_column_comment(&r.schema.name, &r.comment);
        self.notes
            .set_default_expression(&r.schema.name, r.default_sql.as_deref());
        let at = self.shape.add_column(r.schema, position)?;
        self.column_constraints(s, at, r.primary, r.unique, r.check, r.references)
    }

    /// Column definition `r` (ADD, MODIFY, CHANGE) without a collation of
    /// its own takes the table's, if it holds text; its collation's name
    /// is noted.
    fn take_table_collation(&mut self, r: &mut ColumnDefResult) {
        if r.schema.ty.is_text() && r.collation.is_none() {
            r.schema.collation = self.notes.collation;
            r.collation = Some(self.notes.named_collation());
        }
        self.notes
            .set_column_collation(&r.schema.name, r.collation.as_ref());
    }

    /// A column definition's inline PRIMARY KEY, UNIQUE, CHECK and
    /// REFERENCES, for column `at`.
    fn column_constraints(
        &mut self,
        s: &mut Session,
        at: usize,
        primary: bool,
        unique: bool,
        check: Option<ColumnCheck>,
        references: Option<ColumnReference>,
    ) -> Result<()> {
        let name = self.shape.schema.columns[at].name.clone();
        if primary {
            self.shape.set_primary_key(vec![at])?;
        }
        if unique {
            let schema = &self.shape.schema;
            let n = index_name(&schema.indexes, &schema.columns, &[at]);
            self.shape.add_index(IndexSchema {
                id: 0,
                name: n,
                columns: vec![at],
                unique: true,
            })?;
        }
        if let Some(check) = check {
            let table = &self.shape.schema.name;
            let declared = check.name.as_deref();
            self.shape.checks.push(CheckConstraint {
                name: crate::checks::table_check_name(table, &self.shape.checks, declared)?,
                sql: check.sql,
                column: Some(name.clone()),
            });
            self.shape.checks_added = true;
        }
        if let Some(rf) = references {
            let column = ast::Ident::new(name);
            self.add_key(
                s,
                KeyDeclaration {
                    name: None,
                    columns: std::slice::from_ref(&column),
                    parent: &rf.parent,
                    parent_columns: &rf.columns,
                    on_delete: rf.on_delete,
                    on_update: rf.on_update,
                },
            )?;
        }
        Ok(())
    }

    fn drop_column(&mut self, s: &mut Session, name: &str, if_exists: bool) -> Result<()> {
        let schema = &self.shape.schema;
        let Some(at) = schema
            .column_index(name)
            .filter(|&c| !schema.columns[c].is_hidden())
        else {
            return missing(s, "COLUMN", name, if_exists);
        };
        let column = self.shape.schema.columns[at].name.clone();
        for k in &self.keys {
            if k.columns.iter().any(|c| c.eq_ignore_ascii_case(&column)) {
                let index = self.key_index_name(k);
                return Err(wire((
                    error::ER_DROP_INDEX_FK,
                    format!("Cannot drop index '{index}': needed in a foreign key constraint"),
                )));
            }
        }
        for (child, k) in self.referencing() {
            if k.parent_columns
                .iter()
                .any(|c| c.eq_ignore_ascii_case(&column))
            {
                let (cdb, cname) = self
                    .e
                    .storage
                    .table_by_id(child)
                    .map(|t| (t.database.clone(), t.name.clone()))
                    .unwrap_or_default();
                return Err(wire((
                    error::ER_FK_COLUMN_CANNOT_DROP_CHILD,
                    format!(
                        "Cannot drop column '{column}': needed in a foreign key constraint '{}' of table `{cdb}`.`{cname}`",
                        k.name
                    ),
                )));
            }
        }
        self.notes.drop_column(&column);
        self.shape.drop_column(at)
    }

    /// Keys of other tables whose parent is this table, as (child, key).
    fn referencing(&self) -> Vec<(TableId, ForeignKey)> {
        let old = &self.shape.old;
        self.all_keys
            .iter()
            .filter(|(child, k)| {
                *child != old.id
                    && k.parent_database == old.database
                    && k.parent_table.eq_ignore_ascii_case(&old.name)
            })
            .map(|(child, k)| (*child, k.clone()))
            .collect()
    }

    /// The name of the index backing key `k` (InnoDB's 1553 names it).
    fn key_index_name(&self, k: &ForeignKey) -> String {
        let schema = &self.shape.schema;
        let cols: Option<Vec<usize>> = k.columns.iter().map(|c| schema.column_index(c)).collect();
        cols.and_then(|cols| {
            schema
                .indexes
                .iter()
                .find(|i| i.columns.starts_with(&cols))
                .map(|i| i.name.clone())
        })
        .unwrap_or_else(|| k.name.clone())
    }

    fn rename_column(&mut self, at: usize, to: &str) -> Result<()> {
        let from = self.shape.schema.columns[at].name.clone();
        self.shape.rename_column(at, to)?;
        self.notes.rename_column(&from, to);
        if from == to {
            return Ok(());
        }
        let same = |c: &String| c.eq_ignore_ascii_case(&from);
        let (db, name) = (self.shape.old.database.clone(), self.shape.old.name.clone());
        let parent_is_this =
            |k: &ForeignKey| k.parent_database == db && k.parent_table.eq_ignore_ascii_case(&name);
        for k in &mut self.keys {
            let mine = k.columns.iter().any(same);
            let parent = parent_is_this(k) && k.parent_columns.iter().any(same);
            if mine || parent {
                self.keys_changed = true;
            }
            if mine {
                k.columns = renamed(&k.columns, &from, to);
            }
            if parent {
                k.parent_columns = renamed(&k.parent_columns, &from, to);
            }
        }
        for (child, _) in self.referencing() {
            let keys = self.other_keys(child);
            for k in keys.iter_mut().filter(|k| parent_is_this(k)) {
                k.parent_columns = renamed(&k.parent_columns, &from, to);
            }
        }
        Ok(())
    }

    /// Table `child`'s keys as this statement leaves them (copied on first
    /// use).
    fn other_keys(&mut self, child: TableId) -> &mut Vec<ForeignKey> {
        let all = &self.all_keys;
        self.others.entry(child).or_insert_with(|| {
            all.iter()
                .filter(|(c, _)| *c == child)
                .map(|(_, k)| k.clone())
                .collect()
        })
    }

    /// MODIFY / CHANGE: column `old_name` takes the definition `def` (and
    /// its name), then moves to `position`.
    fn redefine(
        &mut self,
        s: &mut Session,
        old_name: &str,
        def: &ast::ColumnDef,
        position: Option<ast::MySQLColumnPosition>,
    ) -> Result<()> {
        let at = self.shape.column(old_name)?;
        let new_name = &def.name;
        let mut r = column_def(self.e, s, def)?;
        self.rename_column(at, &new_name.value)?;
        self.notes.set_column_comment(&new_name.value, &r.comment);
        self.notes
            .set_default_expression(&new_name.value, r.default_sql.as_deref());
        // MODIFY without a collation gives the column the table's, as
        // MySQL does (Django sends it to take a column's collation away).
        self.take_table_collation(&mut r);
        self.shape.redefine_column(at, r.schema);
        if let Some(p) = &position {
            self.shape.move_column(at, p)?;
        }
        let at = self.shape.column(&new_name.value)?;
        self.column_constraints(s, at, r.primary, r.unique, r.check, r.references)
    }

    fn add_constraint(&mut self, s: &mut Session, tc: TableConstraint) -> Result<()> {
        match &tc {
            TableConstraint::PrimaryKey { columns, .. } => {
                let pos = positions(&self.shape.schema.columns, columns)?;
                self.shape.set_primary_key(pos)
            }
            TableConstraint::Unique {
                name,
                index_name: iname,
                columns,
                ..
            } => self.add_index(iname.as_ref().or(name.as_ref()), columns, true),
            TableConstraint::Index { name, columns, .. } => {
                self.add_index(name.as_ref(), columns, false)
            }
            TableConstraint::Check { name, expr } => {
                let table = &self.shape.schema.name;
                let declared = name.as_ref().map(|n| n.value.as_str());
                self.shape.checks.push(CheckConstraint {
                    name: crate::checks::table_check_name(table, &self.shape.checks, declared)?,
                    sql: crate::sqltext::expr_text(expr),
                    column: None,
                });
                self.shape.checks_added = true;
                Ok(())
            }
            TableConstraint::ForeignKey { .. } => match KeyDeclaration::of_constraint(&tc) {
                Some(decl) => self.add_key(s, decl),
                None => Ok(()),
            },
            TableConstraint::FulltextOrSpatial { .. } => {
                Err(ShimError::Unsupported("FULLTEXT/SPATIAL indexes".into()))
            }
        }
    }

    fn add_index(
        &mut self,
        name: Option<&ast::Ident>,
        columns: &[ast::Ident],
        unique: bool,
    ) -> Result<()> {
        let schema = &self.shape.schema;
        let pos = positions(&schema.columns, columns)?;
        let name = name
            .map(|i| i.value.clone())
            .unwrap_or_else(|| index_name(&schema.indexes, &schema.columns, &pos));
        self.shape.add_index(IndexSchema {
            id: 0,
            name,
            columns: pos,
            unique,
        })
    }

    fn add_key(&mut self, s: &mut Session, decl: KeyDeclaration<'_>) -> Result<()> {
        let key = ForeignKey::from_ast(self.e, s, &self.shape.schema.name, &self.keys, decl)?;
        crate::foreign_keys::validate(self.e, s, &self.shape.schema, &key)?;
        if let Some(index) = crate::foreign_keys::key_index(&self.shape.schema, &key)? {
            self.shape.add_index(index)?;
        }
        self.keys.push(key.clone());
        self.added_keys.push(key);
        self.keys_changed = true;
        Ok(())
    }

    /// `DROP CONSTRAINT name`: a CHECK, else a FOREIGN KEY, else a UNIQUE
    /// key of that name; `DROP CHECK name`: a CHECK only.
    fn drop_constraint(
        &mut self,
        s: &mut Session,
        name: &str,
        if_exists: bool,
        check_only: bool,
    ) -> Result<()> {
        let checks = &mut self.shape.checks;
        if let Some(at) = checks
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
        {
            checks.remove(at);
            self.shape.checks_changed = true;
            return Ok(());
        }
        if check_only {
            return missing(s, "CHECK", name, if_exists);
        }
        if let Some(at) = self
            .keys
            .iter()
            .position(|k| k.name.eq_ignore_ascii_case(name))
        {
            self.keys.remove(at);
            self.keys_changed = true;
            return Ok(());
        }
        if self.shape.schema.index(name).is_some() {
            return self.drop_index(s, name, false);
        }
        missing(s, "CONSTRAINT", name, if_exists)
    }

    /// DROP PRIMARY KEY, and its key parts' order with it.
    fn drop_primary_key(&mut self) -> Result<()> {
        self.shape.drop_primary_key()?;
        self.notes.drop_index(PRIMARY);
        Ok(())
    }

    fn drop_index(&mut self, s: &mut Session, name: &str, if_exists: bool) -> Result<()> {
        if name.eq_ignore_ascii_case(PRIMARY) {
            return self.drop_primary_key();
        }
        let schema = &self.shape.schema;
        let Some(at) = schema
            .indexes
            .iter()
            .position(|i| i.name.eq_ignore_ascii_case(name))
        else {
            return missing(s, "INDEX", name, if_exists);
        };
        // An index a key needs (no other index starts with its columns).
        for k in &self.keys {
            let Some(cols) = k
                .columns
                .iter()
                .map(|c| schema.column_index(c))
                .collect::<Option<Vec<usize>>>()
            else {
                continue;
            };
            let covers = |c: &[usize]| c.starts_with(&cols);
            let others = schema.primary_key.as_deref().is_some_and(covers)
                || schema
                    .indexes
                    .iter()
                    .enumerate()
                    .any(|(i, x)| i != at && covers(&x.columns));
            if covers(&schema.indexes[at].columns) && !others {
                return Err(wire((
                    error::ER_DROP_INDEX_FK,
                    format!(
                        "Cannot drop index '{}': needed in a foreign key constraint",
                        schema.indexes[at].name
                    ),
                )));
            }
        }
        // A functional key part's hidden column goes with its index.
        let hidden = crate::functional_index::hidden_columns_of(schema, at);
        let index = self.shape.schema.indexes.remove(at);
        self.notes.drop_index(&index.name);
        for column in hidden {
            self.shape.drop_column(column)?;
        }
        Ok(())
    }

    fn rename_table(&mut self, s: &mut Session, to: &ast::ObjectName) -> Result<()> {
        let (db, name) = self.e.resolve(s, to)?;
        let schema = &self.shape.schema;
        if db == schema.database && name == schema.name {
            return Ok(());
        }
        if self.e.storage.table(&db, &name).is_some() {
            return Err(StorageError::TableExists(name).into());
        }
        if !self.e.storage.databases().contains(&db) {
            let from = (schema.database.clone(), schema.name.clone());
            return Err(ShimError::Wire(crate::error::rename_into_missing_database(
                &from,
                &(db, name),
            )));
        }
        let (old_db, old_name) = (schema.database.clone(), schema.name.clone());
        let parent_is_this = |k: &ForeignKey| {
            k.parent_database == old_db && k.parent_table.eq_ignore_ascii_case(&old_name)
        };
        let repoint = |k: &mut ForeignKey| {
            k.parent_database = db.clone();
            k.parent_table = name.clone();
        };
        for k in self.keys.iter_mut().filter(|k| parent_is_this(k)) {
            repoint(k);
            self.keys_changed = true;
        }
        for (child, _) in self.referencing() {
            for k in self
                .other_keys(child)
                .iter_mut()
                .filter(|k| parent_is_this(k))
            {
                repoint(k);
            }
        }
        if crate::checks::rename_generated(&mut self.shape.checks, &old_name, &name) {
            self.shape.checks_changed = true;
        }
        self.shape.schema.database = db;
        self.shape.schema.name = name;
        Ok(())
    }

    /// Checks what can only be checked on the whole new shape, then has
    /// storage write it with the rows converted.
    fn finish(mut self, s: &mut Session, db: &str, table: &str) -> Result<Output> {
        let e = self.e;
        let shape = &mut self.shape;
        shape.check_auto_increment()?;
        for at in crate::functional_index::retype_hidden(&mut shape.schema)? {
            shape.converted[at] = true;
        }
        crate::checks::validate(&shape.schema, &shape.checks)?;
        let columns = shape.schema.columns.clone();
        shape.schema.indexes.sort_by_key(|i| key_rank(i, &columns));
        let pads: Vec<Value> = columns
            .iter()
            .map(ladle_storage::added_column_value)
            .collect();
        let project = |old: &Row| -> Row {
            shape
                .sources
                .iter()
                .zip(&pads)
                .map(|(src, pad)| match src {
                    Some(i) => old.get(*i).cloned().unwrap_or(Value::Null),
                    None => pad.clone(),
                })
                .collect()
        };
        if !self.added_keys.is_empty() {
            let rows: Vec<Row> = e.storage.scan(shape.old.id)?.iter().map(project).collect();
            let orphans =
                crate::foreign_keys::orphans_of(e, s, &shape.schema, &self.added_keys, &rows)?;
            if let Some((_, err)) = orphans.into_iter().next() {
                return Err(err);
            }
        }
        let id = shape.old.id;
        let mut meta = Vec::new();
        if shape.checks_changed || shape.checks_added {
            meta.push(crate::checks::meta_record(id, &shape.checks)?);
        }
        if self.keys_changed {
            meta.push(crate::foreign_keys::meta_record(id, &self.keys)?);
        }
        for (child, keys) in &self.others {
            meta.push(crate::foreign_keys::meta_record(*child, keys)?);
        }
        meta.push(self.notes.meta_record(id)?);
        let compiled = TableChecks::compile(&shape.schema, shape.checks.clone())?;
        let strict = crate::vars::strict_mode(s);
        let mut warnings = Vec::new();
        let schema = &shape.schema;
        let converted = &shape.converted;
        let mut convert = |n: usize, old: Row| -> Result<Row> {
            let mut row = project(&old);
            for (i, column) in schema.columns.iter().enumerate() {
                if converted[i] {
                    let v = std::mem::replace(&mut row[i], Value::Null);
                    row[i] = Shape::convert_value(column, v, n, strict, &mut warnings)?;
                }
            }
            compiled.fill_generated(schema, &mut row)?;
            compiled.verify_uncoerced(schema, &row)?;
            Ok(row)
        };
        let change = TableChange {
            schema: schema.clone(),
            rewrite_rows: !shape.rows_unchanged(),
            meta,
        };
        let result = e.storage.alter_table(db, table, change, &mut convert);
        e.checks.invalidate(id);
        crate::foreign_keys::invalidate(e);
        let t = result?;
        for (code, message) in warnings {
            s.add_warning("Warning", code, message);
        }
        if let Some(n) = self.auto_increment {
            e.storage.raise_auto_increment(id, n)?;
        }
        e.dataflow.table_changed(t.id);
        Ok(Output::ok())
    }
}

/// `names` with `from` renamed to `to`.
fn renamed(names: &[String], from: &str, to: &str) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            if n.eq_ignore_ascii_case(from) {
                to.to_string()
            } else {
                n.clone()
            }
        })
        .collect()
}

/// DROP of a `what` that does not exist: MariaDB's 1091, a note with IF
/// EXISTS.
fn missing(s: &mut Session, what: &str, name: &str, if_exists: bool) -> Result<()> {
    let message = format!("Can't DROP {what} `{name}`; check that it exists");
    if if_exists {
        s.warn(error::ER_CANT_DROP_FIELD_OR_KEY.errno, message);
        return Ok(());
    }
    Err(wire((error::ER_CANT_DROP_FIELD_OR_KEY, message)))
}
