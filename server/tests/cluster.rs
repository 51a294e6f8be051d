//! The cluster tests (issue #16). The fault test, Jepsen style: etcd and
//! three `ladle` nodes as real processes; client threads insert rows with
//! unique ids through any node (replicas forward writes to the primary),
//! record every acknowledgement and read their own writes back, while
//! faults are injected: SIGKILL of the primary (ten times), SIGSTOP of the
//! primary past its lease then SIGCONT, SIGKILL of a replica, a SIGKILL and
//! restart of etcd, and a network partition of the primary (iptables on
//! its loopback ports). After each, a new primary must be elected (or the
//! old one resume) and writes must continue; an old primary rejoins as a
//! replica, re-bootstrapping itself from a checkpoint of the primary when
//! it holds a tail the new primary never had. At the end, on every node:
//! every acknowledged row is present, no row appears that was never sent,
//! every node's rows and a view's result are identical, and no read missed
//! its session's own write. Also here: write forwarding with
//! read-your-writes, bootstrap of a new replica, and a single node.
//!
//! Prints the failover times (SIGKILL of the primary to the first write
//! acknowledged after it). Skipped, with a message, when `etcd` is not
//! installed (scripts/deps.sh installs Debian's etcd-server).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql::prelude::*;
use mysql::{Conn, Opts, OptsBuilder};

// Not every helper is used by every test binary.
#[allow(dead_code)]
mod common;
use common::{http_get, ports};

#[path = "cluster/forwarded_sessions.rs"]
mod forwarded_sessions;
#[path = "cluster/kill.rs"]
mod kill;
#[path = "cluster/named_locks.rs"]
mod named_locks;
#[path = "cluster/replica_sessions.rs"]
mod replica_sessions;
#[path = "cluster/start_up.rs"]
mod start_up;
#[path = "cluster/versions.rs"]
mod versions;

const BIN: &str = env!("CARGO_BIN_EXE_ladle");
/// Every test node's cluster secret (LADLE_CLUSTER_SECRET), unless a test
/// gives one another.
const SECRET: &str = "the cluster tests' shared secret";
const NODES: usize = 3;
/// The faults injected, in order, each while the writers run: ten kills of
/// the primary (the failover figures), a pause of the primary past its
/// lease, a kill of a replica, and a restart of etcd.
const FAULTS: [Fault; 14] = [
    Fault::KillPrimary,
    Fault::KillPrimary,
    Fault::PausePrimary,
    Fault::KillPrimary,
    Fault::KillReplica,
    Fault::KillPrimary,
    Fault::RestartEtcd,
    Fault::PartitionPrimary,
    Fault::KillPrimary,
    Fault::KillPrimary,
    Fault::KillPrimary,
    Fault::KillPrimary,
    Fault::KillPrimary,
    Fault::KillPrimary,
];

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL of the primary, then a restart of it.
    KillPrimary,
    /// SIGKILL of a replica (writes go on), then a restart of it.
    KillReplica,
    /// SIGSTOP of the primary for longer than its lease, then SIGCONT.
    PausePrimary,
    /// SIGKILL of etcd, then a restart over its data.
    RestartEtcd,
    /// The primary cut off from etcd and from the replicas (iptables on
    /// its loopback ports) while its clients still reach it, past its
    /// lease; then healed. Skipped where iptables cannot be used.
    PartitionPrimary,
}

/// iptables rules dropping every TCP packet to or from some loopback
/// ports, removed when dropped. (Network namespaces joined by a bridge do
/// not work on hosts where Docker's FORWARD policy drops bridged
/// traffic, as here; a port cut on loopback is the same partition for
/// processes that talk over TCP.)
struct Partition {
    rules: Vec<Vec<String>>,
}

impl Partition {
    fn usable() -> bool {
        Command::new("iptables")
            .args(["-S", "OUTPUT"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    fn cut(ports: &[u16]) -> Partition {
        let mut p = Partition { rules: Vec::new() };
        for port in ports {
            for dir in ["--dport", "--sport"] {
                let rule: Vec<String> = [
                    "OUTPUT",
                    "-o",
                    "lo",
                    "-p",
                    "tcp",
                    dir,
                    &port.to_string(),
                    "-m",
                    "comment",
                    "--comment",
                    "ladle-cluster-test",
                    "-j",
                    "DROP",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                let ok = Command::new("iptables")
                    .arg("-I")
                    .args(&rule)
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false);
                assert!(ok, "iptables -I {rule:?}");
                p.rules.push(rule);
            }
        }
        p
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        for rule in &self.rules {
            let _ = Command::new("iptables").arg("-D").args(rule).status();
        }
    }
}

fn signal(node: &Node, sig: &str) {
    let pid = node.proc.as_ref().expect("a running node").0.id();
    let ok = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill {sig} {pid} failed");
}
const WRITERS: usize = 3;
/// Liveness bound for each wait below (an election, a rejoin, catching
/// up): reaching it fails the test; the figures reported are measured.
const PATIENCE: Duration = Duration::from_secs(60);

/// Kills a child process (SIGKILL) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Node {
    id: usize,
    port: u16,
    metrics_port: u16,
    replication_port: u16,
    data: PathBuf,
    log: PathBuf,
    proc: Option<Proc>,
    /// Extra environment and flags for the next start.
    env: Vec<(String, String)>,
    args: Vec<String>,
    /// Whether it has been started (a restart keeps its ports).
    started: bool,
}

impl Node {
    fn new(id: usize, root: &std::path::Path) -> Node {
        Node {
            id,
            // (Known once it has started: see `start_with`.)
            port: 0,
            metrics_port: 0,
            replication_port: 0,
            data: root.join(format!("node{id}")),
            log: root.join(format!("node{id}.log")),
            proc: None,
            env: Vec::new(),
            args: Vec::new(),
            started: false,
        }
    }

    /// Starts the node in the cluster at `etcd`, or as a single node. Its
    /// first start binds ports the system picks (port 0), read back from
    /// its ports file ([`ports`]): a port found free by the test and
    /// handed over could be taken by another process before the node bound
    /// it (the tests run side by side). A restart keeps its ports.
    fn start_with(&mut self, etcd: Option<&str>) {
        let first = !self.started;
        self.started = true;
        let ports = self.spawn(etcd, first);
        let Some(ports) = ports else {
            return;
        };
        let proc = &mut self.proc.as_mut().expect("just spawned").0;
        let bound = ports
            .wait(proc, PATIENCE)
            .unwrap_or_else(|e| panic!("node {}: {e}; log:\n{}", self.id, self.log_tail()));
        self.port = bound.mysql;
        self.metrics_port = bound.metrics;
        self.replication_port = bound.replication.unwrap_or(0);
    }

    /// Spawns the node: on its ports, or (`first`) on ports it picks,
    /// then said in the ports file returned.
    fn spawn(&mut self, etcd: Option<&str>, first: bool) -> Option<ports::PortsFile> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("node log");
        let mut cmd = Command::new(BIN);
        let ports_file = self.log.with_extension("ports");
        let ports = first.then(|| ports::on_any_ports(&mut cmd, ports_file));
        if !first {
            cmd.arg("--listen")
                .arg(format!("127.0.0.1:{}", self.port))
                .arg("--metrics-listen")
                .arg(format!("127.0.0.1:{}", self.metrics_port));
        }
        cmd.arg("--data-dir")
            .arg(&self.data)
            .env_remove("LADLE_ETCD")
            .env_remove("LADLE_SNAPSHOT_INTERVAL")
            .env("LADLE_LOG", "info")
            .stdout(log.try_clone().expect("node log"))
            .stderr(log);
        if let Some(etcd) = etcd {
            cmd.arg("--etcd")
                .arg(etcd)
                .arg("--node-id")
                .arg(self.id.to_string())
                .env("LADLE_CLUSTER_SECRET", SECRET)
                // No view snapshots: the periodic trim truncates the change
                // log to what the members still need.
                .arg("--snapshot-interval")
                .arg("0");
        }
        if let (Some(_), false) = (etcd, first) {
            // (The first start's follows --listen: 127.0.0.1, port 0.)
            cmd.arg("--replication-listen")
                .arg(format!("127.0.0.1:{}", self.replication_port));
        }
        cmd.args(&self.args);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        self.proc = Some(Proc(cmd.spawn().expect("spawn ladle")));
        ports
    }

    fn start(&mut self, etcd: &str) {
        self.start_with(Some(etcd));
    }

    fn kill9(&mut self) {
        self.proc = None;
    }

    /// `(role, applied)` from `/health`, if the node answers.
    fn health(&self) -> Option<(String, u64)> {
        self.proc.as_ref()?;
        let resp = http_get(self.metrics_port, "/health")?;
        let body = resp.split("\r\n\r\n").nth(1)?;
        let mut words = body.split_whitespace();
        let role = words.next()?.to_string();
        let applied = words
            .find_map(|w| w.strip_prefix("applied="))
            .and_then(|v| v.parse().ok())?;
        Some((role, applied))
    }

    fn opts(&self) -> Opts {
        OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(self.port)
            .user(Some("root"))
            .pass(Some(""))
            .prefer_socket(false)
            .tcp_connect_timeout(Some(Duration::from_secs(2)))
            .read_timeout(Some(Duration::from_secs(20)))
            .write_timeout(Some(Duration::from_secs(20)))
            .into()
    }

    /// Options to log in as `user` with `password`.
    fn opts_as(&self, user: &str, password: &str) -> Opts {
        OptsBuilder::from_opts(self.opts())
            .user(Some(user))
            .pass(Some(password))
            .into()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

struct Ack {
    sent: Instant,
    acked: Instant,
    node: usize,
}

/// What the writers sent and which of those were acknowledged, and when.
#[derive(Default)]
struct History {
    sent: BTreeSet<i64>,
    acked: BTreeSet<i64>,
    /// Each acknowledged write: when it was sent, when its acknowledgement
    /// arrived, and the node (index) it was sent to (which may have
    /// forwarded it to the primary).
    ack_times: Vec<Ack>,
    refused: u64,
    unknown: u64,
    /// Reads of a session's own acknowledged row on the node it wrote
    /// through (possibly a replica that forwarded the write), and how many
    /// did not see it.
    ryw_reads: u64,
    ryw_stale: u64,
}

fn etcd_installed() -> bool {
    Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// etcd on loopback ports (kept across its restarts).
struct Etcd {
    dir: PathBuf,
    client: u16,
    /// One more client port per node (node i uses `node_ports[i - 1]`), so
    /// that a partition can cut one node off etcd.
    node_ports: Vec<u16>,
    peer: u16,
    proc: Option<Proc>,
}

impl Etcd {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client)
    }

    /// The endpoint node `id` uses.
    fn url_for(&self, id: usize) -> String {
        format!("http://127.0.0.1:{}", self.node_ports[id - 1])
    }

    /// Starts etcd on its ports (the same ones again on a restart).
    fn start(&mut self) {
        assert!(
            self.try_start(),
            "etcd exited before answering (see {})",
            self.dir.join("etcd.log").display()
        );
    }

    /// Spawns etcd and waits until it answers: `false` if it exited first
    /// (one of its ports was taken meanwhile, see [`start_etcd`]).
    fn try_start(&mut self) -> bool {
        let url = self.url();
        let listen: Vec<String> = std::iter::once(self.client)
            .chain(self.node_ports.iter().copied())
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        let peer_url = format!("http://127.0.0.1:{}", self.peer);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("etcd.log"))
            .expect("etcd log");
        let child = Command::new("etcd")
            .args(["--name", "t", "--data-dir"])
            .arg(self.dir.join("etcd"))
            .args([
                "--listen-client-urls",
                &listen.join(","),
                "--advertise-client-urls",
                &url,
            ])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("t={peer_url}")])
            .stdout(log.try_clone().expect("etcd log"))
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        self.proc = Some(Proc(child));
        let client = self.client;
        let proc = &mut self.proc.as_mut().expect("just spawned").0;
        wait_for("etcd to answer", || {
            if http_get(client, "/health").is_some_and(|r| r.contains("true")) {
                return Some(true);
            }
            matches!(proc.try_wait(), Ok(Some(_))).then_some(false)
        })
    }
}

