//! User accounts and their privileges, and the login check against them
//! (the statements that change them are in [`crate::account_statements`]).
//!
//! The configured user (`--user`, `--password` / `LADLE_PASSWORD`) is the
//! built-in superuser: it is not stored, holds every privilege on
//! everything and cannot be dropped, altered or revoked. Every other
//! account is stored in the catalog as one meta record ([`ACCOUNTS_META`],
//! JSON with its own `version`), written whole by each change with the
//! catalog's durability (one RocksDB write, so a crash leaves the old or
//! the new list, never a mix; on a cluster node the same write holds the
//! record that hands the new list to replicas, see [`ListRecord`]).
//! Passwords are kept only as hashes: MySQL's native one (`*` and the hex
//! of `SHA1(SHA1(password))`, what `PASSWORD()` returns), which is all
//! `mysql_native_password` needs to check a login; `SHA256(SHA256(pw))`
//! for `caching_sha2_password`'s fast authentication when the password was
//! given in clear; and MySQL's stored `caching_sha2_password` form
//! ([`crate::sha2_crypt`]), which a dump's `AS '$A$005$...'` gives.
//!
//! Privileges are the ones Ladle enforces (see [`crate::privileges`]):
//! SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER at global
//! (`*.*`), database (`db.*`) and table (`db.t`) level, and RELOAD,
//! PROCESS, SUPER and CREATE USER globally; GRANT OPTION at each level.
//! A grant at a higher level covers the lower ones, as in MySQL.
//!
//! Hosts: an account's host is a pattern (`%` and `_` wildcards, as
//! MySQL's); a loopback client is `localhost` and also matches
//! `127.0.0.1` and `::1`. The most specific matching host wins (a literal
//! host before a pattern, `%` last).

use std::collections::BTreeMap;

use ladle_storage::Storage;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use crate::error::{self, MysqlCode, ShimError, WireError};

/// The catalog meta record holding every stored account.
pub const ACCOUNTS_META: &str = "shim/accounts";
/// The encoding of [`ACCOUNTS_META`]; a newer one is refused at start-up.
const ACCOUNTS_VERSION: u32 = 1;

/// A set of privileges (bits in MariaDB's display order).
pub type Privs = u32;
pub const SELECT: Privs = 1;
pub const INSERT: Privs = 1 << 1;
pub const UPDATE: Privs = 1 << 2;
pub const DELETE: Privs = 1 << 3;
pub const CREATE: Privs = 1 << 4;
pub const DROP: Privs = 1 << 5;
pub const RELOAD: Privs = 1 << 6;
pub const PROCESS: Privs = 1 << 7;
pub const INDEX: Privs = 1 << 8;
pub const ALTER: Privs = 1 << 9;
pub const SUPER: Privs = 1 << 10;
pub const CREATE_USER: Privs = 1 << 11;
pub const GRANT_OPTION: Privs = 1 << 30;

/// What a database or table grant may hold (`ALL` there means these).
pub const OBJECT_PRIVS: Privs = SELECT | INSERT | UPDATE | DELETE | CREATE | DROP | INDEX | ALTER;
/// What a global grant may hold (`ALL` on `*.*`).
pub const GLOBAL_PRIVS: Privs = OBJECT_PRIVS | RELOAD | PROCESS | SUPER | CREATE_USER;

/// Privilege names in display order.
pub(crate) const NAMES: [(Privs, &str); 12] = [
    (SELECT, "SELECT"),
    (INSERT, "INSERT"),
    (UPDATE, "UPDATE"),
    (DELETE, "DELETE"),
    (CREATE, "CREATE"),
    (DROP, "DROP"),
    (RELOAD, "RELOAD"),
    (PROCESS, "PROCESS"),
    (INDEX, "INDEX"),
    (ALTER, "ALTER"),
    (SUPER, "SUPER"),
    (CREATE_USER, "CREATE USER"),
];

/// The name of one privilege bit (for error messages); "SELECT" for a
/// set of several (what MariaDB names when any one would do).
pub fn privilege_name(p: Privs) -> &'static str {
    NAMES
        .iter()
        .find(|(b, _)| *b == p)
        .map_or("SELECT", |(_, n)| n)
}

