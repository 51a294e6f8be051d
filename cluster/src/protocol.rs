//! The replication connection: length-prefixed postcard frames over TCP.
//!
//! Every connection opens with the cluster-secret handshake (`auth`:
//! `Challenge`, `Proof`, `Proven`, in clear), then each side's protocol
//! version (`version`, sealed; the connection ends when they differ);
//! every later frame is sealed with the connection's keys (`seal`:
//! [`FrameReader`], [`FrameWriter`]):
//!
//! ```text
//! replica -> primary   Hello { node, applied, ddl_seq, last_term }
//! primary -> replica   Welcome { term, history } | Reject { reason, diverged }
//! primary -> replica   Entry { term, lsn, changes } | Ddl { .. } | Heartbeat { .. } ...
//! replica -> primary   Ack { applied } after each entry is persisted
//! ```

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use ladle_common::{Lsn, TableDeltas};
use serde::{Deserialize, Serialize};

use crate::seal::{Opener, Sealer, SessionKeys, TAG_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Frames larger than this are refused (a bug or a foreign peer).
const MAX_FRAME: usize = 256 << 20;

/// How long reaching a peer may take, name resolution and TCP connect
/// together: an unresolvable or partitioned peer fails the attempt (the
/// caller retries or reports it) instead of holding the caller for the
/// resolver's and the kernel's own retries (minutes).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Connects to `addr` (`host:port`) within [`CONNECT_TIMEOUT`].
pub async fn connect(addr: &str) -> std::io::Result<tokio::net::TcpStream> {
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
        Ok(connected) => connected,
        Err(_) => Err(timed_out(addr)),
    }
}

/// Resolves `addr` (`host:port`) to its first address within
/// [`CONNECT_TIMEOUT`], for a blocking caller: the lookup runs on its own
/// thread, abandoned if it does not answer in time.
pub fn resolve_blocking(addr: &str) -> std::io::Result<SocketAddr> {
    if let Ok(sock) = addr.parse::<SocketAddr>() {
        return Ok(sock);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = addr.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(owned.to_socket_addrs().map(|mut all| all.next()));
    });
    match rx.recv_timeout(CONNECT_TIMEOUT) {
        Ok(Ok(Some(sock))) => Ok(sock),
        Ok(Ok(None)) => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{addr} has no address"),
        )),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(timed_out(addr)),
    }
}

fn timed_out(addr: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("reaching {addr} took over {CONNECT_TIMEOUT:?}"),
    )
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToPrimary {
    /// First frame: where the replica stands. `ddl_seq`: how many schema
    /// changes it has run at position `applied`; `last_term`: the newest
    /// term it knows of.
    Hello {
        node: u64,
        applied: Lsn,
        ddl_seq: u32,
        last_term: u64,
    },
    /// Everything up to `applied` is persisted on the replica.
    Ack { applied: Lsn },
    /// The replica has replayed `count` schema changes after entry
    /// `after` (semi-synchronous DDL).
    SchemaAck { after: Lsn, count: u32 },
    /// First frame of a forwarding connection (see `forward`): one client
    /// session of node `node`, which takes the primary of `term` to lead;
    /// `client` says whose (the primary's process list shows it).
    ForwardHello {
        node: u64,
        term: u64,
        client: ForwardedClient,
    },
    /// One statement of that session, encoded by the SQL front end.
    Forward { request: Vec<u8> },
    /// First frame of a bootstrap connection: node `node` asks for a copy
    /// of the primary's database (see `bootstrap`).
    BootstrapHello { node: u64 },
    /// The connector's answer to [`ToReplica::Challenge`]: its own nonce
    /// and the HMAC proving it holds the cluster secret (see `auth`).
    Proof { nonce: Vec<u8>, mac: Vec<u8> },
    /// First and only frame of a kill connection (see `kill`): KILL
    /// [QUERY] (`connection`) of the listener's connection `id`, sent by
    /// `user` (`any`: who holds SUPER) on another node.
    Kill {
        id: u64,
        user: String,
        any: bool,
        connection: bool,
    },
    /// On a forwarding connection, while its statement runs: the replica's
    /// client was killed (KILL QUERY or KILL CONNECTION) or went away; the
    /// statement stops as a local one would (1317, GET_LOCK NULL, SLEEP
    /// 1) and is answered as usual.
    Cancel,
}

/// The replica's client a forwarding connection serves, as its
/// [`ToPrimary::ForwardHello`] names it: the primary lists the session
/// under it, and sends a KILL CONNECTION of the session on to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardedClient {
    /// The client's connection id on the replica.
    pub connection: u64,
    /// The account name it logged in with.
    pub user: String,
    /// The host it connected from (as the replica's process list shows it).
    pub host: String,
}

