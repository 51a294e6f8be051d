//! Authentication of replication connections by a shared cluster secret.
//!
//! The replication listener streams the change log, hands out checkpoints
//! and runs forwarded SQL, so nothing is read from a connection before it
//! has proved it holds the secret. Every connection starts with a mutual
//! HMAC-SHA256 challenge (the secret never crosses the wire):
//!
//! ```text
//! listener  -> connector  Challenge { nonce: L }
//! connector -> listener   Proof { nonce: C, mac: HMAC(secret, "connector" L C) }
//! listener  -> connector  Proven { mac: HMAC(secret, "listener" C L) } | Reject
//! ```
//!
//! The connector checks `Proven` too, so a node that does not hold the
//! secret cannot pose as a primary and feed entries to a replica. Fresh
//! nonces on both sides keep a recorded exchange from being replayed.
//! Both sides then derive the connection's two keys from the secret and
//! the nonces, and every later frame is encrypted and authenticated with
//! them (`seal`): what follows the handshake can be neither read nor
//! altered nor taken over by a man in the middle.

use std::path::Path;
use std::time::Duration;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::protocol::{self, ToPrimary, ToReplica};
use crate::seal::SessionKeys;
use crate::version;

/// The shortest secret accepted (bytes): shorter ones can be guessed.
pub const MIN_SECRET_LEN: usize = 16;
/// Bytes of each side's nonce.
const NONCE_LEN: usize = 32;
/// The whole handshake must finish within this (an unauthenticated peer
/// holds no task for longer).
pub(crate) const AUTH_TIMEOUT: Duration = Duration::from_secs(5);
/// Frames before authentication are tiny; a larger one is refused unread.
pub(crate) const MAX_AUTH_FRAME: usize = 1024;
const CONNECTOR_LABEL: &[u8] = b"ladle-replication/connector\0";
const LISTENER_LABEL: &[u8] = b"ladle-replication/listener\0";
/// Key of the frames the listener sends (derived, never sent).
const LISTENER_KEY_LABEL: &[u8] = b"ladle-replication/key/listener-to-connector\0";
/// Key of the frames the connector sends.
const CONNECTOR_KEY_LABEL: &[u8] = b"ladle-replication/key/connector-to-listener\0";

/// The secret every node of a cluster holds (`--cluster-secret-file` or
/// `LADLE_CLUSTER_SECRET`).
#[derive(Clone)]
pub struct ClusterSecret(hmac::Key);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

impl ClusterSecret {
    /// The secret `text` (surrounding white space, such as a file's final
    /// newline, is not part of it); at least [`MIN_SECRET_LEN`] bytes.
    pub fn new(text: &[u8]) -> Result<ClusterSecret, String> {
        let trimmed = text.trim_ascii();
        if trimmed.len() < MIN_SECRET_LEN {
            return Err(format!(
                "the cluster secret must be at least {MIN_SECRET_LEN} bytes (it is {})",
                trimmed.len()
            ));
        }
        Ok(ClusterSecret(hmac::Key::new(hmac::HMAC_SHA256, trimmed)))
    }