/// Starts `nodes`: the first elected primary, the second its synchronous
/// replica, the third a replica applying each entry 300 ms late (a read
/// there that did not wait for the session's writes would be stale); returns
/// connections to the primary and to the late replica.
fn start_with_a_late_replica(nodes: &mut [Node], etcd_url: &str) -> (Conn, Conn) {
    nodes[0].start(etcd_url);
    wait_role(&nodes[0], "primary");
    nodes[2]
        .env
        .push(("LADLE_REPLICATION_APPLY_DELAY_MS".into(), "300".into()));
    for n in &mut nodes[1..] {
        n.start(etcd_url);
    }
    for n in &nodes[1..] {
        wait_role(n, "replica");
    }
    let direct = Conn::new(nodes[0].opts()).expect("connect to the primary");
    let late = Conn::new(nodes[2].opts()).expect("connect to the late replica");
    (direct, late)
}

/// Waits until `node`'s /health reports `role`.
fn wait_role(node: &Node, role: &str) {
    wait_for(&format!("node {} to be {role}", node.id), || {
        matches!(node.health(), Some((r, _)) if r == role).then_some(())
    });
}

/// Polls `f` every 50 ms until it gives a value; fails after [`PATIENCE`].
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn primary(nodes: &[Node]) -> Option<usize> {
    (0..nodes.len()).find(|&i| matches!(nodes[i].health(), Some((r, _)) if r == "primary"))
}

