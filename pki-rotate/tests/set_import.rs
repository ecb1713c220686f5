#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! CA sets with imported CAs (intermediates under an organisation's
//! root), and set documents written by earlier releases or naming what
//! the set does not have.

use pki_core::{
    Bundle, Certificate, CertificateAuthority, KeyAlgorithm, Purpose, VerifyOptions, verify_chain,
};
mod support;

use pki_rotate::Document as _;
use pki_rotate::set::ImportedCa;
use pki_rotate::{SetError, SetInput, SetState, SetStep};
use rand_chacha::ChaCha20Rng;
use time::{Duration, OffsetDateTime, macros::datetime};

use support::set::*;

#[test]
fn importing_the_ca_in_use_as_the_new_one_is_refused() {
    let mut r = rng(31);
    let s = gep18(31);
    let current = s.cas()["etcd"].current.signer.clone();
    let import = |authority: CertificateAuthority| SetInput::Start {
        reason: "import".into(),
        imports: vec![ImportedCa {
            ca: "etcd".into(),
            authority,
            chain: vec![],
        }],
        one_at_a_time: false,
    };
    let err = set_error(step(&s, import(current.clone()), T0, &mut r));
    assert!(matches!(err, SetError::CaRefused { .. }), "{err}");
    assert!(err.to_string().contains("key of the CA in use"), "{err}");
    // A new certificate on the same key is the same CA for this purpose.
    let cert = pki_core::CertificateParams::new(
        pki_core::Profile::RootCa,
        "etcd-renewed",
        T0,
        Duration::days(700),
    )
    .unwrap()
    .self_signed(current.key.private_key().unwrap(), &mut r)
    .unwrap();
    let renewed = CertificateAuthority::new(cert, current.key.clone()).unwrap();
    let err = set_error(step(&s, import(renewed), T0, &mut r));
    assert!(matches!(err, SetError::CaRefused { .. }), "{err}");
    // After a rotation the split client CA is in use too.
    let mut done = start(&s, false, T0, &mut r);
    for _ in 0..3 {
        done = advance(&ack_all(&done, T0, &mut r), T0, &mut r).unwrap();
    }
    let client = done.cas()["etcd"].current.client_signer.clone().unwrap();
    let err = set_error(step(&done, import(client), T0, &mut r));
    assert!(matches!(err, SetError::CaRefused { .. }), "{err}");
}

/// An organisation's root, valid `root_days` from `at`, and under it an
/// intermediate CA (pathLen 0) for the set to import: the k3s custom-CA
/// topology. The intermediate is valid for 700 days, past its root (a
/// cross-sign sets any NotAfter, as an outside CA may), so what bounds its
/// leaves is the root.
fn org_intermediate(
    at: OffsetDateTime,
    root_days: i64,
    cn: &str,
    r: &mut ChaCha20Rng,
) -> (CertificateAuthority, ImportedCa) {
    let root = CertificateAuthority::generate_root(
        "Org Root",
        KeyAlgorithm::EcdsaP256,
        at,
        Duration::days(root_days),
        r,
    )
    .unwrap();
    let key = pki_core::PrivateKey::generate(KeyAlgorithm::EcdsaP256, r).unwrap();
    let template = pki_core::CertificateParams::new(
        pki_core::Profile::IntermediateCa { path_len: Some(0) },
        cn,
        at,
        Duration::days(700),
    )
    .unwrap()
    .self_signed(&key, r)
    .unwrap();
    let cert = pki_core::cross_sign(&template, &root, at + Duration::days(700), r).unwrap();
    assert_eq!(cert.basic_constraints().unwrap().path_len, Some(0));
    let import = ImportedCa {
        ca: "cluster".into(),
        authority: CertificateAuthority::new(cert, key).unwrap(),
        chain: vec![root.cert.clone()],
    };
    (root, import)
}

fn start_with(imports: Vec<ImportedCa>) -> SetInput {
    SetInput::Start {
        reason: "org CA".into(),
        imports,
        one_at_a_time: false,
    }
}

