//! A FOREIGN KEY as declared and as the catalog keeps it (one meta record
//! per child table), and the cache of every table's keys.

use std::sync::Arc;

use ladle_common::TableId;
use ladle_storage::Storage;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sqlparser::ast::{self, ReferentialAction};

use crate::error::{Result, ShimError};

/// The catalog meta key prefix for a child table's keys.
pub(super) const META_PREFIX: &str = "fk/";

pub(super) fn meta_key(table: TableId) -> String {
    format!("{META_PREFIX}{table}")
}

/// What happens to referencing rows when their parent row goes or changes.
/// (The variants are SQL's own names: NO ACTION is one of them.)
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Action {
    Restrict,
    NoAction,
    Cascade,
    SetNull,
}

impl Action {
    pub(super) fn from_ast(a: Option<ReferentialAction>) -> Result<Action> {
        Ok(match a {
            None | Some(ReferentialAction::Restrict) => Action::Restrict,
            Some(ReferentialAction::NoAction) => Action::NoAction,
            Some(ReferentialAction::Cascade) => Action::Cascade,
            Some(ReferentialAction::SetNull) => Action::SetNull,
            Some(ReferentialAction::SetDefault) => {
                return Err(ShimError::Unsupported(
                    "ON DELETE/UPDATE SET DEFAULT".into(),
                ))
            }
        })
    }

    pub fn sql(self) -> &'static str {
        match self {
            Action::Restrict => "RESTRICT",
            Action::NoAction => "NO ACTION",
            Action::Cascade => "CASCADE",
            Action::SetNull => "SET NULL",
        }
    }
}

/// One FOREIGN KEY of a child table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ForeignKey {
    pub name: String,
    /// The child's key columns.
    pub columns: Vec<String>,
    pub parent_database: String,
    pub parent_table: String,
    pub parent_columns: Vec<String>,
    pub on_delete: Action,
    pub on_update: Action,
}

impl ForeignKey {
    /// The `FOREIGN KEY (...) REFERENCES ...` clause as SHOW CREATE TABLE
    /// and the error messages print it; `qualified` names the parent's
    /// database.
    pub fn clause(&self, child_database: &str, qualified: bool) -> String {
        let cols = |c: &[String]| {
            c.iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let parent = if qualified || self.parent_database != child_database {
            format!("`{}`.`{}`", self.parent_database, self.parent_table)
        } else {
            format!("`{}`", self.parent_table)
        };
        let mut out = format!(
            "CONSTRAINT `{}` FOREIGN KEY ({}) REFERENCES {parent} ({})",
            self.name,
            cols(&self.columns),
            cols(&self.parent_columns)
        );
        if self.on_delete != Action::Restrict {
            out.push_str(&format!(" ON DELETE {}", self.on_delete.sql()));
        }
        if self.on_update != Action::Restrict {
            out.push_str(&format!(" ON UPDATE {}", self.on_update.sql()));
        }
        out
    }
}

/// A FOREIGN KEY as CREATE/ALTER TABLE declares it.
pub struct KeyDeclaration<'a> {
    pub name: Option<&'a ast::Ident>,
    pub columns: &'a [ast::Ident],
    pub parent: &'a ast::ObjectName,
    pub parent_columns: &'a [ast::Ident],
    pub on_delete: Option<ReferentialAction>,
    pub on_update: Option<ReferentialAction>,
}

impl<'a> KeyDeclaration<'a> {
    /// The declaration in a table constraint, if it is a FOREIGN KEY.
    pub fn of_constraint(tc: &'a ast::TableConstraint) -> Option<KeyDeclaration<'a>> {
        match tc {
            ast::TableConstraint::ForeignKey {
                name,
                columns,
                foreign_table,
                referred_columns,
                on_delete,
                on_update,
                ..
            } => Some(KeyDeclaration {
                name: name.as_ref(),
                columns,
                parent: foreign_table,
                parent_columns: referred_columns,
                on_delete: *on_delete,
                on_update: *on_update,
            }),
            _ => None,
        }
    }
}

/// Every key, with the child table it belongs to.
pub(super) type AllKeys = Arc<Vec<(TableId, ForeignKey)>>;

/// Every table's keys, loaded from the catalog once and reloaded after a
/// change.
#[derive(Default)]
pub struct ForeignKeyCache {
    all: RwLock<Option<AllKeys>>,
}

impl ForeignKeyCache {
    pub(super) fn all(&self, storage: &Storage) -> Result<AllKeys> {
        if let Some(all) = self.all.read().as_ref() {
            return Ok(all.clone());
        }
        let mut all = Vec::new();
        for (key, bytes) in storage.list_meta(META_PREFIX)? {
            let Some(id) = key
                .strip_prefix(META_PREFIX)
                .and_then(|id| id.parse::<TableId>().ok())
            else {
                continue;
            };
            let keys: Vec<ForeignKey> = postcard::from_bytes(&bytes)
                .map_err(|e| ShimError::Internal(format!("bad FOREIGN KEY record: {e}")))?;
            all.extend(keys.into_iter().map(|k| (id, k)));
        }
        let all = Arc::new(all);
        *self.all.write() = Some(all.clone());
        Ok(all)
    }

    pub(super) fn invalidate(&self) {
        *self.all.write() = None;
    }
}
