//! `pki rotate`: rotate the CA if due or forced; re-issue stale leaves.

use crate::common::{CliResult, StoreArg, print_events, step_signer, when};
use pki_rotate::{ForcedRotation, SignerInput};
use time::OffsetDateTime;

pub fn run(dir: &StoreArg, forced: Option<&ForcedRotation>, now: OffsetDateTime) -> CliResult {
    let input = SignerInput {
        forced: forced.cloned(),
        ..SignerInput::default()
    };
    let step = step_signer(dir, &input, now)?;
    if step.events.is_empty() {
        println!("nothing to do");
    }
    print_events(&step.events);
    let state = &step.document;
    println!(
        "next rotation   {}",
        when(state.rotation_due_at(&state.policy), now)
    );
    Ok(())
}

/// `--to FILE`: validate the supplied CA, then rotate to it.
pub fn run_to(
    dir: &StoreArg,
    files: &crate::external::CaFiles,
    service_account_keys: Option<&std::path::Path>,
    force: Option<String>,
    now: OffsetDateTime,
) -> CliResult {
    crate::external::rotate_to(dir, files, service_account_keys, force, now)
}

/// `--renew-same-key`: a new CA certificate on the same key.
pub fn run_renew_same_key(dir: &StoreArg, now: OffsetDateTime) -> CliResult {
    crate::external::renew(dir, now)
}
