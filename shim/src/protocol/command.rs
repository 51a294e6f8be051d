//! The command table: what the server does with each of the 256 possible
//! command bytes (the first byte of a client packet after the handshake).

/// An error reply fixed by the command byte alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub errno: u16,
    pub sqlstate: &'static str,
    pub message: &'static str,
}

const UNKNOWN_COMMAND: Refusal = Refusal {
    errno: 1047,
    sqlstate: "08S01",
    message: "Unknown command",
};

/// What a command byte leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handling {
    /// COM_QUIT: close the connection, no reply.
    Quit,
    InitDb,
    Query,
    /// COM_STATISTICS: a bare text packet.
    Statistics,
    /// COM_REFRESH: its FLUSH statement (`mariadb-dump --flush-logs` and
    /// `mysqladmin flush-logs` send it).
    Refresh,
    Ping,
    ChangeUser,
    ResetConnection,
    SetOption,
    StmtPrepare,
    StmtExecute,
    /// No reply.
    StmtSendLongData,
    /// No reply.
    StmtClose,
    StmtReset,
    StmtFetch,
    /// An error reply, nothing else.
    Refuse(Refusal),
}

/// The handling of command byte `byte`. MySQL's answers for the commands
/// Ladle does not implement: 1047 for unknown (and removed) commands,
/// access denied for the administrative ones a client may not use here,
/// 1236 for binary log dumps (there is no binary log).
pub fn handling(byte: u8) -> Handling {
    match byte {
        0x01 => Handling::Quit,
        0x02 => Handling::InitDb,
        0x03 => Handling::Query,
        0x07 => Handling::Refresh,
        0x08 => Handling::Refuse(Refusal {
            errno: 1227,
            sqlstate: "42000",
            message: "Access denied; you need (at least one of) the SHUTDOWN privilege(s) for this operation",
        }),
        0x09 => Handling::Statistics,
        // COM_PROCESS_KILL and COM_DEBUG need SUPER (or CONNECTION_ADMIN).
        0x0C | 0x0D => Handling::Refuse(Refusal {
            errno: 1227,
            sqlstate: "42000",
            message: "Access denied; you need (at least one of) the SUPER privilege(s) for this operation",
        }),
        0x0E => Handling::Ping,
        0x11 => Handling::ChangeUser,
        // COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID.
        0x12 | 0x1E => Handling::Refuse(Refusal {
            errno: 1236,
            sqlstate: "HY000",
            message: "Binary log is not open",
        }),
        0x16 => Handling::StmtPrepare,
        0x17 => Handling::StmtExecute,
        0x18 => Handling::StmtSendLongData,
        0x19 => Handling::StmtClose,
        0x1A => Handling::StmtReset,
        0x1B => Handling::SetOption,
        0x1C => Handling::StmtFetch,
        0x1F => Handling::ResetConnection,
        // COM_SLEEP, COM_FIELD_LIST (deprecated), COM_CREATE_DB and
        // COM_DROP_DB (removed), COM_PROCESS_INFO, COM_CONNECT,
        // COM_TIME, COM_DELAYED_INSERT, COM_TABLE_DUMP, COM_CONNECT_OUT,
        // COM_REGISTER_SLAVE, COM_DAEMON, COM_CLONE and every byte above.
        _ => Handling::Refuse(UNKNOWN_COMMAND),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_has_a_handling() {
        let mut refused = 0;
        for b in 0..=255u8 {
            if let Handling::Refuse(r) = handling(b) {
                refused += 1;
                assert_eq!(r.sqlstate.len(), 5);
            }
        }
        // 15 commands are served; the rest get an error.
        assert_eq!(refused, 256 - 15);
        assert_eq!(handling(0x07), Handling::Refresh);
        assert_eq!(handling(0x04), Handling::Refuse(UNKNOWN_COMMAND));
        assert_eq!(handling(0xFF), Handling::Refuse(UNKNOWN_COMMAND));
    }
}