/// One writer: inserts rows with ids `writer * 10^9 + n` through whichever
/// node takes them, recording each id before it is sent and each
/// acknowledgement. A refused write (1290) or a broken connection moves on
/// to the next node; an id is never sent twice.
fn writer(writer: usize, ports: Vec<Opts>, history: Arc<Mutex<History>>, stop: Arc<AtomicBool>) {
    let mut next = 0i64;
    let mut target = 0usize;
    let mut conn: Option<Conn> = None;
    while !stop.load(Ordering::Relaxed) {
        let Some(c) = conn.as_mut() else {
            match Conn::new(ports[target % ports.len()].clone()) {
                Ok(c) => conn = Some(c),
                Err(_) => {
                    target += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            continue;
        };
        let id = writer as i64 * 1_000_000_000 + next;
        next += 1;
        history.lock().unwrap().sent.insert(id);
        let sent = Instant::now();
        let sql = format!("INSERT INTO jepsen.rows VALUES ({id}, {writer}, 'w{writer}')");
        match c.query_drop(sql) {
            Ok(()) => {
                {
                    let mut h = history.lock().unwrap();
                    h.acked.insert(id);
                    h.ack_times.push(Ack {
                        sent,
                        acked: Instant::now(),
                        node: target % ports.len(),
                    });
                }
                // Read-your-writes: the session's next read sees the row
                // (an error, e.g. 1205 or a failover, is not a stale read).
                if next % 4 == 0 {
                    let read = c.query_first::<i64, _>(format!(
                        "SELECT COUNT(*) FROM jepsen.rows WHERE id = {id}"
                    ));
                    if let Ok(Some(n)) = read {
                        let mut h = history.lock().unwrap();
                        h.ryw_reads += 1;
                        h.ryw_stale += u64::from(n != 1);
                    }
                }
            }
            Err(mysql::Error::MySqlError(e)) if e.code == 1290 => {
                let mut h = history.lock().unwrap();
                h.refused += 1;
                // The server said why; the write may have committed locally
                // when it names a position ("not acknowledged").
                if e.message.contains("not acknowledged")
                    || e.message.contains("outcome is unknown")
                {
                    h.unknown += 1;
                }
                drop(h);
                conn = None;
                target += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => {
                history.lock().unwrap().unknown += 1;
                conn = None;
                target += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn ids_on(node: &Node) -> BTreeSet<i64> {
    let mut c = Conn::new(node.opts()).expect("connect for the final check");
    c.query::<i64, _>("SELECT id FROM jepsen.rows")
        .expect("read ids")
        .into_iter()
        .collect()
}

fn counts_on(node: &Node) -> BTreeMap<i64, i64> {
    let mut c = Conn::new(node.opts()).expect("connect for the final check");
    c.query::<(i64, i64), _>("SELECT writer, COUNT(*) FROM jepsen.rows GROUP BY writer")
        .expect("read the view")
        .into_iter()
        .collect()
}

#[test]
fn kill_9_of_the_primary_loses_no_acknowledged_write() {
    if !etcd_installed() {
        eprintln!(
            "SKIPPED cluster test: `etcd` is not installed (scripts/deps.sh installs etcd-server)"
        );
        return;
    }
    let temp = test_dir();
    let root = temp.path().to_path_buf();
    let mut etcd = start_etcd(&root);
    let mut nodes: Vec<Node> = (1..=NODES).map(|id| Node::new(id, &root)).collect();
    for n in &mut nodes {
        // A short change log: a node back from a kill often lacks entries
        // no longer kept and is bootstrapped from a checkpoint.
        n.args = vec!["--log-keep-entries".into(), "100".into()];
    }
    for n in &mut nodes {
        n.start(&etcd.url_for(n.id));
    }
    let first = wait_for("the first election", || primary(&nodes));
    {
        let mut c = Conn::new(nodes[first].opts()).expect("connect to the primary");
        c.query_drop("CREATE DATABASE jepsen")
            .expect("create database");
        c.query_drop(
            "CREATE TABLE jepsen.rows (id BIGINT PRIMARY KEY, writer INT NOT NULL, \
             note VARCHAR(16), KEY by_writer (writer))",
        )
        .expect("create table");
    }
    // A replica replays the schema change and serves reads (writes sent
    // to it run on the primary: the writers below use every node).
    let replica = (first + 1) % NODES;
    wait_for("the replica to have the table", || {
        let mut c = Conn::new(nodes[replica].opts()).ok()?;
        c.query_drop("SELECT COUNT(*) FROM jepsen.rows").ok()
    });

    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let opts: Vec<Opts> = nodes.iter().map(Node::opts).collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (opts, history, stop) = (opts.clone(), history.clone(), stop.clone());
            std::thread::spawn(move || writer(w, opts, history, stop))
        })
        .collect();
    let acks = || history.lock().unwrap().acked.len();
    wait_for("writes to be acknowledged", || (acks() > 50).then_some(()));

    let mut failovers = Vec::new();
    let mut partition_failover = None;
    let mut partitioned_acks = 0;
    let mut paused_failover = None;
    let mut etcd_outage = None;
    for fault in FAULTS {
        let p = wait_for("a primary", || primary(&nodes));
        let before = acks();
        wait_for("more writes before the fault", || {
            (acks() > before + 50).then_some(())
        });
        let fault_at = Instant::now();
        // From the fault to the first write another node acknowledged.
        // From the fault to the first acknowledgement of a write sent after
        // it (which the failed primary cannot have given, even when the
        // write went through a replica that forwarded it).
        let first_ack_after = |at: Instant| {
            wait_for("a write acknowledged after the fault", || {
                let h = history.lock().unwrap();
                h.ack_times
                    .iter()
                    .filter(|a| a.sent > at)
                    .map(|a| a.acked)
                    .min()
            }) - at
        };
        match fault {
            Fault::KillPrimary => {
                nodes[p].kill9();
                failovers.push(first_ack_after(fault_at));
                let new_primary = wait_for("the new primary", || primary(&nodes));
                assert_ne!(new_primary, p, "the killed node is still primary");
                nodes[p].start(&etcd.url_for(p + 1));
            }
            Fault::KillReplica => {
                let r = (p + 1) % NODES;
                nodes[r].kill9();
                // The other replica confirms writes meanwhile.
                let after = acks();
                wait_for("writes with a replica down", || {
                    (acks() > after + 20).then_some(())
                });
                nodes[r].start(&etcd.url_for(r + 1));
            }
            Fault::PausePrimary => {
                // Paused past its lease: another node is elected meanwhile.
                // Resumed, the old primary must not acknowledge anything
                // (checked at the end: every acknowledged row is on every
                // node, including the new primary's).
                signal(&nodes[p], "-STOP");
                // (From when it is stopped: `kill` takes a few ms to run,
                // and the primary acknowledges writes until then.)
                let stopped_at = Instant::now();
                let others: Vec<usize> = (0..NODES).filter(|&i| i != p).collect();
                let new_primary = wait_for("a primary while the old one is paused", || {
                    others
                        .iter()
                        .copied()
                        .find(|&i| matches!(nodes[i].health(), Some((r, _)) if r == "primary"))
                });
                signal(&nodes[p], "-CONT");
                assert_ne!(new_primary, p);
                // Writers blocked on the paused node get their answers now
                // (never an acknowledgement) and move on.
                paused_failover = Some(first_ack_after(stopped_at));
            }
            Fault::PartitionPrimary if !Partition::usable() => {
                eprintln!("partition fault skipped: iptables is not usable here");
            }
            Fault::PartitionPrimary => {
                // Cut off etcd (its own endpoint) and the replicas (its
                // replication port); clients still reach its MySQL port.
                let cut = Partition::cut(&[etcd.node_ports[p], nodes[p].replication_port]);
                let cut_at = Instant::now();
                let others: Vec<usize> = (0..NODES).filter(|&i| i != p).collect();
                let new_primary = wait_for("a primary on the majority side", || {
                    others
                        .iter()
                        .copied()
                        .find(|&i| matches!(nodes[i].health(), Some((r, _)) if r == "primary"))
                });
                assert_ne!(new_primary, p);
                partition_failover = Some(first_ack_after(cut_at));
                // Writers still reaching the cut-off primary get no
                // acknowledgement from it (it reaches no replica, and its
                // lease runs out): checked here for writes sent to it after
                // the cut, and at the end for every acknowledged row.
                let after = acks();
                wait_for("writes on the majority side", || {
                    (acks() > after + 50).then_some(())
                });
                {
                    let h = history.lock().unwrap();
                    partitioned_acks = h
                        .ack_times
                        .iter()
                        .filter(|a| a.sent > cut_at && a.node == p)
                        .count();
                }
                assert_eq!(
                    partitioned_acks, 0,
                    "the cut-off primary acknowledged writes"
                );
                // Its lease is gone (another node leads): it refuses a
                // write at once with 1290 and keeps serving reads of what
                // it holds (issue #16, "etcd unreachable").
                let mut cut_off =
                    Conn::new(nodes[p].opts()).expect("the cut-off primary's clients");
                let count: Option<i64> = cut_off
                    .query_first("SELECT COUNT(*) FROM jepsen.rows")
                    .expect("a read on the cut-off primary");
                assert!(count.is_some_and(|c| c > 0), "{count:?}");
                let refused_at = Instant::now();
                let refused = cut_off.query_drop("INSERT INTO jepsen.rows VALUES (-1, 0, 'cut')");
                assert_eq!(errno(refused), 1290);
                assert!(
                    refused_at.elapsed() < Duration::from_secs(1),
                    "a refusal, not a wait"
                );
                drop(cut);
            }
            Fault::RestartEtcd => {
                // The primary refuses writes once its lease may have
                // expired and resumes, without a restart, when etcd is back.
                etcd.proc = None;
                etcd.start();
                let back = Instant::now();
                first_ack_after(back);
                // The longest time without an acknowledged write, from the
                // kill until writes went on.
                let h = history.lock().unwrap();
                let mut last = fault_at;
                let mut gap = Duration::ZERO;
                let mut times: Vec<Instant> = h.ack_times.iter().map(|a| a.acked).collect();
                times.sort();
                for t in times.into_iter().filter(|t| *t > fault_at) {
                    gap = gap.max(t - last);
                    last = t;
                    if t > back {
                        break;
                    }
                }
                etcd_outage = Some(gap);
            }
        }
        // Every node settles: the old primary rejoins as a replica, or,
        // with a tail nobody else had (or lacking entries the primary no
        // longer keeps), re-bootstraps itself from a checkpoint of the
        // primary and then rejoins.
        // Settled: one primary, every other node a replica (an old primary
        // back from a pause or a partition still says "primary" until its
        // coordinator has seen the new leader; the next fault must not
        // pick it).
        wait_for("every node to settle", || {
            let roles: Vec<String> = nodes.iter().filter_map(|n| Some(n.health()?.0)).collect();
            let primaries = roles.iter().filter(|r| *r == "primary").count();
            let replicas = roles.iter().filter(|r| *r == "replica").count();
            (primaries == 1 && replicas == NODES - 1).then_some(())
        });
    }
    let before = acks();
    wait_for("writes after the last rejoin", || {
        (acks() > before + 50).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer thread");
    }

    // Every node converges to the primary's position.
    wait_for("every node to apply the primary's last entry", || {
        let positions: Vec<u64> = nodes
            .iter()
            .filter_map(|n| n.health().map(|h| h.1))
            .collect();
        (positions.len() == NODES && positions.iter().all(|p| *p == positions[0])).then_some(())
    });
    let h = history.lock().unwrap();
    let rebootstraps: usize = nodes
        .iter()
        .map(|n| {
            std::fs::read_to_string(&n.log)
                .unwrap_or_default()
                .matches("received the primary's checkpoint")
                .count()
        })
        .sum();
    assert_eq!(h.ryw_stale, 0, "reads that missed the session's own write");
    let mut reference: Option<(BTreeSet<i64>, BTreeMap<i64, i64>)> = None;
    for n in &nodes {
        let ids = ids_on(n);
        let lost: Vec<&i64> = h.acked.difference(&ids).collect();
        assert!(
            lost.is_empty(),
            "node {}: {} acknowledged rows missing (first {:?}); log:\n{}",
            n.id,
            lost.len(),
            lost.first(),
            n.log_tail()
        );
        let phantom: Vec<&i64> = ids.difference(&h.sent).collect();
        assert!(
            phantom.is_empty(),
            "node {}: rows never sent: {phantom:?}",
            n.id
        );
        let counts = counts_on(n);
        let mut recomputed = BTreeMap::new();
        for id in &ids {
            *recomputed.entry(id / 1_000_000_000).or_insert(0) += 1;
        }
        assert_eq!(
            counts, recomputed,
            "node {}: the view disagrees with its rows",
            n.id
        );
        match &reference {
            None => reference = Some((ids, counts)),
            Some((ref_ids, ref_counts)) => {
                assert_eq!(&ids, ref_ids, "node {} has other rows than node 1", n.id);
                assert_eq!(
                    &counts, ref_counts,
                    "node {}: view differs from node 1",
                    n.id
                );
            }
        }
    }
    // SHOW CLUSTER on every node lists the three members, one primary,
    // all at the same position.
    let final_position = nodes[0].health().map(|h| h.1).expect("node 1 answers");
    for n in &nodes {
        let mut c = Conn::new(n.opts()).expect("connect");
        let members = wait_for("SHOW CLUSTER to list every settled member", || {
            let rows: Vec<(u64, String, String, u64, u64, u32)> = c.query("SHOW CLUSTER").ok()?;
            (rows.len() == NODES && rows.iter().all(|r| r.3 == final_position)).then_some(rows)
        });
        let primaries = members.iter().filter(|r| r.2 == "primary").count();
        assert_eq!(primaries, 1, "node {}: SHOW CLUSTER {members:?}", n.id);
        assert!(members.iter().all(|r| r.4 == 0), "{members:?}");
        let protocol = ladle_cluster::PROTOCOL_VERSION;
        assert!(members.iter().all(|r| r.5 == protocol), "{members:?}");
    }
    let mut ms: Vec<u128> = failovers.iter().map(Duration::as_millis).collect();
    ms.sort_unstable();
    println!(
        "cluster: {} sent, {} acknowledged, {} refused (1290), {} outcome unknown; \
         {} rows on each of {NODES} nodes, 0 acknowledged lost; faults {FAULTS:?}, \
         {rebootstraps} re-bootstrap(s); failover ms (kill -9 to first ack) {:?}, \
         p50 {} max {}; SIGSTOP to first ack on the new primary {:?} ms; \
         etcd SIGKILL+restart: longest time without an ack {:?} ms; \
         read-your-writes: {} reads, {} stale; partition of the primary to first ack \
         on the majority side {:?} ms, acknowledgements by the cut-off node {}",
        h.sent.len(),
        h.acked.len(),
        h.refused,
        h.unknown,
        reference.map(|r| r.0.len()).unwrap_or(0),
        ms,
        ms[ms.len() / 2],
        ms[ms.len() - 1],
        paused_failover.map(|d| d.as_millis()),
        etcd_outage.map(|d| d.as_millis()),
        h.ryw_reads,
        h.ryw_stale,
        partition_failover.map(|d| d.as_millis()),
        partitioned_acks,
    );
}

/// etcd and `count` nodes (not started) in a fresh test directory, or
/// `None` (the test is skipped, with a message) without `etcd`.
struct Fixture {
    nodes: Vec<Node>,
    etcd: Etcd,
    _temp: tempfile::TempDir,
}

fn fixture(test: &str, count: usize) -> Option<Fixture> {
    if !etcd_installed() {
        eprintln!("SKIPPED {test}: `etcd` is not installed");
        return None;
    }
    let temp = test_dir();
    let etcd = start_etcd(temp.path());
    let nodes = (1..=count).map(|id| Node::new(id, temp.path())).collect();
    Some(Fixture {
        nodes,
        etcd,
        _temp: temp,
    })
}

/// A [`fixture`] of two nodes, started: node 1 the primary, node 2 its
/// replica (where most two-node tests begin).
fn primary_and_replica(test: &str) -> Option<Fixture> {
    primary_and_replicas(test, 2)
}

/// `n` nodes, node 1 the primary (started first, so it wins the first
/// election) and the others its replicas.
fn primary_and_replicas(test: &str, n: usize) -> Option<Fixture> {
    fixture(test, n).map(started)
}

/// The [`fixture`]'s nodes started (with the flags each was given): node
/// 1 the primary, the others its replicas.
fn started(mut f: Fixture) -> Fixture {
    let url = f.etcd.url();
    f.nodes[0].start(&url);
    wait_role(&f.nodes[0], "primary");
    for node in &mut f.nodes[1..] {
        node.start(&url);
    }
    for node in &f.nodes[1..] {
        wait_role(node, "replica");
    }
    f
}

/// The bits of a connection id below the id of the node that gave it out
/// (a node's connection ids are `node << 24 | n`).
const NODE_SHIFT: u32 = 24;

/// The replication listener reads nothing before its peer proves it holds
/// the cluster secret: a node started with another secret can neither
/// follow the primary nor forward a write to it (1290), a connection that
/// skips the handshake is refused, and the primary logs and counts each
/// refusal; nodes holding the secret replicate as usual.
#[test]
fn a_wrong_or_missing_cluster_secret_is_refused_and_logged() {
    let Some(Fixture {
        mut nodes,
        etcd,
        _temp,
    }) = fixture("secret test", 3)
    else {
        return;
    };
    let url = etcd.url();
    nodes[2].env = vec![(
        "LADLE_CLUSTER_SECRET".into(),
        "not the cluster's secret at all".into(),
    )];
    nodes[0].start(&url);
    wait_role(&nodes[0], "primary");
    nodes[1].start(&url);
    nodes[2].start(&url);
    wait_role(&nodes[1], "replica");
    let mut c = Conn::new(nodes[0].opts()).expect("connect to the primary");
    c.query_drop("CREATE DATABASE sec").unwrap();
    c.query_drop("CREATE TABLE sec.t (id INT PRIMARY KEY)")
        .unwrap();
    c.query_drop("INSERT INTO sec.t VALUES (1)").unwrap();

    // Node 3 tries to follow with the wrong secret: refused on both sides.
    wait_for("the primary to log the refusal", || {
        std::fs::read_to_string(&nodes[0].log)
            .ok()?
            .contains("replication connection refused: wrong cluster secret")
            .then_some(())
    });
    wait_for("node 3 to log the refusal", || {
        std::fs::read_to_string(&nodes[2].log)
            .ok()?
            .contains("replication authentication failed")
            .then_some(())
    });
    let (role, applied) = nodes[2].health().expect("node 3 answers");
    assert_ne!(role, "replica", "{}", nodes[2].log_tail());
    assert_eq!(applied, 0, "node 3 received no entry");
    // Its forwarded write cannot reach the primary either.
    let mut c3 = wait_for("a connection to node 3", || Conn::new(nodes[2].opts()).ok());
    match c3.query_drop("INSERT INTO sec.t VALUES (3)") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1290, "{e}"),
        other => panic!("a write through node 3: {other:?}"),
    }

    // A peer that skips the handshake gets the challenge, then a refusal.
    let refused_before = metric(&nodes[0], "ladle_cluster_auth_refused_total").unwrap_or(0.0);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let answer = rt.block_on(async {
        use ladle_cluster::protocol::{recv, send, ToPrimary, ToReplica};
        let addr = format!("127.0.0.1:{}", nodes[0].replication_port);
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let hello = ToPrimary::Hello {
            node: 9,
            applied: 0,
            ddl_seq: 0,
            last_term: 0,
        };
        send(&mut s, &hello).await.expect("send");
        let challenge = recv::<ToReplica>(&mut s).await.expect("challenge");
        assert!(
            matches!(challenge, Some(ToReplica::Challenge { .. })),
            "{challenge:?}"
        );
        recv::<ToReplica>(&mut s).await.expect("answer")
    });
    match answer {
        Some(ladle_cluster::protocol::ToReplica::Reject { reason, .. }) => {
            assert!(
                reason.contains("no proof of the cluster secret"),
                "{reason}"
            )
        }
        other => panic!("a hello without a proof: {other:?}"),
    }
    wait_for("the refusal to be counted", || {
        (metric(&nodes[0], "ladle_cluster_auth_refused_total")? > refused_before).then_some(())
    });
    assert!(std::fs::read_to_string(&nodes[0].log)
        .unwrap_or_default()
        .contains("replication connection refused: no proof of the cluster secret"));

    // Nodes that hold the secret replicate as before.
    c.query_drop("INSERT INTO sec.t VALUES (2)").unwrap();
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    wait_for("node 2 to have both rows", || {
        let ids: Vec<i64> = c2.query("SELECT id FROM sec.t ORDER BY id").ok()?;
        (ids == vec![1, 2]).then_some(())
    });
}

/// The error code of a statement that must fail.
fn errno(result: Result<(), mysql::Error>) -> u16 {
    match result {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("expected a MySQL error, got {other:?}"),
    }
}

/// Accounts are replicated: a user created (and granted privileges) on
/// the primary, or through a replica (forwarded), logs in on every node
/// with the same password and privileges, which the primary checks for
/// statements forwarded on the user's behalf; after a failover the new
/// primary has them, and a REVOKE there reaches the other node.
#[test]
fn accounts_log_in_on_every_node_with_the_same_privileges_after_failover_too() {
    let Some(Fixture {
        mut nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replicas("accounts test", 3)
    else {
        return;
    };
    let mut c = Conn::new(nodes[0].opts()).expect("connect to the primary");
    for sql in [
        "CREATE DATABASE acc",
        "CREATE TABLE acc.t (id INT PRIMARY KEY)",
        "CREATE USER 'app'@'%' IDENTIFIED BY 'app-password'",
        "GRANT SELECT, INSERT ON acc.* TO 'app'@'%'",
    ] {
        c.query_drop(sql).unwrap();
    }
    // Through a replica: CREATE USER and GRANT run on the primary.
    let mut c3 = Conn::new(nodes[2].opts()).expect("connect to node 3");
    c3.query_drop("CREATE USER 'reader'@'%' IDENTIFIED BY 'reader-password'")
        .unwrap();
    c3.query_drop("GRANT SELECT ON acc.t TO 'reader'@'%'")
        .unwrap();
    let grants = |c: &mut Conn, account: &str| -> Vec<String> {
        c.query(format!("SHOW GRANTS FOR {account}"))
            .expect("SHOW GRANTS")
    };
    let app_grants = grants(&mut c, "'app'@'%'");
    let reader_grants = grants(&mut c, "'reader'@'%'");
    assert!(
        reader_grants
            .iter()
            .any(|g| g.contains("SELECT ON `acc`.`t`")),
        "the GRANT sent to a replica ran on the primary: {reader_grants:?}"
    );

    for n in &nodes {
        let mut app = wait_for("app to log in", || {
            Conn::new(n.opts_as("app", "app-password")).ok()
        });
        assert_eq!(grants(&mut c3, "'app'@'%'"), app_grants);
        assert_eq!(
            grants(&mut app, "CURRENT_USER"),
            app_grants,
            "node {}",
            n.id
        );
        let id = n.id as i64;
        app.query_drop(format!("INSERT INTO acc.t VALUES ({id})"))
            .unwrap();
        assert_eq!(
            errno(app.query_drop(format!("DELETE FROM acc.t WHERE id = {id}"))),
            1142,
            "node {}: app has no DELETE",
            n.id
        );
        let mut reader = Conn::new(n.opts_as("reader", "reader-password")).expect("reader");
        assert_eq!(
            errno(reader.query_drop("INSERT INTO acc.t VALUES (100)")),
            1142,
            "node {}: a forwarded write is checked as its user",
            n.id
        );
        let wrong = Conn::new(n.opts_as("app", "not-the-password"));
        assert!(
            matches!(wrong, Err(mysql::Error::MySqlError(ref e)) if e.code == 1045),
            "node {}: {wrong:?}",
            n.id
        );
    }

    // Failover: the new primary has the accounts, and its REVOKE reaches
    // the remaining replica.
    nodes[0].kill9();
    let p = wait_for("a new primary", || primary(&nodes[1..])) + 1;
    let other = if p == 1 { 2 } else { 1 };
    let mut app = wait_for("app on the new primary", || {
        Conn::new(nodes[p].opts_as("app", "app-password")).ok()
    });
    wait_for("a write by app on the new primary", || {
        app.query_drop("INSERT INTO acc.t VALUES (10)").ok()
    });
    let mut root_p = Conn::new(nodes[p].opts()).expect("root on the new primary");
    root_p
        .query_drop("REVOKE INSERT ON acc.* FROM 'app'@'%'")
        .unwrap();
    let revoked = grants(&mut root_p, "'app'@'%'");
    assert_ne!(revoked, app_grants);
    let mut root_o = Conn::new(nodes[other].opts()).expect("root on the replica");
    wait_for("the REVOKE on the replica", || {
        (grants(&mut root_o, "'app'@'%'") == revoked).then_some(())
    });
    let mut app_o = Conn::new(nodes[other].opts_as("app", "app-password")).expect("app");
    assert_eq!(
        errno(app_o.query_drop("INSERT INTO acc.t VALUES (11)")),
        1142
    );
    let ids: Vec<i64> = app_o.query("SELECT id FROM acc.t ORDER BY id").unwrap();
    assert!(ids.starts_with(&[1, 2, 3]) && !ids.contains(&11), "{ids:?}");
}

/// A schema change and its record for replicas are one batch: the primary
/// aborted (as by kill -9) right after a CREATE TABLE ran, before it noted
/// the record (LADLE_TEST_CRASH_AFTER_DDL), comes back with the table and
/// its record, so a replica that joins later replays the CREATE TABLE and
/// then applies the rows written to it. (With the record written after the
/// change, the replica never got the table and stalled on those rows.)
#[test]
fn a_crash_right_after_a_schema_change_keeps_its_record_for_replicas() {
    let Some(Fixture {
        mut nodes,
        etcd,
        _temp,
    }) = primary_crashed_after(
        "schema-record crash test",
        &["CREATE DATABASE d"],
        "CREATE TABLE d.crash_here (id INT PRIMARY KEY)",
    )
    else {
        return;
    };
    let mut c = Conn::new(nodes[0].opts()).expect("connect again");
    c.query_drop("INSERT INTO d.crash_here VALUES (1), (2)")
        .unwrap();
    nodes[1].start(&etcd.url());
    wait_role(&nodes[1], "replica");
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    wait_for("node 2 to hold the table's rows", || {
        let ids: Vec<i64> = c2.query("SELECT id FROM d.crash_here ORDER BY id").ok()?;
        (ids == vec![1, 2]).then_some(())
    });
}

/// An account statement and the account list record for replicas are one
/// batch: the primary aborted (as by kill -9) right after a CREATE USER
/// stored the new list, before it noted the record (LADLE_TEST_CRASH_AFTER_DDL
/// matching the user's name in the list), comes back with both, so a
/// replica that joins later installs the list and the user logs in there.
/// (With the record written after the list, the replica never got it.)
#[test]
fn a_crash_right_after_an_account_statement_keeps_its_record_for_replicas() {
    let Some(Fixture {
        mut nodes,
        etcd,
        _temp,
    }) = primary_crashed_after(
        "account-record crash test",
        &[],
        "CREATE USER 'crash_here'@'%' IDENTIFIED BY 'crash-password'",
    )
    else {
        return;
    };
    nodes[1].start(&etcd.url());
    wait_role(&nodes[1], "replica");
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    wait_for("node 2 to hold the account", || {
        c2.query::<String, _>("SHOW GRANTS FOR 'crash_here'@'%'")
            .ok()
    });
    let mut user = Conn::new(nodes[1].opts_as("crash_here", "crash-password"))
        .expect("crash_here logs in on node 2");
    let me: String = user.query_first("SELECT CURRENT_USER()").unwrap().unwrap();
    assert_eq!(me, "crash_here@%");
}

/// Two nodes, the first a primary alone (`--sync-replicas 0`) that ran
/// `setup`, then aborted (LADLE_TEST_CRASH_AFTER_DDL = "crash_here") right
/// after `statement`, which names "crash_here", ran and before it noted
/// the statement's record; restarted, it is the primary again.
fn primary_crashed_after(test: &str, setup: &[&str], statement: &str) -> Option<Fixture> {
    let mut f = fixture(test, 2)?;
    let url = f.etcd.url();
    let node = &mut f.nodes[0];
    node.args = vec!["--sync-replicas".into(), "0".into()];
    node.env = vec![("LADLE_TEST_CRASH_AFTER_DDL".into(), "crash_here".into())];
    node.start(&url);
    wait_role(node, "primary");
    let mut c = Conn::new(node.opts()).expect("connect");
    for sql in setup {
        c.query_drop(*sql).unwrap();
    }
    assert!(
        c.query_drop(statement).is_err(),
        "the node aborts after {statement}"
    );
    let child = &mut node.proc.as_mut().expect("started").0;
    wait_for("node 1 to abort", || child.try_wait().ok().flatten());
    node.env.clear();
    node.start(&url);
    wait_role(node, "primary");
    Some(f)
}

/// A replica applies the primary's ALTER TABLE (a row rewrite: dropped,
/// moved and converted columns, a new UNIQUE key) and RENAME TABLE at the
/// same place in the change log: rows written before and after it arrive
/// in the right shape. An ALTER run under a non-strict `sql_mode` is
/// replayed under it too.
#[test]
fn a_replica_applies_the_primarys_alter_table() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("ALTER TABLE replication test")
    else {
        return;
    };
    let mut c = Conn::new(nodes[0].opts()).expect("connect");
    for sql in [
        "CREATE DATABASE mig",
        "CREATE TABLE mig.t (id INT PRIMARY KEY, a VARCHAR(10), b INT)",
        "INSERT INTO mig.t VALUES (1, '10', 5), (2, '20', 6)",
        "ALTER TABLE mig.t DROP COLUMN b, MODIFY a INT NOT NULL FIRST, ADD UNIQUE KEY ua (a)",
        "RENAME TABLE mig.t TO mig.u",
        "INSERT INTO mig.u VALUES (30, 3)",
        // Run under the session's sql_mode, which the replica must share:
        // not strict, the ALTER truncates (a warning) where strict fails.
        "CREATE TABLE mig.s (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO mig.s VALUES (1, 'abcdefghij')",
        "SET SESSION sql_mode = ''",
        "ALTER TABLE mig.s MODIFY v VARCHAR(3)",
        "SET SESSION sql_mode = DEFAULT",
        "INSERT INTO mig.s VALUES (2, 'xyz')",
        // A view's CHECK OPTION, which the shim takes off the text before
        // parsing, reaches the replica too.
        "CREATE VIEW mig.big AS SELECT id, a FROM mig.u WHERE a > 5 WITH LOCAL CHECK OPTION",
    ] {
        c.query_drop(sql).unwrap();
    }
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    wait_for("node 2 to hold the altered table's rows", || {
        let rows: Vec<(i64, i64)> = c2.query("SELECT * FROM mig.u ORDER BY id").ok()?;
        (rows == vec![(10, 1), (20, 2), (30, 3)]).then_some(())
    });
    let id: Option<i64> = c2.query_first("SELECT id FROM mig.u WHERE a = 20").unwrap();
    assert_eq!(id, Some(2));
    wait_for("node 2 to apply the non-strict ALTER", || {
        let rows: Vec<(i64, String)> = c2.query("SELECT * FROM mig.s ORDER BY id").ok()?;
        (rows == vec![(1, "abc".to_string()), (2, "xyz".to_string())]).then_some(())
    });
    wait_for("node 2 to know the view's CHECK OPTION", || {
        let option: Option<String> = c2
            .query_first(
                "SELECT CHECK_OPTION FROM information_schema.VIEWS WHERE TABLE_NAME = 'big'",
            )
            .ok()?;
        (option.as_deref() == Some("LOCAL")).then_some(())
    });
    // Written through the replica (forwarded), the check holds.
    let refused = c2.query_drop("INSERT INTO mig.big VALUES (4, 1)");
    assert_eq!(errno(refused), 1369);
    metrics_show_roles_positions_and_lag(&nodes[0], &nodes[1]);
    recursive_ctes_run_on_the_primary_and_on_a_replica(&mut c, &mut c2);
    forwarded_statements_run_on_statement_threads(&nodes[0], &nodes[1]);
}

/// Statements a replica forwards run on the primary's statement threads
/// (`ladle-statement`), as its own clients' statements do, not on tokio's
/// blocking pool (the `ladle-worker` threads), which grows past the
/// statements in flight under a contended CPU: while four forwarded
/// SLEEPs run at once (each in a transaction with a write, so its reads go
/// to the primary too), the primary has at least four statement threads
/// (its own clients here ran one statement at a time).
fn forwarded_statements_run_on_statement_threads(primary: &Node, replica: &Node) {
    const SESSIONS: usize = 4;
    let pid = primary.proc.as_ref().expect("a running primary").0.id();
    let statement_threads = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("the primary's threads")
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim_end() == "ladle-statement")
            .count()
    };
    let barrier = Arc::new(std::sync::Barrier::new(SESSIONS + 1));
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|k| {
            let (opts, barrier) = (replica.opts(), barrier.clone());
            std::thread::spawn(move || {
                let mut c = Conn::new(opts).expect("connect to the replica");
                c.query_drop("BEGIN").unwrap();
                c.query_drop(format!("INSERT INTO mig.s VALUES ({}, 'f')", 100 + k))
                    .unwrap();
                barrier.wait();
                let slept: Option<i64> = c.query_first("SELECT SLEEP(2)").unwrap();
                c.query_drop("ROLLBACK").unwrap();
                slept
            })
        })
        .collect();
    barrier.wait();
    let most = (0..15)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            statement_threads()
        })
        .max()
        .unwrap_or(0);
    for s in sessions {
        assert_eq!(s.join().expect("a forwarding session"), Some(0));
    }
    assert!(
        most >= SESSIONS,
        "{most} statement threads on the primary while {SESSIONS} forwarded statements ran"
    );
}

