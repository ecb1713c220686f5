//! A mint hook that prints more than the cap (`--max-output`, 64 KiB by
//! default) failed, and what it minted must still be revoked: its revoke
//! hook gets the whole output, not the first 64 KiB (issue 31, item 9).
//! What is past the cap waits in a private file of the capture directory
//! (sealed when the store has a key) until the revocation is recorded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::cli::{stderr, succeeded};

const T0: &str = "2026-01-01T00:00:00Z";
// T0 + 31 days: the credential (720h) is due.
const DUE: &str = "2026-02-01T00:00:00Z";
// An hour later: past the backoff of a failed revocation.
const RETRY: &str = "2026-02-01T01:00:00Z";
const CAP: usize = 64 * 1024;

/// A store with one credential, `db`, whose hooks are shell scripts
/// driven by files in `root`: `flood` makes the mint print a credential
/// line, 200 KiB and an end line; `revoke-fails` makes the revocation
/// fail. Each revocation's stdin is kept as `revoked.N`.
struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dir: String,
    key: Option<PathBuf>,
}

impl Setup {
    fn new(sealed: bool) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let r = root.display().to_string();
        std::fs::write(root.join("filler"), "x".repeat(200 * 1024)).unwrap();
        std::fs::write(
            root.join("mint.sh"),
            format!(
                "n=$(cat {r}/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > {r}/count\n\
                 printf 'cred-%s\\n' \"$n\"\n\
                 if [ -f {r}/flood ]; then cat {r}/filler; printf '\\nend-of-output\\n'; fi\n"
            ),
        )
        .unwrap();
        std::fs::write(
            root.join("revoke.sh"),
            format!(
                "n=$(ls {r} | grep -c '^revoked\\.')\n\
                 cat > {r}/revoked.$n\n\
                 if [ -f {r}/revoke-fails ]; then echo 'revocation service down' >&2; exit 1; fi\n"
            ),
        )
        .unwrap();
        let key = sealed.then(|| root.join("store.key"));
        let setup = Setup {
            dir: root.join("pki").display().to_string(),
            _tmp: tmp,
            root,
            key,
        };
        if let Some(key) = &setup.key {
            setup.ok(&["store-key", "new", key.to_str().unwrap()]);
        }
        let (mint, revoke) = (format!("sh {r}/mint.sh"), format!("sh {r}/revoke.sh"));
        let dir = setup.dir.clone();
        setup.ok(&[
            "cred",
            "init",
            &dir,
            "db",
            "--expire",
            "720h",
            "--grace",
            "1h",
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            &revoke,
            "--now",
            T0,
        ]);
        setup
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pki"));
        cmd.args(args).env_remove("PKI_STORE_KEY_FILE");
        if let Some(key) = &self.key {
            cmd.env("PKI_STORE_KEY_FILE", key);
        }
        cmd.output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        succeeded(args, self.run(args))
    }

    fn knob(&self, name: &str, on: bool) {
        let path = self.root.join(name);
        if on {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }

    /// What each revocation got on stdin, in order.
    fn revoked(&self) -> Vec<Vec<u8>> {
        (0..)
            .map(|n| self.root.join(format!("revoked.{n}")))
            .take_while(|p| p.exists())
            .map(|p| std::fs::read(p).unwrap())
            .collect()
    }

    fn capture(&self) -> PathBuf {
        Path::new(&self.dir).join(".cred-capture/db")
    }

    /// The spill files in the capture directory.
    fn spills(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.capture())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "spill"))
            .collect()
    }
}

/// What the flooding mint of `cred-2` prints.
fn flooded_output() -> Vec<u8> {
    let mut out = b"cred-2\n".to_vec();
    out.extend("x".repeat(200 * 1024).bytes());
    out.extend(b"\nend-of-output\n");
    out
}

/// `got`, a revocation's stdin, is the flooded output up to where the
/// hook was stopped (all of it unless stopped while it wrote), which is
/// past the cap: more than the store keeps.
fn assert_whole_output(got: &[u8]) {
    let got = got.trim_ascii_end();
    assert!(
        got.len() > CAP,
        "the revoke hook got {} bytes, no more than the cap",
        got.len()
    );
    assert!(
        flooded_output().starts_with(got),
        "the revoke hook got other bytes than the mint printed"
    );
}

#[test]
fn the_revoke_hook_of_a_mint_over_the_cap_gets_its_whole_output_from_a_private_spill() {
    for sealed in [false, true] {
        let s = Setup::new(sealed);
        s.knob("flood", true);
        s.knob("revoke-fails", true);
        let o = s.run(&["cred", "reconcile", &s.dir, "--now", DUE]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("printed more than 64 KiB"),
            "{}",
            stderr(&o)
        );
        // The revocation ran at once, failed, and had the whole output.
        let revoked = s.revoked();
        assert_eq!(revoked.len(), 1, "sealed: {sealed}");
        assert_whole_output(&revoked[0]);
        // The rest waits for the retry, private, and sealed with a key.
        let spills = s.spills();
        assert_eq!(spills.len(), 1, "sealed: {sealed}");
        let meta = std::fs::metadata(&spills[0]).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let capture_mode = std::fs::metadata(s.capture()).unwrap().permissions().mode();
        assert_eq!(capture_mode & 0o777, 0o700);
        let spilled = std::fs::read(&spills[0]).unwrap();
        assert_eq!(
            spilled.windows(64).any(|w| w == [b'x'; 64]),
            !sealed,
            "sealed: {sealed}"
        );
        // The store keeps no more than the cap (sealed: and the seal's
        // header and tag).
        let seal = if sealed { 64 } else { 0 };
        for entry in std::fs::read_dir(Path::new(&s.dir).join("creds/db")).unwrap() {
            let len = entry.unwrap().metadata().unwrap().len();
            assert!(len <= (CAP + seal) as u64, "{len}");
        }

        // The revocation works again: the whole output again, and the
        // spill is gone once the revocation is recorded.
        s.knob("flood", false);
        s.knob("revoke-fails", false);
        s.ok(&["cred", "reconcile", &s.dir, "--now", RETRY]);
        let revoked = s.revoked();
        assert!(revoked.len() >= 2, "sealed: {sealed}");
        assert_whole_output(&revoked[1]);
        assert_eq!(revoked[0], revoked[1], "sealed: {sealed}");
        assert!(s.spills().is_empty(), "sealed: {sealed}");
        let status = s.ok(&["cred", "status", &s.dir, "--now", RETRY]);
        assert!(!status.contains("stray"), "{status}");
    }
}

#[test]
fn a_spill_nothing_refers_to_is_removed_and_one_a_stray_needs_is_kept() {
    let s = Setup::new(false);
    s.knob("flood", true);
    s.knob("revoke-fails", true);
    s.ok(&["cred", "reconcile", &s.dir, "--now", DUE]);
    let spills = s.spills();
    assert_eq!(spills.len(), 1);
    // A spill of an attempt the store knows nothing of (a leftover).
    let orphan = s.capture().join("99-1.spill");
    std::fs::write(&orphan, "left over").unwrap();
    // Still failing: the stray's spill stays, the orphan goes.
    s.ok(&["cred", "reconcile", &s.dir, "--now", RETRY]);
    assert_eq!(s.spills(), spills);
    assert!(!orphan.exists());
}
