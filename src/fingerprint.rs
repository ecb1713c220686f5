//! `pki fingerprint PATH`: what a target acknowledges.
//!
//! The token is computed from the files under PATH only: their paths
//! relative to PATH and their contents (links are followed, names starting
//! with `.` are skipped, times and modes are ignored). It equals the
//! fingerprint the CA set expects for the target whose directory PATH is.

use crate::common::{CliError, CliResult};
use std::fs;
use std::path::Path;

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
