#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The GEP-18 timeline t0 → t1 → t2 for the cluster CA (serving and client
//! certificates, so a new client CA appears) and the etcd CA, proved with
//! real mutual-TLS handshakes over loopback (a rustls server that requires
//! client certificates, a rustls client presenting one) and with `openssl
//! verify -x509_strict`.
//!
//! Every change of the set's files is a transition from a state k to a
//! state k+1. Each target may have loaded either, so for every transition
//! every client target (old or new files) must complete a mutual handshake
//! with every server target it talks to (old or new files). After
//! completion, an old-CA client certificate is refused by a server and an
//! old-CA serving certificate by a client.

mod support;

use support::mtls::{Identity, MtlsError, mutual_handshake};
use support::openssl;
use support::openssl::Verdict;
use support::set_engine::{ack_each, advance, names, spec};

use pki::core::{Bundle, Certificate, KeyAlgorithm, PrivateKey};
use pki::rotate::set::material;
use pki::rotate::{Engine, Roles, SetEngine, SetInput, SetState, SetStep};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, OffsetDateTime, macros::datetime};

/// t0, 2026-01-01: the shoot's CAs exist.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// Who talks to whom: (client target, its client leaf, server target, its
/// serving leaf, the server's DNS name).
const PAIRS: [(&str, &str, &str, &str, &str); 2] = [
    (
        "node-1",
        "kubelet",
        "apiserver",
        "kube-apiserver",
        "api.example",
    ),
    (
        "apiserver",
        "apiserver-etcd-client",
        "etcd",
        "etcd-server",
        "etcd.example",
    ),
];

#[derive(Clone)]
struct Held {
    trust: Option<Bundle>,
    client_ca: Option<Bundle>,
    cert: Certificate,
    key: PrivateKey,
}

fn held(s: &SetState, target: &str, leaf: &str, ca: &str) -> Held {
    let m = material::target_material(s, target);
    let l = &s.leaves()[leaf];
    Held {
        trust: m.trust.get(ca).cloned(),
        client_ca: m.client_ca.get(ca).cloned(),
        cert: l.issued.cert.clone(),
        key: l.issued.key.clone(),
    }
}

fn ca_of(leaf: &str) -> &'static str {
    if leaf.contains("etcd") {
        "etcd"
    } else {
        "cluster"
    }
}

/// Both directions of one client/server pair at `at`: a mutual handshake,
/// and openssl on the same two chains.
fn talk(client: &Held, server: &Held, name: &str, at: OffsetDateTime) -> Result<(), String> {
    let trust = client.trust.as_ref().expect("client trust bundle");
    let client_ca = server.client_ca.as_ref().expect("server client-ca bundle");
    mutual_handshake(
        Identity {
            chain: std::slice::from_ref(&server.cert),
            key: &server.key,
        },
        client_ca,
        Identity {
            chain: std::slice::from_ref(&client.cert),
            key: &client.key,
        },
        trust,
        name,
        at,
    )
    .map_err(|e| e.to_string())?;
    for (bundle, cert, purpose) in [
        (trust, &server.cert, "sslserver"),
        (client_ca, &client.cert, "sslclient"),
    ] {
        match openssl::verify(bundle, std::slice::from_ref(cert), at, purpose) {
            Ok(Verdict::Verified | Verdict::Unavailable) => {}
            Err(e) => return Err(format!("openssl {purpose}: {e}")),
        }
    }
    Ok(())
}

fn initial(rng: &mut ChaCha20Rng) -> SetState {
    let roles: Roles = "serving+client".parse().unwrap();
    let mut s = SetState::new(
        &[("cluster".into(), roles), ("etcd".into(), roles)],
        KeyAlgorithm::EcdsaP256,
        Duration::days(730),
        T0,
        rng,
    )
    .unwrap();
    let inputs = [
        SetInput::Issue {
            replace: false,
            name: "kube-apiserver".into(),
            spec: spec("cluster", true, "api.example", "apiserver"),
        },
        SetInput::Issue {
            replace: false,
            name: "apiserver-etcd-client".into(),
            spec: spec("etcd", false, "", "apiserver"),
        },
        SetInput::Issue {
            replace: false,
            name: "etcd-server".into(),
            spec: spec("etcd", true, "etcd.example", "etcd"),
        },
        SetInput::Issue {
            replace: false,
            name: "kubelet".into(),
            spec: spec("cluster", false, "", "node-1"),
        },
        SetInput::Target {
            name: "apiserver".into(),
            trusts: names(&["etcd"]),
            client_ca: names(&["cluster"]),
        },
        SetInput::Target {
            name: "etcd".into(),
            trusts: None,
            client_ca: names(&["etcd"]),
        },
        SetInput::Target {
            name: "node-1".into(),
            trusts: names(&["cluster"]),
            client_ca: None,
        },
    ];
    for input in inputs {
        s = SetEngine::step(&s, &input, T0, rng)
            .unwrap()
            .into_document();
    }
    s
}

