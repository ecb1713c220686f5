//! The one result of every engine's create and step: pki-rotate's
//! [`StepResult`], written for C as one versioned JSON document in a
//! `pki_buffer`.
//!
//! Every create and step runs pki-rotate's driver (load, decide, write by
//! compare-and-swap, retry from a fresh read on a lost race) and says what
//! it did in the same shape: whether it wrote, the events, when to step
//! again, the document's revision, how many rounds it took, the status of
//! the document now in the store, and after a credential advance the
//! embedder's next action.

use crate::buffer::pki_buffer;
use crate::error::Failure;
use pki_rotate::request::StepResult;

/// The most steps one credential advance commits before it fails with
/// `PKI_RESULT_UNEXPECTED` (a store that does not keep its writes): a
/// rotation has at most two bookkeeping steps in a row. The CLI's
/// reconcile has the same bound: both run `pki_rotate::driver::advance`.
pub const PKI_CRED_ADVANCE_MAX_STEPS: u32 = 8;

// cbindgen needs the literal; the bound is the engine's.
const _: () = assert!(PKI_CRED_ADVANCE_MAX_STEPS == pki_rotate::driver::ADVANCE_MAX_STEPS);

/// A status as JSON text; what cannot be reported is an empty string.
pub(crate) fn status_json<S: serde::Serialize>(status: &S) -> String {
    serde_json::to_string(status).unwrap_or_default()
}

/// A step result as the buffer C receives: its JSON document.
pub(crate) fn step_buffer(result: &StepResult) -> Result<pki_buffer, Failure> {
    let json = serde_json::to_vec(result).map_err(|e| {
        Failure::new(
            crate::error::pki_result::PKI_RESULT_UNEXPECTED,
            format!("the step result cannot be written as JSON: {e}"),
        )
    })?;
    Ok(pki_buffer::new(&json))
}

/// The step result in a buffer a create or a step wrote (NULL: none), the
/// buffer freed.
#[cfg(test)]
pub(crate) fn take_result(buffer: *mut pki_buffer) -> Option<StepResult> {
    if buffer.is_null() {
        return None;
    }
    // SAFETY: a live buffer the library wrote, read, then freed once here.
    unsafe {
        let data = crate::buffer::pki_buffer_data(buffer);
        let bytes = std::slice::from_raw_parts(data.data, data.len);
        let result = serde_json::from_slice(bytes).expect("a step result");
        crate::buffer::pki_buffer_free(buffer);
        Some(result)
    }
}
