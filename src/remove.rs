//! `pki remove`: stop keeping a certificate; its files and key leave the store.

use crate::common::{CliResult, StoreArg, print_events, step_signer};
use pki_rotate::{LeafChange, SignerInput};
use time::OffsetDateTime;

pub fn run(dir: &StoreArg, name: &str, now: OffsetDateTime) -> CliResult {
    let input = SignerInput {
        leaves: vec![LeafChange::Remove {
            name: name.to_string(),
        }],
        ..SignerInput::default()
    };
    let step = step_signer(dir, &input, now)?;
    print_events(&step.events);
    Ok(())
}
