//! How a store authenticates to etcd and verifies it: TLS settings
//! ([`EtcdTls`]) and a user ([`EtcdUser`]), given as bytes or read from
//! files. Secrets (the client key, the password) are zeroized when dropped
//! and never printed by `Debug`.

use std::path::Path;
use zeroize::Zeroizing;

/// A user name and password, for an etcd with authentication enabled. The
/// store exchanges them for a token when it connects, and again when etcd
/// says the token is no longer valid (a restarted server forgets tokens).
#[derive(Clone)]
pub struct EtcdUser {
    /// The user name.
    pub name: String,
    /// The password.
    pub password: Zeroizing<String>,
}

impl EtcdUser {
    /// A user and its password.
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> Self {
        EtcdUser {
            name: name.into(),
            password: Zeroizing::new(password.into()),
        }
    }

    /// A user whose password is the content of the file at `path`, without
    /// its final line break (as `echo secret > file` writes it). The error
    /// names the file.
    ///
    /// # Errors
    ///
    /// An [`io::Error`](std::io::Error) naming the file when it cannot be read
    /// (missing, too large, not a regular file) or is not UTF-8
    /// (`InvalidData`).
    pub fn from_password_file(name: impl Into<String>, path: &Path) -> std::io::Result<Self> {
        let bytes = read("the password file", path)?;
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the password file {} is not UTF-8", path.display()),
            )
        })?;
        let password = text
            .strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(text);
        Ok(EtcdUser::new(name, password))
    }
}

impl std::fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdUser")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A client certificate (the leaf first, then its chain) and its private
/// key, both PEM, for an etcd that requires client certificates
/// (`--client-cert-auth`).
#[derive(Clone)]
pub struct ClientIdentity {
    /// The certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// The private key, PEM (PKCS#8, SEC1 or PKCS#1).
    pub key_pem: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_pem_bytes", &self.cert_pem.len())
            .finish_non_exhaustive()
    }
}

/// TLS settings for an `etcds://` store: the CA bundle that verifies the
/// servers' certificates and, when etcd asks for one, a client certificate.
/// Only these CAs are trusted: the system's roots are not consulted.
#[derive(Clone)]
pub struct EtcdTls {
    /// The CA certificates that verify the servers, PEM.
    pub ca_pem: Vec<u8>,
    /// The client certificate and key, if any.
    pub identity: Option<ClientIdentity>,
}

impl EtcdTls {
    /// Servers verified against `ca_pem`, no client certificate.
    pub fn new(ca_pem: impl Into<Vec<u8>>) -> Self {
        EtcdTls {
            ca_pem: ca_pem.into(),
            identity: None,
        }
    }

    /// The same settings with a client certificate chain and key (PEM).
    pub fn with_identity(mut self, cert_pem: impl Into<Vec<u8>>, key_pem: Vec<u8>) -> Self {
        self.identity = Some(ClientIdentity {
            cert_pem: cert_pem.into(),
            key_pem: Zeroizing::new(key_pem),
        });
        self
    }

    /// Reads the CA bundle and, if given, the client certificate and key
    /// from files. The error names the file that could not be read.
    ///
    /// # Errors
    ///
    /// An [`io::Error`](std::io::Error) naming the file that cannot be read
    /// (missing, too large, not a regular file). The contents are not checked
    /// here: a CA bundle, certificate or key that is not valid PEM fails when
    /// connecting.
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> std::io::Result<Self> {
        let tls = EtcdTls::new(read("the CA bundle", ca)?.to_vec());
        Ok(match identity {
            None => tls,
            Some((cert, key)) => tls.with_identity(
                read("the client certificate", cert)?.to_vec(),
                read("the client key", key)?.to_vec(),
            ),
        })
    }
}

impl std::fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_pem_bytes", &self.ca_pem.len())
            .field("identity", &self.identity)
            .finish()
    }
}

/// Reads a file whose bytes may be secret; the error says which file.
/// Bounded, and never waiting on a FIFO ([`pki_rotate::input`]).
fn read(what: &str, path: &Path) -> std::io::Result<Zeroizing<Vec<u8>>> {
    pki_rotate::input::read_file(path, pki_rotate::input::DEFAULT_MAX_INPUT)
        .map(Zeroizing::new)
        .map_err(|e| {
            let e = std::io::Error::from(e);
            std::io::Error::new(e.kind(), format!("cannot read {what} {e}"))
        })
}
