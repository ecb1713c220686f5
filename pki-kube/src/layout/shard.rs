//! Cutting a document's files into shards that each fit one Secret, and
//! putting them back together.
//!
//! A shard is two data keys: `index.json`, the list of the pieces it
//! holds (`{"path", "secret", "len", "total"}`, in order), and `data`,
//! their bytes one after another. Files go in path order; a file that does
//! not fit what is left of a shard starts a new one, and a file larger
//! than a whole shard is cut into pieces that follow each other across
//! shards (`total` is the whole file's length, checked on reading).
//! Kubernetes refuses a Secret whose data exceed 1 MiB; a shard holds at
//! most [`SHARD_BUDGET`] bytes of index and data together.

use pki_rotate::{File, Files};
use sha2::{Digest, Sha256};

/// The most bytes of index and data one shard holds: 768 KiB, a quarter
/// below the API server's 1 MiB limit on a Secret's data, leaving room for
/// metadata within etcd's 1.5 MiB per request.
pub const SHARD_BUDGET: usize = 768 * 1024;

/// A Secret's data may not exceed this (the API server's `MaxSecretSize`).
pub const MAX_SECRET_DATA: usize = 1024 * 1024;

/// Bytes an index entry takes besides its path, at most:
/// `{"path":"","secret":false,"len":N,"total":N},` with 20-digit numbers.
pub(crate) const ENTRY_OVERHEAD: usize = 96;

/// The data key of a shard's index.
pub(crate) const INDEX_KEY: &str = "index.json";

/// The data key of a shard's bytes.
pub(crate) const DATA_KEY: &str = "data";

/// One piece of one file in a shard.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub path: String,
    pub secret: bool,
    /// This piece's length.
    pub len: usize,
    /// The whole file's length.
    pub total: usize,
}

/// One shard: what its Secret's two data keys hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shard {
    pub index: Vec<u8>,
    pub data: Vec<u8>,
}

impl Shard {
    /// SHA-256 (hex) of the shard: its index's length (8 bytes, big
    /// endian), its index and its data.
    pub fn digest(&self) -> String {
        let mut hash = Sha256::new();
        hash.update((self.index.len() as u64).to_be_bytes());
        hash.update(&self.index);
        hash.update(&self.data);
        hex::encode(hash.finalize())
    }

    /// Bytes its Secret's data hold.
    pub fn size(&self) -> usize {
        self.index.len() + self.data.len()
    }
}

/// A path from a shard's index as a message shows it: on one line,
/// whatever a writer of the namespace put there.
fn shown(path: &str) -> String {
    path.escape_debug().to_string()
}

/// A shard being filled.
#[derive(Default)]
struct Filling {
    entries: Vec<Entry>,
    data: Vec<u8>,
    used: usize,
}

impl Filling {
    fn finish(self, out: &mut Vec<Shard>) -> Result<(), String> {
        let index = serde_json::to_vec(&self.entries).map_err(|e| e.to_string())?;
        let shard = Shard {
            index,
            data: self.data,
        };
        if shard.size() > SHARD_BUDGET {
            // The entry overhead is an upper bound: this cannot happen.
            return Err(format!(
                "shard {} would hold {} bytes, over {SHARD_BUDGET}",
                out.len(),
                shard.size()
            ));
        }
        out.push(shard);
        Ok(())
    }
}

/// Cuts `files` into shards of at most [`SHARD_BUDGET`] bytes each. A
/// document with no files is one empty shard.
pub(crate) fn pack(files: &Files) -> Result<Vec<Shard>, String> {
    let mut out = Vec::new();
    let mut cur = Filling::default();
    for (path, file) in files.iter() {
        let bytes: &[u8] = &file.contents;
        let cost = path.len() + ENTRY_OVERHEAD;
        let mut offset = 0;
        loop {
            let remaining = bytes.len() - offset;
            let room = SHARD_BUDGET.saturating_sub(cur.used + cost);
            // Start a new shard rather than cut a file that fits a whole
            // one, or when not even a byte fits.
            let fits_empty = remaining + cost <= SHARD_BUDGET;
            if !cur.entries.is_empty() && (room == 0 || (remaining > room && fits_empty)) {
                std::mem::take(&mut cur).finish(&mut out)?;
                continue;
            }
            let take = remaining.min(room);
            cur.entries.push(Entry {
                path: path.to_string(),
                secret: file.secret,
                len: take,
                total: bytes.len(),
            });
            cur.data.extend_from_slice(&bytes[offset..offset + take]);
            cur.used += cost + take;
            offset += take;
            if offset == bytes.len() {
                break;
            }
        }
    }
    cur.finish(&mut out)?;
    Ok(out)
}

/// Puts files back together from `shards` (in order), checking that each
/// piece follows the one before and that each file has its whole length.
#[derive(Default)]
pub(crate) struct Unpacker {
    files: Files,
    /// The file being assembled: path, secret, bytes so far, whole length.
    open: Option<(String, bool, Vec<u8>, usize)>,
}

impl Unpacker {
    pub fn new() -> Self {
        Unpacker::default()
    }

