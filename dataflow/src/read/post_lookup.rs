//! From each looked-up key's rows to the answer (ReadySet calls this stage
//! `post_lookup`): rows shared with the reader when nothing is computed;
//! otherwise the range narrowed, the read-time filter, the read-time
//! finish (aggregates over the key's rows), the order across keys,
//! DISTINCT across keys, then OFFSET/LIMIT and the output expressions.

use std::borrow::Cow;
use std::collections::HashSet;

use ladle_common::{Collation, Row, Value};

use super::view::View;
use crate::expr::Expr;
use crate::ops::norm_key;
use crate::ops::reader::{cmp_rows, Rows};
use crate::plan::range::RangeIndex;
use crate::plan::{Count, PlannedView};
use crate::rows::ResultRows;
use crate::{DataflowError, Result};

/// The answer of a read of `v` whose keys gave `results` (one per key, in
/// key order; no key at all for `col = NULL`).
pub(super) fn answer(
    v: &View,
    results: Vec<Rows>,
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
) -> Result<ResultRows> {
    let spec = &v.spec;
    let keys = results.len();
    let offset = count(&spec.offset, slots)?.unwrap_or(0);
    let limit = count(&spec.limit, slots)?;
    // A plain read shares the reader's rows (see `rows.rs`).
    let plain = spec.read_filter.is_none()
        && spec.finish.is_none()
        && (keys <= 1 || (spec.order.is_empty() && !spec.dedup))
        && (spec.empty_default.is_none() || results.iter().all(|r| !r.is_empty()))
        && keys > 0;
    // MySQL sorts the keys' rows: it evaluated WHERE on each before the
    // LIMIT (`spec.sorts_all_rows`).
    let sorted_all = v.marks_rows && spec.sorts_all_rows;
    if sorted_all && spec.read_filter.is_none() {
        results
            .iter()
            .flat_map(|r| r.iter())
            .try_for_each(where_failed)?;
    }
    if let (true, Some(cols)) = (plain, &v.output_columns) {
        if v.marks_rows {
            let page = results.iter().flat_map(|r| r.iter()).skip(offset);
            for r in page.take(limit.unwrap_or(usize::MAX)) {
                where_failed(r)?;
            }
        }
        return Ok(ResultRows::shared(results, cols.clone(), offset, limit));
    }
    if let ([got], None, None) = (&results[..], &spec.read_filter, &spec.finish) {
        if spec.empty_default.is_none() || !got.is_empty() {
            // One key, outputs computed per row: only the page is read (by
            // index, O(log n) to reach the OFFSET).
            let start = offset.min(got.len());
            let end = start + (got.len() - start).min(limit.unwrap_or(usize::MAX));
            return got
                .range(start, end)
                .map(|r| project(v, r, slots))
                .collect::<Result<Vec<Row>>>()
                .map(ResultRows::from);
        }
    }
    // One key read in the order the result needs (its ORDER BY starts with
    // the range column, ascending, or it has none): the rows inside the
    // range are filtered as they come and the read stops at OFFSET + LIMIT
    // (`id > ? ORDER BY id LIMIT n` reads n rows, not the rest of the key).
    let stop_at = match (&spec.range, limit) {
        (Some(r), Some(l))
            if keys == 1
                && !sorted_all
                && spec.finish.is_none()
                && spec.empty_default.is_none()
                && !spec.dedup
                && r.leads(&spec.order) =>
        {
            Some(offset.saturating_add(l))
        }
        _ => None,
    };
    let listed = list_variants(spec, slots, lists);
    let rows = gather(spec, &results, slots, stop_at, listed.as_deref())?;
    let rows = finish(
        spec,
        rows,
        slots,
        keys,
        stop_at.is_none() && listed.is_none(),
    )?;
    if sorted_all {
        rows.iter().try_for_each(|r| where_failed(r))?;
    }
    if spec.dedup && keys > 1 {
        return distinct_page(v, &rows, slots, offset, limit);
    }
    rows.iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .map(|r| project(v, r, slots))
        .collect::<Result<Vec<Row>>>()
        .map(ResultRows::from)
}

