//! DDL: databases, tables (column types -> `SqlType` in
//! [`crate::column_types`]), indexes,
//! DROP (ALTER TABLE is [`crate::alter_table`]'s, over the column
//! definitions and key naming here). FOREIGN KEY and CHECK constraints are recorded here
//! and enforced by [`crate::foreign_keys`] and [`crate::checks`]; the
//! table's and its columns' COMMENTs and its default collation are kept in
//! [`crate::table_notes`]; ENGINE= and other table options are accepted and
//! ignored.

use ladle_common::{ColumnDefault, ColumnSchema, IndexSchema, SqlType, TableSchema};
use ladle_storage::StorageError;
use sqlparser::ast::{self, ColumnOption, CreateTable, ObjectType, TableConstraint};
use sqlparser::tokenizer::Token;

use crate::checks::CheckConstraint;
use crate::collation_names::NamedCollation;
use crate::column_types::{is_json_valid_of, map_type};
use crate::error::{self, Result, ShimError, WireError};
use crate::exec::Engine;
use crate::foreign_keys::{ForeignKey, KeyDeclaration};
use crate::output::Output;
use crate::session::Session;
use crate::table_notes::TableNotes;
use crate::tokens::{ident, word};

/// A column definition with its inline key flags.
pub(crate) struct ColumnDefResult {
    pub(crate) schema: ColumnSchema,
    /// The collation the column's own CHARACTER SET or COLLATE names (the
    /// table's default collation does not apply to it).
    pub(crate) collation: Option<NamedCollation>,
    /// `COMMENT 'text'` ("" for none).
    pub(crate) comment: String,
    /// `DEFAULT (expr)` with an expression: its SQL text, which SHOW CREATE
    /// TABLE shows (the stored default is its value, computed once).
    pub(crate) default_sql: Option<String>,
    pub(crate) primary: bool,
    pub(crate) unique: bool,
    /// A column-level CHECK.
    pub(crate) check: Option<ColumnCheck>,
    /// A column-level REFERENCES (MariaDB honours it as a FOREIGN KEY).
    pub(crate) references: Option<ColumnReference>,
}

/// `[CONSTRAINT name] CHECK (condition)` on a column.
pub(crate) struct ColumnCheck {
    pub(crate) name: Option<String>,
    /// The condition, as SQL text.
    pub(crate) sql: String,
}

/// `REFERENCES parent (cols) [ON DELETE ..] [ON UPDATE ..]` on a column.
pub(crate) struct ColumnReference {
    pub(crate) parent: ast::ObjectName,
    pub(crate) columns: Vec<ast::Ident>,
    pub(crate) on_delete: Option<ast::ReferentialAction>,
    pub(crate) on_update: Option<ast::ReferentialAction>,
}

