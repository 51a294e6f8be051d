//! Which rows statements lock, and when (the lock table itself is
//! [`crate::row_locks`]):
//!
//! - a locking read (`FOR UPDATE`: exclusive; `FOR SHARE`, `LOCK IN SHARE
//!   MODE`: shared) locks the rows its FROM reads from each base table it
//!   names directly (joined ones too; `OF t` narrows them), found by the
//!   same FROM and WHERE projected to the tables' primary keys (whole rows
//!   of a table without one; a view like any read's); when a lock had to
//!   wait it looks again (the rows may have changed). Having taken new
//!   locks it waits for the commits in flight (one whose check ran before
//!   the locks existed), and the read itself runs after, over the latest
//!   rows (a current read). Rows of derived tables and subqueries are not
//!   locked;
//! - a write inside a transaction locks, exclusive, the rows its ops change
//!   (their identities before and after) and the primary keys it inserts,
//!   when the statement buffers them; if a lock had to wait the statement
//!   runs again;
//! - every commit (autocommit statements and COMMIT) checks, under the
//!   commit lock, that no other connection holds a row it changes; if one
//!   does, nothing is written, the statement waits for that lock and runs
//!   again. That check is one atomic load while no row is locked.

use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::{CommitCheck, WriteOp};
use sqlparser::ast::{self, Expr, GroupByExpr, SelectItem, SetExpr, TableFactor};

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::row_locks::{Granted, Mode, RowKey, Wait};
use crate::session::Session;

/// How many times a statement looks again for its rows after a lock wait
/// before it gives up (1205).
const ATTEMPTS: usize = 16;

/// What a locking read asks for.
#[derive(Clone, Debug)]
pub(crate) struct LockRequest {
    mode: Mode,
    nowait: bool,
    skip_locked: bool,
    /// `OF t, ...`: only these tables (by alias or name, lower-case).
    of: Option<Vec<String>>,
}

impl LockRequest {
    /// The request of `q`'s locking clauses, or `LOCK IN SHARE MODE`
    /// (`share_mode`); `None` for a plain read. Several clauses (`FOR
    /// UPDATE OF a FOR SHARE OF b`, or a list after OF, see
    /// `sqltext::tokenize`) lock the tables they name in the strongest
    /// mode any asks for.
    pub(crate) fn of_query(q: &ast::Query, share_mode: bool) -> Option<LockRequest> {
        if q.locks.is_empty() {
            return share_mode.then_some(LockRequest {
                mode: Mode::Shared,
                nowait: false,
                skip_locked: false,
                of: None,
            });
        }
        let any = |f: &dyn Fn(&ast::LockClause) -> bool| q.locks.iter().any(f);
        let of = q
            .locks
            .iter()
            .map(|c| {
                c.of.as_ref()
                    .and_then(|n| n.0.last())
                    .map(|i| i.value.to_ascii_lowercase())
            })
            .collect::<Option<Vec<String>>>();
        Some(LockRequest {
            mode: if any(&|c| matches!(c.lock_type, ast::LockType::Update)) {
                Mode::Exclusive
            } else {
                Mode::Shared
            },
            nowait: any(&|c| matches!(c.nonblock, Some(ast::NonBlock::Nowait))),
            skip_locked: any(&|c| matches!(c.nonblock, Some(ast::NonBlock::SkipLocked))),
            of,
        })
    }
}

/// A table whose rows a statement locks: how its query names it (alias,
/// else name as written), and its schema.
pub(crate) struct LockedTable {
    pub qualifier: Vec<ast::Ident>,
    pub schema: Arc<TableSchema>,
}

impl LockedTable {
    /// `qualifier.column` for each identity column.
    fn identity_exprs(&self) -> Vec<Expr> {
        identity_columns(&self.schema)
            .into_iter()
            .map(|c| {
                let mut parts = self.qualifier.clone();
                parts.push(ast::Ident::with_quote(
                    '`',
                    self.schema.columns[c].name.clone(),
                ));
                Expr::CompoundIdentifier(parts)
            })
            .collect()
    }
}

fn has_primary_key(schema: &TableSchema) -> bool {
    schema.primary_key.as_ref().is_some_and(|pk| !pk.is_empty())
}

