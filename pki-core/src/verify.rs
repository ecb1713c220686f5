//! Certification path validation (RFC 5280 §6), for TLS server and client
//! certificates.
//!
//! [`verify_chain`] builds every candidate path from a leaf through
//! untrusted intermediates to a trust anchor and returns the first one on
//! which every check passes. Cross-signed CAs share subjects, so at each
//! step every certificate whose subject equals the issuer name is a
//! candidate, trust anchor or intermediate. Candidates are tried by key
//! identifier first: those whose SubjectKeyIdentifier equals the child's
//! AuthorityKeyIdentifier, then those where either identifier is missing,
//! then those whose identifiers differ; anchors before intermediates
//! within each group. Key identifiers only order; they never rule a
//! candidate out (another tool may compute them differently). The search
//! is depth-first with backtracking; a (subject, key) pair appears at most
//! once on a path, and a [`Budget`] bounds the work.
//!
//! Signature outcomes are remembered, so that a signature is checked once
//! however many chains and bundles it appears in:
//!
//! - each [`Certificate`] remembers the key (SubjectPublicKeyInfo digest)
//!   that verified its signature, shared by its clones: the same leaf
//!   verified against an old and a new bundle whose anchors share a key
//!   (a CA and its cross-signed bridge) is checked once;
//! - a [`SignatureCache`] remembers every outcome, good or bad, by content:
//!   by default the one of the anchors' [`Bundle`]
//!   ([`Bundle::signature_cache`]), so that certificates parsed again (a
//!   serving chain read for every connection) are not checked again;
//!   [`verify_chain_cached`] takes another cache.
//!
//! A remembered outcome counts against [`Budget::signatures`] like a
//! check, so the result never depends on what was remembered.
//!
//! Every certificate of the bundle is a trust anchor, self-signed or not:
//! a cross-signed "bridge" in the bundle ends a path as well as a root
//! does. A path ends when a certificate's issuer name equals an anchor's
//! subject and its signature verifies with the anchor's key. The anchor
//! certificate itself is checked too (validity window, CA constraints,
//! extensions), so an expired bridge stops being trusted; a version 1
//! anchor is taken as a CA as it is.
//!
//! Checks, on every certificate of the path unless said otherwise:
//!
//! - signature: ECDSA P-256 or P-384 with SHA-256/384, RSA PKCS#1 v1.5 (2048 to
//!   8192 bits) with SHA-256/384/512, over the TBSCertificate bytes exactly
//!   as encoded; the inner and outer algorithms must be equal;
//! - validity at the given time (truncated to seconds, both ends inclusive),
//!   the anchor included;
//! - issuers: v3 (a trust anchor may be v1), basicConstraints with cA
//!   (critical on trust anchors; RFC 5280 §6.1.4(k) asks no more of
//!   intermediates), keyCertSign when keyUsage is present, pathLenConstraint (self-issued
//!   intermediates do not count), nameConstraints (DNS, IP with mask,
//!   directoryName, rfc822Name including the subject's emailAddress
//!   attributes, URI host; other name types fail closed) on every
//!   certificate below except self-issued intermediates, each comparison
//!   counted in the [`Budget`];
//! - extendedKeyUsage, when present, must allow the purpose on the leaf and
//!   on every CA above it (anyExtendedKeyUsage counts);
//! - the leaf's keyUsage, when present, must allow digitalSignature (or
//!   keyEncipherment for an RSA server key), unless the leaf is a CA;
//! - the RFC 5280 profile: unknown critical extensions, duplicate
//!   extensions, positive serials of at most 20 octets (not required of
//!   anchors), authorityKeyIdentifier on certificates that are not
//!   self-issued (not required of anchors), subjectKeyIdentifier on CAs,
//!   consistent basicConstraints and keyUsage, non-empty issuer names;
//! - the expected name against the leaf's subjectAltName (see
//!   [`ExpectedName`]); the commonName is never used.
//!
//! Names are compared as RFC 5280 §7.1 says (case-insensitively, with
//! insignificant spaces ignored, whatever the string type) both when
//! chaining a certificate's issuer to a subject and for directoryName
//! constraints.
//!
//! `docs/book/src/conformance.md` in the repository scores these rules on the
//! x509-limbo suite. Time is an argument, never read from a clock.
//!
//! ```
//! use pki_core::verify::{ExpectedName, Purpose, VerifyOptions, verify_chain};
//! use pki_core::{Bundle, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile};
//! use rand_chacha::ChaCha20Rng;
//! use rand_core::SeedableRng;
//! use time::{Duration, macros::datetime};
//!
//! let mut rng = ChaCha20Rng::seed_from_u64(1);
//! let now = datetime!(2026-01-01 00:00 UTC);
//! let ca = CertificateAuthority::generate_root("service-ca", KeyAlgorithm::EcdsaP256, now, Duration::days(790), &mut rng)?;
//! let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng)?;
//! let mut params = CertificateParams::new(Profile::Server, "web", now, Duration::days(365))?;
//! params.dns_names.push("web.ns.svc".into());
//! let leaf = ca.issue(&params, &key.public_key()?, &mut rng)?;
//!
//! let mut opts = VerifyOptions::new(now + Duration::days(1), Purpose::ServerAuth);
//! opts.name = Some(ExpectedName::Dns("web.ns.svc".into()));
//! let path = verify_chain(&leaf, &[], &Bundle::from_certs([ca.cert.clone()]), &opts)?;
//! assert_eq!(path.certs, [leaf, ca.cert]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod budget;
mod names;
mod profile;
mod signature;