pub(crate) fn column_def(e: &Engine, s: &Session, def: &ast::ColumnDef) -> Result<ColumnDefResult> {
    crate::functional_index::check_column_name(&def.name.value)?;
    let ty = map_type(&def.name.value, &def.data_type)?;
    let mut col = ColumnSchema::new(def.name.value.clone(), ty);
    let mut primary = false;
    let mut unique = false;
    let mut check = None;
    let mut references = None;
    let mut comment = String::new();
    let mut default_sql = None;
    let mut collation = def
        .collation
        .as_ref()
        .map(|c| crate::collation_names::by_name(&crate::sqltext::last_part(c)))
        .transpose()?;
    if matches!(col.ty, SqlType::Timestamp { .. }) {
        // Ladle does not emulate explicit_defaults_for_timestamp=OFF.
    }
    for opt in &def.options {
        match &opt.option {
            ColumnOption::Null => col.nullable = true,
            ColumnOption::NotNull => col.nullable = false,
            ColumnOption::Default(expr) => {
                col.default = crate::column_default::default_of(e, s, &col, expr)?;
                default_sql = crate::column_default::default_expression(expr);
            }
            ColumnOption::Unique { is_primary, .. } => {
                if *is_primary {
                    primary = true;
                } else {
                    unique = true;
                }
            }
            ColumnOption::DialectSpecific(toks) => {
                let text: String = toks
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_ascii_uppercase();
                if text.contains("AUTO_INCREMENT") || text.contains("AUTOINCREMENT") {
                    col.auto_increment = true;
                }
            }
            // A character set brings its default collation, unless COLLATE
            // names one (`CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`, as
            // mariadb-dump writes every column off the table's default).
            ColumnOption::CharacterSet(cs) if def.collation.is_none() => {
                let named = crate::collation_names::of_charset(&crate::sqltext::last_part(cs))?;
                collation = Some(named);
            }
            ColumnOption::OnUpdate(expr) if crate::column_default::is_current_timestamp(expr) => {
                col.on_update_current_timestamp = true;
            }
            // MariaDB's JSON, as its SHOW CREATE TABLE (and so a dump)
            // writes it: `longtext ... CHECK (json_valid(`c`))` (Ladle's
            // JSON checks its values itself).
            ColumnOption::Check(expr)
                if col.ty == SqlType::Text(u32::MAX) && is_json_valid_of(expr, &def.name) =>
            {
                col.ty = SqlType::Json;
            }
            // One CHECK a column, as MariaDB's grammar takes it (a second
            // is 1064 there; Ladle kept only the last one).
            ColumnOption::Check(_) if check.is_some() => {
                return Err(ShimError::Parse(format!(
                    "a second CHECK on column '{}' (one CHECK per column)",
                    def.name.value
                )));
            }
            ColumnOption::Check(expr) => {
                check = Some(ColumnCheck {
                    name: opt.name.as_ref().map(|n| n.value.clone()),
                    sql: crate::sqltext::expr_text(expr),
                })
            }
            ColumnOption::ForeignKey {
                foreign_table,
                referred_columns,
                on_delete,
                on_update,
                ..
            } => {
                references = Some(ColumnReference {
                    parent: foreign_table.clone(),
                    columns: referred_columns.clone(),
                    on_delete: *on_delete,
                    on_update: *on_update,
                })
            }
            ColumnOption::Comment(text) => comment = text.clone(),
            ColumnOption::Generated {
                generation_expr: Some(expr),
                generation_expr_mode,
                ..
            } => {
                // MySQL's default kind is VIRTUAL.
                let stored = matches!(
                    generation_expr_mode,
                    Some(ast::GeneratedExpressionMode::Stored)
                );
                col.default = ColumnDefault::Generated {
                    expr: crate::sqltext::expr_text(expr),
                    stored,
                };
            }
            ColumnOption::Generated { .. }
            | ColumnOption::Alias(_)
            | ColumnOption::Materialized(_) => {
                return Err(ShimError::Unsupported(
                    "generated columns without an expression".into(),
                ))
            }
            _ => {}
        }
    }
    if primary {
        col.nullable = false;
    }
    if col.ty == SqlType::Json {
        // (The `COLLATE utf8mb4_bin` MariaDB writes for it.)
        collation = None;
    } else if let Some(c) = collation.as_ref().filter(|_| !col.ty.is_binary()) {
        col.collation = c.compare;
    }
    Ok(ColumnDefResult {
        schema: col,
        collation,
        comment,
        default_sql,
        primary,
        unique,
        check,
        references,
    })
}

/// Where MariaDB's `sort_keys` puts a secondary key (a stable sort keeps
/// declaration order within a rank): UNIQUE keys whose columns are all NOT
/// NULL, then other UNIQUE keys, then the rest.
pub(crate) fn key_rank(index: &IndexSchema, columns: &[ColumnSchema]) -> u8 {
    let not_null = index
        .columns
        .iter()
        .all(|&c| columns.get(c).is_some_and(|c| !c.nullable));
    match (index.unique, not_null) {
        (true, true) => 0,
        (true, false) => 1,
        (false, _) => 2,
    }
}

pub(crate) fn positions(schema_cols: &[ColumnSchema], names: &[ast::Ident]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|n| {
            schema_cols
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(&n.value) && !c.is_hidden())
                .ok_or_else(|| ShimError::UnknownColumn(n.value.clone(), "table definition".into()))
        })
        .collect()
}

/// MySQL's name for an unnamed index: its first column, suffixed `_2`,
/// `_3`... when taken.
pub(crate) fn index_name(
    existing: &[IndexSchema],
    columns: &[ColumnSchema],
    cols: &[usize],
) -> String {
    let base = cols
        .first()
        .map(|&i| columns[i].name.clone())
        .unwrap_or_else(|| "idx".into());
    crate::functional_index::free_index_name(existing, base)
}

/// The columns CREATE TABLE makes of `defs` for table `name` (what they
/// declare besides, keys or checks, is left out), for a table made outside
/// CREATE TABLE: a recursive CTE's.
pub(crate) fn declared_columns(
    e: &Engine,
    s: &Session,
    name: &str,
    defs: &[ast::ColumnDef],
) -> Result<Vec<ColumnSchema>> {
    Ok(TableDraft::declare_columns(e, s, name, defs)?.columns)
}