#[test]
fn gep18_cluster_and_etcd_rotation_keeps_mutual_tls_at_every_step() {
    let mut rng = ChaCha20Rng::seed_from_u64(18);
    let t1 = T0 + Duration::days(60);
    let t2 = t1 + Duration::days(7);
    let mut states = vec![(initial(&mut rng), T0)];
    // t1: start-ca-rotation.
    let started = SetEngine::step(
        &states[0].0,
        &SetInput::Start {
            reason: "GEP-18 t1".into(),
            imports: vec![],
            one_at_a_time: false,
        },
        t1,
        &mut rng,
    )
    .unwrap()
    .into_document();
    assert!(
        started.cas()["cluster"]
            .next
            .as_ref()
            .unwrap()
            .client_signer
            .is_some()
    );
    states.push((started, t1));
    ack_each(&mut states, t1, &mut rng);
    // t2: complete-ca-rotation = update-certs, then trust-new.
    advance(&mut states, t2, &mut rng);
    assert_eq!(states.last().unwrap().0.step(), SetStep::UpdateCerts);
    ack_each(&mut states, t2, &mut rng);
    advance(&mut states, t2, &mut rng);
    assert_eq!(states.last().unwrap().0.step(), SetStep::TrustNew);
    ack_each(&mut states, t2, &mut rng);
    advance(&mut states, t2, &mut rng);
    assert_eq!(states.last().unwrap().0.step(), SetStep::Completed);

    let mut checked = 0;
    for window in states.windows(2) {
        let ((before, _), (after, at)) = (&window[0], &window[1]);
        for (c_target, c_leaf, s_target, s_leaf, dns) in PAIRS {
            let ca = ca_of(s_leaf);
            for (cw, cs) in [("before", before), ("after", after)] {
                for (sw, ss) in [("before", before), ("after", after)] {
                    let client = held(cs, c_target, c_leaf, ca);
                    let server = held(ss, s_target, s_leaf, ca);
                    talk(&client, &server, dns, *at).unwrap_or_else(|e| {
                        panic!(
                            "{} -> {}: {c_target} ({cw}, {}) to {s_target} ({sw}, {}): {e}",
                            before.step(),
                            after.step(),
                            cs.step(),
                            ss.step()
                        )
                    });
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 40, "{checked} handshakes");

    // After completion nothing signed by an old CA verifies.
    let (idle, _) = &states[0];
    let (done, _) = states.last().unwrap();
    let at = t2;
    let old_kubelet = held(idle, "node-1", "kubelet", "cluster");
    let apiserver = held(done, "apiserver", "kube-apiserver", "cluster");
    let err = mutual_handshake(
        Identity {
            chain: std::slice::from_ref(&apiserver.cert),
            key: &apiserver.key,
        },
        apiserver.client_ca.as_ref().unwrap(),
        Identity {
            chain: std::slice::from_ref(&old_kubelet.cert),
            key: &old_kubelet.key,
        },
        held(done, "node-1", "kubelet", "cluster")
            .trust
            .as_ref()
            .unwrap(),
        "api.example",
        at,
    )
    .unwrap_err();
    assert!(matches!(err, MtlsError::ServerRejected(_)), "{err}");
    let old_apiserver = held(idle, "apiserver", "kube-apiserver", "cluster");
    let new_kubelet = held(done, "node-1", "kubelet", "cluster");
    let err = mutual_handshake(
        Identity {
            chain: std::slice::from_ref(&old_apiserver.cert),
            key: &old_apiserver.key,
        },
        apiserver.client_ca.as_ref().unwrap(),
        Identity {
            chain: std::slice::from_ref(&new_kubelet.cert),
            key: &new_kubelet.key,
        },
        new_kubelet.trust.as_ref().unwrap(),
        "api.example",
        at,
    )
    .unwrap_err();
    assert!(matches!(err, MtlsError::ClientRejected(_)), "{err}");
    let old_etcd = held(idle, "etcd", "etcd-server", "etcd");
    let new_apiserver_client = held(done, "apiserver", "apiserver-etcd-client", "etcd");
    for (bundle, cert, purpose) in [
        (
            new_kubelet.trust.as_ref().unwrap(),
            &old_apiserver.cert,
            "sslserver",
        ),
        (
            apiserver.client_ca.as_ref().unwrap(),
            &old_kubelet.cert,
            "sslclient",
        ),
        (
            new_apiserver_client.trust.as_ref().unwrap(),
            &old_etcd.cert,
            "sslserver",
        ),
    ] {
        if let Ok(Verdict::Verified) =
            openssl::verify(bundle, std::slice::from_ref(cert), at, purpose)
        {
            panic!("openssl accepted an old-CA certificate for {purpose}");
        }
    }
}
