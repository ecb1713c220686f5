//! Path validation over an arbitrary set of certificates.
//!
//! Structure-aware: the input (decoded with `arbitrary`) picks the leaf,
//! the untrusted intermediates and the trust anchors among pool
//! certificates (valid ones made by pki-core's issuance: roots,
//! intermediates, cross-signed bridges, leaves), byte-mutated copies of
//! them, copies whose TBSCertificate is mutated and re-signed with a pool
//! key, and raw bytes; then a verification time, a purpose, an expected
//! name and a budget.
//!
//! Checks: `verify_chain` never panics; `verify_chain_cached` (cold and
//! warm cache) gives the same result; an accepted path is sound: leaf
//! first, intermediates from the given set, an anchor of the bundle last,
//! names and signatures linking each certificate to the next, every
//! certificate valid at the time, no (subject, key) twice, the leaf's EKU
//! allowing the purpose, CAs above the leaf, within the length limit.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use pki_core::verify::MAX_INTERMEDIATES;
use pki_core::{
    Budget, Bundle, Certificate, EKU_ANY, ExpectedName, Purpose, SignatureCache, VerifyOptions,
    verify_chain, verify_chain_cached, verify_signature,
};
use pki_fuzz::{CertSource, NOW, pool};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

#[derive(Arbitrary, Debug)]
enum TimeChoice {
    /// NOW plus this many hours (about ±3.7 years).
    Hours(i16),
    /// NOW plus this many days (about ±90 years).
    Days(i16),
    /// A pool certificate's NotBefore or NotAfter, plus `delta` seconds.
    Edge {
        cert: u8,
        not_after: bool,
        delta: i8,
    },
    /// Any Unix time (NOW when out of range).
    Unix(i64),
}

#[derive(Arbitrary, Debug)]
enum NameChoice {
    None,
    /// A DNS or IP name of a pool certificate.
    FromPool {
        cert: u8,
        index: u8,
    },
    /// A made-up label in front of a pool name (wildcard territory).
    Prefixed {
        label: String,
        cert: u8,
        index: u8,
    },
    Dns(String),
    Ip(IpAddr),
}

#[derive(Arbitrary, Debug)]
struct Input {
    leaf: CertSource,
    intermediates: Vec<CertSource>,
    anchors: Vec<CertSource>,
    time: TimeChoice,
    client_auth: bool,
    name: NameChoice,
    /// A small custom budget instead of the default.
    budget: Option<(u8, u16)>,
    /// Also compare with the cached verifier (cold, then warm).
    check_cache: bool,
}

const MAX_INTERMEDIATE_INPUTS: usize = 12;
const MAX_ANCHOR_INPUTS: usize = 8;

fn pool_names(i: u8) -> Vec<String> {
    let c = pool().cert(i);
    let mut names = c.dns_names();
    names.extend(c.ip_addresses().iter().map(IpAddr::to_string));
    names
}

fn pick(names: &[String], index: u8) -> Option<&String> {
    if names.is_empty() {
        None
    } else {
        names.get(usize::from(index) % names.len())
    }
}

fn time_of(choice: &TimeChoice) -> OffsetDateTime {
    match *choice {
        TimeChoice::Hours(h) => NOW + Duration::hours(i64::from(h)),
        TimeChoice::Days(d) => NOW + Duration::days(i64::from(d)),
        TimeChoice::Edge {
            cert,
            not_after,
            delta,
        } => {
            let c = pool().cert(cert);
            let t = if not_after {
                c.not_after()
            } else {
                c.not_before()
            };
            t + Duration::seconds(i64::from(delta))
        }
        TimeChoice::Unix(s) => OffsetDateTime::from_unix_timestamp(s).unwrap_or(NOW),
    }
}

fn name_of(choice: &NameChoice) -> Option<ExpectedName> {
    let dns_or_ip = |s: &str| match s.parse::<IpAddr>() {
        Ok(ip) => ExpectedName::Ip(ip),
        Err(_) => ExpectedName::Dns(s.to_owned()),
    };
    match choice {
        NameChoice::None => None,
        NameChoice::FromPool { cert, index } => {
            pick(&pool_names(*cert), *index).map(|n| dns_or_ip(n))
        }
        NameChoice::Prefixed { label, cert, index } => {
            pick(&pool_names(*cert), *index).map(|n| ExpectedName::Dns(format!("{label}.{n}")))
        }
        NameChoice::Dns(s) => Some(ExpectedName::Dns(s.clone())),
        NameChoice::Ip(ip) => Some(ExpectedName::Ip(*ip)),
    }
}

