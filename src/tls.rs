//! Real TLS handshakes over loopback, used to prove trust.
//!
//! [`handshake`] starts a rustls server on 127.0.0.1 (an ephemeral port, in
//! its own thread) that presents a serving chain, and connects a rustls
//! client that trusts a bundle. The certificate verification time of both
//! sides is pinned to a given instant, so a test can ask "would a client
//! with this bundle trust this server at that moment?" for any moment of a
//! rotation without waiting for it.
//!
//! Every member of the bundle is a trust anchor, self-signed or not: webpki
//! anchors are a subject and a key, which is how bridge A (the old CA
//! re-signed by the new key) works for clients.
//!
//! Everything is bounded: sockets time out after [`TIMEOUT`], the server
//! gives up accepting after the same time, and the server thread is always
//! joined before returning.

use pki_core::{Bundle, Certificate, PrivateKey};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::time_provider::TimeProvider;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// How long any single socket operation, or waiting for the client to
/// connect, may take before the handshake is abandoned.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// What the client sends once the handshake is done.
const PING: &[u8] = b"ping";
/// What the server answers.
const PONG: &[u8] = b"pong";

/// Why a handshake did not complete.
///
/// The `Display` form is one line. For [`HandshakeError::Tls`] it is the
/// client's rustls error as rustls prints it, e.g.
/// `invalid peer certificate: UnknownIssuer`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The inputs cannot make a TLS configuration: a time before 1970, a key
    /// or chain rustls refuses, a bundle certificate that is not a usable
    /// trust anchor, or an invalid server name. Nothing was sent.
    #[error("{0}")]
    Setup(String),
    /// The client's TLS stack refused the session. This is the answer to
    /// "does the client trust the server": certificate errors are
    /// `rustls::Error::InvalidCertificate(..)`.
    #[error("{0}")]
    Tls(rustls::Error),
    /// The session failed for another reason: loopback socket error,
    /// timeout, a failure on the server side while the client was
    /// satisfied, or application data that did not round-trip.
    #[error("{0}")]
    Session(String),
}

fn setup(context: &str, e: impl std::fmt::Display) -> HandshakeError {
    HandshakeError::Setup(format!("{context}: {e}"))
}

fn session(context: &str, e: impl std::fmt::Display) -> HandshakeError {
    HandshakeError::Session(format!("{context}: {e}"))
}

/// Client-side I/O errors carry rustls's own error when TLS failed.
fn client_error(context: &str, e: std::io::Error) -> HandshakeError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => HandshakeError::Tls(tls.clone()),
        None => session(context, e),
    }
}

/// A clock stopped at one instant.
#[derive(Debug)]
struct PinnedTime(UnixTime);

impl TimeProvider for PinnedTime {
    fn current_time(&self) -> Option<UnixTime> {
        Some(self.0)
    }
}

