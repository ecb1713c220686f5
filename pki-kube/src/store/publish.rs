//! Publishing a committed document for consumers that use objects as they
//! are: each leaf a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`,
//! `ca.crt`), the bundle a ConfigMap (`ca-bundle.crt`), by the rule on
//! paths of [`pki_rotate::Publication`]. Published after the commit, never
//! read back as the document: a publication that fails or is overtaken
//! leaves the document as committed, and the next read or write of it
//! publishes again.
//!
//! Order: every published object carries the head sequence it was
//! published from, and a publisher replaces or deletes only objects of a
//! lower sequence (with the object's resourceVersion, re-reading on 409),
//! so two publishers finishing in the opposite order of their commits
//! leave the newer publication. The ConfigMap is written last: its
//! sequence says which publication completed. An object of a published
//! name that pki did not make is never touched: a notice names it.

use super::AsyncKubeStore;

mod by_leaves;
use crate::fail::Fail;
use crate::layout::{
    ANNOTATION_DIGEST, ANNOTATION_KEY, ANNOTATION_LEAF, ANNOTATION_SEQUENCE, DocumentNames,
    LABEL_DOCUMENT, LABEL_MANAGED_BY, LABEL_PUBLISHED, LABEL_STORE, MANAGED_BY, PUBLISHED_BUNDLE,
    PUBLISHED_LEAF,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use pki_rotate::{Files, Publication, Revision};
// The bundle's path in a document (the label value of the same name is
// the published ConfigMap's kind).
use pki_rotate::PUBLISHED_BUNDLE as BUNDLE_PATH;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// How often a publisher reads an object again that another changed
/// between its read and its write.
const ATTEMPTS: u32 = 5;

/// How many notices a store keeps until they are taken.
const MAX_NOTICES: usize = 64;

/// The Secret type a Pod mounts as a TLS key pair.
const TLS_TYPE: &str = "kubernetes.io/tls";

/// The bundle's key in its ConfigMap.
const BUNDLE_KEY: &str = "ca-bundle.crt";

/// Called with each notice: a publication that failed (the document is
/// committed; the next read or write publishes it) or an object left alone
/// because pki did not make it.
pub type NoticeHook = Box<dyn Fn(&str) + Send + Sync>;

/// What a store keeps for publishing: the ConfigMaps, the digests of the
/// last document it read or wrote at each key (what the next write of it
/// compares with), and its notices.
pub(super) struct Publishing {
    configmaps: Api<ConfigMap>,
    seen: Mutex<HashMap<String, (Revision, Arc<Digests>)>>,
    notices: Mutex<Vec<String>>,
    hook: Option<NoticeHook>,
}

impl Publishing {
    pub(super) fn new(client: kube::Client, namespace: &str) -> Self {
        Publishing {
            configmaps: Api::namespaced(client, namespace),
            seen: Mutex::new(HashMap::new()),
            notices: Mutex::new(Vec::new()),
            hook: None,
        }
    }
}

/// The digest of each object a document publishes: a publication writes
/// an object only when its digest changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Digests {
    /// The ConfigMap's (also for a document that publishes no bundle: it
    /// records the publication).
    bundle: String,
    /// Each leaf Secret's, by leaf.
    leaves: BTreeMap<String, String>,
}

/// SHA-256 (hex) of `parts`, each prefixed by its length.
fn digest(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hex::encode(hash.finalize())
}

impl Digests {
    fn of(publication: Option<&Publication<'_>>) -> Self {
        let Some(publication) = publication else {
            return Digests {
                bundle: digest(&[]),
                leaves: BTreeMap::new(),
            };
        };
        let leaves = publication
            .leaves
            .iter()
            .map(|(name, leaf)| {
                let parts = [leaf.chain, leaf.key, publication.bundle];
                ((*name).to_string(), digest(&parts))
            })
            .collect();
        Digests {
            bundle: digest(&[publication.bundle]),
            leaves,
        }
    }
}

/// What a publication writes and deletes: leaves by name, objects to
/// delete by object name.
#[derive(Debug, Default)]
struct Plan {
    write: Vec<String>,
    delete: Vec<String>,
}

impl Plan {
    /// From the digests of the document last published (all of whose
    /// objects are in place) to `new`.
    fn between(names: &DocumentNames, old: &Digests, new: &Digests) -> Plan {
        Plan {
            write: new
                .leaves
                .iter()
                .filter(|(leaf, d)| old.leaves.get(*leaf) != Some(*d))
                .map(|(leaf, _)| leaf.clone())
                .collect(),
            delete: old
                .leaves
                .keys()
                .filter(|leaf| !new.leaves.contains_key(*leaf))
                .map(|leaf| names.leaf(leaf))
                .collect(),
        }
    }
}

