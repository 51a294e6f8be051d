//! Pulls (upqueries): the rows of a node for a key, answered from state
//! where the node has it, otherwise computed from its parents and filling
//! the node's state on the way.

use ladle_common::{Collation, Row, RowDelta, TableId, Value};

use crate::hash::{HashMap, HashSet};

use super::columns::narrowed;
use super::{choose_index, split_cols, BaseReads, FilledPartition, Graph, NodeId};
use crate::ops::{self, key_matches, project_cols, Join, Op};
use crate::{DataflowError, Result};

impl Graph {
    /// Rows of node `n` whose `cols` equal `key`: answered from state where
    /// the node has it, otherwise computed from its parents (filling the
    /// node's state on the way: an upquery).
    pub fn pull(&mut self, n: NodeId, cols: &[usize], key: &[Value]) -> Result<Vec<Row>> {
        let storage = self.storage.clone();
        self.pull_from(&*storage, n, cols, key)
    }

    /// [`Graph::pull`] for each of `keys`, computed together: a reader's
    /// misses for an IN list share their base lookups (see
    /// [`Graph::pull_keys`]).
    pub fn pull_many(
        &mut self,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        let storage = self.storage.clone();
        self.pull_keys(&*storage, n, cols, keys)
    }

    /// [`Graph::pull`] reading base tables from `src` (a propagation
    /// snapshot, or a transaction's read view).
    pub fn pull_from(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        key: &[Value],
    ) -> Result<Vec<Row>> {
        if key.iter().any(Value::is_null) {
            return Ok(vec![]);
        }
        crate::interrupt::check()?;
        let parents = self.nodes[n].parents.clone();
        let colls = self.nodes[n].colls.clone();
        match &self.nodes[n].op {
            Op::Base { table, .. } => self.base_rows(src, n, *table, cols, key),
            Op::Values(rows) => Ok(rows
                .iter()
                .filter(|r| key_matches(r, cols, key, &colls))
                .cloned()
                .collect()),
            Op::Filter(f) => {
                let f = f.clone();
                f.pull(self.pull_from(src, parents[0], cols, key)?)
            }
            Op::Project(p) => {
                let p = p.clone();
                let rows = p.pull(cols, key, &colls, |c, k| {
                    self.pull_from(src, parents[0], c, k)
                })?;
                crate::interrupt::charge_bytes(p.computed_bytes(&rows))?;
                Ok(rows)
            }
            Op::Union(u) => {
                let u = u.clone();
                u.pull(|i| self.pull_from(src, parents[i], cols, key))
            }
            Op::Join(j) => {
                let j = j.clone();
                self.pull_join(src, n, &j, cols, key)
            }
            Op::Aggregate(_) | Op::Window(_) => Ok(self
                .pull_aggregate(src, n, cols, std::slice::from_ref(&key.to_vec()))?
                .pop()
                .unwrap_or_default()),
            Op::Reader(_) | Op::Removed => Err(DataflowError::Internal(format!("pull from n{n}"))),
        }
    }

    /// Rows of `n` for each of `keys` (values of `cols`), exactly as one
    /// [`Graph::pull_from`] per key gives them. A join's upquery asks for
    /// every distinct join key of its other input at once, and at cold start
    /// that is thousands (a front page joins 40k stories with their
    /// authors): filters, projections and unions pass the whole set down,
    /// an aggregate fills its missing partitions from one pull, and a base
    /// table answers from one scan grouped by key (a hash join's build side)
    /// when that reads fewer rows than the lookups would seek, otherwise
    /// from one batched lookup (one storage snapshot and index iterator:
    /// a page's IN list misses dozens of keys).
    pub(crate) fn pull_keys(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        crate::interrupt::check()?;
        if keys.len() < 2 || keys.iter().any(|k| k.iter().any(Value::is_null)) {
            return self.pull_each(src, n, cols, keys);
        }
        let parents = self.nodes[n].parents.clone();
        match &self.nodes[n].op {
            Op::Base { table, .. } => self.base_rows_for_keys(KeysRead {
                src,
                n,
                table: *table,
                cols,
                keys,
            }),
            Op::Filter(f) => {
                let f = f.clone();
                Ok(f.pull_keys(self.pull_keys(src, parents[0], cols, keys)?))
            }
            Op::Project(p) => {
                let p = p.clone();
                match p.pull_keys(cols, keys, |c, k| self.pull_keys(src, parents[0], c, k)) {
                    Some(per_key) => {
                        let per_key = per_key?;
                        let bytes = per_key.iter().map(|rows| p.computed_bytes(rows)).sum();
                        crate::interrupt::charge_bytes(bytes)?;
                        Ok(per_key)
                    }
                    None => self.pull_each(src, n, cols, keys),
                }
            }
            Op::Union(u) => {
                let u = u.clone();
                u.pull_keys(keys.len(), |i| self.pull_keys(src, parents[i], cols, keys))
            }
            Op::Aggregate(_) | Op::Window(_) => self.pull_aggregate(src, n, cols, keys),
            Op::Join(j) => {
                let j = j.clone();
                self.pull_join_keys(src, n, &j, cols, keys)
            }
            _ => self.pull_each(src, n, cols, keys),
        }
    }

