//! `pki pin`: the root pin of a bundle (SHA-256 of the root's DER).
//!
//! A multi-certificate file (a serving chain, a CA with its chain) is
//! followed from its first certificate through the issuers it holds up to
//! a self-signed root, and that root's DER is hashed: never PEM bytes, whose
//! layout varies between copies of the same certificate.

use crate::common::{CliError, CliResult, read_capped};
use std::path::Path;

pub fn run(file: &Path, max_input_size: u64) -> CliResult {
    let bytes = read_capped(file, max_input_size)?;
    let certs = pki_core::Certificate::all_from_pem(&bytes)
        .map_err(|e| CliError::new(format!("{}: {e}", file.display())))?;
    let root = pki_core::chain_root(&certs)
        .ok_or_else(|| CliError::new(format!("{}: {}", file.display(), pki_core::Error::NoRoot)))?;
    crate::outln!("sha256:{}", hex_encode(&root.fingerprint_sha256()));
    Ok(())
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
