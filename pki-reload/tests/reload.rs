//! The reloaders on files changed under them: a certificate is never
//! paired with another generation's key (even by a writer that replaces
//! the two files one after the other), a bad reload keeps the previous
//! material, and the trust reloader acknowledges every bundle it loads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::{CertificateAuthority, KeyAlgorithm};
use pki_reload::{Acker, CertFiles, CertReloader, ReloadError, ReloadOptions, TrustReloader};
use pki_rotate::{IssuedLeaf, LeafRequest};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use time::{Duration, OffsetDateTime};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Checks on every call: the tests decide when files change.
fn every_time() -> ReloadOptions {
    ReloadOptions {
        check_interval: std::time::Duration::ZERO,
    }
}

fn ca(cn: &str) -> CertificateAuthority {
    let now = OffsetDateTime::now_utc() - Duration::hours(1);
    CertificateAuthority::generate_root(
        cn,
        KeyAlgorithm::EcdsaP256,
        now,
        Duration::days(30),
        &mut pki_core::os_rng(),
    )
    .unwrap()
}

fn leaf(ca: &CertificateAuthority) -> IssuedLeaf {
    let now = OffsetDateTime::now_utc() - Duration::minutes(5);
    pki_rotate::issue_leaf(
        ca,
        &LeafRequest::server(vec!["web.test".into()]),
        now,
        &mut pki_core::os_rng(),
    )
    .unwrap()
}

/// Replaces `path` by a new file with `contents` (a rename, as pki does).
fn publish(path: &Path, contents: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn write_leaf(files: &CertFiles, l: &IssuedLeaf) {
    publish(&files.cert, l.cert.to_pem().as_bytes());
    publish(&files.key, l.key.to_pkcs8_pem().unwrap().as_bytes());
}

fn serving(r: &CertReloader) -> Vec<u8> {
    r.certified_key().cert[0].to_vec()
}

#[test]
fn a_certificate_with_another_generations_key_is_refused_and_the_previous_pair_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let files = CertFiles::in_dir(tmp.path());
    let ca = ca("pairing");
    let (a, b) = (leaf(&ca), leaf(&ca));

    // Mismatched from the start: nothing to serve, an error.
    publish(&files.cert, a.cert.to_pem().as_bytes());
    publish(&files.key, b.key.to_pkcs8_pem().unwrap().as_bytes());
    let e = CertReloader::new(files.clone(), provider(), every_time()).unwrap_err();
    assert!(matches!(e, ReloadError::Mismatch { .. }), "{e}");

    write_leaf(&files, &a);
    let r = CertReloader::new(files.clone(), provider(), every_time()).unwrap();
    assert_eq!(serving(&r), a.cert.der());
    // Half of the next generation: the new certificate with the old key.
    publish(&files.cert, b.cert.to_pem().as_bytes());
    assert!(matches!(r.refresh(), Err(ReloadError::Mismatch { .. })));
    assert_eq!(serving(&r), a.cert.der(), "swapped in a mismatched pair");
    assert!(r.certified_key().keys_match().is_ok());
    assert!(r.last_error().is_some());
    // The rest of it: the new pair, and the error is gone.
    publish(&files.key, b.key.to_pkcs8_pem().unwrap().as_bytes());
    assert!(r.refresh().unwrap());
    assert_eq!(serving(&r), b.cert.der());
    assert!(r.last_error().is_none());
    assert_eq!(r.generation(), 2);
    // Nothing changed: no reload.
    assert!(!r.refresh().unwrap());
}