pub use budget::Budget;
pub use signature::verify_signature;
// Defined below the certificates, since other layers speak of them too.
pub use crate::error::{BudgetKind, VerifyError};
pub use crate::signatures::SignatureCache;
pub use crate::usage::Purpose;

use crate::bundle::Bundle;
use crate::cert::Certificate;
use profile::Role;
use std::fmt;
use std::net::IpAddr;
use time::OffsetDateTime;

/// Maximum number of intermediates between the leaf and the anchor.
/// rustls-webpki allows 6 sub-CAs; rotation may add a bridge or two on top
/// of a real hierarchy, so we allow 8.
pub const MAX_INTERMEDIATES: usize = 8;

/// What path building asks of its error type: which failure of several
/// candidate paths to report, and the error of a certificate that breaks
/// the profile.
impl VerifyError {
    /// How specific the error is, for choosing among failed candidate
    /// paths: an issuer that is missing altogether says least, a signature
    /// that does not verify says more (the name matched but the key did
    /// not), anything found about an issuer whose signature over the
    /// certificate below verified says most.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            VerifyError::UnknownIssuer { .. } | VerifyError::PathTooLong { .. } => 0,
            VerifyError::BadSignature { .. } => 1,
            _ => 2,
        }
    }

    pub(crate) fn malformed(cert: &Certificate, reason: impl Into<String>) -> Self {
        VerifyError::MalformedCertificate {
            cert: cert.id(),
            reason: reason.into(),
        }
    }
}

/// The name the leaf must be valid for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ExpectedName {
    /// A DNS host name, matched against dNSName subjectAltNames. An IP
    /// address literal given here is matched as [`ExpectedName::Ip`].
    Dns(String),
    /// An IP address, matched against iPAddress subjectAltNames.
    Ip(IpAddr),
}

impl fmt::Display for ExpectedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpectedName::Dns(name) => write!(f, "DNS:{name}"),
            ExpectedName::Ip(ip) => write!(f, "IP:{ip}"),
        }
    }
}

/// Everything a verification depends on besides the certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOptions {
    /// The instant at which every certificate of the path must be valid.
    /// Truncated to whole seconds, the precision of certificates.
    pub time: OffsetDateTime,
    /// What the leaf is for.
    pub purpose: Purpose,
    /// The name the leaf must carry, if any.
    pub name: Option<ExpectedName>,
    /// Work limits of path building.
    pub budget: Budget,
}

impl VerifyOptions {
    /// Options for `purpose` at `time`, without a name check and with the
    /// default [`Budget`].
    pub fn new(time: OffsetDateTime, purpose: Purpose) -> Self {
        VerifyOptions {
            time,
            purpose,
            name: None,
            budget: Budget::default(),
        }
    }
}

/// A path that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPath {
    /// The certificates, leaf first, trust anchor last.
    pub certs: Vec<Certificate>,
}

impl VerifiedPath {
    /// The leaf.
    pub fn leaf(&self) -> Option<&Certificate> {
        self.certs.first()
    }

    /// The trust anchor that ended the path.
    pub fn anchor(&self) -> Option<&Certificate> {
        self.certs.last()
    }
}

/// Verifies `leaf` for `opts.purpose` (and `opts.name`) at `opts.time`,
/// through any of `intermediates`, up to any certificate of `anchors`.
///
/// Signature outcomes are remembered in the signature cache of `anchors`
/// ([`Bundle::signature_cache`]); the result never depends on what the
/// cache holds.
///
/// # Errors
///
/// The most specific [`VerifyError`] found when no path verifies (see its
/// documentation): a validity, usage, name or signature error of a real
/// candidate path wins over [`VerifyError::UnknownIssuer`], and
/// [`VerifyError::BudgetExceeded`] ends the search at once.
pub fn verify_chain(
    leaf: &Certificate,
    intermediates: &[Certificate],
    anchors: &Bundle,
    opts: &VerifyOptions,
) -> Result<VerifiedPath, VerifyError> {
    verify(
        leaf,
        intermediates,
        anchors,
        opts,
        anchors.signature_cache(),
    )
}

