//! Command-line flags (each also an environment variable `LADLE_<NAME>`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

/// The largest cluster node id (connection ids keep 8 bits for it).
const MAX_NODE_ID: u64 = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// fsync the write-ahead log before acknowledging a write.
    Sync,
    /// Acknowledge once in the WAL buffer; synced every few milliseconds.
    Async,
    /// Nothing on disk (tests and benchmarks).
    Memory,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WalRecoveryArg {
    /// Refuse to start on a damaged write-ahead log (it may hold
    /// acknowledged commits).
    AbsoluteConsistency,
    /// Start from the last consistent point before the damage, dropping
    /// (and logging) every write after it.
    PointInTime,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReadConsistencyArg {
    /// A connection's reads wait for its own writes; other connections'
    /// writes show up a moment later.
    Session,
    /// Every read waits for every write acknowledged before it.
    Strong,
}

/// Ladle: a MySQL-compatible database that answers reads from incrementally
/// maintained views.
#[derive(Clone, Debug, Parser)]
// (A flag given twice takes its last value: a cluster node's restart
// after a bootstrap appends the addresses it bound, see `ports`.)
#[command(name = "ladle", version, about, args_override_self = true)]
pub struct Args {
    /// Address for MySQL clients.
    #[arg(long, env = "LADLE_LISTEN", default_value = "127.0.0.1:3307")]
    pub listen: SocketAddr,
    /// Data directory (created if missing).
    #[arg(long, env = "LADLE_DATA_DIR", default_value = "./ladle-data")]
    pub data_dir: PathBuf,
    /// Address for HTTP /metrics (Prometheus) and /health.
    #[arg(long, env = "LADLE_METRICS_LISTEN", default_value = "127.0.0.1:6034")]
    pub metrics_listen: SocketAddr,
    /// Once the listeners are bound, write their addresses to this file:
    /// `mysql=ADDR` and `metrics=ADDR` lines, and `replication=ADDR` on a
    /// cluster node (replaced whole; a single node writes it before
    /// recovery, a cluster node once it has joined). How a script or a test
    /// learns the ports of `--listen 127.0.0.1:0` (port 0: any free one).
    #[arg(long, env = "LADLE_PORTS_FILE")]
    pub ports_file: Option<PathBuf>,
    /// The user clients log in as.
    #[arg(long, env = "LADLE_USER", default_value = "root")]
    pub user: String,
    /// The user's password; empty is allowed only on a loopback address.
    /// Prefer LADLE_PASSWORD: a command-line argument is readable by every
    /// local user in /proc/PID/cmdline (start-up warns).
    #[arg(
        long,
        env = "LADLE_PASSWORD",
        default_value = "",
        hide_env_values = true
    )]
    pub password: String,
    /// When a write is acknowledged relative to its fsync.
    #[arg(long, env = "LADLE_DURABILITY", value_enum, default_value = "sync")]
    pub durability: DurabilityArg,
    /// What start-up does with a damaged RocksDB write-ahead log.
    #[arg(
        long,
        env = "LADLE_WAL_RECOVERY",
        value_enum,
        default_value = "absolute-consistency"
    )]
    pub wal_recovery: WalRecoveryArg,
    /// Writes get MySQL's error 1021 (disk full) while the data directory's
    /// file system has less free space than this (reads go on; writes
    /// resume once space is freed); 0 = no check (K, M, G suffixes).
    #[arg(long, env = "LADLE_DISK_RESERVE", default_value = "64M", value_parser = parse_bytes)]
    pub disk_reserve: u64,
    /// Memory for view state before eviction, in bytes (K, M, G suffixes).
    #[arg(long, env = "LADLE_MEMORY_LIMIT", default_value = "1G", value_parser = parse_bytes)]
    pub memory_limit: u64,
    /// RocksDB's block cache for the tables, in bytes (K, M, G suffixes):
    /// a table read that misses it decompresses a block from the OS page
    /// cache.
    #[arg(long, env = "LADLE_BLOCK_CACHE", default_value = "64M", value_parser = parse_bytes)]
    pub block_cache: u64,
    /// How often to snapshot view state (e.g. 60s, 5m; 0 = off).
    #[arg(long, env = "LADLE_SNAPSHOT_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    pub snapshot_interval: Duration,
    /// Drop a view no query has read for about this long (it is dropped
    /// between one and two times this after its last read; the next query
    /// reinstalls it); 0 = keep every view.
    #[arg(long, env = "LADLE_VIEW_IDLE_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    pub view_idle_timeout: Duration,
    /// Threads that propagate writes through independent parts of the view
    /// graph in parallel; 0 = one per core.
    #[arg(long, env = "LADLE_DATAFLOW_THREADS", default_value_t = 0)]
    pub dataflow_threads: usize,
    /// Which writes a read waits for (views apply writes just after they
    /// are acknowledged): `strong` = every acknowledged write, as MySQL;
    /// `session` = the connection's own (others' show up a moment later).
    /// A connection can override it: SET ladle_read_consistency = 'SESSION'.
    #[arg(
        long,
        env = "LADLE_READ_CONSISTENCY",
        value_enum,
        default_value = "strong"
    )]
    pub read_consistency: ReadConsistencyArg,
    /// Maximum concurrent client connections (beyond it: error 1040).
    #[arg(long, env = "LADLE_MAX_CONNECTIONS", default_value_t = 1000)]
    pub max_connections: usize,
    /// Tokio worker threads (default: one per CPU).
    #[arg(long, env = "LADLE_THREADS")]
    pub threads: Option<usize>,
    /// TLS certificate chain (PEM): offer TLS to clients (with --tls-key).
    #[arg(long, env = "LADLE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for --tls-cert.
    #[arg(long, env = "LADLE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// RSA private key (PEM, PKCS#8 or PKCS#1) for `caching_sha2_password`
    /// logins over plaintext; default: `private_key.pem` in the data
    /// directory, generated (with `public_key.pem`) at first start.
    #[arg(long, env = "LADLE_RSA_PRIVATE_KEY")]
    pub rsa_private_key: Option<PathBuf>,
    /// Refuse logins over plaintext with error 3159 (needs --tls-cert;
    /// `SET GLOBAL require_secure_transport` changes it at runtime).
    #[arg(long, env = "LADLE_REQUIRE_SECURE_TRANSPORT")]
    pub require_secure_transport: bool,
    /// Failed handshakes in a row after which a client host is blocked
    /// (error 1129) until `FLUSH HOSTS` (`@@max_connect_errors`).
    #[arg(long, env = "LADLE_MAX_CONNECT_ERRORS", default_value_t = 100)]
    pub max_connect_errors: u64,
    /// A client must finish the connection phase (greeting to OK) within
    /// this, or is disconnected (`@@connect_timeout`).
    #[arg(long, env = "LADLE_CONNECT_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Idle time between commands before the server closes a connection
    /// (`@@wait_timeout`; a session can SET its own).
    #[arg(long, env = "LADLE_WAIT_TIMEOUT", default_value = "8h", value_parser = parse_duration)]
    pub wait_timeout: Duration,
    /// `--wait-timeout` for interactive clients (`@@interactive_timeout`).
    #[arg(long, env = "LADLE_INTERACTIVE_TIMEOUT", default_value = "8h", value_parser = parse_duration)]
    pub interactive_timeout: Duration,
    /// A packet that has begun must arrive whole within this
    /// (`@@net_read_timeout`).
    #[arg(long, env = "LADLE_NET_READ_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub net_read_timeout: Duration,
    /// A reply must be written within this (`@@net_write_timeout`).
    #[arg(long, env = "LADLE_NET_WRITE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub net_write_timeout: Duration,
    /// Join a cluster coordinated by etcd at these endpoints (comma
    /// separated, e.g. http://127.0.0.1:2379); needs --node-id. Without
    /// it the server is a single node.
    #[arg(long, env = "LADLE_ETCD", requires = "node_id")]
    pub etcd: Option<String>,
    /// This node's id in the cluster (unique, 1 to 255: it makes up the
    /// top bits of the node's connection ids).
    #[arg(long, env = "LADLE_NODE_ID", requires = "etcd")]
    pub node_id: Option<u64>,
    /// Replicas that must persist a write before the primary acknowledges
    /// it (semi-synchronous replication; 0 = asynchronous, an acknowledged
    /// write may be lost on failover). Default: 1 in a cluster.
    #[arg(long, env = "LADLE_SYNC_REPLICAS", requires = "etcd")]
    pub sync_replicas: Option<usize>,
    /// Where replicas connect to this node when it is primary (default:
    /// the --listen address's IP, any free port; the bound address is
    /// published in etcd).
    #[arg(long, env = "LADLE_REPLICATION_LISTEN", requires = "etcd")]
    pub replication_listen: Option<SocketAddr>,
    /// The primary's etcd lease: it leads for at most this long after its
    /// last successful keep-alive (whole seconds, at least 2).
    #[arg(long, env = "LADLE_LEASE_TTL", default_value = "3s", value_parser = parse_duration)]
    pub lease_ttl: Duration,
    /// Read-your-writes on a replica: after a session's write ran on the
    /// primary (forwarded), its next read here waits at most this long for
    /// this node to apply it, then fails with 1205 (retryable).
    #[arg(long, env = "LADLE_RYW_TIMEOUT_MS", default_value_t = 5000)]
    pub ryw_timeout_ms: u64,
    /// Change-log entries a cluster node keeps beyond what its live
    /// members still need; a member further behind (or back after its
    /// membership lapsed) is bootstrapped from a checkpoint of the primary.
    #[arg(long, env = "LADLE_LOG_KEEP_ENTRIES", default_value_t = 100_000)]
    pub log_keep_entries: u64,
    /// The host (name or IP) other cluster nodes and clients reach this
    /// node at, published in etcd with the MySQL and replication ports;
    /// needed when --listen / --replication-listen is a wildcard address
    /// (0.0.0.0) or not reachable as such. Default: the listen addresses.
    #[arg(long, env = "LADLE_ADVERTISE", requires = "etcd")]
    pub advertise: Option<String>,
    /// A file holding the cluster secret (at least 16 bytes; the same on
    /// every node): each replication connection proves it holds it (an
    /// HMAC challenge) before anything else is read. A cluster node needs
    /// this or LADLE_CLUSTER_SECRET.
    #[arg(long, env = "LADLE_CLUSTER_SECRET_FILE", requires = "etcd")]
    pub cluster_secret_file: Option<PathBuf>,
    /// The cluster secret itself, from the environment only
    /// (LADLE_CLUSTER_SECRET): a command-line argument would be readable by
    /// every local user in /proc/PID/cmdline.
    #[arg(skip = std::env::var("LADLE_CLUSTER_SECRET").ok())]
    pub cluster_secret: Option<String>,
}

