//! The book's command sequences that need a server or a token, read from
//! their chapter and run by the tests that start what they need: the test
//! gives the address of its server (or its temporary paths) for the ones
//! the book names, and each one the book names must be there, so a
//! changed chapter fails its test rather than running something else.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

/// The first ```sh block of docs/book/src/`chapter` after `marker`.
pub fn sh_block(chapter: &str, marker: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/book/src")
        .join(chapter);
    let text = std::fs::read_to_string(&path).unwrap();
    let from = text
        .find(marker)
        .unwrap_or_else(|| panic!("{chapter} has no `{marker}`"));
    let block = &text[from..];
    let start = block.find("```sh\n").expect("its sh block") + "```sh\n".len();
    block[start..start + block[start..].find("```").unwrap()].to_string()
}

/// `script` with each `(from, to)` of `substitutions` replaced; a `from`
/// the script does not hold fails the test.
pub fn substituted(script: &str, substitutions: &[(&str, &str)]) -> String {
    let mut out = script.to_string();
    for (from, to) in substitutions {
        assert!(out.contains(from), "the block has no `{from}`:\n{script}");
        out = out.replace(from, to);
    }
    out
}

/// `sh -e -c SCRIPT` in `dir`, this build's `pki` first on the PATH and
/// none of the caller's store key or token variables: the caller adds the
/// environment its server or token needs.
pub fn command(script: &str, dir: &Path) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_pki")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    command
        .args(["-e", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("PKI_STORE_KEY_FILE")
        .env_remove("PKI_PKCS11_MODULE")
        .env_remove("PKI_PKCS11_PIN_FILE");
    command
}

/// `o`, the output of `script`, must be a success; its stdout.
pub fn ran(script: &str, o: Output) -> String {
    assert!(
        o.status.success(),
        "{script}\nexit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}
