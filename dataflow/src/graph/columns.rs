//! Which columns of a node the nodes above it read, so a full scan of a
//! base table decodes only those (a front page's cold fill counts 120k
//! comments per story: it reads their `story_id`, not their two TEXT
//! bodies).
//!
//! Only stateless operators narrow what they read: a projection reads the
//! columns its expressions name, a filter what passes through plus its
//! predicate's, a join each side's share plus its keys, a union what its
//! output needs. Stateful operators (aggregates, windows, readers) read
//! every column of their input, so whatever they keep, compare or hand on
//! later is never a column that was left out; the narrowing stays below
//! them, where rows are consumed as they are computed. Columns left out are
//! base table columns (never an evaluation marker, see `ops::Project`).

use ladle_common::{RowDelta, Value};

use super::{Graph, NodeId};
use crate::ops::{Join, JoinKind, Op};

/// The columns of one node that its consumers read.
#[derive(Clone, Debug, PartialEq)]
enum Reads {
    All,
    /// `true` at each column some consumer reads.
    Some(Vec<bool>),
}

impl Reads {
    fn none(width: usize) -> Reads {
        Reads::Some(vec![false; width])
    }

    fn add(&mut self, other: Reads) {
        match (&mut *self, other) {
            (Reads::All, _) => {}
            (_, Reads::All) => *self = Reads::All,
            (Reads::Some(mine), Reads::Some(theirs)) => {
                for (m, t) in mine.iter_mut().zip(theirs) {
                    *m |= t;
                }
            }
        }
    }

    fn with(mut self, cols: impl IntoIterator<Item = usize>) -> Reads {
        if let Reads::Some(read) = &mut self {
            for c in cols {
                match read.get_mut(c) {
                    Some(r) => *r = true,
                    // A column past the width: be safe, read everything.
                    None => return Reads::All,
                }
            }
        }
        self
    }
}

impl Graph {
    /// The columns of node `n` that some node above it reads (`true` at
    /// each), or `None` when every column is (or might be) read. A
    /// detached copy computes every node's once (see `Detached`).
    pub(super) fn columns_read(&self, n: NodeId) -> Option<Vec<bool>> {
        let all = match &self.detached {
            Some(d) => d.columns_read.get_or_init(|| self.all_columns_read()),
            None => return self.all_columns_read()?.into_iter().nth(n)?,
        };
        all.as_ref()?.get(n)?.clone()
    }

    /// [`Graph::columns_read`] of every node, in one walk from the roots
    /// down; `None` for a shape the walk does not reason about.
    fn all_columns_read(&self) -> Option<Vec<Option<Vec<bool>>>> {
        let len = self.nodes.len();
        let mut consumed = vec![false; len];
        for (c, node) in self.nodes.iter().enumerate() {
            if matches!(node.op, Op::Removed) {
                continue;
            }
            for &p in &node.parents {
                // Parents are created before their children; anything else
                // is a shape this pass does not reason about.
                if p >= c {
                    return None;
                }
                consumed[p] = true;
            }
        }
        // Children before parents: each node's reads are complete when its
        // own turn comes. Nothing consumes a root (a reader, or a detached
        // copy's top), so all of it is read.
        let mut reads: Vec<Reads> = (0..len)
            .map(|i| {
                if consumed[i] {
                    Reads::none(self.nodes[i].colls.len())
                } else {
                    Reads::All
                }
            })
            .collect();
        for c in (0..len).rev() {
            let node = &self.nodes[c];
            if matches!(node.op, Op::Removed) {
                continue;
            }
            for (i, &p) in node.parents.iter().enumerate() {
                let width = self.nodes[p].colls.len();
                let read = self.parent_reads(c, i, &reads[c], width);
                reads[p].add(read);
            }
        }
        Some(
            reads
                .into_iter()
                .map(|r| match r {
                    Reads::Some(read) if read.iter().any(|r| !r) => Some(read),
                    _ => None,
                })
                .collect(),
        )
    }

    /// What node `c` reads of its parent `i` (`width` columns wide) when its
    /// own consumers read `above` of it.
    fn parent_reads(&self, c: NodeId, i: usize, above: &Reads, width: usize) -> Reads {
        match &self.nodes[c].op {
            Op::Filter(f) => match above {
                Reads::All => Reads::All,
                some => some.clone().with(f.pred.columns()),
            },
            Op::Project(p) => Reads::none(width).with(p.exprs.iter().flat_map(|e| e.columns())),
            Op::Union(_) => match above {
                Reads::Some(read) if read.len() == width => above.clone(),
                _ => Reads::All,
            },
            Op::Join(j) => {
                let left_width = self.nodes[self.nodes[c].parents[0]].colls.len();
                join_side_reads(j, i, above, width, left_width)
            }
            Op::Aggregate(_)
            | Op::Window(_)
            | Op::Reader(_)
            | Op::Base { .. }
            | Op::Values(_)
            | Op::Removed => Reads::All,
        }
    }
}

