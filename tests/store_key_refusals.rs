//! A directory store holding sealed values (its CA key) refuses a wrong
//! store key on every command, and a missing one on every command that
//! uses private material or writes, even where the document a command
//! reads holds nothing sealed (the key ring, whose one private file is
//! published in clear): exit 1, one line, the store byte-identical. `pki
//! export` publishes nothing the other commands refuse, and without the
//! key it writes no private file of a sealed store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::{File, FsStore, SealedStore, SealingKeys, Store, StoreKey};
use rand_core::SeedableRng;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::cli::{exited_with, snapshot, succeeded};

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";

fn pki_with(key: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pki"));
    cmd.args(args).env_remove("PKI_STORE_KEY_FILE");
    if let Some(key) = key {
        cmd.env("PKI_STORE_KEY_FILE", key);
    }
    cmd.output().expect("run pki")
}

fn ok_with(key: Option<&Path>, args: &[&str]) -> String {
    succeeded(args, pki_with(key, args))
}

struct Sealed {
    tmp: tempfile::TempDir,
    /// The store's key.
    key: PathBuf,
    /// Another key.
    other: PathBuf,
    dir: PathBuf,
}

impl Sealed {
    /// A directory store with a signer, a leaf and a key ring, sealed under
    /// `key`, and a claims file and a token signed with its active key.
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let new_key = |name: &str| {
            let path = tmp.path().join(name);
            ok_with(None, &["store-key", "new", path.to_str().unwrap()]);
            path
        };
        let (key, other) = (new_key("store.key"), new_key("other.key"));
        let dir = tmp.path().join("store");
        let d = dir.to_str().unwrap();
        let k = Some(key.as_path());
        ok_with(k, &["init", d, "--now", T0]);
        ok_with(k, &["issue", d, "web", "--dns", "web.ns.svc", "--now", T0]);
        ok_with(k, &["keys", "init", d, "--now", T0]);
        std::fs::write(tmp.path().join("claims.json"), r#"{"sub": "x"}"#).unwrap();
        let claims = tmp.path().join("claims.json");
        let token = ok_with(
            k,
            &["keys", "sign", d, "--claims", claims.to_str().unwrap()],
        );
        std::fs::write(tmp.path().join("token"), token.trim()).unwrap();
        assert!(
            std::fs::read(dir.join("signer/tls.key"))
                .unwrap()
                .starts_with(b"PKISEAL")
        );
        Sealed {
            tmp,
            key,
            other,
            dir,
        }
    }

    fn path(&self, name: &str) -> String {
        self.tmp.path().join(name).display().to_string()
    }
}

/// Every file under `dir`, with its mode.
fn exported(dir: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    support::cli::tree(dir)
        .into_keys()
        .map(|path| {
            let mode = std::fs::metadata(dir.join(&path))
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            (path, mode)
        })
        .collect()
}

#[test]
fn keys_commands_and_export_refuse_a_wrong_or_missing_key_beside_sealed_values() {
    let s = Sealed::new();
    let d = s.dir.to_str().unwrap();
    let (claims, token, out) = (s.path("claims.json"), s.path("token"), s.path("out"));
    let before = snapshot(&s.dir);
    let rotate_forced = ["keys", "rotate", d, "--force", "drill", "--now", T1];
    let rotate = ["keys", "rotate", d, "--now", T1];
    let sign = ["keys", "sign", d, "--claims", &claims];
    let status = ["keys", "status", d, "--now", T1];
    let verify = ["keys", "verify", d, "--token", &token];
    let export = ["export", d, &out];
    let wrong = Some(s.other.as_path());
    let cases: Vec<(Option<&Path>, &[&str])> = vec![
        (wrong, &rotate_forced),
        (wrong, &rotate),
        (wrong, &sign),
        (wrong, &status),
        (wrong, &verify),
        (wrong, &export),
        (None, &rotate_forced),
        (None, &rotate),
        (None, &sign),
    ];
    for (key, args) in cases {
        let err = exited_with(1, args, &pki_with(key, args));
        assert!(
            err.contains("signer/tls.key") && err.contains("sealed"),
            "{key:?} {args:?}: {err}"
        );
        assert!(snapshot(&s.dir) == before, "{key:?} {args:?} wrote");
        assert!(!Path::new(&out).exists(), "{key:?} {args:?} exported");
    }
    // Public material still reads without a key, as consumers read it.
    ok_with(None, &status);
    ok_with(None, &verify);
    assert!(snapshot(&s.dir) == before);
    // And with the key everything works.
    ok_with(Some(&s.key), &rotate_forced);
    ok_with(Some(&s.key), &sign);
}

