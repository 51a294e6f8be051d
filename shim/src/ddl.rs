//! DDL: databases, tables (MySQL column types -> `SqlType`), indexes,
//! ALTER TABLE, DROP. FOREIGN KEY and CHECK constraints are recorded here
//! and enforced by [`crate::foreign_keys`] and [`crate::checks`]; ENGINE=,
//! CHARSET=, COMMENT= and other table options are accepted and ignored.

use std::collections::BTreeMap;

use ladle_common::{
    coerce, Collation, ColumnDefault, ColumnSchema, IndexSchema, Row, SqlType, TableId,
    TableSchema, Value,
};
use ladle_storage::{StorageError, TableChange};
use sqlparser::ast::{
    self, AlterTableOperation, ColumnOption, CreateIndex, CreateTable, DataType, Expr, ObjectType,
    TableConstraint,
};
use sqlparser::tokenizer::Token;

use crate::alter::{Op, Shape};
use crate::checks::{CheckConstraint, TableChecks};
use crate::error::{self, Result, ShimError, WireError};
use crate::exec::{ident, qualified_name, word, Engine, Output};
use crate::foreign_keys::{ForeignKey, KeyDeclaration};
use crate::session::Session;

/// Maps the declared type of column `column` to Ladle's.
pub fn map_type(column: &str, dt: &DataType) -> Result<SqlType> {
    if let DataType::Enum(labels) = dt {
        return Ok(SqlType::Enum(labels.clone()));
    }
    let s = dt.to_string().to_ascii_lowercase();
    let unsigned = s.contains("unsigned");
    let base: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let args: Vec<u64> = match (s.find('('), s.find(')')) {
        (Some(a), Some(b)) if b > a => s[a + 1..b]
            .split(',')
            .filter_map(|x| x.trim().parse().ok())
            .collect(),
        _ => Vec::new(),
    };
    let arg = |i: usize, d: u64| args.get(i).copied().unwrap_or(d);
    let len = |d: u64| -> u32 { u32::try_from(arg(0, d)).unwrap_or(u32::MAX) };
    // A display width is kept only when it is not the type's default, so
    // `INT(11)` and `INT` are the same type (MariaDB shows both as int(11));
    // 0 means the default too.
    let display_width = |bytes: u8| -> Result<Option<u8>> {
        let Some(&w) = args.first() else {
            return Ok(None);
        };
        let w = u8::try_from(w).map_err(|_| {
            wire((
                error::ER_TOO_BIG_DISPLAYWIDTH,
                format!("Display width out of range for '{column}' (max = 255)"),
            ))
        })?;
        let default = SqlType::int_display_width(bytes, unsigned, None);
        Ok((w != 0 && w != default).then_some(w))
    };
    let int = |bytes: u8| -> Result<SqlType> {
        Ok(SqlType::Int {
            bytes,
            unsigned,
            display_width: display_width(bytes)?,
        })
    };
    let fsp = || -> Result<u8> {
        match arg(0, 0) {
            p @ 0..=6 => Ok(p as u8),
            _ => Err(wire((
                error::ER_TOO_BIG_PRECISION,
                format!("Too big precision specified for '{column}'. Maximum is 6"),
            ))),
        }
    };
    Ok(match base.as_str() {
        "tinyint" | "int1" => int(1)?,
        // BOOL is TINYINT(1), as MariaDB shows it.
        "bool" | "boolean" => SqlType::Int {
            bytes: 1,
            unsigned: false,
            display_width: Some(1),
        },
        "smallint" | "int2" => int(2)?,
        "mediumint" | "int3" | "middleint" => int(3)?,
        "int" | "integer" | "int4" => int(4)?,
        "bigint" | "int8" | "serial" => int(8)?,
        "bit" => SqlType::Int {
            bytes: 8,
            unsigned: true,
            display_width: None,
        },
        "float" if arg(0, 0) > 24 => SqlType::Double,
        "float" | "float4" => SqlType::Float,
        "double" | "real" | "float8" => SqlType::Double,
        "decimal" | "numeric" | "dec" | "fixed" => {
            let p = arg(0, 10).min(65) as u8;
            let sc = arg(1, 0).min(30) as u8;
            SqlType::Decimal {
                precision: p.max(sc).max(1),
                scale: sc,
            }
        }
        "character" if s.starts_with("character varying") => SqlType::VarChar(len(255)),
        "char" | "character" | "nchar" => SqlType::Char(len(1)),
        "varchar" | "nvarchar" | "varcharacter" => {
            if args.is_empty() {
                return Err(ShimError::Parse("VARCHAR needs a length".into()));
            }
            SqlType::VarChar(len(255))
        }
        "tinytext" => SqlType::Text(255),
        "text" => SqlType::Text(match arg(0, 65535) {
            0..=255 => 255,
            256..=65535 => 65535,
            65536..=16777215 => 16777215,
            _ => u32::MAX,
        }),
        "mediumtext" | "long" => SqlType::Text(16777215),
        "longtext" => SqlType::Text(u32::MAX),
        "json" => SqlType::Json,
        "binary" => SqlType::Binary(len(1)),
        "varbinary" => SqlType::VarBinary(len(255)),
        "tinyblob" => SqlType::Blob(255),
        "blob" | "bytea" => SqlType::Blob(65535),
        "mediumblob" => SqlType::Blob(16777215),
        "longblob" => SqlType::Blob(u32::MAX),
        "date" => SqlType::Date,
        "datetime" => SqlType::DateTime { fsp: fsp()? },
        "timestamp" => SqlType::Timestamp { fsp: fsp()? },
        "time" => SqlType::Time { fsp: fsp()? },
        "year" => SqlType::Year,
        "uuid" => SqlType::Char(36),
        _ => return Err(ShimError::Unsupported(format!("column type {dt}"))),
    })
}

