//! A directory store's manifest (`.manifest.json`), index (`.index.json`),
//! manifest shards (`.manifest/XX.json`) and their identity records
//! (`.manifest/XX.ids`, a part that starts `pki-identities`) from
//! arbitrary bytes, read through the store as a controller and the CLI
//! read it, and checked as `status --check` checks it.
//!
//! Input framing (`pki_fuzz::split_fs_input`): NUL-separated parts, the
//! manifest, the index, then shards (a bucket byte, then the shard); an
//! empty part keeps the file as written. The store is a signer with two
//! leaves (`pki_fuzz::fs_fixture`); each input's files are put back after
//! it.
//!
//! Checks: no panic; every refusal says something on one line; what a
//! whole read, a read by parts, the summary and the driver's load return
//! is the store's own: a file a read returns that the document wrote has
//! the bytes it wrote (the files themselves are never changed, and each is
//! checked against the digest its shard records); a read by parts agrees
//! with the whole read on every file both return.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_fuzz::{INDEX, KEY, LEAVES, MANIFEST, fs_fixture, part_path, split_fs_input};
use pki_rotate::{Driver, FsStore, SignerEngine, Store};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn said(e: &dyn std::fmt::Display) {
    let message = e.to_string();
    assert!(!message.trim().is_empty(), "an error says something");
    assert!(!message.contains('\n'), "one line: {message}");
}

/// Puts bytes at a path and remembers how to undo it.
struct Undo(Vec<(PathBuf, Option<Vec<u8>>)>);

impl Undo {
    fn put(&mut self, path: PathBuf, bytes: &[u8]) {
        let before = std::fs::read(&path).ok();
        std::fs::write(&path, bytes).expect("the fixture is writable");
        self.0.push((path, before));
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        for (path, before) in self.0.drain(..).rev() {
            match before {
                Some(bytes) => std::fs::write(&path, bytes).expect("put back"),
                None => std::fs::remove_file(&path).expect("removed"),
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let fixture = fs_fixture();
    let (manifest, index, shards) = split_fs_input(data);
    let mut undo = Undo(Vec::new());
    if !manifest.is_empty() {
        undo.put(fixture.generation.join(MANIFEST), manifest);
    }
    if !index.is_empty() {
        undo.put(fixture.generation.join(INDEX), index);
    }
    for (bucket, bytes) in shards.into_iter().take(8) {
        undo.put(part_path(&fixture.generation, bucket, bytes), bytes);
    }

    let store = match FsStore::open(&fixture.root) {
        Ok(store) => store,
        Err(e) => return said(&e),
    };
    let whole = match store.get(KEY) {
        Ok(got) => got,
        Err(e) => {
            said(&e);
            None
        }
    };
    if let Some((files, _)) = &whole {
        for (path, file) in files.iter() {
            if let Some(written) = fixture.files.file(path) {
                assert_eq!(file, written, "{path}");
            }
        }
    }
    let paths: BTreeSet<String> = [
        "pki-state.json".to_string(),
        format!("certs/{}/tls.crt", LEAVES[0]),
        format!("leaf-requests/{}.json", LEAVES[0]),
        "certs/absent/tls.crt".to_string(),
    ]
    .into();
    match store.get_paths(KEY, &paths) {
        Ok(Some((files, _))) => {
            for (path, file) in files.iter() {
                if let Some(written) = fixture.files.file(path) {
                    assert_eq!(file, written, "{path}");
                }
                if let Some((all, _)) = &whole
                    && let Some(same) = all.file(path)
                {
                    assert_eq!(file, same, "{path}");
                }
            }
        }
        Ok(None) => {}
        Err(e) => said(&e),
    }
    if let Err(e) = store.get_summary(KEY) {
        said(&e);
    }
    // `status --check`'s look at every file, through the records.
    if let Err(e) = store.verify(KEY) {
        said(&e);
    }
    let driver = Driver::new(&store);
    match driver.load::<SignerEngine>(KEY) {
        Ok((doc, _)) => assert!(doc.leaves.len() <= LEAVES.len()),
        Err(e) => said(&e),
    }
    if let Err(e) = driver.idle::<SignerEngine>(KEY, pki_fuzz::NOW) {
        said(&e);
    }
    drop(undo);
});
