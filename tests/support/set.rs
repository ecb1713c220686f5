//! A CA set made through the `pki` binary at `T0` (GEP-18's shoot in
//! small), its targets acknowledged at `T1`, and refusals that must leave
//! it unchanged.

#![allow(clippy::unwrap_used)]

use super::cli::{self, ok, tree};
use super::store::T0;
use std::path::Path;

/// Runs a command that must be refused: exit 1, one line on stderr, and
/// every file of the store exactly as before.
pub fn refused(dir: &Path, args: &[&str]) -> String {
    let before = tree(dir);
    let err = cli::refused(args);
    assert_eq!(tree(dir), before, "pki {args:?} changed the store");
    err
}

pub fn status(dir: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["set", "status", dir, "--json", "--now", T1])).unwrap()
}

pub const T1: &str = "2026-03-01T00:00:00Z";

pub fn setup(dir: &str) {
    ok(&[
        "set",
        "init",
        dir,
        "--ca",
        "cluster:serving+client",
        "--ca",
        "etcd:serving+client",
        "--ca",
        "front-proxy:client",
        "--ca",
        "metrics:serving",
        "--now",
        T0,
    ]);
    ok(&[
        "set",
        "issue",
        dir,
        "kube-apiserver",
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
        "set",
        "issue",
        dir,
        "kubelet-node-1",
        "--ca",
        "cluster",
        "--client",
        "--target",
        "node-1",
        "--now",
        T0,
    ]);
    ok(&[
        "set", "target", dir, "node-1", "--trusts", "cluster", "--now", T0,
    ]);
    ok(&[
        "set",
        "target",
        dir,
        "control-plane",
        "--client-ca",
        "cluster",
        "--now",
        T0,
    ]);
}

/// Acknowledges `target` of the set at store URL `url` with the
/// fingerprint `pki fingerprint` computes from its files as `pki export`
/// writes them into `out` (exported afresh: an ack may move another
/// target's certificates, as the control plane's moves the kubelet's).
pub fn ack_exported(url: &str, out: &Path, target: &str) {
    let _ = std::fs::remove_dir_all(out);
    ok(&["export", url, out.to_str().unwrap()]);
    let fp = ok(&[
        "fingerprint",
        out.join("targets").join(target).to_str().unwrap(),
    ]);
    ok(&[
        "set",
        "ack",
        url,
        target,
        "--fingerprint",
        fp.trim(),
        "--now",
        T1,
    ]);
}

pub fn ack(dir: &str, target: &str) {
    let fp = ok(&["fingerprint", &format!("{dir}/targets/{target}")]);
    let fp = fp.trim();
    assert!(
        fp.starts_with("sha256:") && !fp.contains(char::is_whitespace),
        "{fp}"
    );
    ok(&["set", "ack", dir, target, "--fingerprint", fp, "--now", T1]);
}
