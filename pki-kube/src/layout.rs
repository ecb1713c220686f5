//! What a document is made of in the API server: the names of its head
//! and shard Secrets, their labels and types, and the head's JSON. The
//! crate docs describe the layout; `shard` cuts files into shards.

pub(crate) mod shard;

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The label every object of every store carries (Kubernetes'
/// recommended `managed-by` label).
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "pki";

/// The label naming the store (the URL's NAME) an object belongs to.
pub const LABEL_STORE: &str = "pki.invalid/store";

/// The label naming the document (the first 32 hex digits of the SHA-256
/// of its store key) an object belongs to.
pub const LABEL_DOCUMENT: &str = "pki.invalid/document";

/// The label naming the generation (the write attempt) a shard belongs to.
pub const LABEL_GENERATION: &str = "pki.invalid/generation";

/// The annotation holding a document's store key, on its head and shards.
pub const ANNOTATION_KEY: &str = "pki.invalid/key";

/// The label of the objects published for consumers, with
/// [`PUBLISHED_LEAF`] or [`PUBLISHED_BUNDLE`]: none of a document's own
/// Secrets (head, shards) carries it.
pub const LABEL_PUBLISHED: &str = "pki.invalid/published";

/// [`LABEL_PUBLISHED`] of a leaf's `kubernetes.io/tls` Secret.
pub const PUBLISHED_LEAF: &str = "leaf";

/// [`LABEL_PUBLISHED`] of the bundle's ConfigMap.
pub const PUBLISHED_BUNDLE: &str = "bundle";

/// The annotation naming the leaf a published Secret holds.
pub const ANNOTATION_LEAF: &str = "pki.invalid/leaf";

/// The annotation on a published object: the head sequence of the
/// document it was published from. A publisher replaces or deletes only
/// objects of a lower sequence. The bundle's ConfigMap is written last by
/// a publication: its sequence is the one whose publication completed, and
/// a reader whose head has a higher one publishes again.
pub const ANNOTATION_SEQUENCE: &str = "pki.invalid/sequence";

/// The annotation on a published object: SHA-256 (hex) of its content, so
/// that a publisher skips an object that is already current.
pub const ANNOTATION_DIGEST: &str = "pki.invalid/digest";

/// The Secret type of a document's head, the commit point.
pub const HEAD_TYPE: &str = "pki.invalid/document-head";

/// The Secret type of a shard of a document's files.
pub const SHARD_TYPE: &str = "pki.invalid/document-shard";

/// The head's one data key.
pub(crate) const HEAD_DATA: &str = "head.json";

/// The head format this build writes and reads.
pub const HEAD_FORMAT: u32 = 1;

/// Longest Kubernetes object name (a DNS-1123 subdomain).
const MAX_OBJECT_NAME: usize = 253;

/// Room a shard name needs after its head's name: `.`, 16 hex digits of
/// generation, `.` and the shard's number.
const SHARD_SUFFIX: usize = 1 + 16 + 1 + 10;

/// The objects of one document of one store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DocumentNames {
    /// The head Secret's name.
    pub head: String,
    /// The value of [`LABEL_DOCUMENT`].
    pub document: String,
}

impl DocumentNames {
    /// The names of the document at `key` in store `store` (a DNS-1123
    /// label). A key of `[a-z0-9-]` that starts and ends with a letter or
    /// digit keeps its name (`STORE.KEY`, readable in `kubectl get`);
    /// any other key (with `/`, `_` or `.`, or too long) is named by its
    /// hash (`STORE.x.HASH`). The two forms cannot meet: a readable name
    /// has one dot, a hashed one two, and a shard's name adds two more.
    pub fn new(store: &str, key: &str) -> Self {
        let hash = hex::encode(Sha256::digest(key.as_bytes()));
        let document = hash[..32].to_string();
        let readable = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !key.starts_with('-')
            && !key.ends_with('-')
            && key.len() <= 63
            && store.len() + 1 + key.len() + SHARD_SUFFIX <= MAX_OBJECT_NAME;
        let head = if readable {
            format!("{store}.{key}")
        } else {
            format!("{store}.x.{document}")
        };
        DocumentNames { head, document }
    }

    /// The name of shard `index` of generation `generation`.
    pub fn shard(&self, generation: &str, index: usize) -> String {
        format!("{}.{generation}.{index}", self.head)
    }

    /// The name of the bundle's ConfigMap: the head's (another resource,
    /// so the same name cannot collide).
    pub fn bundle(&self) -> String {
        self.head.clone()
    }

    /// The name of leaf `leaf`'s `kubernetes.io/tls` Secret:
    /// `HEAD.leaf.LEAF` when the leaf's name is a DNS label, else
    /// `HEAD.leafx.HASH` (the first 32 hex digits of its SHA-256). Never a
    /// head's (those have at most two dots, these at least three) nor a
    /// shard's (`HEAD.GENERATION.N`, GENERATION 16 hex digits, where these
    /// have `leaf` or `leafx`), nor another document's (the head's name,
    /// unique per key, comes first and holds no `.leaf`).
    pub fn leaf(&self, leaf: &str) -> String {
        let readable = !leaf.is_empty()
            && leaf
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !leaf.starts_with('-')
            && !leaf.ends_with('-')
            && leaf.len() <= 63
            && self.head.len() + ".leaf.".len() + leaf.len() <= MAX_OBJECT_NAME;
        if readable {
            format!("{}.leaf.{leaf}", self.head)
        } else {
            let hash = hex::encode(Sha256::digest(leaf.as_bytes()));
            format!("{}.leafx.{}", self.head, &hash[..32])
        }
    }

