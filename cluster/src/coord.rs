//! Coordination in etcd: the node's lease and membership record, the
//! leader key and the term, elections, and which primary to follow.
//!
//! Keys under the prefix `P`:
//! - `P/members/<id>`: JSON [`Member`], on the node's lease;
//! - `P/leader`: JSON [`Leader`], on the primary's lease;
//! - `P/term`: the newest term, written with the leader key in one
//!   transaction that requires no leader key and an unchanged term;
//! - `P/acknowledged`: the newest LSN a primary acknowledged to a client
//!   (no lease: it outlives every node), published by the primary each
//!   tick; no node below it may campaign.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, LeaseKeepAliveStream, LeaseKeeper,
    PutOptions, Txn, TxnOp,
};
use ladle_common::Lsn;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::follow::{self, FollowEnd};
use crate::node::{Node, Role};

/// How often the loop looks at etcd.
const TICK: Duration = Duration::from_millis(100);
/// Every etcd call gives up after this (etcd down must not stall the loop).
const CALL_TIMEOUT: Duration = Duration::from_millis(1000);
/// The lease is taken to expire this much earlier than etcd says, for
/// clock rate differences and the time a reply takes to arrive.
const LEASE_MARGIN: Duration = Duration::from_millis(500);

/// A node's membership record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Member {
    pub node: u64,
    pub mysql: String,
    pub replication: String,
    /// The newest LSN applied there.
    pub applied: Lsn,
    /// The term whose primary it follows; `None` once it has stopped
    /// following (its `applied` is then final until a new primary exists).
    pub following: Option<u64>,
    pub role: String,
    /// Has entries no primary had: takes no part in elections.
    pub diverged: bool,
    /// The replication protocol version it speaks (`version`); 0 from a
    /// build from before versions, which did not publish one.
    #[serde(default)]
    pub protocol: u32,
}

/// The leader key's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Leader {
    pub node: u64,
    pub term: u64,
    pub mysql: String,
    pub replication: String,
}

/// What one read of the cluster's keys found.
struct ClusterView {
    leader: Option<Leader>,
    /// The term key's value and its modification revision (0: absent).
    term: (u64, i64),
    /// The newest LSN a primary said it acknowledged.
    acknowledged: Lsn,
    /// The lease the leader key is on.
    leader_lease: Option<i64>,
    members: Vec<Member>,
}

/// Whether a node that applied `mine` may campaign, given the others'
/// records and the newest position a primary published as acknowledged:
/// only when every other live member has stopped following (its position
/// is final), none has applied more (so the new primary holds every write a
/// synchronous replica acknowledged), and it holds what was acknowledged
/// (so after a whole-cluster restart a node that lacks acknowledged writes
/// waits for one that has them).
pub(crate) fn may_campaign(me: u64, mine: Lsn, members: &[Member], acknowledged: Lsn) -> bool {
    mine >= acknowledged
        && members
            .iter()
            .filter(|m| m.node != me && !m.diverged)
            .all(|m| m.following.is_none() && m.applied <= mine)
}

struct Follower {
    term: u64,
    stop: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<FollowEnd>,
}

struct Coordinator {
    node: Arc<Node>,
    client: Client,
    lease: Option<i64>,
    keeper: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    last_keepalive: Instant,
    /// Until when the lease is certainly valid.
    lease_deadline: Option<Instant>,
    follower: Option<Follower>,
    diverged: bool,
    /// While diverged: the bootstrap from the primary under way.
    bootstrap: Option<JoinHandle<()>>,
    published: Option<(Member, Instant)>,
}

