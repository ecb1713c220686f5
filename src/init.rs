//! `pki init`: create a store with a new self-signed CA.

use crate::common::{CliResult, SIGNER, StoreArg, os_rng, when};
use pki_core::{KeyAlgorithm, RotationPolicy};
use pki_rotate::engines::token_keys;
use pki_rotate::{Driver, SignerEngine, SignerPolicy, SignerState, Store};
use time::{Duration, OffsetDateTime};

pub struct InitArgs<'a> {
    pub dir: &'a StoreArg,
    pub common_name: &'a str,
    pub key: KeyAlgorithm,
    pub lifetime: Duration,
    pub min_trust: Duration,
    pub reload_interval: Option<Duration>,
    pub now: OffsetDateTime,
    /// The PKCS#11 token to make the CA keys in (None: in this process).
    pub key_store: Option<&'a pki_core::Pkcs11Uri>,
}

impl InitArgs<'_> {
    /// The signer's policy these arguments give, validated.
    fn policy(&self) -> CliResult<SignerPolicy> {
        let policy = SignerPolicy {
            rotation: RotationPolicy {
                lifetime: self.lifetime,
                min_trust: self.min_trust,
                reload_interval: self.reload_interval,
            },
            key_algorithm: self.key,
            ..SignerPolicy::default()
        };
        policy.validate()?;
        Ok(policy)
    }
}

/// `--import`: the policy from the arguments, the CA from the files, its
/// key from them or (`key_uri`) an object in a token.
pub fn run_import(
    args: &InitArgs<'_>,
    files: &crate::external::CaFiles,
    key_uri: Option<&pki_core::Pkcs11Uri>,
) -> CliResult {
    let policy = args.policy()?;
    crate::external::init(args.dir, files, key_uri, policy, args.now)
}

/// A signer whose CA key is made in the token `uri` names. The key's id
/// comes from where the store is and the CA's name, so a rerun of an
/// `init` that crashed before the store was written adopts the key that
/// run made.
fn new_in_token(
    args: &InitArgs<'_>,
    policy: SignerPolicy,
    uri: &pki_core::Pkcs11Uri,
) -> CliResult<SignerState> {
    let access = crate::token::for_uri(uri)?;
    let location = crate::token::store_location(args.dir)?;
    let id = token_keys::first_key_id(&location, args.common_name);
    let label = token_keys::key_label(args.common_name, 1);
    Ok(SignerState::new_in_token(
        args.common_name,
        policy,
        (&access, uri),
        (&id, &label),
        args.now,
        &mut os_rng(),
    )?)
}

pub fn run(args: &InitArgs<'_>) -> CliResult<SignerState> {
    let policy = args.policy()?;
    // Everything that can refuse runs before the store directory is
    // created, so a refused `init` leaves nothing behind.
    pki_core::common_name_to_name(args.common_name)?;
    // An existing store is opened (a directory that does not exist is
    // not created yet) and refused before a key is generated: creating
    // would fail the same way.
    let existing = match args.dir {
        StoreArg::Dir(path) if std::fs::symlink_metadata(path).is_err() => None,
        dir => Some(dir.open_or_create()?),
    };
    if let Some(store) = &existing
        && store.get(SIGNER)?.is_some()
    {
        return Err(
            pki_rotate::RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(
                args.dir.to_string(),
            ))
            .into(),
        );
    }
    // Refuses a time outside what certificates can encode, among others.
    let state = match args.key_store {
        None => SignerState::new(args.common_name, policy, args.now, &mut os_rng())?,
        Some(uri) => new_in_token(args, policy, uri)?,
    };
    let store = match existing {
        Some(store) => store,
        None => args.dir.open_or_create()?,
    };
    Driver::new(store).create_at::<SignerEngine>(SIGNER, &state, args.now)?;
    let ca = &state.ca.cert;
    crate::outln!(
        "created CA {} ({}, {}) in {}",
        ca.id(),
        ca.subject(),
        args.key,
        args.dir
    );
    crate::outln!("  valid until     {}", when(ca.not_after(), args.now));
    crate::outln!(
        "  rotates at      {}",
        when(state.rotation_due_at(&policy), args.now)
    );
    crate::outln!(
        "  reload interval {}",
        crate::common::reload_interval_text(&policy.rotation)
    );
    crate::outln!(
        "  clients trust   {}",
        args.dir.published(pki_rotate::signer::document::CA_BUNDLE)
    );
    Ok(state)
}