    /// The secret held in the file at `path`.
    pub fn from_file(path: &Path) -> Result<ClusterSecret, String> {
        let text = std::fs::read(path)
            .map_err(|e| format!("reading the cluster secret {}: {e}", path.display()))?;
        ClusterSecret::new(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn mac(&self, label: &[u8], first: &[u8], second: &[u8]) -> Vec<u8> {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(label);
        ctx.update(first);
        ctx.update(second);
        ctx.sign().as_ref().to_vec()
    }

    fn verify(&self, label: &[u8], first: &[u8], second: &[u8], mac: &[u8]) -> bool {
        let mut msg = Vec::with_capacity(label.len() + first.len() + second.len());
        msg.extend_from_slice(label);
        msg.extend_from_slice(first);
        msg.extend_from_slice(second);
        // Constant time: a wrong guess tells nothing about the right one.
        hmac::verify(&self.0, &msg, mac).is_ok()
    }

    /// One side's keys for the connection whose handshake used these
    /// nonces: HMAC-SHA256 of the secret, a direction label and both nonces
    /// (32 bytes: a ChaCha20-Poly1305 key).
    fn session_keys(
        &self,
        listener_nonce: &[u8],
        connector_nonce: &[u8],
        listener: bool,
    ) -> Result<SessionKeys, String> {
        let from_listener = self.mac(LISTENER_KEY_LABEL, listener_nonce, connector_nonce);
        let from_connector = self.mac(CONNECTOR_KEY_LABEL, listener_nonce, connector_nonce);
        if listener {
            SessionKeys::new(&from_listener, &from_connector)
        } else {
            SessionKeys::new(&from_connector, &from_listener)
        }
    }

    /// The listener's first frame, and its nonce to check the proof with.
    pub(crate) fn challenge(&self) -> Result<(ToReplica, Vec<u8>), String> {
        let nonce = nonce()?;
        Ok((
            ToReplica::Challenge {
                nonce: nonce.clone(),
            },
            nonce,
        ))
    }

    /// The listener checks the connector's answer to its challenge
    /// `listener_nonce`; returns its own proof to send back and the
    /// listener's keys for the connection. `Err` says why it is refused
    /// (for the log).
    pub(crate) fn check_proof(
        &self,
        listener_nonce: &[u8],
        answer: Option<ToPrimary>,
    ) -> Result<(ToReplica, SessionKeys), String> {
        match answer {
            Some(ToPrimary::Proof { nonce, mac }) => {
                if nonce.len() != NONCE_LEN
                    || !self.verify(CONNECTOR_LABEL, listener_nonce, &nonce, &mac)
                {
                    return Err("wrong cluster secret".into());
                }
                let proven = ToReplica::Proven {
                    mac: self.mac(LISTENER_LABEL, &nonce, listener_nonce),
                };
                Ok((proven, self.session_keys(listener_nonce, &nonce, true)?))
            }
            Some(other) => Err(format!(
                "no proof of the cluster secret (first frame: {})",
                frame_name(&other)
            )),
            None => Err("closed before proving the cluster secret".into()),
        }
    }

    /// The connector's answer to the listener's first frame, with the
    /// listener's nonce and its own (to check the listener's proof with).
    pub(crate) fn prove(&self, challenge: Option<ToReplica>) -> Result<Proving, String> {
        let listener_nonce = match challenge {
            Some(ToReplica::Challenge { nonce }) if nonce.len() == NONCE_LEN => nonce,
            Some(ToReplica::Reject { reason, .. }) => return Err(reason),
            other => {
                return Err(format!(
                    "the peer sent no challenge ({other:?}): not a Ladle replication listener"
                ))
            }
        };
        let my_nonce = nonce()?;
        let mac = self.mac(CONNECTOR_LABEL, &listener_nonce, &my_nonce);
        Ok(Proving {
            proof: ToPrimary::Proof {
                nonce: my_nonce.clone(),
                mac,
            },
            listener_nonce,
            my_nonce,
        })
    }

    /// The connector checks the listener's answer to its proof; returns
    /// the connector's keys for the connection.
    pub(crate) fn check_proven(
        &self,
        listener_nonce: &[u8],
        my_nonce: &[u8],
        answer: Option<ToReplica>,
    ) -> Result<SessionKeys, String> {
        match answer {
            Some(ToReplica::Proven { mac })
                if self.verify(LISTENER_LABEL, my_nonce, listener_nonce, &mac) =>
            {
                self.session_keys(listener_nonce, my_nonce, false)
            }
            Some(ToReplica::Proven { .. }) => {
                Err("the peer does not hold the cluster secret (wrong proof)".into())
            }
            Some(ToReplica::Reject { reason, .. }) => Err(reason),
            other => Err(format!("unexpected answer to the proof: {other:?}")),
        }
    }
}

/// The connector's half-done handshake: the proof to send and the nonces
/// the listener's answer is checked against.
pub(crate) struct Proving {
    pub(crate) proof: ToPrimary,
    pub(crate) listener_nonce: Vec<u8>,
    pub(crate) my_nonce: Vec<u8>,
}

fn nonce() -> Result<Vec<u8>, String> {
    let mut nonce = vec![0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| "the OS random source failed".to_string())?;
    Ok(nonce)
}

/// A frame's name for the log (never its content: it is unauthenticated).
fn frame_name(frame: &ToPrimary) -> &'static str {
    match frame {
        ToPrimary::Hello { .. } => "Hello",
        ToPrimary::Ack { .. } => "Ack",
        ToPrimary::SchemaAck { .. } => "SchemaAck",
        ToPrimary::ForwardHello { .. } => "ForwardHello",
        ToPrimary::Forward { .. } => "Forward",
        ToPrimary::BootstrapHello { .. } => "BootstrapHello",
        ToPrimary::Proof { .. } => "Proof",
        ToPrimary::Kill { .. } => "Kill",
        ToPrimary::Cancel => "Cancel",
    }
}

/// Why the listener refused a connection (the peer has been told, or
/// closed).
#[derive(Debug)]
pub(crate) enum Refused {
    /// No or a wrong proof of the cluster secret.
    Secret(String),
    /// The peer speaks another protocol version (`version`), or its
    /// version frame was broken.
    Version(version::Refusal),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Secret(why) => f.write_str(why),
            Refused::Version(why) => why.fmt(f),
        }
    }
}

