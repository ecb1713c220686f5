//! Which bucket a file goes in, and how many buckets a document has.
//!
//! A file's bucket is a stable function of its path and the bucket count
//! B, so that a step that changes one member of a document (one leaf of a
//! signer: `leaf-requests/NAME.json` and `certs/NAME/...`) reads and
//! writes the same few buckets whatever the document's size:
//!
//! - a top-level file (`pki-state.json`, `ca-bundle.crt`) is in bucket 0;
//! - any other file belongs to a *member*: the path's second component,
//!   `NAME` in `DIR/NAME/...`, or in `DIR/NAME.EXT` without its last
//!   extension. Its bucket is `1 + n mod (B - 1)`, where `n` is the first 8
//!   bytes (big-endian) of the SHA-256 of the member's name. A leaf's
//!   request and its certificate files have one member, so one bucket.
//!
//! With B = 1 every file is in bucket 0. The function is part of the head
//! format: changing it needs a new format.

use super::shard::ENTRY_OVERHEAD;
use pki_rotate::{File, Files};
use sha2::{Digest, Sha256};

/// The weight a whole write aims a bucket at: 192 KiB, a quarter of a
/// shard's budget ([`super::shard::SHARD_BUDGET`]), so that a bucket
/// that grew to twice its aim, and a hash that filled it unevenly, still
/// fit one shard.
pub const BUCKET_TARGET: u64 = 192 * 1024;

/// The most buckets a head has: 4,096 entries keep a head under 600 KiB.
/// A document heavier than 4,096 targets (about 800 MiB) has buckets of
/// several shards each.
pub const MAX_BUCKETS: usize = 4096;

/// What `file` at `path` weighs in a shard: its bytes and its index entry,
/// at most.
pub(crate) fn weight(path: &str, file: &File) -> u64 {
    (path.len() + ENTRY_OVERHEAD + file.contents.len()) as u64
}

/// The weight of every file of `files`.
pub(crate) fn total_weight(files: &Files) -> u64 {
    files.iter().map(|(path, file)| weight(path, file)).sum()
}

/// The bucket count a whole write of files weighing `weight` chooses:
/// one bucket for a document within [`BUCKET_TARGET`], else one for the
/// top-level files and enough for the rest to weigh about the target each.
pub(crate) fn count_for(weight: u64) -> usize {
    if weight <= BUCKET_TARGET {
        return 1;
    }
    let members = usize::try_from(weight.div_ceil(BUCKET_TARGET)).unwrap_or(MAX_BUCKETS);
    members.saturating_add(1).min(MAX_BUCKETS)
}

/// Whether a document of `count` buckets weighing `weight` has grown past
/// what `count` was chosen for (twice the target per bucket), so that a
/// write of changes rewrites it whole with more buckets. Doubling keeps
/// the rewrites' cost, over the writes of changes in between, O(1) each.
pub(crate) fn outgrown(count: usize, weight: u64) -> bool {
    count < MAX_BUCKETS && weight > 2 * BUCKET_TARGET * count as u64
}

/// The member `path` belongs to (None: a top-level file).
fn member(path: &str) -> Option<&str> {
    let mut parts = path.split('/');
    parts.next()?;
    let second = parts.next()?;
    if parts.next().is_some() {
        return Some(second);
    }
    match second.rfind('.') {
        Some(dot) if dot > 0 => Some(&second[..dot]),
        _ => Some(second),
    }
}

/// The bucket of the file at `path` in a document of `count` buckets.
pub(crate) fn of(path: &str, count: usize) -> usize {
    let Some(member) = member(path).filter(|_| count > 1) else {
        return 0;
    };
    let digest = Sha256::digest(member.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let n = u64::from_be_bytes(first) % (count as u64 - 1);
    // n < count - 1, which fits usize.
    1 + n as usize
}

/// The files of `files` in each of `count` buckets (no directories: the
/// head declares those).
pub(crate) fn split(files: &Files, count: usize) -> pki_rotate::Result<Vec<Files>> {
    let mut buckets = vec![Files::new(); count.max(1)];
    for (path, file) in files.iter() {
        if let Some(bucket) = buckets.get_mut(of(path, count)) {
            bucket.insert(path, file.clone())?;
        }
    }
    Ok(buckets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_is_one_bucket_and_top_level_files_are_bucket_zero() {
        for count in [1, 2, 3, 50, 4096] {
            assert_eq!(of("pki-state.json", count), 0);
            assert_eq!(of("ca-bundle.crt", count), 0);
            let leaf = of("leaf-requests/web.app.json", count);
            assert_eq!(of("certs/web.app/tls.crt", count), leaf);
            assert_eq!(of("certs/web.app/tls.key", count), leaf);
            assert_eq!(of("certs/web.app/deep/er", count), leaf);
            assert!(leaf < count);
            assert_eq!(leaf == 0, count == 1);
        }
        // Stable: the format depends on it.
        assert_eq!(of("certs/svc0/tls.crt", 181), 111);
    }

    #[test]
    fn the_count_grows_with_the_weight_and_is_outgrown_at_twice_its_aim() {
        assert_eq!(count_for(0), 1);
        assert_eq!(count_for(BUCKET_TARGET), 1);
        assert_eq!(count_for(BUCKET_TARGET + 1), 3);
        assert_eq!(count_for(u64::MAX), MAX_BUCKETS);
        let count = count_for(100 * BUCKET_TARGET);
        assert_eq!(count, 101);
        assert!(!outgrown(count, 200 * BUCKET_TARGET));
        assert!(outgrown(count, 203 * BUCKET_TARGET));
        assert!(!outgrown(MAX_BUCKETS, u64::MAX / 4));
    }
}
