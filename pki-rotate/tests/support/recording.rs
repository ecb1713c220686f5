//! A store that records what is read and written through it: how many
//! whole documents, which paths, which changes.

#![allow(dead_code)]

use pki_rotate::store::Changes;
use pki_rotate::{Files, Revision, Store, Summary};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;

pub struct Recording<S> {
    pub inner: S,
    /// Whole documents read (`get`).
    pub whole_reads: Cell<u32>,
    /// The paths of each `get_paths`.
    pub paths_read: RefCell<Vec<BTreeSet<String>>>,
    /// The changes of each `put_changes`.
    pub changes: RefCell<Vec<Changes>>,
}

impl<S: Store> Recording<S> {
    pub fn new(inner: S) -> Self {
        Recording {
            inner,
            whole_reads: Cell::new(0),
            paths_read: RefCell::new(Vec::new()),
            changes: RefCell::new(Vec::new()),
        }
    }
}

impl<S: Store> Store for Recording<S> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn get(&self, key: &str) -> pki_rotate::Result<Option<(Files, Revision)>> {
        self.whole_reads.set(self.whole_reads.get() + 1);
        self.inner.get(key)
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> pki_rotate::Result<Revision> {
        self.inner.put(key, expected, files)
    }
    fn get_summary(&self, key: &str) -> pki_rotate::Result<Option<(Summary, Revision)>> {
        self.inner.get_summary(key)
    }
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> pki_rotate::Result<Revision> {
        self.inner.put_with_summary(key, expected, files, summary)
    }
    fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> pki_rotate::Result<Option<(Files, Revision)>> {
        self.paths_read.borrow_mut().push(paths.clone());
        self.inner.get_paths(key, paths)
    }
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> pki_rotate::Result<Revision> {
        self.changes.borrow_mut().push(changes.clone());
        self.inner.put_changes(key, expected, changes, summary)
    }
}
