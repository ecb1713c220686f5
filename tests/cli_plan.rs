//! `pki plan`: the forecast of a directory store against what real `pki
//! rotate --now T` runs do at the forecast's times, the policy checks, the
//! JSON shape (docs/plan.schema.json), and a store left byte for byte as
//! it was.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use support::cli::{exited_with, ok, pki, stdout, tree_with_lock};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

// 2026-01-01: when every test store is made.
const T0: &str = "2026-01-01T00:00:00Z";

fn time(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).unwrap()
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap()
}

/// A store made at T0 with `web` issued (its lifetime `lifetime`), and
/// `init` given `extra`.
fn store(tmp: &Path, extra: &[&str], lifetime: &str) -> String {
    let dir = tmp.join("pki").display().to_string();
    let mut init = vec!["init", &dir, "--now", T0];
    init.extend_from_slice(extra);
    ok(&init);
    ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--lifetime",
        lifetime,
        "--now",
        T0,
    ]);
    dir
}

fn plan_json(dir: &str, until: &str, expect: i32) -> serde_json::Value {
    let args = ["plan", dir, "--until", until, "--now", T0, "--json"];
    let out = pki(&args);
    exited_with(expect, &args, &out);
    let json = stdout(&out);
    validate("plan.schema.json", &json);
    serde_json::from_str(&json).unwrap()
}

fn events(plan: &serde_json::Value) -> Vec<(String, OffsetDateTime)> {
    plan["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                time(e["at"].as_str().unwrap()),
            )
        })
        .collect()
}

#[test]
fn a_rotation_in_the_window_and_its_consequences_happen_when_real_runs_do_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path(), &[], "365d");
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", &dir, "--json", "--now", T0])).unwrap();
    let ca_end = time(status["ca"]["not_after"].as_str().unwrap());
    let before = tree_with_lock(Path::new(&dir));
    // Up to the old CA's end: its successor rotates a second later.
    let until = rfc3339(ca_end + time::Duration::SECOND);
    let plan = plan_json(&dir, &until, 0);
    assert_eq!(
        tree_with_lock(Path::new(&dir)),
        before,
        "plan wrote to the store"
    );

    let all = events(&plan);
    assert!(
        all.windows(2).all(|w| w[0].1 <= w[1].1),
        "not in time order: {all:?}"
    );
    let main: Vec<_> = all
        .iter()
        .filter(|(k, _)| k != "leaf-refresh" && k != "bundle-prune")
        .cloned()
        .collect();
    let rotation = ca_end - time::Duration::days(395) + time::Duration::SECOND;
    let ca_gone = ca_end + time::Duration::SECOND;
    assert_eq!(
        main,
        [
            ("rotation".to_string(), rotation),
            ("bridge-expiry".to_string(), ca_gone),
            ("previous-ca-untrusted".to_string(), ca_gone),
        ]
    );
    let refreshes = all.iter().filter(|(k, _)| k == "leaf-refresh").count();
    assert!(
        refreshes >= 3,
        "refresh, re-issue at the rotation, refresh: {all:?}"
    );
    assert!(
        plan["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true)
    );

    // Real runs: nothing a second before each forecast time, the same
    // things at it.
    let mut times: Vec<OffsetDateTime> = all.iter().map(|(_, t)| *t).collect();
    times.dedup();
    for t in times {
        let early = ok(&[
            "rotate",
            &dir,
            "--now",
            &rfc3339(t - time::Duration::SECOND),
        ]);
        assert!(early.starts_with("nothing to do"), "at {t} - 1s: {early}");
        let out = ok(&["rotate", &dir, "--now", &rfc3339(t)]);
        for (kind, _) in all.iter().filter(|(_, at)| *at == t) {
            let line = match kind.as_str() {
                "rotation" => "rotated CA",
                "leaf-refresh" => "issued web",
                "bridge-expiry" => "retired expired bridge",
                "bundle-prune" => "removed expired bundle certificates",
                "previous-ca-untrusted" => continue,
                other => panic!("unexpected {other}"),
            };
            assert!(
                out.contains(line),
                "at {t}: {kind} expected, rotate said {out}"
            );
        }
    }
    // The previous CA stops being trusted exactly then.
    let trusted = |t: OffsetDateTime| {
        let s: serde_json::Value =
            serde_json::from_str(&ok(&["status", &dir, "--json", "--now", &rfc3339(t)])).unwrap();
        s["previous"]["trusted"].as_bool().unwrap()
    };
    assert!(trusted(ca_gone - time::Duration::SECOND));
    assert!(!trusted(ca_gone));
}

#[test]
fn a_bad_policy_fails_its_checks_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    // Consumers reload every 100 days, but web is re-issued 20% (73 days)
    // before it expires.
    let dir = store(tmp.path(), &["--reload-interval", "100d"], "365d");
    let plan = plan_json(&dir, "30d", 1);
    let failed: Vec<&str> = plan["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["leaf-refresh-covers-reload-interval"]);

    // A leaf asking for more than the 395 days a CA has left.
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path(), &[], "500d");
    let plan = plan_json(&dir, "30d", 1);
    let check = plan["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "leaf-lifetime-within-ca")
        .unwrap();
    assert_eq!(check["ok"], false);
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("web asks for 500d"),
        "{check}"
    );
    let err = exited_with(
        1,
        &["plan"],
        &pki(&["plan", &dir, "--until", "30d", "--now", T0]),
    );
    assert!(err.contains("leaf-lifetime-within-ca"), "{err}");
}

#[test]
fn the_text_plan_names_each_event_and_check_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path(), &[], "365d");
    let before = tree_with_lock(Path::new(&dir));
    let out = ok(&["plan", &dir, "--until", "2027-06-01T00:00:00Z", "--now", T0]);
    assert_eq!(
        tree_with_lock(Path::new(&dir)),
        before,
        "plan wrote to the store"
    );
    assert!(
        out.contains("  rotation  ") || out.contains(" rotation "),
        "{out}"
    );
    assert!(out.contains("leaf-refresh"), "{out}");
    assert!(out.contains("ok   engine-steps"), "{out}");
    assert!(out.contains("(simulated; nothing is written)"), "{out}");
}

#[test]
fn a_key_ring_in_the_store_is_planned_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("keys").display().to_string();
    ok(&[
        "keys",
        "init",
        &dir,
        "--lifetime",
        "90d",
        "--grace",
        "1d",
        "--now",
        T0,
    ]);
    let plan = plan_json(&dir, "100d", 0);
    let kinds: Vec<String> = events(&plan).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["key-rotation", "key-removal"]);
}

#[test]
fn bad_windows_are_bad_usage_and_a_missing_store_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path(), &[], "365d");
    let args = ["plan", &dir, "--until", "2025-01-01T00:00:00Z", "--now", T0];
    exited_with(2, &args, &pki(&args));
    let args = ["plan", &dir, "--until", "soon"];
    exited_with(2, &args, &pki(&args));
    let args = ["plan", &dir];
    exited_with(2, &args, &pki(&args));
    let empty = tmp.path().join("empty").display().to_string();
    let args = ["plan", &empty, "--until", "1d"];
    exited_with(1, &args, &pki(&args));
}

/// Validates `json` against `docs/<schema>` with Python's jsonschema.
fn validate(schema: &str, json: &str) {
    support::schema::validate(schema, json, "plan --json");
}
