//! The store over TLS: etcd started with `--client-cert-auth` and
//! certificates pki issued, reached through `etcds://` with a client
//! certificate; each way of getting TLS or authentication wrong is one
//! clear line within the connect timeout; etcd users and passwords.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_etcd::client::Permission;
use pki_etcd::{EtcdOptions, EtcdStore, EtcdTls, EtcdUrl, EtcdUser};
use pki_rotate::{File, Files, Store};
use std::time::{Duration, Instant};
use support::certs::{Pair, TestPki};
use support::etcd::{Etcd, ServerTls};

fn tls(ca: &std::path::Path, client: Option<&Pair>) -> EtcdTls {
    EtcdTls::from_files(ca, client.map(|c| (c.cert.as_path(), c.key.as_path()))).unwrap()
}

/// An etcd that serves TLS with pki's server certificate and requires
/// client certificates signed by pki's CA.
fn mutual_tls_etcd(pki: &TestPki) -> Etcd {
    let server = ServerTls {
        cert: pki.server.cert.clone(),
        key: pki.server.key.clone(),
        client_ca: Some(pki.ca.clone()),
    };
    let admin = EtcdOptions {
        tls: Some(tls(&pki.ca, Some(&pki.client))),
        ..EtcdOptions::default()
    };
    Etcd::start_tls(server, admin)
}

fn options(tls: Option<EtcdTls>, user: Option<EtcdUser>) -> EtcdOptions {
    EtcdOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(2),
        tls,
        user,
        ..EtcdOptions::default()
    }
}

fn doc(text: &str) -> Files {
    let mut files = Files::new();
    files
        .insert("signer/tls.crt", File::public(text.as_bytes().to_vec()))
        .unwrap();
    files
        .insert("signer/tls.key", File::secret(b"KEY".to_vec()))
        .unwrap();
    files
}

/// Opening `url` with `options` fails with one line containing each of
/// `expect`, within twice the connect timeout.
fn refused(url: &str, options: EtcdOptions, expect: &[&str]) -> String {
    let limit = options.connect_timeout * 2 + Duration::from_secs(1);
    let started = Instant::now();
    let err = EtcdStore::open(&EtcdUrl::parse(url).unwrap(), options).unwrap_err();
    let elapsed = started.elapsed();
    let text = err.to_string();
    eprintln!("{url}: {text}");
    assert!(elapsed < limit, "{elapsed:?}: {text}");
    assert!(!text.contains('\n'), "{text}");
    assert!(text.starts_with(&format!("{url}: connecting")), "{text}");
    for e in expect {
        assert!(text.contains(e), "expected {e:?} in: {text}");
    }
    text
}

#[test]
fn a_store_over_mutual_tls_reads_and_writes() {
    let pki = TestPki::new();
    let etcd = mutual_tls_etcd(&pki);
    let url = etcd.url("pki/tls");
    assert!(url.starts_with("etcds://127.0.0.1:"), "{url}");
    let store = EtcdStore::open(
        &EtcdUrl::parse(&url).unwrap(),
        options(Some(tls(&pki.ca, Some(&pki.client))), None),
    )
    .unwrap();
    let revision = store.put("signer", None, &doc("one")).unwrap();
    let (files, read) = store.get("signer").unwrap().unwrap();
    assert_eq!(read, revision);
    assert_eq!(files.get("signer/tls.crt").unwrap(), b"one");
    // The keys are in etcd, under the prefix.
    assert!(
        etcd.dump("pki/tls")
            .iter()
            .any(|(k, _, _)| k == "pki/tls/signer")
    );
}

#[test]
fn tls_mistakes_are_one_line_within_the_timeout() {
    let pki = TestPki::new();
    let etcd = mutual_tls_etcd(&pki);
    let url = etcd.url("pki");
    let plain_url = url.replacen("etcds://", "etcd://", 1);
    let client = Some(&pki.client);
    // The server's certificate is not from the CA bundle given.
    refused(
        &url,
        options(Some(tls(&pki.other_ca, client)), None),
        &[
            "the server's certificate does not verify against the CA bundle given",
            "UnknownIssuer",
        ],
    );
    refused(
        &url,
        options(Some(tls(&pki.ca, None)), None),
        &["etcd requires a client certificate and none was given"],
    );
    refused(
        &url,
        options(Some(tls(&pki.ca, Some(&pki.expired_client))), None),
        &["etcd refused the client certificate: it expired at 20"],
    );
    refused(
        &plain_url,
        options(None, None),
        &["the server speaks TLS and the store URL is plaintext: use etcds://"],
    );
    refused(
        &url,
        options(None, None),
        &["an etcds:// store needs the CA bundle that verifies its servers"],
    );
    refused(
        &plain_url,
        options(Some(tls(&pki.ca, client)), None),
        &["TLS settings were given for a plaintext etcd:// store: use etcds://"],
    );
    // And the store still works for a client that does it right.
    EtcdStore::open(
        &EtcdUrl::parse(&url).unwrap(),
        options(Some(tls(&pki.ca, client)), None),
    )
    .unwrap();

    let plain = Etcd::start();
    let tls_url = plain.url("pki").replacen("etcd://", "etcds://", 1);
    refused(
        &tls_url,
        options(Some(tls(&pki.ca, client)), None),
        &[
            "the server does not complete a TLS handshake",
            "if it is plaintext, use etcd://",
        ],
    );
}

