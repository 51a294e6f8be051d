//! Statement text from the bytes a client sent, which need not be UTF-8.

/// Statement text from the bytes a client sent (COM_QUERY,
/// COM_STMT_PREPARE), losing nothing. Valid UTF-8 is used as it is. Otherwise
/// the bytes are scanned with MySQL's lexical rules ('...' and "..." strings
/// with backslash escapes and doubled quotes, `...` identifiers, `#`, `-- `
/// and `/* */` comments): a string literal whose bytes (after unescaping)
/// are not UTF-8 becomes the hex literal `X'..'` of those bytes (an
/// introducer before it, `_binary` or `N`, is dropped: a hex literal is
/// binary already), invalid bytes inside a comment become U+FFFD (they mean
/// nothing), and invalid UTF-8 anywhere else is a syntax error (1064).
pub fn from_bytes(
    bytes: &[u8],
) -> std::result::Result<std::borrow::Cow<'_, str>, crate::error::WireError> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Ok(std::borrow::Cow::Borrowed(s));
    }
    let syntax_error = |at: usize| crate::error::WireError {
        code: crate::error::ER_PARSE,
        message: format!(
            "You have an error in your SQL syntax; invalid UTF-8 near '{}'",
            String::from_utf8_lossy(&bytes[at..bytes.len().min(at + 20)])
        ),
    };
    let mut out = String::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                let (end, closed) = string_end(bytes, i, q);
                let raw = &bytes[i..end];
                match std::str::from_utf8(raw) {
                    Ok(s) => out.push_str(s),
                    Err(_) if !closed => return Err(syntax_error(i)),
                    Err(_) => {
                        drop_introducer(&mut out);
                        out.push_str("X'");
                        for b in unescape_bytes(&raw[1..raw.len() - 1], q) {
                            out.push(HEX[usize::from(b >> 4)] as char);
                            out.push(HEX[usize::from(b & 0xF)] as char);
                        }
                        out.push('\'');
                    }
                }
                i = end;
            }
            b'`' => {
                let (end, _) = string_end(bytes, i, b'`');
                out.push_str(std::str::from_utf8(&bytes[i..end]).map_err(|_| syntax_error(i))?);
                i = end;
            }
            b'#' => i = comment(bytes, i, line_end(bytes, i), &mut out),
            b'-' if bytes.get(i + 1) == Some(&b'-')
                && bytes
                    .get(i + 2)
                    .is_none_or(|c| c.is_ascii_whitespace() || c.is_ascii_control()) =>
            {
                i = comment(bytes, i, line_end(bytes, i), &mut out)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = bytes[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(bytes.len(), |p| i + 2 + p + 2);
                i = comment(bytes, i, end, &mut out);
            }
            _ => {
                // Up to the next byte that starts a token handled above.
                let end = bytes[i + 1..]
                    .iter()
                    .position(|b| matches!(b, b'\'' | b'"' | b'`' | b'#' | b'-' | b'/'))
                    .map_or(bytes.len(), |p| i + 1 + p);
                out.push_str(
                    std::str::from_utf8(&bytes[i..end])
                        .map_err(|e| syntax_error(i + e.valid_up_to()))?,
                );
                i = end;
            }
        }
    }
    Ok(std::borrow::Cow::Owned(out))
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The end (exclusive) of the quoted token starting at `start` with quote
/// `q`, and whether it is closed. Backslash escapes apply in strings, not
/// in backtick identifiers; a doubled quote is part of the token.
fn string_end(bytes: &[u8], start: usize, q: u8) -> (usize, bool) {
    let mut i = start + 1;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' && q != b'`' {
            i += 2;
        } else if b == q {
            if bytes.get(i + 1) == Some(&q) {
                i += 2;
            } else {
                return (i + 1, true);
            }
        } else {
            i += 1;
        }
    }
    (bytes.len(), false)
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| from + p)
}

/// Copies the comment `bytes[from..end]`, invalid UTF-8 replaced.
fn comment(bytes: &[u8], from: usize, end: usize, out: &mut String) -> usize {
    out.push_str(&String::from_utf8_lossy(&bytes[from..end]));
    end
}

/// Removes a character set introducer (`_binary`, `_utf8mb4`...) or the `N`
/// of a national string literal from the end of `out`.
fn drop_introducer(out: &mut String) {
    let word_start = out
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
        .last()
        .map(|(i, _)| i);
    if let Some(at) = word_start {
        let word = &out[at..];
        if word.eq_ignore_ascii_case("n") || (word.starts_with('_') && word.len() > 1) {
            out.truncate(at);
            return;
        }
    }
    // `_binary 'x'`: an introducer may be separated by whitespace.
    let trimmed = out
        .trim_end_matches(|c: char| c.is_ascii_whitespace())
        .len();
    if trimmed < out.len() {
        let head = &out[..trimmed];
        let at = head
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
            .last()
            .map(|(i, _)| i);
        if let Some(at) = at {
            if head[at..].starts_with('_') && head.len() - at > 1 {
                out.truncate(at);
            }
        }
    }
}

/// The bytes of a string literal's body, unescaped as MySQL does (see
/// [`super::unescape_literal`]).
fn unescape_bytes(raw: &[u8], quote: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'\\' && i + 1 < raw.len() {
            let e = raw[i + 1];
            match e {
                b'0' => out.push(0),
                b'b' => out.push(8),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'Z' => out.push(0x1A),
                b'%' | b'_' => out.extend_from_slice(&[b'\\', e]),
                other => out.push(other),
            }
            i += 2;
        } else if b == quote && raw.get(i + 1) == Some(&quote) {
            out.push(quote);
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
    out
}
