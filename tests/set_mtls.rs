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
//!
//! The same holds when the new CAs are intermediates that OpenSSL made
//! under an organisation's root and `set start` imported: bundles hold
//! only that root, and the chains targets present (their `tls.crt`) carry
//! the intermediate.

#[path = "../src/mtls.rs"]
mod mtls;
#[path = "support/openssl.rs"]
mod openssl;

use mtls::{Identity, MtlsError, mutual_handshake};
use openssl::Verdict;
use pki::core::{Bundle, Certificate, KeyAlgorithm, PrivateKey};
use pki::rotate::set::material;
use pki::rotate::{Engine, LeafSpec, Roles, SetEngine, SetInput, SetState, SetStep};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::BTreeSet;
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
    let l = &s.leaves[leaf];
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

fn spec(ca: &str, serving: bool, dns: &str, target: &str) -> LeafSpec {
    LeafSpec {
        ca: ca.into(),
        serving,
        client: !serving,
        dns_names: if serving { vec![dns.into()] } else { vec![] },
        ip_addresses: vec![],
        common_name: None,
        target: target.into(),
        lifetime: Duration::days(180),
    }
}

fn names(v: &[&str]) -> Option<BTreeSet<String>> {
    Some(v.iter().map(|s| s.to_string()).collect())
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

/// Acks every target that has not loaded its files, in name order, one
/// state per ack (each may move certificates).
fn ack_each(
    states: &mut Vec<(SetState, OffsetDateTime)>,
    at: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) {
    for _ in 0..4 {
        let s = states.last().unwrap().0.clone();
        let pending: Vec<String> = s
            .targets
            .keys()
            .filter(|t| !s.is_loaded(t))
            .cloned()
            .collect();
        if pending.is_empty() {
            return;
        }
        for t in pending {
            let s = states.last().unwrap().0.clone();
            let fp = s.expected_fingerprint(&t).unwrap();
            let next = SetEngine::step(
                &s,
                &SetInput::Ack {
                    target: t,
                    fingerprint: fp,
                },
                at,
                rng,
            )
            .unwrap()
            .into_document();
            states.push((next, at));
        }
    }
}

fn advance(
    states: &mut Vec<(SetState, OffsetDateTime)>,
    at: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) {
    let s = &states.last().unwrap().0;
    let next = SetEngine::step(
        s,
        &SetInput::Advance {
            from: None,
            override_reason: None,
        },
        at,
        rng,
    )
    .unwrap()
    .into_document();
    states.push((next, at));
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
        started.cas["cluster"]
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

/// Runs `openssl` in `dir`, which must succeed.
fn run_openssl(dir: &std::path::Path, args: &[&str]) {
    let o = std::process::Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl is installed (Debian: apt-get install openssl)");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The k3s custom-CA topology made by OpenSSL in `dir`: `root.crt`
/// (`/CN=Org Root`, `openssl req -x509`) and, for each of `cas`, an
/// intermediate CA with pathLen 0 signed by it (`openssl x509 -req`),
/// written as the one file StarlingX uploads: `NAME-upload.pem` holding
/// the CA certificate, its key and the root.
fn openssl_org(dir: &std::path::Path, cas: &[&str]) {
    std::fs::write(
        dir.join("ext.cnf"),
        "[ca0]\nbasicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n",
    )
    .unwrap();
    let key = |name: &str| {
        run_openssl(
            dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                &format!("{name}.key"),
            ],
        )
    };
    key("root");
    run_openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "root.key",
            "-out",
            "root.crt",
            "-subj",
            "/CN=Org Root",
            "-days",
            "3650",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    for ca in cas {
        key(ca);
        run_openssl(
            dir,
            &[
                "req",
                "-new",
                "-key",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.csr"),
                "-subj",
                &format!("/CN=Org {ca} CA"),
            ],
        );
        run_openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{ca}.csr"),
                "-CA",
                "root.crt",
                "-CAkey",
                "root.key",
                "-out",
                &format!("{ca}.crt"),
                "-days",
                "730",
                "-extfile",
                "ext.cnf",
                "-extensions",
                "ca0",
            ],
        );
        let read = |f: String| std::fs::read_to_string(dir.join(f)).unwrap();
        std::fs::write(
            dir.join(format!("{ca}-upload.pem")),
            format!(
                "{}{}{}",
                read(format!("{ca}.crt")),
                read(format!("{ca}.key")),
                read("root.crt".into())
            ),
        )
        .unwrap();
    }
}

