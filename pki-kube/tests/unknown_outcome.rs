//! A commit whose answer is lost after the API server applied it: through
//! a proxy that drops the server's replies from the commit on, the write
//! is an unknown outcome (never "nothing changed"), within twice the
//! request timeout; when the replies flow again before the writer asks,
//! the writer finds its own generation in the head and succeeds, for a
//! whole write and for a write of changes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_kube::{KubeOptions, KubeStore, KubeUrl};
use pki_rotate::{File, Files, RotateError, Store, StoreError};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use support::admin::{Admin, open, options};
use support::kube::KubeServer;
use support::proxy::Proxy;

const URL: &str = "kube://pki/lost";
const TIMEOUT: Duration = Duration::from_secs(2);

fn files(version: &str) -> Files {
    let mut files = Files::new();
    files
        .insert("state.json", File::public(version.as_bytes().to_vec()))
        .unwrap();
    files
}

/// The admin's kubeconfig with the server's address replaced by the
/// proxy's (its certificate names 127.0.0.1, so TLS still verifies).
fn through(server: &KubeServer, proxy: &Proxy, dir: &tempfile::TempDir) -> PathBuf {
    let text = std::fs::read_to_string(server.admin_kubeconfig()).unwrap();
    let address = server.url().replace("https://", "");
    assert!(text.contains(&address));
    let path = dir.path().join("proxied.kubeconfig");
    std::fs::write(&path, text.replace(&address, &proxy.address())).unwrap();
    path
}

fn proxied_store(server: &KubeServer, proxy: &Proxy, dir: &tempfile::TempDir) -> KubeStore {
    let options = KubeOptions {
        request_timeout: TIMEOUT,
        ..options(&through(server, proxy, dir))
    };
    KubeStore::open(&KubeUrl::parse(URL).unwrap(), options).unwrap()
}

#[test]
fn a_commit_whose_answer_is_lost_is_an_unknown_outcome_although_it_landed() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let proxy = Proxy::start(&server.url().replace("https://", ""));
    let dir = tempfile::tempdir().unwrap();
    let mut store = proxied_store(&server, &proxy, &dir);
    let first = store.put("signer", None, &files("1")).unwrap();
    let swallow = proxy.swallow_flag();
    store.set_write_hook(Some(Box::new(move |step| {
        if step == "commit" {
            swallow.store(true, Ordering::SeqCst);
        }
        Ok(())
    })));
    let started = Instant::now();
    let error = store.put("signer", Some(&first), &files("2")).unwrap_err();
    let took = started.elapsed();
    match &error {
        RotateError::Store(StoreError::UnknownOutcome { key, detail, .. }) => {
            assert_eq!(key, "signer");
            assert!(detail.contains("no answer"), "{detail}");
        }
        other => panic!("expected an unknown outcome, got {other}"),
    }
    assert!(took < 2 * TIMEOUT + Duration::from_secs(3), "{took:?}");
    assert!(error.to_string().contains("rerunning the command is safe"));
    // It did land: a store that reaches the server directly reads it.
    proxy.swallow(false);
    let direct = open(server.admin_kubeconfig(), URL);
    assert_eq!(direct.get("signer").unwrap().unwrap().0, files("2"));
}

#[test]
fn a_commit_whose_answer_is_lost_but_whose_head_is_found_is_a_success() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let proxy = Proxy::start(&server.url().replace("https://", ""));
    let dir = tempfile::tempdir().unwrap();
    let mut store = proxied_store(&server, &proxy, &dir);
    let first = store.put("signer", None, &files("1")).unwrap();
    let swallow = proxy.swallow_flag();
    store.set_write_hook(Some(Box::new(move |step| {
        if step == "commit" {
            swallow.store(true, Ordering::SeqCst);
            // The answer is lost; the replies flow again before the writer,
            // having waited the request timeout, reads the head again.
            let swallow = swallow.clone();
            std::thread::spawn(move || {
                std::thread::sleep(TIMEOUT / 2);
                swallow.store(false, Ordering::SeqCst);
            });
        }
        Ok(())
    })));
    let started = Instant::now();
    let second = store.put("signer", Some(&first), &files("2")).unwrap();
    // It waited for the lost answer, then found its head.
    assert!(started.elapsed() >= TIMEOUT, "{:?}", started.elapsed());
    store.set_write_hook(None);
    let direct = open(server.admin_kubeconfig(), URL);
    assert_eq!(direct.get("signer").unwrap().unwrap(), (files("2"), second));
}

#[test]
fn a_write_of_changes_whose_answer_is_lost_but_whose_head_is_found_is_a_success() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let proxy = Proxy::start(&server.url().replace("https://", ""));
    let dir = tempfile::tempdir().unwrap();
    let mut store = proxied_store(&server, &proxy, &dir);
    // Heavy enough for several buckets: the change rewrites one of them,
    // and the head it commits names the others' shards as they were.
    let mut files = files("1");
    for i in 0..100u8 {
        files
            .insert(
                format!("certs/leaf{i}/tls.crt"),
                File::public(vec![i; 4_000]),
            )
            .unwrap();
    }
    let first = store.put("signer", None, &files).unwrap();
    let mut changes = pki_rotate::store::Changes::new();
    changes
        .write("certs/leaf7/tls.crt", File::public(b"renewed".to_vec()))
        .unwrap();
    changes
        .write("state.json", File::public(b"2".to_vec()))
        .unwrap();
    let swallow = proxy.swallow_flag();
    store.set_write_hook(Some(Box::new(move |step| {
        if step == "commit" {
            swallow.store(true, Ordering::SeqCst);
            let swallow = swallow.clone();
            std::thread::spawn(move || {
                std::thread::sleep(TIMEOUT / 2);
                swallow.store(false, Ordering::SeqCst);
            });
        }
        Ok(())
    })));
    let started = Instant::now();
    let second = store.put_changes("signer", &first, &changes, None).unwrap();
    assert!(started.elapsed() >= TIMEOUT, "{:?}", started.elapsed());
    store.set_write_hook(None);
    changes.apply_to(&mut files).unwrap();
    let direct = open(server.admin_kubeconfig(), URL);
    assert_eq!(direct.get("signer").unwrap().unwrap(), (files, second));
}