#[test]
fn export_without_the_key_writes_no_private_file_of_a_sealed_directory_store() {
    let s = Sealed::new();
    let d = s.dir.to_str().unwrap();
    let out = s.tmp.path().join("public");
    ok_with(None, &["export", d, out.to_str().unwrap()]);
    let files = exported(&out);
    for public in [
        "ca-bundle.crt",
        "signer/tls.crt",
        "certs/web/tls.crt",
        "keys/public.pem",
        "keys/jwks.json",
    ] {
        assert!(
            files.iter().any(|(p, _)| p == public),
            "{public}: {files:?}"
        );
    }
    for (path, mode) in &files {
        let bytes = std::fs::read(out.join(path)).unwrap();
        assert!(
            !bytes.windows(11).any(|w| w == b"PRIVATE KEY") && !bytes.starts_with(b"PKISEAL"),
            "{path} is private"
        );
        assert_eq!(*mode, 0o644, "{path}");
    }

    // With the key: every private file, in clear, 0600.
    let full = s.tmp.path().join("full");
    ok_with(Some(&s.key), &["export", d, full.to_str().unwrap()]);
    let files = exported(&full);
    for private in ["signer/tls.key", "certs/web/tls.key", "keys/active.key"] {
        let bytes = std::fs::read(full.join(private)).unwrap();
        assert!(
            bytes.starts_with(b"-----BEGIN PRIVATE KEY-----"),
            "{private}"
        );
        assert!(files.contains(&(private.to_string(), 0o600)), "{private}");
    }
}

/// Replaces the signer's CA key with another key, through the store (so
/// every digest is consistent), sealed under `key` when given.
fn replace_ca_key(dir: &Path, key: Option<&Path>) {
    let fs = FsStore::open(dir).unwrap();
    let keys = match key {
        Some(path) => {
            SealingKeys::single(StoreKey::from_file("key", &std::fs::read(path).unwrap()).unwrap())
        }
        None => SealingKeys::none(),
    };
    let rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let store = SealedStore::new(fs, keys, rng, true);
    let (mut files, revision) = store.get("signer").unwrap().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(8);
    let other = pki_core::PrivateKey::generate(pki_core::KeyAlgorithm::EcdsaP256, &mut rng)
        .unwrap()
        .to_pkcs8_pem()
        .unwrap();
    files
        .insert("signer/tls.key", File::secret(other.as_bytes()))
        .unwrap();
    store.put("signer", Some(&revision), &files).unwrap();
}

#[test]
fn export_refuses_a_store_whose_ca_key_is_not_its_certificates() {
    // A sealed store, exported with its key.
    let s = Sealed::new();
    replace_ca_key(&s.dir, Some(&s.key));
    let d = s.dir.to_str().unwrap();
    let out = s.path("out");
    let refused = |key: Option<&Path>, dir: &str| {
        let args = ["export", dir, &out];
        let err = exited_with(1, &args, &pki_with(key, &args));
        assert!(!Path::new(&out).exists(), "exported: {err}");
        err
    };
    let err = refused(Some(&s.key), d);
    // What status says of the store, after the store's name.
    let status = ["status", d, "--now", T1];
    let why = exited_with(1, &status, &pki_with(Some(&s.key), &status));
    let why = why.split_once("store: ").unwrap().1.trim();
    assert!(why.contains("signer/tls.key"), "{why}");
    assert!(err.contains(why), "export refuses it as status does: {err}");

    // A store that never sealed anything, exported without a key.
    let tmp = tempfile::tempdir().unwrap();
    let clear = tmp.path().join("clear");
    let c = clear.to_str().unwrap();
    ok_with(None, &["init", c, "--now", T0]);
    replace_ca_key(&clear, None);
    refused(None, c);
}

#[test]
fn the_key_ring_beside_a_sealed_ca_set_alone_refuses_another_key() {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("store.key");
    let other = tmp.path().join("other.key");
    for k in [&key, &other] {
        ok_with(None, &["store-key", "new", k.to_str().unwrap()]);
    }
    let dir = tmp.path().join("store");
    let d = dir.to_str().unwrap();
    let set_init = [
        "set",
        "init",
        d,
        "--ca",
        "cluster:serving+client",
        "--now",
        T0,
    ];
    ok_with(Some(&key), &set_init);
    ok_with(Some(&key), &["keys", "init", d, "--now", T0]);
    let before = snapshot(&dir);
    let rotate = ["keys", "rotate", d, "--force", "drill", "--now", T1];
    let err = exited_with(1, &rotate, &pki_with(Some(&other), &rotate));
    assert!(
        err.contains("set/cas/cluster/ca.key") && err.contains("sealed"),
        "{err}"
    );
    assert!(snapshot(&dir) == before, "a refused rotation wrote");
    ok_with(Some(&key), &rotate);
}
