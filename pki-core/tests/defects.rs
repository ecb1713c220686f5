//! What path validation must refuse however it is built: corrupted DER,
//! names malformed before constraints apply to them and other RFC 5280
//! profile gaps, and weak leaf keys.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use pki_core::{
    Bundle, Certificate, CertificateAuthority, KeyAlgorithm, PrivateKey, VerifyError, verify_chain,
};
use time::{Duration, OffsetDateTime};

mod support;

use support::{custom, fixtures::*};

mod malformed_input {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    /// A root, an intermediate and a leaf, made once.
    fn chain() -> &'static (Certificate, Certificate, Certificate) {
        static CHAIN: OnceLock<(Certificate, Certificate, Certificate)> = OnceLock::new();
        CHAIN.get_or_init(|| {
            let root = new_root("root", 1);
            let inter = intermediate(&root, "issuing", Some(0), 2);
            let leaf = server_leaf(&inter, 3);
            (root.cert, inter.cert, leaf)
        })
    }

    fn mutate(der: &[u8], edits: &[(usize, u8)]) -> Vec<u8> {
        let mut out = der.to_vec();
        for (at, byte) in edits {
            let i = at % out.len();
            out[i] = *byte;
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Invariant 4 of the design: corrupt certificates give errors, never panics,
        /// wherever they sit on the path.
        #[test]
        fn corrupted_certificates_never_panic_the_verifier(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            position in 0usize..3,
        ) {
            let (root, inter, leaf) = chain();
            let mut certs = [root.clone(), inter.clone(), leaf.clone()];
            let Ok(bad) = Certificate::from_der(&mutate(certs[position].der(), &edits)) else {
                return Ok(());
            };
            certs[position] = bad;
            let [root, inter, leaf] = certs;
            let mut o = opts();
            o.name = Some(dns("web.ns.svc"));
            let result = verify_chain(&leaf, &[inter], &Bundle::from_certs([root]), &o);
            if let Err(e) = result {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}

mod rfc5280_gaps {
    //! Names must be well formed before constraints apply to them, the
    //! profile checks RFC 5280 asks of a leaf and of a nameConstraints
    //! extension, and a CA whose basicConstraints is not critical
    //! (accepted, as RFC 5280 §6.1.4(k) and NIST PKITS 4.6.4 say).

    use super::custom::{self, CN, constrained_ca, dns_name, email, subtrees, verify_leaf};
    use super::*;
    use der::Tag;
    use der::asn1::OctetString;
    use x509_cert::ext::Extension;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::{
        BasicConstraints, KeyUsage, KeyUsages, NameConstraints, SubjectAltName,
    };

    fn permitting(bases: Vec<GeneralName>) -> NameConstraints {
        NameConstraints {
            permitted_subtrees: subtrees(bases),
            excluded_subtrees: None,
        }
    }

    /// root → CA with `nc` → leaf with the subjectAltNames `sans`.
    fn verify_under(nc: NameConstraints, sans: Vec<GeneralName>) -> Result<(), VerifyError> {
        verify_leaf(&constrained_ca(nc), None, sans)
    }

    fn assert_malformed(result: Result<(), VerifyError>, says: &str) {
        match result {
            Err(VerifyError::MalformedCertificate { reason, .. }) if reason.contains(says) => {}
            other => panic!("expected a malformed certificate ({says}), got {other:?}"),
        }
    }

    #[test]
    fn a_dns_san_with_a_leading_period_under_a_permitting_constraint_is_refused() {
        let nc = || permitting(vec![dns_name("example.com")]);
        verify_under(nc(), vec![dns_name("foo.example.com")]).unwrap();
        let err = verify_under(
            nc(),
            vec![dns_name(".example.com"), dns_name("foo.example.com")],
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation { ref name, reason: "malformed dNSName", .. }
                    if name == "DNS:.example.com"
            ),
            "{err:?}"
        );
    }

    #[test]
    fn an_email_san_with_two_at_signs_under_an_email_constraint_is_refused() {
        let nc = || permitting(vec![email("example.com")]);
        let good = || vec![dns_name("web"), email("good@example.com")];
        verify_under(nc(), good()).unwrap();
        let mut sans = good();
        sans.push(email("invalid@address@example.com"));
        let err = verify_under(nc(), sans).unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation { ref name, reason: "malformed rfc822Name", .. }
                    if name == "email:invalid@address@example.com"
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_dns_name_constraint_with_a_leading_period_or_a_wildcard_is_refused() {
        // x509-limbo rfc5280::nc::invalid-dnsname-leading-period and
        // invalid-dnsname-wildcard: a dNSName constraint is a host name.
        for base in [".example.com", "*.example.com"] {
            assert_malformed(
                verify_under(
                    permitting(vec![dns_name(base)]),
                    vec![dns_name("foo.example.com")],
                ),
                "is not a host name",
            );
        }
    }

    #[test]
    fn name_constraints_without_any_subtree_are_refused() {
        // x509-limbo webpki::nc::intermediate-permitted-excluded-subtrees-*.
        for nc in [
            NameConstraints {
                permitted_subtrees: None,
                excluded_subtrees: None,
            },
            NameConstraints {
                permitted_subtrees: Some(vec![]),
                excluded_subtrees: Some(vec![]),
            },
        ] {
            assert_malformed(
                verify_under(nc, vec![dns_name("foo.example.com")]),
                "nameConstraints",
            );
        }
    }

    #[test]
    fn name_constraints_in_an_end_entity_certificate_are_refused() {
        let root = new_root("root", 1);
        let subject = custom::name(&[(CN, Tag::Utf8String, "web")]);
        let nc = custom::ext(&permitting(vec![dns_name("example.com")]), &subject);
        let san = custom::ext(&SubjectAltName(vec![dns_name("example.com")]), &subject);
        let leaf = custom::server_leaf(
            &root,
            root.cert.subject().clone(),
            subject,
            vec![san, nc],
            3,
        );
        let err = verify_chain(&leaf, &[], &bundle(&[&root.cert]), &opts()).unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedCertificate { ref reason, .. } if reason.contains("end-entity")),
            "{err:?}"
        );
    }

    /// A server leaf under `root` with an empty subject and a
    /// subjectAltName marked `critical` or not.
    fn empty_subject_leaf(root: &CertificateAuthority, critical: bool) -> Certificate {
        let subject = custom::name(&[]);
        let mut san = custom::ext(&SubjectAltName(vec![dns_name("example.com")]), &subject);
        san.critical = critical;
        custom::server_leaf(root, root.cert.subject().clone(), subject, vec![san], 3)
    }

    #[test]
    fn an_empty_subject_needs_a_critical_subject_alt_name() {
        let root = new_root("root", 1);
        let anchors = bundle(&[&root.cert]);
        verify_chain(&empty_subject_leaf(&root, true), &[], &anchors, &opts()).unwrap();
        let err =
            verify_chain(&empty_subject_leaf(&root, false), &[], &anchors, &opts()).unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedCertificate { ref reason, .. } if reason.contains("empty subject")),
            "{err:?}"
        );
    }

    /// An extension exactly as given (criticality included).
    fn raw_ext<T: der::Encode + der::oid::AssociatedOid>(value: &T, critical: bool) -> Extension {
        Extension {
            extn_id: T::OID,
            critical,
            extn_value: OctetString::new(value.to_der().unwrap()).unwrap(),
        }
    }

    #[test]
    fn an_intermediate_whose_basic_constraints_is_not_critical_is_a_ca() {
        // NIST PKITS 4.6.4 (Valid basicConstraints Not Critical Test4);
        // RFC 5280 §6.1.4(k) asks only for cA = TRUE. A trust anchor's
        // must still be critical (x509-limbo
        // rfc5280::root-non-critical-basic-constraints, in the
        // conformance test).
        let root = new_root("root", 1);
        let subject = custom::name(&[(CN, Tag::Utf8String, "non-critical")]);
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(4)).unwrap();
        let bc = BasicConstraints {
            ca: true,
            path_len_constraint: None,
        };
        let ku = KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign);
        let cert = custom::issue(
            &root,
            root.cert.subject().clone(),
            subject.clone(),
            &key,
            vec![raw_ext(&bc, false), raw_ext(&ku, true)],
        );
        assert_eq!(cert.basic_constraints().map(|b| b.critical), Some(false));
        let ca = CertificateAuthority::new(cert, key).unwrap();
        let leaf_subject = custom::name(&[(CN, Tag::Utf8String, "web")]);
        let leaf = custom::server_leaf(&ca, subject, leaf_subject, vec![], 5);
        let path = verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .unwrap();
        assert_eq!(path.certs.len(), 3);
    }
}

