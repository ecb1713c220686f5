//! `pki inspect`: every certificate in a PEM file, as an operator needs to
//! see it: subject, issuer, key identifiers, validity with a countdown,
//! names, and, given a store, which of its CAs issued it.

use crate::common::{CliError, CliResult, StoreArg, load_signer, read_capped, when};
use pki_core::Certificate;
use std::path::Path;
use time::OffsetDateTime;

pub fn run(
    file: &Path,
    store: Option<&StoreArg>,
    now: OffsetDateTime,
    max_input_size: u64,
) -> CliResult {
    let bytes = read_capped(file, max_input_size)?;
    let certs = Certificate::all_from_pem(&bytes)
        .map_err(|e| CliError::new(format!("{}: {e}", file.display())))?;
    if certs.is_empty() {
        return Err(CliError::new(format!(
            "{}: no certificate found",
            file.display()
        )));
    }
    let cas = match store {
        Some(store) => store_cas(store)?,
        None => Vec::new(),
    };
    for (i, cert) in certs.iter().enumerate() {
        if i > 0 {
            crate::outln!();
        }
        crate::out!(
            "{}",
            describe(i, cert, now, store.map(|s| (s, cas.as_slice())))
        );
    }
    Ok(())
}

/// The store's CAs that may have issued something: the current CA, then
/// the previous one.
fn store_cas(store: &StoreArg) -> CliResult<Vec<(&'static str, Certificate)>> {
    let state = load_signer(store)?;
    let mut cas = vec![("current CA", state.ca.cert.clone())];
    if let Some(previous) = state
        .previous
        .as_ref()
        .and_then(|p| p.certificate.as_ref())
        .and_then(|pem| Certificate::from_pem(pem.as_bytes()).ok())
    {
        cas.push(("previous CA", previous));
    }
    Ok(cas)
}

fn hex_or_none(bytes: Option<&[u8]>) -> String {
    bytes.map(hex::encode).unwrap_or_else(|| "(none)".into())
}

fn describe(
    index: usize,
    cert: &Certificate,
    now: OffsetDateTime,
    store: Option<(&StoreArg, &[(&'static str, Certificate)])>,
) -> String {
    let mut out = String::new();
    let kind = if cert.is_ca() {
        if cert.looks_self_signed() {
            "CA (self-signed)"
        } else {
            "CA"
        }
    } else {
        "end entity"
    };
    out.push_str(&format!("certificate {index}: {}  {kind}\n", cert.id()));
    out.push_str(&format!("  subject      {}\n", cert.subject()));
    out.push_str(&format!("  issuer       {}\n", cert.issuer()));
    out.push_str(&format!("  serial       {}\n", cert.serial_hex()));
    out.push_str(&format!("  SKI          {}\n", hex_or_none(cert.ski())));
    out.push_str(&format!("  AKI          {}\n", hex_or_none(cert.aki())));
    out.push_str(&format!(
        "  not before   {}\n",
        when(cert.not_before(), now)
    ));
    let state = if now > cert.not_after() {
        "  EXPIRED"
    } else if now < cert.not_before() {
        "  NOT YET VALID"
    } else {
        ""
    };
    out.push_str(&format!(
        "  not after    {}{state}\n",
        when(cert.not_after(), now)
    ));
    let mut names = cert.dns_names();
    names.extend(cert.ip_addresses().iter().map(ToString::to_string));
    if !names.is_empty() {
        out.push_str(&format!("  names        {}\n", names.join(", ")));
    }
    let eku = cert.extended_key_usage().unwrap_or(&[]);
    let mut usages = Vec::new();
    if eku.contains(&pki_core::EKU_SERVER_AUTH) {
        usages.push("serverAuth");
    }
    if eku.contains(&pki_core::EKU_CLIENT_AUTH) {
        usages.push("clientAuth");
    }
    if !usages.is_empty() {
        out.push_str(&format!("  usage        {}\n", usages.join(", ")));
    }
    out.push_str(&format!(
        "  sha256       {}\n",
        hex::encode(cert.fingerprint_sha256())
    ));
    if let Some((store, cas)) = store {
        let issuer = cas
            .iter()
            .find(|(_, ca)| pki_core::issued_by(cert, ca).issued_by && cert != ca);
        match issuer {
            Some((role, ca)) => {
                out.push_str(&format!("  issued by    {role} {} of {store}\n", ca.id()))
            }
            None if cas.iter().any(|(_, ca)| ca == cert) => {
                out.push_str(&format!("  is           a CA of {store}\n"))
            }
            None => out.push_str(&format!(
                "  issued by    none of the CAs of {store} (current or previous)\n"
            )),
        }
    }
    out
}
