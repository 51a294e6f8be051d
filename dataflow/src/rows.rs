//! Read results that share rows with a view's reader instead of copying
//! them.
//!
//! A plain read (every output is a stored column; no read-time filter,
//! aggregate, sort or DISTINCT merge) returns the reader's own persistent
//! row vectors (an O(1) clone of the version it read) and the stored
//! columns to show; iterating reaches the OFFSET by index, in O(log n). Copying each row into a fresh `Vec` was
//! most of the server's time on a large read (100k rows: an allocation and a
//! scattered copy per row), and the wire encoder only needs to look at them.

use std::sync::Arc;

use ladle_common::{Row, Value};

use crate::ops::reader::Rows;

/// The rows a read returns, in order.
#[derive(Clone, Debug, Default)]
pub struct ResultRows(Repr);

#[derive(Clone, Debug)]
enum Repr {
    Owned(Vec<Row>),
    /// `len` rows of the concatenated `parts`, after skipping `offset`,
    /// each shown as the stored columns `columns`.
    Shared {
        parts: Vec<Rows>,
        columns: Arc<[usize]>,
        offset: usize,
        len: usize,
    },
}

impl Default for Repr {
    fn default() -> Repr {
        Repr::Owned(Vec::new())
    }
}

impl ResultRows {
    /// Rows shared with a reader: `parts` concatenated, the first `offset`
    /// skipped, at most `limit` kept, each projected onto `columns`.
    pub(crate) fn shared(
        parts: Vec<Rows>,
        columns: Arc<[usize]>,
        offset: usize,
        limit: Option<usize>,
    ) -> ResultRows {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let len = total
            .saturating_sub(offset)
            .min(limit.unwrap_or(usize::MAX));
        ResultRows(Repr::Shared {
            parts,
            columns,
            offset,
            len,
        })
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Owned(rows) => rows.len(),
            Repr::Shared { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows in order, borrowed.
    pub fn iter(&self) -> impl Iterator<Item = RowRef<'_>> {
        let (owned, shared) = match &self.0 {
            Repr::Owned(rows) => (Some(rows.iter().map(|r| RowRef::whole(r))), None),
            Repr::Shared {
                parts,
                columns,
                offset,
                len,
            } => (
                None,
                Some({
                    // Whole parts before the offset are skipped by length,
                    // the rest of it by index inside the part.
                    let (mut skip, mut left) = (*offset, *len);
                    parts
                        .iter()
                        .flat_map(move |p| {
                            let start = skip.min(p.len());
                            skip -= start;
                            let n = (p.len() - start).min(left);
                            left -= n;
                            p.range(start, start + n)
                        })
                        .map(move |r| RowRef {
                            values: r,
                            columns: Some(columns),
                        })
                }),
            ),
        };
        owned
            .into_iter()
            .flatten()
            .chain(shared.into_iter().flatten())
    }

    /// The rows as owned values (copies shared rows).
    pub fn into_vec(self) -> Vec<Row> {
        match self.0 {
            Repr::Owned(rows) => rows,
            Repr::Shared { .. } => self.iter().map(|r| r.to_row()).collect(),
        }
    }
}

impl From<Vec<Row>> for ResultRows {
    fn from(rows: Vec<Row>) -> ResultRows {
        ResultRows(Repr::Owned(rows))
    }
}

impl FromIterator<Row> for ResultRows {
    fn from_iter<I: IntoIterator<Item = Row>>(rows: I) -> ResultRows {
        ResultRows(Repr::Owned(rows.into_iter().collect()))
    }
}

/// One result row, borrowed from a [`ResultRows`].
#[derive(Clone, Copy, Debug)]
pub struct RowRef<'a> {
    values: &'a [Value],
    /// The stored columns shown, in output order; `None`: all of `values`.
    columns: Option<&'a [usize]>,
}

impl<'a> RowRef<'a> {
    fn whole(values: &'a [Value]) -> RowRef<'a> {
        RowRef {
            values,
            columns: None,
        }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        match self.columns {
            Some(c) => c.len(),
            None => self.values.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Column `i` (output order); `None` past the last column.
    pub fn get(&self, i: usize) -> Option<&'a Value> {
        match self.columns {
            // A stored row shorter than the view's columns is a bug
            // elsewhere; it reads as NULL, as the copying path did.
            Some(c) => c
                .get(i)
                .map(|&s| self.values.get(s).unwrap_or(&Value::Null)),
            None => self.values.get(i),
        }
    }

    /// The columns in output order.
    pub fn iter(&self) -> impl Iterator<Item = &'a Value> + 'a {
        let me = *self;
        (0..me.len()).filter_map(move |i| me.get(i))
    }

    pub fn to_row(&self) -> Row {
        self.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(vals: &[[i64; 3]]) -> Rows {
        vals.iter()
            .map(|r| r.iter().map(|&v| Value::Int(v)).collect())
            .collect()
    }

    #[test]
    fn shared_rows_read_like_the_copies_they_replace() {
        let parts = vec![rows(&[[1, 2, 3], [4, 5, 6]]), rows(&[]), rows(&[[7, 8, 9]])];
        let cols: Arc<[usize]> = Arc::from(vec![2, 0]);
        let all = ResultRows::shared(parts.clone(), cols.clone(), 0, None);
        assert_eq!(all.len(), 3);
        assert_eq!(
            all.clone().into_vec(),
            vec![
                vec![Value::Int(3), Value::Int(1)],
                vec![Value::Int(6), Value::Int(4)],
                vec![Value::Int(9), Value::Int(7)],
            ]
        );
        let page = ResultRows::shared(parts.clone(), cols.clone(), 1, Some(1));
        assert_eq!(page.len(), 1);
        assert_eq!(page.into_vec(), vec![vec![Value::Int(6), Value::Int(4)]]);
        let past_end = ResultRows::shared(parts, cols, 5, Some(10));
        assert!(past_end.is_empty());
        assert_eq!(past_end.iter().count(), 0);
    }

    /// Parts of several leaves: the offset lands inside a later part.
    #[test]
    fn offsets_reach_into_large_parts() {
        let part =
            |lo: i64, n: i64| -> Rows { (lo..lo + n).map(|v| vec![Value::Int(v)]).collect() };
        let parts = vec![part(0, 200), part(200, 0), part(200, 300)];
        for (offset, limit) in [(0, 25), (199, 3), (250, 100), (480, 50), (600, 1)] {
            let r = ResultRows::shared(parts.clone(), Arc::from(vec![0]), offset, Some(limit));
            let want: Vec<Row> = (offset as i64..(offset + limit).min(500) as i64)
                .map(|v| vec![Value::Int(v)])
                .collect();
            assert_eq!(r.len(), want.len());
            assert_eq!(r.into_vec(), want, "offset {offset} limit {limit}");
        }
    }

    #[test]
    fn row_refs_index_output_columns() {
        let parts = vec![rows(&[[1, 2, 3]])];
        let r = ResultRows::shared(parts, Arc::from(vec![1, 1, 7]), 0, None);
        let row = r.iter().next().expect("one row");
        assert_eq!(row.len(), 3);
        assert_eq!(row.get(0), Some(&Value::Int(2)));
        assert_eq!(row.get(2), Some(&Value::Null));
        assert_eq!(row.get(3), None);
        let owned = ResultRows::from(vec![vec![Value::Int(5)]]);
        assert_eq!(
            owned.iter().next().map(|r| r.to_row()),
            Some(vec![Value::Int(5)])
        );
    }
}
