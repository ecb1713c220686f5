//! A live mutual-TLS server and its clients, built on the reload helpers
//! (pki-reload), keep talking while `pki` rotates the signer under them:
//! an automatic rotation, a forced one and an emergency one with a short
//! grace. Handshakes run continuously over 127.0.0.1; none may fail, and
//! neither process restarts. The helpers acknowledge each bundle they
//! load, so `pki status` ends with both consumers current.
//!
//! Reload latency (the new certificate's file written → the first
//! handshake presenting it) is printed, not asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/live.rs"]
mod live;
mod support;

use live::{Live, Side, leaf_der, written_at};
use pki_reload::{Acker, CertFiles, StoreAcker};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::cli::ok;

/// How long the clients run between two rotations.
const BETWEEN: Duration = Duration::from_millis(1500);
/// The most a reload may take before the test gives up (generous: the
/// machine is shared).
const LIMIT: Duration = Duration::from_secs(20);

fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

async fn pki_async(args: Vec<String>) -> String {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&args)
    })
    .await
    .unwrap()
}

/// Rotates with `args`, then waits for the server to present the new web
/// certificate; prints the reload latency.
async fn rotate_and_watch(live: &Live, dir: &Path, what: &str, args: &[&str]) {
    let before = live.tally.counts();
    let d = dir.display().to_string();
    let mut full = vec!["rotate".to_string(), d];
    full.extend(args.iter().map(|a| a.to_string()));
    let out = pki_async(full).await;
    assert!(out.contains("rotated CA"), "{what}: {out}");
    let cert = dir.join("certs/web/tls.crt");
    let written = written_at(&cert);
    let seen = live.until_seen(&leaf_der(&cert), LIMIT).await;
    let latency = seen.duration_since(written).unwrap_or_default();
    tokio::time::sleep(BETWEEN).await;
    let after = live.tally.counts();
    let handshakes = after.0 - before.0;
    println!(
        "{what}: reload latency {:.1} ms (check interval {} ms); {handshakes} handshakes, {:.0}/s, {} failed",
        latency.as_secs_f64() * 1e3,
        live::CHECK_INTERVAL.as_millis(),
        handshakes as f64 / (BETWEEN.as_secs_f64() + latency.as_secs_f64()),
        after.1 - before.1
    );
    assert!(handshakes > 0, "{what}: no handshakes");
    assert_eq!(
        after.1,
        0,
        "{what}: failed handshakes: {:?}",
        live.tally.errors.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_mtls_pair_keeps_talking_through_automatic_forced_and_emergency_rotations() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    let d = dir.display().to_string();
    // A CA made two days ago with a three-day lifetime and 36 hours of
    // minimum trust: due for rotation now, on the real clock that TLS
    // verification uses.
    let now = time::OffsetDateTime::now_utc();
    let made = rfc3339(now - time::Duration::days(2));
    ok(&[
        "init",
        &d,
        "--lifetime",
        "3d",
        "--min-trust",
        "36h",
        "--now",
        &made,
    ]);
    ok(&["issue", &d, "web", "--dns", "web.test", "--now", &made]);
    ok(&[
        "issue",
        &d,
        "peer",
        "--dns",
        "peer.test",
        "--client",
        "--now",
        &made,
    ]);

    let acker = |name: &str| -> Arc<dyn Acker> {
        StoreAcker::new(pki_rotate::FsStore::open(&dir).unwrap(), name)
    };
    let bundle = dir.join("ca-bundle.crt");
    let live = Live::start(
        Side {
            cert: CertFiles::leaf(&dir, "web"),
            trust: vec![bundle.clone()],
        },
        Side {
            cert: CertFiles::leaf(&dir, "peer"),
            trust: vec![bundle.clone()],
        },
        "web.test",
        4,
        (Some(acker("server")), Some(acker("client"))),
    )
    .await;
    tokio::time::sleep(BETWEEN).await;
    assert!(
        live.tally.counts().0 > 0,
        "no handshake before any rotation"
    );

    // Due: the CA has a day left, less than M.
    rotate_and_watch(&live, &dir, "automatic rotation", &[]).await;
    // Rotations this close together would strand consumers that reload
    // only within M; these reload within a second.
    rotate_and_watch(
        &live,
        &dir,
        "forced rotation",
        &[
            "--force",
            "drill",
            "--allow-trust-break",
            "live consumers reload",
        ],
    )
    .await;
    rotate_and_watch(
        &live,
        &dir,
        "emergency rotation (grace 1h)",
        &[
            "--force",
            "key exposure drill",
            "--grace",
            "1h",
            "--allow-trust-break",
            "live consumers reload",
        ],
    )
    .await;

    let server_loads = live.server_cert.generation();
    let client_loads = live.client_cert.generation();
    let trust_loads = live.client_trust.generation();
    let tally = live.stop().await;
    let (total, failed) = tally.counts();
    println!(
        "{total} handshakes, {failed} failed; server certificate loaded {server_loads} times, client certificate {client_loads}, client bundle {trust_loads}"
    );
    assert_eq!(failed, 0);
    assert_eq!(server_loads, 4, "one load, then one per rotation");
    assert_eq!(client_loads, 4);
    assert_eq!(trust_loads, 4);

    // Both helpers acknowledged the current bundle (their acks are
    // written on threads of their own: wait for them).
    let start = std::time::Instant::now();
    loop {
        let status: serde_json::Value =
            serde_json::from_str(&ok(&["status", &d, "--json"])).unwrap();
        let consumers = status["consumers"].as_array().unwrap().clone();
        let current = consumers.iter().filter(|c| c["current"] == true).count();
        if consumers.len() == 2 && current == 2 {
            break;
        }
        assert!(start.elapsed() < LIMIT, "acks missing: {consumers:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn set_status(d: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["set", "status", d, "--json"])).unwrap()
}

/// Lets the helpers reload under traffic, then acknowledges every target
/// that has not loaded the current step, as a node agent would after its
/// reload; again until all have (a step may move client certificates once
/// the servers acknowledged).
async fn ack_all(live: &Live, d: &str, step: &str) {
    for _ in 0..4 {
        tokio::time::sleep(BETWEEN).await;
        let status = set_status(d);
        let pending: Vec<String> = status["targets"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, t)| t["progress"] != "loaded")
            .map(|(name, _)| name.clone())
            .collect();
        if pending.is_empty() {
            let (done, failed) = live.tally.counts();
            println!("set {step}: every target loaded; {done} handshakes so far, {failed} failed");
            assert_eq!(
                failed,
                0,
                "{step}: failed handshakes: {:?}",
                live.tally.errors.lock().unwrap()
            );
            return;
        }
        for target in pending {
            let path = format!("{d}/targets/{target}");
            let fp = ok(&["fingerprint", &path]).trim().to_string();
            ok(&["set", "ack", d, &target, "--fingerprint", &fp]);
        }
    }
    panic!(
        "{step}: targets still pending: {}",
        set_status(d)["targets"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_mtls_pair_keeps_talking_through_every_step_of_a_ca_set_rotation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.display().to_string();
    // The cluster CA signs the API server's serving certificate and the
    // kubelet's client certificate: the rotation gives it a separate new
    // client CA.
    ok(&["set", "init", &d, "--ca", "cluster:serving+client"]);
    ok(&[
        "set",
        "issue",
        &d,
        "api",
        "--ca",
        "cluster",
        "--serving",
        "--dns",
        "api.test",
        "--target",
        "apiserver",
    ]);
    ok(&[
        "set", "issue", &d, "kubelet", "--ca", "cluster", "--client", "--cn", "kubelet",
        "--target", "node",
    ]);
    ok(&["set", "target", &d, "apiserver", "--client-ca", "cluster"]);
    ok(&["set", "target", &d, "node", "--trusts", "cluster"]);
    let target = |t: &str| dir.join("targets").join(t);
    let live = Live::start(
        Side {
            cert: CertFiles::target_leaf(&dir, "apiserver", "api"),
            trust: vec![target("apiserver").join("client-ca/cluster.crt")],
        },
        Side {
            cert: CertFiles::target_leaf(&dir, "node", "kubelet"),
            trust: vec![target("node").join("trust/cluster.crt")],
        },
        "api.test",
        4,
        (None, None),
    )
    .await;
    ack_all(&live, &d, "idle").await;

    ok(&["set", "start", &d, "--reason", "live rotation"]);
    ack_all(&live, &d, "trust-both").await;
    let old_api = leaf_der(&target("apiserver").join("certs/api/tls.crt"));
    let mut steps = Vec::new();
    for _ in 0..3 {
        ok(&["set", "advance", &d]);
        let step = set_status(&d)["step"].as_str().unwrap().to_string();
        ack_all(&live, &d, &step).await;
        steps.push(step);
    }
    assert_eq!(steps, ["update-certs", "trust-new", "completed"]);
    // The server presents its certificate from the new CA.
    let new_api = leaf_der(&target("apiserver").join("certs/api/tls.crt"));
    assert_ne!(old_api, new_api);
    live.until_seen(&new_api, LIMIT).await;

    let (server_loads, client_loads) =
        (live.server_cert.generation(), live.client_cert.generation());
    let (server_trust, client_trust) = (
        live.server_trust.generation(),
        live.client_trust.generation(),
    );
    let tally = live.stop().await;
    let (total, failed) = tally.counts();
    println!(
        "CA set rotation: {total} handshakes, {failed} failed; loads: server certificate {server_loads}, client certificate {client_loads}, server client-ca bundle {server_trust}, client trust bundle {client_trust}"
    );
    assert_eq!(failed, 0, "{:?}", tally.errors.lock().unwrap());
    assert!(server_loads > 1 && client_loads > 1 && server_trust > 1 && client_trust > 1);
}
