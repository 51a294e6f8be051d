//! Reader: the view's materialized result, keyed by the view's parameter
//! columns, sorted by its ORDER BY, read without taking the graph lock.
//!
//! Partial: a key is either present (its complete, sorted result, possibly
//! empty) or absent (a hole, filled by an upquery on a read miss). Deltas
//! for holes are dropped.
//!
//! Concurrency: a read hit takes no lock and writes nothing shared but the
//! key's LRU stamp. The filled keys live in a persistent hash map
//! (`imbl::HashMap`: structural sharing, O(1) clone) published through an
//! `ArcSwap`. A reader loads the current version and looks the key up. A
//! writer (one at a time: `writer` lock) clones the current version, applies
//! a whole batch to the clone (one `apply`'s deltas, a fill, an eviction, a
//! clear, a restore) and publishes it with one store, so a batch is seen
//! whole or not at all, and a reader holding an old version keeps a
//! consistent one. Rejected: `left-right`/evmap (two copies of every row
//! vector, each delta applied twice, a read handle per thread) and
//! `papaya`/`scc` (lock-free per key, but no atomic publication of a batch).
//!
//! A key's rows are a persistent sequence too ([`Rows`], in `seq.rs`: a
//! B+tree counting the rows under each child) kept sorted by the view's
//! ORDER BY, then by the whole row, so equal rows are adjacent and a row's
//! place is found by binary search. A delta copies the path to its leaf
//! (O(log n), a leaf holding at most 64 rows), not the key's rows; a read
//! shares the version it loaded (O(1)) and reaches an OFFSET by position
//! in O(log n). Rejected: an ordered map keyed by (order key, row) with a
//! multiplicity (`imbl::OrdMap`): it has no positional index, so OFFSET
//! would walk the rows it skips, and its keys would need the view's order
//! (columns, directions, collations) inside each one.

use std::cmp::Ordering;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AO};
use std::sync::Arc;

use arc_swap::ArcSwap;
use ladle_common::{Collation, Row, RowDelta, Value};
use parking_lot::Mutex;

use super::{norm_key, project_cols, row_bytes, Captured, DirtyKeys};

mod seq;

pub(crate) use seq::Rows;

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

/// The LRU clock, shared by every reader so that `oldest` compares across
/// views. Writers (fills, batches, evictions) advance it; a read hit only
/// copies it into the key's stamp, so hits never contend on it (keys read
/// between two writes tie: approximate LRU, as DESIGN.md allows).
static CLOCK: AtomicU64 = AtomicU64::new(1);

fn tick() -> u64 {
    CLOCK.fetch_add(1, AO::Relaxed) + 1
}

/// Bytes charged per filled key besides its rows and key values: the entry,
/// the key's allocation and its share of the map's nodes (whose slots are
/// allocated whole, most of them empty). Measured by
/// `tests/heap_accounting.rs`: 128 here left a one-row key ~80 bytes short.
const KEY_OVERHEAD: usize = 208;

/// Bytes charged per stored row: [`row_bytes`] and the `Arc` a leaf of
/// [`Rows`] holds it in (two counts and the pointer, 24 bytes beyond the
/// vector a plain row list would hold in place).
fn stored_row_bytes(r: &[Value]) -> usize {
    row_bytes(r) + 24
}

fn entry_bytes(key: &[Value], rows: &Rows) -> usize {
    KEY_OVERHEAD + row_bytes(key) + rows.iter().map(|r| stored_row_bytes(r)).sum::<usize>()
}

/// A filled key. Shared (`Arc`) by the map versions that hold it; a batch
/// that changes it makes a new one (`Arc::make_mut`), sharing all but the
/// changed chunks of its rows.
struct Entry {
    rows: Rows,
    bytes: usize,
    /// Written by read hits through any version holding this entry (a hit
    /// on an entry being replaced by a batch is not kept: LRU is
    /// approximate).
    last_used: AtomicU64,
}

