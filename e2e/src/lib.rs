//! End-to-end conformance harness for Ladle.
//!
//! Ladle is tested only through the MySQL wire protocol, exactly as an
//! application would see it, and compared with MariaDB (the oracle):
//!
//! - [`MysqlDb`] implements `sqllogictest::DB` over the `mysql` client crate
//!   (text protocol), so every `tests/sql/<area>/*.test` file can run against
//!   any MySQL-compatible endpoint;
//! - [`LadleServer`] spawns the `ladle` binary on free loopback ports with a
//!   temporary data directory ([`ladle_binary`] says how it is found);
//! - [`mariadb_url`] reads `LADLE_TEST_MARIADB_URL` (see `scripts/mariadb.sh`);
//! - [`exact`] runs a statement over either protocol and keeps what the
//!   wire delivered, for randomized differential tests.
//!
//! This crate depends on no Ladle crate: it speaks only the wire protocol.

pub mod exact;
pub mod memory;
pub mod ports;
pub mod workload;

use std::fmt;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};
use sqllogictest::{DBOutput, DefaultColumnType};

/// Environment variable naming a running MariaDB (`mysql://root@127.0.0.1:PORT`).
pub const MARIADB_URL_ENV: &str = "LADLE_TEST_MARIADB_URL";
/// Environment variable overriding where the `ladle` binary is.
pub const LADLE_BIN_ENV: &str = "LADLE_BIN";
/// Environment variable choosing `--durability` for spawned servers (default `memory`).
pub const LADLE_DURABILITY_ENV: &str = "LADLE_TEST_DURABILITY";
/// Environment variable passing `--memory-limit` to spawned servers (e.g. `256`
/// to force constant eviction and upqueries).
pub const LADLE_MEMORY_LIMIT_ENV: &str = "LADLE_TEST_MEMORY_LIMIT";

