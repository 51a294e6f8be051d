//! Reader: the view's materialized result, keyed by the view's parameter
//! columns, sorted by its ORDER BY, read without taking the graph lock.
//!
//! Partial: a key is either present (its complete, sorted result, possibly
//! empty) or absent (a hole, filled by an upquery on a read miss). Deltas
//! for holes are dropped.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AO};
use std::sync::Arc;

use ladle_common::{Collation, Row, RowDelta, Value};
use parking_lot::{Mutex, RwLock};

use super::{norm_key, project_cols, row_bytes, Captured, DirtyKeys};

/// How a reader's rows are ordered: (column, descending, collation).
pub(crate) type OrderSpec = Vec<(usize, bool, Collation)>;

pub(crate) fn cmp_rows(a: &[Value], b: &[Value], order: &OrderSpec) -> Ordering {
    for (c, desc, coll) in order {
        let (x, y) = (
            a.get(*c).unwrap_or(&Value::Null),
            b.get(*c).unwrap_or(&Value::Null),
        );
        let o = x.cmp_collated(y, *coll);
        let o = if *desc { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

struct Entry {
    rows: Arc<Vec<Row>>,
    bytes: usize,
    last_used: AtomicU64,
}

/// The reader state shared with prepared queries.
pub(crate) struct ReaderState {
    map: RwLock<HashMap<Vec<Value>, Entry>>,
    /// Keys changed since the last snapshot capture, and the row deltas
    /// applied to large ones. Mutations take `map`'s write lock, then this
    /// (they all run under the graph lock too).
    dirty: Mutex<DirtyKeys<Vec<RowDelta>>>,
    key_colls: Vec<Collation>,
    order: OrderSpec,
    bytes: AtomicUsize,
    clock: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub upqueries: AtomicU64,
}

impl ReaderState {
    pub fn new(key_colls: Vec<Collation>, order: OrderSpec) -> ReaderState {
        ReaderState {
            map: RwLock::new(HashMap::new()),
            dirty: Mutex::new(DirtyKeys::default()),
            key_colls,
            order,
            bytes: AtomicUsize::new(0),
            clock: AtomicU64::new(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            upqueries: AtomicU64::new(0),
        }
    }

    pub fn norm(&self, key: &[Value]) -> Vec<Value> {
        norm_key(key, &self.key_colls)
    }

    /// A hit returns the key's sorted rows; `None` is a hole.
    pub fn get(&self, key: &[Value]) -> Option<Arc<Vec<Row>>> {
        let nk = self.norm(key);
        let map = self.map.read();
        let e = map.get(&nk)?;
        e.last_used
            .store(self.clock.fetch_add(1, AO::Relaxed), AO::Relaxed);
        Some(e.rows.clone())
    }

    pub fn bytes(&self) -> usize {
        self.bytes.load(AO::Relaxed)
    }

    pub fn stats(&self) -> (u64, u64) {
        let map = self.map.read();
        (
            map.len() as u64,
            map.values().map(|e| e.rows.len() as u64).sum(),
        )
    }

    /// Fills a hole with the key's complete result.
    /// Sorts rows as this reader stores them (its ORDER BY, then whole
    /// rows), for results computed outside the reader.
    pub fn sorted(&self, mut rows: Vec<Row>) -> Vec<Row> {
        rows.sort_by(|a, b| cmp_rows(a, b, &self.order).then_with(|| a.cmp(b)));
        rows
    }

    pub fn fill(&self, key: &[Value], mut rows: Vec<Row>) -> Arc<Vec<Row>> {
        let order = self.order.clone();
        rows.sort_by(|a, b| cmp_rows(a, b, &order).then_with(|| a.cmp(b)));
        let bytes = 64 + rows.iter().map(|r| row_bytes(r)).sum::<usize>();
        let rows = Arc::new(rows);
        let nk = self.norm(key);
        let mut map = self.map.write();
        self.dirty.lock().mark(&nk, map.len() + 1);
        let e = Entry {
            rows: rows.clone(),
            bytes,
            last_used: AtomicU64::new(self.clock.fetch_add(1, AO::Relaxed)),
        };
        if let Some(old) = map.insert(nk, e) {
            self.bytes.fetch_sub(old.bytes, AO::Relaxed);
        }
        self.bytes.fetch_add(bytes, AO::Relaxed);
        rows
    }

    /// Applies deltas to filled keys (pure with respect to the graph).
    pub fn apply(&self, key_cols: &[usize], deltas: Vec<RowDelta>) {
        if deltas.is_empty() {
            return;
        }
        let mut map = self.map.write();
        let mut dirty = self.dirty.lock();
        let filled = map.len();
        for d in deltas {
            let nk = self.norm(&project_cols(d.row(), key_cols));
            let Some(e) = map.get_mut(&nk) else { continue };
            let size = e.rows.len();
            let rows = Arc::make_mut(&mut e.rows);
            let applied = match &d {
                RowDelta::Insert(r) => {
                    let b = row_bytes(r);
                    let pos = rows
                        .binary_search_by(|x| cmp_rows(x, r, &self.order).then_with(|| x.cmp(r)))
                        .unwrap_or_else(|p| p);
                    rows.insert(pos, r.clone());
                    e.bytes += b;
                    self.bytes.fetch_add(b, AO::Relaxed);
                    true
                }
                RowDelta::Delete(r) => match rows.iter().position(|x| x == r) {
                    Some(p) => {
                        rows.remove(p);
                        let b = row_bytes(r);
                        e.bytes = e.bytes.saturating_sub(b);
                        self.bytes
                            .fetch_sub(b.min(self.bytes.load(AO::Relaxed)), AO::Relaxed);
                        true
                    }
                    None => false,
                },
            };
            // Only deltas that changed the rows are recorded: a snapshot
            // replays them on the previous epoch's rows.
            if applied {
                dirty.mark_inside(&nk, filled, size, |log| {
                    log.push(d);
                    log.len() * 2 <= size
                });
            }
        }
    }

    /// Evicts the least recently used keys until `target` bytes are freed;
    /// returns bytes freed.
    pub fn evict(&self, target: usize) -> usize {
        let mut map = self.map.write();
        let mut dirty = self.dirty.lock();
        let mut ages: Vec<(u64, Vec<Value>, usize)> = map
            .iter()
            .map(|(k, e)| (e.last_used.load(AO::Relaxed), k.clone(), e.bytes))
            .collect();
        ages.sort_by_key(|a| a.0);
        let mut freed = 0;
        for (_, k, b) in ages {
            if freed >= target {
                break;
            }
            map.remove(&k);
            dirty.mark(&k, map.len());
            freed += b;
        }
        self.bytes
            .fetch_sub(freed.min(self.bytes.load(AO::Relaxed)), AO::Relaxed);
        freed
    }

    /// Oldest access time among cached keys.
    pub fn oldest(&self) -> Option<u64> {
        self.map
            .read()
            .values()
            .map(|e| e.last_used.load(AO::Relaxed))
            .min()
    }

    pub fn clear(&self) {
        let mut map = self.map.write();
        if !map.is_empty() {
            self.dirty.lock().mark_all();
        }
        map.clear();
        self.bytes.store(0, AO::Relaxed);
    }

    /// The keys changed since the previous call (all of them the first
    /// time), by reference: cheap enough for the commit lock.
    pub fn capture(&self) -> Captured<Vec<Row>, Vec<RowDelta>> {
        let map = self.map.read();
        let changed = self.dirty.lock().take();
        Captured::of(
            changed,
            |k| map.get(k).map(|e| e.rows.clone()),
            |_, log| log,
            || {
                map.iter()
                    .map(|(k, e)| (k.clone(), e.rows.clone()))
                    .collect()
            },
        )
    }

    /// Forces the next capture to be full (the previous one was not saved).
    pub fn mark_all_dirty(&self) {
        self.dirty.lock().mark_all();
    }

    /// Replaces the state by `entries` (normalized key -> rows, restored
    /// from a snapshot, and whether they need sorting: row deltas were
    /// applied to them); other keys are holes.
    pub fn restore(&self, entries: Vec<(Vec<Value>, Vec<Row>, bool)>) {
        let mut map = self.map.write();
        map.clear();
        let mut total = 0;
        for (k, mut rows, unsorted) in entries {
            if unsorted {
                rows.sort_by(|a, b| cmp_rows(a, b, &self.order).then_with(|| a.cmp(b)));
            }
            let bytes = 64 + rows.iter().map(|r| row_bytes(r)).sum::<usize>();
            total += bytes;
            map.insert(
                k,
                Entry {
                    rows: Arc::new(rows),
                    bytes,
                    last_used: AtomicU64::new(self.clock.fetch_add(1, AO::Relaxed)),
                },
            );
        }
        self.bytes.store(total, AO::Relaxed);
        self.dirty.lock().reset_clean();
    }
}

pub(crate) struct Reader {
    /// Columns of the row forming the lookup key.
    pub key: Vec<usize>,
    pub shared: Arc<ReaderState>,
}

impl Reader {
    pub fn on_input(&self, deltas: Vec<RowDelta>) {
        self.shared.apply(&self.key, deltas);
    }
}

impl fmt::Display for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Reader keyed by {:?}, ordered by {:?}",
            self.key,
            self.shared
                .order
                .iter()
                .map(|o| (o.0, o.1))
                .collect::<Vec<_>>()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::harness::{parse, parse_row};

    #[test]
    fn reader_keeps_filled_keys_sorted_and_drops_holes() {
        let st = Arc::new(ReaderState::new(
            vec![Collation::GeneralCi],
            vec![(1, true, Collation::Binary)],
        ));
        let r = Reader {
            key: vec![0],
            shared: st.clone(),
        };
        st.fill(
            &[Value::text("a")],
            vec![parse_row("a 1"), parse_row("a 3")],
        );
        r.on_input(parse("+ a 2\n+ b 9\n- a 3\n+ A 7"));
        let rows = st.get(&[Value::text("a")]).unwrap();
        assert_eq!(
            *rows,
            vec![parse_row("A 7"), parse_row("a 2"), parse_row("a 1")]
        );
        assert!(st.get(&[Value::text("b")]).is_none());
        // An update crossing the top of the order: the row moves.
        r.on_input(parse("- a 1\n+ a 8"));
        assert_eq!(st.get(&[Value::text("a")]).unwrap()[0], parse_row("a 8"));
        assert!(st.evict(1) > 0);
        assert!(st.get(&[Value::text("a")]).is_none());
    }
}
