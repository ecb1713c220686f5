//! Scores the path validator on the x509-limbo subset vendored in
//! `tests/conformance/limbo/cases` (one folder per case; its README says
//! where it comes from).
//!
//! Each case is run with its validation time, its expected peer name (DNS
//! or IP) and purpose serverAuth. The test prints every disagreement with
//! its reason and the score, and fails when fewer than [`MIN_AGREEMENT`]
//! cases agree or when any core-tier case expected to FAIL is accepted.
//! `docs/book/src/conformance.md` explains the remaining disagreements.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::verify::{ExpectedName, Purpose, VerifyOptions, verify_chain};
use pki_core::{Bundle, Certificate, pem};
use std::path::{Path, PathBuf};
use time::{OffsetDateTime, macros::datetime};

const MIN_AGREEMENT: usize = 160;

/// Cases without a validation time mean "now"; their certificates are all
/// valid from 1970 to 2969, so any fixed instant in between gives the same
/// answer. 2026-01-01 keeps the test reproducible.
const NOW: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/limbo/cases")
}

/// Parses every CERTIFICATE block; blocks that do not parse are reported
/// and skipped (an unusable pool member must not hide the others).
fn certs(path: &Path, notes: &mut Vec<String>) -> Vec<Certificate> {
    let bytes = std::fs::read(path).unwrap();
    let blocks = pem::read_blocks(&bytes).unwrap();
    let mut out = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        match Certificate::from_der(&block.der) {
            Ok(c) => out.push(c),
            Err(e) => notes.push(format!(
                "{} block {}: {e}",
                path.file_name().unwrap().to_string_lossy(),
                i + 1
            )),
        }
    }
    out
}

fn time_of(meta: &serde_json::Value) -> OffsetDateTime {
    match meta["validation_time_unix"].as_f64() {
        None => NOW,
        Some(secs) => {
            let nanos = (secs * 1e9).round() as i128;
            OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap()
        }
    }
}

fn name_of(meta: &serde_json::Value) -> Option<ExpectedName> {
    let peer = meta.get("expected_peer_name")?;
    let value = peer["value"].as_str()?.to_owned();
    Some(match peer["kind"].as_str()? {
        "IP" => ExpectedName::Ip(value.parse().unwrap()),
        _ => ExpectedName::Dns(value),
    })
}

/// Runs one case; `Ok` is the path found, `Err` the reason for rejecting.
fn run(dir: &Path, meta: &serde_json::Value) -> Result<String, String> {
    let mut notes = Vec::new();
    let trusted = certs(&dir.join("trusted.pem"), &mut notes);
    let intermediates = certs(&dir.join("intermediates.pem"), &mut notes);
    let mut leaf = certs(&dir.join("leaf.pem"), &mut notes);
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" [unparsed: {}]", notes.join("; "))
    };
    if leaf.len() != 1 {
        return Err(format!("leaf does not parse{notes}"));
    }
    let leaf = leaf.remove(0);
    let mut opts = VerifyOptions::new(time_of(meta), Purpose::ServerAuth);
    opts.name = name_of(meta);
    match verify_chain(&leaf, &intermediates, &Bundle::from_certs(trusted), &opts) {
        Ok(path) => Ok(format!("path of {} certificates{notes}", path.certs.len())),
        Err(e) => Err(format!("{e}{notes}")),
    }
}

#[test]
fn limbo_subset_agreement() {
    let dir = cases_dir();
    // The cases are part of the repository: a missing folder is a broken
    // checkout, not a reason to pass.
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("conformance cases at {}: {e}", dir.display()));
    let mut dirs: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    dirs.sort();
    let (mut agree, mut total) = (0, 0);
    let mut core_failures_accepted = Vec::new();
    for case in &dirs {
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(case.join("meta.json")).unwrap()).unwrap();
        let id = meta["id"].as_str().unwrap();
        let expected_success = meta["expected_result"] == "SUCCESS";
        let core = meta["tier"] == "core";
        let outcome = run(case, &meta);
        total += 1;
        if outcome.is_ok() == expected_success {
            agree += 1;
            continue;
        }
        let (expected, reason) = match &outcome {
            Ok(path) => ("FAILURE", format!("accepted: {path}")),
            Err(e) => ("SUCCESS", format!("rejected: {e}")),
        };
        println!(
            "DISAGREE {id} ({}, expected {expected}): {reason}",
            if core { "core" } else { "optional" }
        );
        if core && !expected_success {
            core_failures_accepted.push(id.to_owned());
        }
    }
    println!("conformance: {agree}/{total} agree");
    assert!(
        core_failures_accepted.is_empty(),
        "core-tier FAILURE cases accepted: {core_failures_accepted:?}"
    );
    assert!(
        agree >= MIN_AGREEMENT,
        "only {agree}/{total} cases agree (at least {MIN_AGREEMENT} required)"
    );
}