/// WITH RECURSIVE on a cluster (`primary`, and `replica` following it):
/// each node answers from its own data (the replica from what it has
/// applied); a write with a recursive CTE sent to the replica is forwarded,
/// computed on the primary, and read back on the replica; and the tables
/// created afterwards (on the primary, and through the replica) get the
/// same ids on both nodes, so their rows replicate: the CTE's scratch
/// tables took no id the schema log assigns (before, WITH RECURSIVE was
/// refused on cluster nodes, 1235).
fn recursive_ctes_run_on_the_primary_and_on_a_replica(primary: &mut Conn, replica: &mut Conn) {
    for sql in [
        "CREATE TABLE mig.tree (id INT PRIMARY KEY, parent INT)",
        "INSERT INTO mig.tree VALUES (1, NULL), (2, 1), (3, 2), (4, 1), (5, 9)",
    ] {
        primary.query_drop(sql).unwrap();
    }
    let below_1 = "WITH RECURSIVE sub (id, depth) AS (\
                   SELECT id, 0 FROM mig.tree WHERE id = 1 \
                   UNION ALL SELECT t.id, sub.depth + 1 FROM mig.tree t JOIN sub ON t.parent = sub.id) \
                   SELECT id, depth FROM sub ORDER BY id";
    let want: Vec<(i64, i64)> = vec![(1, 0), (2, 1), (3, 2), (4, 1)];
    assert_eq!(primary.query::<(i64, i64), _>(below_1).unwrap(), want);
    let got = wait_for("the replica to answer the recursive CTE", || {
        let rows: Vec<(i64, i64)> = replica.query(below_1).ok()?;
        (rows == want).then_some(rows)
    });
    assert_eq!(got, want);
    // Forwarded: it writes. (Its scratch table needs a current database:
    // its SELECT names none.)
    replica.query_drop("USE mig").unwrap();
    replica
        .query_drop(
            "INSERT INTO mig.tree WITH RECURSIVE n (k) AS \
             (SELECT 10 UNION ALL SELECT k + 1 FROM n WHERE k < 12) SELECT k, 4 FROM n",
        )
        .unwrap();
    let want: Vec<(i64, i64)> = vec![(1, 0), (2, 1), (3, 2), (4, 1), (10, 2), (11, 2), (12, 2)];
    // Read-your-writes on the replica, then the same on the primary.
    assert_eq!(replica.query::<(i64, i64), _>(below_1).unwrap(), want);
    assert_eq!(primary.query::<(i64, i64), _>(below_1).unwrap(), want);
    // Tables made after the CTEs: their rows reach the replica.
    for sql in [
        "CREATE TABLE mig.after_primary (id INT PRIMARY KEY)",
        "INSERT INTO mig.after_primary VALUES (1), (2)",
    ] {
        primary.query_drop(sql).unwrap();
    }
    for sql in [
        "CREATE TABLE mig.after_replica (id INT PRIMARY KEY)",
        "INSERT INTO mig.after_replica VALUES (3)",
    ] {
        replica.query_drop(sql).unwrap();
    }
    let both = "SELECT id FROM mig.after_primary UNION ALL SELECT id FROM mig.after_replica";
    let want: Vec<i64> = vec![1, 2, 3];
    let mut got: Vec<i64> = replica.query(both).unwrap();
    got.sort_unstable();
    // (Its read waited for its own write, made after the primary's.)
    assert_eq!(got, want, "on the replica");
    let mut got: Vec<i64> = primary.query(both).unwrap();
    got.sort_unstable();
    assert_eq!(got, want, "on the primary");
}