/// One publication under way.
struct Job<'a> {
    key: &'a str,
    names: &'a DocumentNames,
    sequence: u64,
    publication: Option<Publication<'a>>,
    digests: &'a Digests,
    /// The objects this publication created, with their resourceVersion:
    /// deleted again when a newer publication completed meanwhile.
    created: Vec<(String, String)>,
    /// Objects of published names that pki did not make.
    foreign: Vec<String>,
    written: usize,
}

impl<'a> Job<'a> {
    /// A publication of the document at `key` (named `names`), committed
    /// at `sequence`, of `publication`, whose objects' digests are
    /// `digests`: nothing done yet.
    fn new(
        (key, names): (&'a str, &'a DocumentNames),
        sequence: u64,
        publication: Option<Publication<'a>>,
        digests: &'a Digests,
    ) -> Self {
        Job {
            key,
            names,
            sequence,
            publication,
            digests,
            created: Vec::new(),
            foreign: Vec::new(),
            written: 0,
        }
    }
}

/// How the last step of a publication, the ConfigMap, went.
enum Last {
    Done,
    /// A newer publication completed first.
    Superseded,
    /// An older publication wrote the ConfigMap after this one started:
    /// it may have created a leaf this one deleted. Its resourceVersion.
    Changed(Option<String>),
}

/// The sequence an object was published from (0: none).
fn sequence_of(meta: &ObjectMeta) -> u64 {
    annotation(meta, ANNOTATION_SEQUENCE)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn annotation<'a>(meta: &'a ObjectMeta, name: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(name).map(String::as_str)
}

impl AsyncKubeStore {
    /// Installs (or removes) a hook called with each notice of the store
    /// (a publication that failed, an object of another owner left alone).
    /// Notices are also kept for [`AsyncKubeStore::take_notices`].
    pub fn set_notice_hook(&mut self, hook: Option<NoticeHook>) {
        self.publishing.hook = hook;
    }

