//! The byte stream under opensrv-mysql: a reader that enforces
//! `max_allowed_packet` and rewrites the client's handshake response so
//! clients defaulting to `caching_sha2_password` (MySQL 8) are switched to
//! `mysql_native_password`, and a writer shared with the connection task so
//! it can send a final error packet.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const CLIENT_CONNECT_WITH_DB: u32 = 0x0000_0008;
const CLIENT_SECURE_CONNECTION: u32 = 0x0000_8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x0008_0000;
const CLIENT_PLUGIN_AUTH_LENENC: u32 = 0x0020_0000;
const MAX_HANDSHAKE: usize = 64 * 1024;

/// Set when the reader refused an oversize packet: the sequence number
/// the server's error reply must carry, plus one (0 = not tripped).
pub type Tripwire = Arc<AtomicU16>;

pub struct GuardedReader<R> {
    inner: R,
    /// Told the client's capability flags, once its first packet is in;
    /// also the statement ids the command filter checks against.
    report_to: Option<Arc<AuthFailure>>,
    filter: CommandFilter,
    /// Bytes of the client's first packet, until it is complete.
    first: Option<Vec<u8>>,
    pending: Vec<u8>,
    pos: usize,
    header: [u8; 4],
    header_len: usize,
    payload_left: usize,
    logical: usize,
    continued: bool,
    limit: usize,
    tripped: Tripwire,
}

impl<R> GuardedReader<R> {
    pub fn new(inner: R, limit: usize, tripped: Tripwire) -> GuardedReader<R> {
        GuardedReader {
            inner,
            report_to: None,
            filter: CommandFilter::default(),
            first: Some(Vec::new()),
            pending: Vec::new(),
            pos: 0,
            header: [0; 4],
            header_len: 0,
            payload_left: 0,
            logical: 0,
            continued: false,
            limit,
            tripped,
        }
    }

    /// Records the client's capability flags in `shared` when the first
    /// packet (handshake response or SSL request) arrives.
    pub fn reporting_to(mut self, shared: Arc<AuthFailure>) -> GuardedReader<R> {
        self.report_to = Some(shared);
        self
    }

    /// Appends client bytes to `pending`, commands through the command
    /// filter once authentication is over (before, packets are auth data).
    fn pass_commands(&mut self, data: &[u8]) {
        match &self.report_to {
            Some(shared) if shared.handshake_done.load(Ordering::SeqCst) => {
                self.filter.feed(data, shared, &mut self.pending)
            }
            _ => self.pending.extend_from_slice(data),
        }
    }

    /// Follows packet boundaries in `data`; errors if a packet exceeds the
    /// limit.
    fn track(&mut self, data: &[u8]) -> io::Result<()> {
        let mut i = 0;
        while i < data.len() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(data.len() - i);
                self.payload_left -= n;
                i += n;
                continue;
            }
            self.header[self.header_len] = data[i];
            self.header_len += 1;
            i += 1;
            if self.header_len == 4 {
                self.header_len = 0;
                let len = usize::from(self.header[0])
                    | usize::from(self.header[1]) << 8
                    | usize::from(self.header[2]) << 16;
                self.logical = if self.continued {
                    self.logical + len
                } else {
                    len
                };
                self.continued = len == 0xFF_FFFF;
                if self.logical > self.limit {
                    self.tripped
                        .store(u16::from(self.header[3]) + 1, Ordering::SeqCst);
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "packet larger than max_allowed_packet",
                    ));
                }
                self.payload_left = len;
            }
        }
        Ok(())
    }
}

