//! Table reads over any [`KvRead`]: the latest state, a snapshot, or the
//! write path's overlay. Every function returns `(primary key, row)` pairs
//! in index order.

use std::ops::Bound;

use ladle_common::{Row, Value};

use crate::engine::{KvEngine, KvRead};
use crate::keys::prefix_successor;
use crate::table::{parse_secondary_value, SecondaryValue, TableState};
use crate::{IndexRef, Result};

pub(crate) type KeyedRow = (Vec<u8>, Row);

/// The row stored under primary key `pk`.
pub(crate) fn get_row(r: &dyn KvRead, t: &TableState, pk: &[u8]) -> Result<Option<Row>> {
    get_row_columns(r, t, pk, None)
}

/// [`get_row`] decoding only the columns `keep` marks, where given.
fn get_row_columns(
    r: &dyn KvRead,
    t: &TableState,
    pk: &[u8],
    keep: Option<&[bool]>,
) -> Result<Option<Row>> {
    match r.get(t.primary_cf(), pk)? {
        Some(bytes) => Ok(Some(t.decode(&bytes, keep)?)),
        None => Ok(None),
    }
}

/// A lookup of one full primary key, as one point read of the latest
/// state: no snapshot needed. `None` for any other lookup.
pub(crate) fn point_read(
    engine: &dyn KvEngine,
    t: &TableState,
    index: IndexRef,
    key: &[Value],
    keep: Option<&[bool]>,
) -> Result<Option<Vec<Row>>> {
    let (IndexRef::Primary, Some(pk)) = (index, &t.schema.primary_key) else {
        return Ok(None);
    };
    if pk.is_empty() || key.len() != pk.len() {
        return Ok(None);
    }
    // A key that cannot be coerced to the columns' types matches nothing.
    let Some(k) = t.encode_lookup_key(pk, key) else {
        return Ok(Some(Vec::new()));
    };
    Ok(Some(match engine.get_latest(t.primary_cf(), &k)? {
        Some(bytes) => vec![t.decode(&bytes, keep)?],
        None => Vec::new(),
    }))
}

/// Rows whose index key starts with `key`.
pub(crate) fn lookup(
    r: &dyn KvRead,
    t: &TableState,
    index: IndexRef,
    key: &[Value],
) -> Result<Vec<KeyedRow>> {
    let Some(columns) = t.index_columns(index) else {
        return Ok(Vec::new());
    };
    let Some(prefix) = t.encode_lookup_key(columns, key) else {
        return Ok(Vec::new());
    };
    // A full primary key is a point read.
    if index == IndexRef::Primary && !columns.is_empty() && key.len() == columns.len() {
        return Ok(get_row(r, t, &prefix)?
            .map(|row| (prefix, row))
            .into_iter()
            .collect());
    }
    let upper = prefix_successor(&prefix);
    scan_index(r, t, index, &prefix, upper.as_deref())
}

/// [`lookup`] for each of `keys`, from one scan of the index over all of
/// them (one RocksDB iterator; see [`KvRead::scan_prefixes`]). With
/// `keep`, only the columns it marks are decoded (the rest are NULL).
pub(crate) fn lookup_many(
    r: &dyn KvRead,
    t: &TableState,
    index: IndexRef,
    keys: &[Vec<Value>],
    keep: Option<&[bool]>,
) -> Result<Vec<Vec<KeyedRow>>> {
    let mut out: Vec<Vec<KeyedRow>> = vec![Vec::new(); keys.len()];
    let Some(columns) = t.index_columns(index) else {
        return Ok(out);
    };
    // Keys that cannot be coerced to the columns' types match nothing.
    let (asked, prefixes): (Vec<usize>, Vec<Vec<u8>>) = keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| Some((i, t.encode_lookup_key(columns, k)?)))
        .unzip();
    let full_primary = |k: &Vec<Value>| !columns.is_empty() && k.len() == columns.len();
    if index == IndexRef::Primary && asked.iter().all(|&i| full_primary(&keys[i])) {
        for (i, pk) in asked.into_iter().zip(prefixes) {
            if let Some(row) = get_row_columns(r, t, &pk, keep)? {
                out[i].push((pk, row));
            }
        }
        return Ok(out);
    }
    let mut pks: Vec<(usize, Vec<u8>)> = Vec::new();
    match index {
        IndexRef::Primary => r.scan_prefixes(t.primary_cf(), &prefixes, &mut |p, k, v| {
            out[asked[p]].push((k.to_vec(), t.decode(v, keep)?));
            Ok(())
        })?,
        IndexRef::Secondary(_) => {
            r.scan_prefixes(&t.index_cf(index), &prefixes, &mut |p, _, v| {
                match parse_secondary_value(v)? {
                    SecondaryValue::Pk(pk) => pks.push((asked[p], pk.to_vec())),
                    SecondaryValue::PkAndRow(pk, row) => {
                        out[asked[p]].push((pk.to_vec(), t.decode(row, keep)?))
                    }
                }
                Ok(())
            })?
        }
    }
    for (i, pk) in pks {
        // As in `scan_index`: a consistent read always finds the row.
        if let Some(row) = get_row_columns(r, t, &pk, keep)? {
            out[i].push((pk, row));
        }
    }
    Ok(out)
}

