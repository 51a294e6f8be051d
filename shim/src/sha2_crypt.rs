//! MySQL's stored form of a `caching_sha2_password` password, what
//! `mysql.user.authentication_string` holds and what `SHOW CREATE USER`
//! and mysqldump print after `AS`:
//!
//! `$A$` + the round count in thousands (three hex digits, `005`) + `$` +
//! a 20-byte salt + 43 characters of digest.
//!
//! The digest is Ulrich Drepper's SHA-256 crypt ("Unix crypt using SHA-256
//! and SHA-512", what glibc's `crypt()` runs for `$5$`) of the password
//! with that salt and round count, encoded in crypt's base-64 alphabet.
//! MySQL (`my_crypt_genhash`) runs it unchanged except that a salt may be
//! 20 bytes long where glibc cuts it at 16. MySQL's salts are random bytes
//! masked to 7 bits, `\0` and `$` excluded; the ones generated here are
//! letters and digits, which any implementation reads back.

use rand::Rng;
use sha2::{Digest, Sha256};

/// The `$A$` form's salt length.
pub const SALT_LEN: usize = 20;
/// The encoded digest's length.
const DIGEST_CHARS: usize = 43;
/// MySQL's default (`caching_sha2_password_digest_rounds`): `005`.
const DEFAULT_ROUNDS: u32 = 5_000;
/// MySQL's range for the round count.
const MIN_ROUNDS: u32 = 5_000;
const MAX_ROUNDS: u32 = 4_095_000;

const B64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A parsed `$A$` string.
#[derive(Debug, PartialEq, Eq)]
struct Stored<'a> {
    rounds: u32,
    salt: &'a [u8],
    digest: &'a [u8],
}

fn parse(stored: &str) -> Option<Stored<'_>> {
    let b = stored.as_bytes();
    let rest = b.strip_prefix(b"$A$")?;
    let (count, rest) = (rest.get(..3)?, rest.get(3..)?);
    let count = u32::from_str_radix(std::str::from_utf8(count).ok()?, 16).ok()?;
    let rounds = count.checked_mul(1_000)?;
    let rest = rest.strip_prefix(b"$")?;
    if !(MIN_ROUNDS..=MAX_ROUNDS).contains(&rounds) || rest.len() != SALT_LEN + DIGEST_CHARS {
        return None;
    }
    let (salt, digest) = rest.split_at(SALT_LEN);
    if salt.iter().any(|&c| c == b'$' || c == 0 || c > 0x7f)
        || !digest.iter().all(|c| B64.contains(c))
    {
        return None;
    }
    Some(Stored {
        rounds,
        salt,
        digest,
    })
}

/// Whether `stored` is a well-formed `$A$` string.
pub fn is_stored_form(stored: &str) -> bool {
    parse(stored).is_some()
}

/// The `$A$` string of `password` with a fresh random salt (empty for an
/// empty password, which MySQL stores as an empty string too).
pub fn generate(password: &[u8]) -> String {
    if password.is_empty() {
        return String::new();
    }
    const SALT_CHARS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::thread_rng();
    let salt: Vec<u8> = (0..SALT_LEN)
        .map(|_| SALT_CHARS[rng.gen_range(0..SALT_CHARS.len())])
        .collect();
    stored_form(password, &salt, DEFAULT_ROUNDS)
}

/// The `$A$` string of `password` with `salt` (of [`SALT_LEN`] bytes).
fn stored_form(password: &[u8], salt: &[u8], rounds: u32) -> String {
    let digest = encode(&sha256_crypt(password, salt, rounds));
    let salt = String::from_utf8_lossy(salt);
    format!("$A${:03X}${salt}{digest}", rounds / 1_000)
}

