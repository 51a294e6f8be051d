//! Protocol behaviour seen by a real client (`mysql_async`) against an
//! in-process front end over in-memory storage: the warning count in OK
//! packets, multi-statement COM_QUERY, unknown statement ids, TLS.

use std::sync::Arc;
use std::time::Duration;

use ladle_dataflow::{Dataflow, DataflowConfig};
use ladle_shim::{Frontend, FrontendConfig, Metrics, ServerFacts};
use ladle_storage::{Durability, Storage, StorageConfig};
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A front end serving on a loopback port until dropped.
struct Server {
    port: u16,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

async fn start() -> Server {
    start_with(None).await
}

async fn start_with(tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = StorageConfig {
        data_dir: dir.path().to_path_buf(),
        durability: Durability::Memory,
        block_cache_bytes: 8 << 20,
        wal_dir: None,
        async_flush_interval: Duration::from_millis(5),
    };
    let storage = Storage::open(cfg).expect("storage");
    let dataflow = Dataflow::new(
        storage.clone(),
        DataflowConfig {
            memory_limit: usize::MAX,
            ..Default::default()
        },
    )
    .expect("dataflow");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let frontend = Frontend::new(
        storage,
        dataflow,
        ServerFacts {
            max_connections: 100,
            port,
            datadir: dir.path().display().to_string(),
            tls: tls.is_some(),
            read_consistency: Default::default(),
        },
        Arc::new(Metrics::new()),
        Arc::new(ladle_shim::admin::NoAdmin),
        FrontendConfig {
            user: "root".into(),
            password: String::new(),
            max_connections: 100,
            max_allowed_packet: 16 << 20,
            tls,
        },
    );
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(frontend.serve(listener, stop_rx));
    Server {
        port,
        _stop: stop,
        _dir: dir,
    }
}

impl Server {
    fn opts(&self) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .prefer_socket(false)
    }

    async fn connect(&self) -> Conn {
        let mut c = Conn::new(self.opts()).await.expect("connect");
        c.query_drop("CREATE DATABASE IF NOT EXISTS t")
            .await
            .unwrap();
        c.query_drop("USE t").await.unwrap();
        c
    }
}

#[tokio::test]
async fn ok_packets_count_warnings() {
    let server = start().await;
    let mut c = server.connect().await;
    c.query_drop("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
        .await
        .unwrap();
    c.query_drop(
        "INSERT IGNORE INTO items VALUES (1, 'a'), (1, 'b'), (2, 'c'), (2, 'd'), (3, 'e')",
    )
    .await
    .unwrap();
    assert_eq!(c.affected_rows(), 3);
    assert_eq!(c.get_warnings(), 2);
    let rows: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.unwrap();
    assert_eq!(
        rows,
        vec![
            (
                "Warning".to_string(),
                1062,
                "Duplicate entry '1' for key 'PRIMARY'".to_string()
            ),
            (
                "Warning".to_string(),
                1062,
                "Duplicate entry '2' for key 'PRIMARY'".to_string()
            ),
        ]
    );

    // Through a prepared statement too.
    c.exec_drop("INSERT IGNORE INTO items VALUES (?, ?)", (3, "again"))
        .await
        .unwrap();
    assert_eq!((c.affected_rows(), c.get_warnings()), (0, 1));

    c.query_drop("DROP TABLE IF EXISTS nothing_here, nor_here")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 1);
    c.query_drop("DROP DATABASE IF EXISTS no_such_db")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 1);

    // A clean statement reports none.
    c.query_drop("INSERT INTO items VALUES (4, 'f')")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 0);
}

#[tokio::test]
async fn multi_statement_queries_return_every_result() {
    let server = start().await;
    let mut c = server.connect().await;
    c.query_drop("CREATE TABLE n (id INT PRIMARY KEY, label VARCHAR(10))")
        .await
        .unwrap();

    // Rows, an OK, rows again: three results in order.
    let mut r = c
        .query_iter("SELECT 1 AS a; INSERT INTO n VALUES (1, 'x;y'), (2, 'z'); SELECT id, label FROM n ORDER BY id")
        .await
        .unwrap();
    let first: Vec<i64> = r.collect().await.unwrap();
    assert_eq!(first, vec![1]);
    let second: Vec<mysql_async::Row> = r.collect().await.unwrap();
    assert!(second.is_empty());
    assert_eq!(r.affected_rows(), 2);
    let third: Vec<(i64, String)> = r.collect().await.unwrap();
    assert_eq!(third, vec![(1, "x;y".to_string()), (2, "z".to_string())]);
    assert!(r.is_empty());
    drop(r);

    // An error ends the reply; the statements after it do not run.
    let mut r = c
        .query_iter("SELECT 10; SELECT * FROM no_such_table; INSERT INTO n VALUES (3, 'never')")
        .await
        .unwrap();
    let ten: Vec<i64> = r.collect().await.unwrap();
    assert_eq!(ten, vec![10]);
    let err = r.collect::<mysql_async::Row>().await.unwrap_err();
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1146),
        other => panic!("expected a server error, got {other:?}"),
    }
    drop(r);
    let count: Option<i64> = c.query_first("SELECT COUNT(*) FROM n").await.unwrap();
    assert_eq!(count, Some(2));

    // The connection is still in step after all that.
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

