//! The CA import parser (`pki init --import`, `pki rotate --to`) on
//! arbitrary bytes, split into the CA file, the key file and the chain
//! file at two positions the input chooses.
//!
//! Checks: no panic; an error has a message; an accepted import's chain is
//! in issuing order (each certificate issued the one before it), and
//! whatever it builds (authority, path to the root, chain root) is
//! computed without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_core::CaImport;

fuzz_target!(|data: &[u8]| {
    let (main, key, chain) = match data {
        [a, b, rest @ ..] => {
            let a = (*a as usize).min(rest.len());
            let b = (*b as usize).min(rest.len() - a);
            let (main, tail) = rest.split_at(rest.len() - a - b);
            let (key, chain) = tail.split_at(a);
            (
                main,
                (!key.is_empty()).then_some(key),
                (!chain.is_empty()).then_some(chain),
            )
        }
        _ => (data, None, None),
    };
    match CaImport::parse(main, key, chain) {
        Ok(import) => {
            let mut child = &import.cert;
            for issuer in &import.chain {
                assert!(
                    issuer.subject_matches_issuer_of(child),
                    "chain out of order accepted"
                );
                child = issuer;
            }
            let _ = import.authority();
            let _ = import.verify_to_root(pki_fuzz::NOW);
            let _ = import.root();
            let _ = import.intermediates();
            let mut all = vec![import.cert.clone()];
            all.extend(import.chain.iter().cloned());
            let _ = pki_core::chain_root(&all);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
