//! Streaming aggregate fills: an aggregate missing many partitions over a
//! chain of filters and projections on a base table folds each scanned row
//! into its partition as it is decoded, instead of collecting the table's
//! rows per key first. A cold front page counts 360k votes and 120k
//! comments per story: collected, every row was a vector allocated,
//! projected into another and dropped at the end (a third of the fill's
//! CPU in allocation and first-touch page faults); folded, a row lives
//! until the next is decoded.

use ladle_common::{Row, TableId, Value};

use super::pull::{IntKey, MIN_KEYS_TO_SCAN};
use super::{BaseReads, FilledPartition, Graph, NodeId};
use crate::hash::HashMap;
use crate::ops::aggregate::PartitionFill;
use crate::ops::{Filter, Op, Project};
use crate::Result;

/// How many scanned rows one index lookup costs when the scan's rows are
/// folded rather than collected (see `SEEK_COST_IN_ROWS` in `pull`): a
/// folded row costs its decoding and one hash probe. Measured on the cold
/// front page after a restart (40k story ids, 360k votes, 120k comments;
/// server CPU of the first read, two rounds): unfolded 930 / 990 ms,
/// folded with the votes looked up (8) 890 / 1,160 ms, folded with the
/// votes scanned too (16) 860 / 890 ms.
const SEEK_COST_IN_FOLDED_ROWS: u64 = 16;

/// Which table a fold scans, from where, decoding which columns.
#[derive(Clone, Copy)]
struct BaseScan<'a> {
    src: &'a dyn BaseReads,
    table: TableId,
    keep: Option<&'a [bool]>,
}

/// A stateless step between an aggregate and its base table, applied to
/// each scanned row bottom-up.
enum Step {
    Filter(Filter),
    Project(Project, Vec<Option<usize>>),
}

impl Step {
    fn apply(&self, row: Row) -> Option<Row> {
        match self {
            Step::Filter(f) => f.pass(row),
            Step::Project(p, movable) => Some(p.apply_owned(row, movable)),
        }
    }
}

impl Graph {
    /// Fills aggregate `n`'s partitions `keys` (values of its state key
    /// `state_key`) from one scan of the base table below it, folding each
    /// row in as it is read; returns each partition's output rows, in the
    /// order of `keys`. `None` when this does not apply and the caller
    /// pulls the input as usual: the aggregate is not over filters and
    /// projections of a base table, the keys are not integer columns
    /// passed through from it, a write is propagating into that table (its
    /// rows must be taken as of the batch), or looking the keys up costs
    /// less than the scan.
    pub(super) fn fold_scan(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        state_key: &[usize],
        keys: &[Vec<Value>],
    ) -> Option<Result<Vec<Vec<Row>>>> {
        // Checked before the chain is walked (and its operators cloned):
        // a story page's miss asks for a few keys, on the hot path.
        if keys.len() < MIN_KEYS_TO_SCAN || !matches!(self.nodes[n].op, Op::Aggregate(_)) {
            return None;
        }
        let (steps, base, table, base_cols) = self.stateless_chain(n, state_key)?;
        if self.pending.get(&table).is_some_and(|p| !p.is_empty())
            || !self.integer_keys(table, &base_cols, keys)
            || !self.scan_beats_lookups(table, &base_cols, keys.len(), SEEK_COST_IN_FOLDED_ROWS)
        {
            return None;
        }
        // Each key's partition, by its numeric value; keys equal as numbers
        // (1 and 1 UNSIGNED) would share one: left to the usual pull.
        let mut slot: HashMap<IntKey, usize> =
            HashMap::with_capacity_and_hasher(keys.len(), Default::default());
        for (i, k) in keys.iter().enumerate() {
            if slot.insert(IntKey::of(k.iter())?, i).is_some() {
                return None;
            }
        }
        let keep = self.read_columns(base, &base_cols);
        let scan = BaseScan {
            src,
            table,
            keep: keep.as_deref(),
        };
        Some(self.fold_partitions(scan, n, &steps, state_key, keys, &slot))
    }

    /// The filters and projections from aggregate `n` down to a base
    /// table (applied to a scanned row in the order given), the base node
    /// and its table, and the base columns `state_key` passes through
    /// from; `None` if another operator is on the way or a key column is
    /// computed.
    fn stateless_chain(
        &self,
        n: NodeId,
        state_key: &[usize],
    ) -> Option<(Vec<Step>, NodeId, TableId, Vec<usize>)> {
        let mut steps = Vec::new();
        let mut cols = state_key.to_vec();
        let mut node = *self.nodes[n].parents.first()?;
        loop {
            match &self.nodes[node].op {
                Op::Filter(f) => steps.push(Step::Filter(f.clone())),
                Op::Project(p) => {
                    cols = cols
                        .iter()
                        .map(|&c| p.source(c))
                        .collect::<Option<Vec<usize>>>()?;
                    steps.push(Step::Project(p.clone(), p.movable()));
                }
                Op::Base { table, .. } => {
                    steps.reverse();
                    return Some((steps, node, *table, cols));
                }
                _ => return None,
            }
            node = *self.nodes[node].parents.first()?;
        }
    }

    /// [`Graph::fold_scan`]'s work once it applies.
    fn fold_partitions(
        &mut self,
        scan: BaseScan<'_>,
        n: NodeId,
        steps: &[Step],
        state_key: &[usize],
        keys: &[Vec<Value>],
        slot: &HashMap<IntKey, usize>,
    ) -> Result<Vec<Vec<Row>>> {
        let Op::Aggregate(agg) = &self.nodes[n].op else {
            return Ok(vec![]);
        };
        let gcolls = agg.group_colls();
        let mut fills: Vec<PartitionFill> = keys.iter().map(|_| PartitionFill::default()).collect();
        let mut failed = None;
        let mut scanned = 0u64;
        let mut fold = |row: Row| -> bool {
            scanned += 1;
            if scanned.is_multiple_of(1024) {
                if let Err(e) = crate::interrupt::check() {
                    failed = Some(e);
                    return false;
                }
            }
            let Some(row) = steps.iter().try_fold(row, |row, step| step.apply(row)) else {
                return true;
            };
            let key = IntKey::of(
                state_key
                    .iter()
                    .map(|&c| row.get(c).unwrap_or(&Value::Null)),
            );
            if let Some(&i) = key.as_ref().and_then(|k| slot.get(k)) {
                agg.fill_row(&mut fills[i], row, &gcolls);
            }
            true
        };
        scan.src.scan_each(scan.table, scan.keep, &mut fold)?;
        if let Some(e) = failed {
            return Err(e);
        }
        let mut out = Vec::with_capacity(keys.len());
        for (sk, fill) in keys.iter().zip(fills) {
            crate::interrupt::charge_bytes(fill.bytes)?;
            let rows = match &mut self.nodes[n].op {
                Op::Aggregate(agg) => agg.finish_fill(sk, fill),
                _ => vec![],
            };
            if let Some(d) = &mut self.detached {
                if let Some(part) = FilledPartition::of(&self.nodes[n].op, sk) {
                    d.fills.push((d.real[n], sk.clone(), part));
                }
            }
            out.push(rows);
        }
        Ok(out)
    }
}
