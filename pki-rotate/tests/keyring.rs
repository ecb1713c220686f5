//! The key ring engine: rotation timeline, grace, forced reasons, imports,
//! policy refusal, and crash safety at every write of both stores.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_core::{KeyAlgorithm, PrivateKey};
use pki_rotate::Document as _;
use pki_rotate::keyring::document::{ACTIVE_KEY, JWKS, PUBLIC_PEM, STATE_FILE};
use pki_rotate::keyring::{JoseError, Jwks, KeyRingEvent, KeyRotationReason};
use pki_rotate::{
    Driver, Engine, FsStore, ImportedKeys, KeyRing, KeyRingEngine, KeyRingError, KeyRingInput,
    KeyRingPolicy, MemoryStore, RotateError, Store,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::seed::{T0, rng};
use time::{Duration, OffsetDateTime};

const KEY: &str = "keys";

fn policy() -> KeyRingPolicy {
    KeyRingPolicy {
        lifetime: Duration::days(90),
        grace: Duration::hours(24),
        max_token_lifetime: Some(Duration::hours(1)),
        ..KeyRingPolicy::default()
    }
}

fn ring() -> KeyRing {
    KeyRing::new(policy(), T0, &mut rng(1)).unwrap()
}

fn claims(exp: OffsetDateTime) -> Vec<u8> {
    format!(
        r#"{{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:default:web","exp":{}}}"#,
        exp.unix_timestamp()
    )
    .into_bytes()
}

fn jose_err(e: RotateError) -> JoseError {
    match e {
        RotateError::KeyRing(k) => match *k {
            KeyRingError::Jose(j) => j,
            other => panic!("not a JOSE error: {other}"),
        },
        other => panic!("not a key ring error: {other}"),
    }
}

#[test]
fn a_token_signed_before_a_rotation_verifies_during_the_grace_and_not_after() {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let r = ring();
    driver.create::<KeyRingEngine>(KEY, &r).unwrap();

    // A token signed one minute before the forced rotation, living an hour.
    let signed_at = T0 + Duration::days(10);
    let token = r
        .sign_token(&claims(signed_at + Duration::hours(1)), signed_at)
        .unwrap();
    let rotated_at = signed_at + Duration::minutes(1);
    let step = driver
        .step::<KeyRingEngine, _>(
            KEY,
            &KeyRingInput::forced("key leaked in a log"),
            rotated_at,
            &mut rng(2),
        )
        .unwrap();
    let after = step.document;
    assert_ne!(after.active.kid, r.active.kid);
    assert_eq!(after.accepted.len(), 1);
    assert_eq!(after.accepted[0].kid, r.active.kid);
    assert_eq!(
        after.accepted[0].accepted_until,
        Some(rotated_at + Duration::hours(24)),
        "the grace runs from the rotation time"
    );
    assert_eq!(step.next_wake, rotated_at + Duration::hours(24));
    // Both keys are published while the old one is accepted.
    assert_eq!(after.jwks().keys.len(), 2);
    assert_eq!(after.public_pem().matches("BEGIN PUBLIC KEY").count(), 2);

    // Within the token's own life it verifies with the rotated ring.
    let (kid, _) = after
        .verify_token(token.as_bytes(), rotated_at + Duration::minutes(30))
        .unwrap();
    assert_eq!(kid, r.active.kid);
    // A long-lived token of the old key (no exp, signed by a ring without
    // a token lifetime) verifies until the grace ends, then not.
    let mut lax = r.clone();
    lax.policy.max_token_lifetime = None;
    let forever = lax.sign_token(br#"{"sub":"x"}"#, signed_at).unwrap();
    let end = rotated_at + Duration::hours(24);
    after
        .verify_token(forever.as_bytes(), end - Duration::seconds(1))
        .unwrap();
    let err = jose_err(after.verify_token(forever.as_bytes(), end).unwrap_err());
    assert!(
        matches!(err, JoseError::KeyNoLongerAccepted { .. }),
        "{err}"
    );

    // The step at the end of the grace removes the old key from every file.
    let step = driver
        .step::<KeyRingEngine, _>(KEY, &KeyRingInput::default(), end, &mut rng(3))
        .unwrap();
    assert!(step.changed);
    assert!(matches!(step.events[..], [KeyRingEvent::Expired { .. }]));
    assert!(step.document.accepted.is_empty());
    let (files, _) = store.get(KEY).unwrap().unwrap();
    let jwks = Jwks::parse(files.get(JWKS).unwrap()).unwrap();
    assert_eq!(jwks.keys.len(), 1);
    assert_eq!(jwks.keys[0].thumbprint(), after.active.kid);
    let err = jose_err(
        step.document
            .verify_token(forever.as_bytes(), end)
            .unwrap_err(),
    );
    assert!(matches!(err, JoseError::UnknownKid(_)), "{err}");
    // Tokens of the new key verify.
    let fresh = step
        .document
        .sign_token(&claims(end + Duration::minutes(5)), end)
        .unwrap();
    step.document.verify_token(fresh.as_bytes(), end).unwrap();
}

#[test]
fn the_key_rotates_by_age_and_keeps_the_previous_key_accepted() {
    let r = ring();
    let due = r.rotation_due_at();
    assert_eq!(due, T0 + Duration::days(90));
    let quiet = KeyRingEngine::step(
        &r,
        &KeyRingInput::default(),
        due - Duration::SECOND,
        &mut rng(2),
    )
    .unwrap();
    assert!(!quiet.changed() && quiet.events.is_empty());
    assert_eq!(quiet.next_wake, due);
    let out = KeyRingEngine::step(&r, &KeyRingInput::default(), due, &mut rng(2)).unwrap();
    let next = out.document.as_ref();
    assert!(matches!(
        &next.history[0].reason,
        KeyRotationReason::Age { age_seconds, .. } if *age_seconds == 90 * 86_400
    ));
    assert_eq!(next.active.since, due);
    assert_eq!(next.accepted[0].kid, r.active.kid);
    assert_eq!(next.rotation_due_at(), due + Duration::days(90));
}

#[test]
fn a_forced_reason_rotates_once_and_the_same_reason_again_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open_or_create(dir.path()).unwrap();
    let driver = Driver::new(&store);
    driver.create::<KeyRingEngine>(KEY, &ring()).unwrap();
    let at = T0 + Duration::hours(5);
    let input = KeyRingInput::forced("compromise drill");
    let first = driver
        .step::<KeyRingEngine, _>(KEY, &input, at, &mut rng(2))
        .unwrap();
    assert!(first.changed);
    let files_after_first = store.get(KEY).unwrap().unwrap();
    let bytes = |p: &str| std::fs::read(dir.path().join(p)).unwrap();
    let published: Vec<Vec<u8>> = [STATE_FILE, ACTIVE_KEY, PUBLIC_PEM, JWKS]
        .iter()
        .map(|p| bytes(p))
        .collect();
    for later in [at, at + Duration::hours(1)] {
        let again = driver
            .step::<KeyRingEngine, _>(KEY, &input, later, &mut rng(3))
            .unwrap();
        assert!(!again.changed && again.events.is_empty());
    }
    assert_eq!(store.get(KEY).unwrap().unwrap(), files_after_first);
    let now_published: Vec<Vec<u8>> = [STATE_FILE, ACTIVE_KEY, PUBLIC_PEM, JWKS]
        .iter()
        .map(|p| bytes(p))
        .collect();
    assert_eq!(published, now_published, "byte-identical");
    // A new reason rotates again; both rotated-out keys stay accepted.
    let other = driver
        .step::<KeyRingEngine, _>(
            KEY,
            &KeyRingInput::forced("second drill"),
            at + Duration::hours(2),
            &mut rng(4),
        )
        .unwrap();
    assert_eq!(other.document.history.len(), 2);
    assert_eq!(other.document.accepted.len(), 2);
    assert!(matches!(
        KeyRingEngine::plan(
            &other.document,
            &KeyRingInput::forced("  "),
            at + Duration::hours(3)
        ),
        Err(RotateError::Signer(
            pki_rotate::SignerError::EmptyForcedReason
        ))
    ));
}

#[test]
fn a_forced_rotation_racing_a_rotation_is_one_rotation_recorded_as_forced() {
    let store = MemoryStore::new();
    let r = ring();
    Driver::new(&store)
        .create::<KeyRingEngine>(KEY, &r)
        .unwrap();
    let due = r.rotation_due_at();
    let fired = Arc::new(AtomicUsize::new(0));
    let flag = fired.clone();
    store.set_before_put(Some(Box::new(move |store, key| {
        if flag.fetch_add(1, Ordering::SeqCst) == 0 {
            Driver::new(store)
                .step::<KeyRingEngine, _>(key, &KeyRingInput::default(), due, &mut rng(9))
                .unwrap();
        }
    })));
    let step = Driver::new(&store)
        .step::<KeyRingEngine, _>(KEY, &KeyRingInput::forced("audit"), due, &mut rng(8))
        .unwrap();
    assert_eq!(step.attempts, 2);
    assert_eq!(step.document.history.len(), 1, "one rotation");
    assert!(step.document.forced_reasons.contains("audit"));
    assert!(matches!(
        step.events[..],
        [KeyRingEvent::ForcedRotationSatisfied { .. }]
    ));
}

#[test]
fn a_grace_shorter_than_the_longest_token_is_refused_with_the_timeline() {
    let bad = KeyRingPolicy {
        grace: Duration::minutes(30),
        max_token_lifetime: Some(Duration::hours(2)),
        ..KeyRingPolicy::default()
    };
    let err = KeyRing::new(bad, T0, &mut rng(1)).unwrap_err().to_string();
    assert!(
        err.contains("grace period 30m does not cover the longest token lifetime 2h")
            && err.contains("until T+2h")
            && err.contains("only until T+30m")
            && err.contains("rejected for 1h30m"),
        "{err}"
    );
    for (lifetime, grace) in [
        (Duration::ZERO, Duration::HOUR),
        (Duration::DAY, -Duration::HOUR),
    ] {
        let p = KeyRingPolicy {
            lifetime,
            grace,
            max_token_lifetime: None,
            ..KeyRingPolicy::default()
        };
        assert!(p.validate().is_err());
    }
    // The signer keeps to the policy: no token outlives the grace.
    let r = ring();
    let err = r
        .sign_token(&claims(T0 + Duration::hours(2)), T0)
        .unwrap_err();
    assert!(err.to_string().contains("longest token lifetime"), "{err}");
    let err = r.sign_token(br#"{"sub":"x"}"#, T0).unwrap_err();
    assert!(err.to_string().contains("no numeric \"exp\""), "{err}");
}

fn pem_of(keys: &[&PrivateKey]) -> String {
    keys.iter()
        .map(|k| k.to_pkcs8_pem().unwrap().to_string())
        .collect()
}

#[test]
fn a_k3s_service_key_is_imported_and_only_the_rotated_out_active_key_leaves_after_the_grace() {
    let mut g = rng(5);
    let current = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut g).unwrap();
    let older = PrivateKey::generate(KeyAlgorithm::Rsa2048, &mut g).unwrap();
    let oldest = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut g).unwrap();
    // k3s's service.key: the signing key first, then the old ones, with a
    // duplicate and text between blocks.
    let service_key = format!(
        "{}# kept from the last rotation\n{}{}{}",
        pem_of(&[&current]),
        pem_of(&[&older]),
        pem_of(&[&oldest]),
        pem_of(&[&older])
    );
    let keys = ImportedKeys::parse("service.key", service_key.as_bytes()).unwrap();
    assert_eq!(keys.private.len(), 4);
    let r = KeyRing::import(policy(), keys, T0, &mut rng(6)).unwrap();
    let kid = |k: &PrivateKey| {
        pki_rotate::keyring::PublicKey::from_spki_der(&k.public_key_der().unwrap())
            .unwrap()
            .thumbprint()
    };
    assert_eq!(r.active.kid, kid(&current));
    let accepted: Vec<&str> = r.accepted.iter().map(|k| k.kid.as_str()).collect();
    assert_eq!(accepted, [kid(&older), kid(&oldest)]);
    assert!(r.accepted.iter().all(|k| k.accepted_until.is_none()));

    // Rotations and time do not drop imported keys that never signed
    // here: tokens they signed live as long as the cluster that minted
    // them decided. The imported active key, rotated out, is accepted for
    // the grace period like any active key, then removed.
    let far = T0 + Duration::days(400);
    let out = KeyRingEngine::step(&r, &KeyRingInput::forced("adopt"), far, &mut rng(7)).unwrap();
    let grace_end = far + Duration::hours(24);
    assert_eq!(out.document.accepted[0].kid, kid(&current));
    assert_eq!(out.document.accepted[0].accepted_until, Some(grace_end));
    assert_eq!(
        out.document.history[0].previous_accepted_until,
        Some(grace_end)
    );
    let kids_at = |when: OffsetDateTime| -> Vec<String> {
        let step = KeyRingEngine::step(
            out.document.as_ref(),
            &KeyRingInput::default(),
            when,
            &mut rng(8),
        )
        .unwrap();
        let jwks = step.document.jwks().to_json();
        let kids: Vec<String> = step
            .document
            .accepted
            .iter()
            .map(|k| k.kid.clone())
            .collect();
        for k in &kids {
            assert!(jwks.contains(k.as_str()), "{k} published");
        }
        kids
    };
    assert_eq!(
        kids_at(grace_end - Duration::SECOND),
        [kid(&current), kid(&older), kid(&oldest)]
    );
    assert_eq!(kids_at(grace_end), [kid(&older), kid(&oldest)]);
    let later = KeyRingEngine::step(
        out.document.as_ref(),
        &KeyRingInput::default(),
        far + Duration::days(2),
        &mut rng(8),
    )
    .unwrap();
    assert!(
        !later.document.jwks().to_json().contains(&kid(&current))
            && later.document.public_pem()
                == format!(
                    "{}{}{}",
                    later.document.active.public.to_pem(),
                    later.document.accepted[0].public.to_pem(),
                    later.document.accepted[1].public.to_pem()
                ),
        "the formerly active imported key is no longer published"
    );
    // The others stay until an operator retires one.
    let retired = KeyRingEngine::step(
        later.document.as_ref(),
        &KeyRingInput::retire([kid(&oldest)]),
        far + Duration::days(2),
        &mut rng(9),
    )
    .unwrap();
    let kids: Vec<&str> = retired
        .document
        .accepted
        .iter()
        .map(|k| k.kid.as_str())
        .collect();
    assert_eq!(kids, [kid(&older)]);
    // A generated key rotated out is inside its grace: it cannot be retired.
    let again = far + Duration::days(3);
    let generated = KeyRingEngine::step(
        retired.document.as_ref(),
        &KeyRingInput::forced("again"),
        again,
        &mut rng(10),
    )
    .unwrap();
    let ring2 = generated.document.as_ref();
    assert_eq!(
        ring2.accepted[0].accepted_until,
        Some(again + Duration::hours(24))
    );
    let in_grace = ring2.accepted[0].kid.clone();
    let err = KeyRingEngine::plan(ring2, &KeyRingInput::retire([in_grace]), again).unwrap_err();
    assert!(err.to_string().contains("may still be in use"), "{err}");

    // Public keys (PEM or a JWK Set) import as accepted, with a new active key.
    let public_only = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        base64(&older.public_key_der().unwrap())
    );
    let keys = ImportedKeys::parse("sa.pub", public_only.as_bytes()).unwrap();
    let r = KeyRing::import(policy(), keys, T0, &mut rng(6)).unwrap();
    assert_eq!(r.accepted[0].kid, kid(&older));
    let keys = ImportedKeys::parse("jwks.json", r.jwks().to_json().as_bytes()).unwrap();
    assert_eq!(keys.public.len(), 2);

    for (bad, expect) in [
        ("", "holds no PEM key block"),
        (
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "not a private or public key",
        ),
        ("{\"keys\":[]}", "holds no key"),
    ] {
        let err = ImportedKeys::parse("service.key", bad.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("service.key") && err.contains(expect),
            "{bad:?}: {err}"
        );
    }
}

