//! The replication protocol's version, exchanged right after the
//! cluster-secret handshake (`auth`) on every connection.
//!
//! Frames are postcard bytes read by position: a node of another build
//! whose frames gained, lost or reordered a field would misread them
//! without noticing. So each side's first sealed frame says which version
//! of the frames it speaks, and a connection whose two ends differ ends
//! there, before any other frame is read, on both sides (logged with both
//! versions, counted in `ladle_cluster_protocol_mismatches_total`; each
//! node's version is in `SHOW CLUSTER`). The rule for bumping
//! [`PROTOCOL_VERSION`] is in docs/cluster.md ("Protocol version").

use serde::{Deserialize, Serialize};

use crate::seal::SessionKeys;

/// The version of the replication frames this build speaks
/// ([`ToPrimary`](crate::protocol::ToPrimary),
/// [`ToReplica`](crate::protocol::ToReplica) and every encoding carried in
/// them, forwarded statements' requests and answers included). Builds from
/// before the exchange existed speak none (shown as 0).
///
/// 1: the first versioned frames. 2: `ToPrimary::Kill` and
/// `ToReplica::Killed` (KILL of another node's connection). 3:
/// `ToPrimary::Cancel` (KILL of a forwarded statement). 4: a forwarded
/// statement's answer says whether the session holds named locks. 5:
/// `ToPrimary::ForwardHello` names the replica's client (the primary's
/// process list shows forwarded sessions).
pub const PROTOCOL_VERSION: u32 = 5;

/// Test hook: `LADLE_TEST_PROTOCOL_VERSION` makes this node claim another
/// version (a node of another build, for the cluster tests).
pub fn ours() -> u32 {
    static OURS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *OURS.get_or_init(|| {
        std::env::var("LADLE_TEST_PROTOCOL_VERSION")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(PROTOCOL_VERSION)
    })
}

/// Marks a version frame, so that another frame (a build from before the
/// exchange sends its hello here) is not taken for one.
const MAGIC: [u8; 8] = *b"ladle/pv";

/// The version frame's content. Its layout never changes, whatever the
/// version: it is how two builds find out they differ.
#[derive(Serialize, Deserialize)]
struct VersionFrame {
    magic: [u8; 8],
    version: u32,
}

/// The two ends of a connection speak different versions: it ends before
/// any other frame is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionMismatch {
    /// This node's version.
    pub ours: u32,
    /// The peer's; `None` when it sent no version frame (a build from
    /// before the exchange).
    pub theirs: Option<u32>,
}

impl std::fmt::Display for VersionMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.theirs {
            Some(theirs) => write!(
                f,
                "replication protocol version mismatch: this node speaks version {}, \
                 the peer version {theirs} (run one build on every node)",
                self.ours
            ),
            None => write!(
                f,
                "replication protocol version mismatch: this node speaks version {}, \
                 the peer sent no version (a build from before protocol versions; \
                 run one build on every node)",
                self.ours
            ),
        }
    }
}

impl std::error::Error for VersionMismatch {}

/// This side's version frame (`version`), sealed with the connection's
/// `keys` as its first frame after the handshake.
pub(crate) fn sealed_frame(keys: &mut SessionKeys, version: u32) -> std::io::Result<Vec<u8>> {
    let frame = VersionFrame {
        magic: MAGIC,
        version,
    };
    let bytes = postcard::to_stdvec(&frame)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    keys.sealer.seal(bytes)
}

/// Why the peer's first sealed frame ends the connection.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// It did not open (not sealed by the authenticated peer).
    Broken(std::io::Error),
    /// It speaks another version, or none.
    Mismatch(VersionMismatch),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Broken(e) => write!(f, "the version exchange failed: {e}"),
            Refusal::Mismatch(m) => m.fmt(f),
        }
    }
}

/// Checks the peer's first sealed frame (`None`: it closed instead)
/// against `ours`.
pub(crate) fn check(
    keys: &mut SessionKeys,
    sealed: Option<Vec<u8>>,
    ours: u32,
) -> Result<(), Refusal> {
    let mismatch = |theirs| Refusal::Mismatch(VersionMismatch { ours, theirs });
    let Some(sealed) = sealed else {
        // A build from before the exchange closes when it cannot read
        // this side's version frame.
        return Err(mismatch(None));
    };
    let bytes = keys.opener.open(sealed).map_err(Refusal::Broken)?;
    match postcard::from_bytes::<VersionFrame>(&bytes) {
        Ok(frame) if frame.magic == MAGIC && frame.version == ours => Ok(()),
        Ok(frame) if frame.magic == MAGIC => Err(mismatch(Some(frame.version))),
        _ => Err(mismatch(None)),
    }
}
