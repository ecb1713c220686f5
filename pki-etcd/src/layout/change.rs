//! What a write changes in a format 2 document: the new entries, the blobs
//! to add, the entries to put and delete, and the blobs that become garbage.
//! Pure: the store decides how to commit it.

use super::blob_id;
use super::head::{CHUNK_MAX, Chunk, FileEntry, cut};
use super::sha256_hex;
use pki_rotate::Files;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A blob a write attempt adds: one piece of one file.
pub struct NewBlob<'a> {
    pub id: String,
    pub bytes: &'a [u8],
    /// The file it is a piece of, for messages.
    pub path: &'a str,
}

/// The difference between the entries a writer read and the files it writes.
pub struct Change<'a> {
    /// Every entry of the new document.
    pub entries: BTreeMap<String, FileEntry>,
    /// Paths whose entry is new or differs from the one read.
    pub changed: Vec<&'a str>,
    /// Paths read that the new document no longer has.
    pub removed: Vec<String>,
    /// Blobs to write before the commit.
    pub new_blobs: Vec<NewBlob<'a>>,
    /// Blobs the entries read referenced and the new entries do not.
    pub garbage: BTreeSet<String>,
}

/// Compares `files` with the `previous` entries. A file whose bytes and
/// secrecy are unchanged keeps its entry; a changed file keeps the blob of
/// every piece whose bytes its previous version had, and gets blobs of
/// the attempt `nonce` for the others. A blob is only ever shared by the
/// versions of one path, never between two paths, so the blobs of a
/// replaced entry that the new one does not name are garbage once the
/// commit lands, without looking at any other entry.
pub fn change<'a>(
    previous: &BTreeMap<String, FileEntry>,
    files: &'a Files,
    nonce: &str,
) -> Change<'a> {
    let mut entries = BTreeMap::new();
    let mut changed = Vec::new();
    let mut new_blobs: Vec<NewBlob<'a>> = Vec::new();
    for (path, file) in files.iter() {
        let sha256 = sha256_hex(&file.contents);
        let before = previous.get(path);
        if let Some(entry) = before
            && entry.sha256 == sha256
            && entry.secret == file.secret
        {
            entries.insert(path.to_string(), entry.clone());
            continue;
        }
        let mut reusable: HashMap<String, String> = before
            .map(|e| {
                e.pieces()
                    .into_iter()
                    .map(|(sha, id)| (sha.to_string(), id.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let ranges = cut(&file.contents);
        let mut chunks = Vec::with_capacity(ranges.len());
        for range in ranges {
            let bytes = &file.contents[range];
            let piece_sha = sha256_hex(bytes);
            let blob = match reusable.get(&piece_sha) {
                Some(id) => id.clone(),
                None => {
                    let id = blob_id(nonce, new_blobs.len());
                    new_blobs.push(NewBlob {
                        id: id.clone(),
                        bytes,
                        path,
                    });
                    reusable.insert(piece_sha.clone(), id.clone());
                    id
                }
            };
            chunks.push(Chunk {
                sha256: piece_sha,
                blob,
            });
        }
        let one_blob = chunks.len() == 1 && file.contents.len() <= CHUNK_MAX;
        let entry = FileEntry {
            sha256,
            secret: file.secret,
            blob: one_blob.then(|| chunks[0].blob.clone()),
            chunks: (!one_blob).then_some(chunks),
        };
        entries.insert(path.to_string(), entry);
        changed.push(path);
    }
    let removed: Vec<String> = previous
        .keys()
        .filter(|p| files.file(p).is_none())
        .cloned()
        .collect();
    // Garbage is computed against every new entry, not only the path's
    // own, so that a store edited by hand to share a blob between two
    // paths never loses one.
    let referenced: BTreeSet<&str> = entries.values().flat_map(FileEntry::blobs).collect();
    let garbage = changed
        .iter()
        .copied()
        .chain(removed.iter().map(String::as_str))
        .filter_map(|p| previous.get(p))
        .flat_map(FileEntry::blobs)
        .filter(|id| !referenced.contains(id))
        .map(str::to_string)
        .collect();
    Change {
        entries,
        changed,
        removed,
        new_blobs,
        garbage,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pki_rotate::File;

    fn files(pairs: &[(&str, Vec<u8>)]) -> Files {
        let mut f = Files::new();
        for (path, bytes) in pairs {
            f.insert(*path, File::public(bytes.clone())).unwrap();
        }
        f
    }

    #[test]
    fn a_one_file_change_writes_that_file_and_frees_its_old_blob() {
        let a = files(&[("a", b"one".to_vec()), ("b", b"two".to_vec())]);
        let first = change(&BTreeMap::new(), &a, "01");
        assert_eq!(first.new_blobs.len(), 2);
        assert_eq!(first.changed, ["a", "b"]);
        let b = files(&[("a", b"one".to_vec()), ("c", b"three".to_vec())]);
        let second = change(&first.entries, &b, "02");
        assert_eq!(second.changed, ["c"]);
        assert_eq!(second.removed, ["b"]);
        assert_eq!(second.new_blobs.len(), 1);
        assert_eq!(second.entries["a"], first.entries["a"]);
        let old_b = first.entries["b"].blob.clone().unwrap();
        assert_eq!(second.garbage, BTreeSet::from([old_b]));
    }

    #[test]
    fn a_large_file_keeps_the_blobs_of_the_chunks_it_still_has() {
        let text: Vec<u8> = (0..40_000)
            .flat_map(|i| format!("{{\"leaf\":\"svc{i}\"}},").into_bytes())
            .collect();
        let one = files(&[("state", text.clone())]);
        let first = change(&BTreeMap::new(), &one, "01");
        let n = first.new_blobs.len();
        assert!(n > 10, "{n}");
        let mut edited = text.clone();
        edited.splice(300_000..300_000, b"{\"leaf\":\"new\"},".iter().copied());
        let two = files(&[("state", edited)]);
        let second = change(&first.entries, &two, "02");
        assert!(second.new_blobs.len() <= 2, "{}", second.new_blobs.len());
        assert_eq!(second.garbage.len(), second.new_blobs.len());
        // Same bytes, now secret: the entry changes, no blob is written.
        let mut secret = Files::new();
        secret.insert("state", File::secret(text)).unwrap();
        let third = change(&first.entries, &secret, "03");
        assert_eq!(third.changed, ["state"]);
        assert!(third.new_blobs.is_empty() && third.garbage.is_empty());
    }
}
