//! What went wrong when a connection to etcd fails without etcd saying so.
//!
//! gRPC reports a refused client certificate as a broken pipe and TLS
//! spoken to a plaintext server as an early end of file: the TLS alert or
//! the server's silence is lost on the way up. When connecting fails, one
//! more connection, bounded by the time left, goes through the same steps
//! by hand (TCP, the TLS handshake, the HTTP/2 preface) and tells which
//! one failed and why, in words a user can act on.

use crate::options::EtcdTls;
use crate::url::EtcdUrl;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The HTTP/2 connection preface and an empty SETTINGS frame: what a gRPC
/// client sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Why connecting to the first endpoint of `url` fails, if a closer look
/// tells more than gRPC did; None when it does not (or `limit` runs out).
pub(crate) async fn diagnose(
    url: &EtcdUrl,
    tls: Option<&EtcdTls>,
    limit: Duration,
) -> Option<String> {
    let endpoint = url.endpoints().first()?.clone();
    let look = async move {
        match tls {
            Some(tls) => diagnose_tls(&endpoint, tls).await,
            None => diagnose_plaintext(&endpoint).await,
        }
    };
    tokio::time::timeout(limit, look).await.ok().flatten()
}

async fn diagnose_plaintext(endpoint: &str) -> Option<String> {
    // A server that completes a TLS handshake's first half speaks TLS.
    let tcp = TcpStream::connect(endpoint).await.ok()?;
    let config = probe_config(Arc::new(AnyCertificate), None)?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = server_name(endpoint)?;
    match connector.connect(name, tcp).await {
        Err(e) if e.to_string().contains(AnyCertificate::SEEN) => {
            Some("the server speaks TLS and the store URL is plaintext: use etcds://".into())
        }
        _ => None,
    }
}

async fn diagnose_tls(endpoint: &str, tls: &EtcdTls) -> Option<String> {
    let tcp = TcpStream::connect(endpoint).await.ok()?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&tls.ca_pem) {
        roots.add(cert.ok()?).ok()?;
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .ok()?;
    let config = probe_config(verifier, tls.identity.as_ref())?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let mut stream = match connector.connect(server_name(endpoint)?, tcp).await {
        Ok(stream) => stream,
        Err(e) => return Some(handshake_failure(&e, tls)),
    };
    // TLS 1.3 ends the client's handshake before the server has checked
    // the client's certificate: a refusal arrives as an alert on the
    // first read.
    stream.write_all(H2_PREFACE).await.ok()?;
    stream.flush().await.ok()?;
    let mut buf = [0u8; 64];
    match stream.read(&mut buf).await {
        Err(e) => alert(&e).map(|alert| refused_identity(&alert, tls)),
        Ok(_) => None,
    }
}

fn handshake_failure(e: &std::io::Error, tls: &EtcdTls) -> String {
    if let Some(alert) = alert(e) {
        return refused_identity(&alert, tls);
    }
    let text = e.to_string();
    if text.contains("invalid peer certificate") {
        return format!(
            "the server's certificate does not verify against the CA bundle given ({text})"
        );
    }
    // A plaintext server ends the connection at a ClientHello: cleanly
    // (end of file) or, when the close races the hello, with a reset.
    if matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
    ) || text.contains("corrupt message")
    {
        return format!(
            "the server does not complete a TLS handshake ({text}): if it is plaintext, use etcd://"
        );
    }
    format!("TLS handshake failed: {text}")
}

/// The alert the server sent, if `e` is one.
fn alert(e: &std::io::Error) -> Option<String> {
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    match inner {
        rustls::Error::AlertReceived(alert) => Some(format!("{alert:?}")),
        _ => None,
    }
}

/// What the server's refusal of the client certificate most likely means.
fn refused_identity(alert: &str, tls: &EtcdTls) -> String {
    let Some(identity) = &tls.identity else {
        return format!(
            "etcd requires a client certificate and none was given (TLS alert {alert})"
        );
    };
    let expired = pki_core::Certificate::from_pem(&identity.cert_pem)
        .ok()
        .map(|c| c.not_after())
        .filter(|t| *t < time::OffsetDateTime::now_utc())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        });
    match expired {
        Some(at) => {
            format!("etcd refused the client certificate: it expired at {at} (TLS alert {alert})")
        }
        None => format!(
            "etcd refused the client certificate (TLS alert {alert}): is it signed by a CA etcd trusts?"
        ),
    }
}

fn server_name(endpoint: &str) -> Option<ServerName<'static>> {
    let host = endpoint.rsplit_once(':')?.0;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).ok()
}

fn probe_config(
    verifier: Arc<dyn rustls::client::danger::ServerCertVerifier>,
    identity: Option<&crate::options::ClientIdentity>,
) -> Option<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .ok()?
    .dangerous()
    .with_custom_certificate_verifier(verifier);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(identity) => {
            let chain = CertificateDer::pem_slice_iter(&identity.cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            let key = PrivateKeyDer::from_pem_slice(&identity.key_pem).ok()?;
            builder.with_client_auth_cert(chain, key).ok()?
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Some(config)
}

/// A verifier that accepts nothing, and says it saw a certificate: that
/// the server got that far in a handshake is all the plaintext diagnosis
/// needs. The connection it ends is never used.
#[derive(Debug)]
struct AnyCertificate;

impl AnyCertificate {
    const SEEN: &'static str = "pki-etcd: the server presented a certificate";
}

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General(AnyCertificate::SEEN.into()))
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General(AnyCertificate::SEEN.into()))
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General(AnyCertificate::SEEN.into()))
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
