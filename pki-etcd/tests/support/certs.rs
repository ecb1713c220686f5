//! Certificates for a TLS etcd, issued with pki-core at today's date (etcd
//! checks them against its clock): a CA, the server's certificate for
//! 127.0.0.1, a client certificate, an expired one, and an unrelated CA.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use pki_core::{CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

/// A certificate and its key, as files.
#[derive(Debug, Clone)]
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pair {
    pub fn cert_pem(&self) -> Vec<u8> {
        std::fs::read(&self.cert).unwrap()
    }
    pub fn key_pem(&self) -> Vec<u8> {
        std::fs::read(&self.key).unwrap()
    }
}

/// Every file a TLS test needs, in a temporary directory.
pub struct TestPki {
    pub dir: tempfile::TempDir,
    /// The CA that signed the server's and the clients' certificates.
    pub ca: PathBuf,
    pub server: Pair,
    pub client: Pair,
    /// Signed by `ca`, expired two days ago.
    pub expired_client: Pair,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
}

impl TestPki {
    pub fn new() -> TestPki {
        let dir = tempfile::tempdir().unwrap();
        let now = OffsetDateTime::now_utc();
        let mut rng = pki_core::os_rng();
        let ca = CertificateAuthority::generate_root(
            "pki test etcd CA",
            KeyAlgorithm::EcdsaP256,
            now - Duration::days(10),
            Duration::days(30),
            &mut rng,
        )
        .unwrap();
        let other = CertificateAuthority::generate_root(
            "pki test other CA",
            KeyAlgorithm::EcdsaP256,
            now,
            Duration::days(30),
            &mut rng,
        )
        .unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let leaf = |name: &str, profile: Profile, issued_at: OffsetDateTime, days: i64| {
            let mut rng = pki_core::os_rng();
            let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
            let mut params =
                CertificateParams::new(profile, name, issued_at, Duration::days(days)).unwrap();
            if profile == Profile::Server {
                params.dns_names = vec!["localhost".into()];
                params.ip_addresses = vec!["127.0.0.1".parse().unwrap()];
            }
            let cert = params
                .signed_by(&key.public_key().unwrap(), &ca, &mut rng)
                .unwrap();
            Pair {
                cert: write(&format!("{name}.crt"), cert.to_pem().as_bytes()),
                key: write(
                    &format!("{name}.key"),
                    key.to_pkcs8_pem().unwrap().as_bytes(),
                ),
            }
        };
        TestPki {
            ca: write("ca.crt", ca.cert.to_pem().as_bytes()),
            other_ca: write("other-ca.crt", other.cert.to_pem().as_bytes()),
            server: leaf("etcd-server", Profile::Server, now, 5),
            client: leaf("pki-client", Profile::Client, now, 5),
            expired_client: leaf(
                "expired-client",
                Profile::Client,
                now - Duration::days(3),
                1,
            ),
            dir,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
