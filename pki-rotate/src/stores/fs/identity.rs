//! What a commit records of each file it leaves in a generation: its
//! identity on disk (inode, size, modification time), so that
//! `status --check` can tell every file is still the one committed with a
//! `stat` each instead of reading and hashing ten thousand leaves.
//!
//! Beside each shard of the manifest (`.manifest/XX.json`, which lists the
//! files and their SHA-256) lies its identity records, `.manifest/XX.ids`:
//!
//! ```text
//! pki-identities 1 <SHA-256 of the shard> <SHA-256 of the lines below>
//! <inode> <size> <mtime seconds> <mtime nanoseconds> - <the shard itself>
//! <inode> <size> <mtime seconds> <mtime nanoseconds> <key> <path>
//! …
//! ```
//!
//! The shard's own identity comes first, so that the shard too is looked
//! at rather than read. The records are bound to the very shard they
//! describe, and to their own lines, so records left from another shard, copied from another store,
//! cut short or garbled are not believed: the files of that shard are then
//! read and hashed, as a whole read would. A file written in place changes
//! its modification time (and mostly its size); a file replaced is another
//! inode. A file whose identity differs is read and checked against its
//! digest: a store copied elsewhere (new inodes) is slower to check, never
//! reported damaged for it. Hard links, which the spare and the next
//! generation share, change neither.

use crate::model::error::{Result, RotateError};
use sha2::{Digest, Sha256};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The first word of a records file, and its format.
const MAGIC: &str = "pki-identities 1";

/// A file's identity on disk: what changes when it is replaced or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Identity {
    pub(super) fn of(meta: &Metadata) -> Identity {
        Identity {
            ino: meta.ino(),
            size: meta.len(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }

    /// The identity of the file at `path` (not following a link).
    pub(super) fn at(path: &Path) -> Result<Identity> {
        std::fs::symlink_metadata(path)
            .map(|m| Identity::of(&m))
            .map_err(|e| RotateError::io(path, e))
    }
}

/// The path of the identity records of shard `bucket` in a generation.
pub(super) fn records_path(bucket: &str) -> String {
    format!("{}/{bucket}.ids", super::manifest::SHARDS_DIR)
}

/// One record: a file of `key` at `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    pub(super) key: String,
    pub(super) path: String,
    pub(super) identity: Identity,
}

/// The key written on the shard's own line: no store key is `-`.
const SHARD_KEY: &str = "-";

/// A shard's records as read: the shard's own identity and its files'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Records {
    pub(super) shard: Identity,
    pub(super) files: Vec<Record>,
}

/// One line of a records file.
fn line(identity: Identity, key: &str, path: &str) -> String {
    let Identity {
        ino,
        size,
        mtime,
        mtime_nsec,
    } = identity;
    format!("{ino} {size} {mtime} {mtime_nsec} {key} {path}\n")
}

/// The records file of the shard whose JSON has SHA-256 `shard_sha256`
/// and whose file on disk is `shard`.
pub(super) fn encode(shard_sha256: &str, shard: Identity, records: &[Record]) -> Vec<u8> {
    let mut body = String::with_capacity((records.len() + 1) * 64);
    body.push_str(&line(shard, SHARD_KEY, "shard"));
    for r in records {
        body.push_str(&line(r.identity, &r.key, &r.path));
    }
    let body_sha256 = hex::encode(Sha256::digest(body.as_bytes()));
    format!("{MAGIC} {shard_sha256} {body_sha256}\n{body}").into_bytes()
}

/// The records of `bytes` when they describe the shard with SHA-256
/// `shard_sha256` and are whole; None otherwise (the caller reads the
/// shard's files instead). Only the records of `key` are kept.
pub(super) fn decode(bytes: &[u8], shard_sha256: &str, key: Option<&str>) -> Option<Records> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (header, body) = text.split_once('\n')?;
    let rest = header.strip_prefix(MAGIC)?.strip_prefix(' ')?;
    let (shard, body_sha256) = rest.split_once(' ')?;
    if shard != shard_sha256 || hex::encode(Sha256::digest(body.as_bytes())) != body_sha256 {
        return None;
    }
    let mut lines = body.lines();
    let (shard, first_key, _) = parse_line(lines.next()?)?;
    if first_key != SHARD_KEY {
        return None;
    }
    let mut files = Vec::new();
    for line in lines {
        let (identity, record_key, path) = parse_line(line)?;
        if key.is_some_and(|k| k != record_key) {
            continue;
        }
        files.push(Record {
            key: record_key.to_string(),
            path: path.to_string(),
            identity,
        });
    }
    Some(Records { shard, files })
}

/// One line: the identity, the key and the path.
fn parse_line(line: &str) -> Option<(Identity, &str, &str)> {
    let mut words = line.split(' ');
    let mut number = || words.next()?.parse::<i64>().ok();
    let (ino, size, mtime, mtime_nsec) = (number()?, number()?, number()?, number()?);
    let (key, path) = (words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let identity = Identity {
        ino: u64::try_from(ino).ok()?,
        size: u64::try_from(size).ok()?,
        mtime,
        mtime_nsec,
    };
    Some((identity, key, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, path: &str, ino: u64) -> Record {
        Record {
            key: key.into(),
            path: path.into(),
            identity: Identity {
                ino,
                size: 700,
                mtime: 1_700_000_000,
                mtime_nsec: 5,
            },
        }
    }

    #[test]
    fn records_read_back_for_their_shard_and_key_only() {
        let records = [
            record("signer", "certs/a/tls.crt", 7),
            record("set", "x", 8),
        ];
        let shard = record("-", "shard", 3).identity;
        let bytes = encode("ab", shard, &records);
        let read = decode(&bytes, "ab", Some("signer")).unwrap();
        assert_eq!(read.shard, shard);
        assert_eq!(read.files, vec![records[0].clone()]);
        assert_eq!(
            decode(&bytes, "cd", Some("signer")),
            None,
            "another shard's"
        );
    }

    #[test]
    fn records_cut_short_or_edited_are_not_believed() {
        let shard = record("-", "shard", 3).identity;
        let bytes = encode(
            "ab",
            shard,
            &[record("signer", "a", 1), record("signer", "b", 2)],
        );
        let cut = &bytes[..bytes.len() - 12];
        assert_eq!(decode(cut, "ab", Some("signer")), None);
        let edited = String::from_utf8(bytes.clone())
            .unwrap()
            .replace(" a\n", " c\n");
        assert_eq!(decode(edited.as_bytes(), "ab", Some("signer")), None);
        assert_eq!(decode(b"garbage", "ab", Some("signer")), None);
    }
}
