//! Refused statements in the server log: a statement Ladle does not
//! support yet (1235) or cannot parse (1064), sent as text or prepared, is
//! logged at info with its error number, the reason and its first 200
//! bytes; past ten lines a minute the rest are only counted, so a client
//! cannot flood the log.

use ladle_e2e::{connect, exec_rows, fresh_database, ladle_binary, query_rows, LadleServer};

const DB: &str = "ladle_refused_log";

fn refused_lines(server: &LadleServer) -> Vec<String> {
    std::fs::read_to_string(server.log_path())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("statement refused"))
        .map(str::to_string)
        .collect()
}

fn code(r: Result<impl Sized, mysql::Error>) -> u16 {
    match r {
        Err(mysql::Error::MySqlError(e)) => e.code,
        Err(e) => panic!("connection-level failure: {e}"),
        Ok(_) => panic!("the statement succeeded"),
    }
}

#[test]
fn refused_statements_are_logged_with_their_reason_and_rate_limited() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start(&bin).expect("start ladle");
    let url = server.url();
    fresh_database(&url, DB).expect("fresh database");
    let mut conn = connect(&url, Some(DB)).expect("connect");
    query_rows(&mut conn, "CREATE TABLE t (id INT PRIMARY KEY)").expect("create");
    query_rows(&mut conn, "INSERT INTO t VALUES (1)").expect("insert");
    query_rows(&mut conn, "SELECT id FROM t WHERE id = 1").expect("a statement that runs");

    let long_tail = "x".repeat(400);
    let unsupported = format!("SELECT SLEEP(1) FROM t /* {long_tail} */");
    assert_eq!(code(query_rows(&mut conn, &unsupported)), 1235);
    assert_eq!(code(query_rows(&mut conn, "SELEC 1 FROM t")), 1064);
    assert_eq!(code(exec_rows(&mut conn, "SELECT SLEEP(2) FROM t")), 1235);

    let lines = refused_lines(&server);
    assert_eq!(lines.len(), 3, "{lines:#?}\n{}", server.log_tail());
    assert!(lines[0].contains("INFO"), "{}", lines[0]);
    assert!(lines[0].contains("errno=1235"), "{}", lines[0]);
    assert!(lines[0].contains("function sleep"), "{}", lines[0]);
    assert!(lines[0].contains("SELECT SLEEP(1) FROM t"), "{}", lines[0]);
    // Cut to 200 bytes: the comment's tail is not there.
    assert!(lines[0].contains("xxx..."), "{}", lines[0]);
    assert!(!lines[0].contains(&"x".repeat(300)), "{}", lines[0]);
    assert!(lines[1].contains("errno=1064"), "{}", lines[1]);
    assert!(lines[1].contains("SELEC 1 FROM t"), "{}", lines[1]);
    assert!(lines[2].contains("SLEEP(2)"), "{}", lines[2]);
    // A statement that runs, or fails otherwise, is not logged.
    assert_eq!(code(query_rows(&mut conn, "SELECT nope FROM t")), 1054);
    assert_eq!(refused_lines(&server).len(), 3);

    // A flood: ten lines a minute in all (seven more), the rest counted.
    for i in 0..50 {
        let sql = format!("SELECT SLEEP({i}) FROM t");
        assert_eq!(code(query_rows(&mut conn, &sql)), 1235);
    }
    let lines = refused_lines(&server);
    assert_eq!(lines.len(), 10, "{lines:#?}");
    assert!(lines.iter().all(|l| l.contains("left_out=0")), "{lines:#?}");
}