/// `/metrics` of a settled primary and its replica (issue #16,
/// "Observable"): each node's role and the same term, the applied
/// positions equal, the primary's acknowledged position at its last write
/// (the last statement was an INSERT), the replica's lag (entries and
/// seconds) 0, and the election the primary won.
fn metrics_show_roles_positions_and_lag(primary: &Node, replica: &Node) {
    let role = |n: &Node, r: &str| metric(n, &format!("ladle_cluster_role{{role=\"{r}\"}}"));
    assert_eq!(role(primary, "primary"), Some(1.0));
    assert_eq!(role(primary, "replica"), Some(0.0));
    assert_eq!(role(replica, "replica"), Some(1.0));
    let term = metric(primary, "ladle_cluster_term").expect("term");
    assert!(term >= 1.0, "term {term}");
    assert_eq!(metric(replica, "ladle_cluster_term"), Some(term));
    assert!(metric(primary, "ladle_cluster_elections_won_total").is_some_and(|e| e >= 1.0));
    let lag = format!("{{replica=\"{}\"}}", replica.id);
    let settled = wait_for("the metrics to show the replica caught up", || {
        let applied = metric(primary, "ladle_cluster_applied_lsn")?;
        let settled = applied > 0.0
            && metric(replica, "ladle_cluster_applied_lsn")? == applied
            && metric(primary, "ladle_cluster_acknowledged_lsn")? == applied
            && metric(primary, &format!("ladle_cluster_replica_lag_entries{lag}"))? == 0.0
            && metric(primary, &format!("ladle_cluster_replica_lag_seconds{lag}"))? == 0.0;
        settled.then_some(applied)
    });
    eprintln!("metrics: term {term}, applied = acknowledged = {settled}, lag 0");
}

