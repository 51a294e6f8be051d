//! Optional TLS (`--tls-cert/--tls-key`), terminated below the protocol
//! layers so that the packet limit, handshake rewrites and result patches in
//! [`crate::net`] see plain packets whichever way the client connects.
//!
//! MySQL switches to TLS in mid-handshake: the server's greeting offers
//! CLIENT_SSL, the client answers with a short SSLRequest, both sides run the
//! TLS handshake, and the client sends its real handshake response inside
//! TLS. opensrv-mysql's own TLS support would wrap our socket layers instead
//! of sitting under them, so the shim does the switch itself: it sends the
//! greeting (the same bytes opensrv-mysql would, plus CLIENT_SSL), reads the
//! client's first packet and either accepts TLS or keeps that packet for
//! opensrv-mysql, whose own greeting is then dropped by the writer
//! ([`crate::net::AuthFailure::skip_greeting`]).

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// A connection's byte streams, TLS or not.
pub type ReadStream = Box<dyn AsyncRead + Send + Unpin>;
pub type WriteStream = Box<dyn AsyncWrite + Send + Unpin>;

const CLIENT_SSL: u32 = 0x0000_0800;
/// The capabilities opensrv-mysql offers, plus CLIENT_MULTI_STATEMENTS,
/// CLIENT_MULTI_RESULTS (see `net`) and CLIENT_SSL.
const SERVER_CAPABILITIES: u32 = 0x0000_0200 // CLIENT_PROTOCOL_41
    | 0x0000_8000 // CLIENT_SECURE_CONNECTION
    | 0x0008_0000 // CLIENT_PLUGIN_AUTH
    | 0x0020_0000 // CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    | 0x0000_0008 // CLIENT_CONNECT_WITH_DB
    | 0x0100_0000 // CLIENT_DEPRECATE_EOF
    | 0x0001_0000 // CLIENT_MULTI_STATEMENTS
    | 0x0002_0000 // CLIENT_MULTI_RESULTS
    | CLIENT_SSL;
/// SERVER_STATUS_AUTOCOMMIT: a new session autocommits.
const STATUS_AUTOCOMMIT: u16 = 0x0002;
/// A client's first packet is small; anything larger is not a handshake.
const MAX_FIRST_PACKET: usize = 64 * 1024;

/// Loads a PEM certificate chain and private key into a TLS server config.
/// The error names the file and what is wrong, for the start-up message.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("reading TLS certificate {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "TLS certificate {} holds no certificate",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("reading TLS private key {}: {e}", key.display()))?;
    let config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS certificate and key do not form a usable pair: {e}"))?;
    Ok(Arc::new(config))
}

/// The server greeting (HandshakeV10) for a connection, as one packet.
pub(crate) fn greeting(connection_id: u32, scramble: &[u8; 20], version: &str) -> Vec<u8> {
    let caps = SERVER_CAPABILITIES.to_le_bytes();
    let mut p = vec![10];
    p.extend_from_slice(version.as_bytes());
    p.push(0);
    p.extend_from_slice(&connection_id.to_le_bytes());
    p.extend_from_slice(&scramble[..8]);
    p.push(0);
    p.extend_from_slice(&caps[..2]);
    p.push(0x21); // utf8_general_ci
    p.extend_from_slice(&STATUS_AUTOCOMMIT.to_le_bytes());
    p.extend_from_slice(&caps[2..]);
    p.push(21); // length of the scramble plus its NUL
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(&scramble[8..]);
    p.push(0);
    p.extend_from_slice(b"mysql_native_password\0");
    let mut packet = vec![p.len() as u8, (p.len() >> 8) as u8, 0, 0];
    packet.extend_from_slice(&p);
    packet
}

/// Greets the client and switches to TLS if it asks for it. Returns the
/// streams opensrv-mysql should use and, for a client that stayed in plain
/// text, its first packet (already read) in front of the read stream.
pub(crate) async fn accept(
    mut stream: TcpStream,
    config: Arc<ServerConfig>,
    connection_id: u32,
    scramble: &[u8; 20],
) -> io::Result<(ReadStream, WriteStream)> {
    let version = crate::vars::SERVER_VERSION;
    stream
        .write_all(&greeting(connection_id, scramble, version))
        .await?;
    stream.flush().await?;
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if len > MAX_FIRST_PACKET {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "oversize handshake",
        ));
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).await?;
    let caps = payload
        .get(..4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .unwrap_or(0);
    // An SSLRequest is the first 32 bytes of a handshake response.
    if caps & CLIENT_SSL != 0 && len == 32 {
        let tls = TlsAcceptor::from(config).accept(stream).await?;
        let (r, w) = tokio::io::split(tls);
        return Ok((Box::new(r), Box::new(w)));
    }
    let mut first = header.to_vec();
    first.extend_from_slice(&payload);
    let (r, w) = stream.into_split();
    Ok((Box::new(std::io::Cursor::new(first).chain(r)), Box::new(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_layout() {
        let scramble = [7u8; 20];
        let g = greeting(42, &scramble, "5.7.0-ladle");
        let payload = &g[4..];
        assert_eq!(usize::from(g[0]) | usize::from(g[1]) << 8, payload.len());
        assert_eq!(g[3], 0, "greeting is packet 0");
        assert_eq!(payload[0], 10);
        let after_version = 1 + "5.7.0-ladle".len() + 1;
        assert_eq!(
            &payload[after_version..after_version + 4],
            &42u32.to_le_bytes()
        );
        let caps_low = after_version + 4 + 8 + 1;
        let low = u16::from_le_bytes([payload[caps_low], payload[caps_low + 1]]);
        assert_ne!(u32::from(low) & CLIENT_SSL, 0);
        assert!(payload.ends_with(b"mysql_native_password\0"));
    }

    #[test]
    fn bad_files_are_reported_by_name() {
        let err =
            server_config(Path::new("/no/such/cert.pem"), Path::new("/no/key.pem")).unwrap_err();
        assert!(err.contains("/no/such/cert.pem"), "{err}");
    }
}
