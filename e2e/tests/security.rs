//! Users and privileges over a real driver: a read-only user (SELECT on
//! `*.*`) and a per-database user (ALL on one database, SELECT on one table
//! of another) run every statement class, over the text protocol and as
//! prepared statements. Each outcome (the error number, or the rows) is
//! compared with `tests/security/privileges.expected`, which was produced
//! by running the same cases against MariaDB 10.11 (set
//! `LADLE_TEST_MARIADB_URL` and `LADLE_REGENERATE=1` to produce it again;
//! with the URL set and no regeneration, MariaDB is checked against the
//! file too). Then the accounts survive a kill -9 and restart.

use ladle_e2e::{connect, exec_rows, ladle_binary, mariadb_url, query_rows, LadleServer};

/// Databases and users of the test (prefixed: MariaDB's are shared).
const SETUP: &[&str] = &[
    "DROP USER IF EXISTS 'sec_ro'@'%', 'sec_pa'@'%'",
    "DROP DATABASE IF EXISTS sec_a",
    "DROP DATABASE IF EXISTS sec_b",
    "CREATE DATABASE sec_a",
    "CREATE DATABASE sec_b",
    "CREATE TABLE sec_a.t (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE sec_b.t (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE sec_b.open (id INT PRIMARY KEY)",
    "INSERT INTO sec_a.t VALUES (1, 10), (2, 20)",
    "INSERT INTO sec_b.t VALUES (1, 100)",
    "INSERT INTO sec_b.open VALUES (7)",
    "CREATE USER 'sec_ro'@'%' IDENTIFIED BY 'ro-pw'",
    "GRANT SELECT ON *.* TO 'sec_ro'@'%'",
    "CREATE USER 'sec_pa'@'%' IDENTIFIED BY 'pa-pw'",
    "GRANT ALL PRIVILEGES ON sec_a.* TO 'sec_pa'@'%'",
    "GRANT SELECT ON sec_b.open TO 'sec_pa'@'%'",
];

/// Every statement class, run by each user in order (later ones see what
/// earlier ones did).
const CASES: &[&str] = &[
    "SELECT id, v FROM sec_a.t ORDER BY id",
    "SELECT id, v FROM sec_b.t ORDER BY id",
    "SELECT id FROM sec_b.open",
    "SELECT a.id FROM sec_a.t a JOIN sec_b.t b ON a.id = b.id",
    "SELECT id FROM sec_a.t WHERE id IN (SELECT id FROM sec_b.t)",
    "INSERT INTO sec_a.t VALUES (3, 30)",
    "INSERT INTO sec_b.t VALUES (3, 300)",
    "INSERT INTO sec_a.t SELECT id + 10, v FROM sec_b.t",
    "INSERT INTO sec_a.t SELECT id + 20, 0 FROM sec_b.open",
    "REPLACE INTO sec_a.t VALUES (3, 31)",
    "UPDATE sec_a.t SET v = v + 1 WHERE id = 1",
    "UPDATE sec_b.t SET v = v + 1 WHERE id = 1",
    "DELETE FROM sec_a.t WHERE id = 2",
    "DELETE FROM sec_b.t WHERE id = 1",
    "CREATE TABLE sec_a.n (id INT PRIMARY KEY)",
    "CREATE TABLE sec_b.n (id INT PRIMARY KEY)",
    "ALTER TABLE sec_a.n ADD COLUMN w INT",
    "ALTER TABLE sec_b.t ADD COLUMN w INT",
    "CREATE INDEX nw ON sec_a.n (w)",
    "CREATE INDEX tv ON sec_b.t (v)",
    "TRUNCATE TABLE sec_a.n",
    "TRUNCATE TABLE sec_b.t",
    "DROP TABLE sec_a.n",
    "DROP TABLE sec_b.t",
    "DESCRIBE sec_b.open",
    "SHOW COLUMNS FROM sec_b.t",
    "SHOW INDEX FROM sec_b.t",
    "EXPLAIN SELECT * FROM sec_b.t",
    "CREATE VIEW sec_a.v AS SELECT id FROM sec_a.t",
    "CREATE VIEW sec_b.v AS SELECT id FROM sec_a.t",
    "DROP VIEW sec_a.v",
    "SELECT id FROM sec_b.open UNION SELECT id FROM sec_b.t ORDER BY 1",
    "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema LIKE 'sec%' ORDER BY 1, 2",
    "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'sec%' ORDER BY 1",
    "USE sec_a",
    "USE sec_b",
    "SHOW DATABASES",
    "SHOW TABLES FROM sec_a",
    "SHOW TABLES FROM sec_b",
    "CREATE DATABASE sec_c",
    "DROP DATABASE sec_b",
    "CREATE USER 'sec_other'@'%'",
    "SET GLOBAL max_connect_errors = 100",
    // Renames need ALTER and DROP on the old name, CREATE and INSERT on
    // the new one.
    "CREATE TABLE sec_a.r (id INT PRIMARY KEY)",
    "RENAME TABLE sec_b.open TO sec_a.stolen",
    "RENAME TABLE sec_a.r TO sec_b.r",
    "ALTER TABLE sec_a.r RENAME TO sec_b.r",
    "RENAME TABLE sec_a.r TO sec_a.r2",
    "ALTER TABLE sec_a.r2 RENAME AS sec_a.r3",
    "DROP TABLE sec_a.r3",
    "SELECT id, v FROM sec_a.t ORDER BY id",
];

