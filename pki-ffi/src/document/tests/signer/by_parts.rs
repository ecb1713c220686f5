//! `"unless_idle": true` with `leaves`: a leaf change inside the store's
//! summary goes over the document's head and those leaves only.

use super::*;

/// Whether the step went by parts, and the names of the leaves its status
/// reports.
fn by_parts(step: StepResult) -> (bool, Vec<String>) {
    let (parts, status) = (step.by_parts, step.status);
    let names = status["leaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    (parts, names)
}

fn request(name: &str) -> Value {
    json!({"request": {"name": name, "kind": "server", "dns_names": [format!("{name}.ns.svc")]}})
}

#[test]
fn leaf_changes_inside_the_summary_go_by_parts_and_the_store_keeps_every_leaf() {
    let store = memory();
    assert_eq!(
        create(&store, &json!({"common_name": "service-ca"})),
        PKI_RESULT_OK
    );
    for name in ["a", "b", "c"] {
        let whole = step(&store, Some(&json!({"leaves": [request(name)]})), at(1)).unwrap();
        assert!(!whole.by_parts);
        take(whole);
    }
    let (_, revision) = load(store.0);

    let input = json!({"unless_idle": true, "leaves": [request("d"), {"renew": {"name": "a"}}]});
    let (parts, names) = by_parts(step(&store, Some(&input), at(2)).unwrap());
    assert!(parts, "a leaf change inside the promise goes by parts");
    assert_eq!(names, ["a", "d"]);
    let (doc, after) = load(store.0);
    assert_ne!(after, revision);
    assert_eq!(doc.leaves.keys().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    assert!(doc.leaves.values().all(|l| l.issued.is_some()));

    // With nothing asked it is the idle step; with a policy it is refused.
    let idle = step(&store, Some(&json!({"unless_idle": true})), at(2)).unwrap();
    assert!(idle.idle && !idle.by_parts);
    take(idle);
    for refused in [
        json!({"unless_idle": true, "leaves": [request("e")], "policy": {"lifetime_seconds": 86400}}),
        json!({"unless_idle": true, "leaves": [request("e")], "forced": {"reason": "x"}}),
        json!({"unless_idle": true, "renew_same_key": true}),
    ] {
        assert_eq!(
            step_code(&store, &refused, at(2)),
            PKI_RESULT_INVALID_ARGUMENT,
            "{refused}"
        );
        crate::error::with_last_error(|m| assert!(m.contains("unless_idle"), "{m}"));
    }
    assert_eq!(load(store.0).1, after, "a refused step writes nothing");

    // Past the promise (the CA's rotation point) the step is whole.
    let late = at(500);
    let (parts, names) = by_parts(
        step(
            &store,
            Some(&json!({"unless_idle": true, "leaves": [request("e")]})),
            late,
        )
        .unwrap(),
    );
    assert!(!parts);
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
}
