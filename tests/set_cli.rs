#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `pki set …` and `pki fingerprint` as an admin and a host agent use them:
//! the issue's walkthrough on a directory store, the files each target
//! gets, the JSON status, and bad input refused with exit 1, one line, and
//! the store unchanged.

mod support;

use support::cli::{ok, pki};
use support::set::{T1, ack, refused, setup, status};

use std::path::Path;
use std::process::Command;

#[test]
fn walkthrough_rotates_the_set_and_publishes_each_targets_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.to_str().unwrap();
    setup(d);
    let s = status(d);
    assert_eq!(s["step"], "idle");
    let node = dir.join("targets/node-1");
    assert!(node.join("trust/cluster.crt").is_file());
    assert!(node.join("certs/kubelet-node-1/tls.key").is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(node.join("certs/kubelet-node-1/tls.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "keys are private");

    ok(&["set", "start", d, "--reason", "yearly", "--now", T1]);
    let s = status(d);
    assert_eq!(s["step"], "trust-both");
    assert_eq!(s["half"], "trust");
    // The fingerprint status asks for is the one `pki fingerprint` prints.
    let fp = ok(&["fingerprint", node.to_str().unwrap()]);
    assert_eq!(s["targets"]["node-1"]["fingerprint"], fp.trim());
    assert_eq!(s["targets"]["node-1"]["progress"], "pending");
    // client-ca/ holds exactly the CA's name: old cluster CA + new client CA.
    let cc: Vec<_> = std::fs::read_dir(dir.join("targets/control-plane/client-ca"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(cc, ["cluster.crt"]);
    let pem =
        std::fs::read_to_string(dir.join("targets/control-plane/client-ca/cluster.crt")).unwrap();
    assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 2);

    // Advance with missing acks: refused, naming what it waits for.
    let err = refused(&dir, &["set", "advance", d, "--now", T1]);
    assert!(
        err.contains("waiting for") && err.contains("node-1"),
        "{err}"
    );
    ack(d, "control-plane");
    assert_eq!(
        status(d)["half"],
        "clients",
        "kubelet moved to the new client CA"
    );
    // The ack of a stale fingerprint (node-1's files changed) is refused.
    let stale = fp.trim().to_string();
    let err = refused(
        &dir,
        &[
            "set",
            "ack",
            d,
            "node-1",
            "--fingerprint",
            &stale,
            "--now",
            T1,
        ],
    );
    assert!(err.contains("expected"), "{err}");
    ack(d, "node-1");
    // An ack of the current fingerprint again is idempotent.
    ack(d, "node-1");
    ok(&[
        "set",
        "fail",
        d,
        "node-1",
        "--reason",
        "puppet apply failed",
        "--now",
        T1,
    ]);
    let human = ok(&["set", "status", d, "--now", T1]);
    assert!(human.contains("puppet apply failed"), "{human}");
    refused(&dir, &["set", "advance", d, "--now", T1]);
    ok(&["set", "retry", d, "node-1", "--now", T1]);
    // Retried, node-1 is pending: it must acknowledge again.
    assert_eq!(status(d)["targets"]["node-1"]["progress"], "pending");
    let err = refused(&dir, &["set", "advance", d, "--now", T1]);
    assert!(err.contains("node-1"), "{err}");
    ack(d, "node-1");
    ok(&["set", "advance", d, "--now", T1]);
    assert_eq!(status(d)["step"], "update-certs");
    ack(d, "control-plane");
    ack(d, "node-1");
    ok(&["set", "advance", d, "--now", T1]);
    assert_eq!(status(d)["step"], "trust-new");
    ack(d, "control-plane");
    // Abort here rolls forward to completed, destroying the old CA keys:
    // refused while node-1 has not loaded trust-new.
    let err = refused(&dir, &["set", "abort", d, "--now", T1]);
    assert!(
        err.contains("strand node-1") && err.contains("override"),
        "{err}"
    );
    let s = status(d);
    assert_eq!(s["abort_to"], "completed");
    assert_eq!(s["abort_strands"], serde_json::json!(["node-1"]));
    ok(&[
        "set",
        "advance",
        d,
        "--override",
        "node-1 is rebooting",
        "--now",
        T1,
    ]);
    let s = status(d);
    assert_eq!(s["step"], "completed");
    assert!(s["completed_at"].is_string());
    assert_eq!(s["overrides"][0]["reason"], "node-1 is rebooting");
    assert!(!dir.join("set/cas/cluster/next-ca.key").exists());
    let human = ok(&["set", "status", d, "--now", T1]);
    assert!(
        human.contains("node-1 is rebooting") && human.contains("timeline"),
        "{human}"
    );
    // Abort with nothing running.
    let err = refused(&dir, &["set", "abort", d, "--now", T1]);
    assert!(err.contains("no rotation is running"), "{err}");
}

#[test]
fn bad_input_is_refused_with_one_line_and_the_store_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.to_str().unwrap();
    setup(d);
    let err = refused(
        &dir,
        &[
            "set",
            "issue",
            d,
            "x",
            "--ca",
            "nope",
            "--serving",
            "--dns",
            "x.example",
            "--target",
            "t",
        ],
    );
    assert!(err.contains("no CA named \"nope\""), "{err}");
    let err = refused(&dir, &["set", "target", d, "t", "--trusts", "front-proxy"]);
    assert!(err.contains("signs no serving certificates"), "{err}");
    let err = refused(
        &dir,
        &["set", "ack", d, "ghost", "--fingerprint", "sha256:00"],
    );
    assert!(err.contains("no target named \"ghost\""), "{err}");
    let err = refused(&dir, &["set", "advance", d]);
    assert!(err.contains("no rotation is running"), "{err}");
    let err = refused(&dir, &["set", "abort", d]);
    assert!(err.contains("no rotation is running"), "{err}");
    // What node-1 loaded while idle: a real fingerprint, of the wrong step
    // once the rotation runs.
    let idle_fp = ok(&["fingerprint", &format!("{d}/targets/node-1")]);
    ok(&["set", "start", d, "--now", T1]);
    let err = refused(&dir, &["set", "start", d, "--now", T1]);
    assert!(err.contains("already running"), "{err}");
    // An ack of the idle step's files (the wrong step).
    let err = refused(
        &dir,
        &[
            "set",
            "ack",
            d,
            "node-1",
            "--fingerprint",
            idle_fp.trim(),
            "--now",
            T1,
        ],
    );
    assert!(
        err.contains("trust-both") && err.contains("expected"),
        "{err}"
    );
    let err = refused(
        &dir,
        &["set", "fail", d, "ghost", "--reason", "x", "--now", T1],
    );
    assert!(err.contains("no target named \"ghost\""), "{err}");
    let err = refused(&dir, &["set", "retry", d, "node-1", "--now", T1]);
    assert!(err.contains("has not failed"), "{err}");
    ok(&["set", "abort", d, "--now", T1]);
    assert_eq!(status(d)["step"], "reverting");
    let err = refused(&dir, &["set", "abort", d, "--now", T1]);
    assert!(err.contains("already reverting"), "{err}");
    ack(d, "control-plane");
    ack(d, "node-1");
    ok(&["set", "advance", d, "--now", T1]);
    assert_eq!(status(d)["step"], "idle");
    // A CA valid for 12 hours is refused as an import.
    let key = tmp.path().join("short.pem");
    std::fs::write(&key, short_ca_pem()).unwrap();
    let arg = format!("etcd={}", key.display());
    let err = refused(&dir, &["set", "start", d, "--import", &arg, "--now", T1]);
    assert!(err.contains("24 hours"), "{err}");
    // Bad usage is exit 2.
    let o = pki(&["set", "init", d, "--ca", "cluster"]);
    assert_eq!(o.status.code(), Some(2));
}

fn short_ca_pem() -> String {
    use pki::core::{CertificateAuthority, KeyAlgorithm};
    use rand_core::SeedableRng;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
    let at =
        time::OffsetDateTime::parse(T1, &time::format_description::well_known::Rfc3339).unwrap();
    let ca = CertificateAuthority::generate_root(
        "short",
        KeyAlgorithm::EcdsaP256,
        at,
        time::Duration::hours(12),
        &mut rng,
    )
    .unwrap();
    format!(
        "{}{}",
        ca.key.to_pkcs8_pem().unwrap().as_str(),
        ca.cert.to_pem()
    )
}

#[test]
fn abort_in_trust_new_with_an_override_completes_and_records_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.to_str().unwrap();
    setup(d);
    ok(&["set", "start", d, "--now", T1]);
    for _ in 0..2 {
        ack(d, "control-plane");
        ack(d, "node-1");
        ok(&["set", "advance", d, "--now", T1]);
    }
    assert_eq!(status(d)["step"], "trust-new");
    let err = refused(&dir, &["set", "abort", d, "--now", T1]);
    assert!(err.contains("control-plane, node-1"), "{err}");
    let human = ok(&["set", "status", d, "--now", T1]);
    assert!(
        human.contains("abort would go to completed and strand control-plane, node-1"),
        "{human}"
    );
    let out = ok(&[
        "set",
        "abort",
        d,
        "--override",
        "hosts are being replaced",
        "--now",
        T1,
    ]);
    assert!(out.contains("step: completed"), "{out}");
    let s = status(d);
    assert_eq!(s["step"], "completed");
    assert_eq!(s["completed_at"], T1);
    assert_eq!(s["overrides"][0]["from"], "trust-new");
    assert_eq!(s["overrides"][0]["to"], "completed");
    assert_eq!(s["overrides"][0]["reason"], "hosts are being replaced");
    assert_eq!(
        s["overrides"][0]["waiting"],
        serde_json::json!(["control-plane", "node-1"])
    );
    assert!(!dir.join("set/cas/cluster/next-ca.key").exists());
    let err = refused(&dir, &["set", "abort", d, "--now", T1]);
    assert!(err.contains("no rotation is running"), "{err}");
}

#[test]
fn demo_set_prints_the_mutual_tls_matrix_at_every_step() {
    // --now starts the simulated clock where it says.
    let o = pki(&["demo", "set", "--now", "2026-01-01T00:00:00Z"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("== t0 2026-01-01T00:00:00Z:"), "{out}");
    for step in ["trust-both", "update-certs", "trust-new", "completed"] {
        let heading = format!("now in step {step}");
        let at = out
            .find(&heading)
            .unwrap_or_else(|| panic!("no {heading}: {out}"));
        // Each change prints its matrix: both pairs, before/after both ways.
        let section = &out[at..];
        let section = &section[..section[1..].find("\n== ").map_or(section.len(), |e| e + 1)];
        assert_eq!(
            section.matches("mutual TLS on 127.0.0.1").count(),
            2,
            "{section}"
        );
        assert_eq!(
            section.matches(" ok ").count() + section.matches(" ok\n").count(),
            8,
            "{section}"
        );
    }
    assert!(!out.contains("FAIL"), "{out}");
    assert!(
        out.contains("every handshake of every step succeeded"),
        "{out}"
    );
}

#[test]
fn demo_set_piped_into_head_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pki"))
        .args(["demo", "set"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `pki demo set | head -1`: read one line, then close the pipe.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("== t0"), "{first}");
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
}

/// The book's walkthrough (docs/book/src/ca-set.md), run literally by `sh -e` with `DIR` a new
/// store and this build's `pki` first on the PATH: every line succeeds,
/// and it ends idle after one completed and one reverted rotation.
#[test]
fn readme_walkthrough_runs_as_written() {
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/book/src/ca-set.md"),
    )
    .unwrap();
    let from = readme
        .find("Walkthrough on a directory store")
        .expect("the walkthrough");
    let block = &readme[from..];
    let start = block.find("```sh\n").expect("its sh block") + "```sh\n".len();
    let script = &block[start..start + block[start..].find("```").unwrap()];
    assert!(script.contains("pki set advance DIR"), "{script}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let script = script.replace("DIR", dir.to_str().unwrap());
    let bin = Path::new(env!("CARGO_BIN_EXE_pki")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("sh")
        .args(["-e", "-c", &script])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the walkthrough failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(&ok(&["set", "status", dir.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(s["step"], "idle");
    let outcomes: Vec<&str> = s["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["completed", "reverted"]);
}
