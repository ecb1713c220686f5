//! A directory store damaged as an operator's mistakes and a disk's faults
//! would damage it, file by file, then driven by each command that reads or
//! changes it. Whatever the damage:
//!
//! - `status --check` is never "health: ok" where the whole read
//!   (`status --check --verify`) refuses the store;
//! - a damage in the spare never goes live: after any command that
//!   succeeded, the store reads whole and its CA and untouched leaves are
//!   the ones it had;
//! - a damaged CA file, bundle or state file is refused by every command
//!   (they all read the document's head);
//! - a refusal is one line, and reports the store as it is.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use sha2::{Digest, Sha256};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use support::cli::{exited_with, pki, stdout};

// 2026-01-01: when every store here is made.
const T0: &str = "2026-01-01T00:00:00Z";
// A day later: nothing is due, so no-op steps answer from the summary.
const T1: &str = "2026-01-02T00:00:00Z";

fn ok(args: &[&str]) -> String {
    let o = pki(args);
    assert!(
        o.status.success(),
        "pki {args:?}: {}",
        support::cli::stderr(&o)
    );
    stdout(&o)
}

/// A store with three leaves, made once: a, b, c, and the spare the
/// commits left (it mirrors the live generation).
fn made(name: &str, cn: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pki-damage-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--cn", cn, "--now", T0]);
    for leaf in ["a", "b", "c"] {
        let dns = format!("{leaf}.ns.svc");
        ok(&["issue", d, leaf, "--dns", &dns, "--now", T0]);
    }
    assert!(dir.join(".spare/.mirrors").exists());
    dir
}

fn template() -> &'static Path {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| made("template", "service-ca"))
}

fn other_store() -> &'static Path {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| made("other", "other-ca"))
}

