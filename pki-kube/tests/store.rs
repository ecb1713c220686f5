//! The `kube://` store against a real kube-apiserver: documents read back
//! as written, across shards; a stale revision is a conflict and changes
//! nothing; a write stopped at any request leaves the old document and no
//! object of its own; writers racing in threads lose no update; an account
//! without rights gets one line naming what it lacks; an unreachable or
//! silent server fails within the bounds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_kube::{KubeOptions, KubeStore, KubeUrl, MAX_SECRET_DATA};
use pki_rotate::{File, Files, Revision, RotateError, Store, StoreError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::admin::{Admin, NAMESPACE, data_size, open, options};
use support::kube::{ADMIN, KubeServer, READER};

fn files(version: &str) -> Files {
    let mut files = Files::new();
    files
        .insert(
            "state.json",
            File::public(format!("{{\"v\":\"{version}\"}}")),
        )
        .unwrap();
    files
        .insert("certs/web/tls.key", File::secret(format!("key {version}")))
        .unwrap();
    files.insert("empty", File::public(Vec::new())).unwrap();
    files.insert_dir("certs").unwrap();
    files.insert_dir("leaf-requests").unwrap();
    files
}

/// What `leaves` leaves of a large signer weigh: per leaf a certificate,
/// a key, both in one and its request, and a state file of `state` bytes.
fn large(leaves: usize, state: usize, salt: u8) -> Files {
    let mut files = Files::new();
    for i in 0..leaves {
        let fill = |n: usize, b: u8| vec![b ^ salt ^ (i as u8); n];
        let name = format!("certs/leaf-{i:05}");
        files
            .insert(format!("{name}/tls.crt"), File::public(fill(1_400, 1)))
            .unwrap();
        files
            .insert(format!("{name}/tls.key"), File::secret(fill(250, 2)))
            .unwrap();
        files
            .insert(format!("{name}/tls.pem"), File::secret(fill(1_650, 3)))
            .unwrap();
        files
            .insert(
                format!("leaf-requests/leaf-{i:05}.json"),
                File::public(fill(200, 4)),
            )
            .unwrap();
    }
    let bytes: Vec<u8> = (0..state).map(|i| (i % 253) as u8 ^ salt).collect();
    files.insert("state.json", File::public(bytes)).unwrap();
    files
}

fn is_conflict(e: &RotateError) -> bool {
    matches!(e, RotateError::Store(StoreError::Conflict { .. }))
}

#[test]
fn a_document_reads_back_as_written_and_a_stale_revision_is_a_conflict_that_changes_nothing() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let store = open(server.admin_kubeconfig(), "kube://pki/prod");
    assert_eq!(store.get("signer").unwrap(), None);

    let first = store.put("signer", None, &files("1")).unwrap();
    let (read, revision) = store.get("signer").unwrap().unwrap();
    assert_eq!(read, files("1"));
    assert_eq!(revision, first);
    assert!(read.file("certs/web/tls.key").unwrap().secret);
    // A key that is not a DNS label lives under its hash, beside it.
    store.put("sets/etcd", None, &files("s")).unwrap();
    assert_eq!(store.get("sets/etcd").unwrap().unwrap().0, files("s"));

    // Creating again, or writing from a stale read, loses.
    assert!(is_conflict(
        &store.put("signer", None, &files("x")).unwrap_err()
    ));
    let second = store.put("signer", Some(&first), &files("2")).unwrap();
    assert_ne!(second, first);
    let stale = store.put("signer", Some(&first), &files("3")).unwrap_err();
    assert!(is_conflict(&stale), "{stale}");
    let unknown = Revision::new("1");
    assert!(is_conflict(
        &store
            .put("nothing", Some(&unknown), &files("3"))
            .unwrap_err()
    ));
    assert_eq!(store.get("signer").unwrap().unwrap(), (files("2"), second));

    // Each document is its head and one shard: the replaced and the losing
    // generations are gone, and every object is labelled.
    let objects = admin.store_objects("prod");
    assert_eq!(objects.len(), 4, "{objects:?}");
    assert!(objects.contains(&"prod.signer".to_string()), "{objects:?}");
    for secret in admin.secrets() {
        let labels = secret.metadata.labels.unwrap();
        assert_eq!(labels["app.kubernetes.io/managed-by"], "pki");
        assert_eq!(labels["pki.invalid/store"], "prod");
    }
}

