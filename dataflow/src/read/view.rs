//! What a read reads: an installed view (its plan, its reader and what its
//! fills need), or a constant.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering as AO};
use std::sync::{Arc, OnceLock};

use ladle_common::{Lsn, TableId, Value};
use parking_lot::Mutex;

use crate::graph::{Graph, NodeId};
use crate::ops::ReaderState;
use crate::plan::{Constant, PlannedView};
use crate::propagation::TableCounters;

/// What a prepared query reads now.
pub(crate) enum Target {
    View(Arc<View>),
    Constant(Constant),
}

impl Target {
    /// The plan of the view (none for a constant).
    pub(crate) fn view_spec(&self) -> Option<&PlannedView> {
        match self {
            Target::View(v) => Some(&v.spec),
            Target::Constant(_) => None,
        }
    }
}

/// An installed view.
pub(crate) struct View {
    pub(crate) name: String,
    pub(crate) query: String,
    pub(crate) spec: PlannedView,
    /// The stored-row columns `spec.output` returns when every output is a
    /// plain column (the common case): copied without evaluating anything.
    pub(crate) output_columns: Option<Arc<[usize]>>,
    pub(crate) reader: Arc<ReaderState>,
    pub(crate) node: NodeId,
    /// The graph computes values for the view (see
    /// [`Graph::computes_values`]): its reads check for overflow markers.
    pub(crate) computes: bool,
    /// A filter of the view may mark rows whose WHERE overflowed (see
    /// [`Graph::marks_rows`]): its reads fail on a marked row they return.
    pub(crate) marks_rows: bool,
    pub(crate) tables: Vec<TableId>,
    /// The counters of each of `tables` (see `Propagation::counters`).
    pub(crate) commits: Vec<Arc<TableCounters>>,
    /// The storage LSN when the view was installed: `commits` record
    /// every commit after it (a table's counters may be created with the
    /// view, knowing nothing of earlier commits).
    pub(crate) installed_lsn: Lsn,
    /// The reader's ancestors detached from the graph, for fills outside
    /// the locks; `None` if the view must fill under them (`Graph::detach`).
    pub(crate) detached: OnceLock<Option<Graph>>,
    /// Read since the previous idle sweep (see `Dataflow::drop_unused_views`).
    pub(crate) used: AtomicBool,
    pub(crate) dropped: AtomicBool,
    /// Keys some read is filling now (see `read::Context::fill`).
    pub(crate) filling: KeysFilling,
}

impl View {
    /// Marks the view as read (the idle sweep drops views nobody reads).
    pub(crate) fn mark_used(&self) {
        // Checked first: a store on every read would bounce the line between
        // cores.
        if !self.used.load(AO::Relaxed) {
            self.used.store(true, AO::Relaxed);
        }
    }

    /// Whether a schema change (or the idle sweep) uninstalled the view:
    /// its readers plan again.
    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(AO::SeqCst)
    }
}

/// The keys of one view being filled, so that concurrent misses on a key
/// wait for one fill instead of each doing it (a cold start's popular
/// keys: every page misses the same front page at once).
#[derive(Default)]
pub(crate) struct KeysFilling {
    /// Normalized keys (see `ReaderState::norm`).
    pub(super) keys: Mutex<HashSet<Vec<Value>>>,
    pub(super) done: parking_lot::Condvar,
}
