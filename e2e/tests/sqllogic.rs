//! Runs every `tests/sql/**/*.test` sqllogictest file against MariaDB (when
//! `LADLE_TEST_MARIADB_URL` is set) and against a freshly spawned `ladle`
//! server (one server per file, so one file's crash cannot fail another).
//!
//! Each file runs in a fresh database. Files listed in
//! `tests/sql/ladle-known-failures.txt` are skipped on Ladle only.
//!
//! Environment:
//! - `LADLE_TEST_MARIADB_URL`: MariaDB to check the files against (the oracle).
//! - `LADLE_BIN`: the ladle binary (else `<target>/debug/ladle`).
//! - `LADLE_TEST_SKIP_LADLE=1`: run only the MariaDB part.
//! - `LADLE_TEST_RUN_KNOWN_FAILURES=1`: also run known failures on Ladle and
//!   report which now pass (they never fail the run).
//! - `LADLE_SLT_PROTOCOL=text|binary`: only one protocol (default: both; in
//!   `binary`, every SELECT is a server-side prepared statement).
//! - `LADLE_SLT_UPDATE=1`: rewrite the expected results of the selected files
//!   from MariaDB (for writing new files; review the diff!).
//!
//! Positional arguments are substring filters on the file path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ladle_e2e::{
    drop_database, fresh_database, ladle_binary, mariadb_url, sql_dir, test_files, LadleServer,
    MysqlDb, Protocol,
};
use sqllogictest::{default_column_validator, default_normalizer, default_validator, Runner};

const KNOWN_FAILURES_FILE: &str = "ladle-known-failures.txt";

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
    failures: Vec<(String, String)>,
}

