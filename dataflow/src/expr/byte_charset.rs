//! `CONVERT(x USING latin1)` and `USING ascii`: text in a single-byte
//! character set, as MariaDB converts to it. Ladle keeps the value as
//! utf8mb4 text of the characters the set has (each other one `?`, warning
//! 1977 as MariaDB does); what counts bytes (LENGTH, HEX) reads it through
//! [`encode`], one byte a character.

use ladle_common::Value;

use super::warnings::warn;

/// MariaDB's 1977 "Cannot convert ... character ... to ...".
const WARN_CANNOT_CONVERT_CHARACTER: u16 = 1977;

/// A single-byte character set Ladle converts text to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteCharset {
    /// MariaDB's latin1: Windows-1252, its five unassigned bytes standing
    /// for the control characters of the same number.
    Latin1,
    Ascii,
}

/// Windows-1252's characters for the bytes 0x80..=0x9F (the unassigned
/// 0x81, 0x8D, 0x8F, 0x90 and 0x9D are the C1 controls U+0081...).
const CP1252_HIGH: [char; 32] = [
    '\u{20AC}', '\u{81}', '\u{201A}', '\u{192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{2C6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8D}', '\u{17D}', '\u{8F}',
    '\u{90}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{2DC}', '\u{2122}', '\u{161}', '\u{203A}', '\u{153}', '\u{9D}', '\u{17E}', '\u{178}',
];

impl ByteCharset {
    fn name(self) -> &'static str {
        match self {
            ByteCharset::Latin1 => "latin1",
            ByteCharset::Ascii => "ascii",
        }
    }

    /// The byte `c` is in this set, if it has it.
    fn byte_of(self, c: char) -> Option<u8> {
        let code = u32::from(c);
        match self {
            _ if code < 0x80 => u8::try_from(code).ok(),
            ByteCharset::Ascii => None,
            ByteCharset::Latin1 if (0xA0..=0xFF).contains(&code) => u8::try_from(code).ok(),
            ByteCharset::Latin1 => CP1252_HIGH
                .iter()
                .position(|&h| h == c)
                .and_then(|i| u8::try_from(0x80 + i).ok()),
        }
    }

    /// The character byte `b` stands for; `?` for none (ascii's high half).
    fn char_of(self, b: u8) -> char {
        match self {
            _ if b < 0x80 => char::from(b),
            ByteCharset::Ascii => '?',
            ByteCharset::Latin1 if b >= 0xA0 => char::from(b),
            ByteCharset::Latin1 => CP1252_HIGH[usize::from(b - 0x80)],
        }
    }
}

/// `v` converted to `charset`: a binary string's bytes read as characters
/// of it, text kept where the set has the character and `?` elsewhere.
pub(crate) fn recode(v: &Value, charset: ByteCharset) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::Bytes(b) => Value::text(b.iter().map(|&b| charset.char_of(b)).collect::<String>()),
        other => {
            let text = match other {
                Value::Text(t) => t.to_string(),
                _ => other.to_string(),
            };
            let kept: String = text
                .chars()
                .map(|c| match charset.byte_of(c) {
                    Some(_) => c,
                    None => {
                        let mut utf8 = [0; 4];
                        let hex: String = c
                            .encode_utf8(&mut utf8)
                            .bytes()
                            .map(|b| format!("{b:02X}"))
                            .collect();
                        let message = format!(
                            "Cannot convert 'utf8mb4' character 0x{hex} to '{}'",
                            charset.name()
                        );
                        warn(WARN_CANNOT_CONVERT_CHARACTER, message);
                        '?'
                    }
                })
                .collect();
            Value::text(kept)
        }
    }
}

/// The bytes of `charset` text `v` ([`recode`]'s result): one a
/// character.
pub(crate) fn encode(v: &Value, charset: ByteCharset) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::Bytes(_) => v.clone(),
        other => {
            let text = other.to_string();
            let bytes: Vec<u8> = text
                .chars()
                .map(|c| charset.byte_of(c).unwrap_or(b'?'))
                .collect();
            Value::bytes(bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_is_windows_1252_with_its_gaps_as_controls() {
        for b in 0..=255u8 {
            let c = ByteCharset::Latin1.char_of(b);
            assert_eq!(ByteCharset::Latin1.byte_of(c), Some(b), "{b:#x}");
        }
        assert_eq!(ByteCharset::Latin1.byte_of('€'), Some(0x80));
        assert_eq!(ByteCharset::Latin1.byte_of('日'), None);
        assert_eq!(ByteCharset::Ascii.byte_of('é'), None);
        assert_eq!(ByteCharset::Ascii.char_of(0xE9), '?');
    }

    #[test]
    fn recoded_text_counts_one_byte_a_character() {
        let v = recode(&Value::text("日€é"), ByteCharset::Latin1);
        assert_eq!(v, Value::text("?€é"));
        assert_eq!(
            encode(&v, ByteCharset::Latin1),
            Value::bytes([b'?', 0x80, 0xE9])
        );
        assert_eq!(
            recode(&Value::bytes([0xE9]), ByteCharset::Latin1),
            Value::text("é")
        );
    }
}
