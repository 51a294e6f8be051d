//! The MySQL client/server protocol, owned here rather than borrowed from a
//! library: the connection phase ([`handshake`], and [`login`] for the
//! authentication exchange), framing ([`packet`]),
//! encodings ([`codec`]), the command table ([`command`]), replies
//! ([`result`]) and prepared-statement messages ([`stmt`]). This module is
//! the connection loop: read a packet, dispatch its command, write the
//! whole reply and flush it once.
//!
//! Decoding is total: a malformed command gets an error reply (1835, or
//! 1210 for a statement's parameter block) and the connection goes on;
//! broken framing (a packet over `max_allowed_packet`, continuation
//! packets out of order) gets 1153/1156 and the connection is closed.

pub mod codec;
pub mod command;
pub mod handshake;
mod login;
pub mod packet;
pub mod result;
pub mod stmt;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::WireError;
use crate::handler::{Connection, Outcome};
use crate::output::Output;
use crate::tls::{ReadStream, WriteStream};
use crate::wire::wire_columns;
use command::Handling;
use handshake::{ChangeUser, HandshakeResponse, CLIENT_MULTI_STATEMENTS, CLIENT_SSL};
use packet::{FrameError, Packet, PacketReader, PacketWriter};

/// What the connection loop needs besides the [`Connection`].
pub struct Settings {
    pub max_allowed_packet: usize,
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// The connection phase (greeting to OK) must finish within it
    /// (`connect_timeout`); else the connection is closed.
    pub connect_timeout: Duration,
    /// Admits authenticated connections up to `max_connections`.
    pub admission: Arc<crate::Admission>,
}

/// Bytes read ahead of a running statement's reply (watching for the
/// client to go away) before the server stops reading until it replies.
const MAX_READ_AHEAD: usize = 1 << 20;

/// A client's first packet is small; anything larger is not a handshake.
const MAX_HANDSHAKE: usize = 64 * 1024;

const ER_HANDSHAKE: (u16, &str, &str) = (1043, "08S01", "Bad handshake");
const ER_PACKET_TOO_LARGE: (u16, &str, &str) = (
    1153,
    "08S01",
    "Got a packet bigger than 'max_allowed_packet' bytes",
);
const ER_MALFORMED_PACKET: (u16, &str, &str) = (1835, "HY000", "Malformed communication packet.");

type Reader = PacketReader<ReadStream>;
type Writer = PacketWriter<WriteStream>;

/// Serves one client connection: handshake, then commands until the client
/// quits or the connection breaks.
pub async fn serve(stream: TcpStream, conn: Connection, settings: &Settings) {
    let id = conn.connection_id();
    let shaken = tokio::time::timeout(settings.connect_timeout, handshake(stream, &conn, settings));
    // A failed attempt, 1040 included, counts as MariaDB counts it.
    let aborted = || conn.engine().metrics.connections_aborted.inc();
    let Ok(shaken) = shaken.await else {
        // MySQL closes the connection without a reply, as here.
        tracing::debug!(
            connection = id,
            "handshake not finished within connect_timeout"
        );
        aborted();
        return;
    };
    match shaken {
        Ok(Some((reader, writer, caps, slot, secure))) => {
            conn.set_client_capabilities(caps);
            let mut commands = CommandLoop {
                conn,
                reader,
                writer,
                caps,
                statements: stmt::Statements::new(),
                max_allowed_packet: settings.max_allowed_packet,
                secure,
                _slot: slot,
            };
            let res = commands.run().await;
            let limit = commands.conn.timeouts().write;
            let _ = tokio::time::timeout(limit, async {
                let _ = commands.writer.flush().await;
                let _ = commands.writer.shutdown().await;
            })
            .await;
            match res {
                Ok(()) => tracing::debug!(connection = id, "disconnected"),
                Err(e) => tracing::debug!(connection = id, error = %e, "connection closed"),
            }
        }
        Ok(None) => {
            aborted();
            tracing::debug!(connection = id, "handshake refused");
        }
        Err(e) => {
            aborted();
            tracing::debug!(connection = id, error = %e, "handshake failed");
        }
    }
}