impl Tally {
    fn line(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// Database name for a file: `slt_<area>_<stem>` with only [a-z0-9_].
fn db_name(rel: &str) -> String {
    let stem = rel.trim_end_matches(".test");
    let clean: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("slt_{clean}")
}

fn rel_path(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Runs one file against `url` in a fresh database.
fn run_file(
    url: &str,
    engine: &'static str,
    protocol: Protocol,
    rel: &str,
    file: &Path,
) -> Result<(), String> {
    let db = db_name(rel);
    fresh_database(url, &db).map_err(|e| format!("creating database {db}: {e}"))?;
    let (u, d) = (url.to_string(), db.clone());
    let mut runner = Runner::new(move || {
        let (u, d) = (u.clone(), d.clone());
        async move { MysqlDb::connect(&u, &d, engine, protocol) }
    });
    runner.add_label(engine);
    runner.with_validator(line_validator);
    let result = runner
        .run_file(file)
        .map_err(|e| e.display(false).to_string());
    runner.shutdown();
    drop_database(url, &db);
    result
}

/// sqllogictest's comparison, except that a value spanning lines (SHOW
/// CREATE TABLE's) is compared line by line, as the update mode writes it
/// into the file.
fn line_validator(
    normalizer: sqllogictest::Normalizer,
    actual: &[Vec<String>],
    expected: &[String],
) -> bool {
    if !actual.iter().flatten().any(|v| v.contains('\n')) {
        return default_validator(normalizer, actual, expected);
    }
    let actual_lines: Vec<String> = actual
        .iter()
        .flat_map(|row| {
            row.join(" ")
                .lines()
                .map(|l| normalizer(&l.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let expected_lines: Vec<String> = expected.iter().map(normalizer).collect();
    actual_lines == expected_lines
}

fn update_file(url: &str, rel: &str, file: &Path) -> Result<(), String> {
    let db = db_name(rel);
    fresh_database(url, &db).map_err(|e| format!("creating database {db}: {e}"))?;
    let (u, d) = (url.to_string(), db.clone());
    let mut runner = Runner::new(move || {
        let (u, d) = (u.clone(), d.clone());
        async move { MysqlDb::connect(&u, &d, "mariadb", Protocol::Text) }
    });
    runner.add_label("mariadb");
    let result = futures::executor::block_on(runner.update_test_file(
        file,
        " ",
        default_validator,
        default_normalizer,
        default_column_validator,
    ))
    .map_err(|e| e.to_string());
    drop_database(url, &db);
    result
}

/// `path  # reason` lines (path relative to tests/sql); `#` lines are comments.
fn known_failures(root: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root.join(KNOWN_FAILURES_FILE)).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((path, reason)) => (
                path.to_string(),
                reason.trim().trim_start_matches('#').trim().to_string(),
            ),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn first_lines(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join("\n    ")
}

fn run_mariadb(root: &Path, files: &[(String, PathBuf)], protocol: Protocol) -> Tally {
    let mut tally = Tally::default();
    let p = protocol.name();
    let Some(url) = mariadb_url() else {
        println!("sqllogictest [mariadb/{p}]: LADLE_TEST_MARIADB_URL not set; skipping the MariaDB run (start one with scripts/mariadb.sh start)");
        tally.skipped = files.len();
        return tally;
    };
    println!(
        "sqllogictest [mariadb/{p}]: {} files from {} against {url}",
        files.len(),
        root.display()
    );
    for (rel, file) in files {
        match run_file(&url, "mariadb", protocol, rel, file) {
            Ok(()) => {
                tally.passed += 1;
                println!("  PASS mariadb/{p} {rel}");
            }
            Err(e) => {
                tally.failed += 1;
                println!("  FAIL mariadb/{p} {rel}\n    {}", first_lines(&e, 30));
                tally.failures.push((rel.clone(), e));
            }
        }
    }
    println!("sqllogictest [mariadb/{p}]: {}", tally.line());
    tally
}

fn run_ladle(root: &Path, files: &[(String, PathBuf)], protocol: Protocol) -> Tally {
    let mut tally = Tally::default();
    let p = protocol.name();
    if env_flag("LADLE_TEST_SKIP_LADLE") {
        println!("sqllogictest [ladle/{p}]: LADLE_TEST_SKIP_LADLE set; skipping the Ladle run");
        tally.skipped = files.len();
        return tally;
    }
    let bin = match ladle_binary() {
        Ok(bin) => bin,
        Err(e) => {
            println!("sqllogictest [ladle/{p}]: no ladle binary: {e}");
            tally.failed = 1;
            tally
                .failures
                .push(("<ladle binary>".into(), e.to_string()));
            return tally;
        }
    };
    let known = known_failures(root);
    let run_known = env_flag("LADLE_TEST_RUN_KNOWN_FAILURES");
    println!(
        "sqllogictest [ladle/{p}]: {} files against {} ({} known failures listed in {KNOWN_FAILURES_FILE})",
        files.len(),
        bin.display(),
        known.len()
    );
    let mut now_passing = Vec::new();
    for (rel, file) in files {
        let known_reason = known.get(rel.as_str());
        if let (Some(reason), false) = (known_reason, run_known) {
            tally.skipped += 1;
            println!("  SKIP ladle/{p} {rel} (known failure: {reason})");
            continue;
        }
        let outcome = LadleServer::start(&bin)
            .map_err(|e| format!("starting ladle: {e}"))
            .and_then(|mut server| {
                let r = run_file(&server.url(), "ladle", protocol, rel, file);
                if r.is_err() && !server.is_alive() {
                    return r.map_err(|e| {
                        format!("{e}\n(ladle died; log tail:)\n{}", server.log_tail())
                    });
                }
                r
            });
        match (outcome, known_reason) {
            (Ok(()), None) => {
                tally.passed += 1;
                println!("  PASS ladle/{p} {rel}");
            }
            (Ok(()), Some(_)) => {
                tally.passed += 1;
                now_passing.push(rel.clone());
                println!(
                    "  PASS ladle/{p} {rel} (listed as a known failure: remove it from the list)"
                );
            }
            (Err(e), Some(_)) => {
                tally.skipped += 1;
                println!("  KNOWN-FAIL ladle/{p} {rel}\n    {}", first_lines(&e, 12));
            }
            (Err(e), None) => {
                tally.failed += 1;
                println!("  FAIL ladle/{p} {rel}\n    {}", first_lines(&e, 30));
                tally.failures.push((rel.clone(), e));
            }
        }
    }
    for rel in &now_passing {
        println!("sqllogictest [ladle/{p}]: known failure now passes: {rel}");
    }
    for path in known.keys() {
        if !root.join(path).is_file() {
            println!("sqllogictest [ladle/{p}]: {KNOWN_FAILURES_FILE} lists a missing or filtered-out file: {path}");
        }
    }
    println!("sqllogictest [ladle/{p}]: {}", tally.line());
    tally
}

/// Positional arguments are path filters; libtest flags that cargo may pass
/// through (`--nocapture`, `--test-threads N`, ...) are ignored.
fn filters_from_args(args: impl Iterator<Item = String>) -> Vec<String> {
    const WITH_VALUE: [&str; 6] = [
        "--test-threads",
        "--skip",
        "--format",
        "--logfile",
        "--color",
        "-Z",
    ];
    let mut filters = Vec::new();
    let mut skip_next = false;
    for arg in args {
        if skip_next {
            skip_next = false;
        } else if WITH_VALUE.contains(&arg.as_str()) {
            skip_next = true;
        } else if !arg.starts_with('-') {
            filters.push(arg);
        }
    }
    filters
}

fn main() -> ExitCode {
    let root = sql_dir();
    let filters = filters_from_args(std::env::args().skip(1));
    let files: Vec<(String, PathBuf)> = match test_files(&root) {
        Ok(files) => files
            .into_iter()
            .map(|f| (rel_path(&root, &f), f))
            .filter(|(rel, _)| filters.is_empty() || filters.iter().any(|flt| rel.contains(flt)))
            .collect(),
        Err(e) => {
            println!("sqllogictest: cannot list {}: {e}", root.display());
            return ExitCode::FAILURE;
        }
    };

    if env_flag("LADLE_SLT_UPDATE") {
        let Some(url) = mariadb_url() else {
            println!("LADLE_SLT_UPDATE needs LADLE_TEST_MARIADB_URL");
            return ExitCode::FAILURE;
        };
        let mut ok = true;
        for (rel, file) in &files {
            match update_file(&url, rel, file) {
                Ok(()) => println!("  UPDATED {rel}"),
                Err(e) => {
                    ok = false;
                    println!("  UPDATE FAILED {rel}: {e}");
                }
            }
        }
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }

    let mut total = Tally::default();
    let mut summaries = Vec::new();
    let mut failed = Vec::new();
    for protocol in Protocol::selected() {
        for (engine, tally) in [
            ("mariadb", run_mariadb(&root, &files, protocol)),
            ("ladle", run_ladle(&root, &files, protocol)),
        ] {
            let name = format!("{engine}/{}", protocol.name());
            summaries.push(format!("{name}: {}", tally.line()));
            total.passed += tally.passed;
            total.failed += tally.failed;
            total.skipped += tally.skipped;
            failed.extend(
                tally
                    .failures
                    .into_iter()
                    .map(|(rel, _)| format!("{name} {rel}")),
            );
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:");
        for what in &failed {
            println!("  {what}");
        }
    }
    println!();
    for line in &summaries {
        println!("sqllogictest: {line}");
    }
    println!("sqllogictest: {}", total.line());
    if total.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
