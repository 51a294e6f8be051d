//! `caching_sha2_password` as MySQL 8 runs it, seen from a raw client (each
//! packet of the exchange) and from `mysql_async` (a real MySQL 8 client
//! library, over plaintext and over TLS): fast authentication for a
//! password proven since start-up, else full authentication with the
//! password in clear over TLS or RSA-OAEP encrypted over plaintext.
//! The raw client encrypts with OpenSSL, as libmysqlclient does.

mod common;

use common::{read_packet, self_signed, write_packet};
use mysql_async::prelude::*;
use mysql_async::Conn;
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;

/// A client in its connection phase, packet by packet.
struct RawClient {
    stream: TcpStream,
    scramble: Vec<u8>,
    /// The next packet's sequence id.
    seq: u8,
}

impl RawClient {
    async fn connect(port: u16) -> RawClient {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let (seq, greeting) = read_packet(&mut stream).await;
        RawClient {
            stream,
            scramble: greeting_scramble(&greeting),
            seq: seq.wrapping_add(1),
        }
    }

    async fn send(&mut self, payload: &[u8]) {
        write_packet(&mut self.stream, self.seq, payload).await;
        self.seq = self.seq.wrapping_add(1);
    }

    async fn recv(&mut self) -> Vec<u8> {
        let (seq, payload) = read_packet(&mut self.stream).await;
        assert_eq!(seq, self.seq, "sequence id");
        self.seq = seq.wrapping_add(1);
        payload
    }

    /// HandshakeResponse41 for `user` answering with `plugin`.
    async fn hello(&mut self, user: &str, plugin: &str, auth: &[u8]) {
        // CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH.
        let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000;
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(auth.len() as u8);
        p.extend_from_slice(auth);
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
        self.send(&p).await;
    }

    /// `password ++ NUL` XOR the scramble, RSA-OAEP encrypted under the
    /// PEM public key (OpenSSL, what libmysqlclient uses).
    fn encrypt(&self, pem: &[u8], password: &str) -> Vec<u8> {
        let rsa = openssl::rsa::Rsa::public_key_from_pem(pem).expect("PEM public key");
        let mut plain = password.as_bytes().to_vec();
        plain.push(0);
        for (i, b) in plain.iter_mut().enumerate() {
            *b ^= self.scramble[i % self.scramble.len()];
        }
        let mut out = vec![0; rsa.size() as usize];
        let n = rsa
            .public_encrypt(&plain, &mut out, openssl::rsa::Padding::PKCS1_OAEP)
            .expect("encrypt");
        out.truncate(n);
        out
    }
}

/// The 20-byte scramble of a HandshakeV10 greeting.
fn greeting_scramble(g: &[u8]) -> Vec<u8> {
    let version_end = 1 + g[1..].iter().position(|&b| b == 0).expect("version");
    let part1 = version_end + 1 + 4;
    let mut s = g[part1..part1 + 8].to_vec();
    // filler, capabilities (2), collation, status (2), capabilities (2),
    // auth data length, 10 reserved bytes.
    let part2 = part1 + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    s.extend_from_slice(&g[part2..part2 + 12]);
    s
}

