//! String functions: concatenation, case, trimming, substrings, padding,
//! searching, hex, regular expressions and digests, with MySQL's rules for
//! binary strings and `max_allowed_packet`.

use ladle_common::{Collation, SqlType, Value};

use super::args::{int_arg, null_in};
use super::Func;
use crate::expr::error::{EvalError, EvalResult};
use crate::expr::ops::{self, to_bytes, to_text};
use crate::expr::typing::type_chars;
use crate::expr::warnings::{warn, WARN_ALLOWED_PACKET_OVERFLOWED};

/// The string functions over their evaluated arguments `vals` (`v0` the
/// first).
pub(super) fn call(f: Func, vals: &[Value], v0: Value) -> EvalResult {
    use Func::*;
    Ok(match f {
        Concat => concat(f, vals)?,
        ConcatWs => concat_ws(f, vals, &v0)?,
        Lower | Upper | Trim | LTrim | RTrim | Reverse | Hex | Unhex if v0.is_null() => Value::Null,
        // Case conversion does not apply to binary strings (MySQL).
        Lower | Upper if matches!(v0, Value::Bytes(_)) => v0,
        Reverse if matches!(v0, Value::Bytes(_)) => {
            Value::bytes(to_bytes(&v0).into_iter().rev().collect::<Vec<u8>>())
        }
        Lower => Value::text(to_text(&v0).to_lowercase()),
        Upper => Value::text(to_text(&v0).to_uppercase()),
        // A binary string is trimmed of its space bytes, byte for byte.
        Trim | LTrim | RTrim if matches!(v0, Value::Bytes(_)) => {
            let b = to_bytes(&v0);
            let start = match f {
                RTrim => 0,
                _ => b.iter().position(|&x| x != b' ').unwrap_or(b.len()),
            };
            let end = match f {
                LTrim => b.len(),
                _ => b.iter().rposition(|&x| x != b' ').map_or(start, |i| i + 1),
            };
            Value::bytes(&b[start..end.max(start)])
        }
        Trim => Value::text(to_text(&v0).trim_matches(' ')),
        LTrim => Value::text(to_text(&v0).trim_start_matches(' ')),
        RTrim => Value::text(to_text(&v0).trim_end_matches(' ')),
        Reverse => Value::text(to_text(&v0).chars().rev().collect::<String>()),
        Hex if too_large(f, to_bytes(&v0).len() as u128 * 2) => Value::Null,
        Hex => match &v0 {
            Value::Text(_) | Value::Bytes(_) => Value::text(
                to_bytes(&v0)
                    .iter()
                    .map(|b| format!("{b:02X}"))
                    .collect::<String>(),
            ),
            other => Value::text(format!("{:X}", ops::to_u64_bits(other))),
        },
        Unhex => match unhex(&to_bytes(&v0)) {
            Some(b) => Value::bytes(b),
            None => Value::Null,
        },
        Length => match &v0 {
            Value::Null => Value::Null,
            other => Value::Int(to_bytes(other).len() as i64),
        },
        // A binary string's characters are its bytes.
        CharLength => match &v0 {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Int(b.len() as i64),
            other => Value::Int(to_text(other).chars().count() as i64),
        },
        Substring if matches!(v0, Value::Bytes(_)) => {
            if null_in(vals) {
                return Ok(Value::Null);
            }
            let pos = int_arg(&vals[1]).unwrap_or(0);
            let len = match vals.get(2) {
                Some(l) => int_arg(l).unwrap_or(0),
                None => i64::MAX,
            };
            Value::bytes(substring(&to_bytes(&v0), pos, len))
        }
        Substring => {
            if null_in(vals) {
                return Ok(Value::Null);
            }
            let s: Vec<char> = to_text(&v0).chars().collect();
            let pos = int_arg(&vals[1]).unwrap_or(0);
            let len = match vals.get(2) {
                Some(l) => int_arg(l).unwrap_or(0),
                None => i64::MAX,
            };
            Value::text(substring(&s, pos, len).iter().collect::<String>())
        }
        Left | Right if matches!(v0, Value::Bytes(_)) => {
            if null_in(vals) {
                return Ok(Value::Null);
            }
            let b = to_bytes(&v0);
            let k = int_arg(&vals[1]).unwrap_or(0).clamp(0, b.len() as i64) as usize;
            Value::bytes(if f == Left {
                &b[..k]
            } else {
                &b[b.len() - k..]
            })
        }
        Left | Right => {
            if null_in(vals) {
                return Ok(Value::Null);
            }
            let s: Vec<char> = to_text(&v0).chars().collect();
            let k = int_arg(&vals[1]).unwrap_or(0).clamp(0, s.len() as i64) as usize;
            let out: String = if f == Left {
                s[..k].iter().collect()
            } else {
                s[s.len() - k..].iter().collect()
            };
            Value::text(out)
        }
        Replace => replace(f, vals, &v0)?,
        Repeat => {
            if null_in(vals) {
                return Ok(Value::Null);
            }
            let n = int_arg(&vals[1]).unwrap_or(0).max(0) as u128;
            // A binary string repeats byte for byte (as text, a byte that
            // is not UTF-8 would change).
            let s = to_bytes(&v0);
            if too_large(f, s.len() as u128 * n) {
                return Ok(Value::Null);
            }
            match v0 {
                Value::Bytes(_) => Value::bytes(s.repeat(n as usize)),
                _ => Value::text(to_text(&v0).repeat(n as usize)),
            }
        }
        Lpad | Rpad => pad(f, vals, &v0)?,
        Locate | Instr => locate(f, vals)?,
        RegexpLike => regexp_like(vals)?,
        RegexpReplace => regexp_replace(vals)?,
        Md5 | Sha1 | Sha2 | Ord if v0.is_null() => Value::Null,
        Md5 | Sha1 | Sha2 => digest(f, vals, &v0),
        Ord => ord(&v0),
        _ => unreachable!("{f:?} is not a string function"),
    })
}

