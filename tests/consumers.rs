//! Uptake from the CLI: `pki fingerprint --bundle` gives the token `status
//! --json` shows, `pki ack` records which consumer loaded which published
//! bundle (refusing any other, idempotent, racing safely on a directory and
//! an etcd store), `status` says who lags (`--check` exits 3), and a
//! reload helper's acker writes through the driver to an etcd store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use support::cli::{fails_with, ok, refused, snapshot};
use support::etcd;
use support::tree::copy_tree;

// 2026-01-01: the simulated creation time of the stores.
const T0: &str = "2026-01-01T00:00:00Z";
// Past NotAfter − M of a CA made at T0 with the defaults (790d, 395d).
const ROTATION: &str = "2027-02-01T00:00:00Z";

fn status(dir: &str, now: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["status", dir, "--json", "--now", now])).unwrap()
}

fn current_bundle(dir: &str, now: &str) -> String {
    status(dir, now)["bundle_fingerprint"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The PEM blocks of `pem`, each as its base64 body on one line.
fn bodies(pem: &str) -> Vec<String> {
    pem.split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .map(|rest| {
            let body = rest.split("-----END CERTIFICATE-----").next().unwrap();
            body.split_whitespace().collect::<String>()
        })
        .collect()
}

/// `bodies` as PEM with `width`-character lines ending in `eol`.
fn pem_of(bodies: &[&String], width: usize, eol: &str) -> String {
    let mut out = String::new();
    for body in bodies {
        out.push_str(&format!("-----BEGIN CERTIFICATE-----{eol}"));
        for line in body.as_bytes().chunks(width) {
            out.push_str(std::str::from_utf8(line).unwrap());
            out.push_str(eol);
        }
        out.push_str(&format!("-----END CERTIFICATE-----{eol}"));
    }
    out
}

fn fingerprint_of(path: &Path) -> String {
    ok(&["fingerprint", "--bundle", &path.display().to_string()])
        .trim()
        .to_string()
}

#[test]
fn bundle_fingerprint_is_the_status_token_for_any_order_and_pem_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    ok(&["init", &dir, "--now", T0]);
    ok(&["issue", &dir, "web", "--dns", "web.ns.svc", "--now", T0]);
    ok(&["rotate", &dir, "--now", ROTATION]);
    let token = current_bundle(&dir, ROTATION);
    let bundle_path = Path::new(&dir).join("ca-bundle.crt");
    assert_eq!(fingerprint_of(&bundle_path), token);

    // The new CA and bridge A, reversed, one repeated, in CRLF with 76- and
    // 48-character lines and text between the blocks: the same token.
    let pem = std::fs::read_to_string(&bundle_path).unwrap();
    let b = bodies(&pem);
    assert_eq!(b.len(), 2, "{pem}");
    let variants = [
        pem_of(&[&b[1], &b[0]], 64, "\n"),
        pem_of(&[&b[0], &b[1], &b[0]], 76, "\r\n"),
        format!(
            "bundle of the web clients\n{}\nsome notes\n{}",
            pem_of(&[&b[1]], 48, "\n"),
            pem_of(&[&b[0]], 64, "\r\n")
        ),
    ];
    for (i, variant) in variants.iter().enumerate() {
        let path = tmp.path().join(format!("variant-{i}.crt"));
        std::fs::write(&path, variant).unwrap();
        assert_eq!(fingerprint_of(&path), token, "variant {i}:\n{variant}");
    }
    // Other certificates, another token: the bundle before the rotation.
    let first = tmp.path().join("first.crt");
    std::fs::write(&first, pem_of(&[&b[0]], 64, "\n")).unwrap();
    assert_ne!(fingerprint_of(&first), token);

    // A file without certificates is refused in one line.
    let empty = tmp.path().join("empty.crt");
    std::fs::write(&empty, "no certificates here\n").unwrap();
    refused(&["fingerprint", "--bundle", &empty.display().to_string()]);
    // A target directory's fingerprint still works, and differs in kind.
    let target = tmp.path().join("target");
    std::fs::create_dir_all(target.join("trust")).unwrap();
    std::fs::copy(&bundle_path, target.join("trust/cluster.crt")).unwrap();
    let dir_token = ok(&["fingerprint", &target.display().to_string()]);
    assert!(dir_token.trim().starts_with("sha256:"), "{dir_token}");
    assert_ne!(dir_token.trim(), token);
    // PATH and --bundle together, or neither, is bad usage.
    fails_with(2, &["fingerprint"]);
}

#[test]
fn an_ack_is_recorded_once_and_the_same_ack_again_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("pki");
    let dir = path.display().to_string();
    ok(&["init", &dir, "--now", T0]);
    let fp = current_bundle(&dir, T0);
    let out = ok(&["ack", &dir, "web-1", "--fingerprint", &fp, "--now", T0]);
    assert!(
        out.contains("web-1 loaded bundle") && out.contains("(current)"),
        "{out}"
    );
    let s = status(&dir, T0);
    assert_eq!(
        s["consumers"],
        serde_json::json!([{
            "name": "web-1",
            "fingerprint": fp,
            "loaded_at": T0,
            "current": true,
            "overdue": false,
        }])
    );

    let before = snapshot(&path);
    // Later, and in capitals: the same bundle, nothing to write.
    let again = ok(&[
        "ack",
        &dir,
        "web-1",
        "--fingerprint",
        &fp.to_uppercase(),
        "--now",
        "2026-01-02T00:00:00Z",
    ]);
    assert!(again.contains("nothing to do"), "{again}");
    assert_eq!(snapshot(&path), before, "a repeated ack wrote to the store");
    assert_eq!(status(&dir, T0)["consumers"][0]["loaded_at"], T0);
}