pub fn create_table(e: &Engine, s: &mut Session, ct: CreateTable) -> Result<Output> {
    create_table_with(e, s, ct, &[])
}

/// CREATE TABLE, with the index declarations its text had that sqlparser
/// does not read (functional or ASC/DESC key parts), taken out of it.
pub fn create_table_with(
    e: &Engine,
    s: &mut Session,
    ct: CreateTable,
    functional: &[crate::functional_index::IndexDecl],
) -> Result<Output> {
    let (db, name) = e.resolve(s, &ct.name)?;
    if ct.query.is_some() {
        return Err(ShimError::Unsupported("CREATE TABLE ... SELECT".into()));
    }
    if let Some(engine) = &ct.engine {
        check_engine(s, &engine.name, Some(&name))?;
    }
    if let Some(like) = &ct.like {
        return create_table_like(e, s, &ct, db, name, like);
    }
    let mut draft = TableDraft::declare_columns(e, s, &name, &ct.columns)?;
    // Before the other constraints, as if in its place: a foreign key
    // over its columns needs no index of its own.
    for decl in functional.iter().filter(|d| d.primary) {
        draft.declare_primary(decl)?;
    }
    for tc in &ct.constraints {
        draft.add_constraint(e, s, &name, tc)?;
    }
    if let Some(comment) = &ct.comment {
        draft.notes.comment = comment_text(comment);
    }
    draft.apply_table_collation(&ct)?;
    let TableDraft {
        columns,
        primary,
        indexes,
        checks,
        keys,
        mut notes,
        ..
    } = draft;
    let mut schema = TableSchema {
        id: 0,
        database: db.clone(),
        name,
        columns,
        primary_key: primary,
        indexes,
        version: 0,
    };
    add_functional_indexes(&mut schema, &mut notes, functional)?;
    // MariaDB keeps keys in this order (SHOW CREATE TABLE shows it), and
    // checks UNIQUE keys in it: which row ON DUPLICATE KEY UPDATE updates
    // when a row collides with several, which key 1062 names.
    let columns = &schema.columns;
    schema.indexes.sort_by_key(|i| key_rank(i, columns));
    if !e.storage.databases().contains(&db) {
        return Err(ShimError::UnknownDatabase(db));
    }
    if ct.if_not_exists && table_exists_note(e, s, &db, &schema.name) {
        return Ok(Output::ok());
    }
    crate::checks::validate(&schema, &checks)?;
    let created = e.storage.create_table(schema, ct.if_not_exists)?;
    crate::checks::store(&e.storage, &e.checks, &created, &checks)?;
    crate::table_notes::store(&e.storage, created.id, &notes)?;
    if let Some(n) = crate::table_options::auto_increment(&ct.table_properties) {
        // `AUTO_INCREMENT = n`: the first generated value is n.
        e.storage.raise_auto_increment(created.id, n)?;
    }
    if !keys.is_empty() {
        if let Err(err) = crate::foreign_keys::store(e, s, &created, &keys) {
            // A key naming a missing parent fails CREATE TABLE as a whole.
            let _ = e.storage.drop_table(&created.database, &created.name);
            crate::checks::forget(&e.storage, &e.checks, created.id)?;
            crate::table_notes::forget(&e.storage, created.id)?;
            return Err(err);
        }
    }
    if ct.temporary {
        crate::temporary_tables::record(&e.storage, created.id)?;
        e.temporary_tables.add(
            &created.database,
            &created.name,
            s.connection_id,
            created.id,
        );
    }
    Ok(Output::ok())
}

