//! `pki issue`: add or change a serving (or client) certificate.

use crate::common::{CliResult, print_events, reconcile_store};
use pki_rotate::{LeafKind, LeafRequest};
use std::net::IpAddr;
use std::path::Path;
use time::{Duration, OffsetDateTime};

pub struct IssueArgs<'a> {
    pub dir: &'a Path,
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
            .unwrap_or(pki_rotate::signer::DEFAULT_LEAF_LIFETIME),
    };
    let name = args.name;
    let (state, events) = reconcile_store(args.dir, args.now, None, |state| {
        state.request_leaf(name, request)?;
        Ok(())
    })?;
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
            args.dir
                .join(pki_rotate::state::leaf_cert_path(name))
                .display(),
            state.serving_chain(&issued.cert).len(),
            args.dir
                .join(pki_rotate::state::leaf_key_path(name))
                .display()
        );
    }
    Ok(())
}
