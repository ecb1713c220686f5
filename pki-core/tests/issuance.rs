//! Issuance profiles and cross-signing produce the fields RFC 5280 and the
//! rotation scheme need.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, EKU_CLIENT_AUTH, EKU_SERVER_AUTH,
    Error, KeyAlgorithm, KeyUsages, LineageRule, PrivateKey, Profile, cross_sign, issued_by,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::net::IpAddr;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: an arbitrary fixed issuance time.
const NOW: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn rng(seed: u64) -> ChaCha20Rng {
    // Keys and signatures from this stream: the same seed, the same output.
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    ChaCha20Rng::seed_from_u64(seed)
}

fn root(seed: u64) -> CertificateAuthority {
    CertificateAuthority::generate_root(
        "service-ca",
        KeyAlgorithm::EcdsaP256,
        NOW,
        Duration::days(790),
        &mut rng(seed),
    )
    .unwrap()
}

fn server(ca: &CertificateAuthority, lifetime: Duration) -> (Certificate, PrivateKey) {
    let mut r = rng(99);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let mut p = CertificateParams::new(Profile::Server, "web", NOW, lifetime).unwrap();
    p.dns_names = vec!["web.ns.svc".into(), "Web.NS.svc.cluster.local".into()];
    p.ip_addresses = vec!["10.0.0.1".parse().unwrap()];
    (
        ca.issue(&p, &key.public_key().unwrap(), &mut r).unwrap(),
        key,
    )
}

#[test]
fn root_ca_has_critical_ca_constraints_and_cert_sign_usage() {
    let ca = root(1);
    let c = &ca.cert;
    let bc = c.basic_constraints().unwrap();
    assert!(bc.ca && bc.critical);
    let ku = c.key_usage().unwrap();
    assert!(ku.key_cert_sign() && ku.crl_sign() && ku.digital_signature());
    assert!(c.ski().is_some());
    assert!(c.aki().is_none(), "self-signed roots carry no AKI");
    assert!(c.looks_self_signed());
    assert_eq!(c.not_before(), NOW - Duration::minutes(5));
    assert_eq!(c.not_after(), NOW + Duration::days(790));
}

#[test]
fn serial_is_sixteen_bytes_and_positive() {
    for seed in 0..32 {
        let c = root(seed).cert;
        assert_eq!(c.serial().len(), 16);
        assert_eq!(c.serial()[0] & 0x80, 0);
    }
}

#[test]
fn server_leaf_has_san_eku_and_aki_copied_from_issuer_ski() {
    let ca = root(1);
    let (leaf, key) = server(&ca, Duration::days(365));
    assert_eq!(leaf.aki(), ca.cert.ski());
    assert_ne!(leaf.ski(), ca.cert.ski());
    assert!(!leaf.is_ca());
    assert_eq!(leaf.extended_key_usage().unwrap(), &[EKU_SERVER_AUTH]);
    assert!(
        leaf.key_usage()
            .unwrap()
            .0
            .contains(KeyUsages::DigitalSignature)
    );
    assert!(
        !leaf
            .key_usage()
            .unwrap()
            .0
            .contains(KeyUsages::KeyEncipherment)
    );
    assert_eq!(leaf.dns_names(), ["web.ns.svc", "web.ns.svc.cluster.local"]);
    assert_eq!(
        leaf.ip_addresses(),
        ["10.0.0.1".parse::<std::net::IpAddr>().unwrap()]
    );
    assert!(key.matches(leaf.public_key()));
    let lineage = issued_by(&leaf, &ca.cert);
    assert!(lineage.issued_by);
    assert_eq!(lineage.rule, LineageRule::KeyIdentifierMatch);
}

