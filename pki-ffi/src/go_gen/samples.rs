//! Fully populated samples of every request of pki-rotate's request
//! schema (each variant of the one-of requests), which the test of
//! `requests` compares with the Go structs. Every field is spelled out, so
//! a field added in Rust fails to compile here until the Go table has it.

use pki_rotate::request::cred::{
    CredAdvance, CredMintFailed, CredMinted, CredRevokeFailed, CredRevoked, CredStrayRevokeFailed,
    CredStrayRevoked,
};
use pki_rotate::request::leaf::{LeafName, NamedLeaf};
use pki_rotate::request::set::{
    SetAbort, SetAck, SetAdvance, SetCa, SetFail, SetImport, SetIssue, SetRetry, SetStart,
    SetTarget,
};
use pki_rotate::request::signer::{AckRequest, ForcedRequest, RotateToRequest};
use pki_rotate::request::step::{ActionKind, NextAction, StepEvent, StepResult, WaitReasonName};
use pki_rotate::request::{
    CaPem, CredCreate, CredStep, KeyRingCreate, KeyRingPolicyFields, KeyRingStep, KeyType,
    LeafChangeRequest, LeafKindName, LeafRequestIn, SetCreate, SetStepRequest, SignerCreate,
    SignerPolicyFields, SignerStep, ValidateRequest,
};
use serde_json::{Value, json};

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

fn named_leaf() -> NamedLeaf {
    NamedLeaf {
        name: "web".into(),
        kind: LeafKindName::Server,
        dns_names: vec!["web.ns.svc".into()],
        ip_addresses: vec!["10.0.0.1".into()],
        lifetime_seconds: Some(86_400),
    }
}

fn signer_policy() -> SignerPolicyFields {
    SignerPolicyFields {
        lifetime_seconds: Some(1),
        min_trust_seconds: Some(1),
        reload_interval_seconds: Some(1),
        leaf_refresh_fraction: Some(0.2),
        keep_previous_root: Some(true),
    }
}

fn signer_samples() -> Vec<(&'static str, Value)> {
    let create = SignerCreate {
        common_name: some("ca"),
        key_type: Some(KeyType::P256),
        key_store: some("pkcs11:token=t"),
        policy: Some(signer_policy()),
        import: Some(CaPem {
            ca: "PEM".into(),
            key: some("PEM"),
            chain: some("PEM"),
        }),
        state: Some(json!({})),
    };
    let step = SignerStep {
        policy: Some(signer_policy()),
        forced: Some(ForcedRequest {
            reason: "r".into(),
            grace_seconds: Some(1),
            no_bridges: true,
        }),
        allow_trust_break: some("r"),
        leaves: vec![
            LeafChangeRequest::Request(named_leaf()),
            LeafChangeRequest::Replace(named_leaf()),
            LeafChangeRequest::Remove(LeafName { name: "a".into() }),
            LeafChangeRequest::Renew(LeafName { name: "b".into() }),
        ],
        rotate_to: Some(RotateToRequest {
            ca: "PEM".into(),
            key: some("PEM"),
            chain: some("PEM"),
            current_keys: some("PEM"),
            proposed_keys: some("PEM"),
            force: some("r"),
        }),
        renew_same_key: true,
        ack: Some(AckRequest {
            consumer: "c".into(),
            fingerprint: "f".into(),
        }),
        unless_idle: true,
    };
    let validate = ValidateRequest {
        ca: "PEM".into(),
        key: some("PEM"),
        chain: some("PEM"),
        current_keys: some("PEM"),
        proposed_keys: some("PEM"),
    };
    let leaf = LeafRequestIn {
        kind: LeafKindName::ServerClient,
        dns_names: vec!["a".into()],
        ip_addresses: vec!["10.0.0.1".into()],
        lifetime_seconds: Some(1),
    };
    vec![
        ("reqSignerCreate", to_json(&create)),
        ("reqSignerStep", to_json(&step)),
        ("reqValidate", to_json(&validate)),
        ("reqLeaf", to_json(&leaf)),
    ]
}

