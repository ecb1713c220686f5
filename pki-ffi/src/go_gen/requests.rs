//! `go/zz_generated_requests.go`: the Go structs of pki-rotate's request
//! schema (`pki_rotate::request`), written from the table below.
//!
//! No schema generator is at hand, so the table names each Go field by
//! hand, and a test keeps it honest: a fully populated sample of every
//! Rust request (each variant of the one-of requests) is serialised with
//! serde, and the JSON fields of each object must be exactly the fields
//! the Go struct names, with a JSON kind that fits the Go type, all the
//! way down. A field added to a Rust request makes the sample fail to
//! compile (the samples spell out every field); a field renamed or dropped
//! fails the comparison.

use serde_json::Value;
use std::fmt::Write as _;

pub(crate) use super::samples::samples;

/// One Go field: its name, its Go type, its JSON name, and whether it is
/// left out when empty (`omitempty`: the Rust field has a default).
pub(crate) struct GoField {
    go: &'static str,
    ty: &'static str,
    json: &'static str,
    omit: bool,
}

/// One Go struct: its name, the Rust type it mirrors, its fields, and
/// whether it is a one-of request (exactly one field set: a Rust enum).
pub(crate) struct GoStruct {
    name: &'static str,
    rust: &'static str,
    one_of: bool,
    fields: &'static [GoField],
}

impl GoStruct {
    /// Its Go name.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Whether exactly one field is set (a Rust enum).
    pub(crate) fn is_one_of(&self) -> bool {
        self.one_of
    }

    /// The JSON names of its fields.
    pub(crate) fn json_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.fields.iter().map(|f| f.json)
    }
}

const fn f(go: &'static str, ty: &'static str, json: &'static str, omit: bool) -> GoField {
    GoField { go, ty, json, omit }
}

const fn s(
    name: &'static str,
    rust: &'static str,
    one_of: bool,
    fields: &'static [GoField],
) -> GoStruct {
    GoStruct {
        name,
        rust,
        one_of,
        fields,
    }
}