/// One stored account.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub user: String,
    /// Host pattern (`%`, `localhost`, `10.0.0.%`...).
    pub host: String,
    /// MySQL native hash (`*` + 40 hex digits), or empty for no password.
    pub auth: String,
    /// Hex of `SHA256(SHA256(password))`, for `caching_sha2_password`'s
    /// fast authentication; empty when only the native hash was given.
    #[serde(default)]
    pub sha2: String,
    /// MySQL's stored `caching_sha2_password` form (`$A$005$` + salt +
    /// SHA-256 crypt digest, see [`crate::sha2_crypt`]), or empty (no
    /// password, or an account stored before this field existed or given
    /// only a native hash).
    #[serde(default)]
    pub sha2_crypt: String,
    /// The account's authentication plugin (`IDENTIFIED WITH`).
    #[serde(default)]
    pub plugin: AuthPlugin,
    /// `REQUIRE SSL`: logins over plaintext are refused (3159).
    pub require_ssl: bool,
    pub global: Privs,
    /// Database name (lower case) -> privileges.
    pub databases: BTreeMap<String, Privs>,
    /// `db.table` (lower case) -> privileges.
    pub tables: BTreeMap<String, Privs>,
}

impl Account {
    /// Every stored hash of the password, joined: it changes when the
    /// password does (what [`Sha2Cache`] entries are checked against).
    fn credential(&self) -> String {
        format!("{}\n{}\n{}", self.auth, self.sha2, self.sha2_crypt)
    }

    /// Whether `password` (in clear) is the account's, by the cheapest
    /// stored hash that can tell.
    fn proves_password(&self, password: &[u8]) -> bool {
        if !self.sha2.is_empty() {
            constant_time_eq(sha2_hash(password).as_bytes(), self.sha2.as_bytes())
        } else if !self.sha2_crypt.is_empty() {
            crate::sha2_crypt::verify(&self.sha2_crypt, password)
        } else {
            constant_time_eq(native_hash(password).as_bytes(), self.auth.as_bytes())
        }
    }

    /// The `SHA256(SHA256(password))` `caching_sha2_password`'s fast
    /// authentication checks against: the stored one for a native
    /// account, the one a full authentication proved since start-up
    /// (`cache`) for a `caching_sha2_password` account, as MySQL does.
    fn fast_auth_hash(&self, cache: &Sha2Cache) -> Option<String> {
        match self.plugin {
            AuthPlugin::NativePassword => Some(self.sha2.clone()),
            AuthPlugin::CachingSha2Password => cache.proven(self),
        }
    }
}

/// An account's authentication plugin: how its logins are checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthPlugin {
    /// `mysql_native_password`: a client that starts with another plugin
    /// is answered by `caching_sha2_password`'s fast authentication when
    /// that proves the password, else switched to this one.
    #[default]
    #[serde(rename = "mysql_native_password")]
    NativePassword,
    /// `caching_sha2_password`, as MySQL 8 runs it: fast authentication
    /// against the cache of passwords proven since start-up, else full
    /// authentication (the password in clear over TLS, or RSA-encrypted).
    #[serde(rename = "caching_sha2_password")]
    CachingSha2Password,
}

impl AuthPlugin {
    /// The plugin's name, as clients and `mysql.user` spell it.
    pub fn name(self) -> &'static str {
        match self {
            AuthPlugin::NativePassword => "mysql_native_password",
            AuthPlugin::CachingSha2Password => "caching_sha2_password",
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    accounts: Vec<Account>,
}

/// Who a session runs as, once logged in as a stored account (the
/// superuser's sessions carry none and are never checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grantee {
    pub user: String,
    /// The matched account's host pattern (`CURRENT_USER()`'s host).
    pub host: String,
}

/// A successful login.
pub struct Login {
    /// `None` for the superuser.
    pub grantee: Option<Grantee>,
    pub require_ssl: bool,
}

/// Every account, as stored, and the built-in superuser.
pub struct Accounts {
    root_user: String,
    pub(crate) root_password: String,
    pub(crate) list: RwLock<Vec<Account>>,
    /// `caching_sha2_password`'s cache: the accounts whose password a full
    /// authentication proved since start-up (see [`Sha2Cache`]).
    sha2_cache: Sha2Cache,
}

/// `caching_sha2_password`'s cache, as MySQL keeps it: for each account
/// (user, host) that passed full authentication since start-up, the
/// stored hashes it had then ([`Account::credential`]) and
/// `SHA256(SHA256(password))` of the password it proved. Fast
/// authentication needs an entry whose hashes are still the account's (a
/// changed password, a dropped and re-created account, misses), so no
/// statement has to invalidate it. Memory only: after a restart each
/// account's first login is a full one.
#[derive(Default)]
struct Sha2Cache(parking_lot::Mutex<std::collections::HashMap<(String, String), (String, String)>>);

