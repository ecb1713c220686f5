//! Names along a path: distinguished names compared after RFC 4518
//! preparation, and name constraints on DNS names, IP addresses,
//! directory names, e-mail addresses and URIs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use pki_core::verify::BudgetKind;
use pki_core::{Certificate, CertificateAuthority, Profile, VerifyError, verify_chain};

mod support;

use support::{custom, fixtures::*};

mod distinguished_names {
    //! RFC 5280 §7.1: names are compared after RFC 4518 preparation.

    use super::custom::{self, CN, O};
    use super::*;
    use der::Tag;

    /// What x509-cert's RFC 4514 string form gives for `CN=<common name>`,
    /// its reserved characters escaped.
    fn from_string_form(common_name: &str) -> x509_cert::name::Name {
        let mut escaped = String::new();
        for (i, c) in common_name.chars().enumerate() {
            if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
                || (i == 0 && (c == ' ' || c == '#'))
            {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        if escaped.ends_with(' ') {
            escaped.insert(escaped.len() - 1, '\\');
        }
        format!("CN={escaped}").parse().unwrap()
    }

    #[test]
    fn a_common_name_is_the_one_rdn_the_string_form_gives() {
        for cn in [
            "web",
            "svc0.ns.svc",
            "a,b+c=d",
            "#lead",
            " lead and trail ",
            "quo\"te \\ back<>;",
            "ünïcödé ✓",
            "x",
        ] {
            let name = pki_core::common_name_to_name(cn).unwrap();
            assert_eq!(name, from_string_form(cn), "{cn}");
            assert_eq!(name.to_string(), from_string_form(cn).to_string(), "{cn}");
        }
    }

    #[test]
    fn issuer_name_in_another_case_spacing_and_string_type_chains_to_its_ca() {
        let root = new_root("root", 1);
        let ca = custom::ca(
            &root,
            custom::name(&[
                (O, Tag::Utf8String, "Example Corp"),
                (CN, Tag::Utf8String, "Issuing CA"),
            ]),
            vec![],
            2,
        );
        let issuer = custom::name(&[
            (O, Tag::PrintableString, "EXAMPLE  CORP "),
            (CN, Tag::PrintableString, " issuing ca"),
        ]);
        let leaf = custom::server_leaf(
            &ca,
            issuer,
            custom::name(&[(CN, Tag::Utf8String, "web")]),
            vec![],
            3,
        );
        assert_ne!(leaf.issuer(), ca.cert.subject());
        assert!(ca.cert.subject_matches_issuer_of(&leaf));
        let path = verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .unwrap();
        assert_eq!(path.certs.len(), 3);
        assert!(pki_core::issued_by(&leaf, &ca.cert).issued_by);
    }

    #[test]
    fn issuer_name_with_another_word_does_not_chain() {
        let root = new_root("root", 1);
        let ca = custom::ca(
            &root,
            custom::name(&[(CN, Tag::Utf8String, "Issuing CA")]),
            vec![],
            2,
        );
        let issuer = custom::name(&[(CN, Tag::Utf8String, "IssuingCA")]);
        let leaf = custom::server_leaf(
            &ca,
            issuer,
            custom::name(&[(CN, Tag::Utf8String, "web")]),
            vec![],
            3,
        );
        let err = verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .unwrap_err();
        assert!(matches!(err, VerifyError::UnknownIssuer { .. }), "{err}");
    }
}

mod name_constraints {
    //! pki-core does not issue nameConstraints, so these CAs are built with
    //! x509-cert's builder directly.

    use super::*;
    use der::asn1::{Ia5String, OctetString};
    use x509_cert::ext::pkix::NameConstraints;
    use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
    use x509_cert::ext::pkix::name::GeneralName;

    fn subtree(base: GeneralName) -> GeneralSubtree {
        GeneralSubtree {
            base,
            minimum: 0,
            maximum: None,
        }
    }

    fn dns_tree(name: &str) -> GeneralSubtree {
        subtree(GeneralName::DnsName(Ia5String::new(name).unwrap()))
    }

    fn ip_tree(net_and_mask: &[u8]) -> GeneralSubtree {
        subtree(GeneralName::IpAddress(
            OctetString::new(net_and_mask).unwrap(),
        ))
    }

    /// An intermediate under `root` with `nc`.
    fn constrained(
        root: &CertificateAuthority,
        nc: NameConstraints,
        seed: u64,
    ) -> CertificateAuthority {
        let subject = pki_core::common_name_to_name("constrained").unwrap();
        let nc = custom::ext(&nc, &subject);
        custom::ca(root, subject, vec![nc], seed)
    }

    fn check(
        ca: &CertificateAuthority,
        root: &CertificateAuthority,
        dns: &[&str],
        ips: &[&str],
    ) -> Result<(), VerifyError> {
        let leaf = leaf_with(ca, Profile::Server, dns, ips, NOW, 50);
        verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .map(|_| ())
    }

    #[test]
    fn permitted_dns_subtree_admits_names_below_it_only() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: Some(vec![dns_tree("allowed.example")]),
                excluded_subtrees: None,
            },
            2,
        );
        check(&ca, &root, &["allowed.example", "a.allowed.example"], &[]).unwrap();
        check(&ca, &root, &["*.allowed.example"], &[]).unwrap();
        let err = check(&ca, &root, &["a.allowed.example", "evil.example"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { ref name, reason: "outside every permitted subtree", .. } if name == "DNS:evil.example"),
            "{err}"
        );
        let err = check(&ca, &root, &["notallowed.example"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { .. }),
            "{err}"
        );
    }

    #[test]
    fn excluded_subtrees_refuse_names_and_wildcards_that_cover_them() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: None,
                excluded_subtrees: Some(vec![
                    dns_tree("secret.example"),
                    ip_tree(&[10, 0, 0, 0, 255, 0, 0, 0]),
                ]),
            },
            2,
        );
        check(&ca, &root, &["public.example"], &["192.168.1.1"]).unwrap();
        for (dns, ips) in [
            (&["db.secret.example"][..], &[][..]),
            (&["*.secret.example"][..], &[][..]),
            (&["public.example"][..], &["10.1.2.3"][..]),
        ] {
            let err = check(&ca, &root, dns, ips).unwrap_err();
            assert!(
                matches!(
                    err,
                    VerifyError::NameConstraintViolation {
                        reason: "within an excluded subtree",
                        ..
                    }
                ),
                "{dns:?} {ips:?}: {err}"
            );
        }
        // `*.example` may stand for `secret.example`.
        let err = check(&ca, &root, &["*.example.org", "*.example"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { .. }),
            "{err}"
        );
    }

    #[test]
    fn permitted_ip_subtree_applies_the_mask() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: Some(vec![ip_tree(&[10, 0, 0, 0, 255, 255, 0, 0])]),
                excluded_subtrees: None,
            },
            2,
        );
        // DNS names are not constrained by IP subtrees.
        check(&ca, &root, &["web"], &["10.0.200.1"]).unwrap();
        let err = check(&ca, &root, &["web"], &["10.1.0.1"]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { .. }),
            "{err}"
        );
    }

    #[test]
    fn permitted_directory_name_constrains_the_leaf_subject() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: Some(vec![subtree(GeneralName::DirectoryName(
                    "CN=internal".parse().unwrap(),
                ))]),
                excluded_subtrees: None,
            },
            2,
        );
        let err = check(&ca, &root, &["web"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { ref name, .. } if name.starts_with("DirName:")),
            "{err}"
        );
    }
}

