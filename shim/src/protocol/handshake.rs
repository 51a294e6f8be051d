//! The connection phase's messages: the server's greeting (HandshakeV10),
//! the client's handshake response (or SSL request), AuthSwitchRequest and
//! AuthMoreData (the exchange itself is [`super::login`]).

use super::codec::{Cursor, Decoded, Malformed};

pub const CLIENT_LONG_PASSWORD: u32 = 0x0000_0001;
pub const CLIENT_FOUND_ROWS: u32 = 0x0000_0002;
pub const CLIENT_LONG_FLAG: u32 = 0x0000_0004;
pub const CLIENT_CONNECT_WITH_DB: u32 = 0x0000_0008;
pub const CLIENT_PROTOCOL_41: u32 = 0x0000_0200;
/// The client is interactive (its `wait_timeout` is `interactive_timeout`).
pub const CLIENT_INTERACTIVE: u32 = 0x0000_0400;
pub const CLIENT_SSL: u32 = 0x0000_0800;
pub const CLIENT_TRANSACTIONS: u32 = 0x0000_2000;
pub const CLIENT_SECURE_CONNECTION: u32 = 0x0000_8000;
pub const CLIENT_MULTI_STATEMENTS: u32 = 0x0001_0000;
pub const CLIENT_MULTI_RESULTS: u32 = 0x0002_0000;
pub const CLIENT_PS_MULTI_RESULTS: u32 = 0x0004_0000;
pub const CLIENT_PLUGIN_AUTH: u32 = 0x0008_0000;
pub const CLIENT_CONNECT_ATTRS: u32 = 0x0010_0000;
pub const CLIENT_PLUGIN_AUTH_LENENC: u32 = 0x0020_0000;
pub const CLIENT_DEPRECATE_EOF: u32 = 0x0100_0000;

/// What the server offers (CLIENT_SSL is added when TLS is configured).
/// Not offered: CLIENT_LOCAL_FILES (no LOAD DATA LOCAL),
/// CLIENT_SESSION_TRACK.
pub const SERVER_CAPABILITIES: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_FOUND_ROWS
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_CONNECT_ATTRS
    | CLIENT_PLUGIN_AUTH_LENENC
    | CLIENT_DEPRECATE_EOF;

pub const NATIVE_PASSWORD: &str = "mysql_native_password";
/// MySQL 8's default plugin (see [`super::login`]).
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
/// AuthMoreData of `caching_sha2_password`: fast authentication succeeded
/// (an OK packet follows).
pub const FAST_AUTH_SUCCESS: [u8; 2] = [0x01, 0x03];
/// AuthMoreData of `caching_sha2_password`: the client must send its
/// password (in clear over TLS, else RSA-encrypted).
pub const PERFORM_FULL_AUTHENTICATION: [u8; 2] = [0x01, 0x04];
/// A `caching_sha2_password` client's request for the server's RSA public
/// key (the whole packet).
pub const REQUEST_PUBLIC_KEY: u8 = 0x02;

/// utf8mb4_general_ci, the collation the greeting announces.
pub const GREETING_COLLATION: u8 = 45;

/// The greeting payload (protocol version 10).
pub fn greeting(
    connection_id: u32,
    scramble: &[u8; 20],
    version: &str,
    capabilities: u32,
    status: u16,
) -> Vec<u8> {
    let caps = capabilities.to_le_bytes();
    let mut p = vec![10];
    p.extend_from_slice(version.as_bytes());
    p.push(0);
    p.extend_from_slice(&connection_id.to_le_bytes());
    p.extend_from_slice(&scramble[..8]);
    p.push(0);
    p.extend_from_slice(&caps[..2]);
    p.push(GREETING_COLLATION);
    p.extend_from_slice(&status.to_le_bytes());
    p.extend_from_slice(&caps[2..]);
    p.push(21); // length of the scramble plus its NUL
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(&scramble[8..]);
    p.push(0);
    p.extend_from_slice(NATIVE_PASSWORD.as_bytes());
    p.push(0);
    p
}

/// A client's HandshakeResponse41 (or the SSLRequest prefix of one).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HandshakeResponse {
    pub capabilities: u32,
    pub max_packet: u32,
    pub collation: u8,
    pub user: Vec<u8>,
    pub auth_response: Vec<u8>,
    pub database: Option<Vec<u8>>,
    /// Empty if the client sent none (then it means the native plugin).
    pub auth_plugin: Vec<u8>,
}

impl HandshakeResponse {
    /// Whether this is only an SSLRequest: the client switches to TLS and
    /// sends the full response inside it.
    pub fn is_ssl_request(payload: &[u8]) -> bool {
        payload.len() == 32
            && Cursor::new(payload)
                .u32()
                .is_ok_and(|caps| caps & CLIENT_SSL != 0)
    }

