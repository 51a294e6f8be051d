//! Concurrent clients: several connections write and read at once, each in
//! its own partition (`owner = k`) of shared tables, so they share views but
//! not rows. After every write, a connection's next read of its partition
//! must show exactly its own writes (read-your-writes), whatever the others
//! are doing. Runs against Ladle and, when `LADLE_TEST_MARIADB_URL` is set,
//! MariaDB (which checks the test itself).

use std::collections::BTreeMap;

use ladle_e2e::{connect, fresh_database, ladle_binary, mariadb_url, query_rows, LadleServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DB: &str = "ladle_concurrent";
const RACE_DB: &str = "ladle_alter_race";
const WAIT_DB: &str = "ladle_alter_wait";
const CLIENTS: u64 = 4;
const OPS_PER_CLIENT: usize = 150;

/// One client's workload; returns its mismatches.
fn client(url: &str, owner: u64) -> Vec<String> {
    let mut conn = match connect(url, Some(DB)) {
        Ok(c) => c,
        Err(e) => return vec![format!("client {owner}: connecting: {e}")],
    };
    let mut rng = StdRng::seed_from_u64(1000 + owner);
    let mut rows: BTreeMap<u64, i64> = BTreeMap::new();
    let mut failures = Vec::new();
    let base = owner * 1000;
    for i in 0..OPS_PER_CLIENT {
        let id = base + rng.gen_range(0..20);
        let sql = match rng.gen_range(0..4) {
            0 | 1 if !rows.contains_key(&id) => {
                let v = rng.gen_range(-50..50);
                rows.insert(id, v);
                format!("INSERT INTO c (id, owner, val) VALUES ({id}, {owner}, {v})")
            }
            0..=2 => {
                let k = rng.gen_range(1..5);
                if let Some(v) = rows.get_mut(&id) {
                    *v += k;
                }
                format!("UPDATE c SET val = val + {k} WHERE id = {id}")
            }
            _ => {
                rows.remove(&id);
                format!("DELETE FROM c WHERE id = {id}")
            }
        };
        if let Err(e) = query_rows(&mut conn, &sql) {
            failures.push(format!("client {owner} op {i}: {sql}: {e}"));
            break;
        }
        let expected_rows: Vec<Vec<String>> = rows
            .iter()
            .map(|(id, v)| vec![id.to_string(), v.to_string()])
            .collect();
        let sum = (!rows.is_empty()).then(|| rows.values().sum::<i64>());
        let expected_agg = vec![vec![
            rows.len().to_string(),
            sum.map_or("NULL".to_string(), |s| s.to_string()),
        ]];
        for (q, expected, sort) in [
            (
                format!("SELECT id, val FROM c WHERE owner = {owner}"),
                &expected_rows,
                true,
            ),
            (
                format!("SELECT COUNT(*), SUM(val) FROM c WHERE owner = {owner}"),
                &expected_agg,
                false,
            ),
        ] {
            match query_rows(&mut conn, &q) {
                Ok((Some(mut got), _)) => {
                    if sort {
                        got.sort_by_key(|r| r[0].parse::<u64>().unwrap_or(0));
                    }
                    if &got != expected {
                        failures.push(format!(
                            "client {owner} after op {i} ({sql}): {q}\n    expected {expected:?}\n    got      {got:?}"
                        ));
                    }
                }
                Ok((None, _)) => failures.push(format!("client {owner}: {q}: no result set")),
                Err(e) => failures.push(format!("client {owner}: {q}: {e}")),
            }
        }
        if failures.len() >= 5 {
            break;
        }
    }
    failures
}

fn partitioned_clients(url: &str) -> Vec<String> {
    if let Err(e) = fresh_database(url, DB) {
        return vec![format!("creating database: {e}")];
    }
    match connect(url, Some(DB)).and_then(|mut c| {
        query_rows(
            &mut c,
            "CREATE TABLE c (id BIGINT PRIMARY KEY, owner INT NOT NULL, val INT NOT NULL, KEY (owner))",
        )
    }) {
        Ok(_) => {}
        Err(e) => return vec![format!("creating table: {e}")],
    }
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=CLIENTS)
            .map(|owner| s.spawn(move || client(url, owner)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec!["client thread panicked".to_string()])
            })
            .collect()
    });
    failures
}

