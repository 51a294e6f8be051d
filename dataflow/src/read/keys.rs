//! From a read's parameters to the reader keys it looks up: parameter
//! slots bound, IN lists expanded, and each value compared as MySQL
//! compares it with the key column (a string in a number column is a
//! number, an ENUM's number is its label, nothing inexact is looked up).

use std::cmp::Ordering;
use std::collections::HashSet;

use ladle_common::{coerce, Collation, ColumnSchema, SqlType, Value};

use super::view::View;
use crate::plan::{PlannedView, Source};

/// The value of each parameter slot, and the elements of the slots bound to
/// IN lists (the slot itself holds the list's first element).
pub(crate) fn bind_slots(
    sources: &[Source],
    params: &[Value],
) -> (Vec<Value>, Vec<(usize, Vec<Value>)>) {
    let value = |s: &Source| match s {
        Source::User(i) => params.get(*i).cloned().unwrap_or(Value::Null),
        Source::Literal(v) => v.clone(),
        Source::List(_) => Value::Null,
    };
    let mut lists: Vec<(usize, Vec<Value>)> = Vec::new();
    let slots = sources
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Source::List(items) => {
                let vals: Vec<Value> = items.iter().map(value).collect();
                let first = vals.first().cloned().unwrap_or(Value::Null);
                lists.push((i, vals));
                first
            }
            other => value(other),
        })
        .collect();
    (slots, lists)
}

/// Whether a caller's parameter bound to a text key column is a number.
pub(crate) fn numeric_param_on_text_key(
    view: &View,
    sources: &[Source],
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
) -> bool {
    let number = |v: &Value| {
        matches!(
            v,
            Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_)
        )
    };
    let spec = &view.spec;
    spec.key_slots.iter().enumerate().any(|(i, key_slots)| {
        spec.key_types.get(i).is_some_and(|t| t.is_text())
            && key_slots.iter().any(|&s| match sources.get(s) {
                Some(Source::User(_)) => slots.get(s).is_some_and(number),
                Some(Source::List(items)) => {
                    items.iter().any(|x| matches!(x, Source::User(_)))
                        && lists
                            .iter()
                            .any(|(slot, vals)| *slot == s && vals.iter().any(number))
                }
                _ => false,
            })
    })
}

/// The reader keys a read of `spec` looks up: one per combination of the
/// key columns' values (an IN list on a key column gives one per element),
/// each value coerced to its column's type; a value no row's key can equal
/// (NULL, `id = 1.5`) gives none.
pub(crate) fn lookup_keys(
    spec: &PlannedView,
    slots: &[Value],
    lists: &[(usize, Vec<Value>)],
) -> Vec<Vec<Value>> {
    let mut keys: Vec<Vec<Value>> = vec![vec![]];
    for (i, slot_list) in spec.key_slots.iter().enumerate() {
        let raws = slot_list
            .iter()
            .flat_map(|s| match lists.iter().find(|l| l.0 == *s) {
                Some(l) => l.1.clone(),
                None => vec![slots.get(*s).cloned().unwrap_or(Value::Null)],
            });
        let vals = key_values(spec, i, raws);
        let mut next = Vec::with_capacity(keys.len() * vals.len());
        for k in &keys {
            for val in &vals {
                let mut k2 = k.clone();
                k2.push(val.clone());
                next.push(k2);
            }
        }
        keys = next;
    }
    keys
}

/// The values of key column `i` that `raws` look up, each once.
fn key_values(spec: &PlannedView, i: usize, raws: impl Iterator<Item = Value>) -> Vec<Value> {
    let ty = &spec.key_types[i];
    let col = ColumnSchema::new("", ty.clone());
    let coll = spec
        .key
        .get(i)
        .and_then(|&k| spec.plan.colls.get(k))
        .copied()
        .unwrap_or_default();
    let mut vals: Vec<Value> = Vec::new();
    let mut seen: HashSet<Value> = HashSet::new();
    for raw in raws {
        // An ENUM compared with a number compares its label's index
        // (`e = 2` finds the second label), as in MySQL.
        if let (SqlType::Enum(labels), Some(n)) = (ty, raw.as_f64()) {
            if let Some(label) = enum_label_at(labels, n) {
                if seen.insert(label.key_normalized(coll)) {
                    vals.push(label);
                }
            }
            continue;
        }
        let raw = as_key_column_compares(ty, raw);
        // Coerce to the column's type for the lookup, but only when that
        // loses nothing: `id = 1.5` matches no integer.
        if let Ok(x) = coerce(&raw, &col) {
            let exact =
                crate::expr::compare(&raw, &x, Collation::GeneralCi) == Some(Ordering::Equal);
            // Elements equal under the key's collation are read once:
            // `IN (1, 1)` returns each row once. Every value here has the
            // key column's type, so equal under the collation is equal
            // once normalized: a hash set, not a scan of the values so far
            // (100,000 strings were 5 * 10^9 comparisons: no answer).
            if !x.is_null() && exact && seen.insert(x.key_normalized(coll)) {
                vals.push(x);
            }
        }
    }
    vals
}

/// `raw` as a column of type `ty` compares with it.
fn as_key_column_compares(ty: &SqlType, raw: Value) -> Value {
    match &raw {
        // A string compared with a number column compares as a number
        // (`'1abc'` and `'01'` equal 1, `'abc'` 0): look that number up.
        Value::Text(_) | Value::Bytes(_) if numeric_key(ty) => crate::expr::string_as_number(&raw),
        // A datetime string compared with a temporal column: what
        // follows the value (a `+00:00` offset) is ignored, as
        // MariaDB does (with a warning).
        Value::Text(t)
            if matches!(
                ty,
                SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }
            ) =>
        {
            match ladle_common::parse_datetime_prefix(t) {
                Some(dt) => Value::DateTime(dt),
                None => raw,
            }
        }
        _ => raw,
    }
}

/// The label of an ENUM whose (1-based) index is `n`; `None` for no
/// label's index.
fn enum_label_at(labels: &[String], n: f64) -> Option<Value> {
    if n.fract() != 0.0 || n < 1.0 {
        return None;
    }
    labels.get(n as usize - 1).map(Value::text)
}

/// Whether a column of type `t` compares a string key as a number.
pub(crate) fn numeric_key(t: &SqlType) -> bool {
    matches!(
        t,
        SqlType::Int { .. }
            | SqlType::Year
            | SqlType::Bit(_)
            | SqlType::Decimal { .. }
            | SqlType::Float
            | SqlType::Double
    )
}
