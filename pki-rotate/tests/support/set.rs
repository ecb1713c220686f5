//! The CA set fixtures the set tests share: GEP-18's shoot in small, the
//! engine called one request at a time, and what a target holds and
//! verifies.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::{Bundle, Certificate, KeyAlgorithm, Purpose, VerifyOptions, verify_chain};
use pki_rotate::set::material;
use pki_rotate::{Engine, LeafSpec, Roles, RotateError, SetEngine, SetError, SetInput, SetState};
use rand_chacha::ChaCha20Rng;
use std::collections::{BTreeMap, BTreeSet};
use time::{Duration, OffsetDateTime};

pub use super::seed::{T0, rng};

pub fn roles(s: &str) -> Roles {
    s.parse().unwrap()
}

pub fn spec(ca: &str, serving: bool, client: bool, dns: &str, target: &str) -> LeafSpec {
    LeafSpec {
        ca: ca.into(),
        serving,
        client,
        dns_names: if dns.is_empty() {
            vec![]
        } else {
            vec![dns.into()]
        },
        ip_addresses: vec![],
        common_name: None,
        target: target.into(),
        lifetime: Duration::days(90),
    }
}

pub fn set_of(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// GEP-18's shoot in small: the cluster CA (serving+client), the etcd CA
/// (serving+client), front-proxy (client) and metrics (serving), with a
/// control plane, an etcd server, a node and an extension API server.
pub fn gep18(seed: u64) -> SetState {
    let cas = [
        ("cluster".to_string(), roles("serving+client")),
        ("etcd".to_string(), roles("serving+client")),
        ("front-proxy".to_string(), roles("client")),
        ("metrics".to_string(), roles("serving")),
    ];
    let mut r = rng(seed + 1000);
    let mut s = SetState::new(
        &cas,
        KeyAlgorithm::EcdsaP256,
        Duration::days(730),
        T0,
        &mut r,
    )
    .unwrap();
    let inputs = vec![
        SetInput::Issue {
            replace: false,
            name: "kube-apiserver".into(),
            spec: spec("cluster", true, false, "api.example", "control-plane"),
        },
        SetInput::Issue {
            replace: false,
            name: "apiserver-etcd-client".into(),
            spec: spec("etcd", false, true, "", "control-plane"),
        },
        SetInput::Issue {
            replace: false,
            name: "aggregator".into(),
            spec: spec("front-proxy", false, true, "", "control-plane"),
        },
        SetInput::Issue {
            replace: false,
            name: "etcd-server".into(),
            spec: spec("etcd", true, false, "etcd.example", "etcd"),
        },
        SetInput::Issue {
            replace: false,
            name: "kubelet".into(),
            spec: spec("cluster", false, true, "", "node-1"),
        },
        SetInput::Issue {
            replace: false,
            name: "metrics-server".into(),
            spec: spec("metrics", true, false, "metrics.example", "metrics"),
        },
        target(
            "control-plane",
            Some(&["etcd", "metrics"]),
            Some(&["cluster"]),
        ),
        target("etcd", None, Some(&["etcd"])),
        target("node-1", Some(&["cluster"]), None),
        target("metrics", None, Some(&["front-proxy"])),
    ];
    for input in inputs {
        s = step(&s, input, T0, &mut r).unwrap();
    }
    s
}

pub fn step(
    s: &SetState,
    input: SetInput,
    now: OffsetDateTime,
    r: &mut ChaCha20Rng,
) -> pki_rotate::Result<SetState> {
    Ok(SetEngine::step(s, &input, now, r)?.into_document())
}

/// A `Target` request: the CAs `name` trusts and those whose clients it
/// accepts (`None`: unchanged).
pub fn target(name: &str, trusts: Option<&[&str]>, client_ca: Option<&[&str]>) -> SetInput {
    SetInput::Target {
        name: name.into(),
        trusts: trusts.map(set_of),
        client_ca: client_ca.map(set_of),
    }
}

/// `result` must be a refusal of the set engine; the refusal.
pub fn set_error<T: std::fmt::Debug>(result: pki_rotate::Result<T>) -> SetError {
    match result {
        Err(RotateError::Set(e)) => e,
        other => panic!("not a refusal of the set engine: {other:?}"),
    }
}

pub fn start(s: &SetState, one: bool, now: OffsetDateTime, r: &mut ChaCha20Rng) -> SetState {
    step(
        s,
        SetInput::Start {
            reason: "yearly".into(),
            imports: vec![],
            one_at_a_time: one,
        },
        now,
        r,
    )
    .unwrap()
}

pub fn ack(s: &SetState, t: &str, now: OffsetDateTime, r: &mut ChaCha20Rng) -> SetState {
    let fp = s.expected_fingerprint(t).unwrap();
    step(
        s,
        SetInput::Ack {
            target: t.into(),
            fingerprint: fp,
        },
        now,
        r,
    )
    .unwrap()
}

pub fn ack_all(s: &SetState, now: OffsetDateTime, r: &mut ChaCha20Rng) -> SetState {
    let mut s = s.clone();
    // Acks may move certificates (and change other targets' files): repeat
    // until every target has loaded its current files.
    for _ in 0..10 {
        let pending: Vec<String> = s
            .targets()
            .keys()
            .filter(|t| !s.is_loaded(t))
            .cloned()
            .collect();
        if pending.is_empty() {
            break;
        }
        for t in pending {
            s = ack(&s, &t, now, r);
        }
    }
    s
}

pub fn advance(
    s: &SetState,
    now: OffsetDateTime,
    r: &mut ChaCha20Rng,
) -> pki_rotate::Result<SetState> {
    step(
        s,
        SetInput::Advance {
            from: None,
            override_reason: None,
        },
        now,
        r,
    )
}

pub fn abort() -> SetInput {
    SetInput::Abort {
        override_reason: None,
    }
}

pub fn issuer_of(s: &SetState, leaf: &str) -> Certificate {
    let cert = &s.leaves()[leaf].issued.cert;
    s.cas()
        .values()
        .flat_map(|ca| {
            let mut v = vec![ca.current.signer.cert.clone()];
            v.extend(ca.current.client_signer.as_ref().map(|c| c.cert.clone()));
            if let Some(n) = &ca.next {
                v.push(n.signer.cert.clone());
                v.extend(n.client_signer.as_ref().map(|c| c.cert.clone()));
            }
            v
        })
        .find(|c| pki_core::issued_by(cert, c).issued_by)
        .expect("an issuer in the set")
}

/// What a target holds once it acknowledged: its trust and client-ca
/// bundles and leaves, parsed from the files it was given.
#[derive(Clone)]
pub struct Loaded {
    pub trust: BTreeMap<String, Bundle>,
    pub client_ca: BTreeMap<String, Bundle>,
    pub serving: Vec<(String, Certificate)>,
    pub client: Vec<(String, Certificate)>,
}

pub fn loaded(s: &SetState, t: &str) -> Loaded {
    let m = material::target_material(s, t);
    Loaded {
        trust: m.trust,
        client_ca: m.client_ca,
        serving: m
            .leaves
            .iter()
            .filter(|l| l.serving)
            .map(|l| (l.ca.clone(), l.cert.clone()))
            .collect(),
        client: m
            .leaves
            .iter()
            .filter(|l| l.client)
            .map(|l| (l.ca.clone(), l.cert.clone()))
            .collect(),
    }
}

pub fn verifies(cert: &Certificate, bundle: &Bundle, purpose: Purpose, at: OffsetDateTime) -> bool {
    let mut opts = VerifyOptions::new(at, purpose);
    if purpose == Purpose::ServerAuth {
        opts.name = cert
            .dns_names()
            .into_iter()
            .next()
            .map(pki_core::ExpectedName::Dns);
    }
    verify_chain(cert, &[], bundle, &opts).is_ok()
}