/// Runs `check` against MariaDB when `LADLE_TEST_MARIADB_URL` is set
/// (which checks the test itself) and against a fresh Ladle (unless
/// `LADLE_TEST_SKIP_LADLE`), and fails with every failure either reports.
fn against_both(what: &str, check: fn(&str) -> Vec<String>) {
    let mut failures = Vec::new();
    let mut run = |engine: &str, url: &str| {
        let found = check(url);
        println!("{what} [{engine}]: {} failures", found.len());
        failures.extend(found.into_iter().map(|f| format!("{engine}: {f}")));
    };
    match mariadb_url() {
        Some(url) => run("mariadb", &url),
        None => println!("{what} [mariadb]: LADLE_TEST_MARIADB_URL not set; skipping MariaDB"),
    }
    if std::env::var("LADLE_TEST_SKIP_LADLE").is_ok_and(|v| !v.is_empty() && v != "0") {
        println!("{what} [ladle]: LADLE_TEST_SKIP_LADLE set; skipping Ladle");
    } else {
        let bin = ladle_binary().expect("ladle binary");
        let server = LadleServer::start(&bin).expect("starting ladle");
        run("ladle", &server.url());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn concurrent_clients_read_their_own_writes() {
    against_both("concurrent clients", partitioned_clients);
}

/// Writers that keep `b = 2a + 1` in every row, while another connection moves
/// column `b` back and forth (`MODIFY ... AFTER`): every write must land in
/// the columns its statement named, whichever schema it met (issue #14: a
/// write built for the old column order was stored under the new one).
/// MySQL's metadata lock makes each ALTER wait for the statement; Ladle
/// builds a statement again when an ALTER committed under it.
fn writes_racing_alter(url: &str) -> Vec<String> {
    const WRITERS: i64 = 2;
    const WRITES: i64 = 60;
    const ALTERS: usize = 12;
    if let Err(e) = fresh_database(url, RACE_DB).and_then(|_| {
        let mut c = connect(url, Some(RACE_DB))?;
        query_rows(&mut c, "DROP TABLE IF EXISTS moving")?;
        query_rows(
            &mut c,
            "CREATE TABLE moving (id BIGINT AUTO_INCREMENT PRIMARY KEY, a BIGINT NOT NULL, b BIGINT NOT NULL)",
        )
    }) {
        return vec![format!("creating table: {e}")];
    }
    let mut failures: Vec<String> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    let mut conn = match connect(url, Some(RACE_DB)) {
                        Ok(c) => c,
                        Err(e) => return vec![format!("writer {w}: connecting: {e}")],
                    };
                    for k in 0..WRITES {
                        let v = w * 1000 + k;
                        // Text and prepared (binary protocol) statements.
                        let sql = match k % 3 {
                            0 => format!("INSERT INTO moving (a, b) VALUES ({v}, {})", 2 * v + 1),
                            1 => format!("INSERT INTO moving (b, a) VALUES ({}, {v})", 2 * v + 1),
                            _ => format!(
                                "UPDATE moving SET a = a + 1, b = b + 2 WHERE id % {WRITERS} = {w}"
                            ),
                        };
                        let run = if k % 2 == 0 {
                            query_rows(&mut conn, &sql)
                        } else {
                            ladle_e2e::exec_rows(&mut conn, &sql)
                        };
                        if let Err(e) = run {
                            return vec![format!("writer {w}: {sql}: {e}")];
                        }
                    }
                    Vec::new()
                })
            })
            .collect();
        let alterer = s.spawn(move || {
            let mut conn = match connect(url, Some(RACE_DB)) {
                Ok(c) => c,
                Err(e) => return vec![format!("alter: connecting: {e}")],
            };
            for i in 0..ALTERS {
                let place = if i % 2 == 0 { "AFTER id" } else { "AFTER a" };
                let sql = format!("ALTER TABLE moving MODIFY b BIGINT NOT NULL {place}");
                if let Err(e) = query_rows(&mut conn, &sql) {
                    return vec![format!("alter: {sql}: {e}")];
                }
            }
            Vec::new()
        });
        writers
            .into_iter()
            .chain(std::iter::once(alterer))
            .flat_map(|h| h.join().unwrap_or_else(|_| vec!["thread panicked".into()]))
            .collect()
    });
    let check = connect(url, Some(RACE_DB))
        .and_then(|mut c| query_rows(&mut c, "SELECT COUNT(*), SUM(b <> 2 * a + 1) FROM moving"));
    let inserts = WRITERS * (WRITES - WRITES / 3);
    match check {
        Ok(rows) => {
            let expected = Some(vec![vec![inserts.to_string(), "0".to_string()]]);
            if rows.0 != expected {
                failures.push(format!(
                    "rows (count, rows with b <> 2a + 1): {:?}, expected {expected:?}",
                    rows.0
                ));
            }
        }
        Err(e) => failures.push(format!("checking: {e}")),
    }
    failures
}

