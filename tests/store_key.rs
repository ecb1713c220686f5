//! Private material sealed at rest through the CLI (`PKI_STORE_KEY_FILE`,
//! `pki store-key`): after init, issue, rotation, CA-set steps, key-ring
//! rotation and a credential mint, a dump of a real etcd keyspace holds no
//! private key and no credential in clear, and a directory store holds
//! them only in the files consumers read; without the key, or with another,
//! commands are refused with one line and nothing is written; export
//! writes private files in clear only with the key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::cli::{exited_with, snapshot, stderr, succeeded};
use support::etcd;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";
const PEM_PRIVATE: &[u8] = b"PRIVATE KEY";

/// Runs `pki ARGS` with `PKI_STORE_KEY_FILE` set to `key` (or unset).
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

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

struct Setup {
    tmp: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        Setup {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// A new key file.
    fn key(&self, name: &str) -> PathBuf {
        let path = self.path(name);
        ok_with(None, &["store-key", "new", path.to_str().unwrap()]);
        path
    }

    /// Mint and revoke hooks: each mint prints a new credential and logs
    /// it outside the store, so the test knows every credential's bytes.
    fn hooks(&self) -> (String, String) {
        let log = self.path("minted.log");
        let mint = self.path("mint.sh");
        let revoke = self.path("revoke.sh");
        std::fs::write(
            &mint,
            format!(
                "#!/bin/sh\nv=cred-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \\n')\necho \"$v\" >> {}\necho \"$v\"\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::write(&revoke, "#!/bin/sh\ncat > /dev/null\n").unwrap();
        for f in [&mint, &revoke] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        (mint.display().to_string(), revoke.display().to_string())
    }

    /// The credentials the mint hook printed.
    fn minted(&self) -> Vec<Vec<u8>> {
        std::fs::read_to_string(self.path("minted.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.as_bytes().to_vec())
            .collect()
    }

    /// Every kind of document, through every step that makes private
    /// material: init, issue, a forced rotation, a CA set started, the key
    /// ring rotated, a credential minted and rotated.
    fn exercise(&self, key: &Path, store: &str) {
        let k = Some(key);
        ok_with(k, &["init", store, "--now", T0]);
        ok_with(
            k,
            &["issue", store, "web", "--dns", "web.ns.svc", "--now", T0],
        );
        ok_with(k, &["rotate", store, "--force", "drill", "--now", T0]);
        ok_with(
            k,
            &[
                "set",
                "init",
                store,
                "--ca",
                "cluster:serving+client",
                "--now",
                T0,
            ],
        );
        ok_with(
            k,
            &[
                "set",
                "issue",
                store,
                "api",
                "--ca",
                "cluster",
                "--serving",
                "--dns",
                "api.example",
                "--target",
                "cp",
                "--now",
                T0,
            ],
        );
        ok_with(k, &["set", "start", store, "--now", T0]);
        ok_with(k, &["keys", "init", store, "--now", T0]);
        ok_with(
            k,
            &["keys", "rotate", store, "--force", "drill", "--now", T0],
        );
        let (mint, revoke) = self.hooks();
        ok_with(
            k,
            &[
                "cred",
                "init",
                store,
                "db",
                "--expire",
                "2h",
                "--grace",
                "10m",
                "--mint-cmd",
                &mint,
                "--revoke-cmd",
                &revoke,
                "--now",
                T0,
            ],
        );
        ok_with(k, &["cred", "reconcile", store, "--now", T0]);
        ok_with(
            k,
            &["cred", "reconcile", store, "--now", "2026-01-01T02:00:00Z"],
        );
        assert!(self.minted().len() >= 2, "{:?}", self.minted());
    }
}

#[test]
fn store_key_new_writes_a_0600_key_in_a_0700_directory_whatever_the_umask() {
    let s = Setup::new();
    let key = s.path("keys/sub/store.key");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000 && exec {} store-key new {}",
            env!("CARGO_BIN_EXE_pki"),
            key.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(key.parent().unwrap()), 0o700);
    let before = std::fs::read(&key).unwrap();
    let args = ["store-key", "new", key.to_str().unwrap()];
    let err = exited_with(1, &args, &pki_with(None, &args));
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&key).unwrap(), before);

    // A key file others can read is refused.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let none = s.path("none");
    let args = ["init", none.to_str().unwrap()];
    let err = exited_with(1, &args, &pki_with(Some(&key), &args));
    assert!(err.contains("chmod 600"), "{err}");
    assert!(!none.exists(), "nothing made");
}

#[test]
fn an_etcd_keyspace_holds_no_private_key_or_credential_in_clear() {
    let server = etcd::Etcd::start();
    let url = server.url("sealed");
    let s = Setup::new();
    let key = s.key("store.key");
    s.exercise(&key, &url);

    let dump = server.dump("");
    assert!(!dump.is_empty());
    let minted = s.minted();
    for (k, value, _) in &dump {
        assert!(!contains(value, PEM_PRIVATE), "{k} holds a PEM private key");
        for cred in &minted {
            assert!(!contains(value, cred), "{k} holds a minted credential");
        }
    }

    // Without the key, or with another: one line, exit 1, nothing written.
    let other = s.key("other.key");
    for k in [None, Some(other.as_path())] {
        for args in [
            vec!["status", url.as_str()],
            vec!["rotate", url.as_str(), "--force", "again", "--now", T1],
            vec![
                "keys",
                "rotate",
                url.as_str(),
                "--force",
                "again",
                "--now",
                T1,
            ],
            vec!["set", "status", url.as_str(), "--now", T1],
            vec!["cred", "reconcile", url.as_str(), "--now", T1],
            // A new document beside sealed ones needs their key too.
            vec![
                "cred",
                "init",
                url.as_str(),
                "other",
                "--expire",
                "2h",
                "--grace",
                "10m",
                "--mint-cmd",
                "true",
                "--revoke-cmd",
                "true",
                "--now",
                T1,
            ],
        ] {
            let err = exited_with(1, &args, &pki_with(k, &args));
            assert!(err.contains("sealed"), "{args:?}: {err}");
        }
    }
    assert_eq!(server.dump(""), dump, "a refused command wrote nothing");

    // Export without the key: public files only; with it, private files
    // in clear (0600).
    let public = s.path("public");
    ok_with(None, &["export", &url, public.to_str().unwrap()]);
    assert!(public.join("ca-bundle.crt").exists());
    assert!(public.join("certs/web/tls.crt").exists());
    assert!(!public.join("certs/web/tls.key").exists());
    assert!(!public.join("signer/tls.key").exists());
    let full = s.path("full");
    ok_with(Some(&key), &["export", &url, full.to_str().unwrap()]);
    let leaf_key = full.join("certs/web/tls.key");
    assert!(
        std::fs::read(&leaf_key)
            .unwrap()
            .starts_with(b"-----BEGIN PRIVATE KEY-----")
    );
    assert_eq!(
        std::fs::metadata(&leaf_key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let current = std::fs::read(full.join("creds/db/current")).unwrap();
    assert!(
        minted.contains(&current),
        "the current credential, in clear"
    );
}

/// The files consumers read where they are published, and may hold a
/// private key or credential in clear.
fn published_private(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    // Under .data's generation or the spare: the path after it.
    let parts = match parts.first() {
        Some(p) if p.starts_with(".gen-") || *p == ".spare" => &parts[1..],
        _ => &parts[..],
    };
    matches!(
        parts,
        ["certs", _, "tls.key" | "tls.pem"]
            | ["targets", _, "certs", _, "tls.key"]
            | ["keys", "active.key"]
            | ["creds", _, "current" | "old"]
    )
}

#[test]
fn a_directory_store_seals_all_but_the_files_consumers_read() {
    let s = Setup::new();
    let key = s.key("store.key");
    let dir = s.path("store");
    let dir_s = dir.to_str().unwrap();
    s.exercise(&key, dir_s);

    let minted = s.minted();
    let files = snapshot(&dir);
    let mut published = 0;
    for (path, (mode, content)) in &files {
        let clear_private =
            contains(content, PEM_PRIVATE) || minted.iter().any(|c| contains(content, c));
        if clear_private {
            assert!(
                published_private(path),
                "{path} holds private material in clear"
            );
            assert!(mode.ends_with("600"), "{path}: {mode}");
            published += 1;
        }
    }
    assert!(published > 0);
    assert!(
        std::fs::read(dir.join("signer/tls.key"))
            .unwrap()
            .starts_with(b"PKISEAL")
    );

    // Without the key, or with another: one line, exit 1, nothing written.
    let other = s.key("other.key");
    for k in [None, Some(other.as_path())] {
        for args in [
            vec!["rotate", dir_s, "--force", "again", "--now", T1],
            vec!["set", "advance", dir_s, "--override", "x", "--now", T1],
            vec!["cred", "reconcile", dir_s, "--now", T1],
        ] {
            let err = exited_with(1, &args, &pki_with(k, &args));
            assert!(err.contains("sealed"), "{args:?}: {err}");
        }
    }
    assert_eq!(snapshot(&dir), files, "a refused command wrote nothing");
    // Reading public material needs no key.
    ok_with(None, &["keys", "status", dir_s, "--now", T1]);
}

#[test]
fn a_capture_waiting_for_the_store_is_sealed_and_removed_once_the_store_holds_it() {
    let s = Setup::new();
    let key = s.key("store.key");
    let dir = s.path("store");
    let d = dir.to_str().unwrap();
    // The hook prints the credential, then makes the store unusable
    // (writable by group), so the credential waits in its capture.
    let mint = s.path("mint.sh");
    std::fs::write(
        &mint,
        format!("#!/bin/sh\necho cred-5e1a7c0ffee\nchmod g+w {d}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&mint, std::fs::Permissions::from_mode(0o700)).unwrap();
    let k = Some(key.as_path());
    // `cred init` mints at once: the credential is recorded, its store
    // write refused.
    let init = [
        "cred",
        "init",
        d,
        "db",
        "--expire",
        "2h",
        "--grace",
        "10m",
        "--mint-cmd",
        mint.to_str().unwrap(),
        "--revoke-cmd",
        "true",
        "--now",
        T0,
    ];
    exited_with(1, &init, &pki_with(k, &init));
    let args = ["cred", "reconcile", d, "--now", T0];
    let capture = dir.join(".cred-capture/db/1-1.out");
    let held = std::fs::read(&capture).unwrap();
    assert!(held.starts_with(b"PKISEAL"), "the capture is sealed");
    assert!(!contains(&held, b"cred-5e1a7c0ffee"));

    // Once the store is usable, the next run adopts the sealed capture
    // (the hook does not run again), then removes it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(&mint, "#!/bin/sh\nexit 1\n").unwrap();
    ok_with(k, &args);
    assert!(!capture.exists());
    assert_eq!(
        std::fs::read(dir.join("creds/db/current")).unwrap(),
        b"cred-5e1a7c0ffee"
    );
}
