//! kill -9 of `pki rotate --force REASON kube://…` at random points, on a
//! real kube-apiserver: after each kill the store reads as wholly old or
//! wholly new (`status --check` and `export` succeed; the exported CA is
//! the old one with the old bundle and leaf, or a new one whose leaf
//! chains to the new bundle), and the same command run again completes
//! the rotation exactly once.
//!
//! The delays come from a seeded RNG (`PKI_CRASH_SEED` replays a run; the
//! seed is printed) and are drawn in three bands of the time an unkilled
//! forced rotation takes on this server (measured first), so that kills
//! land before, around and after the commit. The counts of each outcome
//! are printed at the end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The etcd and kube-apiserver supports each include the one `free_port`
// (pki-etcd/tests/support/free_port.rs) by path.
#![allow(clippy::duplicate_mod)]

#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;
#[path = "support/on_kube.rs"]
mod on_kube;
mod support;

use on_kube::Cluster;
use pki_core::Certificate;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::cli::{command, ok};
use support::openssl::{Verdict, verify_with_bundle_file};
use support::store::T0;

/// Kills that must land while the rotation runs; each one followed by its
/// checks and a rerun. A run whose rotation ends before its kill counts
/// apart, and at most `MAX_RUNS` are made.
const KILLS: usize = 50;
const MAX_RUNS: usize = 90;
const DNS: &str = "web.ns.svc";
/// When every rotation happens (day 100 of the CA, none due): each is
/// forced, and each comes right after the previous one, which
/// `--allow-trust-break` accepts.
const AT: &str = "2026-04-11T00:00:00Z";

/// The forced rotation, killed or run to completion.
fn rotate_args<'a>(url: &'a str, reason: &'a str) -> [&'a str; 8] {
    [
        "rotate",
        url,
        "--force",
        reason,
        "--allow-trust-break",
        "kill -9 test",
        "--now",
        AT,
    ]
}

/// What the store publishes, exported into `dir` (emptied first).
#[derive(Debug, PartialEq, Eq)]
struct Published {
    ca: Vec<u8>,
    bundle: Vec<u8>,
    chain: Vec<u8>,
}

fn export(url: &str, dir: &Path) -> Published {
    let _ = std::fs::remove_dir_all(dir);
    ok(&["export", url, dir.to_str().unwrap()]);
    let read = |path: &str| std::fs::read(dir.join(path)).unwrap();
    Published {
        ca: read("signer/tls.crt"),
        bundle: read("ca-bundle.crt"),
        chain: read("certs/web/tls.crt"),
    }
}

/// The exported leaf chain verifies against the exported bundle: by pki
/// every run, by OpenSSL too when `openssl` is set.
fn assert_chain_verifies(dir: &Path, openssl: bool) {
    let (bundle, chain) = (dir.join("ca-bundle.crt"), dir.join("certs/web/tls.crt"));
    ok(&[
        "verify",
        "--bundle",
        bundle.to_str().unwrap(),
        "--chain",
        chain.to_str().unwrap(),
        "--dns",
        DNS,
        "--at",
        AT,
    ]);
    if openssl {
        let certs = Certificate::all_from_pem(&std::fs::read(&chain).unwrap()).unwrap();
        let at = time::OffsetDateTime::parse(AT, &time::format_description::well_known::Rfc3339)
            .unwrap();
        let verdict = verify_with_bundle_file(&bundle, &certs, at, "sslserver");
        assert_eq!(verdict, Ok(Verdict::Verified));
    }
}

/// How long an unkilled forced rotation takes, start to exit: the
/// median of three.
fn measure_rotation(url: &str) -> Duration {
    let mut took: Vec<Duration> = (0..3)
        .map(|n| {
            let reason = format!("measure {n}");
            let started = Instant::now();
            let out = ok(&rotate_args(url, &reason));
            assert!(out.contains("rotated CA"), "{out}");
            started.elapsed()
        })
        .collect();
    took.sort();
    took[1]
}

/// What one kill came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Killed before its commit: the store reads wholly old.
    Old,
    /// Killed after its commit: the store reads wholly new.
    New,
    /// The rotation ended before the kill came.
    Finished,
}

