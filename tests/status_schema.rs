//! Every JSON output of the CLI (`status`, `rotate`, `issue`, `verify`
//! with `--json`) validated against the JSON Schemas checked in under
//! `docs/`, in the states that exercise each variant: fresh, action due,
//! rotated, forced with an allowed trust break, expired, failed verification.
//!
//! The validator is Python's maintained `jsonschema` package (Draft
//! 2020-12), run by `tests/support/validate_json.py`; `.ci/run` installs it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use support::cli::{ok, pki};

// 2026-01-01: the simulated creation time of the store.
const T0: &str = "2026-01-01T00:00:00Z";

use support::schema::validate;

#[test]
fn every_json_output_matches_its_checked_in_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    ok(&["init", &dir, "--now", T0]);
    let status = |now: &str, what: &str| {
        let json = ok(&["status", &dir, "--json", "--now", now]);
        validate("status.schema.json", &json, what);
        serde_json::from_str::<serde_json::Value>(&json).unwrap()
    };
    let s = status(T0, "status of a fresh store");
    assert_eq!(s["schema_version"], 1);
    assert_eq!(s["health"], "ok");
    assert_eq!(s["consumers"], serde_json::json!([]));
    // A consumer that loaded the first bundle: every report below lists it.
    let first_bundle = s["bundle_fingerprint"].as_str().unwrap().to_string();
    ok(&[
        "ack",
        &dir,
        "web-client",
        "--fingerprint",
        &first_bundle,
        "--now",
        T0,
    ]);
    let acked = status(T0, "status with a consumer");
    assert_eq!(acked["consumers"][0]["name"], "web-client");
    assert_eq!(acked["consumers"][0]["current"], true);

    let issued = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--ip",
        "10.0.0.7",
        "--lifetime",
        "500d",
        "--json",
        "--now",
        T0,
    ]);
    // 500-day leaves: still fresh at the CA's rotation point (day 395).
    validate("issue.schema.json", &issued, "issue --json");
    ok(&[
        "issue",
        &dir,
        "cli",
        "--dns",
        "cli.ns.svc",
        "--client",
        "--lifetime",
        "500d",
        "--now",
        T0,
    ]);
    let again = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--ip",
        "10.0.0.7",
        "--lifetime",
        "500d",
        "--json",
        "--now",
        T0,
    ]);
    validate(
        "issue.schema.json",
        &again,
        "issue --json with nothing to do",
    );

    let quiet = ok(&["rotate", &dir, "--json", "--now", "2026-02-01T00:00:00Z"]);
    validate(
        "rotate.schema.json",
        &quiet,
        "rotate --json with nothing to do",
    );

    // Past the rotation point: a rotation and two re-issues are pending.
    let due = status("2027-02-01T00:00:00Z", "status with actions due");
    assert_eq!(due["health"], "action-due");
    let actions: Vec<&str> = due["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["rotate-ca", "issue-leaf", "issue-leaf"]);

    let rotated = ok(&["rotate", &dir, "--json", "--now", "2027-02-01T00:00:00Z"]);
    validate(
        "rotate.schema.json",
        &rotated,
        "rotate --json with a rotation",
    );
    let after = status("2027-02-01T01:00:00Z", "status after a rotation");
    assert_eq!(after["trust"].as_array().unwrap().len(), 4);
    assert_eq!(after["leaves"][1]["issuer_ca_id"], after["ca"]["id"]);
    assert_eq!(after["consumers"][0]["current"], false);

    let forced = ok(&[
        "rotate",
        &dir,
        "--force",
        "drill",
        "--allow-trust-break",
        "lab store",
        "--json",
        "--now",
        "2027-03-01T00:00:00Z",
    ]);
    validate(
        "rotate.schema.json",
        &forced,
        "rotate --json with an allowed trust break",
    );
    let history = status(
        "2027-03-01T01:00:00Z",
        "status with overridden checks in history",
    );
    assert_eq!(history["history"].as_array().unwrap().len(), 2);

    // Years later: everything has expired.
    let broken = status("2031-01-01T00:00:00Z", "status of an expired store");
    assert_eq!(broken["health"], "broken");

    let bundle = format!("{dir}/ca-bundle.crt");
    let chain = format!("{dir}/certs/web/tls.crt");
    let verified = ok(&[
        "verify",
        "--bundle",
        &bundle,
        "--chain",
        &chain,
        "--dns",
        "web.ns.svc",
        "--json",
        "--at",
        "2027-03-02T00:00:00Z",
    ]);
    validate("verify.schema.json", &verified, "verify --json (verified)");
    let failed = pki(&[
        "verify",
        "--bundle",
        &bundle,
        "--chain",
        &chain,
        "--dns",
        "other.ns.svc",
        "--json",
        "--at",
        "2027-03-02T00:00:00Z",
    ]);
    assert_eq!(failed.status.code(), Some(1));
    let failed = String::from_utf8(failed.stdout).unwrap();
    validate(
        "verify.schema.json",
        &failed,
        "verify --json (not verified)",
    );
    let v: serde_json::Value = serde_json::from_str(&failed).unwrap();
    assert_eq!(v["verified"], false);
}