/// `CREATE TABLE db.name LIKE like`: `like`'s schema, CHECK constraints and
/// notes under the new name.
fn create_table_like(
    e: &Engine,
    s: &mut Session,
    ct: &CreateTable,
    db: String,
    name: String,
    like: &ast::ObjectName,
) -> Result<Output> {
    let (ldb, lname) = e.resolve(s, like)?;
    // `CREATE TEMPORARY TABLE t LIKE t`: MariaDB's 1066 (the name is the
    // connection's temporary table and the base table at once).
    if ct.temporary
        && ldb == db
        && crate::temporary_names::visible_name(s.connection_id, &name) == lname
    {
        return Err(ShimError::Wire(WireError {
            code: error::ER_NONUNIQ_TABLE,
            message: format!("Not unique table/alias: '{lname}'"),
        }));
    }
    let src = e
        .storage
        .table(&ldb, &lname)
        .filter(|_| !e.temporary_tables.foreign(&ldb, &lname, s.connection_id))
        .ok_or(ShimError::UnknownTable {
            database: ldb,
            table: lname,
        })?;
    let mut schema = (*src).clone();
    schema.id = 0;
    schema.database = db;
    schema.name = name;
    schema.version = 0;
    for i in &mut schema.indexes {
        i.id = 0;
    }
    if ct.if_not_exists && table_exists_note(e, s, &schema.database, &schema.name) {
        return Ok(Output::ok());
    }
    let declared =
        crate::checks::regenerated(&schema.name, crate::checks::load(&e.storage, src.id)?);
    let t = e.storage.create_table(schema, ct.if_not_exists)?;
    crate::checks::store(&e.storage, &e.checks, &t, &declared)?;
    let notes = crate::table_notes::load(&e.storage, src.id)?;
    crate::table_notes::store(&e.storage, t.id, &notes)?;
    if ct.temporary {
        crate::temporary_tables::record(&e.storage, t.id)?;
        e.temporary_tables
            .add(&t.database, &t.name, s.connection_id, t.id);
    }
    e.dataflow.table_changed(t.id);
    Ok(Output::ok())
}

/// A new table as its CREATE TABLE declares it, column by column and
/// constraint by constraint, before it becomes a [`TableSchema`].
struct TableDraft {
    columns: Vec<ColumnSchema>,
    primary: Option<Vec<usize>>,
    indexes: Vec<IndexSchema>,
    checks: Vec<CheckConstraint>,
    keys: Vec<ForeignKey>,
    /// Per column: whether it declares its own collation.
    own_collation: Vec<bool>,
    notes: TableNotes,
}

impl TableDraft {
    /// The columns of table `name` (its name for the foreign keys they
    /// declare), with what each declares inline: PRIMARY KEY, UNIQUE,
    /// REFERENCES, CHECK, COMMENT.
    fn declare_columns(
        e: &Engine,
        s: &Session,
        name: &str,
        defs: &[ast::ColumnDef],
    ) -> Result<TableDraft> {
        let mut draft = TableDraft {
            columns: Vec::new(),
            primary: None,
            indexes: Vec::new(),
            checks: Vec::new(),
            keys: Vec::new(),
            own_collation: Vec::new(),
            notes: TableNotes::default(),
        };
        let mut uniques: Vec<usize> = Vec::new();
        for def in defs {
            let r = column_def(e, s, def)?;
            draft.own_collation.push(r.collation.is_some());
            draft
                .notes
                .set_column_collation(&r.schema.name, r.collation.as_ref());
            draft.notes.set_column_comment(&r.schema.name, &r.comment);
            draft
                .notes
                .set_default_expression(&r.schema.name, r.default_sql.as_deref());
            if draft
                .columns
                .iter()
                .any(|c: &ColumnSchema| c.name.eq_ignore_ascii_case(&r.schema.name))
            {
                return Err(StorageError::ColumnExists(r.schema.name).into());
            }
            if r.primary {
                if draft.primary.is_some() {
                    return Err(ShimError::MultiplePrimaryKey);
                }
                draft.primary = Some(vec![draft.columns.len()]);
            }
            if r.unique {
                uniques.push(draft.columns.len());
            }
            if let Some(rf) = r.references {
                let key = ForeignKey::from_ast(
                    e,
                    s,
                    name,
                    &draft.keys,
                    crate::foreign_keys::KeyDeclaration {
                        name: None,
                        columns: std::slice::from_ref(&def.name),
                        parent: &rf.parent,
                        parent_columns: &rf.columns,
                        on_delete: rf.on_delete,
                        on_update: rf.on_update,
                    },
                )?;
                draft.keys.push(key);
            }
            if let Some(check) = r.check {
                let declared = check.name.as_deref();
                draft.checks.push(CheckConstraint {
                    name: crate::checks::table_check_name(name, &draft.checks, declared)?,
                    sql: check.sql,
                    column: Some(r.schema.name.clone()),
                });
            }
            draft.columns.push(r.schema);
        }
        for c in &uniques {
            let name = index_name(&draft.indexes, &draft.columns, &[*c]);
            draft.indexes.push(IndexSchema {
                id: 0,
                name,
                columns: vec![*c],
                unique: true,
            });
        }
        Ok(draft)
    }

