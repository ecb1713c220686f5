//! What a document is made of in the API server: the names of its head
//! and shard Secrets, their labels and types, and the head's JSON. The
//! crate docs describe the layout; `bucket` says which bucket a file
//! goes in, `shard` cuts a bucket's files into shards.

pub(crate) mod bucket;
pub(crate) mod shard;

use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

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

/// The head format this build writes (it also reads
/// [`HEAD_FORMAT_V1`]): 2, files in buckets.
pub const HEAD_FORMAT: u32 = 2;

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

/// The head's JSON (format 2): the bucket count and, per bucket, the
/// shards that hold it, how many files the buckets hold, their weight,
/// the declared directories and the document's summary. See
/// [`bucket`] for which file goes in which bucket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Head {
    pub format: u32,
    /// The store key (what the annotation says, kept with the data so a
    /// head renamed by hand is noticed).
    pub key: String,
    /// The write attempt that made this commit: 16 hex digits. It names
    /// the shards the attempt wrote (possibly none), and is how a writer
    /// whose commit got no answer recognises its own.
    pub generation: String,
    /// The previous head's sequence + 1 (1 for a new document).
    #[serde(default)]
    pub sequence: u64,
    /// One entry per bucket: the bucket count B is `buckets.len()`.
    pub buckets: Vec<Bucket>,
    /// How many files the buckets hold.
    pub files: usize,
    /// The buckets' weight ([`bucket::weight`]): when it passes twice what
    /// B was chosen for, the next write of changes rewrites the document
    /// with more buckets.
    pub bytes: u64,
    /// The declared directories.
    pub dirs: Vec<String>,
    /// The document's summary ([`pki_rotate::Summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Where one bucket's files are: shards `first`, `first + 1`, ... of
/// generation `generation` (the attempt that last wrote the bucket), one
/// per SHA-256 in `shards`. An empty bucket has no shard.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Bucket {
    pub generation: String,
    pub first: usize,
    /// SHA-256 (hex) of each shard, in order.
    pub shards: Vec<String>,
    /// How many files the bucket holds.
    pub files: usize,
}

impl Bucket {
    /// The names of the bucket's shards, in order.
    pub fn shard_names(&self, names: &DocumentNames) -> Vec<String> {
        (0..self.shards.len())
            .map(|i| names.shard(&self.generation, self.first.saturating_add(i)))
            .collect()
    }
}

/// The head of format 1 (releases before buckets): one generation, all of
/// whose shards hold the files in path order. Read as a head of one
/// bucket; the next write converts it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadV1 {
    format: u32,
    key: String,
    generation: String,
    #[serde(default)]
    sequence: u64,
    shards: Vec<String>,
    files: usize,
    dirs: Vec<String>,
    #[serde(default)]
    summary: Option<String>,
}

/// Only the format, to choose how to read the rest.
#[derive(serde::Deserialize)]
struct Format {
    format: u32,
}

/// The head format before buckets, still read.
pub const HEAD_FORMAT_V1: u32 = 1;

impl Head {
    /// A `head.json` of format 1 or 2, checked ([`Head::check`]). A
    /// format-1 head is given as the one-bucket head it amounts to, with
    /// `bytes` 0 (unknown); `converted` says so.
    pub fn parse(bytes: &[u8]) -> Result<(Head, bool), String> {
        let Format { format } = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let (head, converted) = match format {
            HEAD_FORMAT => (
                serde_json::from_slice::<Head>(bytes).map_err(|e| e.to_string())?,
                false,
            ),
            HEAD_FORMAT_V1 => {
                let v1: HeadV1 = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
                let bucket = Bucket {
                    generation: v1.generation.clone(),
                    first: 0,
                    shards: v1.shards,
                    files: v1.files,
                };
                let head = Head {
                    format: v1.format,
                    key: v1.key,
                    generation: v1.generation,
                    sequence: v1.sequence,
                    buckets: vec![bucket],
                    files: v1.files,
                    bytes: 0,
                    dirs: v1.dirs,
                    summary: v1.summary,
                };
                (head, true)
            }
            other => {
                return Err(format!(
                    "head format {other} (this build reads {HEAD_FORMAT_V1} and {HEAD_FORMAT})"
                ));
            }
        };
        head.check()?;
        Ok((head, converted))
    }

    /// What a head must be for its shards to be read: at least one
    /// bucket, at most [`bucket::MAX_BUCKETS`], file counts that add up, and
    /// generations that are names ([`is_generation`]).
    pub fn check(&self) -> Result<(), String> {
        let count = self.buckets.len();
        if count == 0 || count > bucket::MAX_BUCKETS {
            return Err(format!(
                "{count} buckets (1 to {} are read)",
                bucket::MAX_BUCKETS
            ));
        }
        if !is_generation(&self.generation) {
            return Err("a generation that is not 16 hex digits".into());
        }
        let mut files = 0usize;
        for (i, b) in self.buckets.iter().enumerate() {
            if !is_generation(&b.generation) {
                return Err(format!(
                    "bucket {i}: a generation that is not 16 hex digits"
                ));
            }
            if b.first.checked_add(b.shards.len()).is_none() {
                return Err(format!("bucket {i}: shard numbers beyond the largest"));
            }
            files = files.saturating_add(b.files);
        }
        if files != self.files {
            return Err(format!(
                "buckets of {files} files where the head says {}",
                self.files
            ));
        }
        Ok(())
    }

