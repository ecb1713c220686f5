//! Format 2: a small head, one entry key per file, files cut into chunks
//! by content (see the crate docs for the keys and the commit protocol).

use super::{DocKeys, is_blob_id, sha256_hex};
use pki_rotate::{DocumentError, File, Files, RotateError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use zeroize::Zeroizing;

/// The format number of a format 2 head.
pub const HEAD_FORMAT: u32 = 2;

/// A file up to this size is one blob; a larger one is cut into chunks.
/// The bounds keep every chunk far below etcd's request limit, and small
/// enough that a change in the middle of a large file (one leaf request
/// among ten thousand in a signer's state) rewrites a few kilobytes.
pub const CHUNK_MIN: usize = 8 * 1024;
/// The average chunk size FastCDC aims at.
pub const CHUNK_AVG: usize = 16 * 1024;
/// The largest chunk, and the largest file kept as one blob.
pub const CHUNK_MAX: usize = 64 * 1024;

/// A document's head in format 2: which generation of entries is current,
/// which attempt committed it, how many files it has, and its declared dirs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    pub format: u32,
    /// The entries are the keys under `.files/<generation>/`.
    pub generation: String,
    /// The nonce of the write attempt that committed this head: a writer
    /// whose commit got no answer finds out from it whether it landed.
    pub commit: String,
    /// How many entries the generation holds: a reader that finds another
    /// number (an entry deleted or added by hand) refuses the document.
    pub files: u64,
    #[serde(default)]
    pub dirs: BTreeSet<String>,
    /// The document's summary ([`pki_rotate::Summary`]), written with it:
    /// a step with nothing to do reads the head alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// One file of a format 2 document: the value of its entry key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// SHA-256 of the whole file, lowercase hex.
    pub sha256: String,
    /// Whether the file is a private key or a credential.
    pub secret: bool,
    /// The one blob holding the file (files up to [`CHUNK_MAX`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// The blobs holding the file's chunks, in order (larger files, and
    /// the empty file: no chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<Chunk>>,
}

/// One chunk of a larger file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chunk {
    /// SHA-256 of the chunk's bytes: a new version of the file keeps the
    /// blob of every chunk whose bytes it still has.
    pub sha256: String,
    pub blob: String,
}

impl FileEntry {
    /// The file's pieces as (SHA-256 of the piece, blob id), in order.
    pub fn pieces(&self) -> Vec<(&str, &str)> {
        match (&self.blob, &self.chunks) {
            (Some(blob), _) => vec![(self.sha256.as_str(), blob.as_str())],
            (None, Some(chunks)) => chunks
                .iter()
                .map(|c| (c.sha256.as_str(), c.blob.as_str()))
                .collect(),
            (None, None) => Vec::new(),
        }
    }

    /// The blob ids the entry references.
    pub fn blobs(&self) -> impl Iterator<Item = &str> {
        self.blob
            .iter()
            .map(String::as_str)
            .chain(self.chunks.iter().flatten().map(|c| c.blob.as_str()))
    }

    fn check(&self) -> std::result::Result<(), String> {
        if self.blob.is_some() == self.chunks.is_some() {
            return Err("an entry names either one blob or its chunks".into());
        }
        if let Some(bad) = self.blobs().find(|id| !is_blob_id(id)) {
            return Err(format!("invalid blob id \"{}\"", bad.escape_debug()));
        }
        Ok(())
    }
}

/// A corrupt document at `location`, for `reason`.
pub fn corrupt(location: impl Into<String>, reason: impl Into<String>) -> RotateError {
    RotateError::Document(DocumentError::Corrupt {
        location: location.into(),
        reason: reason.into(),
    })
}

impl Head {
    /// Decodes a format 2 head; `location` names it in errors.
    pub fn decode(location: &str, bytes: &[u8]) -> Result<Self, RotateError> {
        let head: Head = serde_json::from_slice(bytes).map_err(|e| {
            RotateError::Document(DocumentError::Json {
                location: location.to_string(),
                source: e,
            })
        })?;
        if head.format != HEAD_FORMAT {
            return Err(corrupt(
                location,
                format!("not a format {HEAD_FORMAT} head"),
            ));
        }
        for id in [&head.generation, &head.commit] {
            if !is_blob_id(id) || id.contains('-') {
                return Err(corrupt(
                    location,
                    format!("invalid generation or commit \"{}\"", id.escape_debug()),
                ));
            }
        }
        Ok(head)
    }
}

/// Decodes the value of the entry of `path`.
pub fn decode_entry(location: &str, path: &str, bytes: &[u8]) -> Result<FileEntry, RotateError> {
    let entry: FileEntry = serde_json::from_slice(bytes).map_err(|e| {
        RotateError::Document(DocumentError::Json {
            location: format!("{location}: entry of {path}"),
            source: e,
        })
    })?;
    entry
        .check()
        .map_err(|reason| corrupt(format!("{location}: {path}"), reason))?;
    Ok(entry)
}

