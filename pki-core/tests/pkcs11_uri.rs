//! PKCS#11 URIs (RFC 7512) round-trip: any URI pki can hold writes a text
//! that reads back to the same value, and that text is canonical.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::{Pkcs11ObjectType, Pkcs11Uri};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = Option<String>> {
    // Any non-empty text: reserved characters, `%`, `;`, `?`, `&`, `=`,
    // spaces and non-ASCII letters must all survive the encoding.
    proptest::option::of("[a-zA-Z0-9 %;?&=/:@!$'()*+,~._\\-\u{e1}\u{4e2d}\u{1f511}]{1,24}")
}

fn object_type() -> impl Strategy<Value = Option<Pkcs11ObjectType>> {
    proptest::option::of(prop_oneof![
        Just(Pkcs11ObjectType::Private),
        Just(Pkcs11ObjectType::Public),
        Just(Pkcs11ObjectType::Cert),
        Just(Pkcs11ObjectType::SecretKey),
        Just(Pkcs11ObjectType::Data),
    ])
}

fn uri() -> impl Strategy<Value = Pkcs11Uri> {
    (
        (text(), text(), text(), text(), text()),
        object_type(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 1..20)),
        (text(), text()),
    )
        .prop_map(
            |((token, manufacturer, serial, model, object), object_type, id, (pin, module))| {
                Pkcs11Uri {
                    token,
                    manufacturer,
                    serial,
                    model,
                    object,
                    object_type,
                    id,
                    pin_source: pin,
                    module_path: module,
                }
            },
        )
}

proptest! {
    #[test]
    fn every_uri_reads_back_from_its_text(uri in uri()) {
        let written = uri.to_string();
        let back = Pkcs11Uri::parse(&written).unwrap();
        prop_assert_eq!(&back, &uri, "{}", written);
        prop_assert_eq!(back.to_string(), written.clone());
        // Only the characters RFC 7512 allows unencoded are left.
        prop_assert!(written.is_ascii(), "{}", written);
        prop_assert!(!written.contains(' '), "{}", written);
        let stored = Pkcs11Uri::parse(&uri.without_query().to_string()).unwrap();
        prop_assert_eq!(stored.pin_source, None);
        prop_assert_eq!(stored.token, uri.token);
    }

    #[test]
    fn any_text_is_read_or_refused_in_one_line(input in "pkcs11:[ -~]{0,60}") {
        match Pkcs11Uri::parse(&input) {
            Ok(uri) => prop_assert_eq!(Pkcs11Uri::parse(&uri.to_string()).unwrap(), uri),
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }
}