mod directory_name_constraints {
    use super::custom::{self, CN, O};
    use super::*;
    use der::Tag;
    use x509_cert::ext::pkix::NameConstraints;
    use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
    use x509_cert::ext::pkix::name::GeneralName;

    fn ca_with(
        permitted: Option<&str>,
        excluded: Option<&str>,
    ) -> (CertificateAuthority, CertificateAuthority) {
        let root = new_root("root", 1);
        let tree = |o: &str| {
            vec![GeneralSubtree {
                base: GeneralName::DirectoryName(custom::name(&[(O, Tag::PrintableString, o)])),
                minimum: 0,
                maximum: None,
            }]
        };
        let nc = NameConstraints {
            permitted_subtrees: permitted.map(tree),
            excluded_subtrees: excluded.map(tree),
        };
        let subject = custom::name(&[(CN, Tag::Utf8String, "constrained")]);
        let nc = custom::ext(&nc, &subject);
        let ca = custom::ca(&root, subject, vec![nc], 2);
        (root, ca)
    }

    fn leaf_in(ca: &CertificateAuthority, organization: &str) -> Certificate {
        let subject = custom::name(&[
            (O, Tag::Utf8String, organization),
            (CN, Tag::Utf8String, "web"),
        ]);
        custom::server_leaf(ca, ca.cert.subject().clone(), subject, vec![], 3)
    }

