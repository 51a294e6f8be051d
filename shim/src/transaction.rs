//! Transactions: START TRANSACTION, COMMIT (with its foreign-key check),
//! implicit commits, savepoints and the isolation level.

use ladle_common::Value;
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::{Session, Transaction};

impl Engine {
    /// BEGIN / START TRANSACTION: commits the open transaction and opens
    /// one. An idle one (autocommit = 0, nothing done yet) is kept: it is
    /// the transaction starting, with the level set for it.
    pub(crate) fn start_transaction(&self, s: &mut Session) -> Result<()> {
        let idle = s
            .transaction
            .as_ref()
            .is_some_and(|t| t.ops.is_empty() && t.read_view.get().is_none());
        if !idle || s.autocommit {
            self.commit(s)?;
            s.begin_transaction();
        }
        Ok(())
    }

    /// COMMIT: submits the buffered ops as one atomic write.
    pub fn commit(&self, s: &mut Session) -> Result<Output> {
        let tx = s.transaction.take();
        if !s.autocommit {
            s.begin_transaction();
        }
        if let Some(mut tx) = tx {
            if !tx.ops.is_empty() {
                let start = std::time::Instant::now();
                let check = crate::foreign_keys::commit_check(self, s, &tx.ops)?;
                let res = self.commit_locked(s, &mut tx, check)?;
                s.wrote(res.lsn);
                self.metrics
                    .commit_seconds
                    .observe(start.elapsed().as_secs_f64());
                if let Some(id) = res.ops.iter().filter_map(|o| o.last_insert_id).next() {
                    s.last_insert_id = id;
                }
            }
        }
        Ok(Output::ok())
    }

    /// Writes transaction `tx`'s ops with `check` (the FOREIGN KEY one)
    /// and the row lock check: a row it changes that another transaction
    /// holds (one its statements did not lock: an UPDATE's WHERE matching
    /// it only now) is waited for, and the commit tried again. The ops are
    /// kept for that only while some row is locked.
    fn commit_locked(
        &self,
        s: &Session,
        tx: &mut Transaction,
        check: Option<ladle_storage::CommitCheck>,
    ) -> Result<ladle_storage::WriteResult> {
        let blocked = std::sync::Arc::default();
        let check = self.row_lock_check(s, check, &blocked);
        let mut last_blocked = None;
        loop {
            let again = self.row_locks.any_held().then(|| tx.ops.clone());
            let ops = std::mem::take(&mut tx.ops);
            match self.storage.write_checked(ops, check.clone()) {
                Err(ladle_storage::StorageError::RowLocked) => {
                    let (Some(ops), Some(row)) = (again, blocked.lock().take()) else {
                        return Err(ShimError::LockWaitTimeout);
                    };
                    // Once locked here, a row cannot block again unless
                    // its lock is held under another owner than the
                    // session's: fail rather than spin.
                    if last_blocked.as_ref() == Some(&row) {
                        return Err(ShimError::Internal(format!(
                            "row lock held under another owner than connection {}",
                            s.connection_id
                        )));
                    }
                    last_blocked = Some(row.clone());
                    let wait = crate::row_locks::Wait::Block(crate::row_locking::lock_wait(s));
                    let mode = crate::row_locks::Mode::Exclusive;
                    self.row_locks.lock(&mut tx.row_locks, row, mode, wait)?;
                    tx.ops = ops;
                }
                other => return Ok(other?),
            }
        }
    }

    /// DDL commits an open transaction first, as in MySQL.
    pub(crate) fn implicit_commit(&self, s: &mut Session) -> Result<()> {
        if s.in_transaction() {
            self.commit(s)?;
        }
        Ok(())
    }
}

/// RELEASE / ROLLBACK TO savepoint `name` of the open transaction (`op`
/// says whether it had one); 1305 if there is none of that name.
pub(crate) fn on_savepoint(
    s: &mut Session,
    name: String,
    op: fn(&mut Transaction, &str) -> bool,
) -> Result<Output> {
    if s.transaction.as_mut().is_some_and(|tx| op(tx, &name)) {
        Ok(Output::ok())
    } else {
        Err(ShimError::NoSuchSavepoint(name))
    }
}

