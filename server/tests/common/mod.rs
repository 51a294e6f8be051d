//! Helpers shared by the end-to-end test binaries that spawn `ladle`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

// The harnesses' one way to start `ladle` on ports it picks itself (the
// e2e crate's; compiled in here, as the server does not depend on it).
#[path = "../../../e2e/src/ports.rs"]
pub mod ports;

/// A `bin` command serving `dir` on loopback ports it picks itself, and
/// where it says which ([`ports::PortsFile::wait`] once spawned).
pub fn ladle_command(bin: &str, dir: &Path) -> (Command, ports::PortsFile) {
    let mut cmd = Command::new(bin);
    let ports = ports::on_any_ports(&mut cmd, dir.join("ladle.ports"));
    cmd.arg("--data-dir").arg(dir);
    (cmd, ports)
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
