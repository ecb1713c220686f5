//! PEM reading and CA bundles on arbitrary text.
//!
//! Checks: `pem::read_blocks`, `Certificate::all_from_pem`/`from_pem` and
//! `Bundle::from_pem` never panic and agree with each other; every block
//! read re-encodes and reads back the same; a bundle survives `to_pem` →
//! `from_pem` with the same members, order, fingerprint, root pin and SPKI
//! pins; the fingerprint does not depend on order; pruning is a partition.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_core::{Bundle, Certificate, pem};
use time::{Duration, OffsetDateTime};

fuzz_target!(|data: &[u8]| {
    let blocks = pem::read_blocks(data);
    let all = Certificate::all_from_pem(data);
    let one = Certificate::from_pem(data);
    let bundle = Bundle::from_pem(data);

    // Errors must say something.
    for e in [
        blocks.as_ref().err(),
        all.as_ref().err(),
        one.as_ref().err(),
        bundle.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    {
        assert!(!e.to_string().is_empty());
    }

    let Ok(blocks) = blocks else {
        assert!(all.is_err() && one.is_err() && bundle.is_err());
        return;
    };
    for b in &blocks {
        assert!(!b.der.is_empty(), "read_blocks returned an empty block");
        let again = pem::encode(&b.label, &b.der);
        let back = pem::read_blocks(again.as_bytes()).expect("our own PEM re-reads");
        assert_eq!(back.len(), 1, "label {:?} did not re-encode", b.label);
        assert_eq!(&back[0], b);
    }

    match &all {
        Ok(certs) => {
            assert_eq!(certs.len(), blocks.len());
            assert!(blocks.iter().all(|b| b.label == "CERTIFICATE"));
            for (c, b) in certs.iter().zip(&blocks) {
                assert_eq!(c.der(), b.der.as_slice());
            }
            assert_eq!(one.is_ok(), certs.len() == 1);
            assert_eq!(bundle.is_ok(), !certs.is_empty());
        }
        Err(_) => {
            assert!(one.is_err() && bundle.is_err());
        }
    }

    let Ok(bundle) = bundle else { return };
    let certs = all.expect("bundle parsed, so all certificates did");
    assert!(!bundle.is_empty() && bundle.len() <= certs.len());
    for c in &certs {
        assert!(bundle.contains(c));
    }

    let fp = bundle.fingerprint();
    let pin = bundle.root_pin();
    let pins = bundle.spki_pins();
    assert!(pins.len() <= bundle.len());
    if let Ok(pin) = &pin {
        assert_eq!(pin.len(), 64);
        let root = bundle.roots().next().expect("a pin comes from a root");
        assert!(root.looks_self_signed());
    } else {
        assert!(bundle.roots().next().is_none());
    }

    // to_pem → from_pem keeps everything.
    let text = bundle.to_pem();
    let back = Bundle::from_pem(text.as_bytes()).expect("our own bundle PEM re-parses");
    assert_eq!(back, bundle);
    assert_eq!(back.fingerprint(), fp);
    assert_eq!(back.root_pin(), pin);
    assert_eq!(back.spki_pins(), pins);

    // Order independence and idempotent merge.
    let reversed = Bundle::from_certs(bundle.certs().iter().rev().cloned());
    assert_eq!(reversed.fingerprint(), fp);
    let mut merged = bundle.clone();
    merged.merge(&reversed);
    assert_eq!(merged, bundle);

    // Pruning at the NotAfter of each member partitions the bundle.
    let mut times: Vec<OffsetDateTime> = bundle.certs().iter().map(|c| c.not_after()).collect();
    times.extend(
        bundle
            .certs()
            .iter()
            .filter_map(|c| c.not_after().checked_add(Duration::seconds(1))),
    );
    for at in times.into_iter().take(8) {
        let mut kept = bundle.clone();
        let gone = kept.prune_expired(at);
        assert_eq!(kept.len() + gone.len(), bundle.len());
        assert!(kept.certs().iter().all(|c| c.not_after() >= at));
        assert!(gone.iter().all(|c| c.not_after() < at));
    }
});
