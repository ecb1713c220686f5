//! ECDSA P-384: CAs that have and sign with P-384 keys, chains under a
//! P-384 issuer made by OpenSSL, and signatures pki cannot check reported
//! as such rather than as broken chains. Trust is proven with pki's own
//! verifier and with `openssl verify -x509_strict`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::verify::{ExpectedName, Purpose, VerifyError, VerifyOptions, verify_chain};
use pki_core::{
    Bundle, CaImport, Certificate, CertificateAuthority, CertificateParams, Error, KeyAlgorithm,
    ObjectIdentifier, PrivateKey, Profile,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::path::Path;
use std::process::Command;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the issuance time of every certificate pki makes here.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");

fn rng(seed: u64) -> ChaCha20Rng {
    // Keys and signatures from this stream: the same seed, the same output.
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    ChaCha20Rng::seed_from_u64(seed)
}

/// Runs openssl in `dir`; panics with its stderr when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl is not installed or cannot run; install it with `apt-get install openssl` (Debian) or run scripts/test.sh");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `openssl verify -x509_strict` of `leaf` through `intermediates` up to
/// `root` at `at`, for TLS servers.
fn openssl_verifies(root: &Certificate, intermediates: &[&Certificate], leaf: &Certificate) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("root.pem"), root.to_pem()).unwrap();
    std::fs::write(dir.path().join("leaf.pem"), leaf.to_pem()).unwrap();
    let chain: String = intermediates.iter().map(|c| c.to_pem()).collect();
    std::fs::write(dir.path().join("chain.pem"), &chain).unwrap();
    let at = (T0 + Duration::days(1)).unix_timestamp().to_string();
    let mut args = vec![
        "verify",
        "-x509_strict",
        "-purpose",
        "sslserver",
        "-attime",
        &at,
        "-CAfile",
        "root.pem",
    ];
    if !intermediates.is_empty() {
        args.extend(["-untrusted", "chain.pem"]);
    }
    args.push("leaf.pem");
    openssl(dir.path(), &args);
}

fn server_leaf(ca: &CertificateAuthority, alg: KeyAlgorithm, seed: u64) -> Certificate {
    let key = PrivateKey::generate(alg, &mut rng(seed)).unwrap();
    let mut params =
        CertificateParams::new(Profile::Server, "web", T0, Duration::days(30)).unwrap();
    params.dns_names = vec!["web.example".into()];
    ca.issue(&params, &key.public_key().unwrap(), &mut rng(seed + 100))
        .unwrap()
}

fn server_opts() -> VerifyOptions {
    let mut opts = VerifyOptions::new(T0 + Duration::days(1), Purpose::ServerAuth);
    opts.name = Some(ExpectedName::Dns("web.example".into()));
    opts
}

#[test]
fn p384_key_names_parse_and_print_as_p384() {
    assert_eq!(
        "p384".parse::<KeyAlgorithm>().unwrap(),
        KeyAlgorithm::EcdsaP384
    );
    assert_eq!(KeyAlgorithm::EcdsaP384.as_str(), "p384");
    assert!(!KeyAlgorithm::EcdsaP384.is_rsa());
    let json = serde_json::to_string(&KeyAlgorithm::EcdsaP384).unwrap();
    assert_eq!(json, "\"p384\"");
    let err = "p521".parse::<KeyAlgorithm>().unwrap_err();
    assert!(err.to_string().contains("p384"), "{err}");
}

#[test]
fn p384_keys_round_trip_through_pkcs8_and_sec1_and_same_seed_gives_same_key() {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP384, &mut rng(1)).unwrap();
    assert_eq!(key.algorithm(), KeyAlgorithm::EcdsaP384);
    let again = PrivateKey::generate(KeyAlgorithm::EcdsaP384, &mut rng(1)).unwrap();
    assert_eq!(
        key.public_key_der().unwrap(),
        again.public_key_der().unwrap()
    );

    let pem = key.to_pkcs8_pem().unwrap();
    let back = PrivateKey::from_pem(pem.as_bytes()).unwrap();
    assert_eq!(back.algorithm(), KeyAlgorithm::EcdsaP384);
    assert_eq!(back.public_key().unwrap(), key.public_key().unwrap());
    assert_eq!(back.to_pkcs8_der().unwrap(), key.to_pkcs8_der().unwrap());

    // SEC1 as `openssl ec` writes it, with and without the public point.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.pem"), pem.as_bytes()).unwrap();
    openssl(dir.path(), &["ec", "-in", "k.pem", "-out", "sec1.pem"]);
    openssl(
        dir.path(),
        &["ec", "-in", "k.pem", "-no_public", "-out", "bare.pem"],
    );
    for file in ["sec1.pem", "bare.pem"] {
        let sec1 = std::fs::read(dir.path().join(file)).unwrap();
        let k = PrivateKey::from_pem(&sec1).unwrap();
        assert!(k.matches(&key.public_key().unwrap()), "{file}");
        assert_eq!(k.algorithm(), KeyAlgorithm::EcdsaP384, "{file}");
    }
}