fn is_current_timestamp(e: &Expr) -> bool {
    let name = match e {
        Expr::Identifier(i) => i.value.to_ascii_lowercase(),
        Expr::Function(f) => f.name.to_string().to_ascii_lowercase(),
        Expr::Nested(e) => return is_current_timestamp(e),
        _ => return false,
    };
    matches!(
        name.as_str(),
        "current_timestamp" | "now" | "localtime" | "localtimestamp"
    )
}

/// A column's DEFAULT `expr`, checked against its type.
fn default_of(e: &Engine, s: &Session, col: &ColumnSchema, expr: &Expr) -> Result<ColumnDefault> {
    if is_current_timestamp(expr) {
        return Ok(ColumnDefault::CurrentTimestamp);
    }
    let v = e.eval_constant(s, expr)?;
    if v.is_null() {
        return Ok(ColumnDefault::None);
    }
    let v = coerce(&v, col).map_err(|_| {
        ShimError::WrongArguments(format!("Invalid default value for '{}'", col.name))
    })?;
    Ok(ColumnDefault::Value(v))
}

/// A column definition with its inline key flags.
struct ColumnDefResult {
    schema: ColumnSchema,
    /// The column names its own CHARACTER SET or COLLATE (the table's
    /// default collation does not apply to it).
    explicit_collation: bool,
    primary: bool,
    unique: bool,
    /// A column-level CHECK condition, as SQL text.
    check: Option<String>,
    /// A column-level REFERENCES (MariaDB honours it as a FOREIGN KEY).
    references: Option<ColumnReference>,
}

/// `REFERENCES parent (cols) [ON DELETE ..] [ON UPDATE ..]` on a column.
struct ColumnReference {
    parent: ast::ObjectName,
    columns: Vec<ast::Ident>,
    on_delete: Option<ast::ReferentialAction>,
    on_update: Option<ast::ReferentialAction>,
}

