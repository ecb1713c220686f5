//! Issuing with the default provider (ring, what `cargo add pki-core`
//! gives): a certificate signed through ring is put together from the
//! encoded TBSCertificate and the signature, without building x509-cert's
//! certificate, so its DER must be exactly what x509-cert encodes for it,
//! and it must verify. Its own test program: the other tests install the
//! deterministic RustCrypto provider for the whole process.

#![allow(clippy::unwrap_used)]

use pki_core::{
    Backend, Bundle, CertificateAuthority, CertificateParams, CryptoProvider, KeyAlgorithm,
    PrivateKey, Profile, Purpose, VerifyOptions, verify_chain,
};
use time::{Duration, macros::datetime};

#[test]
fn a_ring_signed_certificate_encodes_as_x509_cert_encodes_it() {
    assert_eq!(CryptoProvider::get_default().signing(), Backend::Ring);
    let now = datetime!(2026-01-01 00:00 UTC);
    let mut rng = pki_core::os_rng();
    for algorithm in [KeyAlgorithm::EcdsaP256, KeyAlgorithm::EcdsaP384] {
        let ca =
            CertificateAuthority::generate_root("ca", algorithm, now, Duration::days(30), &mut rng)
                .unwrap();
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
        let mut params =
            CertificateParams::new(Profile::Server, "web", now, Duration::days(7)).unwrap();
        params.dns_names = vec!["web.ns.svc".into()];
        let leaf = ca
            .issue(&params, &key.public_key().unwrap(), &mut rng)
            .unwrap();
        for cert in [&ca.cert, &leaf] {
            assert_eq!(der::Encode::to_der(cert.x509()).unwrap(), cert.der());
            assert!(pki_core::fuzzing::reads_without_x509_cert(cert.der()));
        }
        let opts = VerifyOptions::new(now + Duration::hours(1), Purpose::ServerAuth);
        verify_chain(&leaf, &[], &Bundle::from_certs([ca.cert.clone()]), &opts).unwrap();
    }
}