    /// [`Graph::pull_join`] for each of `keys`, where every key column is
    /// on one input (a story page's comments joined with their authors,
    /// looked up by story for an IN list or a cold aggregate's partitions):
    /// that input is pulled for all keys at once, then the other input once
    /// for every distinct join key of all of them, instead of both once per
    /// key. Keys on both inputs are pulled one by one.
    fn pull_join_keys(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        j: &Join,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        let (l, r) = (self.nodes[n].parents[0], self.nodes[n].parents[1]);
        let lw = self.nodes[l].colls.len();
        let outer = matches!(j.kind, ops::JoinKind::Inner | ops::JoinKind::Left);
        if cols.iter().all(|&c| c < lw) {
            let per_key = self.pull_keys(src, l, cols, keys)?;
            return self.join_each(src, j, r, per_key, JoinSide::Left);
        }
        if outer && cols.iter().all(|&c| c >= lw) {
            let rcols: Vec<usize> = cols.iter().map(|&c| c - lw).collect();
            let per_key = self.pull_keys(src, r, &rcols, keys)?;
            return self.join_each(src, j, l, per_key, JoinSide::Right);
        }
        self.pull_each(src, n, cols, keys)
    }

    /// Joins each of `per_key` (rows of the join's `side` input) with their
    /// matches in `other` (the other input), pulling `other` once for every
    /// distinct join key of all of them. As [`Graph::join_from_left`] and
    /// [`Graph::join_from_right`] give for each alone: left rows with a
    /// NULL join key are NULL-extended (LEFT joins), right ones dropped.
    fn join_each(
        &mut self,
        src: &dyn BaseReads,
        j: &Join,
        other: NodeId,
        per_key: Vec<Vec<Row>>,
        side: JoinSide,
    ) -> Result<Vec<Vec<Row>>> {
        let (own_cols, other_cols) = match side {
            JoinSide::Left => (&j.left_cols, &j.right_cols),
            JoinSide::Right => (&j.right_cols, &j.left_cols),
        };
        let grouped: Vec<_> = per_key
            .into_iter()
            .map(|rows| group_by_join_key(rows, own_cols, &j.colls))
            .collect();
        // Every distinct join key, and where each key's groups find theirs.
        let mut all_keys: Vec<Vec<Value>> = Vec::new();
        let mut slot: HashMap<Vec<Value>, usize> = HashMap::default();
        let slots: Vec<Vec<usize>> = grouped
            .iter()
            .map(|(join_keys, _, _)| {
                join_keys
                    .iter()
                    .map(|k| {
                        *slot.entry(ops::norm_key(k, &j.colls)).or_insert_with(|| {
                            all_keys.push(k.clone());
                            all_keys.len() - 1
                        })
                    })
                    .collect()
            })
            .collect();
        let matches = self.pull_keys(src, other, other_cols, &all_keys)?;
        grouped
            .into_iter()
            .zip(slots)
            .map(|((_, own_groups, nulls), slots)| {
                let other_groups = slots.iter().map(|&i| matches[i].as_slice());
                let own_groups = own_groups.iter().map(Vec::as_slice);
                match side {
                    JoinSide::Left => {
                        join_groups(j, own_groups.zip(other_groups), j.join_rows(&nulls, &[]))
                    }
                    JoinSide::Right => join_groups(j, other_groups.zip(own_groups), Vec::new()),
                }
            })
            .collect()
    }

    /// [`Graph::pull_keys`] one key at a time.
    fn pull_each(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        keys.iter()
            .map(|k| self.pull_from(src, n, cols, k))
            .collect()
    }