impl Clone for Entry {
    fn clone(&self) -> Entry {
        Entry {
            rows: self.rows.clone(),
            bytes: self.bytes,
            last_used: AtomicU64::new(self.last_used.load(AO::Relaxed)),
        }
    }
}

/// A normalized key behind a thin pointer, looked up as a slice.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key(Arc<Vec<Value>>);

impl std::borrow::Borrow<[Value]> for Key {
    fn borrow(&self) -> &[Value] {
        &self.0
    }
}

/// Normalized key -> entry. Thin `Arc`s keep the node copies a write makes
/// cheap and the nodes under 1 KiB: glibc serves larger blocks from its
/// large bins, consolidating freed small blocks first, which made fills
/// about twice as slow. Hashed with foldhash, as the engine's other hot
/// maps are (see [`crate::hash`]): every read hit hashes its key.
type Map = imbl::GenericHashMap<
    Key,
    Arc<Entry>,
    foldhash::fast::RandomState,
    imbl::shared_ptr::DefaultSharedPtr,
>;

/// Gives a value cache lines of its own, so that writes to its neighbours
/// (counters, the writer lock) do not evict it from other cores' caches.
#[repr(align(128))]
struct CachePadded<T>(T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A counter bumped by every read: one cache line per shard, threads
/// spread over the shards, so reads on different cores do not bounce one
/// line between them. Its methods are named like `AtomicU64`'s.
pub(crate) struct Counter([CachePadded<AtomicU64>; COUNTER_SHARDS]);

const COUNTER_SHARDS: usize = 4;

impl Counter {
    fn new() -> Counter {
        Counter(std::array::from_fn(|_| CachePadded(AtomicU64::new(0))))
    }

    /// Adds `n` (to this thread's shard).
    pub fn fetch_add(&self, n: u64, order: AO) {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, AO::Relaxed) % COUNTER_SHARDS;
        }
        self.0[SHARD.with(|s| *s)].fetch_add(n, order);
    }

    /// The total.
    pub fn load(&self, order: AO) -> u64 {
        self.0.iter().map(|c| c.load(order)).sum()
    }
}

/// The reader state shared with prepared queries.
pub(crate) struct ReaderState {
    /// The published version of the filled keys.
    map: CachePadded<ArcSwap<Map>>,
    /// Serializes writers (they all run under the graph lock too, but the
    /// type stays safe on its own); holds the keys changed since the last
    /// snapshot capture, and the row deltas applied to large ones.
    writer: Mutex<DirtyKeys<Vec<RowDelta>>>,
    key_colls: Vec<Collation>,
    order: OrderSpec,
    /// Sum of the published entries' bytes; written under `writer`.
    bytes: AtomicUsize,
    pub hits: Counter,
    pub misses: Counter,
    pub upqueries: AtomicU64,
    /// Keys evicted to stay under the memory limit, since start.
    pub evicted_keys: AtomicU64,
}

impl ReaderState {
    pub fn new(key_colls: Vec<Collation>, order: OrderSpec) -> ReaderState {
        ReaderState {
            map: CachePadded(ArcSwap::from_pointee(Map::default())),
            writer: Mutex::new(DirtyKeys::default()),
            key_colls,
            order,
            bytes: AtomicUsize::new(0),
            hits: Counter::new(),
            misses: Counter::new(),
            upqueries: AtomicU64::new(0),
            evicted_keys: AtomicU64::new(0),
        }
    }

    pub fn norm(&self, key: &[Value]) -> Vec<Value> {
        norm_key(key, &self.key_colls)
    }

    /// A hit returns the key's sorted rows; `None` is a hole.
    pub fn get(&self, key: &[Value]) -> Option<Rows> {
        let nk = self.norm(key);
        let map = self.map.load();
        let e = map.get(nk.as_slice())?;
        // Skipping the store when the stamp is current keeps a hot key's
        // cache line shared between the cores reading it.
        let now = CLOCK.load(AO::Relaxed);
        if e.last_used.load(AO::Relaxed) != now {
            e.last_used.store(now, AO::Relaxed);
        }
        Some(e.rows.clone())
    }

