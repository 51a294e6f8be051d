//! WITH CHECK OPTION enforced: a row written through a view must meet the
//! conditions its CHECK OPTION gathers (see
//! [`super::through_view::ViewOfTable::checks`]), else MySQL's 1369.

use std::sync::Arc;

use ladle_common::{Row, TableSchema};
use ladle_dataflow::{compile_row_expr, RowExpr};
use ladle_storage::StorageError;

use super::through_view::ViewOfTable;
use crate::error::Result;

/// A view's CHECK OPTION conditions compiled against its base table.
pub(super) struct ViewCheck {
    /// The view, `db.view` (the message).
    view: String,
    conditions: Vec<RowExpr>,
}

impl ViewCheck {
    /// The checks of a write through `view` (if it goes through one) to
    /// `schema`, `None` if it has none.
    pub(super) fn of(
        view: Option<&ViewOfTable>,
        schema: &TableSchema,
    ) -> Result<Option<Arc<Self>>> {
        let Some(view) = view.filter(|v| !v.checks.is_empty()) else {
            return Ok(None);
        };
        let conditions = view
            .checks
            .iter()
            .map(|x| compile_row_expr(x, Some(schema)))
            .collect::<std::result::Result<_, _>>()?;
        Ok(Some(Arc::new(ViewCheck {
            view: view.name.clone(),
            conditions,
        })))
    }

    /// Fails with 1369 unless every condition is TRUE for `row` (not yet
    /// coerced to the column types): NULL fails, as in MySQL.
    pub(super) fn verify(&self, schema: &TableSchema, row: &Row) -> Result<(), StorageError> {
        let row = crate::checks::coerce_lenient(schema, row);
        for c in &self.conditions {
            if !c.eval_predicate(&row).unwrap_or(false) {
                return Err(StorageError::ViewCheckFailed(self.view.clone()));
            }
        }
        Ok(())
    }
}

/// [`ViewCheck::verify`] if there is a check.
pub(super) fn verify(
    check: Option<&ViewCheck>,
    schema: &TableSchema,
    row: &Row,
) -> Result<(), StorageError> {
    check.map_or(Ok(()), |c| c.verify(schema, row))
}
