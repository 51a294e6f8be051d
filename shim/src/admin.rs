//! Administrative statements that act on the server rather than on data:
//!
//! - `SNAPSHOT VIEWS`: take a snapshot of view state now; one row back
//!   (epoch, lsn, nodes, nodes_written, bytes_written, capture_ms, total_ms).
//! - `SHOW SNAPSHOTS`: the retained snapshot epochs, oldest first.
//! - `SHOW CLUSTER`: the cluster's members as etcd last listed them (node,
//!   MySQL address, role, applied position, entries behind the primary,
//!   replication protocol version).
//!
//! The shim does not know how the server schedules or stores snapshots: the
//! server implements [`Admin`] and hands it to [`crate::Frontend::new`].
//! Statements are recognized from their first two words, before SQL parsing
//! (the parser knows neither form).

use ladle_common::{SqlType, Value};
use sqlparser::tokenizer::Token;

use crate::error::{WireError, ER_NOT_SUPPORTED_YET, ER_UNKNOWN};
use crate::output::{column, int_column, Output};
use crate::tokens::word;

/// What `SNAPSHOT VIEWS` reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotTaken {
    pub epoch: u64,
    /// Every saved node reflects exactly the writes with LSN <= this.
    pub lsn: u64,
    pub nodes: u64,
    /// Nodes whose state (full or delta) was written in this epoch.
    pub nodes_written: u64,
    pub bytes_written: u64,
    pub capture_ms: u64,
    pub total_ms: u64,
}

/// One retained snapshot epoch, for `SHOW SNAPSHOTS`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetainedSnapshot {
    pub epoch: u64,
    pub lsn: u64,
    pub nodes: u64,
    pub files: u64,
    pub bytes: u64,
    /// Files in the longest node chain (what recovery reads for that node).
    pub longest_chain: u64,
    /// Milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
}

/// One cluster member, for `SHOW CLUSTER`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterMember {
    pub node: u64,
    pub mysql: String,
    pub role: String,
    pub applied: u64,
    /// Entries behind the primary (0 for the primary).
    pub behind: u64,
    /// The replication protocol version it speaks (nodes of different
    /// versions do not replicate to each other).
    pub protocol: u32,
}

/// Server operations the shim exposes as statements. Implementations block
/// (they run on the statement's thread) and report failures as
/// text for the client.
pub trait Admin: Send + Sync {
    /// Takes a snapshot of view state now and waits for it to be published.
    fn snapshot_now(&self) -> Result<SnapshotTaken, String>;
    /// The retained snapshot epochs, oldest first.
    fn snapshots(&self) -> Result<Vec<RetainedSnapshot>, String>;
    /// The cluster's members; an error on a single node.
    fn cluster(&self) -> Result<Vec<ClusterMember>, String> {
        Err("this server is not part of a cluster (start it with --etcd)".into())
    }
}

/// An [`Admin`] for front ends without snapshots (tests, embedding).
pub struct NoAdmin;

impl Admin for NoAdmin {
    fn snapshot_now(&self) -> Result<SnapshotTaken, String> {
        Err("snapshots are not available in this server".into())
    }
    fn snapshots(&self) -> Result<Vec<RetainedSnapshot>, String> {
        Ok(Vec::new())
    }
}

/// Runs an admin statement if `t` (tokens, no whitespace) is one.
pub fn route(admin: &dyn Admin, t: &[Token]) -> Option<Result<Output, WireError>> {
    let w0 = word(t, 0)?;
    let w1 = word(t, 1)?;
    let statement = match (w0.as_str(), w1.as_str()) {
        ("SNAPSHOT", "VIEWS") => "SNAPSHOT VIEWS",
        ("SHOW", "SNAPSHOTS") => "SHOW SNAPSHOTS",
        ("SHOW", "CLUSTER") => "SHOW CLUSTER",
        _ => return None,
    };
    if t.len() > 2 {
        return Some(Err(WireError {
            code: crate::error::ER_PARSE,
            message: format!(
                "You have an error in your SQL syntax; {statement} takes no arguments"
            ),
        }));
    }
    Some(match statement {
        "SNAPSHOT VIEWS" => snapshot_views(admin),
        "SHOW CLUSTER" => show_cluster(admin),
        _ => show_snapshots(admin),
    })
}

fn failed(message: String) -> WireError {
    WireError {
        code: ER_UNKNOWN,
        message,
    }
}

fn snapshot_views(admin: &dyn Admin) -> Result<Output, WireError> {
    let s = admin
        .snapshot_now()
        .map_err(|e| failed(format!("snapshot failed: {e}")))?;
    let columns = [
        "epoch",
        "lsn",
        "nodes",
        "nodes_written",
        "bytes_written",
        "capture_ms",
        "total_ms",
    ]
    .iter()
    .map(|n| int_column(n))
    .collect();
    let rows = vec![[
        s.epoch,
        s.lsn,
        s.nodes,
        s.nodes_written,
        s.bytes_written,
        s.capture_ms,
        s.total_ms,
    ]
    .into_iter()
    .map(Value::UInt)
    .collect()];
    Ok(Output::Rows {
        columns,
        rows: rows.into(),
    })
}

fn show_snapshots(admin: &dyn Admin) -> Result<Output, WireError> {
    let list = admin.snapshots().map_err(|e| WireError {
        code: ER_NOT_SUPPORTED_YET,
        message: e,
    })?;
    let mut columns: Vec<_> = ["epoch", "lsn", "nodes", "files", "bytes", "longest_chain"]
        .iter()
        .map(|n| int_column(n))
        .collect();
    columns.push(column("created", SqlType::DateTime { fsp: 0 }));
    let rows = list
        .into_iter()
        .map(|r| {
            let mut row: Vec<Value> = [r.epoch, r.lsn, r.nodes, r.files, r.bytes, r.longest_chain]
                .into_iter()
                .map(Value::UInt)
                .collect();
            let created = i64::try_from(r.created_unix_ms)
                .ok()
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map_or(Value::Null, |t| Value::DateTime(t.naive_utc()));
            row.push(created);
            row
        })
        .collect();
    Ok(Output::Rows { columns, rows })
}

fn show_cluster(admin: &dyn Admin) -> Result<Output, WireError> {
    let members = admin.cluster().map_err(|e| WireError {
        code: ER_NOT_SUPPORTED_YET,
        message: e,
    })?;
    let columns = vec![
        int_column("node"),
        column("mysql", SqlType::VarChar(64)),
        column("role", SqlType::VarChar(16)),
        int_column("applied"),
        int_column("behind"),
        int_column("protocol"),
    ];
    let rows = members
        .into_iter()
        .map(|m| {
            vec![
                Value::UInt(m.node),
                Value::text(&m.mysql),
                Value::text(&m.role),
                Value::UInt(m.applied),
                Value::UInt(m.behind),
                Value::UInt(u64::from(m.protocol)),
            ]
        })
        .collect();
    Ok(Output::Rows { columns, rows })
}
