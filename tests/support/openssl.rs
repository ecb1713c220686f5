//! Independent verification with the `openssl verify` command, when installed.
//!
//! OpenSSL builds its own path (it must reach a self-signed certificate of
//! the bundle; a cross-signed bridge in the bundle is followed to the root
//! that signed it) and is stricter than webpki in places with
//! `-x509_strict`, so agreeing with it is evidence that our certificates and
//! bridges work outside this crate.
//!
//! The command run is
//! `openssl verify -x509_strict -purpose PURPOSE -attime SECS -CAfile BUNDLE [-untrusted CHAIN] LEAF`,
//! with the files written to a temporary directory removed afterwards.

use pki_core::{Bundle, Certificate};
use std::path::Path;
use std::process::{Command, Stdio};
use time::OffsetDateTime;

/// What came of asking OpenSSL, when it did not refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `openssl verify` accepted the chain.
    Verified,
    /// The `openssl` binary is not installed (not found on `PATH`): nothing
    /// was checked.
    Unavailable,
}

/// Verifies `chain` (leaf first, then untrusted intermediates) against
/// `bundle` at `at` with `openssl verify -x509_strict`, for `purpose` (an
/// OpenSSL purpose name: `sslserver`, `sslclient`, …).
///
/// Returns [`Verdict::Unavailable`] when `openssl` is not installed, and
/// `Err` with OpenSSL's messages on one line when it refuses the chain (or
/// when the files or the command cannot be set up).
pub fn verify(
    bundle: &Bundle,
    chain: &[Certificate],
    at: OffsetDateTime,
    purpose: &str,
) -> Result<Verdict, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let path = dir.path().join("bundle.pem");
    std::fs::write(&path, bundle.to_pem()).map_err(|e| format!("writing the bundle: {e}"))?;
    verify_with_bundle_file(&path, chain, at, purpose)
}

/// Like [`verify`], with the bundle already in a PEM file.
pub fn verify_with_bundle_file(
    bundle_pem: &Path,
    chain: &[Certificate],
    at: OffsetDateTime,
    purpose: &str,
) -> Result<Verdict, String> {
    let (leaf, intermediates) = chain
        .split_first()
        .ok_or_else(|| "empty chain".to_string())?;
    let secs = at.unix_timestamp();
    if secs < 0 {
        return Err(format!("verification time {at} is before 1970"));
    }
    let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let leaf_path = dir.path().join("leaf.pem");
    std::fs::write(&leaf_path, leaf.to_pem()).map_err(|e| format!("writing the leaf: {e}"))?;

    let mut cmd = Command::new("openssl");
    cmd.arg("verify")
        .arg("-x509_strict")
        .arg("-purpose")
        .arg(purpose)
        .arg("-attime")
        .arg(secs.to_string())
        .arg("-CAfile")
        .arg(bundle_pem);
    if !intermediates.is_empty() {
        let untrusted = dir.path().join("untrusted.pem");
        let pem: String = intermediates.iter().map(Certificate::to_pem).collect();
        std::fs::write(&untrusted, pem).map_err(|e| format!("writing the chain: {e}"))?;
        cmd.arg("-untrusted").arg(untrusted);
    }
    cmd.arg(&leaf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Verdict::Unavailable),
        Err(e) => return Err(format!("running openssl: {e}")),
    };
    if output.status.success() {
        return Ok(Verdict::Verified);
    }
    // One line, without the temporary directory's name.
    let prefix = format!("{}/", dir.path().display());
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.trim().replace(&prefix, ""))
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        Err(format!("openssl verify failed ({})", output.status))
    } else {
        Err(lines.join("; "))
    }
}