/// Frames a payload as one packet (for writes before the packet writer).
fn framed(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(payload);
    p
}

/// Reads one packet straight off the socket (before the TLS switch, so
/// that no byte of the TLS handshake is buffered here); `Err(seq)` for a
/// packet too large to be a handshake.
async fn read_first(stream: &mut TcpStream) -> io::Result<Result<Packet, u8>> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if len > MAX_HANDSHAKE {
        return Ok(Err(header[3]));
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).await?;
    Ok(Ok(Packet {
        seq: header[3],
        payload,
    }))
}

/// A finished connection phase: reader, writer, capabilities, the place
/// under `max_connections`, and whether the connection is TLS.
type Shaken = (Reader, Writer, u32, crate::AdmissionSlot, bool);

/// The connection phase. `None` when the client was refused (the error was
/// sent); else the connection's reader, writer, capabilities and its place
/// under `max_connections`.
async fn handshake(
    mut stream: TcpStream,
    conn: &Connection,
    settings: &Settings,
) -> io::Result<Option<Shaken>> {
    let mut server_caps = handshake::SERVER_CAPABILITIES;
    if settings.tls.is_some() {
        server_caps |= CLIENT_SSL;
    }
    let scramble = conn.scramble();
    let greeting = handshake::greeting(
        conn.connection_id(),
        &scramble,
        crate::vars::SERVER_VERSION,
        server_caps,
        result::SERVER_STATUS_AUTOCOMMIT,
    );
    stream.write_all(&framed(0, &greeting)).await?;
    let refuse = |seq: u8, (errno, state, msg): (u16, &str, &str)| {
        framed(seq, &result::error_payload(errno, state, msg))
    };
    let first = match read_first(&mut stream).await? {
        Ok(first) => first,
        Err(seq) => {
            conn.count_error(1153);
            stream
                .write_all(&refuse(seq.wrapping_add(1), ER_PACKET_TOO_LARGE))
                .await?;
            return Ok(None);
        }
    };
    let secure = HandshakeResponse::is_ssl_request(&first.payload);
    let (mut reader, mut writer, response) = if secure {
        let Some(config) = &settings.tls else {
            stream
                .write_all(&refuse(first.seq.wrapping_add(1), ER_HANDSHAKE))
                .await?;
            return Ok(None);
        };
        let tls = tokio_rustls::TlsAcceptor::from(config.clone())
            .accept(stream)
            .await?;
        let (r, w) = tokio::io::split(tls);
        let mut reader: Reader = PacketReader::new(Box::new(r), MAX_HANDSHAKE);
        let writer: Writer = PacketWriter::new(Box::new(w));
        let response = match reader.next().await {
            Ok(Some(p)) => p,
            _ => return Ok(None),
        };
        (reader, writer, response)
    } else {
        let (r, w) = stream.into_split();
        let reader: Reader = PacketReader::new(Box::new(r), MAX_HANDSHAKE);
        let writer: Writer = PacketWriter::new(Box::new(w));
        (reader, writer, first)
    };
    writer.set_seq(response.seq.wrapping_add(1));
    let Ok(hello) = HandshakeResponse::parse(&response.payload) else {
        let (errno, state, msg) = ER_HANDSHAKE;
        result::error(&mut writer, errno, state, msg);
        writer.flush().await?;
        return Ok(None);
    };
    // CLIENT_INTERACTIVE is the client's to say (not offered by us).
    let caps = hello.capabilities & (server_caps | handshake::CLIENT_INTERACTIVE);
    let login = login::Exchange {
        reader: &mut reader,
        writer: &mut writer,
        conn,
        secure,
        // The whole phase is bounded by connect_timeout too.
        write_limit: settings.connect_timeout,
        read_limit: settings.connect_timeout,
    }
    .authenticate(&hello.user, &hello.auth_plugin, hello.auth_response.clone())
    .await?;
    if let Err(e) = login {
        result::error(&mut writer, e.code.errno, e.code.sqlstate, &e.message);
        writer.flush().await?;
        return Ok(None);
    }
    // Only an authenticated connection counts against max_connections, so
    // sockets that never finish a handshake cannot lock users out.
    let Some(slot) = settings.admission.admit() else {
        result::error(&mut writer, 1040, "08004", "Too many connections");
        writer.flush().await?;
        return Ok(None);
    };
    if let Some(db) = hello.database.filter(|d| !d.is_empty()) {
        let name = String::from_utf8_lossy(&db).into_owned();
        if let Err(e) = conn.use_database(name).await {
            result::error(&mut writer, e.code.errno, e.code.sqlstate, &e.message);
            writer.flush().await?;
            return Ok(None);
        }
    }
    result::ok(
        &mut writer,
        &result::Ok {
            status: conn.status(),
            ..result::Ok::default()
        },
    );
    writer.flush().await?;
    reader.set_max_payload(settings.max_allowed_packet);
    Ok(Some((reader, writer, caps, slot, secure)))
}

