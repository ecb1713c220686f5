//! [`pki_rotate::AsyncStore::verify`] on etcd: every file of a document
//! found to be the one committed, in three small reads whatever its size.
//!
//! A value in etcd changes only through etcd's API, and every change gets a
//! new revision. The entries and blobs of a document are written before its
//! head or with it, never after, so none that existed when the head was
//! committed may have a later modification: one that has was changed by
//! hand. The head also says how many entries its generation holds. So at
//! one revision:
//!
//! 1. the entries of the head's generation are as many as it says;
//! 2. no entry and no blob that existed at the head's revision was changed
//!    after it (etcd filters the keys; nothing but their names comes back).
//!
//! What this does not see, a blob deleted by hand, the next whole read
//! refuses. When either check fails, the whole document is read, which
//! names what is wrong (or finds the document whole after all: a writer
//! committed meanwhile).

use super::client::AsyncEtcdStore;
use crate::client::GetOptions;
use crate::layout::{AnyHead, DocKeys, decode_head};
use pki_rotate::store::validate_key;
use pki_rotate::{AsyncStore, Result, Revision};

impl AsyncEtcdStore {
    /// [`pki_rotate::AsyncStore::verify`].
    pub(super) async fn verify_document(&self, key: &str) -> Result<Option<Revision>> {
        validate_key(key)?;
        let keys = DocKeys::new(self.url.prefix(), key);
        let doing = format!("checking document \"{key}\"");
        let (at, head) = self.read_head(&keys, &doing).await?;
        let Some(head) = head else {
            return Ok(None);
        };
        let location = format!("{}: head {}", self.doc_location(key), keys.head);
        let AnyHead::Current(current) = decode_head(&location, head.value())? else {
            return Ok(self.get(key).await?.map(|(_, revision)| revision));
        };
        let committed = head.mod_revision();
        let entries = keys.generation(&current.generation);
        let count = GetOptions::new()
            .with_prefix()
            .with_count_only()
            .with_revision(at);
        let changed = || {
            GetOptions::new()
                .with_prefix()
                .with_keys_only()
                .with_revision(at)
                .changed_after(committed)
        };
        let mut kv = self.kv.clone();
        let answers = self
            .run(async move {
                let listed = kv.get(entries.clone(), Some(count)).await?;
                let entries_changed = kv.get(entries, Some(changed())).await?;
                let blobs_changed = kv.get(keys.blobs, Some(changed())).await?;
                Ok::<_, crate::client::Error>((listed, entries_changed, blobs_changed))
            })
            .await
            .map_err(|f| self.backend(&doing, f))?;
        let (listed, entries_changed, blobs_changed) = answers;
        let intact = u64::try_from(listed.count()).ok() == Some(current.files)
            && entries_changed.kvs().is_empty()
            && blobs_changed.kvs().is_empty();
        if intact {
            return Ok(Some(Revision::new(committed.to_string())));
        }
        Ok(self.get(key).await?.map(|(_, revision)| revision))
    }
}
