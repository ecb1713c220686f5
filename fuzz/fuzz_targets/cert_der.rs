//! `Certificate::from_der` on arbitrary bytes, then every accessor.
//!
//! Checks: no panic; pki-core's decoder without a tree accepts exactly
//! what x509-cert's decoder accepts, with the same validity and extensions
//! (`pki_core::fuzzing::check_against_x509_cert`); what verification
//! reads from the DER is what the decoded tree holds
//! (`check_raw_reads`); a parsed certificate keeps exactly the input DER; its
//! PEM re-parses to the same certificate; the id has the documented
//! `<key hex>-<serial hex>` shape; fingerprints are SHA-256 sized and
//! stable; structural answers are consistent with each other.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_core::{Bundle, Certificate, issued_by, verify_signature};

fuzz_target!(|data: &[u8]| {
    if let Err(e) = pki_core::fuzzing::check_against_x509_cert(data) {
        panic!("the two certificate decoders disagree: {e}");
    }
    if let Err(e) = pki_core::fuzzing::check_raw_reads(data) {
        panic!("a certificate read from its DER: {e}");
    }
    let Ok(cert) = Certificate::from_der(data) else {
        return;
    };
    assert_eq!(cert.der(), data, "the certificate must keep its exact DER");

    // Every accessor, including the formatted ones.
    let _ = cert.x509();
    let subject = cert.subject().to_string();
    let _ = cert.issuer().to_string();
    let _ = cert.common_name();
    let serial = cert.serial();
    let serial_hex = cert.serial_hex();
    assert_eq!(serial_hex.len(), serial.len() * 2);
    let nb = cert.not_before();
    let na = cert.not_after();
    let _ = pki_core::datetime::rfc3339(nb);
    let _ = pki_core::datetime::rfc3339(na);
    assert_eq!(cert.is_valid_at(nb), nb <= na);
    assert_eq!(cert.is_valid_at(na), nb <= na);
    let _ = cert.ski();
    let _ = cert.aki();
    let bc = cert.basic_constraints();
    assert_eq!(cert.is_ca(), bc.is_some_and(|b| b.ca));
    let _ = cert.key_usage();
    let _ = cert.extended_key_usage();
    let sans = cert.subject_alt_names();
    let dns = cert.dns_names();
    let ips = cert.ip_addresses();
    assert!(dns.len() + ips.len() <= sans.len());
    let _ = cert.public_key();
    let spki_der = cert.public_key_der();
    let fp = cert.fingerprint_sha256();
    assert_eq!(fp, cert.fingerprint_sha256());
    let _ = cert.spki_sha256();
    let _ = spki_der;

    let id = cert.id();
    let (key_part, serial_part) = id.split_once('-').expect("id is <key>-<serial>");
    assert!(key_part.len() <= 16, "id key part too long: {id}");
    assert!(key_part.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    assert_eq!(serial_part, serial_hex);

    if cert.looks_self_signed() {
        assert!(cert.is_self_issued());
    }
    // Names are compared as RFC 5280 section 7.1 says (case and spaces do
    // not count in PrintableString and UTF8String), so a self-issued
    // certificate's names may print differently, and two names that print
    // alike may differ in their string types (a TeletexString is not a
    // UTF8String). The same name, attribute for attribute, is always the
    // same name.
    assert_eq!(cert.is_self_issued(), cert.subject_matches_issuer_of(&cert));
    if cert.subject() == cert.issuer() {
        assert!(cert.is_self_issued(), "{subject}");
    }
    let _ = format!("{cert:?}");

    // Lineage and the self-signature check run on any pair.
    let lineage = issued_by(&cert, &cert);
    let _ = format!("{lineage:?}");
    if let Err(e) = verify_signature(cert.public_key(), &cert) {
        assert!(!e.to_string().is_empty());
    }

    // PEM roundtrip.
    let pem = cert.to_pem();
    let back = Certificate::from_pem(pem.as_bytes()).expect("our own PEM re-parses");
    assert_eq!(back, cert);
    assert_eq!(back.id(), id);

    // A one-certificate bundle.
    let bundle = Bundle::from_certs([cert.clone()]);
    assert_eq!(bundle.len(), 1);
    assert_eq!(bundle.root_pin().is_ok(), cert.looks_self_signed());
    assert_eq!(bundle.spki_pins().len(), 1);
});
