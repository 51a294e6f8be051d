//! UPDATE IGNORE: a row whose new version would repeat another row's
//! PRIMARY or UNIQUE key keeps its old values, and the statement goes on
//! (MariaDB counts the row as matched, not changed, and raises no warning);
//! a value that does not fit its column is adjusted as INSERT IGNORE does
//! (cut, clamped, NULL to the implicit default), with a warning.
//!
//! MariaDB applies the update row by row in the order it reads the rows,
//! each against the table as the earlier rows left it: in `UPDATE IGNORE t
//! SET u = u + 1` over u = 1, 2, 3 only the last row changes. The rows to
//! keep are found here by that same walk over the rows the statement sees
//! (committed, or as its transaction left them), before the write; the
//! write then leaves them as they are. Which rows hold a key is asked of
//! [`KeyHolders`] once per key value the walk meets (an index lookup), so
//! the walk costs O(rows visited), not O(table).
//! (A write by another connection between this walk and the statement's
//! own can still make the statement fail with 1062.)
//!
//! A row written through a view WITH CHECK OPTION that the view would no
//! longer show keeps its old values too, with warning 1369 (MySQL's rule,
//! and MariaDB's); so does one whose new version fails a FOREIGN KEY,
//! without a warning (`dml::update`, which can ask the keys).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::{IndexRef, RowUpdater, StorageError};

use crate::error::{Result, ER_VIEW_CHECK_FAILED};

/// The rows of a table an index finds for a key value.
pub type IndexLookup<'a> = &'a dyn Fn(IndexRef, &[Value]) -> Result<Vec<Row>>;