#[test]
fn rsa_leaf_also_allows_key_encipherment() {
    let ca = root(1);
    let mut r = rng(5);
    let key = PrivateKey::generate(KeyAlgorithm::Rsa2048, &mut r).unwrap();
    let mut p =
        CertificateParams::new(Profile::ServerClient, "web", NOW, Duration::days(30)).unwrap();
    p.dns_names = vec!["web".into()];
    let leaf = ca.issue(&p, &key.public_key().unwrap(), &mut r).unwrap();
    assert!(
        leaf.key_usage()
            .unwrap()
            .0
            .contains(KeyUsages::KeyEncipherment)
    );
    assert_eq!(
        leaf.extended_key_usage().unwrap(),
        &[EKU_SERVER_AUTH, EKU_CLIENT_AUTH]
    );
}

#[test]
fn every_leaf_profile_and_key_type_gets_its_own_usages_every_time() {
    // A leaf's basicConstraints, keyUsage and extendedKeyUsage are encoded
    // once per process and reused: each combination must keep its own.
    let ca = root(1);
    let mut r = rng(6);
    let ec = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let rsa = PrivateKey::generate(KeyAlgorithm::Rsa2048, &mut r).unwrap();
    for _ in 0..2 {
        for (profile, purposes) in [
            (Profile::Server, &[EKU_SERVER_AUTH][..]),
            (Profile::Client, &[EKU_CLIENT_AUTH][..]),
            (
                Profile::ServerClient,
                &[EKU_SERVER_AUTH, EKU_CLIENT_AUTH][..],
            ),
        ] {
            for (key, encipherment) in [(&ec, false), (&rsa, true)] {
                let mut p =
                    CertificateParams::new(profile, "web", NOW, Duration::days(30)).unwrap();
                p.dns_names = vec!["web".into()];
                let leaf = ca.issue(&p, &key.public_key().unwrap(), &mut r).unwrap();
                let bc = leaf.basic_constraints().unwrap();
                assert!(!bc.ca && bc.path_len.is_none(), "{profile:?}");
                let usage = if encipherment {
                    KeyUsages::DigitalSignature | KeyUsages::KeyEncipherment
                } else {
                    KeyUsages::DigitalSignature.into()
                };
                assert_eq!(leaf.key_usage().unwrap().0, usage, "{profile:?}");
                assert_eq!(leaf.extended_key_usage().unwrap(), purposes, "{profile:?}");
                let critical: Vec<_> = leaf
                    .x509()
                    .tbs_certificate()
                    .extensions()
                    .unwrap()
                    .iter()
                    .filter(|e| e.critical)
                    .map(|e| e.extn_id.to_string())
                    .collect();
                // basicConstraints and keyUsage, as x509-cert marks them.
                assert_eq!(critical, ["2.5.29.19", "2.5.29.15"], "{profile:?}");
            }
        }
    }
}

#[test]
fn leaf_not_after_is_capped_at_issuer_not_after() {
    let ca = root(1);
    let (leaf, _) = server(&ca, Duration::days(5000));
    assert_eq!(leaf.not_after(), ca.cert.not_after());
}

#[test]
fn leaf_from_another_ca_with_the_same_subject_is_not_issued_by_it() {
    let old = root(1);
    let new = root(2);
    assert_eq!(old.cert.subject(), new.cert.subject());
    let (leaf, _) = server(&old, Duration::days(30));
    let lineage = issued_by(&leaf, &new.cert);
    assert!(!lineage.issued_by);
    assert_eq!(lineage.rule, LineageRule::KeyIdentifierMismatch);
}

#[test]
fn cross_signed_cert_keeps_subject_spki_and_ski_and_takes_signer_ski_as_aki() {
    let old = root(1);
    let new = root(2);
    let not_after = NOW + Duration::days(900);
    let bridge = cross_sign(&old.cert, &new, not_after, &mut rng(3)).unwrap();
    assert_eq!(bridge.subject(), old.cert.subject());
    assert_eq!(bridge.public_key(), old.cert.public_key());
    assert_eq!(bridge.ski(), old.cert.ski());
    assert_eq!(bridge.aki(), new.cert.ski());
    assert_eq!(bridge.issuer(), new.cert.subject());
    assert_ne!(bridge.serial(), old.cert.serial());
    assert_eq!(bridge.not_after(), not_after);
    assert!(bridge.is_ca());
}

