//! Reading data written before format version 4, whose DATE, DATETIME and
//! TIMESTAMP keys held chrono's day count (microseconds since the epoch):
//! on open, every primary and secondary entry keyed by such a column is
//! rewritten in the current encoding ([`crate::keys`]), in the batch that
//! records the new version, so a crash leaves the old directory as it was.
//! Row values encode as before; only keys change.

use std::sync::Arc;

use ladle_common::{IndexSchema, SqlType};

use crate::cf;
use crate::engine::{Batch, KvRead};
use crate::error::Result;
use crate::table::{TableCounters, TableEntry, TableState};

/// Adds to `batch` the rewrite of `entry`'s entries whose keys hold a
/// temporal column (nothing for a table without one).
pub(crate) fn rekey_temporal_columns(
    r: &dyn KvRead,
    entry: &TableEntry,
    batch: &mut Batch,
) -> Result<()> {
    let schema = &entry.schema;
    let temporal = |columns: &[usize]| {
        columns.iter().any(|&c| {
            matches!(
                schema.columns.get(c).map(|c| &c.ty),
                Some(SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. })
            )
        })
    };
    let primary_changes = schema.primary_key.as_deref().is_some_and(temporal);
    // A secondary entry's key ends with the primary key, so every index
    // changes when the primary key does.
    let secondaries: Vec<&IndexSchema> = schema
        .indexes
        .iter()
        .filter(|i| primary_changes || temporal(&i.columns))
        .collect();
    if !primary_changes && secondaries.is_empty() {
        return Ok(());
    }
    let t = TableState::new(entry.clone(), Arc::new(TableCounters::default()));
    let mut stored: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    r.scan(t.primary_cf(), &[], None, &mut |k, v| {
        stored.push((k.to_vec(), v.to_vec()));
        Ok(true)
    })?;
    for index in &secondaries {
        let family = cf::secondary(index.id);
        r.scan(&family, &[], None, &mut |k, _| {
            batch.delete(&family, k);
            Ok(true)
        })?;
    }
    for (old_key, value) in stored {
        let row = t.decode_row(&value)?;
        // A table without a primary key keeps its hidden row ids.
        let key = t.primary_key(&row).unwrap_or_else(|| old_key.clone());
        if primary_changes {
            batch.delete(t.primary_cf(), old_key);
            batch.put(t.primary_cf(), key.clone(), value);
        }
        for index in &secondaries {
            batch.put(
                &cf::secondary(index.id),
                t.secondary_key(index, &row, &key),
                t.secondary_value(&key, &row)?,
            );
        }
    }
    Ok(())
}
