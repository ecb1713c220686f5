//! Trust as a cluster reads it, watched throughout two rotations on a real
//! kube-apiserver: `pki controller` keeps serving Secrets for annotated
//! Services and injects the bundle into annotated ConfigMaps and a webhook
//! configuration; the CA rotates once when due (simulated time) and once
//! by force. All along, a checker reads every serving Secret and every
//! injected bundle again and again and verifies each chain against each
//! bundle (RFC 5280), and a real TLS server serving a Secret's files
//! answers a client holding each injected bundle: not one failing moment.
//! At the end of each phase OpenSSL (`-x509_strict`) agrees.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The kube-apiserver support includes pki-etcd's `free_port` by path.
#![allow(clippy::duplicate_mod)]

#[path = "support/kube_controller.rs"]
mod controller_support;
#[path = "support/kube_held.rs"]
mod held_support;
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;
#[path = "support/openssl.rs"]
mod openssl;

use controller_support::*;
use held_support::*;
use k8s_openapi::api::core::v1::Secret;
use kube_support::admin::Admin;
use kube_support::kube::KubeServer;
use pki_core::{Bundle, Certificate, PrivateKey};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const SERVICES: usize = 4;
const CONFIG_MAPS: usize = 2;

/// What the checker saw.
#[derive(Default)]
struct Tally {
    snapshots: usize,
    pairs: usize,
    handshakes: usize,
    /// Distinct sets of (leaf issuers, bundles): the moments it saw.
    moments: BTreeSet<String>,
    failures: Vec<String>,
}