    /// Every shard the head names.
    pub fn shard_names(&self, names: &DocumentNames) -> BTreeSet<String> {
        self.buckets
            .iter()
            .flat_map(|b| b.shard_names(names))
            .collect()
    }
}

/// Whether `text` is a generation as writers draw them: 16 lowercase hex
/// digits (so a shard's name is a DNS-1123 subdomain).
pub(crate) fn is_generation(text: &str) -> bool {
    text.len() == 16
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
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

    /// A head with `count` buckets of one shard each, every bucket of
    /// another generation (the largest a head of that count gets), the
    /// longest summary and a few directories.
    fn largest_head(count: usize, files: usize) -> Vec<u8> {
        let generation = |i: usize| format!("{i:016x}");
        let per_bucket = files / count;
        let buckets: Vec<Bucket> = (0..count)
            .map(|i| Bucket {
                generation: generation(i + 1),
                first: 1_000_000 + i,
                shards: vec![hex::encode([0xabu8; 32])],
                files: per_bucket,
            })
            .collect();
        let head = Head {
            format: HEAD_FORMAT,
            key: "signer".into(),
            generation: generation(0),
            sequence: u64::MAX,
            files: per_bucket * count,
            buckets,
            bytes: u64::MAX,
            dirs: vec!["certs".into(), "leaf-requests".into()],
            summary: Some("s".repeat(pki_rotate::store::MAX_SUMMARY_LEN)),
        };
        head.check().unwrap();
        let json = serde_json::to_vec(&head).unwrap();
        assert_eq!(Head::parse(&json).unwrap(), (head, false));
        json
    }

    #[test]
    fn the_head_of_a_hundred_thousand_leaves_is_far_under_the_secret_limit() {
        // Per leaf of a signer: a request, a certificate, its key and the
        // two in one (sizes of an ECDSA P-256 leaf with a 2-certificate
        // chain, rounded up), at their paths.
        let leaves = 100_000u64;
        let name = "certs/service-00000.namespace-000";
        let per_leaf: u64 = [
            (".json", 400),
            ("/tls.crt", 1_500),
            ("/tls.key", 300),
            ("/tls.pem", 1_800),
        ]
        .iter()
        .map(|(end, len)| (name.len() + end.len() + shard::ENTRY_OVERHEAD) as u64 + len)
        .sum();
        let count = bucket::count_for(leaves * per_leaf);
        assert!(count > 1_000 && count < bucket::MAX_BUCKETS, "{count}");
        let head = largest_head(count, 4 * leaves as usize);
        // About a third of the 1 MiB limit, and half a shard's budget.
        assert!(
            head.len() < 384 * 1024,
            "{} bytes for {count} buckets",
            head.len()
        );
        eprintln!(
            "100,000 leaves: {count} buckets, a head of {} bytes at most",
            head.len()
        );
        // And the most buckets any document gets still fit a shard's budget.
        let head = largest_head(bucket::MAX_BUCKETS, 4_000_000);
        assert!(head.len() < shard::SHARD_BUDGET, "{} bytes", head.len());
    }

    #[test]
    fn a_format_1_head_reads_as_one_bucket_and_bad_heads_are_refused() {
        let v1 = br#"{"format":1,"key":"signer","generation":"9f0c2a7be41d3350",
            "shards":["aa","bb"],"files":3,"dirs":["certs"],"summary":"x"}"#;
        let (head, converted) = Head::parse(v1).unwrap();
        assert!(converted);
        assert_eq!(head.buckets.len(), 1);
        let names = DocumentNames::new("prod", "signer");
        assert_eq!(
            head.shard_names(&names).into_iter().collect::<Vec<_>>(),
            [
                "prod.signer.9f0c2a7be41d3350.0",
                "prod.signer.9f0c2a7be41d3350.1"
            ]
        );
        assert_eq!(head.files, 3);
        assert_eq!(head.summary.as_deref(), Some("x"));
        for bad in [
            &br#"{"format":3}"#[..],
            br#"{"format":1,"key":"k","generation":"NOTHEX","shards":[],"files":0,"dirs":[]}"#,
            br#"{"format":2,"key":"k","generation":"0011223344556677","buckets":[],"files":0,"bytes":0,"dirs":[]}"#,
            br#"{"format":2,"key":"k","generation":"0011223344556677","buckets":[{"generation":"0011223344556677","first":0,"shards":[],"files":2}],"files":1,"bytes":0,"dirs":[]}"#,
            br#"{"format":2,"key":"k","generation":"0011223344556677","buckets":[{"generation":"0011223344556677","first":18446744073709551615,"shards":["a"],"files":0}],"files":0,"bytes":0,"dirs":[]}"#,
        ] {
            assert!(Head::parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
