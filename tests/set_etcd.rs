//! `pki set` on an etcd store URL (a real etcd on 127.0.0.1, started by the
//! test): a rotation from start to completed, acknowledged with the
//! fingerprints `pki export` + `pki fingerprint` compute from the exported
//! target directories.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::etcd;

use support::cli::ok;
use support::set::{T1, ack_exported};

const T0: &str = "2026-01-01T00:00:00Z";

fn ack_all(url: &str, out: &std::path::Path) {
    for target in ["control-plane", "node-1"] {
        ack_exported(url, out, target);
    }
}

#[test]
fn a_set_rotates_on_an_etcd_url() {
    let server = etcd::Etcd::start();
    let url = server.url("pki/set");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    ok(&[
        "set",
        "init",
        &url,
        "--ca",
        "cluster:serving+client",
        "--now",
        T0,
    ]);
    ok(&[
        "set",
        "issue",
        &url,
        "api",
        "--ca",
        "cluster",
        "--serving",
        "--dns",
        "api.example",
        "--target",
        "control-plane",
        "--now",
        T0,
    ]);
    ok(&[
        "set", "issue", &url, "kubelet", "--ca", "cluster", "--client", "--target", "node-1",
        "--now", T0,
    ]);
    ok(&[
        "set", "target", &url, "node-1", "--trusts", "cluster", "--now", T0,
    ]);
    ok(&[
        "set",
        "target",
        &url,
        "control-plane",
        "--client-ca",
        "cluster",
        "--now",
        T0,
    ]);
    ok(&["set", "start", &url, "--reason", "yearly", "--now", T1]);
    for _ in 0..3 {
        ack_all(&url, &out);
        ok(&["set", "advance", &url, "--now", T1]);
    }
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["set", "status", &url, "--json", "--now", T1])).unwrap();
    assert_eq!(status["step"], "completed");
    let keys = etcd::dump_keys(&server.endpoint(), "");
    assert!(
        keys.iter().all(|(k, _, _)| k.starts_with("pki/set/")),
        "{keys:?}"
    );
}