/// `SET [SESSION|GLOBAL] TRANSACTION ISOLATION LEVEL ... | READ ONLY |
/// READ WRITE`: checks the level is one Ladle provides and, for the
/// session, shows it in `@@transaction_isolation`. (Without SESSION the
/// level is for the next transaction only; Ladle's one level serves both.)
pub(crate) fn set_transaction(
    s: &mut Session,
    t: &[Token],
    session: bool,
    global: bool,
) -> Result<Output> {
    let words: Vec<String> = t
        .iter()
        .filter_map(|tok| match tok {
            Token::Word(w) => Some(w.value.to_ascii_uppercase()),
            Token::Comma => Some(",".into()),
            _ => None,
        })
        .collect();
    if let Some(at) = words.iter().position(|w| w == "LEVEL") {
        let level: Vec<&str> = words[at + 1..]
            .iter()
            .take_while(|w| *w != ",")
            .map(String::as_str)
            .collect();
        let level = isolation_level_name(&level.join(" "))?;
        if session {
            set_session_isolation(s, level);
        } else if !global {
            set_next_isolation(s, level)?;
        }
    }
    Ok(Output::ok())
}

/// The session's isolation level; with autocommit = 0 between transactions
/// also the idle one already open (it has not started yet).
pub(crate) fn set_session_isolation(s: &mut Session, level: &'static str) {
    s.variables
        .insert("transaction_isolation".into(), Value::text(level));
    s.variables
        .insert("tx_isolation".into(), Value::text(level));
    let autocommit = s.autocommit;
    if let Some(tx) = &mut s.transaction {
        if !autocommit && tx.ops.is_empty() && tx.read_view.get().is_none() {
            tx.repeatable_read = level == "REPEATABLE-READ";
        }
    }
}

/// The isolation level of the next transaction only (`SET TRANSACTION`
/// without a scope); not while one is running (MariaDB: 1568), as its
/// reads may have begun.
pub(crate) fn set_next_isolation(s: &mut Session, level: &'static str) -> Result<()> {
    let autocommit = s.autocommit;
    match &mut s.transaction {
        Some(tx) if autocommit || !tx.ops.is_empty() || tx.read_view.get().is_some() => {
            return Err(ShimError::Wire(WireError {
                code: crate::error::ER_CANT_CHANGE_TX_CHARACTERISTICS,
                message: "Transaction characteristics can't be changed while a transaction \
                          is in progress"
                    .into(),
            }));
        }
        // autocommit = 0 between transactions: the next one is the idle
        // one already open.
        Some(tx) => tx.repeatable_read = level == "REPEATABLE-READ",
        None => s.next_isolation = Some(level),
    }
    Ok(())
}

/// The `@@transaction_isolation` spelling of an isolation level Ladle
/// provides (see `session::Transaction`): READ COMMITTED (which also
/// satisfies READ UNCOMMITTED) and REPEATABLE READ (one read view per
/// transaction). SERIALIZABLE needs every read to lock, with gap locks (no
/// write skew, no phantoms), which Ladle does not take, so it is refused
/// rather than accepted and not given.
pub(crate) fn isolation_level_name(level: &str) -> Result<&'static str> {
    match level.to_ascii_uppercase().replace(['-', '_'], " ").trim() {
        "READ COMMITTED" => Ok("READ-COMMITTED"),
        "READ UNCOMMITTED" => Ok("READ-UNCOMMITTED"),
        "REPEATABLE READ" => Ok("REPEATABLE-READ"),
        "SERIALIZABLE" => Err(ShimError::Unsupported(format!(
            "transaction isolation level {}: Ladle provides READ COMMITTED and REPEATABLE READ",
            level.to_ascii_uppercase()
        ))),
        other => Err(ShimError::WrongValueForVar(
            "transaction_isolation".into(),
            other.to_string(),
        )),
    }
}
