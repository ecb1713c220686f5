//! The `fs_manifest` target's store: a directory store holding a signer
//! with two leaves, written once per process, whose manifest, index and
//! manifest shards an input replaces (and each input's changes undone).
//!
//! Input framing (NUL-separated parts): `.manifest.json`, `.index.json`,
//! then any number of shards, each part a bucket byte (the shard
//! `.manifest/XX.json`, XX its two hex digits) followed by the shard's
//! bytes. An empty part keeps the file as written.

use pki_rotate::{
    Driver, Engine, FsStore, LeafRequest, SignerEngine, SignerInput, SignerPolicy, Store,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The files an input may replace, relative to the live generation.
pub const MANIFEST: &str = ".manifest.json";
/// The generation's index (revision and summary per key).
pub const INDEX: &str = ".index.json";

/// The store's key and the paths a read by parts asks for.
pub const KEY: &str = "signer";
/// Two leaves the store holds (one read by parts, one not).
pub const LEAVES: [&str; 2] = ["web", "api"];

/// The store the target reads, and its document's files as written.
pub struct FsFixture {
    /// The store's root.
    pub root: PathBuf,
    /// The live generation's directory.
    pub generation: PathBuf,
    /// Every file the document wrote, as a whole read returns them.
    pub files: pki_rotate::Files,
}

/// The fixture, made once per process under the system's temporary
/// directory (one directory per process, so parallel fuzzing jobs do not
/// share it).
pub fn fs_fixture() -> &'static FsFixture {
    static FIXTURE: OnceLock<FsFixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("pki-fuzz-fs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut rng = ChaCha20Rng::seed_from_u64(crate::SEED);
        pki_core::CryptoProvider::rust_crypto()
            .install_default()
            .ok();
        let mut s =
            pki_rotate::SignerState::new("fuzz-ca", SignerPolicy::default(), crate::NOW, &mut rng)
                .expect("a signer");
        for name in LEAVES {
            s.request_leaf(name, LeafRequest::server(vec![format!("{name}.ns.svc")]))
                .expect("a leaf request");
        }
        let doc = SignerEngine::step(&s, &SignerInput::default(), crate::NOW, &mut rng)
            .expect("the leaves are issued")
            .into_document();
        let store = FsStore::open_or_create(&root).expect("a directory store");
        Driver::new(&store)
            .create_at::<SignerEngine>(KEY, &doc, crate::NOW)
            .expect("the document is written");
        let (files, _) = store
            .get(KEY)
            .expect("the store reads back")
            .expect("the document is there");
        let generation = std::fs::canonicalize(root.join(".data")).expect("the live generation");
        FsFixture {
            root,
            generation,
            files,
        }
    })
}

/// Splits an input into (manifest, index, shards by bucket).
pub fn split_fs_input(data: &[u8]) -> (&[u8], &[u8], Vec<(u8, &[u8])>) {
    let mut parts = data.split(|b| *b == 0);
    let manifest = parts.next().unwrap_or_default();
    let index = parts.next().unwrap_or_default();
    let shards = parts
        .filter_map(|p| p.split_first().map(|(bucket, bytes)| (*bucket, bytes)))
        .collect();
    (manifest, index, shards)
}

/// The path of shard `bucket` in `generation`.
pub fn shard_path(generation: &Path, bucket: u8) -> PathBuf {
    generation
        .join(".manifest")
        .join(format!("{bucket:02x}.json"))
}

/// Where a shard part of the input goes: the identity records of shard
/// `bucket` when its bytes start as records do (`pki-identities`), else
/// the shard itself.
pub fn part_path(generation: &Path, bucket: u8, bytes: &[u8]) -> PathBuf {
    if bytes.starts_with(b"pki-identities") {
        generation
            .join(".manifest")
            .join(format!("{bucket:02x}.ids"))
    } else {
        shard_path(generation, bucket)
    }
}