/// Every generated struct, in the order of the file.
pub(crate) const STRUCTS: &[GoStruct] = &[
    s(
        "reqSignerPolicy",
        "SignerPolicyFields",
        false,
        &[
            f("LifetimeSeconds", "*int64", "lifetime_seconds", true),
            f("MinTrustSeconds", "*int64", "min_trust_seconds", true),
            f(
                "ReloadIntervalSeconds",
                "*int64",
                "reload_interval_seconds",
                true,
            ),
            f(
                "LeafRefreshFraction",
                "*float64",
                "leaf_refresh_fraction",
                true,
            ),
            f("KeepPreviousRoot", "*bool", "keep_previous_root", true),
        ],
    ),
    s(
        "reqCA",
        "CaPem",
        false,
        &[
            f("CA", "string", "ca", false),
            f("Key", "*string", "key", true),
            f("Chain", "*string", "chain", true),
        ],
    ),
    s(
        "reqSignerCreate",
        "SignerCreate",
        false,
        &[
            f("CommonName", "string", "common_name", true),
            f("KeyType", "string", "key_type", true),
            f("KeyStore", "string", "key_store", true),
            f("Policy", "*reqSignerPolicy", "policy", true),
            f("Import", "*reqCA", "import", true),
            f("State", "json.RawMessage", "state", true),
        ],
    ),
    s(
        "reqForced",
        "ForcedRequest",
        false,
        &[
            f("Reason", "string", "reason", false),
            f("GraceSeconds", "int64", "grace_seconds", true),
            f("NoBridges", "bool", "no_bridges", true),
        ],
    ),
    s(
        "reqRotateTo",
        "RotateToRequest",
        false,
        &[
            f("CA", "string", "ca", false),
            f("Key", "*string", "key", true),
            f("Chain", "*string", "chain", true),
            f("CurrentKeys", "*string", "current_keys", true),
            f("ProposedKeys", "*string", "proposed_keys", true),
            f("Force", "string", "force", true),
        ],
    ),
    s(
        "reqValidate",
        "ValidateRequest",
        false,
        &[
            f("CA", "string", "ca", false),
            f("Key", "*string", "key", true),
            f("Chain", "*string", "chain", true),
            f("CurrentKeys", "*string", "current_keys", true),
            f("ProposedKeys", "*string", "proposed_keys", true),
        ],
    ),
    s(
        "reqAck",
        "AckRequest",
        false,
        &[
            f("Consumer", "string", "consumer", false),
            f("Fingerprint", "string", "fingerprint", false),
        ],
    ),
    s(
        "reqLeaf",
        "LeafRequestIn",
        false,
        &[
            f("Kind", "string", "kind", false),
            f("DNSNames", "[]string", "dns_names", true),
            f("IPAddresses", "[]string", "ip_addresses", true),
            f("LifetimeSeconds", "int64", "lifetime_seconds", true),
        ],
    ),
    s(
        "reqNamedLeaf",
        "NamedLeaf",
        false,
        &[
            f("Name", "string", "name", false),
            f("Kind", "string", "kind", false),
            f("DNSNames", "[]string", "dns_names", true),
            f("IPAddresses", "[]string", "ip_addresses", true),
            f("LifetimeSeconds", "int64", "lifetime_seconds", true),
        ],
    ),
    s(
        "reqLeafName",
        "LeafName",
        false,
        &[f("Name", "string", "name", false)],
    ),
    s(
        "reqLeafChange",
        "LeafChangeRequest",
        true,
        &[
            f("Request", "*reqNamedLeaf", "request", true),
            f("Replace", "*reqNamedLeaf", "replace", true),
            f("Remove", "*reqLeafName", "remove", true),
            f("Renew", "*reqLeafName", "renew", true),
        ],
    ),
    s(
        "reqSignerStep",
        "SignerStep",
        false,
        &[
            f("Policy", "*reqSignerPolicy", "policy", true),
            f("Forced", "*reqForced", "forced", true),
            f("AllowTrustBreak", "string", "allow_trust_break", true),
            f("Leaves", "[]reqLeafChange", "leaves", true),
            f("RotateTo", "*reqRotateTo", "rotate_to", true),
            f("RenewSameKey", "bool", "renew_same_key", true),
            f("Ack", "*reqAck", "ack", true),
            f("UnlessIdle", "bool", "unless_idle", true),
        ],
    ),
    s(
        "reqSetCA",
        "SetCa",
        false,
        &[
            f("Name", "string", "name", false),
            f("Roles", "string", "roles", false),
        ],
    ),
    s(
        "reqSetCreate",
        "SetCreate",
        false,
        &[
            f("CAs", "[]reqSetCA", "cas", false),
            f("KeyType", "string", "key_type", true),
            f("LifetimeSeconds", "*int64", "lifetime_seconds", true),
        ],
    ),
    s(
        "reqSetImport",
        "SetImport",
        false,
        &[
            f("Name", "string", "name", false),
            f("CA", "string", "ca", false),
            f("Key", "*string", "key", true),
            f("Chain", "*string", "chain", true),
        ],
    ),
    s(
        "reqSetIssue",
        "SetIssue",
        false,
        &[
            f("Name", "string", "name", false),
            f("CA", "string", "ca", false),
            f("Serving", "bool", "serving", true),
            f("Client", "bool", "client", true),
            f("DNSNames", "[]string", "dns_names", true),
            f("IPAddresses", "[]string", "ip_addresses", true),
            f("CommonName", "string", "common_name", true),
            f("Target", "string", "target", false),
            f("LifetimeSeconds", "int64", "lifetime_seconds", true),
            f("Replace", "bool", "replace", true),
        ],
    ),
    s(
        "reqSetTarget",
        "SetTarget",
        false,
        &[
            f("Name", "string", "name", false),
            f("Trusts", "*[]string", "trusts", true),
            f("ClientCA", "*[]string", "client_ca", true),
        ],
    ),
    s(
        "reqSetStart",
        "SetStart",
        false,
        &[
            f("Reason", "string", "reason", false),
            f("OneAtATime", "bool", "one_at_a_time", true),
            f("Imports", "[]reqSetImport", "imports", true),
        ],
    ),
    s(
        "reqSetAck",
        "SetAck",
        false,
        &[
            f("Target", "string", "target", false),
            f("Fingerprint", "string", "fingerprint", false),
        ],
    ),
    s(
        "reqSetFail",
        "SetFail",
        false,
        &[
            f("Target", "string", "target", false),
            f("Reason", "string", "reason", false),
        ],
    ),
    s(
        "reqSetRetry",
        "SetRetry",
        false,
        &[f("Target", "string", "target", false)],
    ),
    s(
        "reqSetAdvance",
        "SetAdvance",
        false,
        &[
            f("OverrideReason", "string", "override_reason", true),
            f("From", "string", "from", true),
        ],
    ),
    s(
        "reqSetAbort",
        "SetAbort",
        false,
        &[f("OverrideReason", "*string", "override_reason", true)],
    ),
    s(
        "reqSetStep",
        "SetStepRequest",
        true,
        &[
            f("Issue", "*reqSetIssue", "issue", true),
            f("Target", "*reqSetTarget", "target", true),
            f("Start", "*reqSetStart", "start", true),
            f("Ack", "*reqSetAck", "ack", true),
            f("Fail", "*reqSetFail", "fail", true),
            f("Retry", "*reqSetRetry", "retry", true),
            f("Advance", "*reqSetAdvance", "advance", true),
            f("Abort", "*reqSetAbort", "abort", true),
        ],
    ),
    s(
        "reqKeyRingPolicy",
        "KeyRingPolicyFields",
        false,
        &[
            f("KeyType", "string", "key_type", true),
            f("LifetimeSeconds", "*int64", "lifetime_seconds", true),
            f("GraceSeconds", "*int64", "grace_seconds", true),
            f(
                "MaxTokenLifetimeSeconds",
                "*int64",
                "max_token_lifetime_seconds",
                true,
            ),
        ],
    ),
    s(
        "reqKeyRingCreate",
        "KeyRingCreate",
        false,
        &[
            f("Policy", "*reqKeyRingPolicy", "policy", true),
            f("Import", "string", "import", true),
            f("State", "json.RawMessage", "state", true),
            f("KeyStore", "string", "key_store", true),
        ],
    ),
    s(
        "reqKeyRingStep",
        "KeyRingStep",
        false,
        &[
            f("Forced", "string", "forced", true),
            f("Retire", "[]string", "retire", true),
        ],
    ),
    s(
        "reqCredCreate",
        "CredCreate",
        false,
        &[
            f("ExpireSeconds", "int64", "expire_seconds", false),
            f("GraceSeconds", "int64", "grace_seconds", false),
        ],
    ),
    s(
        "reqCredAdvance",
        "CredAdvance",
        false,
        &[f("Owner", "*string", "owner", true)],
    ),
    s(
        "reqCredMinted",
        "CredMinted",
        false,
        &[
            f("Rotation", "uint64", "rotation", false),
            f("Attempt", "uint32", "attempt", false),
            f("Credential", "*string", "credential", true),
            f("CredentialBase64", "*string", "credential_base64", true),
        ],
    ),
    s(
        "reqCredMintFailed",
        "CredMintFailed",
        false,
        &[
            f("Rotation", "uint64", "rotation", false),
            f("Attempt", "uint32", "attempt", false),
            f("Message", "string", "message", false),
            f("Captured", "*string", "captured", true),
            f("CapturedBase64", "*string", "captured_base64", true),
        ],
    ),
    s(
        "reqCredRevoked",
        "CredRevoked",
        false,
        &[f("Rotation", "uint64", "rotation", false)],
    ),
    s(
        "reqCredRevokeFailed",
        "CredRevokeFailed",
        false,
        &[
            f("Rotation", "uint64", "rotation", false),
            f("Message", "string", "message", false),
        ],
    ),
    s(
        "reqCredStrayRevoked",
        "CredStrayRevoked",
        false,
        &[
            f("Rotation", "uint64", "rotation", false),
            f("Attempt", "uint32", "attempt", false),
        ],
    ),
    s(
        "reqCredStrayRevokeFailed",
        "CredStrayRevokeFailed",
        false,
        &[
            f("Rotation", "uint64", "rotation", false),
            f("Attempt", "uint32", "attempt", false),
            f("Message", "string", "message", false),
        ],
    ),
    s(
        "reqCredStep",
        "CredStep",
        true,
        &[
            f("Advance", "*reqCredAdvance", "advance", true),
            f("Minted", "*reqCredMinted", "minted", true),
            f("MintFailed", "*reqCredMintFailed", "mint_failed", true),
            f("Revoked", "*reqCredRevoked", "revoked", true),
            f(
                "RevokeFailed",
                "*reqCredRevokeFailed",
                "revoke_failed",
                true,
            ),
            f(
                "StrayRevoked",
                "*reqCredStrayRevoked",
                "stray_revoked",
                true,
            ),
            f(
                "StrayRevokeFailed",
                "*reqCredStrayRevokeFailed",
                "stray_revoke_failed",
                true,
            ),
        ],
    ),
    s(
        "resNextAction",
        "step::NextAction",
        false,
        &[
            f("Kind", "string", "kind", false),
            f("Rotation", "uint64", "rotation", false),
            f("Attempt", "uint32", "attempt", false),
            f("WaitReason", "string", "wait_reason", true),
            f("CredentialBase64", "string", "credential_base64", true),
        ],
    ),
    s(
        "resStep",
        "StepResult",
        false,
        &[
            f("Version", "uint32", "version", false),
            f("Changed", "bool", "changed", false),
            f("NextWake", "int64", "next_wake", false),
            f("Revision", "string", "revision", false),
            f("Attempts", "uint32", "attempts", false),
            f("Idle", "bool", "idle", true),
            f("ByParts", "bool", "by_parts", true),
            f("Events", "[]json.RawMessage", "events", true),
            f("Status", "json.RawMessage", "status", true),
            f("Action", "*resNextAction", "action", true),
        ],
    ),
];