#[test]
fn a_writer_replacing_the_two_files_one_by_one_never_yields_a_mismatched_pair() {
    let tmp = tempfile::tempdir().unwrap();
    let files = CertFiles::in_dir(tmp.path());
    let ca = ca("torn writes");
    let leaves: Vec<IssuedLeaf> = (0..4).map(|_| leaf(&ca)).collect();
    write_leaf(&files, &leaves[0]);
    let r = CertReloader::new(files.clone(), provider(), every_time()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (files, stop) = (files.clone(), stop.clone());
        let pems: Vec<(String, String)> = leaves
            .iter()
            .map(|l| {
                (
                    l.cert.to_pem(),
                    l.key.to_pkcs8_pem().unwrap().as_str().to_string(),
                )
            })
            .collect();
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i = (i + 1) % pems.len();
                publish(&files.cert, pems[i].0.as_bytes());
                publish(&files.key, pems[i].1.as_bytes());
            }
        })
    };
    let (mut swaps, mut refused) = (0, 0);
    for _ in 0..2000 {
        match r.refresh() {
            Ok(true) => swaps += 1,
            Ok(false) => {}
            Err(ReloadError::Mismatch { .. }) => refused += 1,
            // A file caught between its removal and its rename.
            Err(ReloadError::Io { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        let key = r.certified_key();
        assert!(key.keys_match().is_ok(), "a certificate with another key");
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    println!("{swaps} reloads, {refused} torn reads refused");
    assert!(swaps > 0);
}

#[derive(Debug, Default)]
struct Recorded(Mutex<Vec<String>>);

impl Acker for Recorded {
    fn ack(&self, fingerprint: &str) {
        self.0.lock().unwrap().push(fingerprint.to_string());
    }
}

#[test]
fn the_trust_reloader_acknowledges_each_bundle_it_loads_by_its_pki_token() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("ca-bundle.crt");
    let (old, new) = (ca("old"), ca("new"));
    publish(&bundle, old.cert.to_pem().as_bytes());
    let acks = Arc::new(Recorded::default());
    let trust = TrustReloader::with_acker([bundle.clone()], provider(), every_time(), acks.clone())
        .unwrap();
    let token = |certs: Vec<pki_core::Certificate>| {
        pki_rotate::uptake::bundle_fingerprint(&pki_core::Bundle::from_certs(certs))
    };
    assert_eq!(trust.fingerprint(), token(vec![old.cert.clone()]));
    // Both CAs, in the other order than the token's: the same token as pki's.
    publish(
        &bundle,
        format!("{}{}", new.cert.to_pem(), old.cert.to_pem()).as_bytes(),
    );
    assert!(trust.refresh().unwrap());
    let both = token(vec![old.cert.clone(), new.cert.clone()]);
    assert_eq!(trust.fingerprint(), both);
    // A broken file keeps the bundle in use and acknowledges nothing.
    publish(&bundle, b"not a bundle");
    assert!(trust.refresh().is_err());
    assert_eq!(trust.fingerprint(), both);
    assert_eq!(
        *acks.0.lock().unwrap(),
        [token(vec![old.cert.clone()]), both]
    );
}

#[test]
fn the_helpers_can_be_shared_across_tokio_tasks() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<CertReloader>();
    shared::<TrustReloader>();
    shared::<pki_reload::StoreAcker<pki_rotate::FsStore>>();
    shared::<pki_reload::Snapshot>();
}

/// No bundle file at all is its own error, named as such, for the trust
/// reloader and for a snapshot (not a chain file's error, nor rustls').
#[test]
fn no_bundle_file_is_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let files = CertFiles::in_dir(dir.path());
    write_leaf(&files, &leaf(&ca("no-bundle")));
    let trust = TrustReloader::new(Vec::new(), provider(), every_time());
    assert!(matches!(trust, Err(ReloadError::NoBundleFile)), "{trust:?}");
    let snapshot = pki_reload::Snapshot::read(&files, &[]);
    let err = snapshot.unwrap_err();
    assert!(matches!(err, ReloadError::NoBundleFile), "{err:?}");
    assert!(err.to_string().contains("no trust bundle file"), "{err}");
}

/// Bundle files republished without pause while the trust reloader reads
/// them: once the writer stops, one more check loads what the files hold
/// last, however the reads fell against the writes (a load taken while
/// the files kept changing must not pass for the files of after it).
#[test]
fn after_a_writer_stops_the_next_check_loads_the_last_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = [tmp.path().join("a.crt"), tmp.path().join("b.crt")];
    // Each generation a bundle of 40 CAs: reading one takes much longer
    // than publishing one, so loads keep meeting writes.
    let cas: Vec<CertificateAuthority> = (0..45).map(|i| ca(&format!("gen-{i}"))).collect();
    let generations: Vec<String> = (0..6)
        .map(|g| (g..g + 40).map(|i| cas[i].cert.to_pem()).collect())
        .collect();
    let pem = |i: usize| generations[i % generations.len()].clone();
    for path in &paths {
        publish(path, pem(0).as_bytes());
    }
    let trust = TrustReloader::new(paths.clone(), provider(), every_time()).unwrap();
    for round in 0..20 {
        // The writer stops on its own, at a moment the reader does not
        // choose: its last write may fall inside a load.
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in round..round + 300 {
                    publish(&paths[i % 2], pem(i).as_bytes());
                }
                done.store(true, Ordering::Release);
            });
            while !done.load(Ordering::Acquire) {
                let _ = trust.refresh();
            }
        });
        let last: Vec<pki_core::Certificate> = paths
            .iter()
            .flat_map(|p| pki_core::Certificate::all_from_pem(&std::fs::read(p).unwrap()).unwrap())
            .collect();
        let _ = trust.refresh();
        assert_eq!(
            trust.fingerprint(),
            pki_rotate::uptake::bundle_fingerprint(&pki_core::Bundle::from_certs(last)),
            "round {round}: the files' last bundle is not the one in use"
        );
    }
}