/// The result types of the string functions, given their arguments' types.
pub(super) fn result_type(f: Func, tys: &[(SqlType, bool)]) -> (SqlType, bool) {
    use Func::*;
    let any_null = tys.iter().any(|t| t.1);
    let text = |n: u32| SqlType::VarChar(n);
    match f {
        Concat | ConcatWs | Replace | Lpad | Rpad | Repeat => {
            let n: u32 = tys
                .iter()
                .map(|t| match t.0 {
                    SqlType::Char(n)
                    | SqlType::VarChar(n)
                    | SqlType::Binary(n)
                    | SqlType::VarBinary(n) => n,
                    ref t if f == Concat => type_chars(t),
                    _ => 64,
                })
                .fold(0u32, |a, b| a.saturating_add(b));
            let binary = match f {
                Repeat => tys[0].0.is_binary(),
                _ => tys.iter().any(|t| t.0.is_binary()),
            };
            (
                if binary {
                    SqlType::VarBinary(n.max(1))
                } else {
                    text(n.max(1))
                },
                // CONCAT may be NULL past max_allowed_packet (MySQL's
                // metadata says so too).
                match f {
                    ConcatWs => tys[0].1,
                    Concat => true,
                    _ => any_null,
                },
            )
        }
        Lower | Upper | Trim | LTrim | RTrim | Reverse | Substring | Left | Right => {
            let t = match &tys[0].0 {
                t if t.is_text() || t.is_binary() => t.clone(),
                _ => text(255),
            };
            (t, any_null)
        }
        // Two hex digits per byte of a string.
        Hex => match &tys[0].0 {
            t if t.is_text() || t.is_binary() => (text(type_chars(t).saturating_mul(2)), any_null),
            _ => (text(255), any_null),
        },
        Unhex => (SqlType::VarBinary(255), true),
        Length | CharLength | Locate | Instr => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: Some(10),
            },
            any_null,
        ),
        RegexpReplace => (SqlType::Text(u32::MAX), any_null),
        RegexpLike => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            any_null,
        ),
        Md5 | Sha1 => (SqlType::VarChar(40), any_null),
        Sha2 => (SqlType::VarChar(128), true),
        Ord => (
            SqlType::Int {
                bytes: 8,
                unsigned: false,
                display_width: None,
            },
            any_null,
        ),
        _ => unreachable!("{f:?} is not a string function"),
    }
}