/// A logged-in raw connection (empty password), for packets no client
/// library sends.
async fn raw_login(port: u16) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let _greeting = read_packet(&mut s).await;
    // CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH.
    let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000;
    let mut p = caps.to_le_bytes().to_vec();
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(b"root\0");
    p.push(0); // empty auth response
    p.extend_from_slice(b"mysql_native_password\0");
    write_packet(&mut s, 1, &p).await;
    let (_, ok) = read_packet(&mut s).await;
    assert_eq!(ok[0], 0x00, "login failed: {ok:?}");
    s
}

async fn read_packet(s: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await.expect("header");
    let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let mut payload = vec![0; len];
    s.read_exact(&mut payload).await.expect("payload");
    (h[3], payload)
}

async fn write_packet(s: &mut tokio::net::TcpStream, seq: u8, payload: &[u8]) {
    use tokio::io::AsyncWriteExt;
    let len = payload.len();
    let mut p = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, seq];
    p.extend_from_slice(payload);
    s.write_all(&p).await.expect("write");
}

#[tokio::test]
async fn unknown_statement_ids_get_1243_and_the_connection_lives_on() {
    let server = start().await;
    let mut s = raw_login(server.port).await;
    // COM_STMT_SEND_LONG_DATA for an unknown statement: no reply (as in
    // MySQL), and nothing breaks.
    write_packet(&mut s, 0, &[0x18, 77, 0, 0, 0, 0, 0, b'x']).await;
    // COM_STMT_EXECUTE: id 77, no cursor, one iteration.
    write_packet(&mut s, 0, &[0x17, 77, 0, 0, 0, 0, 1, 0, 0, 0]).await;
    let (seq, err) = read_packet(&mut s).await;
    assert_eq!((seq, err[0]), (1, 0xFF), "{err:?}");
    assert_eq!(u16::from_le_bytes([err[1], err[2]]), 1243);
    let message = String::from_utf8_lossy(&err[9..]).into_owned();
    assert_eq!(
        message,
        "Unknown prepared statement handler (77) given to mysqld_stmt_execute"
    );
    // COM_STMT_RESET of an unknown statement, too.
    write_packet(&mut s, 0, &[0x1A, 78, 0, 0, 0]).await;
    let (_, err) = read_packet(&mut s).await;
    assert_eq!(u16::from_le_bytes([err[1], err[2]]), 1243);
    // The connection still answers queries.
    write_packet(&mut s, 0, b"\x03SELECT 42").await;
    let (_, column_count) = read_packet(&mut s).await;
    assert_eq!(column_count, vec![1]);
}

/// A self-signed certificate for 127.0.0.1 and its key, as PEM files.
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use openssl::asn1::Asn1Time;
    use openssl::bn::BigNum;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::PKey;
    use openssl::x509::extension::SubjectAlternativeName;
    use openssl::x509::{X509NameBuilder, X509};

    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "ladle-test").unwrap();
    let name = name.build();
    let mut b = X509::builder().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap())
        .unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(2).unwrap())
        .unwrap();
    let san = SubjectAlternativeName::new()
        .ip("127.0.0.1")
        .dns("localhost")
        .build(&b.x509v3_context(None, None))
        .unwrap();
    b.append_extension(san).unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    let cert = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    std::fs::write(&cert, b.build().to_pem().unwrap()).unwrap();
    std::fs::write(&key_path, key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    (cert, key_path)
}

#[tokio::test]
async fn tls_clients_and_plain_clients_both_connect() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let config = ladle_shim::tls::server_config(&cert, &key).expect("tls config");
    let server = start_with(Some(config)).await;

    // A TLS client that verifies the server's certificate against our CA:
    // mysql_async refuses to go on in plain text once it asked for TLS.
    let ssl = mysql_async::SslOpts::default().with_root_certs(vec![cert.clone().into()]);
    let mut c = Conn::new(server.opts().ssl_opts(Some(ssl)))
        .await
        .expect("TLS connect");
    c.query_drop("CREATE DATABASE secure").await.unwrap();
    c.query_drop("USE secure").await.unwrap();
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        .await
        .unwrap();
    c.exec_drop("INSERT INTO t VALUES (?, ?)", (1, "over tls"))
        .await
        .unwrap();
    let v: Option<String> = c
        .exec_first("SELECT v FROM t WHERE id = ?", (1,))
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("over tls"));
    // Results patched by the front end still arrive whole under TLS.
    c.query_drop("INSERT IGNORE INTO t VALUES (1, 'dup')")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 1);
    c.disconnect().await.unwrap();

    // TLS is offered, not required: a plain client is served too.
    let mut plain = Conn::new(server.opts().db_name(Some("secure")))
        .await
        .expect("plain connect");
    let n: Option<i64> = plain.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(n, Some(1));
    plain.disconnect().await.unwrap();

    let mut c = Conn::new(server.opts()).await.unwrap();
    let have_ssl: Option<(String, String)> = c
        .query_first("SHOW VARIABLES LIKE 'have_ssl'")
        .await
        .unwrap();
    assert_eq!(have_ssl.map(|(_, v)| v).as_deref(), Some("YES"));
    c.disconnect().await.unwrap();

    // A client that distrusts the certificate is refused by its own check.
    let wrong = mysql_async::SslOpts::default();
    assert!(Conn::new(server.opts().ssl_opts(Some(wrong)))
        .await
        .is_err());
}
