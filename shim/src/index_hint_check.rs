//! MySQL's check of index hints (`FROM t USE|FORCE|IGNORE INDEX (k)`):
//! the hints steer nothing here (Ladle plans its own views, see
//! [`crate::sqltext::index_hints`]), but a hint naming an index its table
//! lacks is error 1176, as in MySQL and MariaDB, so a typo fails here as
//! it would there.

use crate::error::{Result, ShimError, WireError, ER_KEY_DOES_NOT_EXIST};
use crate::exec::{view_definition, Engine};
use crate::session::Session;

impl Engine {
    /// 1176 for a hint in `sql` naming an index that its table lacks
    /// (`PRIMARY`: the primary key); any name hinted on a view. A name
    /// that is no table or view here (a CTE, a derived table, one of the
    /// session's TEMPORARY tables) is left to the statement.
    pub(crate) fn check_index_hints(&self, s: &Session, sql: &str) -> Result<()> {
        if !mentions_hint(sql) {
            return Ok(());
        }
        for hint in crate::sqltext::index_hints(sql) {
            let (db, name) = match hint.table.as_slice() {
                [db, t] => (db.as_str(), t.as_str()),
                [t] => match &s.database {
                    Some(db) => (db.as_str(), t.as_str()),
                    None => continue,
                },
                _ => continue,
            };
            let missing = match self.storage.table(db, name) {
                Some(table) => hint.names.iter().find(|n| {
                    let primary = n.eq_ignore_ascii_case("PRIMARY") && table.primary_key.is_some();
                    !primary && table.index(n).is_none()
                }),
                None if view_definition(&self.storage, db, name).is_some() => hint.names.first(),
                None => None,
            };
            if let Some(key) = missing {
                let shown = hint.alias.as_deref().unwrap_or(name);
                return Err(ShimError::Wire(WireError {
                    code: ER_KEY_DOES_NOT_EXIST,
                    message: format!("Key '{key}' doesn't exist in table '{shown}'"),
                }));
            }
        }
        Ok(())
    }
}

/// Whether `sql` may hold an index hint (`INDEX` or `KEY`, any case):
/// most statements skip tokenizing again.
fn mentions_hint(sql: &str) -> bool {
    let b = sql.as_bytes();
    let has = |w: &[u8]| b.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
    has(b"index") || has(b"key")
}
