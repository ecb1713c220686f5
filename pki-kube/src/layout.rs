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
}
