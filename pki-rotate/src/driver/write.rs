//! What a write ended in, and how a step names the document it writes.

use super::{Read, Step};
use crate::model::error::Result;
use crate::model::store::Revision;
use time::OffsetDateTime;

/// What a write ended in: the step done (its round `attempt`, decided
/// from `read`), or another round.
pub(super) fn written<D, E>(
    written: Result<Revision>,
    next: D,
    events: Vec<E>,
    next_wake: OffsetDateTime,
    attempt: u32,
    read: Read,
) -> Result<Option<Step<D, E>>> {
    match written {
        Ok(revision) => Ok(Some(Step {
            document: next,
            revision,
            events,
            changed: true,
            next_wake,
            attempts: attempt,
            read,
            advance: None,
        })),
        Err(e) if e.is_conflict() => Ok(None),
        // A write that may have landed is reported, not retried. Retrying
        // would be safe (a request the document already records is "nothing
        // to do"), but it would hide what happened: a retry that finds the
        // write landed returns `changed: false` without this step's events,
        // so the caller would never learn that this call rotated a CA. A
        // lost answer also means the backend is slow or unreachable, where
        // a retry only waits again. The caller steps again (the CLI exits 5
        // saying rerunning is safe).
        Err(e) => Err(e),
    }
}

/// The document at `key` of the store at `location`, for messages: the
/// store alone for the signer's document (the one a store held before it
/// held several, and still the one most stores hold).
pub(super) fn describe(location: &str, key: &str) -> String {
    if key == crate::engines::signer::STORE_KEY {
        location.to_string()
    } else {
        format!("{location} (document \"{key}\")")
    }
}