    /// Adds one table constraint of table `name`.
    fn add_constraint(
        &mut self,
        e: &Engine,
        s: &Session,
        name: &str,
        tc: &TableConstraint,
    ) -> Result<()> {
        match tc {
            TableConstraint::PrimaryKey { columns: cols, .. } => {
                let pos = positions(&self.columns, cols)?;
                self.set_primary(pos)?;
            }
            TableConstraint::Unique {
                name,
                index_name: iname,
                columns: cols,
                ..
            } => {
                let declared = iname.as_ref().or(name.as_ref());
                self.add_index(declared, cols, true)?;
            }
            TableConstraint::Index {
                name,
                columns: cols,
                ..
            } => self.add_index(name.as_ref(), cols, false)?,
            TableConstraint::ForeignKey {
                name: kname,
                columns: cols,
                ..
            } => {
                let Some(decl) = KeyDeclaration::of_constraint(tc) else {
                    return Ok(());
                };
                let key = ForeignKey::from_ast(e, s, name, &self.keys, decl)?;
                self.index_foreign_key(kname.as_ref(), cols)?;
                self.keys.push(key);
            }
            TableConstraint::Check {
                name: declared,
                expr,
            } => {
                let declared = declared.as_ref().map(|n| n.value.as_str());
                self.checks.push(CheckConstraint {
                    name: crate::checks::table_check_name(name, &self.checks, declared)?,
                    sql: crate::sqltext::expr_text(expr),
                    column: None,
                });
            }
            TableConstraint::FulltextOrSpatial { .. } => {
                return Err(ShimError::Unsupported("FULLTEXT/SPATIAL indexes".into()))
            }
        }
        Ok(())
    }

    /// The primary key a declaration sqlparser did not read declares
    /// (with DESC parts), its parts' order noted.
    fn declare_primary(&mut self, decl: &crate::functional_index::IndexDecl) -> Result<()> {
        let pos = crate::functional_index::primary_key(&self.columns, decl)?;
        let descending = decl.descending_columns(&self.columns, &pos);
        let prefixes = decl.prefix_columns(&self.columns, &pos);
        self.set_primary(pos)?;
        self.notes
            .add_index(crate::functional_index::PRIMARY, &descending);
        self.notes
            .set_prefixes(crate::functional_index::PRIMARY, &prefixes);
        Ok(())
    }

    /// Makes the columns at `pos` the primary key (NOT NULL); 1068 if
    /// there is one.
    fn set_primary(&mut self, pos: Vec<usize>) -> Result<()> {
        if self.primary.is_some() {
            return Err(ShimError::MultiplePrimaryKey);
        }
        for &p in &pos {
            self.columns[p].nullable = false;
        }
        self.primary = Some(pos);
        Ok(())
    }

    /// A UNIQUE or plain index over `cols`, named `declared` or after its
    /// first column.
    fn add_index(
        &mut self,
        declared: Option<&ast::Ident>,
        cols: &[ast::Ident],
        unique: bool,
    ) -> Result<()> {
        let pos = positions(&self.columns, cols)?;
        let n = declared
            .map(|i| i.value.clone())
            .unwrap_or_else(|| index_name(&self.indexes, &self.columns, &pos));
        self.indexes.push(IndexSchema {
            id: 0,
            name: n,
            columns: pos,
            unique,
        });
        Ok(())
    }

    /// InnoDB indexes a foreign key's columns (named after the constraint
    /// when it has a name) unless an index starts with them.
    fn index_foreign_key(&mut self, kname: Option<&ast::Ident>, cols: &[ast::Ident]) -> Result<()> {
        let pos = positions(&self.columns, cols)?;
        let covered = self.primary.as_ref().is_some_and(|p| p.starts_with(&pos))
            || self.indexes.iter().any(|i| i.columns.starts_with(&pos));
        if covered {
            return Ok(());
        }
        let n = match kname {
            Some(k)
                if !self
                    .indexes
                    .iter()
                    .any(|i| i.name.eq_ignore_ascii_case(&k.value)) =>
            {
                k.value.clone()
            }
            _ => index_name(&self.indexes, &self.columns, &pos),
        };
        self.indexes.push(IndexSchema {
            id: 0,
            name: n,
            columns: pos,
            unique: false,
        });
        Ok(())
    }

