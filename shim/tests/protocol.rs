//! Protocol behaviour seen by a real client (`mysql_async`) against an
//! in-process front end over in-memory storage: the warning count in OK
//! packets, multi-statement COM_QUERY, unknown statement ids.

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
        },
        Arc::new(Metrics::new()),
        Arc::new(ladle_shim::admin::NoAdmin),
        FrontendConfig {
            user: "root".into(),
            password: String::new(),
            max_connections: 100,
            max_allowed_packet: 16 << 20,
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
