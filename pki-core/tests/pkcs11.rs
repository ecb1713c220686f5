//! CA keys in a real PKCS#11 token (SoftHSM2, a token of each test's own):
//! generated inside the token, found again by URI, signing certificates
//! that OpenSSL (`openssl verify -x509_strict`) and a rustls handshake
//! over 127.0.0.1 trust; OpenSC's `pkcs11-tool`, an independent reader,
//! sees the private keys sensitive and never extractable; and each
//! mistake a user can make is one line naming what to fix.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../tests/support/openssl.rs"]
#[allow(dead_code)]
mod openssl;
#[path = "pkcs11/softhsm.rs"]
mod softhsm;
#[path = "../../src/tls.rs"]
#[allow(dead_code)]
mod tls;

use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, Error, Issuer, KeyAlgorithm,
    Pkcs11Key, Pkcs11Module, Pkcs11Pin, Pkcs11Token, Pkcs11Uri, PrivateKey, Profile, SigningKey,
    TokenKey, cross_sign_with, renew_same_key_with, verify_signature,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use softhsm::{LABEL, PIN, Token, in_token};
use std::path::Path;
use std::sync::Arc;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the issuance time of every certificate here; they are
// verified an hour later.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn login(token: &Token) -> Pkcs11Token {
    let module = Pkcs11Module::open(&token.module).unwrap();
    let uri = Pkcs11Uri::parse(&format!("pkcs11:token={LABEL}")).unwrap();
    module.login(&uri, &Pkcs11Pin::new(PIN)).unwrap()
}

/// A root CA whose key is generated in the token.
fn token_root(token: &Pkcs11Token, algorithm: KeyAlgorithm, id: u8) -> (Certificate, Pkcs11Key) {
    let label = format!("root-{algorithm}");
    let key = token.generate_key(algorithm, &[id], &label).unwrap();
    assert_eq!(key.algorithm(), algorithm);
    let params = CertificateParams::new(Profile::RootCa, &label, T0, Duration::days(365)).unwrap();
    let root = params
        .self_signed_with(&key, &mut rng(u64::from(id)))
        .unwrap();
    verify_signature(&key.public_key().unwrap(), &root).unwrap();
    (root, key)
}

/// A server leaf for localhost and 127.0.0.1, its key in this process.
fn leaf(issuer: &Issuer<'_>, seed: u64) -> (Certificate, PrivateKey) {
    let mut rng = rng(seed);
    let key = PrivateKey::generate_with(
        &pki_core::CryptoProvider::rust_crypto(),
        KeyAlgorithm::EcdsaP256,
        &mut rng,
    )
    .unwrap();
    let mut params =
        CertificateParams::new(Profile::Server, "web", T0, Duration::days(30)).unwrap();
    params.dns_names.push("localhost".into());
    params.ip_addresses.push("127.0.0.1".parse().unwrap());
    let cert = params
        .signed_with(&key.public_key().unwrap(), issuer, &mut rng)
        .unwrap();
    (cert, key)
}

/// OpenSSL and a rustls client holding `bundle` both trust `chain`.
fn trusted(bundle: &Bundle, chain: &[Certificate], key: &PrivateKey) {
    let at = T0 + Duration::hours(1);
    assert_eq!(
        openssl::verify(bundle, chain, at, "sslserver"),
        Ok(openssl::Verdict::Verified),
        "openssl verify -x509_strict"
    );
    tls::handshake(chain, key, bundle, "localhost", at).expect("rustls handshake");
    tls::handshake(chain, key, bundle, "127.0.0.1", at).expect("rustls handshake by IP");
}

fn a_token_ca_issues_a_trusted_leaf(token: &Token, algorithm: KeyAlgorithm) {
    let token = login(token);
    let (root, key) = token_root(&token, algorithm, 1);
    let issuer = Issuer::new(&root, &key).unwrap();
    let (cert, leaf_key) = leaf(&issuer, 2);
    verify_signature(root.public_key(), &cert).unwrap();
    trusted(&Bundle::from_certs([root.clone()]), &[cert], &leaf_key);
}