/// Users with their passwords.
const USERS: &[(&str, &str)] = &[("sec_ro", "ro-pw"), ("sec_pa", "pa-pw")];

/// The outcome of one statement: `ok`, the rows, or the error number.
fn outcome(conn: &mut mysql::Conn, sql: &str, prepared: bool) -> String {
    // USE cannot be prepared in MariaDB; SHOW, DESCRIBE and EXPLAIN run
    // as text, and only whether they are allowed is compared (their rows
    // are other tests' business).
    let described = ["SHOW COLUMNS", "SHOW INDEX", "DESCRIBE", "EXPLAIN"]
        .iter()
        .any(|p| sql.starts_with(p));
    let prepared = prepared && !sql.starts_with("USE") && !sql.starts_with("SHOW") && !described;
    let res = if prepared {
        exec_rows(conn, sql)
    } else {
        query_rows(conn, sql)
    };
    match res {
        Ok(_) if described => "ok".into(),
        Ok((Some(rows), _)) => {
            let mut rows: Vec<String> = rows.into_iter().map(|r| r.join(",")).collect();
            // Only the test's databases (MariaDB has its system ones).
            if sql == "SHOW DATABASES" {
                rows.retain(|d| d.starts_with("sec_") || d == "information_schema");
            }
            format!("rows {}", rows.join(" "))
        }
        Ok((None, _)) => "ok".into(),
        Err(mysql::Error::MySqlError(e)) => format!("error {}", e.code),
        Err(e) => panic!("{sql}: {e}"),
    }
}

