//! Starting `ladle` on ports it picks itself. A port a harness finds free
//! (bind port 0, read the number, drop the listener) and hands to a server
//! started later can be taken in between: by another test's server, or by
//! any outgoing connection's ephemeral port (tests run side by side), and
//! the server then fails for no fault of its own. So the harness starts
//! `ladle` on port 0 (`--listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0`;
//! a cluster node's replication listener follows `--listen`'s address)
//! and reads back the ports it bound from its `--ports-file` (README,
//! "Configuration"). Every harness that starts `ladle` does it through
//! here.
//!
//! Plain `std`: `lobsters-bench`'s restart-bench, which depends on no
//! Ladle crate, compiles this file as a module of its own (`#[path]`).

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The ports a `ladle` bound, as its ports file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundPorts {
    /// MySQL clients' (`--listen`).
    pub mysql: u16,
    /// HTTP `/metrics` and `/health` (`--metrics-listen`).
    pub metrics: u16,
    /// A cluster node's replication listener (`--replication-listen`).
    pub replication: Option<u16>,
}

/// Where a `ladle` started through [`on_any_ports`] says which ports it
/// bound.
#[derive(Debug)]
pub struct PortsFile(PathBuf);

/// Gives `cmd`, a `ladle` command, loopback MySQL and metrics listeners
/// on ports the server picks as it binds them, to be reported in `file`
/// (a stale one is removed first, so that it is not read as this run's).
pub fn on_any_ports(cmd: &mut Command, file: PathBuf) -> PortsFile {
    let _ = std::fs::remove_file(&file);
    cmd.arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--metrics-listen")
        .arg("127.0.0.1:0")
        .arg("--ports-file")
        .arg(&file);
    PortsFile(file)
}

impl PortsFile {
    /// The ports the server bound, once it has written them (a single
    /// node as soon as it listens, before recovery; a cluster node once it
    /// has joined).
    pub fn read(&self) -> Option<BoundPorts> {
        parse(&std::fs::read_to_string(&self.0).ok()?)
    }

    /// Waits for [`PortsFile::read`], at most `patience`; `Err` says why
    /// there are none: `child` (the server) exited first, or the time
    /// passed.
    pub fn wait(&self, child: &mut Child, patience: Duration) -> Result<BoundPorts, String> {
        let started = Instant::now();
        loop {
            if let Some(ports) = self.read() {
                return Ok(ports);
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("ladle exited before it listened ({status})"));
            }
            if started.elapsed() > patience {
                return Err(format!(
                    "ladle did not write {} within {patience:?}",
                    self.0.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A ports file's text (`name=host:port` lines): `None` without the MySQL
/// or metrics line.
fn parse(text: &str) -> Option<BoundPorts> {
    let port = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .and_then(|addr| addr.rsplit(':').next()?.parse::<u16>().ok())
    };
    Some(BoundPorts {
        mysql: port("mysql")?,
        metrics: port("metrics")?,
        replication: port("replication"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ports_file_is_read_by_name() {
        let text = "mysql=127.0.0.1:3307\nmetrics=[::1]:6034\nreplication=127.0.0.1:7312\n";
        assert_eq!(
            parse(text),
            Some(BoundPorts {
                mysql: 3307,
                metrics: 6034,
                replication: Some(7312)
            })
        );
        assert_eq!(parse("mysql=127.0.0.1:3307\n"), None, "no metrics line");
        assert_eq!(
            parse("metrics=x:1\nmysql=y:2").map(|p| p.replication),
            Some(None)
        );
    }
}
