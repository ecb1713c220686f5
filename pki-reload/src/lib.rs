//! pki-reload: keep live rustls servers and clients on what pki publishes.
//!
//! pki rotates by publishing files; a rotation keeps trust only if the
//! processes using them reload. rustls takes its certificate and its trust
//! once, at configuration time, unless given a resolver or verifier of its
//! own. This crate provides those:
//!
//! - [`CertReloader`]: a [`ResolvesServerCert`](rustls::server::ResolvesServerCert)
//!   and [`ResolvesClientCert`](rustls::client::ResolvesClientCert) over a
//!   leaf's `tls.crt` and `tls.key` (a signer's `certs/NAME/`, a CA set
//!   target's `targets/T/certs/NAME/`). It never pairs a certificate with
//!   the key of another generation: it reads both, checks that the key
//!   matches the certificate's public key and that neither file changed
//!   meanwhile, and retries otherwise (a directory store switches
//!   generations atomically, but two opens may straddle a switch).
//! - [`TrustReloader`]: a [`ServerCertVerifier`](rustls::client::danger::ServerCertVerifier)
//!   for clients and a [`ClientCertVerifier`](rustls::server::danger::ClientCertVerifier)
//!   for servers, over one or more bundle files (`ca-bundle.crt`, a
//!   target's `trust/CA.crt` or `client-ca/CA.crt`). Every bundle member is
//!   a trust anchor, as webpki makes one of any certificate: that is how
//!   bridge A keeps servers that have not refreshed trusted. With an
//!   [`Acker`], it acknowledges each bundle it loads (`pki ack`), so that
//!   `pki status` knows this consumer reloaded.
//!
//! - [`Snapshot`]: one consistent read of a leaf's chain and key and the
//!   bundle, with the bundle's token, for other TLS stacks (the C ABI's
//!   `pki_snapshot_load` and the Go package use it). Without the default
//!   `rustls` feature the crate has only this and the acks.
//!
//! **When files are looked at.** On a handshake, at most once per
//! [`ReloadOptions::check_interval`] (1 s by default): a `stat` of each
//! file (device, inode, size, modification time; a directory store's new
//! generation is a new inode). Only a changed stamp reads and parses the
//! files again. No watcher thread and no extra dependency: the cost is two
//! or three `stat` calls a second per reloader, and a handshake never waits
//! for another one's check (a concurrent check is skipped, the current
//! material used). The longest a reload takes to be seen is the check
//! interval plus the time to the next handshake; [`CertReloader::refresh`]
//! and [`TrustReloader::refresh`] check at once.
//!
//! Everything is `Send + Sync` and usable from tokio: a check is a few
//! system calls, a reload a few file reads and one key parse, on the
//! handshake's thread; nothing sleeps. When files are unreadable or
//! inconsistent, the previous material stays in use and the error is kept
//! ([`CertReloader::last_error`]); the first load must succeed.
//!
//! ```no_run
//! use pki_reload::{CertReloader, ReloadOptions, TrustReloader};
//! use std::sync::Arc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::path::Path::new("/var/lib/pki");
//! let provider = Arc::new(rustls::crypto::ring::default_provider());
//! let options = ReloadOptions::default();
//! let cert = CertReloader::leaf(dir, "web", provider.clone(), options.clone())?;
//! let trust = TrustReloader::new([dir.join("ca-bundle.crt")], provider.clone(), options)?;
//! // A server that presents the current web certificate and verifies
//! // clients against the current bundle.
//! let server = rustls::ServerConfig::builder_with_provider(provider)
//!     .with_safe_default_protocol_versions()?
//!     .with_client_cert_verifier(trust)
//!     .with_cert_resolver(cert);
//! # let _ = server;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
// Without rustls only snapshots and acks are built: the watcher is unused.
#![cfg_attr(not(feature = "rustls"), allow(dead_code))]

mod ack;
#[cfg(feature = "rustls")]
mod cert;
mod error;
mod files;
mod snapshot;
#[cfg(feature = "rustls")]
mod trust;
mod watch;

pub use ack::{Acker, StoreAcker};
#[cfg(feature = "rustls")]
pub use cert::CertReloader;
pub use error::ReloadError;
pub use files::CertFiles;
pub use snapshot::Snapshot;
#[cfg(feature = "rustls")]
pub use trust::TrustReloader;

/// How often a reloader looks at its files.
#[derive(Debug, Clone)]
pub struct ReloadOptions {
    /// Look at most this often, on a handshake. Zero looks on every
    /// handshake (a `stat` per file each time).
    pub check_interval: std::time::Duration,
}

impl Default for ReloadOptions {
    fn default() -> Self {
        ReloadOptions {
            check_interval: DEFAULT_CHECK_INTERVAL,
        }
    }
}

/// One second: a reload is seen within about a second of the commit that
/// published it, far inside any reload interval pki plans rotations with,
/// for a handful of `stat` calls a second.
pub const DEFAULT_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
