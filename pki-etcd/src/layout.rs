//! The keys and values a document occupies in etcd (see the crate docs).
//! Format 2 ([`head`], [`change`]) is what this build writes; format 1 (a
//! head holding the whole manifest, [`Manifest`]) is still read, and the
//! next write replaces it.

mod change;
mod head;

pub use change::{Change, change};
pub use head::{FileEntry, HEAD_FORMAT, Head, assemble, assemble_some, corrupt, decode_entry};

use pki_rotate::{File, Files, RotateError};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The format number of the head this build writes. It reads this one and
/// format 1, the first release's.
pub const MANIFEST_FORMAT: u32 = HEAD_FORMAT;

/// The format of the first release: the head held the whole manifest.
pub const LEGACY_FORMAT: u32 = 1;

/// The segment under a document's head key that holds its entries, one
/// key per file under `.files/<generation>/`.
pub const FILES_SEGMENT: &str = ".files";

/// The segment under a document's head key that marks write attempts in
/// progress, one key per attempt: what a crashed attempt left is found
/// from it (see `store/sweep.rs`).
pub const ATTEMPTS_SEGMENT: &str = ".attempts";

/// The segment under a document's head key that holds its blobs. Store keys
/// have no segment starting with `.` (see [`pki_rotate::store::validate_key`]),
/// so no document's head or blobs can fall under another document's blobs:
/// with a plain `blobs` segment the head of a key `signer/blobs/x` would be a
/// blob of `signer`, and that document's garbage collection would delete it.
pub const BLOBS_SEGMENT: &str = ".blobs";

/// A format 1 head: which blob holds each file, and the declared dirs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub files: BTreeMap<String, Entry>,
    #[serde(default)]
    pub dirs: BTreeSet<String>,
}

/// One file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// The blob id: the last segment of the blob's key.
    pub blob: String,
    /// Whether the file is a private key or a credential.
    pub secret: bool,
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether `id` may be a blob id: what [`blob_id`] makes, nothing that could
/// leave the document's blob range.
pub fn is_blob_id(id: &str) -> bool {
    id.len() <= 64
        && id.bytes().next().is_some_and(|b| b.is_ascii_hexdigit())
        && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The id of the `n`th new blob of the write attempt `nonce`. All blobs of
/// one attempt share the key prefix `<nonce>-`.
pub fn blob_id(nonce: &str, n: usize) -> String {
    format!("{nonce}-{n:x}")
}

/// The key names of one document under a store prefix.
#[derive(Debug, Clone)]
pub struct DocKeys {
    /// `PREFIX/<key>`.
    pub head: String,
    /// `PREFIX/<key>/.blobs/`.
    pub blobs: String,
    /// `PREFIX/<key>/.files/`.
    pub files: String,
    /// `PREFIX/<key>/.attempts/`.
    pub attempts: String,
}

impl DocKeys {
    pub fn new(prefix: &str, key: &str) -> Self {
        DocKeys {
            head: format!("{prefix}/{key}"),
            blobs: format!("{prefix}/{key}/{BLOBS_SEGMENT}/"),
            files: format!("{prefix}/{key}/{FILES_SEGMENT}/"),
            attempts: format!("{prefix}/{key}/{ATTEMPTS_SEGMENT}/"),
        }
    }

    /// The prefix of the entries of `generation`.
    pub fn generation(&self, generation: &str) -> String {
        format!("{}{generation}/", self.files)
    }

    /// The entry key of `path` in `generation`.
    pub fn entry(&self, generation: &str, path: &str) -> String {
        format!("{}{generation}/{path}", self.files)
    }

    /// The marker key of the write attempt `nonce`.
    pub fn attempt(&self, nonce: &str) -> String {
        format!("{}{nonce}", self.attempts)
    }

    /// The prefix of every blob of the write attempt `nonce`.
    pub fn attempt_blobs(&self, nonce: &str) -> String {
        format!("{}{nonce}-", self.blobs)
    }

    pub fn blob(&self, id: &str) -> String {
        format!("{}{id}", self.blobs)
    }

    /// The blob id of a key in this document's blob range.
    pub fn blob_id_of<'k>(&self, key: &'k [u8]) -> Option<&'k str> {
        let rest = key.strip_prefix(self.blobs.as_bytes())?;
        std::str::from_utf8(rest).ok()
    }
}

/// The smallest key greater than every key starting with `prefix` (etcd's
/// `range_end` for a prefix range). Every prefix here ends with `/`.
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A head of either format.
pub enum AnyHead {
    /// Format 1: the whole manifest in the head.
    Legacy(Manifest),
    /// Format 2: a small head over one entry per file.
    Current(Head),
}

