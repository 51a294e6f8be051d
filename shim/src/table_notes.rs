//! What a table declares that changes no stored value: its COMMENT, its
//! columns' COMMENTs, its default collation (`DEFAULT CHARSET=` /
//! `COLLATE=`, which text columns added later get), which key parts of
//! its indexes were declared DESC and which with a prefix length. Kept in
//! one catalog
//! meta record per table beside the schema, as CHECK constraints are;
//! ALTER TABLE writes it in its own batch. SHOW CREATE TABLE, SHOW FULL
//! COLUMNS and information_schema (which ORMs reflect) show it.

use std::collections::HashMap;

use ladle_common::{Collation, ColumnSchema, TableId};
use ladle_storage::Storage;
use serde::{Deserialize, Serialize};

use crate::collation_names::NamedCollation;
use crate::error::{Result, ShimError};

const PREFIX: &str = "notes/";

/// The catalog meta key holding a table's notes.
fn meta_key(table: TableId) -> String {
    format!("{PREFIX}{table}")
}

/// A table's notes; the default value is a table that declared none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TableNotes {
    /// `COMMENT [=] 'text'` of the table ("" for none).
    pub comment: String,
    /// The table's default collation: what a text column declared without
    /// its own gets.
    pub collation: Collation,
    /// `(column name, comment)` for each column that has a comment.
    column_comments: Vec<(String, String)>,
    /// `(index name, column name)` for each key part declared DESC (a
    /// functional key part by its hidden column): shown by SHOW INDEX,
    /// STATISTICS and SHOW CREATE TABLE. Ladle's indexes are read either
    /// way, so the order changes no stored key. Records written before it
    /// decode as [`TableNotesV1`].
    descending: Vec<(String, String)>,
    /// `(index name, column name, length)` for each key part declared with
    /// a prefix length (`` `name`(191) ``): shown by SHOW CREATE TABLE (a
    /// dump of a TEXT key needs it back), SHOW INDEX and STATISTICS.
    /// Ladle keys whole values, so it changes no stored key.
    prefixes: Vec<(String, String, u32)>,
    /// `(column name, expression text)` for each column whose DEFAULT is an
    /// expression: SHOW CREATE TABLE shows `DEFAULT (expr)`, as MySQL 8
    /// and MariaDB do (the column's stored default is its value).
    /// It and `prefixes` were added together (no record holds one without
    /// the other): records written before them decode as [`TableNotesV2`].
    default_expressions: Vec<(String, String)>,
    /// The name of the table's default collation where it is not
    /// `collation`'s own (`utf8mb3_esperanto_ci`, compared as
    /// `utf8mb4_general_ci`; see [`crate::collation_names`]).
    collation_name: Option<String>,
    /// `(column name, collation name)` for each text column declared with
    /// a collation whose name is not its comparison's own. It and
    /// `collation_name` were added together: records written before them
    /// decode as [`TableNotesV3`].
    column_collations: Vec<(String, String)>,
}

/// The record as written before collations' names were kept.
#[derive(Deserialize, Serialize)]
struct TableNotesV3 {
    comment: String,
    collation: Collation,
    column_comments: Vec<(String, String)>,
    descending: Vec<(String, String)>,
    prefixes: Vec<(String, String, u32)>,
    default_expressions: Vec<(String, String)>,
}

impl From<TableNotesV3> for TableNotes {
    fn from(v: TableNotesV3) -> TableNotes {
        TableNotes {
            comment: v.comment,
            collation: v.collation,
            column_comments: v.column_comments,
            descending: v.descending,
            prefixes: v.prefixes,
            default_expressions: v.default_expressions,
            collation_name: None,
            column_collations: Vec::new(),
        }
    }
}

/// The record as written before key parts' prefix lengths and expression
/// defaults were kept.
#[derive(Deserialize, Serialize)]
struct TableNotesV2 {
    comment: String,
    collation: Collation,
    column_comments: Vec<(String, String)>,
    descending: Vec<(String, String)>,
}

impl From<TableNotesV2> for TableNotes {
    fn from(v: TableNotesV2) -> TableNotes {
        TableNotes::from(TableNotesV3 {
            comment: v.comment,
            collation: v.collation,
            column_comments: v.column_comments,
            descending: v.descending,
            prefixes: Vec::new(),
            default_expressions: Vec::new(),
        })
    }
}

/// The record as written before key parts' order was kept.
#[derive(Deserialize, Serialize)]
struct TableNotesV1 {
    comment: String,
    collation: Collation,
    column_comments: Vec<(String, String)>,
}

