//! The authentication exchange: from the client's first auth response (in
//! its handshake response, or COM_CHANGE_USER) to the verdict, by the
//! plugin of the account it logs in as.
//!
//! - `mysql_native_password` accounts (and the superuser): a client that
//!   starts with `caching_sha2_password` is answered by its fast
//!   authentication when the account's SHA-256 hash proves the response;
//!   else it is switched to the native plugin, whose response decides.
//! - `caching_sha2_password` accounts, as MySQL 8 runs them: a client that
//!   started with another plugin is switched to this one; then fast
//!   authentication against the cache of passwords proven since start-up
//!   (`0x01 0x03`, OK); on a miss, `0x01 0x04` (perform full
//!   authentication) and the client sends its password: over TLS in clear
//!   (NUL-terminated), over plaintext RSA-OAEP encrypted after XOR with the
//!   scramble, asking for the server's public key first (`0x02`, answered
//!   with the PEM) unless it has it. A client that sends anything else over
//!   plaintext (a clear password, a ciphertext that does not decrypt) is
//!   refused as a wrong password is.

use std::io;
use std::time::Duration;

use super::handshake::{
    auth_more_data, auth_switch_request, CACHING_SHA2_PASSWORD, FAST_AUTH_SUCCESS, NATIVE_PASSWORD,
    PERFORM_FULL_AUTHENTICATION, REQUEST_PUBLIC_KEY,
};
use super::packet::{FrameError, PacketReader, PacketWriter};
use crate::accounts::AuthPlugin;
use crate::error::WireError;
use crate::handler::Connection;
use crate::tls::{ReadStream, WriteStream};

/// One authentication exchange on a connection.
pub(super) struct Exchange<'a> {
    pub reader: &'a mut PacketReader<ReadStream>,
    pub writer: &'a mut PacketWriter<WriteStream>,
    pub conn: &'a Connection,
    /// The connection is TLS.
    pub secure: bool,
    /// Bounds each flush of the server's packets.
    pub write_limit: Duration,
    /// Bounds each wait for the client's next packet.
    pub read_limit: Duration,
}

impl Exchange<'_> {
    /// Authenticates `user`, whose client answered with `plugin` (empty:
    /// the native one) and `response`. `Ok(Ok(()))`: logged in (the
    /// caller sends the OK); `Ok(Err(e))`: refused (the caller sends `e`);
    /// `Err`: the connection broke or the client stopped answering.
    pub async fn authenticate(
        &mut self,
        user: &[u8],
        plugin: &[u8],
        response: Vec<u8>,
    ) -> io::Result<Result<(), WireError>> {
        match self.conn.account_plugin(user) {
            AuthPlugin::NativePassword => self.native(user, plugin, response).await,
            AuthPlugin::CachingSha2Password => self.caching_sha2(user, plugin, response).await,
        }
    }

    async fn native(
        &mut self,
        user: &[u8],
        plugin: &[u8],
        response: Vec<u8>,
    ) -> io::Result<Result<(), WireError>> {
        if plugin == CACHING_SHA2_PASSWORD.as_bytes() {
            match self.conn.authenticate_sha2(user, &response, self.secure) {
                Some(Ok(())) => {
                    self.writer.packet(&FAST_AUTH_SUCCESS);
                    return Ok(self.counted(Ok(()), "sha2_fast"));
                }
                Some(Err(e)) => return Ok(Err(e)),
                None => {}
            }
        }
        let response = if plugin.is_empty() || plugin == NATIVE_PASSWORD.as_bytes() {
            response
        } else {
            // A mysql_native_password response to the same scramble.
            self.switch_to(NATIVE_PASSWORD).await?
        };
        let verdict = self.conn.authenticate(user, &response, self.secure);
        Ok(self.counted(verdict, "native"))
    }

    async fn caching_sha2(
        &mut self,
        user: &[u8],
        plugin: &[u8],
        response: Vec<u8>,
    ) -> io::Result<Result<(), WireError>> {
        let response = if plugin == CACHING_SHA2_PASSWORD.as_bytes() {
            response
        } else {
            self.switch_to(CACHING_SHA2_PASSWORD).await?
        };
        // No password at all (libmysqlclient sends one NUL byte): only an
        // account without one logs in, with no fast authentication.
        if response.is_empty() || response == [0] {
            return Ok(self
                .conn
                .authenticate_password(user, Some(&b""[..]), self.secure));
        }
        if let Some(verdict) = self.conn.authenticate_sha2(user, &response, self.secure) {
            if verdict.is_ok() {
                self.writer.packet(&FAST_AUTH_SUCCESS);
            }
            return Ok(self.counted(verdict, "sha2_fast"));
        }
        self.writer.packet(&PERFORM_FULL_AUTHENTICATION);
        let password = self.full_authentication().await?;
        let verdict = self
            .conn
            .authenticate_password(user, password.as_deref(), self.secure);
        let method = if self.secure {
            "sha2_full_tls"
        } else {
            "sha2_full_rsa"
        };
        Ok(self.counted(verdict, method))
    }

    /// Counts a successful login in `ladle_logins_total` by `method`.
    fn counted(&self, verdict: Result<(), WireError>, method: &str) -> Result<(), WireError> {
        if verdict.is_ok() {
            let logins = &self.conn.engine().metrics.logins;
            logins.with_label_values(&[method]).inc();
        }
        verdict
    }

    /// The password the client sends after "perform full authentication";
    /// `None` when it sent none that can be read.
    async fn full_authentication(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut packet = self.next_packet().await?;
        if self.secure {
            let end = packet.iter().position(|&b| b == 0).unwrap_or(packet.len());
            packet.truncate(end);
            return Ok(Some(packet));
        }
        let Some(keys) = self.conn.engine().rsa_keys.clone() else {
            // No key pair: a password cannot cross plaintext.
            return Ok(None);
        };
        if packet == [REQUEST_PUBLIC_KEY] {
            self.writer
                .packet(&auth_more_data(keys.public_pem().as_bytes()));
            packet = self.next_packet().await?;
        }
        // RSA decryption is a millisecond of CPU: off the async workers.
        let scramble = self.conn.scramble();
        let password =
            tokio::task::spawn_blocking(move || keys.decrypt_password(&packet, &scramble)).await;
        Ok(password.ok().flatten())
    }

    /// Asks the client to answer the connection's scramble with `plugin`;
    /// its answer.
    async fn switch_to(&mut self, plugin: &str) -> io::Result<Vec<u8>> {
        self.writer
            .packet(&auth_switch_request(plugin, &self.conn.scramble()));
        self.next_packet().await
    }

    /// Sends what is written so far and reads the client's next packet
    /// (the server's next packet continues its sequence).
    async fn next_packet(&mut self) -> io::Result<Vec<u8>> {
        match tokio::time::timeout(self.write_limit, self.writer.flush()).await {
            Ok(flushed) => flushed?,
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "client did not read during authentication",
                ))
            }
        }
        let read = tokio::time::timeout(self.read_limit, self.reader.next()).await;
        match read {
            Ok(Ok(Some(p))) => {
                self.writer.set_seq(p.seq.wrapping_add(1));
                Ok(p.payload)
            }
            Ok(Ok(None)) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "client left during authentication",
            )),
            Ok(Err(FrameError::Io(e))) => Err(e),
            Ok(Err(_)) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad framing during authentication",
            )),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "client did not answer during authentication",
            )),
        }
    }
}
