//! Steps with nothing to do, decided from the store's summary once the
//! document's head confirms it.
//!
//! A summary is a promise the last write made: until some time, a step
//! that asks nothing changes nothing. It lives beside the document, so it
//! can be damaged, stale or another store's without the document's own
//! checks noticing. Before it is believed:
//!
//! 1. the document's head ([`Document::part_paths`] of no member: the
//!    signer's state file, CA and bundle) is read at the summary's
//!    revision, each file checked as any read checks it (a damaged file is
//!    refused, a sealed one is opened, so a wrong store key is refused too);
//! 2. the head is decoded and its consistency checked
//!    ([`Document::problems`]), as a whole read does;
//! 3. the head's own promise at the summary's time must report exactly what
//!    the summary reports, and end no earlier: members can only bring the
//!    end of a promise forward.
//!
//! A summary that fails (3), or a head at another revision, is simply not
//! believed: the caller reads the whole document. A head that fails (1) or
//! (2) is refused, as the whole read would refuse it. Its cost does not grow
//! with the number of members.

use super::write::describe;
use super::{Read, Step};
use crate::engines::Engine;
use crate::model::document::{Document, Files, Idle};
use crate::model::error::Result;
use crate::model::store::{Revision, Summary};
use std::collections::BTreeSet;
use time::OffsetDateTime;

/// A summary read from the store, whose promise covers the time asked.
pub(super) struct Promise {
    idle: Idle,
    revision: Revision,
}

/// The promise in `summary` for documents of `E`, when it covers `now`.
pub(super) fn promise<E: Engine>(
    summary: Option<(Summary, Revision)>,
    now: OffsetDateTime,
) -> Option<Promise> {
    let (summary, revision) = summary?;
    let idle = Idle::from_summary(&summary, E::Document::KIND)?;
    idle.covers(now).then_some(Promise { idle, revision })
}

/// The paths of the document's head, for a kind read by parts; None for
/// the others, whose summary cannot be checked without a whole read.
pub(super) fn head_paths<E: Engine>() -> Option<BTreeSet<String>> {
    E::Document::part_paths(&BTreeSet::new())
}

impl Promise {
    /// The idle step the promise gives, once `head` (read at
    /// [`head_paths`]) confirms it; None when it does not (the caller reads
    /// the whole document). A damaged or inconsistent head is an error.
    /// The step's document is the head.
    pub(super) fn confirm<E: Engine>(
        self,
        store_location: &str,
        key: &str,
        head: Option<(Files, Revision)>,
    ) -> Result<Option<Step<E::Document, E::Event>>> {
        let Some((files, revision)) = head else {
            return Ok(None);
        };
        if revision != self.revision {
            return Ok(None);
        }
        let location = describe(store_location, key);
        let doc =
            E::Document::from_part(&files, &BTreeSet::new()).map_err(|e| e.within(&location))?;
        crate::model::document::refuse_problems(&doc, &location)?;
        let Some(own) = doc.idle(self.idle.since) else {
            return Ok(None);
        };
        if own.report != self.idle.report || own.until < self.idle.until {
            return Ok(None);
        }
        let read = Read::Summary {
            report: self.idle.report,
        };
        Ok(Some(Step::unchanged(
            doc,
            revision,
            Vec::new(),
            self.idle.until,
            read,
        )))
    }
}
