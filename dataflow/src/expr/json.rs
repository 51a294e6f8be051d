//! JSON functions over JSON text (the JSON type stores text, as MariaDB's
//! does): JSON_EXTRACT and `->`, JSON_UNQUOTE and `->>`, JSON_CONTAINS,
//! JSON_CONTAINS_PATH, JSON_TYPE, JSON_VALID, JSON_LENGTH, JSON_KEYS and
//! JSON_DEPTH, with MySQL's path
//! language (`$`, `.key`, `."quoted key"`, `.*`, `[n]`, `[*]`).
//!
//! Documents are parsed with serde_json (keys kept in document order) and
//! results written back as MySQL and MariaDB print JSON: `", "` between
//! elements and `": "` after keys. A document that is not JSON gives NULL
//! (MariaDB's answer, with a warning there); a bad path is an error.

use serde_json::Value as Json;

use super::error::{EvalError, EvalResult};
use super::ops::to_text;
use ladle_common::Value;

/// One step of a JSON path.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    AnyKey,
    Index(usize),
    AnyIndex,
}

/// A parsed path: its steps, and whether it has wildcards (then
/// JSON_EXTRACT wraps its matches in an array).
struct Path {
    steps: Vec<Step>,
    wildcard: bool,
}

fn bad_path(path: &str) -> EvalError {
    EvalError::Invalid(format!("Invalid JSON path expression: '{path}'"))
}

fn parse_path(text: &str) -> Result<Path, EvalError> {
    let rest = text.trim();
    let mut chars = rest
        .strip_prefix('$')
        .ok_or_else(|| bad_path(text))?
        .chars()
        .peekable();
    let mut steps = Vec::new();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {}
            '.' => match chars.peek() {
                Some('*') => {
                    chars.next();
                    steps.push(Step::AnyKey);
                }
                Some('"') => {
                    chars.next();
                    let mut raw = String::from("\"");
                    let mut escaped = false;
                    loop {
                        let c = chars.next().ok_or_else(|| bad_path(text))?;
                        raw.push(c);
                        if escaped {
                            escaped = false;
                        } else if c == '\\' {
                            escaped = true;
                        } else if c == '"' {
                            break;
                        }
                    }
                    let key: String = serde_json::from_str(&raw).map_err(|_| bad_path(text))?;
                    steps.push(Step::Key(key));
                }
                _ => {
                    let mut key = String::new();
                    while let Some(&c) = chars.peek() {
                        if c.is_alphanumeric() || c == '_' || c == '$' {
                            key.push(c);
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    if key.is_empty() {
                        return Err(bad_path(text));
                    }
                    steps.push(Step::Key(key));
                }
            },
            '[' => {
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some(c) => inner.push(c),
                        None => return Err(bad_path(text)),
                    }
                }
                let inner = inner.trim();
                if inner == "*" {
                    steps.push(Step::AnyIndex);
                } else {
                    let n = inner.parse().map_err(|_| bad_path(text))?;
                    steps.push(Step::Index(n));
                }
            }
            _ => return Err(bad_path(text)),
        }
    }
    let wildcard = steps
        .iter()
        .any(|s| matches!(s, Step::AnyKey | Step::AnyIndex));
    Ok(Path { steps, wildcard })
}

/// The values `steps` reaches in `doc`, in document order. A scalar is
/// its own element 0 (MySQL's auto-wrapping: `$[0]` of `1` is `1`).
fn select<'a>(doc: &'a Json, steps: &[Step], out: &mut Vec<&'a Json>) {
    let Some((step, rest)) = steps.split_first() else {
        out.push(doc);
        return;
    };
    match (step, doc) {
        (Step::Key(k), Json::Object(m)) => {
            if let Some(v) = m.get(k) {
                select(v, rest, out);
            }
        }
        (Step::AnyKey, Json::Object(m)) => m.values().for_each(|v| select(v, rest, out)),
        (Step::Index(i), Json::Array(a)) => {
            if let Some(v) = a.get(*i) {
                select(v, rest, out);
            }
        }
        (Step::AnyIndex, Json::Array(a)) => a.iter().for_each(|v| select(v, rest, out)),
        (Step::Index(0), scalar) if !scalar.is_array() => select(scalar, rest, out),
        _ => {}
    }
}

