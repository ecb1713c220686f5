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

/// A step of each read, as the C ABI and Go get it: `idle` and `by_parts`
/// say how it was read, a summary's step has no status (its document is
/// the head alone), and only an advance has an action.
#[test]
fn a_step_result_says_how_the_step_was_read() {
    use crate::driver::{Advanced, Read, Step};
    use crate::engines::credential::{Action, Next, WaitReason};
    use serde_json::{Value, json};
    use time::macros::datetime;
    let at = datetime!(2026-01-01 00:00 UTC);
    let step = |read: Read, advance: Option<Advanced>| Step {
        document: "doc",
        revision: crate::Revision::new("7"),
        events: Vec::<String>::new(),
        changed: false,
        next_wake: at,
        attempts: 1,
        read,
        advance,
    };
    let json = |step: &Step<&str, String>| {
        let result = StepResult::of_step(
            step,
            |e| StepEvent::from_value(Value::Null, e.clone()),
            |d| format!(r#"{{"of": "{d}"}}"#),
        );
        serde_json::to_string(&result).unwrap()
    };
    let common =
        r#""version":1,"changed":false,"next_wake":1767225600,"revision":"7","attempts":1"#;
    assert_eq!(
        json(&step(Read::Whole, None)),
        format!(
            r#"{{{common},"idle":false,"by_parts":false,"events":[],"status":{{"of":"doc"}}}}"#
        )
    );
    assert_eq!(
        json(&step(Read::Part, None)),
        format!(r#"{{{common},"idle":false,"by_parts":true,"events":[],"status":{{"of":"doc"}}}}"#)
    );
    let summary = Read::Summary {
        report: json!({"ca_id": "x"}),
    };
    assert_eq!(
        json(&step(summary, None)),
        format!(r#"{{{common},"idle":true,"by_parts":false,"events":[],"status":null}}"#)
    );
    let wait = Advanced {
        next: Next::Act(Action::Wait {
            until: at,
            reason: WaitReason::Expiry,
        }),
        steps: 0,
    };
    assert_eq!(
        json(&step(Read::Whole, Some(wait))),
        format!(
            r#"{{{common},"idle":false,"by_parts":false,"events":[],"status":{{"of":"doc"}},"action":{{"kind":"wait","rotation":0,"attempt":0,"wait_reason":"expiry"}}}}"#
        )
    );
}
