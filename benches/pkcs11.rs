//! Issuing leaves with the CA key in a PKCS#11 token (SoftHSM2) against the
//! same with the CA key in this process: 1,000 server leaves, each on a new
//! P-256 key made in this process (leaf keys are published files, they
//! never go to the token), signed by a P-256 or an RSA-2048 CA. Beside
//! them, one signature alone both ways: the token's own signing time is
//! the floor of the token's issuance, whatever pki does around it.
//!
//! SoftHSM2 reads `SOFTHSM2_CONF` (where its tokens live) once, when its
//! module is initialised, and a process cannot change its own environment
//! without `unsafe`: the bench makes a token of its own in a temporary
//! directory and runs itself again with `SOFTHSM2_CONF` naming it.
//! Run with `cargo bench --bench pkcs11`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

/// The tests' SoftHSM2 token, made the same way here.
#[path = "../pki-core/tests/pkcs11/softhsm.rs"]
#[allow(dead_code)]
mod softhsm;

use criterion::{Criterion, criterion_group};
use pki_core::{
    Certificate, CertificateParams, Issuer, KeyAlgorithm, Pkcs11Key, Pkcs11Module, Pkcs11Pin,
    Pkcs11Uri, PrivateKey, Profile, SigningKey,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use time::{Duration, OffsetDateTime, macros::datetime};

const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
/// How many leaves one measured run issues.
const LEAVES: usize = 1_000;
/// Set when the bench runs itself again with its token's configuration.
const CHILD: &str = "PKI_BENCH_SOFTHSM2_CHILD";

/// Makes a token in a temporary directory and runs this bench again with
/// `SOFTHSM2_CONF` naming it; exits with the child's status.
fn run_with_a_token() -> ! {
    let dir = tempfile::tempdir().expect("temporary directory");
    let token = softhsm::make_token(dir.path());
    let status = token
        .command(
            std::env::current_exe()
                .expect("this bench's path")
                .to_str()
                .expect("a UTF-8 path"),
        )
        .args(std::env::args_os().skip(1))
        .env(CHILD, "1")
        .status()
        .expect("the bench runs again");
    std::process::exit(status.code().unwrap_or(1));
}

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// A root CA on `key`.
fn root(key: &dyn SigningKey, name: &str) -> Certificate {
    CertificateParams::new(Profile::RootCa, name, T0, Duration::days(365))
        .unwrap()
        .self_signed_with(key, &mut rng(2))
        .unwrap()
}

/// Issues [`LEAVES`] server leaves from `issuer`, each on a new P-256 key.
fn issue(issuer: &Issuer<'_>, rng: &mut ChaCha20Rng) -> usize {
    let mut params =
        CertificateParams::new(Profile::Server, "web", T0, Duration::days(30)).unwrap();
    params.dns_names.push("web.example.test".into());
    let mut issued = 0;
    for _ in 0..LEAVES {
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).unwrap();
        let leaf = params
            .signed_with(&key.public_key().unwrap(), issuer, rng)
            .unwrap();
        issued += black_box(leaf).der().len().min(1);
    }
    issued
}

fn bench(c: &mut Criterion) {
    let module = Pkcs11Module::open(&softhsm::module()).unwrap();
    let token = module
        .login(
            &Pkcs11Uri::parse(&format!("pkcs11:token={}", softhsm::LABEL)).unwrap(),
            &Pkcs11Pin::new(softhsm::PIN),
        )
        .unwrap();
    let provider = pki_core::CryptoProvider::get_default();
    for (id, algorithm) in [(1u8, KeyAlgorithm::EcdsaP256), (2, KeyAlgorithm::Rsa2048)] {
        let in_token: Pkcs11Key = token
            .generate_key(algorithm, &[id], &format!("bench-{algorithm}"))
            .unwrap();
        let in_process = PrivateKey::generate(algorithm, &mut rng(3)).unwrap();
        let token_root = root(&in_token, "token CA");
        let local_root = root(&in_process, "in-process CA");

        let mut group = c.benchmark_group(format!("issue {LEAVES} leaves, {algorithm} CA"));
        group.sample_size(10);
        // Each run draws on from the same stream: new leaf keys and
        // serials every time, nothing to remember from the warm-up.
        let mut stream = rng(4);
        let issuer = Issuer::new(&local_root, &in_process).unwrap();
        group.bench_function("CA key in this process", |b| {
            b.iter(|| issue(&issuer, &mut stream))
        });
        let issuer = Issuer::new(&token_root, &in_token).unwrap();
        group.bench_function("CA key in SoftHSM2", |b| {
            b.iter(|| issue(&issuer, &mut stream))
        });
        group.finish();

        let mut group = c.benchmark_group(format!("one signature, {algorithm}"));
        let mut n = 0u64;
        let mut message = || {
            n += 1;
            format!("a TBSCertificate {n}").into_bytes()
        };
        group.bench_function("in this process", |b| {
            b.iter(|| in_process.sign(&message(), &provider).unwrap())
        });
        group.bench_function("in SoftHSM2", |b| {
            b.iter(|| SigningKey::sign(&in_token, &message(), &provider).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var_os(CHILD).is_none() {
        run_with_a_token();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