#[test]
fn an_ack_of_a_bundle_never_published_is_refused_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("pki");
    let dir = path.display().to_string();
    ok(&["init", &dir, "--now", T0]);
    let before = snapshot(&path);
    let never = "ab".repeat(32);
    let err = refused(&["ack", &dir, "web-1", "--fingerprint", &never, "--now", T0]);
    assert!(err.contains("was not published by this store"), "{err}");
    let err = refused(&[
        "ack",
        &dir,
        "web-1",
        "--fingerprint",
        "not-hex",
        "--now",
        T0,
    ]);
    assert!(err.contains("was not published"), "{err}");
    // A bundle someone else made is not one this store published either.
    let other = tmp.path().join("other");
    ok(&["init", &other.display().to_string(), "--now", T0]);
    let foreign = current_bundle(&other.display().to_string(), T0);
    refused(&["ack", &dir, "web-1", "--fingerprint", &foreign, "--now", T0]);
    // A name with a control character cannot be recorded.
    let fp = current_bundle(&dir, T0);
    let err = refused(&["ack", &dir, "web\u{1b}1", "--fingerprint", &fp, "--now", T0]);
    assert!(err.contains("invalid consumer name"), "{err}");
    assert_eq!(snapshot(&path), before, "a refused ack wrote to the store");
}

#[test]
fn status_check_exits_3_once_a_consumer_lags_past_the_reload_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    ok(&["init", &dir, "--reload-interval", "7d", "--now", T0]);
    ok(&["issue", &dir, "web", "--dns", "web.ns.svc", "--now", T0]);
    let first = current_bundle(&dir, T0);
    ok(&["ack", &dir, "api", "--fingerprint", &first, "--now", T0]);
    ok(&["ack", &dir, "web", "--fingerprint", &first, "--now", T0]);
    fails_with(0, &["status", &dir, "--check", "--now", T0]);

    ok(&["rotate", &dir, "--now", ROTATION]);
    let second = current_bundle(&dir, ROTATION);
    assert_ne!(first, second);
    // A day later: nobody reloaded yet, but the interval has not passed.
    let day_after = "2027-02-02T00:00:00Z";
    fails_with(0, &["status", &dir, "--check", "--now", day_after]);
    let s = status(&dir, day_after);
    assert_eq!(s["health"], "ok");
    assert_eq!(s["consumers"][0]["current"], false);
    assert_eq!(s["consumers"][0]["overdue"], false);
    // web reloads; the previous bundle may still be acknowledged (api
    // restarted on old files), and is not current.
    ok(&[
        "ack",
        &dir,
        "web",
        "--fingerprint",
        &second,
        "--now",
        day_after,
    ]);
    let out = ok(&[
        "ack",
        &dir,
        "api",
        "--fingerprint",
        &first,
        "--now",
        day_after,
    ]);
    assert!(out.contains("nothing to do"), "{out}");

    // Eight days after the rotation, api still holds the first bundle.
    let later = "2027-02-09T00:00:00Z";
    fails_with(3, &["status", &dir, "--check", "--now", later]);
    let s = status(&dir, later);
    assert_eq!(s["health"], "action-due");
    assert_eq!(s["pending"], serde_json::json!([]));
    assert_eq!(s["consumers"][0]["name"], "api");
    assert_eq!(s["consumers"][0]["overdue"], true);
    assert_eq!(s["consumers"][1]["name"], "web");
    assert_eq!(s["consumers"][1]["current"], true);
    let human = ok(&["status", &dir, "--now", later]);
    let api = human
        .lines()
        .find(|l| l.trim_start().starts_with("api"))
        .unwrap();
    assert!(api.contains("LAGS"), "{human}");
    assert!(human.contains("consumers lag"), "{human}");

    // api reloads: nothing is due any more.
    ok(&["ack", &dir, "api", "--fingerprint", &second, "--now", later]);
    fails_with(0, &["status", &dir, "--check", "--now", later]);
}

