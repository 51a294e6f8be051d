//! Bytes read as utf8mb4 text the way MariaDB converts a binary string to
//! a character set: each byte that does not begin a valid character
//! becomes `?` (so `x'E28242'`, a cut-off `€` before `B`, is `??B`), and
//! the rest is kept byte for byte. Never U+FFFD: a client would read three
//! bytes MariaDB never sends. Also bytes as MariaDB's messages show them.

/// `b` as text, every byte that does not begin a valid UTF-8 character
/// replaced by `?`; with the position of the first such byte, if any.
pub fn utf8_replacing_invalid(mut b: &[u8]) -> (String, Option<usize>) {
    let mut out = String::with_capacity(b.len());
    let mut first_invalid = None;
    loop {
        match std::str::from_utf8(b) {
            Ok(s) => {
                out.push_str(s);
                return (out, first_invalid);
            }
            Err(e) => {
                let (valid, rest) = b.split_at(e.valid_up_to());
                // `valid` is UTF-8 up to `valid_up_to` by from_utf8's contract.
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                first_invalid.get_or_insert(out.len());
                out.push('?');
                // MariaDB skips one byte and reads on from the next.
                b = &rest[1..];
            }
        }
    }
}

/// Bytes as MariaDB's messages show them: printable ASCII as is, any
/// other byte as `\xHH`.
pub fn escaped_bytes(b: &[u8]) -> String {
    let mut shown = String::with_capacity(b.len());
    for &byte in b {
        if (0x20..=0x7E).contains(&byte) {
            shown.push(char::from(byte));
        } else {
            shown.push_str(&format!("\\x{byte:02X}"));
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::utf8_replacing_invalid;

    #[test]
    fn each_invalid_byte_is_one_question_mark() {
        let cases: [(&[u8], &str, Option<usize>); 6] = [
            (b"A\xFFB", "A?B", Some(1)),
            (b"A\xE2\x82B", "A??B", Some(1)),
            (b"\xF0\x9F\x98", "???", Some(0)),
            (b"\xC0\xAF", "??", Some(0)),
            ("é€".as_bytes(), "é€", None),
            (b"", "", None),
        ];
        for (bytes, text, first) in cases {
            assert_eq!(utf8_replacing_invalid(bytes), (text.to_string(), first));
        }
    }
}