/// Without --etcd a server is a single node, as before: /health says "ok",
/// writes are taken, and SHOW CLUSTER says there is no cluster (1235).
#[test]
fn a_server_without_etcd_is_a_single_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = Node::new(1, dir.path());
    node.start_with(None);
    let metrics_port = node.metrics_port;
    let health = wait_for("the server to be ready", || {
        http_get(metrics_port, "/health").filter(|r| r.starts_with("HTTP/1.1 200"))
    });
    assert!(health.ends_with("ok\n"), "{health}");
    let mut c = wait_for("a connection", || Conn::new(node.opts()).ok());
    c.query_drop("CREATE DATABASE single").unwrap();
    c.query_drop("CREATE TABLE single.t (id INT PRIMARY KEY)")
        .unwrap();
    c.query_drop("INSERT INTO single.t VALUES (1)").unwrap();
    match c.query_drop("SHOW CLUSTER") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1235, "{e}"),
        other => panic!("SHOW CLUSTER on a single node: {other:?}"),
    }
}

/// The test's files; LADLE_CLUSTER_TEST_KEEP=1 keeps them (logs, data)
/// for a post-mortem.
fn test_dir() -> tempfile::TempDir {
    let mut temp = tempfile::tempdir().expect("tempdir");
    if std::env::var("LADLE_CLUSTER_TEST_KEEP").as_deref() == Ok("1") {
        temp.disable_cleanup(true);
        eprintln!("cluster test files kept in {}", temp.path().display());
    }
    temp
}

/// A loopback port free right now (etcd's: it cannot say which port 0
/// gave it, so it is handed ports found free; see [`start_etcd`]).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// etcd on fresh loopback ports under `root`, started. A port
/// [`free_port`] found free can be taken before etcd binds it (another
/// test's server, or any outgoing connection's ephemeral port: the tests
/// run side by side); etcd then exits, and is started again on other
/// ports with a fresh data directory.
fn start_etcd(root: &std::path::Path) -> Etcd {
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(root.join("etcd"));
        let mut etcd = Etcd {
            dir: root.to_path_buf(),
            client: free_port(),
            node_ports: (0..NODES).map(|_| free_port()).collect(),
            peer: free_port(),
            proc: None,
        };
        if etcd.try_start() {
            return etcd;
        }
    }
    panic!(
        "etcd did not start on five sets of free ports (see {})",
        root.join("etcd.log").display()
    );
}

/// Everything a statement answered, as one line: the rows, or affected
/// rows, insert id, info and warning count, or the error; then SHOW
/// WARNINGS. `table` is written as `T` so that two tables' transcripts
/// compare.
fn transcript(c: &mut Conn, sql: &str, table: &str) -> String {
    let text = sql.replace("{T}", table);
    let mut line = match c.query_iter(&text) {
        Ok(mut result) => {
            // (Read before the rows: they belong to the current result.)
            let done = format!(
                "affected={} id={} info={:?} warnings={}",
                result.affected_rows(),
                result.last_insert_id().unwrap_or(0),
                result.info_str(),
                result.warnings(),
            );
            let mut rows = Vec::new();
            for row in result.by_ref() {
                let row = row.expect("a row");
                let cells: Vec<String> = row.unwrap().into_iter().map(|v| v.as_sql(true)).collect();
                rows.push(cells.join(","));
            }
            format!("ok {done} rows=[{}]", rows.join(" | "))
        }
        Err(mysql::Error::MySqlError(e)) => format!("error {} {}", e.code, e.message),
        Err(e) => panic!("{text}: {e}"),
    };
    let warnings: Vec<(String, u32, String)> = c.query("SHOW WARNINGS").expect("SHOW WARNINGS");
    line.push_str(&format!(" show-warnings={warnings:?}"));
    format!("{sql} => {}", line.replace(table, "T"))
}