/// Decodes a head of any format this build reads; `location` names it in
/// errors. Another format is refused, never overwritten.
pub fn decode_head(location: &str, bytes: &[u8]) -> Result<AnyHead, RotateError> {
    #[derive(serde::Deserialize)]
    struct Probe {
        format: u32,
    }
    let probe: Probe = serde_json::from_slice(bytes).map_err(|e| {
        RotateError::Document(pki_rotate::DocumentError::Json {
            location: location.to_string(),
            source: e,
        })
    })?;
    match probe.format {
        HEAD_FORMAT => Ok(AnyHead::Current(Head::decode(location, bytes)?)),
        _ => Ok(AnyHead::Legacy(Manifest::decode(location, bytes)?)),
    }
}

impl Manifest {
    /// Decodes a format 1 head's value; `location` names it in errors.
    pub fn decode(location: &str, bytes: &[u8]) -> Result<Self, RotateError> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| {
            RotateError::Document(pki_rotate::DocumentError::Json {
                location: location.to_string(),
                source: e,
            })
        })?;
        if m.format != LEGACY_FORMAT {
            return Err(RotateError::Document(pki_rotate::DocumentError::Corrupt {
                location: location.to_string(),
                reason: format!(
                    "manifest format {} is not supported (this build reads formats {LEGACY_FORMAT} and {MANIFEST_FORMAT}); refusing to touch it",
                    m.format
                ),
            }));
        }
        for (path, entry) in &m.files {
            if !is_blob_id(&entry.blob) {
                return Err(RotateError::Document(pki_rotate::DocumentError::Corrupt {
                    location: format!("{location}: {path}"),
                    reason: format!("invalid blob id \"{}\"", entry.blob.escape_debug()),
                }));
            }
        }
        Ok(m)
    }

    /// The files the manifest describes, with the blobs' bytes looked up by
    /// `blob`. Checks every path and every blob's SHA-256.
    pub fn files(
        &self,
        location: &str,
        keys: &DocKeys,
        blob: impl Fn(&str) -> Option<File>,
    ) -> Result<Files, RotateError> {
        let corrupt = |path: &str, reason: String| {
            RotateError::Document(pki_rotate::DocumentError::Corrupt {
                location: format!("{location}: {path}"),
                reason,
            })
        };
        let mut files = Files::new();
        for (path, entry) in &self.files {
            let Some(mut file) = blob(&entry.blob) else {
                return Err(corrupt(
                    path,
                    format!("its blob {} is missing", keys.blob(&entry.blob)),
                ));
            };
            if sha256_hex(&file.contents) != entry.sha256 {
                return Err(corrupt(
                    path,
                    format!(
                        "its blob {} does not match the SHA-256 in the manifest",
                        keys.blob(&entry.blob)
                    ),
                ));
            }
            file.secret = entry.secret;
            files
                .insert(path.clone(), file)
                .map_err(|e| e.within(location))?;
        }
        for dir in &self.dirs {
            files
                .insert_dir(dir.clone())
                .map_err(|e| e.within(location))?;
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn blob_ranges_of_different_keys_never_overlap() {
        let a = DocKeys::new("pki", "signer");
        // Valid store keys cannot have a `.blobs` segment, and a key with a
        // `blobs` segment stays out of `signer`'s blob range.
        let other = DocKeys::new("pki", "signer/blobs/x");
        assert!(!other.head.starts_with(&a.blobs));
        assert!(!other.blobs.starts_with(&a.blobs));
        assert_eq!(a.blob("ab-1"), "pki/signer/.blobs/ab-1");
        assert_eq!(a.blob_id_of(b"pki/signer/.blobs/ab-1"), Some("ab-1"));
        assert_eq!(prefix_end("pki/signer/.blobs/"), b"pki/signer/.blobs0");
    }

    #[test]
    fn blob_ids_are_hex_and_dashes() {
        assert!(is_blob_id(&blob_id("00ff", 17)));
        for bad in ["", "-1", "a/b", "../x", "G"] {
            assert!(!is_blob_id(bad), "{bad}");
        }
    }

    #[test]
    fn unknown_manifest_formats_and_fields_are_refused() {
        let err = Manifest::decode("h", br#"{"format":2,"files":{}}"#).unwrap_err();
        assert!(
            err.to_string().contains("format 2 is not supported"),
            "{err}"
        );
        assert!(Manifest::decode("h", br#"{"format":1,"files":{},"x":1}"#).is_err());
        let m = Manifest::decode("h", br#"{"format":1,"files":{}}"#).unwrap();
        assert!(m.dirs.is_empty());
    }
}
