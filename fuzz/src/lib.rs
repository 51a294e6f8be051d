//! Shared set-up of Ladle's fuzz targets: one in-memory server per fuzzing
//! process (storage, dataflow and front end, as `ladle --durability
//! memory` has them), a seeded database, and a panic hook that aborts, so
//! a panic the server would catch (and answer with an error) is reported
//! by libFuzzer as the bug it is. Panics inside sqlparser that the shim
//! contains by design (see `sqltext::contain_parser_panic`) stay quiet.

use std::net::SocketAddr;
use std::sync::{Arc, Once, OnceLock};

use ladle_dataflow::{Dataflow, DataflowConfig};
use ladle_shim::session::Session;
use ladle_shim::{Frontend, FrontendConfig, Metrics, ServerFacts};
use ladle_storage::Storage;

/// The database every input runs in.
pub const DB: &str = "fz";

/// Tables and rows each input finds (the shapes the sqllogictest corpus
/// uses most: keys, a secondary index, NULLs, text, decimals, dates).
const SEED: &[&str] = &[
    "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(20), c DECIMAL(8,2), d DATETIME, KEY (a))",
    "CREATE TABLE u (id INT PRIMARY KEY AUTO_INCREMENT, t_id INT, name TEXT, score DOUBLE)",
    "CREATE TABLE n (k BIGINT UNSIGNED, v VARCHAR(10))",
    "INSERT INTO t VALUES (1, 10, 'one', 1.50, '2024-01-01 10:00:00'), (2, 20, 'two', NULL, NULL), \
     (3, NULL, 'three', -3.25, '1999-12-31 23:59:59'), (4, 10, '', 0.00, '2024-02-29 00:00:00')",
    "INSERT INTO u (t_id, name, score) VALUES (1, 'a', 1.5), (1, 'b', NULL), (2, 'c', -2), (9, NULL, 0)",
    "INSERT INTO n VALUES (18446744073709551615, 'max'), (0, NULL), (NULL, 'null')",
];

/// Statements that only wait (a fuzz input is not a hang because it asks
/// to sleep).
pub fn only_waits(sql: &str) -> bool {
    let upper = sql.to_ascii_uppercase();
    ["SLEEP", "BENCHMARK", "GET_LOCK", "LOCK TABLE", "WAIT"]
        .iter()
        .any(|w| upper.contains(w))
}

/// Writes to what [`SEED`] made: the database is made again after them.
fn may_change_seed(sql: &str) -> bool {
    let upper = sql.to_ascii_uppercase();
    [
        "DROP", "ALTER", "TRUNCATE", "RENAME", "CREATE", "DELETE", "UPDATE", "INSERT", "REPLACE",
        "LOAD", "GRANT", "REVOKE", "USER", "KILL", "SET", "XA", "BEGIN", "START", "HANDLER",
    ]
    .iter()
    .any(|w| upper.contains(w))
}

pub struct Server {
    pub frontend: Arc<Frontend>,
    pub runtime: tokio::runtime::Runtime,
    pub addr: SocketAddr,
}

/// The process's server (started on first use).
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(start)
}

fn start() -> Server {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            report(info);
            std::process::abort();
        }));
    });
    let storage = Storage::in_memory();
    let dataflow = Dataflow::new(
        storage.clone(),
        DataflowConfig {
            memory_limit: 64 << 20,
            domain_threads: 1,
            ..Default::default()
        },
    )
    .expect("dataflow");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let frontend = Frontend::new(
        storage,
        dataflow,
        ServerFacts {
            max_connections: 100,
            port: addr.port(),
            datadir: String::new(),
            tls: false,
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
            password: String::new(),
            max_connections: 100,
            max_allowed_packet: 1 << 20,
            tls: None,
            rsa_keys: None,
        },
    )
    .expect("front end");
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    let serving = frontend.clone();
    runtime.spawn(async move {
        // The sender lives as long as the task: the server never stops.
        let _stop = _stop;
        serving.serve(listener, stop_rx).await;
    });
    let server = Server {
        frontend,
        runtime,
        addr,
    };
    reseed(&server);
    server
}

/// A root session in [`DB`].
pub fn session(server: &Server) -> Session {
    let mut s = Session::new(1, "root".into(), "localhost".into());
    let _ = server.frontend.engine().use_database(&mut s, DB);
    s
}

/// Drops and makes [`DB`] again with [`SEED`]'s tables and rows.
fn reseed(server: &Server) {
    let engine = server.frontend.engine();
    let mut s = Session::new(1, "root".into(), "localhost".into());
    for sql in [
        format!("DROP DATABASE IF EXISTS {DB}"),
        format!("CREATE DATABASE {DB}"),
    ] {
        let (_, r) = engine.execute(&mut s, &sql);
        r.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    let mut s = session(server);
    for sql in SEED {
        let (_, r) = engine.execute(&mut s, sql);
        r.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
}

/// Runs `sql` as one client statement (parse, plan, compile the view,
/// execute); errors are answers, only a panic or an abort is a finding.
pub fn run_sql(sql: &str) {
    if only_waits(sql) {
        return;
    }
    let server = server();
    let mut s = session(server);
    let _ = server.frontend.engine().execute(&mut s, sql);
    if may_change_seed(sql) {
        reseed(server);
    }
}
