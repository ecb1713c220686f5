//! Reading a CA signed by someone else's root: one PEM file or several,
//! and every way the input can be wrong.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::{
    Bundle, CaImport, CertificateAuthority, CertificateParams, Error, KeyAlgorithm, PrivateKey,
    Profile, renew_same_key,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: every certificate below is issued at this time.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

struct Org {
    root: CertificateAuthority,
    intermediate: CertificateAuthority,
    cluster: CertificateAuthority,
}

fn ca_under(
    issuer: &CertificateAuthority,
    cn: &str,
    path_len: Option<u8>,
    alg: KeyAlgorithm,
    rng: &mut ChaCha20Rng,
) -> CertificateAuthority {
    let key = PrivateKey::generate(alg, rng).unwrap();
    let params = CertificateParams::new(
        Profile::IntermediateCa { path_len },
        cn,
        T0,
        Duration::days(700),
    )
    .unwrap();
    let cert = issuer
        .issue(&params, &key.public_key().unwrap(), rng)
        .unwrap();
    CertificateAuthority::new(cert, key).unwrap()
}

fn org(seed: u64) -> Org {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let root = CertificateAuthority::generate_root(
        "Org Root",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(3650),
        &mut rng,
    )
    .unwrap();
    let intermediate = ca_under(
        &root,
        "Org Intermediate",
        Some(1),
        KeyAlgorithm::EcdsaP256,
        &mut rng,
    );
    let cluster = ca_under(
        &intermediate,
        "cluster-ca",
        Some(0),
        KeyAlgorithm::EcdsaP256,
        &mut rng,
    );
    Org {
        root,
        intermediate,
        cluster,
    }
}

fn key_pem(key: &pki_core::CaKey) -> String {
    key.to_pkcs8_pem().unwrap().to_string()
}

#[test]
fn one_file_with_key_and_chain_in_any_block_order_is_read() {
    let o = org(1);
    // Key in the middle, comments and CRLF between blocks, as people paste them.
    let pem = format!(
        "cluster CA\r\n{}subject=whatever\n{}\r\n{}{}",
        o.cluster.cert.to_pem().replace('\n', "\r\n"),
        key_pem(&o.cluster.key),
        o.intermediate.cert.to_pem(),
        o.root.cert.to_pem()
    );
    let import = CaImport::parse(pem.as_bytes(), None, None).unwrap();
    assert_eq!(import.cert, o.cluster.cert);
    assert_eq!(
        import.chain,
        [o.intermediate.cert.clone(), o.root.cert.clone()]
    );
    assert_eq!(import.root(), Some(&o.root.cert));
    assert_eq!(
        import.intermediates(),
        std::slice::from_ref(&o.intermediate.cert)
    );
    let path = import.verify_to_root(T0 + Duration::days(1)).unwrap();
    assert_eq!(path.anchor(), Some(&o.root.cert));
    let ca = import.authority().unwrap();
    assert_eq!(ca.cert, o.cluster.cert);
}

#[test]
fn key_and_chain_from_separate_files_are_read() {
    let o = org(2);
    let chain = format!("{}{}", o.intermediate.cert.to_pem(), o.root.cert.to_pem());
    let key = key_pem(&o.cluster.key);
    let import = CaImport::parse(
        o.cluster.cert.to_pem().as_bytes(),
        Some(key.as_bytes()),
        Some(chain.as_bytes()),
    )
    .unwrap();
    assert_eq!(import.chain.len(), 2);
    import.authority().unwrap();
}

#[test]
fn two_keys_in_one_file_are_refused_naming_both() {
    let o = org(3);
    let pem = format!(
        "{}{}{}",
        o.cluster.cert.to_pem(),
        key_pem(&o.cluster.key),
        key_pem(&o.intermediate.key)
    );
    let err = CaImport::parse(pem.as_bytes(), None, None).unwrap_err();
    assert!(matches!(err, Error::TwoPrivateKeys { .. }), "{err}");
    assert!(err.to_string().contains("PEM block 2"), "{err}");
    assert!(err.to_string().contains("PEM block 3"), "{err}");
}

#[test]
fn a_key_in_the_ca_file_and_another_in_the_key_file_are_two_keys() {
    let o = org(4);
    let pem = format!("{}{}", o.cluster.cert.to_pem(), key_pem(&o.cluster.key));
    let key = key_pem(&o.cluster.key);
    let err = CaImport::parse(pem.as_bytes(), Some(key.as_bytes()), None).unwrap_err();
    assert!(matches!(err, Error::TwoPrivateKeys { .. }), "{err}");
}