    fn verify(
        root: &CertificateAuthority,
        ca: &CertificateAuthority,
        leaf: &Certificate,
    ) -> Result<(), VerifyError> {
        verify_chain(
            leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .map(|_| ())
    }

    #[test]
    fn permitted_directory_name_matches_another_case_spacing_and_string_type() {
        let (root, ca) = ca_with(Some("Example Corp"), None);
        verify(&root, &ca, &leaf_in(&ca, "EXAMPLE   corp")).unwrap();
        let err = verify(&root, &ca, &leaf_in(&ca, "Other Corp")).unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation {
                    reason: "outside every permitted subtree",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn excluded_directory_name_cannot_be_dodged_by_case_or_spacing() {
        let (root, ca) = ca_with(None, Some("Secret Corp"));
        verify(&root, &ca, &leaf_in(&ca, "Public Corp")).unwrap();
        let err = verify(&root, &ca, &leaf_in(&ca, " secret  CORP")).unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation {
                    reason: "within an excluded subtree",
                    ..
                }
            ),
            "{err}"
        );
    }
}

mod email_and_uri_constraints {
    //! rfc822Name constraints (on subjectAltName e-mail addresses and on
    //! the subject DN's emailAddress attributes) and URI constraints.

    use super::custom::{self, CN, constrained_ca, dns_name, email, subtrees, verify_leaf};
    use super::*;
    use der::Tag;
    use der::asn1::Ia5String;
    use x509_cert::ext::pkix::NameConstraints;
    use x509_cert::ext::pkix::name::GeneralName;

    fn uri(s: &str) -> GeneralName {
        GeneralName::UniformResourceIdentifier(Ia5String::new(s).unwrap())
    }

    fn assert_violation(result: Result<(), VerifyError>, name: &str) {
        match result {
            Err(VerifyError::NameConstraintViolation { name: n, .. }) if n.starts_with(name) => {}
            other => panic!("expected a violation by {name}, got {other:?}"),
        }
    }

    #[test]
    fn subject_email_address_outside_a_permitted_rfc822_subtree_is_refused() {
        // The leaf has no e-mail subjectAltName, only a DNS one: the DN's
        // emailAddress must still be checked.
        let ca = constrained_ca(NameConstraints {
            permitted_subtrees: subtrees(vec![email(".example.com")]),
            excluded_subtrees: None,
        });
        verify_leaf(&ca, Some("ops@mail.example.com"), vec![dns_name("web")]).unwrap();
        assert_violation(
            verify_leaf(&ca, Some("attacker@evil.test"), vec![dns_name("web")]),
            "email:attacker@evil.test",
        );
    }