    /// The labels of an object published for consumers (`what`:
    /// [`PUBLISHED_LEAF`] or [`PUBLISHED_BUNDLE`]).
    pub fn published_labels(&self, store: &str, what: &str) -> BTreeMap<String, String> {
        let mut labels = self.labels(store, None);
        labels.insert(LABEL_PUBLISHED.to_string(), what.to_string());
        labels
    }

    /// The labels of the head (`generation` None) or of a shard.
    pub fn labels(&self, store: &str, generation: Option<&str>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
            (LABEL_STORE.to_string(), store.to_string()),
            (LABEL_DOCUMENT.to_string(), self.document.clone()),
        ]);
        if let Some(generation) = generation {
            labels.insert(LABEL_GENERATION.to_string(), generation.to_string());
        }
        labels
    }
}

/// The head's JSON: which generation is current, each of its shards'
/// SHA-256, how many files the shards hold, the declared directories and
/// the document's summary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Head {
    pub format: u32,
    /// The store key (what the annotation says, kept with the data so a
    /// head renamed by hand is noticed).
    pub key: String,
    /// The write attempt that made this generation: 16 hex digits.
    pub generation: String,
    /// The commit's place in the document's history: the replaced head's
    /// sequence + 1, 1 for a new document (0: written before sequences).
    /// Publications are ordered by it.
    #[serde(default)]
    pub sequence: u64,
    /// SHA-256 (hex) of each shard, in order; shard `i` is named
    /// [`DocumentNames::shard`]`(generation, i)`.
    pub shards: Vec<String>,
    /// How many files the shards hold.
    pub files: usize,
    /// The declared directories.
    pub dirs: Vec<String>,
    /// The document's summary ([`pki_rotate::Summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A fresh generation: 16 hex digits from the OS's RNG, so concurrent
/// writers never share a shard name.
pub(crate) fn new_generation() -> std::result::Result<String, getrandom::Error> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_keys_keep_their_name_and_others_are_hashed_without_meeting() {
        let signer = DocumentNames::new("prod", "signer");
        assert_eq!(signer.head, "prod.signer");
        assert_eq!(
            signer.shard("0011223344556677", 3),
            "prod.signer.0011223344556677.3"
        );
        for key in ["sets/etcd", "a_b", "x.y", "-a", &"k".repeat(64)] {
            let names = DocumentNames::new("prod", key);
            assert_eq!(names.head, format!("prod.x.{}", names.document), "{key}");
        }
        // Two keys never share a head or a document label.
        let keys = ["x", "sets/x", "sets-x", "signer", "a_b", "a-b"];
        let heads: std::collections::BTreeSet<_> = keys
            .iter()
            .map(|k| DocumentNames::new("s", k).head)
            .collect();
        assert_eq!(heads.len(), keys.len());
        // The longest names fit Kubernetes' 253.
        let store = "s".repeat(63);
        let names = DocumentNames::new(&store, &"k".repeat(63));
        assert!(names.shard("0011223344556677", 4_000_000_000).len() <= 253);
        let labels = names.labels(&store, Some("0011223344556677"));
        assert!(labels.values().all(|v| v.len() <= 63), "{labels:?}");
    }

    /// A DNS-1123 subdomain: dot-separated labels of `[a-z0-9-]`, each
    /// starting and ending with a letter or digit, at most 253 in all.
    fn is_object_name(name: &str) -> bool {
        name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    }

    #[test]
    fn published_names_are_valid_and_meet_no_head_shard_or_other_leaf() {
        let names = DocumentNames::new("prod", "signer");
        assert_eq!(names.leaf("web"), "prod.signer.leaf.web");
        assert_eq!(names.bundle(), "prod.signer");
        let long_store = "s".repeat(63);
        let keys = ["signer", "sets/etcd", "leaf", "x", &"k".repeat(63)];
        let leaves = [
            "web",
            "web.ns",
            "a_b",
            "leaf",
            "0011223344556677",
            "-x",
            &"l".repeat(64),
        ];
        let mut objects = std::collections::BTreeMap::new();
        let mut add = |name: String, what: String| {
            assert!(is_object_name(&name), "{name} ({what})");
            if let Some(before) = objects.insert(name.clone(), what.clone()) {
                panic!("{name} is both {before} and {what}");
            }
        };
        for store in ["prod", "leaf", &long_store] {
            for key in keys {
                let names = DocumentNames::new(store, key);
                add(names.head.clone(), format!("head {store}/{key}"));
                for generation in ["0011223344556677", "ffffffffffffffff"] {
                    for index in [0, 1, 4_000_000_000] {
                        let shard = names.shard(generation, index);
                        add(shard, format!("shard {store}/{key} {generation} {index}"));
                    }
                }
                for leaf in leaves {
                    add(names.leaf(leaf), format!("leaf {store}/{key}/{leaf}"));
                }
            }
        }
        // Names that are not DNS labels are hashed, and stay distinct.
        let hashed = names.leaf("web.ns");
        assert!(hashed.starts_with("prod.signer.leafx."), "{hashed}");
        assert_ne!(names.leaf("a_b"), names.leaf("a-b"));
        let labels = names.published_labels(&long_store, PUBLISHED_LEAF);
        assert!(labels.values().all(|v| v.len() <= 63), "{labels:?}");
    }
}
