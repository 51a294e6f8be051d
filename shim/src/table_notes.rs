//! What a table declares that changes no stored value: its COMMENT, its
//! columns' COMMENTs and its default collation (`DEFAULT CHARSET=` /
//! `COLLATE=`, which text columns added later get). Kept in one catalog
//! meta record per table beside the schema, as CHECK constraints are;
//! ALTER TABLE writes it in its own batch. SHOW CREATE TABLE, SHOW FULL
//! COLUMNS and information_schema (which ORMs reflect) show it.

use std::collections::HashMap;

use ladle_common::{Collation, TableId};
use ladle_storage::Storage;
use serde::{Deserialize, Serialize};

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
}

impl TableNotes {
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

    /// Moves column `from`'s comment to its new name `to`.
    pub fn rename_column(&mut self, from: &str, to: &str) {
        for (c, _) in &mut self.column_comments {
            if c.eq_ignore_ascii_case(from) {
                *c = to.to_string();
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

/// Forgets a dropped table's notes.
pub fn forget(storage: &Storage, table: TableId) -> Result<()> {
    storage.delete_meta(&meta_key(table))?;
    Ok(())
}
