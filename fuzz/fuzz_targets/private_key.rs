//! Private keys in every accepted encoding: PEM (PKCS#8, SEC1, PKCS#1
//! labels) and the three DER forms, all on the same arbitrary bytes.
//!
//! Checks: no panic; an accepted key writes PKCS#8 DER and PEM that read
//! back to the same public key and algorithm; the key matches its own
//! public key; it can sign a certificate whose signature verifies with
//! that public key. A key read as a store's own (`from_stored_pem`) may
//! carry a public point that is not its scalar's, but then it never signs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_core::{CertificateParams, KeyAlgorithm, PrivateKey, Profile, verify_signature};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::Duration;

fn check(key: PrivateKey) {
    let algorithm = key.algorithm();
    let spki = key.public_key().expect("an accepted key has a public key");
    let spki_der = key.public_key_der().expect("public key DER");
    assert!(key.matches(&spki));
    let _ = format!("{key:?}");

    let der = key.to_pkcs8_der().expect("an accepted key writes PKCS#8");
    let back = PrivateKey::from_pkcs8_der(&der).expect("our own PKCS#8 re-reads");
    assert_eq!(back.public_key().expect("public key"), spki);
    assert_eq!(back.public_key_der().expect("public key DER"), spki_der);
    assert_eq!(back.algorithm(), algorithm);

    let pem = key
        .to_pkcs8_pem()
        .expect("an accepted key writes PKCS#8 PEM");
    let back = PrivateKey::from_pem(pem.as_bytes()).expect("our own PKCS#8 PEM re-reads");
    assert_eq!(back.public_key().expect("public key"), spki);

    // An accepted key must be usable: sign a self-signed CA and verify it.
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let params = CertificateParams::new(Profile::RootCa, "fuzz", pki_fuzz::NOW, Duration::days(1))
        .expect("params");
    let cert = params
        .self_signed(&key, &mut rng)
        .expect("an accepted key can sign");
    verify_signature(&spki, &cert).expect("its signature verifies with its public key");
    if algorithm == KeyAlgorithm::EcdsaP256 {
        assert!(!algorithm.is_rsa());
    }
}

/// A key read the way a store reads its own: if it signs at all, its
/// signature verifies with the public key it reports.
fn check_stored(key: PrivateKey) {
    let Ok(spki) = key.public_key() else { return };
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let params = CertificateParams::new(Profile::RootCa, "fuzz", pki_fuzz::NOW, Duration::days(1))
        .expect("params");
    if let Ok(cert) = params.self_signed(&key, &mut rng) {
        verify_signature(&spki, &cert).expect("a stored key that signs is the key it reports");
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(key) = PrivateKey::from_stored_pem(data) {
        check_stored(key);
    }
    for result in [
        PrivateKey::from_pem(data),
        PrivateKey::from_pkcs8_der(data),
        PrivateKey::from_sec1_der(data),
        PrivateKey::from_pkcs1_der(data),
    ] {
        match result {
            Ok(key) => check(key),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
});
