//! A SoftHSM2 token of a test's own, the `pki` binary run with it, and
//! OpenSC's `pkcs11-tool` reading the token back: what the tests of CA
//! keys in a token share.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::softhsm::{PIN, Token, make_token};
use pki_core::Pkcs11Uri;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Attribute-less objects SoftHSM2 left when a kill cut its key
/// generation short (see `Hsm::private_key_ids`), counted per listing.
pub static DEBRIS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// SoftHSM2 token files put back after a kill cut them short.
pub static REPAIRED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Kills of a `pki` command at random moments: the moments come from a
/// seeded RNG (`PKI_CRASH_SEED` replays a run; the seed is printed) and
/// are drawn up to a span that starts at 1.5 times the quickest unkilled
/// run measured and shrinks by a tenth each time the command ends before
/// its kill, so that most kills land inside the command on a loaded
/// machine (where a measured run may be slow) as on an idle one.
pub struct RandomKills {
    rng: rand_chacha::ChaCha20Rng,
    span_micros: u64,
    /// Commands killed while they ran.
    pub killed: usize,
    /// Commands that ended before their kill.
    pub finished: usize,
}

impl RandomKills {
    /// Kills drawn after `quickest`, the quickest unkilled run measured.
    pub fn new(quickest: std::time::Duration) -> Self {
        use rand_core::SeedableRng;
        let seed = std::env::var("PKI_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| u64::from(std::process::id()));
        println!("PKI_CRASH_SEED={seed}");
        let micros = u64::try_from(quickest.as_micros()).unwrap_or(u64::MAX);
        RandomKills {
            rng: rand_chacha::ChaCha20Rng::seed_from_u64(seed),
            span_micros: micros.max(1000).saturating_mul(3) / 2,
            killed: 0,
            finished: 0,
        }
    }

    /// Runs `args` with `hsm`'s token and kills it after a random delay
    /// unless it ended first; SoftHSM2's token file is put back if the
    /// kill cut it short. Returns the token file of before (what
    /// [`Hsm::ok_after_kill_with`] needs) and the delay.
    pub fn run(&mut self, hsm: &Hsm, args: &[&str]) -> (Vec<u8>, std::time::Duration) {
        use rand_core::Rng;
        let delay = std::time::Duration::from_micros(self.rng.next_u64() % self.span_micros);
        let saved = std::fs::read(hsm.token_object()).unwrap();
        let mut child = hsm
            .command(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_some() {
            self.finished += 1;
            self.span_micros = (self.span_micros * 9 / 10).max(1000);
        } else {
            child.kill().unwrap();
            self.killed += 1;
        }
        child.wait().unwrap();
        hsm.repair_after_kill(&saved);
        (saved, delay)
    }
}

impl RandomKills {
    /// Prints how the kills fell during `what` (with SoftHSM2's debris and
    /// repaired token files) and fails unless at least half of the
    /// `planned` kills landed inside a command.
    pub fn assert_most_landed(&self, planned: usize, what: &str) {
        println!(
            "{} killed during {what}, {} finished first; listings that showed SoftHSM2's attribute-less debris: {}; SoftHSM2 token files put back after a kill cut them: {}",
            self.killed,
            self.finished,
            DEBRIS.load(std::sync::atomic::Ordering::Relaxed),
            REPAIRED.load(std::sync::atomic::Ordering::Relaxed)
        );
        assert!(
            self.killed >= planned / 2,
            "too few kills landed: {}",
            self.killed
        );
    }
}

/// How long the quickest of `runs` unkilled runs of `run` takes (a loaded
/// machine slows some).
pub fn quickest(runs: usize, mut run: impl FnMut(usize)) -> std::time::Duration {
    (0..runs)
        .map(|i| {
            let started = std::time::Instant::now();
            run(i);
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// A token in a temporary directory, with the PIN file the CLI reads.
pub struct Hsm {
    _dir: tempfile::TempDir,
    pub token: Token,
    pub pin_file: PathBuf,
    pub store: PathBuf,
}

impl Hsm {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let token = make_token(dir.path());
        let pin_file = dir.path().join("pin");
        std::fs::write(&pin_file, PIN).unwrap();
        let store = dir.path().join("store");
        Hsm {
            _dir: dir,
            token,
            pin_file,
            store,
        }
    }

    pub fn store(&self) -> &str {
        self.store.to_str().unwrap()
    }

    /// `pki ARGS` with the token's module and PIN in its environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = self.bare(args);
        command
            .env("PKI_PKCS11_MODULE", &self.token.module)
            .env("PKI_PKCS11_PIN_FILE", &self.pin_file);
        command
    }

    /// `pki ARGS` with SoftHSM2's configuration and nothing else.
    pub fn bare(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pki"));
        command
            .args(args)
            .env("SOFTHSM2_CONF", &self.token.conf)
            .env_remove("PKI_PKCS11_MODULE")
            .env_remove("PKI_PKCS11_PIN_FILE");
        command
    }

    pub fn ok(&self, args: &[&str]) -> String {
        self.try_ok(args)
            .unwrap_or_else(|e| panic!("pki {args:?}: {e}"))
    }

    pub fn try_ok(&self, args: &[&str]) -> Result<String, String> {
        let o = self.command(args).output().unwrap();
        if o.status.success() {
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            Err(text(&o))
        }
    }

    /// `pki ARGS` after a kill: run to completion. SoftHSM2 rewrites its
    /// token file in place at each login, so a kill in the middle leaves
    /// it cut short and the token gone from the module: that file is
    /// SoftHSM2's, not pki's, and is put back as it was before the kill
    /// (`saved`) for the rerun.
    pub fn ok_after_kill_with(&self, args: &[&str], saved: &[u8]) -> String {
        match self.try_ok(args) {
            Ok(out) => out,
            Err(e) if e.contains("no PKCS#11 token") => {
                std::fs::write(self.token_object(), saved).unwrap();
                REPAIRED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.ok(args)
            }
            Err(e) => panic!("pki {args:?} after a kill: {e}"),
        }
    }

    /// Puts SoftHSM2's token file back as it was before a kill (`saved`)
    /// when the kill cut it short and the module no longer shows the
    /// token (see [`Hsm::ok_after_kill_with`]).
    pub fn repair_after_kill(&self, saved: &[u8]) {
        let slots = self
            .token
            .command("softhsm2-util")
            .arg("--show-slots")
            .output()
            .unwrap();
        if !String::from_utf8_lossy(&slots.stdout).contains(super::softhsm::LABEL) {
            std::fs::write(self.token_object(), saved).unwrap();
            REPAIRED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// SoftHSM2's file describing the token (its label, PIN blobs and
    /// flags), which it rewrites in place at every login.
    pub fn token_object(&self) -> PathBuf {
        let tokens = self.token.conf.with_file_name("tokens");
        let dir = std::fs::read_dir(&tokens).unwrap().next().unwrap().unwrap();
        dir.path().join("token.object")
    }

    /// The ids of the token's private keys, each checked sensitive and
    /// never extractable.
    ///
    /// SoftHSM2's file store writes an object, then its attributes: a
    /// process killed inside C_GenerateKeyPair can leave a private key
    /// object with no attributes at all (no CKA_ID, no label, the
    /// defaults' usage). Such debris names no key anybody made (nothing
    /// could sign with it for a CA: it has no id to find it by), so it is
    /// counted apart in `DEBRIS`, not taken for an orphan; an object with
    /// an id or a label is always a key.
    pub fn private_key_ids(&self) -> BTreeSet<String> {
        let listing = self
            .token
            .pkcs11_tool(&["--list-objects", "--type", "privkey"]);
        let mut ids = BTreeSet::new();
        for object in listing.split("Private Key Object").skip(1) {
            let (id, label) = (line_after(object, "ID:"), line_after(object, "label:"));
            if id.is_empty() && label.is_empty() {
                DEBRIS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            let access = line_after(object, "Access:");
            assert!(
                access.contains("sensitive") && access.contains("never extractable"),
                "a CA key that can leave the token: {object}"
            );
            ids.insert(id.to_string());
        }
        ids
    }

    /// Right after a kill, before any rerun: the token holds no key the
    /// document does not name, and every named key it lacks is one the
    /// document records as intended (not made yet: the rerun makes it) or
    /// lists as retiring (destroyed, and not yet committed gone: the next
    /// step forgets it).
    pub fn assert_no_orphan(&self, context: &str) {
        let (held, named) = (self.private_key_ids(), self.named_ids());
        assert!(
            held.is_subset(&named),
            "{context}: an orphan: {held:?} vs {named:?}"
        );
        let state = self.state();
        let mut unsettled = BTreeSet::new();
        collect_ids(&state["token_keys"]["retiring"], &mut unsettled);
        collect_ids(&state["token_keys"]["pending"], &mut unsettled);
        let missing: BTreeSet<String> = named.difference(&held).cloned().collect();
        assert!(
            missing.is_subset(&unsettled),
            "{context}: keys the document needs are gone: {missing:?}"
        );
    }

    fn state(&self) -> serde_json::Value {
        state_of(&self.store)
    }

    /// The ids of the key objects the document names (see [`named_ids_in`]).
    pub fn named_ids(&self) -> BTreeSet<String> {
        named_ids_in(&self.store)
    }

    /// The token holds exactly the keys the document names.
    pub fn assert_token_matches(&self, context: &str) {
        assert_eq!(
            self.private_key_ids(),
            self.named_ids(),
            "{context}: the token's keys and the document's differ"
        );
    }

    pub fn read(&self, path: &str) -> Vec<u8> {
        std::fs::read(self.store.join(path)).unwrap()
    }
}

/// The state file of the one document of the directory store `store`.
fn state_of(store: &Path) -> serde_json::Value {
    let state = ["pki-state.json", "set/state.json", "keys/key-ring.json"]
        .iter()
        .map(|f| store.join(f))
        .find(|p| p.exists())
        .expect("a state file");
    serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap()
}

/// The ids of the key objects the documents of the directory store `store`
/// name: every URI under `token_keys` of each state file it holds (a
/// signer's, a set's, a key ring's), but the token's own.
pub fn named_ids_in(store: &Path) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for file in ["pki-state.json", "set/state.json", "keys/key-ring.json"] {
        let Ok(text) = std::fs::read(store.join(file)) else {
            continue;
        };
        let state: serde_json::Value = serde_json::from_slice(&text).unwrap();
        if let Some(fields) = state["token_keys"].as_object() {
            for (field, value) in fields {
                if field != "store" {
                    collect_ids(value, &mut ids);
                }
            }
        }
    }
    ids
}

pub fn line_after<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|line| line.trim().strip_prefix(label))
        .map(str::trim)
        .unwrap_or_default()
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The ids of every PKCS#11 URI in `value`, in hex; an operator's object
/// given by its label alone (`--key-uri 'pkcs11:token=T;object=L'`) as
/// `object=L`, which no key id equals: a caller comparing them with the
/// token's ids sees it.
fn collect_ids(value: &serde_json::Value, ids: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::String(uri) if uri.starts_with("pkcs11:") => {
            let uri = Pkcs11Uri::parse(uri).unwrap();
            ids.insert(match (uri.id, uri.object) {
                (Some(id), _) => hex::encode(id),
                (None, Some(label)) => format!("object={label}"),
                (None, None) => panic!("a key URI naming no object: {value}"),
            });
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_ids(v, ids)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_ids(v, ids)),
        _ => {}
    }
}
