//! CA bundles: the set of certificates a client trusts.

use crate::cert::Certificate;
use crate::error::{Error, Result};
use crate::signatures::SignatureCache;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::sync::Arc;
use time::OffsetDateTime;

/// An ordered set of CA certificates.
///
/// Certificates are deduplicated by DER. Order is deterministic: the order of
/// first insertion, which is what rotation engines rely on to put the current
/// CA first. The [`Bundle::fingerprint`] of the set does not depend on order.
///
/// A bundle carries a [`SignatureCache`] that [`crate::verify_chain`] uses,
/// shared by its clones (see [`Bundle::signature_cache`]). Equality looks
/// at the certificates only.
#[derive(Clone)]
pub struct Bundle {
    certs: Vec<Certificate>,
    /// The same certificates, for constant-time membership tests.
    members: HashSet<Certificate>,
    cache: Arc<SignatureCache>,
}

impl Default for Bundle {
    fn default() -> Self {
        Bundle {
            certs: Vec::new(),
            members: HashSet::new(),
            cache: Arc::new(SignatureCache::with_capacity(
                Self::SIGNATURE_CACHE_CAPACITY,
            )),
        }
    }
}

impl PartialEq for Bundle {
    fn eq(&self, other: &Self) -> bool {
        self.certs == other.certs
    }
}
impl Eq for Bundle {}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("certs", &self.certs)
            .finish()
    }
}

impl Bundle {
    /// Capacity of a bundle's own [`SignatureCache`]: 8,192 outcomes, about
    /// 400 KiB when full. A bundle is verified against by one consumer's
    /// leaves, so its cache mostly holds one entry per leaf and a few for
    /// the intermediates and bridges they share.
    pub const SIGNATURE_CACHE_CAPACITY: usize = 8192;

    /// An empty bundle.
    pub fn new() -> Self {
        Self::default()
    }

    /// A bundle of `certs`, deduplicated, in the order given.
    pub fn from_certs(certs: impl IntoIterator<Item = Certificate>) -> Self {
        let certs = certs.into_iter();
        let mut b = Bundle {
            certs: Vec::with_capacity(certs.size_hint().0),
            members: HashSet::with_capacity(certs.size_hint().0),
            ..Bundle::default()
        };
        for c in certs {
            b.push(c);
        }
        b
    }

    /// Parses a PEM bundle. Every block must be a `CERTIFICATE`; an error
    /// names the block. An input without any certificate is an error.
    ///
    /// # Errors
    ///
    /// The errors of [`Certificate::all_from_pem`] (a block that cannot be
    /// read, is not a `CERTIFICATE`, or holds no valid certificate), and
    /// [`Error::NoPemBlock`] when the input holds no certificate at all.
    pub fn from_pem(input: &[u8]) -> Result<Self> {
        let certs = Certificate::all_from_pem(input)?;
        if certs.is_empty() {
            return Err(Error::NoPemBlock { what: "CA bundle" });
        }
        Ok(Self::from_certs(certs))
    }

    /// PEM of every certificate, in order.
    pub fn to_pem(&self) -> String {
        self.certs.iter().map(Certificate::to_pem).collect()
    }

    /// Adds `cert` unless the same DER is already present. Returns whether it was added.
    pub fn push(&mut self, cert: Certificate) -> bool {
        if !self.members.insert(cert.clone()) {
            return false;
        }
        self.certs.push(cert);
        true
    }

    /// Adds every certificate of `other` that is not yet present.
    pub fn merge(&mut self, other: &Bundle) {
        for c in &other.certs {
            self.push(c.clone());
        }
    }

    /// Whether a certificate with the same DER is present.
    pub fn contains(&self, cert: &Certificate) -> bool {
        self.members.contains(cert)
    }

    /// The signature cache [`crate::verify_chain`] uses with this bundle as
    /// its anchors. Shared by the bundle's clones; adding or removing
    /// certificates keeps it, since an outcome does not depend on the
    /// bundle.
    pub fn signature_cache(&self) -> &SignatureCache {
        &self.cache
    }

    /// The certificates, in order.
    pub fn certs(&self) -> &[Certificate] {
        &self.certs
    }

    /// Number of certificates.
    pub fn len(&self) -> usize {
        self.certs.len()
    }

    /// Whether the bundle is empty.
    pub fn is_empty(&self) -> bool {
        self.certs.is_empty()
    }

    /// Removes certificates whose NotAfter is before `now`; returns them.
    pub fn prune_expired(&mut self, now: OffsetDateTime) -> Vec<Certificate> {
        let (keep, gone) = std::mem::take(&mut self.certs)
            .into_iter()
            .partition(|c| c.not_after() >= now);
        for c in &gone {
            self.members.remove(c);
        }
        self.certs = keep;
        gone
    }

    /// SHA-256 over the sorted SHA-256 fingerprints of the members: the same
    /// set gives the same value in any order.
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut prints: Vec<[u8; 32]> = self.certs.iter().map(|c| c.fingerprint_sha256()).collect();
        prints.sort_unstable();
        let mut h = Sha256::new();
        for p in &prints {
            h.update(p);
        }
        h.finalize().into()
    }

    /// The self-signed roots of the bundle, in order.
    pub fn roots(&self) -> impl Iterator<Item = &Certificate> {
        self.certs.iter().filter(|c| c.looks_self_signed())
    }

    /// Root pin: SHA-256 of the DER of the bundle's first self-signed root,
    /// in lowercase hex. Never a hash of PEM text, whose line endings and
    /// comments vary between copies of the same certificate.
    ///
    /// # Errors
    ///
    /// [`Error::NoRoot`] when the bundle holds no self-signed certificate.
    pub fn root_pin(&self) -> Result<String> {
        self.root_pin_sha256().map(hex::encode)
    }

    /// The root pin as raw SHA-256 bytes (see [`Bundle::root_pin`]).
    ///
    /// # Errors
    ///
    /// [`Error::NoRoot`] when the bundle holds no self-signed certificate.
    pub fn root_pin_sha256(&self) -> Result<[u8; 32]> {
        self.roots()
            .next()
            .map(Certificate::fingerprint_sha256)
            .ok_or(Error::NoRoot)
    }

    /// SPKI pins (SHA-256 of each member's SubjectPublicKeyInfo, hex), deduplicated, in order.
    pub fn spki_pins(&self) -> Vec<String> {
        self.spki_pins_sha256().iter().map(hex::encode).collect()
    }

    /// SPKI pins as raw SHA-256 bytes, deduplicated (bridges share keys with
    /// roots), in bundle order (see [`Bundle::spki_pins`]).
    pub fn spki_pins_sha256(&self) -> Vec<[u8; 32]> {
        let mut seen = HashSet::new();
        self.certs
            .iter()
            .map(Certificate::spki_sha256)
            .filter(|p| seen.insert(*p))
            .collect()
    }
}

impl<'a> IntoIterator for &'a Bundle {
    type Item = &'a Certificate;
    type IntoIter = std::slice::Iter<'a, Certificate>;
    fn into_iter(self) -> Self::IntoIter {
        self.certs.iter()
    }
}