impl From<TableNotesV1> for TableNotes {
    fn from(v: TableNotesV1) -> TableNotes {
        TableNotes::from(TableNotesV2 {
            comment: v.comment,
            collation: v.collation,
            column_comments: v.column_comments,
            descending: Vec::new(),
        })
    }
}

impl TableNotes {
    /// The name of the table's default collation, as declared.
    pub fn collation_name(&self) -> &str {
        self.collation_name
            .as_deref()
            .unwrap_or(self.collation.name())
    }

    /// Makes `collation` the table's default collation.
    pub fn set_collation(&mut self, collation: &NamedCollation) {
        self.collation = collation.compare;
        self.collation_name =
            Some(collation.name.clone()).filter(|n| n != collation.compare.name());
    }

    /// The table's default collation, by name.
    pub fn named_collation(&self) -> NamedCollation {
        NamedCollation {
            name: self.collation_name().to_string(),
            compare: self.collation,
        }
    }

    /// The name of text column `column`'s collation, as declared (or taken
    /// from the table's default); `None` for a column that holds no text.
    pub fn column_collation<'a>(&'a self, column: &'a ColumnSchema) -> Option<&'a str> {
        if !column.ty.is_text() {
            return None;
        }
        let declared = self
            .column_collations
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(&column.name))
            .map(|(_, n)| n.as_str());
        Some(declared.unwrap_or(column.collation.name()))
    }

    /// Records the name of column `name`'s collation (`None`: its
    /// comparison's own name).
    pub fn set_column_collation(&mut self, name: &str, collation: Option<&NamedCollation>) {
        self.column_collations
            .retain(|(c, _)| !c.eq_ignore_ascii_case(name));
        if let Some(c) = collation.filter(|c| c.name != c.compare.name()) {
            self.column_collations
                .push((name.to_string(), c.name.clone()));
        }
    }

    /// Column `name`'s comment ("" for none).
    pub fn column_comment(&self, name: &str) -> &str {
        self.column_comments
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(name))
            .map_or("", |(_, text)| text)
    }

    /// Gives column `name` the comment `text` ("" removes it).
    pub fn set_column_comment(&mut self, name: &str, text: &str) {
        self.column_comments
            .retain(|(c, _)| !c.eq_ignore_ascii_case(name));
        if !text.is_empty() {
            self.column_comments
                .push((name.to_string(), text.to_string()));
        }
    }

    /// Column `name`'s expression default, as SQL text.
    pub fn default_expression(&self, name: &str) -> Option<&str> {
        self.default_expressions
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(name))
            .map(|(_, sql)| sql.as_str())
    }

    /// Gives column `name` the expression default `sql` (None: its default,
    /// if any, is a value).
    pub fn set_default_expression(&mut self, name: &str, sql: Option<&str>) {
        self.default_expressions
            .retain(|(c, _)| !c.eq_ignore_ascii_case(name));
        if let Some(sql) = sql {
            self.default_expressions
                .push((name.to_string(), sql.to_string()));
        }
    }

    /// Moves column `from`'s comment (key parts' order, expression default,
    /// collation name) to its new name `to`.
    pub fn rename_column(&mut self, from: &str, to: &str) {
        let parts = self.descending.iter_mut().map(|(_, c)| c);
        let prefixed = self.prefixes.iter_mut().map(|(_, c, _)| c);
        let defaults = self.default_expressions.iter_mut().map(|(c, _)| c);
        let comments = self.column_comments.iter_mut().map(|(c, _)| c);
        let collations = self.column_collations.iter_mut().map(|(c, _)| c);
        let all = comments.chain(parts).chain(prefixed).chain(defaults);
        for c in all.chain(collations) {
            if c.eq_ignore_ascii_case(from) {
                *c = to.to_string();
            }
        }
    }

    /// Forgets what is noted about a dropped column.
    pub fn drop_column(&mut self, name: &str) {
        self.set_column_comment(name, "");
        self.set_default_expression(name, None);
        self.set_column_collation(name, None);
        self.descending
            .retain(|(_, c)| !c.eq_ignore_ascii_case(name));
        self.prefixes
            .retain(|(_, c, _)| !c.eq_ignore_ascii_case(name));
    }

    /// Whether index `index`'s key part over `column` is DESC.
    pub fn is_descending(&self, index: &str, column: &str) -> bool {
        self.descending
            .iter()
            .any(|(i, c)| i.eq_ignore_ascii_case(index) && c.eq_ignore_ascii_case(column))
    }

    /// The prefix length index `index`'s key part over `column` was
    /// declared with, if any.
    pub fn prefix(&self, index: &str, column: &str) -> Option<u32> {
        self.prefixes
            .iter()
            .find(|(i, c, _)| i.eq_ignore_ascii_case(index) && c.eq_ignore_ascii_case(column))
            .map(|&(_, _, n)| n)
    }

    /// Records index `index`'s key parts declared with a prefix length, as
    /// `(column name, length)` (after [`Self::add_index`]).
    pub fn set_prefixes(&mut self, index: &str, prefixes: &[(String, u32)]) {
        self.prefixes
            .retain(|(i, _, _)| !i.eq_ignore_ascii_case(index));
        for (c, n) in prefixes {
            self.prefixes.push((index.to_string(), c.clone(), *n));
        }
    }

    /// Records a new index `index`'s DESC key parts (by column name).
    pub fn add_index(&mut self, index: &str, descending: &[String]) {
        self.drop_index(index);
        for c in descending {
            self.descending.push((index.to_string(), c.clone()));
        }
    }

    /// Forgets a dropped index's key parts' order.
    pub fn drop_index(&mut self, index: &str) {
        self.descending
            .retain(|(i, _)| !i.eq_ignore_ascii_case(index));
        self.prefixes
            .retain(|(i, _, _)| !i.eq_ignore_ascii_case(index));
    }

    /// Index `from` is now named `to`.
    pub fn rename_index(&mut self, from: &str, to: &str) {
        let parts = self.descending.iter_mut().map(|(i, _)| i);
        for i in parts.chain(self.prefixes.iter_mut().map(|(i, _, _)| i)) {
            if i.eq_ignore_ascii_case(from) {
                *i = to.to_string();
            }
        }
    }

    /// The meta record ALTER TABLE writes in its batch: `None` (deleted)
    /// for a table that declares nothing.
    pub fn meta_record(&self, table: TableId) -> Result<(String, Option<Vec<u8>>)> {
        Ok((meta_key(table), self.encoded()?))
    }

    fn encoded(&self) -> Result<Option<Vec<u8>>> {
        if *self == TableNotes::default() {
            return Ok(None);
        }
        postcard::to_allocvec(self)
            .map(Some)
            .map_err(|e| ShimError::Internal(format!("encoding table notes: {e}")))
    }
}

