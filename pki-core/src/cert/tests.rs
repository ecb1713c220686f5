//! The decoded tree on demand.

use super::*;

#[test]
fn the_decoded_structure_is_made_only_when_asked_for() {
    // A P-256 CA made by `openssl req -x509 -subj /CN=ca`. (Certificates
    // read back from what pki issues are tested in tests/issuance.rs.)
    let cert = Certificate::from_der(include_bytes!("../../tests/data/ca.der")).unwrap();
    // What a store's checks read comes from the fields kept at parse.
    let _ = (cert.ski(), cert.aki(), cert.not_after(), cert.serial());
    let _ = (cert.dns_names(), cert.spki_der(), cert.extended_key_usage());
    assert!(cert.0.memo.more.get().is_none());
    assert_eq!(cert.subject().to_string(), "CN=ca");
    assert!(cert.0.memo.more().tree.get().is_some());
}
