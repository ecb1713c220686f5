//! Per-certificate checks of the RFC 5280 profile: version, serial,
//! extensions, basic constraints, key usage, extended key usage, validity.
//!
//! These checks look at one certificate in its role (leaf, intermediate,
//! trust anchor); the checks that relate certificates (signatures, path
//! length, name constraints) live in the path builder.

use super::Purpose;
use crate::cert::{Certificate, ObjectIdentifier};
use crate::error::VerifyError;
use crate::usage::EKU_ANY;
use der::Decode;
use std::sync::Arc;
use time::OffsetDateTime;
use x509_cert::certificate::Version;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{AuthorityInfoAccessSyntax, KeyUsages, NameConstraints};

const BASIC_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.19");
const KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.15");
const EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
const SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
const NAME_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.30");
const SUBJECT_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.14");
const AUTHORITY_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");
const CERTIFICATE_POLICIES: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.32");
const POLICY_MAPPINGS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.33");
const INHIBIT_ANY_POLICY: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.54");
const AUTHORITY_INFO_ACCESS: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.1");

/// Extensions that may be critical because this verifier acts on them.
///
/// The policy extensions are here because, with the initial policy set
/// `anyPolicy` and no explicit policy required (what a TLS client asks),
/// certificatePolicies, policyMappings and inhibitAnyPolicy can only prune
/// the valid policy tree, never fail the path (RFC 5280 §6.1.5(g)).
/// policyConstraints is not: its requireExplicitPolicy could fail a path,
/// and we do not process it, so a critical one is refused.
const UNDERSTOOD_CRITICAL: [ObjectIdentifier; 8] = [
    BASIC_CONSTRAINTS,
    KEY_USAGE,
    EXT_KEY_USAGE,
    SUBJECT_ALT_NAME,
    NAME_CONSTRAINTS,
    CERTIFICATE_POLICIES,
    POLICY_MAPPINGS,
    INHIBIT_ANY_POLICY,
];

/// The role of a certificate on a candidate path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The certificate being verified.
    Leaf,
    /// An untrusted issuer between the leaf and the anchor.
    Intermediate,
    /// A certificate of the trust bundle.
    Anchor,
}

fn version_number(v: Version) -> u8 {
    match v {
        Version::V1 => 1,
        Version::V2 => 2,
        Version::V3 => 3,
    }
}

/// Validity at `time` (already truncated to whole seconds), both ends
/// inclusive (RFC 5280 §4.1.2.5).
pub(crate) fn check_validity(cert: &Certificate, time: OffsetDateTime) -> Result<(), VerifyError> {
    if time < cert.not_before() {
        return Err(VerifyError::NotYetValid {
            cert: cert.id(),
            not_before: cert.not_before(),
            time,
        });
    }
    if time > cert.not_after() {
        return Err(VerifyError::Expired {
            cert: cert.id(),
            not_after: cert.not_after(),
            time,
        });
    }
    Ok(())
}

/// Whether a trust anchor is a version 1 (or 2) certificate: such anchors
/// carry no extensions and are trusted as CAs by configuration.
pub(crate) fn is_legacy_anchor(cert: &Certificate) -> bool {
    cert.version() != Version::V3
}

/// Checks everything about `cert` that does not depend on the rest of the
/// path. Issuers (intermediates and v3 anchors) must be CAs.
///
/// The outcome depends on the certificate, its role and the purpose only,
/// so a pass is remembered with the certificate.
pub(crate) fn check_cert(
    cert: &Certificate,
    role: Role,
    purpose: Purpose,
) -> Result<(), VerifyError> {
    use std::sync::atomic::Ordering;
    let role_index = match role {
        Role::Leaf => 0,
        Role::Intermediate => 1,
        Role::Anchor => 2,
    };
    let purpose_index = match purpose {
        Purpose::ServerAuth => 0,
        Purpose::ClientAuth => 1,
    };
    let bit = 1u8 << (role_index * 2 + purpose_index);
    let passed = &cert.memo().profile_passed;
    if passed.load(Ordering::Relaxed) & bit != 0 {
        return Ok(());
    }
    check_profile(cert, role, purpose)?;
    passed.fetch_or(bit, Ordering::Relaxed);
    Ok(())
}