macro_rules! each_algorithm {
    ($($name:ident: $algorithm:expr,)*) => {$(
        #[test]
        fn $name() {
            in_token(stringify!($name), |token| {
                a_token_ca_issues_a_trusted_leaf(token, $algorithm)
            });
        }
    )*};
}

each_algorithm! {
    p256_token_ca_issues_a_leaf_openssl_and_rustls_trust: KeyAlgorithm::EcdsaP256,
    p384_token_ca_issues_a_leaf_openssl_and_rustls_trust: KeyAlgorithm::EcdsaP384,
    rsa2048_token_ca_issues_a_leaf_openssl_and_rustls_trust: KeyAlgorithm::Rsa2048,
    rsa3072_token_ca_issues_a_leaf_openssl_and_rustls_trust: KeyAlgorithm::Rsa3072,
    rsa4096_token_ca_issues_a_leaf_openssl_and_rustls_trust: KeyAlgorithm::Rsa4096,
}

#[test]
fn old_and_new_token_keys_sign_bridges_that_openssl_and_rustls_follow() {
    in_token(
        "old_and_new_token_keys_sign_bridges_that_openssl_and_rustls_follow",
        |token| {
            let token = login(token);
            let (old, old_key) = token_root(&token, KeyAlgorithm::EcdsaP256, 1);
            let (new, new_key) = token_root(&token, KeyAlgorithm::EcdsaP384, 2);
            let old_issuer = Issuer::new(&old, &old_key).unwrap();
            let new_issuer = Issuer::new(&new, &new_key).unwrap();
            // Bridge B: the new CA signed by the old key; a client that
            // trusts only the old root follows it to a leaf of the new CA.
            let bridge =
                cross_sign_with(&new, &old_issuer, T0 + Duration::days(30), &mut rng(3)).unwrap();
            let (cert, leaf_key) = leaf(&new_issuer, 4);
            trusted(
                &Bundle::from_certs([old.clone()]),
                &[cert.clone(), bridge],
                &leaf_key,
            );
            trusted(&Bundle::from_certs([new.clone()]), &[cert], &leaf_key);
            // Same-key renewal in the token keeps the key and verifies.
            let renewed =
                renew_same_key_with(&new_issuer, T0, Duration::days(400), &mut rng(5)).unwrap();
            assert_eq!(renewed.public_key(), new.public_key());
            verify_signature(new.public_key(), &renewed).unwrap();
        },
    );
}

#[test]
fn a_key_found_by_its_uri_is_the_key_generated() {
    in_token("a_key_found_by_its_uri_is_the_key_generated", |token| {
        let token = login(token);
        let made = token
            .generate_key(KeyAlgorithm::EcdsaP256, &[0xca, 0x01], "ca 2026")
            .unwrap();
        let uri = made.uri();
        assert_eq!(
            uri.to_string(),
            format!("pkcs11:token={LABEL};object=ca%202026;type=private;id=%CA%01")
        );
        let found = token
            .find_key(&Pkcs11Uri::parse(&uri.to_string()).unwrap())
            .unwrap();
        assert_eq!(found.public_key().unwrap(), made.public_key().unwrap());
        // By id alone, and by label alone.
        for text in ["pkcs11:id=%CA%01", "pkcs11:object=ca%202026;type=private"] {
            let found = token.find_key(&Pkcs11Uri::parse(text).unwrap()).unwrap();
            assert_eq!(found.id(), &[0xca, 0x01]);
        }
        assert_eq!(token.private_keys().unwrap(), vec![uri]);
        // A new id that is taken is refused, and no second key is made.
        let taken = token
            .generate_key(KeyAlgorithm::EcdsaP256, &[0xca, 0x01], "again")
            .unwrap_err();
        assert!(matches!(taken, Error::Pkcs11KeyExists { .. }), "{taken}");
        assert_eq!(token.private_keys().unwrap().len(), 1);
        // The issuer refuses a key that is not the certificate's.
        let (root, _) = token_root(&token, KeyAlgorithm::EcdsaP256, 2);
        let refused = Issuer::new(&root, &made).unwrap_err();
        assert!(matches!(refused, Error::KeyMismatch { .. }), "{refused}");
    });
}

