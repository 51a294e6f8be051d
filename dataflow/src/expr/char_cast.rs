//! CAST(x AS CHAR[(n)]) and CONVERT(x USING utf8mb4): a binary string read
//! as utf8mb4 as MariaDB converts it (each invalid byte `?`, warning 1300),
//! and CHAR(n)'s cut (warning 1292), both warnings in MariaDB's words.

use ladle_common::{escaped_bytes, utf8_replacing_invalid, Value};

use super::warnings::{warn, WARN_INVALID_CHARACTER_STRING, WARN_TRUNCATED_WRONG_VALUE};

/// `v` as utf8mb4 text of at most `chars` characters (all of it for
/// `None`), warning as MariaDB does about invalid bytes among those it
/// reads and about what the cut drops.
pub(crate) fn cast_to_char(v: &Value, chars: Option<usize>) -> Value {
    let text = match v {
        Value::Bytes(b) => {
            let (text, first_invalid) = utf8_replacing_invalid(b);
            // MariaDB converts only the characters it keeps.
            let read = |at: usize| chars.is_none_or(|n| text[..at].chars().count() < n);
            if let Some(at) = first_invalid.filter(|&at| read(at)) {
                let shown = shown_bytes(&b[at..], INVALID_STRING_SHOWN);
                let message = format!("Invalid utf8mb4 character string: '{shown}'");
                warn(WARN_INVALID_CHARACTER_STRING, message);
            }
            text
        }
        other => other.to_string(),
    };
    let Some((cut, _)) = chars.and_then(|n| text.char_indices().nth(n)) else {
        return Value::text(text);
    };
    let shown = match v {
        Value::Bytes(b) => shown_bytes(b, TRUNCATED_VALUE_SHOWN),
        _ => text.clone(),
    };
    let n = chars.unwrap_or_default();
    warn(
        WARN_TRUNCATED_WRONG_VALUE,
        format!("Truncated incorrect CHAR({n}) value: '{shown}'"),
    );
    Value::text(&text[..cut])
}

/// How many characters of the bytes warning 1300 shows, and 1292.
const INVALID_STRING_SHOWN: usize = 64;
const TRUNCATED_VALUE_SHOWN: usize = 128;

/// Bytes as MariaDB's messages show them ([`escaped_bytes`]); past
/// `limit` characters, the first `limit - 3` and `...` (which may cut a
/// `\xHH` short, as MariaDB does).
fn shown_bytes(b: &[u8], limit: usize) -> String {
    let mut shown = escaped_bytes(b);
    if shown.len() > limit {
        shown.truncate(limit - 3);
        shown.push_str("...");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::shown_bytes;

    #[test]
    fn shown_bytes_cut_as_mariadb_cuts_them() {
        assert_eq!(shown_bytes(b"\xFFB\x7F", 64), "\\xFFB\\x7F");
        let all = shown_bytes(&[0xFF; 16], 64);
        assert_eq!(all, "\\xFF".repeat(16));
        let cut = shown_bytes(&[0xFF; 17], 64);
        assert_eq!(cut, format!("{}\\...", "\\xFF".repeat(15)));
    }
}
