//! A front end over in-memory storage for protocol tests, and a raw client
//! for packets no client library sends.
#![allow(dead_code)]

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
pub struct Server {
    pub port: u16,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

pub async fn start() -> Server {
    start_configured(None, 16 << 20, "").await
}

pub async fn start_with(tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>) -> Server {
    start_configured(tls, 16 << 20, "").await
}

pub async fn start_configured(
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    max_allowed_packet: usize,
    password: &str,
) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let frontend = frontend(dir.path(), port, tls, max_allowed_packet, password);
    let (stop, stop_rx) = watch::channel(false);
    // On a runtime of its own, built as the server builds its own: the
    // front end runs cached reads on the runtime's threads, which need the
    // server's stack size (a test's thread has 2 MB).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(ladle_dataflow::THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .expect("runtime");
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener).expect("listener");
            frontend.serve(listener, stop_rx).await;
        });
    });
    Server {
        port,
        _stop: stop,
        _dir: dir,
    }
}

/// A front end over in-memory storage in `dir`, not serving yet (`root`
/// with `password` is its superuser).
pub fn frontend(
    dir: &std::path::Path,
    port: u16,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    max_allowed_packet: usize,
    password: &str,
) -> Arc<Frontend> {
    let cfg = StorageConfig {
        data_dir: dir.to_path_buf(),
        durability: Durability::Memory,
        block_cache_bytes: 8 << 20,
        wal_dir: None,
        async_flush_interval: Duration::from_millis(5),
        wal_recovery: Default::default(),
        disk_reserve: 0,
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
    Frontend::new(
        storage,
        dataflow,
        ServerFacts {
            max_connections: 100,
            port,
            datadir: dir.display().to_string(),
            tls: tls.is_some(),
            read_consistency: Default::default(),
            timeouts: Default::default(),
            security: Default::default(),
            globals: Default::default(),
            rsa_key_paths: Default::default(),
            named_locks: Default::default(),
        },
        Arc::new(Metrics::new()),
        Arc::new(ladle_shim::admin::NoAdmin),
        FrontendConfig {
            user: "root".into(),
            password: password.to_string(),
            max_connections: 100,
            max_allowed_packet,
            tls,
            rsa_keys: Some(rsa_keys()),
        },
    )
    .expect("frontend")
}

/// One RSA key pair for every front end of a test binary (generating one
/// takes a moment).
pub fn rsa_keys() -> Arc<ladle_shim::rsa_keys::RsaKeyPair> {
    static KEYS: std::sync::OnceLock<Arc<ladle_shim::rsa_keys::RsaKeyPair>> =
        std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        Arc::new(ladle_shim::rsa_keys::RsaKeyPair::ephemeral().expect("RSA key pair"))
    })
    .clone()
}

impl Server {
    pub fn opts(&self) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .prefer_socket(false)
    }

    pub async fn connect(&self) -> Conn {
        let mut c = Conn::new(self.opts()).await.expect("connect");
        c.query_drop("CREATE DATABASE IF NOT EXISTS t")
            .await
            .unwrap();
        c.query_drop("USE t").await.unwrap();
        c
    }
}

/// A logged-in raw connection (empty password), for packets no client
/// library sends.
pub async fn raw_login(port: u16) -> tokio::net::TcpStream {
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

pub async fn read_packet(s: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await.expect("header");
    let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let mut payload = vec![0; len];
    s.read_exact(&mut payload).await.expect("payload");
    (h[3], payload)
}

pub async fn write_packet(s: &mut tokio::net::TcpStream, seq: u8, payload: &[u8]) {
    use tokio::io::AsyncWriteExt;
    let len = payload.len();
    let mut p = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, seq];
    p.extend_from_slice(payload);
    s.write_all(&p).await.expect("write");
}

/// A self-signed certificate for 127.0.0.1 and its key, as PEM files.
pub fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
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