/// [`verify_chain`], remembering signature outcomes in `cache` instead of
/// the bundle's own cache (to share one cache between bundles, or to see
/// its hits). The result is the same as without the cache (a cache hit
/// counts against [`Budget::signatures`] like a check).
///
/// # Errors
///
/// The errors of [`verify_chain`].
pub fn verify_chain_cached(
    leaf: &Certificate,
    intermediates: &[Certificate],
    anchors: &Bundle,
    opts: &VerifyOptions,
    cache: &SignatureCache,
) -> Result<VerifiedPath, VerifyError> {
    verify(leaf, intermediates, anchors, opts, cache)
}

fn verify(
    leaf: &Certificate,
    intermediates: &[Certificate],
    anchors: &Bundle,
    opts: &VerifyOptions,
    cache: &SignatureCache,
) -> Result<VerifiedPath, VerifyError> {
    let time = crate::datetime::truncate(opts.time);
    // What concerns the leaf alone cannot be fixed by another path.
    profile::check_cert(leaf, Role::Leaf, opts.purpose)?;
    profile::check_validity(leaf, time)?;
    if let Some(name) = &opts.name {
        names::check_expected_name(leaf, name)?;
    }

    // A CA certificate of the bundle given as the chain is trusted by being
    // in the bundle, as OpenSSL (`openssl verify -CAfile ROOT ROOT`) and
    // Go's crypto/x509 (Verify returns the one-certificate chain when the
    // roots hold it) do; rustls-webpki refuses a CA certificate as an end
    // entity instead. The leaf's own checks above (profile, validity, the
    // expected name) still apply: trust comes from configuration, not
    // from a signature. An end-entity certificate is never its own anchor
    // (Go would accept one): a leaf that lands in a bundle by mistake must
    // not start verifying on its own.
    if leaf.is_ca() && anchors.certs().iter().any(|a| a == leaf) {
        return Ok(VerifiedPath {
            certs: vec![leaf.clone()],
        });
    }
    let anchors: Vec<&Certificate> = anchors.certs().iter().collect();
    let mut pool: Vec<&Certificate> = Vec::with_capacity(intermediates.len());
    for c in intermediates {
        if c != leaf && !anchors.contains(&c) && !pool.contains(&c) {
            pool.push(c);
        }
    }
    let mut builder = Builder {
        anchors,
        intermediates: pool,
        opts,
        time,
        cache,
        remaining: budget::Remaining::new(opts.budget),
        best: None,
    };
    let mut path = vec![leaf];
    if builder.extend(&mut path)? {
        return Ok(VerifiedPath {
            certs: path.into_iter().cloned().collect(),
        });
    }
    Err(builder.best.unwrap_or_else(|| unknown_issuer(leaf)))
}

fn unknown_issuer(cert: &Certificate) -> VerifyError {
    VerifyError::UnknownIssuer {
        cert: cert.id(),
        issuer: cert.issuer().to_string(),
    }
}

fn same_key_and_subject(a: &Certificate, b: &Certificate) -> bool {
    a.spki_der() == b.spki_der() && a.canonical_subject() == b.canonical_subject()
}

struct Builder<'a> {
    anchors: Vec<&'a Certificate>,
    intermediates: Vec<&'a Certificate>,
    opts: &'a VerifyOptions,
    time: OffsetDateTime,
    cache: &'a SignatureCache,
    remaining: budget::Remaining,
    /// The most specific error met so far (first of the highest rank).
    best: Option<VerifyError>,
}

impl<'a> Builder<'a> {
    fn record(&mut self, e: VerifyError) {
        if self.best.as_ref().is_none_or(|b| e.rank() > b.rank()) {
            self.best = Some(e);
        }
    }

