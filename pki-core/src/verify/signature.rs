//! A certificate's signature, checked with an issuer's key: the signed
//! bytes taken out of the certificate, the decoded key and the answer
//! remembered with it, and the floor a leaf's own key must meet.

use crate::cert::{Certificate, ObjectIdentifier};
use crate::error::VerifyError;
use crate::signatures::{
    DecodedKey, EC_PUBLIC_KEY, RSA_ENCRYPTION, SECP256R1, SECP384R1, SigFailure, Signed, check,
    scheme, spki_label,
};
use der::asn1::BitString;
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};

/// The [`VerifyError`] of a failed check of `cert`'s signature by `issuer`.
pub(crate) fn into_error(failure: SigFailure, cert: &Certificate, issuer: String) -> VerifyError {
    match failure {
        SigFailure::AlgorithmMismatch { inner, outer } => VerifyError::SignatureAlgorithmMismatch {
            cert: cert.id(),
            inner,
            outer,
        },
        SigFailure::UnsupportedAlgorithm(oid) => VerifyError::UnsupportedSignatureAlgorithm {
            cert: cert.id(),
            oid,
        },
        SigFailure::UnsupportedKey(reason) => VerifyError::UnsupportedPublicKey { issuer, reason },
        SigFailure::Malformed(reason) => VerifyError::malformed(cert, reason),
        SigFailure::Invalid => VerifyError::BadSignature {
            cert: cert.id(),
            issuer,
        },
    }
}

/// Checks that `cert`'s signature verifies with `issuer_spki`.
///
/// Works for any pair, including a self-signed certificate and its own key
/// (`verify_signature(cert.public_key(), &cert)`). The issuer in errors is
/// named `spki:<first 16 hex of the key's SHA-256>`.
///
/// # Errors
///
/// - [`VerifyError::BadSignature`] when the signature does not verify with
///   `issuer_spki`;
/// - [`VerifyError::UnsupportedSignatureAlgorithm`] or
///   [`VerifyError::UnsupportedPublicKey`] when pki cannot check it;
/// - [`VerifyError::SignatureAlgorithmMismatch`] when the inner and outer
///   algorithms differ, and [`VerifyError::MalformedCertificate`] when the
///   signature cannot be read.
pub fn verify_signature(
    issuer_spki: &SubjectPublicKeyInfoOwned,
    cert: &Certificate,
) -> Result<(), VerifyError> {
    let issuer = spki_label(issuer_spki);
    let signed = signed_parts(cert).map_err(|f| into_error(f, cert, issuer.clone()))?;
    check(&DecodedKey::of(issuer_spki), &signed).map_err(|f| into_error(f, cert, issuer))
}

/// `cert`'s own key, decoded once and remembered with the certificate: an
/// issuer's key checks the signature of every certificate it issued.
pub(crate) fn decoded_key(cert: &Certificate) -> &DecodedKey {
    cert.memo()
        .more()
        .decoded_key
        .get_or_init(|| Box::new(DecodedKey::of(cert.public_key())))
}

/// Whether `cert`'s signature verifies with its own key, remembered with
/// the certificate.
pub(crate) fn is_self_signed(cert: &Certificate) -> bool {
    *cert.memo().more().self_signed.get_or_init(|| {
        signed_parts(cert)
            .and_then(|signed| check(decoded_key(cert), &signed))
            .is_ok()
    })
}

