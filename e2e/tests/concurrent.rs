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

fn run(engine: &str, url: &str) -> Vec<String> {
    if let Err(e) = fresh_database(url, DB) {
        return vec![format!("{engine}: creating database: {e}")];
    }
    match connect(url, Some(DB)).and_then(|mut c| {
        query_rows(
            &mut c,
            "CREATE TABLE c (id BIGINT PRIMARY KEY, owner INT NOT NULL, val INT NOT NULL, KEY (owner))",
        )
    }) {
        Ok(_) => {}
        Err(e) => return vec![format!("{engine}: creating table: {e}")],
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
    println!("concurrent [{engine}]: {} mismatches", failures.len());
    failures
        .into_iter()
        .map(|f| format!("{engine}: {f}"))
        .collect()
}

#[test]
fn concurrent_clients_read_their_own_writes() {
    let mut failures = Vec::new();
    match mariadb_url() {
        Some(url) => failures.extend(run("mariadb", &url)),
        None => println!("concurrent [mariadb]: LADLE_TEST_MARIADB_URL not set; skipping MariaDB"),
    }
    if std::env::var("LADLE_TEST_SKIP_LADLE").is_ok_and(|v| !v.is_empty() && v != "0") {
        println!("concurrent [ladle]: LADLE_TEST_SKIP_LADLE set; skipping Ladle");
    } else {
        let bin = ladle_binary().expect("ladle binary");
        let server = LadleServer::start(&bin).expect("starting ladle");
        failures.extend(run("ladle", &server.url()));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