/// Starts the rotation, kills it (SIGKILL) after `delay` unless it ended.
fn kill_after(url: &str, reason: &str, delay: Duration) -> bool {
    let mut child = command(&rotate_args(url, reason))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    if let Some(status) = child.try_wait().unwrap() {
        assert!(status.success(), "{reason}: an unkilled rotation failed");
        return false;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    true
}

/// What a run leaves for the next: the store's publication, and how long
/// the rerun took when it rotated (a rotation grows the history, so the
/// bands follow the time a rotation takes now).
struct Ran {
    outcome: Outcome,
    published: Published,
    rotation_took: Option<Duration>,
}

/// One kill, its checks and the rerun.
fn one_run(url: &str, dir: &Path, run: usize, delay: Duration, before: Published) -> Ran {
    let reason = format!("crash {run}");
    let killed = kill_after(url, &reason, delay);
    let context = format!("run {run}, killed after {delay:?}");
    let check = ["status", url, "--check", "--now", AT];
    let o = command(&check).output().unwrap();
    assert!(
        o.status.success(),
        "{context}: status --check: {}",
        support::cli::stderr(&o)
    );
    let after = export(url, dir);
    assert_chain_verifies(dir, run.is_multiple_of(10));
    let committed = after.ca != before.ca;
    if committed {
        assert_ne!(after.bundle, before.bundle, "{context}: new CA, old bundle");
        assert_ne!(after.chain, before.chain, "{context}: new CA, old leaf");
    } else {
        assert_eq!(after, before, "{context}: old CA, not all old");
    }
    let rerun_started = Instant::now();
    let out = ok(&rotate_args(url, &reason));
    let rerun_took = rerun_started.elapsed();
    let rotated = out.contains("rotated CA");
    assert_eq!(rotated, !committed, "{context}: rerun said {out}");
    assert!(rotated || out.contains("nothing to do"), "{context}: {out}");
    let outcome = match (killed, committed) {
        (false, _) => Outcome::Finished,
        (true, false) => Outcome::Old,
        (true, true) => Outcome::New,
    };
    assert!(killed || committed, "{context}: ended without its commit");
    Ran {
        outcome,
        published: if rotated { export(url, dir) } else { after },
        rotation_took: rotated.then_some(rerun_took),
    }
}

#[test]
fn a_forced_rotation_killed_at_any_point_reads_old_or_new_and_the_rerun_completes() {
    let started = Instant::now();
    let cluster = Cluster::start();
    let url = cluster.url("crash");
    ok(&["init", &url, "--now", T0]);
    ok(&["issue", &url, "web", "--dns", DNS, "--now", T0]);
    // The last few durations of an unkilled rotation: their median
    // places the bands (a busy machine makes any one of them noisy).
    let mut recent = vec![measure_rotation(&url)];
    let seed: u64 = std::env::var("PKI_CRASH_SEED")
        .ok()
        .map(|s| s.parse().expect("PKI_CRASH_SEED is a number"))
        .unwrap_or(20_260_101);
    eprintln!(
        "a forced rotation takes {:?}; PKI_CRASH_SEED={seed}",
        recent[0]
    );
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let dir: PathBuf = cluster.tmp.path().join("export");
    let mut published = export(&url, &dir);
    let mut counts = [0usize; 3];
    let mut run = 0;
    while counts[Outcome::Old as usize] + counts[Outcome::New as usize] < KILLS {
        assert!(
            run < MAX_RUNS,
            "{run} runs, {counts:?}: the kills come too late"
        );
        let mut sorted = recent.clone();
        sorted.sort();
        let took = sorted[sorted.len() / 2];
        // Three bands in turn: the first half of a rotation (the process
        // starting, reading, writing shards), 50-90% (around the
        // commit), and 90-115% (the cleanup after it, and the exit).
        let (low, high) = [(0.0, 0.5), (0.5, 0.9), (0.9, 1.15)][run % 3];
        let fraction = low + (high - low) * (rng.next_u64() as f64 / u64::MAX as f64);
        let delay = took.mul_f64(fraction);
        let ran = one_run(&url, &dir, run, delay, published);
        eprintln!(
            "run {run}: kill after {delay:?} of {took:?}: {:?}",
            ran.outcome
        );
        counts[ran.outcome as usize] += 1;
        published = ran.published;
        if let Some(rotation) = ran.rotation_took {
            recent.push(rotation);
            if recent.len() > 5 {
                recent.remove(0);
            }
        }
        run += 1;
    }
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", &url, "--json", "--now", AT])).unwrap();
    assert_eq!(status["rotations"], 3 + run, "one rotation per reason");
    let [old, new, finished] = counts;
    eprintln!(
        "{run} runs (seed {seed}): {old} killed before the commit, {new} after it, \
         {finished} ended before the kill; {:.1?} in all",
        started.elapsed()
    );
    assert!(old > 0 && new > 0, "{counts:?}");
}