fn check_profile(cert: &Certificate, role: Role, purpose: Purpose) -> Result<(), VerifyError> {
    // Read from the DER: the decoded tree only for what is unusual.
    if !cert.signature_algorithms_match() {
        let x = cert.x509();
        return Err(VerifyError::SignatureAlgorithmMismatch {
            cert: cert.id(),
            inner: x.tbs_certificate().signature().oid,
            outer: x.signature_algorithm().oid,
        });
    }
    let version = cert.version();
    if version != Version::V3 {
        match role {
            Role::Leaf => {
                return Err(VerifyError::EndEntityNotV3 {
                    cert: cert.id(),
                    version: version_number(version),
                });
            }
            Role::Intermediate => {
                return Err(VerifyError::CaNotV3 {
                    cert: cert.id(),
                    version: version_number(version),
                });
            }
            Role::Anchor => {
                if cert.x509().tbs_certificate().extensions().is_some() {
                    return Err(VerifyError::malformed(
                        cert,
                        "extensions in a certificate that is not version 3",
                    ));
                }
                return check_names_present(cert, true);
            }
        }
    }
    // A trust anchor is trusted for its subject and key by configuration:
    // how it was itself issued (serial, AKI) does not matter. Real roots
    // include serial 0, and cross-signed anchors without an AKI.
    if role != Role::Anchor {
        check_serial(cert)?;
    }
    check_extensions(cert)?;
    let is_issuer = role != Role::Leaf;
    if is_issuer {
        check_is_ca(cert, role)?;
    }
    if role == Role::Leaf {
        check_leaf_profile(cert)?;
    }
    check_key_identifiers(cert, role)?;
    check_ca_consistency(cert, is_issuer)?;
    check_names_present(cert, is_issuer || cert.is_ca())?;
    check_eku(cert, purpose)?;
    // A CA certificate in leaf position is being validated as a CA (does
    // this intermediate chain to the bundle?); its keyUsage is about
    // signing certificates, not TLS. RFC 5280 allows it (x509-limbo
    // `rfc5280::ca-as-leaf`).
    if role == Role::Leaf && !cert.is_ca() {
        check_leaf_key_usage(cert, purpose)?;
    }
    Ok(())
}

/// Whether a self-issued trust anchor has an authorityKeyIdentifier that a
/// self-signed root must not have (CA/B Forum BR §7.1.2.1.3: keyIdentifier
/// only, equal to the subjectKeyIdentifier). Whether it is self-signed,
/// rather than cross-signed under the same name as a rotation bridge is,
/// is for the caller to find out with a signature check.
pub(crate) fn anchor_aki_is_unusual(cert: &Certificate) -> bool {
    if !cert.is_self_issued() {
        return false;
    }
    cert.authority_key_id()
        .is_some_and(|aki| aki.has_issuer_and_serial || cert.aki() != cert.ski())
}

fn check_names_present(cert: &Certificate, is_ca: bool) -> Result<(), VerifyError> {
    if cert.issuer_is_empty() {
        return Err(VerifyError::malformed(
            cert,
            "empty issuer name (RFC 5280 §4.1.2.4)",
        ));
    }
    if is_ca && cert.subject_is_empty() {
        return Err(VerifyError::malformed(
            cert,
            "CA certificate with an empty subject name (RFC 5280 §4.1.2.6)",
        ));
    }
    Ok(())
}

/// RFC 5280 §4.1.2.2: positive, at most 20 octets.
fn check_serial(cert: &Certificate) -> Result<(), VerifyError> {
    let content = cert.serial_content();
    if content.first().is_some_and(|b| b & 0x80 != 0) {
        return Err(VerifyError::malformed(cert, "negative serial number"));
    }
    if content.iter().all(|b| *b == 0) {
        return Err(VerifyError::malformed(cert, "serial number is zero"));
    }
    let magnitude = content.strip_prefix(&[0]).unwrap_or(content);
    if magnitude.len() > 20 {
        return Err(VerifyError::malformed(
            cert,
            format!("serial number of {} octets (at most 20)", magnitude.len()),
        ));
    }
    Ok(())
}

/// An extension's OID, from the content octets the certificate carries
/// (decoded when it was parsed).
fn oid_of(content: &[u8]) -> ObjectIdentifier {
    const UNREADABLE: ObjectIdentifier = ObjectIdentifier::new_unwrap("0.0");
    ObjectIdentifier::from_bytes(content).unwrap_or(UNREADABLE)
}

