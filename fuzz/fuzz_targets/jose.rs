//! The key ring's JOSE parsers: a JWK Set and a compact JWS from arbitrary
//! bytes.
//!
//! Input framing: the bytes before the first NUL are a JWK Set
//! (`jwks.json`), the bytes after it a token (the whole input is also tried
//! as a token).
//!
//! Checks: no panic and bounded work; an accepted JWK Set writes JSON that
//! reads back to the same keys with the same thumbprints; a parsed token's
//! signature check against every key and its time checks at the extremes
//! of i64 return, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_rotate::keyring::jose::{Jwks, ParsedToken};

fuzz_target!(|data: &[u8]| {
    let (jwks_bytes, token_bytes) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, data),
    };
    let keys = match Jwks::parse(jwks_bytes) {
        Ok(set) => {
            let again = Jwks::parse(set.to_json().as_bytes()).expect("own JWK Set reads back");
            assert_eq!(again, set);
            for (a, b) in set.keys.iter().zip(&again.keys) {
                assert_eq!(a.thumbprint(), b.thumbprint());
            }
            set.keys
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            Vec::new()
        }
    };
    for candidate in [token_bytes, data] {
        if let Ok(token) = ParsedToken::parse(candidate) {
            for key in &keys {
                let _ = token.verify_signature(key);
            }
            for now in [i64::MIN, -1, 0, 1_767_225_600, i64::MAX] {
                let _ = token.check_time(now);
            }
        }
    }
});
