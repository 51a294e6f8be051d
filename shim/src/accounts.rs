//! User accounts and their privileges: `CREATE USER`, `DROP USER`, `ALTER
//! USER`, `SET PASSWORD`, `GRANT`, `REVOKE`, `SHOW GRANTS`, and the login
//! check against them.
//!
//! The configured user (`--user`, `--password` / `LADLE_PASSWORD`) is the
//! built-in superuser: it is not stored, holds every privilege on
//! everything and cannot be dropped, altered or revoked. Every other
//! account is stored in the catalog as one meta record ([`ACCOUNTS_META`],
//! JSON with its own `version`), written whole by each change with the
//! catalog's durability (one RocksDB write, so a crash leaves the old or
//! the new list, never a mix). Passwords are kept only as MySQL's native
//! hash (`*` and the hex of `SHA1(SHA1(password))`, what `PASSWORD()`
//! returns), which is all `mysql_native_password` needs to check a login.
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

use ladle_common::Value;
use ladle_storage::Storage;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use crate::error::{self, MysqlCode, ShimError, WireError};
use crate::output::{text_column, Output};
use crate::session::Session;

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
const NAMES: [(Privs, &str); 12] = [
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
    /// `REQUIRE SSL`: logins over plaintext are refused (3159).
    pub require_ssl: bool,
    pub global: Privs,
    /// Database name (lower case) -> privileges.
    pub databases: BTreeMap<String, Privs>,
    /// `db.table` (lower case) -> privileges.
    pub tables: BTreeMap<String, Privs>,
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
    root_password: String,
    list: RwLock<Vec<Account>>,
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
fn hash_bytes(hash: &str) -> Option<[u8; 20]> {
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

fn wire(code: MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

fn no_such_user_row() -> ShimError {
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
        })
    }

    /// Accounts for front ends without storage-backed users (tests).
    pub fn superuser_only(root_user: &str, root_password: &str) -> Accounts {
        Accounts {
            root_user: root_user.to_string(),
            root_password: root_password.to_string(),
            list: RwLock::new(Vec::new()),
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
            Some(a) => verify_hash(&a.auth, scramble, response),
        })
    }

    /// Checks a `caching_sha2_password` fast-authentication response of
    /// `user` from `host`. `None` when it does not prove the password (a
    /// wrong one, an unknown user, an account stored with a native hash
    /// only, which has no SHA-256 hash): as MySQL asks for full
    /// authentication then, the caller asks the client for a
    /// `mysql_native_password` response, which decides.
    pub fn authenticate_sha2(
        &self,
        user: &[u8],
        host: &str,
        nonce: &[u8],
        response: &[u8],
    ) -> Option<Login> {
        // Some clients (MariaDB Connector/C) send no response at first and
        // wait to be asked: they are asked for a native one.
        if response.is_empty() {
            return None;
        }
        self.login(user, host, |root, a| match a {
            None => verify_sha2(&sha2_hash(root.as_bytes()), nonce, response),
            Some(a) => verify_sha2(&a.sha2, nonce, response),
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
        let account = list
            .iter()
            .filter(|a| a.user == user && host_matches(&a.host, host))
            .max_by_key(|a| specificity(&a.host))?;
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

    /// Writes `list` to the catalog, then makes it current.
    fn store(
        &self,
        storage: &Storage,
        current: &mut Vec<Account>,
        list: Vec<Account>,
    ) -> Result<(), ShimError> {
        storage.put_meta(ACCOUNTS_META, &encode(&list)?)?;
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
    /// [`Accounts::encoded`]) and stores it.
    pub fn install(&self, storage: &Storage, state: &str) -> Result<(), ShimError> {
        let list = decode(state.as_bytes())?;
        let mut current = self.list.write();
        self.store(storage, &mut current, list)
    }

    /// Applies `change` to a copy of the list and stores the result; the
    /// list is unchanged if `change` or the write fails.
    fn update<T>(
        &self,
        storage: &Storage,
        change: impl FnOnce(&mut Vec<Account>) -> Result<T, ShimError>,
    ) -> Result<T, ShimError> {
        let mut current = self.list.write();
        let mut next = current.clone();
        let out = change(&mut next)?;
        if next != *current {
            self.store(storage, &mut current, next)?;
        }
        Ok(out)
    }
}

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

impl crate::exec::Engine {
    /// On a cluster replica: installs the primary's account list (sent
    /// after each account statement there) and records it for this
    /// node's own replicas, between the same two LSNs.
    pub fn install_replicated_accounts(&self, state: &str) -> Result<(), String> {
        self.storage.fenced(|| {
            self.accounts
                .install(&self.storage, state)
                .map_err(|e| e.to_string())?;
            if let Some(log) = self.schema_log.get() {
                log.record_accounts(state);
            }
            Ok(())
        })
    }
}

// ---------------------------------------------------------------------
// Statements

/// A token of an account statement (their grammar is small and sqlparser
/// knows little of it: `'u'@'h'`, `*.*`, `CREATE USER` as a privilege).
#[derive(Clone, Debug, PartialEq)]
enum Lex {
    /// A bare word (compared without case).
    Word(String),
    /// A `backquoted` identifier.
    Quoted(String),
    /// A 'string' or "string".
    Str(String),
    Punct(char),
}

fn lex(sql: &str) -> Result<Vec<Lex>, ShimError> {
    let b: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() || c == ';' {
            i += 1;
        } else if c == '\'' || c == '"' || c == '`' {
            let mut s = String::new();
            i += 1;
            loop {
                let Some(&d) = b.get(i) else {
                    return Err(ShimError::Parse("unterminated quoted text".into()));
                };
                i += 1;
                if d == c {
                    if b.get(i) == Some(&c) {
                        s.push(c);
                        i += 1;
                        continue;
                    }
                    break;
                }
                if d == '\\' && c != '`' {
                    if let Some(&e) = b.get(i) {
                        s.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            '0' => '\0',
                            other => other,
                        });
                        i += 1;
                        continue;
                    }
                }
                s.push(d);
            }
            out.push(if c == '`' {
                Lex::Quoted(s)
            } else {
                Lex::Str(s)
            });
        } else if c.is_alphanumeric() || c == '_' || c == '$' || c == '%' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || matches!(b[i], '_' | '$' | '%' | '-')) {
                i += 1;
            }
            out.push(Lex::Word(b[start..i].iter().collect()));
        } else {
            out.push(Lex::Punct(c));
            i += 1;
        }
    }
    Ok(out)
}