/// Rewrites a HandshakeResponse41 whose auth plugin is not
/// `mysql_native_password` so that its auth response is empty, which makes
/// opensrv-mysql answer with an AuthSwitchRequest to mysql_native_password.
pub fn rewrite_handshake(packet: &[u8]) -> Option<Vec<u8>> {
    let payload = packet.get(4..)?;
    let caps = u32::from_le_bytes(payload.get(0..4)?.try_into().ok()?);
    if caps & CLIENT_PLUGIN_AUTH == 0 || payload.len() < 32 {
        return None;
    }
    let mut i = 32;
    // username
    let nul = payload[i..].iter().position(|&b| b == 0)?;
    i += nul + 1;
    let auth_start = i;
    let (auth_len, header_len) = if caps & CLIENT_PLUGIN_AUTH_LENENC != 0 {
        match *payload.get(i)? {
            n @ 0..=0xFA => (usize::from(n), 1),
            0xFC => (
                usize::from(u16::from_le_bytes(
                    payload.get(i + 1..i + 3)?.try_into().ok()?,
                )),
                3,
            ),
            _ => return None,
        }
    } else if caps & CLIENT_SECURE_CONNECTION != 0 {
        (usize::from(*payload.get(i)?), 1)
    } else {
        return None;
    };
    let auth_end = auth_start + header_len + auth_len;
    if auth_len == 0 || auth_end > payload.len() {
        return None;
    }
    let mut j = auth_end;
    if caps & CLIENT_CONNECT_WITH_DB != 0 {
        let nul = payload.get(j..)?.iter().position(|&b| b == 0)?;
        j += nul + 1;
    }
    let rest = payload.get(j..)?;
    let nul = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let plugin = &rest[..nul];
    if plugin == b"mysql_native_password" || plugin.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(packet.len());
    out.extend_from_slice(&[0, 0, 0, packet[3]]);
    out.extend_from_slice(&payload[..auth_start]);
    out.push(0);
    out.extend_from_slice(&payload[auth_end..]);
    let len = out.len() - 4;
    out[0] = (len & 0xFF) as u8;
    out[1] = ((len >> 8) & 0xFF) as u8;
    out[2] = ((len >> 16) & 0xFF) as u8;
    Some(out)
}

impl<R: AsyncRead + Unpin> AsyncRead for GuardedReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.pos < this.pending.len() {
                let n = (this.pending.len() - this.pos).min(buf.remaining());
                buf.put_slice(&this.pending[this.pos..this.pos + n]);
                this.pos += n;
                if this.pos == this.pending.len() {
                    this.pending.clear();
                    this.pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut tmp = [0u8; 16 * 1024];
            let mut rb = ReadBuf::new(&mut tmp);
            match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let data = rb.filled();
            if data.is_empty() {
                let held = this.filter.take_held();
                if !held.is_empty() {
                    this.pending = held;
                    continue;
                }
                // EOF: hand over whatever part of the first packet arrived.
                if let Some(f) = this.first.take() {
                    if !f.is_empty() {
                        this.pending = f;
                        continue;
                    }
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(f) = &mut this.first {
                f.extend_from_slice(data);
                if f.len() >= 4 {
                    let len = usize::from(f[0]) | usize::from(f[1]) << 8 | usize::from(f[2]) << 16;
                    if len > MAX_HANDSHAKE {
                        this.tripped.store(u16::from(f[3]) + 1, Ordering::SeqCst);
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "oversize handshake",
                        )));
                    }
                    if f.len() >= 4 + len {
                        if let (Some(shared), Some(caps)) = (&this.report_to, f.get(4..8)) {
                            let caps = u32::from_le_bytes([caps[0], caps[1], caps[2], caps[3]]);
                            shared.client_flags.store(caps, Ordering::SeqCst);
                        }
                        let mut all = this.first.take().unwrap_or_default();
                        let rest = all.split_off(4 + len);
                        let mut packet = rewrite_handshake(&all).unwrap_or(all);
                        // Inside TLS the response still says CLIENT_SSL; the
                        // switch is done (crate::tls), and opensrv-mysql
                        // would wait for a second response.
                        if let Some(caps) = packet.get_mut(5) {
                            *caps &= !0x08;
                        }
                        this.track(&rest)?;
                        this.pending = packet;
                        this.pass_commands(&rest);
                        this.pos = 0;
                    }
                }
                continue;
            }
            let owned = data.to_vec();
            this.track(&owned)?;
            this.pending.clear();
            this.pass_commands(&owned);
            this.pos = 0;
        }
    }
}

