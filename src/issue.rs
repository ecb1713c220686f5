//! `pki issue`: add or change a serving (or client) certificate.

use crate::common::{CliResult, StoreArg, print_events, step_signer};
use pki_rotate::signer::document::{leaf_cert_path, leaf_key_path};
use pki_rotate::{LeafKind, LeafRequest, SignerInput};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

pub struct IssueArgs<'a> {
    pub dir: &'a StoreArg,
    pub name: &'a str,
    pub dns: Vec<String>,
    pub ip: Vec<IpAddr>,
    pub client: bool,
    pub lifetime: Option<Duration>,
    pub now: OffsetDateTime,
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
        lifetime: args
            .lifetime
            .unwrap_or(pki_rotate::leaf::DEFAULT_LEAF_LIFETIME),
    };
    let name = args.name;
    let step = step_signer(args.dir, &SignerInput::request(name, request), args.now)?;
    let (state, events) = (step.document, step.events);
    print_events(&events);
    if !events
        .iter()
        .any(|e| matches!(e, pki_rotate::Event::LeafReissued { name: n, .. } if n == name))
    {
        println!("{name}: already issued with these names; nothing to do");
    }
    if let Some(issued) = state.leaves.get(name).and_then(|l| l.issued.as_ref()) {
        println!(
            "  {}  (chain of {}, key {})",
            args.dir.published(&leaf_cert_path(name)),
            state.serving_chain(&issued.cert).len(),
            args.dir.published(&leaf_key_path(name))
        );
    }
    Ok(())
}