fn decode(bytes: &[u8]) -> Result<TableNotes> {
    postcard::from_bytes(bytes)
        .or_else(|_| postcard::from_bytes::<TableNotesV3>(bytes).map(TableNotes::from))
        .or_else(|_| postcard::from_bytes::<TableNotesV2>(bytes).map(TableNotes::from))
        .or_else(|_| postcard::from_bytes::<TableNotesV1>(bytes).map(TableNotes::from))
        .map_err(|e| ShimError::Internal(format!("bad table notes record: {e}")))
}

/// Table `table`'s notes.
pub fn load(storage: &Storage, table: TableId) -> Result<TableNotes> {
    let key = meta_key(table);
    match storage
        .list_meta(&key)?
        .into_iter()
        .find(|(k, _)| *k == key)
    {
        Some((_, bytes)) => decode(&bytes),
        None => Ok(TableNotes::default()),
    }
}

/// Every table's notes (one catalog scan, for information_schema).
pub fn load_all(storage: &Storage) -> Result<HashMap<TableId, TableNotes>> {
    let mut all = HashMap::new();
    for (key, bytes) in storage.list_meta(PREFIX)? {
        if let Ok(id) = key[PREFIX.len()..].parse::<TableId>() {
            all.insert(id, decode(&bytes)?);
        }
    }
    Ok(all)
}

/// Records a new table's notes.
pub fn store(storage: &Storage, table: TableId, notes: &TableNotes) -> Result<()> {
    if let Some(bytes) = notes.encoded()? {
        storage.put_meta(&meta_key(table), &bytes)?;
    }
    Ok(())
}

/// Changes table `table`'s notes with `f` (for CREATE INDEX and DROP
/// INDEX, which write no table record).
pub fn update(storage: &Storage, table: TableId, f: impl FnOnce(&mut TableNotes)) -> Result<()> {
    let mut notes = load(storage, table)?;
    let before = notes.clone();
    f(&mut notes);
    if notes == before {
        return Ok(());
    }
    match notes.encoded()? {
        Some(bytes) => storage.put_meta(&meta_key(table), &bytes)?,
        None => storage.delete_meta(&meta_key(table))?,
    }
    Ok(())
}

