//! Publishing a write of changes by the leaves it touched, when the
//! publication before it completed: a cost that does not grow with the
//! document.

use super::{BUNDLE_KEY, BUNDLE_PATH, Digests, Job, Last, Plan, sequence_of};
use crate::layout::DocumentNames;
use crate::store::AsyncKubeStore;
use pki_rotate::store::Changes;
use pki_rotate::{Files, Publication, Revision, published_leaf_file};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl AsyncKubeStore {
    /// Publishes a write of changes to the document at `key`, committed at
    /// `sequence` and `revision`: `buckets` are the buckets it read and
    /// changed, which hold every file of each leaf the changes touched.
    /// When the publication it replaces completed (the ConfigMap at the
    /// sequence before) and the bundle did not change, only those leaves
    /// are written or deleted, then the ConfigMap: a cost that does not
    /// grow with the document. Otherwise (a publication left behind, a
    /// new bundle, an older or newer publisher in the way) the whole
    /// document is read again and published. Never fails, as
    /// [`AsyncKubeStore::publish`].
    pub(in crate::store) async fn publish_changes(
        &self,
        key: &str,
        names: &DocumentNames,
        committed: (u64, &Revision),
        replaced: &Revision,
        changes: &Changes,
        buckets: &BTreeMap<usize, Files>,
    ) {
        let paths = changes
            .written()
            .map(|(path, _)| path)
            .chain(changes.removed());
        let mut touched = BTreeSet::new();
        let mut bundle_changed = false;
        for path in paths {
            bundle_changed |= path == BUNDLE_PATH;
            if let Some((leaf, _)) = published_leaf_file(path) {
                touched.insert(leaf.to_string());
            }
        }
        let done = !bundle_changed
            && self
                .publish_leaves(key, names, (committed, replaced), &touched, buckets)
                .await;
        if !done {
            // The whole document, read again: its publication lags now,
            // and the read publishes it.
            if let Err(e) = self.read(key).await {
                self.notice(format!(
                    "warning: {}: \"{key}\" is committed (sequence {}) but not published: reading it back failed: {e}; the next read or write of it publishes it",
                    self.url, committed.0
                ));
            }
        }
    }

    /// [`AsyncKubeStore::publish_changes`] by leaves: false when it cannot
    /// be done that way (nothing is left half done: the ConfigMap, written
    /// last, still names the sequence before).
    async fn publish_leaves(
        &self,
        key: &str,
        names: &DocumentNames,
        (committed, replaced): ((u64, &Revision), &Revision),
        touched: &BTreeSet<String>,
        buckets: &BTreeMap<usize, Files>,
    ) -> bool {
        let (sequence, revision) = committed;
        let Ok(Some(map)) = self.get_bundle(names).await else {
            return false;
        };
        let previous = sequence_of(&map.metadata);
        if !self.owned(&map.metadata, names) || previous.saturating_add(1) != sequence {
            return false;
        }
        // The bundle did not change: the ConfigMap holds it.
        let Some(bundle) = map.data.as_ref().and_then(|d| d.get(BUNDLE_KEY)) else {
            return false;
        };
        let mut files = Files::new();
        let bundle_file = pki_rotate::File::public(bundle.as_bytes().to_vec());
        if files.insert(BUNDLE_PATH, bundle_file).is_err() {
            return false;
        }
        for bucket in buckets.values() {
            for (path, file) in bucket.iter() {
                let of_touched =
                    published_leaf_file(path).is_some_and(|(l, _)| touched.contains(l));
                if of_touched && files.insert(path, file.clone()).is_err() {
                    return false;
                }
            }
        }
        let publication = Publication::of(&files);
        let digests = Digests::of(publication.as_ref());
        let plan = Plan {
            write: touched
                .iter()
                .filter(|l| digests.leaves.contains_key(*l))
                .cloned()
                .collect(),
            delete: touched
                .iter()
                .filter(|l| !digests.leaves.contains_key(*l))
                .map(|l| names.leaf(l))
                .collect(),
        };
        let mut job = Job::new((key, names), sequence, publication, &digests);
        let version = map.metadata.resource_version.clone();
        if self.apply(&mut job, &plan).await.is_err() || !job.foreign.is_empty() {
            return false;
        }
        match self.put_bundle(&job, version.as_deref()).await {
            Ok(Last::Done) => {
                self.remember_changes(key, (replaced, revision), &digests, touched);
                true
            }
            Ok(Last::Superseded) => {
                self.undo_created(&mut job).await;
                true
            }
            Ok(Last::Changed(_)) | Err(_) => false,
        }
    }

    /// What the document at `key` publishes at `revision`, from what it
    /// published at `replaced` (when this store remembers it) with the
    /// leaves `touched` as `changed` has them.
    fn remember_changes(
        &self,
        key: &str,
        (replaced, revision): (&Revision, &Revision),
        changed: &Digests,
        touched: &BTreeSet<String>,
    ) {
        let Some(before) = self.seen(key, replaced) else {
            return;
        };
        let mut digests = (*before).clone();
        for leaf in touched {
            match changed.leaves.get(leaf) {
                Some(digest) => digests.leaves.insert(leaf.clone(), digest.clone()),
                None => digests.leaves.remove(leaf),
            };
        }
        self.remember(key, revision, Arc::new(digests));
    }
}
