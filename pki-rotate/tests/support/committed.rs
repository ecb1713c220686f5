//! Rewriting a committed file of a directory store together with the
//! digest its manifest records, as a store written by another build could
//! hold it: what the document layer makes of the contents is under test,
//! not the store's own check (see fs_hardening.rs).

#![allow(dead_code, clippy::unwrap_used)]

use sha2::Digest;
use std::path::Path;

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn replace(path: &Path, contents: &[u8]) {
    std::fs::remove_file(path).unwrap();
    std::fs::write(path, contents).unwrap();
}

/// Replaces `file` of the document `key` in the store at `dir` with
/// `contents`, and its digest in the manifest's shard (format 3) and the
/// shard's digest in `.manifest.json`.
pub fn rewrite_committed(dir: &Path, key: &str, file: &str, contents: &[u8]) {
    let generation = std::fs::canonicalize(dir.join(".data")).unwrap();
    replace(&generation.join(file), contents);
    let bucket = hex::encode(&sha2::Sha256::digest(file.as_bytes())[..1]);
    let shard_path = generation.join(format!(".manifest/{bucket}.json"));
    let mut shard: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&shard_path).unwrap()).unwrap();
    shard[key][file]["sha256"] = sha256_hex(contents).into();
    let shard_bytes = serde_json::to_vec(&shard).unwrap();
    replace(&shard_path, &shard_bytes);
    let manifest_path = generation.join(".manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["shards"][bucket] = sha256_hex(&shard_bytes).into();
    replace(&manifest_path, &serde_json::to_vec(&manifest).unwrap());
}