/// Where the walk learns which rows hold a key value.
pub enum KeyHolders<'a> {
    /// The rows an index lookup finds (committed rows).
    Lookup(IndexLookup<'a>),
    /// Every row of the table, as an open transaction sees it.
    Rows(&'a [Row]),
}

/// One unique key: the index to look it up in, its columns, and how many
/// current rows hold each (normalized) value met so far.
struct UniqueKey {
    index: IndexRef,
    columns: Vec<usize>,
    held: HashMap<Vec<Value>, usize>,
}

/// A row's value of a unique key: as stored (coerced to the columns'
/// types) for lookups, and normalized under the columns' collations for
/// comparing; `None` if a column is NULL (NULLs never collide).
fn key_of(schema: &TableSchema, row: &Row, cols: &[usize]) -> Option<(Vec<Value>, Vec<Value>)> {
    let mut stored = Vec::with_capacity(cols.len());
    let mut normalized = Vec::with_capacity(cols.len());
    for &c in cols {
        let v = row.get(c).filter(|v| !v.is_null())?;
        let column = &schema.columns[c];
        let v = ladle_common::coerce(v, column).unwrap_or_else(|_| v.clone());
        normalized.push(v.key_normalized(column.collation));
        stored.push(v);
    }
    Some((stored, normalized))
}

impl UniqueKey {
    /// How many current rows hold `key`, asking `holders` the first time.
    fn count(
        &mut self,
        schema: &TableSchema,
        holders: &KeyHolders<'_>,
        (stored, normalized): &(Vec<Value>, Vec<Value>),
    ) -> Result<&mut usize> {
        if !self.held.contains_key(normalized) {
            let same =
                |r: &Row| key_of(schema, r, &self.columns).is_some_and(|k| k.1 == *normalized);
            let n = match holders {
                KeyHolders::Lookup(lookup) => lookup(self.index, stored)?
                    .iter()
                    .filter(|r| same(r))
                    .count(),
                KeyHolders::Rows(rows) => rows.iter().filter(|r| same(r)).count(),
            };
            self.held.insert(normalized.clone(), n);
        }
        Ok(self.held.entry(normalized.clone()).or_default())
    }
}

/// `update` adjusting values that do not fit their columns (cut, clamped,
/// NULL to the implicit default), as IGNORE and non-strict `sql_mode` do.
/// Also returns the warnings (code, message) the adjustments raise over
/// `visited` (the rows the write visits, in its order), once per row (the
/// updater itself may run more than once per row).
pub fn adjust_values(
    schema: &TableSchema,
    visited: &[Row],
    update: RowUpdater,
) -> Result<(RowUpdater, Vec<(u16, String)>)> {
    let mut warnings = Vec::new();
    let mut matched = 0;
    for row in visited {
        let Some(mut new) = update(row)? else {
            continue;
        };
        matched += 1;
        warnings.extend(crate::dml::write::adjust_ignored_row(
            schema,
            &mut new,
            Some(row),
            matched,
            true,
        ));
    }
    let adjusting_schema = schema.clone();
    let updater: RowUpdater = Arc::new(move |row: &Row| {
        Ok(update(row)?.map(|mut new| {
            crate::dml::write::adjust_ignored_row(&adjusting_schema, &mut new, Some(row), 0, true);
            new
        }))
    });
    Ok((updater, warnings))
}

/// `update` leaving as it was (matched, not changed) each row whose new
/// version a view's CHECK OPTION refuses. Also returns the warnings (code,
/// message) that raises over `visited` (the rows the write visits, in its
/// order), once per row.
pub fn skip_view_check_failures(
    visited: &[Row],
    update: RowUpdater,
) -> (RowUpdater, Vec<(u16, String)>) {
    let warnings = visited
        .iter()
        .filter_map(|row| match update(row) {
            Err(e @ StorageError::ViewCheckFailed(_)) => {
                Some((ER_VIEW_CHECK_FAILED.errno, e.to_string()))
            }
            _ => None,
        })
        .collect();
    let updater: RowUpdater = Arc::new(move |row: &Row| match update(row) {
        Err(StorageError::ViewCheckFailed(_)) => Ok(Some(row.clone())),
        other => other,
    });
    (updater, warnings)
}

/// `update` (already adjusting values, see [`adjust_values`]) with
/// IGNORE's rule for keys: it leaves unchanged every row of `visited` (the
/// rows the write visits, in its order) whose updated version would
/// repeat a unique key another row holds.
pub fn skip_duplicates(
    schema: &TableSchema,
    holders: KeyHolders<'_>,
    visited: Vec<Row>,
    update: RowUpdater,
) -> Result<RowUpdater> {
    let raw = Arc::clone(&update);
    let mut keys: Vec<UniqueKey> = Vec::new();
    if let Some(pk) = &schema.primary_key {
        keys.push(UniqueKey {
            index: IndexRef::Primary,
            columns: pk.clone(),
            held: HashMap::new(),
        });
    }
    for i in schema.indexes.iter().filter(|i| i.unique) {
        keys.push(UniqueKey {
            index: IndexRef::Secondary(i.id),
            columns: i.columns.clone(),
            held: HashMap::new(),
        });
    }
    let identity_columns: Vec<usize> = match &schema.primary_key {
        Some(pk) => pk.clone(),
        None => (0..schema.columns.len()).collect(),
    };
    let identity = move |row: &Row| -> Vec<Value> {
        identity_columns
            .iter()
            .map(|&c| row.get(c).cloned().unwrap_or(Value::Null))
            .collect()
    };
    let mut kept = HashSet::new();
    for row in &visited {
        let Some(new) = raw(row)? else { continue };
        let mut collides = false;
        for key in &mut keys {
            let old_key = key_of(schema, row, &key.columns);
            let Some(new_key) = key_of(schema, &new, &key.columns) else {
                continue;
            };
            // The row's own old key does not count against it.
            let own = usize::from(old_key.as_ref().map(|k| &k.1) == Some(&new_key.1));
            if *key.count(schema, &holders, &new_key)? > own {
                collides = true;
                break;
            }
        }
        if collides {
            kept.insert(identity(row));
            continue;
        }
        for key in &mut keys {
            let old_key = key_of(schema, row, &key.columns);
            let new_key = key_of(schema, &new, &key.columns);
            if let Some(old) = &old_key {
                let n = key.count(schema, &holders, old)?;
                *n = n.saturating_sub(1);
            }
            if let Some(new) = &new_key {
                *key.count(schema, &holders, new)? += 1;
            }
        }
    }
    let updater: RowUpdater = Arc::new(move |row: &Row| {
        if kept.contains(&identity(row)) {
            // Matched, left as it was.
            return match update(row)? {
                Some(_) => Ok(Some(row.clone())),
                None => Ok(None),
            };
        }
        update(row)
    });
    Ok(updater)
}
