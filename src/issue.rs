//! `pki issue`: add or change a serving (or client) certificate.
//!
//! Adding names or changing the lifetime is a plain request; changing the
//! kind (server, client) or dropping names breaks whoever relies on them and
//! needs `--replace`.

use crate::common::{CliError, CliResult, StoreArg, print_events, step_signer};
use pki_rotate::signer::document::{leaf_cert_path, leaf_key_path};
use pki_rotate::status::CertSummary;
use pki_rotate::{Event, LeafChange, LeafKind, LeafRequest, SignerInput};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

pub struct IssueArgs<'a> {
    pub dir: &'a StoreArg,
    pub name: &'a str,
    pub dns: Vec<String>,
    pub ip: Vec<IpAddr>,
    pub client: bool,
    pub lifetime: Option<Duration>,
    pub replace: bool,
    pub json: bool,
    pub now: OffsetDateTime,
}

/// `pki issue --json` (docs/issue.schema.json).
#[derive(serde::Serialize)]
struct IssueReport<'a> {
    schema_version: u32,
    name: &'a str,
    /// Whether this command issued a new certificate for the name.
    issued: bool,
    /// Whether the store changed at all.
    changed: bool,
    events: &'a [Event],
    kind: LeafKind,
    names: Vec<String>,
    cert: Option<CertSummary>,
    issuer_ca_id: Option<String>,
    chain_len: usize,
    cert_path: String,
    key_path: String,
}

pub fn run(args: IssueArgs<'_>) -> CliResult {
    let request = LeafRequest {
        kind: if args.client {
            LeafKind::Client
        } else {
            LeafKind::Server
        },
        dns_names: args.dns,
        ip_addresses: args.ip,
        lifetime: args.lifetime.unwrap_or(pki_rotate::DEFAULT_LEAF_LIFETIME),
    };
    let name = args.name;
    let change = if args.replace {
        LeafChange::Replace {
            name: name.to_string(),
            request,
        }
    } else {
        LeafChange::Request {
            name: name.to_string(),
            request,
        }
    };
    let input = SignerInput {
        leaves: vec![change],
        ..SignerInput::default()
    };
    let step = step_signer(args.dir, &input, args.now)?;
    let (state, events) = (&step.document, &step.events);
    let issued_now = events
        .iter()
        .any(|e| matches!(e, Event::LeafReissued { name: n, .. } if n == name));
    let leaf = state.leaves.get(name);
    let cert = leaf.and_then(|l| l.issued.as_ref()).map(|i| &i.cert);
    if args.json {
        let report = IssueReport {
            schema_version: pki_rotate::status::SCHEMA_VERSION,
            name,
            issued: issued_now,
            changed: step.changed,
            events,
            kind: leaf.map(|l| l.request.kind).unwrap_or(LeafKind::Server),
            names: leaf.map(|l| l.request.names()).unwrap_or_default(),
            cert: cert.map(|c| CertSummary::of(c, args.now)),
            issuer_ca_id: cert
                .filter(|c| pki_core::issued_by(c, &state.ca.cert).issued_by)
                .map(|_| state.ca.cert.id()),
            chain_len: cert.map(|c| state.serving_chain(c).len()).unwrap_or(0),
            cert_path: args.dir.published(&leaf_cert_path(name)),
            key_path: args.dir.published(&leaf_key_path(name)),
        };
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| CliError::new(e.to_string()))?;
        crate::outln!("{text}");
        return Ok(());
    }
    print_events(events);
    if !issued_now && step.changed {
        crate::outln!("{name}: request updated; the certificate takes it at its next renewal");
    } else if !issued_now {
        crate::outln!("{name}: already issued with these names; nothing to do");
    }
    if let Some(cert) = cert {
        crate::outln!(
            "  {}  (chain of {}, key {})",
            args.dir.published(&leaf_cert_path(name)),
            state.serving_chain(cert).len(),
            args.dir.published(&leaf_key_path(name))
        );
    }
    Ok(())
}