/// The columns naming a row: the primary key, else every column.
pub(crate) fn identity_columns(schema: &TableSchema) -> Vec<usize> {
    match &schema.primary_key {
        Some(pk) if !pk.is_empty() => pk.clone(),
        _ => (0..schema.columns.len()).collect(),
    }
}

/// The lock name of `row` of `schema`'s table.
pub(crate) fn row_key(schema: &TableSchema, row: &Row) -> RowKey {
    RowKey {
        table: schema.id,
        key: identity_columns(schema)
            .into_iter()
            .map(|c| row.get(c).cloned().unwrap_or(Value::Null))
            .collect(),
    }
}

/// The seconds a row lock request waits (`innodb_lock_wait_timeout`,
/// default 50 as in InnoDB).
pub(crate) fn lock_wait(s: &Session) -> std::time::Duration {
    crate::vars::session_timeout(
        s,
        "innodb_lock_wait_timeout",
        crate::vars::INNODB_LOCK_WAIT_TIMEOUT,
    )
}

/// What [`Engine::lock_rows`] did.
#[derive(Default)]
pub(crate) struct Locked {
    /// A lock was in the way first: what the rows hold may have changed.
    pub waited: bool,
    /// The statement holds a row it did not hold before.
    pub fresh: bool,
    /// `SKIP LOCKED`: the rows another connection holds.
    pub skipped: Vec<RowKey>,
}

impl Engine {
    /// Locks `rows` in `mode` for `s`'s transaction (or running statement).
    /// A deadlock rolls the transaction back (1213), as InnoDB does; a
    /// timeout fails only the statement (1205), whose locks stay held.
    pub(crate) fn lock_rows(
        &self,
        s: &mut Session,
        rows: impl IntoIterator<Item = RowKey>,
        mode: Mode,
        wait: Option<Wait>,
    ) -> Result<Locked> {
        let wait = wait.unwrap_or_else(|| Wait::Block(lock_wait(s)));
        let mut locked = Locked::default();
        let held = s.row_locks_mut();
        for row in rows {
            let before = held.len();
            match self.row_locks.lock(held, row.clone(), mode, wait) {
                Ok(Granted::Held { waited }) => {
                    locked.waited |= waited;
                    locked.fresh |= held.len() > before;
                }
                Ok(Granted::Skipped) => locked.skipped.push(row),
                Err(ShimError::Deadlock) => {
                    s.transaction = None;
                    s.statement_locks.release();
                    if !s.autocommit {
                        s.begin_transaction();
                    }
                    return Err(ShimError::Deadlock);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(locked)
    }

    /// Locks the rows locking read `q` (with its locking clause; `db` its
    /// database) reads, as `request` asks. Returns the condition that
    /// leaves out the rows `SKIP LOCKED` skipped, if any.
    pub(crate) fn lock_read_rows(
        &self,
        s: &mut Session,
        q: &ast::Query,
        db: &str,
        request: &LockRequest,
    ) -> Result<Option<Expr>> {
        let tables = self.locked_tables(s, q, db, request);
        if tables.is_empty() {
            return Ok(None);
        }
        let wait = if request.nowait {
            Some(Wait::Nowait)
        } else if request.skip_locked {
            Some(Wait::SkipLocked)
        } else {
            None
        };
        let skipped = self.lock_rows_read_by(s, q, db, &tables, request.mode, wait)?;
        skip_filter(&tables, &skipped)
    }

    /// Locks, in `mode`, the rows of `tables` (as `q` names them) that
    /// `q`'s FROM and WHERE visit; when a lock had to wait, looks again
    /// (the rows may have changed). Having taken new locks it waits for the
    /// commits in flight, so that a read after sees the latest rows.
    /// Returns the rows `SKIP LOCKED` skipped.
    pub(crate) fn lock_rows_read_by(
        &self,
        s: &mut Session,
        q: &ast::Query,
        db: &str,
        tables: &[LockedTable],
        mode: Mode,
        wait: Option<Wait>,
    ) -> Result<Vec<RowKey>> {
        let Some(keys_query) = keys_query(q, tables) else {
            return Ok(Vec::new());
        };
        let pq = self.dataflow.prepare(db, &keys_query)?;
        let mut fresh = false;
        for _ in 0..ATTEMPTS {
            let rows = self.read_rows(s, &pq, &[], true, false)?.into_vec();
            let mut keys = Vec::new();
            for row in &rows {
                let mut at = 0;
                for t in tables {
                    let n = identity_columns(&t.schema).len();
                    let key = row
                        .get(at..at + n)
                        .map(<[Value]>::to_vec)
                        .unwrap_or_default();
                    at += n;
                    // A keyed table's row an outer join made up is no row.
                    if !(has_primary_key(&t.schema) && key.iter().any(Value::is_null)) {
                        keys.push(RowKey {
                            table: t.schema.id,
                            key,
                        });
                    }
                }
            }
            let locked = self.lock_rows(s, keys, mode, wait)?;
            fresh |= locked.fresh;
            if !locked.waited {
                if fresh {
                    // A write whose commit check ran before these locks
                    // were taken may still be finishing: the read after
                    // must see it.
                    self.storage.await_writes_in_flight();
                }
                return Ok(locked.skipped);
            }
        }
        Err(ShimError::LockWaitTimeout)
    }

    /// The base tables of `q`'s FROM a locking read locks (`OF` narrows).
    fn locked_tables(
        &self,
        s: &Session,
        q: &ast::Query,
        db: &str,
        request: &LockRequest,
    ) -> Vec<LockedTable> {
        let SetExpr::Select(sel) = q.body.as_ref() else {
            return Vec::new();
        };
        let relations = sel
            .from
            .iter()
            .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)));
        let mut tables = Vec::new();
        for relation in relations {
            let TableFactor::Table { name, alias, .. } = relation else {
                continue;
            };
            let (table_db, table) = match name.0.as_slice() {
                [t] => (s.database.clone().unwrap_or_else(|| db.to_string()), t),
                [d, t] => (d.value.clone(), t),
                _ => continue,
            };
            let qualifier = match alias {
                Some(a) => vec![a.name.clone()],
                None => name.0.clone(),
            };
            let shown = qualifier
                .last()
                .map(|i| i.value.to_ascii_lowercase())
                .unwrap_or_default();
            if request.of.as_ref().is_some_and(|of| !of.contains(&shown)) {
                continue;
            }
            if let Some(schema) = self.storage.table(&table_db, &table.value) {
                tables.push(LockedTable { qualifier, schema });
            }
        }
        tables
    }