/// Set by the handler when authentication fails: opensrv-mysql's own
/// error packet (1698, unlike MySQL's 1045) is swallowed and the connection
/// task sends MySQL's "Access denied" instead.
///
/// It also marks whether the handshake's final OK packet has been seen:
/// opensrv-mysql sends it with no status flags, but clients (PyMySQL,
/// mysql-connector) read SERVER_STATUS_AUTOCOMMIT from it to learn the
/// session's autocommit mode, so the writer sets that bit.
///
/// It also carries what opensrv-mysql cannot say in the packet ending a
/// result (see [`EndPatch`]), and the client's capability flags.
#[derive(Default)]
pub struct AuthFailure {
    pub failed: std::sync::atomic::AtomicBool,
    pub handshake_done: std::sync::atomic::AtomicBool,
    pub swallowed: Mutex<Vec<u8>>,
    pub message: Mutex<String>,
    /// Applied to the next packet the server writes (then cleared).
    pub end_patch: Mutex<Option<EndPatch>>,
    /// The capability flags of the client's handshake response.
    pub client_flags: AtomicU32,
    /// The shim already sent the greeting (see [`crate::tls`]): drop
    /// opensrv-mysql's.
    pub skip_greeting: std::sync::atomic::AtomicBool,
    /// Ids of the connection's prepared statements (the handler keeps it).
    pub statements: Mutex<std::collections::HashSet<u32>>,
    /// Queued by the reader for each command naming an unknown statement
    /// that it turned into a placeholder query: the id and the command's
    /// name, for error 1243 (in order, as clients may pipeline).
    pub unknown_statements: Mutex<std::collections::VecDeque<(u32, &'static str)>>,
}

const COM_QUERY: u8 = 0x03;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_RESET: u8 = 0x1A;
/// What a command packet's first payload bytes must hold to be judged: the
/// command byte and a statement id.
const COMMAND_PREFIX: usize = 5;
/// The placeholder query standing in for a rejected statement command.
pub const UNKNOWN_STATEMENT_QUERY: &[u8] = b"DO 0";

/// Rewrites client commands naming a prepared statement the connection does
/// not have. opensrv-mysql closes the connection on those; MySQL answers
/// error 1243. So COM_STMT_EXECUTE and COM_STMT_RESET with an unknown id
/// become a placeholder COM_QUERY (same sequence number) while
/// [`AuthFailure::unknown_statements`] tells the handler to answer 1243, and
/// COM_STMT_SEND_LONG_DATA (which gets no reply) is dropped.
#[derive(Default)]
pub struct CommandFilter {
    /// The current packet's header and first payload bytes, held back
    /// until the command can be judged.
    head: Vec<u8>,
    /// Bytes of the current packet still to pass on (or to drop).
    left: usize,
    dropping: bool,
    /// The previous packet was 16 MiB - 1 long, so this one continues its
    /// payload (and shares its fate): `Some(dropping)`.
    continues: Option<bool>,
}

impl CommandFilter {
    /// Passes `data` on into `out`, rewriting as described above.
    pub fn feed(&mut self, mut data: &[u8], shared: &AuthFailure, out: &mut Vec<u8>) {
        while !data.is_empty() {
            if self.left > 0 {
                let n = self.left.min(data.len());
                if !self.dropping {
                    out.extend_from_slice(&data[..n]);
                }
                self.left -= n;
                data = &data[n..];
                continue;
            }
            self.head.push(data[0]);
            data = &data[1..];
            if self.head.len() < 4 {
                continue;
            }
            let len = usize::from(self.head[0])
                | usize::from(self.head[1]) << 8
                | usize::from(self.head[2]) << 16;
            let judged = 4 + len.min(COMMAND_PREFIX);
            if self.head.len() < judged {
                continue;
            }
            let head = std::mem::take(&mut self.head);
            self.left = len - (judged - 4);
            self.dropping = match self.continues {
                Some(dropping) => dropping,
                None => match unknown_statement(&head[4..], shared) {
                    Some((id, command)) => {
                        if command != COM_STMT_SEND_LONG_DATA {
                            let what = if command == COM_STMT_EXECUTE {
                                "mysqld_stmt_execute"
                            } else {
                                "mysqld_stmt_reset"
                            };
                            shared.unknown_statements.lock().push_back((id, what));
                            let payload_len = 1 + UNKNOWN_STATEMENT_QUERY.len();
                            out.extend_from_slice(&[payload_len as u8, 0, 0, head[3], COM_QUERY]);
                            out.extend_from_slice(UNKNOWN_STATEMENT_QUERY);
                        }
                        true
                    }
                    None => false,
                },
            };
            if !self.dropping {
                out.extend_from_slice(&head);
            }
            self.continues = (len == 0xFF_FFFF).then_some(self.dropping);
        }
    }