fn column_def(e: &Engine, s: &Session, def: &ast::ColumnDef) -> Result<ColumnDefResult> {
    let ty = map_type(&def.name.value, &def.data_type)?;
    let mut col = ColumnSchema::new(def.name.value.clone(), ty);
    let mut primary = false;
    let mut unique = false;
    let mut check = None;
    let mut references = None;
    if let Some(c) = &def.collation {
        if let Some(coll) = Collation::from_name(&c.to_string()) {
            col.collation = coll;
        }
    }
    if matches!(col.ty, SqlType::Timestamp { .. }) {
        // Ladle does not emulate explicit_defaults_for_timestamp=OFF.
    }
    for opt in &def.options {
        match &opt.option {
            ColumnOption::Null => col.nullable = true,
            ColumnOption::NotNull => col.nullable = false,
            ColumnOption::Default(expr) => col.default = default_of(e, s, &col, expr)?,
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
                if let Some(coll) = Collation::from_name(&cs.to_string()) {
                    if col.collation != Collation::Binary || !col.ty.is_binary() {
                        col.collation = coll;
                    }
                }
            }
            ColumnOption::OnUpdate(expr) if is_current_timestamp(expr) => {
                col.on_update_current_timestamp = true;
            }
            ColumnOption::Check(expr) => check = Some(expr.to_string()),
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
            ColumnOption::Comment(_) => {}
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
                    expr: expr.to_string(),
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
    let explicit_collation = def.collation.is_some()
        || def
            .options
            .iter()
            .any(|o| matches!(o.option, ColumnOption::CharacterSet(_)));
    Ok(ColumnDefResult {
        schema: col,
        explicit_collation,
        primary,
        unique,
        check,
        references,
    })
}

/// Where MariaDB's `sort_keys` puts a secondary key (a stable sort keeps
/// declaration order within a rank): UNIQUE keys whose columns are all NOT
/// NULL, then other UNIQUE keys, then the rest.
fn key_rank(index: &IndexSchema, columns: &[ColumnSchema]) -> u8 {
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

fn positions(schema_cols: &[ColumnSchema], names: &[ast::Ident]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|n| {
            schema_cols
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(&n.value))
                .ok_or_else(|| ShimError::UnknownColumn(n.value.clone(), "table definition".into()))
        })
        .collect()
}

/// MySQL's name for an unnamed index: its first column, suffixed `_2`,
/// `_3`... when taken.
fn index_name(existing: &[IndexSchema], columns: &[ColumnSchema], cols: &[usize]) -> String {
    let base = cols
        .first()
        .map(|&i| columns[i].name.clone())
        .unwrap_or_else(|| "idx".into());
    if !existing.iter().any(|i| i.name.eq_ignore_ascii_case(&base)) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|c| !existing.iter().any(|i| i.name.eq_ignore_ascii_case(c)))
        .unwrap_or(base)
}