impl Args {
    /// Checks rules clap cannot express; the error text is shown to the user.
    pub fn validate(&self) -> Result<(), String> {
        if self.password.is_empty() && !self.listen.ip().is_loopback() {
            return Err(format!(
                "refusing to listen on non-loopback address {} with an empty password; \
                 set --password (or LADLE_PASSWORD), or listen on 127.0.0.1",
                self.listen
            ));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err("--tls-cert and --tls-key go together: give both or neither".into());
        }
        if self.require_secure_transport && self.tls_cert.is_none() {
            return Err(
                "--require-secure-transport needs TLS: give --tls-cert and --tls-key".into(),
            );
        }
        if self.max_connect_errors == 0 {
            return Err("--max-connect-errors must be at least 1".into());
        }
        if self.etcd.is_some() {
            match (&self.cluster_secret_file, &self.cluster_secret) {
                (None, None) => {
                    return Err("a cluster node needs the cluster secret: give \
                                --cluster-secret-file (or LADLE_CLUSTER_SECRET_FILE) or \
                                LADLE_CLUSTER_SECRET"
                        .into())
                }
                (Some(_), Some(_)) => {
                    return Err("give the cluster secret once: --cluster-secret-file or \
                                LADLE_CLUSTER_SECRET, not both"
                        .into())
                }
                _ => {}
            }
        }
        if self.lease_ttl.as_secs() < 2 {
            return Err("--lease-ttl must be at least 2s".into());
        }
        if self.max_connections == 0 {
            return Err("--max-connections must be at least 1".into());
        }
        if self.threads == Some(0) {
            return Err("--threads must be at least 1".into());
        }
        for (flag, d) in [
            ("--connect-timeout", self.connect_timeout),
            ("--wait-timeout", self.wait_timeout),
            ("--interactive-timeout", self.interactive_timeout),
            ("--net-read-timeout", self.net_read_timeout),
            ("--net-write-timeout", self.net_write_timeout),
        ] {
            if d.as_secs() < 1 {
                return Err(format!(
                    "{flag} must be at least 1s (MySQL counts whole seconds)"
                ));
            }
        }
        Ok(())
    }
}