    /// Bytes held back at end of input (a truncated packet), passed on so
    /// that opensrv-mysql sees what arrived.
    pub fn take_held(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.head)
    }
}

/// The statement id and command byte of a statement command naming a
/// statement not in `shared.statements`.
fn unknown_statement(payload: &[u8], shared: &AuthFailure) -> Option<(u32, u8)> {
    let (&command, id) = payload.split_first()?;
    if !matches!(
        command,
        COM_STMT_EXECUTE | COM_STMT_SEND_LONG_DATA | COM_STMT_RESET
    ) {
        return None;
    }
    let id = u32::from_le_bytes(id.get(..4)?.try_into().ok()?);
    (!shared.statements.lock().contains(&id)).then_some((id, command))
}

/// CLIENT_FOUND_ROWS: UPDATE reports matched rather than changed rows.
pub const CLIENT_FOUND_ROWS: u32 = 0x0000_0002;

/// CLIENT_MULTI_STATEMENTS: the client accepts several result sets for one
/// COM_QUERY.
pub const CLIENT_MULTI_STATEMENTS: u32 = 0x0001_0000;

/// What opensrv-mysql leaves out of an OK or EOF packet ending a result: it
/// always writes zero warnings, and the OK ending a row set (for
/// CLIENT_DEPRECATE_EOF clients) carries no status flags, so a following
/// result set would go unannounced. The handler sets this right before the
/// packet is written; the socket writer patches the next packet with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndPatch {
    pub warnings: u16,
    /// Status flags to add (e.g. SERVER_MORE_RESULTS_EXISTS).
    pub status: u16,
}

/// Applies `patch` to a whole OK packet (`0x00`, or `0xFE` ending a row
/// set) or EOF packet, header included, as a CLIENT_PROTOCOL_41 client
/// reads it. False if `packet` is neither.
pub fn patch_end_packet(packet: &mut [u8], patch: EndPatch) -> bool {
    fn lenenc_len(first: u8) -> usize {
        match first {
            0xFC => 3,
            0xFD => 4,
            0xFE => 9,
            _ => 1,
        }
    }
    let Some(&marker) = packet.get(4) else {
        return false;
    };
    let payload_len =
        usize::from(packet[0]) | usize::from(packet[1]) << 8 | usize::from(packet[2]) << 16;
    if packet.len() != 4 + payload_len {
        return false;
    }
    // EOF: marker, warnings, status. OK: marker, affected rows, last insert
    // id (both length-encoded), status, warnings.
    let (status_at, warnings_at) = match (marker, payload_len) {
        (0xFE, 5) => (7, 5),
        (0x00 | 0xFE, 7..) => {
            let mut at = 5 + lenenc_len(packet[5]);
            let Some(&first) = packet.get(at) else {
                return false;
            };
            at += lenenc_len(first);
            (at, at + 2)
        }
        _ => return false,
    };
    if warnings_at.max(status_at) + 2 > packet.len() {
        return false;
    }
    let status = u16::from_le_bytes([packet[status_at], packet[status_at + 1]]) | patch.status;
    packet[status_at..status_at + 2].copy_from_slice(&status.to_le_bytes());
    packet[warnings_at..warnings_at + 2].copy_from_slice(&patch.warnings.to_le_bytes());
    true
}

/// A writer half shared between opensrv-mysql and the connection task.
pub struct SharedWriter<W> {
    /// Only ever `try_lock`ed inside a poll (never held across an await),
    /// so a plain mutex does; tokio's costs a semaphore round per packet.
    inner: Arc<Mutex<W>>,
    /// Reused to join a packet's header and payload (see
    /// `poll_write_vectored`).
    joined: Vec<u8>,
    auth: Arc<AuthFailure>,
    /// The connection task's handle writes even after a failure.
    swallow: bool,
}

impl<W> SharedWriter<W> {
    pub fn new(w: W, auth: Arc<AuthFailure>) -> SharedWriter<W> {
        SharedWriter {
            inner: Arc::new(Mutex::new(w)),
            joined: Vec::new(),
            auth,
            swallow: true,
        }
    }

