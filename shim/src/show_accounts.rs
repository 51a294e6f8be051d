//! `SHOW GRANTS` and `SHOW CREATE USER`: an account rendered as the
//! statements that make it again (MariaDB's forms, and MySQL 8's for a
//! `caching_sha2_password` account, so that a dump of either restores).

use ladle_common::Value;

use crate::accounts::{
    native_hash, no_such_user_row, wire, Account, AuthPlugin, Privs, GLOBAL_PRIVS, GRANT_OPTION,
    NAMES, OBJECT_PRIVS, SELECT,
};
use crate::error::{self, ShimError};
use crate::output::{text_column, Output};
use crate::session::{current_user, Session};

/// Looking at another account needs SELECT on `mysql` (1044), as in
/// MariaDB; one's own needs nothing.
fn need_to_see(
    e: &crate::exec::Engine,
    s: &Session,
    user: &str,
    host: &str,
) -> Result<(), ShimError> {
    let (own_user, own_host) = current_user(s);
    if (own_user.as_str(), own_host.as_str()) == (user, host) {
        return Ok(());
    }
    match &s.grantee {
        Some(g) if e.accounts.privileges(g, "mysql", None) & SELECT == 0 => Err(wire(
            error::ER_DBACCESS_DENIED,
            format!(
                "Access denied for user '{}'@'{}' to database 'mysql'",
                g.user, g.host
            ),
        )),
        _ => Ok(()),
    }
}

fn one_column(name: String, lines: Vec<String>) -> Output {
    Output::Rows {
        columns: vec![text_column(&name)],
        rows: lines
            .into_iter()
            .map(|l| vec![Value::text(l)])
            .collect::<Vec<_>>()
            .into(),
    }
}

/// `SHOW CREATE USER user@host`: 1133 for an unknown account, as MariaDB.
pub(crate) fn show_create_user(
    e: &crate::exec::Engine,
    s: &Session,
    user: String,
    host: String,
) -> Result<Output, ShimError> {
    need_to_see(e, s, &user, &host)?;
    let line = if e.accounts.is_superuser_name(&user) {
        let superuser = Account {
            user: user.clone(),
            host: "%".into(),
            auth: native_hash(e.accounts.root_password.as_bytes()),
            ..Account::default()
        };
        create_user_line(&superuser)
    } else {
        let list = e.accounts.list.read();
        let a = list.iter().find(|a| a.user == user && a.host == host);
        create_user_line(a.ok_or_else(no_such_user_row)?)
    };
    Ok(one_column(
        format!("CREATE USER for {user}@{host}"),
        vec![line],
    ))
}

/// The `CREATE USER` statement that makes `a` again (without its
/// grants). A native account prints as MariaDB does (`IDENTIFIED BY
/// PASSWORD '*HEX'`); a `caching_sha2_password` one as MySQL 8 does
/// (`IDENTIFIED WITH 'caching_sha2_password' AS '$A$005$...'`, in hex
/// when the salt has bytes a string literal would not carry). One that
/// has only a native hash (given by `BY PASSWORD` or stored before the
/// `$A$` form was kept) prints as a native account with that hash: the
/// same password logs in after a restore.
pub(crate) fn create_user_line(a: &Account) -> String {
    let mut line = format!("CREATE USER `{}`@`{}`", a.user, a.host);
    let caching = a.plugin == AuthPlugin::CachingSha2Password;
    if caching && (!a.sha2_crypt.is_empty() || a.auth.is_empty()) {
        line.push_str(" IDENTIFIED WITH 'caching_sha2_password'");
        if !a.sha2_crypt.is_empty() {
            line.push_str(&format!(" AS {}", literal(&a.sha2_crypt)));
        }
    } else if caching {
        line.push_str(&format!(
            " IDENTIFIED WITH 'mysql_native_password' AS '{}'",
            a.auth
        ));
    } else if !a.auth.is_empty() {
        line.push_str(&format!(" IDENTIFIED BY PASSWORD '{}'", a.auth));
    }
    if a.require_ssl {
        line.push_str(" REQUIRE SSL");
    }
    line
}