/// Writes `v` as MySQL prints JSON.
fn write(v: &Json, out: &mut String) {
    match v {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(item, out);
            }
            out.push(']');
        }
        Json::Object(m) => {
            out.push('{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Json::String(k.clone()).to_string());
                out.push_str(": ");
                write(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A JSON value as SQL: a number as a number (so that extracted numbers
/// compare and sort as numbers, as MySQL's JSON values do), anything else
/// as JSON text.
fn text_of(v: &Json) -> Value {
    if let Json::Number(n) = v {
        if let Some(i) = n.as_i64() {
            return Value::Int(i);
        }
        if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
            return Value::Double(f);
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    Value::text(out)
}

/// The document an argument holds, or None when it is not JSON.
fn document(v: &Value) -> Option<Json> {
    serde_json::from_str(&to_text(v)).ok()
}

/// JSON_EXTRACT(doc, path, ...): the value one path without wildcards
/// reaches, else an array of every match; NULL when nothing matches.
pub(super) fn extract(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let Some((doc, paths)) = vals.split_first() else {
        return Ok(Value::Null);
    };
    let paths = paths
        .iter()
        .map(|p| parse_path(&to_text(p)))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(doc) = document(doc) else {
        return Ok(Value::Null);
    };
    let mut found = Vec::new();
    for p in &paths {
        select(&doc, &p.steps, &mut found);
    }
    Ok(match found.as_slice() {
        [] => Value::Null,
        [one] if paths.len() == 1 && !paths[0].wildcard => text_of(one),
        many => text_of(&Json::Array(many.iter().map(|v| (*v).clone()).collect())),
    })
}

/// JSON_UNQUOTE(s): a JSON string's text; anything else as it is.
pub(super) fn unquote(v: &Value) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let text = to_text(v);
    if text.len() >= 2 && text.starts_with('"') && text.ends_with('"') {
        if let Ok(s) = serde_json::from_str::<String>(&text) {
            return Value::text(s);
        }
    }
    Value::text(text)
}

/// MySQL's containment: a scalar contains an equal scalar; an array
/// contains a non-array contained in one of its elements, and an array
/// whose every element it contains; an object contains an object whose
/// every key it has, with a value that contains the candidate's.
fn contains(target: &Json, candidate: &Json) -> bool {
    match (target, candidate) {
        (Json::Array(_), Json::Array(c)) => c.iter().all(|ce| contains(target, ce)),
        (Json::Array(t), c) => t.iter().any(|te| contains(te, c)),
        (Json::Object(t), Json::Object(c)) => c
            .iter()
            .all(|(k, cv)| t.get(k).is_some_and(|tv| contains(tv, cv))),
        (Json::Number(a), Json::Number(b)) => a.as_f64() == b.as_f64(),
        (t, c) => !t.is_array() && !t.is_object() && t == c,
    }
}

/// JSON_CONTAINS(target, candidate[, path]).
pub(super) fn contains_fn(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let path = match vals.get(2) {
        Some(p) => Some(parse_path(&to_text(p))?),
        None => None,
    };
    let (Some(target), Some(candidate)) = (
        vals.first().and_then(document),
        vals.get(1).and_then(document),
    ) else {
        return Ok(Value::Null);
    };
    let mut found = Vec::new();
    match &path {
        Some(p) => select(&target, &p.steps, &mut found),
        None => found.push(&target),
    }
    Ok(match found.first() {
        None => Value::Null,
        Some(t) => Value::Int(i64::from(contains(t, &candidate))),
    })
}

/// JSON_CONTAINS_PATH(doc, 'one' | 'all', path, ...).
pub(super) fn contains_path(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let mode = vals.get(1).map(to_text).unwrap_or_default();
    let all = if mode.eq_ignore_ascii_case("all") {
        true
    } else if mode.eq_ignore_ascii_case("one") {
        false
    } else {
        return Err(EvalError::Invalid(
            "The oneOrAll argument to json_contains_path may take these values: 'one' or 'all'"
                .into(),
        ));
    };
    let paths = vals[2..]
        .iter()
        .map(|p| parse_path(&to_text(p)))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(doc) = vals.first().and_then(document) else {
        return Ok(Value::Null);
    };
    let exists = |p: &Path| {
        let mut found = Vec::new();
        select(&doc, &p.steps, &mut found);
        !found.is_empty()
    };
    let hit = if all {
        paths.iter().all(exists)
    } else {
        paths.iter().any(exists)
    };
    Ok(Value::Int(i64::from(hit)))
}

/// JSON_TYPE(doc): OBJECT, ARRAY, STRING, INTEGER, DOUBLE, BOOLEAN, NULL.
pub(super) fn type_of(v: &Value) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let Some(doc) = document(v) else {
        return Value::Null;
    };
    Value::text(match doc {
        Json::Object(_) => "OBJECT",
        Json::Array(_) => "ARRAY",
        Json::String(_) => "STRING",
        Json::Number(n) if n.is_f64() => "DOUBLE",
        Json::Number(_) => "INTEGER",
        Json::Bool(_) => "BOOLEAN",
        Json::Null => "NULL",
    })
}

/// JSON_VALID(s): 1 for a JSON document, else 0.
pub(super) fn valid(v: &Value) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    Value::Int(i64::from(document(v).is_some()))
}

/// The one value a path without wildcards reaches in `doc` (MySQL's error
/// 3149 for a wildcard where one value is needed), or None.
fn at_path<'a>(doc: &'a Json, path: Option<&Value>) -> Result<Option<&'a Json>, EvalError> {
    let Some(path) = path else {
        return Ok(Some(doc));
    };
    let p = parse_path(&to_text(path))?;
    if p.wildcard {
        return Err(EvalError::Invalid(
            "In this situation, path expressions may not contain the * and ** tokens or an array range."
                .into(),
        ));
    }
    let mut found = Vec::new();
    select(doc, &p.steps, &mut found);
    Ok(found.first().copied())
}