/// Runs the whole matrix on the server at `root_url` (root, no password)
/// and returns one line per case.
fn run_matrix(root_url: &str) -> Vec<String> {
    let mut root = connect(root_url, None).expect("root connects");
    let mut lines = Vec::new();
    for prepared in [false, true] {
        for sql in SETUP {
            query_rows(&mut root, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let proto = if prepared { "prepared" } else { "text" };
        for (user, pw) in USERS {
            let url = root_url.replacen("root@", &format!("{user}:{pw}@"), 1);
            let mut c = connect(&url, None).expect("user connects");
            for sql in CASES {
                lines.push(format!(
                    "{user}\t{proto}\t{sql}\t{}",
                    outcome(&mut c, sql, prepared)
                ));
            }
        }
    }
    for sql in [
        "DROP USER IF EXISTS 'sec_ro'@'%', 'sec_pa'@'%', 'sec_other'@'%'",
        "DROP DATABASE IF EXISTS sec_a",
        "DROP DATABASE IF EXISTS sec_b",
        "DROP DATABASE IF EXISTS sec_c",
    ] {
        query_rows(&mut root, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    lines
}

fn expected_path() -> std::path::PathBuf {
    ladle_e2e::workspace_root().join("tests/security/privileges.expected")
}

#[test]
fn read_only_and_per_database_users_as_mariadb() {
    if let Some(maria) = mariadb_url() {
        let lines = run_matrix(&maria);
        if std::env::var("LADLE_REGENERATE").is_ok_and(|v| v == "1") {
            std::fs::write(expected_path(), lines.join("\n") + "\n").expect("write expected");
        } else {
            let expected = std::fs::read_to_string(expected_path()).expect("expected file");
            assert_eq!(
                lines.join("\n") + "\n",
                expected,
                "MariaDB disagrees with the file"
            );
        }
    }
    let expected = std::fs::read_to_string(expected_path()).expect("expected file");
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start(&bin).expect("start ladle");
    let lines = run_matrix(&server.url());
    let mismatches: Vec<String> = lines
        .iter()
        .zip(expected.lines())
        .filter(|(got, want)| got.as_str() != *want)
        .map(|(got, want)| format!("  ladle:   {got}\n  mariadb: {want}"))
        .collect();
    assert!(
        mismatches.is_empty() && lines.len() == expected.lines().count(),
        "{} of {} cases differ from MariaDB:\n{}",
        mismatches.len(),
        lines.len(),
        mismatches.join("\n")
    );
}

/// Accounts and grants are in the catalog: after kill -9 and a restart the
/// user logs in with the same password and has the same grants; a wrong
/// password is 1045; a dropped user stays dropped.
#[test]
fn accounts_survive_kill_and_restart() {
    let bin = ladle_binary().expect("ladle binary");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = LadleServer::start_in(&bin, dir.path(), "sync", &[]).expect("start");
    let url = server.url();
    let mut root = connect(&url, None).expect("root");
    for sql in [
        "CREATE DATABASE d",
        "CREATE TABLE d.t (id INT PRIMARY KEY)",
        "CREATE USER 'app'@'%' IDENTIFIED BY 'first'",
        "GRANT SELECT, INSERT ON d.* TO 'app'@'%'",
        "CREATE USER 'gone'@'%' IDENTIFIED BY 'x'",
        "DROP USER 'gone'@'%'",
        "SET PASSWORD FOR 'app'@'%' = PASSWORD('second')",
    ] {
        query_rows(&mut root, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let grants = |url: &str| {
        let mut c = connect(url, None).expect("root");
        query_rows(&mut c, "SHOW GRANTS FOR 'app'@'%'")
            .expect("grants")
            .0
            .expect("rows")
    };
    let before = grants(&url);
    drop(root);
    drop(server); // SIGKILL
    let server = LadleServer::start_in(&bin, dir.path(), "sync", &[]).expect("restart");
    let url = server.url();
    assert_eq!(grants(&url), before);
    let as_user = |user: &str, pw: &str| {
        let u = url.replacen("root@", &format!("{user}:{pw}@"), 1);
        connect(&u, Some("d")).map_err(|e| match e {
            mysql::Error::MySqlError(e) => e.code,
            other => panic!("{other}"),
        })
    };
    let mut app = as_user("app", "second").expect("new password works");
    query_rows(&mut app, "INSERT INTO t VALUES (1)").expect("insert granted");
    let denied = query_rows(&mut app, "DELETE FROM t").expect_err("delete not granted");
    assert!(
        matches!(denied, mysql::Error::MySqlError(ref e) if e.code == 1142),
        "{denied}"
    );
    assert_eq!(as_user("app", "first").err(), Some(1045));
    assert_eq!(as_user("gone", "x").err(), Some(1045));
}

/// How long a test waits for the server to act before failing (the slow
/// statement below runs for minutes unless it is stopped).
const SANITY: std::time::Duration = std::time::Duration::from_secs(60);

/// A SELECT that runs for minutes (16,384 rows, each filtered through a
/// 30 MB string) but holds little memory.
const SLOW: &str = "SELECT COUNT(*) FROM k.n WHERE LENGTH(REPEAT(v, 30000000)) = 1";

fn server_errno(e: &mysql::Error) -> Option<u16> {
    match e {
        mysql::Error::MySqlError(e) => Some(e.code),
        _ => None,
    }
}

/// The `Command` of connection `id` in information_schema.PROCESSLIST.
fn command_of(c: &mut mysql::Conn, id: u64) -> Option<String> {
    let rows = query_rows(
        c,
        &format!("SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = {id}"),
    )
    .expect("processlist")
    .0
    .unwrap_or_default();
    rows.into_iter().next().map(|r| r[0].clone())
}

/// Polls until `done` holds, failing after [`SANITY`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < SANITY, "{what}: not within {SANITY:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn connection_id(c: &mut mysql::Conn) -> u64 {
    let rows = query_rows(c, "SELECT CONNECTION_ID()")
        .expect("id")
        .0
        .expect("rows");
    rows[0][0].parse().expect("number")
}

/// KILL QUERY stops a running SELECT (1317) and the connection goes on,
/// and cuts a SLEEP short (it returns 1);
/// KILL closes a connection; a client that goes away stops its statement;
/// `max_execution_time` stops a SELECT with 3024; SHOW PROCESSLIST lists
/// real ids, a user only its own, and a user may not kill another's
/// connection (1095); an unknown id is 1094.
#[test]
fn kill_processlist_and_max_execution_time() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start(&bin).expect("start");
    let url = server.url();
    let mut root = connect(&url, None).expect("root");
    for sql in [
        "CREATE DATABASE k",
        "CREATE TABLE k.n (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO k.n VALUES (1, 'a'), (2, 'b')",
        "CREATE USER 'u'@'%' IDENTIFIED BY 'pw'",
        "GRANT SELECT ON k.* TO 'u'@'%'",
    ] {
        query_rows(&mut root, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    for _ in 0..13 {
        query_rows(
            &mut root,
            "INSERT INTO k.n SELECT id + (SELECT MAX(id) FROM k.n), v FROM k.n",
        )
        .expect("double");
    }
    let root_id = connection_id(&mut root);

    // max_execution_time (ms) stops the SELECT; the session goes on.
    query_rows(&mut root, "SET max_execution_time = 200").expect("set");
    let e = query_rows(&mut root, SLOW).expect_err("stopped");
    assert_eq!(server_errno(&e), Some(3024), "{e}");
    query_rows(&mut root, "SET max_execution_time = 0").expect("set");

    // KILL QUERY from another connection.
    let mut victim = connect(&url, None).expect("victim");
    let victim_id = connection_id(&mut victim);
    let running = std::thread::spawn(move || {
        let r = query_rows(&mut victim, SLOW).map(|_| ());
        let after = query_rows(&mut victim, "SELECT 1").map(|_| ());
        (r, after)
    });
    wait_until("the SELECT shows in PROCESSLIST", || {
        command_of(&mut root, victim_id).as_deref() == Some("Query")
    });
    query_rows(&mut root, &format!("KILL QUERY {victim_id}")).expect("kill query");
    let (r, after) = running.join().expect("thread");
    assert_eq!(server_errno(&r.expect_err("interrupted")), Some(1317));
    after.expect("the connection survives KILL QUERY");

    // KILL QUERY cuts a SLEEP short: it returns 1 and no error, as in
    // MySQL 8 (MariaDB answers 1317).
    let mut sleeper = connect(&url, None).expect("sleeper");
    let sleeper_id = connection_id(&mut sleeper);
    let sleeping = std::thread::spawn(move || query_rows(&mut sleeper, "SELECT SLEEP(600)"));
    wait_until("the SLEEP shows in PROCESSLIST", || {
        command_of(&mut root, sleeper_id).as_deref() == Some("Query")
    });
    query_rows(&mut root, &format!("KILL QUERY {sleeper_id}")).expect("kill query");
    let slept = sleeping.join().expect("thread").expect("SLEEP answers");
    assert_eq!(slept.0.expect("rows"), vec![vec!["1".to_string()]]);

    // A user sees only its own connections and may not kill root's.
    let u_url = url.replacen("root@", "u:pw@", 1);
    let mut u = connect(&u_url, None).expect("u");
    let u_id = connection_id(&mut u);
    let listed = query_rows(&mut u, "SHOW PROCESSLIST")
        .expect("list")
        .0
        .expect("rows");
    let ids: Vec<String> = listed.iter().map(|r| r[0].clone()).collect();
    assert_eq!(ids, vec![u_id.to_string()]);
    let all = query_rows(&mut root, "SHOW PROCESSLIST")
        .expect("list")
        .0
        .expect("rows");
    assert!(all
        .iter()
        .any(|r| r[0] == root_id.to_string() && r[1] == "root"));
    assert!(all.iter().any(|r| r[0] == u_id.to_string() && r[1] == "u"));
    let e = query_rows(&mut u, &format!("KILL {root_id}")).expect_err("not owner");
    assert_eq!(server_errno(&e), Some(1095), "{e}");
    let e = query_rows(&mut u, "KILL 999999").expect_err("unknown");
    assert_eq!(server_errno(&e), Some(1094), "{e}");

    // KILL CONNECTION closes an idle connection.
    query_rows(&mut root, &format!("KILL {u_id}")).expect("kill");
    wait_until("the killed connection leaves PROCESSLIST", || {
        command_of(&mut root, u_id).is_none()
    });
    assert!(query_rows(&mut u, "SELECT 1").is_err());

    // A client that goes away stops its statement: the connection leaves
    // the list long before the SELECT could finish.
    let opts = mysql::OptsBuilder::from_opts(ladle_e2e::opts(&url, None).expect("opts"))
        .read_timeout(Some(std::time::Duration::from_secs(1)));
    for prepared in [false, true] {
        let mut impatient = mysql::Conn::new(opts.clone()).expect("impatient");
        let gone_id = connection_id(&mut impatient);
        let r = if prepared {
            exec_rows(&mut impatient, SLOW)
        } else {
            query_rows(&mut impatient, SLOW)
        };
        assert!(r.is_err(), "read timeout");
        drop(impatient);
        wait_until("the abandoned SELECT stops", || {
            command_of(&mut root, gone_id).is_none()
        });
    }
}

/// Privileges are checked at each execution of a prepared statement: a
/// REVOKE applies to statements prepared before it (on MariaDB too).
#[test]
fn revoke_applies_to_statements_prepared_before() {
    use mysql::prelude::Queryable;
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start(&bin).expect("start");
    let mut urls = vec![server.url()];
    urls.extend(mariadb_url());
    for url in urls {
        let mut root = connect(&url, None).expect("root");
        for sql in [
            "DROP USER IF EXISTS 'sec_prep'@'%'",
            "DROP DATABASE IF EXISTS sec_p",
            "CREATE DATABASE sec_p",
            "CREATE TABLE sec_p.t (id INT PRIMARY KEY)",
            "INSERT INTO sec_p.t VALUES (1)",
            "CREATE USER 'sec_prep'@'%' IDENTIFIED BY 'pw'",
            "GRANT SELECT, INSERT ON sec_p.* TO 'sec_prep'@'%'",
        ] {
            query_rows(&mut root, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let user_url = url.replacen("root@", "sec_prep:pw@", 1);
        let mut c = connect(&user_url, None).expect("user");
        let select = c
            .prep("SELECT id FROM sec_p.t WHERE id = ?")
            .expect("prepare");
        let insert = c.prep("INSERT INTO sec_p.t VALUES (?)").expect("prepare");
        let n: Vec<i64> = c.exec(&select, (1,)).expect("granted");
        assert_eq!(n, vec![1]);
        c.exec_drop(&insert, (2,)).expect("granted");
        query_rows(
            &mut root,
            "REVOKE SELECT, INSERT ON sec_p.* FROM 'sec_prep'@'%'",
        )
        .expect("revoke");
        let e = c.exec::<i64, _, _>(&select, (1,)).expect_err("revoked");
        assert_eq!(server_errno(&e), Some(1142), "{url}: {e}");
        // The same reads as text, whose views root's reads keep cached
        // (Ladle answers such texts in place for root).
        for sql in [
            "SELECT id FROM sec_p.t WHERE id = 1",
            "SELECT id FROM sec_p.t WHERE id = 2",
        ] {
            let rows: Vec<i64> = root.query(sql).expect("root reads");
            assert_eq!(rows.len(), 1, "{url}: {sql}");
            let e = c.query::<i64, _>(sql).expect_err("revoked");
            assert_eq!(server_errno(&e), Some(1142), "{url}: {sql}: {e}");
        }
        let e = c.exec_drop(&insert, (3,)).expect_err("revoked");
        assert_eq!(server_errno(&e), Some(1142), "{url}: {e}");
        for sql in ["DROP USER 'sec_prep'@'%'", "DROP DATABASE sec_p"] {
            query_rows(&mut root, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
}

/// An account statement with trailing junk is a syntax error (1064) that
/// changes nothing, as in MariaDB (which parses before it executes): no
/// user created, renamed or dropped, no password or grant changed.
#[test]
fn account_statements_with_trailing_junk_change_nothing() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start(&bin).expect("start");
    let url = server.url();
    let mut root = connect(&url, None).expect("root");
    for sql in [
        "CREATE DATABASE d",
        "CREATE USER 'kept'@'%' IDENTIFIED BY 'old'",
    ] {
        query_rows(&mut root, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    for sql in [
        "CREATE USER 'made'@'%' IDENTIFIED BY 'x' junk",
        "ALTER USER 'kept'@'%' IDENTIFIED BY 'new' junk",
        "SET PASSWORD FOR 'kept'@'%' = PASSWORD('new') junk",
        "GRANT SELECT ON *.* TO 'kept'@'%' junk",
        "GRANT SELECT ON d.* TO 'kept'@'%' IDENTIFIED BY 'new' junk",
        "RENAME USER 'kept'@'%' TO 'renamed'@'%' junk",
        "DROP USER 'kept'@'%' junk",
    ] {
        let e = query_rows(&mut root, sql).expect_err(sql);
        assert_eq!(server_errno(&e), Some(1064), "{sql}: {e}");
    }
    let grants = query_rows(&mut root, "SHOW GRANTS FOR 'kept'@'%'")
        .expect("kept still exists")
        .0
        .expect("rows");
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert!(
        grants[0][0].starts_with("GRANT USAGE ON *.* TO"),
        "{grants:?}"
    );
    for missing in ["'made'@'%'", "'renamed'@'%'"] {
        let e = query_rows(&mut root, &format!("SHOW GRANTS FOR {missing}")).expect_err(missing);
        assert_eq!(server_errno(&e), Some(1141), "{missing}: {e}");
    }
    let as_kept = |pw: &str| {
        let u = url.replacen("root@", &format!("kept:{pw}@"), 1);
        connect(&u, None).map(drop).map_err(|e| server_errno(&e))
    };
    assert_eq!(as_kept("old"), Ok(()), "the old password still works");
    assert_eq!(as_kept("new"), Err(Some(1045)));
}
