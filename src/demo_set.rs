//! `pki demo set`: a GEP-18 rotation of a CA set (cluster CA with a new
//! client CA, etcd CA) on a temporary directory store with a simulated
//! clock, printing at every step the mutual-TLS matrix between targets
//! that have and have not loaded the step, each cell a real handshake on
//! 127.0.0.1.

use crate::common::{CliError, CliResult};
use crate::mtls::{Identity, mutual_handshake};
use pki_rotate::set::{KEY, material};
use pki_rotate::{Driver, FsStore, LeafSpec, Roles, SetEngine, SetInput, SetState};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::BTreeSet;
use std::path::Path;
use time::{Duration, OffsetDateTime};

/// (client target, client leaf, server target, serving leaf, CA, DNS name)
const PAIRS: [(&str, &str, &str, &str, &str, &str); 2] = [
    (
        "node-1",
        "kubelet",
        "apiserver",
        "kube-apiserver",
        "cluster",
        "api.demo",
    ),
    (
        "apiserver",
        "apiserver-etcd-client",
        "etcd",
        "etcd-server",
        "etcd",
        "etcd.demo",
    ),
];

fn cell(client: &SetState, server: &SetState, pair: usize, at: OffsetDateTime) -> String {
    let (ct, cl, st, sl, ca, dns) = PAIRS[pair];
    let (cm, sm) = (
        material::target_material(client, ct),
        material::target_material(server, st),
    );
    let (Some(trust), Some(client_ca)) = (cm.trust.get(ca), sm.client_ca.get(ca)) else {
        return "n/a".into();
    };
    let (c, s) = (&client.leaves()[cl].issued, &server.leaves()[sl].issued);
    match mutual_handshake(
        Identity {
            chain: std::slice::from_ref(&s.cert),
            key: &s.key,
        },
        client_ca,
        Identity {
            chain: std::slice::from_ref(&c.cert),
            key: &c.key,
        },
        trust,
        dns,
        at,
    ) {
        Ok(()) => "ok".into(),
        Err(e) => format!("FAIL ({e})"),
    }
}

fn matrix(before: &SetState, after: &SetState, at: OffsetDateTime) -> bool {
    let mut all = true;
    for (i, (ct, _, st, _, ca, _)) in PAIRS.iter().enumerate() {
        crate::outln!("   {ct} -> {st} ({ca} CA), mutual TLS on 127.0.0.1:");
        crate::outln!(
            "     {:<26} {:<16} {:<16}",
            "",
            "server before",
            "server after"
        );
        for (label, client) in [("client before", before), ("client after", after)] {
            let a = cell(client, before, i, at);
            let b = cell(client, after, i, at);
            all &= a == "ok" && b == "ok";
            crate::outln!("     {label:<26} {a:<16} {b:<16}");
        }
    }
    all
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

/// Runs the demo in `dir` (a temporary directory when None).
/// `start`: the simulated clock's first moment (the current time when
/// `None`).
pub fn run(dir: Option<&Path>, start: Option<OffsetDateTime>) -> CliResult {
    let tmp;
    let root = match dir {
        Some(d) => d.to_path_buf(),
        None => {
            tmp = tempfile::tempdir().map_err(|e| CliError::new(format!("demo: {e}")))?;
            tmp.path().join("set")
        }
    };
    let store = FsStore::open_or_create(&root)?;
    let driver = Driver::new(&store);
    let mut rng = ChaCha20Rng::seed_from_u64(18);
    let t0 = pki_core::datetime::truncate(start.unwrap_or_else(OffsetDateTime::now_utc));
    create_set(&driver, t0, &mut rng)?;
    crate::outln!(
        "== t0 {}: a set with the cluster CA (serving+client) and the etcd CA, in {}",
        pki_core::datetime::rfc3339(t0),
        root.display()
    );
    crate::outln!(
        "   targets: apiserver (serves cluster, etcd client), etcd (serves etcd), node-1 (kubelet client)"
    );
    let mut now = t0 + Duration::days(30);
    let mut all = true;
    let mut run_step = |label: &str, input: SetInput, now: OffsetDateTime| -> CliResult<()> {
        let (before, _) = driver.load::<SetEngine>(&KEY)?;
        let step = driver.step::<SetEngine, _>(&KEY, &input, now, &mut rng)?;
        if !step.changed {
            return Ok(());
        }
        crate::outln!(
            "\n== {} {label}: now in step {}",
            pki_core::datetime::rfc3339(now),
            step.document.step()
        );
        for e in &step.events {
            crate::outln!("   {e}");
        }
        all &= matrix(&before, &step.document, now);
        Ok(())
    };
    run_step(
        "t1: start-ca-rotation",
        SetInput::Start {
            reason: "demo".into(),
            imports: vec![],
            one_at_a_time: false,
        },
        now,
    )?;
    ack_all(&store, &mut run_step, now)?;
    for label in [
        "t2: complete-ca-rotation (update certs)",
        "trust new",
        "complete",
    ] {
        now += Duration::days(1);
        run_step(
            label,
            SetInput::Advance {
                from: None,
                override_reason: None,
            },
            now,
        )?;
        ack_all(&store, &mut run_step, now)?;
    }
    if all {
        crate::outln!("\nevery handshake of every step succeeded; the old CA keys are destroyed");
        Ok(())
    } else {
        Err(CliError::new("demo: a handshake failed (see above)"))
    }
}

/// A set with the cluster CA (serving and client) and the etcd CA, their
/// leaves, and the targets that load them.
fn create_set(
    driver: &Driver<&FsStore>,
    t0: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) -> CliResult<()> {
    let both: Roles = "serving+client"
        .parse()
        .map_err(|e: pki_rotate::RotateError| CliError::new(e.to_string()))?;
    let state = SetState::new(
        &[("cluster".into(), both), ("etcd".into(), both)],
        pki_core::KeyAlgorithm::EcdsaP256,
        Duration::days(730),
        t0,
        rng,
    )?;
    driver.create::<SetEngine>(&KEY, &state)?;
    for input in &setup() {
        driver.step::<SetEngine, _>(&KEY, input, t0, rng)?;
    }
    Ok(())
}

/// The leaves of the demo set and the bundles each target loads.
fn setup() -> [SetInput; 7] {
    let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>());
    [
        SetInput::Issue {
            replace: false,
            name: "kube-apiserver".into(),
            spec: spec("cluster", true, "api.demo", "apiserver"),
        },
        SetInput::Issue {
            replace: false,
            name: "apiserver-etcd-client".into(),
            spec: spec("etcd", false, "", "apiserver"),
        },
        SetInput::Issue {
            replace: false,
            name: "etcd-server".into(),
            spec: spec("etcd", true, "etcd.demo", "etcd"),
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
    ]
}

/// Every target that has not loaded what the current step publishes
/// acknowledges it, in three passes over the targets.
fn ack_all(
    store: &FsStore,
    run: &mut dyn FnMut(&str, SetInput, OffsetDateTime) -> CliResult<()>,
    now: OffsetDateTime,
) -> CliResult<()> {
    for _ in 0..3 {
        let (s, _) = Driver::new(store).load::<SetEngine>(&KEY)?;
        for t in s.targets().keys().filter(|t| !s.is_loaded(t)) {
            let (s, _) = Driver::new(store).load::<SetEngine>(&KEY)?;
            let fingerprint = s.expected_fingerprint(t)?;
            run(
                &format!("{t} acks"),
                SetInput::Ack {
                    target: t.clone(),
                    fingerprint,
                },
                now,
            )?;
        }
    }
    Ok(())
}