/// `go/zz_generated_requests.go`.
pub(crate) fn requests_go() -> String {
    let mut out = String::from(super::HEADER);
    out.push_str("\nimport \"encoding/json\"\n\n");
    out.push_str(
        "// The request structs of pki-rotate's request schema\n\
         // (pki_rotate::request), each mirroring one Rust type, and the step\n\
         // result the library answers with (res*).\n",
    );
    for st in STRUCTS {
        let kind = if st.one_of {
            ": set exactly one field"
        } else {
            ""
        };
        let _ = write!(
            out,
            "\n// {} mirrors pki_rotate::request::{}{kind}.\ntype {} struct {{\n",
            st.name, st.rust, st.name
        );
        let name_w = st.fields.iter().map(|f| f.go.len()).max().unwrap_or(0);
        let ty_w = st.fields.iter().map(|f| f.ty.len()).max().unwrap_or(0);
        for field in st.fields {
            let omit = if field.omit { ",omitempty" } else { "" };
            let _ = writeln!(
                out,
                "\t{:<name_w$} {:<ty_w$} `json:\"{}{omit}\"`",
                field.go, field.ty, field.json
            );
        }
        out.push_str("}\n");
    }
    out
}

/// Whether a JSON value fits a Go type.
fn fits(value: &Value, ty: &str) -> bool {
    let ty = ty.trim_start_matches('*');
    match ty {
        "string" => value.is_string(),
        "bool" => value.is_boolean(),
        "int64" | "uint64" | "uint32" => value.is_i64() || value.is_u64(),
        "float64" => value.is_number(),
        "json.RawMessage" => true,
        _ if ty.starts_with("[]") => value.is_array(),
        _ => value.is_object(),
    }
}

