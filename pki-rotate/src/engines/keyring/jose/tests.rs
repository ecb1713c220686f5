//! Tests of the JOSE subset: RFC 7638 thumbprints, JWK round trips,
//! token signing and verification, and what is refused.

use super::*;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as Base64UrlUnpadded;
use serde_json::{Map, Value};

/// The RSA key of RFC 7638 §3.1 (from RFC 7517 Appendix A.1).
const RFC7638_N: &str = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
const RFC7638_THUMBPRINT: &str = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs";

fn rfc_jwk() -> Map<String, Value> {
    let v = serde_json::json!({
        "kty": "RSA",
        "n": RFC7638_N,
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    });
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn thumbprint_matches_the_rfc_7638_worked_example() {
    assert_eq!(jwk_thumbprint(&rfc_jwk()).unwrap(), RFC7638_THUMBPRINT);
    // Through the key: decoding n and e and encoding them again must
    // give the same members, so the kid we publish is the RFC's.
    let mut jwk = rfc_jwk();
    jwk.remove("kid");
    let key = PublicKey::from_jwk(&jwk, "RFC 7638 key").unwrap();
    assert_eq!(key.thumbprint(), RFC7638_THUMBPRINT);
    assert_eq!(key.to_jwk()["n"], RFC7638_N);
    assert_eq!(key.to_jwk()["kid"], RFC7638_THUMBPRINT);
    // And through SPKI DER, the form the ring stores.
    let again = PublicKey::from_spki_der(&key.to_spki_der()).unwrap();
    assert_eq!(again.thumbprint(), RFC7638_THUMBPRINT);
}

#[test]
fn a_jwk_whose_kid_is_not_its_thumbprint_is_refused() {
    let err = PublicKey::from_jwk(&rfc_jwk(), "k").unwrap_err();
    assert!(err.to_string().contains("not the key's RFC 7638"), "{err}");
}

#[test]
fn ec_coordinates_are_full_length_even_with_leading_zeros() {
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    // About one key in 128 has a coordinate starting with a zero byte.
    let mut seen_leading_zero = false;
    for _ in 0..600 {
        let key =
            pki_core::PrivateKey::generate(pki_core::KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
        let public = PublicKey::from_spki_der(&key.public_key_der().unwrap()).unwrap();
        let jwk = public.to_jwk();
        for c in ["x", "y"] {
            let bytes = Base64UrlUnpadded
                .decode(jwk[c].as_str().unwrap_or_default())
                .unwrap();
            assert_eq!(bytes.len(), 32);
            seen_leading_zero |= bytes[0] == 0;
        }
        assert_eq!(PublicKey::from_jwk(&jwk, "k").unwrap(), public);
    }
    assert!(
        seen_leading_zero,
        "the sample never exercised a leading zero"
    );
}

fn signer_and_key(alg: pki_core::KeyAlgorithm) -> (TokenSigner, PublicKey) {
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;
    let key = pki_core::PrivateKey::generate(alg, &mut ChaCha20Rng::seed_from_u64(9)).unwrap();
    let public = PublicKey::from_spki_der(&key.public_key_der().unwrap()).unwrap();
    (TokenSigner::new(&key.into()).unwrap(), public)
}

#[test]
fn tokens_round_trip_and_tampering_is_caught() {
    for alg in [
        pki_core::KeyAlgorithm::EcdsaP256,
        pki_core::KeyAlgorithm::Rsa2048,
    ] {
        let (signer, public) = signer_and_key(alg);
        let kid = public.thumbprint();
        let claims = br#"{"sub":"system:serviceaccount:ns:sa","exp":2000}"#;
        let token = sign(&signer, &kid, claims).unwrap();
        let parsed = ParsedToken::parse(token.as_bytes()).unwrap();
        assert_eq!(parsed.kid, kid);
        parsed.verify_signature(&public).unwrap();
        parsed.check_time(1999).unwrap();
        assert!(matches!(
            parsed.check_time(2000),
            Err(JoseError::Expired { .. })
        ));
        // The payload is the claims byte for byte.
        let payload = token.split('.').nth(1).unwrap_or_default();
        assert_eq!(Base64UrlUnpadded.decode(payload).unwrap(), claims);
        // Another payload under the same signature does not verify.
        let forged_payload = Base64UrlUnpadded.encode(br#"{"sub":"admin"}"#);
        let mut parts: Vec<&str> = token.split('.').collect();
        parts[1] = &forged_payload;
        let forged = parts.join(".");
        let err = ParsedToken::parse(forged.as_bytes())
            .unwrap()
            .verify_signature(&public)
            .unwrap_err();
        assert!(matches!(err, JoseError::BadSignature(_)), "{err}");
    }
}

#[test]
fn high_s_ecdsa_signatures_verify_as_other_signers_produce_them() {
    let (signer, public) = signer_and_key(pki_core::KeyAlgorithm::EcdsaP256);
    let token = sign(&signer, "k", b"{}").unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let sig = Base64UrlUnpadded.decode(parts[2]).unwrap();
    let s = p256::ecdsa::Signature::from_slice(&sig).unwrap();
    let (r, s_bytes) = s.split_scalars();
    let high = p256::ecdsa::Signature::from_scalars(r, -*s_bytes).unwrap();
    let other = format!(
        "{}.{}.{}",
        parts[0],
        parts[1],
        Base64UrlUnpadded.encode(high.to_bytes())
    );
    ParsedToken::parse(other.as_bytes())
        .unwrap()
        .verify_signature(&public)
        .unwrap();
}

#[test]
fn algorithm_confusion_and_odd_headers_are_refused() {
    let (_, ec) = signer_and_key(pki_core::KeyAlgorithm::EcdsaP256);
    let (rsa_signer, _) = signer_and_key(pki_core::KeyAlgorithm::Rsa2048);
    let token = sign(&rsa_signer, "k", b"{}").unwrap();
    let err = ParsedToken::parse(token.as_bytes())
        .unwrap()
        .verify_signature(&ec)
        .unwrap_err();
    assert!(matches!(err, JoseError::AlgorithmMismatch { .. }), "{err}");
    let enc = |v: &str| Base64UrlUnpadded.encode(v.as_bytes());
    for (header, expect) in [
        (r#"{"alg":"none","kid":"k"}"#, "\"none\" is not accepted"),
        (r#"{"alg":"HS256","kid":"k"}"#, "\"HS256\" is not accepted"),
        (
            r#"{"alg":"ES256","kid":"k","crit":["exp"]}"#,
            "critical extensions",
        ),
        (r#"{"alg":"ES256"}"#, "no string \"kid\""),
        (r#"[1]"#, "not a JSON object"),
    ] {
        let t = format!("{}.{}.{}", enc(header), enc("{}"), enc("sig"));
        let err = ParsedToken::parse(t.as_bytes()).unwrap_err().to_string();
        assert!(err.contains(expect), "{header}: {err}");
    }
    for bad in [
        "",
        "a.b",
        "a.b.c.d",
        "!!.e30.AA",
        "e30.e30.A===",
        "\u{e9}.a.b",
    ] {
        assert!(ParsedToken::parse(bad.as_bytes()).is_err(), "{bad:?}");
    }
}

#[test]
fn jwks_round_trips_and_refuses_private_or_short_keys() {
    let (_, ec) = signer_and_key(pki_core::KeyAlgorithm::EcdsaP256);
    let (_, rsa) = signer_and_key(pki_core::KeyAlgorithm::Rsa2048);
    let set = Jwks {
        keys: vec![ec.clone(), rsa.clone()],
    };
    let json = set.to_json();
    assert_eq!(Jwks::parse(json.as_bytes()).unwrap(), set);
    let mut with_d = ec.to_jwk();
    with_d.insert("d".into(), Value::String("AAAA".into()));
    let doc = serde_json::json!({"keys": [with_d]}).to_string();
    assert!(
        Jwks::parse(doc.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("private key")
    );
    let short = serde_json::json!({"keys": [{"kty":"RSA","n":"AQAB","e":"AQAB"}]}).to_string();
    assert!(Jwks::parse(short.as_bytes()).is_err());
    for bad in ["", "[]", "{}", r#"{"keys":{}}"#, r#"{"keys":[1]}"#] {
        assert!(Jwks::parse(bad.as_bytes()).is_err(), "{bad:?}");
    }
}
