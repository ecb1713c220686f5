//! The signer's stored document as another engine's document: the
//! external-CA engine's ([`crate::ExternalCaDocument`]) and the uptake
//! engine's ([`crate::UptakeDocument`]).
//!
//! Each engine has a document type of its own, so that what an engine
//! takes and returns says which engine it is for. These two engines work
//! on the signer's stored object itself, on purpose: an import, an ack and
//! a rotation of one signer must be serialised by one commit point (an ack
//! racing a rotation must not record a bundle the rotation just retired,
//! nor be lost to it). So their documents are *views*: the same kind,
//! files, codec and summary as [`SignerState`], under another type. A
//! store holding a signer reads as any of the three, and a step of one
//! writes exactly what a step of the signer would.

use super::SignerState;
use crate::engines::Outcome;
use crate::model::document::{Document, Files, Idle, SecretData};
use crate::model::error::Result;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::marker::PhantomData;

/// The signer's document as the document of engine `E` (see the module
/// docs). `E` only names the engine: a view of one engine is not a view of
/// another.
pub struct SignerView<E> {
    signer: SignerState,
    engine: PhantomData<fn() -> E>,
}

impl<E> SignerView<E> {
    /// The view of `signer`.
    pub fn new(signer: SignerState) -> Self {
        SignerView {
            signer,
            engine: PhantomData,
        }
    }

    /// The signer's document it shows.
    pub fn signer(&self) -> &SignerState {
        &self.signer
    }

    /// The signer's document, owned.
    pub fn into_signer(self) -> SignerState {
        self.signer
    }

    /// An outcome computed over [`SignerView::signer`], as an outcome of
    /// this view: unchanged stays borrowed (from this view), a new signer
    /// document becomes a new view of it.
    pub(crate) fn outcome<'d, Ev>(
        &'d self,
        outcome: Outcome<'_, SignerState, Ev>,
    ) -> Outcome<'d, Self, Ev> {
        Outcome {
            document: match outcome.document {
                Cow::Borrowed(_) => Cow::Borrowed(self),
                Cow::Owned(next) => Cow::Owned(SignerView::new(next)),
            },
            events: outcome.events,
            next_wake: outcome.next_wake,
            findings: outcome.findings,
        }
    }
}

impl<E> Clone for SignerView<E> {
    fn clone(&self) -> Self {
        SignerView::new(self.signer.clone())
    }
}

impl<E> std::fmt::Debug for SignerView<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SignerView").field(&self.signer).finish()
    }
}

/// Everything is the signer's: one stored form for the three engines.
impl<E> Document for SignerView<E> {
    const KIND: &'static str = SignerState::KIND;
    const VERSION: u32 = SignerState::VERSION;
    const KINDLESS_VERSIONS: &'static [u32] = SignerState::KINDLESS_VERSIONS;

    fn to_files(&self) -> Result<Files> {
        self.signer.to_files()
    }

    fn from_files(files: &Files) -> Result<Self> {
        SignerState::from_files(files).map(SignerView::new)
    }

    fn files_to_secret_data(files: &Files) -> Result<SecretData> {
        SignerState::files_to_secret_data(files)
    }

    fn files_from_secret_data(data: &SecretData) -> Result<Files> {
        SignerState::files_from_secret_data(data)
    }

    fn files_from_secret_data_at(key: &str, data: &SecretData) -> Result<Files> {
        SignerState::files_from_secret_data_at(key, data)
    }

    fn published_secret(path: &str) -> bool {
        SignerState::published_secret(path)
    }

    fn state_file(near: Option<&str>) -> Option<String> {
        SignerState::state_file(near)
    }

    fn sealed_witness_paths(read: Option<&Files>) -> BTreeSet<String> {
        SignerState::sealed_witness_paths(read)
    }

    fn problems(&self) -> Vec<String> {
        self.signer.problems()
    }

    fn idle(&self, now: time::OffsetDateTime) -> Option<Idle> {
        self.signer.idle(now)
    }

    fn idle_after_step(
        &self,
        now: time::OffsetDateTime,
        next_wake: time::OffsetDateTime,
    ) -> Option<Idle> {
        self.signer.idle_after_step(now, next_wake)
    }

    fn part_paths(names: &BTreeSet<String>) -> Option<BTreeSet<String>> {
        SignerState::part_paths(names)
    }

    fn from_part(files: &Files, names: &BTreeSet<String>) -> Result<Self> {
        SignerState::from_part(files, names).map(SignerView::new)
    }

    fn attach_tokens(&mut self, access: &std::sync::Arc<dyn pki_core::TokenAccess>) {
        self.signer.attach_tokens(access);
    }

    fn follow_up(&self) -> crate::FollowUp {
        self.signer.follow_up()
    }

    fn simulate_tokens(&mut self) {
        self.signer.simulate_tokens();
    }
}