/// Turns authentication on in `etcd` (the user `root`, then the user `pki`
/// allowed `pki/`), through the client's Auth RPCs, and makes the helpers
/// log in as root.
fn enable_auth(etcd: &mut Etcd) {
    etcd.with_client(async |client| {
        let mut auth = client.auth();
        auth.user_add("root", "root-secret").await.unwrap();
        auth.user_grant_role("root", "root").await.unwrap();
        auth.role_add("pki").await.unwrap();
        auth.role_grant_prefix("pki", "pki/", Permission::ReadWrite)
            .await
            .unwrap();
        auth.user_add("pki", "pki-secret").await.unwrap();
        auth.user_grant_role("pki", "pki").await.unwrap();
        auth.auth_enable().await.unwrap();
    });
    let admin = EtcdOptions {
        user: Some(EtcdUser::new("root", "root-secret")),
        ..etcd.admin().clone()
    };
    etcd.set_admin(admin);
}

#[test]
fn users_log_in_with_a_password_over_mutual_tls() {
    let pki = TestPki::new();
    let mut etcd = mutual_tls_etcd(&pki);
    enable_auth(&mut etcd);
    let url = etcd.url("pki/auth");
    let client_tls = || Some(tls(&pki.ca, Some(&pki.client)));

    let password_file = pki.path().join("password");
    std::fs::write(&password_file, "pki-secret\n").unwrap();
    let user = EtcdUser::from_password_file("pki", &password_file).unwrap();
    let store = EtcdStore::open(
        &EtcdUrl::parse(&url).unwrap(),
        options(client_tls(), Some(user)),
    )
    .unwrap();
    let revision = store.put("signer", None, &doc("auth")).unwrap();
    assert_eq!(store.get("signer").unwrap().unwrap().1, revision);

    refused(
        &url,
        options(client_tls(), Some(EtcdUser::new("pki", "wrong"))),
        &["authentication failed, invalid user ID or password"],
    );
    // No user: the client certificate's name (pki-client) is no etcd user.
    let text = refused(&url, options(client_tls(), None), &[]);
    assert!(
        text.contains("PermissionDenied") || text.contains("user name"),
        "{text}"
    );
    // The user may not leave its prefix.
    let outside = etcd.url("elsewhere");
    let err = EtcdStore::open(
        &EtcdUrl::parse(&outside).unwrap(),
        options(client_tls(), Some(EtcdUser::new("pki", "pki-secret"))),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("permission denied"), "{err}");

    // A missing password file is an error naming the file.
    let missing = pki.path().join("no-such-password");
    let err = EtcdUser::from_password_file("pki", &missing)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no-such-password"), "{err}");

    // etcd forgets its tokens when it restarts: the same store logs in
    // again and goes on, and so does a client opening a watch.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let watcher = runtime.block_on(async {
        let user = EtcdUser::new("pki", "pki-secret");
        let url = EtcdUrl::parse(&url).unwrap();
        pki_etcd::client::Client::connect(&url, &options(client_tls(), Some(user)))
            .await
            .unwrap()
    });
    etcd.restart();
    // The first request on the connection to the stopped server may be
    // lost with it (a transport error: the caller tries again); the watch
    // then opens with a token etcd forgot.
    let mut watch = runtime.block_on(async {
        match watcher.watch_prefix("pki/auth/", 0).await {
            Ok(watch) => watch,
            Err(pki_etcd::client::Error::GRpcStatus(status))
                if status.message().contains("transport error") =>
            {
                watcher.watch_prefix("pki/auth/", 0).await.unwrap()
            }
            Err(other) => panic!("the watch after the restart: {other:?}"),
        }
    });
    let again = store
        .put("signer", Some(&revision), &doc("after restart"))
        .unwrap();
    assert_ne!(again, revision);
    let changed = runtime.block_on(async {
        loop {
            let answer = tokio::time::timeout(Duration::from_secs(5), watch.message())
                .await
                .expect("a watch answer within 5 s")
                .expect("a watch answer, not an error")
                .expect("the watch goes on");
            assert!(!answer.canceled, "{answer:?}");
            if !answer.events.is_empty() {
                break answer.events.len();
            }
        }
    });
    assert!(changed >= 1);
    assert_eq!(
        store
            .get("signer")
            .unwrap()
            .unwrap()
            .0
            .get("signer/tls.crt")
            .unwrap(),
        b"after restart"
    );
}