    /// Rows of aggregate (or window) node `n` for each of `keys`, filling the partitions
    /// it lacks from one pull of its input (shared with the real graph's
    /// state when this is a detached copy).
    fn pull_aggregate(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        let parent = self.nodes[n].parents[0];
        let colls = self.nodes[n].colls.clone();
        let Some(state_key) = self.nodes[n].op.state_key() else {
            return Err(DataflowError::Internal(format!("n{n} is not an aggregate")));
        };
        let state_key = state_key.to_vec();
        let determined = state_key.is_empty()
            || (cols.len() == state_key.len() && state_key.iter().all(|k| cols.contains(k)));
        if !determined && matches!(self.nodes[n].op, Op::Window(_)) {
            return self.pull_top_k_by(src, n, cols, keys);
        }
        let mut out: Vec<Option<Vec<Row>>> = Vec::with_capacity(keys.len());
        let mut state_keys = Vec::with_capacity(keys.len());
        let mut missing: HashSet<Vec<Value>> = HashSet::default();
        let mut missing_keys: Vec<Vec<Value>> = Vec::new();
        for key in keys {
            // Values of the state key for this lookup.
            let sk: Option<Vec<Value>> = if state_key.is_empty() {
                Some(vec![])
            } else if cols.len() == state_key.len() {
                state_key
                    .iter()
                    .map(|k| cols.iter().position(|c| c == k).map(|i| key[i].clone()))
                    .collect()
            } else {
                None
            };
            let Some(sk) = sk else {
                return Err(DataflowError::Internal(format!(
                    "aggregate n{n} looked up by {cols:?}, keyed by {state_key:?}"
                )));
            };
            let shared = match (self.aggregate_state(n, &sk), &mut self.detached) {
                (Some(rows), Some(d)) if d.real_graph.is_some() => {
                    d.read.push((d.real[n], sk.clone()));
                    Some(rows)
                }
                (rows, _) => rows,
            };
            // Each missing partition is pulled once, however many keys
            // map to it (every key of a lookup maps to the one partition
            // of an aggregate without GROUP BY).
            if shared.is_none() && missing.insert(sk.clone()) {
                missing_keys.push(sk.clone());
            }
            out.push(shared);
            state_keys.push(sk);
        }
        let mut filled: HashMap<Vec<Value>, Vec<Row>> =
            HashMap::with_capacity_and_hasher(missing_keys.len(), Default::default());
        if let Some(parts) = self.fold_scan(src, n, &state_key, &missing_keys) {
            filled.extend(missing_keys.into_iter().zip(parts?));
            return Ok(Self::partition_rows(
                out,
                keys,
                &state_keys,
                filled,
                (cols, &colls),
            ));
        }
        let inputs = self.pull_keys(src, parent, &state_key, &missing_keys)?;
        for (sk, input) in missing_keys.into_iter().zip(inputs) {
            crate::interrupt::charge_bytes(self.nodes[n].op.fill_bytes_bound(&input))?;
            let rows = self.nodes[n].op.fill_partition(&sk, input);
            if let Some(d) = &mut self.detached {
                if let Some(part) = FilledPartition::of(&self.nodes[n].op, &sk) {
                    d.fills.push((d.real[n], sk.clone(), part));
                }
            }
            filled.insert(sk, rows);
        }
        Ok(Self::partition_rows(
            out,
            keys,
            &state_keys,
            filled,
            (cols, &colls),
        ))
    }

    /// The rows of each of `keys` (whose state keys are `state_keys`):
    /// from its partition where it was found (`out`), otherwise from
    /// `filled`. A filled partition is moved to the last key reading it,
    /// cloned for the others (rows 5,000 columns wide are 120 KB each).
    fn partition_rows(
        out: Vec<Option<Vec<Row>>>,
        keys: &[Vec<Value>],
        state_keys: &[Vec<Value>],
        mut filled: HashMap<Vec<Value>, Vec<Row>>,
        (cols, colls): (&[usize], &[Collation]),
    ) -> Vec<Vec<Row>> {
        let mut readers: HashMap<&[Value], usize> = HashMap::default();
        for (rows, sk) in out.iter().zip(state_keys) {
            if rows.is_none() {
                *readers.entry(sk.as_slice()).or_default() += 1;
            }
        }
        out.into_iter()
            .zip(keys)
            .zip(state_keys)
            .map(|((rows, key), sk)| {
                rows.or_else(|| match readers.get_mut(sk.as_slice()) {
                    Some(left) if *left > 1 => {
                        *left -= 1;
                        filled.get(sk).cloned()
                    }
                    _ => filled.remove(sk),
                })
                .unwrap_or_default()
                .into_iter()
                .filter(|r| key_matches(r, cols, key, colls))
                .collect()
            })
            .collect()
    }

