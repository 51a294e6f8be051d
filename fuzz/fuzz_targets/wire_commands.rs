//! The wire protocol after the handshake: a client logs in over loopback,
//! then sends the input as command packets, each framed with a correct
//! header (a `0xFF 0xFE` pair in the input splits packets; an input
//! starting with `0xFF 0xFD` is sent raw, headers and all, to reach the
//! framing code), then COM_QUIT, and reads replies until the server
//! closes. A panic anywhere in the server aborts the process.
#![no_main]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

/// A HandshakeResponse41 for root with an empty password, protocol 4.1,
/// secure connection and plugin auth (mysql_native_password).
fn login() -> Vec<u8> {
    let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000 | 0x0001_0000 | 0x0002_0000;
    let mut p = Vec::new();
    p.extend_from_slice(&caps.to_le_bytes());
    p.extend_from_slice(&(1u32 << 24).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(b"root\0");
    p.push(0);
    p.extend_from_slice(b"mysql_native_password\0");
    p
}

fn framed(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len().min(0xFF_FFFF) as u32;
    let mut out = len.to_le_bytes()[..3].to_vec();
    out.push(seq);
    out.extend_from_slice(&payload[..len as usize]);
    out
}

/// Reads one packet; `None` once the server closed or went quiet.
fn packet(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = [0u8; 4];
    s.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    let mut body = vec![0; len];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

fn exchange(input: &[u8]) -> Option<()> {
    let server = ladle_fuzz::server();
    let mut s = TcpStream::connect(server.addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    packet(&mut s)?; // greeting
    s.write_all(&framed(1, &login())).ok()?;
    let ok = packet(&mut s)?;
    assert_eq!(ok.first(), Some(&0), "login refused: {ok:?}");
    let mut out = Vec::new();
    match input.strip_prefix(&[0xFF, 0xFD]) {
        Some(raw) => out.extend_from_slice(raw),
        None => {
            let mut rest = input;
            loop {
                let end = rest.windows(2).position(|w| w == [0xFF, 0xFE]);
                let command = &rest[..end.unwrap_or(rest.len())];
                if !command.is_empty() && !ladle_fuzz::only_waits(&String::from_utf8_lossy(command))
                {
                    out.extend(framed(0, command));
                }
                match end {
                    Some(e) => rest = &rest[e + 2..],
                    None => break,
                }
            }
        }
    }
    out.extend(framed(0, &[0x01])); // COM_QUIT
    s.write_all(&out).ok()?;
    while packet(&mut s).is_some() {}
    Some(())
}

fuzz_target!(|data: &[u8]| {
    if ladle_fuzz::only_waits(&String::from_utf8_lossy(data)) {
        return;
    }
    let _ = exchange(data);
});
