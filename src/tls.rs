//! Real TLS handshakes over loopback, used to prove trust.
//!
//! [`handshake`] starts a rustls server on 127.0.0.1 serving a chain, and
//! connects a rustls client that trusts a bundle, with the certificate
//! verification time of both pinned to a given instant. Every member of the
//! bundle is a trust anchor, self-signed or not (webpki anchors are a
//! subject and a key), which is how bridge A works for clients.

use pki_core::{Bundle, Certificate, PrivateKey};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::time_provider::TimeProvider;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// Why a handshake did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HandshakeError(pub String);

fn err(context: &str, e: impl std::fmt::Display) -> HandshakeError {
    HandshakeError(format!("{context}: {e}"))
}

/// A clock stopped at one instant.
#[derive(Debug)]
struct PinnedTime(UnixTime);

impl TimeProvider for PinnedTime {
    fn current_time(&self) -> Option<UnixTime> {
        Some(self.0)
    }
}

const TIMEOUT: Duration = Duration::from_secs(5);
const PING: &[u8] = b"ping";

/// Runs a TLS 1.3 handshake on loopback: the server presents `server_chain`
/// (leaf first) with `server_key`; the client trusts `client_bundle` and
/// expects `server_name`; both verify certificates as of `at`. Exchanges a
/// few bytes to prove the session works. Fails with the client's error.
pub fn handshake(
    server_chain: &[Certificate],
    server_key: &PrivateKey,
    client_bundle: &Bundle,
    server_name: &str,
    at: OffsetDateTime,
) -> Result<(), HandshakeError> {
    let secs = u64::try_from(at.unix_timestamp()).map_err(|e| err("time before 1970", e))?;
    let time: Arc<dyn TimeProvider> = Arc::new(PinnedTime(UnixTime::since_unix_epoch(
        Duration::from_secs(secs),
    )));
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    let chain: Vec<CertificateDer<'static>> = server_chain
        .iter()
        .map(|c| CertificateDer::from(c.der().to_vec()))
        .collect();
    let key_der = server_key
        .to_pkcs8_der()
        .map_err(|e| err("server key", e))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der.to_vec()));
    let server_config = ServerConfig::builder_with_details(provider.clone(), time.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| err("server config", e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| err("server certificate", e))?;

    let mut roots = RootCertStore::empty();
    for c in client_bundle.certs() {
        roots
            .add(CertificateDer::from(c.der().to_vec()))
            .map_err(|e| err(&format!("bundle certificate {}", c.id()), e))?;
    }
    let client_config = ClientConfig::builder_with_details(provider, time)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("client config", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(server_name.to_string()).map_err(|e| err("server name", e))?;

    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| err("bind", e))?;
    let addr = listener.local_addr().map_err(|e| err("bind", e))?;
    let server_config = Arc::new(server_config);
    let server = std::thread::spawn(move || -> Result<(), HandshakeError> {
        let (tcp, _) = listener.accept().map_err(|e| err("accept", e))?;
        tcp.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| err("server socket", e))?;
        tcp.set_write_timeout(Some(TIMEOUT))
            .map_err(|e| err("server socket", e))?;
        let conn = ServerConnection::new(server_config).map_err(|e| err("server", e))?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let mut buf = [0u8; 4];
        tls.read_exact(&mut buf)
            .map_err(|e| err("server read", e))?;
        tls.write_all(&buf).map_err(|e| err("server write", e))?;
        tls.flush().map_err(|e| err("server flush", e))
    });

    let client = (|| -> Result<(), HandshakeError> {
        let mut tcp = TcpStream::connect(addr).map_err(|e| err("connect", e))?;
        tcp.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| err("client socket", e))?;
        tcp.set_write_timeout(Some(TIMEOUT))
            .map_err(|e| err("client socket", e))?;
        let mut conn =
            ClientConnection::new(Arc::new(client_config), name).map_err(|e| err("client", e))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp)
                .map_err(|e| HandshakeError(e.to_string()))?;
        }
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        tls.write_all(PING).map_err(|e| err("client write", e))?;
        let mut buf = [0u8; 4];
        tls.read_exact(&mut buf)
            .map_err(|e| err("client read", e))?;
        if buf != PING {
            return Err(HandshakeError("echo mismatch".into()));
        }
        Ok(())
    })();
    // The server sees the client's alert or EOF when the client fails; its
    // own error then adds nothing, so the client's decides.
    let server_result = server
        .join()
        .map_err(|_| HandshakeError("server thread panicked".into()))?;
    client.and(server_result)
}
