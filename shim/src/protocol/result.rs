//! Server replies: OK, ERR and EOF packets with real status flags and
//! warning counts, and result sets (column count, definitions, rows,
//! end packet), with CLIENT_DEPRECATE_EOF honoured.

use tokio::io::AsyncWrite;

use super::codec::{put_lenenc_bytes, put_lenenc_int};
use super::handshake::CLIENT_DEPRECATE_EOF;
use super::packet::PacketWriter;
use crate::wire::ColumnDef;

pub const SERVER_STATUS_IN_TRANS: u16 = 0x0001;
pub const SERVER_STATUS_AUTOCOMMIT: u16 = 0x0002;
pub const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;

/// An OK packet's fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ok {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
    pub warnings: u16,
    pub info: String,
}

pub fn ok<W: AsyncWrite + Unpin>(w: &mut PacketWriter<W>, ok: &Ok) {
    ok_with_marker(w, 0x00, ok);
}

fn ok_with_marker<W: AsyncWrite + Unpin>(w: &mut PacketWriter<W>, marker: u8, ok: &Ok) {
    let start = w.begin_packet();
    let out = w.buf();
    out.push(marker);
    put_lenenc_int(out, ok.affected_rows);
    put_lenenc_int(out, ok.last_insert_id);
    out.extend_from_slice(&ok.status.to_le_bytes());
    out.extend_from_slice(&ok.warnings.to_le_bytes());
    if !ok.info.is_empty() {
        // Length-encoded, as MariaDB (and MySQL) servers send it whatever
        // the capabilities, and as the MariaDB and MySQL C clients read it
        // (`mysql_info()`); a bare string would lose its first byte there.
        put_lenenc_bytes(out, ok.info.as_bytes());
    }
    w.end_packet(start);
}

/// The ERR payload, without framing.
pub fn error_payload(errno: u16, sqlstate: &str, message: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(9 + message.len());
    p.push(0xFF);
    p.extend_from_slice(&errno.to_le_bytes());
    p.push(b'#');
    let state = sqlstate.as_bytes();
    if state.len() == 5 {
        p.extend_from_slice(state);
    } else {
        p.extend_from_slice(b"HY000");
    }
    p.extend_from_slice(message.as_bytes());
    p
}

pub fn error<W: AsyncWrite + Unpin>(
    w: &mut PacketWriter<W>,
    errno: u16,
    sqlstate: &str,
    message: &str,
) {
    w.packet(&error_payload(errno, sqlstate, message));
}

/// A classic EOF packet.
pub fn eof<W: AsyncWrite + Unpin>(w: &mut PacketWriter<W>, warnings: u16, status: u16) {
    let mut p = [0xFE, 0, 0, 0, 0];
    p[1..3].copy_from_slice(&warnings.to_le_bytes());
    p[3..5].copy_from_slice(&status.to_le_bytes());
    w.packet(&p);
}

/// The packet ending rows (or what MySQL sends where an EOF would go):
/// EOF, or for CLIENT_DEPRECATE_EOF clients an OK packet marked 0xFE.
pub fn end<W: AsyncWrite + Unpin>(
    w: &mut PacketWriter<W>,
    client_caps: u32,
    warnings: u16,
    status: u16,
) {
    if client_caps & CLIENT_DEPRECATE_EOF != 0 {
        ok_with_marker(
            w,
            0xFE,
            &Ok {
                status,
                warnings,
                ..Ok::default()
            },
        );
    } else {
        eof(w, warnings, status);
    }
}

/// Column definitions, then the EOF that follows them unless the client
/// set CLIENT_DEPRECATE_EOF.
pub fn column_definitions<W: AsyncWrite + Unpin>(
    w: &mut PacketWriter<W>,
    client_caps: u32,
    cols: &[ColumnDef],
    status: u16,
) {
    for c in cols {
        let start = w.begin_packet();
        c.encode(w.buf());
        w.end_packet(start);
    }
    if client_caps & CLIENT_DEPRECATE_EOF == 0 {
        eof(w, 0, status);
    }
}

/// A result set's header: the column count and the definitions.
pub fn result_header<W: AsyncWrite + Unpin>(
    w: &mut PacketWriter<W>,
    client_caps: u32,
    cols: &[ColumnDef],
    status: u16,
) {
    let start = w.begin_packet();
    put_lenenc_int(w.buf(), cols.len() as u64);
    w.end_packet(start);
    column_definitions(w, client_caps, cols, status);
}

/// A text packet (COM_STATISTICS' reply).
pub fn text<W: AsyncWrite + Unpin>(w: &mut PacketWriter<W>, s: &str) {
    w.packet(s.as_bytes());
}