    /// The table's `DEFAULT CHARSET`/`COLLATE`: noted as the table's, and
    /// the collation of its text columns that declare none of their own.
    fn apply_table_collation(&mut self, ct: &CreateTable) -> Result<()> {
        if ct.collation.is_none() && ct.default_charset.is_none() {
            return Ok(());
        }
        let spec = crate::table_options::CharsetSpec {
            charset: ct.default_charset.clone(),
            collation: ct.collation.clone(),
            convert: false,
        };
        let coll = spec.collation()?;
        self.notes.set_collation(&coll);
        for (col, _) in self
            .columns
            .iter_mut()
            .zip(&self.own_collation)
            .filter(|(c, own)| c.ty.is_text() && !**own)
        {
            col.collation = coll.compare;
            self.notes.set_column_collation(&col.name, Some(&coll));
        }
        Ok(())
    }
}

/// Adds the functional and ASC/DESC key parts' indexes sqlparser did not
/// read to `schema` (not a PRIMARY KEY: [`TableDraft::declare_primary`]),
/// each one's DESC parts to `notes`.
fn add_functional_indexes(
    schema: &mut TableSchema,
    notes: &mut TableNotes,
    functional: &[crate::functional_index::IndexDecl],
) -> Result<()> {
    for decl in functional.iter().filter(|d| !d.primary) {
        let index = crate::functional_index::add_index(schema, decl)?;
        if schema.index(&index.name).is_some() {
            return Err(wire((
                error::ER_DUP_KEYNAME,
                format!("Duplicate key name '{}'", index.name),
            )));
        }
        notes.add_index(
            &index.name,
            &decl.descending_columns(&schema.columns, &index.columns),
        );
        notes.set_prefixes(
            &index.name,
            &decl.prefix_columns(&schema.columns, &index.columns),
        );
        schema.indexes.push(index);
    }
    Ok(())
}

/// Storage engines MySQL and MariaDB ship: a table naming one is created
/// (Ladle stores every table its own way, SHOW CREATE TABLE says InnoDB).
const KNOWN_ENGINES: &[&str] = &[
    "InnoDB",
    "MyISAM",
    "MEMORY",
    "HEAP",
    "Aria",
    "CSV",
    "ARCHIVE",
    "BLACKHOLE",
    "MRG_MyISAM",
    "MERGE",
];

/// `ENGINE = name`: an engine no server has is error 1286 under
/// NO_ENGINE_SUBSTITUTION (in the default sql_mode); without it the
/// statement goes on with a warning, and CREATE TABLE `created` says it
/// uses the default engine (as MariaDB does).
pub fn check_engine(s: &mut Session, name: &str, created: Option<&str>) -> Result<()> {
    if KNOWN_ENGINES.iter().any(|e| e.eq_ignore_ascii_case(name)) {
        return Ok(());
    }
    let unknown = format!("Unknown storage engine '{name}'");
    // TRADITIONAL includes NO_ENGINE_SUBSTITUTION (Ladle keeps the mode as
    // set, unexpanded).
    let no_substitution = ["NO_ENGINE_SUBSTITUTION", "TRADITIONAL"]
        .iter()
        .any(|m| crate::vars::sql_mode_has(s, m));
    if no_substitution {
        return Err(wire((error::ER_UNKNOWN_STORAGE_ENGINE, unknown)));
    }
    s.add_warning("Warning", 1286, unknown);
    if let Some(table) = created {
        s.add_warning(
            "Warning",
            1266,
            format!("Using storage engine InnoDB for table '{table}'"),
        );
    }
    Ok(())
}

/// The text of a table's `COMMENT [=] 'text'`.
fn comment_text(c: &ast::CommentDef) -> String {
    match c {
        ast::CommentDef::WithEq(t)
        | ast::CommentDef::WithoutEq(t)
        | ast::CommentDef::AfterColumnDefsWithoutEq(t) => t.clone(),
    }
}

/// For `CREATE TABLE IF NOT EXISTS`: whether the table exists, noting it
/// (Note 1050) as MySQL does.
fn table_exists_note(e: &Engine, s: &mut Session, db: &str, name: &str) -> bool {
    let exists = e.storage.table(db, name).is_some();
    if exists {
        s.warn(1050, format!("Table '{name}' already exists"));
    }
    exists
}

/// Table `db`.`table`, or 1146.
pub(crate) fn existing_table(
    e: &Engine,
    db: &str,
    table: &str,
) -> Result<std::sync::Arc<TableSchema>> {
    e.storage
        .table(db, table)
        .ok_or_else(|| ShimError::UnknownTable {
            database: db.to_string(),
            table: table.to_string(),
        })
}

