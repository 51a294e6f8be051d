//! [`Rows`]: a persistent sequence of rows with positional access, the
//! storage of one filled reader key.
//!
//! A B+tree whose inner nodes count the rows below each child (an order
//! statistic tree): `get`, `insert` and `remove` by position and reaching
//! a position to iterate from cost O(log n); a clone is O(1) and shares
//! every node; a change copies the nodes on its path (`Arc::make_mut`),
//! that is at most [`MAX`] rows of one leaf and [`MAX`] child pointers per
//! level, while a holder of the previous version keeps reading it.
//!
//! The sequence knows nothing of order: the reader keeps it sorted and
//! finds positions by binary search ([`Rows::binary_search_by`]).
//!
//! Invariants (checked by [`Rows::check_invariants`] in tests): every leaf
//! is at the same depth; no node but the root is empty; a node holds at
//! most [`MAX`] items; each child's count is the number of rows below it.
//! Nodes shrunk under [`MAX`]/4 merge with a neighbour when the two fit in
//! one node, so the tree stays O(log n) deep as rows come and go.
//!
//! A leaf holds its rows behind `Arc`s, so copying a leaf on a change
//! costs [`MAX`] reference counts, not [`MAX`] deep row copies (each a
//! vector and its strings): measured as most of a sysbench read_write
//! write's reader work (`Value::clone` and malloc under `remove_rec`).
//!
//! Rejected: `imbl::Vector` (an RRB tree: inserting in the middle splits
//! and re-concatenates the tree, measured at 0.9 ms per row over 40k rows
//! while another version was held) and `imbl::OrdMap` (no positional
//! access, so an OFFSET walks the rows it skips).

use std::sync::Arc;

use ladle_common::Row;
use serde::ser::{Serialize, SerializeSeq, Serializer};

/// Most rows in a leaf and children in an inner node.
const MAX: usize = 64;

#[derive(Clone)]
enum Node {
    Leaf(Vec<Arc<Row>>),
    Inner(Vec<Child>),
}

#[derive(Clone)]
struct Child {
    /// Rows below `node`.
    len: usize,
    node: Arc<Node>,
}

impl Node {
    /// Rows (leaf) or children (inner) held.
    fn items(&self) -> usize {
        match self {
            Node::Leaf(rows) => rows.len(),
            Node::Inner(children) => children.len(),
        }
    }

    /// Moves `other`'s items to the end of `self` (nodes of one depth).
    fn absorb(&mut self, other: Node) {
        match (self, other) {
            (Node::Leaf(a), Node::Leaf(b)) => a.extend(b),
            (Node::Inner(a), Node::Inner(b)) => a.extend(b),
            _ => unreachable!("nodes of one depth are of one kind"),
        }
    }
}

/// A persistent sequence of rows (see the module docs).
#[derive(Clone)]
pub(crate) struct Rows {
    root: Arc<Node>,
    len: usize,
}

impl Default for Rows {
    fn default() -> Rows {
        Rows::new()
    }
}

/// Which child of `children` holds position `i`, and `i` inside it. With
/// `at_end`, a position just past a child's last row picks that child
/// (where an insert appends).
fn locate(children: &[Child], mut i: usize, at_end: bool) -> (usize, usize) {
    for (ci, c) in children.iter().enumerate() {
        if i < c.len || (at_end && i == c.len) {
            return (ci, i);
        }
        i -= c.len;
    }
    unreachable!("position past the end of a node")
}

fn insert_rec(node: &mut Node, i: usize, row: Arc<Row>) -> Option<Child> {
    match node {
        Node::Leaf(rows) => {
            rows.insert(i, row);
            if rows.len() <= MAX {
                return None;
            }
            let right = rows.split_off(rows.len() / 2);
            Some(Child {
                len: right.len(),
                node: Arc::new(Node::Leaf(right)),
            })
        }
        Node::Inner(children) => {
            let (ci, off) = locate(children, i, true);
            let c = &mut children[ci];
            c.len += 1;
            let split = insert_rec(Arc::make_mut(&mut c.node), off, row)?;
            c.len -= split.len;
            children.insert(ci + 1, split);
            if children.len() <= MAX {
                return None;
            }
            let right = children.split_off(children.len() / 2);
            Some(Child {
                len: right.iter().map(|c| c.len).sum(),
                node: Arc::new(Node::Inner(right)),
            })
        }
    }
}