impl Sha2Cache {
    /// The proven SHA-256 hash for `a`, if its password is unchanged since.
    fn proven(&self, a: &Account) -> Option<String> {
        let cache = self.0.lock();
        let (credential, sha2) = cache.get(&(a.user.clone(), a.host.clone()))?;
        (*credential == a.credential()).then(|| sha2.clone())
    }

    fn insert(&self, a: &Account, password: &[u8]) {
        self.0.lock().insert(
            (a.user.clone(), a.host.clone()),
            (a.credential(), sha2_hash(password)),
        );
    }
}

/// MySQL's native password hash of `password` (`PASSWORD()`), empty for
/// an empty password.
pub fn native_hash(password: &[u8]) -> String {
    if password.is_empty() {
        return String::new();
    }
    let stage2 = Sha1::digest(Sha1::digest(password));
    let mut s = String::from("*");
    for b in stage2 {
        s.push_str(&format!("{b:02X}"));
    }
    s
}

/// Hex of `SHA256(SHA256(password))`, empty for an empty password.
pub fn sha2_hash(password: &[u8]) -> String {
    if password.is_empty() {
        return String::new();
    }
    let stage2 = sha2::Sha256::digest(sha2::Sha256::digest(password));
    stage2.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks a `caching_sha2_password` fast-authentication response against
/// `hash` ([`sha2_hash`]): the client sends `SHA256(pw) XOR
/// SHA256(SHA256(SHA256(pw)) ++ nonce)`, so XOR-ing the second term back
/// gives a value whose SHA-256 must be the stored hash.
pub fn verify_sha2(hash: &str, nonce: &[u8], response: &[u8]) -> bool {
    if hash.is_empty() {
        return response.is_empty();
    }
    let stored: Option<Vec<u8>> = (0..hash.len() / 2)
        .map(|i| u8::from_str_radix(hash.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    let Some(stored) = stored.filter(|s| s.len() == 32) else {
        return false;
    };
    if response.len() != 32 {
        return false;
    }
    let mut h = sha2::Sha256::new();
    h.update(&stored);
    h.update(nonce);
    let mix = h.finalize();
    let stage1: Vec<u8> = response
        .iter()
        .zip(mix.iter())
        .map(|(a, b)| a ^ b)
        .collect();
    let check = sha2::Sha256::digest(&stage1);
    check
        .iter()
        .zip(stored.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// The 20 bytes of a `*HEX` hash; `None` if it is not one.
pub(crate) fn hash_bytes(hash: &str) -> Option<[u8; 20]> {
    let hex = hash.strip_prefix('*')?;
    if hex.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Checks a `mysql_native_password` response against a stored hash:
/// `response XOR SHA1(scramble ++ hash)` must be a value whose SHA1 is
/// `hash` (constant time in the compared bytes).
pub fn verify_hash(hash: &str, scramble: &[u8], response: &[u8]) -> bool {
    if hash.is_empty() {
        return response.is_empty();
    }
    let Some(stage2) = hash_bytes(hash) else {
        return false;
    };
    if response.len() != 20 {
        return false;
    }
    let mut h = Sha1::new();
    h.update(scramble);
    h.update(stage2);
    let mix = h.finalize();
    let stage1: Vec<u8> = response
        .iter()
        .zip(mix.iter())
        .map(|(a, b)| a ^ b)
        .collect();
    let check = Sha1::digest(&stage1);
    check
        .iter()
        .zip(stage2.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Whether `host` (a client's host: `localhost` for loopback, else its
/// IP) matches the account pattern `pattern`.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let names: &[&str] = if host == "localhost" {
        &["localhost", "127.0.0.1", "::1"]
    } else {
        &[host]
    };
    names.iter().any(|n| like(pattern.as_bytes(), n.as_bytes()))
}

/// SQL LIKE without escapes, ASCII case-insensitive.
fn like(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'%', rest)) => (0..=s.len()).any(|i| like(rest, &s[i..])),
        Some((&c, rest)) => match s.split_first() {
            Some((&d, srest)) => (c == b'_' || c.eq_ignore_ascii_case(&d)) && like(rest, srest),
            None => false,
        },
    }
}

/// How specific a host pattern is: literal hosts first, `%` last.
fn specificity(pattern: &str) -> u8 {
    if pattern == "%" {
        0
    } else if pattern.contains(['%', '_']) {
        1
    } else {
        2
    }
}

/// The account `user` logs in as from `host`: the most specific host
/// pattern that matches.
fn best_match<'a>(list: &'a [Account], user: &str, host: &str) -> Option<&'a Account> {
    list.iter()
        .filter(|a| a.user == user && host_matches(&a.host, host))
        .max_by_key(|a| specificity(&a.host))
}

/// Whether `a` and `b` are equal, in time that depends on their lengths
/// only (password hashes are compared here).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn wire(code: MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

pub(crate) fn no_such_user_row() -> ShimError {
    wire(
        error::ER_PASSWORD_NO_MATCH,
        "Can't find any matching row in the user table".into(),
    )
}

impl Accounts {
    /// Loads the stored accounts; `root_user` / `root_password` are the
    /// configured superuser.
    pub fn load(
        storage: &Storage,
        root_user: &str,
        root_password: &str,
    ) -> Result<Accounts, ShimError> {
        let found = storage.list_meta(ACCOUNTS_META)?;
        let list = match found.into_iter().find(|(k, _)| k == ACCOUNTS_META) {
            None => Vec::new(),
            Some((_, bytes)) => decode(&bytes)?,
        };
        Ok(Accounts {
            root_user: root_user.to_string(),
            root_password: root_password.to_string(),
            list: RwLock::new(list),
            sha2_cache: Sha2Cache::default(),
        })
    }

    /// Accounts for front ends without storage-backed users (tests).
    pub fn superuser_only(root_user: &str, root_password: &str) -> Accounts {
        Accounts {
            root_user: root_user.to_string(),
            root_password: root_password.to_string(),
            list: RwLock::new(Vec::new()),
            sha2_cache: Sha2Cache::default(),
        }
    }

    pub fn is_superuser_name(&self, user: &str) -> bool {
        user == self.root_user
    }

    /// Checks a `mysql_native_password` login of `user` from `host`.
    pub fn authenticate(
        &self,
        user: &[u8],
        host: &str,
        scramble: &[u8],
        response: &[u8],
    ) -> Option<Login> {
        self.login(user, host, |root, a| match a {
            None => crate::auth::verify(root.as_bytes(), scramble, response),
            // An account known only by its `$A$` form has no native hash
            // to check against (its empty `auth` is not "no password").
            Some(a) => {
                (!a.auth.is_empty() || a.sha2_crypt.is_empty())
                    && verify_hash(&a.auth, scramble, response)
            }
        })
    }

    /// Checks a `caching_sha2_password` fast-authentication response of
    /// `user` from `host` against the account's SHA-256 hash
    /// ([`Account::fast_auth_hash`]; the superuser's from its password).
    /// `None` when it does not prove the password (a wrong one, an unknown
    /// user, a native account stored with a native hash only, a
    /// `caching_sha2_password` account not proven since start-up): the
    /// caller asks for what decides, a `mysql_native_password` response
    /// for a native account, full authentication for the other.
    pub fn authenticate_sha2(
        &self,
        user: &[u8],
        host: &str,
        nonce: &[u8],
        response: &[u8],
    ) -> Option<Login> {
        // Some clients (MariaDB Connector/C) send no response at first and
        // wait to be asked.
        if response.is_empty() {
            return None;
        }
        self.login(user, host, |root, a| {
            let hash = match a {
                None => Some(sha2_hash(root.as_bytes())),
                Some(a) => a.fast_auth_hash(&self.sha2_cache),
            };
            hash.is_some_and(|hash| verify_sha2(&hash, nonce, response))
        })
    }

    /// The plugin of the account `user` from `host` would log in as: the
    /// native one for the superuser and for an unknown user (whose login
    /// fails whatever it sends).
    pub fn plugin(&self, user: &[u8], host: &str) -> AuthPlugin {
        if user == self.root_user.as_bytes() {
            return AuthPlugin::NativePassword;
        }
        let Ok(user) = std::str::from_utf8(user) else {
            return AuthPlugin::NativePassword;
        };
        let list = self.list.read();
        best_match(&list, user, host).map_or(AuthPlugin::NativePassword, |a| a.plugin)
    }

    /// `caching_sha2_password`'s full authentication: `password` came in
    /// clear (over TLS, or RSA-decrypted). A success is cached for the
    /// account's next fast authentication.
    pub fn authenticate_password(&self, user: &[u8], host: &str, password: &[u8]) -> Option<Login> {
        self.login(user, host, |root, a| match a {
            None => constant_time_eq(root.as_bytes(), password),
            Some(a) => {
                let proven = a.proves_password(password);
                if proven && !password.is_empty() {
                    self.sha2_cache.insert(a, password);
                }
                proven
            }
        })
    }

    /// The login of `user` from `host` if `proves` accepts it: called
    /// with the superuser's password and `None`, or with the stored
    /// account of the most specific matching host.
    fn login(
        &self,
        user: &[u8],
        host: &str,
        proves: impl Fn(&str, Option<&Account>) -> bool,
    ) -> Option<Login> {
        if user == self.root_user.as_bytes() {
            return proves(&self.root_password, None).then_some(Login {
                grantee: None,
                require_ssl: false,
            });
        }
        let user = std::str::from_utf8(user).ok()?;
        let list = self.list.read();
        let account = best_match(&list, user, host)?;
        proves(&self.root_password, Some(account)).then(|| Login {
            grantee: Some(Grantee {
                user: account.user.clone(),
                host: account.host.clone(),
            }),
            require_ssl: account.require_ssl,
        })
    }

    /// The privileges `g` holds on `db`.`table` (`table` `None`: on the
    /// database itself), from every level that covers it.
    pub fn privileges(&self, g: &Grantee, db: &str, table: Option<&str>) -> Privs {
        let list = self.list.read();
        let Some(a) = list.iter().find(|a| a.user == g.user && a.host == g.host) else {
            return 0;
        };
        let db = db.to_ascii_lowercase();
        let mut p = a.global | a.databases.get(&db).copied().unwrap_or(0);
        if let Some(t) = table {
            let key = format!("{db}.{}", t.to_ascii_lowercase());
            p |= a.tables.get(&key).copied().unwrap_or(0);
        }
        p
    }

    /// Global privileges of `g`.
    pub fn global(&self, g: &Grantee) -> Privs {
        let list = self.list.read();
        list.iter()
            .find(|a| a.user == g.user && a.host == g.host)
            .map_or(0, |a| a.global)
    }

    /// Whether `g` holds any privilege in `db` (global, on the database or
    /// on one of its tables): what USE and SHOW DATABASES ask.
    pub fn sees_database(&self, g: &Grantee, db: &str) -> bool {
        let list = self.list.read();
        let Some(a) = list.iter().find(|a| a.user == g.user && a.host == g.host) else {
            return false;
        };
        let db = db.to_ascii_lowercase();
        if a.global & OBJECT_PRIVS != 0 || a.databases.get(&db).is_some_and(|p| *p != 0) {
            return true;
        }
        let prefix = format!("{db}.");
        a.tables
            .iter()
            .any(|(k, p)| k.starts_with(&prefix) && *p != 0)
    }

    /// Writes `list` to the catalog, then makes it current. With a
    /// `record` (a cluster node), the same batch writes the record that
    /// hands the list to replicas; the list is not stored without it.
    fn store(
        &self,
        storage: &Storage,
        record: Option<ListRecord>,
        current: &mut Vec<Account>,
        list: Vec<Account>,
    ) -> Result<(), ShimError> {
        let bytes = encode(&list)?;
        match record {
            None => storage.put_meta(ACCOUNTS_META, &bytes)?,
            Some(record) => {
                let state = std::str::from_utf8(&bytes)
                    .map_err(|e| ShimError::Internal(format!("accounts encoding: {e}")))?;
                let (key, value) = record(state).ok_or_else(|| {
                    ShimError::Internal("the account list's record for replicas failed".into())
                })?;
                storage.put_metas(&[(ACCOUNTS_META, &bytes), (&key, &value)])?;
            }
        }
        *current = list;
        Ok(())
    }

    /// The stored accounts in their catalog encoding (password hashes
    /// only): what a cluster's replicas install ([`Accounts::install`]).
    pub fn encoded(&self) -> Result<String, ShimError> {
        String::from_utf8(encode(&self.list.read())?)
            .map_err(|e| ShimError::Internal(format!("accounts encoding: {e}")))
    }

    /// Replaces every stored account with `state` (another node's
    /// [`Accounts::encoded`]) and stores it (with its `record`, see
    /// [`ListRecord`]).
    pub fn install(
        &self,
        storage: &Storage,
        record: Option<ListRecord>,
        state: &str,
    ) -> Result<(), ShimError> {
        let list = decode(state.as_bytes())?;
        let mut current = self.list.write();
        self.store(storage, record, &mut current, list)
    }

    /// Applies `change` to a copy of the list and stores the result (with
    /// its `record`, see [`ListRecord`]); the list is unchanged if
    /// `change` or the write fails.
    pub(crate) fn update<T>(
        &self,
        storage: &Storage,
        record: Option<ListRecord>,
        change: impl FnOnce(&mut Vec<Account>) -> Result<T, ShimError>,
    ) -> Result<T, ShimError> {
        let mut current = self.list.write();
        let mut next = current.clone();
        let out = change(&mut next)?;
        if next != *current {
            self.store(storage, record, &mut current, next)?;
        }
        Ok(out)
    }
}

/// On a cluster node: makes the meta record (key, value) that hands an
/// encoded account list to replicas (`SchemaLog::prepare_accounts`),
/// which the batch storing that list writes too; `None` when it cannot.
pub type ListRecord<'a> = &'a dyn Fn(&str) -> Option<(String, Vec<u8>)>;

fn encode(list: &[Account]) -> Result<Vec<u8>, ShimError> {
    serde_json::to_vec(&Stored {
        version: ACCOUNTS_VERSION,
        accounts: list.to_vec(),
    })
    .map_err(|e| ShimError::Internal(e.to_string()))
}

fn decode(bytes: &[u8]) -> Result<Vec<Account>, ShimError> {
    let stored: Stored = serde_json::from_slice(bytes)
        .map_err(|e| ShimError::Internal(format!("stored accounts unreadable: {e}")))?;
    if stored.version > ACCOUNTS_VERSION {
        return Err(ShimError::Internal(format!(
            "stored accounts have format {} (this build reads up to {ACCOUNTS_VERSION})",
            stored.version
        )));
    }
    Ok(stored.accounts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_hash_is_mysqls() {
        // SELECT PASSWORD('pw') in MariaDB 10.11.
        assert_eq!(
            native_hash(b"pw"),
            "*D821809F681A40A6E379B50D0463EFAE20BDD122"
        );
        assert_eq!(native_hash(b""), "");
    }

    #[test]
    fn login_against_a_stored_hash() {
        let scramble = crate::auth::random_scramble();
        let response = crate::auth::scramble_response(b"pw", &scramble);
        let hash = native_hash(b"pw");
        assert!(verify_hash(&hash, &scramble, &response));
        let wrong = crate::auth::scramble_response(b"px", &scramble);
        assert!(!verify_hash(&hash, &scramble, &wrong));
        assert!(verify_hash("", &scramble, b""));
        assert!(!verify_hash("", &scramble, &response));
    }

    #[test]
    fn caching_sha2_fast_authentication() {
        // What a MySQL 8 client computes (mysql-connector's
        // scramble_caching_sha2), written out here.
        let scramble = |pw: &[u8], nonce: &[u8]| -> Vec<u8> {
            let s1 = sha2::Sha256::digest(pw);
            let s2 = sha2::Sha256::digest(s1);
            let mut h = sha2::Sha256::new();
            h.update(s2);
            h.update(nonce);
            let mix = h.finalize();
            s1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
        };
        let nonce = crate::auth::random_scramble();
        let hash = sha2_hash(b"pw");
        assert!(verify_sha2(&hash, &nonce, &scramble(b"pw", &nonce)));
        assert!(!verify_sha2(&hash, &nonce, &scramble(b"px", &nonce)));
        assert!(verify_sha2("", &nonce, b""));
        assert!(!verify_sha2("", &nonce, &scramble(b"pw", &nonce)));
    }

    #[test]
    fn host_patterns() {
        assert!(host_matches("%", "10.1.2.3"));
        assert!(host_matches("localhost", "localhost"));
        assert!(host_matches("127.0.0.1", "localhost"));
        assert!(!host_matches("localhost", "10.1.2.3"));
        assert!(host_matches("10.1.%", "10.1.2.3"));
        assert!(!host_matches("10.2.%", "10.1.2.3"));
        assert!(specificity("localhost") > specificity("10.%"));
        assert!(specificity("10.%") > specificity("%"));
    }
}
