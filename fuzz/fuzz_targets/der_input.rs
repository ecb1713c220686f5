//! Binary DER where PEM is expected, on arbitrary bytes that start with a
//! SEQUENCE tag (the DER path of every PEM reader).
//!
//! Checks: `pem::read_blocks`, `Certificate::all_from_pem`,
//! `Bundle::from_pem` and `PrivateKey::from_pem` never panic; errors say
//! something; the certificates read are the blocks labelled CERTIFICATE,
//! byte for byte, and each re-reads the same from its own DER.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_core::{Bundle, Certificate, PrivateKey, pem};

fuzz_target!(|data: &[u8]| {
    let mut input = Vec::with_capacity(data.len() + 1);
    input.push(0x30);
    input.extend_from_slice(data);
    let blocks = pem::read_blocks(&input);
    let all = Certificate::all_from_pem(&input);
    let bundle = Bundle::from_pem(&input);
    let key = PrivateKey::from_pem(&input);
    for e in [
        blocks.as_ref().err(),
        all.as_ref().err(),
        bundle.as_ref().err(),
        key.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    {
        assert!(!e.to_string().is_empty());
    }
    if let Ok(certs) = &all {
        let blocks = blocks.expect("certificates were read, so blocks were");
        assert_eq!(certs.len(), blocks.len());
        for (c, b) in certs.iter().zip(&blocks) {
            assert_eq!(b.label, "CERTIFICATE");
            assert_eq!(c.der(), b.der.as_slice());
            let again = Certificate::from_pem(c.der()).expect("a certificate's own DER re-reads");
            assert_eq!(again.der(), c.der());
        }
    }
});
