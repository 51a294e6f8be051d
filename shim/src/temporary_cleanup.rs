//! TEMPORARY tables at the edges of their life: those an earlier run
//! left are dropped at startup, those of a cluster's dead primary when a
//! new one is elected, a forwarded session's when it ends, and no view may
//! be built over one (see [`crate::temporary_tables`] for the registry and
//! its catalog records).

use std::sync::Arc;

use ladle_common::TableId;
use sqlparser::ast;

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::session::Session;
use crate::temporary_tables::META_PREFIX;

impl Engine {
    /// Drops the temporary tables recorded in the catalog that no live
    /// session of this node owns, each as its connection's end would have
    /// (on a cluster's primary through the schema log, so replicas drop it
    /// too). At a single server's start that is every one: their
    /// connections were of an earlier run. On a node just elected primary,
    /// every one but its own clients' (from an earlier term of its own):
    /// the others' sessions were on another primary, or ran there for a
    /// replica's client, and are gone with it. Returns how many.
    pub fn drop_leftover_temporary_tables(&self) -> Result<usize> {
        let mut s = crate::session::Session::new(0, String::new(), String::new());
        s.names_stored_tables = true;
        s.serves_forwarded = true;
        let mut dropped = 0;
        for id in self.recorded_temporary_tables()? {
            if matches!(self.temporary_tables.owner_of(id), Some(owner) if owner != 0) {
                continue;
            }
            if let Some(t) = self.storage.table_by_id(id) {
                let quote = |x: &str| x.replace('`', "``");
                let sql = format!(
                    "DROP TEMPORARY TABLE IF EXISTS `{}`.`{}`",
                    quote(&t.database),
                    quote(&t.name)
                );
                if let (_, Err(err)) = self.execute(&mut s, &sql) {
                    tracing::warn!(message = %err.message, sql, "dropping a temporary table no session owns");
                    continue;
                }
                dropped += 1;
            }
            crate::temporary_tables::forget(&self.storage, id)?;
        }
        Ok(dropped)
    }

    /// The ids of the temporary tables recorded in the catalog.
    fn recorded_temporary_tables(&self) -> Result<Vec<TableId>> {
        Ok(self
            .storage
            .list_meta(META_PREFIX)?
            .into_iter()
            .filter_map(|(key, _)| key.strip_prefix(META_PREFIX)?.parse().ok())
            .collect())
    }

    /// A cluster node, at start: the temporary tables an earlier run left
    /// are hidden as any temporary table is (their owner is the server's
    /// own sessions') until a primary drops them, and CREATE TEMPORARY
    /// TABLE waits until this node, elected, has dropped them (see
    /// [`Self::temporary_tables_follow_role`]). Returns how many.
    pub fn hold_leftover_temporary_tables(&self) -> Result<usize> {
        self.temporary_tables.hold_creates();
        let mut held = 0;
        for id in self.recorded_temporary_tables()? {
            if let Some(t) = self.storage.table_by_id(id) {
                self.temporary_tables.add(&t.database, &t.name, 0, id);
                held += 1;
            }
        }
        Ok(held)
    }

    /// A cluster node's role changed. Elected primary, it drops the
    /// temporary tables no live session owns ([`Self::
    /// drop_leftover_temporary_tables`], on a thread of its own: the drops
    /// wait for replicas), then lets CREATE TEMPORARY TABLE run; any other
    /// role holds it until then (a new session here may get the connection
    /// id, and so the stored names, of a session of the old primary).
    pub fn temporary_tables_follow_role(self: &Arc<Self>, primary: bool) {
        if !primary {
            self.temporary_tables.hold_creates();
            return;
        }
        let engine = Arc::clone(self);
        let cleanup = move || {
            match engine.drop_leftover_temporary_tables() {
                Ok(0) => {}
                Ok(dropped) => {
                    tracing::info!(dropped, "elected: dropped TEMPORARY tables no session owns")
                }
                Err(e) => tracing::warn!(error = %e, "elected: dropping TEMPORARY tables"),
            }
            engine.temporary_tables.release_creates();
        };
        if let Err(e) = std::thread::Builder::new()
            .name("ladle-temporary-cleanup".into())
            .spawn(cleanup)
        {
            tracing::warn!(error = %e, "elected: no thread to drop TEMPORARY tables");
            self.temporary_tables.release_creates();
        }
    }

    /// Session `s` has ended: drops `owned`, its TEMPORARY tables by their
    /// stored names (hidden until each DROP forgets it), as DROP TEMPORARY
    /// TABLE statements run in it after its open transaction is dropped,
    /// as a disconnect rolls it back. Blocks.
    pub(crate) fn drop_ended_sessions_tables(&self, s: &mut Session, owned: Vec<(String, String)>) {
        s.transaction = None;
        s.autocommit = true;
        s.names_stored_tables = true;
        for (db, table) in owned {
            let quote = |x: &str| x.replace('`', "``");
            let sql = format!(
                "DROP TEMPORARY TABLE IF EXISTS `{}`.`{}`",
                quote(&db),
                quote(&table)
            );
            if let (_, Err(err)) = self.execute(s, &sql) {
                tracing::warn!(message = %err.message, sql, "dropping a closed connection's temporary table");
            }
        }
    }

    /// A session a replica's client forwarded statements to (on the
    /// primary) has ended: its named locks and TEMPORARY tables go with it, as a client
    /// connection's do; off the async worker when there is one.
    pub fn end_forwarded_session(self: &Arc<Self>, mut s: Session) {
        // Its named locks (taken for the replica's client) go too.
        self.facts.named_locks.release_all(s.connection_id);
        let owned = self.temporary_tables.stored_by(s.connection_id);
        if owned.is_empty() {
            return;
        }
        let engine = Arc::clone(self);
        let work = move || engine.drop_ended_sessions_tables(&mut s, owned);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(work)),
            Err(_) => work(),
        }
    }
}

/// CREATE VIEW over a TEMPORARY table: MySQL's 1352 (the view would
/// outlive it, or be read by connections that must not see it). Names
/// without a database are in the view's `db`.
pub fn check_view_query(e: &Engine, db: &str, query: &ast::Query) -> Result<()> {
    let mut found = None;
    let _ = ast::visit_relations(query, |n| {
        let table = match n.0.as_slice() {
            [t] => Some((db.to_string(), t.value.clone())),
            [d, t] => Some((d.value.clone(), t.value.clone())),
            _ => None,
        };
        match table {
            Some((d, t)) if e.temporary_tables.contains(&d, &t) => {
                found = Some(t);
                std::ops::ControlFlow::Break(())
            }
            _ => std::ops::ControlFlow::Continue(()),
        }
    });
    match found {
        Some(t) => Err(ShimError::Wire(WireError {
            code: crate::error::ER_VIEW_SELECT_TMPTABLE,
            message: format!("View's SELECT refers to a temporary table '{t}'"),
        })),
        None => Ok(()),
    }
}
