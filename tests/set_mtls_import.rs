#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Mutual TLS at every step of a CA set rotation whose new CAs are
//! intermediates that OpenSSL made under an organisation's root and
//! `set start` imported: bundles hold only that root, and the chains
//! targets present (their `tls.crt`) carry the intermediate. As for CAs
//! the set generates (`set_mtls`), every client target, old or new files,
//! completes a mutual handshake with every server target it talks to.

mod support;

use support::maker::openssl as run_openssl;
use support::mtls::{Identity, mutual_handshake};
use support::openssl;
use support::openssl::Verdict;
use support::set_engine::{ack_each, advance, names, spec};

use pki::core::{Bundle, Certificate, KeyAlgorithm, PrivateKey};
use pki::rotate::{Engine, Roles, SetEngine, SetInput, SetState, SetStep};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::Duration;

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
        key: s.leaves()[leaf].issued.key.clone(),
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