/// The listener's side, within [`AUTH_TIMEOUT`]: the secret, then the
/// protocol version ([`version::ours`]); returns the keys every later
/// frame is sealed with. On `Err` the peer has been told it is refused;
/// the caller logs the reason and closes.
pub(crate) async fn accept(
    secret: &ClusterSecret,
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
) -> Result<SessionKeys, Refused> {
    accept_as(secret, version::ours(), rd, wr).await
}

/// [`accept`] speaking protocol version `ours`.
async fn accept_as(
    secret: &ClusterSecret,
    ours: u32,
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
) -> Result<SessionKeys, Refused> {
    let exchange = async {
        let mut keys = accept_secret(secret, rd, wr)
            .await
            .map_err(Refused::Secret)?;
        // The peer's version first, then ours (even when they differ: the
        // peer logs both too). Strictly one frame each way in turn: a
        // blocking connector reads no further than the frame it waits for.
        let theirs = protocol::read_bytes(rd, MAX_AUTH_FRAME).await;
        let ours_sealed = version::sealed_frame(&mut keys, ours);
        let sent = match ours_sealed {
            Ok(frame) => protocol::write_bytes(wr, &frame).await,
            Err(e) => Err(e),
        };
        let theirs = theirs.map_err(|e| Refused::Version(version::Refusal::Broken(e)))?;
        version::check(&mut keys, theirs, ours).map_err(Refused::Version)?;
        sent.map_err(|e| Refused::Version(version::Refusal::Broken(e)))?;
        Ok(keys)
    };
    tokio::time::timeout(AUTH_TIMEOUT, exchange)
        .await
        .map_err(|_| Refused::Secret("no proof of the cluster secret in time".to_string()))?
}

/// The cluster-secret half of [`accept`].
async fn accept_secret(
    secret: &ClusterSecret,
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
) -> Result<SessionKeys, String> {
    let (challenge, listener_nonce) = secret.challenge()?;
    protocol::send(wr, &challenge)
        .await
        .map_err(|e| e.to_string())?;
    let answer = protocol::recv_bounded::<ToPrimary>(rd, MAX_AUTH_FRAME)
        .await
        .map_err(|e| format!("no proof of the cluster secret ({e})"))?;
    match secret.check_proof(&listener_nonce, answer) {
        Ok((proven, keys)) => {
            protocol::send(wr, &proven)
                .await
                .map_err(|e| e.to_string())?;
            Ok(keys)
        }
        Err(why) => {
            let refusal = ToReplica::Reject {
                reason: format!("the replication listener refused the connection: {why}"),
                diverged: false,
            };
            let _ = protocol::send(wr, &refusal).await;
            Err(why)
        }
    }
}

