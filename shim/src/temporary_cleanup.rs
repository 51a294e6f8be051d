//! TEMPORARY tables at the edges of their life: those an earlier run
//! left are dropped at startup, and no view may be built over one (see
//! [`crate::temporary_tables`] for the registry and its catalog records).

use ladle_common::TableId;
use sqlparser::ast;

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::temporary_tables::META_PREFIX;

impl Engine {
    /// At startup: the temporary tables recorded in the catalog belonged to
    /// connections of an earlier run, all gone; each is dropped as its
    /// connection's end would have dropped it. Returns how many.
    pub fn drop_leftover_temporary_tables(&self) -> Result<usize> {
        let mut dropped = 0;
        for (key, _) in self.storage.list_meta(META_PREFIX)? {
            let Some(Ok(id)) = key.strip_prefix(META_PREFIX).map(str::parse::<TableId>) else {
                continue;
            };
            if let Some(t) = self.storage.table_by_id(id) {
                let quote = |x: &str| x.replace('`', "``");
                let sql = format!(
                    "DROP TEMPORARY TABLE IF EXISTS `{}`.`{}`",
                    quote(&t.database),
                    quote(&t.name)
                );
                let mut s = crate::session::Session::new(0, String::new(), String::new());
                if let (_, Err(err)) = self.execute(&mut s, &sql) {
                    tracing::warn!(message = %err.message, sql, "dropping a temporary table left by an earlier run");
                    continue;
                }
                dropped += 1;
            }
            crate::temporary_tables::forget(&self.storage, id)?;
        }
        Ok(dropped)
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