/// How long one statement may take before the client gives up (a hung server
/// must fail the file, not the whole run).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The MariaDB URL from [`MARIADB_URL_ENV`], if set and non-empty.
pub fn mariadb_url() -> Option<String> {
    std::env::var(MARIADB_URL_ENV)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The workspace root (parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `tests/sql` under the workspace root.
pub fn sql_dir() -> PathBuf {
    workspace_root().join("tests").join("sql")
}

/// The line of `tests/sql/ladle-known-failures.txt` naming `test` (its
/// first word), if any: a randomized test so listed reports Ladle's
/// mismatches instead of failing.
pub fn known_failure(test: &str) -> Option<String> {
    let text =
        std::fs::read_to_string(sql_dir().join("ladle-known-failures.txt")).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .find(|l| l.split_whitespace().next() == Some(test))
        .map(str::to_string)
}

/// Every `*.test` file under `dir`, recursively, sorted.
pub fn test_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "test") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Errors of the harness itself (not of the database under test).
#[derive(Debug)]
pub struct HarnessError(pub String);

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HarnessError {}

/// Connection options for `url`, optionally selecting database `db`.
pub fn opts(url: &str, db: Option<&str>) -> Result<Opts, mysql::Error> {
    let base = Opts::from_url(url).map_err(mysql::Error::UrlError)?;
    let builder = OptsBuilder::from_opts(base)
        .db_name(db)
        // Do not switch to a unix socket found via `SELECT @@socket`: the
        // suite tests the TCP endpoint it was given.
        .prefer_socket(false)
        .read_timeout(Some(STATEMENT_TIMEOUT))
        .write_timeout(Some(STATEMENT_TIMEOUT))
        .tcp_connect_timeout(Some(Duration::from_secs(10)));
    Ok(builder.into())
}

/// Connects to `url` with database `db` selected.
pub fn connect(url: &str, db: Option<&str>) -> Result<Conn, mysql::Error> {
    Conn::new(opts(url, db)?)
}

/// For a test whose oracle is MariaDB: MariaDB's URL and a spawned Ladle,
/// or None (after saying so) when `LADLE_TEST_MARIADB_URL` is not set.
pub fn mariadb_and_ladle() -> Option<(String, LadleServer)> {
    let Some(maria_url) = mariadb_url() else {
        eprintln!("{MARIADB_URL_ENV} not set; skipping (MariaDB is this test's oracle)");
        return None;
    };
    let bin = ladle_binary().expect("ladle binary");
    let ladle = LadleServer::start(&bin).expect("ladle starts");
    Some((maria_url, ladle))
}

/// Runs `check` (given a server's URL) against MariaDB when
/// `LADLE_TEST_MARIADB_URL` is set, then against a spawned Ladle: for a
/// test whose expected answers are written in it (taken from MariaDB).
pub fn on_mariadb_and_ladle(check: impl Fn(&str)) {
    if let Some(maria) = mariadb_url() {
        check(&maria);
    }
    let bin = ladle_binary().expect("ladle binary");
    let ladle = LadleServer::start(&bin).expect("ladle starts");
    check(&ladle.url());
}

/// Drops and recreates database `db` on `url` so a test file starts fresh.
pub fn fresh_database(url: &str, db: &str) -> Result<(), mysql::Error> {
    let mut conn = connect(url, None)?;
    conn.query_drop(format!("DROP DATABASE IF EXISTS `{db}`"))?;
    conn.query_drop(format!("CREATE DATABASE `{db}`"))?;
    Ok(())
}

/// Drops database `db` (best effort clean-up after a file).
pub fn drop_database(url: &str, db: &str) {
    if let Ok(mut conn) = connect(url, None) {
        let _ = conn.query_drop(format!("DROP DATABASE IF EXISTS `{db}`"));
    }
}

/// Renders one text-protocol value the way sqllogictest files spell it.
pub fn render_value(v: &mysql::Value) -> String {
    match v {
        mysql::Value::NULL => "NULL".to_string(),
        mysql::Value::Bytes(b) if b.is_empty() => "(empty)".to_string(),
        mysql::Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        mysql::Value::Int(i) => i.to_string(),
        mysql::Value::UInt(u) => u.to_string(),
        mysql::Value::Float(f) => float_text(*f),
        mysql::Value::Double(d) => double_text(*d),
        other => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

/// A binary-protocol FLOAT spelled as MariaDB's text protocol spells it:
/// rounded to 6 significant digits, then as a DOUBLE.
fn float_text(f: f32) -> String {
    let d = f64::from(f);
    double_text(format!("{d:.5e}").parse().unwrap_or(d))
}

/// A binary-protocol DOUBLE spelled as MariaDB's text protocol spells it:
/// shortest digits, positional from 1e-15 up to 1e15 or while digits fall
/// after the point, else `1e15` form.
fn double_text(d: f64) -> String {
    if d == 0.0 {
        return "0".to_string();
    }
    let exponent = format!("{d:e}");
    let (mantissa, power) = exponent.rsplit_once('e').unwrap_or((&exponent, "0"));
    let power: i32 = power.parse().unwrap_or(0);
    let digits = mantissa.bytes().filter(u8::is_ascii_digit).count() as i32;
    if power >= -15 && (power <= 14 || power + 1 < digits) {
        d.to_string()
    } else {
        exponent
    }
}

/// A statement's outcome: its rows (none without a result set) and the
/// affected-row count.
pub type StatementResult = (Option<Vec<Vec<String>>>, u64);

/// Runs one statement over the text protocol and returns its rows rendered
/// with [`render_value`] (none for a statement without a result set) and the
/// affected-row count.
pub fn query_rows(conn: &mut Conn, sql: &str) -> Result<StatementResult, mysql::Error> {
    let result = conn.query_iter(sql)?;
    collect(result)
}

/// Like [`query_rows`], but as a server-side prepared statement (binary
/// protocol: COM_STMT_PREPARE + COM_STMT_EXECUTE), with binary values
/// rendered the way the text protocol spells them.
pub fn exec_rows(conn: &mut Conn, sql: &str) -> Result<StatementResult, mysql::Error> {
    exec_rows_with(conn, sql, Vec::new())
}

/// Like [`exec_rows`], with `params` bound to the statement's `?`s.
pub fn exec_rows_with(
    conn: &mut Conn,
    sql: &str,
    params: Vec<mysql::Value>,
) -> Result<StatementResult, mysql::Error> {
    let params = if params.is_empty() {
        mysql::Params::Empty
    } else {
        mysql::Params::Positional(params)
    };
    let result = conn.exec_iter(sql, params)?;
    collect(result)
}

fn collect<P: mysql::prelude::Protocol>(
    mut result: mysql::QueryResult<'_, '_, '_, P>,
) -> Result<StatementResult, mysql::Error> {
    let columns = result.columns();
    let types: Vec<(mysql::consts::ColumnType, u8)> = columns
        .as_ref()
        .iter()
        .map(|c| (c.column_type(), c.decimals()))
        .collect();
    let has_columns = !types.is_empty();
    let affected = result.affected_rows();
    let mut rows = Vec::new();
    for row in result.by_ref() {
        let row = row?;
        rows.push(
            row.unwrap_raw()
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let v = v.as_ref().unwrap_or(&mysql::Value::NULL);
                    render_typed(v, types.get(i).copied())
                })
                .collect(),
        );
    }
    // Drain any further result sets so the connection stays usable.
    while result.iter().is_some() {
        for row in result.by_ref() {
            row?;
        }
    }
    Ok((has_columns.then_some(rows), affected))
}

/// [`render_value`], spelling binary-protocol dates and times as the text
/// protocol does: `DATE` as `YYYY-MM-DD`, a fraction with as many digits
/// as the column's `decimals` (its fractional-seconds precision), or six
/// for a non-zero fraction in a column declaring none.
fn render_typed(v: &mysql::Value, ty: Option<(mysql::consts::ColumnType, u8)>) -> String {
    use mysql::consts::ColumnType as T;
    let fraction = |us: u32| -> String {
        match ty.map(|(_, decimals)| decimals) {
            Some(d @ 1..=6) => format!(".{us:06}")[..=usize::from(d)].to_string(),
            _ if us > 0 => format!(".{us:06}"),
            _ => String::new(),
        }
    };
    match *v {
        mysql::Value::Date(y, mo, d, h, mi, s, us) => match ty.map(|(t, _)| t) {
            Some(T::MYSQL_TYPE_DATE) | Some(T::MYSQL_TYPE_NEWDATE) => {
                format!("{y:04}-{mo:02}-{d:02}")
            }
            _ => format!(
                "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}{}",
                fraction(us)
            ),
        },
        mysql::Value::Time(neg, days, h, mi, s, us) => {
            let sign = if neg { "-" } else { "" };
            let hours = u32::from(h) + days * 24;
            format!("{sign}{hours:02}:{mi:02}:{s:02}{}", fraction(us))
        }
        // A DOUBLE of fixed decimals (ROUND(x, 2)), as the text protocol
        // writes it.
        mysql::Value::Double(d) => match ty {
            Some((T::MYSQL_TYPE_DOUBLE, decimals @ 0..=30)) => {
                format!("{d:.*}", usize::from(decimals))
            }
            _ => render_value(v),
        },
        _ => render_value(v),
    }
}

/// Which protocol [`MysqlDb`] uses for SELECTs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// COM_QUERY for everything.
    Text,
    /// Every SELECT as a server-side prepared statement (other statements
    /// stay COM_QUERY: not all of them are preparable).
    Binary,
}