/// A store made at T0 with one serving certificate, `web`.
fn store_with_web(tmp: &Path, name: &str) -> String {
    let dir = tmp.join(name).display().to_string();
    ok(&["init", &dir, "--now", T0]);
    ok(&["issue", &dir, "web", "--dns", "web.ns.svc", "--now", T0]);
    dir
}

/// Validates `status --json` at `now` and returns the report.
fn status_json(dir: &str, now: &str, what: &str) -> serde_json::Value {
    let json = ok(&["status", dir, "--json", "--now", now]);
    validate("status.schema.json", &json, what);
    serde_json::from_str(&json).unwrap()
}

#[test]
fn status_and_rotate_json_match_the_schema_after_every_kind_of_rotation() {
    use rand_core::SeedableRng;
    let tmp = tempfile::tempdir().unwrap();
    // 2026-01-31: 30 days after T0, every rotation here happens then.
    let at = "2026-01-31T00:00:00Z";
    // 2026-02-02: a day after a one-day grace ended.
    let later = "2026-02-02T00:00:00Z";

    // A supplied self-signed CA (`rotate --to`), made at T0.
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    let supplied = pki_core::CertificateAuthority::generate_root(
        "supplied-ca",
        pki_core::KeyAlgorithm::EcdsaP256,
        time::macros::datetime!(2026-01-01 00:00 UTC),
        time::Duration::days(800),
        &mut rng,
    )
    .unwrap();
    let to = tmp.path().join("to.pem");
    std::fs::write(
        &to,
        format!(
            "{}{}",
            supplied.cert.to_pem(),
            *supplied.key.to_pkcs8_pem().unwrap()
        ),
    )
    .unwrap();
    let dir = store_with_web(tmp.path(), "supplied");
    let to = to.display().to_string();
    let rotated = ok(&["rotate", &dir, "--to", &to, "--json", "--now", at]);
    validate("rotate.schema.json", &rotated, "rotate --to --json");
    let r: serde_json::Value = serde_json::from_str(&rotated).unwrap();
    assert_eq!(r["rotated"], true, "{r}");
    assert_eq!(r["rotation"]["reason"]["kind"], "supplied", "{r}");
    let s = status_json(&dir, at, "status after rotate --to");
    assert_eq!(s["history"][0]["reason"]["kind"], "supplied", "{s}");
    assert_eq!(r["ca_id"], s["ca"]["id"]);
    // 2027-05-16: day 500, less than M left of the supplied CA's 800 days.
    let s = status_json(
        &dir,
        "2027-05-16T00:00:00Z",
        "status with a replacement due",
    );
    let actions = s["pending"].as_array().unwrap();
    assert!(
        actions.iter().any(|a| a["action"] == "supply-replacement"),
        "{s}"
    );

    let dir = store_with_web(tmp.path(), "renewed");
    let rotated = ok(&["rotate", &dir, "--renew-same-key", "--json", "--now", at]);
    validate(
        "rotate.schema.json",
        &rotated,
        "rotate --renew-same-key --json",
    );
    let r: serde_json::Value = serde_json::from_str(&rotated).unwrap();
    assert_eq!(r["rotation"]["reason"]["kind"], "renewed-same-key", "{r}");
    let s = status_json(&dir, at, "status after rotate --renew-same-key");
    assert_eq!(s["history"][0]["reason"]["kind"], "renewed-same-key", "{s}");
    // --allow-trust-break is for rotations pki makes: refused as bad usage
    // here rather than silently ignored.
    for extra in [vec!["--to", to.as_str()], vec!["--renew-same-key"]] {
        let mut args = vec!["rotate", dir.as_str(), "--allow-trust-break", "why"];
        args.extend(extra);
        let o = pki(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("cannot be used with"),
            "{args:?}"
        );
    }

    let dir = store_with_web(tmp.path(), "compromised");
    let rotated = ok(&[
        "rotate",
        &dir,
        "--force",
        "key leaked",
        "--compromised",
        "--json",
        "--now",
        at,
    ]);
    validate(
        "rotate.schema.json",
        &rotated,
        "rotate --json --compromised",
    );
    let s = status_json(&dir, at, "status after a compromised rotation");
    assert_eq!(
        s["history"][0]["previous_trusted_until"],
        serde_json::Value::Null
    );

    let dir = store_with_web(tmp.path(), "grace");
    let rotated = ok(&[
        "rotate", &dir, "--force", "drill", "--grace", "1d", "--json", "--now", at,
    ]);
    validate("rotate.schema.json", &rotated, "rotate --json --grace");
    status_json(&dir, at, "status during a grace period");
    status_json(&dir, later, "status after a grace period ended");
}

#[test]
fn the_schemas_reject_what_the_old_raw_dump_looked_like() {
    // The validator must be able to fail: an untagged result and prose
    // pending actions, as `status --json` printed before schema version 1.
    let err = support::schema::check(
        "verify.schema.json",
        r#"{"Ok": ["a-1"], "pending": ["rotate the CA"]}"#,
    )
    .expect_err("the old raw dump must not match");
    assert!(err.contains("schema_version"));
}
