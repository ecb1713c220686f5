//! Validating what the caller asks against the document, before anything
//! is decided: reasons, leaf and target specs, new and imported CAs.

use super::NewCa;
use crate::engines::set::{
    ImportedCa, LeafSpec, MIN_CA_VALIDITY, SetState, SetStep, TargetSpec, validate_name,
};
use crate::model::error::{Result, RotateError};
use std::collections::{BTreeMap, BTreeSet};
use time::{Duration, OffsetDateTime};

/// A reason as the set's rules take it (see [`crate::model::text::check_reason`]).
pub(super) fn reason_ok(what: &str, text: &str) -> Result<()> {
    crate::model::text::check_reason(what, text)
        .map_err(|e| RotateError::Set(crate::SetError::Invalid(e.to_string())))
}

pub(super) fn wrong_step(
    action: &'static str,
    step: SetStep,
    reason: impl Into<String>,
) -> RotateError {
    RotateError::Set(crate::SetError::WrongStep {
        action,
        step,
        reason: reason.into(),
    })
}

/// Refuses a new CA that is not valid yet, or whose leaves would not
/// verify for more than 24 hours and longer than the leaves it will sign.
/// `not_after` is when its leaves stop verifying: the earliest NotAfter of
/// the CA and of the chain above it.
fn check_new_ca(
    ca: &str,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    leaf_lifetime: Duration,
    now: OffsetDateTime,
) -> Result<()> {
    let refuse = |reason: String| {
        RotateError::Set(crate::SetError::CaRefused {
            ca: ca.to_string(),
            reason,
        })
    };
    if not_before > now {
        return Err(refuse(format!(
            "not valid before {}",
            pki_core::datetime::rfc3339(not_before)
        )));
    }
    let left = not_after - now;
    if left <= MIN_CA_VALIDITY {
        return Err(refuse(format!(
            "valid for {} only (until {}); a new CA must be valid for more than 24 hours",
            pki_core::policy::human(left.max(Duration::ZERO)),
            pki_core::datetime::rfc3339(not_after),
        )));
    }
    if left <= leaf_lifetime {
        return Err(refuse(format!(
            "valid for {} only, not longer than the {} leaves it will sign",
            pki_core::policy::human(left),
            pki_core::policy::human(leaf_lifetime)
        )));
    }
    Ok(())
}

/// Checks an imported CA as an import from files is checked, at `now`:
/// its chain in issuing order up to a root, the key its certificate's, a
/// certificate that may sign certificates, the path to the root verifying.
/// Returns when its leaves stop verifying: the earliest NotAfter of the CA
/// and its chain.
fn check_import(
    doc: &SetState,
    import: &ImportedCa,
    now: OffsetDateTime,
) -> Result<OffsetDateTime> {
    let refuse = |e: pki_core::Error| {
        RotateError::Set(crate::SetError::CaRefused {
            ca: import.ca.clone(),
            reason: e.to_string(),
        })
    };
    pki_core::check_issuing_order(&import.authority.cert, &import.chain).map_err(refuse)?;
    let validated = pki_core::CaImport {
        cert: import.authority.cert.clone(),
        key: Some(import.authority.key.clone()),
        chain: import.chain.clone(),
    }
    .validate(now)
    .map_err(refuse)?;
    // What can never verify is refused before it is written: a leaf of
    // this CA (each leaf of the set's CA, when the chain constrains names)
    // must verify for clients trusting the root its bundles will hold.
    let pair = crate::engines::set::CaPair {
        signer: import.authority.clone(),
        client_signer: None,
        chain: import.chain.clone(),
    };
    let requests: Vec<(&str, crate::LeafRequest)> = doc
        .leaves
        .iter()
        .filter(|(_, l)| l.spec.ca == import.ca && l.spec.serving)
        .map(|(name, l)| {
            let kind = if l.spec.client {
                crate::LeafKind::ServerClient
            } else {
                crate::LeafKind::Server
            };
            (
                name.as_str(),
                crate::LeafRequest {
                    kind,
                    dns_names: l.spec.dns_names.clone(),
                    ip_addresses: l.spec.ip_addresses.clone(),
                    lifetime: l.spec.lifetime,
                },
            )
        })
        .collect();
    let check = crate::engines::external::check_issuance(
        &import.authority,
        &pair.chain_after_leaf(&import.authority),
        pair.root(),
        crate::engines::set::DEFAULT_SET_LEAF_LIFETIME,
        requests.iter().map(|(n, r)| (*n, r)),
        now,
    );
    if !check.ok {
        return Err(RotateError::Set(crate::SetError::CaRefused {
            ca: import.ca.clone(),
            reason: check.detail,
        }));
    }
    Ok(validated.not_after())
}

