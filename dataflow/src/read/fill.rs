//! Filling reader holes: the upquery of a key a view does not hold,
//! consistent with the writes propagating meanwhile, and the reads inside
//! transactions (computed the same way, never cached).

use std::sync::atomic::{AtomicU64, Ordering as AO};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::Value;

use super::view::{KeysFilling, View};
use super::{Context, TxRead};
use crate::graph::{BaseReads, Graph};
use crate::ops::reader::Rows;
use crate::propagation::{newest_commit, TableCounters};
use crate::{DataflowConfig, DataflowError, Result};

/// How reader misses were filled (see [`Context::fill`]).
#[derive(Default)]
pub(crate) struct FillStats {
    /// Computed outside the locks and installed.
    pub(crate) unlocked: AtomicU64,
    /// Computed outside the locks but discarded: a write to one of the
    /// view's tables committed meanwhile.
    pub(crate) conflicts: AtomicU64,
    /// Computed under the commit and graph locks.
    pub(crate) locked: AtomicU64,
    /// Of `unlocked`: installed by a second attempt that held the writers
    /// of the view's tables after a long first attempt lost to a write.
    pub(crate) held: AtomicU64,
    /// Of `conflicts`: stopped when the write committed, not at the install.
    pub(crate) stopped: AtomicU64,
}

/// Releases the keys a fill claimed, also when it fails or panics.
struct FillClaim<'a> {
    filling: &'a KeysFilling,
    keys: Vec<Vec<Value>>,
}

impl Drop for FillClaim<'_> {
    fn drop(&mut self) {
        let mut keys = self.filling.keys.lock();
        for k in &self.keys {
            keys.remove(k);
        }
        self.filling.done.notify_all();
    }
}

/// How often a read waiting for another read's fill of the same key checks
/// whether it was interrupted (KILL, a client gone, max_execution_time).
const FILL_WAIT: Duration = Duration::from_millis(200);

/// How long a read waits for another read's fill of the same key before
/// filling it itself. The claim ends with the fill (done, failed or
/// unwound), so this only guards against a fill that never ends: a short
/// bound made every waiter on a loaded server (a cold start, exactly when
/// fills are slow) repeat the fill it was waiting for.
const FILL_WAIT_MAX: Duration = Duration::from_secs(30);

/// An unlocked fill that took this long and lost its race to a write is
/// not retried unlocked: the next attempt runs under the locks.
const LONG_FILL: Duration = Duration::from_millis(20);

/// A fill at least this long is logged (see [`Context::fill_now`]).
const SLOW_FILL: Duration = Duration::from_millis(100);

/// The least a statement may materialize, whatever `--memory-limit`: tiny
/// limits (tests of constant eviction) still answer ordinary queries.
const MIN_STATEMENT_MEMORY: usize = 16 << 20;

/// What one statement's reads may materialize (see
/// [`crate::interrupt::watch_memory`]): half the view-state limit, so view
/// state plus a statement's rows stay within 1.5 times it.
pub(crate) fn statement_memory(config: &DataflowConfig) -> usize {
    (config.memory_limit / 2).max(MIN_STATEMENT_MEMORY)
}

/// How one optimistic fill ended (see [`Context::fill`]).
enum Attempt {
    /// Installed: each key's rows.
    Filled(Vec<Rows>),
    /// Discarded: a write to one of the view's tables committed meanwhile;
    /// `stopped_early` if the fill stopped when it did rather than at the
    /// install (see [`crate::interrupt::watch_lost`]).
    Lost { stopped_early: bool },
}

/// Whether any of `tables` committed since their counters read `before`.
fn moved_since(tables: &[Arc<TableCounters>], before: Vec<u64>) -> impl Fn() -> bool + 'static {
    let tables = tables.to_vec();
    move || {
        tables
            .iter()
            .zip(&before)
            .any(|(c, b)| c.committed.load(AO::SeqCst) != *b)
    }
}

