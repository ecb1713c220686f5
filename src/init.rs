//! `pki init`: create a store with a new self-signed CA.

use crate::common::{CliError, CliResult, os_rng, when};
use pki_core::{KeyAlgorithm, RotationPolicy};
use pki_rotate::{FsStore, SignerPolicy, SignerState};
use std::path::Path;
use time::{Duration, OffsetDateTime};

pub struct InitArgs<'a> {
    pub dir: &'a Path,
    pub common_name: &'a str,
    pub key: KeyAlgorithm,
    pub lifetime: Duration,
    pub min_trust: Duration,
    pub now: OffsetDateTime,
}

pub fn run(args: &InitArgs<'_>) -> CliResult<SignerState> {
    let policy = SignerPolicy {
        rotation: RotationPolicy {
            lifetime: args.lifetime,
            min_trust: args.min_trust,
            reload_interval: None,
        },
        key_algorithm: args.key,
        ..SignerPolicy::default()
    };
    policy.validate()?;
    if args.dir.join(".data").exists() {
        return Err(CliError::new(format!(
            "a pki store already exists at {}",
            args.dir.display()
        )));
    }
    let state = SignerState::new(args.common_name, policy, args.now, &mut os_rng())?;
    FsStore::create(args.dir, &state)?;
    let ca = &state.ca.cert;
    println!(
        "created CA {} ({}, {}) in {}",
        ca.id(),
        ca.subject(),
        args.key,
        args.dir.display()
    );
    println!("  valid until     {}", when(ca.not_after(), args.now));
    println!(
        "  rotates at      {}",
        when(state.rotation_due_at(&policy), args.now)
    );
    println!(
        "  clients trust   {}",
        args.dir.join("ca-bundle.crt").display()
    );
    Ok(state)
}