impl Protocol {
    /// The protocols selected by `$LADLE_SLT_PROTOCOL` (`text` or `binary`;
    /// both when unset).
    pub fn selected() -> Vec<Protocol> {
        match std::env::var("LADLE_SLT_PROTOCOL").as_deref() {
            Ok("binary") => vec![Protocol::Binary],
            Ok("text") => vec![Protocol::Text],
            _ => vec![Protocol::Text, Protocol::Binary],
        }
    }

    /// `text` or `binary`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Text => "text",
            Protocol::Binary => "binary",
        }
    }
}

/// A sqllogictest database over one MySQL connection.
pub struct MysqlDb {
    conn: Conn,
    engine: &'static str,
    protocol: Protocol,
}

impl MysqlDb {
    /// Connects to `url` with database `db` selected; `engine` names the
    /// target for `skipif`/`onlyif` (`mariadb` or `ladle`); SELECTs use
    /// `protocol`.
    pub fn connect(
        url: &str,
        db: &str,
        engine: &'static str,
        protocol: Protocol,
    ) -> Result<Self, mysql::Error> {
        Ok(MysqlDb {
            conn: connect(url, Some(db))?,
            engine,
            protocol,
        })
    }
}

impl sqllogictest::DB for MysqlDb {
    type Error = mysql::Error;
    type ColumnType = DefaultColumnType;

    fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, mysql::Error> {
        let is_select = sql
            .trim_start()
            .get(..6)
            .is_some_and(|w| w.eq_ignore_ascii_case("select"));
        let (rows, affected) = if self.protocol == Protocol::Binary && is_select {
            exec_rows(&mut self.conn, sql)?
        } else {
            query_rows(&mut self.conn, sql)?
        };
        Ok(match rows {
            Some(rows) => {
                let width = rows.first().map_or(0, Vec::len);
                DBOutput::Rows {
                    types: vec![DefaultColumnType::Any; width],
                    rows,
                }
            }
            None => DBOutput::StatementComplete(affected),
        })
    }

    fn engine_name(&self) -> &str {
        self.engine
    }

    fn error_sql_state(err: &mysql::Error) -> Option<String> {
        match err {
            mysql::Error::MySqlError(e) => Some(e.state.clone()),
            _ => None,
        }
    }
}

/// Where the `ladle` binary is: `$LADLE_BIN`, else `<target>/debug/ladle`
/// next to this test executable (`<target>/debug/deps/<test>`).
///
/// Without `$LADLE_BIN`, when running under cargo (`$CARGO` is set) or when
/// the binary is missing, `cargo build -p ladle-server --bin ladle` is run
/// first so that a stale binary is never tested (a no-op when up to date;
/// cargo does not hold the build lock while tests run).
pub fn ladle_binary() -> Result<PathBuf, HarnessError> {
    if let Ok(bin) = std::env::var(LADLE_BIN_ENV) {
        if !bin.trim().is_empty() {
            let path = PathBuf::from(bin.trim());
            return if path.is_file() {
                Ok(path)
            } else {
                Err(HarnessError(format!(
                    "{LADLE_BIN_ENV}={} is not a file",
                    path.display()
                )))
            };
        }
    }
    let exe = std::env::current_exe().map_err(|e| HarnessError(format!("current_exe: {e}")))?;
    // <target>/debug/deps/<exe> -> <target>/debug
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| HarnessError(format!("cannot locate target dir from {}", exe.display())))?;
    let candidate = profile_dir.join(format!("ladle{}", std::env::consts::EXE_SUFFIX));
    let under_cargo = std::env::var_os("CARGO").is_some();
    if candidate.is_file() && !under_cargo {
        return Ok(candidate);
    }
    let target_dir = profile_dir.parent().unwrap_or(profile_dir);
    eprintln!(
        "e2e: cargo build -p ladle-server --bin ladle (into {})",
        target_dir.display()
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "-p", "ladle-server", "--bin", "ladle"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .status()
        .map_err(|e| HarnessError(format!("spawning cargo build: {e}")))?;
    if !status.success() {
        return Err(HarnessError(format!(
            "cargo build -p ladle-server failed ({status}); set {LADLE_BIN_ENV} to test a prebuilt binary"
        )));
    }
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(HarnessError(format!(
            "{} still missing after build",
            candidate.display()
        )))
    }
}