/// The checker's loop: until `stop`, every chain against every bundle at
/// the phase's time, and svc0's files served over TLS to each bundle.
fn check_throughout(cluster: &Cluster, at: &AtomicI64, stop: &AtomicBool) -> Tally {
    let mut tally = Tally::default();
    while !stop.load(Ordering::SeqCst) {
        let snapshot = held(cluster);
        let served = served_files(cluster);
        // Read after the snapshot: a leaf of the next phase is only ever
        // seen once its time was set.
        let now = OffsetDateTime::from_unix_timestamp(at.load(Ordering::SeqCst)).unwrap();
        let bundles: BTreeSet<&String> =
            snapshot.bundles.iter().filter(|b| !b.is_empty()).collect();
        let mut moment = String::new();
        for (name, chain) in &snapshot.chains {
            let svc = name.strip_suffix("-tls").unwrap_or(name);
            moment.push_str(&chain[0].aki().map(hex::encode).unwrap_or_default());
            for bundle in &bundles {
                tally.pairs += 1;
                if let Err(e) = verifies(chain, bundle, svc, now) {
                    tally.failures.push(format!("{name} at {now}: {e}"));
                }
            }
        }
        if let Some((chain, key)) = served {
            for bundle in &bundles {
                let trusted = Bundle::from_pem(bundle.as_bytes()).unwrap();
                tally.handshakes += 1;
                let name = format!("svc0.{APPS}.svc");
                if let Err(e) = pki::tls::handshake(&chain, &key, &trusted, &name, now) {
                    tally.failures.push(format!("TLS to svc0 at {now}: {e}"));
                }
            }
        }
        for bundle in &bundles {
            moment.push_str(&bundle.len().to_string());
        }
        tally.moments.insert(moment);
        tally.snapshots += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    tally
}

/// svc0's Secret as a TLS server loads it: the chain and its key.
fn served_files(cluster: &Cluster) -> Option<(Vec<Certificate>, PrivateKey)> {
    let secret = cluster.get::<Secret>("svc0-tls")?;
    let data = secret.data?;
    let chain = Certificate::all_from_pem(&data.get("tls.crt")?.0).ok()?;
    let key = PrivateKey::from_pem(&data.get("tls.key")?.0).ok()?;
    Some((chain, key))
}

/// The store's report at `now`.
fn report(server: &KubeServer, home: &Path, now: &str) -> serde_json::Value {
    let out = output(pki(
        server,
        home,
        &["status", STORE, "--json", "--now", now],
    ));
    assert!(out.status.success(), "status: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits until the store's CA is not `old` (when given), every Secret's
/// leaf is from it and every injected bundle is the store's; returns that
/// CA's id.
fn wait_converged(
    server: &KubeServer,
    home: &Path,
    cluster: &Cluster,
    (now, old): (&str, Option<&str>),
) -> String {
    let started = Instant::now();
    loop {
        let ca = report(server, home, now)["ca"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        if Some(ca.as_str()) == old {
            assert!(
                started.elapsed() < CONVERGE,
                "no rotation within {CONVERGE:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let ski = ca.split('-').next().unwrap().to_string();
        let bundle = cluster.store_bundle();
        let held = held(cluster);
        let leaves_current = held.chains.len() == SERVICES
            && held.chains.values().all(|chain| {
                chain[0]
                    .aki()
                    .is_some_and(|aki| hex::encode(aki).starts_with(&ski))
            });
        if leaves_current && held.bundles.iter().all(|b| *b == bundle) {
            return ca;
        }
        assert!(
            started.elapsed() < CONVERGE,
            "not converged on {ca} within {CONVERGE:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// OpenSSL agrees with the checker on what the cluster holds now.
fn openssl_agrees(cluster: &Cluster, now: OffsetDateTime) {
    let held = held(cluster);
    for bundle in held.bundles.iter().collect::<BTreeSet<_>>() {
        let bundle = Bundle::from_pem(bundle.as_bytes()).unwrap();
        for (name, chain) in &held.chains {
            let verdict = openssl::verify(&bundle, chain, now, "sslserver");
            assert!(
                matches!(
                    verdict,
                    Ok(openssl::Verdict::Verified | openssl::Verdict::Unavailable)
                ),
                "OpenSSL: {name}: {verdict:?}"
            );
        }
    }
}

fn start_controller(server: &KubeServer, home: &Path, now: &str) -> Running {
    let args = ["controller", STORE, "--now", now, "--lease-duration", "3s"];
    let child = pki(server, home, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running(child)
}

fn time_text(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap()
}

#[test]
fn no_moment_of_two_rotations_has_a_serving_chain_that_an_injected_bundle_does_not_trust() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    // Consumers reload within an hour.
    init_short_lived(&server, home, &["--reload-interval", "1h"]);
    create_annotated(&cluster, SERVICES, CONFIG_MAPS);

    // Phase 1: the controller issues and injects.
    let first = at(T0) + time::Duration::hours(1);
    let at_phase = Arc::new(AtomicI64::new(first.unix_timestamp()));
    let mut controller = start_controller(&server, home, &time_text(first));
    let ca1 = wait_converged(&server, home, &cluster, (&time_text(first), None));
    openssl_agrees(&cluster, first);

    let stop = Arc::new(AtomicBool::new(false));
    let checker = {
        let (at, stop) = (Arc::clone(&at_phase), Arc::clone(&stop));
        let cluster = Cluster::new(&server);
        std::thread::spawn(move || check_throughout(&cluster, &at, &stop))
    };

    // Phase 2: an hour after the CA is due, the controller rotates it.
    terminate(&mut controller);
    let due = report(&server, home, &time_text(first))["rotation_due_at"]
        .as_str()
        .map(at)
        .unwrap();
    let second = due + time::Duration::hours(1);
    at_phase.store(second.unix_timestamp(), Ordering::SeqCst);
    let mut controller = start_controller(&server, home, &time_text(second));
    let ca2 = wait_converged(&server, home, &cluster, (&time_text(second), Some(&ca1)));
    assert_ne!(ca1, ca2, "the due rotation");
    openssl_agrees(&cluster, second);

    // Phase 3: two hours later (past the reload interval), by force.
    terminate(&mut controller);
    let third = second + time::Duration::hours(2);
    at_phase.store(third.unix_timestamp(), Ordering::SeqCst);
    let _controller = start_controller(&server, home, &time_text(third));
    let force = [
        "rotate",
        STORE,
        "--force",
        "drill",
        "--now",
        &time_text(third),
    ];
    let out = output(pki(&server, home, &force));
    assert!(out.status.success(), "rotate: {}", text(&out.stderr));
    let ca3 = wait_converged(&server, home, &cluster, (&time_text(third), Some(&ca2)));
    assert_ne!(ca2, ca3, "the forced rotation");
    openssl_agrees(&cluster, third);

    stop.store(true, Ordering::SeqCst);
    let tally = checker.join().unwrap();
    eprintln!(
        "{} snapshots, {} distinct moments, {} chain-bundle pairs verified, {} TLS handshakes, {} failures",
        tally.snapshots,
        tally.moments.len(),
        tally.pairs,
        tally.handshakes,
        tally.failures.len()
    );
    assert!(
        tally.failures.is_empty(),
        "failing moments:\n{}",
        tally.failures.join("\n")
    );
    // The checker saw the rotations happen, not only their ends.
    assert!(tally.moments.len() >= 3, "{} moments", tally.moments.len());
    assert!(tally.handshakes > 0 && tally.pairs > 0);
}