    /// Aggregate (or window) `n`'s filled partition `sk`: its own, or (in a detached
    /// copy) the real graph's, read under that graph's lock.
    /// Rows of window `n` whose `cols` (not its state key) equal each of
    /// `keys`: the window's input rows with those values say which state
    /// partitions hold them, and those partitions' output has them if they
    /// are within its limit. A top-k below a LEFT JOIN is looked up so by
    /// the join key whenever the right side changes (a vote for a comment).
    ///
    /// While a batch propagates, a partition that is a hole answers
    /// nothing instead of being filled: no state above depends on it
    /// (nodes above are cleared with it), so filling it would only scan
    /// the window's whole input on the write path. A row whose partition
    /// values hold a NULL is in no partition a key lookup reads.
    fn pull_top_k_by(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        cols: &[usize],
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Row>>> {
        let parent = self.nodes[n].parents[0];
        let colls = self.nodes[n].colls.clone();
        let state_key = self.nodes[n].op.state_key().unwrap_or_default().to_vec();
        let key_colls: Vec<Collation> = state_key.iter().map(|&c| colls[c]).collect();
        let inputs = self.pull_keys(src, parent, cols, keys)?;
        // Per key, the (normalized) partitions its input rows fall in.
        let mut partitions: Vec<Vec<Value>> = Vec::new();
        let mut index: HashMap<Vec<Value>, usize> = HashMap::default();
        let mut wanted: Vec<Vec<usize>> = Vec::with_capacity(keys.len());
        for rows in &inputs {
            let mut mine = Vec::new();
            for r in rows {
                let sk: Vec<Value> = state_key.iter().map(|&c| r[c].clone()).collect();
                if sk.iter().any(Value::is_null) {
                    continue;
                }
                let norm = ops::norm_key(&sk, &key_colls);
                let at = *index.entry(norm).or_insert_with(|| {
                    partitions.push(sk);
                    partitions.len() - 1
                });
                if !mine.contains(&at) {
                    mine.push(at);
                }
            }
            wanted.push(mine);
        }
        // Partitions filled here are read in place; the others are pulled
        // (filled, or read from the real graph by a detached copy).
        let pulled: Vec<usize> = (0..partitions.len())
            .filter(|&i| !self.propagating && !self.nodes[n].op.is_filled(&partitions[i]))
            .collect();
        let pulled_keys: Vec<Vec<Value>> = pulled.iter().map(|&i| partitions[i].clone()).collect();
        let mut emitted: Vec<Option<Vec<Row>>> = vec![None; partitions.len()];
        for (i, rows) in
            pulled
                .into_iter()
                .zip(self.pull_aggregate(src, n, &state_key, &pulled_keys)?)
        {
            emitted[i] = Some(rows);
        }
        let Op::Window(w) = &self.nodes[n].op else {
            return Err(DataflowError::Internal(format!("n{n} is not a window")));
        };
        Ok(keys
            .iter()
            .zip(wanted)
            .map(|(key, parts)| {
                let matches = |r: &Row| key_matches(r, cols, key, &colls);
                let mut out = Vec::new();
                for &i in &parts {
                    match &emitted[i] {
                        Some(rows) => out.extend(rows.iter().filter(|r| matches(r)).cloned()),
                        None => out.extend(
                            w.lookup_matching(&partitions[i], matches)
                                .unwrap_or_default(),
                        ),
                    }
                }
                out
            })
            .collect())
    }

    fn aggregate_state(&self, n: NodeId, sk: &[Value]) -> Option<Vec<Row>> {
        if let Some(rows) = self.nodes[n].op.lookup_partition(sk) {
            return Some(rows);
        }
        let d = self.detached.as_ref()?;
        let real = d.real_graph.as_ref()?;
        match real.lock().nodes.get(d.real[n]).map(|x| &x.op) {
            Some(real) => real.lookup_partition(sk),
            None => None,
        }
    }

    /// Rows of join node `n` whose `cols` equal `key`. Key columns of one
    /// input are pushed into that input's pull; with key columns on both
    /// inputs, the pull starts from the side chosen at install (`drives`),
    /// looks the other side up by join key and filters on the full key.
    ///
    /// LEFT joins: the key never holds NULL (`pull` returns nothing then),
    /// so rows matching a key on a right column are never NULL-extended:
    /// they are exactly the inner join's matching rows, and the right side
    /// can be filtered before joining.
    fn pull_join(
        &mut self,
        src: &dyn BaseReads,
        n: NodeId,
        j: &Join,
        cols: &[usize],
        key: &[Value],
    ) -> Result<Vec<Row>> {
        let (l, r) = (self.nodes[n].parents[0], self.nodes[n].parents[1]);
        let colls = self.nodes[n].colls.clone();
        let lw = self.nodes[l].colls.len();
        let (lcols, rcols) = split_cols(cols, lw);
        let pick = |sub: &[usize]| -> Vec<Value> { sub.iter().map(|&i| key[i].clone()).collect() };
        let lkey = pick(&lcols);
        let rkey = pick(&rcols);
        let lcols: Vec<usize> = lcols.iter().map(|&i| cols[i]).collect();
        let rcols: Vec<usize> = rcols.iter().map(|&i| cols[i] - lw).collect();
        let outer = matches!(j.kind, ops::JoinKind::Inner | ops::JoinKind::Left);
        if rcols.is_empty() {
            let left_rows = self.pull_from(src, l, &lcols, &lkey)?;
            return self.join_from_left(src, j, r, left_rows);
        }
        if lcols.is_empty() && outer {
            return self.join_from_right(src, j, l, r, &rcols, &rkey);
        }
        let drive = j.drives.iter().find(|d| d.0 == cols).map(|d| d.1);
        let mut out = match drive {
            Some(true) if outer => self.join_from_right(src, j, l, r, &rcols, &rkey)?,
            Some(false) => {
                let left_rows = self.pull_from(src, l, &lcols, &lkey)?;
                self.join_from_left(src, j, r, left_rows)?
            }
            _ => {
                let left_rows = self.pull_from(src, l, &[], &[])?;
                self.join_from_left(src, j, r, left_rows)?
            }
        };
        out.retain(|row| key_matches(row, cols, key, &colls));
        Ok(out)
    }

    /// Joins the right rows with `rcols == rkey` with their left matches
    /// (inner and LEFT joins: only matched rows), pulling the left input
    /// once for all distinct join keys.
    fn join_from_right(
        &mut self,
        src: &dyn BaseReads,
        j: &Join,
        l: NodeId,
        r: NodeId,
        rcols: &[usize],
        rkey: &[Value],
    ) -> Result<Vec<Row>> {
        let rrows = self.pull_from(src, r, rcols, rkey)?;
        let (keys, right_groups, _) = group_by_join_key(rrows, &j.right_cols, &j.colls);
        let left_groups = self.pull_keys(src, l, &j.left_cols, &keys)?;
        join_groups(j, pairs(&left_groups, &right_groups), Vec::new())
    }

    /// Joins `left_rows` with their right matches, pulling the right input
    /// once for all distinct join keys.
    fn join_from_left(
        &mut self,
        src: &dyn BaseReads,
        j: &Join,
        r: NodeId,
        left_rows: Vec<Row>,
    ) -> Result<Vec<Row>> {
        let (keys, left_groups, nulls) = group_by_join_key(left_rows, &j.left_cols, &j.colls);
        let right_groups = self.pull_keys(src, r, &j.right_cols, &keys)?;
        join_groups(
            j,
            pairs(&left_groups, &right_groups),
            j.join_rows(&nulls, &[]),
        )
    }

    /// [`Graph::base_rows`] for each of `keys`. Many keys over a table that
    /// is small next to them are answered from one scan grouped by key:
    /// a scanned row costs a fraction of an index seek. Only integer key
    /// columns are grouped so here: their values compare exactly as a
    /// lookup does; text keys are grouped (by collation-normalized value)
    /// only where no index serves them ([`Graph::text_keys_scanned`]).
    /// Whether columns `cols` of `table` are integers and so is every value
    /// of `keys` (so rows are grouped by [`IntKey`]).
    pub(super) fn integer_keys(&self, table: TableId, cols: &[usize], keys: &[Vec<Value>]) -> bool {
        self.schemas
            .get(&table)
            .cloned()
            .or_else(|| self.storage.table_by_id(table))
            .is_some_and(|s| {
                cols.iter().enumerate().all(|(i, &c)| {
                    s.columns.get(c).is_some_and(|col| col.ty.is_integer())
                        && keys
                            .iter()
                            .all(|k| matches!(k[i], Value::Int(_) | Value::UInt(_)))
                })
            })
    }

    /// Whether one scan of `table` reads it for `nkeys` keys of `cols`
    /// more cheaply than a lookup per key would, one lookup costing as
    /// much as `seek_cost` scanned rows.
    pub(super) fn scan_beats_lookups(
        &self,
        table: TableId,
        cols: &[usize],
        nkeys: usize,
        seek_cost: u64,
    ) -> bool {
        !cols.is_empty()
            && nkeys >= MIN_KEYS_TO_SCAN
            && (nkeys as u64) * seek_cost >= self.storage.estimate_rows(table)
    }

    fn base_rows_for_keys(&self, read: KeysRead<'_>) -> Result<Vec<Vec<Row>>> {
        let KeysRead {
            table, cols, keys, ..
        } = read;
        let integer_keys = self.integer_keys(table, cols, keys);
        if !integer_keys || !self.scan_beats_lookups(table, cols, keys.len(), SEEK_COST_IN_ROWS) {
            return self.base_rows_looked_up(read);
        }
        // The keys are integers (checked above), so each is grouped by its
        // numeric value: no per-row key vectors, collation or `Value`
        // comparisons (the front page's cold fill groups 360k votes).
        let every = |k: &[Value]| IntKey::of(k.iter());
        let of_row =
            |row: &[Value]| IntKey::of(cols.iter().map(|&c| row.get(c).unwrap_or(&Value::Null)));
        self.scan_grouped(read, every, of_row)
    }

    /// [`Graph::base_rows`] for each of `keys` from one scan of `table`,
    /// each row going to the key `of_row` gives it (`of_key` gives the
    /// asked keys theirs; `None`, as for a NULL, matches nothing).
    fn scan_grouped<K: std::hash::Hash + Eq>(
        &self,
        read: KeysRead<'_>,
        of_key: impl Fn(&[Value]) -> Option<K>,
        of_row: impl Fn(&[Value]) -> Option<K>,
    ) -> Result<Vec<Vec<Row>>> {
        let keys = read.keys;
        let mut slot: HashMap<K, usize> =
            HashMap::with_capacity_and_hasher(keys.len(), Default::default());
        let mut first_asked = Vec::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            let first = match of_key(k) {
                Some(key) => *slot.entry(key).or_insert(i),
                None => i,
            };
            first_asked.push(first);
        }
        let mut out = vec![Vec::new(); keys.len()];
        let (rows, keep) = self.scan_read_columns(read.src, read.n, read.table, read.cols)?;
        for row in self.as_of_batch(read.table, &[], &[], &[], rows, keep.as_deref())? {
            if let Some(&i) = of_row(&row).and_then(|key| slot.get(&key)) {
                out[i].push(row);
            }
        }
        // A key asked twice gets its first asking's rows.
        for (i, &first) in first_asked.iter().enumerate() {
            if first != i {
                out[i] = out[first].clone();
            }
        }
        Ok(out)
    }