#[test]
fn mismatched_key_is_refused_as_ca() {
    let a = root(1);
    let b = root(2);
    let err = CertificateAuthority::new(a.cert.clone(), b.key).unwrap_err();
    assert!(matches!(err, Error::KeyMismatch { .. }));
}

#[test]
fn issuing_outside_the_issuer_validity_is_refused() {
    let ca = root(1);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(4)).unwrap();
    let mut p = CertificateParams::new(
        Profile::Server,
        "web",
        NOW - Duration::days(1),
        Duration::days(1),
    )
    .unwrap();
    p.dns_names = vec!["web".into()];
    assert!(matches!(
        ca.issue(&p, &key.public_key().unwrap(), &mut rng(4)),
        Err(Error::Issuance { .. })
    ));
}

#[test]
fn server_without_names_and_bad_dns_names_are_refused() {
    let ca = root(1);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(4)).unwrap();
    let mut p = CertificateParams::new(Profile::Server, "web", NOW, Duration::days(1)).unwrap();
    assert!(
        ca.issue(&p, &key.public_key().unwrap(), &mut rng(4))
            .is_err()
    );
    p.dns_names = vec!["bad name".into()];
    assert!(
        ca.issue(&p, &key.public_key().unwrap(), &mut rng(4))
            .is_err()
    );
}

#[test]
fn pem_roundtrip_keeps_exact_der_and_id_format() {
    let ca = root(1);
    let back = Certificate::from_pem(ca.cert.to_pem().as_bytes()).unwrap();
    assert_eq!(back, ca.cert);
    let id = back.id();
    let (ski, serial) = id.split_once('-').unwrap();
    assert_eq!(ski, &hex::encode(back.ski().unwrap())[..16]);
    assert_eq!(serial, back.serial_hex());
}

#[test]
fn bundle_dedups_prunes_and_fingerprints_independent_of_order() {
    let a = root(1).cert;
    let b = root(2).cert;
    let mut ab = Bundle::from_certs([a.clone(), b.clone(), a.clone()]);
    assert_eq!(ab.len(), 2);
    let ba = Bundle::from_certs([b.clone(), a.clone()]);
    assert_eq!(ab.fingerprint(), ba.fingerprint());
    assert_ne!(
        ab.fingerprint(),
        Bundle::from_certs([a.clone()]).fingerprint()
    );
    let parsed = Bundle::from_pem(ab.to_pem().as_bytes()).unwrap();
    assert_eq!(parsed, ab);
    let gone = ab.prune_expired(NOW + Duration::days(791));
    assert_eq!(gone.len(), 2);
    assert!(ab.is_empty());
    // A pruned certificate is forgotten: it can be added again.
    assert!(!ab.contains(&a));
    assert!(ab.push(a.clone()));
    assert!(!ab.push(a.clone()));
    assert_eq!(ab.certs(), [a]);
}

#[test]
fn bundle_of_thousands_keeps_first_insertion_order_and_drops_copies() {
    let a = root(1);
    let leaves: Vec<Certificate> = (0..500u64)
        .map(|i| {
            let mut p =
                CertificateParams::new(Profile::Client, "c", NOW, Duration::days(1)).unwrap();
            p.backdate = Duration::seconds(i as i64);
            a.issue(&p, a.cert.public_key(), &mut rng(i)).unwrap()
        })
        .collect();
    let doubled = leaves.iter().chain(leaves.iter().rev()).cloned();
    let bundle = Bundle::from_certs(doubled);
    assert_eq!(bundle.certs(), leaves.as_slice());
    let copy = Certificate::from_der(leaves[321].der()).unwrap();
    assert!(bundle.contains(&copy));
}

#[test]
fn spki_and_tbs_are_slices_of_the_certificate_der() {
    use der::Encode;
    let (leaf, key) = server(&root(1), Duration::days(30));
    assert_eq!(leaf.spki_der(), key.public_key_der().unwrap().as_slice());
    assert_eq!(leaf.public_key_der(), leaf.public_key().to_der().unwrap());
    assert_eq!(
        leaf.tbs_der(),
        leaf.x509().tbs_certificate().to_der().unwrap().as_slice()
    );
    let start = leaf
        .der()
        .windows(leaf.tbs_der().len())
        .position(|w| w == leaf.tbs_der());
    assert_eq!(start, Some(4));
}

