//! What each statement needs of a stored account's privileges, checked
//! before it runs (the superuser's sessions are not checked). Errors as
//! MariaDB gives them: 1142 for a table, 1044 for a database (USE,
//! CREATE/DROP DATABASE), 1227 for server administration.
//!
//! Tables are found from the parsed statement (every relation it names,
//! `information_schema` excepted and CTE names skipped); a statement the
//! SQL parser does not read is checked from its words instead (every name
//! after FROM, JOIN, INTO, UPDATE or TABLE), so nothing unparsed runs
//! unchecked.

use sqlparser::ast::{self, Statement};
use sqlparser::tokenizer::Token;

use crate::accounts::{self as acc, Grantee, Privs};
use crate::error::{self, ShimError, WireError};
use crate::exec::Engine;
use crate::session::Session;
use crate::tokens::{qualified_name, word};

/// One thing a statement needs.
#[derive(Clone, Debug, PartialEq)]
enum Need {
    Table(Privs, String, String),
    Database(Privs, String),
    Global(Privs),
}

fn wire(code: crate::error::MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

/// A table-level denial (1142) as MariaDB words it.
pub fn table_denied(s: &Session, command: &str, db: &str, table: &str) -> ShimError {
    wire(
        error::ER_TABLEACCESS_DENIED,
        format!(
            "{command} command denied to user '{}'@'{}' for table `{db}`.`{table}`",
            s.user, s.host
        ),
    )
}

/// A database-level denial (1044).
pub fn database_denied(g: &Grantee, db: &str) -> ShimError {
    wire(
        error::ER_DBACCESS_DENIED,
        format!(
            "Access denied for user '{}'@'{}' to database '{db}'",
            g.user, g.host
        ),
    )
}

/// A server-level denial (1227).
pub fn global_denied(privilege: &str) -> ShimError {
    wire(
        error::ER_SPECIFIC_ACCESS_DENIED,
        format!("Access denied; you need (at least one of) the {privilege} privilege(s) for this operation"),
    )
}

/// Whether the session may act with global privilege `p` (the superuser
/// always may).
pub fn has_global(e: &Engine, s: &Session, p: Privs) -> bool {
    match &s.grantee {
        None => true,
        Some(g) => e.accounts.global(g) & p != 0,
    }
}

/// Whether the session may see database `db` (SHOW DATABASES, USE).
pub fn sees_database(e: &Engine, s: &Session, db: &str) -> bool {
    match &s.grantee {
        None => true,
        Some(g) => db.eq_ignore_ascii_case("information_schema") || e.accounts.sees_database(g, db),
    }
}

/// Whether the session holds any privilege on `db`.`table` (SHOW TABLES
/// lists it, DESCRIBE shows it).
pub fn sees_table(e: &Engine, s: &Session, db: &str, table: &str) -> bool {
    match &s.grantee {
        None => true,
        Some(g) => {
            db.eq_ignore_ascii_case("information_schema")
                || e.accounts.privileges(g, db, Some(table)) & acc::OBJECT_PRIVS != 0
        }
    }
}

/// USE / COM_INIT_DB / the handshake's database: 1044 unless the account
/// holds something in it.
pub fn check_use(e: &Engine, s: &Session, db: &str) -> Result<(), ShimError> {
    match &s.grantee {
        Some(g) if !sees_database(e, s, db) => Err(database_denied(g, db)),
        _ => Ok(()),
    }
}

/// Checks statement `sql` for the session's account before it runs (or
/// each time a prepared statement executes); `Ok` at once for the
/// superuser.
pub fn check_sql(e: &Engine, s: &Session, sql: &str) -> Result<(), ShimError> {
    let foreign = e.temporary_tables.foreign_named_in(s.connection_id, sql);
    if s.grantee.is_none() && !foreign {
        return Ok(());
    }
    let t: Vec<Token> = crate::tokens::tokens(sql)?
        .into_iter()
        .filter(|t| !matches!(t, Token::SemiColon))
        .collect();
    let needs = needs(s, sql, &t);
    if foreign {
        // (For the superuser, a statement whose tables are not found is
        // left to fail as it does.)
        if let Ok(needs) = &needs {
            temporary_tables_hidden(e, s, &t, needs)?;
        }
    }
    let Some(g) = &s.grantee else {
        return Ok(());
    };
    for need in needs? {
        match need {
            Need::Global(p) => {
                if e.accounts.global(g) & p == 0 {
                    return Err(global_denied(acc::privilege_name(p)));
                }
            }
            Need::Database(p, db) => {
                if e.accounts.privileges(g, &db, None) & p == 0 {
                    return Err(database_denied(g, &db));
                }
            }
            Need::Table(p, db, table) => {
                if db.eq_ignore_ascii_case("information_schema") {
                    continue;
                }
                if e.accounts.privileges(g, &db, Some(&table)) & p == 0 {
                    return Err(table_denied(s, acc::privilege_name(p), &db, &table));
                }
            }
        }
    }
    Ok(())
}

/// Another connection's TEMPORARY table does not exist for this one:
/// 1146 for a statement naming it (as MySQL), but for the table a CREATE
/// makes (left to fail as the name is taken) and the tables DROP TABLE
/// drops (1051 there, see [`crate::ddl::drop`]).
fn temporary_tables_hidden(
    e: &Engine,
    s: &Session,
    t: &[Token],
    needs: &[Need],
) -> Result<(), ShimError> {
    let dropping = word(t, 0).as_deref() == Some("DROP");
    for need in needs {
        if let Need::Table(p, db, table) = need {
            if *p == acc::CREATE || dropping && *p == acc::DROP {
                continue;
            }
            if e.temporary_tables.foreign(db, table, s.connection_id) {
                return Err(ShimError::UnknownTable {
                    database: db.clone(),
                    table: table.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The database a name without one belongs to.
fn in_db(s: &Session, db: Option<String>) -> Result<String, ShimError> {
    db.or_else(|| s.database.clone())
        .ok_or(ShimError::NoDatabase)
}

fn object_name(s: &Session, n: &ast::ObjectName) -> Result<(String, String), ShimError> {
    let parts: Vec<String> = n.0.iter().map(|i| i.value.clone()).collect();
    match parts.as_slice() {
        [t] => Ok((in_db(s, None)?, t.clone())),
        [.., d, t] => Ok((d.clone(), t.clone())),
        [] => Err(ShimError::Parse("empty name".into())),
    }
}

/// SELECT on every relation `node` names (CTE names excepted).
fn reads<V: ast::Visit>(s: &Session, node: &V, out: &mut Vec<Need>) -> Result<(), ShimError> {
    let mut ctes = Vec::new();
    collect_ctes(node, &mut ctes);
    let mut failure = None;
    let _ = ast::visit_relations(node, |n| {
        if n.0.len() == 1
            && ctes
                .iter()
                .any(|c: &String| c.eq_ignore_ascii_case(&n.0[0].value))
        {
            return std::ops::ControlFlow::<()>::Continue(());
        }
        match object_name(s, n) {
            Ok((db, t)) => out.push(Need::Table(acc::SELECT, db, t)),
            Err(e) => {
                failure = Some(e);
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    failure.map_or(Ok(()), Err)
}

/// Names of every CTE defined anywhere in `node`.
fn collect_ctes<V: ast::Visit>(node: &V, out: &mut Vec<String>) {
    struct Ctes<'a>(&'a mut Vec<String>);
    impl ast::Visitor for Ctes<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &ast::Query) -> std::ops::ControlFlow<()> {
            if let Some(w) = &q.with {
                for c in &w.cte_tables {
                    self.0.push(c.alias.name.value.clone());
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Ctes(out));
}

/// Replaces the first SELECT need on (db, t) by `p` (the statement's
/// target), keeping SELECT for every other relation.
fn target(out: &mut Vec<Need>, p: Privs, db: &str, t: &str) {
    if let Some(n) = out.iter_mut().find(|n| {
        matches!(n, Need::Table(acc::SELECT, d, x) if d.eq_ignore_ascii_case(db) && x.eq_ignore_ascii_case(t))
    }) {
        *n = Need::Table(p, db.to_string(), t.to_string());
    } else {
        out.push(Need::Table(p, db.to_string(), t.to_string()));
    }
}

fn needs(s: &Session, sql: &str, t: &[Token]) -> Result<Vec<Need>, ShimError> {
    let w = |i| word(t, i).unwrap_or_default();
    let (w0, w1) = (w(0), w(1));
    let mut out = Vec::new();
    // `SET a = 1, GLOBAL b = 2` sets b globally (see `set_list`).
    let global_set = w0 == "SET"
        && (w1 == "GLOBAL"
            || t.windows(2).any(|p| {
                matches!(p[0], Token::Comma) && word(p, 1).as_deref() == Some("GLOBAL")
            })
            || t.iter().any(
                |x| matches!(x, Token::Word(x) if x.value.to_ascii_lowercase().starts_with("@@global")),
            ));
    match (w0.as_str(), w1.as_str()) {
        // Server administration.
        ("SNAPSHOT", _) | ("SHOW", "SNAPSHOTS" | "CLUSTER") => out.push(Need::Global(acc::SUPER)),
        ("SET", _) if global_set => out.push(Need::Global(acc::SUPER)),
        // `SET @x = (SELECT ... FROM t)` reads.
        ("SET", _) => word_needs(s, t, &mut out)?,
        ("FLUSH", w) if w != "PRIVILEGES" => out.push(Need::Global(acc::RELOAD)),
        ("SHOW", _) | ("DESCRIBE" | "DESC", _) => show_needs(s, t, &mut out)?,
        ("CREATE", "DATABASE" | "SCHEMA") => {
            out.push(Need::Database(acc::CREATE, database_after(t, 2)));
        }
        ("DROP", "DATABASE" | "SCHEMA") => {
            out.push(Need::Database(acc::DROP, database_after(t, 2)));
        }
        ("DROP", "INDEX") => {
            // DROP INDEX i ON t
            if let Some(on) = (3..t.len()).find(|&i| word(t, i).as_deref() == Some("ON")) {
                let mut i = on + 1;
                if let Some((db, table)) = qualified_name(t, &mut i) {
                    out.push(Need::Table(acc::INDEX, in_db(s, db)?, table));
                }
            }
        }
        ("RENAME", "TABLE" | "TABLES") => rename_table_needs(s, t, &mut out)?,
        ("ALTER", _) if alter_table_renames(t).is_some() => {
            let (mut old_at, mut new_at) = alter_table_renames(t).unwrap_or_default();
            let old = qualified_name(t, &mut old_at);
            if let (Some(old), Some(new)) = (old, qualified_name(t, &mut new_at)) {
                renamed(s, old, new, &mut out)?;
            }
        }
        ("TRUNCATE", _) => {
            let mut i = if w1 == "TABLE" { 2 } else { 1 };
            if let Some((db, table)) = qualified_name(t, &mut i) {
                out.push(Need::Table(acc::DROP, in_db(s, db)?, table));
            }
        }
        // Statements that name no table (session state, transactions; KILL
        // checks its own rule; USE is checked where it switches).
        (
            "BEGIN" | "START" | "COMMIT" | "ROLLBACK" | "SAVEPOINT" | "RELEASE" | "USE" | "LOCK"
            | "UNLOCK" | "FLUSH" | "ANALYZE" | "OPTIMIZE" | "CHECKSUM" | "XA" | "KILL" | "HELP",
            _,
        ) => {}
        _ => match crate::sqltext::parse(sql) {
            Ok(stmts) => {
                for st in &stmts {
                    statement_needs(s, st, &mut out)?;
                }
            }
            Err(_) => word_needs(s, t, &mut out)?,
        },
    }
    Ok(out)
}

/// The database name at token `i` (after an optional IF [NOT] EXISTS).
fn database_after(t: &[Token], mut i: usize) -> String {
    while matches!(word(t, i).as_deref(), Some("IF" | "NOT" | "EXISTS")) {
        i += 1;
    }
    crate::tokens::ident(t, i).unwrap_or_default()
}

fn statement_needs(s: &Session, st: &Statement, out: &mut Vec<Need>) -> Result<(), ShimError> {
    reads(s, st, out)?;
    match st {
        Statement::Insert(ins) => {
            let (db, t) = object_name(s, &ins.table_name)?;
            target(out, acc::INSERT, &db, &t);
            if ins.replace_into {
                out.push(Need::Table(acc::DELETE, db.clone(), t.clone()));
            }
            if ins.on.is_some() {
                out.push(Need::Table(acc::UPDATE, db, t));
            }
        }
        Statement::Update { table, .. } => {
            if let ast::TableFactor::Table { name, .. } = &table.relation {
                let (db, t) = object_name(s, name)?;
                target(out, acc::UPDATE, &db, &t);
            }
        }
        Statement::Delete(d) => {
            let names: Vec<&ast::ObjectName> = if d.tables.is_empty() {
                match &d.from {
                    ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f
                        .iter()
                        .take(1)
                        .filter_map(|twj| match &twj.relation {
                            ast::TableFactor::Table { name, .. } => Some(name),
                            _ => None,
                        })
                        .collect(),
                }
            } else {
                d.tables.iter().collect()
            };
            for n in names {
                let (db, t) = object_name(s, n)?;
                target(out, acc::DELETE, &db, &t);
            }
        }
        Statement::CreateTable(ct) => {
            let (db, t) = object_name(s, &ct.name)?;
            target(out, acc::CREATE, &db, &t);
        }
        Statement::CreateView { name, .. } => {
            let (db, t) = object_name(s, name)?;
            target(out, acc::CREATE, &db, &t);
        }
        Statement::CreateIndex(ci) => {
            let (db, t) = object_name(s, &ci.table_name)?;
            target(out, acc::INDEX, &db, &t);
        }
        Statement::AlterTable { name, .. } => {
            let (db, t) = object_name(s, name)?;
            target(out, acc::ALTER, &db, &t);
        }
        Statement::Drop { names, .. } => {
            for n in names {
                let (db, t) = object_name(s, n)?;
                target(out, acc::DROP, &db, &t);
            }
        }
        Statement::Truncate { table_names, .. } => {
            for n in table_names {
                let (db, t) = object_name(s, &n.name)?;
                target(out, acc::DROP, &db, &t);
            }
        }
        _ => {}
    }
    Ok(())
}

/// A table renamed from `old` to `new` (RENAME TABLE, ALTER TABLE ...
/// RENAME): as MySQL, ALTER and DROP on the old name, CREATE and INSERT on
/// the new one (else a user could move a table into a database it may not
/// write, or out of one it may not drop from).
fn renamed(
    s: &Session,
    (old_db, old): (Option<String>, String),
    (new_db, new): (Option<String>, String),
    out: &mut Vec<Need>,
) -> Result<(), ShimError> {
    let (old_db, new_db) = (in_db(s, old_db)?, in_db(s, new_db)?);
    for p in [acc::ALTER, acc::DROP] {
        out.push(Need::Table(p, old_db.clone(), old.clone()));
    }
    for p in [acc::CREATE, acc::INSERT] {
        out.push(Need::Table(p, new_db.clone(), new.clone()));
    }
    Ok(())
}

/// `RENAME TABLE a TO b [, c TO d ...]`.
fn rename_table_needs(s: &Session, t: &[Token], out: &mut Vec<Need>) -> Result<(), ShimError> {
    let mut i = 2;
    loop {
        let old = qualified_name(t, &mut i);
        let to = word(t, i).as_deref() == Some("TO");
        i += 1;
        let (Some(old), true, Some(new)) = (old, to, qualified_name(t, &mut i)) else {
            return Err(ShimError::Parse("near RENAME TABLE's names".into()));
        };
        renamed(s, old, new, out)?;
        if !matches!(t.get(i), Some(Token::Comma)) {
            return Ok(());
        }
        i += 1;
    }
}

/// For `ALTER [ONLINE] [IGNORE] TABLE t ... RENAME [TO | AS] u ...`: the
/// token positions of `t` and of `u` (a RENAME COLUMN / INDEX / KEY renames
/// no table).
fn alter_table_renames(t: &[Token]) -> Option<(usize, usize)> {
    let table = (1..4.min(t.len())).find(|&i| word(t, i).as_deref() == Some("TABLE"))? + 1;
    let rename = (table..t.len()).find(|&i| {
        word(t, i).as_deref() == Some("RENAME")
            && !matches!(word(t, i + 1).as_deref(), Some("COLUMN" | "INDEX" | "KEY"))
    })?;
    let to = rename + 1 + usize::from(matches!(word(t, rename + 1).as_deref(), Some("TO" | "AS")));
    Some((table, to))
}

/// For text the parser does not read: the statement's target after its
/// verb needs the verb's privilege, every other name after FROM, JOIN,
/// INTO, UPDATE or TABLE needs SELECT.
fn word_needs(s: &Session, t: &[Token], out: &mut Vec<Need>) -> Result<(), ShimError> {
    let verb = match word(t, 0).as_deref() {
        Some("INSERT" | "REPLACE") => acc::INSERT,
        Some("UPDATE") => acc::UPDATE,
        Some("DELETE") => acc::DELETE,
        Some("CREATE") => acc::CREATE,
        Some("DROP") => acc::DROP,
        Some("ALTER" | "RENAME") => acc::ALTER,
        _ => acc::SELECT,
    };
    let mut first = true;
    let mut i = 0;
    while i < t.len() {
        let marker = matches!(
            word(t, i).as_deref(),
            Some("FROM" | "JOIN" | "INTO" | "UPDATE" | "TABLE" | "STRAIGHT_JOIN")
        );
        i += 1;
        if !marker {
            continue;
        }
        while matches!(
            word(t, i).as_deref(),
            Some("LOW_PRIORITY" | "IGNORE" | "IF" | "NOT" | "EXISTS" | "QUICK" | "DELAYED")
        ) {
            i += 1;
        }
        let mut j = i;
        if let Some((db, table)) = qualified_name(t, &mut j) {
            let p = if first { verb } else { acc::SELECT };
            out.push(Need::Table(p, in_db(s, db)?, table));
            first = false;
            i = j;
        }
    }
    if first && verb != acc::SELECT {
        // A write whose target was not found: refuse rather than guess.
        return Err(ShimError::Parse("near the statement's table name".into()));
    }
    Ok(())
}

/// SHOW forms that name a table need a privilege on it; SHOW TABLES FROM
/// db needs one in db (lists are filtered where they are built).
fn show_needs(s: &Session, t: &[Token], out: &mut Vec<Need>) -> Result<(), ShimError> {
    let mut i = 1;
    while matches!(
        word(t, i).as_deref(),
        Some("FULL" | "EXTENDED" | "GLOBAL" | "SESSION" | "LOCAL")
    ) {
        i += 1;
    }
    let what = word(t, i).unwrap_or_default();
    let names_table = match what.as_str() {
        "CREATE"
            if word(t, i + 1).as_deref() == Some("TABLE")
                || word(t, i + 1).as_deref() == Some("VIEW") =>
        {
            i += 2;
            true
        }
        "COLUMNS" | "FIELDS" | "INDEX" | "INDEXES" | "KEYS" => {
            i += 2; // FROM
            true
        }
        _ if matches!(word(t, 0).as_deref(), Some("DESCRIBE" | "DESC")) => true,
        _ => false,
    };
    if names_table {
        let mut j = i;
        if let Some((db, table)) = qualified_name(t, &mut j) {
            let db = if matches!(word(t, j).as_deref(), Some("FROM" | "IN")) {
                crate::tokens::ident(t, j + 1)
            } else {
                db
            };
            out.push(Need::Table(acc::OBJECT_PRIVS, in_db(s, db)?, table));
        }
    }
    Ok(())
}