/// What join `j` reads of its input `side` (0 left, 1 right): that side's
/// share of what its consumers read, its join columns, and the key columns
/// a lookup may start from (`drives`).
fn join_side_reads(j: &Join, side: usize, above: &Reads, width: usize, left_width: usize) -> Reads {
    let Reads::Some(read) = above else {
        return Reads::All;
    };
    let output: Vec<usize> = read
        .iter()
        .enumerate()
        .filter(|(_, r)| **r)
        .map(|(c, _)| c)
        .chain(j.drives.iter().flat_map(|(cols, _)| cols.iter().copied()))
        .collect();
    let (offset, join_cols) = match side {
        0 => (0, &j.left_cols),
        _ => (left_width, &j.right_cols),
    };
    // Semi and anti joins output the left columns only.
    let output = match (side, j.kind) {
        (0, _) | (_, JoinKind::Inner | JoinKind::Left) => output,
        _ => Vec::new(),
    };
    Reads::none(width).with(
        output
            .into_iter()
            .filter(|&c| c >= offset && c < offset + width)
            .map(|c| c - offset)
            .chain(join_cols.iter().copied()),
    )
}

/// `d` with the columns `keep` leaves out set to NULL, as a scan that read
/// only `keep` returns its row.
pub(super) fn narrowed(d: &RowDelta, keep: &[bool]) -> RowDelta {
    let narrow = |row: &[Value]| {
        row.iter()
            .enumerate()
            .map(|(i, v)| match keep.get(i) {
                Some(false) => Value::Null,
                _ => v.clone(),
            })
            .collect()
    };
    match d {
        RowDelta::Insert(r) => RowDelta::Insert(narrow(r)),
        RowDelta::Delete(r) => RowDelta::Delete(narrow(r)),
    }
}

#[cfg(test)]
mod tests {
    use ladle_common::{ColumnSchema, SqlType, TableSchema};
    use ladle_storage::Storage;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    use crate::ops::Op;
    use crate::{Dataflow, DataflowConfig};

    /// What the views installed so far read of `comments`' scan.
    fn comments_read(df: &Dataflow, table: ladle_common::TableId) -> Option<Vec<bool>> {
        let g = df.inner.graph.lock();
        let base = g
            .nodes
            .iter()
            .position(|n| matches!(n.op, Op::Base { table: t, .. } if t == table))
            .expect("a base node for comments");
        g.columns_read(base)
    }

    #[test]
    fn each_view_adds_the_columns_it_reads() {
        let storage = Storage::in_memory();
        storage.create_database("test", true).unwrap();
        let int = SqlType::Int {
            bytes: 4,
            unsigned: false,
            display_width: None,
        };
        let columns = [
            ("id", int.clone()),
            ("story_id", int),
            ("body", SqlType::VarChar(200)),
            ("note", SqlType::VarChar(200)),
        ];
        let comments = storage
            .create_table(
                TableSchema {
                    id: 0,
                    database: "test".into(),
                    name: "comments".into(),
                    columns: columns
                        .iter()
                        .map(|(n, t)| ColumnSchema::new(*n, t.clone()))
                        .collect(),
                    primary_key: Some(vec![0]),
                    indexes: vec![],
                    version: 0,
                },
                false,
            )
            .unwrap();
        let df = Dataflow::new(storage, DataflowConfig::default()).unwrap();
        let install = |sql: &str| {
            let stmt = Parser::parse_sql(&MySqlDialect {}, sql).unwrap().remove(0);
            let sqlparser::ast::Statement::Query(q) = stmt else {
                panic!("{sql}")
            };
            df.prepare("test", &q).unwrap().execute(&[]).unwrap();
        };
        install("SELECT story_id, COUNT(*) FROM comments GROUP BY story_id");
        assert_eq!(
            comments_read(&df, comments.id),
            Some(vec![false, true, false, false])
        );
        install("SELECT id FROM comments WHERE body LIKE 'a%'");
        assert_eq!(
            comments_read(&df, comments.id),
            Some(vec![true, true, true, false])
        );
        install("SELECT * FROM comments");
        assert_eq!(comments_read(&df, comments.id), None);
    }
}