fn check_sound(
    path: &[Certificate],
    leaf: &Certificate,
    intermediates: &[Certificate],
    anchors: &Bundle,
    opts: &VerifyOptions,
) {
    let time = opts.time.replace_nanosecond(0).unwrap_or(opts.time);
    // One certificate only when the chain is a CA of the bundle itself,
    // trusted by being there (as OpenSSL and Go do); a leaf never is.
    assert!(
        path.len() >= 2 || (leaf.is_ca() && anchors.contains(leaf)),
        "a path has a leaf and an anchor, or is a CA of the bundle"
    );
    assert!(path.len() <= MAX_INTERMEDIATES + 2, "path too long");
    assert_eq!(&path[0], leaf, "the path starts at the leaf");
    let anchor = path.last().expect("non-empty");
    assert!(anchors.contains(anchor), "the path ends at an anchor");
    for c in path.iter().skip(1).take(path.len().saturating_sub(2)) {
        assert!(intermediates.contains(c), "intermediate not from the input");
        assert!(c.is_ca(), "intermediate {} is not a CA", c.id());
    }
    for (i, c) in path.iter().enumerate() {
        assert!(
            c.is_valid_at(time),
            "certificate {} not valid at {time}",
            c.id()
        );
        for d in &path[i + 1..] {
            assert!(
                !(c.subject() == d.subject() && c.public_key() == d.public_key()),
                "(subject, key) repeated on the path"
            );
        }
    }
    for pair in path.windows(2) {
        let (child, parent) = (&pair[0], &pair[1]);
        // Names chain as RFC 5280 §7.1 compares them (pki verify and
        // OpenSSL alike): case-insensitively, not byte for byte.
        assert!(
            pki_core::fuzzing::same_name(child.issuer(), parent.subject()),
            "names do not chain: {:?} and {:?}",
            child.issuer(),
            parent.subject()
        );
        verify_signature(parent.public_key(), child).expect("signatures chain");
    }
    if let Some(ekus) = leaf.extended_key_usage() {
        assert!(
            ekus.contains(&opts.purpose.oid()) || ekus.contains(&EKU_ANY),
            "leaf EKU does not allow {}",
            opts.purpose
        );
    }
}

fuzz_target!(|input: Input| {
    let pool = pool();
    let Some(leaf) = input.leaf.cert(pool) else {
        return;
    };
    let intermediates: Vec<Certificate> = input
        .intermediates
        .iter()
        .take(MAX_INTERMEDIATE_INPUTS)
        .filter_map(|s| s.cert(pool))
        .collect();
    let anchors = Bundle::from_certs(
        input
            .anchors
            .iter()
            .take(MAX_ANCHOR_INPUTS)
            .filter_map(|s| s.cert(pool)),
    );
    let purpose = if input.client_auth {
        Purpose::ClientAuth
    } else {
        Purpose::ServerAuth
    };
    let mut opts = VerifyOptions::new(time_of(&input.time), purpose);
    opts.name = name_of(&input.name);
    if let Some((signatures, build_steps)) = input.budget {
        opts.budget = Budget {
            signatures: usize::from(signatures),
            build_steps: usize::from(build_steps),
            ..Budget::default()
        };
    }

    let result = verify_chain(&leaf, &intermediates, &anchors, &opts);
    match &result {
        Ok(path) => {
            check_sound(&path.certs, &leaf, &intermediates, &anchors, &opts);
            assert_eq!(path.leaf(), Some(&leaf));
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }

    if input.check_cache {
        let cache = SignatureCache::new();
        let cold = verify_chain_cached(&leaf, &intermediates, &anchors, &opts, &cache);
        assert_eq!(cold, result, "cold cache changed the result");
        let warm = verify_chain_cached(&leaf, &intermediates, &anchors, &opts, &cache);
        assert_eq!(warm, result, "warm cache changed the result");
    }
});
