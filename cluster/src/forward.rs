//! Write forwarding: a replica runs a client session's writes on the
//! primary. Each client session that needs it gets its own TCP connection
//! to the primary's replication listener (first frame
//! [`ToPrimary::ForwardHello`]), and the primary keeps one SQL session per
//! such connection, so a transaction opened through it stays open there
//! until COMMIT. Requests and answers are opaque bytes here: the SQL front
//! end encodes them (session state in, result and session state out) and
//! the server glues the two ends ([`ForwardTarget`]). Why this mechanism
//! rather than a MySQL connection to the primary: docs/cluster.md.
//!
//! The replica side is synchronous ([`ForwardClient::call`] runs on the
//! statement's blocking thread) and never waits unboundedly: it gives up
//! when this node sees another primary elected (the outcome is then
//! unknown, as for a semi-sync write whose acknowledgement was lost) or
//! after [`MAX_WAIT`]. A client killed while its statement runs there
//! sends [`ToPrimary::Cancel`] on the same connection: the primary stops
//! the statement as a local KILL QUERY would, and its answer (1317, or
//! GET_LOCK's NULL) comes back as usual; a connection that closes stops
//! its running statement too.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::Lsn;
use serde::{Deserialize, Serialize};

// (Connecting to the primary, and its answer to the hello, take at most
// CONNECT_TIMEOUT.)
use crate::hooks::ForwardTarget;
use crate::node::{Node, Role};
use crate::protocol::{ForwardedClient, ToPrimary, ToReplica, CONNECT_TIMEOUT};
use crate::seal::{Opener, Sealer, SessionKeys};
use crate::version;

/// Why a forwarded statement has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardError {
    /// It was not sent (no primary now, the primary refused the session,
    /// or the session's primary is gone): it did not run; retry.
    NotSent(String),
    /// It was sent but its answer was lost (the primary changed or went
    /// silent): it may or may not have run.
    Unknown(String),
}

/// The longest a forwarded statement is waited for while the same primary
/// still leads (a statement there waits at most `ack_timeout` for its
/// replicas, so this is only reached by a stuck primary).
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// How often a wait for an answer checks whether the primary changed.
const POLL: Duration = Duration::from_millis(50);

/// A client session's link to the primary, opened on first use.
pub struct ForwardClient {
    node: Arc<Node>,
    /// Whose session it is (each hello names it).
    client: ForwardedClient,
    conn: Option<Conn>,
}

struct Conn {
    term: u64,
    stream: TcpStream,
    /// Every frame after the handshake is sealed (`seal`).
    keys: SessionKeys,
}

impl Node {
    /// A forwarding link for `client`'s session (connects on first call).
    pub fn forward_client(self: &Arc<Node>, client: ForwardedClient) -> ForwardClient {
        ForwardClient {
            node: self.clone(),
            client,
            conn: None,
        }
    }

    /// Installs what runs forwarded statements when this node is primary.
    pub fn set_forward_target(&self, target: Arc<dyn ForwardTarget>) {
        let _ = self.forward_target.set(target);
    }

    /// Whether writes sent here must go to another node (never the
    /// primary's own schema changes, replayed here).
    pub fn forwards_writes(&self) -> bool {
        self.role() != Role::Primary && !crate::ddl::applying_replicated()
    }