    /// Text `keys` of text columns `cols` that no index serves, from one
    /// scan grouped by each key's value as its collation compares it,
    /// instead of a scan per key (100,000 strings in an IN list were
    /// 100,000 scans); `None` for other keys.
    fn text_keys_scanned(
        &self,
        read: KeysRead<'_>,
        schema: Option<&ladle_common::TableSchema>,
    ) -> Option<Result<Vec<Vec<Row>>>> {
        let KeysRead { cols, keys, .. } = read;
        let schema = schema?;
        let text = cols.iter().enumerate().all(|(i, &c)| {
            schema.columns.get(c).is_some_and(|col| col.ty.is_text())
                && keys
                    .iter()
                    .all(|k| matches!(k.get(i), Some(Value::Text(_))))
        });
        if !text || cols.is_empty() || keys.len() < 2 {
            return None;
        }
        let colls: Vec<Collation> = cols
            .iter()
            .map(|&c| schema.columns[c].compare_collation())
            .collect();
        let normalized = |vals: &mut dyn Iterator<Item = Option<&Value>>| {
            vals.zip(&colls)
                .map(|(v, &coll)| match v {
                    Some(v @ Value::Text(_)) => Some(v.key_normalized(coll)),
                    _ => None,
                })
                .collect::<Option<Vec<Value>>>()
        };
        let of_key = |k: &[Value]| normalized(&mut k.iter().map(Some));
        let of_row = |row: &[Value]| normalized(&mut cols.iter().map(|&c| row.get(c)));
        Some(self.scan_grouped(read, of_key, of_row))
    }