/// Write forwarding and read-your-writes across nodes: a session on a
/// replica runs writes, DDL and a transaction with writes as if it were on
/// the primary (each answer equals the same statement's answer on the
/// primary, session state carried: database, sql_mode, autocommit, time
/// zone), and reads its own writes on that replica although the replica
/// applies each entry late (LADLE_REPLICATION_APPLY_DELAY_MS); with a
/// read-your-writes timeout shorter than that delay the read fails with
/// 1205 instead of answering stale.
#[test]
fn a_replica_forwards_writes_and_reads_its_own() {
    if !etcd_installed() {
        eprintln!("SKIPPED forwarding test: `etcd` is not installed");
        return;
    }
    let temp = test_dir();
    let root = temp.path();
    let etcd = start_etcd(root);
    let url = etcd.url();
    let mut nodes: Vec<Node> = (1..=3).map(|id| Node::new(id, root)).collect();
    let (mut direct, mut forwarded) = start_with_a_late_replica(&mut nodes, &url);
    // DDL through the replica; its next statement sees the new schema.
    for ddl in [
        "CREATE DATABASE fwd",
        "CREATE TABLE fwd.t_fwd (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5), \
         n INT UNIQUE, ts TIMESTAMP NULL)",
    ] {
        forwarded.query_drop(ddl).expect(ddl);
    }
    forwarded
        .query_drop("SELECT COUNT(*) FROM fwd.t_fwd")
        .expect("the table, on the replica, after its forwarded CREATE");
    direct
        .query_drop(
            "CREATE TABLE fwd.t_direct (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5), \
             n INT UNIQUE, ts TIMESTAMP NULL)",
        )
        .expect("the primary's own table");
    let script = [
        "USE fwd",
        "SET sql_mode = ''",
        "INSERT INTO {T} (v, n) VALUES ('abcdefgh', 1)",
        "SELECT LAST_INSERT_ID()",
        "SET sql_mode = 'STRICT_TRANS_TABLES'",
        "INSERT INTO {T} (v, n) VALUES ('abcdefgh', 2)",
        "INSERT INTO {T} (v, n) VALUES ('a', 2), ('b', 3)",
        "INSERT INTO {T} (v, n) VALUES ('c', 3)",
        "UPDATE {T} SET v = 'z' WHERE n >= 2",
        "SELECT ROW_COUNT()",
        "SET @n = 7",
        "INSERT INTO {T} (v, n) VALUES ('var', @n)",
        "INSERT INTO {T} (v, n) VALUES ('r', 10) RETURNING id, v",
        "DELETE FROM {T} WHERE n = 10 RETURNING n",
        "SELECT id, v, n FROM {T} ORDER BY id",
        "SET time_zone = '+05:00'",
        "INSERT INTO {T} (v, n, ts) VALUES ('tz', 30, '2020-01-01 00:00:00')",
        "SET time_zone = '+00:00'",
        "SELECT ts FROM {T} WHERE n = 30",
        "BEGIN",
        "INSERT INTO {T} (v, n) VALUES ('tx', 20)",
        "SELECT COUNT(*) FROM {T} WHERE n = 20",
        "ROLLBACK",
        "SELECT COUNT(*) FROM {T} WHERE n = 20",
        "START TRANSACTION",
        "INSERT INTO {T} (v, n) VALUES ('tx', 21)",
        "UPDATE {T} SET v = 'tx2' WHERE n = 21",
        "COMMIT",
        "SELECT v FROM {T} WHERE n = 21",
        "SET autocommit = 0",
        "INSERT INTO {T} (v, n) VALUES ('ac', 22)",
        "COMMIT",
        "INSERT INTO {T} (v, n) VALUES ('ac', 23)",
        "ROLLBACK",
        "SET autocommit = 1",
        "SELECT id, v, n FROM {T} ORDER BY id",
    ];
    for sql in script {
        let want = transcript(&mut direct, sql, "t_direct");
        let got = transcript(&mut forwarded, sql, "t_fwd");
        assert_eq!(got, want, "through the replica vs on the primary");
    }
    // Prepared statements too.
    let insert = forwarded
        .prep("INSERT INTO fwd.t_fwd (v, n) VALUES (?, ?)")
        .expect("prepare on the replica");
    forwarded
        .exec_drop(&insert, ("p", 40))
        .expect("a prepared INSERT forwarded");
    let id = forwarded.last_insert_id();
    let read = forwarded
        .prep("SELECT id FROM fwd.t_fwd WHERE n = ?")
        .expect("prepare a read");
    let seen: Option<u64> = forwarded.exec_first(&read, (40,)).expect("read it back");
    assert_eq!(seen, Some(id), "the prepared read saw the forwarded write");
    // A locking read through the replica locks the row on the primary,
    // and the rest of its transaction runs there until COMMIT.
    forwarded.query_drop("BEGIN").unwrap();
    let v: Option<String> = forwarded
        .query_first("SELECT v FROM fwd.t_fwd WHERE n = 40 FOR UPDATE")
        .expect("a forwarded locking read");
    assert_eq!(v.as_deref(), Some("p"));
    direct.query_drop("BEGIN").unwrap();
    let nowait = direct.query_drop("SELECT v FROM fwd.t_fwd WHERE n = 40 FOR UPDATE NOWAIT");
    assert_eq!(
        errno(nowait),
        3572,
        "the replica's lock is held on the primary"
    );
    direct.query_drop("ROLLBACK").unwrap();
    forwarded
        .query_drop("UPDATE fwd.t_fwd SET v = 'q' WHERE n = 40")
        .unwrap();
    forwarded.query_drop("COMMIT").unwrap();
    let v: Option<String> = direct
        .query_first("SELECT v FROM fwd.t_fwd WHERE n = 40 FOR UPDATE NOWAIT")
        .expect("released at the forwarded COMMIT");
    assert_eq!(v.as_deref(), Some("q"));
    let answered = metric(
        &nodes[2],
        "ladle_cluster_forwarded_total{outcome=\"answered\"}",
    );
    assert!(
        answered.is_some_and(|n| n > 0.0),
        "the replica counts what it forwarded: {answered:?}"
    );

    // A replica slower than the read-your-writes bound refuses the read.
    nodes[2].kill9();
    nodes[2].env = vec![("LADLE_REPLICATION_APPLY_DELAY_MS".into(), "1500".into())];
    nodes[2].args = vec!["--ryw-timeout-ms".into(), "100".into()];
    nodes[2].start(&url);
    let mut slow = wait_for("the slow replica to follow again", || {
        matches!(nodes[2].health(), Some((r, _)) if r == "replica")
            .then(|| Conn::new(nodes[2].opts()).ok())
            .flatten()
    });
    slow.query_drop("INSERT INTO fwd.t_fwd (v, n) VALUES ('late', 50)")
        .expect("forwarded");
    match slow.query_drop("SELECT COUNT(*) FROM fwd.t_fwd WHERE n = 50") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1205, "{e}"),
        other => panic!("a read that cannot see the session's write: {other:?}"),
    }
    let count = wait_for("the slow replica to apply the write", || {
        slow.query_first::<i64, _>("SELECT COUNT(*) FROM fwd.t_fwd WHERE n = 50")
            .ok()
            .flatten()
    });
    assert_eq!(count, 1);
    // The cost of forwarding (printed, not asserted): single-row
    // INSERTs on the primary and through the other replica, interleaved.
    let mut other = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let mut samples = (Vec::new(), Vec::new());
    for i in 0..200 {
        for (c, table, out) in [
            (&mut direct, "t_direct", &mut samples.0),
            (&mut other, "t_fwd", &mut samples.1),
        ] {
            let at = Instant::now();
            c.query_drop(format!(
                "INSERT INTO fwd.{table} (v, n) VALUES ('l', {})",
                1000 + i
            ))
            .expect("insert");
            out.push(at.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let pct = |v: &mut Vec<f64>, p: usize| {
        v.sort_by(f64::total_cmp);
        v[v.len() * p / 100]
    };
    println!(
        "forwarding: INSERT latency on the primary p50 {:.2} ms p99 {:.2} ms; \
         through a replica p50 {:.2} ms p99 {:.2} ms",
        pct(&mut samples.0, 50),
        pct(&mut samples.0, 99),
        pct(&mut samples.1, 50),
        pct(&mut samples.1, 99),
    );
    // Semi-synchronous DDL: with every replica paused, a schema change is
    // made on the primary but not acknowledged (1290, as a write would
    // be); with them back, the next one is.
    signal(&nodes[1], "-STOP");
    signal(&nodes[2], "-STOP");
    let unconfirmed = direct.query_drop("CREATE TABLE fwd.unconfirmed (a INT)");
    signal(&nodes[1], "-CONT");
    signal(&nodes[2], "-CONT");
    match unconfirmed {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1290, "{e}");
            assert!(e.message.contains("not acknowledged"), "{e}");
        }
        other => panic!("DDL with no replica to confirm it: {other:?}"),
    }
    direct
        .query_drop("CREATE TABLE fwd.confirmed (a INT)")
        .expect("DDL with the replicas back");
    // A forwarded transaction whose primary dies is lost: its next
    // statement gets 1290 (at once, not a hang) and the session is out of
    // the transaction; once a new primary is elected, writes through the
    // same session go on.
    // (Node 3 at full speed again: it may become the only replica.)
    nodes[2].kill9();
    nodes[2].env.clear();
    nodes[2].args.clear();
    nodes[2].start(&url);
    wait_role(&nodes[2], "replica");
    let mut tx = Conn::new(nodes[1].opts()).expect("connect to node 2");
    tx.query_drop("BEGIN").unwrap();
    tx.query_drop("INSERT INTO fwd.t_fwd (v, n) VALUES ('lost', 60)")
        .expect("forwarded inside a transaction");
    nodes[0].kill9();
    match tx.query_drop("COMMIT") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1290, "{e}"),
        other => panic!("COMMIT of a transaction on a dead primary: {other:?}"),
    }
    // (Each attempt a new row: a refused one may still have committed.)
    let mut attempt = 61;
    wait_for("a write through the session after the election", || {
        attempt += 1;
        let sql = format!("INSERT INTO fwd.t_fwd (v, n) VALUES ('after', {attempt})");
        match tx.query_drop(sql) {
            Ok(()) => Some(()),
            Err(mysql::Error::MySqlError(e)) if e.code == 1290 => None,
            Err(e) => panic!("a write during the election: {e}"),
        }
    });
    let lost: Option<i64> = tx
        .query_first("SELECT COUNT(*) FROM fwd.t_fwd WHERE n = 60")
        .unwrap();
    assert_eq!(lost, Some(0), "the lost transaction's write");
    drop(etcd);
}

/// The value of a counter or gauge on a node's /metrics.
fn metric(node: &Node, name: &str) -> Option<f64> {
    let resp = http_get(node.metrics_port, "/metrics")?;
    resp.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
}

