//! `pki verify`: validate a chain against a bundle, RFC 5280 style.

use crate::common::{CliError, CliResult, read_capped};
use pki_core::verify::{ExpectedName, Purpose, VerifyOptions, verify_chain};
use pki_core::{Bundle, Certificate};
use std::net::IpAddr;
use std::path::Path;
use time::OffsetDateTime;

pub struct VerifyArgs<'a> {
    pub bundle: &'a Path,
    pub chain: &'a Path,
    pub dns: Option<String>,
    pub ip: Option<IpAddr>,
    pub purpose: Purpose,
    pub at: OffsetDateTime,
    pub json: bool,
    pub max_input_size: u64,
}

/// One certificate of a verified path in `pki verify --json`.
#[derive(serde::Serialize)]
struct PathEntry {
    role: &'static str,
    id: String,
    subject: String,
    issuer: String,
    #[serde(with = "time::serde::rfc3339")]
    not_after: OffsetDateTime,
}

/// `pki verify --json` (docs/verify.schema.json).
#[derive(serde::Serialize)]
struct VerifyReport {
    schema_version: u32,
    verified: bool,
    purpose: &'static str,
    name: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    at: OffsetDateTime,
    /// The path found, leaf first, anchor last (empty when not verified).
    path: Vec<PathEntry>,
    /// Why no path verified (null when verified).
    error: Option<String>,
}

fn at_file(path: &Path, e: pki_core::Error) -> CliError {
    CliError::new(format!("{}: {e}", path.display()))
}

pub fn run(args: &VerifyArgs<'_>) -> CliResult {
    let bundle = Bundle::from_pem(&read_capped(args.bundle, args.max_input_size)?)
        .map_err(|e| at_file(args.bundle, e))?;
    let chain = Certificate::all_from_pem(&read_capped(args.chain, args.max_input_size)?)
        .map_err(|e| at_file(args.chain, e))?;
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Err(CliError::new(format!(
            "{}: no certificate (expected the leaf first, then intermediates)",
            args.chain.display()
        )));
    };
    let mut opts = VerifyOptions::new(args.at, args.purpose);
    opts.name = match (&args.dns, args.ip) {
        (Some(d), _) => Some(ExpectedName::Dns(d.clone())),
        (None, Some(ip)) => Some(ExpectedName::Ip(ip)),
        (None, None) => None,
    };
    let result = verify_chain(leaf, intermediates, &bundle, &opts);
    let path: Vec<PathEntry> = match &result {
        Ok(path) => path_entries(&path.certs),
        Err(_) => Vec::new(),
    };
    if args.json {
        let report = VerifyReport {
            schema_version: pki_rotate::status::SCHEMA_VERSION,
            verified: result.is_ok(),
            purpose: match args.purpose {
                Purpose::ServerAuth => "server",
                Purpose::ClientAuth => "client",
            },
            name: opts.name.as_ref().map(ToString::to_string),
            at: args.at,
            path,
            error: result.as_ref().err().map(ToString::to_string),
        };
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| CliError::new(e.to_string()))?;
        crate::outln!("{text}");
        // Not verified is still exit 1, with the reason on stderr too.
        return result
            .map(drop)
            .map_err(|e| CliError::new(format!("not verified: {e}")));
    }
    result.map_err(|e| CliError::new(format!("not verified: {e}")))?;
    print_path(args, opts.name.as_ref(), &path);
    Ok(())
}

/// The certificates of a verified path, leaf first, with their roles.
fn path_entries(certs: &[Certificate]) -> Vec<PathEntry> {
    let last = certs.len().saturating_sub(1);
    certs
        .iter()
        .enumerate()
        .map(|(i, c)| PathEntry {
            role: if i == 0 {
                "leaf"
            } else if i == last {
                "anchor"
            } else {
                "intermediate"
            },
            id: c.id(),
            subject: c.subject().to_string(),
            issuer: c.issuer().to_string(),
            not_after: c.not_after(),
        })
        .collect()
}

/// The text report of a verified path.
fn print_path(args: &VerifyArgs<'_>, name: Option<&ExpectedName>, path: &[PathEntry]) {
    crate::outln!(
        "verified for {}{} at {}:",
        args.purpose,
        name.map(|n| format!(" {n}")).unwrap_or_default(),
        pki_core::datetime::rfc3339(args.at)
    );
    if path.len() == 1 {
        crate::outln!(
            "  (the chain's CA certificate is itself in the bundle: trusted as an anchor, as Go's crypto/x509 and OpenSSL do)"
        );
    }
    for (i, p) in path.iter().enumerate() {
        crate::outln!(
            "  {i}  {:<12} {}  {}  (issuer {}, until {})",
            p.role,
            p.id,
            p.subject,
            p.issuer,
            pki_core::datetime::rfc3339(p.not_after)
        );
    }
}