#[test]
fn a_document_of_thousands_of_leaves_is_sharded_under_the_limit_and_reads_back_whole() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let store = open(server.admin_kubeconfig(), "kube://pki/big");
    let one = large(2_500, 3_000_000, 0);
    let first = store.put("signer", None, &one).unwrap();
    assert_eq!(store.get("signer").unwrap().unwrap(), (one, first.clone()));
    let shards = admin.store_objects("big").len() - 1;
    assert!(shards >= 10, "{shards} shards");
    for secret in admin.secrets() {
        assert!(
            data_size(&secret) < MAX_SECRET_DATA,
            "{:?}",
            secret.metadata.name
        );
    }
    // A second generation replaces the first whole.
    let two = large(2_500, 3_000_000, 7);
    let second = store.put("signer", Some(&first), &two).unwrap();
    assert_eq!(store.get("signer").unwrap().unwrap(), (two, second));
    assert_eq!(admin.store_objects("big").len() - 1, shards);
}

#[test]
fn a_write_stopped_at_any_request_leaves_the_old_document_and_nothing_of_its_own() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let mut store = open(server.admin_kubeconfig(), "kube://pki/crash");
    let old = large(300, 1_500_000, 0);
    let revision = store.put("signer", None, &old).unwrap();
    // Every request of the next write, in order.
    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = steps.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        seen.lock().unwrap().push(step.to_string());
        Ok(())
    })));
    let new = large(300, 1_500_000, 9);
    let probe = store.put("signer", Some(&revision), &new).unwrap();
    let steps = steps.lock().unwrap().clone();
    let commit = steps.iter().position(|s| s == "commit").unwrap();
    assert!(commit >= 2, "{steps:?}");
    // Back to the old document for each failure point.
    let revision = store.put("signer", Some(&probe), &old).unwrap();
    let before = admin.store_objects("crash");
    for (stop, at) in steps.iter().enumerate().take(commit + 1) {
        let calls = AtomicUsize::new(0);
        store.set_write_hook(Some(Box::new(move |_| {
            if calls.fetch_add(1, Ordering::SeqCst) == stop {
                Err(std::io::Error::other("stopped"))
            } else {
                Ok(())
            }
        })));
        let error = store.put("signer", Some(&revision), &new).unwrap_err();
        assert!(
            matches!(error, RotateError::Store(StoreError::Backend { .. })),
            "{at}: {error}"
        );
        assert!(error.to_string().contains("stopped"), "{error}");
        store.set_write_hook(None);
        assert_eq!(
            store.get("signer").unwrap().unwrap(),
            (old.clone(), revision.clone()),
            "{at}"
        );
        assert_eq!(admin.store_objects("crash"), before, "{at}");
    }
    // A failure after the commit (removing the replaced generation) is no
    // failure: the write is done, and only unnamed shards stay.
    store.set_write_hook(Some(Box::new(|step| {
        if step.starts_with("delete") {
            Err(std::io::Error::other("stopped"))
        } else {
            Ok(())
        }
    })));
    let done = store.put("signer", Some(&revision), &new).unwrap();
    store.set_write_hook(None);
    assert_eq!(store.get("signer").unwrap().unwrap(), (new, done));
}

#[test]
fn shards_of_an_attempt_killed_before_its_commit_are_removed_once_abandoned() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let grace = Duration::from_secs(5);
    let options = KubeOptions {
        abandoned_after: grace,
        ..options(server.admin_kubeconfig())
    };
    let url = KubeUrl::parse("kube://pki/swept").unwrap();
    let mut store = KubeStore::open(&url, options).unwrap();
    let first = store.put("signer", None, &files("1")).unwrap();
    // An attempt that dies between its shards and its commit: the commit
    // and its own cleanup both fail, as under kill -9.
    store.set_write_hook(Some(Box::new(|step| {
        if step == "commit" || step.starts_with("delete") {
            Err(std::io::Error::other("killed"))
        } else {
            Ok(())
        }
    })));
    let lost = store.put("signer", Some(&first), &large(100, 1_000_000, 1));
    assert!(lost.is_err());
    store.set_write_hook(None);
    let left = admin.store_objects("swept");
    assert!(left.len() >= 4, "{left:?}");
    // A write right after keeps them: they might be a live attempt's.
    let second = store.put("signer", Some(&first), &files("2")).unwrap();
    assert_eq!(admin.store_objects("swept").len(), left.len());
    // Once older than the grace, the next write removes them.
    std::thread::sleep(grace + Duration::from_secs(2));
    let third = store.put("signer", Some(&second), &files("3")).unwrap();
    assert_eq!(admin.store_objects("swept").len(), 2);
    assert_eq!(store.get("signer").unwrap().unwrap(), (files("3"), third));
}