fn base64(der: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(der)
}

/// Counts the write steps of one operation on a directory store.
fn count_writes(op: impl Fn(&FsStore)) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FsStore::open_or_create(dir.path()).unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    store.set_write_hook(Some(Box::new(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })));
    op(&store);
    n.load(Ordering::SeqCst)
}

#[test]
fn a_crash_at_any_write_of_a_rotation_loses_no_key() {
    let r = ring();
    let at = T0 + Duration::days(1);
    let rotate = |store: &FsStore| {
        Driver::new(store).step::<KeyRingEngine, _>(
            KEY,
            &KeyRingInput::forced("drill"),
            at,
            &mut rng(2),
        )
    };
    let total = count_writes(|s| {
        Driver::new(s).create::<KeyRingEngine>(KEY, &r).unwrap();
        rotate(s).unwrap();
    }) - count_writes(|s| {
        Driver::new(s).create::<KeyRingEngine>(KEY, &r).unwrap();
    });
    assert!(total >= 4, "only {total} write steps");
    for fail_at in 0..total {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FsStore::open_or_create(dir.path()).unwrap();
        Driver::new(&store)
            .create::<KeyRingEngine>(KEY, &r)
            .unwrap();
        let before = store.get(KEY).unwrap().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let s2 = seen.clone();
        store.set_write_hook(Some(Box::new(move |step| {
            if s2.fetch_add(1, Ordering::SeqCst) == fail_at {
                Err(std::io::Error::other(format!("crash before {step}")))
            } else {
                Ok(())
            }
        })));
        let reopened = FsStore::open(dir.path()).unwrap();
        if let Ok(step) = rotate(&store) {
            // A failure after the switch to the new generation (a directory
            // sync, a published link) is a warning: the rotation is whole.
            let (doc, _) = Driver::new(&reopened).load::<KeyRingEngine>(KEY).unwrap();
            assert_eq!(doc.active.kid, step.document.active.kid, "step {fail_at}");
            assert_eq!(doc.accepted[0].kid, r.active.kid, "step {fail_at}");
            continue;
        }
        // The old document, whole: its active key is still the one signing.
        assert_eq!(store.get(KEY).unwrap().unwrap(), before, "step {fail_at}");
        let (doc, _) = Driver::new(&reopened).load::<KeyRingEngine>(KEY).unwrap();
        assert_eq!(doc.active.kid, r.active.kid);
        // The next run completes the rotation and keeps the old key.
        store.set_write_hook(None);
        let done = rotate(&store).unwrap();
        assert_eq!(
            done.document.accepted[0].kid, r.active.kid,
            "step {fail_at}"
        );
        let (doc, _) = Driver::new(&reopened).load::<KeyRingEngine>(KEY).unwrap();
        assert_eq!(doc.active.kid, done.document.active.kid);
    }
}