fn remove_rec(node: &mut Node, i: usize) -> Arc<Row> {
    let children = match node {
        Node::Leaf(rows) => return rows.remove(i),
        Node::Inner(children) => children,
    };
    let (ci, off) = locate(children, i, false);
    let c = &mut children[ci];
    c.len -= 1;
    let row = remove_rec(Arc::make_mut(&mut c.node), off);
    if c.len == 0 {
        children.remove(ci);
        return row;
    }
    let items = c.node.items();
    if items < MAX / 4 {
        // Merge with the smaller neighbour when both fit in one node.
        let left = (ci > 0).then(|| ci - 1);
        let right = (ci + 1 < children.len()).then_some(ci + 1);
        let other = match (left, right) {
            (Some(l), Some(r)) if children[l].node.items() <= children[r].node.items() => Some(l),
            (Some(_), Some(r)) => Some(r),
            (l, r) => l.or(r),
        };
        if let Some(o) = other {
            let (a, b) = (ci.min(o), ci.max(o));
            if children[a].node.items() + children[b].node.items() <= MAX {
                let gone = children.remove(b);
                let keep = &mut children[a];
                keep.len += gone.len;
                let moved = Arc::try_unwrap(gone.node).unwrap_or_else(|n| Node::clone(&n));
                Arc::make_mut(&mut keep.node).absorb(moved);
            }
        }
    }
    row
}

impl Rows {
    pub fn new() -> Rows {
        Rows {
            root: Arc::new(Node::Leaf(Vec::new())),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The row at position `i`: O(log n).
    pub fn get(&self, mut i: usize) -> Option<&Row> {
        if i >= self.len {
            return None;
        }
        let mut node = &*self.root;
        loop {
            match node {
                Node::Leaf(rows) => return rows.get(i).map(|r| &**r),
                Node::Inner(children) => {
                    let (ci, off) = locate(children, i, false);
                    node = &children[ci].node;
                    i = off;
                }
            }
        }
    }

    /// Inserts `row` at position `i` (`i <= len`): O(log n).
    pub fn insert(&mut self, i: usize, row: Row) {
        assert!(i <= self.len, "insert past the end");
        if let Some(split) = insert_rec(Arc::make_mut(&mut self.root), i, Arc::new(row)) {
            let left = std::mem::replace(&mut self.root, Arc::new(Node::Leaf(Vec::new())));
            self.root = Arc::new(Node::Inner(vec![
                Child {
                    len: self.len + 1 - split.len,
                    node: left,
                },
                split,
            ]));
        }
        self.len += 1;
    }

    /// Removes and returns the row at position `i` (`i < len`): O(log n).
    /// Shared: an older version of the rows may still hold it.
    pub fn remove(&mut self, i: usize) -> Arc<Row> {
        assert!(i < self.len, "remove past the end");
        let row = remove_rec(Arc::make_mut(&mut self.root), i);
        self.len -= 1;
        // A root left with one child gives way to it.
        loop {
            let only = match &*self.root {
                Node::Inner(c) if c.len() == 1 => c[0].node.clone(),
                Node::Inner(c) if c.is_empty() => Arc::new(Node::Leaf(Vec::new())),
                _ => break,
            };
            self.root = only;
        }
        row
    }

    /// Binary search over rows sorted by `f` (as `slice::binary_search_by`):
    /// O(log² n) (each probe is a `get`).
    pub fn binary_search_by(
        &self,
        mut f: impl FnMut(&Row) -> std::cmp::Ordering,
    ) -> Result<usize, usize> {
        use std::cmp::Ordering;
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid).map(&mut f) {
                Some(Ordering::Less) => lo = mid + 1,
                Some(Ordering::Greater) => hi = mid,
                Some(Ordering::Equal) => return Ok(mid),
                None => unreachable!("a position below len"),
            }
        }
        Err(lo)
    }

    /// The first position whose row fails `pred`, which must hold for a
    /// prefix of the rows (as `slice::partition_point`): O(log² n).
    pub fn partition_point(&self, mut pred: impl FnMut(&Row) -> bool) -> usize {
        self.binary_search_by(|r| {
            if pred(r) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        })
        .unwrap_or_else(|p| p)
    }

