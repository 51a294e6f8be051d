//! Result columns named as MySQL names them: an item without an alias by
//! the statement's own text of it (see [`crate::sqltext::ItemNames`]).
//! Applied where a statement's rows leave for the client (COM_QUERY,
//! COM_STMT_PREPARE's announced columns, COM_STMT_EXECUTE), since a view
//! may be shared by texts of the same shape written differently.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_dataflow::OutputColumn;

use crate::output::Output;
use crate::sqltext::{select_item_names, ItemNames};

/// Texts the cache holds at most; past it, it starts again empty (a
/// workload repeats a bounded set of texts; one that does not costs a
/// scan of each text).
const CAPACITY: usize = 4096;

/// The names each SELECT text decides, by text, so a repeated statement
/// does not read its text again. `None`: nothing to rename.
#[derive(Default)]
pub struct ResultNames {
    by_text: parking_lot::Mutex<HashMap<String, Option<Arc<ItemNames>>>>,
}

impl ResultNames {
    /// Renames the columns of `out`, the result of statement `sql`.
    pub fn apply(&self, sql: &str, out: &mut Output) {
        if let Output::Rows { columns, .. } = out {
            self.apply_to_columns(sql, columns);
        }
    }

    /// Renames `columns`, the result columns of statement `sql`.
    pub fn apply_to_columns(&self, sql: &str, columns: &mut [OutputColumn]) {
        if let Some(names) = self.names(sql) {
            names.apply(columns);
        }
    }

    fn names(&self, sql: &str) -> Option<Arc<ItemNames>> {
        if let Some(known) = self.by_text.lock().get(sql) {
            return known.clone();
        }
        let names = select_item_names(sql)
            .filter(|n| !n.is_empty())
            .map(Arc::new);
        let mut by_text = self.by_text.lock();
        if by_text.len() >= CAPACITY {
            by_text.clear();
        }
        by_text.insert(sql.to_string(), names.clone());
        names
    }
}