/// Whether `password` is the one `stored` (a `$A$` string) was made from.
/// An empty `stored` is an account without a password. Constant time in
/// the compared digest.
pub fn verify(stored: &str, password: &[u8]) -> bool {
    if stored.is_empty() {
        return password.is_empty();
    }
    let Some(s) = parse(stored) else {
        return false;
    };
    let digest = encode(&sha256_crypt(password, s.salt, s.rounds));
    digest
        .bytes()
        .zip(s.digest)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Drepper's SHA-256 crypt, steps 1-21 of the specification: the 32 bytes
/// before encoding. `salt` is used whole (MySQL's salts are 20 bytes).
fn sha256_crypt(key: &[u8], salt: &[u8], rounds: u32) -> [u8; 32] {
    // B: key, salt, key.
    let alternate = Sha256::new()
        .chain_update(key)
        .chain_update(salt)
        .chain_update(key)
        .finalize();
    // A: key, salt, B for every 32 bytes of key (and the rest), then B or
    // the key for each bit of the key's length.
    let mut a = Sha256::new().chain_update(key).chain_update(salt);
    let mut left = key.len();
    while left > 32 {
        a.update(alternate);
        left -= 32;
    }
    a.update(&alternate[..left]);
    let mut bits = key.len();
    while bits > 0 {
        if bits & 1 != 0 {
            a.update(alternate);
        } else {
            a.update(key);
        }
        bits >>= 1;
    }
    let a = a.finalize();
    // P: the key's length of SHA256(key repeated key.len() times).
    let mut dp = Sha256::new();
    for _ in 0..key.len() {
        dp.update(key);
    }
    let p = repeat_to(&dp.finalize(), key.len());
    // S: the salt's length of SHA256(salt repeated 16 + A[0] times).
    let mut ds = Sha256::new();
    for _ in 0..16 + usize::from(a[0]) {
        ds.update(salt);
    }
    let s = repeat_to(&ds.finalize(), salt.len());
    let mut c: [u8; 32] = a.into();
    for round in 0..rounds {
        let mut h = Sha256::new();
        if round & 1 != 0 {
            h.update(&p);
        } else {
            h.update(c);
        }
        if round % 3 != 0 {
            h.update(&s);
        }
        if round % 7 != 0 {
            h.update(&p);
        }
        if round & 1 != 0 {
            h.update(c);
        } else {
            h.update(&p);
        }
        c = h.finalize().into();
    }
    c
}

/// `digest` repeated to `len` bytes.
fn repeat_to(digest: &[u8], len: usize) -> Vec<u8> {
    digest.iter().copied().cycle().take(len).collect()
}

/// Step 22: crypt's base-64 of the digest, bytes taken in its order.
fn encode(c: &[u8; 32]) -> String {
    const GROUPS: [(usize, usize, usize); 10] = [
        (0, 10, 20),
        (21, 1, 11),
        (12, 22, 2),
        (3, 13, 23),
        (24, 4, 14),
        (15, 25, 5),
        (6, 16, 26),
        (27, 7, 17),
        (18, 28, 8),
        (9, 19, 29),
    ];
    let mut out = String::with_capacity(DIGEST_CHARS);
    let mut put = |b2: u8, b1: u8, b0: u8, n: usize| {
        let mut w = (u32::from(b2) << 16) | (u32::from(b1) << 8) | u32::from(b0);
        for _ in 0..n {
            out.push(char::from(B64[(w & 0x3f) as usize]));
            w >>= 6;
        }
    };
    for (i, j, k) in GROUPS {
        put(c[i], c[j], c[k], 4);
    }
    put(0, c[31], c[30], 3);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drepper's published vectors (the specification's test cases, also
    /// glibc's): `$5$[rounds=N$]salt$digest`.
    #[test]
    fn drepper_sha256_crypt_vectors() {
        let cases: [(&str, u32, &str, &str); 3] = [
            (
                "saltstring",
                5_000,
                "Hello world!",
                "5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5",
            ),
            (
                "saltstringsaltst",
                10_000,
                "Hello world!",
                "3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA",
            ),
            (
                "toolongsaltstrin",
                5_000,
                "This is just a test",
                "Un/5jzAHMgOGZ5.mWJpuVolil07guHPvOW8mGRcvxa5",
            ),
        ];
        for (salt, rounds, key, digest) in cases {
            let got = encode(&sha256_crypt(key.as_bytes(), salt.as_bytes(), rounds));
            assert_eq!(got, digest, "{salt} {rounds}");
        }
    }

    #[test]
    fn stored_form_round_trips_and_uses_the_whole_salt() {
        let stored = generate(b"secret");
        assert_eq!(stored.len(), 7 + SALT_LEN + DIGEST_CHARS);
        assert!(stored.starts_with("$A$005$"));
        assert!(is_stored_form(&stored));
        assert!(verify(&stored, b"secret"));
        assert!(!verify(&stored, b"secreT"));
        assert!(!verify(&stored, b""));
        // MySQL's 20-byte salt counts whole (glibc would stop at 16).
        let a = stored_form(b"pw", b"abcdefghijklmnopqrst", 5_000);
        let b = stored_form(b"pw", b"abcdefghijklmnopZZZZ", 5_000);
        assert_ne!(a[27..], b[27..]);
        // A different salt, the same password: a different string, both
        // verify.
        assert_ne!(generate(b"secret"), stored);
        assert!(verify("", b""));
        assert!(!verify("", b"x"));
    }

    #[test]
    fn malformed_stored_forms_are_refused() {
        let good = stored_form(b"pw", b"abcdefghijklmnopqrst", 5_000);
        assert!(is_stored_form(&good));
        assert!(!is_stored_form(&good[..good.len() - 1]));
        assert!(!is_stored_form(&good.replace("$A$005$", "$B$005$")));
        assert!(!is_stored_form(&good.replace("$A$005$", "$A$000$")));
        assert!(!is_stored_form(&good.replace("$A$005$", "$A$zzz$")));
        assert!(!is_stored_form(&good.replacen('a', "$", 1)));
        assert!(!is_stored_form("*D821809F681A40A6E379B50D0463EFAE20BDD122"));
        assert!(!verify("$A$005$short", b"pw"));
        // mysql.session's placeholder: well formed, matches no password.
        let placeholder = "$A$005$THISISACOMBINATIONOFINVALIDSALTANDPASSWORDTHATMUSTNEVERBRBEUSED";
        assert!(is_stored_form(placeholder));
        assert!(!verify(placeholder, b""));
        // MySQL's form with a 20-byte salt, computed by an independent
        // implementation of the algorithm (the e2e test's DUMPED_HASH).
        let dumped = "$A$005$Ladle+MySQL/salt:20!Un0MIQKiw3ltlfkK8OUS/9aMtLog0QMHc0FLdboNmcB";
        assert!(verify(dumped, b"dump-pw"));
        assert!(!verify(dumped, b"dump-px"));
        // Rounds other than 5,000 are read too (0x00A: 10,000).
        let ten = stored_form(b"pw", b"abcdefghijklmnopqrst", 10_000);
        assert!(ten.starts_with("$A$00A$"));
        assert!(verify(&ten, b"pw"));
    }
}