    /// Candidate issuers of `child`, without the ones whose (subject, key)
    /// is already on the path: by key identifier first (see the module
    /// documentation), anchors before intermediates within each group.
    fn candidates(
        &self,
        child: &Certificate,
        path: &[&Certificate],
    ) -> Vec<(&'a Certificate, Role)> {
        let rank = |c: &Certificate| match (child.aki(), c.ski()) {
            (Some(aki), Some(ski)) if aki == ski => 0u8,
            (Some(_), Some(_)) => 2,
            _ => 1,
        };
        let anchors = self.anchors.iter().map(|c| (*c, Role::Anchor));
        let intermediates = self.intermediates.iter().map(|c| (*c, Role::Intermediate));
        let mut all: Vec<(&'a Certificate, Role)> = anchors
            .chain(intermediates)
            .filter(|(c, _)| c.subject_matches_issuer_of(child))
            .filter(|(c, _)| !path.iter().any(|p| same_key_and_subject(p, c)))
            .collect();
        // Stable: anchors stay before intermediates of the same rank.
        all.sort_by_key(|(c, _)| rank(c));
        all
    }

    /// Extends `path` (leaf first) up to an anchor. `Ok(false)`: no path
    /// through here (the reason is in `best`); `Err`: fatal.
    fn extend(&mut self, path: &mut Vec<&'a Certificate>) -> Result<bool, VerifyError> {
        let Some(&child) = path.last() else {
            return Ok(false);
        };
        let candidates = self.candidates(child, path);
        if candidates.is_empty() {
            self.record(unknown_issuer(child));
            return Ok(false);
        }
        for (candidate, role) in candidates {
            self.remaining.spend_build_step()?;
            if role == Role::Intermediate && path.len() > MAX_INTERMEDIATES {
                self.record(VerifyError::PathTooLong {
                    cert: child.id(),
                    max: MAX_INTERMEDIATES,
                });
                continue;
            }
            if let Err(e) = self.check_signature(child, candidate) {
                if matches!(e, VerifyError::BudgetExceeded { .. }) {
                    return Err(e);
                }
                self.record(e);
                continue;
            }
            if let Err(e) = self.check_issuer(path, candidate, role) {
                if matches!(e, VerifyError::BudgetExceeded { .. }) {
                    return Err(e);
                }
                self.record(e);
                continue;
            }
            path.push(candidate);
            if role == Role::Anchor || self.extend(path)? {
                return Ok(true);
            }
            path.pop();
        }
        Ok(false)
    }

    fn check_signature(
        &mut self,
        child: &Certificate,
        issuer: &Certificate,
    ) -> Result<(), VerifyError> {
        self.remaining.spend_signature()?;
        // The key that verified this very certificate before, in any bundle.
        let verified_by = &child.memo().verified_by;
        if verified_by.get() == Some(&issuer.spki_sha256()) {
            return Ok(());
        }
        let signed = signature::signed_parts(child)
            .map_err(|f| signature::into_error(f, child, issuer.id()))?;
        let cache = self.cache;
        let key = SignatureCache::key(&issuer.spki_sha256(), &child.fingerprint_sha256());
        if let Some(valid) = cache.get(&key) {
            return if valid {
                let _ = verified_by.set(issuer.spki_sha256());
                Ok(())
            } else {
                Err(VerifyError::BadSignature {
                    cert: child.id(),
                    issuer: issuer.id(),
                })
            };
        }
        let outcome = crate::signatures::check(signature::decoded_key(issuer), &signed);
        match &outcome {
            Ok(()) => {
                cache.insert(key, true);
                let _ = verified_by.set(issuer.spki_sha256());
            }
            Err(f) if f.is_cacheable() => cache.insert(key, false),
            Err(_) => {}
        }
        outcome.map_err(|f| signature::into_error(f, child, issuer.id()))
    }

    /// Checks `issuer` as the issuer of the last certificate of `path`.
    fn check_issuer(
        &mut self,
        path: &[&Certificate],
        issuer: &Certificate,
        role: Role,
    ) -> Result<(), VerifyError> {
        profile::check_cert(issuer, role, self.opts.purpose)?;
        profile::check_validity(issuer, self.time)?;
        if role == Role::Anchor && profile::is_legacy_anchor(issuer) {
            return Ok(());
        }
        if role == Role::Anchor && profile::anchor_aki_is_unusual(issuer) {
            // Counted like a check, but done once per certificate: the
            // answer is remembered with it.
            self.remaining.spend_signature()?;
            if signature::is_self_signed(issuer) {
                return Err(VerifyError::malformed(
                    issuer,
                    "self-signed trust anchor whose authorityKeyIdentifier is not just its \
                     subjectKeyIdentifier (CA/B Forum BR 7.1.2.1.3)",
                ));
            }
        }
        if let Some(path_len) = issuer.basic_constraints().and_then(|b| b.path_len) {
            // Intermediates below the issuer, the leaf excluded; self-issued
            // ones do not count (RFC 5280 §6.1.4(l)).
            let below = path.iter().skip(1).filter(|c| !c.is_self_issued()).count();
            if below > usize::from(path_len) {
                return Err(VerifyError::PathLenExceeded {
                    cert: issuer.id(),
                    path_len,
                    below,
                });
            }
        }
        if let Some(nc) = profile::name_constraints(issuer)? {
            for (i, cert) in path.iter().enumerate() {
                // Self-issued intermediates are exempt (RFC 5280 §6.1.3(b)).
                if i > 0 && cert.is_self_issued() {
                    continue;
                }
                names::check_name_constraints(issuer, &nc, cert, &mut self.remaining)?;
            }
        }
        Ok(())
    }
}