/// Forgets a dropped table's notes.
pub fn forget(storage: &Storage, table: TableId) -> Result<()> {
    storage.delete_meta(&meta_key(table))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_written_before_key_part_orders_still_decode() {
        let old = TableNotesV1 {
            comment: "c".into(),
            collation: Collation::Binary,
            column_comments: vec![("a".into(), "x".into())],
        };
        let notes = decode(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert_eq!(notes.comment, "c");
        assert_eq!(notes.column_comment("A"), "x");
        assert!(!notes.is_descending("i", "a"));
    }

    #[test]
    fn key_part_orders_follow_renames_and_drops() {
        let mut notes = TableNotes::default();
        notes.add_index("i", &["a".into()]);
        let again = decode(&notes.encoded().unwrap().unwrap()).unwrap();
        assert!(again.is_descending("I", "A"));
        notes.rename_column("a", "b");
        notes.rename_index("i", "j");
        assert!(notes.is_descending("j", "b"));
        notes.drop_index("j");
        assert_eq!(notes, TableNotes::default());
    }

    #[test]
    fn prefix_lengths_are_kept_and_follow_renames_and_drops() {
        let old = TableNotesV2 {
            comment: String::new(),
            collation: Collation::GeneralCi,
            column_comments: Vec::new(),
            descending: vec![("i".into(), "a".into())],
        };
        let notes = decode(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert!(notes.is_descending("i", "a") && notes.prefix("i", "a").is_none());
        let mut notes = TableNotes::default();
        notes.add_index("i", &[]);
        notes.set_prefixes("i", &[("a".into(), 191)]);
        let again = decode(&notes.encoded().unwrap().unwrap()).unwrap();
        assert_eq!(again.prefix("I", "A"), Some(191));
        notes.rename_column("a", "b");
        notes.rename_index("i", "j");
        assert_eq!(notes.prefix("j", "b"), Some(191));
        notes.drop_column("b");
        assert_eq!(notes, TableNotes::default());
    }

    #[test]
    fn records_written_before_expression_defaults_still_decode() {
        let old = TableNotesV2 {
            comment: "c".into(),
            collation: Collation::Binary,
            column_comments: Vec::new(),
            descending: vec![("i".into(), "a".into())],
        };
        let mut notes = decode(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert!(notes.is_descending("i", "a"));
        assert_eq!(notes.default_expression("a"), None);
        notes.set_default_expression("a", Some("3 + 5"));
        let again = decode(&notes.encoded().unwrap().unwrap()).unwrap();
        assert_eq!(again.default_expression("A"), Some("3 + 5"));
        notes.rename_column("a", "b");
        assert_eq!(notes.default_expression("b"), Some("3 + 5"));
        notes.drop_column("b");
        assert_eq!(notes.default_expression("b"), None);
    }

    #[test]
    fn collation_names_are_kept_and_follow_renames_and_drops() {
        let old = TableNotesV3 {
            comment: "c".into(),
            collation: Collation::Bin,
            column_comments: Vec::new(),
            descending: Vec::new(),
            prefixes: Vec::new(),
            default_expressions: vec![("a".into(), "1".into())],
        };
        let notes = decode(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert_eq!(notes.collation_name(), "utf8mb4_bin");
        assert_eq!(notes.default_expression("a"), Some("1"));
        let mut notes = TableNotes::default();
        let esperanto = crate::collation_names::by_name("utf8_esperanto_ci").unwrap();
        notes.set_collation(&esperanto);
        notes.set_column_collation("a", Some(&esperanto));
        let again = decode(&notes.encoded().unwrap().unwrap()).unwrap();
        assert_eq!(again.collation_name(), "utf8mb3_esperanto_ci");
        let column = ColumnSchema::new("A", ladle_common::SqlType::VarChar(5));
        assert_eq!(
            again.column_collation(&column),
            Some("utf8mb3_esperanto_ci")
        );
        notes.rename_column("a", "b");
        let column = ColumnSchema::new("b", ladle_common::SqlType::VarChar(5));
        assert_eq!(
            notes.column_collation(&column),
            Some("utf8mb3_esperanto_ci")
        );
        notes.drop_column("b");
        assert_eq!(notes.column_collation(&column), Some("utf8mb4_general_ci"));
        let int = ColumnSchema::new("i", ladle_common::SqlType::Double);
        assert_eq!(notes.column_collation(&int), None);
    }
}
