//! `pki controller` against a real kube-apiserver (started by the test, as
//! pki-kube's own tests start it): an annotated Service gets a
//! `kubernetes.io/tls` Secret whose chain OpenSSL verifies against the
//! bundle injected into an annotated ConfigMap; a forced rotation re-issues
//! the Secret from the new CA while the injected bundle keeps both CAs
//! (the new chain verifies against the bundle from before the rotation
//! too); a Secret the controller did not create is left as it was; a store
//! that does not exist is one line (exit 1); SIGTERM stops it with exit 0.
//! Of two replicas the Lease holder acts, and the other takes over after a
//! kill -9 of the holder.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The kube-apiserver support includes pki-etcd's `free_port` by path.
#![allow(clippy::duplicate_mod)]

// The API server and its admin: pki-kube's own test support, by path.
#[path = "support/kube_controller.rs"]
mod controller_support;
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;
#[path = "support/openssl.rs"]
#[allow(dead_code)]
mod openssl;

use controller_support::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use kube_support::admin::Admin;
use kube_support::kube::KubeServer;
use pki_core::{Bundle, Certificate};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// OpenSSL (`-x509_strict`, TLS server purpose) accepts `chain` against
/// `bundle` at T2.
fn assert_verifies(chain: &str, bundle: &str, what: &str) {
    let chain = Certificate::all_from_pem(chain.as_bytes()).unwrap();
    let bundle = Bundle::from_pem(bundle.as_bytes()).unwrap();
    let verdict = openssl::verify(
        &bundle,
        &chain,
        at(T2) + time::Duration::minutes(1),
        "sslserver",
    );
    assert_eq!(verdict, Ok(openssl::Verdict::Verified), "{what}");
}

/// `pki verify` (pki-core's RFC 5280 path validation) accepts `chain`
/// against `bundle` for `dns`.
fn assert_pki_verifies(server: &KubeServer, home: &Path, chain: &str, bundle: &str, dns: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (chain_file, bundle_file) = (dir.path().join("chain.pem"), dir.path().join("bundle.pem"));
    std::fs::write(&chain_file, chain).unwrap();
    std::fs::write(&bundle_file, bundle).unwrap();
    let args = [
        "verify",
        "--bundle",
        bundle_file.to_str().unwrap(),
        "--chain",
        chain_file.to_str().unwrap(),
        "--dns",
        dns,
        "--at",
        T2,
    ];
    let out = output(pki(server, home, &args));
    assert!(
        out.status.success(),
        "pki verify --dns {dns}: {}",
        text(&out.stderr)
    );
}