fn check_extensions(cert: &Certificate) -> Result<(), VerifyError> {
    for (i, (id, critical, _)) in cert.raw_extensions().enumerate() {
        if cert.raw_extensions().take(i).any(|(e, _, _)| e == id) {
            return Err(VerifyError::malformed(
                cert,
                format!("extension {} appears twice (RFC 5280 §4.2)", oid_of(id)),
            ));
        }
        // OIDs compared by their encodings (equal OIDs are equal bytes):
        // decoding every extension's OID of every certificate of every
        // chain was a tenth of verifying a bundle's leaves.
        let must_not_be_critical = [
            (AUTHORITY_KEY_ID, "authorityKeyIdentifier"),
            (SUBJECT_KEY_ID, "subjectKeyIdentifier"),
            (AUTHORITY_INFO_ACCESS, "authorityInfoAccess"),
        ]
        .into_iter()
        .find_map(|(oid, name)| (critical && oid.as_bytes() == id).then_some(name));
        if let Some(name) = must_not_be_critical {
            return Err(VerifyError::malformed(
                cert,
                format!("{name} is marked critical (RFC 5280 requires non-critical)"),
            ));
        }
        if critical && !UNDERSTOOD_CRITICAL.iter().any(|o| o.as_bytes() == id) {
            return Err(VerifyError::UnknownCriticalExtension {
                cert: cert.id(),
                oid: oid_of(id),
            });
        }
    }
    // The one copy (repeats were refused above), decoded as x509-cert's
    // `get_extension` decodes it.
    let aia = cert
        .raw_extensions()
        .find(|(id, _, _)| *id == AUTHORITY_INFO_ACCESS.as_bytes());
    if let Err(e) = aia
        .map(|(_, _, value)| AuthorityInfoAccessSyntax::from_der(value))
        .transpose()
        .and_then(|aia| match aia {
            Some(a) if a.0.is_empty() => Err(der::ErrorKind::Length {
                tag: der::Tag::Sequence,
            }
            .into()),
            _ => Ok(()),
        })
    {
        return Err(VerifyError::malformed(
            cert,
            format!("authorityInfoAccess: {e}"),
        ));
    }
    if cert.extended_key_usage().is_some_and(<[_]>::is_empty) {
        return Err(VerifyError::malformed(
            cert,
            "extKeyUsage lists no purpose (RFC 5280 §4.2.1.12)",
        ));
    }
    Ok(())
}

/// What RFC 5280 asks of the certificate being verified, beyond what
/// every certificate must be:
///
/// - no nameConstraints unless it is a CA ("MUST be used only in a CA
///   certificate", §4.2.1.10);
/// - an empty subject only with a subjectAltName marked critical
///   (§4.2.1.6);
/// - a public key that is not weak: issuers' keys are checked when their
///   signatures are, and the leaf's key signs the TLS handshake.
fn check_leaf_profile(cert: &Certificate) -> Result<(), VerifyError> {
    let has = |oid: ObjectIdentifier| {
        cert.raw_extensions()
            .find(|(id, _, _)| *id == oid.as_bytes())
            .map(|(_, critical, _)| critical)
    };
    if !cert.is_ca() && has(NAME_CONSTRAINTS).is_some() {
        return Err(VerifyError::malformed(
            cert,
            "nameConstraints in an end-entity certificate (RFC 5280 §4.2.1.10: CA certificates only)",
        ));
    }
    if cert.subject_is_empty() && has(SUBJECT_ALT_NAME) != Some(true) {
        return Err(VerifyError::malformed(
            cert,
            "empty subject without a critical subjectAltName (RFC 5280 §4.2.1.6)",
        ));
    }
    super::signature::check_key_strength(cert).map_err(|reason| VerifyError::WeakPublicKey {
        cert: cert.id(),
        reason,
    })
}

/// RFC 5280 §4.2.1.9: an issuer needs basicConstraints with cA.
///
/// A conforming CA marks the extension critical, but path validation asks
/// only for cA (§6.1.4(k)): an intermediate whose basicConstraints is not
/// critical is accepted (NIST PKITS 4.6.4). A trust anchor's must be
/// critical (x509-limbo `rfc5280::root-non-critical-basic-constraints`,
/// core tier): an anchor is configured, not validated, so its profile is
/// all there is to check.
fn check_is_ca(cert: &Certificate, role: Role) -> Result<(), VerifyError> {
    let not_a_ca = |reason| VerifyError::NotACa {
        cert: cert.id(),
        reason,
    };
    let bc = cert
        .basic_constraints()
        .ok_or_else(|| not_a_ca("no basicConstraints extension"))?;
    if !bc.ca {
        return Err(not_a_ca("basicConstraints cA is FALSE"));
    }
    if !bc.critical && role == Role::Anchor {
        return Err(VerifyError::malformed(
            cert,
            "basicConstraints of a trust anchor is not critical (RFC 5280 §4.2.1.9)",
        ));
    }
    Ok(())
}

/// RFC 5280 §4.2.1.1 and §4.2.1.2: every certificate but a self-issued one
/// (or a trust anchor) names its issuer's key; every CA names its own key.
fn check_key_identifiers(cert: &Certificate, role: Role) -> Result<(), VerifyError> {
    match cert.authority_key_id() {
        Some(aki) if aki.key_id.is_none() => {
            return Err(VerifyError::malformed(
                cert,
                "authorityKeyIdentifier without keyIdentifier (RFC 5280 §4.2.1.1)",
            ));
        }
        None if !cert.is_self_issued() && role != Role::Anchor => {
            return Err(VerifyError::malformed(
                cert,
                "no authorityKeyIdentifier (required unless self-issued, RFC 5280 §4.2.1.1)",
            ));
        }
        _ => {}
    }
    if cert.is_ca() && cert.ski().is_none() {
        return Err(VerifyError::malformed(
            cert,
            "CA certificate without subjectKeyIdentifier (RFC 5280 §4.2.1.2)",
        ));
    }
    Ok(())
}

