//! The CA set engine stepped in-process, as the mutual-TLS tests drive
//! it: leaf specs, target names, an ack of every pending target and an
//! advance, each appending the state it makes.

#![allow(clippy::unwrap_used)]

use pki::rotate::{Engine, LeafSpec, SetEngine, SetInput, SetState};
use rand_chacha::ChaCha20Rng;
use std::collections::BTreeSet;
use time::{Duration, OffsetDateTime};

pub fn spec(ca: &str, serving: bool, dns: &str, target: &str) -> LeafSpec {
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

pub fn names(v: &[&str]) -> Option<BTreeSet<String>> {
    Some(v.iter().map(|s| s.to_string()).collect())
}

/// Acks every target that has not loaded its files, in name order, one
/// state per ack (each may move certificates).
pub fn ack_each(
    states: &mut Vec<(SetState, OffsetDateTime)>,
    at: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) {
    for _ in 0..4 {
        let s = states.last().unwrap().0.clone();
        let pending: Vec<String> = s
            .targets()
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

pub fn advance(
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
