//! Mutual-TLS handshakes over loopback, used to prove trust between the
//! targets of a CA set.
//!
//! [`mutual_handshake`] starts a rustls server on 127.0.0.1 that presents a
//! serving chain and *requires* a client certificate verified against a
//! client-CA bundle, and connects a rustls client that trusts a bundle and
//! presents a client certificate. Both sides verify as of a pinned instant.
//! Every socket operation is bounded by [`TIMEOUT`] and the server thread is
//! always joined.

use pki_core::{Bundle, Certificate, PrivateKey};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::time_provider::TimeProvider;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// How long any socket operation, or waiting for the client, may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// One side's certificate chain (leaf first) and key.
#[derive(Clone, Copy)]
pub struct Identity<'a> {
    /// Leaf first, then intermediates.
    pub chain: &'a [Certificate],
    /// The leaf's key.
    pub key: &'a PrivateKey,
}

/// Why a mutual handshake did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MtlsError {
    /// The inputs cannot make a TLS configuration.
    Setup(String),
    /// The client refused the server's certificate.
    ClientRejected(String),
    /// The server refused the client's certificate.
    ServerRejected(String),
    /// Something else failed (socket, timeout, data).
    Session(String),
}

impl std::fmt::Display for MtlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MtlsError::Setup(m) => write!(f, "setup: {m}"),
            MtlsError::ClientRejected(m) => write!(f, "client rejected the server: {m}"),
            MtlsError::ServerRejected(m) => write!(f, "server rejected the client: {m}"),
            MtlsError::Session(m) => write!(f, "session: {m}"),
        }
    }
}

#[derive(Debug)]
struct PinnedTime(UnixTime);

impl TimeProvider for PinnedTime {
    fn current_time(&self) -> Option<UnixTime> {
        Some(self.0)
    }
}

fn setup(context: &str, e: impl std::fmt::Display) -> MtlsError {
    MtlsError::Setup(format!("{context}: {e}"))
}

fn roots(bundle: &Bundle, what: &str) -> Result<RootCertStore, MtlsError> {
    let mut roots = RootCertStore::empty();
    for c in bundle.certs() {
        roots
            .add(CertificateDer::from(c.der().to_vec()))
            .map_err(|e| setup(&format!("{what} certificate {}", c.id()), e))?;
    }
    if roots.is_empty() {
        return Err(setup(what, "empty"));
    }
    Ok(roots)
}

fn identity(
    id: Identity<'_>,
    what: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), MtlsError> {
    if id.chain.is_empty() {
        return Err(setup(what, "empty chain"));
    }
    let chain = id
        .chain
        .iter()
        .map(|c| CertificateDer::from(c.der().to_vec()))
        .collect();
    let der = id.key.to_pkcs8_der().map_err(|e| setup(what, e))?;
    Ok((
        chain,
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.to_vec())),
    ))
}

/// The rustls error inside an I/O error, as text.
fn tls_text(e: &std::io::Error) -> Option<String> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(ToString::to_string)
}

