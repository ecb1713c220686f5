//! `pki verify`: validate a chain against a bundle, RFC 5280 style.

use crate::common::{CliError, CliResult};
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
}

fn read(path: &Path) -> CliResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))
}

fn at_file(path: &Path, e: pki_core::Error) -> CliError {
    CliError::new(format!("{}: {e}", path.display()))
}

pub fn run(args: &VerifyArgs<'_>) -> CliResult {
    let bundle = Bundle::from_pem(&read(args.bundle)?).map_err(|e| at_file(args.bundle, e))?;
    let chain =
        Certificate::all_from_pem(&read(args.chain)?).map_err(|e| at_file(args.chain, e))?;
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
    let path = verify_chain(leaf, intermediates, &bundle, &opts)
        .map_err(|e| CliError::new(format!("not verified: {e}")))?;
    println!(
        "verified for {}{} at {}:",
        args.purpose,
        opts.name.map(|n| format!(" {n}")).unwrap_or_default(),
        pki_core::datetime::rfc3339(args.at)
    );
    let last = path.certs.len().saturating_sub(1);
    for (i, c) in path.certs.iter().enumerate() {
        let role = if i == 0 {
            "leaf"
        } else if i == last {
            "anchor"
        } else {
            "intermediate"
        };
        println!(
            "  {i}  {role:<12} {}  {}  (issuer {}, until {})",
            c.id(),
            c.subject(),
            c.issuer(),
            pki_core::datetime::rfc3339(c.not_after())
        );
    }
    Ok(())
}
