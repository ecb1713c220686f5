//! The URI reader: the examples of RFC 7512 §3, and each refusal.

use super::*;

fn refused(input: &str) -> String {
    match Pkcs11Uri::parse(input) {
        Ok(uri) => panic!("{input} was accepted as {uri:?}"),
        Err(e) => {
            let text = e.to_string();
            assert!(!text.contains('\n'), "one line: {text}");
            text
        }
    }
}

#[test]
fn reads_token_object_id_and_pin_source() {
    let uri = Pkcs11Uri::parse(
        "pkcs11:token=pki%20CA;object=root-2026;type=private;id=%01%a2?pin-source=file:/run/pki/pin",
    )
    .unwrap();
    assert_eq!(uri.token.as_deref(), Some("pki CA"));
    assert_eq!(uri.object.as_deref(), Some("root-2026"));
    assert_eq!(uri.object_type, Some(Pkcs11ObjectType::Private));
    assert_eq!(uri.id.as_deref(), Some(&[0x01, 0xa2][..]));
    assert_eq!(uri.pin_source.as_deref(), Some("file:/run/pki/pin"));
    assert_eq!(uri.pin_file(), Some("/run/pki/pin"));
    assert_eq!(
        uri.to_string(),
        "pkcs11:token=pki%20CA;object=root-2026;type=private;id=%01%A2?pin-source=file:/run/pki/pin"
    );
    assert_eq!(
        uri.without_query().to_string(),
        "pkcs11:token=pki%20CA;object=root-2026;type=private;id=%01%A2"
    );
    assert_eq!(uri.describe_object(), "object=\"root-2026\" id=%01%A2");
}

#[test]
fn reads_the_examples_of_rfc_7512_that_use_only_what_pki_reads() {
    for example in [
        "pkcs11:",
        "pkcs11:object=my-pubkey;type=public",
        "pkcs11:object=my-key;type=private?pin-source=file:/etc/token",
        "pkcs11:token=The%20Software%20PKCS%2311%20Softtoken;manufacturer=Snake%20Oil,%20Inc.;model=1.0;object=my-certificate;type=cert;id=%69%95%3E%5C%F4%BE%2D%B3%B5%39%5C%6B%6B%37%37%37?pin-source=file:/etc/token_pin",
        "pkcs11:object=my-sign-key;type=private?module-path=/usr/lib64/libmypkcs11.so",
        "pkcs11:token=Software%20PKCS%2311%20softtoken;manufacturer=Snake%20Oil,%20Inc.?pin-source=file:/etc/token_pin",
        "pkcs11:token=A%20name%20with%20a%20substring%20%25%3B;object=my-certificate;type=cert",
        "pkcs11:token=Name%20with%20a%20small%20A%20with%20acute:%20%C3%A1;object=my-certificate;type=cert",
        "PKCS11:token=upper-case%20scheme",
    ] {
        let uri = Pkcs11Uri::parse(example).unwrap_or_else(|e| panic!("{example}: {e}"));
        let again = Pkcs11Uri::parse(&uri.to_string()).unwrap();
        assert_eq!(again, uri, "{example}");
    }
    let uri = Pkcs11Uri::parse(
        "pkcs11:token=A%20name%20with%20a%20substring%20%25%3B;object=my-certificate;type=cert",
    )
    .unwrap();
    assert_eq!(uri.token.as_deref(), Some("A name with a substring %;"));
    let uri = Pkcs11Uri::parse("pkcs11:token=Name%20with%20a%20small%20A%20with%20acute:%20%C3%A1")
        .unwrap();
    assert_eq!(
        uri.token.as_deref(),
        Some("Name with a small A with acute: \u{e1}")
    );
}

#[test]
fn refuses_attributes_it_does_not_read_by_name() {
    let text = refused("pkcs11:token=a;slot-id=2");
    assert!(text.contains("\"slot-id\" is not supported"), "{text}");
    assert!(text.contains("token, manufacturer"), "{text}");
    let text = refused("pkcs11:token=a;x-vendor=1");
    assert!(text.contains("\"x-vendor\" is not supported"), "{text}");
    let text = refused("pkcs11:tokn=a");
    assert!(text.contains("unknown path attribute \"tokn\""), "{text}");
    // A name with a line break in it stays on one line (found by fuzzing).
    let text = refused("pkcs11:tok\n\nen=a%zz");
    assert!(text.contains("\"tok\\n\\nen\""), "{text}");
    let text = refused("pkcs11:token=a?module-name=softhsm2");
    assert!(text.contains("\"module-name\" is not supported"), "{text}");
    let text = refused("pkcs11:token=a?pin=1234");
    assert!(text.contains("unknown query attribute \"pin\""), "{text}");
}

#[test]
fn refuses_an_attribute_given_twice() {
    for input in [
        "pkcs11:token=a;token=b",
        "pkcs11:id=%01;object=k;id=%02",
        "pkcs11:token=a?pin-source=file:/a&pin-source=file:/b",
    ] {
        let text = refused(input);
        assert!(text.contains("appears more than once"), "{input}: {text}");
    }
}

#[test]
fn refuses_a_pin_in_the_uri_without_repeating_it() {
    let text = refused("pkcs11:token=a?pin-value=secret-1234");
    assert!(text.contains("pin-source=file:"), "{text}");
    assert!(!text.contains("secret-1234"), "{text}");
}

#[test]
fn refuses_malformed_values() {
    for (input, expected) in [
        ("pkcs11", "starts with \"pkcs11:\""),
        ("pk:token=a", "starts with \"pkcs11:\""),
        ("https://example/", "starts with \"pkcs11:\""),
        ("pkcs11:token", "has no value"),
        ("pkcs11:token=", "is empty"),
        ("pkcs11:token=a b", "must be percent-encoded (as %20)"),
        ("pkcs11:token=a/b", "must be percent-encoded (as %2F)"),
        ("pkcs11:object=\u{e9}", "must be percent-encoded (as %C3)"),
        ("pkcs11:id=%0", "bad percent-escape"),
        ("pkcs11:id=%zz", "bad percent-escape"),
        ("pkcs11:id=%+1", "bad percent-escape"),
        ("pkcs11:token=%ff", "not UTF-8"),
        ("pkcs11:type=key", "not an object type"),
    ] {
        let text = refused(input);
        assert!(text.contains(expected), "{input}: {text}");
        assert!(text.starts_with("PKCS#11 URI: "), "{text}");
    }
}

#[test]
fn pin_file_reads_file_uris_and_absolute_paths_only() {
    let with = |source: &str| Pkcs11Uri {
        pin_source: Some(source.into()),
        ..Pkcs11Uri::default()
    };
    assert_eq!(with("file:/run/pin").pin_file(), Some("/run/pin"));
    assert_eq!(with("file:///run/pin").pin_file(), Some("/run/pin"));
    assert_eq!(with("/run/pin").pin_file(), Some("/run/pin"));
    assert_eq!(with("file://host/run/pin").pin_file(), None);
    assert_eq!(with("file:relative").pin_file(), None);
    assert_eq!(with("|/bin/askpin").pin_file(), None);
    assert_eq!(Pkcs11Uri::default().pin_file(), None);
}