/// The published files of every target, as a client and a server read
/// them: every serving chain (`tls.crt`, leaf first) against every
/// `trust/CA.crt` for that CA, every client chain against every
/// `client-ca/CA.crt`, across the targets of `states` (before and after a
/// step). Independent of the engine's own pre-flight: it reads bytes.
fn published_matrix_holds(states: &[&SetState], at: OffsetDateTime) -> Result<usize, String> {
    let mut servers = Vec::new(); // (who, ca, chain, serving, client)
    let mut trusts = Vec::new(); // (who, ca, bundle)
    let mut client_cas = Vec::new();
    for (i, s) in states.iter().enumerate() {
        for (t, files) in s.target_files().unwrap() {
            for (path, f) in files.iter() {
                let who = format!("{t} (state {i}, {path})");
                if let Some(ca) = path
                    .strip_prefix("trust/")
                    .and_then(|p| p.strip_suffix(".crt"))
                {
                    trusts.push((who, ca.to_string(), Bundle::from_pem(&f.contents).unwrap()));
                } else if let Some(ca) = path
                    .strip_prefix("client-ca/")
                    .and_then(|p| p.strip_suffix(".crt"))
                {
                    client_cas.push((who, ca.to_string(), Bundle::from_pem(&f.contents).unwrap()));
                } else if let Some(name) = path
                    .strip_prefix("certs/")
                    .and_then(|p| p.strip_suffix("/tls.crt"))
                {
                    let leaf = &s.leaves()[name];
                    let chain = Certificate::all_from_pem(&f.contents).unwrap();
                    servers.push((who, leaf.spec.clone(), chain));
                }
            }
        }
    }
    let mut checked = 0;
    for (who, spec, chain) in &servers {
        let (leaf, rest) = chain.split_first().unwrap();
        let verifiers = if spec.serving { &trusts } else { &client_cas };
        for (v, ca, bundle) in verifiers.iter().filter(|(_, ca, _)| *ca == spec.ca) {
            let purpose = if spec.serving {
                Purpose::ServerAuth
            } else {
                Purpose::ClientAuth
            };
            verify_chain(leaf, rest, bundle, &VerifyOptions::new(at, purpose))
                .map_err(|e| format!("{v} rejects {who} of CA {ca}: {e}"))?;
            checked += 1;
        }
    }
    Ok(checked)
}