    /// Locks, exclusive, the rows a transaction's write `ops` change or
    /// insert (see the module docs). A wait means the statement found its
    /// rows before another transaction changed them: it runs again
    /// ([`ShimError::RetryAfterRowLock`]).
    pub(crate) fn lock_written_rows(&self, s: &mut Session, ops: &[WriteOp]) -> Result<()> {
        let mut keys = Vec::new();
        for op in ops {
            let Some(schema) = self.storage.table_by_id(op.table()) else {
                continue;
            };
            match op {
                // A new row of a table with a primary key (another
                // transaction inserting the same key waits, as InnoDB's
                // duplicate check does); without one, new rows are no
                // other transaction's business.
                WriteOp::Insert { rows, .. } if has_primary_key(&schema) => {
                    let new_keys = rows.iter().map(|r| row_key(&schema, r));
                    keys.extend(new_keys.filter(|k| !k.key.iter().any(Value::is_null)));
                }
                WriteOp::Insert { .. } => {}
                WriteOp::Update { scan, update, .. } => {
                    for row in crate::dml::candidate_rows(self, s, &schema, scan)? {
                        // The row functions run again here: as stoppable.
                        ladle_dataflow::interrupt::check()?;
                        if let Ok(Some(new)) = update(&row) {
                            keys.push(row_key(&schema, &row));
                            keys.push(row_key(&schema, &new));
                        }
                    }
                }
                WriteOp::Delete { scan, filter, .. } => {
                    for row in crate::dml::candidate_rows(self, s, &schema, scan)? {
                        ladle_dataflow::interrupt::check()?;
                        if filter(&row).unwrap_or(false) {
                            keys.push(row_key(&schema, &row));
                        }
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        keys.retain(|k| seen.insert(k.clone()));
        if self.lock_rows(s, keys, Mode::Exclusive, None)?.waited {
            return Err(rerun(s));
        }
        Ok(())
    }

    /// The commit check that refuses rows another connection holds (see
    /// the module docs); composed with `other` (the FOREIGN KEY check).
    /// The refused row is left in `blocked` for [`Engine::wait_for_blocked`].
    pub(crate) fn row_lock_check(
        &self,
        s: &Session,
        other: Option<CommitCheck>,
        blocked: &Arc<parking_lot::Mutex<Option<RowKey>>>,
    ) -> Option<CommitCheck> {
        let locks = Arc::clone(&self.row_locks);
        let owner = s.connection_id;
        let storage = Arc::clone(&self.storage);
        let blocked = Arc::clone(blocked);
        Some(Arc::new(move |reads, deltas| {
            if locks.any_held() {
                for (table, delta) in deltas {
                    let Some(schema) = storage.table_by_id(*table) else {
                        continue;
                    };
                    let row = row_key(&schema, delta.row());
                    if locks.held_by_other(owner, &row) {
                        *blocked.lock() = Some(row);
                        return Err(ladle_storage::StorageError::RowLocked);
                    }
                }
            }
            match &other {
                Some(check) => check(reads, deltas),
                None => Ok(()),
            }
        }))
    }

    /// After a commit refused with [`ladle_storage::StorageError::RowLocked`]:
    /// waits for the row in `blocked` (then held by the statement or
    /// transaction), so the write can be tried again.
    pub(crate) fn wait_for_blocked(
        &self,
        s: &mut Session,
        blocked: &parking_lot::Mutex<Option<RowKey>>,
    ) -> Result<()> {
        let row = blocked.lock().take();
        self.lock_rows(s, row, Mode::Exclusive, None).map(|_| ())
    }
}

/// The error that makes the running write run again, now that it holds
/// the row it waited for (see `dispatch::run_write_retrying`).
pub(crate) fn rerun(s: &mut Session) -> ShimError {
    s.rerun_for_row_locks = true;
    ShimError::RetryAfterRowLock
}

/// `q`'s FROM and WHERE, selecting the identity columns of `tables` (no
/// grouping, ordering or limit: every row the read visits is locked, as
/// InnoDB locks the rows it scans). `None` for a shape it cannot make.
fn keys_query(q: &ast::Query, tables: &[LockedTable]) -> Option<ast::Query> {
    let mut keys = q.clone();
    keys.locks.clear();
    let SetExpr::Select(sel) = keys.body.as_mut() else {
        return None;
    };
    sel.projection = tables
        .iter()
        .flat_map(LockedTable::identity_exprs)
        .map(SelectItem::UnnamedExpr)
        .collect();
    sel.distinct = None;
    sel.group_by = GroupByExpr::Expressions(Vec::new(), Vec::new());
    sel.having = None;
    sel.named_window.clear();
    sel.qualify = None;
    keys.order_by = None;
    keys.limit = None;
    keys.offset = None;
    keys.limit_by.clear();
    Some(keys)
}

/// `NOT (a.k <=> v AND ...) AND ...` over the rows SKIP LOCKED skipped.
fn skip_filter(tables: &[LockedTable], skipped: &[RowKey]) -> Result<Option<Expr>> {
    let mut terms = Vec::new();
    for row in skipped {
        let Some(t) = tables.iter().find(|t| t.schema.id == row.table) else {
            continue;
        };
        let same: Vec<String> = t
            .identity_exprs()
            .iter()
            .zip(&row.key)
            .map(|(c, v)| format!("{c} <=> {}", crate::params::literal(v)))
            .collect();
        terms.push(format!("NOT ({})", same.join(" AND ")));
    }
    if terms.is_empty() {
        return Ok(None);
    }
    crate::sqltext::parse_expr(&terms.join(" AND ")).map(Some)
}

/// `q` with `filter` added to its WHERE.
pub(crate) fn with_filter(q: &ast::Query, filter: Expr) -> ast::Query {
    let mut q = q.clone();
    if let SetExpr::Select(sel) = q.body.as_mut() {
        sel.selection = Some(match sel.selection.take() {
            Some(w) => Expr::BinaryOp {
                left: Box::new(Expr::Nested(Box::new(w))),
                op: ast::BinaryOperator::And,
                right: Box::new(filter),
            },
            None => filter,
        });
    }
    q
}
