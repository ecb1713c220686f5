//! [`MemoryStore`]: documents in memory, for tests and for programs that
//! keep them somewhere pki does not know.

use crate::model::document::Files;
use crate::model::error::{Result, RotateError};
use crate::model::store::{Revision, Store, Summary, validate_key};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Called by [`MemoryStore`] before each `put`, with the key; tests use it
/// to slip in a concurrent writer between a read and a write.
pub type PutHook = Box<dyn Fn(&MemoryStore, &str) + Send + Sync>;

/// A store in memory, for tests and for programs that keep documents
/// somewhere pki does not know (they copy them in and out).
///
/// Revisions count every successful write of the whole store, like etcd's.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryInner>,
    before_put: Mutex<Option<std::sync::Arc<PutHook>>>,
}

#[derive(Default)]
struct MemoryInner {
    revision: u64,
    documents: BTreeMap<String, (Files, u64)>,
    summaries: BTreeMap<String, Summary>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<String> = self.lock().documents.keys().cloned().collect();
        f.debug_struct("MemoryStore").field("keys", &keys).finish()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        // A panic elsewhere while holding the lock cannot leave a half
        // write: every write replaces one map entry.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Installs a hook called before each `put` (outside the store's lock).
    pub fn set_before_put(&self, hook: Option<PutHook>) {
        *self.before_put.lock().unwrap_or_else(|p| p.into_inner()) = hook.map(std::sync::Arc::new);
    }

    /// The keys that hold a document.
    pub fn keys(&self) -> Vec<String> {
        self.lock().documents.keys().cloned().collect()
    }
}

impl Store for MemoryStore {
    fn keys(&self) -> Result<Vec<String>> {
        Ok(MemoryStore::keys(self))
    }

    fn location(&self) -> String {
        "memory store".to_string()
    }

    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        validate_key(key)?;
        Ok(self
            .lock()
            .documents
            .get(key)
            .map(|(files, rev)| (files.clone(), Revision::new(rev.to_string()))))
    }

    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.put_with_summary(key, expected, files, None)
    }

    fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        validate_key(key)?;
        let inner = self.lock();
        Ok(inner.documents.get(key).and_then(|(_, rev)| {
            let summary = inner.summaries.get(key)?;
            Some((summary.clone(), Revision::new(rev.to_string())))
        }))
    }

    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        validate_key(key)?;
        let hook = self
            .before_put
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(self, key);
        }
        let mut inner = self.lock();
        let found = inner
            .documents
            .get(key)
            .map(|(_, rev)| Revision::new(rev.to_string()));
        if found.as_ref() != expected {
            return Err(RotateError::Store(crate::StoreError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found,
            }));
        }
        inner.revision += 1;
        let revision = inner.revision;
        inner
            .documents
            .insert(key.to_string(), (files.clone(), revision));
        match summary {
            Some(summary) => inner.summaries.insert(key.to_string(), summary.clone()),
            None => inner.summaries.remove(key),
        };
        Ok(Revision::new(revision.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::document::File;

    fn files(text: &str) -> Files {
        let mut f = Files::new();
        f.insert("doc.json", File::public(text.as_bytes().to_vec()))
            .unwrap();
        f
    }

    #[test]
    fn memory_store_creates_once_and_refuses_stale_revisions() {
        let store = MemoryStore::new();
        assert!(store.get("signer").unwrap().is_none());
        let r1 = store.put("signer", None, &files("a")).unwrap();
        let err = store.put("signer", None, &files("b")).unwrap_err();
        assert!(err.is_conflict(), "{err}");
        let r2 = store.put("signer", Some(&r1), &files("b")).unwrap();
        assert_ne!(r1, r2);
        let err = store.put("signer", Some(&r1), &files("c")).unwrap_err();
        match err {
            RotateError::Store(crate::StoreError::Conflict {
                key,
                expected,
                found,
            }) => {
                assert_eq!(key, "signer");
                assert_eq!(expected, Some(r1));
                assert_eq!(found, Some(r2.clone()));
            }
            other => panic!("{other}"),
        }
        let (got, rev) = store.get("signer").unwrap().unwrap();
        assert_eq!(got, files("b"));
        assert_eq!(rev, r2);
    }

    #[test]
    fn keys_are_checked() {
        for bad in ["", "A", "a//b", ".hidden", "a/.b", "a b", "ü"] {
            assert!(validate_key(bad).is_err(), "{bad:?}");
        }
        for good in ["signer", "creds/db-password", "set.v1"] {
            validate_key(good).unwrap();
        }
    }
}
