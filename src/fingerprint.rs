//! `pki fingerprint PATH`: what a target acknowledges; `pki fingerprint
//! --bundle FILE` and `pki ack`: what a consumer of the signer's bundle
//! acknowledges.
//!
//! The token is computed from the files under PATH only: their paths
//! relative to PATH and their contents (links are followed, names starting
//! with `.` are skipped, times and modes are ignored). It equals the
//! fingerprint the CA set expects for the target whose directory PATH is.

use crate::common::{CliError, CliResult, SIGNER, StoreArg, os_rng, read_capped};
use pki_rotate::{AckInput, Driver, UptakeEngine};
use std::fs;
use std::path::Path;
use time::OffsetDateTime;

/// Prints the token of the bundle in `file`: the `bundle_fingerprint` of
/// `pki status --json` for the same certificates, whatever their order,
/// duplicates or PEM layout.
pub fn bundle(file: &Path, max_input_size: u64) -> CliResult {
    let bytes = read_capped(file, max_input_size)?;
    let bundle = pki_core::Bundle::from_pem(&bytes)
        .map_err(|e| CliError::new(format!("{}: {e}", file.display())))?;
    crate::outln!("{}", pki_rotate::uptake::bundle_fingerprint(&bundle));
    Ok(())
}

/// Records that `consumer` loaded the bundle `fingerprint`, through the
/// driver: concurrent acks and rotations each land once. The same ack
/// again writes nothing.
pub fn ack(store: &StoreArg, consumer: &str, fingerprint: &str, now: OffsetDateTime) -> CliResult {
    let driver = Driver::new(store.open()?);
    let step = driver.step::<UptakeEngine, _>(
        SIGNER,
        &AckInput::new(consumer, fingerprint),
        now,
        &mut os_rng(),
    )?;
    if step.events.is_empty() {
        crate::outln!("nothing to do: {consumer} already acknowledged {fingerprint}");
    }
    for e in &step.events {
        crate::outln!("{e}");
    }
    Ok(())
}

/// Prints the fingerprint of the directory (or single file) at `path`.
pub fn run(path: &Path) -> CliResult {
    crate::outln!("{}", fingerprint_dir(path)?);
    Ok(())
}

/// The fingerprint of the tree at `path`.
pub fn fingerprint_dir(path: &Path) -> CliResult<String> {
    let meta = fs::metadata(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let mut files = Vec::new();
    if meta.is_dir() {
        collect(path, "", &mut files)?;
    } else {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let contents =
            fs::read(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
        files.push((name, contents));
    }
    Ok(pki_rotate::set::fingerprint(
        files.iter().map(|(p, c)| (p.as_str(), c.as_slice())),
    ))
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> CliResult {
    let entries =
        fs::read_dir(dir).map_err(|e| CliError::new(format!("{}: {e}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::new(format!("{}: {e}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let meta =
            fs::metadata(&path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
        if meta.is_dir() {
            collect(&path, &rel, out)?;
        } else if meta.is_file() {
            let contents =
                fs::read(&path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
            out.push((rel, contents));
        }
    }
    Ok(())
}