pub(super) fn check_leaf_spec(doc: &SetState, name: &str, spec: &LeafSpec) -> Result<()> {
    validate_name("certificate", name)?;
    validate_name("target", &spec.target)?;
    let ca = doc.ca(&spec.ca)?;
    if spec.serving && !ca.roles.serving {
        return Err(RotateError::Set(crate::SetError::Invalid(format!(
            "CA \"{}\" has role {}: it cannot sign serving certificates",
            spec.ca, ca.roles
        ))));
    }
    if spec.client && !ca.roles.client {
        return Err(RotateError::Set(crate::SetError::Invalid(format!(
            "CA \"{}\" has role {}: it cannot sign client certificates",
            spec.ca, ca.roles
        ))));
    }
    if !spec.serving && !spec.client {
        return Err(RotateError::Set(crate::SetError::Invalid(format!(
            "certificate \"{name}\" must be serving, client or both"
        ))));
    }
    // The signer's rules for leaf names: no bare or top-level wildcards, no
    // IP literals as DNS names, no control characters.
    for dns in &spec.dns_names {
        crate::engines::leaf::check_leaf_dns_name(dns).map_err(|e| {
            RotateError::Set(crate::SetError::Invalid(format!(
                "certificate \"{name}\": {e}"
            )))
        })?;
    }
    if let Some(cn) = &spec.common_name
        && (cn.is_empty() || pki_core::text::find_control_or_invisible(cn).is_some())
    {
        return Err(RotateError::Set(crate::SetError::Invalid(format!(
            "certificate \"{name}\": the common name must be non-empty text without control characters or invisible ones (bidi overrides, zero-width spaces)"
        ))));
    }
    if spec.serving && spec.dns_names.is_empty() && spec.ip_addresses.is_empty() {
        return Err(RotateError::Set(crate::SetError::Invalid(format!(
            "serving certificate \"{name}\" needs at least one DNS name or IP address"
        ))));
    }
    if spec.lifetime <= Duration::ZERO {
        return Err(RotateError::Set(crate::SetError::Invalid(format!(
            "certificate \"{name}\": lifetime must be positive"
        ))));
    }
    Ok(())
}

pub(super) fn check_target(doc: &SetState, name: &str, spec: &TargetSpec) -> Result<()> {
    validate_name("target", name)?;
    for ca in &spec.trusts {
        if !doc.ca(ca)?.roles.serving {
            return Err(RotateError::Set(crate::SetError::Invalid(format!(
                "target \"{name}\" cannot trust \"{ca}\" for servers: that CA signs no serving certificates (role {})",
                doc.cas[ca].roles
            ))));
        }
    }
    for ca in &spec.client_ca {
        if !doc.ca(ca)?.roles.client {
            return Err(RotateError::Set(crate::SetError::Invalid(format!(
                "target \"{name}\" cannot verify clients of \"{ca}\": that CA signs no client certificates (role {})",
                doc.cas[ca].roles
            ))));
        }
    }
    Ok(())
}

/// Checks a rotation's start: the reason, and every import against the
/// CA it replaces and the rules of new CAs. Returns the new CAs.
pub(super) fn check_start(
    doc: &SetState,
    imports: &[ImportedCa],
    now: OffsetDateTime,
) -> Result<Vec<NewCa>> {
    let import_not_after = check_imports(doc, imports, now)?;
    let mut cas = Vec::new();
    for (name, ca) in &doc.cas {
        let leaf_lifetime = doc
            .leaves
            .values()
            .filter(|l| &l.spec.ca == name)
            .map(|l| l.spec.lifetime)
            .max()
            .unwrap_or(Duration::ZERO);
        let import = imports.iter().find(|i| &i.ca == name);
        match import {
            Some(i) => check_new_ca(
                name,
                i.authority.cert.not_before(),
                import_not_after
                    .get(name)
                    .copied()
                    .unwrap_or(i.authority.cert.not_after()),
                leaf_lifetime,
                now,
            )?,
            None => {
                if doc.ca_lifetime <= MIN_CA_VALIDITY || doc.ca_lifetime <= leaf_lifetime {
                    return Err(RotateError::Set(crate::SetError::CaRefused {
                        ca: name.clone(),
                        reason: format!(
                            "the set's CA lifetime {} is not longer than 24 hours and the {} leaves it signs",
                            pki_core::policy::human(doc.ca_lifetime),
                            pki_core::policy::human(leaf_lifetime)
                        ),
                    }));
                }
            }
        }
        cas.push(NewCa {
            ca: name.clone(),
            import: import.cloned(),
            separate_client_ca: ca.roles.serving && ca.roles.client,
        });
    }
    Ok(cas)
}

/// The imported CAs of a start, each checked (not the key of the CA in
/// use, named once, each on a key of its own, valid for the set): when
/// each imported CA's usable life ends.
fn check_imports<'i>(
    doc: &SetState,
    imports: &'i [ImportedCa],
    now: OffsetDateTime,
) -> Result<BTreeMap<&'i String, OffsetDateTime>> {
    let mut seen = BTreeSet::new();
    let mut import_not_after = BTreeMap::new();
    let mut imported_keys: BTreeMap<[u8; 32], &str> = BTreeMap::new();
    for import in imports {
        let current = &doc.ca(&import.ca)?.current;
        let spki = import.authority.cert.spki_sha256();
        if std::iter::once(&current.signer)
            .chain(&current.client_signer)
            .any(|c| c.cert.spki_sha256() == spki)
        {
            return Err(RotateError::Set(crate::SetError::CaRefused {
                ca: import.ca.clone(),
                reason: format!(
                    "{} has the key of the CA in use: a rotation must replace that key, so import a CA with a new one",
                    import.authority.cert.id()
                ),
            }));
        }
        if !seen.insert(&import.ca) {
            return Err(RotateError::Set(crate::SetError::Invalid(format!(
                "CA \"{}\" is imported twice",
                import.ca
            ))));
        }
        // Two CAs of the set on one key would be one CA: a client of one
        // would trust the other's servers, and distrusting one distrusts both.
        if let Some(other) = imported_keys.insert(spki, &import.ca) {
            return Err(RotateError::Set(crate::SetError::CaRefused {
                ca: import.ca.clone(),
                reason: format!(
                    "{} has the same key as the CA imported for \"{other}\": each CA of the set needs its own",
                    import.authority.cert.id()
                ),
            }));
        }
        import_not_after.insert(&import.ca, check_import(doc, import, now)?);
    }
    Ok(import_not_after)
}
