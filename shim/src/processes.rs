//! The server's connections as `SHOW PROCESSLIST`,
//! `information_schema.PROCESSLIST` and `KILL` see them. Each connection
//! registers a [`Process`] (its id is `CONNECTION_ID()`) and keeps its
//! state (user, database, command, statement text, since when) up to date
//! around each statement, outside the session's lock, so a listing never
//! waits for a busy connection.
//!
//! `KILL QUERY id` sets the process's interrupt flag, which the statement's
//! thread watches (see `ladle_dataflow::interrupt`): the read ends with
//! 1317. `KILL [CONNECTION] id` does the same and closes the connection
//! (woken if idle). A client that goes away while its statement runs sets
//! the flag too. A user may kill only its own connections unless it holds
//! SUPER (1095 otherwise); an unknown id is 1094.
//!
//! On a cluster's primary, each session a replica's client forwards its
//! statements to is listed too ([`Processes::register_forwarded`]): its
//! Host names the replica and the client (`replica-2/<client id>@<host>`),
//! KILL QUERY of it stops its statement here (the replica's client gets
//! the answer: 1317), and KILL CONNECTION of it is sent on to the client's
//! connection on the replica (`Engine::kill_local`), which closes as a
//! local KILL closes it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ladle_common::Value;
use parking_lot::Mutex;

use crate::accounts::Grantee;

/// What a connection is doing, for the listing.
#[derive(Clone)]
struct State {
    user: String,
    grantee: Option<Grantee>,
    db: Option<String>,
    command: &'static str,
    info: Option<String>,
    since: Instant,
}

/// The replica's client a forwarded session serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardedFrom {
    /// The replica's node id.
    pub node: u32,
    /// The client's connection id there.
    pub client: u64,
}

/// One connection.
pub struct Process {
    pub id: u32,
    pub host: String,
    /// A forwarded session's client (`None`: a client of this node).
    pub forwarded: Option<ForwardedFrom>,
    state: Mutex<State>,
    /// Set by KILL (QUERY or CONNECTION) or a client gone away; cleared
    /// when the next statement starts.
    pub interrupt: Arc<AtomicBool>,
    killed: AtomicBool,
    /// Wakes the connection's idle wait when it is killed.
    pub wake: tokio::sync::Notify,
}

impl Process {
    /// A statement starts: the listing shows it, and a KILL QUERY sent
    /// before it no longer applies.
    pub fn begin(&self, sql: &str) {
        self.interrupt.store(self.killed(), Ordering::SeqCst);
        let mut s = self.state.lock();
        s.command = "Query";
        s.info = Some(sql.to_string());
        s.since = Instant::now();
    }

    /// A forwarded statement starts, run as `user` in `db`. The interrupt
    /// flag is the forwarding connection's to clear (as each statement
    /// arrives): a cancel may come before the statement's thread starts.
    pub fn begin_forwarded(
        &self,
        user: &str,
        grantee: Option<Grantee>,
        db: Option<String>,
        sql: &str,
    ) {
        let mut s = self.state.lock();
        if s.user != user {
            s.user = user.to_string();
        }
        s.grantee = grantee;
        s.db = db;
        s.command = "Query";
        s.info = Some(sql.to_string());
        s.since = Instant::now();
    }

    /// The statement ended; `db` is the session's database now.
    pub fn end(&self, db: Option<String>) {
        let mut s = self.state.lock();
        s.command = "Sleep";
        s.info = None;
        s.db = db;
        s.since = Instant::now();
    }

    /// The connection logged in as `user`.
    pub fn logged_in(&self, user: String, grantee: Option<Grantee>, db: Option<String>) {
        let mut s = self.state.lock();
        s.user = user;
        s.grantee = grantee;
        s.db = db;
        s.command = "Sleep";
        s.since = Instant::now();
    }

    /// Whether KILL CONNECTION was given: the connection is to close.
    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// The connection closes once the statement's answer is sent (its
    /// session lost what it held elsewhere, see
    /// `Connection::forwarded_locks_lost`).
    pub(crate) fn close_after_reply(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }

    /// The client went away: its running statement stops.
    pub fn client_gone(&self) {
        self.interrupt.store(true, Ordering::SeqCst);
    }

    /// KILL [QUERY] (`connection`): the statement stops, and with
    /// `connection` the connection closes.
    pub(crate) fn kill(&self, connection: bool) {
        if connection {
            self.killed.store(true, Ordering::SeqCst);
            self.wake.notify_one();
        }
        self.interrupt.store(true, Ordering::SeqCst);
    }
}

/// In a cluster, a connection id's high bits are the id of the node that
/// gave it out (1 to [`MAX_NODE`]), the rest its own count: ids are unique
/// across the cluster, and a KILL of another node's connection knows where
/// to go. Ids stay 32-bit (the handshake carries 4 bytes).
pub(crate) const NODE_SHIFT: u32 = 24;
/// The node's own count in a connection id.
pub(crate) const LOCAL_ID_MASK: u32 = (1 << NODE_SHIFT) - 1;
/// The largest node id that fits a connection id's high bits.
pub(crate) const MAX_NODE: u32 = u32::MAX >> NODE_SHIFT;

/// The cluster node that gave out connection `id` (0: none, a single
/// node's id).
pub fn connection_node(id: u64) -> u32 {
    u32::try_from(id).map_or(0, |id| id >> NODE_SHIFT)
}

/// Every open connection, by id.
#[derive(Default)]
pub struct Processes {
    map: Mutex<BTreeMap<u32, Arc<Process>>>,
}

/// Why a KILL was refused.
pub enum KillError {
    /// 1094.
    Unknown,
    /// 1095.
    NotOwner,
}

