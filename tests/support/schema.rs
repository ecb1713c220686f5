//! The CLI's JSON reports checked against `docs/*.schema.json` by an
//! independent validator: Python's jsonschema (draft 2020-12), run by
//! `tests/support/validate_json.py`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs the validator on `json` against `docs/<schema>`: Ok, or every error
/// it printed.
pub fn check(schema: &str, json: &str) -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new("python3")
        .arg(root.join("tests/support/validate_json.py"))
        .arg(root.join("docs"))
        .arg(schema)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is not installed; install it with `apt-get install python3 python3-jsonschema` (Debian) or run scripts/test.sh: it validates JSON output against the schemas");
    child
        .stdin
        .take()
        .expect("the validator's stdin is piped")
        .write_all(json.as_bytes())
        .expect("the validator reads its input");
    let out = child.wait_with_output().expect("the validator runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !err.contains("ModuleNotFoundError"),
        "Python's jsonschema is not installed; install it with `apt-get install python3-jsonschema` (Debian) or run scripts/test.sh: {err}"
    );
    if out.status.success() {
        Ok(())
    } else {
        Err(err)
    }
}

/// Panics with every error unless `json` (what the test calls `what`)
/// matches `docs/<schema>` and carries no PEM: no key material or
/// certificate ever appears in a report.
pub fn validate(schema: &str, json: &str, what: &str) {
    if let Err(err) = check(schema, json) {
        panic!("{what} does not match docs/{schema}:\n{err}\n{json}");
    }
    assert!(!json.contains("-----BEGIN"), "{what} carries PEM: {json}");
}
