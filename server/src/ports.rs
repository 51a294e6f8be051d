//! The addresses this process's listeners bound. Started on port 0 (any
//! free port: `--listen 127.0.0.1:0`), the server says which ones in
//! `--ports-file`, and a cluster node that restarts itself over a received
//! checkpoint comes back on the same ones.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;

/// The bound addresses of the MySQL, metrics and (a cluster node's)
/// replication listeners.
pub struct Bound {
    pub mysql: SocketAddr,
    pub metrics: SocketAddr,
    pub replication: Option<SocketAddr>,
}

impl Bound {
    /// Writes `--ports-file` (`path`), if given, and on a cluster node has
    /// its restart (after a bootstrap) keep these addresses.
    pub fn publish(&self, path: Option<&Path>) -> anyhow::Result<()> {
        if self.replication.is_some() {
            ladle_cluster::set_restart_args(self.restart_args(std::env::args_os().skip(1)));
        }
        if let Some(path) = path {
            self.write(path)?;
        }
        Ok(())
    }

    /// The file's text: `mysql=ADDR`, `metrics=ADDR` and on a cluster node
    /// `replication=ADDR`, one a line.
    fn text(&self) -> String {
        let mut text = format!("mysql={}\nmetrics={}\n", self.mysql, self.metrics);
        if let Some(replication) = self.replication {
            text.push_str(&format!("replication={replication}\n"));
        }
        text
    }

    /// Writes [`Bound::text`] to `path` through a temporary file renamed
    /// over it, so that a reader sees the whole file or none.
    fn write(&self, path: &Path) -> anyhow::Result<()> {
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        std::fs::write(&temporary, self.text())
            .and_then(|()| std::fs::rename(&temporary, path))
            .with_context(|| format!("writing the ports file {}", path.display()))
    }

    /// `args` (this process's, without the program) followed by the bound
    /// addresses, which win over any earlier value of their flags.
    fn restart_args(&self, args: impl Iterator<Item = OsString>) -> Vec<OsString> {
        let mut out: Vec<OsString> = args.collect();
        let mut pin = |flag: &str, addr: SocketAddr| out.push(format!("{flag}={addr}").into());
        pin("--listen", self.mysql);
        pin("--metrics-listen", self.metrics);
        if let Some(replication) = self.replication {
            pin("--replication-listen", replication);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn bound() -> Bound {
        Bound {
            mysql: "127.0.0.1:40001".parse().unwrap(),
            metrics: "127.0.0.1:40002".parse().unwrap(),
            replication: Some("127.0.0.1:40003".parse().unwrap()),
        }
    }

    /// A restart's arguments parse to the bound addresses, whatever the
    /// first run was given (port 0 here), and keep its other flags.
    #[test]
    fn restart_arguments_keep_the_bound_addresses() {
        let first = ["--listen", "127.0.0.1:0", "--metrics-listen=127.0.0.1:0"]
            .into_iter()
            .chain(["--etcd", "http://e:1", "--node-id", "3"])
            .chain([
                "--replication-listen",
                "127.0.0.1:0",
                "--max-connections",
                "7",
            ])
            .map(OsString::from);
        let args = bound().restart_args(first);
        let parsed = crate::config::Args::try_parse_from(
            std::iter::once(OsString::from("ladle")).chain(args),
        )
        .expect("the restart's arguments parse");
        assert_eq!(parsed.listen, bound().mysql);
        assert_eq!(parsed.metrics_listen, bound().metrics);
        assert_eq!(parsed.replication_listen, bound().replication);
        assert_eq!(parsed.max_connections, 7);
        assert_eq!(parsed.node_id, Some(3));
    }

    /// The file is written whole, and replaced whole.
    #[test]
    fn the_ports_file_lists_every_bound_address() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ports");
        std::fs::write(&path, "stale").unwrap();
        bound().write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "mysql=127.0.0.1:40001\nmetrics=127.0.0.1:40002\nreplication=127.0.0.1:40003\n"
        );
        assert!(!dir.path().join("ports.tmp").exists());
    }
}
