//! A pool certificate whose notBefore UTCTime content is replaced by
//! fuzzer bytes, then signed again with a pool key: the UTCTime reader
//! pki-core uses for notBefore years 1950-1969 (`cert/pre1970.rs`), on
//! certificates that are valid but for that field.
//!
//! Input: byte 0 picks the certificate, byte 1 the signing key, the next
//! 13 bytes are the notBefore content.
//!
//! Checks: no panic; an accepted certificate keeps its exact DER, has a
//! notBefore from 1950 to 2049 and not after its notAfter when it is
//! valid at all, decodes its tree (the stand-in 1970-01-01 in place of a
//! time before 1970), re-parses from PEM, and its signature verifies with
//! the key that signed the original bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_core::x509_cert::der::{Decode, Encode};
use pki_core::x509_cert::spki::SubjectPublicKeyInfoOwned;
use pki_core::{Certificate, verify_signature};
use pki_fuzz::{pool, sign_p256, tbs_of};

fuzz_target!(|data: &[u8]| {
    let [cert_index, key_index, rest @ ..] = data else {
        return;
    };
    let Some(time) = rest.get(..13) else {
        return;
    };
    let pool = pool();
    let original = pool.cert(*cert_index);
    let (_, key) = &pool.p256_keys[usize::from(*key_index) % pool.p256_keys.len()];
    // `sign_p256` writes ecdsa-with-SHA256 outside: the TBSCertificate must
    // say the same inside (the RSA-signed pool certificates do not).
    if original.x509().signature_algorithm().oid.to_string() != "1.2.840.10045.4.3.2" {
        return;
    }
    let Ok(pki_core::x509_cert::time::Time::UtcTime(nb)) =
        pki_core::datetime::to_x509(original.not_before())
    else {
        return;
    };
    let encoded = nb.to_der().expect("a UTCTime encodes");
    let Some(mut tbs) = tbs_of(original.der()).map(<[u8]>::to_vec) else {
        return;
    };
    let Some(at) = tbs
        .windows(encoded.len())
        .position(|w| w == encoded.as_slice())
    else {
        return;
    };
    tbs[at + 2..at + 15].copy_from_slice(time);
    let der = sign_p256(&tbs, key);

    let Ok(cert) = Certificate::from_der(&der) else {
        return;
    };
    assert_eq!(cert.der(), der.as_slice());
    let nb = cert.not_before();
    assert!((1950..2050).contains(&nb.year()), "{nb}");
    assert_eq!(cert.is_valid_at(nb), nb <= cert.not_after());
    let tree = cert
        .x509()
        .tbs_certificate()
        .to_der()
        .expect("the tree encodes");
    if nb.year() < 1970 {
        assert!(tree.windows(13).any(|w| w == b"700101000000Z"));
    } else {
        assert_eq!(tree.as_slice(), tbs.as_slice());
    }
    let back = Certificate::from_pem(cert.to_pem().as_bytes()).expect("our PEM re-parses");
    assert_eq!(back, cert);
    assert_eq!(back.not_before(), nb);

    use p256::pkcs8::EncodePublicKey;
    let spki_der = key
        .verifying_key()
        .to_public_key_der()
        .expect("a P-256 key encodes");
    let spki = SubjectPublicKeyInfoOwned::from_der(spki_der.as_bytes()).expect("SPKI decodes");
    verify_signature(&spki, &cert).expect("signed over the original bytes");
});