    pub fn bytes(&self) -> usize {
        self.bytes.load(AO::Relaxed)
    }

    pub fn stats(&self) -> (u64, u64) {
        let map = self.map.load();
        (
            map.len() as u64,
            map.values().map(|e| e.rows.len() as u64).sum(),
        )
    }

    /// Sorts rows as this reader stores them (its ORDER BY, then whole
    /// rows), for results computed outside the reader.
    pub fn sorted(&self, mut rows: Vec<Row>) -> Vec<Row> {
        rows.sort_by(|a, b| cmp_rows(a, b, &self.order).then_with(|| a.cmp(b)));
        rows
    }

    /// Runs one batch of changes on a private copy of the map and publishes
    /// it (if `f` says it changed anything) with one store; `f` also gets
    /// the dirty keys and the byte total to update.
    fn write<R>(
        &self,
        f: impl FnOnce(&mut Map, &mut DirtyKeys<Vec<RowDelta>>, &mut usize) -> (R, bool),
    ) -> R {
        let mut dirty = self.writer.lock();
        let mut map = Map::clone(&self.map.load());
        let mut bytes = self.bytes.load(AO::Relaxed);
        let (r, changed) = f(&mut map, &mut dirty, &mut bytes);
        if changed {
            self.map.store(Arc::new(map));
            self.bytes.store(bytes, AO::Relaxed);
        }
        r
    }

    /// Fills a hole with the key's complete result.
    pub fn fill(&self, key: &[Value], rows: Vec<Row>) -> Rows {
        let rows = Rows::from(self.sorted(rows));
        let nk = self.norm(key);
        let e = Entry {
            rows: rows.clone(),
            bytes: entry_bytes(&nk, &rows),
            last_used: AtomicU64::new(tick()),
        };
        self.write(|map, dirty, bytes| {
            dirty.mark(&nk, map.len() + 1);
            *bytes += e.bytes;
            if let Some(old) = map.insert(Key(Arc::new(nk)), Arc::new(e)) {
                *bytes = bytes.saturating_sub(old.bytes);
            }
            ((), true)
        });
        rows
    }

    /// Where `r` is, or would be inserted, in `rows`: O(log n) comparisons.
    fn find(&self, rows: &Rows, r: &Row) -> Result<usize, usize> {
        rows.binary_search_by(|x| cmp_rows(x, r, &self.order).then_with(|| x.cmp(r)))
    }

    /// Applies deltas to filled keys (pure with respect to the graph), all
    /// published at once.
    pub fn apply(&self, key_cols: &[usize], deltas: Vec<RowDelta>) {
        if deltas.is_empty() {
            return;
        }
        // Reads after this batch are newer than reads before it.
        tick();
        self.write(|map, dirty, bytes| {
            let filled = map.len();
            let mut changed = false;
            for d in deltas {
                let nk = self.norm(&project_cols(d.row(), key_cols));
                // `get_mut` copies the map's path to the key (even to a
                // hole: hence `contains_key` first), `make_mut` the entry
                // once per batch, and each change to the rows the chunk it
                // lands in: the published version keeps the old ones.
                if !map.contains_key(nk.as_slice()) {
                    continue;
                }
                let Some(e) = map.get_mut(nk.as_slice()) else {
                    continue;
                };
                let e = Arc::make_mut(e);
                let size = e.rows.len();
                let applied = match &d {
                    RowDelta::Insert(r) => {
                        let pos = self.find(&e.rows, r).unwrap_or_else(|p| p);
                        e.rows.insert(pos, r.clone());
                        let b = stored_row_bytes(r);
                        e.bytes += b;
                        *bytes += b;
                        true
                    }
                    RowDelta::Delete(r) => match self.find(&e.rows, r) {
                        // The comparison ends with the rows' own `Ord`,
                        // which agrees with `==`: an equal row is found.
                        Ok(p) => {
                            e.rows.remove(p);
                            let b = stored_row_bytes(r);
                            e.bytes = e.bytes.saturating_sub(b);
                            *bytes = bytes.saturating_sub(b);
                            true
                        }
                        Err(_) => {
                            debug_assert!(
                                !e.rows.iter().any(|x| x == r),
                                "a reader's rows are out of order"
                            );
                            false
                        }
                    },
                };
                // Only deltas that changed the rows are recorded: a snapshot
                // replays them on the previous epoch's rows.
                if applied {
                    changed = true;
                    dirty.mark_inside(&nk, filled, size, |log| {
                        log.push(d);
                        log.len() * 2 <= size
                    });
                }
            }
            ((), changed)
        })
    }