/// `caching_sha2_password`'s scramble: `SHA256(pw) XOR
/// SHA256(SHA256(SHA256(pw)) ++ nonce)`.
fn sha2_scramble(password: &str, nonce: &[u8]) -> Vec<u8> {
    let s1 = Sha256::digest(password.as_bytes());
    let s2 = Sha256::digest(s1);
    let mix = Sha256::new()
        .chain_update(s2)
        .chain_update(nonce)
        .finalize();
    s1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

const FAST_AUTH_SUCCESS: [u8; 2] = [0x01, 0x03];
const PERFORM_FULL_AUTHENTICATION: [u8; 2] = [0x01, 0x04];

/// A plaintext `caching_sha2_password` login of `user` with `password`
/// through full authentication if the server asks for it, as a MySQL 8
/// client runs it: the first packet after the response, and the final
/// OK or error.
async fn login(port: u16, user: &str, password: &str) -> (Vec<u8>, Vec<u8>) {
    let mut c = RawClient::connect(port).await;
    let auth = sha2_scramble(password, &c.scramble);
    c.hello(user, "caching_sha2_password", &auth).await;
    let first = c.recv().await;
    if first != PERFORM_FULL_AUTHENTICATION {
        let last = if first == FAST_AUTH_SUCCESS {
            c.recv().await
        } else {
            first.clone()
        };
        return (first, last);
    }
    c.send(&[0x02]).await;
    let key = c.recv().await;
    assert_eq!(key[0], 0x01, "AuthMoreData");
    assert!(
        key[1..].starts_with(b"-----BEGIN PUBLIC KEY-----"),
        "{key:?}"
    );
    let cipher = c.encrypt(&key[1..], password);
    c.send(&cipher).await;
    (first, c.recv().await)
}

fn is_ok(p: &[u8]) -> bool {
    p.first() == Some(&0x00)
}

fn error_code(p: &[u8]) -> u16 {
    assert_eq!(p.first(), Some(&0xFF), "error packet expected: {p:?}");
    u16::from_le_bytes([p[1], p[2]])
}

async fn admin(server: &common::Server) -> Conn {
    let mut admin = Conn::new(server.opts().pass(Some("rootpw")))
        .await
        .expect("root");
    admin
        .query_drop("CREATE USER 's2'@'%' IDENTIFIED WITH caching_sha2_password BY 'pw2'")
        .await
        .unwrap();
    admin
}

/// The first login of a `caching_sha2_password` account is a full one
/// (RSA over plaintext); the cache then answers by fast authentication
/// until the password changes. A wrong password, whether fast or full,
/// is refused with 1045.
#[tokio::test]
async fn full_authentication_over_plaintext_then_fast() {
    let server = common::start_configured(None, 16 << 20, "rootpw").await;
    let mut admin = admin(&server).await;

    let (first, last) = login(server.port, "s2", "wrong").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION);
    assert_eq!(error_code(&last), 1045);

    let (first, last) = login(server.port, "s2", "pw2").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION, "nothing cached yet");
    assert!(is_ok(&last), "{last:?}");

    let (first, last) = login(server.port, "s2", "pw2").await;
    assert_eq!(first, FAST_AUTH_SUCCESS, "cached by the full login");
    assert!(is_ok(&last), "{last:?}");

    // A wrong password against a cached entry: full authentication, refused.
    let (first, last) = login(server.port, "s2", "pw3").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION);
    assert_eq!(error_code(&last), 1045);

    // A new password misses the cache; the old one no longer logs in.
    admin
        .query_drop("ALTER USER 's2'@'%' IDENTIFIED BY 'pw3'")
        .await
        .unwrap();
    let (first, last) = login(server.port, "s2", "pw2").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION);
    assert_eq!(error_code(&last), 1045);
    let (first, last) = login(server.port, "s2", "pw3").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION);
    assert!(is_ok(&last), "{last:?}");
    // ALTER USER ... IDENTIFIED BY keeps the account's plugin.
    let (first, _) = login(server.port, "s2", "pw3").await;
    assert_eq!(first, FAST_AUTH_SUCCESS);
}

/// Over plaintext the password never crosses in clear: a client that
/// sends it so anyway, or a ciphertext that does not decrypt, is refused.
#[tokio::test]
async fn plaintext_passwords_are_refused() {
    let server = common::start_configured(None, 16 << 20, "rootpw").await;
    let _admin = admin(&server).await;
    for attempt in [&b"pw2\0"[..], &[7u8; 256][..]] {
        let mut c = RawClient::connect(server.port).await;
        let auth = sha2_scramble("pw2", &c.scramble);
        c.hello("s2", "caching_sha2_password", &auth).await;
        assert_eq!(c.recv().await, PERFORM_FULL_AUTHENTICATION);
        c.send(attempt).await;
        assert_eq!(error_code(&c.recv().await), 1045);
    }
    // A client that already holds the public key sends the ciphertext at once.
    let mut c = RawClient::connect(server.port).await;
    let auth = sha2_scramble("pw2", &c.scramble);
    c.hello("s2", "caching_sha2_password", &auth).await;
    assert_eq!(c.recv().await, PERFORM_FULL_AUTHENTICATION);
    let cipher = c.encrypt(common::rsa_keys().public_pem().as_bytes(), "pw2");
    c.send(&cipher).await;
    assert!(is_ok(&c.recv().await));
}