    /// [`Graph::base_rows`] for each of `keys`, from one lookup of all of
    /// them where an index serves `cols` (one storage snapshot and one
    /// index scan instead of one per key).
    fn base_rows_looked_up(&self, read: KeysRead<'_>) -> Result<Vec<Vec<Row>>> {
        let KeysRead {
            src,
            n,
            table,
            cols,
            keys,
        } = read;
        let schema = self.base_schema(table);
        let chosen = schema.as_ref().and_then(|s| choose_index(s, cols));
        let (Some((index, perm)), false) = (chosen, cols.is_empty()) else {
            if let Some(rows) = self.text_keys_scanned(read, schema.as_deref()) {
                return rows;
            }
            return keys
                .iter()
                .map(|k| self.base_rows(src, n, table, cols, k))
                .collect();
        };
        let colls = compare_collations(schema.as_deref());
        let index_keys: Vec<Vec<Value>> = keys
            .iter()
            .map(|key| perm.iter().map(|&i| key[i].clone()).collect())
            .collect();
        let keep = self.read_columns(n, cols);
        let found = src.lookup_many(table, index, &index_keys, keep.as_deref())?;
        keys.iter()
            .zip(found)
            .map(|(key, rows)| self.as_of_batch(table, cols, key, &colls, rows, keep.as_deref()))
            .collect()
    }

