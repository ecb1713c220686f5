//! The error type of path validation.
//!
//! It lives with [`crate::Error`] at the bottom of the crate, not with the
//! path builder that raises it, because an [`crate::Error`] can carry one
//! as its cause ([`crate::Error::UnsupportedSignature`]).

use crate::time_text::rfc3339;
use crate::usage::Purpose;
use der::asn1::ObjectIdentifier;
use std::fmt;
use time::OffsetDateTime;

fn t(time: &OffsetDateTime) -> String {
    rfc3339(*time)
}

/// Why a certificate chain did not verify.
///
/// Certificates are named by [`crate::Certificate::id`]. When every
/// candidate path fails, the most specific error is returned: a validity,
/// usage or signature error found on a real candidate path wins over
/// [`VerifyError::UnknownIssuer`]. [`VerifyError::BudgetExceeded`] ends the
/// search at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A certificate of the path ends before the verification time.
    #[error("certificate {cert} expired at {} (verification time {})", t(.not_after), t(.time))]
    Expired {
        /// The certificate's id.
        cert: String,
        /// Its NotAfter.
        not_after: OffsetDateTime,
        /// The verification time, truncated to whole seconds.
        time: OffsetDateTime,
    },
    /// A certificate of the path starts after the verification time.
    #[error("certificate {cert} is not valid before {} (verification time {})", t(.not_before), t(.time))]
    NotYetValid {
        /// The certificate's id.
        cert: String,
        /// Its NotBefore.
        not_before: OffsetDateTime,
        /// The verification time, truncated to whole seconds.
        time: OffsetDateTime,
    },
    /// No trust anchor or usable intermediate has the issuer name of a
    /// certificate (or every one that has it is already on the path).
    #[error("no trusted issuer found for certificate {cert} (issuer \"{issuer}\")")]
    UnknownIssuer {
        /// The certificate whose issuer is missing.
        cert: String,
        /// Its issuer name (RFC 4514).
        issuer: String,
    },
    /// A certificate's signature does not verify with a candidate issuer's key.
    #[error("signature of certificate {cert} does not verify with the key of {issuer}")]
    BadSignature {
        /// The signed certificate.
        cert: String,
        /// The candidate issuer (a certificate id, or `spki:<hex>` for a bare key).
        issuer: String,
    },
    /// A certificate is signed with an algorithm this verifier does not accept.
    /// Supported: ECDSA P-256 or P-384 with SHA-256 or SHA-384, RSA PKCS#1 v1.5 with
    /// SHA-256, SHA-384 or SHA-512.
    #[error("certificate {cert} is signed with unsupported algorithm {oid}")]
    UnsupportedSignatureAlgorithm {
        /// The signed certificate.
        cert: String,
        /// The signatureAlgorithm OID.
        oid: ObjectIdentifier,
    },
    /// The signature algorithm inside TBSCertificate differs from the outer
    /// signatureAlgorithm (RFC 5280 §4.1.1.2).
    #[error(
        "certificate {cert}: signature algorithm {inner} in TBSCertificate differs from outer {outer}"
    )]
    SignatureAlgorithmMismatch {
        /// The certificate.
        cert: String,
        /// TBSCertificate.signature.
        inner: ObjectIdentifier,
        /// Certificate.signatureAlgorithm.
        outer: ObjectIdentifier,
    },
    /// An issuer's public key is of a type or size this verifier refuses.
    #[error("key of issuer {issuer} is not accepted: {reason}")]
    UnsupportedPublicKey {
        /// The issuer (a certificate id, or `spki:<hex>` for a bare key).
        issuer: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The leaf's own public key is weak or of a refused kind: RSA under
    /// 2048 bits or not a whole number of bytes, DSA, or an EC key on a
    /// curve other than P-256, P-384 or P-521 (the same floor issuers'
    /// keys meet).
    #[error("public key of certificate {cert} is refused: {reason}")]
    WeakPublicKey {
        /// The certificate.
        cert: String,
        /// What is wrong with its key.
        reason: String,
    },
    /// A certificate used as an issuer is not a CA (basicConstraints
    /// missing or cA FALSE, RFC 5280 §4.2.1.9).
    #[error("certificate {cert} cannot issue certificates: {reason}")]
    NotACa {
        /// The would-be issuer.
        cert: String,
        /// Why it does not qualify.
        reason: &'static str,
    },
    /// A CA's pathLenConstraint allows fewer intermediates below it than the
    /// path has (self-issued intermediates do not count, RFC 5280 §6.1.4(l)).
    #[error("certificate {cert} allows {path_len} intermediate(s) below it, the path has {below}")]
    PathLenExceeded {
        /// The constraining CA.
        cert: String,
        /// Its pathLenConstraint.
        path_len: u8,
        /// Non-self-issued intermediates between it and the leaf.
        below: usize,
    },
    /// An issuer has a keyUsage extension without keyCertSign (RFC 5280 §4.2.1.3).
    #[error("certificate {cert} has keyUsage without keyCertSign and cannot issue certificates")]
    MissingKeyCertSign {
        /// The issuer.
        cert: String,
    },
    /// The leaf's keyUsage does not allow the key use the purpose needs
    /// (digitalSignature, or keyEncipherment for an RSA server key).
    #[error("keyUsage of certificate {cert} does not allow {purpose}")]
    LeafKeyUsage {
        /// The leaf.
        cert: String,
        /// The requested purpose.
        purpose: Purpose,
    },
    /// A certificate's extendedKeyUsage does not include the purpose (or
    /// anyExtendedKeyUsage). On a CA it constrains every certificate below.
    #[error("extendedKeyUsage of certificate {cert} does not allow {purpose}")]
    EkuNotAllowed {
        /// The certificate.
        cert: String,
        /// The requested purpose.
        purpose: Purpose,
    },
    /// A certificate has a critical extension this verifier does not process
    /// (RFC 5280 §4.2).
    #[error("certificate {cert} has unknown critical extension {oid}")]
    UnknownCriticalExtension {
        /// The certificate.
        cert: String,
        /// The extension's OID.
        oid: ObjectIdentifier,
    },
    /// A name of a certificate is outside the nameConstraints of a CA above
    /// it (RFC 5280 §4.2.1.10).
    #[error("name {name} of certificate {cert} violates the name constraints of {ca}: {reason}")]
    NameConstraintViolation {
        /// The constrained certificate.
        cert: String,
        /// The CA whose constraints it violates.
        ca: String,
        /// The offending name.
        name: String,
        /// Which rule: not permitted, excluded, or unsupported name type.
        reason: &'static str,
    },
    /// No subjectAltName of the leaf matches the expected name (the
    /// commonName is never used, RFC 6125 §6.4.4).
    #[error("certificate is not valid for {expected} (its names: {})", presented_list(.presented))]
    NameMismatch {
        /// The name asked for.
        expected: String,
        /// The DNS and IP subjectAltNames the leaf presents.
        presented: Vec<String>,
    },
    /// The expected DNS name is not a valid reference name.
    #[error("\"{name}\" is not a valid DNS name to verify against")]
    InvalidReferenceName {
        /// The name given.
        name: String,
    },
    /// A certificate used as an issuer is not X.509 v3 (only trust anchors
    /// may be v1).
    #[error(
        "CA certificate {cert} is version {version}, only v3 CAs can issue (v1 only as trust anchor)"
    )]
    CaNotV3 {
        /// The certificate.
        cert: String,
        /// Its version number (1, 2 or 3).
        version: u8,
    },
    /// The leaf is not X.509 v3.
    #[error("end-entity certificate {cert} is version {version}, v3 is required")]
    EndEntityNotV3 {
        /// The certificate.
        cert: String,
        /// Its version number (1, 2 or 3).
        version: u8,
    },
    /// A certificate breaks a rule of the RFC 5280 profile (serial,
    /// duplicate or mis-marked extensions, missing key identifiers,
    /// inconsistent basicConstraints and keyUsage, empty names…).
    #[error("certificate {cert} is malformed: {reason}")]
    MalformedCertificate {
        /// The certificate.
        cert: String,
        /// What is wrong.
        reason: String,
    },
    /// The path would need more intermediates than the verifier follows.
    #[error("path through certificate {cert} needs more than {max} intermediates")]
    PathTooLong {
        /// The certificate at which building stopped.
        cert: String,
        /// The maximum number of intermediates.
        max: usize,
    },
    /// The verification ran out of its [`Budget`](crate::verify::Budget). Fatal: no other
    /// path is tried.
    #[error("path building exceeded its budget of {what}")]
    BudgetExceeded {
        /// Which limit.
        what: BudgetKind,
    },
}

fn presented_list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// Which part of the [`Budget`](crate::verify::Budget) ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BudgetKind {
    /// [`Budget::signatures`](crate::verify::Budget::signatures).
    Signatures,
    /// [`Budget::build_steps`](crate::verify::Budget::build_steps).
    BuildSteps,
    /// [`Budget::name_constraint_checks`](crate::verify::Budget::name_constraint_checks).
    NameConstraintChecks,
}

impl fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BudgetKind::Signatures => "signature checks",
            BudgetKind::BuildSteps => "path-building steps",
            BudgetKind::NameConstraintChecks => "name constraint checks",
        })
    }
}