/// The connector's side (replication stream, bootstrap), within
/// [`AUTH_TIMEOUT`]: `Err` when either side fails to prove the secret, or
/// when the two speak different protocol versions (a
/// [`VersionMismatch`](version::VersionMismatch) error); returns the keys
/// every later frame is sealed with.
pub(crate) async fn connect(
    secret: &ClusterSecret,
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
) -> anyhow::Result<SessionKeys> {
    connect_as(secret, version::ours(), rd, wr).await
}

/// [`connect`] speaking protocol version `ours`.
async fn connect_as(
    secret: &ClusterSecret,
    ours: u32,
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
) -> anyhow::Result<SessionKeys> {
    let exchange = async {
        let challenge = protocol::recv_bounded::<ToReplica>(rd, MAX_AUTH_FRAME)
            .await
            .map_err(|e| e.to_string())?;
        let proving = secret.prove(challenge)?;
        protocol::send(wr, &proving.proof)
            .await
            .map_err(|e| e.to_string())?;
        let answer = protocol::recv_bounded::<ToReplica>(rd, MAX_AUTH_FRAME)
            .await
            .map_err(|e| e.to_string())?;
        secret.check_proven(&proving.listener_nonce, &proving.my_nonce, answer)
    };
    let mut keys = match tokio::time::timeout(AUTH_TIMEOUT, exchange).await {
        Ok(Ok(keys)) => keys,
        Ok(Err(why)) => anyhow::bail!("replication authentication failed: {why}"),
        Err(_) => anyhow::bail!("replication authentication failed: no answer in time"),
    };
    let versions = async {
        let frame = version::sealed_frame(&mut keys, ours).map_err(version::Refusal::Broken)?;
        // A listener of a build from before the exchange closes instead
        // of answering: that reads as no version.
        let theirs = match protocol::write_bytes(wr, &frame).await {
            Ok(()) => protocol::read_bytes(rd, MAX_AUTH_FRAME)
                .await
                .unwrap_or(None),
            Err(_) => None,
        };
        version::check(&mut keys, theirs, ours)
    };
    match tokio::time::timeout(AUTH_TIMEOUT, versions).await {
        Ok(Ok(())) => Ok(keys),
        Ok(Err(version::Refusal::Mismatch(m))) => Err(anyhow::Error::new(m)),
        Ok(Err(broken)) => anyhow::bail!("replication authentication failed: {broken}"),
        Err(_) => anyhow::bail!("replication authentication failed: no version in time"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> ClusterSecret {
        ClusterSecret::new(s.as_bytes()).expect("a long enough secret")
    }

    #[test]
    fn a_short_secret_is_refused_and_white_space_is_not_part_of_it() {
        let err = ClusterSecret::new(b"short\n").expect_err("5 bytes");
        assert!(err.contains("at least 16"), "{err}");
        // A file's trailing newline does not change the secret.
        let a = secret("0123456789abcdef\n");
        let b = secret("0123456789abcdef");
        assert_eq!(a.mac(b"l", b"x", b"y"), b.mac(b"l", b"x", b"y"));
    }

    async fn handshake(
        listener: ClusterSecret,
        connector: ClusterSecret,
    ) -> (Result<SessionKeys, Refused>, anyhow::Result<SessionKeys>) {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let (mut ard, mut awr) = tokio::io::split(&mut a);
        let (mut brd, mut bwr) = tokio::io::split(&mut b);
        tokio::join!(
            accept(&listener, &mut ard, &mut awr),
            connect(&connector, &mut brd, &mut bwr)
        )
    }

    #[tokio::test]
    async fn both_sides_must_hold_the_same_secret() {
        let (l, c) = handshake(secret("the cluster secret"), secret("the cluster secret")).await;
        let mut l = l.expect("accepted");
        let mut c = c.expect("connected");
        // Both sides derived the same two keys, one per direction.
        let sealed = l.sealer.seal(b"an entry".to_vec()).unwrap();
        assert_eq!(c.opener.open(sealed).unwrap(), b"an entry");
        let sealed = c.sealer.seal(b"an ack".to_vec()).unwrap();
        assert_eq!(l.opener.open(sealed).unwrap(), b"an ack");

        let (l, c) = handshake(secret("the cluster secret"), secret("another secret!!")).await;
        assert_eq!(
            l.err().map(|e| e.to_string()),
            Some("wrong cluster secret".to_string())
        );
        let c = c.expect_err("refused").to_string();
        assert!(
            c.contains("refused the connection: wrong cluster secret"),
            "{c}"
        );
    }

    /// Two builds speaking different protocol versions refuse each other
    /// right after the secret, both naming both versions, before any other
    /// frame is read; one from before versions (it sends its hello where
    /// the version belongs) is refused the same way.
    #[tokio::test]
    async fn different_protocol_versions_refuse_each_other() {
        let s = secret("the cluster secret");
        let (mut a, mut b) = tokio::io::duplex(4096);
        let (mut ard, mut awr) = tokio::io::split(&mut a);
        let (mut brd, mut bwr) = tokio::io::split(&mut b);
        let (l, c) = tokio::join!(
            accept_as(&s, 7, &mut ard, &mut awr),
            connect_as(&s, 8, &mut brd, &mut bwr)
        );
        let l = l.expect_err("listener refuses").to_string();
        assert!(
            l.contains("this node speaks version 7, the peer version 8"),
            "{l}"
        );
        let c = c.expect_err("connector refuses");
        let mismatch = c.downcast_ref::<version::VersionMismatch>();
        assert_eq!(
            mismatch,
            Some(&version::VersionMismatch {
                ours: 8,
                theirs: Some(7)
            })
        );

        // A connector from before versions: its sealed Hello comes where
        // the version frame belongs.
        let (mut a, mut b) = tokio::io::duplex(4096);
        let (mut ard, mut awr) = tokio::io::split(&mut a);
        let old_connector = async {
            let (mut rd, mut wr) = tokio::io::split(&mut b);
            let challenge = protocol::recv::<ToReplica>(&mut rd).await.unwrap();
            let proving = s.prove(challenge).unwrap();
            protocol::send(&mut wr, &proving.proof).await.unwrap();
            let proven = protocol::recv::<ToReplica>(&mut rd).await.unwrap();
            let keys = s
                .check_proven(&proving.listener_nonce, &proving.my_nonce, proven)
                .unwrap();
            let (_, mut wr) = protocol::sealed(rd, wr, keys);
            let hello = ToPrimary::BootstrapHello { node: 4 };
            wr.send(&hello).await.unwrap();
        };
        let (l, ()) = tokio::join!(accept_as(&s, 7, &mut ard, &mut awr), old_connector);
        let l = l.expect_err("refused").to_string();
        assert!(l.contains("the peer sent no version"), "{l}");

        // The same version passes, and the connection goes on sealed.
        let (l, c) = handshake(s.clone(), s).await;
        assert!(l.is_ok() && c.is_ok());
    }

    /// A peer that skips the handshake (an old node, or anyone who reached
    /// the port) is refused before its frame is acted on.
    #[tokio::test]
    async fn a_hello_without_a_proof_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let (mut ard, mut awr) = tokio::io::split(&mut a);
        let listener = secret("the cluster secret");
        let peer = async {
            let hello = ToPrimary::BootstrapHello { node: 9 };
            protocol::send(&mut b, &hello).await.expect("send");
            let _challenge = protocol::recv::<ToReplica>(&mut b)
                .await
                .expect("challenge");
            protocol::recv::<ToReplica>(&mut b).await.expect("answer")
        };
        let (accepted, answer) = tokio::join!(accept(&listener, &mut ard, &mut awr), peer);
        assert_eq!(
            accepted.err().map(|e| e.to_string()),
            Some("no proof of the cluster secret (first frame: BootstrapHello)".to_string())
        );
        assert!(
            matches!(answer, Some(ToReplica::Reject { ref reason, .. }) if reason.contains("refused")),
            "{answer:?}"
        );
    }

    async fn write_raw(w: &mut (impl AsyncWrite + Unpin), frame: &[u8]) {
        use tokio::io::AsyncWriteExt;
        w.write_all(&(frame.len() as u32).to_be_bytes())
            .await
            .unwrap();
        w.write_all(frame).await.unwrap();
    }

    /// A relay between a replica and the primary (a man in the middle) that
    /// passes the handshake on sees no frame's content afterwards, and a
    /// frame it injects ends the connection instead of being acted on.
    #[tokio::test]
    async fn a_man_in_the_middle_reads_nothing_and_cannot_inject() {
        let s = secret("the cluster secret");
        let (mut l_io, mut to_l) = tokio::io::duplex(1 << 16);
        let (mut c_io, mut to_c) = tokio::io::duplex(1 << 16);
        let (mut l_rd, mut l_wr) = tokio::io::split(&mut l_io);
        let (mut c_rd, mut c_wr) = tokio::io::split(&mut c_io);
        let relay = async {
            // Challenge, Proof, Proven, then the two versions: passed on
            // unchanged.
            for from_listener in [true, false, true, false, true] {
                let (src, dst) = if from_listener {
                    (&mut to_l, &mut to_c)
                } else {
                    (&mut to_c, &mut to_l)
                };
                let frame = protocol::read_bytes(src, 1 << 20).await.unwrap().unwrap();
                write_raw(dst, &frame).await;
            }
        };
        let (l_keys, c_keys, ()) = tokio::join!(
            accept(&s, &mut l_rd, &mut l_wr),
            connect(&s, &mut c_rd, &mut c_wr),
            relay
        );
        let (mut listener, _) = protocol::sealed(l_rd, l_wr, l_keys.expect("accepted"));
        let (_, mut connector) = protocol::sealed(c_rd, c_wr, c_keys.expect("connected"));

        let statement = ToPrimary::Forward {
            request: b"INSERT INTO payroll VALUES (1)".to_vec(),
        };
        connector.send(&statement).await.unwrap();
        let on_the_wire = protocol::read_bytes(&mut to_c, 1 << 20)
            .await
            .unwrap()
            .unwrap();
        assert!(!on_the_wire.windows(7).any(|w| w == b"payroll"));
        write_raw(&mut to_l, &on_the_wire).await;
        assert_eq!(listener.recv::<ToPrimary>().await.unwrap(), Some(statement));

        // A frame the relay makes up (in clear, as before sealing) is refused.
        protocol::send(&mut to_l, &ToPrimary::Ack { applied: 1 << 40 })
            .await
            .unwrap();
        let err = listener.recv::<ToPrimary>().await.expect_err("forged");
        assert!(err.to_string().contains("integrity check"), "{err}");
    }

    /// A listener that does not hold the secret cannot pose as a primary:
    /// its proof fails on the connector's side.
    #[test]
    fn a_listener_with_another_secret_fails_the_connectors_check() {
        let ours = secret("the cluster secret");
        let theirs = secret("another secret!!");
        let (challenge, listener_nonce) = theirs.challenge().expect("nonce");
        let proving = ours.prove(Some(challenge)).expect("proof");
        let forged = ToReplica::Proven {
            mac: theirs.mac(LISTENER_LABEL, &proving.my_nonce, &listener_nonce),
        };
        let err = ours
            .check_proven(&listener_nonce, &proving.my_nonce, Some(forged))
            .expect_err("wrong proof");
        assert!(err.contains("does not hold the cluster secret"), "{err}");
    }
}