    /// All rows in order.
    pub fn iter(&self) -> Iter<'_> {
        self.range(0, self.len)
    }

    /// Rows `start..end` (clamped to the length) in order: O(log n) to
    /// reach `start`, then O(1) per row.
    pub fn range(&self, start: usize, end: usize) -> Iter<'_> {
        let end = end.min(self.len);
        let start = start.min(end);
        let mut stack = Vec::new();
        let mut node = &*self.root;
        let mut i = start;
        loop {
            match node {
                Node::Leaf(rows) => {
                    return Iter {
                        stack,
                        leaf: rows[i.min(rows.len())..].iter(),
                        left: end - start,
                    }
                }
                Node::Inner(children) => {
                    // A position at a child's end starts there, empty: the
                    // next leaf is reached through the stack.
                    let (ci, off) = locate(children, i, true);
                    stack.push(children[ci + 1..].iter());
                    node = &children[ci].node;
                    i = off;
                }
            }
        }
    }

    /// Checks the invariants in the module docs.
    #[cfg(test)]
    pub fn check_invariants(&self) {
        fn walk(node: &Node, depth: usize, leaf_depth: &mut Option<usize>, root: bool) -> usize {
            assert!(node.items() <= MAX, "node over {MAX} items");
            assert!(root || node.items() > 0, "empty non-root node");
            match node {
                Node::Leaf(rows) => {
                    assert_eq!(*leaf_depth.get_or_insert(depth), depth, "uneven leaves");
                    rows.len()
                }
                Node::Inner(children) => children
                    .iter()
                    .map(|c| {
                        let n = walk(&c.node, depth + 1, leaf_depth, false);
                        assert_eq!(n, c.len, "a child's count is wrong");
                        n
                    })
                    .sum(),
            }
        }
        assert_eq!(walk(&self.root, 0, &mut None, true), self.len);
        assert_eq!(self.iter().count(), self.len);
    }
}

impl From<Vec<Row>> for Rows {
    /// Builds the tree bottom-up from full leaves: O(n).
    fn from(rows: Vec<Row>) -> Rows {
        let len = rows.len();
        let rows: Vec<Arc<Row>> = rows.into_iter().map(Arc::new).collect();
        if len <= MAX {
            return Rows {
                root: Arc::new(Node::Leaf(rows)),
                len,
            };
        }
        let mut level: Vec<Child> = Vec::with_capacity(len / MAX + 1);
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let leaf: Vec<Arc<Row>> = rows.by_ref().take(MAX).collect();
            level.push(Child {
                len: leaf.len(),
                node: Arc::new(Node::Leaf(leaf)),
            });
        }
        while level.len() > 1 {
            let mut up = Vec::with_capacity(level.len() / MAX + 1);
            let mut children = level.into_iter().peekable();
            while children.peek().is_some() {
                let group: Vec<Child> = children.by_ref().take(MAX).collect();
                up.push(Child {
                    len: group.iter().map(|c| c.len).sum(),
                    node: Arc::new(Node::Inner(group)),
                });
            }
            level = up;
        }
        let root = level
            .pop()
            .map_or_else(|| Arc::new(Node::Leaf(Vec::new())), |c| c.node);
        Rows { root, len }
    }
}

impl FromIterator<Row> for Rows {
    fn from_iter<I: IntoIterator<Item = Row>>(rows: I) -> Rows {
        Rows::from(rows.into_iter().collect::<Vec<_>>())
    }
}

impl std::ops::Index<usize> for Rows {
    type Output = Row;
    /// The row at position `i`; panics past the end, as a slice does.
    fn index(&self, i: usize) -> &Row {
        self.get(i).expect("index past the end of the rows")
    }
}

impl PartialEq<Vec<Row>> for Rows {
    fn eq(&self, other: &Vec<Row>) -> bool {
        self.len == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Serialized as the sequence of its rows, the same encoding as a
/// `Vec<Row>` (snapshots decode it as one).
impl Serialize for Rows {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len))?;
        for r in self.iter() {
            seq.serialize_element(r)?;
        }
        seq.end()
    }
}