/// JSON_LENGTH(doc[, path]): an array's elements, an object's keys, 1 for
/// a scalar; NULL when the path reaches nothing.
pub(super) fn length(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let Some(doc) = vals.first().and_then(document) else {
        return Ok(Value::Null);
    };
    Ok(match at_path(&doc, vals.get(1))? {
        None => Value::Null,
        Some(Json::Array(a)) => Value::Int(a.len() as i64),
        Some(Json::Object(m)) => Value::Int(m.len() as i64),
        Some(_) => Value::Int(1),
    })
}

/// JSON_KEYS(doc[, path]): an object's keys as a JSON array, in document
/// order (MariaDB's); NULL for anything else.
pub(super) fn keys(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let Some(doc) = vals.first().and_then(document) else {
        return Ok(Value::Null);
    };
    Ok(match at_path(&doc, vals.get(1))? {
        Some(Json::Object(m)) => text_of(&Json::Array(
            m.keys().map(|k| Json::String(k.clone())).collect(),
        )),
        _ => Value::Null,
    })
}

/// JSON_DEPTH(doc): 1 for a scalar or an empty array or object, else one
/// more than its deepest element.
pub(super) fn depth(v: &Value) -> Value {
    fn of(v: &Json) -> i64 {
        let inner = match v {
            Json::Array(a) => a.iter().map(of).max(),
            Json::Object(m) => m.values().map(of).max(),
            _ => None,
        };
        inner.map_or(1, |d| d + 1)
    }
    if v.is_null() {
        return Value::Null;
    }
    document(v).map_or(Value::Null, |d| Value::Int(of(&d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Value {
        Value::text(s)
    }

    #[test]
    fn paths_reach_keys_indexes_and_wildcards() {
        let doc = t(r#"{"a": {"b c": [1, 2, {"d": true}]}, "e": null}"#);
        assert_eq!(
            extract(&[doc.clone(), t(r#"$.a."b c"[2].d"#)]),
            Ok(t("true"))
        );
        assert_eq!(extract(&[doc.clone(), t("$.e")]), Ok(t("null")));
        assert_eq!(extract(&[doc.clone(), t("$.x")]), Ok(Value::Null));
        assert_eq!(
            extract(&[doc.clone(), t(r#"$.a."b c"[*]"#)]),
            Ok(t(r#"[1, 2, {"d": true}]"#))
        );
        assert!(extract(&[doc, t("a.b")]).is_err());
    }

    #[test]
    fn containment_follows_mysql() {
        let yes = |a: &str, b: &str| contains_fn(&[t(a), t(b)]) == Ok(Value::Int(1));
        assert!(yes(r#"{"a": [1, [2]], "b": 1}"#, r#"{"a": [[2]]}"#));
        assert!(yes("[1, 2, 3]", "[3, 1]"));
        assert!(yes("[1, 2]", "2"));
        assert!(!yes("[1, 2]", "[4]"));
        assert!(!yes(r#"{"a": 1}"#, r#"{"a": 1, "b": 2}"#));
    }
}