    /// Evicts the least recently used keys until `target` bytes are freed;
    /// returns bytes freed.
    pub fn evict(&self, target: usize) -> usize {
        tick();
        self.write(|map, dirty, bytes| {
            let mut ages: Vec<(u64, Key, usize)> = map
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
                dirty.mark(&k.0, map.len());
                freed += b;
                self.evicted_keys.fetch_add(1, AO::Relaxed);
            }
            *bytes = bytes.saturating_sub(freed);
            (freed, freed > 0)
        })
    }

    /// Oldest access time among cached keys.
    pub fn oldest(&self) -> Option<u64> {
        self.map
            .load()
            .values()
            .map(|e| e.last_used.load(AO::Relaxed))
            .min()
    }

    pub fn clear(&self) {
        self.write(|map, dirty, bytes| {
            if !map.is_empty() {
                dirty.mark_all();
            }
            *map = Map::default();
            *bytes = 0;
            ((), true)
        })
    }

    /// The keys changed since the previous call (all of them the first
    /// time), by reference: cheap enough for the commit lock.
    pub fn capture(&self) -> Captured<Rows, Vec<RowDelta>> {
        // The version and the dirty keys must match: take both under the
        // writer lock, then read the version (O(1) to hold) without it.
        let (map, changed) = {
            let mut dirty = self.writer.lock();
            (self.map.load_full(), dirty.take())
        };
        Captured::of(
            changed,
            |k| map.get(k).map(|e| Arc::new(e.rows.clone())),
            |_, log| log,
            || {
                map.iter()
                    .map(|(k, e)| (Vec::clone(&k.0), Arc::new(e.rows.clone())))
                    .collect()
            },
        )
    }

    /// Forces the next capture to be full (the previous one was not saved).
    pub fn mark_all_dirty(&self) {
        self.writer.lock().mark_all();
    }

    /// Replaces the state by `entries` (normalized key -> rows, restored
    /// from a snapshot, and whether they need sorting: row deltas were
    /// applied to them); other keys are holes.
    pub fn restore(&self, entries: Vec<(Vec<Value>, Vec<Row>, bool)>) {
        let now = tick();
        let mut total = 0;
        // Built in one go, privately (no copies), then published.
        let map: Map = entries
            .into_iter()
            .map(|(k, rows, unsorted)| {
                let rows = Rows::from(if unsorted { self.sorted(rows) } else { rows });
                let bytes = entry_bytes(&k, &rows);
                total += bytes;
                let e = Entry {
                    rows,
                    bytes,
                    last_used: AtomicU64::new(now),
                };
                (Key(Arc::new(k)), Arc::new(e))
            })
            .collect();
        self.write(|m, dirty, bytes| {
            *m = map;
            *bytes = total;
            dirty.reset_clean();
            ((), true)
        })
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
            rows,
            vec![parse_row("A 7"), parse_row("a 2"), parse_row("a 1")]
        );
        assert!(st.get(&[Value::text("b")]).is_none());
        // An update crossing the top of the order: the row moves.
        r.on_input(parse("- a 1\n+ a 8"));
        assert_eq!(st.get(&[Value::text("a")]).unwrap()[0], parse_row("a 8"));
        assert!(st.evict(1) > 0);
        assert!(st.get(&[Value::text("a")]).is_none());
    }

    fn reader(order: OrderSpec) -> (Arc<ReaderState>, Reader) {
        let st = Arc::new(ReaderState::new(vec![Collation::Binary], order));
        let r = Reader {
            key: vec![0],
            shared: st.clone(),
        };
        (st, r)
    }

    fn key(k: &str) -> Vec<Value> {
        vec![Value::text(k)]
    }

    /// The second column of the rows of `k` in one published version.
    fn vals(map: &Map, k: &str) -> Vec<i64> {
        map.get(key(k).as_slice())
            .map(|e| e.rows.iter().map(|r| r[1].as_i64().unwrap()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn a_held_version_sees_a_batch_whole_or_not_at_all() {
        let (st, r) = reader(vec![(1, false, Collation::Binary)]);
        st.fill(&key("a"), vec![parse_row("a 1"), parse_row("a 2")]);
        st.fill(&key("b"), vec![parse_row("b 10")]);
        let before = st.map.load_full();
        let rows_a = st.get(&key("a")).unwrap();
        // One batch moves 1 from a to b and adds 3 to a.
        r.on_input(parse("- a 1\n+ b 1\n+ a 3"));
        // The old version and rows handed out before are untouched...
        assert_eq!(vals(&before, "a"), vec![1, 2]);
        assert_eq!(vals(&before, "b"), vec![10]);
        assert_eq!(rows_a, vec![parse_row("a 1"), parse_row("a 2")]);
        // ...and the new one has the whole batch.
        let after = st.map.load_full();
        assert_eq!(vals(&after, "a"), vec![2, 3]);
        assert_eq!(vals(&after, "b"), vec![1, 10]);
        assert_eq!(
            st.get(&key("b")).unwrap(),
            vec![parse_row("b 1"), parse_row("b 10")]
        );
        // Fills and evictions publish new versions too.
        st.fill(&key("c"), vec![parse_row("c 5")]);
        assert!(after.get(key("c").as_slice()).is_none());
        st.evict(usize::MAX);
        assert_eq!(vals(&after, "c"), Vec::<i64>::new());
        assert_eq!(vals(&st.map.load_full(), "a"), Vec::<i64>::new());
        assert_eq!(st.bytes(), 0);
        assert_eq!(vals(&after, "a"), vec![2, 3]);
    }

    #[test]
    fn bytes_follow_fills_deltas_and_evictions() {
        let (st, r) = reader(vec![]);
        st.fill(&key("a"), vec![parse_row("a 1")]);
        let one = st.bytes();
        st.fill(&key("b"), vec![parse_row("b 1")]);
        assert_eq!(st.bytes(), 2 * one);
        // Refilling a key replaces its charge.
        st.fill(&key("b"), vec![parse_row("b 1")]);
        assert_eq!(st.bytes(), 2 * one);
        r.on_input(parse("+ a 2\n+ z 1"));
        assert_eq!(st.bytes(), 2 * one + stored_row_bytes(&parse_row("a 2")));
        r.on_input(parse("- a 2\n- a 9"));
        assert_eq!(st.bytes(), 2 * one);
        assert_eq!(st.evict(1), one);
        assert_eq!(st.bytes(), one);
        st.clear();
        assert_eq!(st.bytes(), 0);
    }

    /// A key of many rows (a tree of several levels) with repeated rows,
    /// under random inserts and deletes (some of absent rows), against a
    /// sorted model; held versions stay as they were.
    #[test]
    fn large_keys_follow_deltas_in_order() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (st, r) = reader(vec![(1, true, Collation::Binary)]);
        let row = |v: i64| vec![Value::text("a"), Value::Int(v % 50), Value::Int(v % 7)];
        let mut model: Vec<Row> = (0..5000).map(|_| row(rng.gen_range(0..1000))).collect();
        st.fill(&key("a"), model.clone());
        let sort = |m: &mut Vec<Row>| {
            m.sort_by(|a, b| b[1].cmp(&a[1]).then_with(|| a.cmp(b)));
        };
        sort(&mut model);
        let mut held = Vec::new();
        for step in 0..400 {
            let mut batch = Vec::new();
            for _ in 0..rng.gen_range(1..6) {
                let x = row(rng.gen_range(0..1000));
                if rng.gen_bool(0.5) {
                    if let Some(p) = model.iter().position(|y| *y == x) {
                        model.remove(p);
                    }
                    batch.push(RowDelta::Delete(x));
                } else {
                    model.push(x.clone());
                    batch.push(RowDelta::Insert(x));
                }
            }
            sort(&mut model);
            r.on_input(batch);
            if step % 50 == 0 {
                held.push((st.get(&key("a")).unwrap(), model.clone()));
            }
        }
        let rows = st.get(&key("a")).unwrap();
        rows.check_invariants();
        assert_eq!(rows, model);
        for (rows, model) in held {
            assert_eq!(rows, model);
        }
        let want: usize = model.iter().map(|r| stored_row_bytes(r)).sum();
        assert_eq!(st.bytes(), KEY_OVERHEAD + row_bytes(&key("a")) + want);
    }

    /// Readers on several threads while a writer applies batches: every
    /// version a reader observes is one between two batches.
    #[test]
    fn concurrent_readers_only_see_whole_batches() {
        const ROWS: i64 = 8;
        const BATCHES: i64 = 2000;
        let (st, r) = reader(vec![(1, false, Collation::Binary)]);
        // Rows move between a and b (count and sum of a and b are fixed);
        // c holds two rows summing to zero, both replaced by every batch.
        st.fill(
            &key("a"),
            (0..ROWS)
                .map(|v| vec![Value::text("a"), Value::Int(v)])
                .collect(),
        );
        st.fill(&key("b"), vec![]);
        st.fill(&key("c"), vec![parse_row("c 0"), parse_row("c 0")]);
        let total: i64 = (0..ROWS).sum();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (st, done) = (st.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !done.load(AO::Acquire) {
                        let c = st.get(&key("c")).unwrap();
                        assert_eq!(c.len(), 2);
                        assert_eq!(c[0][1].as_i64().unwrap() + c[1][1].as_i64().unwrap(), 0);
                        let map = st.map.load();
                        let (a, b) = (vals(&map, "a"), vals(&map, "b"));
                        assert_eq!(a.len() + b.len(), ROWS as usize);
                        assert_eq!(a.iter().sum::<i64>() + b.iter().sum::<i64>(), total);
                        assert!(a.windows(2).all(|w| w[0] <= w[1]));
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        for i in 0..BATCHES {
            let v = i % ROWS;
            let (from, to) = if (i / ROWS) % 2 == 0 {
                ("a", "b")
            } else {
                ("b", "a")
            };
            let row = |k: &str, v: i64| vec![Value::text(k), Value::Int(v)];
            r.on_input(vec![
                RowDelta::Delete(row(from, v)),
                RowDelta::Delete(row("c", i)),
                RowDelta::Delete(row("c", -i)),
                RowDelta::Insert(row(to, v)),
                RowDelta::Insert(row("c", i + 1)),
                RowDelta::Insert(row("c", -i - 1)),
            ]);
            // Other keys are filled meanwhile.
            st.fill(&key(&format!("k{i}")), vec![]);
        }
        done.store(true, AO::Release);
        for t in readers {
            t.join().unwrap();
        }
        let map = st.map.load();
        assert_eq!(vals(&map, "a").len() + vals(&map, "b").len(), ROWS as usize);
        assert_eq!(vals(&map, "c"), vec![-BATCHES, BATCHES]);
    }
}