/// CONCAT: NULL if any argument is; a binary string if any argument is one.
fn concat(f: Func, vals: &[Value]) -> EvalResult {
    if null_in(vals) {
        return Ok(Value::Null);
    }
    let total: u128 = vals.iter().map(|v| to_bytes(v).len() as u128).sum();
    if too_large(f, total) {
        return Ok(Value::Null);
    }
    // One binary argument makes the result a binary string.
    if vals.iter().any(|v| matches!(v, Value::Bytes(_))) {
        return Ok(Value::bytes(
            vals.iter().flat_map(to_bytes).collect::<Vec<u8>>(),
        ));
    }
    Ok(Value::text(vals.iter().map(to_text).collect::<String>()))
}

/// CONCAT_WS(separator `v0`, ...): NULL arguments are skipped.
fn concat_ws(f: Func, vals: &[Value], v0: &Value) -> EvalResult {
    if v0.is_null() {
        return Ok(Value::Null);
    }
    let parts = vals[1..].iter().filter(|v| !v.is_null());
    let total: u128 = parts
        .clone()
        .map(|v| to_bytes(v).len() as u128 + to_bytes(v0).len() as u128)
        .sum();
    if too_large(f, total) {
        return Ok(Value::Null);
    }
    if vals.iter().any(|v| matches!(v, Value::Bytes(_))) {
        let sep = to_bytes(v0);
        let parts: Vec<Vec<u8>> = parts.map(to_bytes).collect();
        return Ok(Value::bytes(parts.join(sep.as_slice())));
    }
    let sep = to_text(v0);
    let parts: Vec<String> = parts.map(to_text).collect();
    Ok(Value::text(parts.join(&sep)))
}

/// REPLACE(`v0`, from, to).
fn replace(f: Func, vals: &[Value], v0: &Value) -> EvalResult {
    if null_in(vals) {
        return Ok(Value::Null);
    }
    // With a binary string among them, bytes are replaced (text would
    // change a byte that is not UTF-8).
    if vals.iter().any(|v| matches!(v, Value::Bytes(_))) {
        let (hay, from, to) = (to_bytes(v0), to_bytes(&vals[1]), to_bytes(&vals[2]));
        let hits = byte_matches(&hay, &from);
        let bytes =
            hay.len() as u128 - (hits.len() * from.len()) as u128 + (hits.len() * to.len()) as u128;
        if too_large(f, bytes) {
            return Ok(Value::Null);
        }
        let mut out = Vec::with_capacity(bytes as usize);
        let mut at = 0;
        for hit in hits {
            out.extend_from_slice(&hay[at..hit]);
            out.extend_from_slice(&to);
            at = hit + from.len();
        }
        out.extend_from_slice(&hay[at..]);
        return Ok(Value::bytes(out));
    }
    let from = to_text(&vals[1]);
    let hay = to_text(v0);
    if from.is_empty() {
        return Ok(Value::text(hay));
    }
    let to = to_text(&vals[2]);
    let hits = hay.matches(from.as_str()).count() as u128;
    let bytes = hay.len() as u128 - hits * from.len() as u128 + hits * to.len() as u128;
    if too_large(f, bytes) {
        return Ok(Value::Null);
    }
    Ok(Value::text(hay.replace(&from, &to)))
}

/// Where `needle` starts in `hay`, left to right, not overlapping; none
/// for an empty needle.
fn byte_matches(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut hits = Vec::new();
    let mut at = 0;
    while !needle.is_empty() && at + needle.len() <= hay.len() {
        if hay[at..].starts_with(needle) {
            hits.push(at);
            at += needle.len();
        } else {
            at += 1;
        }
    }
    hits
}

/// LPAD and RPAD(`v0`, length, padding): cut to the length when longer.
/// With a binary string among them, in bytes.
fn pad(f: Func, vals: &[Value], v0: &Value) -> EvalResult {
    if null_in(vals) {
        return Ok(Value::Null);
    }
    let n = int_arg(&vals[1]).unwrap_or(0);
    if n < 0 {
        return Ok(Value::Null);
    }
    let n = n as usize;
    if matches!(v0, Value::Bytes(_)) || matches!(vals[2], Value::Bytes(_)) {
        let (s, pad) = (to_bytes(v0), to_bytes(&vals[2]));
        if s.len() < n && (pad.is_empty() || too_large(f, n as u128)) {
            return Ok(Value::Null);
        }
        return Ok(Value::bytes(padded(&s, &pad, n, f == Func::Lpad)));
    }
    let s: Vec<char> = to_text(v0).chars().collect();
    let pad: Vec<char> = to_text(&vals[2]).chars().collect();
    if s.len() < n {
        if pad.is_empty() {
            return Ok(Value::Null);
        }
        let body_bytes: u128 = s.iter().map(|c| c.len_utf8() as u128).sum();
        if too_large(f, body_bytes + cycled_bytes(&pad, (n - s.len()) as u128)) {
            return Ok(Value::Null);
        }
    }
    let out = padded(&s, &pad, n, f == Func::Lpad);
    Ok(Value::text(out.into_iter().collect::<String>()))
}