/// A cursor over an account statement's tokens.
struct Cur {
    t: Vec<Lex>,
    i: usize,
}

impl Cur {
    fn peek_word(&self) -> Option<String> {
        match self.t.get(self.i) {
            Some(Lex::Word(w)) => Some(w.to_ascii_uppercase()),
            _ => None,
        }
    }
    fn is(&self, w: &str) -> bool {
        self.peek_word().as_deref() == Some(w)
    }
    fn eat(&mut self, w: &str) -> bool {
        if self.is(w) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_all(&mut self, ws: &[&str]) -> bool {
        let save = self.i;
        for w in ws {
            if !self.eat(w) {
                self.i = save;
                return false;
            }
        }
        true
    }
    fn expect(&mut self, w: &str) -> Result<(), ShimError> {
        if self.eat(w) {
            Ok(())
        } else {
            Err(self.syntax())
        }
    }
    fn punct(&mut self, c: char) -> bool {
        if self.t.get(self.i) == Some(&Lex::Punct(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn done(&self) -> bool {
        self.i >= self.t.len()
    }
    fn syntax(&self) -> ShimError {
        let near = match self.t.get(self.i) {
            None => String::new(),
            Some(Lex::Word(w) | Lex::Quoted(w)) => w.clone(),
            Some(Lex::Str(s)) => format!("'{s}'"),
            Some(Lex::Punct(c)) => c.to_string(),
        };
        ShimError::Parse(format!(
            "check the manual that corresponds to your MariaDB server version for the right syntax to use near '{near}'"
        ))
    }
    /// A name: word, `quoted` or 'string'.
    fn name(&mut self) -> Result<String, ShimError> {
        match self.t.get(self.i).cloned() {
            Some(Lex::Word(w) | Lex::Quoted(w) | Lex::Str(w)) => {
                self.i += 1;
                Ok(w)
            }
            _ => Err(self.syntax()),
        }
    }
    fn string(&mut self) -> Result<String, ShimError> {
        match self.t.get(self.i).cloned() {
            Some(Lex::Str(s)) => {
                self.i += 1;
                Ok(s)
            }
            _ => Err(self.syntax()),
        }
    }
    /// `user[@host]` (host `%` when absent), or CURRENT_USER[()].
    fn account(&mut self, s: &Session) -> Result<(String, String), ShimError> {
        if self.eat("CURRENT_USER") {
            if self.punct('(') && !self.punct(')') {
                return Err(self.syntax());
            }
            return Ok(current_user(s));
        }
        let user = self.name()?;
        if !self.punct('@') {
            return Ok((user, "%".into()));
        }
        // An unquoted host may be lexed in pieces (127.0.0.1).
        let mut host = self.name()?;
        while self.t.get(self.i) == Some(&Lex::Punct('.')) {
            self.i += 1;
            host.push('.');
            host.push_str(&self.name()?);
        }
        Ok((user, host))
    }
}

/// The session's account as `CURRENT_USER()` names it.
pub fn current_user(s: &Session) -> (String, String) {
    match &s.grantee {
        Some(g) => (g.user.clone(), g.host.clone()),
        None => (s.user.clone(), "%".into()),
    }
}

fn quoted(user: &str, host: &str) -> String {
    format!("'{user}'@'{host}'")
}

/// What `IDENTIFIED ...` / `SET PASSWORD = ...` gave: the native hash,
/// and the `caching_sha2_password` one when the password itself was given.
struct Secret {
    auth: String,
    sha2: String,
}

impl Secret {
    fn of_password(pw: &str) -> Secret {
        Secret {
            auth: native_hash(pw.as_bytes()),
            sha2: sha2_hash(pw.as_bytes()),
        }
    }

    /// A native hash given literally (MySQL's 41-character form, or
    /// empty); no SHA-256 hash can be derived from it.
    fn of_hash(h: &str) -> Result<Secret, ShimError> {
        if h.is_empty() || hash_bytes(h).is_some() {
            Ok(Secret {
                auth: h.to_ascii_uppercase(),
                sha2: String::new(),
            })
        } else {
            Err(wire(
                error::ER_PASSWD_LENGTH,
                "Password hash should be a 41-digit hexadecimal number".into(),
            ))
        }
    }

    fn set(self, a: &mut Account) {
        a.auth = self.auth;
        a.sha2 = self.sha2;
    }
}

fn password_clause(c: &mut Cur) -> Result<Secret, ShimError> {
    // IDENTIFIED BY 'pw' | IDENTIFIED BY PASSWORD 'hash' |
    // IDENTIFIED WITH mysql_native_password|caching_sha2_password
    //   [BY 'pw' | AS 'hash']
    if c.eat("WITH") {
        let plugin = c.name()?;
        let native = plugin.eq_ignore_ascii_case("mysql_native_password");
        if !native && !plugin.eq_ignore_ascii_case("caching_sha2_password") {
            return Err(ShimError::Unsupported(format!(
                "authentication plugin '{plugin}' (mysql_native_password and caching_sha2_password are)"
            )));
        }
        if c.eat("BY") {
            return Ok(Secret::of_password(&c.string()?));
        }
        if native && c.eat("AS") {
            return Secret::of_hash(&c.string()?);
        }
        return Secret::of_hash("");
    }
    c.expect("BY")?;
    if c.eat("PASSWORD") {
        return Secret::of_hash(&c.string()?);
    }
    Ok(Secret::of_password(&c.string()?))
}

/// `REQUIRE SSL | NONE` (X509 and the rest are not supported).
fn require_clause(c: &mut Cur) -> Result<Option<bool>, ShimError> {
    if !c.eat("REQUIRE") {
        return Ok(None);
    }
    if c.eat("SSL") {
        Ok(Some(true))
    } else if c.eat("NONE") {
        Ok(Some(false))
    } else {
        Err(ShimError::Unsupported(
            "REQUIRE other than SSL or NONE".into(),
        ))
    }
}

/// Whether `sql` is an account statement [`statement`] runs.
/// Whether an account statement changes accounts (all but SHOW GRANTS).
pub fn changes_accounts(w0: &str, w1: &str) -> bool {
    is_account_statement(w0, w1) && w0 != "SHOW"
}

pub fn is_account_statement(w0: &str, w1: &str) -> bool {
    matches!(
        (w0, w1),
        ("CREATE" | "DROP" | "ALTER" | "RENAME", "USER")
            | ("GRANT" | "REVOKE", _)
            | ("SET", "PASSWORD")
            | ("SHOW", "GRANTS")
    )
}

/// Runs an account statement (see [`is_account_statement`]).
pub fn statement(e: &crate::exec::Engine, s: &mut Session, sql: &str) -> Result<Output, ShimError> {
    let mut c = Cur { t: lex(sql)?, i: 0 };
    let w0 = c.peek_word().unwrap_or_default();
    c.i += 1;
    let w1 = c.peek_word().unwrap_or_default();
    // Past the second word (GRANT and REVOKE read their list from it).
    c.i += 1;
    let out = match (w0.as_str(), w1.as_str()) {
        ("CREATE", "USER") => need_create_user(e, s).and_then(|()| create_user(e, s, &mut c)),
        ("DROP", "USER") => need_create_user(e, s).and_then(|()| drop_user(e, s, &mut c)),
        ("RENAME", "USER") => need_create_user(e, s).and_then(|()| rename_user(e, s, &mut c)),
        ("ALTER", "USER") => alter_user(e, s, &mut c),
        ("SET", "PASSWORD") => set_password(e, s, &mut c),
        ("SHOW", "GRANTS") => show_grants(e, s, &mut c),
        ("GRANT", _) => grant(e, s, &mut c, true),
        ("REVOKE", _) => grant(e, s, &mut c, false),
        _ => Err(c.syntax()),
    }?;
    if !c.done() {
        return Err(c.syntax());
    }
    Ok(out)
}

fn denied_global(privilege: &str) -> ShimError {
    wire(
        error::ER_SPECIFIC_ACCESS_DENIED,
        format!("Access denied; you need (at least one of) the {privilege} privilege(s) for this operation"),
    )
}

fn need_create_user(e: &crate::exec::Engine, s: &Session) -> Result<(), ShimError> {
    match &s.grantee {
        Some(g) if e.accounts.global(g) & CREATE_USER == 0 => Err(denied_global("CREATE USER")),
        _ => Ok(()),
    }
}

/// Acting on another account without CREATE USER is what MariaDB checks
/// as access to the `mysql` database.
fn need_mysql_db(s: &Session, e: &crate::exec::Engine) -> Result<(), ShimError> {
    match &s.grantee {
        Some(g) if e.accounts.global(g) & (CREATE_USER | UPDATE) == 0 => Err(wire(
            error::ER_DBACCESS_DENIED,
            format!(
                "Access denied for user '{}'@'{}' to database 'mysql'",
                g.user, g.host
            ),
        )),
        _ => Ok(()),
    }
}

/// 1396 naming the accounts `op` could not act on, if there are any.
fn failed_accounts(op: &str, failed: &[(String, String)]) -> Result<(), ShimError> {
    if failed.is_empty() {
        Ok(())
    } else {
        Err(builtin_refused(op, failed))
    }
}

fn builtin_refused(op: &str, names: &[(String, String)]) -> ShimError {
    let list: Vec<String> = names.iter().map(|(u, h)| quoted(u, h)).collect();
    wire(
        error::ER_CANNOT_USER,
        format!("Operation {op} failed for {}", list.join(",")),
    )
}

fn create_user(e: &crate::exec::Engine, s: &mut Session, c: &mut Cur) -> Result<Output, ShimError> {
    let if_not_exists = c.eat_all(&["IF", "NOT", "EXISTS"]);
    let mut specs = Vec::new();
    loop {
        let (user, host) = c.account(s)?;
        let secret = if c.eat("IDENTIFIED") {
            password_clause(c)?
        } else {
            Secret::of_password("")
        };
        specs.push((user, host, secret));
        if !c.punct(',') {
            break;
        }
    }
    let require_ssl = require_clause(c)?.unwrap_or(false);
    let mut notes = Vec::new();
    e.accounts.update(&e.storage, |list| {
        let mut failed = Vec::new();
        for (user, host, secret) in specs {
            let exists = e.accounts.is_superuser_name(&user)
                || list.iter().any(|a| a.user == user && a.host == host);
            if exists {
                if if_not_exists {
                    notes.push(format!(
                        "Can't create user {}; it already exists",
                        quoted(&user, &host)
                    ));
                } else {
                    failed.push((user, host));
                }
                continue;
            }
            list.push(Account {
                user,
                host,
                auth: secret.auth,
                sha2: secret.sha2,
                require_ssl,
                ..Account::default()
            });
        }
        failed_accounts("CREATE USER", &failed)
    })?;
    for n in notes {
        s.add_warning("Note", error::ER_USER_CREATE_EXISTS.errno, n);
    }
    Ok(Output::ok())
}

fn drop_user(e: &crate::exec::Engine, s: &mut Session, c: &mut Cur) -> Result<Output, ShimError> {
    let if_exists = c.eat_all(&["IF", "EXISTS"]);
    let mut names = Vec::new();
    loop {
        names.push(c.account(s)?);
        if !c.punct(',') {
            break;
        }
    }
    let mut notes = Vec::new();
    e.accounts.update(&e.storage, |list| {
        let mut failed = Vec::new();
        for (user, host) in names {
            let before = list.len();
            if !e.accounts.is_superuser_name(&user) {
                list.retain(|a| !(a.user == user && a.host == host));
            }
            if list.len() == before {
                if if_exists && !e.accounts.is_superuser_name(&user) {
                    notes.push(format!(
                        "Can't drop user {}; it doesn't exist",
                        quoted(&user, &host)
                    ));
                } else {
                    failed.push((user, host));
                }
            }
        }
        failed_accounts("DROP USER", &failed)
    })?;
    for n in notes {
        s.add_warning("Note", error::ER_USER_DROP_EXISTS.errno, n);
    }
    Ok(Output::ok())
}

fn rename_user(e: &crate::exec::Engine, s: &mut Session, c: &mut Cur) -> Result<Output, ShimError> {
    let mut pairs = Vec::new();
    loop {
        let from = c.account(s)?;
        c.expect("TO")?;
        let to = c.account(s)?;
        pairs.push((from, to));
        if !c.punct(',') {
            break;
        }
    }
    e.accounts.update(&e.storage, |list| {
        let mut failed = Vec::new();
        for ((fu, fh), (tu, th)) in pairs {
            let taken = e.accounts.is_superuser_name(&tu)
                || list.iter().any(|a| a.user == tu && a.host == th);
            match list.iter_mut().find(|a| a.user == fu && a.host == fh) {
                Some(a) if !taken => {
                    a.user = tu;
                    a.host = th;
                }
                _ => failed.push((fu, fh)),
            }
        }
        failed_accounts("RENAME USER", &failed)
    })?;
    Ok(Output::ok())
}

fn alter_user(e: &crate::exec::Engine, s: &mut Session, c: &mut Cur) -> Result<Output, ShimError> {
    let if_exists = c.eat_all(&["IF", "EXISTS"]);
    let (user, host) = c.account(s)?;
    let auth = if c.eat("IDENTIFIED") {
        Some(password_clause(c)?)
    } else {
        None
    };
    let require = require_clause(c)?;
    let own = current_user(s) == (user.clone(), host.clone());
    if !own || require.is_some() {
        need_create_user(e, s)?;
    }
    if e.accounts.is_superuser_name(&user) {
        return Err(superuser_fixed());
    }
    let found = e.accounts.update(&e.storage, |list| {
        let Some(a) = list.iter_mut().find(|a| a.user == user && a.host == host) else {
            return Ok(false);
        };
        if let Some(secret) = auth {
            secret.set(a);
        }
        if let Some(r) = require {
            a.require_ssl = r;
        }
        Ok(true)
    })?;
    if !found {
        if if_exists {
            s.add_warning(
                "Note",
                error::ER_USER_DROP_EXISTS.errno,
                format!(
                    "Can't alter user {}; it doesn't exist",
                    quoted(&user, &host)
                ),
            );
        } else {
            return Err(builtin_refused("ALTER USER", &[(user, host)]));
        }
    }
    Ok(Output::ok())
}

fn superuser_fixed() -> ShimError {
    ShimError::Unsupported(
        "changing the configured superuser at runtime (set --password or LADLE_PASSWORD)".into(),
    )
}

/// `SET PASSWORD [FOR account] = PASSWORD('pw') | 'hash'` (MariaDB: a
/// bare string is a hash).
fn set_password(
    e: &crate::exec::Engine,
    s: &mut Session,
    c: &mut Cur,
) -> Result<Output, ShimError> {
    let (user, host) = if c.eat("FOR") {
        let target = c.account(s)?;
        if target != current_user(s) {
            need_mysql_db(s, e)?;
        }
        target
    } else {
        current_user(s)
    };
    if !c.punct('=') {
        return Err(c.syntax());
    }
    let secret = if c.eat("PASSWORD") {
        if !c.punct('(') {
            return Err(c.syntax());
        }
        let pw = c.string()?;
        if !c.punct(')') {
            return Err(c.syntax());
        }
        Secret::of_password(&pw)
    } else {
        Secret::of_hash(&c.string()?)?
    };
    if e.accounts.is_superuser_name(&user) {
        return Err(superuser_fixed());
    }
    let found = e.accounts.update(&e.storage, |list| {
        match list.iter_mut().find(|a| a.user == user && a.host == host) {
            Some(a) => {
                secret.set(a);
                Ok(true)
            }
            None => Ok(false),
        }
    })?;
    if !found {
        return Err(no_such_user_row());
    }
    Ok(Output::ok())
}

/// Where a GRANT applies.
#[derive(Clone, Debug, PartialEq)]
enum Level {
    Global,
    Database(String),
    Table(String, String),
}

/// `priv [, priv]...` up to ON; the set and whether GRANT OPTION is in it.
fn privilege_list(c: &mut Cur) -> Result<Privs, ShimError> {
    let mut p = 0;
    loop {
        let w = c.peek_word().ok_or_else(|| c.syntax())?;
        c.i += 1;
        p |= match w.as_str() {
            "ALL" => {
                c.eat("PRIVILEGES");
                GLOBAL_PRIVS
            }
            "USAGE" => 0,
            "SELECT" => SELECT,
            "INSERT" => INSERT,
            "UPDATE" => UPDATE,
            "DELETE" => DELETE,
            "CREATE" if c.eat("USER") => CREATE_USER,
            "CREATE" => CREATE,
            "DROP" => DROP,
            "RELOAD" => RELOAD,
            "PROCESS" => PROCESS,
            "INDEX" => INDEX,
            "ALTER" => ALTER,
            "SUPER" => SUPER,
            "GRANT" => {
                c.expect("OPTION")?;
                GRANT_OPTION
            }
            other => {
                return Err(ShimError::Unsupported(format!("the {other} privilege")));
            }
        };
        if c.t.get(c.i) == Some(&Lex::Punct('(')) {
            return Err(ShimError::Unsupported("column privileges".into()));
        }
        if !c.punct(',') {
            return Ok(p);
        }
    }
}

fn level(c: &mut Cur, s: &Session) -> Result<Level, ShimError> {
    let current = || s.database.clone().ok_or(ShimError::NoDatabase);
    if c.punct('*') {
        if c.punct('.') {
            if !c.punct('*') {
                return Err(c.syntax());
            }
            return Ok(Level::Global);
        }
        return Ok(Level::Database(current()?));
    }
    let first = c.name()?;
    if c.punct('.') {
        if c.punct('*') {
            return Ok(Level::Database(first));
        }
        let table = c.name()?;
        return Ok(Level::Table(first, table));
    }
    Ok(Level::Table(current()?, first))
}

/// GRANT privs ON level TO account [, ...] [REQUIRE ...] [WITH GRANT OPTION]
/// REVOKE privs ON level FROM account [, ...]
/// REVOKE ALL [PRIVILEGES], GRANT OPTION FROM account [, ...]
fn grant(
    e: &crate::exec::Engine,
    s: &mut Session,
    c: &mut Cur,
    give: bool,
) -> Result<Output, ShimError> {
    c.i = 1;
    let mut privs = privilege_list(c)?;
    let lvl = if !give && privs & GRANT_OPTION != 0 && c.is("FROM") {
        // REVOKE ALL PRIVILEGES, GRANT OPTION FROM ...: everything, everywhere.
        None
    } else {
        c.expect("ON")?;
        // ON TABLE t
        c.eat("TABLE");
        Some(level(c, s)?)
    };
    c.expect(if give { "TO" } else { "FROM" })?;
    let mut names = Vec::new();
    loop {
        let (user, host) = c.account(s)?;
        let auth = if give && c.eat("IDENTIFIED") {
            Some(password_clause(c)?)
        } else {
            None
        };
        names.push((user, host, auth));
        if !c.punct(',') {
            break;
        }
    }
    let require = if give { require_clause(c)? } else { None };
    if give && c.eat_all(&["WITH", "GRANT", "OPTION"]) {
        privs |= GRANT_OPTION;
    }
    let allowed = match &lvl {
        Some(Level::Global) | None => GLOBAL_PRIVS | GRANT_OPTION,
        _ => OBJECT_PRIVS | GRANT_OPTION,
    };
    let all = privs & GLOBAL_PRIVS == GLOBAL_PRIVS;
    if all {
        privs = (privs & GRANT_OPTION) | (allowed & !GRANT_OPTION);
    } else if privs & !allowed != 0 {
        let which = if matches!(lvl, Some(Level::Table(..))) {
            "table GRANT and GLOBAL PRIVILEGES"
        } else {
            "DB GRANT and GLOBAL PRIVILEGES"
        };
        return Err(wire(
            error::ER_WRONG_USAGE,
            format!("Incorrect usage of {which}"),
        ));
    }
    grantor_may(e, s, &lvl, privs)?;
    if let Some(Level::Table(db, t)) = &lvl {
        if give
            && e.storage.table(db, t).is_none()
            && crate::exec::view_definition(&e.storage, db, t).is_none()
        {
            return Err(ShimError::UnknownTable {
                database: db.clone(),
                table: t.clone(),
            });
        }
    }
    for (user, _, _) in &names {
        if e.accounts.is_superuser_name(user) {
            if give {
                // The superuser already holds everything.
                continue;
            }
            return Err(superuser_fixed());
        }
    }
    e.accounts.update(&e.storage, |list| {
        for (user, host, auth) in names.iter_mut() {
            if e.accounts.is_superuser_name(user) {
                continue;
            }
            let Some(a) = list.iter_mut().find(|a| a.user == *user && a.host == *host) else {
                return Err(no_such_user_row());
            };
            if let Some(secret) = auth.take() {
                secret.set(a);
            }
            if let Some(r) = require {
                a.require_ssl = r;
            }
            apply(a, &lvl, privs, give)?;
        }
        Ok(())
    })?;
    Ok(Output::ok())
}

/// The grantor needs GRANT OPTION and the privileges it gives at the level
/// (or above); the superuser always may.
fn grantor_may(
    e: &crate::exec::Engine,
    s: &Session,
    lvl: &Option<Level>,
    privs: Privs,
) -> Result<(), ShimError> {
    let Some(g) = &s.grantee else {
        return Ok(());
    };
    let held = match lvl {
        None | Some(Level::Global) => e.accounts.global(g),
        Some(Level::Database(db)) => e.accounts.privileges(g, db, None),
        Some(Level::Table(db, t)) => e.accounts.privileges(g, db, Some(t)),
    };
    if held & GRANT_OPTION != 0 && privs & !held == 0 {
        return Ok(());
    }
    let (user, host) = (g.user.clone(), s.host.clone());
    Err(match lvl {
        None | Some(Level::Global) => need_mysql_db(s, e)
            .err()
            .unwrap_or_else(|| denied_global("GRANT OPTION")),
        Some(Level::Database(db)) => wire(
            error::ER_DBACCESS_DENIED,
            format!(
                "Access denied for user '{user}'@'{}' to database '{db}'",
                g.host
            ),
        ),
        Some(Level::Table(db, t)) => wire(
            error::ER_TABLEACCESS_DENIED,
            format!("GRANT command denied to user '{user}'@'{host}' for table `{db}`.`{t}`"),
        ),
    })
}

fn apply(a: &mut Account, lvl: &Option<Level>, privs: Privs, give: bool) -> Result<(), ShimError> {
    let no_grant = |a: &Account| {
        wire(
            error::ER_NONEXISTING_GRANT,
            format!(
                "There is no such grant defined for user '{}' on host '{}'",
                a.user, a.host
            ),
        )
    };
    let slot: &mut Privs = match lvl {
        None => {
            a.global = 0;
            a.databases.clear();
            a.tables.clear();
            return Ok(());
        }
        Some(Level::Global) => &mut a.global,
        Some(Level::Database(db)) => {
            let key = db.to_ascii_lowercase();
            if !give && !a.databases.contains_key(&key) {
                return Err(no_grant(a));
            }
            a.databases.entry(key).or_insert(0)
        }
        Some(Level::Table(db, t)) => {
            let key = format!("{}.{}", db.to_ascii_lowercase(), t.to_ascii_lowercase());
            if !give && !a.tables.contains_key(&key) {
                return Err(wire(
                    error::ER_NONEXISTING_TABLE_GRANT,
                    format!(
                        "There is no such grant defined for user '{}' on host '{}' on table '{t}'",
                        a.user, a.host
                    ),
                ));
            }
            a.tables.entry(key).or_insert(0)
        }
    };
    if give {
        *slot |= privs;
    } else {
        *slot &= !privs;
    }
    a.databases.retain(|_, p| *p != 0);
    a.tables.retain(|_, p| *p != 0);
    Ok(())
}

/// `Privs` as MariaDB lists them (`ALL PRIVILEGES` when every one the
/// level allows is there), without GRANT OPTION.
fn render_privs(p: Privs, all: Privs) -> String {
    let p = p & !GRANT_OPTION;
    if p == 0 {
        return "USAGE".into();
    }
    if p & all == all {
        return "ALL PRIVILEGES".into();
    }
    NAMES
        .iter()
        .filter(|(b, _)| p & b != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The lines of SHOW GRANTS for one account.
fn grant_lines(a: &Account) -> Vec<String> {
    let to = format!("`{}`@`{}`", a.user, a.host);
    let with = |p: Privs| {
        if p & GRANT_OPTION != 0 {
            " WITH GRANT OPTION"
        } else {
            ""
        }
    };
    let mut first = format!(
        "GRANT {} ON *.* TO {to}",
        render_privs(a.global, GLOBAL_PRIVS)
    );
    if !a.auth.is_empty() {
        first.push_str(&format!(" IDENTIFIED BY PASSWORD '{}'", a.auth));
    }
    if a.require_ssl {
        first.push_str(" REQUIRE SSL");
    }
    first.push_str(with(a.global));
    let mut lines = vec![first];
    for (db, p) in &a.databases {
        lines.push(format!(
            "GRANT {} ON `{db}`.* TO {to}{}",
            render_privs(*p, OBJECT_PRIVS),
            with(*p)
        ));
    }
    for (key, p) in &a.tables {
        let (db, t) = key.split_once('.').unwrap_or(("", key));
        lines.push(format!(
            "GRANT {} ON `{db}`.`{t}` TO {to}{}",
            render_privs(*p, OBJECT_PRIVS),
            with(*p)
        ));
    }
    lines
}

/// `SHOW GRANTS [FOR account | FOR CURRENT_USER[()]]`.
fn show_grants(e: &crate::exec::Engine, s: &Session, c: &mut Cur) -> Result<Output, ShimError> {
    let (user, host) = if c.eat("FOR") {
        c.account(s)?
    } else {
        current_user(s)
    };
    if (user.clone(), host.clone()) != current_user(s) {
        if let Some(g) = &s.grantee {
            if e.accounts.privileges(g, "mysql", None) & SELECT == 0 {
                return Err(wire(
                    error::ER_DBACCESS_DENIED,
                    format!(
                        "Access denied for user '{}'@'{}' to database 'mysql'",
                        g.user, g.host
                    ),
                ));
            }
        }
    }
    let lines = if e.accounts.is_superuser_name(&user) {
        let mut line = format!("GRANT ALL PRIVILEGES ON *.* TO `{user}`@`%`");
        let hash = native_hash(e.accounts.root_password.as_bytes());
        if !hash.is_empty() {
            line.push_str(&format!(" IDENTIFIED BY PASSWORD '{hash}'"));
        }
        line.push_str(" WITH GRANT OPTION");
        vec![line]
    } else {
        let list = e.accounts.list.read();
        match list.iter().find(|a| a.user == user && a.host == host) {
            Some(a) => grant_lines(a),
            None => {
                return Err(wire(
                    error::ER_NONEXISTING_GRANT,
                    format!("There is no such grant defined for user '{user}' on host '{host}'"),
                ))
            }
        }
    };
    Ok(Output::Rows {
        columns: vec![text_column(&format!("Grants for {user}@{host}"))],
        rows: lines
            .into_iter()
            .map(|l| vec![Value::text(l)])
            .collect::<Vec<_>>()
            .into(),
    })
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

    #[test]
    fn grants_render_as_mariadb() {
        let mut a = Account {
            user: "ua".into(),
            host: "localhost".into(),
            auth: native_hash(b"x"),
            ..Account::default()
        };
        a.databases.insert("a".into(), OBJECT_PRIVS | GRANT_OPTION);
        a.databases.insert(
            "b".into(),
            SELECT | UPDATE | DELETE | CREATE | DROP | INDEX | ALTER,
        );
        a.tables.insert("a.t".into(), SELECT | INSERT);
        // SHOW GRANTS FOR ua@localhost in MariaDB 10.11 after the same grants.
        assert_eq!(
            grant_lines(&a),
            vec![
                "GRANT USAGE ON *.* TO `ua`@`localhost` IDENTIFIED BY PASSWORD '*B69027D44F6E5EDC07F1AEAD1477967B16F28227'",
                "GRANT ALL PRIVILEGES ON `a`.* TO `ua`@`localhost` WITH GRANT OPTION",
                "GRANT SELECT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `b`.* TO `ua`@`localhost`",
                "GRANT SELECT, INSERT ON `a`.`t` TO `ua`@`localhost`",
            ]
        );
    }
}