    fn base_schema(&self, table: TableId) -> Option<std::sync::Arc<ladle_common::TableSchema>> {
        self.schemas
            .get(&table)
            .cloned()
            .or_else(|| self.storage.table_by_id(table))
    }

    /// Base table rows with `cols == key`, as of the batch position being
    /// propagated (storage minus pending deltas).
    fn base_rows(
        &self,
        src: &dyn BaseReads,
        n: NodeId,
        table: TableId,
        cols: &[usize],
        key: &[Value],
    ) -> Result<Vec<Row>> {
        let schema = self.base_schema(table);
        let colls = compare_collations(schema.as_deref());
        let keep = self.read_columns(n, cols);
        let rows = match schema.as_ref().and_then(|s| choose_index(s, cols)) {
            Some((index, perm)) if !cols.is_empty() => {
                let k: Vec<Value> = perm.iter().map(|&i| key[i].clone()).collect();
                let mut found = src.lookup_many(table, index, &[k], keep.as_deref())?;
                found.pop().unwrap_or_default()
            }
            _ => match keep.as_deref() {
                None => src.scan(table)?,
                Some(keep) => src.scan_columns(table, keep)?,
            },
        };
        self.as_of_batch(table, cols, key, &colls, rows, keep.as_deref())
    }

    /// Every row of base node `n` (table `table`), in a detached copy
    /// decoding only the columns [`Graph::read_columns`] keeps; the
    /// columns kept, where not all.
    fn scan_read_columns(
        &self,
        src: &dyn BaseReads,
        n: NodeId,
        table: TableId,
        cols: &[usize],
    ) -> Result<(Vec<Row>, Option<Vec<bool>>)> {
        match self.read_columns(n, cols) {
            None => Ok((src.scan(table)?, None)),
            Some(keep) => Ok((src.scan_columns(table, &keep)?, Some(keep))),
        }
    }

    /// The columns a read of base node `n` by `cols` must decode: those
    /// the nodes above it read (see [`Graph::columns_read`]) and `cols`;
    /// `None` for all.
    pub(super) fn read_columns(&self, n: NodeId, cols: &[usize]) -> Option<Vec<bool>> {
        // Only a detached copy's pulls (fills) narrow: the real graph's
        // also propagate, and a join there compares the rows it pulls with
        // the batch's deltas, which hold every column.
        self.detached.as_ref()?;
        let mut keep = self.columns_read(n)?;
        for &c in cols {
            if let Some(k) = keep.get_mut(c) {
                *k = true;
            }
        }
        Some(keep)
    }

    /// Storage's `rows` for `cols == key` (an index lookup may return more:
    /// a prefix, or another collation's equal), less the pending deltas.
    /// `keep`: the columns `rows` were read with (the others NULL), which
    /// the deltas are narrowed to before they are taken out.
    fn as_of_batch(
        &self,
        table: TableId,
        cols: &[usize],
        key: &[Value],
        colls: &[Collation],
        mut rows: Vec<Row>,
        keep: Option<&[bool]>,
    ) -> Result<Vec<Row>> {
        if !cols.is_empty() {
            rows.retain(|r| key_matches(r, cols, key, colls));
        }
        if let Some(p) = self.pending.get(&table) {
            let matching: Vec<&RowDelta> = p
                .iter()
                .filter(|d| cols.is_empty() || key_matches(d.row(), cols, key, colls))
                .collect();
            rows = match keep {
                None => ops::undo(rows, &matching),
                Some(keep) => {
                    let narrowed: Vec<RowDelta> =
                        matching.iter().map(|d| narrowed(d, keep)).collect();
                    ops::undo(rows, &narrowed.iter().collect::<Vec<_>>())
                }
            };
        }
        crate::interrupt::charge(&rows)?;
        Ok(rows)
    }
}