/// What a KILL sent from another node did ([`ToReplica::Killed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KillOutcome {
    /// The statement, or the connection, is killed.
    Done,
    /// The node has no such connection.
    Unknown,
    /// Another user's connection, and the sender lacks SUPER.
    NotOwner,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToReplica {
    /// Accepted: the primary's term and its term history
    /// (`term -> first LSN`).
    Welcome { term: u64, history: Vec<(u64, Lsn)> },
    /// Refused. `diverged`: the replica must be re-bootstrapped: it holds
    /// entries this primary never had, or the primary no longer keeps the
    /// entries it lacks.
    Reject { reason: String, diverged: bool },
    /// One committed batch.
    Entry {
        term: u64,
        lsn: Lsn,
        changes: Vec<TableDeltas>,
    },
    /// A schema change run after entry `after`, the `seq`-th there.
    Ddl {
        term: u64,
        after: Lsn,
        seq: u32,
        database: Option<String>,
        sql: String,
        /// The session variables `sql` ran under (see
        /// `ddl::DdlRecord::settings`).
        settings: Vec<(String, String)>,
        /// `sql` is the account list, not a statement (see
        /// `ddl::DdlRecord::accounts`).
        accounts: bool,
    },
    /// Nothing new; the primary's newest LSN.
    Heartbeat { term: u64, last: Lsn },
    /// A forwarding connection is accepted.
    ForwardReady,
    /// A forwarded statement's answer (encoded by the SQL front end), and
    /// where the primary stood after it: its last LSN and the schema
    /// changes it had run there; `schema_changed` when the statement was
    /// one.
    Forwarded {
        response: Vec<u8>,
        lsn: Lsn,
        ddl_seq: u32,
        schema_changed: bool,
    },
    /// A piece of one file of the primary's checkpoint, at `offset`.
    BootstrapFile {
        name: String,
        offset: u64,
        data: Vec<u8>,
    },
    /// The checkpoint is complete: it holds everything up to `lsn`.
    BootstrapDone { lsn: Lsn, files: u32, bytes: u64 },
    /// The listener's first frame on every connection: a fresh nonce the
    /// connector must answer with a [`ToPrimary::Proof`].
    Challenge { nonce: Vec<u8> },
    /// The proof was right; the listener's own proof of the secret.
    Proven { mac: Vec<u8> },
    /// The answer to [`ToPrimary::Kill`].
    Killed { outcome: KillOutcome },
}

/// Writes one frame in clear (the handshake; sealed frames go through
/// [`FrameWriter`]).
pub async fn send<T: Serialize>(
    w: &mut (impl AsyncWrite + Unpin),
    frame: &T,
) -> std::io::Result<()> {
    let bytes = postcard::to_stdvec(frame)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    write_bytes(w, &bytes).await
}

/// Writes `bytes` as one length-prefixed frame (already encoded, and
/// sealed if it must be).
pub(crate) async fn write_bytes(
    w: &mut (impl AsyncWrite + Unpin),
    bytes: &[u8],
) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too large"))?;
    w.write_all(&len.to_be_bytes()).await?;
    w.write_all(bytes).await?;
    w.flush().await
}

/// Reads one frame in clear (the handshake; sealed frames come through
/// [`FrameReader`]); `None` at a clean end of stream.
pub async fn recv<T: for<'de> Deserialize<'de>>(
    r: &mut (impl AsyncRead + Unpin),
) -> std::io::Result<Option<T>> {
    recv_bounded(r, MAX_FRAME).await
}

/// Reads one frame of at most `max` bytes (before authentication a peer
/// must not make this node allocate much).
pub async fn recv_bounded<T: for<'de> Deserialize<'de>>(
    r: &mut (impl AsyncRead + Unpin),
    max: usize,
) -> std::io::Result<Option<T>> {
    let Some(buf) = read_bytes(r, max).await? else {
        return Ok(None);
    };
    postcard::from_bytes(&buf)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// One length-prefixed frame's bytes (at most `max`), `None` at a clean end.
pub(crate) async fn read_bytes(
    r: &mut (impl AsyncRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("replication frame of {len} bytes"),
        ));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await?;
    Ok(Some(buf))
}

/// The sending half of an authenticated connection: every frame is
/// encrypted and authenticated (`seal`) before it is written.
pub struct FrameWriter<W> {
    inner: W,
    sealer: Sealer,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub(crate) fn new(inner: W, sealer: Sealer) -> FrameWriter<W> {
        FrameWriter { inner, sealer }
    }