/// MySQL's 1690 for stored row `r` if its WHERE overflowed (a filter
/// marked it, see `ops::Filter::pass`), in whichever column the mark is:
/// one the query does not output (`SELECT id ... WHERE a + 1 > 0`) too.
/// Only the rows a read returns are looked at: MySQL stops evaluating
/// WHERE once its LIMIT is met, reading an index in the query's order.
fn where_failed(r: &Row) -> Result<()> {
    match r.iter().find(|v| crate::expr::is_where_failed(v)) {
        Some(m) => Err(DataflowError::OutOfRange(
            crate::expr::out_of_range_in(m)
                .unwrap_or_default()
                .to_string(),
        )),
        None => Ok(()),
    }
}

/// The output row of stored row `r` (1690 if a filter marked it).
fn project(v: &View, r: &Row, slots: &[Value]) -> Result<Row> {
    if v.marks_rows {
        where_failed(r)?;
    }
    match &v.output_columns {
        Some(cols) => Ok(cols
            .iter()
            .map(|&i| r.get(i).cloned().unwrap_or(Value::Null))
            .collect()),
        None => v
            .spec
            .output
            .iter()
            .map(|e: &Expr| e.eval_params(r, slots))
            .collect::<Result<Row, _>>()
            .map_err(DataflowError::from),
    }
}

/// An IN list on the range index's equality (`story_id IN (...)` on a view
/// keyed by `user_id`): the slots once per element, each narrowing the
/// key's rows to that element's; a row is kept once if any element's
/// filter holds.
fn list_variants(
    spec: &PlannedView,
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
) -> Option<Vec<Vec<Value>>> {
    let slot = spec.range.as_ref()?.list_slot?;
    let (_, elements) = lists.iter().find(|l| l.0 == slot)?;
    let variants = elements.iter().map(|e| {
        let mut s = slots.to_vec();
        s[slot] = e.clone();
        s
    });
    Some(variants.collect())
}

/// The stored rows each key gives, borrowed: the rows inside the range,
/// those of the listed elements, up to `stop_at` (filtered as they come
/// when it is set), DISTINCT across several keys.
fn gather<'r>(
    spec: &'r PlannedView,
    results: &'r [Rows],
    slots: &[Value],
    stop_at: Option<usize>,
    listed: Option<&[Vec<Value>]>,
) -> Result<Vec<Cow<'r, Row>>> {
    let mut rows: Vec<Cow<'_, Row>> = Vec::new();
    if results.is_empty() {
        // `col = NULL`: no rows match; an aggregate without GROUP BY still
        // returns its one row.
        if let Some(d) = &spec.empty_default {
            rows.push(Cow::Borrowed(d));
        }
    }
    // DISTINCT merges rows equal under their columns' collations.
    let mut dedup_seen: HashSet<Vec<Value>> = HashSet::new();
    for got in results {
        if got.is_empty() {
            if let Some(d) = &spec.empty_default {
                rows.push(Cow::Borrowed(d));
            }
        }
        if let (Some(variants), Some(range), Some(f)) = (listed, &spec.range, &spec.read_filter) {
            for r in listed_rows(got, range, f, variants)? {
                if stop_at.is_some_and(|n| rows.len() >= n) {
                    break;
                }
                rows.push(Cow::Borrowed(r));
            }
            continue;
        }
        // Range parameters: only the rows between the bounds (the filter
        // still checks each).
        let (start, end) = match &spec.range {
            Some(r) => r.narrow(got, slots),
            None => (0, got.len()),
        };
        for r in got.range(start, end) {
            if let Some(n) = stop_at {
                if rows.len() >= n {
                    break;
                }
                if let Some(f) = &spec.read_filter {
                    if !f.eval_bool_reading_markers(r, slots)? {
                        continue;
                    }
                }
            }
            if spec.dedup && results.len() > 1 && !dedup_seen.insert(norm_key(r, &spec.plan.colls))
            {
                continue;
            }
            rows.push(Cow::Borrowed(r));
        }
    }
    Ok(rows)
}

