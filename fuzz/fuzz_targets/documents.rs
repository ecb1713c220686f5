//! The CA set, key ring and credential documents, from arbitrary files.
//!
//! Input framing (see `pki_fuzz::split_document_input`): a kind byte, then
//! NUL-separated path and contents pairs.
//!
//! Checks: no panic; an accepted document writes files that read back to a
//! document writing the very same files, and the same for its Secret data
//! form; planning with nothing asked, at the fuzz time and at the extremes
//! of X.509 time, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_fuzz::{DocumentKind, NOW};
use pki_rotate::{CredentialEngine, Document, Engine, Files, KeyRingEngine, SetEngine};
use time::macros::datetime;

fn round_trip<E: Engine>(files: &Files) {
    let Ok(doc) = E::Document::from_files(files) else {
        return;
    };
    let written = doc
        .to_files()
        .expect("an accepted document writes its files");
    let back = E::Document::from_files(&written).expect("a document reads its own files back");
    assert_eq!(
        back.to_files().expect("and writes them again"),
        written,
        "a document read back writes other files"
    );
    if let Ok(data) = E::Document::files_to_secret_data(&written) {
        let files =
            E::Document::files_from_secret_data(&data).expect("its own Secret data reads back");
        E::Document::from_files(&files).expect("a document reads back from its Secret data");
    }
    for now in [
        NOW,
        datetime!(1950-01-01 00:00 UTC),
        datetime!(9999-12-31 23:59:59 UTC),
    ] {
        let _ = E::plan(&doc, &E::Input::default(), now);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((kind, files)) = pki_fuzz::split_document_input(data) else {
        return;
    };
    match kind {
        DocumentKind::Set => round_trip::<SetEngine>(&files),
        DocumentKind::KeyRing => round_trip::<KeyRingEngine>(&files),
        DocumentKind::Credential => round_trip::<CredentialEngine>(&files),
    }
});