    /// Writes one sealed frame, its length then the sealed bytes, in one
    /// write: with TCP_NODELAY two writes went out as two packets, and a
    /// replica that had read only the length took the frame for one not yet
    /// arrived, ending its run of entries there (and syncing).
    pub async fn send<T: Serialize>(&mut self, frame: &T) -> std::io::Result<()> {
        let bytes = postcard::to_stdvec(frame)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let sealed = self.sealer.seal(bytes)?;
        let len = u32::try_from(sealed.len())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too large"))?;
        let mut whole = Vec::with_capacity(4 + sealed.len());
        whole.extend_from_slice(&len.to_be_bytes());
        whole.extend_from_slice(&sealed);
        self.inner.write_all(&whole).await?;
        self.inner.flush().await
    }

    /// Sends `Reject` (the peer is refused; the connection ends).
    pub(crate) async fn reject(&mut self, reason: String, diverged: bool) -> anyhow::Result<()> {
        self.send(&ToReplica::Reject { reason, diverged }).await?;
        Ok(())
    }
}

/// The sealed sending half of a TCP replication connection.
pub(crate) type TcpWriter = FrameWriter<tokio::net::tcp::OwnedWriteHalf>;
/// The sealed receiving half of a TCP replication connection.
pub(crate) type TcpReader = FrameReader<tokio::net::tcp::OwnedReadHalf>;

/// The receiving half of an authenticated connection: a frame that fails
/// its integrity check is an error (the connection ends).
pub struct FrameReader<R> {
    inner: R,
    opener: Opener,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(crate) fn new(inner: R, opener: Opener) -> FrameReader<R> {
        FrameReader { inner, opener }
    }

    /// What is read from (to see whether more bytes are buffered).
    pub(crate) fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The next frame, `None` at a clean end of the stream.
    pub async fn recv<T: for<'de> Deserialize<'de>>(&mut self) -> std::io::Result<Option<T>> {
        let Some(sealed) = read_bytes(&mut self.inner, MAX_FRAME + TAG_LEN).await? else {
            return Ok(None);
        };
        let bytes = self.opener.open(sealed)?;
        postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }
}

/// Both halves of a connection, sealed with one side's `keys`.
pub(crate) fn sealed<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    rd: R,
    wr: W,
    keys: SessionKeys,
) -> (FrameReader<R>, FrameWriter<W>) {
    (
        FrameReader::new(rd, keys.opener),
        FrameWriter::new(wr, keys.sealer),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladle_common::{RowDelta, Value};

    /// A peer that never answers the SYN (a blackholed address) or a name
    /// that does not resolve fails the attempt rather than hanging it.
    #[tokio::test]
    async fn unreachable_peers_fail_instead_of_hanging() {
        // 192.0.2.0/24 is TEST-NET-1: never routed (refused or dropped).
        assert!(connect("192.0.2.1:9").await.is_err());
        assert!(connect("no-such-host.invalid:9").await.is_err());
        let blocking = tokio::task::spawn_blocking(|| resolve_blocking("no-such-host.invalid:9"));
        assert!(blocking.await.unwrap().is_err());
        assert_eq!(
            resolve_blocking("127.0.0.1:5").unwrap(),
            "127.0.0.1:5".parse().unwrap()
        );
    }

    #[tokio::test]
    async fn frames_round_trip_in_order() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let entry = ToReplica::Entry {
            term: 3,
            lsn: 42,
            changes: vec![TableDeltas {
                table: 7,
                deltas: vec![RowDelta::Insert(vec![Value::Int(1), Value::Null])],
            }],
        };
        send(&mut a, &entry).await.unwrap();
        send(&mut a, &ToReplica::Heartbeat { term: 3, last: 42 })
            .await
            .unwrap();
        drop(a);
        assert_eq!(recv::<ToReplica>(&mut b).await.unwrap(), Some(entry));
        assert_eq!(
            recv::<ToReplica>(&mut b).await.unwrap(),
            Some(ToReplica::Heartbeat { term: 3, last: 42 })
        );
        assert_eq!(recv::<ToReplica>(&mut b).await.unwrap(), None);
    }

    /// Records the size of each write it is given.
    #[derive(Default)]
    struct Writes(Vec<usize>);

    impl AsyncWrite for Writes {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.0.push(buf.len());
            std::task::Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// A sealed frame goes out in one write, so a reader never holds its
    /// length without its body because the two went out apart (a replica
    /// ends a run of entries at a frame not whole in its buffer).
    #[tokio::test]
    async fn a_sealed_frame_is_one_write() {
        let keys = crate::seal::SessionKeys::new(&[1; 32], &[2; 32]).unwrap();
        let mut wr = FrameWriter::new(Writes::default(), keys.sealer);
        let hb = ToReplica::Heartbeat { term: 3, last: 42 };
        wr.send(&hb).await.unwrap();
        wr.send(&hb).await.unwrap();
        let writes = &wr.inner.0;
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert!(writes.iter().all(|&n| n > 4), "{writes:?}");
    }
}
