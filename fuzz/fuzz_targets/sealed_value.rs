//! The sealed value parser and opener (private material sealed at rest) and
//! the store key file parser, on arbitrary bytes.
//!
//! Checks: no panic; a value that parses has the header it was read
//! from; opening arbitrary bytes under a fixed key fails (forging a tag is
//! not something a fuzzer does) with a one-line message; a key file that
//! parses writes back to a file that parses to the same key id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_rotate::StoreKey;
use pki_rotate::sealing::{Binding, HEADER_LEN, MAGIC, TAG_LEN, open, parse_sealed};
use rand_core::SeedableRng;

fuzz_target!(|data: &[u8]| {
    let key = StoreKey::generate(&mut rand_chacha::ChaCha20Rng::seed_from_u64(1));
    let binding = Binding {
        kind: "signer",
        key: "signer",
        path: "signer/tls.key",
    };
    // The input as it is, and behind a valid magic so the parser goes deep.
    let mut with_magic = MAGIC.to_vec();
    with_magic.extend_from_slice(data);
    for bytes in [data, with_magic.as_slice()] {
        match parse_sealed(bytes) {
            Ok((header, ciphertext)) => {
                assert!(bytes.len() >= HEADER_LEN + TAG_LEN);
                assert_eq!(ciphertext.len(), bytes.len() - HEADER_LEN);
                assert_eq!(&bytes[MAGIC.len() + 2..MAGIC.len() + 10], header.key_id);
            }
            Err(e) => assert!(!e.is_empty() && !e.contains('\n')),
        }
        let err = open(std::slice::from_ref(&key), binding, bytes)
            .expect_err("arbitrary bytes do not open")
            .to_string();
        assert!(!err.is_empty() && !err.contains('\n'), "{err}");
    }
    if let Ok(parsed) = StoreKey::from_file("fuzz", data) {
        let again = StoreKey::from_file("fuzz", parsed.to_file().as_bytes())
            .expect("a written key file reads back");
        assert_eq!(again.id(), parsed.id());
    }
});