fn set_samples() -> Vec<(&'static str, Value)> {
    let create = SetCreate {
        cas: vec![SetCa {
            name: "cluster".into(),
            roles: "serving+client".into(),
        }],
        key_type: Some(KeyType::P384),
        lifetime_seconds: Some(1),
    };
    let steps = [
        SetStepRequest::Issue(SetIssue {
            name: "n".into(),
            ca: "cluster".into(),
            serving: true,
            client: true,
            dns_names: vec!["a".into()],
            ip_addresses: vec!["10.0.0.1".into()],
            common_name: some("cn"),
            target: "t".into(),
            lifetime_seconds: Some(1),
            replace: true,
        }),
        SetStepRequest::Target(SetTarget {
            name: "t".into(),
            trusts: Some(vec!["cluster".into()]),
            client_ca: Some(vec!["cluster".into()]),
        }),
        SetStepRequest::Start(SetStart {
            reason: "r".into(),
            one_at_a_time: true,
            imports: vec![SetImport {
                name: "cluster".into(),
                ca: "PEM".into(),
                key: some("PEM"),
                chain: some("PEM"),
            }],
        }),
        SetStepRequest::Ack(SetAck {
            target: "t".into(),
            fingerprint: "f".into(),
        }),
        SetStepRequest::Fail(SetFail {
            target: "t".into(),
            reason: "r".into(),
        }),
        SetStepRequest::Retry(SetRetry { target: "t".into() }),
        SetStepRequest::Advance(SetAdvance {
            override_reason: some("r"),
            from: Some(pki_rotate::SetStep::TrustBoth),
        }),
        SetStepRequest::Abort(SetAbort {
            override_reason: some("r"),
        }),
    ];
    let mut out = vec![("reqSetCreate", to_json(&create))];
    out.extend(steps.iter().map(|s| ("reqSetStep", to_json(s))));
    out
}

fn keys_and_cred_samples() -> Vec<(&'static str, Value)> {
    let create = KeyRingCreate {
        policy: Some(KeyRingPolicyFields {
            key_type: Some(KeyType::Rsa2048),
            lifetime_seconds: Some(1),
            grace_seconds: Some(1),
            max_token_lifetime_seconds: Some(1),
        }),
        import: some("PEM"),
        state: Some(json!({})),
        key_store: some("pkcs11:token=t"),
    };
    let step = KeyRingStep {
        forced: some("r"),
        retire: vec!["kid".into()],
    };
    let cred = [
        CredStep::Advance(CredAdvance { owner: some("a") }),
        CredStep::Minted(CredMinted {
            rotation: 1,
            attempt: 1,
            credential: some("c"),
            credential_base64: some("YQ=="),
        }),
        CredStep::MintFailed(CredMintFailed {
            rotation: 1,
            attempt: 1,
            message: "m".into(),
            captured: some("c"),
            captured_base64: some("YQ=="),
        }),
        CredStep::Revoked(CredRevoked { rotation: 1 }),
        CredStep::RevokeFailed(CredRevokeFailed {
            rotation: 1,
            message: "m".into(),
        }),
        CredStep::StrayRevoked(CredStrayRevoked {
            rotation: 1,
            attempt: 1,
        }),
        CredStep::StrayRevokeFailed(CredStrayRevokeFailed {
            rotation: 1,
            attempt: 1,
            message: "m".into(),
        }),
    ];
    let mut out = vec![
        ("reqKeyRingCreate", to_json(&create)),
        ("reqKeyRingStep", to_json(&step)),
        (
            "reqCredCreate",
            to_json(&CredCreate {
                expire_seconds: 2,
                grace_seconds: 1,
            }),
        ),
    ];
    out.extend(cred.iter().map(|c| ("reqCredStep", to_json(c))));
    out
}

#[allow(clippy::expect_used)]
fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("a request serialises")
}

/// Every sample: a fully populated request, and the Go struct it fills.
pub(crate) fn samples() -> Vec<(&'static str, Value)> {
    let step = StepResult {
        version: 1,
        changed: true,
        next_wake: 1,
        revision: "1".into(),
        attempts: 1,
        idle: true,
        by_parts: true,
        events: vec![StepEvent(json!({"kind": "minted", "message": "m"}))],
        status: json!({}),
        action: Some(NextAction {
            kind: ActionKind::RevokeStray,
            rotation: 1,
            attempt: 1,
            wait_reason: Some(WaitReasonName::Grace),
            credential_base64: some("YQ=="),
        }),
    };
    let mut out = vec![("resStep", to_json(&step))];
    out.extend(signer_samples());
    out.extend(set_samples());
    out.extend(keys_and_cred_samples());
    out
}
