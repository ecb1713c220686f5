//! `pki pin`: the root pin of a bundle (SHA-256 of the root's DER).

use crate::common::{CliError, CliResult};
use std::path::Path;

pub fn run(file: &Path) -> CliResult {
    let bytes =
        std::fs::read(file).map_err(|e| CliError::new(format!("{}: {e}", file.display())))?;
    let bundle = pki_core::Bundle::from_pem(&bytes)
        .map_err(|e| CliError::new(format!("{}: {e}", file.display())))?;
    println!("sha256:{}", bundle.root_pin()?);
    Ok(())
}
