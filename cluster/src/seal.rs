//! Encryption and integrity of a replication connection after its
//! handshake (`auth`).
//!
//! Both sides leave the cluster-secret handshake knowing the secret and
//! the two nonces, and nobody else does; each derives two keys from them
//! (one per direction: `HMAC(secret, label | listener nonce | connector
//! nonce)`, a fresh pair per connection) and every later frame is sealed
//! with ChaCha20-Poly1305 under its direction's key and a counter nonce
//! (the frame's number on the connection, never sent). So frames cross
//! the wire encrypted, and a frame altered, injected, dropped, replayed or
//! reordered by a man in the middle fails to open: the connection ends
//! (each side then reconnects and authenticates again).

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};

/// Bytes the seal adds to a frame.
pub(crate) const TAG_LEN: usize = 16;

/// One direction's key and the number of the next frame.
struct Direction {
    key: LessSafeKey,
    counter: u64,
}

impl Direction {
    fn new(key: &[u8]) -> Result<Direction, String> {
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, key)
            .map_err(|_| "a replication key of the wrong length".to_string())?;
        Ok(Direction {
            key: LessSafeKey::new(unbound),
            counter: 0,
        })
    }

    /// The next frame's nonce (a connection never sends 2^64 frames).
    fn next_nonce(&mut self) -> Nonce {
        let mut nonce = [0u8; NONCE_LEN];
        nonce[NONCE_LEN - 8..].copy_from_slice(&self.counter.to_be_bytes());
        self.counter += 1;
        Nonce::assume_unique_for_key(nonce)
    }
}

/// Seals the frames one side sends.
pub(crate) struct Sealer(Direction);

/// Opens the frames one side receives.
pub(crate) struct Opener(Direction);

/// A connection's two directions, as one side sees them.
pub(crate) struct SessionKeys {
    pub(crate) sealer: Sealer,
    pub(crate) opener: Opener,
}

impl SessionKeys {
    /// From the two derived keys: `send` for this side's frames, `recv` for
    /// the peer's.
    pub(crate) fn new(send: &[u8], recv: &[u8]) -> Result<SessionKeys, String> {
        Ok(SessionKeys {
            sealer: Sealer(Direction::new(send)?),
            opener: Opener(Direction::new(recv)?),
        })
    }
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(..)")
    }
}

impl Sealer {
    /// `plain` encrypted, with its tag appended.
    pub(crate) fn seal(&mut self, mut plain: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let nonce = self.0.next_nonce();
        self.0
            .key
            .seal_in_place_append_tag(nonce, Aad::empty(), &mut plain)
            .map_err(|_| invalid("sealing a replication frame failed"))?;
        Ok(plain)
    }
}

impl Opener {
    /// The plain text of the peer's next frame; `Err` when it was not
    /// sealed by the peer as its next frame (altered, forged, replayed,
    /// reordered or dropped on the way).
    pub(crate) fn open(&mut self, mut sealed: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let nonce = self.0.next_nonce();
        let plain_len = self
            .0
            .key
            .open_in_place(nonce, Aad::empty(), &mut sealed)
            .map_err(|_| {
                invalid(
                    "a replication frame failed its integrity check (altered on the way, \
                     or not from the authenticated peer)",
                )
            })?
            .len();
        sealed.truncate(plain_len);
        Ok(sealed)
    }
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (SessionKeys, SessionKeys) {
        let a = [1u8; 32];
        let b = [2u8; 32];
        (
            SessionKeys::new(&a, &b).unwrap(),
            SessionKeys::new(&b, &a).unwrap(),
        )
    }

    #[test]
    fn frames_open_in_order_and_not_otherwise() {
        let (mut left, mut right) = pair();
        let one = left.sealer.seal(b"entry one".to_vec()).unwrap();
        let two = left.sealer.seal(b"entry one".to_vec()).unwrap();
        // The same text sealed twice differs (counter nonce), and is not
        // readable on the wire.
        assert_ne!(one, two);
        assert!(!one.windows(5).any(|w| w == b"entry"));
        assert_eq!(one.len(), "entry one".len() + TAG_LEN);
        // Reordered: the second frame first fails.
        let mut fresh = pair().1;
        assert!(fresh.opener.open(two.clone()).is_err());
        assert_eq!(right.opener.open(one.clone()).unwrap(), b"entry one");
        // Replayed: the first frame again fails.
        assert!(right.opener.open(one).is_err());
    }

    #[test]
    fn an_altered_frame_fails_and_directions_do_not_mix() {
        let (mut left, mut right) = pair();
        let mut frame = left.sealer.seal(b"Ack 42".to_vec()).unwrap();
        frame[2] ^= 1;
        assert!(right.opener.open(frame).is_err());
        // A frame reflected back to its sender does not open either.
        let (mut left, _) = pair();
        let frame = left.sealer.seal(b"Ack 42".to_vec()).unwrap();
        assert!(left.opener.open(frame).is_err());
    }
}