#[test]
fn root_pin_hashes_der_not_pem_text() {
    let a = root(1).cert;
    let crlf = a.to_pem().replace('\n', "\r\n");
    let with_comment = format!("# my root\n{crlf}");
    let b1 = Bundle::from_pem(a.to_pem().as_bytes()).unwrap();
    let b2 = Bundle::from_pem(with_comment.as_bytes()).unwrap();
    assert_eq!(b1.root_pin().unwrap(), b2.root_pin().unwrap());
    use sha2::Digest;
    assert_eq!(
        b1.root_pin().unwrap(),
        hex::encode(sha2::Sha256::digest(a.der()))
    );
}

#[test]
fn non_certificate_block_in_bundle_is_an_error_naming_the_block() {
    let a = root(1);
    let key = a.key.to_pkcs8_pem().unwrap();
    let input = format!("{}{}", a.cert.to_pem(), key.as_str());
    let err = Bundle::from_pem(input.as_bytes()).unwrap_err();
    assert!(
        matches!(err, Error::UnexpectedPemLabel { block: 2, .. }),
        "{err}"
    );
}

#[test]
fn decode_errors_carry_the_der_error_as_their_source() {
    use std::error::Error as _;
    let err = Certificate::from_der(&[0x30, 0x03, 1, 2, 3]).unwrap_err();
    assert!(matches!(err, Error::CertificateDecode { .. }), "{err}");
    assert!(err.source().unwrap().downcast_ref::<der::Error>().is_some());

    // Give the first subjectAltName entry an unknown GeneralName tag, [25]:
    // the certificate still decodes, the extension does not.
    let (leaf, _) = server(&root(1), Duration::days(30));
    let san_oid = [0x06, 0x03, 0x55, 0x1d, 0x11];
    let at = leaf
        .der()
        .windows(san_oid.len())
        .position(|w| w == san_oid)
        .unwrap();
    let mut der = leaf.der().to_vec();
    // OID, then OCTET STRING header, then SEQUENCE header, then the entry.
    assert_eq!(der[at + 9], 0x82, "a dNSName comes first");
    der[at + 9] = 0x99;
    let err = Certificate::from_der(&der).unwrap_err();
    assert!(
        matches!(
            err,
            Error::MalformedExtension {
                extension: "subjectAltName",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.source().unwrap().downcast_ref::<der::Error>().is_some());

    // In a PEM bundle, the block is named and the certificate's error is the source.
    let pem = format!(
        "{}{}",
        leaf.to_pem(),
        pki_core::pem::encode("CERTIFICATE", &der)
    );
    let err = Bundle::from_pem(pem.as_bytes()).unwrap_err();
    assert!(matches!(err, Error::Pem { block: 2, .. }), "{err}");
    assert!(err.to_string().contains("subjectAltName"), "{err}");
    let inner = err.source().unwrap().downcast_ref::<Box<Error>>().unwrap();
    assert!(
        matches!(**inner, Error::MalformedExtension { .. }),
        "{inner}"
    );
}

#[test]
fn a_repeated_extension_is_refused_by_name() {
    // Turn the authorityKeyIdentifier OID into the subjectKeyIdentifier one:
    // two SKI extensions, whatever their values hold.
    let (leaf, _) = server(&root(1), Duration::days(30));
    let aki_oid = [0x06, 0x03, 0x55, 0x1d, 0x23];
    let at = leaf
        .der()
        .windows(aki_oid.len())
        .position(|w| w == aki_oid)
        .unwrap();
    let mut der = leaf.der().to_vec();
    der[at + 4] = 0x0e;
    assert_eq!(
        Certificate::from_der(&der).unwrap_err(),
        Error::DuplicateExtension {
            extension: "subjectKeyIdentifier"
        }
    );
}

/// DER length octets.
fn der_len(n: usize) -> Vec<u8> {
    match n {
        0..=127 => vec![n as u8],
        128..=255 => vec![0x81, n as u8],
        _ => vec![0x82, (n >> 8) as u8, n as u8],
    }
}

/// `cert` with its notBefore UTCTime set to `utc` (13 bytes, same length)
/// and signed again by `ca`: a certificate pki-core cannot issue itself.
fn with_not_before(cert: &Certificate, utc: &[u8; 13], ca: &CertificateAuthority) -> Vec<u8> {
    use der::Encode;
    use p256::pkcs8::DecodePrivateKey;
    use signature::Signer;
    let not_before = pki_core::datetime::to_x509(cert.not_before()).unwrap();
    let x509_cert::time::Time::UtcTime(t) = not_before else {
        panic!("2025 is a UTCTime");
    };
    let encoded = t.to_der().unwrap();
    let mut tbs = cert.tbs_der().to_vec();
    let at = tbs
        .windows(encoded.len())
        .position(|w| w == encoded.as_slice())
        .unwrap();
    tbs[at + 2..at + 15].copy_from_slice(utc);
    let key = p256::ecdsa::SigningKey::from_pkcs8_der(&ca.key.to_pkcs8_der().unwrap()).unwrap();
    let signature: p256::ecdsa::DerSignature = key.sign(&tbs);
    let mut bits = vec![0x03];
    bits.extend(der_len(signature.as_bytes().len() + 1));
    bits.push(0);
    bits.extend_from_slice(signature.as_bytes());
    let mut content = tbs;
    content.extend(cert.x509().signature_algorithm().to_der().unwrap());
    content.extend(bits);
    let mut der = vec![0x30];
    der.extend(der_len(content.len()));
    der.extend(content);
    der
}

#[test]
fn a_utc_time_not_before_of_1950_is_read_and_its_chain_verifies() {
    // NIST PKITS 4.2.3 (Valid pre2000 UTC notBefore Date): RFC 5280 reads
    // UTCTime "500101120000Z" as 1950-01-01T12:00:00Z. der 0.8 holds no
    // time before 1970 (docs/book/src/pre-1970-utctime.md), so pki-core reads it
    // itself; the signature covers the bytes as they are.
    use pki_core::verify::{Purpose, VerifyError, VerifyOptions, verify_chain};
    let ca = root(1);
    let (leaf, _) = server(&ca, Duration::days(30));
    let der = with_not_before(&leaf, b"500101120000Z", &ca);
    let cert = Certificate::from_der(&der).unwrap();
    assert_eq!(cert.not_before(), datetime!(1950-01-01 12:00 UTC));
    assert_eq!(cert.not_after(), leaf.not_after());
    assert_eq!(cert.der(), der.as_slice());
    // The decoded tree holds the documented stand-in, never the real time.
    assert_eq!(
        der::Encode::to_der(cert.x509().tbs_certificate())
            .unwrap()
            .windows(13)
            .filter(|w| *w == b"700101000000Z")
            .count(),
        1
    );
    assert_eq!(
        Certificate::from_pem(cert.to_pem().as_bytes()).unwrap(),
        cert
    );

    let anchors = Bundle::from_certs([ca.cert.clone()]);
    let opts = VerifyOptions::new(NOW + Duration::days(1), Purpose::ServerAuth);
    let path = verify_chain(&cert, &[], &anchors, &opts).unwrap();
    assert_eq!(path.certs.len(), 2);
    assert!(cert.is_valid_at(datetime!(1960-06-01 00:00 UTC)));
    assert!(!cert.is_valid_at(datetime!(1950-01-01 11:59:59 UTC)));

    // OpenSSL reads the same certificate and trusts the same chain.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca.cert.to_pem()).unwrap();
    std::fs::write(dir.path().join("leaf.pem"), cert.to_pem()).unwrap();
    let at = (NOW + Duration::days(1)).unix_timestamp().to_string();
    let o = std::process::Command::new("openssl")
        .current_dir(dir.path())
        .args([
            "verify",
            "-x509_strict",
            "-purpose",
            "sslserver",
            "-attime",
            &at,
        ])
        .args(["-CAfile", "ca.pem", "leaf.pem"])
        .output()
        .expect("openssl is not installed or cannot run; install it with `apt-get install openssl` (Debian) or run scripts/test.sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Another year in the signed bytes, without signing again: the
    // signature is checked over the original TBSCertificate, not over
    // the stand-in.
    let mut other = der.clone();
    let at = other
        .windows(13)
        .position(|w| w == b"500101120000Z")
        .unwrap();
    other[at + 1] = b'1';
    let forged = Certificate::from_der(&other).unwrap();
    assert_eq!(forged.not_before(), datetime!(1951-01-01 12:00 UTC));
    assert!(matches!(
        verify_chain(&forged, &[], &anchors, &opts),
        Err(VerifyError::BadSignature { .. })
    ));
}

#[test]
fn a_not_after_before_1970_and_a_malformed_early_time_are_still_refused() {
    let ca = root(1);
    let (leaf, _) = server(&ca, Duration::days(30));
    // A notAfter of 1960: expired for half a century, refused when parsed.
    let not_after = pki_core::datetime::to_x509(leaf.not_after()).unwrap();
    let x509_cert::time::Time::UtcTime(t) = not_after else {
        panic!("2026 is a UTCTime");
    };
    let encoded = der::Encode::to_der(&t).unwrap();
    let mut der = leaf.der().to_vec();
    let at = der
        .windows(encoded.len())
        .position(|w| w == encoded.as_slice())
        .unwrap();
    der[at + 2..at + 14].copy_from_slice(b"600101000000");
    let err = Certificate::from_der(&der).unwrap_err();
    assert!(matches!(err, Error::CertificateDecode { .. }), "{err}");
    assert!(err.to_string().contains("UTCTime"), "{err}");
    // A notBefore of 1950 that is not a valid date (February 30th).
    let der = with_not_before(&leaf, b"500230000000Z", &ca);
    let err = Certificate::from_der(&der).unwrap_err();
    assert!(matches!(err, Error::CertificateDecode { .. }), "{err}");
}

/// With the `ring` feature, keys and certificates made through the
/// operating system's RNG come from ring: they must be what RustCrypto
/// reads and verifies, and never repeat.
#[cfg(feature = "ring")]
#[test]
fn keys_and_certificates_made_with_the_os_rng_verify_with_rustcrypto() {
    use pki_core::{OsRng, os_rng, verify_signature};
    let mut os: OsRng = os_rng();
    let ca = CertificateAuthority::generate_root(
        "service-ca",
        KeyAlgorithm::EcdsaP256,
        NOW,
        Duration::days(790),
        &mut os,
    )
    .unwrap();
    verify_signature(ca.cert.public_key(), &ca.cert).unwrap();
    assert!(ca.key.private_key().unwrap().matches_certificate(&ca.cert));

    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os).unwrap();
    let mut p = CertificateParams::new(Profile::Server, "web", NOW, Duration::days(30)).unwrap();
    p.dns_names = vec!["web.ns.svc".into()];
    let leaf = ca.issue(&p, &key.public_key().unwrap(), &mut os).unwrap();
    verify_signature(ca.cert.public_key(), &leaf).unwrap();
    assert!(key.matches_certificate(&leaf));
    assert_eq!(
        issued_by(&leaf, &ca.cert).rule,
        LineageRule::KeyIdentifierMatch
    );

    // The generated key reads back from its PKCS#8, checked now, and signs
    // with RustCrypto too (a seeded RNG takes that path).
    let back = PrivateKey::from_pkcs8_der(&key.to_pkcs8_der().unwrap()).unwrap();
    assert!(back.matches_certificate(&leaf));
    let ca_back = CertificateAuthority::new(
        ca.cert.clone(),
        PrivateKey::from_pkcs8_der(&ca.key.to_pkcs8_der().unwrap()).unwrap(),
    )
    .unwrap();
    let again = ca_back
        .issue(&p, &key.public_key().unwrap(), &mut rng(5))
        .unwrap();
    verify_signature(ca.cert.public_key(), &again).unwrap();

    // Nothing repeats: another key, another signature over the same TBS.
    let other = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os).unwrap();
    assert_ne!(
        other.public_key_der().unwrap(),
        key.public_key_der().unwrap()
    );
    // A seeded RNG still gives the same key twice.
    let a = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(9)).unwrap();
    let b = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(9)).unwrap();
    assert_eq!(a.public_key_der().unwrap(), b.public_key_der().unwrap());
}