#[test]
fn p384_root_and_intermediate_issue_a_chain_that_pki_and_openssl_verify() {
    let root = CertificateAuthority::generate_root(
        "P-384 Root",
        KeyAlgorithm::EcdsaP384,
        T0,
        Duration::days(3650),
        &mut rng(2),
    )
    .unwrap();
    let ica_key = PrivateKey::generate(KeyAlgorithm::EcdsaP384, &mut rng(3)).unwrap();
    let params = CertificateParams::new(
        Profile::IntermediateCa { path_len: Some(0) },
        "P-384 Intermediate",
        T0,
        Duration::days(700),
    )
    .unwrap();
    let ica_cert = root
        .issue(&params, &ica_key.public_key().unwrap(), &mut rng(4))
        .unwrap();
    let ica = CertificateAuthority::new(ica_cert, ica_key).unwrap();
    // A P-384 issuer signs with SHA-384, over a P-384 and a P-256 leaf.
    for (alg, seed) in [(KeyAlgorithm::EcdsaP384, 5), (KeyAlgorithm::EcdsaP256, 6)] {
        let leaf = server_leaf(&ica, alg, seed);
        assert_eq!(leaf.x509().signature_algorithm().oid, ECDSA_SHA384);
        let path = verify_chain(
            &leaf,
            std::slice::from_ref(&ica.cert),
            &Bundle::from_certs([root.cert.clone()]),
            &server_opts(),
        )
        .unwrap();
        assert_eq!(path.certs.len(), 3);
        openssl_verifies(&root.cert, &[&ica.cert], &leaf);
    }
    // A P-256 CA below a P-384 root.
    let p256_leaf_ca = server_leaf(&root, KeyAlgorithm::EcdsaP256, 7);
    verify_chain(
        &p256_leaf_ca,
        &[],
        &Bundle::from_certs([root.cert.clone()]),
        &server_opts(),
    )
    .unwrap();
}

/// An organisation's P-384 root and intermediate made by OpenSSL, signing
/// with `digest`, in one PEM file with the intermediate's key.
fn openssl_org(dir: &Path, digest: &str) -> Vec<u8> {
    let ext = "[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n\
               subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";
    std::fs::write(dir.join("ext.cnf"), ext).unwrap();
    let digest = format!("-{digest}");
    for key in ["root.key", "ica.key"] {
        openssl(
            dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-384",
                "-out",
                key,
            ],
        );
    }
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "root.key",
            &digest,
            "-subj",
            "/O=Org/CN=Org Root",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-days",
            "3650",
            "-out",
            "root.pem",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            "ica.key",
            "-subj",
            "/O=Org/CN=Org Issuing",
            "-out",
            "ica.csr",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "ica.csr",
            "-CA",
            "root.pem",
            "-CAkey",
            "root.key",
            "-CAcreateserial",
            &digest,
            "-days",
            "700",
            "-extfile",
            "ext.cnf",
            "-extensions",
            "ca",
            "-out",
            "ica.pem",
        ],
    );
    let mut file = std::fs::read(dir.join("ica.pem")).unwrap();
    file.extend(std::fs::read(dir.join("ica.key")).unwrap());
    file.extend(std::fs::read(dir.join("root.pem")).unwrap());
    file
}

#[test]
fn a_ca_under_an_openssl_p384_root_imports_with_sha384_and_sha256_and_its_leaves_verify() {
    for digest in ["sha384", "sha256"] {
        let dir = tempfile::tempdir().unwrap();
        let file = openssl_org(dir.path(), digest);
        let now = OffsetDateTime::now_utc();
        let ca = pki_core::import_ca_file(&file, now).unwrap_or_else(|e| panic!("{digest}: {e}"));
        assert_eq!(ca.authority.key.algorithm(), KeyAlgorithm::EcdsaP384);
        let want = if digest == "sha256" {
            ECDSA_SHA256
        } else {
            ECDSA_SHA384
        };
        assert_eq!(ca.authority.cert.x509().signature_algorithm().oid, want);

        // The imported P-384 CA signs leaves that pki and OpenSSL trust.
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(8)).unwrap();
        let mut params =
            CertificateParams::new(Profile::Server, "web", now, Duration::days(30)).unwrap();
        params.dns_names = vec!["web.example".into()];
        let leaf = ca
            .authority
            .issue(&params, &key.public_key().unwrap(), &mut rng(9))
            .unwrap();
        let mut opts = server_opts();
        opts.time = now + Duration::minutes(1);
        verify_chain(
            &leaf,
            std::slice::from_ref(&ca.authority.cert),
            &Bundle::from_certs([ca.root().clone()]),
            &opts,
        )
        .unwrap();
        std::fs::write(dir.path().join("leaf.pem"), leaf.to_pem()).unwrap();
        openssl(
            dir.path(),
            &[
                "verify",
                "-x509_strict",
                "-purpose",
                "sslserver",
                "-CAfile",
                "root.pem",
                "-untrusted",
                "ica.pem",
                "leaf.pem",
            ],
        );
    }
}

