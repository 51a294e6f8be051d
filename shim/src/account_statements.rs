//! The account statements: `CREATE USER`, `DROP USER`, `RENAME USER`,
//! `ALTER USER`, `SET PASSWORD`, `GRANT`, `REVOKE`, `SHOW GRANTS` and `SHOW
//! CREATE USER`, parsed by their own small grammar and applied to
//! [`crate::accounts::Accounts`] (the SHOW ones render in
//! [`crate::show_accounts`]).

use crate::accounts::{
    hash_bytes, native_hash, no_such_user_row, sha2_hash, wire, Account, AuthPlugin, Privs, ALTER,
    CREATE, CREATE_USER, DELETE, DROP, GLOBAL_PRIVS, GRANT_OPTION, INDEX, INSERT, OBJECT_PRIVS,
    PROCESS, RELOAD, SELECT, SUPER, UPDATE,
};
use crate::error::{self, ShimError};
use crate::output::Output;
use crate::session::current_user;
use crate::session::Session;

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
    /// The statement ends here, or it is a syntax error: every statement
    /// checks this before it changes an account, so trailing junk (1064)
    /// changes nothing, as in MariaDB, which parses before it executes.
    fn end(&self) -> Result<(), ShimError> {
        if self.done() {
            Ok(())
        } else {
            Err(self.syntax())
        }
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
    /// A hash after `AS`: a 'string', or `0x...` hex (how MySQL prints a
    /// `$A$` hash whose salt has unprintable bytes).
    fn hash_literal(&mut self) -> Result<String, ShimError> {
        if let Some(Lex::Word(w)) = self.t.get(self.i) {
            let hex = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X"));
            let bytes = hex.and_then(|h| {
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                    .collect::<Option<Vec<u8>>>()
            });
            if let Some(text) = bytes.and_then(|b| String::from_utf8(b).ok()) {
                self.i += 1;
                return Ok(text);
            }
        }
        self.string()
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

fn quoted(user: &str, host: &str) -> String {
    format!("'{user}'@'{host}'")
}

/// What `IDENTIFIED ...` / `SET PASSWORD = ...` gave: the native hash,
/// and the `caching_sha2_password` ones when the password itself was
/// given (or only MySQL's stored form, from `AS '$A$...'`).
struct Secret {
    auth: String,
    sha2: String,
    sha2_crypt: String,
    /// `IDENTIFIED WITH plugin`; `None` keeps the account's plugin (a new
    /// account gets the native one).
    plugin: Option<AuthPlugin>,
}

impl Secret {
    fn of_password(pw: &str) -> Secret {
        Secret {
            auth: native_hash(pw.as_bytes()),
            sha2: sha2_hash(pw.as_bytes()),
            sha2_crypt: crate::sha2_crypt::generate(pw.as_bytes()),
            plugin: None,
        }
    }

    /// MySQL's stored `caching_sha2_password` form given literally (`AS
    /// '$A$005$...'`, or empty): neither other hash can be derived from it.
    fn of_sha2_crypt(h: &str) -> Result<Secret, ShimError> {
        if h.is_empty() || crate::sha2_crypt::is_stored_form(h) {
            Ok(Secret {
                auth: String::new(),
                sha2: String::new(),
                sha2_crypt: h.to_string(),
                plugin: None,
            })
        } else {
            Err(wire(
                error::ER_PASSWORD_FORMAT,
                "The password hash doesn't have the expected format.".into(),
            ))
        }
    }

    /// A native hash given literally (MySQL's 41-character form, or
    /// empty); no SHA-256 hash can be derived from it.
    fn of_hash(h: &str) -> Result<Secret, ShimError> {
        if h.is_empty() || hash_bytes(h).is_some() {
            Ok(Secret {
                auth: h.to_ascii_uppercase(),
                sha2: String::new(),
                sha2_crypt: String::new(),
                plugin: None,
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
        a.sha2_crypt = self.sha2_crypt;
        if let Some(plugin) = self.plugin {
            a.plugin = plugin;
        }
    }

    fn with_plugin(mut self, plugin: AuthPlugin) -> Secret {
        self.plugin = Some(plugin);
        self
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
        let plugin = if native {
            AuthPlugin::NativePassword
        } else {
            AuthPlugin::CachingSha2Password
        };
        let secret = if c.eat("BY") {
            Secret::of_password(&c.string()?)
        } else if c.eat("AS") {
            let hash = c.hash_literal()?;
            if native {
                Secret::of_hash(&hash)?
            } else {
                Secret::of_sha2_crypt(&hash)?
            }
        } else {
            Secret::of_hash("")?
        };
        return Ok(secret.with_plugin(plugin));
    }
    c.expect("BY")?;
    if c.eat("PASSWORD") {
        return Secret::of_hash(&c.string()?);
    }
    Ok(Secret::of_password(&c.string()?))
}

/// The account options MySQL 8's `SHOW CREATE USER` prints after REQUIRE,
/// at their defaults (`PASSWORD EXPIRE DEFAULT ACCOUNT UNLOCK PASSWORD
/// HISTORY DEFAULT PASSWORD REUSE INTERVAL DEFAULT PASSWORD REQUIRE
/// CURRENT DEFAULT`), so that its output restores; any other value (an
/// expiry, ACCOUNT LOCK) is refused, not ignored.
fn default_account_options(c: &mut Cur) -> Result<(), ShimError> {
    const DEFAULTS: [&[&str]; 5] = [
        &["PASSWORD", "EXPIRE", "DEFAULT"],
        &["ACCOUNT", "UNLOCK"],
        &["PASSWORD", "HISTORY", "DEFAULT"],
        &["PASSWORD", "REUSE", "INTERVAL", "DEFAULT"],
        &["PASSWORD", "REQUIRE", "CURRENT", "DEFAULT"],
    ];
    while c.is("PASSWORD") || c.is("ACCOUNT") {
        if !DEFAULTS.iter().any(|option| c.eat_all(option)) {
            return Err(ShimError::Unsupported(
                "password and account options other than their defaults".into(),
            ));
        }
    }
    Ok(())
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

/// Whether `sql` is an account statement that changes accounts (all but
/// SHOW GRANTS and SHOW CREATE USER).
pub fn changes_accounts(sql: &str) -> bool {
    is_account_statement(sql) && crate::tokens::first_words(sql).0 != "SHOW"
}

/// Whether `sql` is an account statement [`statement`] runs.
pub fn is_account_statement(sql: &str) -> bool {
    let words = crate::tokens::leading_words(sql, 3);
    let word = |i: usize| words.get(i).map_or("", String::as_str);
    matches!(
        (word(0), word(1)),
        ("CREATE" | "DROP" | "ALTER" | "RENAME", "USER")
            | ("GRANT" | "REVOKE", _)
            | ("SET", "PASSWORD")
            | ("SHOW", "GRANTS")
    ) || (word(0), word(1), word(2)) == ("SHOW", "CREATE", "USER")
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
        ("SHOW", "GRANTS") => {
            let (user, host) = if c.eat("FOR") {
                c.account(s)?
            } else {
                current_user(s)
            };
            crate::show_accounts::show_grants(e, s, user, host)
        }
        ("SHOW", "CREATE") => {
            c.expect("USER")?;
            let (user, host) = c.account(s)?;
            crate::show_accounts::show_create_user(e, s, user, host)
        }
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
    default_account_options(c)?;
    c.end()?;
    let mut notes = Vec::new();
    e.update_accounts(|list| {
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
                sha2_crypt: secret.sha2_crypt,
                plugin: secret.plugin.unwrap_or_default(),
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
    c.end()?;
    let mut notes = Vec::new();
    e.update_accounts(|list| {
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
    c.end()?;
    e.update_accounts(|list| {
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
    default_account_options(c)?;
    c.end()?;
    let own = current_user(s) == (user.clone(), host.clone());
    if !own || require.is_some() {
        need_create_user(e, s)?;
    }
    if e.accounts.is_superuser_name(&user) {
        return Err(superuser_fixed());
    }
    let found = e.update_accounts(|list| {
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
    c.end()?;
    if e.accounts.is_superuser_name(&user) {
        return Err(superuser_fixed());
    }
    let found = e.update_accounts(|list| {
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
    c.end()?;
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
    e.update_accounts(|list| {
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
