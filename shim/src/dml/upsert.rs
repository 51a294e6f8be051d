//! ON DUPLICATE KEY UPDATE: the rule an INSERT applies to a row whose
//! key is taken ([`conflict_rule`], with REPLACE's, IGNORE's and a plain
//! INSERT's), and the Notes and Warnings of the updates it made, worded
//! at the row that led to each ([`note_upserted_values`]).

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Row, TableSchema, Value};
use ladle_storage::OnConflict;
use sqlparser::ast::{self, OnInsert};

use super::overlay::coerce_lenient;
use super::write::{adjust_ignored_row, compile_assignments, expr_err, refuse_empty_enum, slot};
use crate::error::Result;
use crate::session::Session;
use crate::strict_warnings::StrictWarnings;

/// What an INSERT does with a row whose key is taken: REPLACE, ON
/// DUPLICATE KEY UPDATE (whose changed row must pass the table's CHECKs),
/// IGNORE, or fail.
pub(super) fn conflict_rule(
    schema: &Arc<TableSchema>,
    ins: &ast::Insert,
    checks: &Arc<crate::checks::TableChecks>,
    notes: &UpsertNotes,
    strict: StrictWarnings,
) -> Result<OnConflict> {
    Ok(if ins.replace_into {
        OnConflict::Replace
    } else if let Some(OnInsert::DuplicateKeyUpdate(assignments)) = &ins.on {
        let compiled = compile_assignments(schema, assignments)?;
        let (checks, schema) = (checks.clone(), schema.clone());
        let notes = notes.clone();
        let updater: ladle_storage::ConflictUpdater =
            Arc::new(move |existing: &Row, proposed: &Row| {
                let mut new = existing.clone();
                let mut noted = Upserted::default();
                for (pos, x) in &compiled {
                    let v = strict.evaluated_in_write(|| {
                        x.eval_with_proposed(&new, proposed).map_err(expr_err)
                    })?;
                    if let Some(c) = schema.columns.get(*pos) {
                        if ladle_common::truncation_note(&v, c) {
                            noted.rounded.push(c.name.clone());
                        }
                    }
                    *slot(&mut new, *pos)? = v;
                }
                checks.fill_generated(&schema, &mut new)?;
                if !strict.strict() {
                    // IGNORE or a non-strict sql_mode adjusts values that
                    // do not fit, as an UPDATE's; warned once the row
                    // number is known (see `note_upserted_values`).
                    let mut adjusted = new.clone();
                    if !adjust_ignored_row(&schema, &mut adjusted, Some(existing), 0, true)
                        .is_empty()
                    {
                        noted.adjusted = Some((existing.clone(), new));
                        new = adjusted;
                    }
                }
                checks.verify_uncoerced(&schema, &new)?;
                // Strict mode refuses an ENUM's empty value here too (1265),
                // as an UPDATE does.
                if strict.strict() {
                    refuse_empty_enum(&schema, &new, Some(existing))?;
                }
                // Run again for the same row (a transaction's COMMIT),
                // the update notes what it noted the first time.
                notes
                    .lock()
                    .insert(upsert_note_key(&schema, proposed), noted);
                Ok(new)
            });
        OnConflict::Update(updater)
    } else if ins.ignore {
        OnConflict::Ignore
    } else {
        OnConflict::Error
    })
}

/// A value ON DUPLICATE KEY UPDATE rounded: a Note at the row that led to
/// the update, and one it adjusted: its Warning (after the inserted
/// values' Notes; MariaDB interleaves them by row).
pub(super) fn note_upserted_values(
    s: &mut Session,
    schema: &TableSchema,
    upsert_notes: &UpsertNotes,
    upserted: &[Row],
) {
    let upsert_notes = std::mem::take(&mut *upsert_notes.lock());
    for (i, row) in upserted.iter().enumerate() {
        let Some(noted) = upsert_notes.get(row) else {
            continue;
        };
        for column in &noted.rounded {
            s.add_warning(
                "Note",
                1265,
                format!("Data truncated for column '{column}' at row {}", i + 1),
            );
        }
        if let Some((existing, new)) = &noted.adjusted {
            let mut new = new.clone();
            for (code, message) in adjust_ignored_row(schema, &mut new, Some(existing), i + 1, true)
            {
                s.add_warning("Warning", code, message);
            }
        }
    }
}

/// A proposed row as [`UpsertNotes`] holds it: as stored, without its
/// AUTO_INCREMENT value (storage may generate it after the shim saw it).
pub(super) fn upsert_note_key(schema: &TableSchema, row: &Row) -> Row {
    let mut key = coerce_lenient(schema, row);
    if let Some(v) = schema.auto_increment_column().and_then(|c| key.get_mut(c)) {
        *v = Value::Null;
    }
    key
}

/// What ON DUPLICATE KEY UPDATE noted, by the proposed row (as stored)
/// that led to the update.
pub(super) type UpsertNotes = Arc<parking_lot::Mutex<HashMap<Row, Upserted>>>;

/// What one ON DUPLICATE KEY UPDATE noted.
#[derive(Default)]
pub(super) struct Upserted {
    /// The columns whose value was rounded or cut (a Note each).
    rounded: Vec<String>,
    /// Values that did not fit, adjusted under IGNORE or a non-strict
    /// sql_mode: the row as it was and the new row before adjusting, to
    /// word the warnings at the row that led to the update.
    adjusted: Option<(Row, Row)>,
}
