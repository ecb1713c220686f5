//! kill -9 of the leading `pki controller` in the middle of a rotation,
//! 20 times, on a real kube-apiserver: two replicas on one store, a CA
//! due for rotation at their (frozen) clock, the leader killed at a random
//! moment of its pass. Each time the other replica takes over within the
//! lease (2 s) and finishes; then every serving Secret's leaf is from the
//! current CA and verifies against every injected bundle, the chains of
//! before still verify against the new bundles (nothing lost), the store
//! made exactly one rotation, and a watch on the Secrets saw none of them
//! go back to an older CA's leaf (no Secret written by two leaders with
//! different CAs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The kube-apiserver support includes pki-etcd's `free_port` by path.
#![allow(clippy::duplicate_mod)]

#[path = "support/kube_controller.rs"]
mod controller_support;
#[path = "support/kube_held.rs"]
mod held_support;
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;

use controller_support::*;
use futures::StreamExt;
use held_support::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::watcher;
use kube_support::admin::Admin;
use kube_support::kube::KubeServer;
use pki_core::Certificate;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const RUNS: usize = 20;
const SERVICES: usize = 6;
const CONFIG_MAPS: usize = 3;
/// The replicas' lease.
const LEASE: Duration = Duration::from_secs(2);
/// The longest the kill waits after the leader took the Lease, at first: a
/// little longer than its rotating pass takes on an idle machine (the
/// kills after 180 ms found every Secret written). The window then follows
/// the machine's speed ([`next_window`]), so that kills keep landing inside
/// the pass on a loaded machine too.
const KILL_WITHIN_MS: u64 = 250;

/// The kill window after a run whose kill landed at `phase`: wider when
/// the leader had not reported its rotation yet, narrower when it had
/// finished its pass, so that the kills spread over the pass.
fn next_window(window: u64, phase: &str) -> u64 {
    let finished = phase.contains(&format!("{SERVICES} of {SERVICES} Secrets"))
        && phase.contains(&format!("{n} of {n} objects", n = CONFIG_MAPS + 1));
    if phase.starts_with("before") {
        (window * 5 / 4).min(3_000)
    } else if finished {
        (window * 4 / 5).max(50)
    } else {
        window
    }
}

/// Every version of every Secret in [`APPS`] the watch saw: its name and
/// the key id (hex) of its leaf's issuer.
type Versions = Arc<Mutex<Vec<(String, String)>>>;

/// Watches the Secrets in [`APPS`] on a thread of its own until the test
/// ends, with a client of that thread's runtime (a kube-rs client serves
/// its requests on the runtime that made it).
fn watch_secrets(server: &KubeServer) -> Versions {
    let versions: Versions = Arc::default();
    let seen = Arc::clone(&versions);
    let kubeconfig = server.admin_kubeconfig().to_path_buf();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
            let options = kube::config::KubeConfigOptions::default();
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .unwrap();
            let client = kube::Client::try_from(config).unwrap();
            let api: Api<Secret> = Api::namespaced(client, APPS);
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                let secret = match event {
                    Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => s,
                    Ok(watcher::Event::InitDone) => {
                        let _ = ready_tx.send(());
                        continue;
                    }
                    _ => continue,
                };
                if let Some(issuer) = leaf_issuer(&secret) {
                    let name = secret.metadata.name.clone().unwrap_or_default();
                    seen.lock().unwrap().push((name, issuer));
                }
            }
        });
    });
    ready.recv_timeout(CONVERGE).unwrap();
    versions
}

/// The key id (hex) of the issuer of a Secret's leaf.
fn leaf_issuer(secret: &Secret) -> Option<String> {
    let pem = secret.data.as_ref()?.get("tls.crt")?;
    let chain = Certificate::all_from_pem(&pem.0).ok()?;
    Some(hex::encode(chain.first()?.aki()?))
}

/// A small generator for the kill moments (seeded from the clock, the
/// seed printed so that a failing run can be repeated).
struct Moments(u64);

impl Moments {
    fn next_ms(&mut self, below: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % below
    }
}