/// The sum of a metric's values over its labels (`name{...} v` lines).
fn metric_sum(node: &Node, name: &str) -> Option<f64> {
    let resp = http_get(node.metrics_port, "/metrics")?;
    let prefix = format!("{name}{{");
    Some(
        resp.lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

/// A new replica that needs entries its primary no longer keeps
/// bootstraps from a checkpoint of the primary, streamed over the
/// replication connection, restarts itself over it (same pid), and then
/// follows the log: its rows and a view's result equal the primary's, and
/// writes made during and after the bootstrap arrive too. The primary's
/// view snapshot comes with the checkpoint: a key the primary had read is
/// a hit on the new node's first read (no miss, no upquery), while a key
/// it had not read is a miss. Prints the bootstrap time, both first reads
/// and the catch-up rate (LADLE_BOOTSTRAP_TEST_ROWS sets the table's size;
/// default 20,000 rows).
#[test]
fn a_new_replica_bootstraps_from_a_checkpoint() {
    if !etcd_installed() {
        eprintln!("SKIPPED bootstrap test: `etcd` is not installed");
        return;
    }
    let rows: i64 = std::env::var("LADLE_BOOTSTRAP_TEST_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let temp = test_dir();
    let root = temp.path();
    let etcd = start_etcd(root);
    let url = etcd.url();
    let mut nodes: Vec<Node> = (1..=2).map(|id| Node::new(id, root)).collect();
    for n in &mut nodes {
        n.args = vec!["--log-keep-entries".into(), "0".into()];
        n.env = vec![("LADLE_LOG_TRIM_INTERVAL_MS".into(), "200".into())];
    }
    nodes[0].args.extend(["--sync-replicas".into(), "0".into()]);
    nodes[0].start(&url);
    wait_role(&nodes[0], "primary");
    let mut c = Conn::new(nodes[0].opts()).expect("connect");
    c.query_drop("CREATE DATABASE boot").unwrap();
    c.query_drop(
        "CREATE TABLE boot.t (id BIGINT PRIMARY KEY, grp INT NOT NULL, note VARCHAR(64), KEY (grp))",
    )
    .unwrap();
    let load_started = Instant::now();
    let batch = 500;
    for start in (0..rows).step_by(batch) {
        let values: Vec<String> = (start..(start + batch as i64).min(rows))
            .map(|i| {
                format!(
                    "({i}, {}, 'row {i} of the bootstrap test, padded a little')",
                    i % 97
                )
            })
            .collect();
        c.query_drop(format!("INSERT INTO boot.t VALUES {}", values.join(",")))
            .unwrap();
    }
    let load = load_started.elapsed();
    // Views the primary holds, warm (key 5 read; key 6 never), and a
    // whole-table aggregate.
    let per_group = "SELECT COUNT(*) FROM boot.t WHERE grp = ?";
    let warm_before: i64 = c.exec_first(per_group, (5,)).unwrap().unwrap();
    let all_groups = "SELECT grp, COUNT(*) FROM boot.t GROUP BY grp";
    c.query_drop(all_groups).unwrap();
    // The primary's log is trimmed: a new node cannot catch up from it.
    let trims = metric(&nodes[0], "ladle_change_log_trims_total").unwrap_or(0.0);
    wait_for("the primary to trim its change log", || {
        (metric(&nodes[0], "ladle_change_log_trims_total")? > trims).then_some(())
    });
    let started = Instant::now();
    let pid = {
        nodes[1].start(&url);
        nodes[1].proc.as_ref().unwrap().0.id()
    };
    // Writes go on during the bootstrap.
    let mut during = 0;
    let replica_up = loop {
        c.query_drop(format!(
            "INSERT INTO boot.t VALUES ({}, 1, 'during')",
            rows + during
        ))
        .unwrap();
        during += 1;
        if matches!(nodes[1].health(), Some((r, _)) if r == "replica") {
            break started.elapsed();
        }
        assert!(started.elapsed() < PATIENCE, "the new node never followed");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        nodes[1].proc.as_ref().unwrap().0.id(),
        pid,
        "restarted in place"
    );
    let sent = metric(&nodes[0], "ladle_cluster_bootstraps_sent_total");
    assert!(sent.is_some_and(|n| n >= 1.0), "{sent:?}");
    let log = std::fs::read_to_string(&nodes[1].log).unwrap_or_default();
    assert!(
        log.contains("received the primary's checkpoint") && log.contains("re-bootstrapped"),
        "the node says it bootstrapped:\n{}",
        nodes[1].log_tail()
    );
    // The first reads on the new node: the shipped key is warm.
    let mut c1 = Conn::new(nodes[1].opts()).expect("connect to the new node");
    let misses = |n: &Node| metric_sum(n, "ladle_view_misses").unwrap_or(0.0);
    let keyed = c1.prep(per_group).unwrap();
    let before = misses(&nodes[1]);
    let read = Instant::now();
    let warm: i64 = c1.exec_first(&keyed, (5,)).unwrap().unwrap();
    let warm_read = read.elapsed();
    let after_warm = misses(&nodes[1]);
    assert!(warm >= warm_before, "{warm} < {warm_before}");
    assert_eq!(
        after_warm,
        before,
        "the key the primary had read is warm on the bootstrapped node:\n{}",
        nodes[1].log_tail()
    );
    let read = Instant::now();
    let _cold: i64 = c1.exec_first(&keyed, (6,)).unwrap().unwrap();
    let cold_read = read.elapsed();
    assert!(
        misses(&nodes[1]) > after_warm,
        "a key never read on the primary is a miss"
    );
    // The whole-table aggregate: shipped (warm) against the same work in
    // a view the primary never had (cold: computed from the base table).
    let read = Instant::now();
    c1.query_drop(all_groups).unwrap();
    let warm_all = read.elapsed();
    let read = Instant::now();
    c1.query_drop("SELECT grp, COUNT(id) FROM boot.t GROUP BY grp")
        .unwrap();
    let cold_all = read.elapsed();
    drop(c1);
    // Catch-up from the log after the checkpoint: the replica paused (for
    // less than its lease, so it stays a member) while single-row writes
    // pile up, then resumed.
    let from = nodes[1].health().expect("the replica answers").1;
    signal(&nodes[1], "-STOP");
    let paused = Instant::now();
    let mut burst = 0;
    while paused.elapsed() < Duration::from_millis(1500) {
        c.query_drop(format!(
            "INSERT INTO boot.t VALUES ({}, 2, 'after')",
            rows + 1_000_000 + burst
        ))
        .unwrap();
        burst += 1;
    }
    let target = nodes[0].health().expect("primary answers").1;
    signal(&nodes[1], "-CONT");
    let resumed = Instant::now();
    wait_for("the replica to catch up", || {
        (nodes[1].health()?.1 >= target).then_some(())
    });
    let caught_up = resumed.elapsed();
    let check = |n: &Node| {
        let mut c = Conn::new(n.opts()).expect("connect");
        let count: i64 = c
            .query_first("SELECT COUNT(*) FROM boot.t")
            .unwrap()
            .unwrap();
        let groups: Vec<(i64, i64)> = c
            .query("SELECT grp, COUNT(*) FROM boot.t GROUP BY grp ORDER BY grp")
            .unwrap();
        (count, groups)
    };
    let (count, groups) = check(&nodes[0]);
    assert_eq!(count, rows + during + burst);
    assert_eq!(
        check(&nodes[1]),
        (count, groups),
        "the bootstrapped replica"
    );
    let mb = walk_size(&nodes[0].data.join("db")) as f64 / 1e6;
    println!(
        "bootstrap: {rows} rows loaded in {:.1} s; the primary's db {mb:.1} MB; new node \
         started to replica in {:.2} s ({during} writes meanwhile); its first read of a key \
         shipped warm {:.1} ms, of a cold key {:.1} ms; of a whole-table GROUP BY shipped \
         warm {:.1} ms, cold {:.1} ms; catch-up: {} entries \
         behind, applied in {:.2} s after a pause ({:.0} entries/s)",
        load.as_secs_f64(),
        replica_up.as_secs_f64(),
        warm_read.as_secs_f64() * 1e3,
        cold_read.as_secs_f64() * 1e3,
        warm_all.as_secs_f64() * 1e3,
        cold_all.as_secs_f64() * 1e3,
        target - from,
        caught_up.as_secs_f64(),
        (target - from) as f64 / caught_up.as_secs_f64(),
    );
    drop(etcd);
}

/// Bytes of the files under `dir`.
fn walk_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk_size(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The names of database `db`'s tables `node` lists to a client, in
/// SHOW TABLES and in `information_schema.tables`, sorted.
fn listed_tables(node: &Node, db: &str) -> Option<(Vec<String>, Vec<String>)> {
    let mut c = Conn::new(node.opts()).ok()?;
    let mut shown: Vec<String> = c.query(format!("SHOW TABLES FROM {db}")).ok()?;
    let mut schema: Vec<String> = c
        .query(format!(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = '{db}'"
        ))
        .ok()?;
    shown.sort();
    schema.sort();
    Some((shown, schema))
}

/// TEMPORARY tables across a failover (issue #16). Two clients of the
/// replica each create a temporary `u` (forwarded: each forwarding
/// session on the primary has a connection id of its own, so neither gets
/// 1050), a client of the primary creates a temporary `t`; the primary is
/// killed (-9). The new primary drops every temporary table through the
/// schema log (no live session owns one: their sessions were on the dead
/// primary), so no node keeps one: not the new primary, and not the old
/// one once it is back as a replica and has applied the drops, even after
/// a restart (each node's registry of temporary tables is in memory, and
/// a restarted node listed what it still held). The replica's client
/// whose forwarding session died gets 1146 for its `u`, as after a
/// reconnect in MySQL, and a new session on the new primary with any
/// connection id creates its own `t`, empty. WITH RECURSIVE still runs on
/// both nodes after the failover; a restart of the whole cluster brings
/// back no temporary table either.
#[test]
fn temporary_tables_do_not_outlive_a_failover() {
    let Some(Fixture {
        mut nodes,
        etcd,
        _temp,
    }) = fixture("temporary tables failover test", 2)
    else {
        return;
    };
    let url = etcd.url();
    // Alone after the failover, the new primary must acknowledge writes.
    for node in nodes.iter_mut() {
        node.args = vec!["--sync-replicas".into(), "0".into()];
    }
    nodes[0].start(&url);
    wait_role(&nodes[0], "primary");
    nodes[1].start(&url);
    wait_role(&nodes[1], "replica");
    let mut p = Conn::new(nodes[0].opts()).expect("connect to node 1");
    for sql in [
        "CREATE DATABASE d",
        "CREATE TABLE d.base (id INT PRIMARY KEY)",
        "USE d",
        "CREATE TEMPORARY TABLE t (a INT)",
        "INSERT INTO t VALUES (1)",
    ] {
        p.query_drop(sql).unwrap();
    }
    let mut r1 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let mut r2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    for r in [&mut r1, &mut r2] {
        wait_for("node 2 to hold database d", || r.query_drop("USE d").ok());
        r.query_drop("CREATE TEMPORARY TABLE u (a INT)")
            .expect("each forwarded session has a temporary u of its own");
        r.query_drop("INSERT INTO u VALUES (2)").unwrap();
    }
    p.query_drop("INSERT INTO base VALUES (1)").unwrap();
    let before = (vec!["base".to_string()], vec!["base".to_string()]);
    wait_for("node 2 to apply everything", || {
        let mut c = Conn::new(nodes[1].opts()).ok()?;
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM d.base").ok()?;
        (n == Some(1)).then_some(())
    });
    assert_eq!(listed_tables(&nodes[1], "d"), Some(before.clone()));

    nodes[0].kill9();
    wait_role(&nodes[1], "primary");
    let errno_of = |r: &mut Conn, sql: &str| errno(r.query_drop(sql));
    assert_eq!(errno_of(&mut r1, "INSERT INTO u VALUES (3)"), 1146);
    assert_eq!(errno_of(&mut r2, "SELECT * FROM u"), 1146);
    // Node 2's connection ids, from 1: one of them is t's owner's on node 1.
    for _ in 0..4 {
        let mut c = Conn::new(nodes[1].opts()).expect("connect to node 2");
        c.query_drop("USE d").unwrap();
        wait_for("a temporary t of this session's own", || {
            c.query_drop("CREATE TEMPORARY TABLE t (a INT)").ok()
        });
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").unwrap();
        assert_eq!(n, Some(0), "a new session sees no old rows");
    }
    assert_eq!(listed_tables(&nodes[1], "d"), Some(before.clone()));

    // The old primary comes back as a replica and applies the drops.
    nodes[0].start(&url);
    wait_role(&nodes[0], "replica");
    let mut q = Conn::new(nodes[1].opts()).expect("connect to node 2");
    q.query_drop("INSERT INTO d.base VALUES (2)").unwrap();
    wait_for("node 1 to drop the temporary tables", || {
        let mut c = Conn::new(nodes[0].opts()).ok()?;
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM d.base").ok()?;
        (n == Some(2) && listed_tables(&nodes[0], "d")? == before).then_some(())
    });
    // WITH RECURSIVE (local scratch tables) on the new primary and on the
    // old one, now its replica.
    q.query_drop("CREATE DATABASE mig").unwrap();
    let mut r = Conn::new(nodes[0].opts()).expect("connect to node 1");
    recursive_ctes_run_on_the_primary_and_on_a_replica(&mut q, &mut r);
    // A restart of the whole cluster keeps none either.
    for node in nodes.iter_mut() {
        node.kill9();
    }
    for node in nodes.iter_mut() {
        node.start(&url);
    }
    let leader = wait_for("a primary", || primary(&nodes));
    for node in &nodes {
        wait_for("each node to list d's tables", || {
            (listed_tables(node, "d")? == before).then_some(())
        });
    }
    let mut c = Conn::new(nodes[leader].opts()).expect("connect to the primary");
    c.query_drop("CREATE TEMPORARY TABLE d.t (a INT)").unwrap();
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM d.t").unwrap();
    assert_eq!(n, Some(0));
}
