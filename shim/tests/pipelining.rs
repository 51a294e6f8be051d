//! The protocol layer seen through raw bytes, for what client libraries
//! never send: commands pipelined in one TCP write or split anywhere,
//! every command byte, long data, broken framing, invalid UTF-8.

mod common;

use common::{raw_login, read_packet, start, start_configured};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One framed packet.
fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(payload);
    p
}

fn command(byte: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![byte];
    p.extend_from_slice(body);
    packet(0, &p)
}

fn query(sql: &[u8]) -> Vec<u8> {
    command(0x03, sql)
}

const PING: u8 = 0x0E;

/// COM_STMT_EXECUTE of `id` with parameters (type, value bytes); a `None`
/// value is NULL.
fn execute(id: u32, params: &[(u8, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut p = id.to_le_bytes().to_vec();
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    if !params.is_empty() {
        let mut bitmap = vec![0u8; params.len().div_ceil(8)];
        for (i, (_, v)) in params.iter().enumerate() {
            if v.is_none() {
                bitmap[i / 8] |= 1 << (i % 8);
            }
        }
        p.extend_from_slice(&bitmap);
        p.push(1);
        for (t, _) in params {
            p.extend_from_slice(&[*t, 0]);
        }
        for (_, v) in params {
            if let Some(v) = v {
                p.extend_from_slice(v);
            }
        }
    }
    command(0x17, &p)
}

fn lenenc_str(s: &[u8]) -> Vec<u8> {
    assert!(s.len() < 251);
    let mut v = vec![s.len() as u8];
    v.extend_from_slice(s);
    v
}

/// A reply as a client without CLIENT_DEPRECATE_EOF reads it.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Ok { affected: u64 },
    Err(u16),
    Rows(Vec<Vec<u8>>),
    Prepared { id: u32, columns: u16, params: u16 },
    Text(String),
}

fn lenenc(p: &[u8]) -> (u64, usize) {
    match p[0] {
        0xFC => (u64::from(u16::from_le_bytes([p[1], p[2]])), 3),
        0xFD => (u64::from(u32::from_le_bytes([p[1], p[2], p[3], 0])), 4),
        n => (u64::from(n), 1),
    }
}

async fn reply(s: &mut TcpStream) -> Reply {
    let (_, p) = read_packet(s).await;
    match p[0] {
        0x00 => Reply::Ok {
            affected: lenenc(&p[1..]).0,
        },
        0xFF => Reply::Err(u16::from_le_bytes([p[1], p[2]])),
        b'U' => Reply::Text(String::from_utf8(p).unwrap()),
        _ => {
            let columns = lenenc(&p).0;
            for _ in 0..columns {
                read_packet(s).await;
            }
            assert_eq!(read_packet(s).await.1[0], 0xFE, "EOF after columns");
            let mut rows = Vec::new();
            loop {
                let (_, row) = read_packet(s).await;
                if row[0] == 0xFE && row.len() < 9 {
                    return Reply::Rows(rows);
                }
                rows.push(row);
            }
        }
    }
}

/// COM_STMT_PREPARE's reply, definitions consumed.
async fn prepared(s: &mut TcpStream) -> Reply {
    let (_, p) = read_packet(s).await;
    if p[0] == 0xFF {
        return Reply::Err(u16::from_le_bytes([p[1], p[2]]));
    }
    let id = u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
    let columns = u16::from_le_bytes([p[5], p[6]]);
    let params = u16::from_le_bytes([p[7], p[8]]);
    for n in [params, columns] {
        if n > 0 {
            for _ in 0..n {
                read_packet(s).await;
            }
            assert_eq!(read_packet(s).await.1[0], 0xFE);
        }
    }
    Reply::Prepared {
        id,
        columns,
        params,
    }
}

/// The only text cell of a one-column text row.
fn cell(row: &[u8]) -> Vec<u8> {
    let (n, at) = lenenc(row);
    row[at..at + n as usize].to_vec()
}

async fn setup(port: u16, db: &str) -> TcpStream {
    let mut s = raw_login(port).await;
    for sql in [
        format!("CREATE DATABASE {db}"),
        format!("USE {db}"),
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v LONGTEXT)".to_string(),
    ] {
        s.write_all(&query(sql.as_bytes())).await.unwrap();
        assert!(matches!(reply(&mut s).await, Reply::Ok { .. }), "{sql}");
    }
    s
}