/// A CA whose key is a token object, as a document keeps it (URI,
/// algorithm, public key): it signs only once the caller binds the object
/// the URI finds, and only if that object is the key the certificate
/// names.
#[test]
fn a_token_ca_key_signs_only_bound_to_its_own_object() {
    in_token(
        "a_token_ca_key_signs_only_bound_to_its_own_object",
        |token| {
            let token = login(token);
            let (root, key) = token_root(&token, KeyAlgorithm::EcdsaP256, 7);
            let uri = key.uri();
            let recorded = TokenKey::new(&uri, key.algorithm(), key.public_key().unwrap());
            assert_eq!(recorded.uri(), &uri, "a store keeps the URI that finds it");
            // Unbound: the CA pairs (the public key is the certificate's) but
            // refuses to sign, naming the key.
            let unbound = CertificateAuthority::new(root.clone(), recorded.clone()).unwrap();
            assert!(unbound.key.in_process().is_none());
            let mut params =
                CertificateParams::new(Profile::Server, "web", T0, Duration::days(30)).unwrap();
            params.dns_names.push("localhost".into());
            let leaf_key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(8)).unwrap();
            let spki = leaf_key.public_key().unwrap();
            let refused = unbound.issue(&params, &spki, &mut rng(9)).unwrap_err();
            assert!(
                matches!(refused, Error::Pkcs11TokenNotOpen { .. }),
                "{refused}"
            );
            one_line(&refused, &uri.to_string());
            let no_pem = unbound.key.to_pkcs8_pem().unwrap_err();
            assert!(no_pem.to_string().contains("never leaves"), "{no_pem}");
            // Another object of the token is refused, whatever its URI says.
            let other = token
                .generate_key(KeyAlgorithm::EcdsaP256, &[0x08], "other")
                .unwrap();
            let mut wrong = recorded.clone();
            let replaced = wrong.bind(Arc::new(other)).unwrap_err();
            assert!(
                matches!(replaced, Error::Pkcs11KeyReplaced { .. }),
                "{replaced}"
            );
            assert!(!wrong.is_bound());
            // Bound to the object the URI finds: a leaf OpenSSL and rustls trust.
            let mut bound = recorded;
            bound.bind(Arc::new(token.find_key(&uri).unwrap())).unwrap();
            let ca = CertificateAuthority::new(root.clone(), bound).unwrap();
            let (cert, leaf_key) = leaf(&ca.issuer(), 10);
            trusted(&Bundle::from_certs([root]), &[cert], &leaf_key);
        },
    );
}