/// What one target presents and trusts, read from its published files:
/// the chain in `certs/LEAF/tls.crt`, the leaf's key, and the bundles.
struct Published {
    chain: Vec<Certificate>,
    key: PrivateKey,
    trust: Option<Bundle>,
    client_ca: Option<Bundle>,
}

fn published(s: &SetState, target: &str, leaf: &str, trusts: &str, verifies: &str) -> Published {
    let files = &s.target_files().unwrap()[target];
    let bundle = |path: String| files.get(&path).map(|b| Bundle::from_pem(b).unwrap());
    Published {
        chain: Certificate::all_from_pem(files.get(&format!("certs/{leaf}/tls.crt")).unwrap())
            .unwrap(),
        key: s.leaves[leaf].issued.key.clone(),
        trust: bundle(format!("trust/{trusts}.crt")),
        client_ca: bundle(format!("client-ca/{verifies}.crt")),
    }
}

#[test]
fn openssl_made_intermediates_imported_for_cluster_and_front_proxy_keep_mutual_tls_at_every_step() {
    let tmp = tempfile::tempdir().unwrap();
    openssl_org(tmp.path(), &["cluster", "front-proxy"]);
    let read = |f: &str| std::fs::read(tmp.path().join(f)).unwrap();
    let root = Certificate::from_pem(&read("root.crt")).unwrap();
    let org_cluster = Certificate::from_pem(&read("cluster.crt")).unwrap();
    assert_eq!(org_cluster.basic_constraints().unwrap().path_len, Some(0));
    // OpenSSL dated its certificates now: the set's time starts just after.
    let t0 = [&root, &org_cluster]
        .iter()
        .map(|c| c.not_before())
        .max()
        .unwrap()
        + Duration::minutes(1);
    let t1 = t0 + Duration::hours(1);
    let t2 = t1 + Duration::days(7);
    let mut rng = ChaCha20Rng::seed_from_u64(19);
    let roles = |r: &str| -> Roles { r.parse().unwrap() };
    let mut s = SetState::new(
        &[
            ("cluster".into(), roles("serving+client")),
            ("front-proxy".into(), roles("client")),
            ("metrics".into(), roles("serving")),
        ],
        KeyAlgorithm::EcdsaP256,
        Duration::days(730),
        t0,
        &mut rng,
    )
    .unwrap();
    for input in [
        SetInput::Issue {
            replace: false,
            name: "kube-apiserver".into(),
            spec: spec("cluster", true, "api.example", "apiserver"),
        },
        SetInput::Issue {
            replace: false,
            name: "kubelet".into(),
            spec: spec("cluster", false, "", "node-1"),
        },
        SetInput::Issue {
            replace: false,
            name: "aggregator".into(),
            spec: spec("front-proxy", false, "", "apiserver"),
        },
        SetInput::Issue {
            replace: false,
            name: "metrics-server".into(),
            spec: spec("metrics", true, "metrics.example", "metrics"),
        },
        SetInput::Target {
            name: "apiserver".into(),
            trusts: names(&["metrics"]),
            client_ca: names(&["cluster"]),
        },
        SetInput::Target {
            name: "node-1".into(),
            trusts: names(&["cluster"]),
            client_ca: None,
        },
        SetInput::Target {
            name: "metrics".into(),
            trusts: None,
            client_ca: names(&["front-proxy"]),
        },
    ] {
        s = SetEngine::step(&s, &input, t0, &mut rng)
            .unwrap()
            .into_document();
    }
    let imports = ["cluster", "front-proxy"]
        .iter()
        .map(|ca| {
            let v = pki::core::import_ca_file(&read(&format!("{ca}-upload.pem")), t1).unwrap();
            pki::rotate::set::ImportedCa::new(*ca, v)
        })
        .collect();
    let mut states = vec![(s.clone(), t0)];
    let started = SetEngine::step(
        &s,
        &SetInput::Start {
            reason: "organisation CA".into(),
            imports,
            one_at_a_time: false,
        },
        t1,
        &mut rng,
    )
    .unwrap()
    .into_document();
    states.push((started, t1));
    ack_each(&mut states, t1, &mut rng);
    for want in [SetStep::UpdateCerts, SetStep::TrustNew, SetStep::Completed] {
        advance(&mut states, t2, &mut rng);
        assert_eq!(states.last().unwrap().0.step(), want);
        ack_each(&mut states, t2, &mut rng);
    }

    // (client target, its client leaf, the CA of the server it trusts,
    // server target, its serving leaf, the CA of the clients it verifies, name)
    let pairs = [
        (
            "node-1",
            "kubelet",
            "cluster",
            "apiserver",
            "kube-apiserver",
            "cluster",
            "api.example",
        ),
        (
            "apiserver",
            "aggregator",
            "metrics",
            "metrics",
            "metrics-server",
            "front-proxy",
            "metrics.example",
        ),
    ];
    let mut checked = 0;
    for window in states.windows(2) {
        let ((before, _), (after, at)) = (&window[0], &window[1]);
        for (c_target, c_leaf, trusts, s_target, s_leaf, verifies, dns) in pairs {
            for (cw, cs) in [("before", before), ("after", after)] {
                for (sw, ss) in [("before", before), ("after", after)] {
                    let client = published(cs, c_target, c_leaf, trusts, verifies);
                    let server = published(ss, s_target, s_leaf, trusts, verifies);
                    let trust = client.trust.as_ref().unwrap();
                    let client_ca = server.client_ca.as_ref().unwrap();
                    let context = format!(
                        "{} -> {}: {c_target} ({cw}) to {s_target} ({sw})",
                        before.step(),
                        after.step()
                    );
                    mutual_handshake(
                        Identity {
                            chain: &server.chain,
                            key: &server.key,
                        },
                        client_ca,
                        Identity {
                            chain: &client.chain,
                            key: &client.key,
                        },
                        trust,
                        dns,
                        *at,
                    )
                    .unwrap_or_else(|e| panic!("{context}: {e}"));
                    for (bundle, chain, purpose) in [
                        (trust, &server.chain, "sslserver"),
                        (client_ca, &client.chain, "sslclient"),
                    ] {
                        assert_eq!(
                            openssl::verify(bundle, chain, *at, purpose),
                            Ok(Verdict::Verified),
                            "{context}: openssl {purpose}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 40, "{checked} pairs");

    // Completed: node-1's trust/cluster.crt is the organisation's root
    // alone, and the API server's tls.crt as published verifies against
    // exactly that file with openssl -x509_strict.
    let (done, _) = states.last().unwrap();
    let node = tmp.path().join("node-1");
    std::fs::create_dir_all(&node).unwrap();
    let files = &done.target_files().unwrap()["node-1"];
    let trust_file = node.join("cluster.crt");
    std::fs::write(&trust_file, files.get("trust/cluster.crt").unwrap()).unwrap();
    assert_eq!(
        Bundle::from_pem(&std::fs::read(&trust_file).unwrap())
            .unwrap()
            .certs()
            .to_vec(),
        vec![root.clone()]
    );
    let served = published(done, "apiserver", "kube-apiserver", "metrics", "cluster").chain;
    assert_eq!(&served[1..], std::slice::from_ref(&org_cluster));
    assert_eq!(
        openssl::verify_with_bundle_file(&trust_file, &served, t2, "sslserver"),
        Ok(Verdict::Verified)
    );
    // Without the intermediate the root alone does not verify the leaf:
    // the chain in tls.crt is what makes it work.
    assert!(openssl::verify_with_bundle_file(&trust_file, &served[..1], t2, "sslserver").is_err());
    // The front-proxy client chain is the leaf and its imported CA too,
    // and the metrics server's client-ca/front-proxy.crt is the root.
    let aggregator = published(done, "apiserver", "aggregator", "metrics", "front-proxy");
    assert_eq!(aggregator.chain.len(), 2);
    let metrics = published(done, "metrics", "metrics-server", "metrics", "front-proxy");
    assert_eq!(
        metrics.client_ca.unwrap().certs().to_vec(),
        vec![root.clone()]
    );
}
