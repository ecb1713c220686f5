//! A live mutual-TLS server and a stream of clients on 127.0.0.1, both
//! built on the reload helpers (pki-reload), that count every handshake
//! while a test rotates what they load underneath them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_reload::{CertFiles, CertReloader, ReloadOptions, TrustReloader};
use rustls::pki_types::ServerName;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What one side loads: its certificate and key, and the bundles it
/// verifies its peers with.
pub struct Side {
    pub cert: CertFiles,
    pub trust: Vec<PathBuf>,
}

/// Counters shared by the client loops.
#[derive(Default)]
pub struct Tally {
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    pub errors: Mutex<Vec<String>>,
    /// The leaf certificates (DER) servers presented, with when each was
    /// first seen.
    pub seen: Mutex<Vec<(Vec<u8>, SystemTime)>>,
}

impl Tally {
    pub fn counts(&self) -> (u64, u64) {
        (
            self.ok.load(Ordering::SeqCst),
            self.failed.load(Ordering::SeqCst),
        )
    }

    /// When `leaf` (DER) was first presented by the server, if it was.
    pub fn first_seen(&self, leaf: &[u8]) -> Option<SystemTime> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .find(|(d, _)| d == leaf)
            .map(|(_, t)| *t)
    }
}

/// The reloaders of a running pair, for inspection.
pub struct Live {
    pub server_cert: Arc<CertReloader>,
    pub server_trust: Arc<TrustReloader>,
    pub client_cert: Arc<CertReloader>,
    pub client_trust: Arc<TrustReloader>,
    pub tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Who acknowledges what a side's trust reloader loads, if anyone.
pub type MaybeAcker = Option<Arc<dyn pki_reload::Acker>>;

/// How often the helpers look at their files in these tests.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(50);

pub fn options() -> ReloadOptions {
    ReloadOptions {
        check_interval: CHECK_INTERVAL,
    }
}

impl Live {
    /// Starts a server with `server`'s material and `clients` loops of
    /// clients with `client`'s, handshaking continuously with `name`.
    /// The trust reloaders acknowledge through `acks` (server, client).
    pub async fn start(
        server: Side,
        client: Side,
        name: &str,
        clients: usize,
        acks: (MaybeAcker, MaybeAcker),
    ) -> Live {
        let provider = provider();
        let trust = |paths: Vec<PathBuf>, acker: Option<Arc<dyn pki_reload::Acker>>| match acker {
            Some(a) => TrustReloader::with_acker(paths, provider.clone(), options(), a).unwrap(),
            None => TrustReloader::new(paths, provider.clone(), options()).unwrap(),
        };
        let server_cert = CertReloader::new(server.cert, provider.clone(), options()).unwrap();
        let server_trust = trust(server.trust, acks.0);
        let client_cert = CertReloader::new(client.cert, provider.clone(), options()).unwrap();
        let client_trust = trust(client.trust, acks.1);

        let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(server_trust.clone())
            .with_cert_resolver(server_cert.clone());
        let mut client_config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(client_trust.clone())
            .with_client_cert_resolver(client_cert.clone());
        // Every connection a full handshake: a resumed session presents
        // and verifies no certificate, so it would prove nothing here.
        client_config.resumption = rustls::client::Resumption::disabled();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A failed handshake is counted by the client, which
                    // sees the server's refusal as its own failure.
                    if let Ok(mut tls) = acceptor.accept(socket).await {
                        let mut ping = [0u8; 4];
                        if tls.read_exact(&mut ping).await.is_ok() {
                            let _ = tls.write_all(b"pong").await;
                            let _ = tls.shutdown().await;
                        }
                    }
                });
            }
        }));
        let server_name = ServerName::try_from(name.to_string()).unwrap();
        for _ in 0..clients {
            let (connector, stop, tally) = (connector.clone(), stop.clone(), tally.clone());
            let server_name = server_name.clone();
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    match exchange(&connector, addr, server_name.clone()).await {
                        Ok(leaf) => {
                            tally.ok.fetch_add(1, Ordering::SeqCst);
                            let mut seen = tally.seen.lock().unwrap();
                            if !seen.iter().any(|(d, _)| *d == leaf) {
                                seen.push((leaf, SystemTime::now()));
                            }
                        }
                        Err(e) => {
                            tally.failed.fetch_add(1, Ordering::SeqCst);
                            tally.errors.lock().unwrap().push(e);
                        }
                    }
                }
            }));
        }
        Live {
            server_cert,
            server_trust,
            client_cert,
            client_trust,
            tally,
            stop,
            tasks,
        }
    }

    /// Waits until the server has presented `leaf` (DER) to a client, at
    /// most `limit`; when it was first seen.
    pub async fn until_seen(&self, leaf: &[u8], limit: Duration) -> SystemTime {
        let start = Instant::now();
        loop {
            if let Some(t) = self.tally.first_seen(leaf) {
                return t;
            }
            assert!(
                start.elapsed() < limit,
                "the server never presented the new certificate; reload error: {:?}; handshakes {:?}; loads {}; errors {:?}",
                self.server_cert.last_error(),
                self.tally.counts(),
                self.server_cert.generation(),
                self.tally.errors.lock().unwrap().first(),
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the clients and the server.
    pub async fn stop(self) -> Arc<Tally> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks.into_iter().skip(1) {
            t.await.unwrap();
        }
        self.tally
    }
}

/// One connection: handshake, ping, pong. The server's leaf (DER), or why
/// it failed.
async fn exchange(
    connector: &tokio_rustls::TlsConnector,
    addr: std::net::SocketAddr,
    name: ServerName<'static>,
) -> Result<Vec<u8>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or("no server certificate")?;
    tls.write_all(b"ping").await.map_err(|e| e.to_string())?;
    let mut pong = [0u8; 4];
    tls.read_exact(&mut pong)
        .await
        .map_err(|e| format!("after the handshake (the server refused us?): {e}"))?;
    if &pong != b"pong" {
        return Err("bad answer".into());
    }
    Ok(leaf)
}

/// The DER of the first certificate of a PEM file.
pub fn leaf_der(path: &std::path::Path) -> Vec<u8> {
    let pem = std::fs::read(path).unwrap();
    pki_core::Certificate::all_from_pem(&pem).unwrap()[0]
        .der()
        .to_vec()
}

/// When a published file was written (its generation's file).
pub fn written_at(path: &std::path::Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}