/// A store that fails its next `put` after the document was computed: a
/// crash between deciding and committing.
struct FailingPut<'a>(&'a MemoryStore, AtomicUsize);

impl Store for FailingPut<'_> {
    fn location(&self) -> String {
        self.0.location()
    }
    fn get(
        &self,
        key: &str,
    ) -> pki_rotate::Result<Option<(pki_rotate::Files, pki_rotate::Revision)>> {
        self.0.get(key)
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&pki_rotate::Revision>,
        files: &pki_rotate::Files,
    ) -> pki_rotate::Result<pki_rotate::Revision> {
        if self.1.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(RotateError::Store(pki_rotate::StoreError::Backend {
                store: "test".into(),
                source: "injected crash".into(),
            }));
        }
        self.0.put(key, expected, files)
    }
}

#[test]
fn a_failed_commit_in_memory_keeps_the_old_ring_and_the_retry_converges() {
    let store = MemoryStore::new();
    let r = ring();
    Driver::new(&store)
        .create::<KeyRingEngine>(KEY, &r)
        .unwrap();
    let before = store.get(KEY).unwrap().unwrap();
    let failing = FailingPut(&store, AtomicUsize::new(0));
    let due = r.rotation_due_at();
    assert!(
        Driver::new(&failing)
            .step::<KeyRingEngine, _>(KEY, &KeyRingInput::default(), due, &mut rng(3))
            .is_err()
    );
    assert_eq!(store.get(KEY).unwrap().unwrap(), before);
    let step = Driver::new(&failing)
        .step::<KeyRingEngine, _>(KEY, &KeyRingInput::default(), due, &mut rng(3))
        .unwrap();
    assert_eq!(step.document.accepted[0].kid, r.active.kid);
}

