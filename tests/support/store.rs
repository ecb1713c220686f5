//! A directory store made through the `pki` binary at the simulated time
//! `T0`, the times the tests step it to, and its JSON status.

#![allow(clippy::unwrap_used)]

use super::cli::ok;

// 2026-01-01: the simulated creation time of every store here.
pub const T0: &str = "2026-01-01T00:00:00Z";
// T0 + 396 days: just past the rotation point of the default policy (D - M = 395d).
pub const AFTER_ROTATION_POINT: &str = "2027-02-01T00:00:00Z";
// A month after that automatic rotation.
pub const MONTH_LATER: &str = "2027-03-01T00:00:00Z";
// T0 + 304 days: web (365 days, renewed with 20% left) is due for renewal.
pub const LEAF_DUE: &str = "2026-11-01T00:00:00Z";
// T0 + 800 days: the first CA (790 days) has expired.
pub const AFTER_CA_EXPIRY: &str = "2028-03-10T00:00:00Z";

/// A store created at T0 with `web` (server, two names) issued.
pub fn store(extra_init: &[&str]) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    let mut init = vec!["init", dir.as_str(), "--now", T0];
    init.extend_from_slice(extra_init);
    ok(&init);
    ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--now",
        T0,
    ]);
    (tmp, dir)
}

pub fn status_json(dir: &str, now: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["status", dir, "--json", "--now", now])).unwrap()
}