async fn length_of(s: &mut TcpStream, id: u64) -> Vec<Vec<u8>> {
    let sql = format!("SELECT LENGTH(v) FROM t WHERE id = {id}");
    s.write_all(&query(sql.as_bytes())).await.unwrap();
    match reply(s).await {
        Reply::Rows(rows) => rows.iter().map(|r| cell(r)).collect(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_insert_pipelined_with_a_ping_is_executed() {
    let server = start().await;
    let mut s = setup(server.port, "p1").await;
    for (id, n) in [(1u64, 100usize), (2, 20_000), (3, 70_000)] {
        let value: String = (0..n).map(|i| if i % 2 == 0 { 'x' } else { 'z' }).collect();
        let mut bytes = query(format!("INSERT INTO t VALUES ({id}, '{value}')").as_bytes());
        bytes.extend(command(PING, &[]));
        s.write_all(&bytes).await.unwrap();
        assert_eq!(reply(&mut s).await, Reply::Ok { affected: 1 }, "{n}");
        assert_eq!(reply(&mut s).await, Reply::Ok { affected: 0 }, "{n}");
        assert_eq!(
            length_of(&mut s, id).await,
            vec![n.to_string().into_bytes()]
        );
    }
}

#[tokio::test]
async fn prepare_execute_close_prepare_in_one_write() {
    let server = start().await;
    let mut s = setup(server.port, "p2").await;
    let mut bytes = command(0x16, b"INSERT INTO t VALUES (?, ?)");
    bytes.extend(execute(
        1,
        &[
            (0x08, Some(10u64.to_le_bytes().to_vec())),
            (0xFD, Some(lenenc_str(b"ten"))),
        ],
    ));
    bytes.extend(command(0x19, &1u32.to_le_bytes()));
    bytes.extend(command(0x16, b"SELECT v FROM t WHERE id = ?"));
    bytes.extend(execute(2, &[(0x08, Some(10u64.to_le_bytes().to_vec()))]));
    bytes.extend(command(PING, &[]));
    s.write_all(&bytes).await.unwrap();
    assert_eq!(
        prepared(&mut s).await,
        Reply::Prepared {
            id: 1,
            columns: 0,
            params: 2
        }
    );
    assert_eq!(reply(&mut s).await, Reply::Ok { affected: 1 });
    // COM_STMT_CLOSE has no reply: next is the second PREPARE's.
    assert_eq!(
        prepared(&mut s).await,
        Reply::Prepared {
            id: 2,
            columns: 1,
            params: 1
        }
    );
    // A binary row: header, NULL bitmap, the string.
    assert_eq!(
        reply(&mut s).await,
        Reply::Rows(vec![vec![0x00, 0x00, 3, b't', b'e', b'n']])
    );
    let (seq, ok) = read_packet(&mut s).await;
    assert_eq!((seq, ok[0]), (1, 0x00), "the ping's OK");
    // The closed statement is gone.
    s.write_all(&execute(1, &[(0x06, None), (0x06, None)]))
        .await
        .unwrap();
    assert_eq!(reply(&mut s).await, Reply::Err(1243));
}

#[tokio::test]
async fn commands_split_at_every_byte_are_each_answered_once() {
    let server = start().await;
    let mut s = setup(server.port, "p3").await;
    let mut bytes = command(PING, &[]);
    bytes.extend(query(b"SELECT 1"));
    bytes.extend(command(0x02, b"p3"));
    bytes.extend(command(0x19, &99u32.to_le_bytes()));
    bytes.extend(query(b"SELECT 'ab'"));
    let expected = vec![
        Reply::Ok { affected: 0 },
        Reply::Rows(vec![vec![1, b'1']]),
        Reply::Ok { affected: 0 },
        Reply::Rows(vec![vec![2, b'a', b'b']]),
    ];
    for split in 0..=bytes.len() {
        s.write_all(&bytes[..split]).await.unwrap();
        s.flush().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        s.write_all(&bytes[split..]).await.unwrap();
        let mut got = Vec::new();
        for _ in 0..expected.len() {
            got.push(reply(&mut s).await);
        }
        assert_eq!(got, expected, "split at {split}");
    }
    // Nothing more was sent.
    s.write_all(&command(PING, &[])).await.unwrap();
    assert_eq!(read_packet(&mut s).await, (1, vec![0, 0, 0, 2, 0, 0, 0]));
}

#[tokio::test]
async fn long_data_gets_no_reply_and_is_used_by_the_next_execution() {
    let server = start().await;
    let mut s = setup(server.port, "p4").await;
    s.write_all(&command(0x16, b"INSERT INTO t VALUES (?, ?)"))
        .await
        .unwrap();
    let Reply::Prepared { id, .. } = prepared(&mut s).await else {
        panic!()
    };
    let long = |param: u16, data: &[u8]| {
        let mut body = id.to_le_bytes().to_vec();
        body.extend_from_slice(&param.to_le_bytes());
        body.extend_from_slice(data);
        command(0x18, &body)
    };
    // Three chunks of 10,000 bytes, pipelined with the execution.
    let mut bytes = Vec::new();
    for c in [b'a', b'b', b'c'] {
        bytes.extend(long(1, &[c; 10_000]));
    }
    bytes.extend(execute(
        id,
        &[
            (0x08, Some(20u64.to_le_bytes().to_vec())),
            (0xFC, Some(vec![])),
        ],
    ));
    bytes.extend(command(PING, &[]));
    s.write_all(&bytes).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Ok { affected: 1 });
    assert_eq!(
        read_packet(&mut s).await.0,
        1,
        "the ping's OK, nothing between"
    );
    assert_eq!(length_of(&mut s, 20).await, vec![b"30000".to_vec()]);
    s.write_all(&query(b"SELECT SUBSTRING(v, 9999, 4) FROM t WHERE id = 20"))
        .await
        .unwrap();
    let Reply::Rows(rows) = reply(&mut s).await else {
        panic!()
    };
    assert_eq!(cell(&rows[0]), b"aabb");

    // COM_STMT_RESET drops long data (and replies OK); the next execution
    // takes the value from its parameter block.
    let mut bytes = long(1, b"dropped");
    bytes.extend(command(0x1A, &id.to_le_bytes()));
    bytes.extend(execute(
        id,
        &[
            (0x08, Some(21u64.to_le_bytes().to_vec())),
            (0xFD, Some(lenenc_str(b"inline"))),
        ],
    ));
    s.write_all(&bytes).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Ok { affected: 0 });
    assert_eq!(reply(&mut s).await, Reply::Ok { affected: 1 });
    assert_eq!(length_of(&mut s, 21).await, vec![b"6".to_vec()]);

    // Long data for a parameter the statement does not have: the next
    // execution fails with 1210, and the connection goes on.
    let mut bytes = long(5, b"x");
    bytes.extend(execute(
        id,
        &[(0x08, Some(22u64.to_le_bytes().to_vec())), (0x06, None)],
    ));
    s.write_all(&bytes).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Err(1210));
}

