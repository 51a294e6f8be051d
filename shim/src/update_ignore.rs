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
//! write then leaves them as they are. It reads the whole table (every
//! row's keys), so an UPDATE IGNORE costs O(table).
//! (A write by another connection between this walk and the statement's
//! own can still make the statement fail with 1062.)

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::RowUpdater;

use crate::error::Result;

/// `update` with IGNORE's rules: it leaves unchanged every row of `visited`
/// (the rows the write visits, in its order) whose updated version would
/// repeat a unique key of another row of `table` (every row, as the
/// statement sees them), and adjusts values that do not fit their columns.
/// Also returns the warnings (code, message) the adjustments raise, once
/// per row (the updater itself may run more than once per row).
pub fn skip_duplicates(
    schema: &TableSchema,
    table: &[Row],
    visited: Vec<Row>,
    update: RowUpdater,
) -> Result<(RowUpdater, Vec<(u16, String)>)> {
    let raw = update;
    let adjusting_schema = schema.clone();
    let assigned = Arc::clone(&raw);
    let update: RowUpdater = Arc::new(move |row: &Row| {
        Ok(assigned(row)?.map(|mut new| {
            crate::dml::adjust_ignored_row(&adjusting_schema, &mut new, 0);
            new
        }))
    });
    let mut keys: Vec<Vec<usize>> = schema.primary_key.iter().cloned().collect();
    keys.extend(
        schema
            .indexes
            .iter()
            .filter(|i| i.unique)
            .map(|i| i.columns.clone()),
    );
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
    // How many current rows hold each value of each unique key.
    let mut held: Vec<HashMap<Vec<Value>, usize>> = vec![HashMap::new(); keys.len()];
    let key_of = |row: &Row, cols: &[usize]| -> Option<Vec<Value>> {
        cols.iter()
            .map(|&c| {
                let v = row.get(c).filter(|v| !v.is_null())?;
                // As stored: coerced to the column's type, then compared
                // under its collation.
                let column = &schema.columns[c];
                let v = ladle_common::coerce(v, column).unwrap_or_else(|_| v.clone());
                Some(v.key_normalized(column.collation))
            })
            .collect()
    };
    for row in table {
        for (k, cols) in keys.iter().enumerate() {
            if let Some(key) = key_of(row, cols) {
                *held[k].entry(key).or_default() += 1;
            }
        }
    }
    let mut kept = HashSet::new();
    let mut warnings = Vec::new();
    let mut matched = 0;
    for row in &visited {
        let Some(mut new) = raw(row)? else { continue };
        matched += 1;
        warnings.extend(crate::dml::adjust_ignored_row(schema, &mut new, matched));
        let old_keys: Vec<Option<Vec<Value>>> = keys.iter().map(|c| key_of(row, c)).collect();
        let new_keys: Vec<Option<Vec<Value>>> = keys.iter().map(|c| key_of(&new, c)).collect();
        let collides = new_keys.iter().enumerate().any(|(k, key)| {
            let Some(key) = key else { return false };
            // The row's own old key does not count against it.
            let own = usize::from(old_keys[k].as_ref() == Some(key));
            held[k].get(key).copied().unwrap_or(0) > own
        });
        if collides {
            kept.insert(identity(row));
            continue;
        }
        for (k, (old, new)) in old_keys.into_iter().zip(new_keys).enumerate() {
            if let Some(old) = old {
                if let Some(n) = held[k].get_mut(&old) {
                    *n = n.saturating_sub(1);
                }
            }
            if let Some(new) = new {
                *held[k].entry(new).or_default() += 1;
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
    Ok((updater, warnings))
}