/// An integer key's numeric value: signed and unsigned values compare as
/// numbers do (the key `1` finds a BIGINT UNSIGNED column's 1).
#[derive(PartialEq, Eq, Hash)]
pub(super) enum IntKey {
    One(i128),
    Many(Vec<i128>),
}

impl IntKey {
    /// `None` unless every value is an integer.
    pub(super) fn of<'a>(values: impl ExactSizeIterator<Item = &'a Value>) -> Option<IntKey> {
        let int = |v: &Value| match v {
            Value::Int(i) => Some(i128::from(*i)),
            Value::UInt(u) => Some(i128::from(*u)),
            _ => None,
        };
        if values.len() == 1 {
            let mut values = values;
            return values.next().and_then(int).map(IntKey::One);
        }
        values
            .map(int)
            .collect::<Option<Vec<_>>>()
            .map(IntKey::Many)
    }
}

/// Comparison collations of a base table's columns (none: unknown table).
fn compare_collations(schema: Option<&ladle_common::TableSchema>) -> Vec<Collation> {
    schema
        .map(|s| s.columns.iter().map(|c| c.compare_collation()).collect())
        .unwrap_or_default()
}

/// How many scanned rows one index lookup costs (a RocksDB seek and
/// iterator set-up against decoding one row in sequence). A base table
/// with fewer rows than this many per key asked is scanned once instead.
/// On the Lobsters front page at scale 1 (40k stories, 9 votes each),
/// 8 and 32 (which scans the votes too) cost the same CPU.
const SEEK_COST_IN_ROWS: u64 = 8;

/// Fewer keys than this are always looked up: a few lookups cost little
/// whatever the table holds, where a scan chosen on a row count that is
/// too low (storage's is an estimate) reads the whole table for each
/// miss.
pub(super) const MIN_KEYS_TO_SCAN: usize = 32;

/// `rows` grouped by their values of `cols` (normalized by `colls`), in
/// first-seen order: the distinct keys, each key's rows, and the rows with
/// a NULL key column (which match nothing).
fn group_by_join_key(
    rows: Vec<Row>,
    cols: &[usize],
    colls: &[Collation],
) -> (Vec<Vec<Value>>, Vec<Vec<Row>>, Vec<Row>) {
    let mut keys = Vec::new();
    let mut groups: Vec<Vec<Row>> = Vec::new();
    let mut index: HashMap<Vec<Value>, usize> = HashMap::default();
    let mut nulls = Vec::new();
    for row in rows {
        let key = project_cols(&row, cols);
        if key.iter().any(Value::is_null) {
            nulls.push(row);
            continue;
        }
        match index.entry(ops::norm_key(&key, colls)) {
            std::collections::hash_map::Entry::Occupied(e) => groups[*e.get()].push(row),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(keys.len());
                keys.push(key);
                groups.push(vec![row]);
            }
        }
    }
    (keys, groups, nulls)
}

/// One batched read of a base table: the rows of base node `n` (of
/// `table`) whose `cols` equal each of `keys`, read from `src`.
#[derive(Clone, Copy)]
struct KeysRead<'a> {
    src: &'a dyn BaseReads,
    n: NodeId,
    table: TableId,
    cols: &'a [usize],
    keys: &'a [Vec<Value>],
}

/// Which input of a join.
#[derive(Clone, Copy)]
enum JoinSide {
    Left,
    Right,
}

/// Left and right groups paired by position.
fn pairs<'a>(
    left: &'a [Vec<Row>],
    right: &'a [Vec<Row>],
) -> impl Iterator<Item = (&'a [Row], &'a [Row])> {
    left.iter()
        .map(Vec::as_slice)
        .zip(right.iter().map(Vec::as_slice))
}

/// Appends to `out` the join of each pair of matching left and right
/// groups, charging each product to the statement's working set before it
/// is built (see [`crate::interrupt::charge_bytes`]).
fn join_groups<'a>(
    j: &Join,
    groups: impl Iterator<Item = (&'a [Row], &'a [Row])>,
    mut out: Vec<Row>,
) -> Result<Vec<Row>> {
    for (ls, rs) in groups {
        crate::interrupt::check()?;
        crate::interrupt::charge_bytes(j.output_bytes_bound(ls, rs))?;
        out.extend(j.join_rows(ls, rs));
    }
    Ok(out)
}
