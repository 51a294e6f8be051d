//! Helpers shared by the end-to-end test binaries that spawn `ladle`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A loopback port free right now (the server binds it shortly after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A `bin` command serving `dir` on fresh loopback ports, with the MySQL
/// and metrics ports.
pub fn ladle_command(bin: &str, dir: &Path) -> (Command, u16, u16) {
    let (port, metrics_port) = (free_port(), free_port());
    let mut cmd = Command::new(bin);
    cmd.arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{metrics_port}"))
        .arg("--data-dir")
        .arg(dir);
    (cmd, port, metrics_port)
}

/// One HTTP/1.1 GET against the metrics listener; the raw response.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}
