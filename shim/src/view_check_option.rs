//! `CREATE VIEW ... WITH [CASCADED | LOCAL] CHECK OPTION`: the SQL parser
//! does not read the clause, so it is taken off the statement's end
//! ([`split`]) and recorded beside the view's definition once the view is
//! made ([`record`]). Writes through the view enforce it (see
//! `dml::view_check`); SHOW CREATE VIEW and information_schema.VIEWS show
//! it ([`check_option`]).

use ladle_storage::Storage;

use crate::error::Result;
use crate::exec::Engine;
use crate::session::Session;
use crate::tokens::{qualified_name, tokens, word};

/// A view's CHECK OPTION (WITH CHECK OPTION is CASCADED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckOption {
    Local,
    Cascaded,
}

impl CheckOption {
    /// As SHOW CREATE VIEW and information_schema.VIEWS write it.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckOption::Local => "LOCAL",
            CheckOption::Cascaded => "CASCADED",
        }
    }
}

/// A CREATE VIEW with a CHECK OPTION, split.
pub struct Split {
    /// The statement without its CHECK OPTION.
    pub rest: String,
    /// The view as the statement names it: (database, name).
    view: (Option<String>, String),
    option: CheckOption,
}

/// The catalog meta key holding a view's CHECK OPTION (absent: none).
fn meta_key(db: &str, view: &str) -> String {
    format!("shim/view-check/{db}/{}", view.to_ascii_lowercase())
}

/// `sql` split into the CREATE VIEW without its trailing CHECK OPTION and
/// the option; `None` for any other statement.
pub fn split(sql: &str) -> Option<Split> {
    let body = sql.trim_end().trim_end_matches(';').trim_end();
    // Every statement passes here: most end in anything but OPTION, and
    // leave before any allocation.
    let tail = body.len().saturating_sub(6);
    if !body.as_bytes()[tail..].eq_ignore_ascii_case(b"OPTION") {
        return None;
    }
    let mut rest = body;
    let mut words = Vec::new();
    while words.len() < 4 {
        let (before, last) = rest.rsplit_once(|c: char| c.is_whitespace())?;
        words.push(last.to_ascii_uppercase());
        rest = before.trim_end();
        if words.len() >= 3 && words.last().map(String::as_str) == Some("WITH") {
            break;
        }
    }
    let option = match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["OPTION", "CHECK", "WITH"] | ["OPTION", "CHECK", "CASCADED", "WITH"] => {
            CheckOption::Cascaded
        }
        ["OPTION", "CHECK", "LOCAL", "WITH"] => CheckOption::Local,
        _ => return None,
    };
    let t = tokens(rest).ok()?;
    let mut i = match (word(&t, 0)?.as_str(), word(&t, 1)?.as_str()) {
        ("CREATE", "VIEW") => 2,
        ("CREATE", "OR") if word(&t, 3).as_deref() == Some("VIEW") => 4,
        _ => return None,
    };
    let view = qualified_name(&t, &mut i)?;
    Some(Split {
        rest: rest.to_string(),
        view,
        option,
    })
}

/// Records the CHECK OPTION of the view `split` made.
pub fn record(e: &Engine, s: &Session, split: &Split) -> Result<()> {
    let (db, view) = split.view.clone();
    use sqlparser::ast::{Ident, ObjectName};
    let name = match db {
        Some(db) => ObjectName(vec![Ident::new(db), Ident::new(view)]),
        None => ObjectName(vec![Ident::new(view)]),
    };
    let (db, view) = e.resolve(s, &name)?;
    e.storage
        .put_meta(&meta_key(&db, &view), split.option.as_str().as_bytes())?;
    Ok(())
}

/// Forgets a view's CHECK OPTION (the view is dropped or made again).
pub fn forget(storage: &Storage, db: &str, view: &str) -> Result<()> {
    storage.delete_meta(&meta_key(db, view))?;
    Ok(())
}

/// View `db.view`'s CHECK OPTION, if it has one.
pub fn check_option(storage: &Storage, db: &str, view: &str) -> Option<CheckOption> {
    let key = meta_key(db, view);
    let found = storage.list_meta(&key).ok()?;
    let (_, v) = found.into_iter().find(|(k, _)| *k == key)?;
    match v.as_slice() {
        b"LOCAL" => Some(CheckOption::Local),
        b"CASCADED" => Some(CheckOption::Cascaded),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_option_off_a_create_view() {
        let s = split("CREATE VIEW v AS SELECT a FROM t WHERE a > 1 WITH CHECK OPTION;").unwrap();
        assert_eq!(s.rest, "CREATE VIEW v AS SELECT a FROM t WHERE a > 1");
        assert_eq!(s.option, CheckOption::Cascaded);
        assert_eq!(s.view, (None, "v".to_string()));
        let s = split("create or replace view d.v as select 1 with local check option").unwrap();
        assert_eq!(s.option, CheckOption::Local);
        assert_eq!(s.view, (Some("d".to_string()), "v".to_string()));
        assert!(split("SELECT 'WITH CHECK OPTION'").is_none());
        assert!(split("CREATE TABLE t (a INT) WITH CHECK OPTION").is_none());
        assert!(split("CREATE VIEW v AS SELECT 1").is_none());
    }
}
