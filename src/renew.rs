//! `pki renew`: a new key and certificate for one certificate, now.

use crate::common::{CliResult, StoreArg, print_events, step_signer, when};
use pki_rotate::signer::document::leaf_cert_path;
use pki_rotate::{LeafChange, SignerInput};
use time::OffsetDateTime;

pub fn run(dir: &StoreArg, name: &str, now: OffsetDateTime) -> CliResult {
    let input = SignerInput {
        leaves: vec![LeafChange::Renew {
            name: name.to_string(),
        }],
        ..SignerInput::default()
    };
    let step = step_signer(dir, &input, now)?;
    print_events(&step.events);
    if let Some(issued) = step
        .document
        .leaves
        .get(name)
        .and_then(|l| l.issued.as_ref())
    {
        crate::outln!(
            "  {}  valid until {}",
            dir.published(&leaf_cert_path(name)),
            when(issued.cert.not_after(), now)
        );
    }
    Ok(())
}