/// `text` as a quoted literal, or `0x` hex when it has control bytes
/// (MySQL's salts may) or characters the quoting would have to escape.
fn literal(text: &str) -> String {
    if text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'\\' && b != b'\'')
    {
        format!("'{text}'")
    } else {
        let hex: String = text.bytes().map(|b| format!("{b:02X}")).collect();
        format!("0x{hex}")
    }
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
    // A caching_sha2_password account is MySQL 8's, whose SHOW GRANTS
    // says nothing of the password or REQUIRE (GRANT takes neither there;
    // SHOW CREATE USER carries both). A native one prints as MariaDB's.
    if a.plugin != AuthPlugin::CachingSha2Password {
        if !a.auth.is_empty() {
            first.push_str(&format!(" IDENTIFIED BY PASSWORD '{}'", a.auth));
        }
        if a.require_ssl {
            first.push_str(" REQUIRE SSL");
        }
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
pub(crate) fn show_grants(
    e: &crate::exec::Engine,
    s: &Session,
    user: String,
    host: String,
) -> Result<Output, ShimError> {
    need_to_see(e, s, &user, &host)?;
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
    Ok(one_column(format!("Grants for {user}@{host}"), lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::{ALTER, CREATE, DELETE, DROP, INDEX, INSERT, UPDATE};

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

    #[test]
    fn grants_of_a_caching_sha2_account_render_as_mysql_8() {
        // A password given `BY` keeps a native hash beside the SHA-256
        // one; MySQL 8.0's SHOW GRANTS prints neither, nor REQUIRE.
        let mut a = Account {
            user: "uc".into(),
            host: "%".into(),
            auth: native_hash(b"pw"),
            sha2_crypt: "$A$005$salt".into(),
            plugin: AuthPlugin::CachingSha2Password,
            require_ssl: true,
            ..Account::default()
        };
        a.databases.insert("a".into(), SELECT);
        assert_eq!(
            grant_lines(&a),
            vec![
                "GRANT USAGE ON *.* TO `uc`@`%`",
                "GRANT SELECT ON `a`.* TO `uc`@`%`",
            ]
        );
        assert_eq!(
            create_user_line(&a),
            "CREATE USER `uc`@`%` IDENTIFIED WITH 'caching_sha2_password' AS '$A$005$salt' REQUIRE SSL"
        );
    }

    #[test]
    fn create_user_lines() {
        // SHOW CREATE USER in MariaDB 10.11 for the same native accounts.
        let mut a = Account {
            user: "u1".into(),
            host: "%".into(),
            auth: native_hash(b"pw"),
            ..Account::default()
        };
        assert_eq!(
            create_user_line(&a),
            "CREATE USER `u1`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'"
        );
        a.auth.clear();
        a.require_ssl = true;
        assert_eq!(create_user_line(&a), "CREATE USER `u1`@`%` REQUIRE SSL");
        // caching_sha2_password: MySQL 8's form; a salt with bytes a
        // string would not carry prints in hex, as MySQL's
        // print_identified_with_as_hex does.
        a.require_ssl = false;
        a.plugin = AuthPlugin::CachingSha2Password;
        assert_eq!(
            create_user_line(&a),
            "CREATE USER `u1`@`%` IDENTIFIED WITH 'caching_sha2_password'"
        );
        a.sha2_crypt = "$A$005$a'\x01".into();
        assert_eq!(
            create_user_line(&a),
            "CREATE USER `u1`@`%` IDENTIFIED WITH 'caching_sha2_password' AS 0x24412430303524612701"
        );
        // Only a native hash known: the native plugin with that hash.
        a.sha2_crypt.clear();
        a.auth = native_hash(b"pw");
        assert_eq!(
            create_user_line(&a),
            "CREATE USER `u1`@`%` IDENTIFIED WITH 'mysql_native_password' AS '*D821809F681A40A6E379B50D0463EFAE20BDD122'"
        );
    }
}