/// Runs the coordination loop forever (reconnecting to etcd as needed).
pub(crate) async fn run(node: Arc<Node>) {
    let options = ConnectOptions::new()
        .with_connect_timeout(CALL_TIMEOUT)
        .with_timeout(CALL_TIMEOUT);
    let client = loop {
        match Client::connect(&node.config.etcd, Some(options.clone())).await {
            Ok(c) => break c,
            Err(e) => {
                tracing::warn!(error = %e, "connecting to etcd failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let mut c = Coordinator {
        node,
        client,
        lease: None,
        keeper: None,
        last_keepalive: Instant::now(),
        lease_deadline: None,
        follower: None,
        diverged: false,
        bootstrap: None,
        published: None,
    };
    loop {
        if let Err(e) = c.tick().await {
            tracing::warn!(error = %format!("{e:#}"), "cluster coordination step failed");
        }
        c.node.refresh_metrics();
        tokio::time::sleep(TICK).await;
    }
}

async fn timed<T>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(anyhow::anyhow!("etcd {what}: {e}")),
        Err(_) => Err(anyhow::anyhow!("etcd {what}: timed out")),
    }
}

impl Coordinator {
    fn key(&self, rest: &str) -> String {
        format!("{}/{rest}", self.node.config.prefix)
    }

    async fn tick(&mut self) -> anyhow::Result<()> {
        // The primary's lease validity is local: it ends on time even
        // when every etcd call below fails.
        self.publish_lease_validity();
        self.keep_lease().await?;
        self.publish_lease_validity();
        let view = self.read_cluster().await?;
        let mut listed: Vec<crate::node::MemberInfo> = view
            .members
            .iter()
            .map(|m| crate::node::MemberInfo {
                node_id: m.node,
                mysql: m.mysql.clone(),
                role: m.role.clone(),
                applied: m.applied,
                replication: m.replication.clone(),
                protocol: m.protocol,
            })
            .collect();
        listed.sort_by_key(|m| m.node_id);
        *self.node.members.lock() = listed;
        self.keep_log_for(&view.members);
        let me = self.node.config.node_id;
        match view.leader.clone() {
            Some(l) if l.node == me && l.term == self.node.term() => {
                if self.node.role() == Role::Primary {
                    self.publish_acknowledged(view.acknowledged).await?;
                } else {
                    // Elected, but the local role was lost meanwhile: give
                    // the key up (it lapses with the lease) rather than lead
                    // with an unknown state.
                    self.drop_lease().await;
                }
            }
            Some(l)
                if l.node == me
                    && self.lease.is_some()
                    && view.leader_lease == self.lease
                    && self.node.role() == Role::Candidate =>
            {
                // This node's campaign won but its answer was lost (a
                // timeout): the key is on this node's lease, so it leads.
                self.become_primary(l.term)?;
            }
            Some(l) => {
                if self.node.role() == Role::Primary {
                    self.demote("another node holds the leader key");
                }
                self.follow(l).await;
            }
            None => {
                if self.node.role() == Role::Primary {
                    self.demote("the leader key is gone");
                }
                self.stop_following().await;
                *self.node.leader_mysql.lock() = None;
                *self.node.leader_replication.lock() = None;
                if !self.diverged {
                    self.node.set_role(Role::Candidate);
                }
                self.publish_member().await?;
                let mine = self.node.applied();
                if !self.diverged && may_campaign(me, mine, &view.members, view.acknowledged) {
                    self.campaign(view.term).await?;
                }
            }
        }
        self.publish_member().await
    }

    fn publish_lease_validity(&self) {
        let valid = if self.node.role() == Role::Primary {
            self.lease_deadline
        } else {
            None
        };
        *self.node.lease_valid_until.lock() = valid;
        if self.node.role() == Role::Primary && !self.node.lease_valid() {
            // Writes are refused from here on (the gate checks the lease);
            // the role stays until etcd says who leads.
            tracing::warn!("the primary's lease may have expired: writes are refused");
        }
    }

    /// Grants a lease if there is none; keeps it alive every third of its
    /// TTL.
    async fn keep_lease(&mut self) -> anyhow::Result<()> {
        let ttl = self.node.config.lease_ttl;
        let Some(id) = self.lease else {
            let sent = Instant::now();
            let granted = timed(
                "lease grant",
                self.client.lease_grant(ttl.as_secs().max(1) as i64, None),
            )
            .await?;
            self.lease = Some(granted.id());
            self.keeper = None;
            self.last_keepalive = sent;
            self.lease_deadline = deadline(sent, granted.ttl());
            self.published = None;
            return Ok(());
        };
        if self.last_keepalive.elapsed() < ttl / 3 {
            return Ok(());
        }
        if self.keeper.is_none() {
            match timed("lease keep-alive", self.client.lease_keep_alive(id)).await {
                Ok(pair) => self.keeper = Some(pair),
                // etcd expired it while this node could not reach etcd (a
                // partition longer than the lease): take a new one.
                Err(e) if format!("{e:#}").contains("lease not found") => {
                    self.lease_expired(id);
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        let Some((keeper, responses)) = self.keeper.as_mut() else {
            return Ok(());
        };
        let sent = Instant::now();
        let answer = async {
            keeper.keep_alive().await?;
            responses.message().await
        };
        let response = match timed("lease keep-alive", answer).await {
            Ok(Some(r)) => r,
            Err(e) if format!("{e:#}").contains("lease not found") => {
                self.lease_expired(id);
                return Ok(());
            }
            Ok(None) | Err(_) => {
                self.keeper = None;
                anyhow::bail!("the lease keep-alive stream broke");
            }
        };
        self.last_keepalive = sent;
        if response.ttl() <= 0 {
            self.lease_expired(id);
            return Ok(());
        }
        self.lease_deadline = deadline(sent, response.ttl());
        Ok(())
    }

    /// etcd no longer has this node's lease: the next step takes a new one
    /// (and a primary steps down: its leader key is gone with the lease).
    fn lease_expired(&mut self, id: i64) {
        tracing::warn!(lease = id, "the etcd lease expired");
        self.lease = None;
        self.keeper = None;
        self.lease_deadline = None;
        if self.node.role() == Role::Primary {
            self.demote("its lease expired");
        }
    }

    async fn drop_lease(&mut self) {
        if let Some(id) = self.lease.take() {
            let _ = timed("lease revoke", self.client.lease_revoke(id)).await;
        }
        self.keeper = None;
        self.lease_deadline = None;
    }

    async fn read_cluster(&mut self) -> anyhow::Result<ClusterView> {
        let prefix = self.key("");
        let resp = timed(
            "get",
            self.client
                .get(prefix.clone(), Some(GetOptions::new().with_prefix())),
        )
        .await?;
        let mut view = ClusterView {
            leader: None,
            term: (0, 0),
            acknowledged: 0,
            leader_lease: None,
            members: Vec::new(),
        };
        for kv in resp.kvs() {
            let key = kv.key_str()?;
            let rest = &key[prefix.len()..];
            if rest == "leader" {
                view.leader = Some(serde_json::from_slice(kv.value())?);
                view.leader_lease = Some(kv.lease());
            } else if rest == "term" {
                view.term = (kv.value_str()?.parse()?, kv.mod_revision());
            } else if rest == "acknowledged" {
                view.acknowledged = kv.value_str()?.parse()?;
            } else if rest.starts_with("members/") {
                view.members.push(serde_json::from_slice(kv.value())?);
            }
        }
        Ok(view)
    }

    /// Keeps the change-log entries a live member (or a connected replica)
    /// has not applied yet, and the newest `log_keep_entries` in any case,
    /// so a member that restarts soon catches up from the log; one that
    /// lacks entries no longer kept is bootstrapped from a checkpoint.
    fn keep_log_for(&self, members: &[Member]) {
        let node = &self.node;
        let me = node.config.node_id;
        let mut floor = node.applied().saturating_sub(node.config.log_keep_entries);
        for m in members.iter().filter(|m| m.node != me && !m.diverged) {
            floor = floor.min(m.applied);
        }
        for r in node.replicas() {
            floor = floor.min(r.acked);
        }
        let mut holds = node.bootstrap_holds.lock();
        holds.retain(|(_, until)| *until > Instant::now());
        for (lsn, _) in holds.iter() {
            floor = floor.min(*lsn);
        }
        node.storage.set_log_floor(floor);
    }

    /// Writes this node's membership record when it changed, and at least
    /// every third of the lease's TTL.
    async fn publish_member(&mut self) -> anyhow::Result<()> {
        let Some(lease) = self.lease else {
            return Ok(());
        };
        let node = &self.node;
        let record = Member {
            node: node.config.node_id,
            mysql: node.config.mysql_addr.clone(),
            replication: node.replication_addr(),
            applied: node.applied(),
            following: self.follower.as_ref().map(|f| f.term),
            role: node.role().as_str().to_string(),
            diverged: self.diverged,
            protocol: crate::version::ours(),
        };
        let stale = match &self.published {
            Some((last, at)) => *last != record || at.elapsed() >= node.config.lease_ttl / 3,
            None => true,
        };
        if !stale {
            return Ok(());
        }
        let key = self.key(&format!("members/{}", node.config.node_id));
        timed(
            "put member",
            self.client.put(
                key,
                serde_json::to_vec(&record)?,
                Some(PutOptions::new().with_lease(lease)),
            ),
        )
        .await?;
        self.published = Some((record, Instant::now()));
        Ok(())
    }

    /// Publishes the newest acknowledged LSN when it passed `published`.
    async fn publish_acknowledged(&mut self, published: Lsn) -> anyhow::Result<()> {
        let acknowledged = self.node.acknowledged.load(Ordering::Acquire);
        if acknowledged <= published {
            return Ok(());
        }
        let key = self.key("acknowledged");
        timed(
            "put acknowledged",
            self.client.put(key, acknowledged.to_string(), None),
        )
        .await?;
        Ok(())
    }

    async fn campaign(&mut self, (term, term_revision): (u64, i64)) -> anyhow::Result<()> {
        let Some(lease) = self.lease else {
            return Ok(());
        };
        let node = self.node.clone();
        let new_term = term + 1;
        let leader = Leader {
            node: node.config.node_id,
            term: new_term,
            mysql: node.config.mysql_addr.clone(),
            replication: node.replication_addr(),
        };
        let leader_key = self.key("leader");
        let term_key = self.key("term");
        let term_unchanged = if term_revision == 0 {
            Compare::version(term_key.clone(), CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(term_key.clone(), CompareOp::Equal, term_revision)
        };
        let txn = Txn::new()
            .when([
                Compare::version(leader_key.clone(), CompareOp::Equal, 0),
                term_unchanged,
            ])
            .and_then([
                TxnOp::put(
                    leader_key,
                    serde_json::to_vec(&leader)?,
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::put(term_key, new_term.to_string(), None),
            ]);
        let resp = timed("campaign", self.client.txn(txn)).await?;
        if resp.succeeded() {
            self.become_primary(new_term)?;
        }
        Ok(())
    }

    /// Takes up leadership of `term` (this node holds the leader key).
    fn become_primary(&mut self, term: u64) -> anyhow::Result<()> {
        let node = self.node.clone();
        let start = node.applied() + 1;
        node.history.note(&node.storage, term, start)?;
        node.term.store(term, Ordering::Release);
        *node.leader_mysql.lock() = Some(node.config.mysql_addr.clone());
        *node.leader_replication.lock() = None;
        node.set_role(Role::Primary);
        self.publish_lease_validity();
        node.metrics.elections.inc();
        tracing::info!(
            node = node.config.node_id,
            term,
            applied = start - 1,
            "elected primary"
        );
        Ok(())
    }

    fn demote(&mut self, why: &str) {
        tracing::warn!(
            node = self.node.config.node_id,
            why,
            "no longer the primary"
        );
        *self.node.lease_valid_until.lock() = None;
        self.node.set_role(Role::Candidate);
    }

    /// Follows `leader` (starting, or restarting after a failed stream).
    async fn follow(&mut self, leader: Leader) {
        // Writes forwarded from here go to this leader, even from a node
        // that cannot follow it (diverged).
        *self.node.leader_replication.lock() = Some((leader.term, leader.replication.clone()));
        if self.diverged {
            // Re-bootstrap from this leader (again, if an attempt failed).
            if self.bootstrap.as_ref().is_none_or(|b| b.is_finished()) {
                let node = self.node.clone();
                let addr = leader.replication.clone();
                self.bootstrap = Some(tokio::spawn(async move {
                    match crate::bootstrap::fetch(&node, &addr).await {
                        Ok(_) => {
                            let e = crate::bootstrap::restart_self();
                            tracing::error!(error = %e, "could not restart over the checkpoint");
                        }
                        Err(e) => {
                            node.note_link_error(&e);
                            tracing::warn!(error = %format!("{e:#}"), "re-bootstrap failed; will retry");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }));
            }
            return;
        }
        if let Some(f) = &self.follower {
            if f.term == leader.term && !f.task.is_finished() {
                return;
            }
        }
        if let Some(f) = self.follower.take() {
            let _ = f.stop.send(true);
            match f.task.await {
                Ok(FollowEnd::Diverged(reason)) => {
                    tracing::warn!(
                        node = self.node.config.node_id,
                        %reason,
                        "this node cannot follow the primary from its own change log \
                         (a tail the primary never had, or entries the primary no longer \
                         keeps): re-bootstrapping from a checkpoint of the primary \
                         (it serves reads of its own data meanwhile; writes are forwarded)"
                    );
                    self.diverged = true;
                    self.node.set_role(Role::Diverged);
                    return;
                }
                Ok(FollowEnd::Retry(reason)) => {
                    tracing::info!(%reason, "replication stream ended; reconnecting");
                }
                Ok(FollowEnd::ApplyFailed(reason)) => {
                    self.node.metrics.apply_failures.inc();
                    tracing::warn!(
                        %reason,
                        "a replicated entry could not be applied here; reconnecting to try it \
                         again (if this repeats, the replica is stuck behind it)"
                    );
                }
                Err(e) => tracing::warn!(error = %e, "replication task failed"),
            }
        }
        let node = self.node.clone();
        node.term.store(leader.term, Ordering::Release);
        *node.leader_mysql.lock() = Some(leader.mysql.clone());
        if node.role() != Role::Replica {
            node.set_role(Role::CatchingUp);
        }
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(follow::follow(
            node,
            leader.replication.clone(),
            leader.term,
            stopped,
        ));
        self.follower = Some(Follower {
            term: leader.term,
            stop,
            task,
        });
    }

    /// Stops following and waits until no entry is being applied, so the
    /// position published next is final.
    async fn stop_following(&mut self) {
        if let Some(f) = self.follower.take() {
            let _ = f.stop.send(true);
            let _ = f.task.await;
        }
    }
}

fn deadline(sent: Instant, ttl_secs: i64) -> Option<Instant> {
    let ttl = Duration::from_secs(u64::try_from(ttl_secs).ok()?);
    Some(sent + ttl.checked_sub(LEASE_MARGIN)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(node: u64, applied: Lsn, following: Option<u64>) -> Member {
        Member {
            node,
            applied,
            following,
            ..Member::default()
        }
    }

    #[test]
    fn only_the_most_advanced_settled_member_campaigns() {
        let all = [
            member(1, 10, None),
            member(2, 12, None),
            member(3, 12, None),
        ];
        assert!(!may_campaign(1, 10, &all, 0));
        assert!(may_campaign(2, 12, &all, 12));
        assert!(may_campaign(3, 12, &all, 11));
        // A member still following the old primary may apply more: wait.
        let moving = [member(1, 10, Some(4)), member(2, 12, None)];
        assert!(!may_campaign(2, 12, &moving, 0));
        // A diverged member's position does not count.
        let mut d = member(3, 99, None);
        d.diverged = true;
        assert!(may_campaign(2, 12, &[member(2, 12, None), d], 0));
        // Alone after a restart, without writes that were acknowledged:
        // wait for a node that has them.
        assert!(!may_campaign(1, 10, &[member(1, 10, None)], 12));
    }
}