mod weak_leaf_keys {
    //! The leaf's own key meets the floor issuers' keys meet (x509-limbo
    //! webpki::forbidden-*-leaf). pki-core makes no weak keys, so OpenSSL
    //! makes them, and signs the leaf with a pki-core CA's key.

    use super::*;
    use std::path::Path;
    use std::process::Command;

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

    /// A server leaf for a key OpenSSL generates with `genpkey_args`,
    /// issued by `ca`, valid from `NOW`.
    fn leaf_with_key(ca: &CertificateAuthority, genpkey_args: &[&str]) -> Certificate {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("ca.pem"), ca.cert.to_pem()).unwrap();
        std::fs::write(d.join("ca.key"), ca.key.to_pkcs8_pem().unwrap().as_bytes()).unwrap();
        std::fs::write(
            d.join("ext.cnf"),
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=DNS:web\n\
             subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
        )
        .unwrap();
        let mut genpkey = vec!["genpkey"];
        if genpkey_args.first() == Some(&"-genparam") {
            // DSA: parameters first, then the key.
            genpkey.extend_from_slice(genpkey_args);
            genpkey.extend(["-out", "params.pem"]);
            openssl(d, &genpkey);
            genpkey = vec!["genpkey", "-paramfile", "params.pem"];
        } else {
            genpkey.extend_from_slice(genpkey_args);
        }
        genpkey.extend(["-out", "leaf.key"]);
        openssl(d, &genpkey);
        openssl(
            d,
            &[
                "req", "-new", "-key", "leaf.key", "-subj", "/CN=web", "-out", "leaf.csr",
            ],
        );
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "30",
                "-extfile",
                "ext.cnf",
                "-out",
                "leaf.pem",
            ],
        );
        Certificate::from_pem(&std::fs::read(d.join("leaf.pem")).unwrap()).unwrap()
    }

    fn verify_leaf(root: &CertificateAuthority, leaf: &Certificate) -> Result<(), VerifyError> {
        // The leaf is valid from when OpenSSL made it.
        let mut o = opts_at(OffsetDateTime::now_utc() + Duration::minutes(1));
        o.name = Some(dns("web"));
        verify_chain(leaf, &[], &bundle(&[&root.cert]), &o).map(|_| ())
    }

    #[test]
    fn a_leaf_with_a_weak_key_is_refused_and_a_p521_leaf_is_not() {
        let now = OffsetDateTime::now_utc();
        let root = CertificateAuthority::generate_root(
            "root",
            KeyAlgorithm::EcdsaP256,
            now - Duration::hours(1),
            Duration::days(90),
            &mut rng(1),
        )
        .unwrap();
        let weak: [(&[&str], &str); 4] = [
            (
                &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
                "1024 bits",
            ),
            (
                &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2052"],
                "2052 bits",
            ),
            (
                &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-192"],
                "curve 1.2.840.10045.3.1.1",
            ),
            (
                &[
                    "-genparam",
                    "-algorithm",
                    "DSA",
                    "-pkeyopt",
                    "dsa_paramgen_bits:1024",
                ],
                "DSA",
            ),
        ];
        for (args, says) in weak {
            let leaf = leaf_with_key(&root, args);
            match verify_leaf(&root, &leaf) {
                Err(VerifyError::WeakPublicKey { reason, .. }) if reason.contains(says) => {}
                other => panic!("{args:?}: expected a weak key ({says}), got {other:?}"),
            }
        }
        for args in [
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"][..],
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"][..],
        ] {
            verify_leaf(&root, &leaf_with_key(&root, args)).unwrap();
        }
    }
}