/// `s` cut or padded to `n` units (characters or bytes) with `pad`
/// repeated, on the left or the right; `pad` is not empty when needed.
fn padded<T: Clone>(s: &[T], pad: &[T], n: usize, left: bool) -> Vec<T> {
    if s.len() >= n {
        return s[..n].to_vec();
    }
    let fill = pad.iter().cycle().take(n - s.len()).cloned();
    if left {
        fill.chain(s.iter().cloned()).collect()
    } else {
        s.iter().cloned().chain(fill).collect()
    }
}

/// LOCATE(needle, haystack) and INSTR(haystack, needle): the 1-based
/// character position, case-insensitively; 0 when absent.
fn locate(f: Func, vals: &[Value]) -> EvalResult {
    if null_in(vals) {
        return Ok(Value::Null);
    }
    let (needle, hay) = if f == Func::Locate {
        (&vals[0], &vals[1])
    } else {
        (&vals[1], &vals[0])
    };
    let h = Collation::GeneralCi.fold(&to_text(hay)).to_string();
    let h = h.to_lowercase();
    let nd = to_text(needle).to_uppercase().to_lowercase();
    Ok(match h.find(&nd) {
        Some(byte) => Value::Int(h[..byte].chars().count() as i64 + 1),
        None => Value::Int(0),
    })
}

/// MD5, SHA1 and SHA2(`v0`, bits): lower-case hex digests; NULL for an
/// unknown SHA2 length.
fn digest(f: Func, vals: &[Value], v0: &Value) -> Value {
    use sha2::Digest;
    let data = to_bytes(v0);
    let digest: Option<Vec<u8>> = match f {
        Func::Md5 => Some(md5::Md5::digest(&data).to_vec()),
        Func::Sha1 => Some(sha1::Sha1::digest(&data).to_vec()),
        _ => match vals.get(1).and_then(int_arg) {
            Some(224) => Some(sha2::Sha224::digest(&data).to_vec()),
            Some(0 | 256) => Some(sha2::Sha256::digest(&data).to_vec()),
            Some(384) => Some(sha2::Sha384::digest(&data).to_vec()),
            Some(512) => Some(sha2::Sha512::digest(&data).to_vec()),
            _ => None,
        },
    };
    match digest {
        Some(d) => Value::text(d.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        None => Value::Null,
    }
}

/// ORD: the first character's bytes as a big-endian number.
fn ord(v0: &Value) -> Value {
    let data = to_bytes(v0);
    let first = match v0 {
        Value::Text(t) => t.chars().next().map_or(0, char::len_utf8),
        _ => data.len().min(1),
    };
    Value::Int(
        data[..first]
            .iter()
            .fold(0i64, |n, &b| n * 256 + i64::from(b)),
    )
}

/// The SQL name of a function, as MySQL's warnings spell it.
fn sql_name(f: Func) -> &'static str {
    match f {
        Func::Concat => "concat",
        Func::ConcatWs => "concat_ws",
        Func::Replace => "replace",
        Func::Repeat => "repeat",
        Func::Lpad => "lpad",
        Func::Rpad => "rpad",
        Func::Hex => "hex",
        _ => "function",
    }
}

/// Whether a result of `bytes` bytes from `f` is past `max_allowed_packet`;
/// if so, records MySQL's warning 1301 (the caller returns NULL).
fn too_large(f: Func, bytes: u128) -> bool {
    let max = ladle_common::MAX_ALLOWED_PACKET;
    if bytes <= u128::from(max) {
        return false;
    }
    warn(
        WARN_ALLOWED_PACKET_OVERFLOWED,
        format!(
            "Result of {}() was larger than max_allowed_packet ({max}) - truncated",
            sql_name(f)
        ),
    );
    true
}