pub fn create_table(e: &Engine, s: &mut Session, ct: CreateTable) -> Result<Output> {
    let (db, name) = e.resolve(s, &ct.name)?;
    if ct.query.is_some() {
        return Err(ShimError::Unsupported("CREATE TABLE ... SELECT".into()));
    }
    if let Some(like) = &ct.like {
        let (ldb, lname) = e.resolve(s, like)?;
        let src = e
            .storage
            .table(&ldb, &lname)
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
        let declared = crate::checks::load(&e.storage, src.id)?;
        let t = e.storage.create_table(schema, ct.if_not_exists)?;
        crate::checks::store(&e.storage, &e.checks, &t, &declared)?;
        e.dataflow.table_changed(t.id);
        return Ok(Output::ok());
    }
    let mut columns = Vec::new();
    let mut primary: Option<Vec<usize>> = None;
    let mut uniques: Vec<usize> = Vec::new();
    let mut checks: Vec<CheckConstraint> = Vec::new();
    let mut keys: Vec<ForeignKey> = Vec::new();
    let mut own_collation: Vec<bool> = Vec::new();
    for def in &ct.columns {
        let r = column_def(e, s, def)?;
        own_collation.push(r.explicit_collation);
        if columns
            .iter()
            .any(|c: &ColumnSchema| c.name.eq_ignore_ascii_case(&r.schema.name))
        {
            return Err(StorageError::ColumnExists(r.schema.name).into());
        }
        if r.primary {
            if primary.is_some() {
                return Err(ShimError::MultiplePrimaryKey);
            }
            primary = Some(vec![columns.len()]);
        }
        if r.unique {
            uniques.push(columns.len());
        }
        if let Some(rf) = r.references {
            let key = ForeignKey::from_ast(
                e,
                s,
                &name,
                &keys,
                crate::foreign_keys::KeyDeclaration {
                    name: None,
                    columns: std::slice::from_ref(&def.name),
                    parent: &rf.parent,
                    parent_columns: &rf.columns,
                    on_delete: rf.on_delete,
                    on_update: rf.on_update,
                },
            )?;
            keys.push(key);
        }
        if let Some(sql) = r.check {
            checks.push(CheckConstraint {
                name: r.schema.name.clone(),
                sql,
                column: Some(r.schema.name.clone()),
            });
        }
        columns.push(r.schema);
    }
    let mut indexes: Vec<IndexSchema> = Vec::new();
    for c in &uniques {
        let name = index_name(&indexes, &columns, &[*c]);
        indexes.push(IndexSchema {
            id: 0,
            name,
            columns: vec![*c],
            unique: true,
        });
    }
    for tc in &ct.constraints {
        match tc {
            TableConstraint::PrimaryKey { columns: cols, .. } => {
                if primary.is_some() {
                    return Err(ShimError::MultiplePrimaryKey);
                }
                let pos = positions(&columns, cols)?;
                for &p in &pos {
                    columns[p].nullable = false;
                }
                primary = Some(pos);
            }
            TableConstraint::Unique {
                name,
                index_name: iname,
                columns: cols,
                ..
            } => {
                let pos = positions(&columns, cols)?;
                let n = iname
                    .as_ref()
                    .or(name.as_ref())
                    .map(|i| i.value.clone())
                    .unwrap_or_else(|| index_name(&indexes, &columns, &pos));
                indexes.push(IndexSchema {
                    id: 0,
                    name: n,
                    columns: pos,
                    unique: true,
                });
            }
            TableConstraint::Index {
                name,
                columns: cols,
                ..
            } => {
                let pos = positions(&columns, cols)?;
                let n = name
                    .as_ref()
                    .map(|i| i.value.clone())
                    .unwrap_or_else(|| index_name(&indexes, &columns, &pos));
                indexes.push(IndexSchema {
                    id: 0,
                    name: n,
                    columns: pos,
                    unique: false,
                });
            }
            TableConstraint::ForeignKey {
                name: kname,
                columns: cols,
                ..
            } => {
                let Some(decl) = KeyDeclaration::of_constraint(tc) else {
                    continue;
                };
                let key = ForeignKey::from_ast(e, s, &name, &keys, decl)?;
                // InnoDB indexes the key's columns (named after the
                // constraint when it has a name) unless an index starts
                // with them.
                let pos = positions(&columns, cols)?;
                let covered = primary.as_ref().is_some_and(|p| p.starts_with(&pos))
                    || indexes.iter().any(|i| i.columns.starts_with(&pos));
                if !covered {
                    let n = match kname {
                        Some(k)
                            if !indexes
                                .iter()
                                .any(|i| i.name.eq_ignore_ascii_case(&k.value)) =>
                        {
                            k.value.clone()
                        }
                        _ => index_name(&indexes, &columns, &pos),
                    };
                    indexes.push(IndexSchema {
                        id: 0,
                        name: n,
                        columns: pos,
                        unique: false,
                    });
                }
                keys.push(key);
            }
            TableConstraint::Check { name, expr } => {
                let name = match name {
                    Some(n) => n.value.clone(),
                    None => crate::checks::unnamed(&checks),
                };
                checks.push(CheckConstraint {
                    name,
                    sql: expr.to_string(),
                    column: None,
                });
            }
            TableConstraint::FulltextOrSpatial { .. } => {
                return Err(ShimError::Unsupported("FULLTEXT/SPATIAL indexes".into()))
            }
        }
    }
    if let Some(c) = &ct.collation {
        if let Some(coll) = Collation::from_name(c) {
            // The table's collation is its columns' default: a column
            // declaring its own keeps it.
            for (col, _) in columns
                .iter_mut()
                .zip(&own_collation)
                .filter(|(c, own)| c.ty.is_text() && !**own)
            {
                col.collation = coll;
            }
        }
    }
    // MariaDB keeps keys in this order (SHOW CREATE TABLE shows it), and
    // checks UNIQUE keys in it: which row ON DUPLICATE KEY UPDATE updates
    // when a row collides with several, which key 1062 names.
    indexes.sort_by_key(|i| key_rank(i, &columns));
    let schema = TableSchema {
        id: 0,
        database: db.clone(),
        name,
        columns,
        primary_key: primary,
        indexes,
        version: 0,
    };
    if !e.storage.databases().contains(&db) {
        return Err(ShimError::UnknownDatabase(db));
    }
    if ct.if_not_exists && table_exists_note(e, s, &db, &schema.name) {
        return Ok(Output::ok());
    }
    crate::checks::validate(&schema, &checks)?;
    let created = e.storage.create_table(schema, ct.if_not_exists)?;
    crate::checks::store(&e.storage, &e.checks, &created, &checks)?;
    if !keys.is_empty() {
        if let Err(err) = crate::foreign_keys::store(e, s, &created, &keys) {
            // A key naming a missing parent fails CREATE TABLE as a whole.
            let _ = e.storage.drop_table(&created.database, &created.name);
            crate::checks::forget(&e.storage, &e.checks, created.id)?;
            return Err(err);
        }
    }
    Ok(Output::ok())
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
fn existing_table(e: &Engine, db: &str, table: &str) -> Result<std::sync::Arc<TableSchema>> {
    e.storage
        .table(db, table)
        .ok_or_else(|| ShimError::UnknownTable {
            database: db.to_string(),
            table: table.to_string(),
        })
}

pub fn create_index(e: &Engine, s: &mut Session, ci: CreateIndex) -> Result<Output> {
    let (db, table) = e.resolve(s, &ci.table_name)?;
    let schema = existing_table(e, &db, &table)?;
    let names: Vec<ast::Ident> = ci
        .columns
        .iter()
        .map(|o| match &o.expr {
            Expr::Identifier(i) => Ok(i.clone()),
            other => Err(ShimError::Unsupported(format!(
                "index on expression {other}"
            ))),
        })
        .collect::<Result<_>>()?;
    let pos = positions(&schema.columns, &names)?;
    let name = ci
        .name
        .as_ref()
        .map(crate::exec::last_part)
        .unwrap_or_else(|| index_name(&schema.indexes, &schema.columns, &pos));
    if ci.if_not_exists && schema.index(&name).is_some() {
        s.warn(1061, format!("Duplicate key name '{name}'"));
        return Ok(Output::ok());
    }
    let t = e.storage.create_index(
        &db,
        &table,
        IndexSchema {
            id: 0,
            name,
            columns: pos,
            unique: ci.unique,
        },
    )?;
    e.dataflow.table_changed(t.id);
    Ok(Output::ok())
}

/// `ALTER TABLE ...` from its text (MySQL's forms sqlparser does not
/// parse: DROP INDEX, DROP FOREIGN KEY, RENAME INDEX, table options).
pub fn alter_statement(e: &Engine, s: &mut Session, sql: &str) -> Result<Output> {
    let (name, ops) = crate::alter::parse(sql)?;
    alter_table(e, s, &name, ops)
}

/// `RENAME TABLE a TO b [, c TO d ...]`, one pair after another (so
/// `a TO tmp, b TO a, tmp TO b` swaps two tables).
pub fn rename_tables(e: &Engine, s: &mut Session, sql: &str) -> Result<Output> {
    for (from, to) in crate::alter::parse_rename(sql)? {
        alter_table(e, s, &from, vec![Op::RenameTable(to)])?;
    }
    Ok(Output::ok())
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
    };
    for op in ops {
        alter.apply(s, op)?;
    }
    alter.finish(s, &db, &table)
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
            Op::Parsed(A::ChangeColumn {
                old_name,
                new_name,
                data_type,
                options,
                column_position,
            }) => self.redefine(
                s,
                &old_name.value,
                new_name,
                data_type,
                options,
                column_position,
            ),
            Op::Parsed(A::ModifyColumn {
                col_name,
                data_type,
                options,
                column_position,
            }) => self.redefine(
                s,
                &col_name.value.clone(),
                col_name,
                data_type,
                options,
                column_position,
            ),
            Op::Parsed(A::AlterColumn { column_name, op }) => {
                let at = self.shape.column(&column_name.value)?;
                let column = &mut self.shape.schema.columns[at];
                match op {
                    ast::AlterColumnOperation::SetDefault { value } => {
                        column.default = default_of(self.e, s, column, &value)?;
                    }
                    ast::AlterColumnOperation::DropDefault => {
                        column.default = ColumnDefault::None;
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
            Op::Parsed(A::DropPrimaryKey) => self.shape.drop_primary_key(),
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
                self.shape.add_index(IndexSchema { name: to, ..index })
            }
            Op::Parsed(A::RenameTable { table_name }) | Op::RenameTable(table_name) => {
                self.rename_table(s, &table_name)
            }
            Op::AutoIncrement(n) => {
                self.auto_increment = Some(n);
                Ok(())
            }
            Op::Ignored => Ok(()),
            Op::Unsupported(what) => Err(ShimError::Unsupported(what)),
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
        let r = column_def(self.e, s, def)?;
        let at = self.shape.add_column(r.schema, position)?;
        self.column_constraints(s, at, r.primary, r.unique, r.check, r.references)
    }

    /// A column definition's inline PRIMARY KEY, UNIQUE, CHECK and
    /// REFERENCES, for column `at`.
    fn column_constraints(
        &mut self,
        s: &mut Session,
        at: usize,
        primary: bool,
        unique: bool,
        check: Option<String>,
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
        if let Some(sql) = check {
            self.shape.checks.push(CheckConstraint {
                name: name.clone(),
                sql,
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
        let Some(at) = self.shape.schema.column_index(name) else {
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

    /// MODIFY / CHANGE: column `old_name` takes the new definition (and
    /// `new_name`), then moves to `position`.
    fn redefine(
        &mut self,
        s: &mut Session,
        old_name: &str,
        new_name: ast::Ident,
        data_type: DataType,
        options: Vec<ColumnOption>,
        position: Option<ast::MySQLColumnPosition>,
    ) -> Result<()> {
        let at = self.shape.column(old_name)?;
        let def = ast::ColumnDef {
            name: new_name.clone(),
            data_type,
            collation: None,
            options: options
                .into_iter()
                .map(|option| ast::ColumnOptionDef { name: None, option })
                .collect(),
        };
        let r = column_def(self.e, s, &def)?;
        self.rename_column(at, &new_name.value)?;
        self.shape
            .redefine_column(at, r.schema, r.explicit_collation);
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
                let name = match name {
                    Some(n) => n.value.clone(),
                    None => crate::checks::unnamed(&self.shape.checks),
                };
                if self
                    .shape
                    .checks
                    .iter()
                    .any(|c| c.name.eq_ignore_ascii_case(&name))
                {
                    return Err(wire((
                        error::ER_DUP_CONSTRAINT_NAME,
                        format!("Duplicate CHECK constraint name '{name}'"),
                    )));
                }
                self.shape.checks.push(CheckConstraint {
                    name,
                    sql: expr.to_string(),
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

    fn drop_index(&mut self, s: &mut Session, name: &str, if_exists: bool) -> Result<()> {
        if name.eq_ignore_ascii_case("PRIMARY") {
            return self.shape.drop_primary_key();
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
        self.shape.schema.indexes.remove(at);
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
            e.storage.note_auto_increment(id, n.saturating_sub(1))?;
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
                if let Some(schema) = e.storage.table(&db, &t) {
                    crate::foreign_keys::check_parent_removable(e, s, &schema, false)?;
                }
                match e.storage.drop_table(&db, &t) {
                    Ok(schema) => {
                        crate::checks::forget(&e.storage, &e.checks, schema.id)?;
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
            }
            if !missing.is_empty() {
                s.warn(4092, format!("Unknown VIEW: '{}'", missing.join(",")));
            }
            Ok(Output::ok())
        }
        ObjectType::Schema => {
            for n in &names {
                drop_db(e, s, &crate::exec::last_part(n), if_exists)?;
            }
            Ok(Output::ok())
        }
        other => Err(ShimError::Unsupported(format!("DROP {other}"))),
    }
}

/// A statement-specific wire error smuggled through `ShimError`.
fn wire((code, msg): (error::MysqlCode, String)) -> ShimError {
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
    for t in &dropped {
        crate::checks::forget(&e.storage, &e.checks, t.id)?;
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
    let missing = e
        .storage
        .table(&db, &table)
        .is_some_and(|schema| schema.index(&name).is_none());
    if if_exists && missing {
        s.warn(
            error::ER_CANT_DROP_FIELD_OR_KEY.errno,
            format!("Can't DROP INDEX `{name}`; check that it exists"),
        );
        return Ok(Output::ok());
    }
    let schema = e.storage.drop_index(&db, &table, &name)?;
    e.dataflow.table_changed(schema.id);
    Ok(Output::ok())
}

/// The value an omitted column gets.
pub fn default_value(col: &ColumnSchema) -> Option<Value> {
    match &col.default {
        ColumnDefault::Value(v) => Some(v.clone()),
        ColumnDefault::CurrentTimestamp => Some(current_timestamp()),
        // Computed once the row's other columns are known.
        ColumnDefault::Generated { .. } => Some(Value::Null),
        ColumnDefault::None if col.nullable || col.auto_increment => Some(Value::Null),
        // An ENUM NOT NULL defaults to its first label (MariaDB).
        ColumnDefault::None => match &col.ty {
            SqlType::Enum(labels) => labels.first().map(Value::text),
            _ => None,
        },
    }
}

/// CURRENT_TIMESTAMP as a column value: local time in microseconds; a
/// column keeps as many fractional digits as its precision (coercion
/// truncates, so DATETIME gets whole seconds, DATETIME(6) all six).
pub fn current_timestamp() -> Value {
    let now = chrono::Local::now().naive_local();
    Value::DateTime(ladle_common::truncate_datetime(now, 6))
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
