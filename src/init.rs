//! `pki init`: create a store with a new self-signed CA.

use crate::common::{
    CliResult, DEFAULT_MAX_INPUT, SIGNER, StoreArg, os_rng, parse_duration, parse_size, parse_time,
    when,
};
use pki_core::{KeyAlgorithm, RotationPolicy};
use pki_rotate::{Driver, SignerEngine, SignerPolicy, SignerState, Store};
use std::path::PathBuf;
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
pub fn run_import(args: &InitArgs<'_>, files: &crate::external::CaFiles) -> CliResult {
    let policy = args.policy()?;
    crate::external::init(args.dir, files, policy, args.now)
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
    Ok(SignerState::new_in_token(
        args.common_name,
        policy,
        (&access, uri, &location),
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

/// The arguments of `pki init`.
#[derive(clap::Args)]
pub struct InitCommand {
    /// Store directory (created if missing), etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// Common name of the CA.
    #[arg(long, default_value = "service-ca")]
    cn: String,
    /// Key type: p256, p384, rsa2048, rsa3072 or rsa4096.
    #[arg(long, default_value = "p256", value_parser = crate::parse_key)]
    key: KeyAlgorithm,
    /// CA lifetime D, like 790d.
    #[arg(long, default_value_t = pki_core::policy::DEFAULT_LIFETIME, value_parser = parse_duration)]
    lifetime: Duration,
    /// Minimum trust M: rotate when less than this remains, like 395d.
    #[arg(long, default_value_t = pki_core::policy::DEFAULT_MIN_TRUST, value_parser = parse_duration)]
    min_trust: Duration,
    /// Reload interval I: every consumer reloads its files within this,
    /// like 7d. Unset, pki assumes up to M, and refuses a rotation within
    /// M of the previous one unless --allow-trust-break.
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    reload_interval: Option<Duration>,
    /// The time to act at, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    now: OffsetDateTime,
    /// Import an existing CA instead of generating one: a PEM file with
    /// its certificate, and possibly its key and the chain above it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cn", "key"])]
    import: Option<PathBuf>,
    /// The imported CA's private key, when not in the --import file.
    #[arg(long, value_name = "FILE", requires = "import")]
    key_file: Option<PathBuf>,
    /// The chain above the imported CA (its issuer first, the root last).
    #[arg(long, value_name = "FILE", requires = "import")]
    chain: Option<PathBuf>,
    /// Refuse input files larger than this, like 16M or 1G.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
    max_input_size: u64,
    /// Make the CA key, and every key a rotation makes, in this PKCS#11
    /// token (sensitive, never extractable): a URI like
    /// pkcs11:token=LABEL. The module is PKI_PKCS11_MODULE, the PIN is
    /// read from PKI_PKCS11_PIN_FILE (or pin-source in the URI).
    #[arg(long, value_name = "PKCS11-URI", value_parser = crate::token::parse_uri, conflicts_with = "import")]
    key_store: Option<pki_core::Pkcs11Uri>,
    /// The imported CA's key is this object in a PKCS#11 token, made by
    /// the operator: pki signs with it and never destroys it. A URI like
    /// pkcs11:token=LABEL;object=NAME (or id=...).
    #[arg(long, value_name = "PKCS11-URI", value_parser = crate::token::parse_uri, requires = "import", conflicts_with = "key_file")]
    key_uri: Option<pki_core::Pkcs11Uri>,
}

impl InitCommand {
    pub fn run(self) -> CliResult {
        let InitCommand {
            dir,
            cn,
            key,
            lifetime,
            min_trust,
            reload_interval,
            now,
            import,
            key_file,
            chain,
            max_input_size,
            key_store,
            key_uri,
        } = self;

        let args = InitArgs {
            dir: &dir,
            common_name: &cn,
            key,
            lifetime,
            min_trust,
            reload_interval,
            now,
            key_store: key_store.as_ref(),
        };
        match import {
            Some(ca) => run_import(
                &args,
                &crate::external::CaFiles {
                    ca,
                    key: key_file,
                    chain,
                    key_uri,
                    max_input_size,
                },
            ),
            None => run(&args).map(drop),
        }
    }
}
