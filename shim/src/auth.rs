//! `mysql_native_password`: the client proves it knows the password by
//! sending `SHA1(password) XOR SHA1(scramble ++ SHA1(SHA1(password)))`.

use rand::Rng;
use sha1::{Digest, Sha1};

/// A random 20-byte scramble, avoiding NUL and `$` (some clients treat them
/// as terminators).
pub fn random_scramble() -> [u8; 20] {
    let mut rng = rand::thread_rng();
    let mut s = [0u8; 20];
    for b in &mut s {
        *b = rng.gen_range(1u8..=127);
        if *b == b'$' {
            *b += 1;
        }
    }
    s
}

/// What a client that knows `password` answers to `scramble`.
pub fn scramble_response(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password);
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(scramble);
    h.update(stage2);
    let mix = h.finalize();
    stage1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

/// Checks a `mysql_native_password` response in constant time.
pub fn verify(password: &[u8], scramble: &[u8], response: &[u8]) -> bool {
    let expected = scramble_response(password, scramble);
    if expected.len() != response.len() {
        return false;
    }
    expected
        .iter()
        .zip(response)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_password_round_trip() {
        let s = random_scramble();
        let r = scramble_response(b"secret", &s);
        assert!(verify(b"secret", &s, &r));
        assert!(!verify(b"other", &s, &r));
        assert!(verify(b"", &s, b""));
        assert!(!verify(b"", &s, &r));
        assert!(s.iter().all(|&b| b != 0 && b != b'$'));
    }
}