/// Extracts the signed bytes, the signature and the scheme of `cert`.
pub(crate) fn signed_parts(cert: &Certificate) -> Result<Signed<'_>, SigFailure> {
    // Read from the DER when both algorithms are encoded alike; anything
    // else from the decoded tree.
    if cert.signature_algorithms_match()
        && let Some((algorithm, bits)) = cert.raw_signature()
        && let Ok(outer) = <AlgorithmIdentifierOwned as der::Decode>::from_der(algorithm)
    {
        let scheme = scheme(&outer)?;
        let signature = match bits {
            [0, signature @ ..] => signature,
            _ => {
                return Err(SigFailure::Malformed(
                    "signature BIT STRING has unused bits",
                ));
            }
        };
        return Ok(Signed {
            tbs: cert.tbs_der(),
            signature,
            scheme,
        });
    }
    let x = cert.x509();
    let outer = x.signature_algorithm();
    let inner = x.tbs_certificate().signature();
    if outer != inner {
        return Err(SigFailure::AlgorithmMismatch {
            inner: inner.oid,
            outer: outer.oid,
        });
    }
    let scheme = scheme(outer)?;
    let tbs = cert.tbs_der();
    let signature = bit_string_bytes(x.signature()).ok_or(SigFailure::Malformed(
        "signature BIT STRING has unused bits",
    ))?;
    Ok(Signed {
        tbs,
        signature,
        scheme,
    })
}

fn bit_string_bytes(b: &BitString) -> Option<&[u8]> {
    b.as_bytes()
}

const SECP521R1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");
const DSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10040.4.1");

/// Refuses a certificate's own key when it is weak: RSA below 2048 bits
/// (or not a whole number of bytes, or with an even exponent), DSA, an EC
/// key on a curve other than P-256, P-384 or P-521 (P-192 and P-224
/// among them) or with explicit parameters. Issuers' keys meet the same
/// floor when their signatures are checked; this applies it to the leaf,
/// whose key is never used here. Other key types are not judged.
///
/// The algorithm is read in place; only an RSA key is decoded (its size
/// is its modulus), and then remembered as the certificate's key.
pub(crate) fn check_key_strength(cert: &Certificate) -> Result<(), String> {
    if algorithm_identifier(cert.spki_der()).is_some_and(|id| ACCEPTED_CURVES.contains(&id)) {
        return Ok(());
    }
    let in_place = <spki::SubjectPublicKeyInfoRef<'_> as der::Decode>::from_der(cert.spki_der())
        .map(|spki| (spki.algorithm.oid, spki.algorithm.parameters.map(curve_of)));
    let (oid, curve) = in_place.unwrap_or_else(|_| {
        let algorithm = &cert.public_key().algorithm;
        let parameters = algorithm.parameters.as_ref();
        (algorithm.oid, parameters.map(|p| curve_of(p.into())))
    });
    match oid {
        RSA_ENCRYPTION => match decoded_key(cert).rsa() {
            Ok(_) => Ok(()),
            Err(SigFailure::UnsupportedKey(reason)) => Err(reason.clone()),
            Err(_) => Err("not an RSA public key".to_owned()),
        },
        EC_PUBLIC_KEY => match curve.flatten() {
            Some(SECP256R1 | SECP384R1 | SECP521R1) => Ok(()),
            Some(other) => Err(format!(
                "EC key on curve {other} (accepted: P-256, P-384, P-521)"
            )),
            None => Err("EC key without a named curve (explicit or missing parameters)".into()),
        },
        DSA => Err("DSA key (DSA is not accepted)".into()),
        _ => Ok(()),
    }
}

/// The DER of the AlgorithmIdentifier of an EC key on P-256, P-384 and
/// P-521: the keys nearly every certificate has, recognised by their
/// exact encoding (DER has one) without a decoder.
const ACCEPTED_CURVES: [&[u8]; 3] = [
    &[
        0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
        0x48, 0xce, 0x3d, 0x03, 0x01, 0x07,
    ],
    &[
        0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x05, 0x2b, 0x81,
        0x04, 0x00, 0x22,
    ],
    &[
        0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x05, 0x2b, 0x81,
        0x04, 0x00, 0x23,
    ],
];

/// The AlgorithmIdentifier's DER in a SubjectPublicKeyInfo's.
fn algorithm_identifier(spki: &[u8]) -> Option<&[u8]> {
    use crate::cert::layout::tlv;
    let (0x30, content, _) = tlv(spki, 0)? else {
        return None;
    };
    let (0x30, _, end) = tlv(spki, content)? else {
        return None;
    };
    spki.get(content..end)
}