/// The command phase of one connection.
struct CommandLoop {
    conn: Connection,
    reader: Reader,
    writer: Writer,
    /// The capabilities both sides have (CLIENT_MULTI_STATEMENTS may change
    /// with COM_SET_OPTION).
    caps: u32,
    statements: stmt::Statements,
    max_allowed_packet: usize,
    /// The connection is TLS.
    secure: bool,
    /// Held while the connection lives (released on drop).
    _slot: crate::AdmissionSlot,
}

/// Runs `statement`; a client that goes away meanwhile stops it (the
/// process's interrupt flag). Bytes that arrive meanwhile (pipelined
/// commands, a COM_QUIT before the close) stay buffered for after the reply.
async fn watch_client<T>(
    reader: &mut Reader,
    process: &crate::processes::Process,
    statement: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(statement);
    let mut watching = true;
    loop {
        tokio::select! {
            // The statement first: one answered at once (a cached read)
            // costs no read of the socket.
            biased;
            out = &mut statement => return out,
            more = reader.read_ahead(), if watching => match more {
                Ok(true) => watching = reader.buffered().len() < MAX_READ_AHEAD,
                Ok(false) | Err(_) => {
                    process.client_gone();
                    watching = false;
                }
            },
        }
    }
}

/// Flushes `writer` within `limit` (`net_write_timeout`).
async fn flush_within(writer: &mut Writer, limit: Duration) -> io::Result<()> {
    match tokio::time::timeout(limit, writer.flush()).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "reply not written within net_write_timeout",
        )),
    }
}

