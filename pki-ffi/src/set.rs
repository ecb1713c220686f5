//! A CA set rotated in gated steps (GEP-18, StarlingX) in a store: create,
//! step (issue, target, start, ack, fail, retry, advance, abort), and read
//! the status or the per-target plan. Every change is one `Driver::step` of
//! pki-rotate's `SetEngine`: a refused step leaves the store unchanged.

use crate::abi::os_rng;
use crate::buffer::pki_buffer;
use crate::error::Failure;
use crate::step::status_json;
use crate::store::pki_store;
use pki_rotate::request::{SetCreate, SetStepRequest};
use pki_rotate::request::{StepEvent, StepResult};
use pki_rotate::set::fingerprint;
use pki_rotate::{SetEngine, SetState};
use time::OffsetDateTime;

fn status(doc: &SetState, now: OffsetDateTime) -> String {
    status_json(&doc.status(now))
}

pub(crate) fn create(
    store: &pki_store,
    key: &str,
    input: &SetCreate,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let doc = SetState::new(
        &input.cas()?,
        input.algorithm(),
        input.lifetime(),
        now,
        &mut os_rng(),
    )?;
    store.create::<SetEngine>(key, &doc, now, status)
}

pub(crate) fn step(
    store: &pki_store,
    key: &str,
    input: &SetStepRequest,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let input = input.input(now)?;
    let step = store
        .driver::<SetState>()
        .step::<SetEngine, _>(key, &input, now, &mut os_rng())?;
    Ok(StepResult::of_step(&step, StepEvent::of, |d| {
        status(d, now)
    }))
}

/// Which report of a CA set `pki_document_read` writes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_set_output {
    /// The status as JSON, the same as `pki set status --json` (`step`,
    /// per-target `fingerprint` and `progress`, `blocking`, `overrides`,
    /// `timeline`…).
    PKI_SET_STATUS = 0,
    /// The per-target plan as JSON: which files each target should have
    /// now. `{"TARGET": {"fingerprint": "sha256:…", "files": {"trust/CA.crt":
    /// {"contents": "PEM…", "secret": false}, …}}, …}`; private keys are
    /// included (`secret: true`), so keep it private.
    PKI_SET_PLAN = 1,
}

fn plan_json(state: &SetState) -> Result<zeroize::Zeroizing<Vec<u8>>, Failure> {
    let mut plan = serde_json::Map::new();
    for (target, files) in state.target_files()? {
        let fp = fingerprint(files.iter().map(|(p, f)| (p, f.contents.as_slice())));
        let mut entries = serde_json::Map::new();
        for (path, file) in files.iter() {
            entries.insert(
                path.to_string(),
                serde_json::json!({
                    "contents": String::from_utf8_lossy(&file.contents),
                    "secret": file.secret,
                }),
            );
        }
        plan.insert(
            target,
            serde_json::json!({ "fingerprint": fp, "files": entries }),
        );
    }
    Ok(zeroize::Zeroizing::new(
        serde_json::to_vec(&plan).map_err(|e| Failure::invalid(format!("plan: {e}")))?,
    ))
}

pub(crate) fn read(
    store: &pki_store,
    key: &str,
    output: u32,
    now: OffsetDateTime,
) -> Result<pki_buffer, Failure> {
    if output > 1 {
        return Err(Failure::invalid(format!(
            "output {output} is not a pki_set_output (0-1)"
        )));
    }
    let (state, _) = store.driver::<SetState>().load::<SetEngine>(key)?;
    let bytes = match output {
        0 => zeroize::Zeroizing::new(status(&state, now).into_bytes()),
        _ => plan_json(&state)?,
    };
    Ok(pki_buffer::new(&bytes))
}