/// Bytes of the first `n` characters of `pad` repeated (without building it).
fn cycled_bytes(pad: &[char], n: u128) -> u128 {
    let per_cycle: u128 = pad.iter().map(|c| c.len_utf8() as u128).sum();
    let len = pad.len() as u128;
    let tail: u128 = pad[..(n % len) as usize]
        .iter()
        .map(|c| c.len_utf8() as u128)
        .sum();
    n / len * per_cycle + tail
}

/// SUBSTRING's units (characters or bytes) from 1-based `pos` (from the end
/// when negative; nothing for 0), at most `len` of them.
fn substring<T: Clone>(s: &[T], pos: i64, len: i64) -> Vec<T> {
    let n = s.len() as i64;
    let start = if pos > 0 {
        pos - 1
    } else if pos < 0 {
        n + pos
    } else {
        return Vec::new();
    };
    if start < 0 || start >= n || len <= 0 {
        return Vec::new();
    }
    let end = start.saturating_add(len).min(n);
    s[start as usize..end as usize].to_vec()
}

/// The bytes a string of hex digits spells (an odd count reads as if it
/// had a leading 0, as in MySQL); `None` for a non-hex character.
fn unhex(digits: &[u8]) -> Option<Vec<u8>> {
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(digits.len().div_ceil(2));
    let (head, rest) = digits.split_at(digits.len() % 2);
    if let [c] = head {
        out.push(nibble(*c)?);
    }
    for pair in rest.chunks(2) {
        out.push(nibble(pair[0])? << 4 | nibble(pair[1])?);
    }
    Some(out)
}

/// REGEXP_LIKE(s, pattern[, match_type]); see [`Func::RegexpLike`]. Without
/// a match type the match is case-insensitive, as REGEXP is on
/// utf8mb4_general_ci text (the planner passes "c" for binary operands).
fn regexp_like(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let subject = to_text(&vals[0]);
    let mode = vals.get(2).map(to_text).unwrap_or_default();
    with_regex(&to_text(&vals[1]), &mode, "regexp_like", |re| {
        Value::Int(re.is_match(&subject) as i64)
    })
}

/// REGEXP_REPLACE(s, pattern, replacement): every match replaced (`$1`
/// names a group, as in MySQL), case-insensitive as REGEXP_LIKE is.
fn regexp_replace(vals: &[Value]) -> EvalResult {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let subject = to_text(&vals[0]);
    let replacement = to_text(&vals[2]);
    with_regex(&to_text(&vals[1]), "", "regexp_replace", |re| {
        Value::text(re.replace_all(&subject, replacement.as_str()))
    })
}

/// `f` over the compiled `pattern` under MySQL match type `mode`. A view
/// evaluates one pattern for row after row: the last one built (per
/// thread) is kept.
fn with_regex(
    pattern: &str,
    mode: &str,
    function: &str,
    f: impl FnOnce(&regex::Regex) -> Value,
) -> EvalResult {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, String, regex::Regex)>> =
            const { std::cell::RefCell::new(None) };
    }
    let mut f = Some(f);
    let cached = LAST.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|(p, m, _)| p == pattern && m == mode)
            .and_then(|(_, _, re)| f.take().map(|f| f(re)))
    });
    if let Some(v) = cached {
        return Ok(v);
    }
    let mut b = regex::RegexBuilder::new(pattern);
    b.case_insensitive(true);
    for c in mode.chars() {
        match c {
            'c' => b.case_insensitive(false),
            'i' => b.case_insensitive(true),
            'm' => b.multi_line(true),
            'n' => b.dot_matches_new_line(true),
            'u' => &mut b,
            _ => {
                return Err(EvalError::Invalid(format!(
                    "Incorrect arguments to {function}"
                )))
            }
        };
    }
    let re = b
        .build()
        .map_err(|e| EvalError::Invalid(format!("Regex error '{e}'")))?;
    let v = f.take().map_or(Value::Null, |f| f(&re));
    LAST.with(|l| *l.borrow_mut() = Some((pattern.to_string(), mode.to_string(), re)));
    Ok(v)
}