/// The named curve of EC key parameters, if that is what they are.
fn curve_of(parameters: der::AnyRef<'_>) -> Option<ObjectIdentifier> {
    parameters.decode_as::<ObjectIdentifier>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use der::Encode;

    #[test]
    fn the_accepted_curves_are_the_der_of_their_algorithm_identifiers() {
        for (curve, der) in [SECP256R1, SECP384R1, SECP521R1]
            .into_iter()
            .zip(ACCEPTED_CURVES)
        {
            let id = AlgorithmIdentifierOwned {
                oid: EC_PUBLIC_KEY,
                parameters: Some(der::Any::encode_from(&curve).unwrap()),
            };
            assert_eq!(id.to_der().unwrap(), der, "{curve}");
        }
    }
}

#[cfg(all(test, feature = "ring"))]
#[allow(clippy::unwrap_used)]
mod backends_agree {
    use super::*;
    use crate::signatures::check_with;
    use crate::{
        Backend, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile,
    };
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;
    use time::{Duration, macros::datetime};

    fn leaf(
        ca: &CertificateAuthority,
        algorithm: KeyAlgorithm,
        rng: &mut ChaCha20Rng,
    ) -> Certificate {
        let key = PrivateKey::generate(algorithm, rng).unwrap();
        let mut p = CertificateParams::new(
            Profile::Server,
            "web",
            datetime!(2026-01-01 00:00 UTC),
            Duration::days(30),
        )
        .unwrap();
        p.dns_names = vec!["web".into()];
        ca.issue(&p, &key.public_key().unwrap(), rng).unwrap()
    }

    #[test]
    fn ring_and_rust_crypto_give_the_same_answer_on_good_and_tampered_signatures() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let at = datetime!(2026-01-01 00:00 UTC);
        let p256 = CertificateAuthority::generate_root(
            "p",
            KeyAlgorithm::EcdsaP256,
            at,
            Duration::days(90),
            &mut rng,
        )
        .unwrap();
        let p384 = CertificateAuthority::generate_root(
            "q",
            KeyAlgorithm::EcdsaP384,
            at,
            Duration::days(90),
            &mut rng,
        )
        .unwrap();
        let rsa = CertificateAuthority::generate_root(
            "r",
            KeyAlgorithm::Rsa2048,
            at,
            Duration::days(90),
            &mut rng,
        )
        .unwrap();
        let certs = [
            p256.cert.clone(),
            p384.cert.clone(),
            rsa.cert.clone(),
            leaf(&p256, KeyAlgorithm::EcdsaP256, &mut rng),
            leaf(&p384, KeyAlgorithm::EcdsaP256, &mut rng),
            leaf(&rsa, KeyAlgorithm::EcdsaP256, &mut rng),
        ];
        let mut checked = (0, 0);
        for cert in &certs {
            let len = cert.der().len();
            let mut variants = vec![cert.clone()];
            for at in [len - 1, len - 9, len - 40, len / 2, 40] {
                let mut der = cert.der().to_vec();
                der[at] ^= 0x04;
                if let Ok(c) = Certificate::from_der(&der) {
                    variants.push(c);
                }
            }
            for variant in &variants {
                let Ok(signed) = signed_parts(variant) else {
                    continue;
                };
                for issuer in [&p256.cert, &p384.cert, &rsa.cert] {
                    let key = decoded_key(issuer);
                    let a = check_with(Backend::RustCrypto, key, &signed);
                    let b = check_with(Backend::Ring, key, &signed);
                    assert_eq!(a, b, "{variant:?} by {issuer:?}");
                    if a.is_ok() {
                        checked.0 += 1
                    } else {
                        checked.1 += 1
                    }
                }
            }
        }
        // Each original verifies with its issuer; the rest do not.
        assert_eq!(checked.0, 6);
        assert!(checked.1 > 20, "{checked:?}");
    }
}