/// keyUsage and basicConstraints must agree (RFC 5280 §4.2.1.3, §4.2.1.9).
fn check_ca_consistency(cert: &Certificate, is_issuer: bool) -> Result<(), VerifyError> {
    let bc = cert.basic_constraints();
    let ca = bc.is_some_and(|b| b.ca);
    let cert_sign = cert
        .key_usage()
        .map(|ku| ku.0.contains(KeyUsages::KeyCertSign));
    if cert_sign == Some(true) && !ca {
        return Err(VerifyError::malformed(
            cert,
            "keyUsage keyCertSign without basicConstraints cA (RFC 5280 §4.2.1.3)",
        ));
    }
    if bc.is_some_and(|b| b.path_len.is_some()) && !ca {
        return Err(VerifyError::malformed(
            cert,
            "pathLenConstraint without cA (RFC 5280 §4.2.1.9)",
        ));
    }
    if ca && cert_sign == Some(false) {
        if is_issuer {
            return Err(VerifyError::MissingKeyCertSign { cert: cert.id() });
        }
        return Err(VerifyError::malformed(
            cert,
            "basicConstraints cA with a keyUsage that lacks keyCertSign",
        ));
    }
    Ok(())
}

/// extKeyUsage, when present, must allow the purpose. On a CA it limits
/// what the CA may issue for, as Go, OpenSSL and NSS treat it.
fn check_eku(cert: &Certificate, purpose: Purpose) -> Result<(), VerifyError> {
    match cert.extended_key_usage() {
        Some(ekus) if !ekus.iter().any(|e| *e == purpose.oid() || *e == EKU_ANY) => {
            Err(VerifyError::EkuNotAllowed {
                cert: cert.id(),
                purpose,
            })
        }
        _ => Ok(()),
    }
}

/// keyUsage of the leaf, when present: TLS signs with the key
/// (digitalSignature); an RSA server may instead decrypt the TLS 1.2
/// premaster secret (keyEncipherment).
fn check_leaf_key_usage(cert: &Certificate, purpose: Purpose) -> Result<(), VerifyError> {
    let Some(ku) = cert.key_usage() else {
        return Ok(());
    };
    const RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
    // The key is decoded only when the answer depends on it: a leaf's key
    // is otherwise never read while its chain is verified.
    let allowed = ku.0.contains(KeyUsages::DigitalSignature)
        || (purpose == Purpose::ServerAuth
            && ku.0.contains(KeyUsages::KeyEncipherment)
            && cert.public_key().algorithm.oid == RSA_ENCRYPTION);
    if allowed {
        Ok(())
    } else {
        Err(VerifyError::LeafKeyUsage {
            cert: cert.id(),
            purpose,
        })
    }
}

/// The decoded nameConstraints of a CA, if it has them, refused when
/// malformed:
///
/// - neither permittedSubtrees nor excludedSubtrees, or both empty (RFC
///   5280 §4.2.1.10: "it is not permissible for both to be empty"; CA/B
///   Forum 7.1.2.5.2; x509-limbo `webpki::nc::intermediate-permitted-
///   excluded-subtrees-both-*`);
/// - a dNSName subtree that is not a host name, such as `.example.com`
///   (see [`super::names::valid_dns_constraint`]).
pub(crate) fn name_constraints(
    cert: &Certificate,
) -> Result<Option<Arc<NameConstraints>>, VerifyError> {
    let nc = cert
        .name_constraints()
        .map_err(|e| VerifyError::malformed(cert, format!("nameConstraints: {e}")))?;
    let Some(nc) = nc else {
        return Ok(None);
    };
    let permitted = nc.permitted_subtrees.as_deref().unwrap_or_default();
    let excluded = nc.excluded_subtrees.as_deref().unwrap_or_default();
    if permitted.is_empty() && excluded.is_empty() {
        return Err(VerifyError::malformed(
            cert,
            "nameConstraints with no permitted and no excluded subtree (RFC 5280 §4.2.1.10)",
        ));
    }
    for tree in permitted.iter().chain(excluded) {
        if let GeneralName::DnsName(d) = &tree.base
            && !super::names::valid_dns_constraint(d.as_str())
        {
            return Err(VerifyError::malformed(
                cert,
                format!(
                    "nameConstraints dNSName \"{}\" is not a host name (a leading period or \
                     a wildcard has no meaning in a dNSName constraint, RFC 5280 §4.2.1.10)",
                    d.as_str().escape_debug()
                ),
            ));
        }
    }
    Ok(Some(nc))
}
