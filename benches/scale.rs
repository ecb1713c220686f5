//! How one command's cost grows with the store: a directory store and an
//! etcd store holding a signer of 100 and of 10,000 leaves, built once
//! outside the timing, then one `issue` of a new leaf, one `renew`, one
//! no-op `rotate` (each a driver step, as the CLI runs them), one
//! `status --check` (answered from the store's summary, as the CLI does
//! when nothing is due) and one full `status` (load and report) on each.
//! Prints, after criterion's own report, the ratio of each row at 10,000
//! leaves to the same row at 100 (the goal is at most 3, but for the full
//! `status`, which reads every certificate by design), and the bytes etcd
//! received per step (from its `/metrics`), which should not grow with the
//! store.
//!
//! A `kube://` store on a real kube-apiserver (PKI_KUBE_APISERVER and
//! PKI_KUBE_ETCD, as pki-kube's tests find them; skipped with a line when
//! unset) runs the rows a step by parts and an idle step take (`issue`,
//! `renew`, `no-op rotate`), and prints how many Secrets one `issue` reads
//! and writes (counted by the API server's own metrics).
//!
//! ```text
//! cargo bench --bench scale                      # every store (etcd from PATH or PKI_ETCD_BIN)
//! cargo bench --bench scale -- --kube            # only the kube:// rows
//! cargo bench --bench scale -- --big 100000      # 100,000 leaves on etcd: init, issue, no-op
//!                                                # rotate, full rotation, status; peak memory
//! cargo bench --bench scale -- --big-fs 100000   # the same on a directory store
//! cargo bench --bench scale -- --bytes 100 10000 # only the bytes per etcd step
//! cargo bench --bench scale -- --phases 100 10000 # where one step's time goes, per stage (both stores)
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
// The etcd and kube-apiserver supports each include the one `free_port`
// (pki-etcd/tests/support/free_port.rs) by path.
#![allow(clippy::duplicate_mod)]

#[path = "support/signer.rs"]
mod support;

#[path = "../pki-etcd/tests/support/etcd.rs"]
mod etcd;

// The API server and its admin client: pki-kube's own test support.
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;

use criterion::Criterion;
use pki_rotate::status::SignerStatus;
use pki_rotate::{Driver, FsStore, LeafChange, LeafRequest, SignerEngine, SignerInput, Store};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use support::{T0, leaf_name, signer_with_leaves};

const SMALL: usize = 100;
const LARGE: usize = 10_000;
/// `status --check` looks at every file consumers read (a `stat` each on
/// a directory store), so it may grow with the store, at most 10 times
/// from 100 to 10,000 leaves; `pki status --check` is that plus the
/// process (what monitoring runs). `status` is every certificate read and
/// verified (`status --check --verify` too): it grows with the store by
/// design, shown for scale.
const ROWS: [&str; 6] = [
    "issue",
    "renew",
    "no-op rotate",
    "status --check",
    "pki status --check",
    "status",
];

/// The goal of each row's ratio from 100 to 10,000 leaves.
fn goal(row: &str) -> Option<f64> {
    match row {
        "status" => None,
        "status --check" | "pki status --check" => Some(10.0),
        _ => Some(3.0),
    }
}

/// A month after the leaves were issued: nothing is due.
fn now() -> time::OffsetDateTime {
    T0 + time::Duration::days(30)
}

/// etcd's counters so far: bytes of keys and values put, bytes written
/// to its write-ahead log, bytes received from clients (reads included).
fn etcd_counters(endpoint: &str) -> [u64; 3] {
    let mut stream = std::net::TcpStream::connect(endpoint).unwrap();
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: {endpoint}\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let sum = |name: &str| {
        text.lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    [
        sum("etcd_debugging_mvcc_total_put_size_in_bytes"),
        sum("etcd_disk_wal_write_bytes_total"),
        sum("etcd_network_client_grpc_received_bytes_total"),
    ]
}

/// One step of each timed row on `store`, as the CLI runs it.
struct Steps<'s, S: Store> {
    store: &'s S,
    /// The store as the CLI names it: a directory or an etcd URL.
    location: String,
    rng: ChaCha20Rng,
    next_leaf: usize,
}