impl Processes {
    /// Registers connection `id` from `host` (before it has logged in).
    pub fn register(&self, id: u32, host: String) -> Arc<Process> {
        self.insert(id, host, None, "unauthenticated user".into())
    }

    /// Registers the forwarded session `id` of `from`'s client, who logged
    /// in there as `user` from `host` (idle).
    pub fn register_forwarded(
        &self,
        id: u32,
        from: ForwardedFrom,
        user: String,
        host: &str,
    ) -> Arc<Process> {
        let shown = format!("replica-{}/{}@{host}", from.node, from.client);
        let p = self.insert(id, shown, Some(from), user);
        p.state.lock().command = "Sleep";
        p
    }

    fn insert(
        &self,
        id: u32,
        host: String,
        forwarded: Option<ForwardedFrom>,
        user: String,
    ) -> Arc<Process> {
        let p = Arc::new(Process {
            id,
            host,
            forwarded,
            state: Mutex::new(State {
                user,
                grantee: None,
                db: None,
                command: "Connect",
                info: None,
                since: Instant::now(),
            }),
            interrupt: Arc::new(AtomicBool::new(false)),
            killed: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        });
        self.map.lock().insert(id, p.clone());
        p
    }

    pub fn unregister(&self, id: u32) {
        self.map.lock().remove(&id);
    }

    /// KILL [QUERY] `id` by `user` (`any`: it holds SUPER).
    pub fn kill(&self, id: u64, user: &str, any: bool, connection: bool) -> Result<(), KillError> {
        self.killable(id, user, any)?.kill(connection);
        Ok(())
    }

    /// Connection `id`, if `user` (`any`: it holds SUPER) may kill it.
    pub(crate) fn killable(
        &self,
        id: u64,
        user: &str,
        any: bool,
    ) -> Result<Arc<Process>, KillError> {
        let p = u32::try_from(id)
            .ok()
            .and_then(|id| self.map.lock().get(&id).cloned())
            .ok_or(KillError::Unknown)?;
        if !any && p.state.lock().user != user {
            return Err(KillError::NotOwner);
        }
        Ok(p)
    }

    /// Rows of the listing (Id, User, Host, db, Command, Time, State,
    /// Info), by id; only `user`'s own unless `all`. `full`: Info whole,
    /// else its first 100 characters (as MySQL).
    pub fn rows(&self, user: &str, all: bool, full: bool) -> Vec<Vec<Value>> {
        let list: Vec<Arc<Process>> = self.map.lock().values().cloned().collect();
        list.iter()
            .filter_map(|p| {
                let s = p.state.lock().clone();
                if !all && s.user != user {
                    return None;
                }
                let info = s.info.map(|i| {
                    if full {
                        i
                    } else {
                        i.chars().take(100).collect()
                    }
                });
                let state = if s.command == "Query" {
                    "executing"
                } else {
                    ""
                };
                Some(vec![
                    Value::Int(i64::from(p.id)),
                    Value::text(s.user),
                    Value::text(p.host.clone()),
                    s.db.map_or(Value::Null, Value::text),
                    Value::text(s.command),
                    Value::Int(s.since.elapsed().as_secs() as i64),
                    Value::text(state),
                    info.map_or(Value::Null, Value::text),
                ])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster node's connection ids name it in their top 8 bits; a
    /// single node's small ids name none.
    #[test]
    fn connection_ids_name_their_node() {
        assert_eq!(connection_node((2 << NODE_SHIFT) | 1), 2);
        assert_eq!(
            connection_node((255 << NODE_SHIFT) | LOCAL_ID_MASK as u64),
            255
        );
        assert_eq!(connection_node(7), 0);
        // Beyond 32 bits: no node (the KILL is then an unknown id).
        assert_eq!(connection_node(1 << 40), 0);
        assert_eq!(MAX_NODE, 255);
    }

    /// A forwarded session is listed under its replica and client, idle
    /// until a statement starts; starting one leaves its interrupt flag
    /// as the forwarding connection set it (a cancel that came before the
    /// statement's thread started is kept, where a local client's
    /// statement start clears a stale KILL QUERY); only its user kills it.
    #[test]
    fn a_forwarded_session_is_listed_under_its_replica_and_client() {
        let processes = Processes::default();
        let from = ForwardedFrom {
            node: 2,
            client: (2 << NODE_SHIFT) | 5,
        };
        let id = (1 << NODE_SHIFT) | 9;
        let p = processes.register_forwarded(id, from, "app".into(), "10.0.0.5");
        assert_eq!(p.forwarded, Some(from));
        let row = |processes: &Processes| -> Vec<String> {
            let rows = processes.rows("root", true, true);
            assert_eq!(rows.len(), 1);
            rows[0].iter().map(Value::to_string).collect()
        };
        let listed = row(&processes);
        assert_eq!(listed[0], id.to_string());
        assert_eq!(listed[1], "app");
        assert_eq!(listed[2], "replica-2/33554437@10.0.0.5");
        assert_eq!((&*listed[4], &*listed[7]), ("Sleep", "NULL"));

        p.interrupt.store(true, Ordering::SeqCst);
        p.begin_forwarded("app", None, Some("d".into()), "UPDATE t SET v = 1");
        assert!(p.interrupt.load(Ordering::SeqCst), "the cancel is kept");
        let listed = row(&processes);
        assert_eq!(listed[3], "d");
        assert_eq!((&*listed[4], &*listed[6]), ("Query", "executing"));
        assert_eq!(listed[7], "UPDATE t SET v = 1");

        assert!(matches!(
            processes.killable(u64::from(id), "other", false),
            Err(KillError::NotOwner)
        ));
        assert!(processes.killable(u64::from(id), "app", false).is_ok());
        processes.unregister(id);
        assert!(processes.rows("root", true, true).is_empty());
    }
}