/// Whether the command line (`args`, program name first) gives the
/// password itself, which every local user can read in /proc/PID/cmdline.
pub fn password_on_command_line(args: impl IntoIterator<Item = String>) -> bool {
    args.into_iter()
        .skip(1)
        .any(|a| a == "--password" || a.starts_with("--password="))
}

impl Args {
    /// The cluster settings, when --etcd is given; `Err` when the cluster
    /// secret cannot be read.
    pub fn cluster(&self, mysql_port: u16) -> Result<Option<ladle_cluster::ClusterConfig>, String> {
        let Some(etcd) = self.etcd.as_ref() else {
            return Ok(None);
        };
        let secret = match (&self.cluster_secret_file, &self.cluster_secret) {
            (Some(path), _) => ladle_cluster::ClusterSecret::from_file(path)?,
            (None, Some(text)) => ladle_cluster::ClusterSecret::new(text.as_bytes())
                .map_err(|e| format!("LADLE_CLUSTER_SECRET: {e}"))?,
            (None, None) => return Err("a cluster node needs the cluster secret".into()),
        };
        let node_id = self.node_id.unwrap_or(0);
        if !(1..=MAX_NODE_ID).contains(&node_id) {
            return Err(format!(
                "--node-id {node_id}: a cluster node id is 1 to {MAX_NODE_ID} (it makes up the \
                 top 8 bits of the node's connection ids, unique across the cluster)"
            ));
        }
        Ok(Some(ladle_cluster::ClusterConfig {
            etcd: etcd
                .split(',')
                .map(|e| e.trim().to_string())
                .filter(|e| !e.is_empty())
                .collect(),
            node_id,
            mysql_addr: match &self.advertise {
                Some(host) => format!("{host}:{mysql_port}"),
                None => SocketAddr::new(self.listen.ip(), mysql_port).to_string(),
            },
            advertise: self.advertise.clone(),
            replication_listen: self
                .replication_listen
                .unwrap_or(SocketAddr::new(self.listen.ip(), 0)),
            sync_replicas: self.sync_replicas.unwrap_or(1),
            lease_ttl: Duration::from_secs(self.lease_ttl.as_secs()),
            ack_timeout: Duration::from_secs(5),
            prefix: "/ladle".into(),
            data_dir: self.data_dir.clone(),
            log_keep_entries: self.log_keep_entries,
            secret,
        }))
    }