/// The files `entries` describe, with the blobs' bytes looked up by `blob`.
/// Checks every path, the number of entries against the head's, and each
/// file's SHA-256.
pub fn assemble(
    location: &str,
    keys: &DocKeys,
    head: &Head,
    entries: &BTreeMap<String, FileEntry>,
    blobs: &HashMap<String, Zeroizing<Vec<u8>>>,
) -> Result<Files, RotateError> {
    if entries.len() as u64 != head.files {
        return Err(corrupt(
            location,
            format!(
                "the head names {} files and generation {} holds {} entries",
                head.files,
                head.generation,
                entries.len()
            ),
        ));
    }
    assemble_some(location, keys, head, entries, blobs)
}

/// The files `entries` describe (some of the head's), with all the head's
/// declared dirs; checks each file as [`assemble`] does, but not that the
/// entries are all of the generation's (a read of named files).
pub fn assemble_some(
    location: &str,
    keys: &DocKeys,
    head: &Head,
    entries: &BTreeMap<String, FileEntry>,
    blobs: &HashMap<String, Zeroizing<Vec<u8>>>,
) -> Result<Files, RotateError> {
    let mut files = Files::new();
    for (path, entry) in entries {
        let mut contents = Zeroizing::new(Vec::new());
        for (_, id) in entry.pieces() {
            let Some(bytes) = blobs.get(id) else {
                return Err(corrupt(
                    format!("{location}: {path}"),
                    format!("its blob {} is missing", keys.blob(id)),
                ));
            };
            contents.extend_from_slice(bytes);
        }
        if sha256_hex(&contents) != entry.sha256 {
            return Err(corrupt(
                format!("{location}: {path}"),
                "its blobs do not match the SHA-256 in its entry",
            ));
        }
        let file = File {
            contents,
            secret: entry.secret,
        };
        files
            .insert(path.clone(), file)
            .map_err(|e| e.within(location))?;
    }
    for dir in &head.dirs {
        files
            .insert_dir(dir.clone())
            .map_err(|e| e.within(location))?;
    }
    Ok(files)
}

/// Where a file's pieces start and end: one piece up to [`CHUNK_MAX`]
/// bytes, content-defined chunks beyond (none for the empty file).
pub fn cut(contents: &[u8]) -> Vec<std::ops::Range<usize>> {
    if contents.is_empty() {
        return Vec::new();
    }
    if contents.len() <= CHUNK_MAX {
        return std::iter::once(0..contents.len()).collect();
    }
    fastcdc::v2020::FastCDC::new(contents, CHUNK_MIN, CHUNK_AVG, CHUNK_MAX)
        .map(|c| c.offset..c.offset + c.length)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn small_files_are_one_piece_and_large_ones_are_cut_where_their_content_says() {
        assert!(cut(b"").is_empty());
        assert_eq!(cut(b"abc"), std::iter::once(0..3).collect::<Vec<_>>());
        // A large JSON-like text, then the same with a record inserted in
        // the middle: only the chunks around the insertion differ.
        let record = |i: usize| format!("{{\"name\":\"svc{i}\",\"dns\":[\"svc{i}.ns.svc\"]}},");
        let a: String = (0..20_000).map(record).collect();
        let mut b = a.clone();
        b.insert_str(a.len() / 2, "{\"name\":\"new\",\"dns\":[\"new.ns.svc\"]},");
        let pieces = |text: &str| -> BTreeSet<String> {
            cut(text.as_bytes())
                .into_iter()
                .map(|r| sha256_hex(&text.as_bytes()[r]))
                .collect()
        };
        let (pa, pb) = (pieces(&a), pieces(&b));
        assert!(pa.len() > 20, "{}", pa.len());
        assert!(cut(a.as_bytes()).iter().all(|r| r.len() <= CHUNK_MAX));
        let new = pb.difference(&pa).count();
        assert!(new <= 2, "{new} of {} chunks changed", pb.len());
    }

    #[test]
    fn an_entry_names_one_blob_or_chunks_and_valid_ids() {
        let ok = br#"{"sha256":"00","secret":false,"blob":"ab-1"}"#;
        assert_eq!(
            decode_entry("h", "p", ok).unwrap().pieces(),
            [("00", "ab-1")]
        );
        let chunks = br#"{"sha256":"00","secret":true,"chunks":[{"sha256":"01","blob":"ab-2"}]}"#;
        assert_eq!(
            decode_entry("h", "p", chunks).unwrap().pieces(),
            [("01", "ab-2")]
        );
        for bad in [
            &br#"{"sha256":"00","secret":false}"#[..],
            br#"{"sha256":"00","secret":false,"blob":"../x"}"#,
            br#"{"sha256":"00","secret":false,"blob":"ab-1","chunks":[]}"#,
            br#"{"sha256":"00","secret":false,"blob":"ab-1","x":1}"#,
        ] {
            assert!(decode_entry("h", "p", bad).is_err());
        }
        let head = br#"{"format":2,"generation":"ab","commit":"cd","files":0}"#;
        assert!(Head::decode("h", head).unwrap().dirs.is_empty());
        let bad = br#"{"format":2,"generation":"../x","commit":"cd","files":0}"#;
        assert!(Head::decode("h", bad).is_err());
    }
}
