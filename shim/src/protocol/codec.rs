//! The protocol's basic encodings: little-endian fixed-width integers,
//! length-encoded integers and strings, NUL-terminated strings. Reading is
//! total: every read past the end, or a malformed length, is an error
//! ([`Malformed`]), never a panic.

/// A client payload ended early or held an impossible length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

pub type Decoded<T> = Result<T, Malformed>;

/// Reads a payload front to back.
#[derive(Clone, Copy, Debug)]
pub struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        if n > self.rest.len() {
            return Err(Malformed);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    pub fn u8(&mut self) -> Decoded<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Decoded<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u24(&mut self) -> Decoded<u32> {
        let b = self.take(3)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], 0]))
    }

    pub fn u32(&mut self) -> Decoded<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Decoded<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-encoded integer (`0xFB`, NULL in a text row, is malformed
    /// here; `0xFF` is an error packet's marker, never a length).
    pub fn lenenc_int(&mut self) -> Decoded<u64> {
        match self.u8()? {
            n @ 0..=0xFA => Ok(u64::from(n)),
            0xFC => Ok(u64::from(self.u16()?)),
            0xFD => Ok(u64::from(self.u24()?)),
            0xFE => self.u64(),
            _ => Err(Malformed),
        }
    }

    /// A length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Decoded<&'a [u8]> {
        let n = self.lenenc_int()?;
        self.take(usize::try_from(n).map_err(|_| Malformed)?)
    }

    /// A NUL-terminated string (without its NUL).
    pub fn nul_bytes(&mut self) -> Decoded<&'a [u8]> {
        let at = self.rest.iter().position(|&b| b == 0).ok_or(Malformed)?;
        let s = self.take(at)?;
        self.take(1)?;
        Ok(s)
    }

    /// A NUL-terminated string, or everything left if there is no NUL
    /// (clients are lax about the last string of a packet).
    pub fn nul_or_rest(&mut self) -> &'a [u8] {
        match self.rest.iter().position(|&b| b == 0) {
            Some(at) => {
                let s = &self.rest[..at];
                self.rest = &self.rest[at + 1..];
                s
            }
            None => self.rest(),
        }
    }
}

/// Appends `n` as a length-encoded integer.
pub fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xFA => out.push(n as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Appends `s` as a length-encoded string.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, s: &[u8]) {
    put_lenenc_int(out, s.len() as u64);
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trips() {
        for n in [
            0,
            1,
            0xFA,
            0xFB,
            0xFC,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_lenenc_int(&mut out, n);
            let mut c = Cursor::new(&out);
            assert_eq!(c.lenenc_int(), Ok(n));
            assert!(c.is_empty());
        }
    }

    #[test]
    fn short_input_is_an_error() {
        assert_eq!(Cursor::new(&[0xFC, 1]).lenenc_int(), Err(Malformed));
        assert_eq!(Cursor::new(&[0xFB]).lenenc_int(), Err(Malformed));
        assert_eq!(Cursor::new(&[3, b'a']).lenenc_bytes(), Err(Malformed));
        assert_eq!(
            Cursor::new(&[0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).lenenc_bytes(),
            Err(Malformed)
        );
        assert_eq!(Cursor::new(b"abc").nul_bytes(), Err(Malformed));
        assert_eq!(Cursor::new(&[1, 2, 3]).u32(), Err(Malformed));
    }
}