/// A client that starts with `mysql_native_password` (what the greeting
/// names) is switched to `caching_sha2_password` for such an account;
/// native accounts and the superuser keep their behaviour: fast
/// authentication when the SHA-256 hash proves the response, else a
/// switch to the native plugin.
#[tokio::test]
async fn plugins_are_switched_by_account() {
    let server = common::start_configured(None, 16 << 20, "rootpw").await;
    let mut admin = admin(&server).await;
    admin
        .query_drop(
            "CREATE USER 'nat'@'%' IDENTIFIED BY PASSWORD '*7B9EBEED26AA52ED10C0F549FA863F13C39E0209'",
        )
        .await
        .unwrap();
    admin
        .query_drop("CREATE USER 'empty'@'%' IDENTIFIED WITH caching_sha2_password")
        .await
        .unwrap();

    let mut c = RawClient::connect(server.port).await;
    c.hello("s2", "mysql_native_password", &[1; 20]).await;
    let switch = c.recv().await;
    let mut expected = b"\xFEcaching_sha2_password\0".to_vec();
    expected.extend_from_slice(&c.scramble);
    expected.push(0);
    assert_eq!(switch, expected);
    let auth = sha2_scramble("pw2", &c.scramble);
    c.send(&auth).await;
    assert_eq!(c.recv().await, PERFORM_FULL_AUTHENTICATION);

    // The superuser: fast authentication from its configured password.
    let (first, last) = login(server.port, "root", "rootpw").await;
    assert_eq!(first, FAST_AUTH_SUCCESS);
    assert!(is_ok(&last));
    for (user, pw) in [("root", "wrong"), ("nat", "p")] {
        let (first, _) = login(server.port, user, pw).await;
        assert!(
            first.starts_with(b"\xFEmysql_native_password\0"),
            "{user}: AuthSwitchRequest expected, got {first:?}"
        );
    }

    // No password: an empty response (libmysqlclient's single NUL too).
    for empty in [&b""[..], &b"\0"[..]] {
        let mut c = RawClient::connect(server.port).await;
        c.hello("empty", "caching_sha2_password", empty).await;
        assert!(is_ok(&c.recv().await));
    }
    let mut c = RawClient::connect(server.port).await;
    c.hello("s2", "caching_sha2_password", b"").await;
    assert_eq!(error_code(&c.recv().await), 1045);
}

/// mysql_async, a MySQL 8 client library: full authentication over
/// plaintext (it asks for the public key and encrypts), then fast, then
/// COM_CHANGE_USER to the account; over TLS the password goes in clear.
#[tokio::test]
async fn mysql_async_logs_in_over_plaintext_and_tls() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let config = ladle_shim::tls::server_config(&cert, &key).expect("tls config");
    let server = common::start_configured(Some(config), 16 << 20, "rootpw").await;
    let mut admin = admin(&server).await;
    admin
        .query_drop("CREATE USER 'viatls'@'%' IDENTIFIED WITH caching_sha2_password BY 'pw4'")
        .await
        .unwrap();
    let as_s2 = || server.opts().user(Some("s2")).pass(Some("pw2"));
    for round in ["full", "fast"] {
        let mut c = Conn::new(as_s2())
            .await
            .unwrap_or_else(|e| panic!("{round}: {e}"));
        let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
        assert_eq!(who.as_deref(), Some("s2@%"));
        c.disconnect().await.unwrap();
    }
    let wrong = Conn::new(as_s2().pass(Some("nope"))).await;
    assert!(
        matches!(wrong, Err(mysql_async::Error::Server(ref e)) if e.code == 1045),
        "{wrong:?}"
    );

    let ssl = mysql_async::SslOpts::default().with_root_certs(vec![cert.clone().into()]);
    let mut c = Conn::new(
        server
            .opts()
            .user(Some("viatls"))
            .pass(Some("pw4"))
            .ssl_opts(Some(ssl)),
    )
    .await
    .expect("full authentication over TLS");
    let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
    assert_eq!(who.as_deref(), Some("viatls@%"));
    c.disconnect().await.unwrap();

    let mut c = Conn::new(server.opts().pass(Some("rootpw")))
        .await
        .expect("root");
    c.change_user(
        mysql_async::ChangeUserOpts::default()
            .with_user(Some("s2".into()))
            .with_pass(Some("pw2".into())),
    )
    .await
    .expect("COM_CHANGE_USER to a caching_sha2_password account");
    let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
    assert_eq!(who.as_deref(), Some("s2@%"));
    c.disconnect().await.unwrap();
}

/// MySQL's stored `caching_sha2_password` form of `dump-pw`: `$A$005$`, a
/// 20-byte salt, and the SHA-256 crypt digest (Drepper's algorithm, 5,000
/// rounds, the whole 20-byte salt as MySQL's `my_crypt_genhash` uses it).
/// Computed outside Ladle by an independent implementation of that
/// algorithm, checked against Drepper's published `$5$` vectors.
const DUMPED_HASH: &str = "$A$005$Ladle+MySQL/salt:20!Un0MIQKiw3ltlfkK8OUS/9aMtLog0QMHc0FLdboNmcB";

async fn show_create_user(admin: &mut Conn, account: &str) -> String {
    let row: Option<String> = admin
        .query_first(format!("SHOW CREATE USER {account}"))
        .await
        .unwrap();
    row.expect("one row")
}

