//! The server's RSA key pair for `caching_sha2_password`'s full
//! authentication over plaintext: a client that must send its password and
//! has no TLS asks for the public key (PEM), encrypts `password ++ NUL`
//! XOR-ed with the connection's scramble under RSA-OAEP (SHA-1, as
//! OpenSSL's `RSA_PKCS1_OAEP_PADDING` that MySQL clients use), and the
//! server decrypts it here.
//!
//! Like MySQL's `caching_sha2_password_auto_generate_rsa_keys`, a 2048-bit
//! pair is generated at first start (`private_key.pem`, mode 0600, and
//! `public_key.pem` in the data directory) and read back at every start
//! after; `--rsa-private-key` names a key of one's own instead (PKCS#8 or
//! PKCS#1 PEM, as `openssl genrsa` writes; MySQL's own `private_key.pem`
//! reads as is).

use std::path::{Path, PathBuf};

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};

/// MySQL's file names in the data directory.
pub const PRIVATE_KEY_FILE: &str = "private_key.pem";
pub const PUBLIC_KEY_FILE: &str = "public_key.pem";
/// What MySQL generates (`caching_sha2_password_auto_generate_rsa_keys`).
const GENERATED_BITS: usize = 2048;

/// The key pair and the public key's PEM, as sent to clients.
pub struct RsaKeyPair {
    private: RsaPrivateKey,
    public_pem: String,
    private_path: PathBuf,
    public_path: Option<PathBuf>,
}

impl std::fmt::Debug for RsaKeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private key.
        f.debug_struct("RsaKeyPair")
            .field("private_path", &self.private_path)
            .finish_non_exhaustive()
    }
}

impl RsaKeyPair {
    /// Reads `--rsa-private-key` (`Some`), else `private_key.pem` in
    /// `data_dir`, generating the pair there when it is missing. The error
    /// names the file and what is wrong, for the start-up message.
    pub fn load_or_generate(data_dir: &Path, configured: Option<&Path>) -> Result<Self, String> {
        if let Some(path) = configured {
            return Self::read(path, None);
        }
        let private_path = data_dir.join(PRIVATE_KEY_FILE);
        let public_path = data_dir.join(PUBLIC_KEY_FILE);
        if private_path.exists() {
            return Self::read(&private_path, Some(public_path));
        }
        let pair = Self::generate(private_path, Some(public_path))?;
        pair.write_files()?;
        Ok(pair)
    }

    /// A fresh pair kept in memory only (tests; a front end without a
    /// data directory).
    pub fn ephemeral() -> Result<Self, String> {
        Self::generate(PathBuf::new(), None)
    }

    fn generate(private_path: PathBuf, public_path: Option<PathBuf>) -> Result<Self, String> {
        let private = RsaPrivateKey::new(&mut rand::rngs::OsRng, GENERATED_BITS)
            .map_err(|e| format!("generating an RSA key pair: {e}"))?;
        Self::with_key(private, private_path, public_path)
    }

    fn read(path: &Path, public_path: Option<PathBuf>) -> Result<Self, String> {
        let pem = std::fs::read_to_string(path)
            .map_err(|e| format!("reading RSA private key {}: {e}", path.display()))?;
        let private = RsaPrivateKey::from_pkcs8_pem(&pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(&pem))
            .map_err(|e| {
                format!(
                    "RSA private key {}: not a PKCS#8 or PKCS#1 PEM RSA key ({e})",
                    path.display()
                )
            })?;
        Self::with_key(private, path.to_path_buf(), public_path)
    }