    /// The notices since the last call (the latest 64).
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.publishing.notices))
    }

    fn notice(&self, text: String) {
        if let Some(hook) = &self.publishing.hook {
            hook(&text);
        }
        // A long-running embedder that never takes them keeps the latest.
        let mut notices = lock(&self.publishing.notices);
        if notices.len() >= MAX_NOTICES {
            notices.remove(0);
        }
        notices.push(text);
    }

    /// Remembers what the document at `key` publishes at `revision`, for
    /// the next write of it.
    fn remember(&self, key: &str, revision: &Revision, digests: Arc<Digests>) {
        let mut seen = lock(&self.publishing.seen);
        seen.insert(key.to_string(), (revision.clone(), digests));
    }

    fn seen(&self, key: &str, revision: &Revision) -> Option<Arc<Digests>> {
        let seen = lock(&self.publishing.seen);
        seen.get(key)
            .filter(|(r, _)| r == revision)
            .map(|(_, d)| d.clone())
    }

    /// Publishes `files`, the document at `key` just committed at
    /// `sequence` and `revision`, replacing the document at `replaced`.
    /// Never fails: the commit stands, and a failure is a notice (the next
    /// read or write publishes again).
    pub(super) async fn publish(
        &self,
        key: &str,
        names: &DocumentNames,
        committed: (u64, &Revision),
        files: &Files,
        replaced: Option<&Revision>,
    ) {
        let (sequence, revision) = committed;
        let publication = Publication::of(files);
        let digests = Arc::new(Digests::of(publication.as_ref()));
        let previous = replaced.and_then(|r| self.seen(key, r));
        let mut job = Job::new((key, names), sequence, publication, &digests);
        let outcome = self.run(&mut job, previous.as_deref()).await;
        for name in &job.foreign {
            self.notice(format!(
                "warning: {}: {name} exists and was not made by pki (no labels {LABEL_MANAGED_BY}={MANAGED_BY}, {LABEL_STORE}={}): left as it is, so \"{key}\" is not published there",
                self.url,
                self.url.name()
            ));
        }
        if let Err(text) = outcome {
            self.notice(format!(
                "warning: {}: \"{key}\" is committed (sequence {sequence}) but not published: {text}; the next read or write of it publishes it",
                self.url
            ));
        }
        self.remember(key, revision, digests);
    }

    /// A publication: the leaves that changed, then the ConfigMap.
    async fn run(&self, job: &mut Job<'_>, previous: Option<&Digests>) -> Result<(), String> {
        let first = self.get_bundle(job.names).await?;
        let mut seen_version = None;
        let mut base = None;
        if let Some(map) = &first {
            if !self.owned(&map.metadata, job.names) {
                job.foreign
                    .push(format!("configmap {}", job.names.bundle()));
                return Ok(());
            }
            let published = sequence_of(&map.metadata);
            if published >= job.sequence {
                return Ok(());
            }
            seen_version.clone_from(&map.metadata.resource_version);
            // The objects are the replaced document's publication when it
            // completed and this write replaced it.
            if published + 1 == job.sequence {
                base = previous;
            }
        } else if job.sequence <= 1 {
            base = Some(&EMPTY);
        }
        let mut plan = match base {
            Some(old) => Plan::between(job.names, old, job.digests),
            None => self.listed_plan(job).await?,
        };
        for _ in 0..ATTEMPTS {
            self.apply(job, &plan).await?;
            match self.put_bundle(job, seen_version.as_deref()).await? {
                Last::Done => return Ok(()),
                Last::Superseded => {
                    self.undo_created(job).await;
                    return Ok(());
                }
                Last::Changed(version) => {
                    seen_version = version;
                    plan = self.listed_plan(job).await?;
                }
            }
        }
        Err(format!(
            "configmap {} changed by others {ATTEMPTS} times in a row",
            job.names.bundle()
        ))
    }

    /// The plan from the leaf Secrets the document has (one list of
    /// metadata): used when the last publication is not known complete.
    async fn listed_plan(&self, job: &Job<'_>) -> Result<Plan, String> {
        let selector = format!(
            "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_STORE}={},{LABEL_DOCUMENT}={},{LABEL_PUBLISHED}={PUBLISHED_LEAF}",
            self.url.name(),
            job.names.document
        );
        let params = ListParams::default().labels(&selector);
        let list = self
            .call(self.secrets.list_metadata(&params))
            .await
            .map_err(|f| self.describe("list", "secrets", &selector, &f))?;
        let listed: HashMap<String, Option<String>> = list
            .items
            .into_iter()
            .filter_map(|item| {
                let digest = annotation(&item.metadata, ANNOTATION_DIGEST).map(str::to_string);
                Some((item.metadata.name?, digest))
            })
            .collect();
        let mut plan = Plan::default();
        let mut wanted = std::collections::HashSet::new();
        for (leaf, digest) in &job.digests.leaves {
            let name = job.names.leaf(leaf);
            if listed.get(&name).and_then(Option::as_ref) != Some(digest) {
                plan.write.push(leaf.clone());
            }
            wanted.insert(name);
        }
        plan.delete = listed
            .into_keys()
            .filter(|name| !wanted.contains(name))
            .collect();
        plan.delete.sort();
        Ok(plan)
    }

    async fn apply(&self, job: &mut Job<'_>, plan: &Plan) -> Result<(), String> {
        for leaf in &plan.write {
            self.put_leaf(job, leaf).await?;
        }
        for name in &plan.delete {
            self.remove_leaf(job, name).await?;
        }
        Ok(())
    }

    /// Whether pki made the object: this store's and this document's
    /// labels.
    fn owned(&self, meta: &ObjectMeta, names: &DocumentNames) -> bool {
        let label = |name: &str| meta.labels.as_ref().and_then(|l| l.get(name));
        label(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY)
            && label(LABEL_STORE).map(String::as_str) == Some(self.url.name())
            && label(LABEL_DOCUMENT) == Some(&names.document)
    }

    fn published_meta(&self, job: &Job<'_>, name: String, what: &str, digest: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.url.namespace().to_string()),
            labels: Some(job.names.published_labels(self.url.name(), what)),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_KEY.to_string(), job.key.to_string()),
                (ANNOTATION_SEQUENCE.to_string(), job.sequence.to_string()),
                (ANNOTATION_DIGEST.to_string(), digest.to_string()),
            ])),
            ..ObjectMeta::default()
        }
    }

    /// The `kubernetes.io/tls` Secret of `leaf`, as this publication
    /// writes it.
    fn leaf_secret(&self, job: &Job<'_>, leaf: &str) -> Option<Secret> {
        let publication = job.publication.as_ref()?;
        let material = publication.leaves.get(leaf)?;
        let digest = job.digests.leaves.get(leaf)?;
        let mut metadata = self.published_meta(job, job.names.leaf(leaf), PUBLISHED_LEAF, digest);
        if let Some(annotations) = metadata.annotations.as_mut() {
            annotations.insert(ANNOTATION_LEAF.to_string(), leaf.to_string());
        }
        let bytes = |b: &[u8]| ByteString(b.to_vec());
        Some(Secret {
            metadata,
            type_: Some(TLS_TYPE.to_string()),
            data: Some(BTreeMap::from([
                ("tls.crt".to_string(), bytes(material.chain)),
                ("tls.key".to_string(), bytes(material.key)),
                ("ca.crt".to_string(), bytes(publication.bundle)),
            ])),
            ..Secret::default()
        })
    }

    /// Writes `leaf`'s Secret unless an object of that name is pki's and
    /// as new or current already, or is not pki's.
    async fn put_leaf(&self, job: &mut Job<'_>, leaf: &str) -> Result<(), String> {
        let Some(mut secret) = self.leaf_secret(job, leaf) else {
            return Ok(());
        };
        let name = job.names.leaf(leaf);
        let digest = job.digests.leaves.get(leaf).cloned();
        for _ in 0..ATTEMPTS {
            self.hook(&format!("publish leaf {name}"))
                .map_err(|f| f.describe())?;
            let existing = self
                .get_secret(&name)
                .await
                .map_err(|f| self.describe("get", "secrets", &name, &f))?;
            let sent = match existing {
                None => {
                    secret.metadata.resource_version = None;
                    let created = self
                        .call(self.secrets.create(&PostParams::default(), &secret))
                        .await;
                    if let Ok(made) = &created {
                        let version = made.metadata.resource_version.clone();
                        job.created
                            .push((name.clone(), version.unwrap_or_default()));
                    }
                    created
                }
                Some(old) => {
                    if !self.owned(&old.metadata, job.names) {
                        job.foreign.push(format!("secret {name}"));
                        return Ok(());
                    }
                    if sequence_of(&old.metadata) >= job.sequence
                        || annotation(&old.metadata, ANNOTATION_DIGEST) == digest.as_deref()
                    {
                        return Ok(());
                    }
                    secret.metadata.resource_version = old.metadata.resource_version;
                    self.call(self.secrets.replace(&name, &PostParams::default(), &secret))
                        .await
                }
            };
            match sent {
                Ok(_) => {
                    job.written += 1;
                    return Ok(());
                }
                Err(fail) if fail.is_conflict() => {}
                Err(fail) => return Err(self.describe("write", "secrets", &name, &fail)),
            }
        }
        Err(format!(
            "secret {name} changed by others {ATTEMPTS} times in a row"
        ))
    }

    /// Deletes the leaf Secret `name` when it is pki's and older.
    async fn remove_leaf(&self, job: &mut Job<'_>, name: &str) -> Result<(), String> {
        for _ in 0..ATTEMPTS {
            self.hook(&format!("unpublish leaf {name}"))
                .map_err(|f| f.describe())?;
            let existing = self
                .get_secret(name)
                .await
                .map_err(|f| self.describe("get", "secrets", name, &f))?;
            let Some(old) = existing else {
                return Ok(());
            };
            if !self.owned(&old.metadata, job.names) {
                job.foreign.push(format!("secret {name}"));
                return Ok(());
            }
            if sequence_of(&old.metadata) >= job.sequence {
                return Ok(());
            }
            match self.delete_at(name, old.metadata.resource_version).await {
                Ok(()) => return Ok(()),
                Err(fail) if fail.is_conflict() => {}
                Err(fail) => return Err(self.describe("delete", "secrets", name, &fail)),
            }
        }
        Err(format!(
            "secret {name} changed by others {ATTEMPTS} times in a row"
        ))
    }

    /// Deletes Secret `name` if it is still at `version`; gone is done.
    async fn delete_at(&self, name: &str, version: Option<String>) -> Result<(), Fail> {
        let params = DeleteParams::default().preconditions(Preconditions {
            resource_version: version,
            uid: None,
        });
        match self.call(self.secrets.delete(name, &params)).await {
            Ok(_) => Ok(()),
            Err(fail) if fail.is_not_found() => Ok(()),
            Err(fail) => Err(fail),
        }
    }

    /// A newer publication completed while this one ran: what this one
    /// created may be leaves the newer one deleted. Each goes unless
    /// another write changed it since. Best effort.
    async fn undo_created(&self, job: &mut Job<'_>) {
        for (name, version) in std::mem::take(&mut job.created) {
            let _ = self.delete_at(&name, Some(version)).await;
        }
    }

    async fn get_bundle(&self, names: &DocumentNames) -> Result<Option<ConfigMap>, String> {
        let name = names.bundle();
        match self.call(self.publishing.configmaps.get(&name)).await {
            Ok(map) => Ok(Some(map)),
            Err(fail) if fail.is_not_found() => Ok(None),
            Err(fail) => Err(self.describe("get", "configmaps", &name, &fail)),
        }
    }

    /// The ConfigMap, last: the bundle and the sequence whose publication
    /// it completes. `seen`: its resourceVersion when the publication
    /// started (None: there was none).
    async fn put_bundle(&self, job: &Job<'_>, seen: Option<&str>) -> Result<Last, String> {
        let name = job.names.bundle();
        let mut map = ConfigMap {
            metadata: self.published_meta(job, name.clone(), PUBLISHED_BUNDLE, &job.digests.bundle),
            ..ConfigMap::default()
        };
        if let Some(publication) = &job.publication {
            match std::str::from_utf8(publication.bundle) {
                Ok(text) => map.data = Some(BTreeMap::from([(BUNDLE_KEY.into(), text.into())])),
                Err(_) => {
                    let bytes = ByteString(publication.bundle.to_vec());
                    map.binary_data = Some(BTreeMap::from([(BUNDLE_KEY.into(), bytes)]));
                }
            }
        }
        for _ in 0..ATTEMPTS {
            self.hook(&format!("publish bundle {name}"))
                .map_err(|f| f.describe())?;
            let current = self.get_bundle(job.names).await?;
            let version = current
                .as_ref()
                .and_then(|m| m.metadata.resource_version.clone());
            if let Some(current) = &current {
                if !self.owned(&current.metadata, job.names) {
                    return Err(format!("configmap {name} is not pki's"));
                }
                if sequence_of(&current.metadata) >= job.sequence {
                    return Ok(Last::Superseded);
                }
            }
            if version.as_deref() != seen {
                return Ok(Last::Changed(version));
            }
            map.metadata.resource_version = version;
            let configmaps = &self.publishing.configmaps;
            let sent = match &current {
                None => {
                    self.call(configmaps.create(&PostParams::default(), &map))
                        .await
                }
                Some(_) => {
                    let params = PostParams::default();
                    self.call(configmaps.replace(&name, &params, &map)).await
                }
            };
            match sent {
                Ok(_) => return Ok(Last::Done),
                Err(fail) if fail.is_conflict() => {}
                Err(fail) => return Err(self.describe("write", "configmaps", &name, &fail)),
            }
        }
        Err(format!(
            "configmap {name} changed by others {ATTEMPTS} times in a row"
        ))
    }

    /// A failed request of a publication, in one line; a refusal names
    /// the verb and resource the account lacks.
    fn describe(&self, verb: &str, resource: &str, name: &str, fail: &Fail) -> String {
        if fail.code() == Some(403) {
            format!(
                "may not {verb} {resource} in namespace \"{}\" ({})",
                self.url.namespace(),
                fail.describe()
            )
        } else {
            format!("{verb} {resource} \"{name}\": {}", fail.describe())
        }
    }

    /// Whether the publication of the document whose head is at
    /// `sequence` lags it (a crash or failure between a commit and its
    /// publication). False when that cannot be told (a ConfigMap the
    /// account may not read): reads never fail for publishing's sake.
    pub(super) async fn publication_lags(&self, names: &DocumentNames, sequence: u64) -> bool {
        if sequence == 0 {
            return false;
        }
        match self.get_bundle(names).await {
            Ok(None) => true,
            Ok(Some(map)) => {
                self.owned(&map.metadata, names) && sequence_of(&map.metadata) < sequence
            }
            Err(_) => false,
        }
    }

    /// After a read of the document at `key` (its head at `sequence` and
    /// `revision`, its files `files`): remembers what it publishes, and
    /// publishes it when its publication lags.
    pub(super) async fn catch_up(
        &self,
        key: &str,
        names: &DocumentNames,
        committed: (u64, &Revision),
        files: &Files,
    ) {
        if self.publication_lags(names, committed.0).await {
            self.publish(key, names, committed, files, None).await;
        } else {
            let digests = Digests::of(Publication::of(files).as_ref());
            self.remember(key, committed.1, Arc::new(digests));
        }
    }
}

/// What a new document replaces: nothing published.
static EMPTY: Digests = Digests {
    bundle: String::new(),
    leaves: BTreeMap::new(),
};

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
