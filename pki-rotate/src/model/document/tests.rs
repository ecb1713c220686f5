use super::*;

#[test]
fn paths_with_dot_segments_or_odd_bytes_are_refused() {
    for bad in [
        "",
        "/abs",
        "a//b",
        ".data",
        "certs/../x",
        "certs/./x",
        "a b",
        "a\nb",
        "tail/",
    ] {
        assert!(validate_path(bad).is_err(), "{bad:?}");
    }
    for good in ["pki-state.json", "signer/tls.crt", "certs/web.ns_1/tls.key"] {
        validate_path(good).unwrap();
    }
}

#[test]
fn envelope_refuses_other_kinds_and_newer_versions() {
    let probe = |s: &str| Envelope::probe("doc", s.as_bytes()).unwrap();
    let legacy = |v: u32| v == 1;
    probe(r#"{"kind":"signer","version":2}"#)
        .check("doc", "signer", 2, legacy)
        .unwrap();
    probe(r#"{"version":1}"#)
        .check("doc", "signer", 2, legacy)
        .unwrap();
    let err = probe(r#"{"kind":"key-ring","version":1}"#)
        .check("doc", "signer", 2, legacy)
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds a \"key-ring\" document"), "{err}");
    let err = probe(r#"{"kind":"signer","version":3}"#)
        .check("doc", "signer", 2, legacy)
        .unwrap_err()
        .to_string();
    assert!(err.contains("version 3 is not supported"), "{err}");
    assert!(
        probe(r#"{"version":2}"#)
            .check("doc", "signer", 2, legacy)
            .is_err()
    );
    assert!(Envelope::probe("doc", b"{}").is_err());
}

#[test]
fn publication_is_the_top_bundle_and_each_leaf_with_chain_and_key() {
    let mut files = Files::new();
    let put = |f: &mut Files, p: &str, secret: bool| {
        let file = if secret {
            File::secret(p.as_bytes().to_vec())
        } else {
            File::public(p.as_bytes().to_vec())
        };
        f.insert(p, file).unwrap();
    };
    put(&mut files, "certs/web/tls.crt", false);
    put(&mut files, "certs/web/tls.key", true);
    put(&mut files, "certs/web/tls.pem", true);
    put(&mut files, "certs/half/tls.crt", false);
    put(&mut files, "signer/tls.key", true);
    put(&mut files, "targets/t/certs/x/tls.crt", false);
    put(&mut files, "targets/t/certs/x/tls.key", true);
    assert_eq!(Publication::of(&files), None, "no bundle, nothing");
    put(&mut files, "ca-bundle.crt", false);
    let publication = Publication::of(&files).unwrap();
    assert_eq!(publication.bundle, b"ca-bundle.crt");
    let leaves: Vec<_> = publication.leaves.keys().copied().collect();
    assert_eq!(leaves, ["web"]);
    assert_eq!(publication.leaves["web"].chain, b"certs/web/tls.crt");
    assert_eq!(publication.leaves["web"].key, b"certs/web/tls.key");
    let mut sealed = files.clone();
    let mut value = crate::model::MAGIC.to_vec();
    value.extend_from_slice(b"sealed");
    sealed
        .insert("certs/web/tls.key", File::secret(value))
        .unwrap();
    let publication = Publication::of(&sealed).unwrap();
    assert!(
        publication.leaves.is_empty(),
        "a sealed key is not published"
    );
    assert!(is_published_leaf_key("certs/web/tls.key"));
    assert!(is_published_leaf_key("certs/web/tls.pem"));
    for other in [
        "certs/web/tls.crt",
        "signer/tls.key",
        "targets/t/certs/x/tls.key",
        "certs/tls.key",
        "certs/a/b/tls.key",
    ] {
        assert!(!is_published_leaf_key(other), "{other}");
    }
}

#[test]
fn secret_keys_follow_renames_then_replace_slashes() {
    let renames = [("signer/tls.crt", "tls.crt")];
    assert_eq!(secret_data_key("signer/tls.crt", &renames), "tls.crt");
    assert_eq!(
        secret_data_key("certs/web/tls.key", &renames),
        "certs.web.tls.key"
    );
    let mut files = Files::new();
    files
        .insert("signer/tls.crt", File::public(b"a".to_vec()))
        .unwrap();
    files
        .insert("tls.crt", File::public(b"b".to_vec()))
        .unwrap();
    let err = files_to_secret_data(&files, &renames).unwrap_err();
    assert!(err.to_string().contains("another file"), "{err}");
}