    /// The connection timeouts in whole seconds, as `@@` reports them.
    pub fn timeouts(&self) -> ladle_shim::Timeouts {
        ladle_shim::Timeouts {
            connect: self.connect_timeout.as_secs(),
            wait: self.wait_timeout.as_secs(),
            interactive: self.interactive_timeout.as_secs(),
            net_read: self.net_read_timeout.as_secs(),
            net_write: self.net_write_timeout.as_secs(),
        }
    }
}

/// `1024`, `64K`, `512M`, `1G` (binary multiples; an optional trailing `B`).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_uppercase();
    let t = t.strip_suffix('B').unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid size '{s}' (examples: 1048576, 512M, 2G)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// `0`, `30s`, `5m`, `1h`, `250ms`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim().to_ascii_lowercase();
    let err = || format!("invalid duration '{s}' (examples: 0, 30s, 5m, 1h)");
    let (num, unit) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t.as_str(), 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| err())?;
    if !v.is_finite() || v < 0.0 {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(v * unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("512m"), Ok(512 << 20));
        assert_eq!(parse_bytes("64KB"), Ok(64 << 10));
        assert_eq!(parse_bytes("100"), Ok(100));
        assert!(parse_bytes("x").is_err());
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn password_on_the_command_line_is_noticed() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(password_on_command_line(argv(&[
            "ladle",
            "--password",
            "x"
        ])));
        assert!(password_on_command_line(argv(&["ladle", "--password=x"])));
        assert!(!password_on_command_line(argv(&["ladle", "--user", "u"])));
        assert!(!password_on_command_line(argv(&["--password"])));
    }

    #[test]
    fn empty_password_needs_loopback() {
        let mut a = Args::parse_from(["ladle"]);
        assert!(a.validate().is_ok());
        a.listen = "0.0.0.0:3307".parse().unwrap();
        assert!(a.validate().unwrap_err().contains("empty password"));
        a.password = "pw".into();
        assert!(a.validate().is_ok());
    }

    #[test]
    fn advertise_names_the_published_addresses() {
        let a = Args::parse_from([
            "ladle",
            "--listen",
            "0.0.0.0:3311",
            "--etcd",
            "http://etcd:2379",
            "--node-id",
            "1",
            "--replication-listen",
            "0.0.0.0:7311",
            "--advertise",
            "ladle-1",
        ]);
        let mut a = a;
        a.cluster_secret = Some("a secret of the cluster".into());
        let c = a.cluster(3311).expect("a secret").expect("a cluster node");
        assert_eq!(c.mysql_addr, "ladle-1:3311");
        assert_eq!(c.advertise.as_deref(), Some("ladle-1"));
        let mut plain = Args::parse_from(["ladle", "--etcd", "http://e:2379", "--node-id", "2"]);
        plain.cluster_secret = Some("a secret of the cluster".into());
        let c = plain
            .cluster(3307)
            .expect("a secret")
            .expect("a cluster node");
        assert_eq!(c.mysql_addr, "127.0.0.1:3307");
        assert_eq!(c.advertise, None);
    }

    #[test]
    fn a_cluster_node_id_is_1_to_255() {
        for (id, ok) in [("0", false), ("1", true), ("255", true), ("256", false)] {
            let mut a = Args::parse_from(["ladle", "--etcd", "http://e:2379", "--node-id", id]);
            a.cluster_secret = Some("a secret of the cluster".into());
            match a.cluster(3307) {
                Ok(c) => assert!(ok && c.is_some(), "--node-id {id}"),
                Err(e) => assert!(!ok && e.contains("is 1 to 255"), "--node-id {id}: {e}"),
            }
        }
    }

    #[test]
    fn a_cluster_node_needs_a_secret_of_sixteen_bytes() {
        let mut a = Args::parse_from(["ladle", "--etcd", "http://e:2379", "--node-id", "2"]);
        a.cluster_secret = None;
        let err = a.validate().expect_err("no secret");
        assert!(err.contains("needs the cluster secret"), "{err}");
        a.cluster_secret = Some("short".into());
        assert!(a.validate().is_ok());
        let err = a.cluster(3307).expect_err("too short");
        assert!(err.contains("at least 16 bytes"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("secret");
        std::fs::write(&file, "0123456789abcdef\n").expect("write the secret");
        a.cluster_secret_file = Some(file);
        assert!(a.validate().expect_err("both").contains("not both"));
        a.cluster_secret = None;
        assert!(a.cluster(3307).expect("read").is_some());
    }
}