pub fn drop(
    e: &Engine,
    s: &mut Session,
    kind: ObjectType,
    if_exists: bool,
    names: Vec<ast::ObjectName>,
) -> Result<Output> {
    match kind {
        ObjectType::Table => {
            let mut missing = Vec::new();
            for n in &names {
                let (db, t) = e.resolve(s, n)?;
                // Another connection's temporary table is not there for
                // this one (MySQL's 1051, or a note with IF EXISTS).
                if e.temporary_tables.foreign(&db, &t, s.connection_id) {
                    missing.push(format!("{db}.{t}"));
                    continue;
                }
                if let Some(schema) = e.storage.table(&db, &t) {
                    crate::foreign_keys::check_parent_removable(e, s, &schema, false)?;
                }
                match e.storage.drop_table(&db, &t) {
                    Ok(schema) => {
                        if let Some(id) = e.temporary_tables.remove(&db, &t) {
                            crate::temporary_tables::forget(&e.storage, id)?;
                        }
                        crate::checks::forget(&e.storage, &e.checks, schema.id)?;
                        crate::table_notes::forget(&e.storage, schema.id)?;
                        crate::foreign_keys::forget(e, schema.id)?;
                        e.dataflow.table_changed(schema.id)
                    }
                    Err(StorageError::NoSuchTable { .. })
                    | Err(StorageError::NoSuchDatabase(_)) => {
                        missing.push(format!("{db}.{t}"));
                    }
                    Err(other) => return Err(other.into()),
                }
            }
            if !missing.is_empty() {
                if if_exists {
                    s.warn(1051, format!("Unknown table '{}'", missing.join(",")));
                } else {
                    return Err(wire(error::unknown_table_drop(&missing.join(","))));
                }
            }
            Ok(Output::ok())
        }
        ObjectType::View => {
            let mut missing = Vec::new();
            for n in &names {
                let (db, v) = e.resolve(s, n)?;
                let exists = e
                    .dataflow
                    .named_views(&db)
                    .iter()
                    .any(|x| x.eq_ignore_ascii_case(&v));
                if !exists && if_exists {
                    missing.push(format!("{db}.{v}"));
                    continue;
                }
                e.dataflow.drop_view(&db, &v, if_exists)?;
                e.storage
                    .delete_meta(&crate::exec::view_meta_key(&db, &v))?;
                crate::view_check_option::forget(&e.storage, &db, &v)?;
            }
            if !missing.is_empty() {
                s.warn(4092, format!("Unknown VIEW: '{}'", missing.join(",")));
            }
            Ok(Output::ok())
        }
        ObjectType::Schema => {
            for n in &names {
                drop_db(e, s, &crate::sqltext::last_part(n), if_exists)?;
            }
            Ok(Output::ok())
        }
        other => Err(ShimError::Unsupported(format!("DROP {other}"))),
    }
}

/// A statement-specific wire error smuggled through `ShimError`.
pub(crate) fn wire((code, msg): (error::MysqlCode, String)) -> ShimError {
    ShimError::Wire(WireError { code, message: msg })
}

fn drop_db(e: &Engine, s: &mut Session, name: &str, if_exists: bool) -> Result<u64> {
    if !e.storage.databases().iter().any(|d| d == name) {
        let (code, message) = error::drop_db_missing(name);
        if !if_exists {
            return Err(wire((code, message)));
        }
        s.warn(code.errno, message);
        return Ok(0);
    }
    // The database's named views (CREATE VIEW) go with it; first, so a
    // crash in between leaves a database without views, never views over
    // a database that is gone (which a new database of the same name
    // would list, answering from its new tables).
    for view in e.dataflow.named_views(name) {
        e.dataflow.drop_view(name, &view, true)?;
    }
    let dropped = match e.storage.drop_database(name, if_exists) {
        Ok(d) => d,
        Err(StorageError::NoSuchDatabase(_)) if if_exists => Vec::new(),
        Err(StorageError::NoSuchDatabase(_)) => return Err(wire(error::drop_db_missing(name))),
        Err(other) => return Err(other.into()),
    };
    for id in e.temporary_tables.remove_database(name) {
        crate::temporary_tables::forget(&e.storage, id)?;
    }
    for t in &dropped {
        crate::checks::forget(&e.storage, &e.checks, t.id)?;
        crate::table_notes::forget(&e.storage, t.id)?;
        crate::foreign_keys::forget(e, t.id)?;
        e.dataflow.table_changed(t.id);
    }
    if s.database.as_deref() == Some(name) {
        s.database = None;
    }
    Ok(dropped.len() as u64)
}