/// Runs a TLS handshake on loopback and returns `Ok(())` when the client
/// trusted the server and a few application bytes went both ways.
///
/// The server presents `server_chain` (leaf first, then any intermediates,
/// such as bridge B) with `server_key`. The client trusts every certificate
/// of `client_bundle` as an anchor and expects `server_name` (a DNS name or
/// an IP address). Both sides verify certificates as of `at`, whatever the
/// real clock says. When the client refuses, the error is the client's
/// (see [`HandshakeError::Tls`]).
pub fn handshake(
    server_chain: &[Certificate],
    server_key: &PrivateKey,
    client_bundle: &Bundle,
    server_name: &str,
    at: OffsetDateTime,
) -> Result<(), HandshakeError> {
    let secs = u64::try_from(at.unix_timestamp())
        .map_err(|_| setup("verification time", format!("{at} is before 1970")))?;
    let time: Arc<dyn TimeProvider> = Arc::new(PinnedTime(UnixTime::since_unix_epoch(
        Duration::from_secs(secs),
    )));
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    // Server side.
    if server_chain.is_empty() {
        return Err(setup("server chain", "empty"));
    }
    let chain: Vec<CertificateDer<'static>> = server_chain
        .iter()
        .map(|c| CertificateDer::from(c.der().to_vec()))
        .collect();
    let key_der = server_key
        .to_pkcs8_der()
        .map_err(|e| setup("server key", e))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der.to_vec()));
    let server_config = ServerConfig::builder_with_details(provider.clone(), time.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| setup("server config", e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| setup("server certificate", e))?;

    // Client side.
    let mut roots = RootCertStore::empty();
    for c in client_bundle.certs() {
        roots
            .add(CertificateDer::from(c.der().to_vec()))
            .map_err(|e| setup(&format!("bundle certificate {}", c.id()), e))?;
    }
    if roots.is_empty() {
        return Err(setup("client bundle", "empty"));
    }
    let client_config = ClientConfig::builder_with_details(provider, time)
        .with_safe_default_protocol_versions()
        .map_err(|e| setup("client config", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name =
        ServerName::try_from(server_name.to_string()).map_err(|e| setup("server name", e))?;
    let client_conn =
        ClientConnection::new(Arc::new(client_config), name).map_err(|e| setup("client", e))?;

    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| session("bind", e))?;
    let addr = listener.local_addr().map_err(|e| session("bind", e))?;
    let server_config = Arc::new(server_config);
    let server = std::thread::Builder::new()
        .name("pki-tls-server".into())
        .spawn(move || serve(&listener, server_config))
        .map_err(|e| session("server thread", e))?;

    let client = run_client(client_conn, addr);
    let server_result = server
        .join()
        .map_err(|_| HandshakeError::Session("server thread panicked".into()))?;
    // When the client refuses, the server only sees its alert or EOF: the
    // client's error is the one that explains.
    client?;
    server_result.map_err(|e| match e {
        HandshakeError::Session(m) => HandshakeError::Session(format!("server: {m}")),
        other => other,
    })
}

/// Accepts one connection within [`TIMEOUT`], so a client that never
/// connects cannot leave the thread (and the join) hanging.
fn accept_within(listener: &TcpListener) -> Result<TcpStream, HandshakeError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| session("listen", e))?;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match listener.accept() {
            Ok((tcp, _)) => {
                tcp.set_nonblocking(false)
                    .map_err(|e| session("accept", e))?;
                return Ok(tcp);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(session("accept", "no client connected in time"));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(session("accept", e)),
        }
    }
}

fn set_timeouts(tcp: &TcpStream) -> std::io::Result<()> {
    tcp.set_read_timeout(Some(TIMEOUT))?;
    tcp.set_write_timeout(Some(TIMEOUT))
}

/// The server: handshake, answer the ping, then wait for the client's
/// close_notify so the session ends cleanly on both sides.
fn serve(listener: &TcpListener, config: Arc<ServerConfig>) -> Result<(), HandshakeError> {
    let tcp = accept_within(listener)?;
    set_timeouts(&tcp).map_err(|e| session("socket", e))?;
    let conn = ServerConnection::new(config).map_err(|e| session("connection", e))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut buf = [0u8; PING.len()];
    tls.read_exact(&mut buf).map_err(|e| session("read", e))?;
    if buf != PING {
        return Err(session("read", "unexpected application data"));
    }
    tls.write_all(PONG).map_err(|e| session("write", e))?;
    tls.flush().map_err(|e| session("write", e))?;
    let mut rest = Vec::new();
    tls.read_to_end(&mut rest)
        .map_err(|e| session("waiting for close_notify", e))?;
    if !rest.is_empty() {
        return Err(session("read", "unexpected application data"));
    }
    Ok(())
}

/// The client: handshake, ping, read the answer, close_notify.
fn run_client(
    mut conn: ClientConnection,
    addr: std::net::SocketAddr,
) -> Result<(), HandshakeError> {
    let mut tcp = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| session("connect", e))?;
    set_timeouts(&tcp).map_err(|e| session("socket", e))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)
            .map_err(|e| client_error("handshake", e))?;
    }
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(PING).map_err(|e| client_error("write", e))?;
    tls.flush().map_err(|e| client_error("write", e))?;
    let mut buf = [0u8; PONG.len()];
    tls.read_exact(&mut buf)
        .map_err(|e| client_error("read", e))?;
    if buf != PONG {
        return Err(session("read", "the server's answer did not round-trip"));
    }
    tls.conn.send_close_notify();
    tls.flush().map_err(|e| client_error("close", e))
}