#[test]
fn a_key_without_a_certificate_is_refused() {
    let o = org(5);
    let err = CaImport::parse(key_pem(&o.cluster.key).as_bytes(), None, None).unwrap_err();
    assert!(matches!(err, Error::KeyWithoutCertificate { .. }), "{err}");
    assert!(err.to_string().contains("without a certificate"), "{err}");
}

#[test]
fn a_chain_out_of_order_is_refused_and_says_where_the_issuer_is() {
    let o = org(6);
    let pem = format!(
        "{}{}{}",
        o.cluster.cert.to_pem(),
        o.root.cert.to_pem(),
        o.intermediate.cert.to_pem()
    );
    let err = CaImport::parse(pem.as_bytes(), None, None).unwrap_err();
    let Error::ChainOutOfOrder { position, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*position, 2);
    assert!(err.to_string().contains("is certificate 3"), "{err}");
}

#[test]
fn a_chain_with_a_stranger_is_refused() {
    let o = org(7);
    let other = org(8);
    let pem = format!(
        "{}{}",
        o.cluster.cert.to_pem(),
        other.intermediate.cert.to_pem()
    );
    let err = CaImport::parse(pem.as_bytes(), None, None).unwrap_err();
    assert!(
        matches!(err, Error::ChainOutOfOrder { position: 2, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("no certificate supplied did"),
        "{err}"
    );
}

#[test]
fn a_certificate_after_the_root_is_refused() {
    let o = org(9);
    let pem = format!(
        "{}{}{}{}",
        o.cluster.cert.to_pem(),
        o.intermediate.cert.to_pem(),
        o.root.cert.to_pem(),
        org(10).root.cert.to_pem()
    );
    let err = CaImport::parse(pem.as_bytes(), None, None).unwrap_err();
    assert!(
        matches!(err, Error::ChainOutOfOrder { position: 4, .. }),
        "{err}"
    );
}

#[test]
fn an_encrypted_pkcs8_key_is_refused_with_the_openssl_command() {
    let o = org(11);
    // The label is what matters: the body is never decrypted.
    let encrypted = pki_core::pem::encode("ENCRYPTED PRIVATE KEY", &[0x30, 0x03, 0x02, 0x01, 0x00]);
    let pem = format!("{}{}", o.cluster.cert.to_pem(), encrypted);
    let err = CaImport::parse(pem.as_bytes(), None, None).unwrap_err();
    assert!(matches!(err, Error::EncryptedKey { .. }), "{err}");
    assert!(err.to_string().contains("openssl pkcs8"), "{err}");
}

#[test]
fn a_key_that_does_not_match_is_refused_for_every_key_type() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    for (cert_alg, key_alg) in [
        (KeyAlgorithm::EcdsaP256, KeyAlgorithm::EcdsaP256),
        (KeyAlgorithm::Rsa2048, KeyAlgorithm::Rsa2048),
        (KeyAlgorithm::EcdsaP256, KeyAlgorithm::Rsa2048),
        (KeyAlgorithm::Rsa2048, KeyAlgorithm::EcdsaP256),
    ] {
        let ca =
            CertificateAuthority::generate_root("ca", cert_alg, T0, Duration::days(30), &mut rng)
                .unwrap();
        let other = PrivateKey::generate(key_alg, &mut rng).unwrap();
        let pem = format!("{}{}", ca.cert.to_pem(), key_pem(&other.into()));
        let import = CaImport::parse(pem.as_bytes(), None, None).unwrap();
        let err = import.authority().unwrap_err();
        assert!(
            matches!(err, Error::KeyMismatch { .. }),
            "{cert_alg} vs {key_alg}: {err}"
        );
        // And the right key of that type is accepted.
        let pem = format!("{}{}", ca.cert.to_pem(), key_pem(&ca.key));
        CaImport::parse(pem.as_bytes(), None, None)
            .unwrap()
            .authority()
            .unwrap();
    }
}

#[test]
fn a_certificate_that_is_not_a_ca_is_refused() {
    let o = org(13);
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
    let mut params =
        CertificateParams::new(Profile::Server, "web", T0, Duration::days(30)).unwrap();
    params.dns_names.push("web.example".into());
    let leaf = o
        .cluster
        .issue(&params, &key.public_key().unwrap(), &mut rng)
        .unwrap();
    let pem = format!("{}{}", leaf.to_pem(), key_pem(&key.into()));
    let err = CaImport::parse(pem.as_bytes(), None, None)
        .unwrap()
        .authority()
        .unwrap_err();
    assert!(matches!(err, Error::NotACa { .. }), "{err}");
}

#[test]
fn a_chain_without_its_root_does_not_verify_to_a_root() {
    let o = org(14);
    let pem = format!(
        "{}{}",
        o.cluster.cert.to_pem(),
        o.intermediate.cert.to_pem()
    );
    let import = CaImport::parse(pem.as_bytes(), None, None).unwrap();
    assert_eq!(import.root(), None);
    let err = import.verify_to_root(T0).unwrap_err();
    assert!(matches!(err, Error::ChainHasNoRoot { .. }), "{err}");
}

#[test]
fn same_key_renewal_keeps_subject_key_and_ski_and_old_leaves_verify() {
    let mut rng = ChaCha20Rng::seed_from_u64(15);
    let ca = CertificateAuthority::generate_root(
        "service-ca",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(100),
        &mut rng,
    )
    .unwrap();
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
    let mut params =
        CertificateParams::new(Profile::Server, "web", T0, Duration::days(90)).unwrap();
    params.dns_names.push("web.example".into());
    let leaf = ca
        .issue(&params, &key.public_key().unwrap(), &mut rng)
        .unwrap();

    let later = T0 + Duration::days(80);
    let renewed = renew_same_key(&ca, later, Duration::days(365), &mut rng).unwrap();
    assert_eq!(renewed.subject(), ca.cert.subject());
    assert_eq!(renewed.spki_der(), ca.cert.spki_der());
    assert_eq!(renewed.ski(), ca.cert.ski());
    assert_ne!(renewed.serial(), ca.cert.serial());
    assert!(renewed.not_after() > ca.cert.not_after());
    assert!(pki_core::is_self_signed(&renewed));
    let mut opts = pki_core::VerifyOptions::new(later, pki_core::Purpose::ServerAuth);
    opts.name = Some(pki_core::ExpectedName::Dns("web.example".into()));
    pki_core::verify_chain(&leaf, &[], &Bundle::from_certs([renewed.clone()]), &opts).unwrap();
    assert_eq!(
        Bundle::from_certs([renewed]).spki_pins(),
        Bundle::from_certs([ca.cert]).spki_pins()
    );
}

#[test]
fn one_upload_file_is_read_and_validated_as_a_ca_to_sign_with() {
    let o = org(20);
    let at = T0 + Duration::days(1);
    let upload = |parts: &[String]| parts.concat();
    let (cert, key) = (o.cluster.cert.to_pem(), key_pem(&o.cluster.key));
    let (int, root) = (o.intermediate.cert.to_pem(), o.root.cert.to_pem());

    let ca = pki_core::import_ca_file(
        upload(&[key.clone(), cert.clone(), int.clone(), root.clone()]).as_bytes(),
        at,
    )
    .unwrap();
    assert_eq!(ca.authority.cert, o.cluster.cert);
    assert_eq!(ca.root(), &o.root.cert);
    assert_eq!(
        ca.intermediates(),
        std::slice::from_ref(&o.intermediate.cert)
    );
    // The cluster CA (700 days, cut at its issuer's) ends first.
    assert_eq!(ca.not_after(), o.cluster.cert.not_after());

    // A root imported alone is its own root.
    let root_ca =
        pki_core::import_ca_file(upload(&[root.clone(), key_pem(&o.root.key)]).as_bytes(), at)
            .unwrap();
    assert_eq!(root_ca.root(), &o.root.cert);
    assert!(root_ca.intermediates().is_empty());

    let refusal = |parts: &[String], at: OffsetDateTime| {
        pki_core::import_ca_file(upload(parts).as_bytes(), at).unwrap_err()
    };
    let err = refusal(&[cert.clone(), int.clone(), root.clone()], at);
    assert!(matches!(err, Error::MissingPrivateKey { .. }), "{err}");
    let stranger = key_pem(&o.intermediate.key);
    let err = refusal(&[cert.clone(), stranger, int.clone(), root.clone()], at);
    assert!(matches!(err, Error::KeyMismatch { .. }), "{err}");
    let err = refusal(&[cert.clone(), key.clone()], at);
    assert!(matches!(err, Error::ChainHasNoRoot { .. }), "{err}");
    let err = refusal(&[cert.clone(), key.clone(), int.clone()], at);
    assert!(matches!(err, Error::ChainHasNoRoot { .. }), "{err}");
    let err = refusal(&[cert.clone(), key.clone(), root.clone(), int.clone()], at);
    assert!(matches!(err, Error::ChainOutOfOrder { .. }), "{err}");
    let err = refusal(
        &[
            cert.clone(),
            key.clone(),
            key.clone(),
            int.clone(),
            root.clone(),
        ],
        at,
    );
    assert!(matches!(err, Error::TwoPrivateKeys { .. }), "{err}");
    // Valid when uploaded, not 800 days later (the cluster CA has expired).
    let err = refusal(&[cert, key, int, root], T0 + Duration::days(800));
    assert!(matches!(err, Error::ChainVerification { .. }), "{err}");
}
