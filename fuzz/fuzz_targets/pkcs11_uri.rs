//! PKCS#11 URIs (RFC 7512) from arbitrary text.
//!
//! Checks: no panic; a refusal is one line; an accepted URI writes a
//! canonical form that reads back to the same value and writes the same
//! text again; a `pin-value` never gets through.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_core::Pkcs11Uri;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Pkcs11Uri::parse(text) {
        Ok(uri) => {
            let written = uri.to_string();
            let back = Pkcs11Uri::parse(&written).expect("our own form reads back");
            assert_eq!(back, uri, "{written}");
            assert_eq!(back.to_string(), written);
            // `=` inside a value is written %3D: only an attribute could
            // write `pin-value=`, and none does.
            assert!(!written.contains("pin-value="));
            let _ = uri.pin_file();
            let _ = uri.describe_object();
            assert_eq!(
                Pkcs11Uri::parse(&uri.without_query().to_string()).expect("reads"),
                uri.without_query()
            );
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.is_empty() && !message.contains('\n'), "{message}");
        }
    }
});