/// A `ladle` server process on free loopback ports, by default with a
/// temporary data directory; killed (SIGKILL) and cleaned up on drop.
pub struct LadleServer {
    child: Child,
    port: u16,
    _owned_dir: Option<tempfile::TempDir>,
    log_path: PathBuf,
}

impl LadleServer {
    /// Spawns `bin` and waits (up to 60 s) until it accepts MySQL connections.
    pub fn start(bin: &Path) -> Result<Self, HarnessError> {
        Self::start_with(bin, &[])
    }

    /// Like [`LadleServer::start`], with extra command-line arguments (after
    /// the standard ones; `$LADLE_TEST_MEMORY_LIMIT` is applied first).
    pub fn start_with(bin: &Path, extra: &[&str]) -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix("ladle-e2e-")
            .tempdir()
            .map_err(|e| HarnessError(format!("tempdir: {e}")))?;
        let durability =
            std::env::var(LADLE_DURABILITY_ENV).unwrap_or_else(|_| "memory".to_string());
        let mut server = Self::start_in(bin, dir.path(), &durability, extra)?;
        server._owned_dir = Some(dir);
        Ok(server)
    }

    /// Spawns `bin` over `<root>/data` (kept after the server ends, so a
    /// second server can recover from it) with `--durability durability`,
    /// on ports it picks itself ([`ports`]); the log goes to
    /// `<root>/ladle-<n>.log`, one per start.
    pub fn start_in(
        bin: &Path,
        root: &Path,
        durability: &str,
        extra: &[&str],
    ) -> Result<Self, HarnessError> {
        let starts = std::fs::read_dir(root).map_or(0, |d| d.count());
        let log_path = root.join(format!("ladle-{starts}.log"));
        let log =
            std::fs::File::create(&log_path).map_err(|e| HarnessError(format!("log file: {e}")))?;
        let log_err = log
            .try_clone()
            .map_err(|e| HarnessError(format!("log file: {e}")))?;
        let mut command = Command::new(bin);
        if let Ok(limit) = std::env::var(LADLE_MEMORY_LIMIT_ENV) {
            if !limit.trim().is_empty() {
                command.arg("--memory-limit").arg(limit.trim());
            }
        }
        let ports_file = ports::on_any_ports(&mut command, root.join("ladle.ports"));
        let mut child = command
            .arg("--data-dir")
            .arg(root.join("data"))
            .arg("--durability")
            .arg(durability)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| HarnessError(format!("spawning {}: {e}", bin.display())))?;
        let bound = ports_file.wait(&mut child, Duration::from_secs(60));
        let mut server = LadleServer {
            child,
            port: 0,
            _owned_dir: None,
            log_path,
        };
        server.port = bound
            .map_err(|e| HarnessError(format!("{e}; log:\n{}", server.log_tail())))?
            .mysql;
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), HarnessError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut last_error = String::from("none");
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(HarnessError(format!(
                    "ladle exited during start-up ({status}); log:\n{}",
                    self.log_tail()
                )));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                match connect(&self.url(), None) {
                    Ok(_) => return Ok(()),
                    Err(e) => last_error = e.to_string(),
                }
            }
            if Instant::now() > deadline {
                return Err(HarnessError(format!(
                    "ladle did not accept connections within 60 s (last error: {last_error}); log:\n{}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `mysql://root@127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    /// The MySQL port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server once its resident memory passes `bound` bytes
    /// (see [`memory::MemoryWatch`]), until the watch is dropped.
    pub fn watch_memory(&self, bound: u64) -> memory::MemoryWatch {
        memory::MemoryWatch::start(self.pid(), bound)
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's log file (stdout and stderr).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last 40 lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for LadleServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
