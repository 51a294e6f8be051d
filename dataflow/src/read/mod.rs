//! The read path: how a prepared query's read of an installed view is
//! answered, in the order the stages run ([`read`]):
//!
//! 1. keys (`keys.rs`): the parameters bound to the view's key slots, IN
//!    lists expanded, each value compared as MySQL compares it with the key
//!    column;
//! 2. lookup: each key in the reader (no lock: the reader publishes
//!    versions), or, inside a transaction, computed over its own writes
//!    (`fill.rs` `read_overlay`, never cached);
//! 3. fill (`fill.rs`): the keys the reader does not hold, by upqueries
//!    consistent with the writes propagating meanwhile (invariant 4);
//!    `OnMiss::GiveUp` answers `None` instead, so a server can try a read
//!    on its network threads and hand a miss to a blocking one;
//! 4. post-lookup (`post_lookup.rs`): range narrowing, read-time filters
//!    and aggregates, order and DISTINCT across keys, OFFSET/LIMIT, the
//!    output expressions;
//! 5. overflow check: a value the view computed out of range fails the read
//!    (1690), as MySQL fails the query that evaluates it.
//!
//! What to read (binding a query to a view, planning again when the view
//! was dropped) is the engine's (`prepared.rs`, `engine.rs`); this module
//! only reads. Its outcomes are typed: `Ok(None)` for a read that gave up,
//! [`DataflowError::ViewDropped`] for a view a schema change uninstalled.

mod fill;
mod keys;
mod post_lookup;
mod view;

use std::sync::atomic::Ordering as AO;
use std::sync::Arc;

use ladle_common::{Row, TableDeltas, Value};
use ladle_storage::Storage;
use parking_lot::Mutex;

pub(crate) use fill::{statement_memory, FillStats};
pub(crate) use keys::{bind_slots, numeric_key, numeric_param_on_text_key};
pub(crate) use view::{KeysFilling, Target, View};

use crate::graph::Graph;
use crate::ops::reader::Rows;
use crate::plan::Constant;
use crate::propagation::Propagation;
use crate::rows::ResultRows;
use crate::{DataflowConfig, DataflowError, Result};

/// What the read path uses of the engine: storage, the graph and its
/// propagation, the memory limit, and where fills are counted.
pub(crate) struct Context<'a> {
    pub(crate) storage: &'a Storage,
    pub(crate) graph: &'a Arc<Mutex<Graph>>,
    pub(crate) propagation: &'a Propagation,
    pub(crate) config: &'a DataflowConfig,
    pub(crate) stats: &'a FillStats,
}

/// How a read inside a transaction sees the tables: `overlay` (the
/// transaction's own writes, row deltas per table in order) on top of the
/// latest committed state, or of `snapshot` when the transaction reads one
/// point in time (REPEATABLE READ).
#[derive(Clone, Copy)]
pub(crate) struct TxRead<'a> {
    pub overlay: &'a [TableDeltas],
    pub snapshot: Option<&'a ladle_storage::ReadView>,
}

/// What a read does about a key its view does not hold.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnMiss {
    /// Fill it (an upquery; may block).
    Fill,
    /// Give up: the read answers `None`.
    GiveUp,
}

/// Reads view `v` with its parameter slots bound to `slots`; `lists` gives
/// the elements of slots bound to IN lists. `None` only with
/// [`OnMiss::GiveUp`], when a key is not cached.
pub(crate) fn read(
    cx: &Context<'_>,
    v: &View,
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
    overlay: Option<TxRead<'_>>,
    on_miss: OnMiss,
) -> Result<Option<ResultRows>> {
    let keys = keys::lookup_keys(&v.spec, slots, lists);
    // The keys' cached results, then borrowed rows: a read copies only the
    // rows it returns (a top-k over a large key used to copy all of them).
    let mut found: Vec<Option<Rows>> = Vec::with_capacity(keys.len());
    for k in &keys {
        found.push(match overlay {
            Some(o) => Some(cx.read_overlay(v, k, o)?),
            None => v.reader.get(k),
        });
    }
    let missing: Vec<usize> = (0..keys.len()).filter(|&i| found[i].is_none()).collect();
    if !missing.is_empty() && on_miss == OnMiss::GiveUp {
        return Ok(None);
    }
    // Counted once the read is sure to answer: a read that gave up is
    // retried, and counted, by a filling one.
    if overlay.is_none() {
        let hits = (keys.len() - missing.len()) as u64;
        v.reader.hits.fetch_add(hits, AO::Relaxed);
        v.reader.misses.fetch_add(missing.len() as u64, AO::Relaxed);
    }
    if !missing.is_empty() {
        let holes: Vec<&[Value]> = missing.iter().map(|&i| &keys[i][..]).collect();
        for (i, rows) in missing.iter().zip(cx.fill(v, &holes)?) {
            found[*i] = Some(rows);
        }
    }
    let results: Vec<Rows> = found.into_iter().flatten().collect();
    debug_assert_eq!(results.len(), keys.len(), "every key read or filled");
    let rows = post_lookup::answer(v, results, slots, lists)?;
    if v.computes {
        for row in rows.iter() {
            if let Some(m) = row.iter().find_map(crate::expr::out_of_range_in) {
                if m == crate::expr::SUBQUERY_ROWS {
                    return Err(DataflowError::SubqueryRows);
                }
                return Err(DataflowError::OutOfRange(m.to_string()));
            }
        }
    }
    Ok(Some(rows))
}

/// The row of a query without FROM (or none, when its WHERE is false).
pub(crate) fn constant(c: &Constant, slots: &[Value]) -> Result<Vec<Row>> {
    if let Some(f) = &c.filter {
        if !f.eval_bool(&[], slots)? {
            return Ok(vec![]);
        }
    }
    Ok(vec![c
        .exprs
        .iter()
        .map(|e| e.eval_params(&[], slots))
        .collect::<Result<Row, _>>()?])
}
