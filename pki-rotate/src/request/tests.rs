use super::*;

#[test]
fn an_unknown_field_is_refused_by_name() {
    let e = from_json::<KeyRingStep>("input", br#"{"forcd": "x"}"#).unwrap_err();
    assert!(
        matches!(&e, RequestError::UnknownField { field, .. } if field == "forcd"),
        "{e}"
    );
}

#[test]
fn another_schema_version_is_refused() {
    let e = from_json::<KeyRingStep>("input", br#"{"version": 2}"#).unwrap_err();
    assert!(
        matches!(
            e,
            RequestError::UnsupportedVersion {
                version: 2,
                supported: 1,
                ..
            }
        ),
        "{e}"
    );
    let e = from_json::<KeyRingStep>("input", br#"{"version": "1"}"#).unwrap_err();
    assert!(matches!(e, RequestError::Json { .. }), "{e}");
}

#[test]
fn version_one_or_none_reads_the_same_request() {
    let with: KeyRingStep = from_json("input", br#"{"version": 1, "forced": "r"}"#).unwrap();
    let without: KeyRingStep = from_json("input", br#"{"forced": "r"}"#).unwrap();
    assert_eq!(with.forced, without.forced);
}

#[test]
fn an_empty_step_request_is_the_periodic_step() {
    for bytes in [None, Some(&b"{}"[..]), Some(&br#"{"version": 1}"#[..])] {
        let set: SetStepRequest = from_json_or_default("input", bytes).unwrap();
        assert!(matches!(set, SetStepRequest::Nothing));
        let cred: CredStep = from_json_or_default("input", bytes).unwrap();
        assert!(matches!(cred, CredStep::Default));
    }
}

#[test]
fn requests_serialise_to_what_they_read() {
    let text = r#"{"issue":{"name":"web","ca":"cluster","serving":true,"client":false,"dns_names":["a"],"target":"n1","replace":false}}"#;
    let set: SetStepRequest = from_json("input", text.as_bytes()).unwrap();
    assert_eq!(serde_json::to_string(&set).unwrap(), text);
}