/// Rows of a [`Rows`] in order (see [`Rows::range`]).
pub(crate) struct Iter<'a> {
    /// Per inner level above the leaf, the children still to visit.
    stack: Vec<std::slice::Iter<'a, Child>>,
    leaf: std::slice::Iter<'a, Arc<Row>>,
    /// Rows still to return.
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Row;

    fn next(&mut self) -> Option<&'a Row> {
        if self.left == 0 {
            return None;
        }
        loop {
            if let Some(r) = self.leaf.next() {
                self.left -= 1;
                return Some(&**r);
            }
            // The next leaf: up to the nearest level with a child left,
            // then down its leftmost path.
            let mut node = loop {
                let level = self.stack.last_mut()?;
                match level.next() {
                    Some(c) => break &*c.node,
                    None => {
                        self.stack.pop();
                    }
                }
            };
            loop {
                match node {
                    Node::Leaf(rows) => {
                        self.leaf = rows.iter();
                        break;
                    }
                    Node::Inner(children) => {
                        let mut it = children.iter();
                        let first = it.next();
                        self.stack.push(it);
                        match first {
                            Some(c) => node = &c.node,
                            None => break,
                        }
                    }
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use ladle_common::Value;
    use rand::{Rng, SeedableRng};

    fn row(v: i64) -> Row {
        vec![Value::Int(v)]
    }

    /// Random inserts and removes against a `Vec`, holding old versions
    /// that must not change.
    #[test]
    fn behaves_like_a_vec_and_old_versions_stay() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for start in [0usize, 1, 63, 64, 65, 500, 5000] {
            let mut want: Vec<Row> = (0..start as i64).map(row).collect();
            let mut rows = Rows::from(want.clone());
            rows.check_invariants();
            let mut held: Vec<(Rows, Vec<Row>)> = Vec::new();
            for step in 0..3000 {
                // Grow, then shrink to empty, then grow again.
                let grow = match step / 1000 {
                    0 => rng.gen_bool(0.6),
                    1 => rng.gen_bool(0.2),
                    _ => rng.gen_bool(0.7),
                };
                if grow || want.is_empty() {
                    let i = rng.gen_range(0..=want.len());
                    let v = rng.gen_range(0..1_000_000);
                    want.insert(i, row(v));
                    rows.insert(i, row(v));
                } else {
                    let i = rng.gen_range(0..want.len());
                    assert_eq!(*rows.remove(i), want.remove(i));
                }
                if step % 97 == 0 {
                    rows.check_invariants();
                    held.push((rows.clone(), want.clone()));
                }
            }
            rows.check_invariants();
            assert_eq!(rows, want);
            for (r, w) in &held {
                assert_eq!(r, w);
            }
            for _ in 0..50 {
                let a = rng.gen_range(0..=want.len());
                let b = rng.gen_range(a..=want.len() + 3);
                let got: Vec<&Row> = rows.range(a, b).collect();
                let exp: Vec<&Row> = want[a..b.min(want.len())].iter().collect();
                assert_eq!(got, exp, "range {a}..{b} of {}", want.len());
                assert_eq!(rows.get(a), want.get(a));
            }
        }
    }

    #[test]
    fn draining_to_empty_keeps_the_tree_shallow() {
        let mut rows = Rows::from((0..10_000).map(row).collect::<Vec<_>>());
        for _ in 0..9_990 {
            rows.remove(rows.len() / 2);
        }
        rows.check_invariants();
        assert!(matches!(&*rows.root, Node::Leaf(r) if r.len() == 10));
        while !rows.is_empty() {
            rows.remove(0);
        }
        rows.check_invariants();
        assert_eq!(rows.iter().count(), 0);
    }

    #[test]
    fn binary_search_finds_places_in_sorted_rows() {
        let rows = Rows::from((0..1000).map(|v| row(v * 2)).collect::<Vec<_>>());
        assert_eq!(rows.binary_search_by(|r| r.cmp(&row(500))), Ok(250));
        assert_eq!(rows.binary_search_by(|r| r.cmp(&row(501))), Err(251));
        assert_eq!(rows.binary_search_by(|r| r.cmp(&row(-1))), Err(0));
        assert_eq!(rows.binary_search_by(|r| r.cmp(&row(5000))), Err(1000));
        assert_eq!(rows.partition_point(|r| r[0].as_i64() < Some(7)), 4);
        assert_eq!(rows.partition_point(|_| true), 1000);
        assert_eq!(rows.partition_point(|_| false), 0);
    }

    #[test]
    fn serializes_as_a_vec_of_rows() {
        let v: Vec<Row> = (0..300).map(row).collect();
        let rows = Rows::from(v.clone());
        assert_eq!(
            postcard::to_stdvec(&rows).unwrap(),
            postcard::to_stdvec(&v).unwrap()
        );
    }
}