impl<S: Store> Steps<'_, S> {
    fn issue(&mut self) {
        self.next_leaf += 1;
        let name = format!("new{}", self.next_leaf);
        let input = SignerInput::request(&name, LeafRequest::server(vec![format!("{name}.ns")]));
        self.leaf_step(&input);
    }

    /// As `pki issue` and `pki renew` run it: inside the document's idle
    /// promise, over the document's head and the one leaf.
    fn leaf_step(&mut self, input: &SignerInput) {
        let stepped = Driver::new(self.store)
            .step_unless_idle::<SignerEngine, _>("signer", input, now(), &mut self.rng)
            .unwrap();
        let step @ pki_rotate::Step {
            read: pki_rotate::Read::Part,
            ..
        } = stepped
        else {
            panic!("a leaf change inside the promise steps by parts");
        };
        assert!(step.changed);
    }

    fn renew(&mut self) {
        let input = SignerInput {
            leaves: vec![LeafChange::Renew {
                name: leaf_name(0).0,
            }],
            ..SignerInput::default()
        };
        self.leaf_step(&input);
    }

    /// As `pki rotate` runs it: decided from the store's summary of the
    /// document when nothing is due (the summary every write leaves).
    fn noop_rotate(&mut self) {
        let step = Driver::new(self.store)
            .step_unless_idle::<SignerEngine, _>(
                "signer",
                &SignerInput::default(),
                now(),
                &mut self.rng,
            )
            .unwrap();
        assert!(matches!(
            step,
            pki_rotate::Step {
                read: pki_rotate::Read::Summary { .. },
                ..
            }
        ));
    }

    /// As `pki status --check` runs it: from the store's summary of the
    /// document when its promise covers the time (nothing is due here).
    fn status(&mut self) {
        let driver = Driver::new(self.store);
        let idle = driver.idle::<SignerEngine>("signer", now()).unwrap();
        let idle = idle.expect("the summary answers status --check");
        black_box(
            idle.summary_report::<pki_rotate::signer::IdleReport>()
                .unwrap()
                .unwrap(),
        );
    }

    /// `pki status --check` itself, a process of the release build, as
    /// cron or a monitoring agent runs it.
    fn status_process(&mut self) {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pki"))
            .args(["status", &self.location, "--check", "--now"])
            .arg(pki_core::datetime::rfc3339(now()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        black_box(out);
    }

    /// `pki status` (and `status --check --verify`): every certificate
    /// read and verified.
    fn full_status(&mut self) {
        let (doc, _) = Driver::new(self.store)
            .load::<SignerEngine>("signer")
            .unwrap();
        let status = SignerStatus::of(&doc, now()).unwrap();
        assert_eq!(status.health.exit_code(), 0);
        black_box(status);
    }

    fn run(&mut self, row: &str) {
        match row {
            "issue" => self.issue(),
            "renew" => self.renew(),
            "no-op rotate" => self.noop_rotate(),
            "status --check" => self.status(),
            "pki status --check" => self.status_process(),
            _ => self.full_status(),
        }
    }
}

/// Criterion's median estimate of a benchmark, in seconds.
fn median(group: &str, function: &str) -> Option<f64> {
    // Where criterion writes its estimates: CRITERION_HOME, else the
    // target directory's `criterion`.
    let home = std::env::var_os("CRITERION_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
                .join("criterion")
        });
    let dir = home
        .join(group.replace(['?', '"', '/', '\\', '*', '<', '>', ':', '|', '^'], "_"))
        .join(function.replace(['?', '"', '/', '\\', '*', '<', '>', ':', '|', '^'], "_"));
    let text = std::fs::read_to_string(dir.join("new/estimates.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(json["median"]["point_estimate"].as_f64()? / 1e9)
}

/// The rows a `kube://` store runs: the steps that read parts of the
/// document or its summary (`status --check` reads every shard to check
/// it, and the process would need a kubeconfig of its own).
const KUBE_ROWS: [&str; 3] = ["issue", "renew", "no-op rotate"];

fn bench_store<S: Store>(c: &mut Criterion, kind: &str, stores: [(usize, &S, String); 2]) {
    bench_rows(c, kind, stores, &ROWS);
}

fn bench_rows<S: Store>(
    c: &mut Criterion,
    kind: &str,
    stores: [(usize, &S, String); 2],
    rows: &[&str],
) {
    for (leaves, store, location) in stores {
        let mut steps = Steps {
            store,
            location,
            rng: ChaCha20Rng::seed_from_u64(leaves as u64),
            next_leaf: 0,
        };
        let mut group = c.benchmark_group(format!("{kind} {leaves}"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(3));
        for &row in rows {
            group.bench_function(row, |b| b.iter(|| steps.run(row)));
        }
        group.finish();
    }
}

fn ratios(kind: &str) {
    for row in ROWS {
        let small = median(&format!("{kind} {SMALL}"), row);
        let large = median(&format!("{kind} {LARGE}"), row);
        if let (Some(s), Some(l)) = (small, large) {
            println!(
                "{kind:<5} {row:<15} {SMALL} leaves {:>9.2} ms   {LARGE} leaves {:>9.2} ms   ratio {:>6.1}{}",
                s * 1e3,
                l * 1e3,
                l / s,
                goal(row).map_or(String::new(), |g| format!(" (goal <= {g})"))
            );
        }
    }
}

/// Bytes etcd received for each of a few one-leaf steps.
fn bytes_per_step(etcd: &etcd::Etcd, store: &pki_etcd::EtcdStore, leaves: usize) {
    let mut steps = Steps {
        store,
        location: String::new(),
        rng: ChaCha20Rng::seed_from_u64(99),
        next_leaf: 1_000_000,
    };
    for row in ["issue", "renew", "no-op rotate"] {
        let before = etcd_counters(&etcd.endpoint());
        steps.run(row);
        let after = etcd_counters(&etcd.endpoint());
        let [put, wal, received] = [0, 1, 2].map(|i| after[i] - before[i]);
        println!(
            "etcd  {row:<15} {leaves:>6} leaves: {put:>9} bytes put, {wal:>9} bytes to the WAL, {received:>9} bytes received (reads included)"
        );
    }
}

/// The peak resident set of this process (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb / 1024.0
}

/// `n` leaves in one store (`kind`: etcd or a directory store): init,
/// issue, no-op rotate, a rotation re-issuing every leaf, status, each
/// timed once; peak memory at the end.
fn big(n: usize, kind: &str) {
    if kind == "fs" {
        let dir = tempfile::tempdir().unwrap();
        big_on(
            &FsStore::open_or_create(dir.path()).unwrap(),
            n,
            kind,
            &mut |_| {},
        );
    } else {
        let server = etcd::Etcd::start();
        let store = server.store("big");
        big_on(&store, n, kind, &mut |_| bytes_per_step(&server, &store, n));
    }
}

/// [`big`] on `store`; `after_issue` runs after the first issue (the bytes
/// etcd stores per step).
fn big_on<S: Store>(store: &S, n: usize, kind: &str, after_issue: &mut dyn FnMut(&S)) {
    let timed = |what: &str, f: &mut dyn FnMut()| {
        let started = Instant::now();
        f();
        println!(
            "big   {kind:<4} {n} leaves: {what:<30} {:>8.2} s",
            started.elapsed().as_secs_f64()
        );
    };
    let mut doc = None;
    timed("issue every leaf (in memory)", &mut || {
        doc = Some(signer_with_leaves(n));
    });
    let doc = doc.unwrap();
    timed("init (create the store)", &mut || {
        Driver::new(store)
            .create_at::<SignerEngine>("signer", &doc, T0)
            .unwrap();
    });
    drop(doc);
    let mut steps = Steps {
        store,
        location: String::new(),
        rng: ChaCha20Rng::seed_from_u64(5),
        next_leaf: 0,
    };
    // The first commit of changes after the store was created has no
    // spare to start from (a whole commit of changes makes one).
    timed("issue one leaf (first change)", &mut || steps.issue());
    timed("issue one leaf", &mut || steps.issue());
    after_issue(store);
    timed("no-op rotate", &mut || steps.noop_rotate());
    timed("status --check (the summary)", &mut || steps.status());
    timed("status (every certificate)", &mut || steps.full_status());
    // After R = D - M (395 days) the CA rotates and every leaf is re-issued.
    let later = T0 + time::Duration::days(396);
    timed("rotation re-issuing all", &mut || {
        let step = Driver::new(store)
            .step::<SignerEngine, _>("signer", &SignerInput::default(), later, &mut steps.rng)
            .unwrap();
        assert_eq!(step.document.history.len(), 1);
    });
    timed("status after the rotation", &mut || {
        let (doc, _) = Driver::new(store).load::<SignerEngine>("signer").unwrap();
        black_box(SignerStatus::of(&doc, later).unwrap());
    });
    println!(
        "big   {kind:<4} {n} leaves: peak resident memory {:.0} MB",
        peak_rss_mb()
    );
}

/// Where one step's time goes on `store` holding `n` leaves: each stage
/// of a driver step run by hand (read the files, build the document, plan,
/// apply, write the files, write the store), then a status report.
fn phases<S: Store>(kind: &str, store: &S, n: usize) {
    use pki_rotate::{Document, Engine};
    Driver::new(store)
        .create_at::<SignerEngine>("signer", &signer_with_leaves(n), T0)
        .unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let timed = |what: &str, started: Instant| {
        println!(
            "phases {kind:<4} {n:>6} leaves: {what:<34} {:>9.2} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    };
    let renew = SignerInput {
        leaves: vec![LeafChange::Renew {
            name: leaf_name(0).0,
        }],
        ..SignerInput::default()
    };
    // The first write after `create` has no spare generation to start
    // from; the second shows the steady state.
    let rounds = [
        ("no-op", SignerInput::default()),
        ("first renew", renew.clone()),
        ("renew", renew),
    ];
    for (label, input) in rounds {
        let started = Instant::now();
        let (files, revision) = store.get("signer").unwrap().unwrap();
        timed(&format!("{label}: store get"), started);
        let started = Instant::now();
        let doc = pki_rotate::SignerState::from_files(&files).unwrap();
        timed(&format!("{label}: from_files"), started);
        let started = Instant::now();
        black_box(doc.problems());
        timed(&format!("{label}: problems"), started);
        let started = Instant::now();
        let plan = SignerEngine::plan(&doc, &input, now()).unwrap();
        timed(&format!("{label}: plan"), started);
        let started = Instant::now();
        let outcome = SignerEngine::apply(&doc, plan, &mut rng).unwrap();
        timed(&format!("{label}: apply"), started);
        if let std::borrow::Cow::Owned(next) = outcome.document {
            let started = Instant::now();
            let files = next.to_files().unwrap();
            timed(&format!("{label}: to_files"), started);
            let started = Instant::now();
            store.put("signer", Some(&revision), &files).unwrap();
            timed(&format!("{label}: store put"), started);
        }
    }
    // The same renewal as `pki renew` takes it: over the head and the leaf.
    let names: std::collections::BTreeSet<String> = [leaf_name(0).0].into();
    let paths = pki_rotate::SignerState::part_paths(&names).unwrap();
    let renew = SignerInput {
        leaves: vec![LeafChange::Renew {
            name: leaf_name(0).0,
        }],
        ..SignerInput::default()
    };
    for label in ["by parts", "by parts again"] {
        let started = Instant::now();
        // None here: the writes above were made without one.
        black_box(store.get_summary("signer").unwrap());
        timed(&format!("{label}: store get_summary"), started);
        let started = Instant::now();
        let (files, revision) = store.get_paths("signer", &paths).unwrap().unwrap();
        timed(&format!("{label}: store get_paths"), started);
        let state = files.get("pki-state.json").map_or(0, <[u8]>::len);
        println!("phases {kind:<4} {n:>6} leaves: {label}: pki-state.json is {state} bytes");
        let started = Instant::now();
        let doc = pki_rotate::SignerState::from_part(&files, &names).unwrap();
        timed(&format!("{label}: from_part"), started);
        let started = Instant::now();
        let outcome = SignerEngine::step(&doc, &renew, now(), &mut rng).unwrap();
        timed(&format!("{label}: plan + apply"), started);
        let next = outcome.document.into_owned();
        let started = Instant::now();
        let after = next.to_files().unwrap();
        let changes = pki_rotate::store::Changes::between(&files, &after);
        timed(&format!("{label}: to_files"), started);
        let started = Instant::now();
        store
            .put_changes("signer", &revision, &changes, None)
            .unwrap();
        timed(&format!("{label}: store put_changes"), started);
    }
    // The whole of it, through the driver, with the summary it keeps.
    let (files, revision) = store.get("signer").unwrap().unwrap();
    let summary = pki_rotate::SignerState::from_files(&files)
        .unwrap()
        .idle(now())
        .and_then(|idle| idle.to_summary());
    store
        .put_with_summary("signer", Some(&revision), &files, summary.as_ref())
        .unwrap();
    for label in ["driver renew", "driver renew again"] {
        let started = Instant::now();
        let stepped = Driver::new(store)
            .step_unless_idle::<SignerEngine, _>("signer", &renew, now(), &mut rng)
            .unwrap();
        assert!(matches!(
            stepped,
            pki_rotate::Step {
                read: pki_rotate::Read::Part,
                ..
            }
        ));
        timed(&format!("{label}: step_unless_idle"), started);
    }
    let (doc, _) = Driver::new(store).load::<SignerEngine>("signer").unwrap();
    let started = Instant::now();
    black_box(SignerStatus::of(&doc, now()).unwrap());
    timed("status: SignerStatus::of", started);
}

/// The kube-apiserver and a `kube://` store of [`SMALL`] and of [`LARGE`]
/// leaves, each made by one whole write; None (with a line) when the
/// server's binaries are not given.
fn kube_stores() -> Option<(
    kube_support::kube::KubeServer,
    kube_support::admin::Admin,
    Vec<pki_kube::KubeStore>,
)> {
    if std::env::var_os("PKI_KUBE_APISERVER").is_none() {
        println!("kube  skipped: PKI_KUBE_APISERVER and PKI_KUBE_ETCD are not set");
        return None;
    }
    let server = kube_support::kube::KubeServer::start();
    let admin = kube_support::admin::Admin::new(&server);
    let stores = [SMALL, LARGE]
        .iter()
        .map(|&n| {
            let store = kube_support::admin::open(
                server.admin_kubeconfig(),
                &format!("kube://{}/scale{n}", kube_support::admin::NAMESPACE),
            );
            let started = Instant::now();
            Driver::new(&store)
                .create_at::<SignerEngine>("signer", &signer_with_leaves(n), T0)
                .unwrap();
            println!(
                "kube  {n:>6} leaves: created in {:.1} s, {} Secrets",
                started.elapsed().as_secs_f64(),
                admin.store_objects(&format!("scale{n}")).len()
            );
            store
        })
        .collect();
    Some((server, admin, stores))
}

/// Secrets the API server served for one `issue` and one `no-op rotate`
/// on each kube store.
fn kube_requests(admin: &kube_support::admin::Admin, stores: &[pki_kube::KubeStore]) {
    for (n, store) in [SMALL, LARGE].iter().zip(stores) {
        let mut steps = Steps {
            store,
            location: String::new(),
            rng: ChaCha20Rng::seed_from_u64(98),
            next_leaf: 2_000_000,
        };
        for row in ["issue", "no-op rotate"] {
            let before = admin.secret_requests();
            steps.run(row);
            let after = admin.secret_requests();
            let count = |verbs: &[&str]| -> u64 {
                verbs
                    .iter()
                    .map(|v| after.get(*v).unwrap_or(&0) - before.get(*v).unwrap_or(&0))
                    .sum()
            };
            println!(
                "kube  {row:<15} {n:>6} leaves: {} Secrets read (GET, LIST), {} written (create, update, delete)",
                count(&["GET", "LIST"]),
                count(&["POST", "PUT", "DELETE"])
            );
        }
    }
}

/// The kube rows, their ratios and the Secrets per step.
fn bench_kube(c: &mut Criterion) {
    let Some((server, admin, stores)) = kube_stores() else {
        return;
    };
    let url = |n: usize| format!("kube://{}/scale{n}", kube_support::admin::NAMESPACE);
    bench_rows(
        c,
        "kube",
        [
            (SMALL, &stores[0], url(SMALL)),
            (LARGE, &stores[1], url(LARGE)),
        ],
        &KUBE_ROWS,
    );
    c.final_summary();
    println!();
    ratios("kube");
    kube_requests(&admin, &stores);
    drop(server);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--kube") {
        let mut c = Criterion::default();
        bench_kube(&mut c);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--phases") {
        let server = etcd::Etcd::start();
        for n in args[i + 1..].iter().filter_map(|n| n.parse::<usize>().ok()) {
            let dir = tempfile::tempdir().unwrap();
            phases("fs", &FsStore::open_or_create(dir.path()).unwrap(), n);
            phases("etcd", &server.store(&format!("phases{n}")), n);
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--big" || a == "--big-fs") {
        let n = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(100_000);
        big(n, if args[i] == "--big-fs" { "fs" } else { "etcd" });
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--bytes") {
        let server = etcd::Etcd::start();
        for n in args[i + 1..].iter().filter_map(|n| n.parse::<usize>().ok()) {
            let store = server.store(&format!("bytes{n}"));
            Driver::new(&store)
                .create_at::<SignerEngine>("signer", &signer_with_leaves(n), T0)
                .unwrap();
            bytes_per_step(&server, &store, n);
        }
        return;
    }
    let mut c = Criterion::default().configure_from_args();

    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let fs: Vec<FsStore> = [SMALL, LARGE]
        .iter()
        .zip(&dirs)
        .map(|(&n, dir)| {
            let store = FsStore::open_or_create(dir.path()).unwrap();
            Driver::new(&store)
                .create_at::<SignerEngine>("signer", &signer_with_leaves(n), T0)
                .unwrap();
            store
        })
        .collect();
    let dir_of = |i: usize| dirs[i].path().display().to_string();
    bench_store(
        &mut c,
        "fs",
        [(SMALL, &fs[0], dir_of(0)), (LARGE, &fs[1], dir_of(1))],
    );

    let server = etcd::Etcd::start();
    let stores: Vec<pki_etcd::EtcdStore> = [SMALL, LARGE]
        .iter()
        .map(|&n| {
            let store = server.store(&format!("scale{n}"));
            Driver::new(&store)
                .create_at::<SignerEngine>("signer", &signer_with_leaves(n), T0)
                .unwrap();
            store
        })
        .collect();
    bench_store(
        &mut c,
        "etcd",
        [
            (SMALL, &stores[0], server.url(&format!("scale{SMALL}"))),
            (LARGE, &stores[1], server.url(&format!("scale{LARGE}"))),
        ],
    );

    c.final_summary();
    println!();
    ratios("fs");
    ratios("etcd");
    for (n, store) in [SMALL, LARGE].iter().zip(&stores) {
        bytes_per_step(&server, store, *n);
    }
    drop(server);
    bench_kube(&mut c);
}