    fn with_key(
        private: RsaPrivateKey,
        private_path: PathBuf,
        public_path: Option<PathBuf>,
    ) -> Result<Self, String> {
        let public_pem = RsaPublicKey::from(&private)
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| format!("encoding the RSA public key: {e}"))?;
        Ok(RsaKeyPair {
            private,
            public_pem,
            private_path,
            public_path,
        })
    }

    /// Writes the generated pair: the private key readable by the owner
    /// only, created exclusively (two servers never share a data directory,
    /// and a key is never overwritten).
    fn write_files(&self) -> Result<(), String> {
        use std::io::Write;
        let pem = self
            .private
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| format!("encoding the RSA private key: {e}"))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let path = &self.private_path;
        let mut file = options
            .open(path)
            .map_err(|e| format!("creating RSA private key {}: {e}", path.display()))?;
        file.write_all(pem.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("writing RSA private key {}: {e}", path.display()))?;
        if let Some(public) = &self.public_path {
            std::fs::write(public, &self.public_pem)
                .map_err(|e| format!("writing RSA public key {}: {e}", public.display()))?;
        }
        Ok(())
    }

    /// The public key as PEM (SubjectPublicKeyInfo, `BEGIN PUBLIC KEY`),
    /// what a client that asks for it gets.
    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }

    /// `@@caching_sha2_password_private_key_path` (empty for an ephemeral
    /// pair).
    pub fn private_key_path(&self) -> &Path {
        &self.private_path
    }

    /// `@@caching_sha2_password_public_key_path`: the file written beside a
    /// generated private key (none for `--rsa-private-key`, whose public
    /// key is derived from it).
    pub fn public_key_path(&self) -> Option<&Path> {
        self.public_path.as_deref()
    }

    /// The length of a ciphertext under this key, in bytes.
    pub fn cipher_len(&self) -> usize {
        self.private.size()
    }

    /// The password a client encrypted for `scramble`: RSA-OAEP (SHA-1)
    /// decryption, then XOR with the scramble (repeated), up to the NUL the
    /// client appended. `None` when the ciphertext does not decrypt (a
    /// wrong key, a damaged or forged packet) or has no NUL.
    pub fn decrypt_password(&self, cipher: &[u8], scramble: &[u8]) -> Option<Vec<u8>> {
        if cipher.len() != self.cipher_len() || scramble.is_empty() {
            return None;
        }
        let mut plain = self
            .private
            .decrypt(Oaep::new::<sha1::Sha1>(), cipher)
            .ok()?;
        for (i, b) in plain.iter_mut().enumerate() {
            *b ^= scramble[i % scramble.len()];
        }
        let end = plain.iter().position(|&b| b == 0)?;
        plain.truncate(end);
        Some(plain)
    }
}

/// What a client does with the public key: `password ++ NUL` XOR the
/// scramble, RSA-OAEP (SHA-1) encrypted (tests; the shim never encrypts).
#[cfg(test)]
pub(crate) fn client_encrypt(public_pem: &str, password: &[u8], scramble: &[u8]) -> Vec<u8> {
    use rsa::pkcs8::DecodePublicKey;
    let key = RsaPublicKey::from_public_key_pem(public_pem).expect("public key PEM");
    let mut plain = password.to_vec();
    plain.push(0);
    for (i, b) in plain.iter_mut().enumerate() {
        *b ^= scramble[i % scramble.len()];
    }
    key.encrypt(&mut rand::rngs::OsRng, Oaep::new::<sha1::Sha1>(), &plain)
        .expect("encrypt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = RsaKeyPair::load_or_generate(dir.path(), None).unwrap();
        assert!(first.public_pem().starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(first.cipher_len(), 256);
        let private = dir.path().join(PRIVATE_KEY_FILE);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&private).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let public = std::fs::read_to_string(dir.path().join(PUBLIC_KEY_FILE)).unwrap();
        assert_eq!(public, first.public_pem());
        // The second start reads the same pair; --rsa-private-key too.
        let again = RsaKeyPair::load_or_generate(dir.path(), None).unwrap();
        assert_eq!(again.public_pem(), first.public_pem());
        let named = RsaKeyPair::load_or_generate(Path::new("/nowhere"), Some(&private)).unwrap();
        assert_eq!(named.public_pem(), first.public_pem());
        assert_eq!(named.public_key_path(), None);
    }

    #[test]
    fn bad_key_files_are_reported_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        std::fs::write(&path, "not a key").unwrap();
        let err = RsaKeyPair::load_or_generate(dir.path(), Some(&path)).unwrap_err();
        assert!(err.contains("k.pem"), "{err}");
        let err =
            RsaKeyPair::load_or_generate(dir.path(), Some(&dir.path().join("none"))).unwrap_err();
        assert!(err.contains("none"), "{err}");
    }

    #[test]
    fn a_password_round_trips_through_oaep() {
        let pair = RsaKeyPair::ephemeral().unwrap();
        let scramble = crate::auth::random_scramble();
        let cipher = client_encrypt(pair.public_pem(), b"s3cret", &scramble);
        assert_eq!(
            pair.decrypt_password(&cipher, &scramble).as_deref(),
            Some(&b"s3cret"[..])
        );
        // Another scramble gives another (wrong) password, never a panic.
        let other = crate::auth::random_scramble();
        assert_ne!(
            pair.decrypt_password(&cipher, &other).as_deref(),
            Some(&b"s3cret"[..])
        );
        let mut damaged = cipher.clone();
        damaged[10] ^= 1;
        assert_eq!(pair.decrypt_password(&damaged, &scramble), None);
        assert_eq!(pair.decrypt_password(&cipher[1..], &scramble), None);
        assert_eq!(pair.decrypt_password(&[], &scramble), None);
    }
}