/// An account restored from MySQL's stored form (what `SHOW CREATE USER`
/// and dumps print) logs in with its password, full authentication first,
/// then fast; `SHOW CREATE USER` prints the form back, and an account made
/// with a password in clear prints one that restores it.
#[tokio::test]
async fn accounts_restore_from_mysqls_stored_form() {
    let server = common::start_configured(None, 16 << 20, "rootpw").await;
    let mut admin = admin(&server).await;
    admin
        .query_drop(format!(
            "CREATE USER 'dumped'@'%' IDENTIFIED WITH 'caching_sha2_password' AS '{DUMPED_HASH}'"
        ))
        .await
        .unwrap();
    let (first, last) = login(server.port, "dumped", "dump-px").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION);
    assert_eq!(error_code(&last), 1045);
    let (first, last) = login(server.port, "dumped", "dump-pw").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION, "nothing cached yet");
    assert!(is_ok(&last), "{last:?}");
    let (first, last) = login(server.port, "dumped", "dump-pw").await;
    assert_eq!(first, FAST_AUTH_SUCCESS, "cached by the full login");
    assert!(is_ok(&last), "{last:?}");
    assert_eq!(
        show_create_user(&mut admin, "'dumped'@'%'").await,
        format!(
            "CREATE USER `dumped`@`%` IDENTIFIED WITH 'caching_sha2_password' AS '{DUMPED_HASH}'"
        )
    );

    // What MySQL 8's SHOW CREATE USER prints whole (the account options at
    // their defaults) restores too; other options are refused, not ignored.
    admin
        .query_drop(format!(
            "CREATE USER `mysql8`@`%` IDENTIFIED WITH 'caching_sha2_password' AS '{DUMPED_HASH}' \
             REQUIRE NONE PASSWORD EXPIRE DEFAULT ACCOUNT UNLOCK PASSWORD HISTORY DEFAULT \
             PASSWORD REUSE INTERVAL DEFAULT PASSWORD REQUIRE CURRENT DEFAULT"
        ))
        .await
        .unwrap();
    let (_, last) = login(server.port, "mysql8", "dump-pw").await;
    assert!(is_ok(&last), "{last:?}");
    for option in ["ACCOUNT LOCK", "PASSWORD EXPIRE INTERVAL 90 DAY"] {
        let refused = admin
            .query_drop(format!("CREATE USER 'opt'@'%' {option}"))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, mysql_async::Error::Server(_)),
            "{refused:?}"
        );
        assert!(admin.query_drop("SHOW CREATE USER opt").await.is_err());
    }

    // The same hash in hex (how MySQL prints a salt with unprintable
    // bytes) is read as the string.
    let hex: String = DUMPED_HASH.bytes().map(|b| format!("{b:02X}")).collect();
    admin
        .query_drop(format!(
            "CREATE USER 'hexed'@'%' IDENTIFIED WITH caching_sha2_password AS 0x{hex}"
        ))
        .await
        .unwrap();
    let (_, last) = login(server.port, "hexed", "dump-pw").await;
    assert!(is_ok(&last), "{last:?}");

    // BY 'pw2' prints a `$A$` form of its own; dropping the account and
    // running what was printed restores a login with the same password.
    let shown = show_create_user(&mut admin, "s2").await;
    assert!(
        shown.starts_with(
            "CREATE USER `s2`@`%` IDENTIFIED WITH 'caching_sha2_password' AS '$A$005$"
        ),
        "{shown}"
    );
    admin.query_drop("DROP USER s2").await.unwrap();
    admin.query_drop(&shown).await.unwrap();
    assert_eq!(show_create_user(&mut admin, "s2").await, shown);
    let (first, last) = login(server.port, "s2", "pw2").await;
    assert_eq!(first, PERFORM_FULL_AUTHENTICATION);
    assert!(is_ok(&last), "{last:?}");

    // A hash MySQL could not have stored is refused (MySQL's 1827).
    let bad = admin
        .query_drop("CREATE USER 'bad'@'%' IDENTIFIED WITH caching_sha2_password AS '$A$005$short'")
        .await
        .unwrap_err();
    assert!(
        matches!(&bad, mysql_async::Error::Server(e) if e.code == 1827),
        "{bad:?}"
    );
    // A native account's stored form, as MariaDB prints it.
    admin
        .query_drop(
            "CREATE USER 'nat'@'localhost' IDENTIFIED WITH mysql_native_password \
             AS '*D821809F681A40A6E379B50D0463EFAE20BDD122' REQUIRE SSL",
        )
        .await
        .unwrap();
    assert_eq!(
        show_create_user(&mut admin, "nat@localhost").await,
        "CREATE USER `nat`@`localhost` IDENTIFIED BY PASSWORD \
         '*D821809F681A40A6E379B50D0463EFAE20BDD122' REQUIRE SSL"
    );
    let missing = admin
        .query_drop("SHOW CREATE USER nobody")
        .await
        .unwrap_err();
    assert!(
        matches!(&missing, mysql_async::Error::Server(e) if e.code == 1133),
        "{missing:?}"
    );
}