/// The private key objects pkcs11-tool lists: each one's lines.
fn private_key_objects(listing: &str) -> Vec<String> {
    listing
        .split("Private Key Object")
        .skip(1)
        .map(|block| {
            block
                .split("Public Key Object")
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[test]
fn pkcs11_tool_sees_every_private_key_sensitive_and_never_extractable() {
    in_token(
        "pkcs11_tool_sees_every_private_key_sensitive_and_never_extractable",
        |token| {
            let session = login(token);
            for (i, algorithm) in [
                KeyAlgorithm::EcdsaP256,
                KeyAlgorithm::EcdsaP384,
                KeyAlgorithm::Rsa2048,
            ]
            .into_iter()
            .enumerate()
            {
                let id = u8::try_from(i + 1).unwrap();
                session
                    .generate_key(algorithm, &[id], &format!("ca-{algorithm}"))
                    .unwrap();
            }
            let listing = token.pkcs11_tool(&["--list-objects", "--type", "privkey"]);
            let objects = private_key_objects(&listing);
            assert_eq!(objects.len(), 3, "{listing}");
            for object in &objects {
                let access = object
                    .lines()
                    .find(|l| l.trim_start().starts_with("Access:"))
                    .unwrap_or_else(|| panic!("no Access line in {object}"));
                for flag in ["always sensitive", "never extractable", "local"] {
                    assert!(access.contains(flag), "{flag} missing: {access}");
                }
                let label = object
                    .lines()
                    .find(|l| l.trim_start().starts_with("label:"));
                assert!(
                    label.is_some_and(|l| l.trim_end().contains(" ca-")),
                    "{object}"
                );
            }
            // And the public keys are what pki reads.
            let public =
                token.pkcs11_tool_bytes(&["--read-object", "--type", "pubkey", "--id", "01"]);
            let spki = session
                .find_key(&Pkcs11Uri::parse("pkcs11:id=%01").unwrap())
                .unwrap()
                .public_key()
                .unwrap();
            assert_eq!(public, der::Encode::to_der(&spki).unwrap(), "SPKI DER");
        },
    );
}

#[test]
fn a_wrong_pin_is_one_line_naming_the_token() {
    in_token("a_wrong_pin_is_one_line_naming_the_token", |token| {
        let module = Pkcs11Module::open(&token.module).unwrap();
        let uri = Pkcs11Uri::parse(&format!("pkcs11:token={LABEL}")).unwrap();
        let e = module.login(&uri, &Pkcs11Pin::new("9999")).unwrap_err();
        assert_eq!(
            e,
            Error::Pkcs11WrongPin {
                token: LABEL.into()
            }
        );
        one_line(&e, "check the PIN file");
    });
}

#[test]
fn a_missing_token_is_one_line_listing_the_tokens() {
    in_token("a_missing_token_is_one_line_listing_the_tokens", |token| {
        let module = Pkcs11Module::open(&token.module).unwrap();
        let uri = Pkcs11Uri::parse("pkcs11:token=elsewhere;id=%01").unwrap();
        let e = module.login(&uri, &Pkcs11Pin::new(PIN)).unwrap_err();
        assert!(matches!(e, Error::Pkcs11TokenNotFound { .. }), "{e}");
        one_line(&e, "token=\"elsewhere\"");
        one_line(&e, &format!("(tokens: \"{LABEL}\")"));
        assert_eq!(module.token_labels().unwrap(), vec![LABEL.to_owned()]);
    });
}

#[test]
fn a_missing_module_or_a_file_that_is_not_one_is_one_line() {
    let e = Pkcs11Module::open(Path::new("/nonexistent/libpkcs11.so")).unwrap_err();
    assert!(matches!(e, Error::Pkcs11Module { .. }), "{e}");
    one_line(&e, "/nonexistent/libpkcs11.so: no such file");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-module.so");
    std::fs::write(&path, b"not a shared object").unwrap();
    let e = Pkcs11Module::open(&path).unwrap_err();
    assert!(matches!(e, Error::Pkcs11Module { .. }), "{e}");
    one_line(&e, "give the path of the token's module");
}

#[test]
fn a_key_object_that_vanished_is_one_line_and_destroying_is_explicit() {
    in_token(
        "a_key_object_that_vanished_is_one_line_and_destroying_is_explicit",
        |token| {
            let session = login(token);
            let (root, key) = token_root(&session, KeyAlgorithm::EcdsaP256, 7);
            // Another program deletes the private key object.
            token.pkcs11_tool(&["--delete-object", "--type", "privkey", "--id", "07"]);
            let uri = key.uri();
            let e = session.find_key(&uri).unwrap_err();
            assert_eq!(
                e,
                Error::Pkcs11KeyNotFound {
                    token: LABEL.into(),
                    object: "object=\"root-p256\" id=%07".into()
                }
            );
            one_line(&e, "the key object was deleted");
            // The handle held from before fails to sign, with the same error.
            let params =
                CertificateParams::new(Profile::RootCa, "x", T0, Duration::days(1)).unwrap();
            let e = params.self_signed_with(&key, &mut rng(1)).unwrap_err();
            assert!(matches!(e, Error::Pkcs11KeyNotFound { .. }), "{e}");
            drop(root);
            // Destroying is explicit, by id: the public key object goes
            // too; a second time there is nothing left.
            assert_eq!(session.destroy_key(&[7]).unwrap(), 1);
            let e = session.destroy_key(&[7]).unwrap_err();
            assert!(matches!(e, Error::Pkcs11KeyNotFound { .. }), "{e}");
            let made = session
                .generate_key(KeyAlgorithm::Rsa2048, &[8], "gone")
                .unwrap();
            assert_eq!(session.destroy_key(made.id()).unwrap(), 2);
            assert!(session.private_keys().unwrap().is_empty());
            let listing = token.pkcs11_tool(&["--list-objects"]);
            assert!(!listing.contains("gone"), "{listing}");
        },
    );
}

fn one_line(e: &Error, needle: &str) {
    let text = e.to_string();
    assert!(!text.contains('\n'), "one line: {text}");
    assert!(text.contains(needle), "{needle:?} not in: {text}");
}

/// Issuing leaves with the CA key in the token against the same with an
/// in-process key (leaf keys in this process either way, made once):
/// prints both rates and their ratio. Run by hand, in release:
/// `cargo test --release -p pki-core --features pkcs11 --test pkcs11 -- --ignored issuing_cost --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn issuing_cost_in_the_token_against_in_process() {
    in_token("issuing_cost_in_the_token_against_in_process", |token| {
        const LEAVES: u32 = 300;
        let session = login(token);
        let provider = pki_core::CryptoProvider::get_default();
        for algorithm in [KeyAlgorithm::EcdsaP256, KeyAlgorithm::Rsa2048] {
            let (token_root, token_key) = token_root(&session, algorithm, 1 + algorithm as u8);
            let local_key = PrivateKey::generate_with(&provider, algorithm, &mut rng(9)).unwrap();
            let params =
                CertificateParams::new(Profile::RootCa, "local", T0, Duration::days(365)).unwrap();
            let local_root = params.self_signed(&local_key, &mut rng(10)).unwrap();
            let leaf_key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(11)).unwrap();
            let spki = leaf_key.public_key().unwrap();
            let mut leaf =
                CertificateParams::new(Profile::Server, "web", T0, Duration::days(30)).unwrap();
            leaf.dns_names.push("localhost".into());
            let time = |issuer: &Issuer<'_>| {
                let mut rng = rng(12);
                let start = std::time::Instant::now();
                for _ in 0..LEAVES {
                    leaf.signed_with(&spki, issuer, &mut rng).unwrap();
                }
                start.elapsed()
            };
            let sign = |key: &dyn SigningKey| {
                let start = std::time::Instant::now();
                for _ in 0..LEAVES {
                    key.sign(b"a TBSCertificate", &provider).unwrap();
                }
                start.elapsed().as_secs_f64() * 1e6 / f64::from(LEAVES)
            };
            println!(
                "{algorithm}: a signature alone: token {:.0} µs, in-process {:.0} µs",
                sign(&token_key),
                sign(&local_key)
            );
            let in_token = time(&Issuer::new(&token_root, &token_key).unwrap());
            let in_process = time(&Issuer::new(&local_root, &local_key).unwrap());
            println!(
                "{algorithm}: {LEAVES} leaves: token {:?} ({:.0} µs each), in-process {:?} ({:.0} µs each), ratio {:.2}",
                in_token,
                in_token.as_secs_f64() * 1e6 / f64::from(LEAVES),
                in_process,
                in_process.as_secs_f64() * 1e6 / f64::from(LEAVES),
                in_token.as_secs_f64() / in_process.as_secs_f64()
            );
        }
    });
}