/// `pki status --json --now NOW` of the store.
fn report(server: &KubeServer, home: &Path, now: &str) -> serde_json::Value {
    let out = output(pki(
        server,
        home,
        &["status", STORE, "--json", "--now", now],
    ));
    assert!(out.status.success(), "status: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Converged on the CA whose key id starts with `ca`: every Secret's leaf
/// from it, every injected bundle the store's `bundle`.
fn converged(held: &Held, ca: &str, bundle: &str) -> bool {
    held.chains.len() == SERVICES
        && held.chains.values().all(|chain| {
            chain
                .first()
                .and_then(|leaf| leaf.aki())
                .is_some_and(|aki| hex::encode(aki).starts_with(ca))
        })
        && held.bundles.iter().all(|b| b == bundle)
}

fn setup(server: &KubeServer, home: &Path, cluster: &Cluster) {
    init_short_lived(server, home, &[]);
    create_annotated(cluster, SERVICES, CONFIG_MAPS);
}

/// One run's outcome, for the summary.
struct Run {
    delay_ms: u64,
    takeover: Duration,
    /// What the leader had done when it was killed.
    phase: String,
}

/// What the killed leader's log says it did.
fn phase(log: &str) -> String {
    let written = log.matches(" holds leaf ").count();
    if !log.contains("rotated CA") {
        "before it reported its rotation".into()
    } else {
        let injected = log.matches("CA bundle injected").count();
        let objects = CONFIG_MAPS + 1;
        format!(
            "after its rotation committed, {written} of {SERVICES} Secrets written, {injected} of {objects} objects injected"
        )
    }
}

#[test]
fn kill_9_of_the_leader_in_the_middle_of_a_rotation_20_times_converges_and_loses_nothing() {
    let started = Instant::now();
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    setup(&server, home, &cluster);
    let versions = watch_secrets(&server);
    let seed = OffsetDateTime::now_utc().unix_timestamp_nanos() as u64 | 1;
    eprintln!("kill moments seeded with {seed}");
    let mut moments = Moments(seed);
    let mut cas = Vec::new();
    let mut runs = Vec::new();
    let mut window = KILL_WITHIN_MS;
    let mut now = T0.to_string();
    for run in 0..RUNS {
        let before = report(&server, home, &now);
        cas.push(before["ca"]["id"].as_str().unwrap().to_string());
        // An hour after the CA became due: the leader's first pass rotates.
        let due =
            OffsetDateTime::parse(before["rotation_due_at"].as_str().unwrap(), &Rfc3339).unwrap();
        now = (due + time::Duration::hours(1)).format(&Rfc3339).unwrap();
        let old = held(&cluster);
        let old_ca = before["ca"]["id"].as_str().unwrap();
        let outcome = kill_the_leader_once(
            &server,
            home,
            &cluster,
            (&now, old_ca),
            moments.next_ms(window),
        );
        eprintln!(
            "run {run}: killed {} ms after the Lease was taken, {}; taken over in {:?}",
            outcome.delay_ms, outcome.phase, outcome.takeover
        );
        check_run(&server, home, &cluster, &now, &before, &old);
        window = next_window(window, &outcome.phase);
        runs.push(outcome);
    }
    cas.push(
        report(&server, home, &now)["ca"]["id"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    assert_monotone(&versions.lock().unwrap(), &cas);
    let mut takeovers: Vec<Duration> = runs.iter().map(|r| r.takeover).collect();
    takeovers.sort();
    eprintln!(
        "kill -9 x{RUNS} (lease {LEASE:?}): takeover min {:?}, median {:?}, max {:?}; {} kills before the leader reported its rotation; {:?} in all",
        takeovers[0],
        takeovers[RUNS / 2],
        takeovers[RUNS - 1],
        runs.iter()
            .filter(|r| r.phase.starts_with("before"))
            .count(),
        started.elapsed()
    );
}

/// Two replicas with the clock at `now`; the one that takes the Lease is
/// killed `delay_ms` after; the other must take over within the lease and
/// finish; then it is stopped (SIGTERM, which releases the Lease).
fn kill_the_leader_once(
    server: &KubeServer,
    home: &Path,
    cluster: &Cluster,
    (now, old_ca): (&str, &str),
    delay_ms: u64,
) -> Run {
    let lease = format!("{}s", LEASE.as_secs());
    let spawn = || {
        let log = tempfile::NamedTempFile::new().unwrap();
        let args = [
            "controller",
            STORE,
            "--now",
            now,
            "--lease-duration",
            &lease,
        ];
        let child = pki(server, home, &args)
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        (Running(child), log)
    };
    let mut replicas = [spawn(), spawn()];
    let holds = |i: usize| read(&replicas[i].1).contains("held by");
    let start = Instant::now();
    let leader = loop {
        if let Some(i) = (0..2).find(|&i| holds(i)) {
            break i;
        }
        assert!(start.elapsed() < CONVERGE, "no replica took the Lease");
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(delay_ms));
    replicas[leader].0.kill().unwrap();
    replicas[leader].0.wait().unwrap();
    let killed = Instant::now();
    let phase = phase(&read(&replicas[leader].1));
    let other = 1 - leader;
    while !read(&replicas[other].1).contains("now held by") {
        assert!(
            killed.elapsed() < CONVERGE,
            "no takeover: {}",
            read(&replicas[other].1)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let takeover = killed.elapsed();
    assert!(
        takeover <= LEASE * 2,
        "taken over {takeover:?} after the kill, more than the lease {LEASE:?} and its renewal"
    );
    let log = read(&replicas[other].1);
    wait_converged(server, home, cluster, (now, old_ca), &log);
    let status = terminate(&mut replicas[other].0);
    assert!(
        status.success(),
        "SIGTERM: {status:?}\n{}",
        read(&replicas[other].1)
    );
    Run {
        delay_ms,
        takeover,
        phase,
    }
}

/// Polls until the store's CA is a new one and the cluster holds its
/// leaves and bundle everywhere.
fn wait_converged(
    server: &KubeServer,
    home: &Path,
    cluster: &Cluster,
    (now, old_ca): (&str, &str),
    log: &str,
) {
    let start = Instant::now();
    loop {
        let status = report(server, home, now);
        let id = status["ca"]["id"].as_str().unwrap();
        let ca = id.split('-').next().unwrap();
        // Until the survivor's first pass commits, the store and the
        // cluster agree on the old CA: that is no convergence.
        if id != old_ca && converged(&held(cluster), ca, &cluster.store_bundle()) {
            return;
        }
        assert!(
            start.elapsed() < CONVERGE,
            "not converged within {CONVERGE:?}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// After a run: one rotation more; every serving chain from the new CA
/// verifying against every injected bundle at `now`; the chains of before
/// verifying against them too; `pki status` calling every object current;
/// one Event on the store's head naming the new CA.
fn check_run(
    server: &KubeServer,
    home: &Path,
    cluster: &Cluster,
    now: &str,
    before: &serde_json::Value,
    old: &Held,
) {
    let after = report(server, home, now);
    assert_eq!(
        after["rotations"],
        before["rotations"].as_u64().unwrap() + 1,
        "one rotation"
    );
    let ca = after["ca"]["id"].as_str().unwrap();
    assert_ne!(ca, before["ca"]["id"].as_str().unwrap());
    let at = OffsetDateTime::parse(now, &Rfc3339).unwrap();
    let new = held(cluster);
    for (secret, chain) in new.chains.iter().chain(&old.chains) {
        let svc = secret.trim_end_matches("-tls");
        for bundle in &new.bundles {
            verifies(chain, bundle, svc, at)
                .unwrap_or_else(|e| panic!("{secret} against an injected bundle: {e}"));
        }
    }
    let targets = after["injection_targets"].as_array().unwrap();
    assert_eq!(targets.len(), SERVICES + CONFIG_MAPS + 1);
    assert!(targets.iter().all(|t| t["current"] == true), "{targets:#?}");
    let start = Instant::now();
    loop {
        let events = cluster.events("pki", "Secret", "service-ca.signer");
        let naming = events
            .iter()
            .filter(|e| e.reason == "Rotated" && e.note.contains(ca))
            .count();
        if naming == 1 {
            break;
        }
        assert!(
            naming == 0 && start.elapsed() < CONVERGE,
            "{naming} Rotated Events name {ca}: {events:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every Secret's leaves, in the order the watch saw them, come from CAs
/// in the order the store had them: none ever went back to an older CA.
fn assert_monotone(versions: &[(String, String)], cas: &[String]) {
    let generation = |issuer: &str| {
        cas.iter()
            .position(|id| issuer.starts_with(id.split('-').next().unwrap()))
            .unwrap_or_else(|| panic!("a leaf of a CA the store never had: {issuer}"))
    };
    let mut last: BTreeMap<&str, usize> = BTreeMap::new();
    for (secret, issuer) in versions {
        let now = generation(issuer);
        if let Some(&before) = last.get(secret.as_str()) {
            assert!(
                now >= before,
                "{secret} went back from CA {before} to CA {now}"
            );
        }
        last.insert(secret.as_str(), now);
    }
    assert_eq!(last.len(), SERVICES, "every Secret was watched");
}