    /// Waits until this node has applied everything up to `lsn` and the
    /// schema changes the primary had run there (`ddl_seq` of them), for
    /// at most `timeout`. `Err` says where it stands.
    pub fn wait_applied(&self, lsn: Lsn, ddl_seq: u32, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let here = self.storage.last_lsn();
            if here > lsn || (here == lsn && self.ddl.count_at(lsn) >= ddl_seq) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "node {} has applied position {here}, not yet {lsn} (waited {} ms)",
                    self.config.node_id,
                    timeout.as_millis()
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl ForwardClient {
    /// Sends one request to the primary and returns its answer. With
    /// `continuing` the request belongs to state the session holds on the
    /// primary it used last (an open transaction): it is sent only there.
    /// A schema change's answer returns once this node has replayed it
    /// too (bounded by `schema_wait`), so the session's next statement
    /// here sees the new schema. `patient`: the statement may rightly wait
    /// on the primary longer than [`MAX_WAIT`] (a named lock's timeout), so
    /// only a change of primary ends the wait for its answer.
    /// `interrupted` says whether the client's statement was killed: the
    /// primary is then told to stop it ([`ToPrimary::Cancel`]), and its
    /// answer is waited for at most [`MAX_WAIT`] more.
    pub fn call(
        &mut self,
        request: &[u8],
        continuing: bool,
        schema_wait: Duration,
        patient: bool,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, ForwardError> {
        let out = self.call_inner(request, continuing, schema_wait, patient, interrupted);
        let outcome = match &out {
            Ok(_) => "answered",
            Err(ForwardError::NotSent(_)) => "not_sent",
            Err(ForwardError::Unknown(_)) => "unknown",
        };
        self.node
            .metrics
            .forwarded
            .with_label_values(&[outcome])
            .inc();
        out
    }

    fn call_inner(
        &mut self,
        request: &[u8],
        continuing: bool,
        schema_wait: Duration,
        patient: bool,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, ForwardError> {
        let node = self.node.clone();
        if node.role() == Role::Primary {
            self.conn = None;
            return Err(ForwardError::NotSent(
                "this node has just become the primary; retry".into(),
            ));
        }
        let Some((term, addr)) = node.leader_replication.lock().clone() else {
            self.conn = None;
            return Err(ForwardError::NotSent(
                "no primary: an election is under way; retry".into(),
            ));
        };
        if self.conn.as_ref().is_some_and(|c| c.term != term) {
            self.conn = None;
            if continuing {
                return Err(ForwardError::NotSent(
                    "the primary changed; the open transaction was lost".into(),
                ));
            }
        }
        if self.conn.is_none() {
            if continuing {
                return Err(ForwardError::NotSent(
                    "the link to the primary was lost; the open transaction was lost".into(),
                ));
            }
            let conn = connect(&node, term, &addr, &self.client).map_err(ForwardError::NotSent)?;
            self.conn = Some(conn);
        }
        let conn = self.conn.as_mut().expect("connected");
        // (The cancel is written while the answer is read.)
        let mut canceller = match conn.stream.try_clone() {
            Ok(stream) => stream,
            Err(e) => {
                self.conn = None;
                return Err(ForwardError::NotSent(format!(
                    "the link to the primary failed: {e}; retry"
                )));
            }
        };
        let sent = write_frame(
            &mut conn.stream,
            Some(&mut conn.keys.sealer),
            &ToPrimary::Forward {
                request: request.to_vec(),
            },
        );
        if let Err(e) = sent {
            self.conn = None;
            // A write error may still have delivered the request.
            return Err(ForwardError::Unknown(format!(
                "the link to the primary failed: {e}; the statement's outcome is unknown"
            )));
        }
        let started = Instant::now();
        let mut cancelled: Option<Instant> = None;
        let sealer = &mut conn.keys.sealer;
        let answer = read_frame(&mut conn.stream, Some(&mut conn.keys.opener), || {
            if node.term() != term || node.role() == Role::Primary {
                return Some("the primary changed while the statement ran".to_string());
            }
            if cancelled.is_none() && interrupted() {
                cancelled = Some(Instant::now());
                if let Err(e) = write_frame(&mut canceller, Some(&mut *sealer), &ToPrimary::Cancel)
                {
                    return Some(format!(
                        "the statement was killed, and telling the primary failed: {e}"
                    ));
                }
            }
            // Once cancelled, the primary answers as soon as the statement
            // stops.
            let waited = cancelled.map_or(started.elapsed(), |at| at.elapsed());
            ((!patient || cancelled.is_some()) && waited > MAX_WAIT)
                .then(|| format!("the primary did not answer in {} s", MAX_WAIT.as_secs()))
        });
        match answer {
            Ok(ToReplica::Forwarded {
                response,
                lsn,
                ddl_seq,
                schema_changed,
            }) => {
                if schema_changed {
                    if let Err(e) = node.wait_applied(lsn, ddl_seq, schema_wait) {
                        tracing::warn!(error = %e, "a forwarded schema change is not replayed here yet");
                    }
                }
                Ok(response)
            }
            Ok(ToReplica::Reject { reason, .. }) => {
                self.conn = None;
                Err(ForwardError::NotSent(reason))
            }
            Ok(other) => {
                self.conn = None;
                Err(ForwardError::Unknown(format!(
                    "unexpected frame from the primary: {other:?}"
                )))
            }
            Err(e) => {
                self.conn = None;
                Err(ForwardError::Unknown(format!(
                    "{e}; the statement's outcome is unknown (forwarded to the primary)"
                )))
            }
        }
    }
}

impl ForwardClient {
    /// Why this session's link to the primary, and the primary's session
    /// behind it (its named locks), is known to be gone: never opened or
    /// dropped after a failure, its primary no longer leads, or the
    /// primary closed it (it died). `None` while it is usable. Cheap (one
    /// non-blocking peek).
    pub fn lost(&self) -> Option<String> {
        let Some(conn) = &self.conn else {
            return Some("the link to the primary was dropped".into());
        };
        if self.node.term() != conn.term {
            return Some(format!(
                "the primary of term {} no longer leads (term {} now)",
                conn.term,
                self.node.term()
            ));
        }
        closed(&conn.stream).map(|why| format!("the primary closed the link ({why})"))
    }
}

/// Whether the peer has closed `stream` (end of stream or an error), as a
/// non-blocking peek sees it.
fn closed(stream: &TcpStream) -> Option<String> {
    if let Err(e) = stream.set_nonblocking(true) {
        return Some(e.to_string());
    }
    let seen = stream.peek(&mut [0u8; 1]);
    let restored = stream.set_nonblocking(false);
    match seen {
        Ok(0) => Some("end of stream".into()),
        Ok(_) => restored.err().map(|e| e.to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            restored.err().map(|e| e.to_string())
        }
        Err(e) => Some(e.to_string()),
    }
}

fn connect(node: &Node, term: u64, addr: &str, client: &ForwardedClient) -> Result<Conn, String> {
    let fail =
        |e: &dyn std::fmt::Display| format!("the primary at {addr} is unreachable: {e}; retry");
    let started = Instant::now();
    let (mut stream, mut keys) = open_link(node, addr, started).map_err(|e| fail(&e))?;
    let hello = ToPrimary::ForwardHello {
        node: node.config.node_id,
        term,
        client: client.clone(),
    };
    write_frame(&mut stream, Some(&mut keys.sealer), &hello).map_err(|e| fail(&e))?;
    let answer = read_frame(&mut stream, Some(&mut keys.opener), || {
        (started.elapsed() > CONNECT_TIMEOUT).then(|| "no answer to the hello".to_string())
    });
    match answer {
        Ok(ToReplica::ForwardReady) => Ok(Conn { term, stream, keys }),
        Ok(ToReplica::Reject { reason, .. }) => Err(format!("{reason}; retry")),
        Ok(other) => Err(fail(&format!("unexpected frame {other:?}"))),
        Err(e) => Err(fail(&e)),
    }
}

/// A blocking connection to the replication listener at `addr`,
/// authenticated (the secret, then the protocol version) within
/// `auth::AUTH_TIMEOUT` of `started`, with its keys.
pub(crate) fn open_link(
    node: &Node,
    addr: &str,
    started: Instant,
) -> Result<(TcpStream, SessionKeys), String> {
    let sock = crate::protocol::resolve_blocking(addr).map_err(|e| e.to_string())?;
    let mut stream =
        TcpStream::connect_timeout(&sock, CONNECT_TIMEOUT).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(CONNECT_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let keys = authenticate(node, &mut stream, started)?;
    Ok((stream, keys))
}

/// The connector's side of the cluster-secret handshake and the protocol
/// version exchange (`auth::connect`, blocking), within
/// `auth::AUTH_TIMEOUT` of `started`; returns the connection's keys.
fn authenticate(
    node: &Node,
    stream: &mut TcpStream,
    started: Instant,
) -> Result<SessionKeys, String> {
    let give_up = || {
        (started.elapsed() > crate::auth::AUTH_TIMEOUT)
            .then(|| "no answer to the authentication".to_string())
    };
    let secret = &node.config.secret;
    let challenge = read_frame(stream, None, give_up)?;
    let proving = secret.prove(Some(challenge))?;
    write_frame(stream, None, &proving.proof).map_err(|e| e.to_string())?;
    let answer = read_frame(stream, None, give_up)?;
    let mut keys = secret
        .check_proven(&proving.listener_nonce, &proving.my_nonce, Some(answer))
        .map_err(|why| format!("replication authentication failed: {why}"))?;
    exchange_versions(stream, &mut keys, give_up).map_err(|refusal| match refusal {
        version::Refusal::Mismatch(m) => {
            node.metrics.protocol_mismatches.inc();
            m.to_string()
        }
        broken => format!("replication authentication failed: {broken}"),
    })?;
    Ok(keys)
}

/// The connector's side of the protocol version exchange (as
/// `auth::connect`, blocking): this side's version, then the listener's.
fn exchange_versions(
    stream: &mut TcpStream,
    keys: &mut SessionKeys,
    give_up: impl FnMut() -> Option<String>,
) -> Result<(), version::Refusal> {
    let ours = version::ours();
    let frame = version::sealed_frame(keys, ours).map_err(version::Refusal::Broken)?;
    write_bytes(stream, &frame).map_err(version::Refusal::Broken)?;
    // A listener of a build from before the exchange closes instead of
    // answering: that reads as no version.
    let theirs = read_bytes(stream, give_up).ok();
    version::check(keys, theirs, ours)
}

/// Writes one frame (as `FrameWriter::send`, or in clear as
/// `protocol::send` without a sealer; blocking).
pub(crate) fn write_frame<T: Serialize>(
    w: &mut TcpStream,
    sealer: Option<&mut Sealer>,
    frame: &T,
) -> std::io::Result<()> {
    let mut bytes = postcard::to_stdvec(frame)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    if let Some(sealer) = sealer {
        bytes = sealer.seal(bytes)?;
    }
    write_bytes(w, &bytes)
}

/// Writes `bytes` as one length-prefixed frame (blocking).
fn write_bytes(w: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too large"))?;
    let mut buf = Vec::with_capacity(4 + bytes.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(bytes);
    w.write_all(&buf)?;
    w.flush()
}

/// Reads one frame (opened with `opener`, or in clear without one),
/// asking `give_up` every [`POLL`] while none has come whole (a partial
/// frame is kept across the checks).
pub(crate) fn read_frame<T: for<'de> Deserialize<'de>>(
    r: &mut TcpStream,
    opener: Option<&mut Opener>,
    give_up: impl FnMut() -> Option<String>,
) -> Result<T, String> {
    let mut bytes = read_bytes(r, give_up)?;
    if let Some(opener) = opener {
        bytes = opener.open(bytes).map_err(|e| e.to_string())?;
    }
    postcard::from_bytes(&bytes).map_err(|e| e.to_string())
}

/// One length-prefixed frame's bytes, as [`read_frame`] waits for them.
/// Reads no further than the frame (the link carries one request or
/// answer at a time, so nothing follows it yet).
fn read_bytes(
    r: &mut TcpStream,
    mut give_up: impl FnMut() -> Option<String>,
) -> Result<Vec<u8>, String> {
    r.set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        if buf.len() >= 4 {
            let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() >= 4 + len {
                buf.truncate(4 + len);
                return Ok(buf.split_off(4));
            }
        }
        match r.read(&mut chunk) {
            Ok(0) => return Err("the primary closed the link".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if let Some(why) = give_up() {
                    return Err(why);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("the link to the primary failed: {e}")),
        }
    }
}

/// How often an idle forwarding session checks whether it was killed on
/// the primary (see [`serve`]).
const KILLED_POLL: Duration = Duration::from_millis(200);

/// The primary's side of one forwarding connection: one SQL session,
/// statements run in order, each on a statement thread of the front end
/// ([`ForwardTarget::run`]). Frames are read by a task of their own, so
/// that a [`ToPrimary::Cancel`], or the connection closing, stops the
/// statement running meanwhile (the session's interrupt flag, which a
/// KILL QUERY of the session here sets too). A session killed here
/// ([`ForwardedSession::killed`](crate::ForwardedSession::killed)) closes
/// the connection once its statement has answered, or at once when idle.
pub(crate) async fn serve(
    node: Arc<Node>,
    replica: u64,
    term: u64,
    client: ForwardedClient,
    rd: crate::protocol::TcpReader,
    mut wr: crate::protocol::TcpWriter,
) -> anyhow::Result<()> {
    let refusal = if node.role() != Role::Primary || node.term() != term {
        Some(format!(
            "node {} is not the primary of term {term}",
            node.config.node_id
        ))
    } else if node.forward_target.get().is_none() {
        Some("the primary takes no forwarded statements yet".to_string())
    } else {
        None
    };
    if let Some(reason) = refusal {
        return wr.reject(reason, false).await;
    }
    let target = node.forward_target.get().expect("checked").clone();
    wr.send(&ToReplica::ForwardReady).await?;
    tracing::debug!(
        replica,
        term,
        client = client.connection,
        "forwarding session opened"
    );
    let opened = target.open(replica, &client);
    let interrupt = opened.interrupt();
    let mut session = Some(opened);
    let (requests, mut incoming) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(read_requests(rd, requests, interrupt.clone()));
    let killed =
        |s: &Option<Box<dyn crate::ForwardedSession>>| s.as_ref().is_some_and(|s| s.killed());
    let served = async {
        loop {
            let request = tokio::select! {
                request = incoming.recv() => match request {
                    Some(request) => request,
                    None => break,
                },
                () = tokio::time::sleep(KILLED_POLL) => {
                    if killed(&session) {
                        break;
                    }
                    continue;
                }
            };
            if node.role() != Role::Primary || node.term() != term {
                let reason = format!(
                    "node {} is no longer the primary of term {term}; retry",
                    node.config.node_id
                );
                return wr.reject(reason, false).await;
            }
            let schema_before = node.ddl.len();
            // Put back after every statement; a failed one ends the loop.
            let Some(s) = session.take() else {
                anyhow::bail!("the forwarding session was lost");
            };
            let (s, response) = target
                .run(s, request, interrupt.clone())
                .await
                .map_err(|why| anyhow::anyhow!("a forwarded statement failed: {why}"))?;
            session = Some(s);
            let lsn = node.storage.last_lsn();
            let answer = ToReplica::Forwarded {
                response,
                lsn,
                ddl_seq: node.ddl.count_at(lsn),
                schema_changed: node.ddl.len() != schema_before,
            };
            wr.send(&answer).await?;
            if killed(&session) {
                tracing::info!(
                    replica,
                    client = client.connection,
                    "forwarding session ended here (killed, or refused a place)"
                );
                break;
            }
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    reader.abort();
    served
}

/// The forwarding connection's frames: each statement to `requests`, in
/// order; a [`ToPrimary::Cancel`] sets `interrupt` (cleared as the next
/// statement is passed on: a cancel is only ever sent while its statement
/// runs, and the link keeps frames in order). The end of the connection
/// (or a frame that has no place here) sets it too: the replica's client
/// is gone, and so is the running statement's reader.
async fn read_requests(
    mut rd: crate::protocol::TcpReader,
    requests: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    interrupt: Arc<AtomicBool>,
) {
    loop {
        match rd.recv::<ToPrimary>().await {
            Ok(Some(ToPrimary::Forward { request })) => {
                interrupt.store(false, Ordering::SeqCst);
                if requests.send(request).is_err() {
                    return;
                }
            }
            Ok(Some(ToPrimary::Cancel)) => interrupt.store(true, Ordering::SeqCst),
            Ok(Some(other)) => {
                tracing::warn!(frame = ?other, "unexpected frame on a forwarding connection");
                break;
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "a forwarding connection failed");
                break;
            }
        }
    }
    interrupt.store(true, Ordering::SeqCst);
}