/// `CREATE DATABASE|SCHEMA [IF NOT EXISTS] name [options]`.
pub fn create_database(e: &Engine, s: &mut Session, t: &[Token]) -> Result<Output> {
    let mut i = 2;
    let mut if_not_exists = false;
    if word(t, 2).as_deref() == Some("IF") {
        if_not_exists = true;
        i = 5;
    }
    let name = ident(t, i).ok_or_else(|| ShimError::Parse("near CREATE DATABASE".into()))?;
    let existed = e.storage.databases().contains(&name);
    if existed && if_not_exists {
        s.warn(
            error::ER_DB_CREATE_EXISTS.errno,
            format!("Can't create database '{name}'; database exists"),
        );
    }
    e.storage.create_database(&name, if_not_exists)?;
    Ok(Output::affected(u64::from(!existed)))
}

/// `DROP DATABASE|SCHEMA [IF EXISTS] name`.
pub fn drop_database(e: &Engine, s: &mut Session, t: &[Token]) -> Result<Output> {
    let mut i = 2;
    let mut if_exists = false;
    if word(t, 2).as_deref() == Some("IF") {
        if_exists = true;
        i = 4;
    }
    let name = ident(t, i).ok_or_else(|| ShimError::Parse("near DROP DATABASE".into()))?;
    let n = drop_db(e, s, &name, if_exists)?;
    Ok(Output::affected(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn types_of(sql: &str) -> Vec<SqlType> {
        let stmt = Parser::parse_sql(&MySqlDialect {}, sql).unwrap().remove(0);
        let ast::Statement::CreateTable(ct) = stmt else {
            panic!("not create table")
        };
        ct.columns
            .iter()
            .map(|c| map_type(&c.name.value, &c.data_type).unwrap())
            .collect()
    }

    #[test]
    fn mysql_types_map_to_sql_types() {
        let t = types_of(
            "CREATE TABLE t (a TINYINT UNSIGNED, b INT(11), c BIGINT, d DECIMAL(10,2), e VARCHAR(20), \
             f MEDIUMTEXT, g LONGBLOB, h DATETIME, i ENUM('x','y'), j DOUBLE, k BOOL, l YEAR, m TIME, n JSON)",
        );
        assert_eq!(
            t[0],
            SqlType::Int {
                bytes: 1,
                unsigned: true,
                display_width: None,
            }
        );
        assert_eq!(
            t[1],
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            }
        );
        assert_eq!(
            t[2],
            SqlType::Int {
                bytes: 8,
                unsigned: false,
                display_width: None,
            }
        );
        assert_eq!(
            t[3],
            SqlType::Decimal {
                precision: 10,
                scale: 2
            }
        );
        assert_eq!(t[4], SqlType::VarChar(20));
        assert_eq!(t[5], SqlType::Text(16777215));
        assert_eq!(t[6], SqlType::Blob(u32::MAX));
        assert_eq!(t[7], SqlType::DateTime { fsp: 0 });
        assert_eq!(t[8], SqlType::Enum(vec!["x".into(), "y".into()]));
        assert_eq!(t[9], SqlType::Double);
        assert_eq!(
            t[10],
            SqlType::Int {
                bytes: 1,
                unsigned: false,
                display_width: Some(1),
            }
        );
        assert_eq!(t[11], SqlType::Year);
        assert_eq!(t[12], SqlType::Time { fsp: 0 });
        assert_eq!(t[13], SqlType::Json);
    }

    #[test]
    fn declared_widths_and_precisions_are_kept() {
        let t = types_of(
            "CREATE TABLE t (a TINYINT(1), b INT(5) UNSIGNED, c INT(0), d DATETIME(6),              e TIME(3), f TIMESTAMP(2))",
        );
        let int = |bytes, unsigned, display_width| SqlType::Int {
            bytes,
            unsigned,
            display_width,
        };
        assert_eq!(t[0], int(1, false, Some(1)));
        assert_eq!(t[1], int(4, true, Some(5)));
        assert_eq!(t[2], int(4, false, None));
        assert_eq!(t[3], SqlType::DateTime { fsp: 6 });
        assert_eq!(t[4], SqlType::Time { fsp: 3 });
        assert_eq!(t[5], SqlType::Timestamp { fsp: 2 });
        assert_eq!(t[3].sql_name(), "datetime(6)");
        assert_eq!(t[0].sql_name(), "tinyint(1)");
        assert_eq!(t[1].sql_name(), "int(5) unsigned");
    }
}