#[test]
fn files_round_trip_and_a_swapped_key_is_refused() {
    let r = ring();
    let files = r.to_files().unwrap();
    assert!(files.file(ACTIVE_KEY).unwrap().secret);
    assert!(!files.file(JWKS).unwrap().secret);
    let back = KeyRing::from_files(&files).unwrap();
    assert_eq!(back.active.kid, r.active.kid);
    assert_eq!(back.to_files().unwrap(), files);
    // public.pem holds only PUBLIC KEY blocks.
    let pem = String::from_utf8(files.get(PUBLIC_PEM).unwrap().to_vec()).unwrap();
    let blocks = pki_core::pem::read_blocks(pem.as_bytes()).unwrap();
    assert!(blocks.iter().all(|b| b.label == "PUBLIC KEY"));
    // JSON form.
    let json = r.to_json().unwrap();
    assert_eq!(
        KeyRing::from_json(json.as_bytes()).unwrap().active.kid,
        r.active.kid
    );
    // Secret data form.
    let data = KeyRing::files_to_secret_data(&files).unwrap();
    assert!(data.contains_key("keys.active.key"));
    assert_eq!(KeyRing::files_from_secret_data(&data).unwrap(), files);

    let mut swapped = files.clone();
    let other = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(42)).unwrap();
    swapped
        .insert(
            ACTIVE_KEY,
            pki_rotate::File::secret(other.to_pkcs8_pem().unwrap().as_bytes().to_vec()),
        )
        .unwrap();
    let err = KeyRing::from_files(&swapped).unwrap_err().to_string();
    assert!(err.contains("names") && err.contains("as active"), "{err}");
    let mut wrong_kind = files.clone();
    wrong_kind
        .insert(
            STATE_FILE,
            pki_rotate::File::public(br#"{"kind":"signer","version":2}"#.to_vec()),
        )
        .unwrap();
    assert!(matches!(
        KeyRing::from_files(&wrong_kind),
        Err(RotateError::Document(
            pki_rotate::DocumentError::Unsupported { .. }
        ))
    ));
}