#[test]
fn an_imported_intermediate_under_an_external_root_rotates_with_every_published_pair_verifying() {
    let mut r = rng(40);
    let s0 = gep18(40);
    let t1 = T0 + Duration::days(10);
    // The root ends at T0 + 120 d, the intermediate long after: leaves
    // issued late in the rotation are cut at the root.
    let (root, import) = org_intermediate(t1, 110, "cluster-org", &mut r);
    let intermediate = import.authority.cert.clone();
    let old_cluster = s0.cas()["cluster"].current.signer.cert.clone();
    let mut states = vec![(s0.clone(), T0)];
    let mut s = step(&s0, start_with(vec![import]), t1, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::TrustBoth);
    let next = s.cas()["cluster"].next.as_ref().unwrap();
    assert_eq!(next.chain, vec![root.cert.clone()]);
    assert!(next.client_signer.is_some(), "the client CA is split off");
    // Trust-both: the bundle for cluster holds the old CA and the external
    // root, never the imported intermediate itself.
    let files = s.target_files().unwrap();
    let trust = Bundle::from_pem(files["node-1"].get("trust/cluster.crt").unwrap()).unwrap();
    assert_eq!(trust.len(), 2);
    assert!(trust.contains(&old_cluster) && trust.contains(&root.cert));
    assert!(!trust.contains(&intermediate));
    states.push((s.clone(), t1));
    let t2 = T0 + Duration::days(70);
    for (ack_at, at, want) in [
        (t1, t2, SetStep::UpdateCerts),
        (t2, t2, SetStep::TrustNew),
        (t2, t2, SetStep::Completed),
    ] {
        s = ack_all(&s, ack_at, &mut r);
        states.push((s.clone(), ack_at));
        s = advance(&s, at, &mut r).unwrap();
        assert_eq!(s.step(), want);
        states.push((s.clone(), at));
    }
    let mut checked = 0;
    for w in states.windows(2) {
        let ((before, _), (after, at)) = (&w[0], &w[1]);
        checked += published_matrix_holds(&[before, after], *at)
            .unwrap_or_else(|e| panic!("{} -> {}: {e}", before.step(), after.step()));
    }
    assert!(checked > 50, "{checked} cells");
    // Completed: the imported CA is the cluster CA, its chain kept; the
    // serving chain is leaf + intermediate; the bundle is the root alone.
    let cluster = &s.cas()["cluster"];
    assert_eq!(cluster.current.signer.cert, intermediate);
    assert_eq!(cluster.current.chain, vec![root.cert.clone()]);
    let files = s.target_files().unwrap();
    let trust = Bundle::from_pem(files["node-1"].get("trust/cluster.crt").unwrap()).unwrap();
    assert_eq!(trust.certs().to_vec(), vec![root.cert.clone()]);
    let served = Certificate::all_from_pem(
        files["control-plane"]
            .get("certs/kube-apiserver/tls.crt")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(served.len(), 2, "leaf, then the imported intermediate");
    assert_eq!(served[1], intermediate);
    // Re-issued at T0 + 70 d for 90 days, the leaf is cut at the root's
    // NotAfter (T0 + 120 d), not the intermediate's.
    assert_eq!(served[0].not_after(), root.cert.not_after());
    assert!(served[0].not_after() < intermediate.not_after());
    // Client certificates of the split-off client CA carry no chain.
    let kubelet =
        Certificate::all_from_pem(files["node-1"].get("certs/kubelet/tls.crt").unwrap()).unwrap();
    assert_eq!(kubelet.len(), 1);
    let status = s.status(t2);
    assert_eq!(status.cas["cluster"].current_root, Some(root.cert.id()));
    assert_eq!(status.cas["etcd"].current_root, None);
    // The document keeps the chain through files and Secret data.
    let doc = SetState::to_files(&s).unwrap();
    assert!(doc.get("set/cas/cluster/ca-chain.crt").is_some());
    let back = SetState::from_files(&doc).unwrap();
    assert_eq!(back.cas()["cluster"].current.chain, vec![root.cert.clone()]);
    assert_eq!(SetState::to_files(&back).unwrap(), doc);
    let data = SetState::files_to_secret_data(&doc).unwrap();
    let from_secret = SetState::files_from_secret_data(&data).unwrap();
    assert_eq!(
        SetState::to_files(&SetState::from_files(&from_secret).unwrap()).unwrap(),
        doc
    );
}

#[test]
fn an_imported_ca_with_the_chain_in_the_document_mid_rotation_round_trips() {
    let mut r = rng(41);
    let s0 = gep18(41);
    let (root, import) = org_intermediate(T0, 400, "cluster-org", &mut r);
    let s = step(&s0, start_with(vec![import]), T0, &mut r).unwrap();
    let doc = SetState::to_files(&s).unwrap();
    let state: serde_json::Value =
        serde_json::from_slice(doc.get("set/state.json").unwrap()).unwrap();
    assert_eq!(state["cas"]["cluster"]["next"]["chain"], true);
    assert!(state["cas"]["cluster"].get("chain").is_none(), "{state}");
    assert!(
        state["cas"]["etcd"]["next"].get("chain").is_none(),
        "{state}"
    );
    let back = SetState::from_files(&doc).unwrap();
    assert_eq!(
        back.cas()["cluster"].next.as_ref().unwrap().chain,
        vec![root.cert]
    );
    // A chain file that is not the CA's chain is corruption, not a root.
    let mut bad = pki_rotate::Files::new();
    for (p, f) in doc.iter() {
        let f = if p == "set/cas/cluster/next-ca-chain.crt" {
            pki_rotate::File::public(s.cas()["etcd"].current.signer.cert.to_pem())
        } else {
            f.clone()
        };
        bad.insert(p, f).unwrap();
    }
    let err = SetState::from_files(&bad).unwrap_err();
    assert!(err.to_string().contains("next-ca-chain.crt"), "{err}");
}

#[test]
fn imports_the_engine_cannot_use_are_refused_naming_the_ca() {
    let mut r = rng(42);
    let s = gep18(42);
    let refused = |import: ImportedCa, r: &mut ChaCha20Rng| {
        let err = set_error(step(&s, start_with(vec![import]), T0, r));
        assert!(matches!(err, SetError::CaRefused { .. }), "{err}");
        assert!(err.to_string().contains("\"cluster\""), "{err}");
        err.to_string()
    };
    // No root: the chain stops at the intermediate's issuer's issuer.
    let (_, good) = org_intermediate(T0, 400, "cluster-org", &mut r);
    let mut no_chain = good.clone();
    no_chain.chain.clear();
    let err = refused(no_chain, &mut r);
    assert!(err.contains("root"), "{err}");
    // Not in issuing order: a stranger's root after the real one.
    let stranger = CertificateAuthority::generate_root(
        "stranger",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(400),
        &mut r,
    )
    .unwrap();
    let mut disordered = good.clone();
    disordered.chain.insert(0, stranger.cert.clone());
    let err = refused(disordered, &mut r);
    assert!(err.contains("certificate 2"), "{err}");
    // A root that ends within a day: the leaves would stop verifying then.
    let (_, short) = org_intermediate(T0, 1, "cluster-org", &mut r);
    let err = refused(short, &mut r);
    assert!(err.contains("more than 24 hours"), "{err}");
    // Its root ends before the 90-day leaves it would sign.
    let (_, month) = org_intermediate(T0, 30, "cluster-org", &mut r);
    let err = refused(month, &mut r);
    assert!(err.contains("not longer than"), "{err}");
    // The chain does not verify at the start: its root is not valid yet.
    let (_, later) = org_intermediate(T0 + Duration::days(5), 400, "cluster-org", &mut r);
    let err = refused(later, &mut r);
    assert!(err.contains("not valid"), "{err}");
    // And the good one starts the rotation.
    let started = step(&s, start_with(vec![good]), T0, &mut r).unwrap();
    assert_eq!(started.step(), SetStep::TrustBoth);
}

#[test]
fn a_set_document_written_before_imported_chains_loads_finishes_and_is_written_the_same() {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/set-v1");
    let mut files = pki_rotate::Files::new();
    fn walk(base: &std::path::Path, dir: &std::path::Path, files: &mut pki_rotate::Files) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, files);
                continue;
            }
            let rel = p.strip_prefix(base).unwrap().to_str().unwrap().to_string();
            if rel == "README.md" {
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            let f = if rel.ends_with(".key") {
                pki_rotate::File::secret(bytes)
            } else {
                pki_rotate::File::public(bytes)
            };
            files.insert(rel, f).unwrap();
        }
    }
    walk(&base, &base, &mut files);
    let s = SetState::from_files(&files).unwrap();
    assert_eq!(s.step(), SetStep::TrustBoth);
    assert!(s.cas().values().all(|c| c.current.chain.is_empty()));
    assert!(
        s.cas()["cluster"]
            .next
            .as_ref()
            .unwrap()
            .client_signer
            .is_some()
    );
    // Written back: the same state and target files, byte for byte.
    let again = SetState::to_files(&s).unwrap();
    for (path, f) in files.iter() {
        assert_eq!(again.get(path), Some(f.contents.as_slice()), "{path}");
    }
    assert_eq!(again.iter().count(), files.iter().count());
    // And its rotation finishes.
    let mut r = rng(43);
    let at = datetime!(2026-03-02 00:00 UTC);
    let mut s = s;
    for _ in 0..3 {
        s = advance(&ack_all(&s, at, &mut r), at, &mut r).unwrap();
    }
    assert_eq!(s.step(), SetStep::Completed);
}

