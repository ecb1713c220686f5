//! `pki pin`: the root pin of a bundle (SHA-256 of the root's DER).

use crate::common::{CliError, CliResult, read_capped};
use std::path::Path;

pub fn run(file: &Path, max_input_size: u64) -> CliResult {
    let bytes = read_capped(file, max_input_size)?;
    let bundle = pki_core::Bundle::from_pem(&bytes)
        .map_err(|e| CliError::new(format!("{}: {e}", file.display())))?;
    crate::outln!("sha256:{}", bundle.root_pin()?);
    Ok(())
}