#[test]
fn a_store_written_by_the_first_release_counts_its_bundle_as_published() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("pki");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("pki-rotate/tests/data/v1/store"),
        &path,
    );
    let dir = path.display().to_string();
    let now = "2027-03-02T00:00:00Z";
    let fp = fingerprint_of(&path.join("ca-bundle.crt"));
    assert_eq!(fp, current_bundle(&dir, now));
    ok(&["ack", &dir, "legacy", "--fingerprint", &fp, "--now", now]);
    let s = status(&dir, now);
    assert_eq!(s["consumers"][0]["current"], true);
    assert_eq!(s["health"], "ok");
}

/// Runs `pki ack` for every name at once; each must succeed.
fn racing_acks(dir: &str, names: &[String], fp: &str) {
    let runs: Vec<_> = names
        .iter()
        .map(|name| {
            let args: Vec<String> = ["ack", dir, name, "--fingerprint", fp, "--now", T0]
                .iter()
                .map(|s| s.to_string())
                .collect();
            std::thread::spawn(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_pki"))
                    .args(&args)
                    .output()
                    .unwrap()
            })
        })
        .collect();
    for (name, run) in names.iter().zip(runs) {
        let out = run.join().unwrap();
        assert!(
            out.status.success(),
            "ack {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn names_recorded(dir: &str) -> Vec<String> {
    status(dir, T0)["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn acks_racing_on_a_directory_store_are_all_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    ok(&["init", &dir, "--now", T0]);
    let fp = current_bundle(&dir, T0);
    let mut expected = Vec::new();
    // Rounds of two acks started together: each pair races for one write.
    for round in 0..4 {
        let pair = vec![format!("a-{round}"), format!("b-{round}")];
        racing_acks(&dir, &pair, &fp);
        expected.extend(pair);
    }
    expected.sort();
    assert_eq!(names_recorded(&dir), expected);
}

#[test]
fn acks_on_an_etcd_store_race_safely_and_repeat_without_a_write() {
    let server = etcd::Etcd::start();
    let url = server.url("pki/service-ca");
    ok(&["init", &url, "--now", T0]);
    let fp = current_bundle(&url, T0);
    let mut expected = Vec::new();
    for round in 0..3 {
        let pair = vec![format!("a-{round}"), format!("b-{round}")];
        racing_acks(&url, &pair, &fp);
        expected.extend(pair);
    }
    expected.sort();
    assert_eq!(names_recorded(&url), expected);

    let revisions = |keys: Vec<(String, Vec<u8>, i64)>| -> Vec<i64> {
        keys.into_iter().map(|(_, _, r)| r).collect()
    };
    let before = revisions(etcd::dump_keys(&server.endpoint(), ""));
    let out = ok(&["ack", &url, "a-0", "--fingerprint", &fp, "--now", T0]);
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(revisions(etcd::dump_keys(&server.endpoint(), "")), before);
    let never = "cd".repeat(32);
    refused(&["ack", &url, "a-0", "--fingerprint", &never, "--now", T0]);
    assert_eq!(revisions(etcd::dump_keys(&server.endpoint(), "")), before);
}

#[test]
fn a_reload_helper_acknowledges_through_the_driver_on_an_etcd_store() {
    use pki_reload::Acker;
    let server = etcd::Etcd::start();
    let url = server.url("pki/service-ca");
    ok(&["init", &url, "--now", T0]);
    let fp = current_bundle(&url, T0);
    let acker = pki_reload::StoreAcker::new(server.store("pki/service-ca"), "helper");
    acker.ack(&fp);
    acker.ack(&"ef".repeat(32));
    // Acks are written on threads of their own.
    let start = std::time::Instant::now();
    while acker.results().len() < 2 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "acks never written"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let results = acker.results();
    assert!(results.contains(&Ok(fp.clone())), "{results:?}");
    assert!(
        results
            .iter()
            .any(|r| matches!(r, Err(e) if e.contains("was not published"))),
        "{results:?}"
    );
    let s = status(&url, T0);
    assert_eq!(s["consumers"][0]["name"], "helper");
    assert_eq!(s["consumers"][0]["fingerprint"], fp.as_str());
}

#[test]
fn twenty_acks_racing_on_an_etcd_store_all_land_within_a_bounded_time() {
    let server = etcd::Etcd::start();
    let url = server.url("pki/service-ca");
    ok(&["init", &url, "--now", T0]);
    let fp = current_bundle(&url, T0);
    // Twenty processes at once: one of them can lose nineteen rounds.
    let names: Vec<String> = (0..20).map(|i| format!("host-{i:02}")).collect();
    let started = std::time::Instant::now();
    racing_acks(&url, &names, &fp);
    let took = started.elapsed();
    println!("20 racing acks on etcd took {took:?}");
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    assert_eq!(names_recorded(&url), names);
}
