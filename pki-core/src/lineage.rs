//! Lineage: was a certificate issued by a given CA?
//!
//! Rotation reuses the CA's subject, so comparing issuer and subject names
//! cannot tell the old CA from the new one. The AuthorityKeyIdentifier of
//! the certificate is compared with the SubjectKeyIdentifier of the CA,
//! byte for byte. Only when the CA has no SKI at all (a legacy CA) do names
//! decide. The answer says which rule decided.

use crate::cert::Certificate;

/// The rule that decided a lineage question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LineageRule {
    /// The certificate's AKI equals the CA's SKI.
    KeyIdentifierMatch,
    /// The certificate's AKI differs from the CA's SKI.
    KeyIdentifierMismatch,
    /// The CA has an SKI but the certificate has no AKI: it cannot be shown
    /// to come from this CA, so it is treated as not issued by it.
    MissingAuthorityKeyIdentifier,
    /// The CA has no SKI; the certificate's issuer name equals the CA's subject.
    LegacyNameMatch,
    /// The CA has no SKI; the names differ.
    LegacyNameMismatch,
}

/// The answer to "was `cert` issued by `ca`?" with its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Lineage {
    /// Whether the certificate descends from the CA.
    pub issued_by: bool,
    /// Which rule decided.
    pub rule: LineageRule,
}

impl std::fmt::Display for Lineage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.rule {
            LineageRule::KeyIdentifierMatch => "authority key id matches the CA's subject key id",
            LineageRule::KeyIdentifierMismatch => {
                "authority key id differs from the CA's subject key id"
            }
            LineageRule::MissingAuthorityKeyIdentifier => {
                "certificate has no authority key id; the CA has a subject key id"
            }
            LineageRule::LegacyNameMatch => {
                "CA has no subject key id; issuer name equals the CA's subject"
            }
            LineageRule::LegacyNameMismatch => {
                "CA has no subject key id; issuer name differs from the CA's subject"
            }
        })
    }
}

/// Whether `cert` was issued by `ca`, by AKI == SKI (names only for a CA without SKI).
pub fn issued_by(cert: &Certificate, ca: &Certificate) -> Lineage {
    let (issued_by, rule) = match (ca.ski(), cert.aki()) {
        (Some(ski), Some(aki)) if ski == aki => (true, LineageRule::KeyIdentifierMatch),
        (Some(_), Some(_)) => (false, LineageRule::KeyIdentifierMismatch),
        (Some(_), None) => (false, LineageRule::MissingAuthorityKeyIdentifier),
        (None, _) if ca.subject_matches_issuer_of(cert) => (true, LineageRule::LegacyNameMatch),
        (None, _) => (false, LineageRule::LegacyNameMismatch),
    };
    Lineage { issued_by, rule }
}