/// The first reply to each command byte sent with an empty body, then
/// checked to be the only one (a COM_PING follows in the same write).
#[tokio::test]
async fn every_command_byte_gets_its_answer() {
    let server = start().await;
    let mut s = setup(server.port, "p5").await;
    for byte in 0..=255u8 {
        if byte == 0x01 {
            continue;
        }
        let expected = match byte {
            // (0x07, COM_REFRESH: FLUSH LOGS.)
            0x02 | 0x07 | 0x0E | 0x1F => Some(Reply::Ok { affected: 0 }),
            0x03 => Some(Reply::Err(1065)),
            0x16 => Some(Reply::Err(1065)),
            0x09 => None, // text, checked below
            0x08 | 0x0C | 0x0D => Some(Reply::Err(1227)),
            0x12 | 0x1E => Some(Reply::Err(1236)),
            0x11 | 0x17 | 0x1A | 0x1B | 0x1C => Some(Reply::Err(1835)),
            0x18 | 0x19 => Some(Reply::Ok { affected: 0 }), // no reply: the ping's
            _ => Some(Reply::Err(1047)),
        };
        let mut bytes = command(byte, &[]);
        bytes.extend(command(PING, &[]));
        s.write_all(&bytes).await.unwrap();
        let got = reply(&mut s).await;
        match expected {
            Some(e) => assert_eq!(got, e, "command byte {byte:#04x}"),
            None => assert!(
                matches!(&got, Reply::Text(t) if t.starts_with("Uptime: ")),
                "{got:?}"
            ),
        }
        if !matches!(byte, 0x18 | 0x19) {
            let (seq, ok) = read_packet(&mut s).await;
            assert_eq!((seq, ok[0]), (1, 0x00), "ping after {byte:#04x}");
        }
        if byte == 0x1F {
            // COM_RESET_CONNECTION keeps the database.
            s.write_all(&query(b"SELECT DATABASE()")).await.unwrap();
            assert_eq!(reply(&mut s).await, Reply::Rows(vec![vec![2, b'p', b'5']]));
        }
    }
    // COM_QUIT: no reply, the server closes.
    s.write_all(&command(0x01, &[])).await.unwrap();
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).await.unwrap(), 0);
}

#[tokio::test]
async fn reset_connection_drops_prepared_statements() {
    let server = start().await;
    let mut s = setup(server.port, "p6").await;
    s.write_all(&command(0x16, b"SELECT 1")).await.unwrap();
    let Reply::Prepared { id, .. } = prepared(&mut s).await else {
        panic!()
    };
    s.write_all(&command(0x1F, &[])).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Ok { affected: 0 });
    s.write_all(&execute(id, &[])).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Err(1243));
}