#[test]
fn a_clock_behind_the_active_key_is_refused() {
    let r = ring();
    let err = KeyRingEngine::plan(&r, &KeyRingInput::default(), T0 - Duration::SECOND)
        .unwrap_err()
        .to_string();
    assert!(err.contains("behind"), "{err}");
    let err = r
        .sign_token(&claims(T0), T0 - Duration::SECOND)
        .unwrap_err()
        .to_string();
    // Says what was refused, why, and the earliest time that works.
    assert!(
        err.contains("cannot sign a token at 2025-12-31T23:59:59Z")
            && err.contains("became active only at 2026-01-01T00:00:00Z")
            && err.contains("behind")
            && err.contains("use 2026-01-01T00:00:00Z or later"),
        "{err}"
    );
}

#[test]
fn rsa_rings_sign_rs256_tokens() {
    let p = KeyRingPolicy {
        algorithm: KeyAlgorithm::Rsa2048,
        ..policy()
    };
    let r = KeyRing::new(p, T0, &mut rng(11)).unwrap();
    let token = r
        .sign_token(&claims(T0 + Duration::minutes(10)), T0)
        .unwrap();
    let header = token.split('.').next().unwrap_or_default();
    use base64::Engine as _;
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .unwrap();
    let header: serde_json::Value = serde_json::from_slice(&header).unwrap();
    assert_eq!(header["alg"], "RS256");
    assert_eq!(header["typ"], "JWT");
    assert_eq!(header["kid"], r.active.kid.as_str());
    r.verify_token(token.as_bytes(), T0).unwrap();
}

#[test]
fn a_forced_reason_with_control_characters_is_refused() {
    let r = ring();
    for bad in ["drill\nforged line", "\u{1b}[31mred"] {
        let err = KeyRingEngine::plan(&r, &KeyRingInput::forced(bad), T0 + Duration::hours(1))
            .unwrap_err();
        assert!(err.to_string().contains("control character"), "{err}");
    }
}
