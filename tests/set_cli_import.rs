#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `pki set start --import` as an organisation hands over its CAs: an
//! intermediate under the organisation's root published with the root in
//! the bundles and on serving chains, and bad import files refused naming
//! the CA and the file.

mod support;

use support::cli::ok;
use support::set::{T1, ack, refused, setup, status};
use support::store::T0;

use std::path::Path;

/// PEM files an organisation hands over for `set start --import`, made at
/// T0: its root (valid 1000 days) and, under it, `cluster`'s new CA, an
/// intermediate with pathLen 0.
struct OrgCa {
    root: pki::core::CertificateAuthority,
    ca: pki::core::CertificateAuthority,
}

impl OrgCa {
    fn new(seed: u64) -> Self {
        use pki::core::{
            CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile,
        };
        let mut rng = <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::seed_from_u64(seed);
        let at = rfc3339(T0);
        let root = CertificateAuthority::generate_root(
            "Org Root",
            KeyAlgorithm::EcdsaP256,
            at,
            time::Duration::days(1000),
            &mut rng,
        )
        .unwrap();
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
        let params = CertificateParams::new(
            Profile::IntermediateCa { path_len: Some(0) },
            "Org cluster CA",
            at,
            time::Duration::days(900),
        )
        .unwrap();
        let cert = root
            .issue(&params, &key.public_key().unwrap(), &mut rng)
            .unwrap();
        OrgCa {
            root,
            ca: CertificateAuthority::new(cert, key).unwrap(),
        }
    }

    fn key_pem(key: &pki::core::PrivateKey) -> String {
        key.to_pkcs8_pem().unwrap().as_str().to_string()
    }

    /// StarlingX's upload: the CA certificate, its key, then the root.
    fn upload(&self) -> String {
        format!(
            "{}{}{}",
            self.ca.cert.to_pem(),
            Self::key_pem(self.ca.key.private_key().unwrap()),
            self.root.cert.to_pem()
        )
    }
}

fn rfc3339(s: &str) -> time::OffsetDateTime {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).unwrap()
}

fn certs_in(path: &Path) -> Vec<pki::core::Certificate> {
    pki::core::Certificate::all_from_pem(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn start_with_an_imported_intermediate_publishes_the_external_root_and_serving_chains() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.to_str().unwrap();
    setup(d);
    let org = OrgCa::new(11);
    let upload = tmp.path().join("cluster-ca.pem");
    std::fs::write(&upload, org.upload()).unwrap();
    let arg = format!("cluster={}", upload.display());
    let out = ok(&["set", "start", d, "--import", &arg, "--now", T1]);
    assert!(
        out.contains(&format!(
            "imported new ca for cluster: {}",
            org.ca.cert.id()
        )),
        "{out}"
    );
    let s = status(d);
    assert_eq!(s["cas"]["cluster"]["next"], org.ca.cert.id());
    assert_eq!(s["cas"]["cluster"]["next_root"], org.root.cert.id());
    assert!(s["cas"]["cluster"]["current_root"].is_null());
    // Trust-both: the old cluster CA and the external root, not the
    // intermediate: what a client trusting only the organisation's root has.
    let trust = dir.join("targets/node-1/trust/cluster.crt");
    let held = certs_in(&trust);
    assert_eq!(held.len(), 2);
    assert!(held.contains(&org.root.cert) && !held.contains(&org.ca.cert));
    // The chain is kept beside the CA in the store.
    assert_eq!(
        certs_in(&dir.join("set/cas/cluster/next-ca-chain.crt")),
        vec![org.root.cert.clone()]
    );
    for _ in 0..3 {
        ack(d, "control-plane");
        ack(d, "node-1");
        ok(&["set", "advance", d, "--now", T1]);
    }
    assert_eq!(status(d)["step"], "completed");
    assert_eq!(certs_in(&trust), vec![org.root.cert.clone()]);
    let served = certs_in(&dir.join("targets/control-plane/certs/kube-apiserver/tls.crt"));
    assert_eq!(served.len(), 2, "the leaf, then the imported CA");
    assert_eq!(served[1], org.ca.cert);
    assert!(pki::core::issued_by(&served[0], &org.ca.cert).issued_by);
    let human = ok(&["set", "status", d, "--now", T1]);
    assert!(
        human.contains(&format!("under root {}", org.root.cert.id())),
        "{human}"
    );
    // Nothing but the CA's name appears in trust/.
    let names: Vec<_> = std::fs::read_dir(dir.join("targets/node-1/trust"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["cluster.crt"]);
}

#[test]
fn bad_import_files_are_refused_with_one_line_naming_the_ca_and_the_file() {
    use pki::core::{CertificateParams, KeyAlgorithm, PrivateKey, Profile};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.to_str().unwrap();
    setup(d);
    let org = OrgCa::new(12);
    let mut rng = <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::seed_from_u64(13);
    let other = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
    let leaf_key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
    let mut params = CertificateParams::new(
        Profile::Server,
        "web",
        rfc3339(T0),
        time::Duration::days(400),
    )
    .unwrap();
    params.dns_names.push("web.example".into());
    let leaf = org
        .root
        .issue(&params, &leaf_key.public_key().unwrap(), &mut rng)
        .unwrap();
    let (ca, key, root) = (
        org.ca.cert.to_pem(),
        OrgCa::key_pem(org.ca.key.private_key().unwrap()),
        org.root.cert.to_pem(),
    );
    let cases: [(&str, String, &str); 4] = [
        (
            "two-keys.pem",
            format!("{ca}{key}{}{root}", OrgCa::key_pem(&other)),
            "two private keys",
        ),
        (
            "wrong-key.pem",
            format!("{ca}{}{root}", OrgCa::key_pem(&other)),
            "does not match",
        ),
        (
            "not-a-ca.pem",
            format!("{}{}{root}", leaf.to_pem(), OrgCa::key_pem(&leaf_key)),
            "is not a ca",
        ),
        (
            "out-of-order.pem",
            format!("{root}{ca}{key}"),
            "out of order",
        ),
    ];
    for (file, pem, why) in cases {
        let path = tmp.path().join(file);
        std::fs::write(&path, pem).unwrap();
        let arg = format!("cluster={}", path.display());
        let err = refused(&dir, &["set", "start", d, "--import", &arg, "--now", T1]);
        assert!(
            err.contains("--import cluster: ") && err.contains(file),
            "{file}: {err}"
        );
        assert!(err.to_lowercase().contains(why), "{file}: {err}");
    }
    // /dev/zero never ends: the limit stops the read.
    let err = refused(
        &dir,
        &[
            "set",
            "start",
            d,
            "--import",
            "cluster=/dev/zero",
            "--max-input-size",
            "1K",
            "--now",
            T1,
        ],
    );
    assert!(
        err.contains("--import cluster: /dev/zero") && err.contains("input limit of 1024 bytes"),
        "{err}"
    );
    // The good file still starts the rotation: the refusals were the files'.
    let good = tmp.path().join("good.pem");
    std::fs::write(&good, org.upload()).unwrap();
    let arg = format!("cluster={}", good.display());
    ok(&["set", "start", d, "--import", &arg, "--now", T1]);
    assert_eq!(status(d)["step"], "trust-both");
}