    /// Adds the pieces of the next shard.
    pub fn add(&mut self, shard: &Shard) -> Result<(), String> {
        let entries: Vec<Entry> = serde_json::from_slice(&shard.index)
            .map_err(|e| format!("index: {}", e.to_string().escape_debug()))?;
        let mut offset = 0usize;
        for entry in entries {
            let end = offset
                .checked_add(entry.len)
                .filter(|end| *end <= shard.data.len())
                .ok_or_else(|| format!("{}: piece beyond the shard's data", shown(&entry.path)))?;
            let piece = &shard.data[offset..end];
            offset = end;
            let continues = matches!(&self.open, Some((path, ..)) if *path == entry.path);
            if !continues {
                self.close()?;
                self.open = Some((entry.path.clone(), entry.secret, Vec::new(), entry.total));
            }
            if let Some((_, _, bytes, total)) = &mut self.open {
                bytes.extend_from_slice(piece);
                if bytes.len() > *total || *total != entry.total {
                    return Err(format!(
                        "{}: pieces longer than the file",
                        shown(&entry.path)
                    ));
                }
            }
        }
        if offset != shard.data.len() {
            return Err("data beyond the index's pieces".into());
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), String> {
        if let Some((path, secret, bytes, total)) = self.open.take() {
            if bytes.len() != total {
                return Err(format!(
                    "{}: {} of {total} bytes",
                    shown(&path),
                    bytes.len()
                ));
            }
            if self.files.file(&path).is_some() {
                return Err(format!("{}: in two places", shown(&path)));
            }
            let file = if secret {
                File::secret(bytes)
            } else {
                File::public(bytes)
            };
            self.files
                .insert(path, file)
                .map_err(|e| e.to_string().escape_debug().to_string())?;
        }
        Ok(())
    }

    /// The files, once every shard was added.
    pub fn finish(mut self) -> Result<Files, String> {
        self.close()?;
        Ok(self.files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unpack(shards: &[Shard]) -> Files {
        let mut unpacker = Unpacker::new();
        for shard in shards {
            unpacker.add(shard).unwrap();
        }
        unpacker.finish().unwrap()
    }

    /// What a 10,000-leaf signer holds, by size: per leaf a request, a
    /// certificate, a key and the two in one, and a state file of several
    /// MiB that must be cut across shards.
    fn ten_thousand_leaves() -> Files {
        let mut files = Files::new();
        for i in 0..10_000 {
            let name = format!("certs/leaf-{i:05}");
            let fill = |n: usize, b: u8| vec![b.wrapping_add(i as u8); n];
            files
                .insert(format!("{name}/tls.crt"), File::public(fill(1_400, 1)))
                .unwrap();
            files
                .insert(format!("{name}/tls.key"), File::secret(fill(250, 2)))
                .unwrap();
            files
                .insert(format!("{name}/tls.pem"), File::secret(fill(1_650, 3)))
                .unwrap();
            files
                .insert(
                    format!("leaf-requests/leaf-{i:05}.json"),
                    File::public(fill(200, 4)),
                )
                .unwrap();
        }
        let state: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
        files.insert("state.json", File::public(state)).unwrap();
        files.insert("empty", File::public(Vec::new())).unwrap();
        files.insert_dir("certs").unwrap();
        files
    }

    #[test]
    fn ten_thousand_leaves_fit_shards_under_the_secret_limit_and_read_back_whole() {
        let files = ten_thousand_leaves();
        let shards = pack(&files).unwrap();
        let total: usize = files.iter().map(|(_, f)| f.contents.len()).sum();
        for (i, shard) in shards.iter().enumerate() {
            assert!(shard.size() <= SHARD_BUDGET, "shard {i}: {}", shard.size());
            assert!(shard.size() < MAX_SECRET_DATA);
        }
        // Close to full: at most one shard more than the bytes need, plus
        // the indexes' share.
        let minimum = total.div_ceil(SHARD_BUDGET);
        assert!(
            shards.len() <= minimum + minimum / 4 + 1,
            "{} shards for {total} bytes",
            shards.len()
        );
        let mut read = unpack(&shards);
        read.insert_dir("certs").unwrap();
        assert_eq!(read, files);
        let secret = read.file("certs/leaf-00042/tls.key").unwrap();
        assert!(secret.secret);
    }

    #[test]
    fn a_missing_or_reordered_shard_is_an_error_not_a_short_file() {
        let mut files = Files::new();
        files
            .insert("big", File::public(vec![7u8; 2 * SHARD_BUDGET]))
            .unwrap();
        files.insert("small", File::public(b"x".to_vec())).unwrap();
        let shards = pack(&files).unwrap();
        assert_eq!(shards.len(), 3);
        let mut unpacker = Unpacker::new();
        unpacker.add(&shards[0]).unwrap();
        // Shard 1 lost: the big file stops short.
        assert!(unpacker.add(&shards[2]).is_err());
        let mut unpacker = Unpacker::new();
        unpacker.add(&shards[0]).unwrap();
        unpacker.add(&shards[1]).unwrap();
        unpacker.add(&shards[1]).unwrap_err();
        // Bytes beyond the index.
        let mut padded = shards[2].clone();
        padded.data.push(0);
        assert!(Unpacker::new().add(&padded).is_err());
        assert_ne!(padded.digest(), shards[2].digest());
        assert_eq!(unpack(&shards), files);
    }

    #[test]
    fn no_files_is_one_empty_shard() {
        let shards = pack(&Files::new()).unwrap();
        assert_eq!(shards.len(), 1);
        assert_eq!(unpack(&shards), Files::new());
    }

    proptest::proptest! {
        /// A shard of any bytes is refused or read, never a panic.
        #[test]
        fn any_shard_bytes_are_read_or_refused_without_panic(
            index in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            len in 0usize..100,
            total in proptest::num::usize::ANY,
        ) {
            let mut unpacker = Unpacker::new();
            let _ = unpacker.add(&Shard { index: index.clone(), data: data.clone() });
            let _ = unpacker.finish();
            let entry = format!(r#"[{{"path":"a","secret":false,"len":{len},"total":{total}}}]"#);
            let mut unpacker = Unpacker::new();
            let shard = Shard { index: entry.into_bytes(), data };
            if unpacker.add(&shard).is_ok() {
                let _ = unpacker.finish();
            }
        }
    }
}