    pub fn parse(payload: &[u8]) -> Decoded<HandshakeResponse> {
        let mut c = Cursor::new(payload);
        let capabilities = c.u32()?;
        if capabilities & CLIENT_PROTOCOL_41 == 0 {
            // Protocol 320 clients (pre-4.1) are not supported.
            return Err(Malformed);
        }
        let max_packet = c.u32()?;
        let collation = c.u8()?;
        c.take(23)?;
        let user = c.nul_bytes()?.to_vec();
        let auth_response = if capabilities & CLIENT_PLUGIN_AUTH_LENENC != 0 {
            c.lenenc_bytes()?.to_vec()
        } else if capabilities & CLIENT_SECURE_CONNECTION != 0 {
            let n = c.u8()?;
            c.take(usize::from(n))?.to_vec()
        } else {
            c.nul_or_rest().to_vec()
        };
        let database = if capabilities & CLIENT_CONNECT_WITH_DB != 0 && !c.is_empty() {
            Some(c.nul_or_rest().to_vec())
        } else {
            None
        };
        let auth_plugin = if capabilities & CLIENT_PLUGIN_AUTH != 0 && !c.is_empty() {
            c.nul_or_rest().to_vec()
        } else {
            Vec::new()
        };
        // Connection attributes follow; nothing here needs them.
        Ok(HandshakeResponse {
            capabilities,
            max_packet,
            collation,
            user,
            auth_response,
            database,
            auth_plugin,
        })
    }

    /// Whether the auth response was made for `mysql_native_password`
    /// (otherwise the server asks the client to switch to it).
    pub fn uses_native_password(&self) -> bool {
        self.auth_plugin.is_empty() || self.auth_plugin == NATIVE_PASSWORD.as_bytes()
    }
}

/// AuthSwitchRequest to `plugin` with `scramble`.
pub fn auth_switch_request(plugin: &str, scramble: &[u8; 20]) -> Vec<u8> {
    let mut p = vec![0xFE];
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    p.extend_from_slice(scramble);
    p.push(0);
    p
}

/// AuthMoreData: `data` for the client's authentication plugin.
pub fn auth_more_data(data: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(1 + data.len());
    p.push(0x01);
    p.extend_from_slice(data);
    p
}

/// COM_CHANGE_USER's payload (after the command byte).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChangeUser {
    pub user: Vec<u8>,
    pub auth_response: Vec<u8>,
    pub database: Vec<u8>,
    pub auth_plugin: Vec<u8>,
}

impl ChangeUser {
    pub fn parse(payload: &[u8], client_caps: u32) -> Decoded<ChangeUser> {
        let mut c = Cursor::new(payload);
        let user = c.nul_bytes()?.to_vec();
        let auth_response = if client_caps & CLIENT_SECURE_CONNECTION != 0 {
            let n = c.u8()?;
            c.take(usize::from(n))?.to_vec()
        } else {
            c.nul_bytes()?.to_vec()
        };
        let database = c.nul_or_rest().to_vec();
        if c.remaining() >= 2 {
            c.u16()?; // character set
        }
        let auth_plugin = if client_caps & CLIENT_PLUGIN_AUTH != 0 && !c.is_empty() {
            c.nul_or_rest().to_vec()
        } else {
            Vec::new()
        };
        Ok(ChangeUser {
            user,
            auth_response,
            database,
            auth_plugin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn response(plugin: &str, auth: &[u8], db: Option<&str>) -> Vec<u8> {
        let mut caps = CLIENT_PLUGIN_AUTH | CLIENT_SECURE_CONNECTION | CLIENT_PROTOCOL_41;
        if db.is_some() {
            caps |= CLIENT_CONNECT_WITH_DB;
        }
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&[0, 0, 0, 1, 45]);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(b"root\0");
        p.push(auth.len() as u8);
        p.extend_from_slice(auth);
        if let Some(d) = db {
            p.extend_from_slice(d.as_bytes());
            p.push(0);
        }
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
        p
    }

    #[test]
    fn handshake_response_parses() {
        let r = HandshakeResponse::parse(&response("caching_sha2_password", &[7; 32], Some("db")))
            .unwrap();
        assert_eq!(r.user, b"root");
        assert_eq!(r.auth_response, vec![7; 32]);
        assert_eq!(r.database.as_deref(), Some(&b"db"[..]));
        assert!(!r.uses_native_password());
        let r = HandshakeResponse::parse(&response(NATIVE_PASSWORD, &[1; 20], None)).unwrap();
        assert!(r.uses_native_password());
        assert_eq!(r.database, None);
        // Every truncation is an error or a shorter valid parse, never a panic.
        let full = response(NATIVE_PASSWORD, &[1; 20], Some("x"));
        for n in 0..full.len() {
            let _ = HandshakeResponse::parse(&full[..n]);
        }
    }

    #[test]
    fn greeting_layout() {
        let g = greeting(
            42,
            &[7; 20],
            "8.0.34-ladle",
            SERVER_CAPABILITIES | CLIENT_SSL,
            2,
        );
        assert_eq!(g[0], 10);
        let after_version = 1 + "8.0.34-ladle".len() + 1;
        assert_eq!(&g[after_version..after_version + 4], &42u32.to_le_bytes());
        let caps_low = after_version + 4 + 8 + 1;
        let low = u16::from_le_bytes([g[caps_low], g[caps_low + 1]]);
        assert_ne!(u32::from(low) & CLIENT_SSL, 0);
        assert!(g.ends_with(b"mysql_native_password\0"));
    }
}