#[test]
fn writers_racing_in_threads_lose_no_update() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let stores: Vec<KubeStore> = (0..3)
        .map(|_| open(server.admin_kubeconfig(), "kube://pki/race"))
        .collect();
    stores[0].put("counter", None, &counter(0)).unwrap();
    let (writers, increments) = (6, 5);
    let conflicts = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for w in 0..writers {
            let store = &stores[w % stores.len()];
            let conflicts = &conflicts;
            scope.spawn(move || {
                for _ in 0..increments {
                    loop {
                        let (files, revision) = store.get("counter").unwrap().unwrap();
                        let n: u32 = std::str::from_utf8(files.get("n").unwrap())
                            .unwrap()
                            .parse()
                            .unwrap();
                        match store.put("counter", Some(&revision), &counter(n + 1)) {
                            Ok(_) => break,
                            Err(e) if is_conflict(&e) => {
                                conflicts.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    let (files, _) = stores[1].get("counter").unwrap().unwrap();
    assert_eq!(
        files.get("n").unwrap(),
        format!("{}", writers * increments).as_bytes()
    );
    eprintln!("{} conflicts", conflicts.into_inner());
}

fn counter(n: u32) -> Files {
    let mut files = Files::new();
    files.insert("n", File::public(n.to_string())).unwrap();
    files
}

#[test]
fn the_context_picks_the_account_and_one_that_may_not_read_secrets_gets_one_line_naming_the_verb_and_resource()
 {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let url = format!("kube://{READER}@{NAMESPACE}/prod");
    let store = open(server.kubeconfig(), &url);
    let error = store.get("signer").unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "{url}: may not get secrets in namespace \"pki\" (403 Forbidden: "
        )),
        "{error}"
    );
    assert!(
        error.contains("User \"pki-reader\" cannot get resource \"secrets\""),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
    let error = store
        .put("signer", None, &files("1"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("may not get secrets"), "{error}");

    // The same kubeconfig's admin context may, and so may its current one.
    let admin = open(
        server.kubeconfig(),
        &format!("kube://{ADMIN}@{NAMESPACE}/prod"),
    );
    let revision = admin.put("signer", None, &files("1")).unwrap();
    let current = open(server.kubeconfig(), &format!("kube://{NAMESPACE}/prod"));
    assert_eq!(
        current.get("signer").unwrap().unwrap(),
        (files("1"), revision)
    );
    // A context the kubeconfig lacks is refused on opening, in one line.
    let url = KubeUrl::parse(&format!("kube://nobody@{NAMESPACE}/prod")).unwrap();
    let error = KubeStore::open(&url, options(server.kubeconfig()))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("{url}: credentials: ")),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
}

#[test]
fn an_unreachable_or_silent_server_fails_within_the_bounds() {
    let server = KubeServer::start();
    let kubeconfig = std::fs::read_to_string(server.admin_kubeconfig()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = KubeUrl::parse("kube://pki/prod").unwrap();
    // Nobody listens on a closed port; a listener that never accepts holds
    // the connection without a word.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    for port in [closed_port, silent_port] {
        let path = dir.path().join(format!("{port}.kubeconfig"));
        let address = server.url().replace("https://", "");
        std::fs::write(
            &path,
            kubeconfig.replace(&address, &format!("127.0.0.1:{port}")),
        )
        .unwrap();
        let options = KubeOptions {
            connect_timeout: Duration::from_secs(2),
            ..options(&path)
        };
        let started = Instant::now();
        let error = KubeStore::open(&url, options).unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let message = error.to_string();
        assert!(
            message.starts_with("kube://pki/prod: connecting: "),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }
    drop(silent);
}