/// A CA file whose root uses what pki cannot check: an Ed25519 root, or
/// an EC key on P-521.
fn unsupported_org(dir: &Path, root_key: &[&str]) -> Vec<u8> {
    let ext = "[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n\
               subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";
    std::fs::write(dir.join("ext.cnf"), ext).unwrap();
    let mut genroot = vec!["genpkey"];
    genroot.extend_from_slice(root_key);
    genroot.extend(["-out", "root.key"]);
    openssl(dir, &genroot);
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            "ica.key",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "root.key",
            "-subj",
            "/CN=Odd Root",
            "-days",
            "3650",
            "-out",
            "root.pem",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            "ica.key",
            "-subj",
            "/CN=Odd CA",
            "-out",
            "ica.csr",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "ica.csr",
            "-CA",
            "root.pem",
            "-CAkey",
            "root.key",
            "-CAcreateserial",
            "-days",
            "700",
            "-extfile",
            "ext.cnf",
            "-extensions",
            "ca",
            "-out",
            "ica.pem",
        ],
    );
    let mut file = std::fs::read(dir.join("ica.pem")).unwrap();
    file.extend(std::fs::read(dir.join("ica.key")).unwrap());
    file.extend(std::fs::read(dir.join("root.pem")).unwrap());
    file
}

#[test]
fn a_root_pki_cannot_check_is_reported_as_unsupported_not_as_a_broken_chain() {
    let cases: [(&[&str], &str); 2] = [
        (
            &["-algorithm", "ED25519"],
            "unsupported algorithm 1.3.101.112",
        ),
        (
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"],
            "curve 1.3.132.0.35",
        ),
    ];
    for (root_key, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let file = unsupported_org(dir.path(), root_key);
        let err = CaImport::parse(&file, None, None).unwrap_err();
        assert!(matches!(err, Error::UnsupportedSignature { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(says), "{text}");
        assert!(!text.contains("did not issue"), "{text}");

        // The path verifier says the same of the CA under that root.
        let ca =
            Certificate::from_pem(&std::fs::read(dir.path().join("ica.pem")).unwrap()).unwrap();
        let root =
            Certificate::from_pem(&std::fs::read(dir.path().join("root.pem")).unwrap()).unwrap();
        let err = pki_core::verify_ca_path(
            &ca,
            &[],
            &Bundle::from_certs([root]),
            OffsetDateTime::now_utc(),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::UnsupportedSignatureAlgorithm { .. }
                    | VerifyError::UnsupportedPublicKey { .. }
            ),
            "{err:?}"
        );
    }
}

/// With the `ring` feature, a P-384 key generated through the operating
/// system's RNG and the certificates it signs come from ring: RustCrypto
/// reads and verifies them, and a key read back signs with RustCrypto too.
#[cfg(feature = "ring")]
#[test]
fn p384_keys_and_certificates_made_with_the_os_rng_verify_with_rustcrypto() {
    use pki_core::{OsRng, os_rng, verify_signature};
    let mut os: OsRng = os_rng();
    let ca = CertificateAuthority::generate_root(
        "ring-ca",
        KeyAlgorithm::EcdsaP384,
        T0,
        Duration::days(790),
        &mut os,
    )
    .unwrap();
    assert_eq!(ca.key.algorithm(), KeyAlgorithm::EcdsaP384);
    verify_signature(ca.cert.public_key(), &ca.cert).unwrap();
    assert_eq!(ca.cert.x509().signature_algorithm().oid, ECDSA_SHA384);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP384, &mut os).unwrap();
    let mut p = CertificateParams::new(Profile::Server, "web", T0, Duration::days(30)).unwrap();
    p.dns_names = vec!["web.example".into()];
    let leaf = ca.issue(&p, &key.public_key().unwrap(), &mut os).unwrap();
    verify_signature(ca.cert.public_key(), &leaf).unwrap();
    openssl_verifies(&ca.cert, &[], &leaf);

    let back = CertificateAuthority::new(
        ca.cert.clone(),
        PrivateKey::from_pkcs8_der(&ca.key.to_pkcs8_der().unwrap()).unwrap(),
    )
    .unwrap();
    let again = back
        .issue(&p, &key.public_key().unwrap(), &mut rng(5))
        .unwrap();
    verify_signature(ca.cert.public_key(), &again).unwrap();
}
