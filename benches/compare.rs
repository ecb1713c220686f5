//! The pki side of `benches/go/compare.sh` for the rows that need the
//! engines and the stores (pki-core's own rows are in
//! `pki-core/benches/compare.rs`).
//!
//! ```text
//! compare store DIR N        a directory store holding a signer with N leaves (the CLI rows)
//! compare fixtures DIR       a store of 10,000 leaves under DIR/store, and the same leaves
//!                            as PEM for the Go side (DIR/ca.pem, DIR/leaves.pem)
//! compare reconcile DIR      a no-op reconcile of those 10,000 leaves: median seconds
//! compare memory N           issue N leaves and hold them: peak resident MB of the process
//! ```
//!
//! Timed rows run once to warm up, then at least three times and for at
//! least one second, and print the median, as the Go program does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "support/signer.rs"]
mod support;

use pki_rotate::{Driver, Engine, FsStore, SignerEngine, SignerInput};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use std::path::Path;
use support::{T0, signer_with_leaves};

/// Leaves of the reconcile row.
const RECONCILE_LEAVES: usize = 10_000;

// The same timing as pki-core's runner and the Go program.
#[path = "../pki-core/benches/support/median.rs"]
mod median;
use median::median_of;

/// A directory store of `leaves` leaves issued at [`T0`], with the summary
/// `pki init` and every later write keep beside the document (so a step
/// with nothing to do reads that summary alone), or `whole`: without one,
/// as an older build or `Driver::create` leaves it, so that such a step
/// reads and checks every file.
fn make_store(dir: &Path, leaves: usize, whole: bool) {
    let store = FsStore::open_or_create(dir).unwrap();
    let driver = Driver::new(&store);
    let doc = signer_with_leaves(leaves);
    if whole {
        driver.create::<SignerEngine>("signer", &doc).unwrap();
    } else {
        driver
            .create_at::<SignerEngine>("signer", &doc, T0)
            .unwrap();
    }
}

/// The peak resident set of this process (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status");
    kb / 1024.0
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["store", dir, n] => make_store(Path::new(dir), n.parse().unwrap(), false),
        ["store-whole", dir, n] => make_store(Path::new(dir), n.parse().unwrap(), true),
        ["fixtures", dir] => {
            let dir = Path::new(dir);
            std::fs::create_dir_all(dir).unwrap();
            let doc = signer_with_leaves(RECONCILE_LEAVES);
            std::fs::write(dir.join("ca.pem"), doc.ca.cert.to_pem()).unwrap();
            let leaves: String = doc
                .leaves
                .values()
                .map(|l| l.issued.as_ref().unwrap().cert.to_pem())
                .collect();
            std::fs::write(dir.join("leaves.pem"), leaves).unwrap();
            let store = FsStore::open_or_create(dir.join("store")).unwrap();
            Driver::new(&store)
                .create::<SignerEngine>("signer", &doc)
                .unwrap();
        }
        ["reconcile", dir] => {
            let store = FsStore::open(Path::new(dir).join("store")).unwrap();
            let (doc, _) = Driver::new(&store).load::<SignerEngine>("signer").unwrap();
            assert_eq!(doc.leaves.len(), RECONCILE_LEAVES);
            // A month after issuance: nothing is due.
            let now = T0 + time::Duration::days(30);
            let input = SignerInput::default();
            let mut rng = ChaCha20Rng::seed_from_u64(2);
            println!(
                "{:.6}",
                median_of(|| {
                    let outcome = SignerEngine::step(&doc, &input, now, &mut rng).unwrap();
                    assert!(!outcome.changed());
                    outcome.events.len()
                })
            );
        }
        ["memory", n] => {
            let doc = signer_with_leaves(n.parse().unwrap());
            black_box(&doc);
            println!("{:.1}", peak_rss_mb());
        }
        _ => panic!(
            "usage: compare store DIR N | store-whole DIR N | fixtures DIR | reconcile DIR | memory N (see the file's docs)"
        ),
    }
}