    /// A handle that is never swallowed.
    pub fn raw(&self) -> SharedWriter<W> {
        SharedWriter {
            inner: self.inner.clone(),
            joined: Vec::new(),
            auth: self.auth.clone(),
            swallow: false,
        }
    }

    fn swallowing(&self) -> bool {
        self.swallow && self.auth.failed.load(Ordering::SeqCst)
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for SharedWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.swallowing() {
            self.auth.swallowed.lock().extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        if self.swallow
            && buf.get(4) == Some(&0x0a)
            && self.auth.skip_greeting.swap(false, Ordering::SeqCst)
        {
            return Poll::Ready(Ok(buf.len()));
        }
        let patched: Vec<u8>;
        let ok_patched: Vec<u8>;
        let mut out = buf;
        if self.swallow && !self.auth.handshake_done.load(Ordering::SeqCst) && buf.len() >= 9 {
            match buf[4] {
                // The handshake's OK: set SERVER_STATUS_AUTOCOMMIT (0x0002)
                // in the status flags after the two zero-length counters.
                0x00 if buf[5] == 0 && buf[6] == 0 => {
                    let mut p = buf.to_vec();
                    p[7] |= 0x02;
                    patched = p;
                    out = &patched;
                    self.auth.handshake_done.store(true, Ordering::SeqCst);
                }
                0xff | 0x00 => self.auth.handshake_done.store(true, Ordering::SeqCst),
                // The greeting (protocol 10): its status flags too, and
                // the multi-statement capabilities.
                0x0a => {
                    if let Some(nul) = buf[5..].iter().position(|&b| b == 0) {
                        // version\0, connection id (4), scramble part 1 (8),
                        // filler (1), capabilities (2), charset (1), status.
                        let at = 5 + nul + 1 + 4 + 8 + 1 + 2 + 1;
                        if at + 2 < buf.len() {
                            let mut p = buf.to_vec();
                            p[at] |= 0x02;
                            // The upper capability flags, after the status:
                            // CLIENT_MULTI_STATEMENTS and CLIENT_MULTI_RESULTS
                            // (opensrv-mysql does not offer them; clients
                            // keep only what the server offers).
                            p[at + 2] |= 0x03;
                            patched = p;
                            out = &patched;
                        }
                    }
                }
                _ => {}
            }
        }
        if self.swallow {
            if let Some(patch) = self.auth.end_patch.lock().take() {
                let mut p = out.to_vec();
                if patch_end_packet(&mut p, patch) {
                    ok_patched = p;
                    out = &ok_patched;
                }
            }
        }
        match self.inner.try_lock() {
            Some(mut g) => Pin::new(&mut *g).poll_write(cx, out),
            None => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
    /// opensrv-mysql writes each packet as [header, payload] slices; join
    /// them so a packet reaches `poll_write` whole (and in one syscall).
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let mut joined = std::mem::take(&mut me.joined);
        joined.clear();
        for b in bufs {
            joined.extend_from_slice(b);
        }
        let written = Pin::new(&mut *me).poll_write(cx, &joined);
        me.joined = joined;
        written
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.swallowing() {
            return Poll::Ready(Ok(()));
        }
        match self.inner.try_lock() {
            Some(mut g) => Pin::new(&mut *g).poll_flush(cx),
            None => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.inner.try_lock() {
            Some(mut g) => Pin::new(&mut *g).poll_shutdown(cx),
            None => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

/// A complete MySQL ERR packet.
pub fn error_packet(seq: u8, errno: u16, sqlstate: &str, message: &str) -> Vec<u8> {
    let mut payload = vec![0xFF];
    payload.extend_from_slice(&errno.to_le_bytes());
    payload.push(b'#');
    payload.extend_from_slice(sqlstate.as_bytes());
    payload.extend_from_slice(message.as_bytes());
    let len = payload.len();
    let mut p = vec![
        (len & 0xFF) as u8,
        ((len >> 8) & 0xFF) as u8,
        ((len >> 16) & 0xFF) as u8,
        seq,
    ];
    p.extend_from_slice(&payload);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake(plugin: &str, auth: &[u8], db: Option<&str>) -> Vec<u8> {
        let mut caps =
            CLIENT_PLUGIN_AUTH | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH_LENENC | 0x200;
        if db.is_some() {
            caps |= CLIENT_CONNECT_WITH_DB;
        }
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&[0, 0, 0, 1, 33]);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(b"root\0");
        p.push(auth.len() as u8);
        p.extend_from_slice(auth);
        if let Some(d) = db {
            p.extend_from_slice(d.as_bytes());
            p.push(0);
        }
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
        let mut out = vec![p.len() as u8, 0, 0, 1];
        out.extend(p);
        out
    }

    #[test]
    fn caching_sha2_response_is_emptied() {
        let h = handshake("caching_sha2_password", &[7; 32], Some("db"));
        let r = rewrite_handshake(&h).expect("rewritten");
        assert_eq!(r.len(), h.len() - 32);
        assert_eq!(usize::from(r[0]), r.len() - 4);
        assert!(r.ends_with(b"db\0caching_sha2_password\0"));
        assert!(rewrite_handshake(&handshake("mysql_native_password", &[7; 20], None)).is_none());
    }

    #[test]
    fn ok_packet_warnings_are_patched() {
        // OK: affected 3, last insert id 300 (0xFC 2C 01), status 2, warnings 0.
        let payload = [0x00, 3, 0xFC, 0x2C, 0x01, 0x02, 0x00, 0x00, 0x00];
        let mut p = vec![payload.len() as u8, 0, 0, 1];
        p.extend_from_slice(&payload);
        let patch = EndPatch {
            warnings: 2,
            status: 0x0008,
        };
        assert!(patch_end_packet(&mut p, patch));
        assert_eq!(&p[9..], &[0x0A, 0, 2, 0]);
        // The OK ending a row set for CLIENT_DEPRECATE_EOF clients.
        let mut end = vec![8, 0, 0, 5, 0xFE, 0, 0, 0, 0, 0, 0, 0];
        assert!(patch_end_packet(&mut end, patch));
        assert_eq!(&end[7..11], &[0x08, 0, 2, 0]);
        let mut eof = vec![5, 0, 0, 1, 0xFE, 0, 0, 2, 0];
        assert!(patch_end_packet(&mut eof, patch));
        assert_eq!(&eof[5..], &[2, 0, 0x0A, 0]);
        // A row is left alone.
        let mut row = vec![3, 0, 0, 2, 0x01, b'a', b'b'];
        assert!(!patch_end_packet(&mut row, patch));
    }

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![payload.len() as u8, 0, 0, seq];
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn commands_naming_unknown_statements_are_rewritten() {
        let shared = AuthFailure::default();
        shared.statements.lock().insert(1);
        let known = packet(0, &[COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0]);
        let unknown = packet(0, &[COM_STMT_EXECUTE, 9, 0, 0, 0, 0, 1, 0, 0, 0]);
        let long_data = packet(0, &[COM_STMT_SEND_LONG_DATA, 9, 0, 0, 0, 0, 0, b'x']);
        let query = packet(0, b"\x03SELECT 1");
        let mut input = known.clone();
        input.extend_from_slice(&long_data);
        input.extend_from_slice(&unknown);
        input.extend_from_slice(&query);
        // Fed in every split, the output is the same.
        for chunk in [1, 3, 7, input.len()] {
            let mut f = CommandFilter::default();
            let mut out = Vec::new();
            for piece in input.chunks(chunk) {
                f.feed(piece, &shared, &mut out);
            }
            let mut expected = known.clone();
            let mut placeholder = vec![COM_QUERY];
            placeholder.extend_from_slice(UNKNOWN_STATEMENT_QUERY);
            expected.extend_from_slice(&packet(0, &placeholder));
            expected.extend_from_slice(&query);
            assert_eq!(out, expected, "chunk {chunk}");
            assert!(f.take_held().is_empty());
        }
        assert_eq!(
            shared.unknown_statements.lock().pop_front(),
            Some((9, "mysqld_stmt_execute"))
        );
    }

    #[test]
    fn error_packet_layout() {
        let p = error_packet(2, 1040, "08004", "Too many connections");
        assert_eq!(p[3], 2);
        assert_eq!(&p[4..7], &[0xFF, 0x10, 0x04]);
        assert_eq!(&p[7..13], b"#08004");
    }
}