#[test]
fn a_document_whose_target_loads_bundles_of_an_unknown_ca_is_refused() {
    let s = gep18(90);
    let mut files = SetState::to_files(&s).unwrap();
    let state = "set/state.json";
    let mut doc: serde_json::Value = serde_json::from_slice(files.get(state).unwrap()).unwrap();
    let target = doc["targets"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .next()
        .unwrap();
    target["trusts"] = serde_json::json!(["c luster"]);
    files
        .insert(
            state.to_string(),
            pki_rotate::File::public(serde_json::to_vec(&doc).unwrap()),
        )
        .unwrap();
    let err = SetState::from_files(&files).unwrap_err().to_string();
    assert!(err.contains("unknown CA \"c luster\""), "{err}");
}

#[test]
fn a_document_whose_leaf_names_a_target_it_does_not_have_is_refused() {
    let s = gep18(91);
    let mut files = SetState::to_files(&s).unwrap();
    let state = "set/state.json";
    let mut doc: serde_json::Value = serde_json::from_slice(files.get(state).unwrap()).unwrap();
    let leaf = doc["leaves"].as_object().unwrap().values().next().unwrap();
    let target = leaf["spec"]["target"].as_str().unwrap().to_string();
    doc["targets"].as_object_mut().unwrap().remove(&target);
    files
        .insert(
            state.to_string(),
            pki_rotate::File::public(serde_json::to_vec(&doc).unwrap()),
        )
        .unwrap();
    let err = SetState::from_files(&files).unwrap_err().to_string();
    assert!(
        err.contains(&format!("unknown target \"{target}\"")),
        "{err}"
    );
}
