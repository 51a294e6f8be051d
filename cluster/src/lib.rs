//! Ladle's cluster: one primary and replicas, coordinated by etcd and fed
//! by the primary's change log (issue #16, phase 1; design in
//! `docs/cluster.md`).
//!
//! Entry point: [`Node::start`] over a node's
//! [`Storage`](ladle_storage::Storage) once its dataflow and front end
//! exist. The node then
//! - holds an etcd lease (TTL [`ClusterConfig::lease_ttl`], kept alive) that
//!   carries its membership key (`<prefix>/members/<id>`: addresses, applied
//!   LSN, whom it follows) and, on the primary, the leader key;
//! - campaigns for the leader key when there is none, only if every live
//!   member has stopped following and none has applied more than it; the
//!   leader key and the term (`<prefix>/term`, +1 per election) are written
//!   in one etcd transaction, so etcd alone decides who leads;
//! - as primary, streams committed change-log entries (term, LSN) and
//!   schema changes to each replica over TCP ([`protocol`]) and, with
//!   `sync_replicas` N > 0, acknowledges a write only once N replicas have
//!   persisted it and its lease is still certainly valid
//!   ([`WriteGate`](ladle_storage::WriteGate));
//! - as replica, applies what it receives at the same LSNs
//!   ([`Storage::apply_replicated`](ladle_storage::Storage::apply_replicated)),
//!   so its own dataflow keeps its views current and it serves reads; it
//!   refuses entries of a stale term, and writes get MySQL's 1290.
//!
//! The node is glued to the SQL front end by the server through
//! [`DdlApplier`] (replays a schema change) and [`Node::check_writable`] /
//! [`Node::record_ddl`] (the shim's schema-log hook).

mod ack_wait;
mod auth;
mod bootstrap;
mod config;
mod coord;
mod ddl;
mod follow;
mod forward;
mod gate;
mod hooks;
mod kill;
mod node;
pub mod protocol;
mod seal;
mod start;
mod stream;
mod version;

pub use auth::ClusterSecret;
pub use bootstrap::{install_pending as install_pending_bootstrap, set_restart_args};
pub use config::ClusterConfig;
pub use ddl::DdlApplier;
pub use forward::{ForwardClient, ForwardError};
pub use hooks::{ForwardTarget, ForwardedRun, ForwardedSession, ViewSnapshotSource};
pub use node::{MemberInfo, Node, ReplicaProgress, Role};
pub use version::{VersionMismatch, PROTOCOL_VERSION};