/// Rows whose index key lies between the bounds (prefix semantics: a bound
/// with fewer values than columns covers every key starting with it).
pub(crate) fn range(
    r: &dyn KvRead,
    t: &TableState,
    index: IndexRef,
    lower: Bound<&[Value]>,
    upper: Bound<&[Value]>,
) -> Result<Vec<KeyedRow>> {
    let Some(columns) = t.index_columns(index) else {
        return Ok(Vec::new());
    };
    let lo = match lower {
        Bound::Unbounded => Vec::new(),
        Bound::Included(k) => match t.encode_lookup_key(columns, k) {
            Some(p) => p,
            None => return Ok(Vec::new()),
        },
        Bound::Excluded(k) => match t.encode_lookup_key(columns, k) {
            Some(p) => match prefix_successor(&p) {
                Some(s) => s,
                None => return Ok(Vec::new()),
            },
            None => return Ok(Vec::new()),
        },
    };
    let hi = match upper {
        Bound::Unbounded => None,
        Bound::Included(k) => match t.encode_lookup_key(columns, k) {
            Some(p) => prefix_successor(&p),
            None => return Ok(Vec::new()),
        },
        Bound::Excluded(k) => match t.encode_lookup_key(columns, k) {
            Some(p) => Some(p),
            None => return Ok(Vec::new()),
        },
    };
    scan_index(r, t, index, &lo, hi.as_deref())
}

/// Every row in primary-key order, without the keys: what a full scan's
/// readers (the dataflow's fills) need, without a key copy per row. With
/// `keep`, only the columns it marks are decoded (the rest are NULL).
pub(crate) fn scan_rows(r: &dyn KvRead, t: &TableState, keep: Option<&[bool]>) -> Result<Vec<Row>> {
    // Sized by the row count (approximate after a restart, so capped):
    // a 360k-row scan otherwise copies its vector about 19 times growing.
    let estimate = t.counters.rows.load(std::sync::atomic::Ordering::Relaxed);
    let mut out = Vec::with_capacity(estimate.clamp(0, 1 << 22) as usize);
    r.scan(t.primary_cf(), &[], None, &mut |_, v| {
        out.push(t.decode(v, keep)?);
        Ok(true)
    })?;
    Ok(out)
}

/// Takes the rows a streaming scan reads, one at a time; returning false
/// ends the scan.
pub type RowSink<'a> = &'a mut dyn FnMut(Row) -> bool;

/// [`scan_rows`] handing each row to `each` as it is decoded, until it
/// returns false.
pub(crate) fn scan_rows_each(
    r: &dyn KvRead,
    t: &TableState,
    keep: Option<&[bool]>,
    each: RowSink<'_>,
) -> Result<()> {
    r.scan(t.primary_cf(), &[], None, &mut |_, v| {
        Ok(each(t.decode(v, keep)?))
    })
}

/// Every row in primary-key order.
pub(crate) fn scan_all(r: &dyn KvRead, t: &TableState) -> Result<Vec<KeyedRow>> {
    scan_index(r, t, IndexRef::Primary, &[], None)
}

fn scan_index(
    r: &dyn KvRead,
    t: &TableState,
    index: IndexRef,
    lower: &[u8],
    upper: Option<&[u8]>,
) -> Result<Vec<KeyedRow>> {
    let mut out = Vec::new();
    match index {
        IndexRef::Primary => {
            r.scan(t.primary_cf(), lower, upper, &mut |k, v| {
                out.push((k.to_vec(), t.decode_row(v)?));
                Ok(true)
            })?;
        }
        IndexRef::Secondary(_) => {
            let mut pks: Vec<Vec<u8>> = Vec::new();
            r.scan(&t.index_cf(index), lower, upper, &mut |_, v| {
                match parse_secondary_value(v)? {
                    SecondaryValue::Pk(pk) => pks.push(pk.to_vec()),
                    SecondaryValue::PkAndRow(pk, row) => {
                        out.push((pk.to_vec(), t.decode_row(row)?))
                    }
                }
                Ok(true)
            })?;
            for pk in pks {
                // Absent only if the index and the primary disagree, which a
                // consistent read never sees.
                if let Some(row) = get_row(r, t, &pk)? {
                    out.push((pk, row));
                }
            }
        }
    }
    Ok(out)
}