/// What pki writes is the DER x509-cert writes for the same fields: a
/// certificate decoded and encoded again by x509-cert keeps every byte
/// (issuance encodes the TBSCertificate itself, field by field).
#[test]
fn issued_certificates_encode_as_x509_cert_encodes_them() {
    use der::{Decode, Encode};
    let ca = root(1);
    let (leaf, _) = server(&ca, Duration::days(30));
    let bridge = cross_sign(&ca.cert, &root(2), NOW + Duration::days(900), &mut rng(3)).unwrap();
    for cert in [&ca.cert, &leaf, &bridge] {
        let decoded = x509_cert::Certificate::from_der(cert.der()).unwrap();
        assert_eq!(decoded.to_der().unwrap(), cert.der(), "{}", cert.id());
        assert_eq!(
            decoded.tbs_certificate().version(),
            x509_cert::certificate::Version::V3
        );
    }
}

/// A root named "ca", for 30 days from [`NOW`].
fn root_named_ca(seed: u64) -> CertificateAuthority {
    CertificateAuthority::generate_root(
        "ca",
        KeyAlgorithm::EcdsaP256,
        NOW,
        Duration::days(30),
        &mut rng(seed),
    )
    .unwrap()
}

#[test]
fn the_serial_read_from_the_der_is_the_decoded_one() {
    // The content octets of the INTEGER, as x509-cert hands them out.
    for seed in 0..64 {
        let cert = root_named_ca(seed).cert;
        assert_eq!(
            cert.serial(),
            cert.x509().tbs_certificate().serial_number().as_bytes(),
            "seed {seed}"
        );
    }
}

