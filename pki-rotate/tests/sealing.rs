//! Documents kept as Kubernetes Secret data ([`SecretStore`]) through a
//! [`SealedStore`]: after a signer's init, issue and rotation, a CA set's
//! start, a key ring's forced rotation and a credential's mint, the
//! backend's data holds no private key and no credential in clear, and
//! every document reads back; a sealed entry moved onto another data key
//! fails to open.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::KeyAlgorithm;
use pki_rotate::credential::{self, Secret};
use pki_rotate::{
    CredentialEngine, CredentialInput, CredentialPolicy, CredentialState, Document, Driver,
    KeyRing, KeyRingEngine, KeyRingInput, KeyRingPolicy, LeafRequest, Revision, Roles, SealedStore,
    SealingKeys, SecretBackend, SecretData, SecretStore, SetEngine, SetInput, SetState,
    SignerEngine, SignerInput, SignerPolicy, SignerState, StoreKey,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::BTreeMap;
use std::sync::Mutex;
use time::Duration;
use time::macros::datetime;

/// Secrets in memory, as a Kubernetes API server would hold them.
#[derive(Default)]
struct Secrets(Mutex<BTreeMap<String, (SecretData, u64)>>);

impl SecretBackend for Secrets {
    fn location(&self) -> String {
        "secrets".into()
    }
    fn get(&self, key: &str) -> pki_rotate::Result<Option<(SecretData, Revision)>> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .get(key)
            .map(|(d, r)| (d.clone(), Revision::new(r.to_string()))))
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        data: &SecretData,
    ) -> pki_rotate::Result<Revision> {
        let mut map = self.0.lock().unwrap();
        let found = map.get(key).map(|(_, r)| Revision::new(r.to_string()));
        assert_eq!(found.as_ref(), expected, "no concurrent writer here");
        let next = found.map_or(1, |r| r.as_str().parse::<u64>().unwrap() + 1);
        map.insert(key.to_string(), (data.clone(), next));
        Ok(Revision::new(next.to_string()))
    }
}

fn sealed<'a, D: Document>(
    secrets: &'a Secrets,
    key: &StoreKey,
) -> SealedStore<SecretStore<D, &'a Secrets>, ChaCha20Rng> {
    SealedStore::new(
        SecretStore::new(secrets),
        SealingKeys::single(key.clone()),
        ChaCha20Rng::seed_from_u64(7),
        false,
    )
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn secret_data_holds_no_private_key_or_credential_in_clear() {
    let secrets = Secrets::default();
    let key = StoreKey::generate(&mut ChaCha20Rng::seed_from_u64(1));
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let t0 = datetime!(2026-01-01 00:00 UTC);

    let signer = Driver::new(sealed::<SignerState>(&secrets, &key));
    let state = SignerState::new("service-ca", SignerPolicy::default(), t0, &mut rng).unwrap();
    signer.create::<SignerEngine>("signer", &state).unwrap();
    let issue = SignerInput::request("web", LeafRequest::server(vec!["web.ns.svc".into()]));
    signer
        .step::<SignerEngine, _>("signer", &issue, t0, &mut rng)
        .unwrap();
    let rotated = signer
        .step::<SignerEngine, _>(
            "signer",
            &SignerInput::default(),
            t0 + Duration::days(396),
            &mut rng,
        )
        .unwrap();
    assert!(rotated.changed, "the CA rotated");

    let set = Driver::new(sealed::<SetState>(&secrets, &key));
    let roles = Roles {
        serving: true,
        client: true,
    };
    let state = SetState::new(
        &[("cluster".to_string(), roles)],
        KeyAlgorithm::EcdsaP256,
        Duration::days(365),
        t0,
        &mut rng,
    )
    .unwrap();
    set.create::<SetEngine>("set", &state).unwrap();
    let start = SetInput::Start {
        reason: "drill".into(),
        imports: Vec::new(),
        one_at_a_time: false,
    };
    set.step::<SetEngine, _>("set", &start, t0, &mut rng)
        .unwrap();

    let keys = Driver::new(sealed::<KeyRing>(&secrets, &key));
    let ring = KeyRing::new(KeyRingPolicy::default(), t0, &mut rng).unwrap();
    keys.create::<KeyRingEngine>("keys", &ring).unwrap();
    keys.step::<KeyRingEngine, _>("keys", &KeyRingInput::forced("drill"), t0, &mut rng)
        .unwrap();

    let creds = Driver::new(sealed::<CredentialState>(&secrets, &key));
    let policy = CredentialPolicy {
        expire: Duration::hours(720),
        grace: Duration::minutes(10),
    };
    let cred_key = credential::credential_key("db");
    let state = CredentialState::new("db", policy, None).unwrap();
    creds.create::<CredentialEngine>(&cred_key, &state).unwrap();
    creds
        .step::<CredentialEngine, _>(&cred_key, &CredentialInput::Step, t0, &mut rng)
        .unwrap();
    let minted = "cred-3f9c1d0a7be4e2115c";
    let mint = CredentialInput::Minted {
        rotation: 1,
        attempt: 1,
        value: Secret::new(minted),
    };
    let step = creds
        .step::<CredentialEngine, _>(&cred_key, &mint, t0, &mut rng)
        .unwrap();
    assert!(step.document.current.is_some());

    // The dump: every data entry of every Secret.
    let dump = secrets.0.lock().unwrap().clone();
    assert_eq!(dump.len(), 4);
    let mut sealed_entries = 0;
    for (secret, (data, _)) in &dump {
        for (entry, value) in data {
            assert!(!contains(value, b"PRIVATE KEY"), "{secret}/{entry}");
            assert!(!contains(value, minted.as_bytes()), "{secret}/{entry}");
            sealed_entries += usize::from(pki_rotate::sealing::is_sealed(value));
        }
    }
    assert!(sealed_entries >= 6, "{sealed_entries}");

    // Every document reads back.
    signer.load::<SignerEngine>("signer").unwrap();
    set.load::<SetEngine>("set").unwrap();
    keys.load::<KeyRingEngine>("keys").unwrap();
    let (cred, _) = creds.load::<CredentialEngine>(&cred_key).unwrap();
    assert_eq!(cred.current.unwrap().value.as_bytes(), minted.as_bytes());

    // The CA key's sealed entry moved onto a leaf key's entry.
    let mut map = secrets.0.lock().unwrap();
    let (data, _) = map.get_mut("signer").unwrap();
    let ca_key = data["tls.key"].clone();
    let leaf_entry = data
        .keys()
        .find(|k| k.starts_with("certs.") && k.ends_with(".tls.key"))
        .unwrap()
        .clone();
    data.insert(leaf_entry, ca_key);
    drop(map);
    let err = signer
        .load::<SignerEngine>("signer")
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not open"), "{err}");
}

