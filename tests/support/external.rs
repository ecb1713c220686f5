//! A store whose CA was imported from an organisation's chain made by
//! OpenSSL (the k3s custom-CA topology), and what the external-CA tests
//! read back from it.

#![allow(clippy::unwrap_used)]

use super::cli::ok;
use super::maker::Maker;
use pki_core::{Bundle, Certificate};
use std::path::Path;

pub fn cert(path: &str) -> Vec<Certificate> {
    Certificate::all_from_pem(&std::fs::read(path).unwrap()).unwrap()
}

/// The rotation history as `pki status --json` reports it at `now`.
pub fn history(dir: &str, now: &str) -> Vec<serde_json::Value> {
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["status", dir, "--json", "--now", now])).unwrap();
    json["history"].as_array().cloned().unwrap()
}

/// An imported k3s-style store with one leaf, `web`.
pub fn imported(tmp: &Path) -> (Maker, String) {
    let m = Maker::org(tmp);
    // One file with key and certificates, as StarlingX uploads it.
    let upload = m.bundle(
        "upload.pem",
        &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
    );
    let dir = tmp.join("pki").display().to_string();
    let out = ok(&["init", &dir, "--import", &upload, "--reload-interval", "7d"]);
    assert!(out.contains("imported CA"), "{out}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(&dir).join("pki-state.json")).unwrap())
            .unwrap();
    assert_eq!(
        state["policy"]["rotation"]["reload_interval"], "7d",
        "init --import keeps --reload-interval"
    );
    ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.example.test",
        "--lifetime",
        "3650d",
    ]);
    (m, dir)
}

pub fn root_only_bundle(m: &Maker) -> Bundle {
    Bundle::from_pem(m.read("root.crt").as_bytes()).unwrap()
}
