//! Named locks between sessions (the single-session answers are in
//! `tests/sql/compat/named_locks.test`): another session's lock makes
//! GET_LOCK wait until its timeout (0) or the release (1); a wait that would
//! close a circle is refused with 3058; KILL QUERY cuts a wait short (NULL)
//! and the connection goes on; a connection's locks go when it closes, is
//! killed (even while waiting) or is reset (COM_RESET_CONNECTION, COM_CHANGE_USER).

use std::time::{Duration, Instant};

use ladle_e2e::{connect, ladle_binary, query_rows, LadleServer};

/// How long a test waits for something that should happen before failing.
const SANITY: Duration = Duration::from_secs(60);

/// The one value `sql` returns on `c`.
fn scalar(c: &mut mysql::Conn, sql: &str) -> String {
    let (rows, _) = query_rows(c, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.expect("rows")[0][0].clone()
}

/// Waits until `lock` has a waiter: `probe` sees it busy and the waiting
/// connection `waiter` shows a running query in the process list.
fn wait_for_waiter(probe: &mut mysql::Conn, waiter: &str) {
    let start = Instant::now();
    let sql = format!("SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = {waiter}");
    while scalar(probe, &sql) != "Query" {
        assert!(
            start.elapsed() < SANITY,
            "connection {waiter} never started waiting"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The statement shows before it reaches the lock: a moment more.
    std::thread::sleep(Duration::from_millis(200));
}

/// The MySQL error code of `sql` on `c` (panics if it succeeds).
fn error_code(c: &mut mysql::Conn, sql: &str) -> u16 {
    match query_rows(c, sql) {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("{sql}: expected an error, got {other:?}"),
    }
}

/// Runs `sql` on `c` in a thread: its one value and the connection back.
fn in_thread(
    mut c: mysql::Conn,
    sql: &'static str,
) -> std::thread::JoinHandle<(String, mysql::Conn)> {
    std::thread::spawn(move || (scalar(&mut c, sql), c))
}

#[test]
fn named_locks_exclude_other_sessions_until_released() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start(&bin).expect("start");
    let url = server.url();
    let mut a = connect(&url, None).expect("a");
    let b = connect(&url, None).expect("b");
    let a_id = scalar(&mut a, "SELECT CONNECTION_ID()");
    let mut b = b;
    let b_id = scalar(&mut b, "SELECT CONNECTION_ID()");

    // Held by A: B times out, sees A as the holder, cannot release it.
    assert_eq!(scalar(&mut a, "SELECT GET_LOCK('m', 0)"), "1");
    assert_eq!(scalar(&mut b, "SELECT GET_LOCK('m', 0)"), "0");
    let started = Instant::now();
    assert_eq!(scalar(&mut b, "SELECT GET_LOCK('m', 0.3)"), "0");
    assert!(started.elapsed() >= Duration::from_millis(250), "no wait");
    assert_eq!(scalar(&mut b, "SELECT IS_USED_LOCK('m')"), a_id);
    assert_eq!(scalar(&mut b, "SELECT RELEASE_LOCK('m')"), "0");

    // B waits; A's release hands it over.
    let waiting = in_thread(b, "SELECT GET_LOCK('m', 60)");
    wait_for_waiter(&mut a, &b_id);
    assert_eq!(scalar(&mut a, "SELECT RELEASE_LOCK('m')"), "1");
    let (got, mut b) = waiting.join().expect("thread");
    assert_eq!(got, "1");
    assert_eq!(scalar(&mut a, "SELECT IS_USED_LOCK('m')"), b_id);

    // A circle: A holds p and waits for m (B's); B asking for p is 3058,
    // and B's locks stay until it releases them.
    assert_eq!(scalar(&mut a, "SELECT GET_LOCK('p', 0)"), "1");
    let waiting = in_thread(a, "SELECT GET_LOCK('m', -1)");
    wait_for_waiter(&mut b, &a_id);
    assert_eq!(error_code(&mut b, "SELECT GET_LOCK('p', 60)"), 3058);
    assert_eq!(scalar(&mut b, "SELECT RELEASE_ALL_LOCKS()"), "1");
    let (got, mut a) = waiting.join().expect("thread");
    assert_eq!(got, "1");

    // KILL QUERY stops a wait for ever: NULL, and the session goes on.
    let waiting = in_thread(b, "SELECT GET_LOCK('p', -1)");
    wait_for_waiter(&mut a, &b_id);
    query_rows(&mut a, &format!("KILL QUERY {b_id}")).expect("kill query");
    let (got, mut b) = waiting.join().expect("thread");
    assert_eq!(got, "NULL");
    assert_eq!(scalar(&mut b, "SELECT IS_FREE_LOCK('p')"), "0");

    // COM_RESET_CONNECTION releases A's locks (m and p).
    a.reset().expect("reset");
    assert_eq!(
        scalar(&mut b, "SELECT IS_FREE_LOCK('p') + IS_FREE_LOCK('m')"),
        "2"
    );

    // So does COM_CHANGE_USER.
    assert_eq!(scalar(&mut a, "SELECT GET_LOCK('u', 0)"), "1");
    a.change_user(mysql::ChangeUserOpts::default())
        .expect("change user");
    assert_eq!(scalar(&mut b, "SELECT IS_FREE_LOCK('u')"), "1");

    // A connection's end releases its locks, and a waiter gets them.
    assert_eq!(scalar(&mut a, "SELECT GET_LOCK('q', 0)"), "1");
    let waiting = in_thread(b, "SELECT GET_LOCK('q', 60)");
    wait_for_waiter(&mut a, &b_id);
    drop(a);
    let (got, mut b) = waiting.join().expect("thread");
    assert_eq!(got, "1");

    // KILL of a connection waiting while it holds a lock: both the lock
    // it held and the one it waited for (released at that moment) end up
    // free, not taken by the dead connection.
    let mut c = connect(&url, None).expect("c");
    let c_id = scalar(&mut c, "SELECT CONNECTION_ID()");
    assert_eq!(scalar(&mut c, "SELECT GET_LOCK('held', 0)"), "1");
    let waiting = std::thread::spawn(move || query_rows(&mut c, "SELECT GET_LOCK('q', -1)"));
    wait_for_waiter(&mut b, &c_id);
    query_rows(&mut b, &format!("KILL {c_id}")).expect("kill");
    assert_eq!(scalar(&mut b, "SELECT RELEASE_LOCK('q')"), "1");
    let _ = waiting.join().expect("thread");
    let start = Instant::now();
    while scalar(&mut b, "SELECT IS_FREE_LOCK('held') + IS_FREE_LOCK('q')") != "2" {
        assert!(
            start.elapsed() < SANITY,
            "the killed connection kept a lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        scalar(&mut b, "SELECT IS_FREE_LOCK('held') + IS_FREE_LOCK('q')"),
        "2"
    );
}
