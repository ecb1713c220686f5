use super::*;

fn digests(bundle: &str, leaves: &[(&str, &str)]) -> Digests {
    Digests {
        bundle: bundle.into(),
        leaves: leaves
            .iter()
            .map(|(l, d)| ((*l).to_string(), (*d).to_string()))
            .collect(),
    }
}

#[test]
fn a_plan_writes_what_changed_and_deletes_what_went() {
    let names = DocumentNames::new("s", "signer");
    let old = digests("b", &[("a", "1"), ("b", "2"), ("gone", "3")]);
    let new = digests("b", &[("a", "1"), ("b", "9"), ("new", "4")]);
    let plan = Plan::between(&names, &old, &new);
    assert_eq!(plan.write, ["b", "new"]);
    assert_eq!(plan.delete, ["s.signer.leaf.gone"]);
    let none = Plan::between(&names, &new, &new);
    assert!(none.write.is_empty() && none.delete.is_empty());
}

#[test]
fn a_leaf_digest_covers_its_chain_key_and_bundle() {
    let mut files = Files::new();
    let add = |files: &mut Files, path: &str, bytes: &str| {
        let file = pki_rotate::File::public(bytes.as_bytes().to_vec());
        files.insert(path, file).unwrap();
    };
    add(&mut files, "ca-bundle.crt", "bundle");
    add(&mut files, "certs/web/tls.crt", "chain");
    add(&mut files, "certs/web/tls.key", "key");
    let first = Digests::of(Publication::of(&files).as_ref());
    for (path, bytes) in [
        ("certs/web/tls.crt", "chain2"),
        ("certs/web/tls.key", "key2"),
        ("ca-bundle.crt", "bundle2"),
    ] {
        let mut changed = files.clone();
        add(&mut changed, path, bytes);
        let other = Digests::of(Publication::of(&changed).as_ref());
        assert_ne!(other.leaves["web"], first.leaves["web"], "{path}");
    }
    // Parts are length-prefixed: moving bytes between them shows.
    assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
}
