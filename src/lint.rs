//! `pki lint FILE...`: what breaks path builders in bundles and chains,
//! found by `pki_core::lint` and printed here.

use crate::common::{CliError, CliResult, DEFAULT_MAX_INPUT, parse_size, parse_time, read_capped};
use pki_core::Certificate;
use pki_core::lint::{Finding, Source};
use std::path::PathBuf;
use time::OffsetDateTime;

/// `pki lint`'s arguments.
#[derive(clap::Args)]
pub struct LintArgs {
    /// PEM files (or one DER certificate each): bundles, whose certificates
    /// are all CAs and all trust anchors, and chains (a leaf first).
    /// Findings name a certificate FILE#N, N counting FILE's certificates
    /// from 1.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print {"schema_version", "findings": [{"code", "severity", "cert",
    /// "id", "detail"}]} (docs/lint.schema.json).
    #[arg(long)]
    json: bool,
    /// The time anchors must be valid at, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    now: OffsetDateTime,
    /// Refuse input files larger than this, like 16M or 1G.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
    max_input_size: u64,
}

/// `pki lint --json` (docs/lint.schema.json).
#[derive(serde::Serialize)]
struct LintReport<'a> {
    schema_version: u32,
    findings: &'a [Finding],
}

/// Exit 1 (after printing every finding) when one is an error.
pub fn run(args: LintArgs) -> CliResult {
    let mut files = Vec::with_capacity(args.files.len());
    for path in &args.files {
        files.push((path.display().to_string(), read(path, args.max_input_size)?));
    }
    let sources: Vec<Source<'_>> = files
        .iter()
        .map(|(name, certs)| Source { name, certs })
        .collect();
    let findings = pki_core::lint::lint(&sources, args.now);
    if args.json {
        let report = LintReport {
            schema_version: pki_rotate::status::SCHEMA_VERSION,
            findings: &findings,
        };
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| CliError::new(e.to_string()))?;
        crate::outln!("{text}");
    } else {
        for f in &findings {
            // A file name may hold a newline: one line per finding.
            crate::outln!("{}", crate::common::one_line(&f.to_string()));
        }
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity == pki_core::lint::Severity::Error)
        .count();
    if errors > 0 {
        return Err(CliError::new(format!(
            "lint: {errors} error(s), {} warning(s)",
            findings.len() - errors
        )));
    }
    Ok(())
}

/// The certificates of one file: PEM, or a single DER certificate.
fn read(path: &std::path::Path, max: u64) -> CliResult<Vec<Certificate>> {
    let bytes = read_capped(path, max)?;
    let at_file = |e: pki_core::Error| CliError::new(format!("{}: {e}", path.display()));
    // A DER certificate starts with a SEQUENCE tag; PEM is text.
    let certs = if bytes.first() == Some(&0x30) {
        vec![Certificate::from_der(&bytes).map_err(at_file)?]
    } else {
        Certificate::all_from_pem(&bytes).map_err(at_file)?
    };
    if certs.is_empty() {
        return Err(CliError::new(format!(
            "{}: no certificate (expected PEM CERTIFICATE blocks or one DER certificate)",
            path.display()
        )));
    }
    Ok(certs)
}
