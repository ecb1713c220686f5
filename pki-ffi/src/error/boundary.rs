//! The panic boundary every ABI function body runs in.

use super::Failure;
use super::last_error::{clear_last_error, set_last_error};
use super::pki_result::{self, *};
use std::panic::{AssertUnwindSafe, catch_unwind};

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown payload".to_string());
    format!("internal error: a panic was caught at the C ABI boundary: {detail}")
}

/// Runs the body of a fallible ABI function: clears the last error, catches
/// panics, and turns a failure into its code and last-error message.
pub(crate) fn boundary(body: impl FnOnce() -> Result<(), Failure>) -> pki_result {
    clear_last_error();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            // A store callback may have called failing `pki_` functions
            // during the body: their messages are not this call's.
            clear_last_error();
            PKI_RESULT_OK
        }
        Ok(Err(failure)) => {
            set_last_error(failure.message);
            failure.code
        }
        Err(payload) => {
            set_last_error(panic_message(payload.as_ref()));
            PKI_RESULT_PANIC
        }
    }
}

/// Runs the body of an infallible ABI function (getters, free): catches
/// panics and returns `fallback` if one happens. Leaves the last error alone.
pub(crate) fn boundary_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}