/// The gathered rows filtered (unless `gather` did, `filter` false), with
/// the read-time finish applied and ordered as the query asks.
fn finish<'r>(
    spec: &PlannedView,
    mut rows: Vec<Cow<'r, Row>>,
    slots: &[Value],
    keys: usize,
    filter: bool,
) -> Result<Vec<Cow<'r, Row>>> {
    if let (Some(f), true) = (&spec.read_filter, filter) {
        let mut kept = Vec::with_capacity(rows.len());
        for r in rows {
            if f.eval_bool_reading_markers(&r, slots)? {
                kept.push(r);
            }
        }
        rows = kept;
    }
    if let Some(f) = &spec.finish {
        let owned: Vec<Row> = rows.into_iter().map(Cow::into_owned).collect();
        rows = f.apply(owned, slots)?.into_iter().map(Cow::Owned).collect();
    }
    if keys > 1 && !spec.order.is_empty() {
        rows.sort_by(|a, b| cmp_rows(a, b, &spec.order));
    } else if spec.range.is_some() && !spec.order.is_empty() {
        // The reader orders by the range column first: sort as a reader
        // without one would have kept them.
        rows.sort_by(|a, b| cmp_rows(a, b, &spec.order).then_with(|| a.cmp(b)));
    }
    Ok(rows)
}

/// DISTINCT over several lookups: stored rows differ in the key column, so
/// the output rows are merged (under their collations), then paged.
fn distinct_page(
    v: &View,
    rows: &[Cow<'_, Row>],
    slots: &[Value],
    offset: usize,
    limit: Option<usize>,
) -> Result<ResultRows> {
    let spec = &v.spec;
    let stored_coll = |i: usize| spec.plan.colls.get(i).copied().unwrap_or_default();
    let out_colls: Vec<Collation> = match &v.output_columns {
        Some(cols) => cols.iter().map(|&i| stored_coll(i)).collect(),
        None => spec
            .output
            .iter()
            .map(|e| match e {
                Expr::Column(i) => stored_coll(*i),
                _ => Collation::Binary,
            })
            .collect(),
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for r in rows {
        let o = project(v, r, slots)?;
        if seen.insert(norm_key(&o, &out_colls)) {
            out.push(o);
        }
    }
    let page = out.into_iter().skip(offset);
    Ok(match limit {
        Some(l) => page.take(l).collect(),
        None => page.collect(),
    })
}

/// The value of a LIMIT or OFFSET (`None`: none given).
fn count(c: &Option<Count>, slots: &[Value]) -> Result<Option<usize>> {
    Ok(match c {
        None => None,
        Some(Count::Const(n)) => Some(*n as usize),
        Some(Count::Slot(s)) => match slots.get(*s) {
            Some(v) => match crate::plan::count_of(v) {
                Some(n) => Some(n),
                _ => match v {
                    Value::Text(t) => Some(
                        t.trim()
                            .parse::<usize>()
                            .map_err(|_| DataflowError::BadArgument("LIMIT".into()))?,
                    ),
                    _ => {
                        return Err(DataflowError::BadArgument(
                            "LIMIT must be a non-negative integer".into(),
                        ))
                    }
                },
            },
            None => None,
        },
    })
}

/// The rows of `got` (one key's, in the reader's order) that `filter`
/// keeps under any of `variants` (the slots, once per IN-list element),
/// each once and in the reader's order: the element's rows are found by
/// `range`, and the spans of all elements merged before filtering.
fn listed_rows<'r>(
    got: &'r Rows,
    range: &RangeIndex,
    filter: &Expr,
    variants: &[Vec<Value>],
) -> Result<Vec<&'r Row>> {
    let mut spans: Vec<(usize, usize)> = variants
        .iter()
        .map(|slots| range.narrow(got, slots))
        .filter(|(start, end)| start < end)
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut out = Vec::new();
    for (start, end) in merged {
        for r in got.range(start, end) {
            for slots in variants {
                if filter.eval_bool_reading_markers(r, slots)? {
                    out.push(r);
                    break;
                }
            }
        }
    }
    Ok(out)
}