#[tokio::test]
async fn invalid_utf8_gets_an_error_and_the_connection_lives_on() {
    let server = start().await;
    let mut s = setup(server.port, "p7").await;
    s.write_all(&query(b"SELECT \xff")).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Err(1064));
    s.write_all(&command(0x16, b"SELECT \xff")).await.unwrap();
    assert_eq!(prepared(&mut s).await, Reply::Err(1064));
    s.write_all(&command(0x02, b"\xff")).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Err(1049));
    s.write_all(&query(b"SELECT 'still here'")).await.unwrap();
    assert_eq!(
        reply(&mut s).await,
        Reply::Rows(vec![lenenc_str(b"still here")])
    );
}

/// A binary string literal that is not UTF-8 reaches the engine byte-exact
/// (PyMySQL sends `bytes` parameters this way): the protocol layer turns
/// the literal into `X'80FF00'`, and HEX() of the stored value shows every
/// byte.
#[tokio::test]
async fn binary_literals_keep_every_byte() {
    let server = start().await;
    let mut s = setup(server.port, "p8").await;
    s.write_all(&query(b"SELECT HEX(_binary'\x80\xff\\0')"))
        .await
        .unwrap();
    assert_eq!(
        reply(&mut s).await,
        Reply::Rows(vec![lenenc_str(b"80FF00")])
    );
}

#[tokio::test]
async fn broken_framing_closes_the_connection_with_an_error() {
    let server = start_configured(None, 1024, "").await;
    // Over max_allowed_packet: 1153, then closed.
    let mut s = raw_login(server.port).await;
    s.write_all(&query(&[b'x'; 2000])).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Err(1153));
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).await.unwrap(), 0);

    // A continuation packet with the wrong sequence id: 1156, then closed.
    let server = start_configured(None, 64 << 20, "").await;
    let mut s = raw_login(server.port).await;
    let mut bytes = packet(0, &vec![0x03; 0xFF_FFFF]);
    bytes.extend(packet(7, b"x"));
    s.write_all(&bytes).await.unwrap();
    assert_eq!(reply(&mut s).await, Reply::Err(1156));
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).await.unwrap(), 0);
}

/// Well-framed commands with random bodies, pipelined at a live server:
/// nothing panics (any panic in this process is counted, the server's
/// included), and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_command_bodies_never_panic() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    let previous = Arc::new(std::panic::take_hook());
    let chained = previous.clone();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        chained(info);
    }));

    let server = start().await;
    let mut s = setup(server.port, "p9").await;
    // A prepared statement with parameters, so EXECUTE bodies reach the
    // parameter decoder.
    s.write_all(&command(0x16, b"SELECT ? + ?")).await.unwrap();
    assert!(matches!(
        prepared(&mut s).await,
        Reply::Prepared { id: 1, .. }
    ));
    let (mut reader, mut writer) = s.into_split();
    // Reads replies until the last command's (it selects a marker).
    let drain = tokio::spawn(async move {
        let mut sink = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => sink.extend_from_slice(&buf[..n]),
            }
            if sink.windows(10).any(|w| w == b"end-marker") {
                return true;
            }
        }
    });
    // xorshift: deterministic, no dependency.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // Not COM_CHANGE_USER: a failed one closes the connection.
    let commands = [0x02, 0x03, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C];
    let mut bytes = Vec::new();
    for _ in 0..2000 {
        let byte = commands[(next() % commands.len() as u64) as usize];
        let len = (next() % 40) as usize;
        let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if matches!(byte, 0x17 | 0x18 | 0x19 | 0x1A | 0x1C) && body.len() >= 4 && next() % 2 == 0 {
            // Name the real statement half of the time.
            body[..4].copy_from_slice(&1u32.to_le_bytes());
        }
        bytes.extend(command(byte, &body));
    }
    bytes.extend(query(b"SELECT 'end-marker'"));
    writer.write_all(&bytes).await.unwrap();
    let reached_the_end = tokio::time::timeout(std::time::Duration::from_secs(120), drain)
        .await
        .expect("replies in time")
        .unwrap();
    let _ = std::panic::take_hook();
    assert!(
        reached_the_end,
        "the connection broke before the last command"
    );
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a panic while decoding");
    let mut again = raw_login(server.port).await;
    again.write_all(&query(b"SELECT 'alive'")).await.unwrap();
    assert_eq!(
        reply(&mut again).await,
        Reply::Rows(vec![lenenc_str(b"alive")])
    );
}