impl Context<'_> {
    /// Fills a reader hole by an upquery, consistently with the deltas
    /// (invariant 4).
    ///
    /// First outside the locks, so a miss stalls neither writers nor other
    /// misses: note the commit counters of the view's tables, pull on a
    /// detached stateless copy of the view's ancestors (reading the latest
    /// storage, and the aggregate partitions the real graph has filled,
    /// each under a brief graph lock), then take the commit and graph locks
    /// and install the result (the reader key and the aggregate partitions
    /// computed on the way) only if no counter moved and the partitions read
    /// are still filled. Storage applies a batch before `on_commit` bumps
    /// the counters (under the graph lock, before propagating), all inside
    /// the commit lock, so unchanged counters mean every read saw exactly
    /// the batches bumped before the fill started (propagated before any of
    /// its graph reads), the state the graph reflects at install, and no
    /// delta for the key was dropped meanwhile. Otherwise, or after repeated
    /// conflicts, it fills under the locks.
    ///
    /// `keys` are filled together: one detached copy, one pass under the
    /// locks, one eviction (a page's IN list misses many keys at once).
    /// Returns each key's rows, in order.
    ///
    /// A key another read is filling is not filled again: this read waits
    /// (up to [`FILL_WAIT_MAX`]) and takes the rows that fill installed.
    pub(super) fn fill(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        let mut out: Vec<Option<Rows>> = vec![None; keys.len()];
        for round in 0..2 {
            let norm: Vec<Vec<Value>> = keys.iter().map(|k| v.reader.norm(k)).collect();
            let (mine, theirs): (Vec<usize>, Vec<usize>) = {
                let mut filling = v.filling.keys.lock();
                (0..keys.len())
                    .filter(|&i| out[i].is_none())
                    .partition(|&i| filling.insert(norm[i].clone()))
            };
            if !mine.is_empty() {
                let _claim = FillClaim {
                    filling: &v.filling,
                    keys: mine.iter().map(|&i| norm[i].clone()).collect(),
                };
                let holes: Vec<&[Value]> = mine.iter().map(|&i| keys[i]).collect();
                for (&i, rows) in mine.iter().zip(self.fill_now(v, &holes)?) {
                    out[i] = Some(rows);
                }
            }
            if theirs.is_empty() {
                break;
            }
            {
                let give_up = Instant::now() + FILL_WAIT_MAX;
                let mut filling = v.filling.keys.lock();
                while theirs.iter().any(|&i| filling.contains(&norm[i])) {
                    if v.filling.done.wait_for(&mut filling, FILL_WAIT).timed_out() {
                        crate::interrupt::check()?;
                        if Instant::now() >= give_up {
                            break;
                        }
                    }
                }
            }
            for &i in &theirs {
                out[i] = v.reader.get(keys[i]);
            }
            if round == 1 {
                // Still holes (evicted at once, or a slow fill): fill them
                // here without waiting again.
                let rest: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
                let holes: Vec<&[Value]> = rest.iter().map(|&i| keys[i]).collect();
                for (&i, rows) in rest.iter().zip(self.fill_now(v, &holes)?) {
                    out[i] = Some(rows);
                }
                break;
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Fills `keys` now (see [`Context::fill`]). What the view's expressions
    /// warn while computing its rows is not the reading statement's (see
    /// [`crate::expr::without_warnings`]).
    fn fill_now(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        let _budget = crate::interrupt::watch_memory(statement_memory(self.config));
        let started = Instant::now();
        let rows = crate::expr::without_warnings(|| self.fill_now_warning_free(v, keys))?;
        let elapsed = started.elapsed();
        if elapsed >= SLOW_FILL {
            // Every read of these keys waited this long (a cold start's
            // front page): the log says which view to look at.
            tracing::info!(
                view = %v.name,
                keys = keys.len(),
                rows = rows.iter().map(|r| r.len()).sum::<usize>(),
                elapsed_ms = elapsed.as_millis() as u64,
                "slow fill"
            );
        }
        Ok(rows)
    }

    fn fill_now_warning_free(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let detached = v.detached.get_or_init(|| {
            let g = self.graph.lock();
            if v.is_dropped() {
                return None;
            }
            let parent = g.nodes[v.node].parents[0];
            g.detach(parent, self.graph.clone())
        });
        if let Some(template) = detached {
            let mut hold = None;
            for _attempt in 0..2 {
                // An unlocked fill needs the worker to have applied every
                // batch of the view's tables; it usually has, or soon will.
                self.propagation
                    .pipeline
                    .wait_applied(newest_commit(&v.commits), Duration::from_millis(100));
                let mark = crate::interrupt::charged();
                let started = Instant::now();
                let stopped_early = match self.fill_unlocked(v, template, keys)? {
                    Attempt::Filled(rows) => {
                        if hold.is_some() {
                            self.stats.held.fetch_add(keys.len() as u64, AO::Relaxed);
                        }
                        return Ok(rows);
                    }
                    Attempt::Lost { stopped_early } => stopped_early,
                };
                if stopped_early {
                    self.stats.stopped.fetch_add(1, AO::Relaxed);
                }
                // The lost attempt's rows are gone: a view of a few hundred
                // MB must not fail with 1041 because a commit raced it.
                crate::interrupt::give_back_to(mark);
                self.stats.conflicts.fetch_add(1, AO::Relaxed);
                if hold.is_some() {
                    break;
                }
                if stopped_early || started.elapsed() >= LONG_FILL {
                    // A long fill lost to a write will lose again to the
                    // next one. Computing it under the graph lock instead
                    // stalled every other miss and every view update for
                    // its length (the Lobsters front page's cold fill, 1 s
                    // and more); holding the writers of the view's tables
                    // for one more attempt delays only them. A fill that
                    // stopped when the write came was still running: long.
                    hold = Some(self.storage.hold_writes(&v.tables));
                }
            }
        }
        self.fill_locked(v, keys)
    }

    /// The rows for `key` as a transaction reads them: a pull on a
    /// detached, stateless copy of the view's ancestors whose base reads
    /// apply the transaction's overlay, over the latest committed state
    /// (under the commit lock, so every base read sees the same state) or
    /// over the transaction's read view (no lock: the view is one state by
    /// itself). Nothing is cached.
    pub(super) fn read_overlay(&self, v: &View, key: &[Value], tx: TxRead<'_>) -> Result<Rows> {
        let pull = || {
            let mut g = {
                let g = self.graph.lock();
                if v.is_dropped() {
                    return Err(DataflowError::ViewDropped);
                }
                let parent = g.nodes[v.node].parents[0];
                g.detach_with(parent, true, None).ok_or_else(|| {
                    DataflowError::Unsupported(
                        "reading this view inside a transaction that wrote to its tables, \
                         or under REPEATABLE READ"
                            .into(),
                    )
                })?
            };
            g.set_overlay(tx.overlay);
            let root = g.detached_root();
            let rows = match tx.snapshot {
                Some(view) => g.pull_from(view, root, &v.spec.key, key)?,
                None => g.pull(root, &v.spec.key, key)?,
            };
            Ok(Rows::from(v.reader.sorted(rows)))
        };
        let _budget = crate::interrupt::watch_memory(statement_memory(self.config));
        // Computing the view's rows: its warnings are not the statement's
        // (see `crate::expr::without_warnings`).
        crate::expr::without_warnings(|| match tx.snapshot {
            Some(_) => pull(),
            None => self.storage.exclusive(pull),
        })
    }

    /// One optimistic fill of `keys` (see [`Context::fill`]).
    fn fill_unlocked(&self, v: &View, template: &Graph, keys: &[&[Value]]) -> Result<Attempt> {
        let before: Vec<u64> = v
            .commits
            .iter()
            .map(|c| c.committed.load(AO::SeqCst))
            .collect();
        // Storage reads below see the latest state: the graph must reflect
        // it too for the view's tables (aggregate partitions are read from
        // the graph), and nothing may commit to them until the install.
        if !v.commits.iter().all(|c| c.caught_up()) {
            return Ok(Attempt::Lost {
                stopped_early: false,
            });
        }
        let mut g = template.copy_detached();
        let root = g.detached_root();
        // Counted as done, whether or not a conflict discards them.
        v.reader.upqueries.fetch_add(keys.len() as u64, AO::Relaxed);
        let owned: Vec<Vec<Value>> = keys.iter().map(|k| k.to_vec()).collect();
        let pulled = {
            let _lost = crate::interrupt::watch_lost(moved_since(&v.commits, before.clone()));
            g.pull_many(root, &v.spec.key, &owned)
        };
        let pulled = match pulled {
            Ok(rows) => rows,
            Err(DataflowError::FillLost) => {
                return Ok(Attempt::Lost {
                    stopped_early: true,
                })
            }
            Err(_) if v.is_dropped() => return Err(DataflowError::ViewDropped),
            Err(e) => return Err(e),
        };
        let fills = g.take_fills();
        let read = g.take_read();
        // The installed partitions are shared with the copy until it goes:
        // an update after the install would copy each one it touches.
        drop(g);
        self.storage.exclusive(|| {
            let mut g = self.graph.lock();
            if v.is_dropped() {
                return Err(DataflowError::ViewDropped);
            }
            if moved_since(&v.commits, before)() || !g.still_filled(&read) {
                return Ok(Attempt::Lost {
                    stopped_early: false,
                });
            }
            // Only holes are filled: a key filled meanwhile (by another
            // read) keeps its rows, which equal these.
            g.install_fills(fills);
            let out = keys
                .iter()
                .zip(pulled)
                .map(|(key, rows)| {
                    v.reader.get(key).unwrap_or_else(|| {
                        self.stats.unlocked.fetch_add(1, AO::Relaxed);
                        v.reader.fill(key, rows)
                    })
                })
                .collect();
            g.evict(self.config.memory_limit);
            Ok(Attempt::Filled(out))
        })
    }

    /// Fills reader holes under the graph lock, reading a storage snapshot
    /// the graph is caught up to, so writers commit meanwhile (their
    /// batches wait for the propagation worker); under the commit lock if
    /// no snapshot can be taken.
    fn fill_locked(&self, v: &View, keys: &[&[Value]]) -> Result<Vec<Rows>> {
        match self
            .propagation
            .at_snapshot(|g, snap| self.fill_in_graph(g, snap, v, keys))
        {
            Ok(Some(rows)) => return rows,
            Ok(None) => {}
            Err(e) => tracing::warn!("fill snapshot failed: {e}; filling under the commit lock"),
        }
        self.storage.exclusive(|| {
            let mut g = self.graph.lock();
            self.fill_in_graph(&mut g, self.storage, v, keys)
        })
    }

    /// Fills reader holes by pulls on the real graph, reading base tables
    /// from `src`, which the graph must agree with (the caller's locks).
    fn fill_in_graph(
        &self,
        g: &mut Graph,
        src: &dyn BaseReads,
        v: &View,
        keys: &[&[Value]],
    ) -> Result<Vec<Rows>> {
        if v.is_dropped() {
            return Err(DataflowError::ViewDropped);
        }
        let parent = g.nodes[v.node].parents[0];
        let mut out: Vec<Option<Rows>> = keys.iter().map(|k| v.reader.get(k)).collect();
        let holes: Vec<Vec<Value>> = keys
            .iter()
            .zip(&out)
            .filter(|(_, rows)| rows.is_none())
            .map(|(k, _)| k.to_vec())
            .collect();
        self.stats.locked.fetch_add(holes.len() as u64, AO::Relaxed);
        v.reader
            .upqueries
            .fetch_add(holes.len() as u64, AO::Relaxed);
        let mut pulled = g.pull_keys(src, parent, &v.spec.key, &holes)?.into_iter();
        for (key, slot) in keys.iter().zip(&mut out) {
            if slot.is_none() {
                let rows = pulled.next().unwrap_or_default();
                *slot = Some(v.reader.fill(key, rows));
            }
        }
        g.evict(self.config.memory_limit);
        Ok(out.into_iter().flatten().collect())
    }
}
