//! Writes the seed corpora of every fuzz target to `corpus/<target>/`.
//!
//! `gen_corpus [DIR]` (default: the `corpus` directory next to this crate's
//! Cargo.toml). Deterministic: everything comes from seeded ChaCha20 RNGs
//! and fixed times, so the same build writes the same bytes. Seed files are
//! named `seed-*`; files libFuzzer added to the directories are left alone.
//!
//! Why it looks like a fuzz target: `cargo fuzz build` compiles every binary
//! of this crate with coverage instrumentation, which only links together
//! with libFuzzer. Rather than compiling every dependency a second time
//! without instrumentation (a minute or two of CI), the generator runs in
//! libFuzzer's initialisation hook and exits before any fuzzing starts. Run
//! it as `target/<triple>/release/gen_corpus [DIR]` after `cargo fuzz build`
//! (`run.sh` does).
#![no_main]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use p256::pkcs8::DecodePrivateKey;
use p256::pkcs8::der::Decode;
use pki_core::{Bundle, Certificate, pem};
use pki_fuzz::{NOW, SEED, join_state_files, pool};
use pki_rotate::Document as _;
use pki_rotate::{
    Engine, ForcedRotation, LeafKind, LeafRequest, SignerEngine, SignerInput, SignerPolicy,
    SignerState,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use time::Duration;

struct Out {
    root: PathBuf,
    count: usize,
}

impl Out {
    fn put(&mut self, target: &str, name: &str, bytes: impl AsRef<[u8]>) {
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write seed");
        self.count += 1;
    }
}

fn crlf(s: &str) -> String {
    s.replace('\n', "\r\n")
}

/// The text `openssl x509 -text` and friends leave around PEM blocks.
fn commented(certs: &[&Certificate]) -> String {
    let mut s = String::from("# CA bundle, generated for the fuzz corpus\n\n");
    for c in certs {
        s.push_str(&format!(
            "subject={}\nissuer={}\n  serial: {}\n",
            c.subject(),
            c.issuer(),
            c.serial_hex()
        ));
        s.push_str(&c.to_pem());
        s.push_str("   \n\n");
    }
    s.push_str("# end\n");
    s
}

fn certs(out: &mut Out) {
    let pool = pool();
    for pc in &pool.certs {
        out.put("cert_der", pc.label, pc.cert.der());
    }
}

fn bundles(out: &mut Out) {
    let pool = pool();
    let all: Vec<&Certificate> = pool.certs.iter().map(|p| &p.cert).collect();
    let cas: Vec<&Certificate> = all.iter().copied().filter(|c| c.is_ca()).collect();
    let pem_of = |cs: &[&Certificate]| cs.iter().map(|c| c.to_pem()).collect::<String>();

    out.put("pem_bundle", "one-root", all[1].to_pem());
    out.put("pem_bundle", "rotation-bundle", pem_of(&[all[2], all[3]]));
    out.put("pem_bundle", "all-cas", pem_of(&cas));
    out.put("pem_bundle", "all-cas-crlf", crlf(&pem_of(&cas)));
    out.put("pem_bundle", "commented", commented(&cas));
    out.put("pem_bundle", "commented-crlf", crlf(&commented(&cas)));
    out.put(
        "pem_bundle",
        "duplicates",
        pem_of(&[all[1], all[2], all[1]]),
    );
    out.put("pem_bundle", "no-root", pem_of(&[all[3], all[7]]));
    out.put(
        "pem_bundle",
        "rsa-chain",
        pem_of(&[all[14], all[13], all[12]]),
    );
    let bundle = Bundle::from_certs(cas.iter().map(|c| (*c).clone()));
    out.put("pem_bundle", "bundle-to-pem", bundle.to_pem());
    // Indented, with trailing spaces and tabs.
    let indented: String = pem_of(&[all[1]])
        .lines()
        .map(|l| format!("  {l} \t\n"))
        .collect();
    out.put("pem_bundle", "indented", indented);
    // Errors worth starting from: a key among certificates, truncation,
    // mismatched END, headers of an encrypted legacy key, bad base64.
    let key = pool.keys[0].1.to_pkcs8_pem().expect("pem");
    out.put(
        "pem_bundle",
        "with-key",
        format!("{}{}", all[1].to_pem(), key.as_str()),
    );
    let one = all[1].to_pem();
    out.put("pem_bundle", "truncated", &one[..one.len() / 2]);
    out.put(
        "pem_bundle",
        "mismatched-end",
        one.replace("END CERTIFICATE", "END X509 CRL"),
    );
    out.put(
        "pem_bundle",
        "legacy-headers",
        one.replacen(
            "-----\n",
            "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n",
            1,
        ),
    );
    out.put(
        "pem_bundle",
        "bad-base64",
        "-----BEGIN CERTIFICATE-----\nMII*!!\n-----END CERTIFICATE-----\n",
    );
    out.put("pem_bundle", "empty-block", pem::encode("CERTIFICATE", &[]));
}

/// The key inside a PKCS#8 PrivateKeyInfo: SEC1 for EC keys (without the
/// curve parameters), PKCS#1 for RSA keys.
fn inner_key(pkcs8: &[u8]) -> Vec<u8> {
    let info = p256::pkcs8::PrivateKeyInfoRef::from_der(pkcs8).expect("pkcs8");
    info.private_key.as_bytes().to_vec()
}

fn keys(out: &mut Out) {
    let pool = pool();
    for (label, key) in &pool.keys {
        let pkcs8 = key.to_pkcs8_der().expect("pkcs8");
        out.put(
            "private_key",
            &format!("{label}-pkcs8.der"),
            pkcs8.as_slice(),
        );
        out.put(
            "private_key",
            &format!("{label}-pkcs8.pem"),
            key.to_pkcs8_pem().expect("pem").as_bytes(),
        );
        let inner = inner_key(&pkcs8);
        if key.algorithm().is_rsa() {
            out.put("private_key", &format!("{label}-pkcs1.der"), &inner);
            out.put(
                "private_key",
                &format!("{label}-pkcs1.pem"),
                pem::encode("RSA PRIVATE KEY", &inner),
            );
            out.put(
                "private_key",
                &format!("{label}-pkcs1-crlf.pem"),
                crlf(&pem::encode("RSA PRIVATE KEY", &inner)),
            );
        } else {
            let secret = p256::SecretKey::from_pkcs8_der(&pkcs8).expect("p256");
            let sec1 = secret.to_sec1_der().expect("sec1");
            out.put("private_key", &format!("{label}-sec1.der"), sec1.as_slice());
            out.put(
                "private_key",
                &format!("{label}-sec1.pem"),
                pem::encode("EC PRIVATE KEY", &sec1),
            );
            out.put("private_key", &format!("{label}-sec1-noparams.der"), &inner);
        }
    }
    // A key file with a certificate before the key (accepted), two keys
    // (refused), an encrypted key label (refused).
    let (label, key) = &pool.keys[0];
    let pem = key.to_pkcs8_pem().expect("pem");
    out.put(
        "private_key",
        &format!("{label}-with-cert.pem"),
        format!("{}{}", pool.certs[1].cert.to_pem(), pem.as_str()),
    );
    out.put(
        "private_key",
        "two-keys.pem",
        format!(
            "{}{}",
            pem.as_str(),
            pool.keys[1].1.to_pkcs8_pem().expect("pem").as_str()
        ),
    );
    out.put(
        "private_key",
        "encrypted-label.pem",
        pem.replace("PRIVATE KEY", "ENCRYPTED PRIVATE KEY"),
    );
    // The 1024-bit PKCS#1 key pki-core's tests refuse (checked in there).
    let small =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../pki-core/tests/data/rsa1024-pkcs1.pem");
    if let Ok(bytes) = std::fs::read(&small) {
        if let Some(b) = pem::read_blocks(&bytes)
            .ok()
            .and_then(|b| b.into_iter().next())
        {
            out.put("private_key", "rsa1024-pkcs1.der", b.der.as_slice());
        }
        out.put("private_key", "rsa1024-pkcs1.pem", bytes);
    }
}

fn states(out: &mut Out) {
    let mut rng = ChaCha20Rng::seed_from_u64(SEED ^ 0x57a7e);
    let policy = SignerPolicy::default();

    // A fresh signer with a server and a client leaf.
    let mut s = SignerState::new("service-ca", policy, NOW, &mut rng).expect("signer");
    s.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .expect("leaf");
    let mut client = LeafRequest::server(vec!["client.ns.svc".into()]);
    client.kind = LeafKind::Client;
    client.ip_addresses = vec!["10.0.0.7".parse().expect("ip")];
    s.request_leaf("client", client).expect("leaf");
    let s = SignerEngine::step(&s, &SignerInput::default(), NOW, &mut rng)
        .expect("step")
        .into_document();
    put_state(out, "fresh", &s);

    // After a forced rotation: bridge B, bridge A in the bundle, previous,
    // history, leaves re-issued.
    let later = NOW + Duration::days(30);
    let forced = SignerInput::forced(ForcedRotation::new("key ceremony"));
    let rotated = SignerEngine::step(&s, &forced, later, &mut rng)
        .expect("step")
        .into_document();
    put_state(out, "rotated", &rotated);

    // Keeping the previous root, after an automatic rotation.
    let mut keep = rotated.clone();
    keep.policy.keep_previous_root = true;
    let due = keep.rotation_due_at(&keep.policy) + Duration::days(1);
    let twice = SignerEngine::step(&keep, &SignerInput::default(), due, &mut rng)
        .expect("step")
        .into_document();
    put_state(out, "rotated-twice-keep-root", &twice);

    // A signer without leaves.
    let bare = SignerState::new("bare-ca", policy, NOW, &mut rng).expect("signer");
    put_state(out, "bare", &bare);
}

fn put_state(out: &mut Out, name: &str, s: &SignerState) {
    let json = s.to_json().expect("json");
    out.put("state_file", &format!("{name}.json"), json.as_slice());
    let files = s.to_files().expect("files");
    out.put(
        "state_file",
        &format!("{name}.files"),
        join_state_files(&files),
    );
    // As version 2 wrote it: the leaf requests inside the state file (the
    // Secret form's state file keeps them there), none in leaf-requests/.
    let secret_state = s.to_secret_data().expect("secret data")["pki-state.json"].to_vec();
    let version_2 = String::from_utf8(secret_state).expect("JSON").replacen(
        "\"version\": 3",
        "\"version\": 2",
        1,
    );
    let mut old = pki_rotate::Files::new();
    for (path, file) in files
        .iter()
        .filter(|(p, _)| !p.starts_with("leaf-requests/"))
    {
        old.insert(path, file.clone()).expect("path");
    }
    old.insert(
        "pki-state.json",
        pki_rotate::File::public(version_2.into_bytes()),
    )
    .expect("path");
    out.put(
        "state_file",
        &format!("{name}-version-2.files"),
        join_state_files(&old),
    );
}

/// `path_validation` decodes its input with `arbitrary`: any bytes are a
/// valid input. Random seeds of a few sizes start the search; libFuzzer's
/// coverage feedback finds the pool indices that chain.
fn path_inputs(out: &mut Out) {
    let mut rng = ChaCha20Rng::seed_from_u64(SEED ^ 0x9a7);
    for (i, len) in [0usize, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
        .iter()
        .enumerate()
    {
        let mut bytes = vec![0u8; *len];
        rng.fill_bytes(&mut bytes);
        out.put("path_validation", &format!("random-{i}-{len}"), bytes);
    }
    // Small index-heavy inputs: mostly small bytes, so variants and pool
    // indices are low and lists are short.
    for i in 0..16 {
        let mut bytes = vec![0u8; 48];
        rng.fill_bytes(&mut bytes);
        for b in &mut bytes {
            *b %= 16;
        }
        out.put("path_validation", &format!("small-{i}"), bytes);
    }
}

libfuzzer_sys::fuzz_target!(init: generate(), |_data: &[u8]| {});

fn generate() {
    let root = std::env::args_os()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'))
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    let mut out = Out { root, count: 0 };
    certs(&mut out);
    bundles(&mut out);
    keys(&mut out);
    ca_import(&mut out);
    states(&mut out);
    documents(&mut out);
    path_inputs(&mut out);
    fs_manifests(&mut out);
    pkcs11_uris(&mut out);
    kube_store(&mut out);
    println!("wrote {} seeds under {}", out.count, out.root.display());
    std::process::exit(0);
}

/// The `fs_manifest` store's own manifest, index and shards (as written,
/// and slightly wrong), in that target's framing.
fn fs_manifests(out: &mut Out) {
    use pki_fuzz::{INDEX, MANIFEST, fs_fixture};
    let fixture = fs_fixture();
    let manifest = std::fs::read(fixture.generation.join(MANIFEST)).unwrap();
    let index = std::fs::read(fixture.generation.join(INDEX)).unwrap();
    let mut shards: Vec<(u8, Vec<u8>)> = std::fs::read_dir(fixture.generation.join(".manifest"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            // Shards (`XX.json`) and their identity records (`XX.ids`, whose
            // first bytes tell the target where they go).
            let name = e.file_name().to_string_lossy().into_owned();
            let bucket = name.split('.').next().unwrap();
            let bucket = u8::from_str_radix(bucket, 16).unwrap();
            (bucket, std::fs::read(e.path()).unwrap())
        })
        .collect();
    shards.sort();
    let join = |parts: &[&[u8]]| parts.join(&0u8);
    let shard_part = |(bucket, bytes): &(u8, Vec<u8>)| [&[*bucket][..], bytes].concat();
    out.put("fs_manifest", "as-written", b"");
    out.put("fs_manifest", "manifest", &manifest);
    out.put("fs_manifest", "index", join(&[b"", &index]));
    let mut all: Vec<Vec<u8>> = vec![manifest.clone(), index.clone()];
    all.extend(shards.iter().map(shard_part));
    let all_refs: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
    out.put("fs_manifest", "everything", join(&all_refs));
    if let Some(first) = shards.first() {
        // A shard moved to the next bucket, and a shard cut short.
        let moved = (first.0.wrapping_add(1), first.1.clone());
        out.put(
            "fs_manifest",
            "moved-shard",
            join(&[b"", b"", &shard_part(&moved)]),
        );
        let cut = (first.0, first.1[..first.1.len() / 2].to_vec());
        out.put(
            "fs_manifest",
            "cut-shard",
            join(&[b"", b"", &shard_part(&cut)]),
        );
    }
    out.put(
        "fs_manifest",
        "cut-manifest",
        &manifest[..manifest.len() / 2],
    );
    let text = String::from_utf8_lossy(&manifest).replace("\"format\": 3", "\"format\": 2");
    out.put("fs_manifest", "format-2", text.as_bytes());
}

/// The CA set, key ring and credential documents, each at a point where
/// most of its fields are filled in.
fn documents(out: &mut Out) {
    use pki_fuzz::{DocumentKind, join_document_files};
    use pki_rotate::{
        CredentialEngine, CredentialInput, CredentialPolicy, CredentialSecret, CredentialState,
        KeyRing, KeyRingEngine, KeyRingInput, KeyRingPolicy, LeafSpec, Roles, SetEngine, SetInput,
        SetState,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(SEED);

    // A set in trust-both: a serving+client CA (split at start), an etcd
    // CA, a leaf and a target that trusts it.
    let cas = [
        (
            "cluster".to_string(),
            "serving+client".parse::<Roles>().unwrap(),
        ),
        ("etcd".to_string(), "serving".parse::<Roles>().unwrap()),
    ];
    let mut set = SetState::new(
        &cas,
        pki_core::KeyAlgorithm::EcdsaP256,
        Duration::days(790),
        NOW,
        &mut rng,
    )
    .unwrap();
    let inputs = [
        SetInput::Issue {
            replace: false,
            name: "apiserver".into(),
            spec: LeafSpec {
                ca: "cluster".into(),
                serving: true,
                client: false,
                dns_names: vec!["api.example".into()],
                ip_addresses: vec![],
                common_name: None,
                target: "control-plane".into(),
                lifetime: Duration::days(180),
            },
        },
        SetInput::Target {
            name: "node-1".into(),
            trusts: Some(["cluster".to_string()].into()),
            client_ca: None,
        },
        SetInput::Start {
            reason: "yearly".into(),
            imports: vec![],
            one_at_a_time: false,
        },
    ];
    for (i, input) in inputs.iter().enumerate() {
        let at = NOW + Duration::days(1 + i as i64);
        set = SetEngine::step(&set, input, at, &mut rng)
            .unwrap()
            .into_document();
    }
    let files = SetState::to_files(&set).unwrap();
    out.put(
        "documents",
        "set-trust-both",
        join_document_files(DocumentKind::Set, &files),
    );

    // A key ring one rotation in: an active key and one in its grace.
    let ring = KeyRing::new(KeyRingPolicy::default(), NOW, &mut rng).unwrap();
    let ring = KeyRingEngine::step(
        &ring,
        &KeyRingInput::forced("drill"),
        NOW + Duration::days(1),
        &mut rng,
    )
    .unwrap()
    .into_document();
    let files = KeyRing::to_files(&ring).unwrap();
    out.put(
        "documents",
        "key-ring",
        join_document_files(DocumentKind::KeyRing, &files),
    );

    // A credential that minted once and is due for its next rotation.
    let policy = CredentialPolicy {
        expire: Duration::hours(720),
        grace: Duration::minutes(10),
    };
    let mut cred = CredentialState::new("db", policy, None).unwrap();
    let mut at = NOW;
    for _ in 0..4 {
        use pki_rotate::credential::{Action, Next};
        // A step's plan that changes nothing and asks for a mint: report one.
        let input = match pki_rotate::credential::plan(&cred, &CredentialInput::Step, at) {
            Ok(p) if p.change.is_none() => match p.next {
                Next::Act(Action::Mint { rotation, attempt }) => CredentialInput::Minted {
                    rotation,
                    attempt,
                    value: CredentialSecret::new(format!("secret-{rotation}-{attempt}")),
                },
                _ => CredentialInput::Step,
            },
            _ => CredentialInput::Step,
        };
        cred = CredentialEngine::step(&cred, &input, at, &mut rng)
            .map(|o| o.into_document())
            .unwrap_or(cred);
        at += Duration::minutes(1);
    }
    let files = CredentialState::to_files(&cred).unwrap();
    out.put(
        "documents",
        "credential",
        join_document_files(DocumentKind::Credential, &files),
    );
}

/// The import parser's input: the CA file, then the key and chain files at
/// the end, their lengths in the first two bytes (see the target).
fn ca_import(out: &mut Out) {
    let mut rng = ChaCha20Rng::seed_from_u64(SEED);
    let root = pki_core::CertificateAuthority::generate_root(
        "Org Root",
        pki_core::KeyAlgorithm::EcdsaP256,
        NOW,
        Duration::days(3650),
        &mut rng,
    )
    .unwrap();
    let key = pki_core::PrivateKey::generate(pki_core::KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
    let params = pki_core::CertificateParams::new(
        pki_core::Profile::IntermediateCa { path_len: Some(0) },
        "cluster-ca",
        NOW,
        Duration::days(700),
    )
    .unwrap();
    let ca = root
        .issue(&params, &key.public_key().unwrap(), &mut rng)
        .unwrap();
    let key_pem = key.to_pkcs8_pem().unwrap();
    let one_file = format!("{}{}{}", ca.to_pem(), key_pem.as_str(), root.cert.to_pem());
    let mut all = vec![0u8, 0u8];
    all.extend_from_slice(one_file.as_bytes());
    out.put("ca_import", "one-file", &all);
    let mut reversed = vec![0u8, 0u8];
    reversed.extend_from_slice(root.cert.to_pem().as_bytes());
    reversed.extend_from_slice(ca.to_pem().as_bytes());
    out.put("ca_import", "out-of-order", &reversed);
}

/// PKCS#11 URIs: the forms pki writes and RFC 7512's examples, and a few
/// refusals (an attribute twice, one pki does not read, a PIN in the URI).
fn pkcs11_uris(out: &mut Out) {
    for (name, uri) in [
        (
            "key",
            "pkcs11:token=pki-ca;object=root-2026;type=private;id=%01%02",
        ),
        (
            "pin-source",
            "pkcs11:token=ca;id=%0A?pin-source=file:/run/pki/pin&module-path=/usr/lib/softhsm/libsofthsm2.so",
        ),
        (
            "rfc7512",
            "pkcs11:token=The%20Software%20PKCS%2311%20Softtoken;manufacturer=Snake%20Oil,%20Inc.;model=1.0;object=my-certificate;type=cert;id=%69%95%3E%5C%F4%BE%2D%B3%B5%39%5C%6B%6B%37%37%37?pin-source=file:/etc/token_pin",
        ),
        (
            "utf8",
            "pkcs11:token=Name%20with%20a%20small%20A%20with%20acute:%20%C3%A1",
        ),
        ("twice", "pkcs11:token=a;token=b"),
        ("slot-id", "pkcs11:slot-id=1;object=k"),
        ("pin-value", "pkcs11:token=a?pin-value=1234"),
    ] {
        out.put("pkcs11_uri", name, uri.as_bytes());
    }
}

/// What a `kube://` store reads (the first byte chooses, see the target):
/// URLs with and without a context, a head, and the shards a store writes
/// for a small signer-like document (one file cut across two shards too).
fn kube_store(out: &mut Out) {
    for (name, url) in [
        ("url", "kube://pki-system/service-ca"),
        ("url-context", "kube://admin@pki-system/service-ca"),
        ("url-bad", "kube://Bad_Namespace/x"),
    ] {
        out.put("kube_store", name, &[&[0u8][..], url.as_bytes()].concat());
    }
    let head = br#"{"format":1,"key":"signer","generation":"9f0c2a7be41d3350","shards":["00"],"files":1,"dirs":["certs"]}"#;
    out.put("kube_store", "head", &[&[1u8][..], &head[..]].concat());
    let mut files = pki_rotate::Files::new();
    let file = |bytes: &[u8], secret: bool| {
        if secret {
            pki_rotate::File::secret(bytes.to_vec())
        } else {
            pki_rotate::File::public(bytes.to_vec())
        }
    };
    for (path, bytes, secret) in [
        ("ca-bundle.crt", &b"-----BEGIN CERTIFICATE-----"[..], false),
        ("signer/tls.key", &b"-----BEGIN PRIVATE KEY-----"[..], true),
    ] {
        files
            .insert(path, file(bytes, secret))
            .expect("a valid path");
    }
    let shards = pki_kube::fuzzing::pack(&files).expect("packs");
    let mut joined = vec![2u8];
    for (i, (index, data)) in shards.iter().enumerate() {
        if i > 0 {
            joined.push(0xff);
        }
        joined.extend_from_slice(index);
        joined.push(0xff);
        joined.extend_from_slice(data);
    }
    out.put("kube_store", "shards", &joined);
}
