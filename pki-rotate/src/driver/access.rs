//! The store calls the step loop makes, the same for a blocking store and
//! an async one, so that both drivers run one loop (`super::steps`).
//!
//! A blocking store's calls are made when the loop asks for them and
//! handed back as futures that are already complete, so a blocking step
//! runs the loop to its end in one poll, on the caller's thread, without a
//! runtime.

use crate::model::document::Files;
use crate::model::error::{Result, RotateError};
use crate::model::store::{AsyncStore, Changes, Revision, Store, Summary};
use std::collections::BTreeSet;
use std::future::{Future, ready};
use std::task::{Context, Poll, Waker};

/// A store as the step loop sees it.
pub(super) trait Access {
    fn location(&self) -> String;

    fn get(&self, key: &str) -> impl Future<Output = Result<Option<(Files, Revision)>>> + Send;

    fn get_summary(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<(Summary, Revision)>>> + Send;

    fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> impl Future<Output = Result<Option<(Files, Revision)>>> + Send;

    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> impl Future<Output = Result<Revision>> + Send;

    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> impl Future<Output = Result<Revision>> + Send;

    fn verify(&self, key: &str) -> impl Future<Output = Result<Option<Revision>>> + Send;
}

/// A blocking [`Store`]: each call is made at once.
pub(super) struct Blocking<'s, S>(pub(super) &'s S);

impl<S: Store> Access for Blocking<'_, S> {
    fn location(&self) -> String {
        self.0.location()
    }
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<(Files, Revision)>>> + Send {
        ready(self.0.get(key))
    }
    fn get_summary(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<(Summary, Revision)>>> + Send {
        ready(self.0.get_summary(key))
    }
    fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> impl Future<Output = Result<Option<(Files, Revision)>>> + Send {
        ready(self.0.get_paths(key, paths))
    }
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> impl Future<Output = Result<Revision>> + Send {
        ready(self.0.put_with_summary(key, expected, files, summary))
    }
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> impl Future<Output = Result<Revision>> + Send {
        ready(self.0.put_changes(key, expected, changes, summary))
    }
    fn verify(&self, key: &str) -> impl Future<Output = Result<Option<Revision>>> + Send {
        ready(self.0.verify(key))
    }
}

/// An [`AsyncStore`]: each call is awaited.
pub(super) struct Awaiting<'s, S>(pub(super) &'s S);

impl<S: AsyncStore> Access for Awaiting<'_, S> {
    fn location(&self) -> String {
        self.0.location()
    }
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<(Files, Revision)>>> + Send {
        self.0.get(key)
    }
    fn get_summary(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<(Summary, Revision)>>> + Send {
        self.0.get_summary(key)
    }
    fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> impl Future<Output = Result<Option<(Files, Revision)>>> + Send {
        self.0.get_paths(key, paths)
    }
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> impl Future<Output = Result<Revision>> + Send {
        self.0.put_with_summary(key, expected, files, summary)
    }
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> impl Future<Output = Result<Revision>> + Send {
        self.0.put_changes(key, expected, changes, summary)
    }
    fn verify(&self, key: &str) -> impl Future<Output = Result<Option<Revision>>> + Send {
        self.0.verify(key)
    }
}

/// Runs the loop over a [`Blocking`] store to its end: every future it
/// awaits is already complete, so one poll finishes it.
pub(super) fn finish<S: Store, T>(store: &S, step: impl Future<Output = Result<T>>) -> Result<T> {
    let mut step = std::pin::pin!(step);
    match step.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => result,
        // Not reachable: nothing the loop awaits over a blocking store
        // waits. Said as an error rather than a panic all the same.
        Poll::Pending => Err(RotateError::Store(crate::StoreError::Backend {
            store: store.location(),
            source: "a blocking store's step did not finish at once".into(),
        })),
    }
}
