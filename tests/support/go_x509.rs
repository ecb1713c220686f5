//! Independent verification with Go's `crypto/x509` (`go_x509/main.go`,
//! standard library only), built once per test process: a TLS server
//! chain against a CA bundle at a given time, for a DNS name.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use time::OffsetDateTime;

/// The verifier, built with `go build` into a temporary directory that
/// lives as long as the test process.
fn verifier() -> &'static Path {
    static BUILT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, exe) = BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("go_x509");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/go_x509/main.go");
        let o = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&exe)
            .arg(&source)
            // Standard library only: never download a module or a toolchain.
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .output()
            .expect("go is not installed or cannot run; install Go 1.22 or later (Debian: apt-get install golang-go) or run scripts/test.sh");
        assert!(
            o.status.success(),
            "go build {}: {}",
            source.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        (dir, exe)
    });
    exe
}

/// Whether Go verifies the chain in `chain` (PEM, leaf first) against the
/// bundle in `bundle` at `at` for `dns`; `Err` carries Go's reason.
pub fn verify(bundle: &Path, chain: &Path, dns: &str, at: OffsetDateTime) -> Result<(), String> {
    let o = Command::new(verifier())
        .arg(bundle)
        .arg(chain)
        .arg(dns)
        .arg(at.unix_timestamp().to_string())
        .output()
        .unwrap();
    match o.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => panic!(
            "go_x509 could not check {}: {}",
            chain.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}