/// A sealed store keeps the inner store's summary (ids and dates, nothing
/// private), and any write through the sealed store leaves a current
/// summary; but an idle step reads the document's head, CA key included,
/// so it needs the store key as every other step does.
#[test]
fn a_sealed_store_keeps_the_summary_in_clear_and_idle_steps_need_the_key() {
    use pki_rotate::{FsStore, Read, Step, Store};
    let dir = tempfile::tempdir().unwrap();
    let key = StoreKey::generate(&mut ChaCha20Rng::seed_from_u64(11));
    let t0 = datetime!(2026-01-01 00:00 UTC);
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let sealed = SealedStore::new(
        FsStore::open_or_create(dir.path()).unwrap(),
        SealingKeys::single(key),
        ChaCha20Rng::seed_from_u64(13),
        true,
    );
    let state = SignerState::new("service-ca", SignerPolicy::default(), t0, &mut rng).unwrap();
    Driver::new(&sealed)
        .create_at::<SignerEngine>("signer", &state, t0)
        .unwrap();
    let web = SignerInput::request("web", LeafRequest::server(vec!["web.ns".into()]));
    let issued = Driver::new(&sealed)
        .step::<SignerEngine, _>("signer", &web, t0, &mut rng)
        .unwrap();
    let (_, revision) = sealed.get_summary("signer").unwrap().unwrap();
    assert_eq!(revision, issued.revision);

    let plain = FsStore::open(dir.path()).unwrap();
    let now = t0 + Duration::days(1);
    let idle @ Step {
        read: Read::Summary { .. },
        ..
    } = Driver::new(&sealed)
        .step_unless_idle::<SignerEngine, _>("signer", &SignerInput::default(), now, &mut rng)
        .unwrap()
    else {
        panic!("nothing is due a day later");
    };
    assert_eq!(idle.next_wake, issued.next_wake);
    let full = Driver::new(&sealed)
        .step::<SignerEngine, _>("signer", &SignerInput::default(), now, &mut rng)
        .unwrap();
    assert_eq!(full.next_wake, idle.next_wake);
    let without_key = SealedStore::new(
        FsStore::open(dir.path()).unwrap(),
        SealingKeys::none(),
        ChaCha20Rng::seed_from_u64(14),
        true,
    );
    let refused = Driver::new(&without_key)
        .step_unless_idle::<SignerEngine, _>("signer", &SignerInput::default(), now, &mut rng)
        .unwrap_err();
    assert!(refused.to_string().contains("seal"), "{refused}");
    assert!(
        Driver::new(&plain).load::<SignerEngine>("signer").is_err(),
        "the document opens only with the key"
    );
}