/// Runs one mutual-TLS handshake: `server` presents its chain and requires
/// a client certificate that verifies against `server_client_ca`; `client`
/// trusts `client_trust`, expects `server_name` and presents its chain.
/// `Ok` means both sides verified each other and data went both ways.
pub fn mutual_handshake(
    server: Identity<'_>,
    server_client_ca: &Bundle,
    client: Identity<'_>,
    client_trust: &Bundle,
    server_name: &str,
    at: OffsetDateTime,
) -> Result<(), MtlsError> {
    let secs = u64::try_from(at.unix_timestamp())
        .map_err(|_| setup("verification time", "before 1970"))?;
    let time: Arc<dyn TimeProvider> = Arc::new(PinnedTime(UnixTime::since_unix_epoch(
        Duration::from_secs(secs),
    )));
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    let verifier = WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots(server_client_ca, "server client-ca bundle")?),
        provider.clone(),
    )
    .build()
    .map_err(|e| setup("client verifier", e))?;
    let (s_chain, s_key) = identity(server, "server")?;
    let server_config = ServerConfig::builder_with_details(provider.clone(), time.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| setup("server config", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(s_chain, s_key)
        .map_err(|e| setup("server certificate", e))?;

    let (c_chain, c_key) = identity(client, "client")?;
    let client_config = ClientConfig::builder_with_details(provider, time)
        .with_safe_default_protocol_versions()
        .map_err(|e| setup("client config", e))?
        .with_root_certificates(roots(client_trust, "client trust bundle")?)
        .with_client_auth_cert(c_chain, c_key)
        .map_err(|e| setup("client certificate", e))?;
    let name =
        ServerName::try_from(server_name.to_string()).map_err(|e| setup("server name", e))?;
    let conn =
        ClientConnection::new(Arc::new(client_config), name).map_err(|e| setup("client", e))?;

    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| MtlsError::Session(format!("bind: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| MtlsError::Session(format!("bind: {e}")))?;
    let server_config = Arc::new(server_config);
    let handle = std::thread::Builder::new()
        .name("pki-mtls-server".into())
        .spawn(move || serve(&listener, server_config))
        .map_err(|e| MtlsError::Session(format!("server thread: {e}")))?;
    let client_result = run_client(conn, addr);
    let server_result = handle
        .join()
        .map_err(|_| MtlsError::Session("server thread panicked".into()))?;
    // A rejected client certificate is explained by the server; a rejected
    // server certificate by the client.
    match (server_result, client_result) {
        (Err(e @ MtlsError::ServerRejected(_)), _) => Err(e),
        (_, Err(e @ MtlsError::ClientRejected(_))) => Err(e),
        (Err(e), _) | (_, Err(e)) => Err(e),
        (Ok(()), Ok(())) => Ok(()),
    }
}

fn accept_within(listener: &TcpListener) -> Result<TcpStream, MtlsError> {
    let session = |e: std::io::Error| MtlsError::Session(format!("accept: {e}"));
    listener.set_nonblocking(true).map_err(session)?;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match listener.accept() {
            Ok((tcp, _)) => {
                tcp.set_nonblocking(false).map_err(session)?;
                tcp.set_read_timeout(Some(TIMEOUT)).map_err(session)?;
                tcp.set_write_timeout(Some(TIMEOUT)).map_err(session)?;
                return Ok(tcp);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(MtlsError::Session("no client connected in time".into()));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(session(e)),
        }
    }
}

fn serve(listener: &TcpListener, config: Arc<ServerConfig>) -> Result<(), MtlsError> {
    let mut tcp = accept_within(listener)?;
    let mut conn =
        ServerConnection::new(config).map_err(|e| MtlsError::Session(format!("server: {e}")))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut tcp) {
            return Err(match tls_text(&e) {
                Some(t) if t.contains("certificate") || t.contains("Certificate") => {
                    MtlsError::ServerRejected(t)
                }
                Some(t) => MtlsError::Session(format!("server: {t}")),
                None => MtlsError::Session(format!("server: {e}")),
            });
        }
    }
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut buf = [0u8; 4];
    tls.read_exact(&mut buf)
        .map_err(|e| MtlsError::Session(format!("server read: {e}")))?;
    tls.write_all(b"pong")
        .and_then(|()| tls.flush())
        .map_err(|e| MtlsError::Session(format!("server write: {e}")))?;
    Ok(())
}

fn run_client(mut conn: ClientConnection, addr: std::net::SocketAddr) -> Result<(), MtlsError> {
    let session = |e: std::io::Error| MtlsError::Session(format!("client: {e}"));
    let mut tcp = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(session)?;
    tcp.set_read_timeout(Some(TIMEOUT)).map_err(session)?;
    tcp.set_write_timeout(Some(TIMEOUT)).map_err(session)?;
    let classify = |e: std::io::Error| match tls_text(&e) {
        Some(t) if t.starts_with("invalid peer certificate") => MtlsError::ClientRejected(t),
        Some(t) => MtlsError::Session(format!("client: {t}")),
        None => MtlsError::Session(format!("client: {e}")),
    };
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).map_err(classify)?;
    }
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(b"ping")
        .and_then(|()| tls.flush())
        .map_err(classify)?;
    let mut buf = [0u8; 4];
    tls.read_exact(&mut buf).map_err(classify)?;
    if &buf != b"pong" {
        return Err(MtlsError::Session("the answer did not round-trip".into()));
    }
    tls.conn.send_close_notify();
    let _ = tls.flush();
    Ok(())
}