    #[test]
    fn subject_email_address_in_an_excluded_rfc822_subtree_is_refused() {
        let ca = constrained_ca(NameConstraints {
            permitted_subtrees: None,
            excluded_subtrees: subtrees(vec![email("evil.test")]),
        });
        verify_leaf(&ca, Some("ops@good.test"), vec![dns_name("web")]).unwrap();
        assert_violation(
            verify_leaf(&ca, Some("OPS@EVIL.test"), vec![]),
            "email:OPS@EVIL.test",
        );
    }

    #[test]
    fn rfc822_subject_alt_names_are_checked_against_mailbox_host_and_domain_subtrees() {
        let ca = constrained_ca(NameConstraints {
            permitted_subtrees: subtrees(vec![
                email("root@admin.test"),
                email("example.com"),
                email(".corp.test"),
            ]),
            excluded_subtrees: None,
        });
        verify_leaf(
            &ca,
            None,
            vec![
                email("root@ADMIN.test"),
                email("ops@example.com"),
                email("ops@mail.corp.test"),
            ],
        )
        .unwrap();
        for outside in ["other@admin.test", "ops@mail.example.com", "ops@corp.test"] {
            assert_violation(
                verify_leaf(&ca, None, vec![email(outside)]),
                &format!("email:{outside}"),
            );
        }
    }

    #[test]
    fn uri_subject_alt_names_are_checked_by_host() {
        let ca = constrained_ca(NameConstraints {
            permitted_subtrees: subtrees(vec![uri(".example.com"), uri("api.test")]),
            excluded_subtrees: subtrees(vec![uri("secret.example.com")]),
        });
        verify_leaf(
            &ca,
            None,
            vec![
                uri("https://www.example.com/index.html"),
                uri("spiffe://api.test/ns/default"),
            ],
        )
        .unwrap();
        for bad in [
            "https://evil.test/",
            "https://secret.example.com/x",
            "https://example.com/",
            "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
            "https://10.0.0.1/",
        ] {
            assert_violation(
                verify_leaf(&ca, None, vec![uri(bad)]),
                &format!("URI:{bad}"),
            );
        }
    }

    #[test]
    fn name_constraint_work_counts_in_the_budget_and_fails_fast() {
        // 5 intermediates with 2,000 excluded subtrees each over a leaf
        // with 10,000 names: 10^8 comparisons if nothing stops them.
        let root = new_root("root", 1);
        let excluded: Vec<GeneralName> = (0..2000)
            .map(|i| dns_name(&format!("excluded-{i}.example")))
            .collect();
        let mut cas: Vec<CertificateAuthority> = Vec::new();
        for level in 0..5 {
            let parent = cas.last().unwrap_or(&root);
            let subject = custom::name(&[(CN, Tag::Utf8String, &format!("ca-{level}"))]);
            let nc = NameConstraints {
                permitted_subtrees: None,
                excluded_subtrees: subtrees(excluded.clone()),
            };
            let nc = custom::ext(&nc, &subject);
            let ca = custom::ca(parent, subject, vec![nc], 10 + level);
            cas.push(ca);
        }
        let names: Vec<String> = (0..10_000).map(|i| format!("host-{i}.internal")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let leaf = leaf_with(cas.last().unwrap(), Profile::Server, &names, &[], NOW, 3);
        let chain: Vec<Certificate> = cas.iter().rev().map(|c| c.cert.clone()).collect();

        let started = std::time::Instant::now();
        let err = verify_chain(&leaf, &chain, &bundle(&[&root.cert]), &opts()).unwrap_err();
        assert_eq!(
            err,
            VerifyError::BudgetExceeded {
                what: BudgetKind::NameConstraintChecks
            }
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "took {:?}",
            started.elapsed()
        );

        // With a budget large enough, the same path verifies: nothing is excluded.
        let mut o = opts();
        o.budget.name_constraint_checks = usize::MAX;
        let small = leaf_with(
            cas.last().unwrap(),
            Profile::Server,
            &names[..10],
            &[],
            NOW,
            4,
        );
        verify_chain(&small, &chain, &bundle(&[&root.cert]), &o).unwrap();
    }
}