/// The differences between a sample object and the Go struct `name`,
/// checked all the way down, added to `problems` (a one-of struct's sample
/// sets one of its fields; any other sets them all).
pub(crate) fn check(value: &Value, name: &str, path: &str, problems: &mut Vec<String>) {
    let Some(st) = STRUCTS.iter().find(|s| s.name == name) else {
        problems.push(format!("{path}: no Go struct {name}"));
        return;
    };
    let Some(object) = value.as_object() else {
        problems.push(format!("{path}: not an object: {value}"));
        return;
    };
    for key in object.keys() {
        if !st.fields.iter().any(|f| f.json == key) {
            problems.push(format!("{path}.{key}: no field of Go {name}"));
        }
    }
    for field in st.fields {
        let Some(v) = object.get(field.json) else {
            if !st.one_of {
                problems.push(format!(
                    "{path}.{}: Go {name} names a field the sample lacks",
                    field.json
                ));
            }
            continue;
        };
        let at = format!("{path}.{}", field.json);
        if !fits(v, field.ty) {
            problems.push(format!("{at}: {v} does not fit Go {}", field.ty));
        }
        let inner = field.ty.trim_start_matches('*').trim_start_matches("[]");
        if STRUCTS.iter().any(|s| s.name == inner) {
            match v.as_array() {
                Some(items) => items.iter().for_each(|i| check(i, inner, &at, problems)),
                None => check(v, inner, &at, problems),
            }
        }
    }
}