/// A Secret `newer-tls` marked as the controller's of [`STORE`], holding
/// the leaf of another store's CA.
fn newer_replicas_secret(server: &KubeServer, home: &Path, cluster: &Cluster) -> Secret {
    let other = "kube://pki/other";
    for args in [
        vec!["init", other, "--now", T0],
        vec!["issue", other, "x", "--dns", "x.apps.svc", "--now", T0],
    ] {
        let out = output(pki(server, home, &args));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let api: Api<Secret> = Api::namespaced(cluster.client.clone(), "pki");
    let published = cluster
        .runtime
        .block_on(api.get("other.signer.leaf.x"))
        .unwrap();
    Secret {
        metadata: meta("newer-tls", &[("pki.invalid/serving-cert-store", STORE)]),
        type_: Some("kubernetes.io/tls".into()),
        data: published.data,
        ..Secret::default()
    }
}

#[test]
fn the_controller_issues_serving_secrets_injects_the_whole_bundle_and_keeps_trust_through_a_rotation()
 {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();

    // No store yet: one line naming what to do, exit 1.
    let out = output(pki(&server, home, &["controller", STORE, "--now", T2]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pki init"), "{stderr}");

    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    let cluster = Cluster::new(&server);
    _admin.create_namespace(APPS);
    // A Secret someone else made, which a Service names.
    let foreign = Secret {
        metadata: meta("foreign", &[]),
        data: Some(BTreeMap::from([(
            "tls.crt".to_string(),
            ByteString(b"not pki's".to_vec()),
        )])),
        ..Secret::default()
    };
    cluster.create(&foreign);
    cluster.create(&service("web", "web-tls"));
    cluster.create(&service("taken", "foreign"));
    let config_map = ConfigMap {
        metadata: meta("trust", &[("pki.invalid/inject-cabundle", "true")]),
        data: Some(BTreeMap::from([("keep".to_string(), "me".to_string())])),
        ..ConfigMap::default()
    };
    cluster.create(&config_map);

    // A Secret marked as this controller's that holds a leaf of a CA the
    // store never had (what a replica with a newer document would have
    // written): this replica must not write its older leaf over it.
    let newer = newer_replicas_secret(&server, home, &cluster);
    cluster.create(&newer);
    cluster.create(&service("newer", "newer-tls"));

    let log = tempfile::NamedTempFile::new().unwrap();
    let controller = pki(&server, home, &["controller", STORE, "--now", T2])
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let mut controller = Running(controller);

    let chain =
        cluster.wait_for::<Secret, _>("web-tls", "the serving Secret", |s| serving_chain(s, None));
    let bundle =
        cluster.wait_for::<ConfigMap, _>("trust", "the injected bundle", |c| injected(c, None));
    let secret: Secret = cluster.get("web-tls").unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(data(&secret, "ca.crt"), bundle, "ca.crt is the bundle");
    assert!(data(&secret, "tls.key").contains("PRIVATE KEY"));
    assert_verifies(
        &chain,
        &bundle,
        "the serving chain against the injected bundle",
    );
    for dns in ["web.apps.svc", "web.apps.svc.cluster.local"] {
        assert_pki_verifies(&server, home, &chain, &bundle, dns);
    }
    let trust: ConfigMap = cluster.get("trust").unwrap();
    assert_eq!(
        trust.data.as_ref().unwrap()["keep"],
        "me",
        "other keys stay"
    );

    // Rotation by hand while the controller runs: the Secret is re-issued
    // from the new CA, the injected bundle holds the old CA and the new.
    let rotate = ["rotate", STORE, "--force", "test", "--now", T1];
    let out = output(pki(&server, home, &rotate));
    assert!(out.status.success(), "rotate: {}", text(&out.stderr));
    let new_chain = cluster.wait_for::<Secret, _>("web-tls", "the re-issued Secret", |s| {
        serving_chain(s, Some(&chain))
    });
    let new_bundle =
        cluster.wait_for::<ConfigMap, _>("trust", "the new bundle", |c| injected(c, Some(&bundle)));
    let (old, new) = (
        Bundle::from_pem(bundle.as_bytes()).unwrap(),
        Bundle::from_pem(new_bundle.as_bytes()).unwrap(),
    );
    // The old CA's key stays trusted: its root, or bridge A (its subject
    // and key under the new root) that replaces it; and a new key is there.
    let keys = |bundle: &Bundle| -> Vec<Vec<u8>> {
        let keys = bundle.certs().iter().map(|ca| ca.ski().unwrap().to_vec());
        keys.collect()
    };
    let (old_keys, new_keys) = (keys(&old), keys(&new));
    assert!(
        old_keys.iter().all(|k| new_keys.contains(k)) && new_keys.len() > old_keys.len(),
        "the injected bundle keeps the old CA and adds the new: {old_keys:x?} then {new_keys:x?}"
    );
    let new_leaf = &Certificate::all_from_pem(new_chain.as_bytes()).unwrap()[0];
    assert!(
        new.certs()
            .iter()
            .filter(|ca| !old_keys.iter().any(|k| ca.ski() == Some(k.as_slice())))
            .any(|ca| pki_core::issued_by(new_leaf, ca).issued_by),
        "the re-issued leaf comes from the new CA"
    );
    assert_verifies(
        &new_chain,
        &new_bundle,
        "the new chain against the new bundle",
    );
    assert_verifies(
        &new_chain,
        &bundle,
        "the new chain against the bundle before",
    );
    assert_verifies(&chain, &new_bundle, "the old chain against the new bundle");
    let secret: Secret = cluster.get("web-tls").unwrap();
    assert_eq!(data(&secret, "ca.crt"), new_bundle);

    // The foreign Secret was never written, and the log says why.
    let after: Secret = cluster.get("foreign").unwrap();
    assert_eq!(
        after.data, foreign.data,
        "a Secret pki did not create stays"
    );
    let after: Secret = cluster.get("newer-tls").unwrap();
    assert!(after.data == newer.data, "a leaf of an unknown CA stays");
    // Idle, the controller writes nothing: the head of the document (the
    // commit point) and the injected ConfigMap keep their versions across
    // passes (each ConfigMap patch would wake it again, each commit too).
    let versions = || {
        let heads: Api<Secret> = Api::namespaced(cluster.client.clone(), "pki");
        let head = cluster
            .runtime
            .block_on(heads.get("service-ca.signer"))
            .unwrap();
        let trust: ConfigMap = cluster.get("trust").unwrap();
        (
            head.metadata.resource_version,
            trust.metadata.resource_version,
        )
    };
    let before = versions();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(versions(), before, "an idle controller wrote");

    // A Service deleted: its leaf leaves the store (its published Secret
    // in the store's namespace goes with it).
    let published = |leaf: &str| {
        let api: Api<Secret> = Api::namespaced(cluster.client.clone(), "pki");
        let params = kube::api::ListParams::default().labels("pki.invalid/published=leaf");
        let secrets = cluster.runtime.block_on(api.list(&params)).unwrap().items;
        secrets.iter().any(|s| {
            let annotations = s.metadata.annotations.as_ref();
            annotations
                .and_then(|a| a.get("pki.invalid/leaf"))
                .map(String::as_str)
                == Some(leaf)
        })
    };
    assert!(published("svc.apps.taken") && published("svc.apps.web"));
    let services: Api<Service> = cluster.api();
    let params = kube::api::DeleteParams::default();
    cluster
        .runtime
        .block_on(services.delete("taken", &params))
        .unwrap();
    let start = Instant::now();
    while published("svc.apps.taken") {
        assert!(
            start.elapsed() < CONVERGE,
            "the leaf of a deleted Service stays"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(published("svc.apps.web"), "the other leaf stays");

    let status = terminate(&mut controller);
    let log = std::fs::read_to_string(log.path()).unwrap();
    assert!(status.success(), "SIGTERM: {status:?}\n{log}");
    assert!(
        log.contains("apps/foreign") && log.contains("not overwritten"),
        "{log}"
    );
    assert_eq!(
        log.matches("apps/foreign exists").count(),
        1,
        "reported once: {log}"
    );
    assert!(
        log.contains("apps/newer-tls holds a certificate from a CA newer"),
        "{log}"
    );
}

#[test]
fn of_two_replicas_the_lease_holder_acts_and_the_other_takes_over_after_kill_9() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    cluster.create(&service("web", "web-tls"));

    let mut replicas = [
        spawn_controller(&server, home),
        spawn_controller(&server, home),
    ];
    cluster.wait_for::<Secret, _>("web-tls", "the serving Secret", |s| serving_chain(s, None));
    let held = |log: &str| log.contains("Lease service-ca.controller: held by");
    let logs: Vec<String> = replicas.iter().map(|(_, log)| read(log)).collect();
    let leaders: Vec<usize> = (0..2).filter(|&i| held(&logs[i])).collect();
    assert_eq!(leaders.len(), 1, "one replica holds the Lease: {logs:#?}");
    let (leader, other) = (leaders[0], 1 - leaders[0]);
    assert!(
        logs[leader].contains("Secret apps/web-tls holds leaf"),
        "{logs:#?}"
    );
    assert!(
        !logs[other].contains("holds leaf"),
        "the other replica waits: {logs:#?}"
    );

    // kill -9: no release; the other replica takes over once the lease
    // (3 s) lapses, and serves a Service annotated after the kill.
    replicas[leader].0.kill().unwrap();
    replicas[leader].0.wait().unwrap();
    let killed = Instant::now();
    cluster.create(&service("late", "late-tls"));
    cluster.wait_for::<Secret, _>("late-tls", "the Secret after the takeover", |s| {
        serving_chain(s, None)
    });
    let took = killed.elapsed();
    let log = read(&replicas[other].1);
    assert!(log.contains("now held by"), "{log}");
    assert!(
        took >= Duration::from_secs(1),
        "taken over after the lease lapsed: {took:?}"
    );
    eprintln!(
        "takeover: the new Service's Secret {took:?} after kill -9 of the leader (lease 3 s)"
    );
    let status = terminate(&mut replicas[other].0);
    assert!(
        status.success(),
        "SIGTERM: {status:?}\n{}",
        read(&replicas[other].1)
    );
}