#[test]
fn writes_racing_alter_table_land_in_their_columns() {
    against_both("writes racing ALTER", writes_racing_alter);
}

/// A schema change waits for the open transaction that wrote its table
/// (MySQL's metadata lock), so the transaction's COMMIT still applies
/// every write to the columns it named; with a short `lock_wait_timeout`
/// the schema change gives up with 1205 instead.
fn alter_waits_for_transaction(url: &str) -> Vec<String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let step = |conn: &mut mysql::Conn, sql: &str| -> Result<(), String> {
        query_rows(conn, sql)
            .map(|_| ())
            .map_err(|e| format!("{sql}: {e}"))
    };
    let altered = AtomicBool::new(false);
    let mut failures = Vec::new();
    let run = std::thread::scope(|scope| -> Result<mysql::Conn, String> {
        fresh_database(url, WAIT_DB).map_err(|e| e.to_string())?;
        let mut tx = connect(url, Some(WAIT_DB)).map_err(|e| e.to_string())?;
        step(
            &mut tx,
            "CREATE TABLE held (id BIGINT AUTO_INCREMENT PRIMARY KEY, a BIGINT NOT NULL, b BIGINT NOT NULL)",
        )?;
        step(&mut tx, "BEGIN")?;
        step(&mut tx, "INSERT INTO held (a, b) VALUES (1, 3)")?;
        // A short timeout: the schema change gives up (1205).
        let mut other = connect(url, Some(WAIT_DB)).map_err(|e| e.to_string())?;
        step(&mut other, "SET SESSION lock_wait_timeout = 1")?;
        let timed_out = query_rows(
            &mut other,
            "ALTER TABLE held MODIFY b BIGINT NOT NULL AFTER id",
        );
        if !matches!(&timed_out, Err(mysql::Error::MySqlError(e)) if e.code == 1205) {
            failures.push(format!(
                "ALTER beside the open transaction: {timed_out:?}, expected 1205"
            ));
        }
        // So does dropping the table's database.
        let drop_db = format!("DROP DATABASE {WAIT_DB}");
        let timed_out = query_rows(&mut other, &drop_db);
        if !matches!(&timed_out, Err(mysql::Error::MySqlError(e)) if e.code == 1205) {
            failures.push(format!(
                "DROP DATABASE beside the open transaction: {timed_out:?}, expected 1205"
            ));
        }
        // A patient one waits until COMMIT.
        let waiter = scope.spawn(|| {
            let mut c = connect(url, Some(WAIT_DB)).map_err(|e| e.to_string())?;
            step(&mut c, "ALTER TABLE held MODIFY b BIGINT NOT NULL AFTER id")?;
            altered.store(true, Ordering::SeqCst);
            Ok::<(), String>(())
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        step(&mut tx, "INSERT INTO held (b, a) VALUES (5, 2)")?;
        if altered.load(Ordering::SeqCst) {
            failures.push("the ALTER did not wait for the transaction".to_string());
        }
        step(&mut tx, "COMMIT")?;
        waiter
            .join()
            .unwrap_or_else(|_| Err("panicked".into()))
            .map_err(|e| format!("the waiting ALTER: {e}"))?;
        Ok(tx)
    });
    match run {
        Ok(mut conn) => {
            match query_rows(&mut conn, "SELECT COUNT(*), SUM(b <> 2 * a + 1) FROM held") {
                Ok((rows, _)) if rows == Some(vec![vec!["2".into(), "0".into()]]) => {}
                other => failures.push(format!("rows after COMMIT: {other:?}")),
            }
        }
        Err(e) => failures.push(e),
    }
    failures
}

#[test]
fn alter_table_waits_for_transactions_that_wrote_it() {
    against_both("ALTER waits", alter_waits_for_transaction);
}