/// A copy of the template whose files are the template's very files (hard
/// links: the same inodes, so the identities each commit recorded still
/// hold and the checks' fast paths are the ones exercised), in directories
/// of its own with the template's times. pki never writes a committed file
/// in place; the lock file it does write gets a file of its own, and a
/// damage in place first gives the damaged file one (see `unshare`).
fn copy(into: &Path) -> PathBuf {
    let dir = into.join("store");
    let status = std::process::Command::new("cp")
        .args(["-al", template().to_str().unwrap(), dir.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let lock = dir.join(".lock");
    let bytes = std::fs::read(&lock).unwrap();
    std::fs::remove_file(&lock).unwrap();
    std::fs::write(&lock, bytes).unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).unwrap();
    dir
}

/// Replaces the file at `path` (the copy's entry only, never the
/// template's file it is a link to).
fn replace_file(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("replace-tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Gives the file at `target` in `store` (and its twin in the other
/// generation, when the two share it) an inode of the copy's own, before
/// it is written in place.
fn unshare(store: &Path, target: &str, spare: bool) {
    let path = generation(store, spare).join(target);
    let twin = generation(store, !spare).join(target);
    let ino = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    let shared = ino(&twin).is_some() && ino(&twin) == ino(&path);
    let meta = std::fs::metadata(&path).unwrap();
    let tmp = path.with_extension("unshare-tmp");
    std::fs::copy(&path, &tmp).unwrap();
    std::fs::set_permissions(&tmp, meta.permissions()).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    if shared {
        std::fs::remove_file(&twin).unwrap();
        std::fs::hard_link(&path, &twin).unwrap();
    }
}

/// The shard of the manifest that lists `path`, and its identity records.
fn shard_of(path: &str) -> [String; 2] {
    let bucket = hex::encode(&Sha256::digest(path.as_bytes())[..1]);
    [
        format!(".manifest/{bucket}.json"),
        format!(".manifest/{bucket}.ids"),
    ]
}

/// The files damaged, relative to a generation (the live one or the spare).
fn targets() -> Vec<String> {
    let mut targets: Vec<String> = [
        "signer/tls.crt",
        "signer/tls.key",
        "ca-bundle.crt",
        "pki-state.json",
        "certs/b/tls.crt",
        "certs/b/tls.key",
        "certs/b/tls.pem",
        "leaf-requests/b.json",
        ".index.json",
        ".manifest.json",
        // The spare's mark (the spare alone has one).
        ".mirrors",
    ]
    .map(String::from)
    .to_vec();
    targets.extend(shard_of("certs/b/tls.crt"));
    targets
}

/// Which files the head of the signer holds: every command reads them.
fn in_head(target: &str) -> bool {
    matches!(
        target,
        "signer/tls.crt" | "signer/tls.key" | "ca-bundle.crt" | "pki-state.json"
    )
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Other bytes written into the file itself (shared with its hard links).
    GarbageInPlace,
    /// The file replaced by another one with other bytes.
    GarbageReplaced,
    /// Cut to half its length, in place.
    Truncated,
    /// Replaced by the same file of another store.
    OtherStores,
    Removed,
    /// Replaced by a link to the same file of another store.
    LinkToOther,
}

impl Damage {
    /// Whether the damage changed the file itself, which the live
    /// generation and the spare share as hard links.
    fn in_place(self) -> bool {
        matches!(self, Damage::GarbageInPlace | Damage::Truncated)
    }
}

const DAMAGES: [Damage; 6] = [
    Damage::GarbageInPlace,
    Damage::GarbageReplaced,
    Damage::Truncated,
    Damage::OtherStores,
    Damage::Removed,
    Damage::LinkToOther,
];

fn generation(store: &Path, spare: bool) -> PathBuf {
    if spare {
        store.join(".spare")
    } else {
        store.join(std::fs::read_link(store.join(".data")).unwrap())
    }
}

fn damage(path: &Path, other: &Path, how: Damage) {
    let replace = |bytes: &[u8]| {
        let tmp = path.with_extension("damage-tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    };
    match how {
        Damage::GarbageInPlace => std::fs::write(path, b"garbage\n").unwrap(),
        Damage::GarbageReplaced => replace(b"garbage\n"),
        Damage::Truncated => {
            let len = std::fs::metadata(path).unwrap().len();
            let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            file.set_len(len / 2).unwrap();
        }
        Damage::OtherStores => replace(&std::fs::read(other).unwrap()),
        Damage::Removed => std::fs::remove_file(path).unwrap(),
        Damage::LinkToOther => {
            std::fs::remove_file(path).unwrap();
            std::os::unix::fs::symlink(other, path).unwrap();
        }
    }
}

/// The commands run on a damaged store: each reads its head, some write.
fn commands(d: &str) -> Vec<Vec<String>> {
    let v = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        v(&["status", d, "--check", "--now", T1]),
        v(&["rotate", d, "--now", T1]),
        v(&["issue", d, "d", "--dns", "d.ns.svc", "--now", T1]),
        v(&["renew", d, "a", "--now", T1]),
        v(&["remove", d, "c", "--now", T1]),
    ]
}

fn run(args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    pki(&args)
}

/// Whether the store reads whole and is healthy (every file checked).
fn whole_read_ok(d: &str) -> bool {
    pki(&["status", d, "--check", "--verify", "--now", T1])
        .status
        .success()
}

/// The CA's id as `status --json` shows it, when the store reads.
fn ca_id(d: &str) -> Option<String> {
    let o = pki(&["status", d, "--json", "--now", T1]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    json["ca"]["id"].as_str().map(String::from)
}

/// One damage, one command: the rules in the module's comment.
fn case(target: &str, spare: bool, how: Damage, command: usize) -> Result<(), String> {
    let tmp = tempfile::tempdir().unwrap();
    let store = copy(tmp.path());
    let d = store.to_str().unwrap();
    let path = generation(&store, spare).join(target);
    if !path.exists() {
        return Ok(());
    }
    let other = generation(other_store(), spare).join(target);
    if how.in_place() {
        unshare(&store, target, spare);
    }
    damage(&path, &other, how);
    let args = commands(d).swap_remove(command);
    let o = run(&args);
    let code = o.status.code();
    let what = format!(
        "{how:?} {} {target}, then {args:?}",
        if spare { "spare" } else { "live" }
    );
    if code != Some(0) {
        // A refusal is one line (no panic), whatever the damage.
        exited_with(
            code.unwrap_or(-1),
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            &o,
        );
    }
    if command == 0 && code == Some(0) && !whole_read_ok(d) {
        return Err(format!(
            "{what}: status --check says healthy, the whole read refuses"
        ));
    }
    if in_head(target) && !spare && code == Some(0) {
        return Err(format!("{what}: exit 0 over a damaged head"));
    }
    // The commands that write (a no-op rotate writes nothing: it refuses a
    // damaged head, and leaves the leaves to `status --check`).
    if command > 1 && code == Some(0) {
        let healthy = whole_read_ok(d);
        // A file replaced, removed or linked (not written in place, which
        // its hard links share) is the spare's own damage or is healed by
        // the spare's committed copy: either way it must not go live.
        if !how.in_place() && !healthy {
            return Err(format!(
                "{what}: succeeded and left a store that does not read"
            ));
        }
        if healthy && ca_id(d) != ca_id(template().to_str().unwrap()) {
            return Err(format!("{what}: another CA went live"));
        }
    }
    if code == Some(0) && command == 0 {
        let text = stdout(&o);
        let expected = ca_id(template().to_str().unwrap()).unwrap();
        if !text.contains(&expected) {
            return Err(format!("{what}: status reports another CA: {text}"));
        }
    }
    Ok(())
}

#[test]
fn no_damage_to_any_file_is_reported_healthy_published_or_carried_from_the_spare() {
    let _ = (template(), other_store());
    let mut cases = Vec::new();
    for target in targets() {
        for spare in [false, true] {
            for how in DAMAGES {
                for command in 0..commands("").len() {
                    cases.push((target.clone(), spare, how, command));
                }
            }
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((target, spare, how, command)) = cases.get(i) else {
                        break;
                    };
                    if let Err(e) = case(target, *spare, *how, *command) {
                        failures.lock().unwrap().push(e);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    // The copies shared the template's files: none was changed through them.
    assert!(whole_read_ok(template().to_str().unwrap()));
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The summary's promise moved far ahead in `.index.json` (as an operator
/// might, to silence a check): not believed, so once the CA and every
/// leaf expired, `status --check` says so and `rotate` rotates.
#[test]
fn a_summary_moved_ahead_in_the_index_is_not_believed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = copy(tmp.path());
    let d = store.to_str().unwrap();
    let index = generation(&store, false).join(".index.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    let summary = json["keys"]["signer"]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    let mut promise: serde_json::Value = serde_json::from_str(&summary).unwrap();
    promise["until"] = "2099-01-01T00:00:00Z".into();
    json["keys"]["signer"]["summary"] = promise.to_string().into();
    replace_file(&index, &serde_json::to_vec(&json).unwrap());
    // Four months after the CA (and so every leaf) expired.
    let late = "2028-07-01T00:00:00Z";
    let o = pki(&["status", d, "--check", "--now", late]);
    assert_eq!(o.status.code(), Some(4), "{}", stdout(&o));
    // Not "nothing to do": the expired CA is seen (and its rotation,
    // which can no longer bridge, needs an operator's reason).
    let o = pki(&["rotate", d, "--now", late]);
    assert!(!stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert!(support::cli::stderr(&o).contains("expired"));
}

/// Another store's index (another CA, the same generation numbers): not
/// believed, `status --check` reports this store's CA.
#[test]
fn another_stores_index_is_not_believed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = copy(tmp.path());
    let d = store.to_str().unwrap();
    let ours = generation(&store, false).join(".index.json");
    let theirs = generation(other_store(), false).join(".index.json");
    std::fs::remove_file(&ours).unwrap();
    std::fs::copy(&theirs, &ours).unwrap();
    let text = ok(&["status", d, "--check", "--now", T1]);
    let ca = ca_id(template().to_str().unwrap()).unwrap();
    assert!(text.contains(&ca), "{text}");
    assert!(!text.contains(&ca_id(other_store().to_str().unwrap()).unwrap()));
}

/// A live shard and the manifest's digest of it edited together, then a
/// commit of one leaf: the next generation's manifest agrees with its own
/// shards (it reads whole), or the commit is refused.
#[test]
fn a_live_shard_edited_with_its_digest_never_leaves_a_manifest_disagreeing_with_its_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let store = copy(tmp.path());
    let d = store.to_str().unwrap();
    let live = generation(&store, false);
    let [shard, _] = shard_of("certs/b/tls.crt");
    let old = std::fs::read(live.join(&shard)).unwrap();
    let mut listed: serde_json::Value = serde_json::from_slice(&old).unwrap();
    listed["signer"]["certs/b/tls.crt"]["sha256"] = hex::encode(Sha256::digest(b"x")).into();
    let new = serde_json::to_vec(&listed).unwrap();
    let tmp_shard = live.join(".manifest/edited.tmp");
    std::fs::write(&tmp_shard, &new).unwrap();
    std::fs::rename(&tmp_shard, live.join(&shard)).unwrap();
    let top_path = live.join(".manifest.json");
    let top = std::fs::read_to_string(&top_path).unwrap().replace(
        &hex::encode(Sha256::digest(&old)),
        &hex::encode(Sha256::digest(&new)),
    );
    replace_file(&top_path, top.as_bytes());
    let o = pki(&["issue", d, "d", "--dns", "d.ns.svc", "--now", T1]);
    if o.status.success() {
        let now = generation(&store, false);
        let top: serde_json::Value =
            serde_json::from_slice(&std::fs::read(now.join(".manifest.json")).unwrap()).unwrap();
        let bucket = shard
            .trim_start_matches(".manifest/")
            .trim_end_matches(".json");
        let recorded = top["shards"][bucket].as_str().unwrap();
        let on_disk = hex::encode(Sha256::digest(std::fs::read(now.join(&shard)).unwrap()));
        assert_eq!(recorded, on_disk, "the manifest disagrees with its shard");
    }
}