#[test]
fn names_in_order_are_those_issued_lowercased_and_nothing_else() {
    let mut rng = rng(7);
    let now = NOW;
    let ca = root_named_ca(7);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
    let mut params =
        CertificateParams::new(Profile::Server, "web", now, Duration::days(1)).unwrap();
    params.dns_names = vec!["Web.Example".into(), "web.ns.svc".into()];
    let v4: IpAddr = "10.0.0.1".parse().unwrap();
    let v6: IpAddr = "2001:db8::1".parse().unwrap();
    params.ip_addresses = vec![v4, v6];
    let cert = ca
        .issue(&params, &key.public_key().unwrap(), &mut rng)
        .unwrap();

    assert!(cert.has_names_in_order(&["web.example", "web.ns.svc"], &[v4, v6]));
    // The request's case does not matter: issuance lowercases.
    assert!(cert.has_names_in_order(&["WEB.EXAMPLE", "Web.Ns.Svc"], &[v4, v6]));
    for (dns, ips) in [
        (&["web.ns.svc", "web.example"][..], &[v4, v6][..]),
        (&["web.example", "web.ns.svc"], &[v6, v4]),
        (&["web.example"], &[v4, v6]),
        (&["web.example", "web.ns.svc", "more.example"], &[v4, v6]),
        (&["web.example", "web.ns.svc"], &[v4]),
        (&["web.example", "web.ns.svc"], &[v4, v6, v4]),
        (&["web.example", "web.ns.sv"], &[v4, v6]),
        (&[], &[]),
    ] {
        assert!(!cert.has_names_in_order(dns, ips), "{dns:?} {ips:?}");
    }
    // A certificate without the extension holds no names.
    let root = root_named_ca(1).cert;
    assert!(root.has_names_in_order::<&str>(&[], &[]));
    assert!(!root.has_names_in_order(&["ca"], &[]));
}
