//! Account statements on a cluster node: the account list and the record
//! that hands it to replicas are stored by one write, before the node
//! notes the record, so a crash (kill -9) between the statement and the
//! note keeps both or neither. The schema log here notes calls and writes
//! nothing, as if the node died at the note: whatever record is stored
//! was stored by the account change itself.

mod common;

use std::sync::Arc;

use ladle_shim::session::Session;
use ladle_shim::SchemaLog;
use ladle_storage::Storage;
use parking_lot::Mutex;

/// Where the test's schema log has the list's record stored.
const RECORD: &str = "test/account-list";
/// The catalog meta record holding the accounts (the shim's own key).
const ACCOUNTS: &str = "shim/accounts";

#[derive(Default)]
struct NotingLog {
    /// `record_accounts` calls: (list, carried).
    noted: Mutex<Vec<(String, bool)>>,
}

impl SchemaLog for NotingLog {
    fn check_writable(&self) -> Result<(), String> {
        Ok(())
    }

    fn prepare(
        &self,
        _database: Option<&str>,
        _settings: &[(String, String)],
        _sql: &str,
    ) -> Option<(String, Vec<u8>)> {
        None
    }

    fn record(
        &self,
        _database: Option<&str>,
        _settings: &[(String, String)],
        _sql: &str,
        _carried: bool,
    ) {
    }

    fn prepare_accounts(&self, state: &str) -> Option<(String, Vec<u8>)> {
        Some((RECORD.to_string(), state.as_bytes().to_vec()))
    }

    fn record_accounts(&self, state: &str, carried: bool) {
        self.noted.lock().push((state.to_string(), carried));
    }
}

fn meta(storage: &Storage, key: &str) -> Option<String> {
    storage
        .list_meta(key)
        .unwrap()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| String::from_utf8(v).unwrap())
}

#[test]
fn an_account_list_is_stored_with_its_record_for_replicas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let frontend = common::frontend(dir.path(), 0, None, 16 << 20, "");
    let engine = frontend.engine();
    let log = Arc::new(NotingLog::default());
    assert!(engine.schema_log.set(log.clone()).is_ok());
    let storage = &engine.storage;
    let mut s = Session::new(1, "root".into(), "localhost".into());
    let mut run = |sql: &str| engine.execute(&mut s, sql).1.map(|_| ());
    let noted = || std::mem::take(&mut *log.noted.lock());

    // The list after the statement, stored with its record: the node's
    // note (which writes nothing here) comes afterwards.
    run("CREATE USER 'ann'@'%' IDENTIFIED BY 'secret-pw'").unwrap();
    let list = meta(storage, ACCOUNTS).expect("the list is stored");
    assert!(
        list.contains("ann") && !list.contains("secret-pw"),
        "{list}"
    );
    assert_eq!(meta(storage, RECORD).as_deref(), Some(list.as_str()));
    assert_eq!(noted(), vec![(list.clone(), true)]);

    // Nothing changed: the unchanged list is recorded alone.
    run("CREATE USER IF NOT EXISTS 'ann'@'%'").unwrap();
    assert_eq!(noted(), vec![(list.clone(), false)]);

    // A failed statement stores and records nothing.
    assert!(run("DROP USER 'nobody'@'%'").is_err());
    assert_eq!(noted(), vec![]);
    assert_eq!(meta(storage, RECORD).as_deref(), Some(list.as_str()));

    // Trailing words are a syntax error found before anything is stored:
    // the list and its record stay, nothing is noted.
    assert!(run("ALTER USER 'ann'@'%' IDENTIFIED BY 'other-pw' junk").is_err());
    assert_eq!(meta(storage, ACCOUNTS).as_deref(), Some(list.as_str()));
    assert_eq!(meta(storage, RECORD).as_deref(), Some(list.as_str()));
    assert_eq!(noted(), vec![]);
    // A statement that changes the list stores it with its record.
    run("ALTER USER 'ann'@'%' IDENTIFIED BY 'other-pw'").unwrap();
    let changed = meta(storage, ACCOUNTS).expect("the list is stored");
    assert_ne!(changed, list);
    assert_eq!(meta(storage, RECORD).as_deref(), Some(changed.as_str()));
    assert_eq!(noted(), vec![(changed.clone(), true)]);

    // A replica installing a list received from its primary stores it
    // with its own record for its replicas.
    let received = changed.replace("\"ann\"", "\"bob\"");
    engine.install_replicated_accounts(&received).unwrap();
    let installed = meta(storage, ACCOUNTS).expect("the list is stored");
    assert!(installed.contains("bob") && !installed.contains("ann"));
    assert_eq!(meta(storage, RECORD).as_deref(), Some(installed.as_str()));
    assert_eq!(noted(), vec![(installed, true)]);
}
