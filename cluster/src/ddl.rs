//! What a node keeps besides rows: the schema changes it ran (replicas
//! replay them at the same position) and the history of terms (the LSN at
//! which each term's primary started writing), both as storage meta records.

use std::collections::BTreeMap;
use std::sync::Arc;

use ladle_common::Lsn;
use ladle_storage::Storage;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

const DDL_PREFIX: &str = "cluster/ddl/";
const TERM_PREFIX: &str = "cluster/term/";

/// Replays a schema change received from the primary (the server runs it
/// through the SQL front end, with `database` as the current database).
pub trait DdlApplier: Send + Sync {
    /// `settings`: the session variables the primary ran `sql` under, as
    /// (name, SQL literal) for `SET SESSION name = literal` before it.
    fn apply(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
    ) -> Result<(), String>;
    /// Installs the primary's whole account list (`state`, the front end's
    /// encoding) and records it for this node's own replicas.
    fn apply_accounts(&self, state: &str) -> Result<(), String>;
    /// This node's role changed; `primary`: it is now the primary (and
    /// already takes writes). Must return quickly; the server drops the
    /// TEMPORARY tables no live session owns when it is elected.
    fn role_changed(&self, _primary: bool) {}
}

thread_local! {
    static APPLYING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is replaying a replicated schema change (which a
/// replica must run although it refuses clients' DDL).
pub(crate) fn applying_replicated() -> bool {
    APPLYING.with(|a| a.get())
}

/// Runs `applier` for one replicated statement on this thread, marked as
/// replication.
pub(crate) fn apply_replicated(
    applier: &Arc<dyn DdlApplier>,
    record: &DdlRecord,
) -> Result<(), String> {
    APPLYING.with(|a| a.set(true));
    let out = if record.accounts {
        applier.apply_accounts(&record.sql)
    } else {
        applier.apply(record.database.as_deref(), &record.settings, &record.sql)
    };
    APPLYING.with(|a| a.set(false));
    out
}

/// One schema change: run after the entry at `after` (0: before any), the
/// `seq`-th at that position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DdlRecord {
    pub database: Option<String>,
    pub sql: String,
    /// The session variables that shape what `sql` does (`sql_mode`:
    /// whether an ALTER truncates a value or fails; `foreign_key_checks`),
    /// as (name, SQL literal) where the primary's session set them: the
    /// replica runs `sql` under the same ones, or it could fail (or
    /// convert differently) where the primary succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<(String, String)>,
    /// `sql` is no statement but the primary's whole account list after
    /// an account statement (CREATE USER, GRANT, SET PASSWORD ...), which
    /// replicas install as is: those statements carry passwords, and the
    /// list holds only their hashes.
    #[serde(default)]
    pub accounts: bool,
}

impl DdlRecord {
    /// A schema change statement run with `database` current.
    pub fn statement(database: Option<&str>, sql: &str) -> DdlRecord {
        DdlRecord {
            database: database.map(str::to_string),
            sql: sql.to_string(),
            settings: Vec::new(),
            accounts: false,
        }
    }

    /// The statement as run under the session `settings` (see
    /// [`DdlRecord::settings`]).
    pub fn with_settings(mut self, settings: &[(String, String)]) -> DdlRecord {
        self.settings = settings.to_vec();
        self
    }

    /// The account list after an account statement.
    pub fn account_list(state: &str) -> DdlRecord {
        DdlRecord {
            database: None,
            sql: state.to_string(),
            settings: Vec::new(),
            accounts: true,
        }
    }

    /// What to call it in a log line: the statement, or "the account
    /// list" (whose text holds password hashes).
    pub fn what(&self) -> &str {
        if self.accounts {
            "the account list"
        } else {
            &self.sql
        }
    }
}

/// Every schema change this node ran, by (LSN it follows, sequence).
pub(crate) struct SchemaHistory {
    records: Mutex<BTreeMap<(Lsn, u32), DdlRecord>>,
}

fn ddl_key(after: Lsn, seq: u32) -> String {
    format!("{DDL_PREFIX}{after:020}/{seq:06}")
}

impl SchemaHistory {
    pub fn load(storage: &Storage) -> anyhow::Result<SchemaHistory> {
        let mut records = BTreeMap::new();
        for (key, value) in storage.list_meta(DDL_PREFIX)? {
            let rest = &key[DDL_PREFIX.len()..];
            let parsed = rest
                .split_once('/')
                .and_then(|(a, s)| Some((a.parse::<Lsn>().ok()?, s.parse::<u32>().ok()?)));
            let Some(pos) = parsed else {
                anyhow::bail!("bad schema-change record key {key}");
            };
            records.insert(pos, serde_json::from_slice(&value)?);
        }
        Ok(SchemaHistory {
            records: Mutex::new(records),
        })
    }

    /// The meta record (key, value) that [`SchemaHistory::record`] of
    /// `record` after `after` writes, for the schema change to carry in
    /// its own batch (`Storage::fenced_with_record`).
    pub fn prepare(&self, after: Lsn, record: &DdlRecord) -> anyhow::Result<(String, Vec<u8>)> {
        let seq = Self::count_in(&self.records.lock(), after);
        Ok((ddl_key(after, seq), serde_json::to_vec(record)?))
    }

    /// Appends a change run after `after`; `carried`: its meta record is
    /// already written (by the change's own batch).
    pub fn record(
        &self,
        storage: &Storage,
        after: Lsn,
        record: DdlRecord,
        carried: bool,
    ) -> anyhow::Result<()> {
        let mut records = self.records.lock();
        let seq = Self::count_in(&records, after);
        if !carried {
            storage.put_meta(&ddl_key(after, seq), &serde_json::to_vec(&record)?)?;
        }
        records.insert((after, seq), record);
        Ok(())
    }

    /// How many changes sit at `after`.
    /// How many schema changes this node has run in all.
    pub fn len(&self) -> usize {
        self.records.lock().len()
    }

    pub fn count_at(&self, after: Lsn) -> u32 {
        Self::count_in(&self.records.lock(), after)
    }

    fn count_in(records: &BTreeMap<(Lsn, u32), DdlRecord>, after: Lsn) -> u32 {
        records.range((after, 0)..=(after, u32::MAX)).count() as u32
    }

    /// The changes at `after` from sequence `from` on.
    pub fn at(&self, after: Lsn, from: u32) -> Vec<(u32, DdlRecord)> {
        self.records
            .lock()
            .range((after, from)..=(after, u32::MAX))
            .map(|(&(_, seq), r)| (seq, r.clone()))
            .collect()
    }
}

/// Which LSN each term's primary wrote first (`term -> first LSN`).
pub(crate) struct TermHistory {
    starts: Mutex<BTreeMap<u64, Lsn>>,
}

impl TermHistory {
    pub fn load(storage: &Storage) -> anyhow::Result<TermHistory> {
        let mut starts = BTreeMap::new();
        for (key, value) in storage.list_meta(TERM_PREFIX)? {
            let term: u64 = key[TERM_PREFIX.len()..].parse()?;
            let start: Lsn = std::str::from_utf8(&value)?.parse()?;
            starts.insert(term, start);
        }
        Ok(TermHistory {
            starts: Mutex::new(starts),
        })
    }

    /// Notes that `term` starts at `start` (keeps an earlier note).
    pub fn note(&self, storage: &Storage, term: u64, start: Lsn) -> anyhow::Result<()> {
        let mut starts = self.starts.lock();
        if starts.contains_key(&term) {
            return Ok(());
        }
        storage.put_meta(
            &format!("{TERM_PREFIX}{term:020}"),
            start.to_string().as_bytes(),
        )?;
        starts.insert(term, start);
        Ok(())
    }

    /// The newest term known here (0: none).
    pub fn last_term(&self) -> u64 {
        self.starts
            .lock()
            .last_key_value()
            .map(|(t, _)| *t)
            .unwrap_or(0)
    }

    pub fn all(&self) -> Vec<(u64, Lsn)> {
        self.starts.lock().iter().map(|(t, l)| (*t, *l)).collect()
    }

    /// Whether a node whose newest term is `their_term` and whose log ends
    /// at `their_last` holds entries this history does not: entries of
    /// their term past the LSN where a later term (here) started.
    pub fn diverges(&self, their_term: u64, their_last: Lsn, my_last: Lsn) -> bool {
        if their_last > my_last {
            return true;
        }
        let starts = self.starts.lock();
        match starts.range(their_term + 1..).next() {
            Some((_, &next_start)) => their_last >= next_start,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_changes_are_kept_in_order_per_position_and_reloaded() {
        let storage = Storage::in_memory();
        let h = SchemaHistory::load(&storage).unwrap();
        let statement = DdlRecord::statement;
        h.record(&storage, 0, statement(None, "CREATE DATABASE d"), false)
            .unwrap();
        // A record its schema change's batch wrote (as the shim does).
        let create = statement(Some("d"), "CREATE TABLE t (id INT PRIMARY KEY)");
        let (key, value) = h.prepare(0, &create).unwrap();
        storage.put_meta(&key, &value).unwrap();
        h.record(&storage, 0, create, true).unwrap();
        h.record(
            &storage,
            7,
            statement(Some("d"), "ALTER TABLE t ADD COLUMN v INT"),
            false,
        )
        .unwrap();
        h.record(
            &storage,
            7,
            DdlRecord::account_list("{\"accounts\":[]}"),
            false,
        )
        .unwrap();
        assert_eq!(h.count_at(0), 2);
        assert_eq!(h.count_at(7), 2);
        assert_eq!(h.count_at(3), 0);
        let again = SchemaHistory::load(&storage).unwrap();
        let at0: Vec<String> = again.at(0, 1).into_iter().map(|(_, r)| r.sql).collect();
        assert_eq!(at0, vec!["CREATE TABLE t (id INT PRIMARY KEY)".to_string()]);
        assert_eq!(again.at(7, 0)[0].1.database.as_deref(), Some("d"));
        assert!(!again.at(7, 0)[0].1.accounts);
        assert!(again.at(7, 1)[0].1.accounts, "an account list stays one");
        // Records written before account lists existed read as statements.
        let old: DdlRecord =
            serde_json::from_str(r#"{"database":null,"sql":"CREATE DATABASE x"}"#).unwrap();
        assert_eq!(old, statement(None, "CREATE DATABASE x"));
    }

    #[test]
    fn a_tail_of_an_old_term_past_the_next_terms_start_diverges() {
        let storage = Storage::in_memory();
        let h = TermHistory::load(&storage).unwrap();
        h.note(&storage, 1, 1).unwrap();
        h.note(&storage, 3, 11).unwrap();
        // A replica of term 1 that stopped at 10: a prefix of this log.
        assert!(!h.diverges(1, 10, 20));
        // The old primary of term 1 (or a term 2 nobody followed) that wrote
        // 11 and 12 before it died: those are not the 11 and 12 here.
        assert!(h.diverges(1, 12, 20));
        assert!(h.diverges(2, 11, 20));
        // Current term, behind: fine; ahead of this node: diverged.
        assert!(!h.diverges(3, 15, 20));
        assert!(h.diverges(3, 21, 20));
        assert_eq!(TermHistory::load(&storage).unwrap().last_term(), 3);
    }
}
