//! A whole CA set rotation, start → completed, for 6 CAs and 50 targets:
//! the engine alone (keys, issuance, fingerprints and the pre-flight trust
//! matrix at every transition), on a set already loaded in memory.
//!
//! Each of the 50 targets holds a serving certificate of one of the four
//! serving CAs and a client certificate of one of the four client CAs, and
//! trusts / verifies clients of the CAs its neighbours use.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use pki_core::KeyAlgorithm;
use pki_rotate::{Engine, LeafSpec, Roles, SetEngine, SetInput, SetState};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::BTreeSet;
use std::hint::black_box;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the set is created; the rotation runs 60 days later.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const TARGETS: usize = 50;

const CAS: [(&str, &str); 6] = [
    ("cluster", "serving+client"),
    ("etcd", "serving+client"),
    ("front-proxy", "client"),
    ("metrics", "serving"),
    ("vpn", "serving+client"),
    ("kubelet", "client"),
];

fn set_with_targets() -> SetState {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let cas: Vec<(String, Roles)> = CAS
        .iter()
        .map(|(n, r)| (n.to_string(), r.parse().unwrap()))
        .collect();
    let mut s = SetState::new(
        &cas,
        KeyAlgorithm::EcdsaP256,
        Duration::days(730),
        T0,
        &mut rng,
    )
    .unwrap();
    let serving = ["cluster", "etcd", "metrics", "vpn"];
    let client = ["cluster", "etcd", "front-proxy", "vpn", "kubelet"];
    for i in 0..TARGETS {
        let target = format!("host-{i:02}");
        let s_ca = serving[i % serving.len()];
        let c_ca = client[i % client.len()];
        let inputs = [
            SetInput::Issue {
                replace: false,
                name: format!("serving-{i:02}"),
                spec: LeafSpec {
                    ca: s_ca.into(),
                    serving: true,
                    client: false,
                    dns_names: vec![format!("{target}.example")],
                    ip_addresses: vec![],
                    common_name: None,
                    target: target.clone(),
                    lifetime: Duration::days(180),
                },
            },
            SetInput::Issue {
                replace: false,
                name: format!("client-{i:02}"),
                spec: LeafSpec {
                    ca: c_ca.into(),
                    serving: false,
                    client: true,
                    dns_names: vec![],
                    ip_addresses: vec![],
                    common_name: None,
                    target: target.clone(),
                    lifetime: Duration::days(180),
                },
            },
            SetInput::Target {
                name: target.clone(),
                trusts: Some(BTreeSet::from([
                    serving[(i + 1) % serving.len()].to_string()
                ])),
                client_ca: Some(BTreeSet::from([client[(i + 1) % client.len()].to_string()])),
            },
        ];
        for input in inputs {
            s = SetEngine::step(&s, &input, T0, &mut rng)
                .unwrap()
                .into_document();
        }
    }
    s
}

fn ack_all(mut s: SetState, now: OffsetDateTime, rng: &mut ChaCha20Rng) -> SetState {
    loop {
        let pending: Vec<String> = s
            .targets()
            .keys()
            .filter(|t| !s.is_loaded(t))
            .cloned()
            .collect();
        if pending.is_empty() {
            return s;
        }
        for t in pending {
            let fingerprint = s.expected_fingerprint(&t).unwrap();
            let input = SetInput::Ack {
                target: t,
                fingerprint,
            };
            s = SetEngine::step(&s, &input, now, rng)
                .unwrap()
                .into_document();
        }
    }
}

fn full_rotation(s: &SetState) -> SetState {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let now = T0 + Duration::days(60);
    let start = SetInput::Start {
        reason: "bench".into(),
        imports: vec![],
        one_at_a_time: false,
    };
    let mut s = SetEngine::step(s, &start, now, &mut rng)
        .unwrap()
        .into_document();
    for _ in 0..3 {
        s = ack_all(s, now, &mut rng);
        let advance = SetInput::Advance {
            from: None,
            override_reason: None,
        };
        s = SetEngine::step(&s, &advance, now, &mut rng)
            .unwrap()
            .into_document();
    }
    s
}

fn bench(c: &mut Criterion) {
    let s = set_with_targets();
    let mut group = c.benchmark_group("set");
    group.sample_size(10);
    group.bench_function("start_to_completed_6_cas_50_targets", |b| {
        b.iter(|| {
            let done = full_rotation(black_box(&s));
            assert_eq!(done.step(), pki_rotate::SetStep::Completed);
            done
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
