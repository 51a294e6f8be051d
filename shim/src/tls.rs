//! Optional TLS (`--tls-cert/--tls-key`): loading the certificate and key.
//!
//! MySQL switches to TLS in mid-handshake: the server's greeting offers
//! CLIENT_SSL, the client answers with a short SSLRequest, both sides run the
//! TLS handshake, and the client sends its real handshake response inside
//! TLS. The protocol layer does the switch ([`crate::protocol`]'s
//! handshake), so everything above it sees plain packets.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::ServerConfig;

/// A connection's byte streams, TLS or not.
pub type ReadStream = Box<dyn AsyncRead + Send + Unpin>;
pub type WriteStream = Box<dyn AsyncWrite + Send + Unpin>;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_reported_by_name() {
        let err =
            server_config(Path::new("/no/such/cert.pem"), Path::new("/no/key.pem")).unwrap_err();
        assert!(err.contains("/no/such/cert.pem"), "{err}");
    }
}