impl CommandLoop {
    async fn run(&mut self) -> io::Result<()> {
        loop {
            let limits = self.conn.timeouts();
            // Idle between commands: closed after wait_timeout without a
            // reply (what MariaDB 10.11 does; MySQL 8 sends 4031 first),
            // or at once when KILLed.
            let process = self.conn.process();
            let idle = tokio::select! {
                r = tokio::time::timeout(limits.idle, self.reader.readable()) => r,
                _ = process.wake.notified() => Ok(Ok(false)),
            };
            if process.killed() {
                return Ok(());
            }
            match idle {
                Err(_) => {
                    tracing::debug!(
                        connection = self.conn.connection_id(),
                        "closed after wait_timeout"
                    );
                    return Ok(());
                }
                Ok(Ok(false)) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(true)) => {}
            }
            // A packet that has begun must arrive whole within net_read_timeout.
            let Ok(next) = tokio::time::timeout(limits.read, self.reader.next()).await else {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "packet not received within net_read_timeout",
                ));
            };
            let packet = match next {
                Ok(Some(p)) => p,
                Ok(None) => return Ok(()),
                Err(FrameError::Io(e)) => return Err(e),
                Err(FrameError::TooLarge { seq }) => {
                    self.writer.set_seq(seq.wrapping_add(1));
                    let (errno, state, msg) = ER_PACKET_TOO_LARGE;
                    self.error(errno, state, msg);
                    return flush_within(&mut self.writer, limits.write).await;
                }
                Err(FrameError::OutOfOrder { seq }) => {
                    self.writer.set_seq(seq.wrapping_add(1));
                    self.error(1156, "08S01", "Got packets out of order");
                    return flush_within(&mut self.writer, limits.write).await;
                }
            };
            self.writer.set_seq(packet.seq.wrapping_add(1));
            if !self.command(&packet.payload).await? {
                return Ok(());
            }
            if self.writer.buffered_len() > 0 {
                flush_within(&mut self.writer, self.conn.timeouts().write).await?;
            }
            if self.conn.process().killed() {
                return Ok(());
            }
        }
    }

    fn error(&mut self, errno: u16, sqlstate: &str, message: &str) {
        self.conn.count_error(errno);
        result::error(&mut self.writer, errno, sqlstate, message);
    }

    fn wire_error(&mut self, e: &WireError) {
        result::error(&mut self.writer, e.code.errno, e.code.sqlstate, &e.message);
    }

    fn malformed(&mut self) {
        let (errno, state, msg) = ER_MALFORMED_PACKET;
        self.error(errno, state, msg);
    }

    fn ok(&mut self) {
        let ok = result::Ok {
            status: self.conn.status(),
            ..result::Ok::default()
        };
        result::ok(&mut self.writer, &ok);
    }

    fn unknown_statement(&mut self, id: u32, command: &str) {
        self.error(
            1243,
            "HY000",
            &format!("Unknown prepared statement handler ({id}) given to {command}"),
        );
    }

    /// Handles one command; false when the connection is to be closed.
    async fn command(&mut self, payload: &[u8]) -> io::Result<bool> {
        let Some((&byte, body)) = payload.split_first() else {
            // An empty packet is COM_SLEEP to MySQL: unknown.
            self.error(1047, "08S01", "Unknown command");
            return Ok(true);
        };
        match command::handling(byte) {
            Handling::Quit => return Ok(false),
            Handling::Refuse(r) => self.error(r.errno, r.sqlstate, r.message),
            Handling::Ping => self.ok(),
            Handling::Query => self.query(body).await?,
            // The REFRESH_GRANT bit reloads the grant tables; the others
            // (logs, tables, hosts, status...) have nothing to flush here.
            Handling::Refresh => {
                let grants = body.first().is_some_and(|flags| flags & 0x01 != 0);
                let sql: &[u8] = if grants {
                    b"FLUSH PRIVILEGES"
                } else {
                    b"FLUSH LOGS"
                };
                self.query(sql).await?
            }
            Handling::InitDb => self.init_db(body).await,
            Handling::Statistics => {
                let text = self.statistics();
                result::text(&mut self.writer, &text);
            }
            Handling::SetOption => match codec::Cursor::new(body).u16() {
                Ok(0) => {
                    self.caps |= CLIENT_MULTI_STATEMENTS;
                    let status = self.conn.status();
                    result::end(&mut self.writer, self.caps, 0, status);
                }
                Ok(1) => {
                    self.caps &= !CLIENT_MULTI_STATEMENTS;
                    let status = self.conn.status();
                    result::end(&mut self.writer, self.caps, 0, status);
                }
                Ok(_) => self.error(1047, "08S01", "Unknown command"),
                Err(_) => self.malformed(),
            },
            Handling::ResetConnection => {
                self.reset();
                self.ok();
            }
            Handling::ChangeUser => return self.change_user(body).await,
            Handling::StmtPrepare => self.prepare(body).await,
            Handling::StmtExecute => self.execute(body).await?,
            Handling::StmtSendLongData => self.long_data(body),
            Handling::StmtClose => {
                // No reply, even for an unknown id or a short packet.
                if let Ok(id) = stmt::statement_id(body) {
                    self.statements.remove(&id);
                    self.conn.close(id);
                }
            }
            Handling::StmtReset => match stmt::statement_id(body) {
                Err(_) => self.malformed(),
                Ok(id) => match self.statements.get_mut(&id) {
                    None => self.unknown_statement(id, "mysqld_stmt_reset"),
                    Some(s) => {
                        s.long_data.clear();
                        s.long_data_error = false;
                        self.ok();
                    }
                },
            },
            Handling::StmtFetch => match stmt::statement_id(body) {
                Err(_) => self.malformed(),
                Ok(id) if !self.statements.contains_key(&id) => {
                    self.unknown_statement(id, "mysqld_stmt_fetch")
                }
                // Executions never open a cursor: results come whole.
                Ok(id) => self.error(
                    1421,
                    "HY000",
                    &format!("The statement ({id}) has no open cursor."),
                ),
            },
        }
        Ok(true)
    }

    fn statistics(&self) -> String {
        let m = &self.conn.engine().metrics;
        let uptime = m.uptime_seconds().max(1);
        let questions = m.queries_count();
        format!(
            "Uptime: {uptime}  Threads: {}  Questions: {questions}  Slow queries: 0  Opens: 0  Open tables: 0  Queries per second avg: {:.3}",
            m.connections.get(),
            questions as f64 / uptime as f64
        )
    }

    fn reset(&mut self) {
        self.statements.clear();
        self.conn.reset();
    }

    /// Statement text from client bytes (see [`crate::sqltext::from_bytes`]);
    /// on failure (or for an empty text) the error is sent.
    fn text(&mut self, bytes: &[u8]) -> Option<String> {
        match crate::sqltext::from_bytes(bytes) {
            Ok(text) if text.trim().is_empty() => {
                self.error(1065, "42000", "Query was empty");
                None
            }
            Ok(text) => Some(text.into_owned()),
            Err(e) => {
                self.conn.count_error(e.code.errno);
                self.wire_error(&e);
                None
            }
        }
    }

    async fn query(&mut self, body: &[u8]) -> io::Result<()> {
        let Some(sql) = self.text(body) else {
            return Ok(());
        };
        let multi = self.caps & CLIENT_MULTI_STATEMENTS != 0;
        let outcomes = watch_client(
            &mut self.reader,
            self.conn.process(),
            self.conn.query(sql, multi),
        )
        .await;
        self.reply(outcomes, false).await
    }

    async fn init_db(&mut self, body: &[u8]) {
        let Ok(name) = std::str::from_utf8(body) else {
            let name = String::from_utf8_lossy(body);
            self.error(1049, "42000", &format!("Unknown database '{name}'"));
            return;
        };
        // Some clients (mysql-connector) send an empty name when none is set.
        let db = name.trim().trim_matches('`').to_string();
        if db.is_empty() {
            return self.ok();
        }
        match self.conn.use_database(db).await {
            Ok(()) => self.ok(),
            Err(e) => self.wire_error(&e),
        }
    }

    async fn change_user(&mut self, body: &[u8]) -> io::Result<bool> {
        let Ok(request) = ChangeUser::parse(body, self.caps) else {
            self.malformed();
            return Ok(true);
        };
        // The session is reset whatever the outcome: a failed change closes
        // the connection anyway.
        self.reset();
        let limits = self.conn.timeouts();
        let verdict = login::Exchange {
            reader: &mut self.reader,
            writer: &mut self.writer,
            conn: &self.conn,
            secure: self.secure,
            write_limit: limits.write,
            read_limit: limits.read,
        }
        .authenticate(
            &request.user,
            &request.auth_plugin,
            request.auth_response.clone(),
        )
        .await;
        match verdict {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.wire_error(&e);
                return Ok(false);
            }
            // The client left or stopped answering: close.
            Err(_) => return Ok(false),
        }
        if !request.database.is_empty() {
            let name = String::from_utf8_lossy(&request.database).into_owned();
            if let Err(e) = self.conn.use_database(name).await {
                self.wire_error(&e);
                return Ok(true);
            }
        }
        self.ok();
        Ok(true)
    }

    async fn prepare(&mut self, body: &[u8]) {
        let Some(sql) = self.text(body) else {
            return;
        };
        match self.conn.prepare(sql).await {
            Ok(p) => {
                let cols = wire_columns(&p.columns, &Default::default());
                self.statements.insert(
                    p.id,
                    stmt::Statement {
                        params: p.params,
                        columns: cols.len(),
                        ..stmt::Statement::default()
                    },
                );
                let status = self.conn.status();
                stmt::prepare_ok(
                    &mut self.writer,
                    self.caps,
                    p.id,
                    p.params,
                    &cols,
                    0,
                    status,
                );
            }
            Err(e) => self.wire_error(&e),
        }
    }

    fn long_data(&mut self, body: &[u8]) {
        // No reply in any case; a problem is reported by the next execution.
        let Ok((id, param, data)) = stmt::long_data(body) else {
            return;
        };
        let limit = self.max_allowed_packet;
        if let Some(s) = self.statements.get_mut(&id) {
            if usize::from(param) >= s.params {
                s.long_data_error = true;
                return;
            }
            let buf = s.long_data.entry(param).or_default();
            if buf.len() + data.len() > limit {
                s.long_data_error = true;
                return;
            }
            buf.extend_from_slice(data);
        }
    }

    async fn execute(&mut self, body: &[u8]) -> io::Result<()> {
        let Ok(id) = stmt::statement_id(body) else {
            self.malformed();
            return Ok(());
        };
        let Some(s) = self.statements.get_mut(&id) else {
            self.unknown_statement(id, "mysqld_stmt_execute");
            return Ok(());
        };
        let outcome = match stmt::execute_params(body, s) {
            Ok(values) => {
                watch_client(
                    &mut self.reader,
                    self.conn.process(),
                    self.conn.execute(id, values),
                )
                .await
            }
            Err(_) => self.conn.fail(WireError {
                code: crate::error::ER_WRONG_ARGUMENTS,
                message: "Incorrect arguments to mysqld_stmt_execute".into(),
            }),
        };
        self.reply(vec![outcome], true).await
    }

    /// Writes the replies to one command's statements: a result set or OK
    /// per statement, each but the last flagged SERVER_MORE_RESULTS_EXISTS;
    /// an error ends the reply (statements after it did not run).
    async fn reply(&mut self, outcomes: Vec<Outcome>, binary: bool) -> io::Result<()> {
        let n = outcomes.len();
        for (i, (outcome, warnings)) in outcomes.into_iter().enumerate() {
            let more = if i + 1 < n {
                result::SERVER_MORE_RESULTS_EXISTS
            } else {
                0
            };
            match outcome {
                Ok(Output::Rows { columns, rows }) => {
                    let cols = wire_columns(&columns, &rows);
                    let status = self.conn.status();
                    result::result_header(&mut self.writer, self.caps, &cols, status);
                    for row in rows.iter() {
                        let start = self.writer.begin_packet();
                        if binary {
                            crate::wire::binary_row(self.writer.buf(), &cols, row);
                        } else {
                            crate::wire::text_row(self.writer.buf(), &cols, row);
                        }
                        self.writer.end_packet(start);
                        self.writer.flush_if_large().await?;
                    }
                    // The statement's own warnings (not those an earlier
                    // one left for SHOW WARNINGS: `Session::carried_warnings`).
                    result::end(&mut self.writer, self.caps, warnings, status | more);
                }
                Ok(Output::Done {
                    affected_rows,
                    last_insert_id,
                    info,
                }) => {
                    let ok = result::Ok {
                        affected_rows,
                        last_insert_id,
                        status: self.conn.status() | more,
                        warnings,
                        info: info.render(warnings),
                    };
                    result::ok(&mut self.writer, &ok);
                }
                Err(e) => {
                    self.wire_error(&e);
                    break;
                }
            }
        }
        Ok(())
    }
}
