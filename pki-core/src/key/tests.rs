//! Keys: generation, the encodings read and written, and the checks of a
//! stored public point.

use super::*;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn rng() -> ChaCha20Rng {
    crate::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    ChaCha20Rng::seed_from_u64(7)
}

#[test]
fn p256_roundtrips_through_pkcs8() {
    let k = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng()).unwrap();
    let pem = k.to_pkcs8_pem().unwrap();
    let back = PrivateKey::from_pem(pem.as_bytes()).unwrap();
    assert_eq!(back.public_key().unwrap(), k.public_key().unwrap());
    assert_eq!(back.algorithm(), KeyAlgorithm::EcdsaP256);
}

#[test]
fn pkcs8_read_back_is_handed_out_unchanged() {
    let k = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng()).unwrap();
    let der = k.to_pkcs8_der().unwrap();
    let back = PrivateKey::from_pkcs8_der(&der).unwrap();
    assert_eq!(back.to_pkcs8_der().unwrap(), der);
    assert_eq!(back.public_key_der().unwrap(), k.public_key_der().unwrap());
}

#[test]
fn a_pkcs8_key_whose_public_point_is_not_its_own_is_refused_or_never_signs() {
    let a = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng()).unwrap();
    let b = PrivateKey::generate(
        KeyAlgorithm::EcdsaP256,
        &mut rand_chacha::ChaCha20Rng::seed_from_u64(8),
    )
    .unwrap();
    let point = |k: &PrivateKey| {
        let KeyInner::P256(k) = &k.inner else {
            unreachable!()
        };
        k.signing_key()
            .unwrap()
            .verifying_key()
            .to_sec1_point(false)
            .as_bytes()
            .to_vec()
    };
    let (pa, pb) = (point(&a), point(&b));
    // a's scalar with b's point: same length, so a byte substitution.
    let mut der = a.to_pkcs8_der().unwrap().to_vec();
    let at = der
        .windows(pa.len())
        .position(|w| w == pa.as_slice())
        .unwrap();
    der[at..at + pa.len()].copy_from_slice(&pb);
    // A key from outside is refused while it is read.
    let err = PrivateKey::from_pkcs8_der(&der).unwrap_err();
    assert!(err.to_string().contains("does not belong"), "{err}");
    let pem = pem::encode("PRIVATE KEY", &der);
    let err = PrivateKey::from_pem(pem.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("does not belong"), "{err}");
    // A stored key claims b's public key, but its first signature
    // derives the real point and refuses.
    let forged = PrivateKey::from_stored_pem(pem.as_bytes()).unwrap();
    let KeyInner::P256(inner) = &forged.inner else {
        unreachable!()
    };
    let err = inner.signing_key().unwrap_err();
    assert!(err.to_string().contains("does not belong"), "{err}");
    assert!(!forged.matches(&a.public_key().unwrap()));
}

#[test]
fn same_seed_same_key() {
    let a = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng()).unwrap();
    let b = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng()).unwrap();
    assert_eq!(a.public_key_der().unwrap(), b.public_key_der().unwrap());
}

#[test]
fn sec1_is_accepted() {
    let k = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng()).unwrap();
    let KeyInner::P256(sk) = &k.inner else {
        unreachable!()
    };
    let secret = sk.secret().unwrap().into_owned();
    let sec1 = secret.to_sec1_der().unwrap();
    let pem = pem::encode("EC PRIVATE KEY", &sec1);
    let back = PrivateKey::from_pem(pem.as_bytes()).unwrap();
    assert!(back.matches(&k.public_key().unwrap()));
}

#[test]
fn rsa_pkcs1_is_accepted_and_small_rsa_refused() {
    use rsa::pkcs1::EncodeRsaPrivateKey;
    let big = rsa::RsaPrivateKey::new(&mut rng(), 2048).unwrap();
    let pem = pem::encode("RSA PRIVATE KEY", big.to_pkcs1_der().unwrap().as_bytes());
    let k = PrivateKey::from_pem(pem.as_bytes()).unwrap();
    assert_eq!(k.algorithm(), KeyAlgorithm::Rsa2048);

    // Made once with `openssl genrsa -traditional 1024`.
    let small = include_bytes!("../../tests/data/rsa1024-pkcs1.pem");
    assert_eq!(
        PrivateKey::from_pem(small).unwrap_err(),
        Error::RsaKeyTooSmall { bits: 1024 }
    );
}

#[test]
fn garbage_is_a_clear_error() {
    let pem = pem::encode("PRIVATE KEY", &[1, 2, 3]);
    assert!(matches!(
        PrivateKey::from_pem(pem.as_bytes()),
        Err(Error::KeyDecode { .. })
    ));
    assert!(matches!(
        PrivateKey::from_pem(b"no pem here"),
        Err(Error::NoPemBlock { .. })
    ));
}
