//! `pki keys …`: a key ring of service-account token signing keys.
//!
//! Every command loads the ring through the driver and lets the engine
//! decide; this module parses arguments, reads the files named on the
//! command line, and prints.

use crate::common::{CliError, CliResult, StoreArg, os_rng, parse_duration, parse_time, when};
use clap::Subcommand;
use pki_core::KeyAlgorithm;
use pki_rotate::keyring::{KEY, document};
use pki_rotate::{
    Driver, ImportedKeys, KeyRing, KeyRingEngine, KeyRingInput, KeyRingPolicy, RotateError, Store,
};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key ring with a new active key, or adopt an existing key set.
    Init(Box<InitArgs>),
    /// Rotate the active key if it is due or forced; remove keys whose grace has ended.
    Rotate {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Force a rotation, once per distinct reason.
        #[arg(long, value_name = "REASON")]
        force: Option<String>,
        /// Stop accepting an imported key (or one past its grace), by kid.
        #[arg(long, value_name = "KID")]
        retire: Vec<String>,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Show the active key, the accepted keys and what is due.
    Status {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// The time to report at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Sign a JSON claims set with the active key; prints one compact JWS.
    Sign {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// The claims (a JSON object), used exactly as given; "-" reads stdin.
        #[arg(long, value_name = "FILE")]
        claims: PathBuf,
        /// The time to sign at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Verify a compact JWS against the keys accepted at --now (exit 1 when rejected).
    Verify {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// The token; "-" reads stdin.
        #[arg(long, value_name = "FILE")]
        token: PathBuf,
        /// The time to verify at (exp, nbf, grace periods): RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
}

/// The arguments of `pki keys init` (boxed in [`KeysCommand`]: the
/// largest of its variants).
#[derive(clap::Args)]
pub struct InitArgs {
    /// Store directory (created if missing), etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// Key type of new keys: p256 (ES256 tokens), rsa2048, rsa3072 or rsa4096 (RS256).
    #[arg(long, default_value = "p256", value_parser = parse_key)]
    key: KeyAlgorithm,
    /// Rotate the active key once it is this old, like 90d.
    #[arg(long, default_value_t = pki_rotate::keyring::DEFAULT_LIFETIME, value_parser = parse_duration)]
    lifetime: Duration,
    /// How long a rotated-out key stays accepted, from the rotation, like 24h.
    #[arg(long, default_value_t = pki_rotate::keyring::DEFAULT_GRACE, value_parser = parse_duration)]
    grace: Duration,
    /// The longest lifetime of a token signed with the ring: the grace
    /// must cover it, and `keys sign` refuses longer tokens.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    max_token_lifetime: Option<Duration>,
    /// Adopt an existing key set: PEM keys (k3s's service.key; the first
    /// private key signs, the others stay accepted) or a JWK Set.
    #[arg(long, value_name = "FILE")]
    import: Option<PathBuf>,
    /// Make the signing key, and every key a rotation makes, in this
    /// PKCS#11 token (sensitive, never extractable): a URI like
    /// pkcs11:token=LABEL. The module is PKI_PKCS11_MODULE, the PIN is
    /// read from PKI_PKCS11_PIN_FILE (or pin-source in the URI).
    #[arg(long, value_name = "PKCS11-URI", value_parser = crate::token::parse_uri, conflicts_with = "import")]
    key_store: Option<pki_core::Pkcs11Uri>,
    /// The time to act at: RFC 3339 or "now".
    #[arg(long, default_value = "now", value_parser = parse_time)]
    now: OffsetDateTime,
}

fn parse_key(s: &str) -> Result<KeyAlgorithm, String> {
    match s.parse().map_err(|e: pki_core::Error| e.to_string())? {
        KeyAlgorithm::EcdsaP384 => Err(
            "the key ring signs ES256 (p256) or RS256 (rsa2048, rsa3072, rsa4096) tokens; \
             p384 (ES384) is not supported"
                .into(),
        ),
        other => Ok(other),
    }
}

pub fn run(command: KeysCommand) -> CliResult {
    match command {
        KeysCommand::Init(args) => {
            let InitArgs {
                dir,
                key,
                lifetime,
                grace,
                max_token_lifetime,
                import,
                key_store,
                now,
            } = *args;
            let policy = KeyRingPolicy {
                algorithm: key,
                lifetime,
                grace,
                max_token_lifetime,
            };
            let source = match (&import, &key_store) {
                (Some(path), _) => KeySource::Import(path),
                (None, Some(uri)) => KeySource::Token(uri),
                (None, None) => KeySource::New,
            };
            init(&dir, policy, source, now)
        }
        KeysCommand::Rotate {
            dir,
            force,
            retire,
            now,
        } => rotate(&dir, force, retire, now),
        KeysCommand::Status { dir, json, now } => status(&dir, json, now),
        KeysCommand::Sign { dir, claims, now } => {
            let claims = read_input(&claims, "claims")?;
            let (ring, _) = load(&dir, Reads::Private)?;
            crate::outln!("{}", ring.sign_token(&claims, now)?);
            Ok(())
        }
        KeysCommand::Verify { dir, token, now } => {
            let token = read_input(&token, "token")?;
            let (ring, _) = load(&dir, Reads::Public)?;
            match ring.verify_token(&token, now) {
                Ok((kid, _)) => {
                    crate::outln!("token valid: signed by key {kid}");
                    Ok(())
                }
                Err(e) => Err(CliError::new(format!("token rejected: {e}"))),
            }
        }
    }
}

/// Reads a file named on the command line ("-": stdin), bounded so that a
/// wrong path (a device, a huge file) fails instead of filling memory, and
/// without waiting on a FIFO or a directory (see [`pki_rotate::input`]).
fn read_input(path: &Path, what: &str) -> CliResult<Vec<u8>> {
    use std::io::Read;
    const MAX: u64 = 1024 * 1024;
    if path != Path::new("-") {
        return pki_rotate::input::read_file(path, MAX)
            .map_err(|e| CliError::new(format!("{what} file {e}")));
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::new(format!("{what} on standard input: {e}")))?;
    if bytes.len() as u64 > MAX {
        return Err(CliError::new(format!(
            "{what} on standard input: larger than the input limit of {MAX} bytes"
        )));
    }
    Ok(bytes)
}

fn not_initialized(dir: &StoreArg) -> impl Fn(RotateError) -> CliError + '_ {
    move |e| match e {
        RotateError::Store(pki_rotate::StoreError::NotInitialized(_)) => no_ring(dir),
        other => other.into(),
    }
}

/// What a command uses of the ring: its public keys alone (status,
/// verification: no store key needed), or its private key too.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reads {
    Public,
    Private,
}

/// Opens the store; a directory without one gets the key ring's hint.
/// A store holding sealed values refuses a store key that is not its own,
/// and no key at all unless the command reads public material only.
fn open(dir: &StoreArg, reads: Reads) -> CliResult<Box<dyn pki_rotate::Store + Send + Sync>> {
    if dir.is_empty_dir() {
        return Err(no_ring(dir));
    }
    match reads {
        Reads::Private => dir.open(),
        Reads::Public => crate::store_key::seal_for_public_reads(
            dir.open_unsealed()?,
            matches!(dir, StoreArg::Dir(_)),
        ),
    }
}

fn no_ring(dir: &StoreArg) -> CliError {
    CliError::new(format!("no key ring at {dir} (run `pki keys init` first)"))
}

/// Loads the ring; one that signs gets the tokens the environment names
/// (a ring whose keys are in a token signs there).
fn load(dir: &StoreArg, reads: Reads) -> CliResult<(KeyRing, pki_rotate::Revision)> {
    let store = open(dir, reads)?;
    let driver = match reads {
        Reads::Public => Driver::new(store),
        Reads::Private => crate::token::driver(store)?,
    };
    driver
        .load::<KeyRingEngine>(&KEY)
        .map_err(not_initialized(dir))
}

/// Where a new ring's active key comes from.
enum KeySource<'a> {
    /// Generated in this process.
    New,
    /// The first private key of an existing key set (a file).
    Import(&'a Path),
    /// Made in the PKCS#11 token the URI names.
    Token(&'a pki_core::Pkcs11Uri),
}

/// A new ring whose active key is made in the token `uri` names, with
/// the store it goes to. The key's id comes from where the store is, so a
/// rerun of an `init` that crashed before the store was written adopts the
/// key that run made. An existing ring is refused before the token makes
/// anything, and a store directory that does not exist yet is created only
/// once the key is made.
fn new_in_token(
    dir: &StoreArg,
    policy: KeyRingPolicy,
    uri: &pki_core::Pkcs11Uri,
    now: OffsetDateTime,
) -> CliResult<(KeyRing, Box<dyn pki_rotate::Store + Send + Sync>)> {
    policy.validate()?;
    let existing = match dir {
        StoreArg::Dir(path) if std::fs::symlink_metadata(path).is_err() => None,
        dir => Some(dir.open_or_create()?),
    };
    if let Some(store) = &existing
        && store.get(pki_rotate::keyring::STORE_KEY)?.is_some()
    {
        return Err(already_exists(dir));
    }
    let access = crate::token::for_uri(uri)?;
    let location = crate::token::store_location(dir)?;
    let ring = KeyRing::new_in_token(policy, (&access, uri, &location), now)?;
    let store = match existing {
        Some(store) => store,
        None => dir.open_or_create()?,
    };
    Ok((ring, store))
}

fn already_exists(dir: &StoreArg) -> CliError {
    CliError::new(format!("a key ring already exists at {dir}"))
}

fn init(
    dir: &StoreArg,
    policy: KeyRingPolicy,
    source: KeySource<'_>,
    now: OffsetDateTime,
) -> CliResult {
    let mut rng = os_rng();
    let (ring, store) = match source {
        KeySource::Import(path) => {
            let bytes = read_input(path, "key set")?;
            let keys = ImportedKeys::parse(&path.display().to_string(), &bytes)?;
            let ring = KeyRing::import(policy, keys, now, &mut rng)?;
            (ring, dir.open_or_create()?)
        }
        KeySource::New => (KeyRing::new(policy, now, &mut rng)?, dir.open_or_create()?),
        KeySource::Token(uri) => new_in_token(dir, policy, uri, now)?,
    };
    Driver::new(store)
        .create::<KeyRingEngine>(&KEY, &ring)
        .map_err(|e| match e {
            RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(_)) => {
                already_exists(dir)
            }
            other => other.into(),
        })?;
    crate::outln!(
        "created key ring at {dir}: active key {} ({}){}",
        ring.active.kid,
        ring.policy.algorithm,
        match ring.accepted.len() {
            0 => String::new(),
            n => format!(", {n} imported key(s) kept accepted"),
        }
    );
    match ring.active.key.token() {
        Some(key) => crate::outln!("signing key     {} (in the token)", key.uri()),
        None => crate::outln!("signing key     {}", dir.published(document::ACTIVE_KEY)),
    }
    crate::outln!("public keys     {}", dir.published(document::PUBLIC_PEM));
    crate::outln!("JWK Set         {}", dir.published(document::JWKS));
    crate::outln!("next rotation   {}", when(ring.rotation_due_at(), now));
    Ok(())
}

fn rotate(
    dir: &StoreArg,
    force: Option<String>,
    retire: Vec<String>,
    now: OffsetDateTime,
) -> CliResult {
    let mut input = KeyRingInput::retire(retire);
    input.forced = force;
    let store = open(dir, Reads::Private)?;
    let step = crate::token::driver(store)?
        .step::<KeyRingEngine, _>(&KEY, &input, now, &mut os_rng())
        .map_err(not_initialized(dir))?;
    if step.events.is_empty() {
        crate::outln!("nothing to do");
    }
    for e in &step.events {
        crate::outln!("{e}");
    }
    crate::outln!("active key      {}", step.document.active.kid);
    crate::outln!(
        "next rotation   {}",
        when(step.document.rotation_due_at(), now)
    );
    Ok(())
}

fn status(dir: &StoreArg, json: bool, now: OffsetDateTime) -> CliResult {
    let (ring, revision) = load(dir, Reads::Public)?;
    let report = ring.status(now);
    if json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::new(format!("status: {e}")))?;
        crate::outln!("{text}");
        return Ok(());
    }
    crate::outln!("key ring        {dir} (revision {revision})");
    crate::outln!(
        "policy          {} keys, lifetime {}, grace {}{}",
        ring.policy.algorithm,
        pki_core::policy::human(ring.policy.lifetime),
        pki_core::policy::human(ring.policy.grace),
        ring.policy
            .max_token_lifetime
            .map(|t| format!(", tokens up to {}", pki_core::policy::human(t)))
            .unwrap_or_default()
    );
    crate::outln!(
        "active key      {} ({}, since {})",
        ring.active.kid,
        ring.active.public.algorithm().as_str(),
        pki_core::datetime::rfc3339(ring.active.since)
    );
    if let Some(uri) = ring.key_uri(&ring.active.kid) {
        crate::outln!("  in the token  {uri}");
    }
    for k in &ring.accepted {
        let until = match k.accepted_until {
            Some(t) if k.accepted_at(now) => format!("accepted until {}", when(t, now)),
            Some(t) => format!("grace ended {}, removed by the next rotate", when(t, now)),
            None => "accepted until retired (imported)".to_string(),
        };
        crate::outln!(
            "accepted key    {} ({}, {until})",
            k.kid,
            k.public.algorithm().as_str()
        );
    }
    crate::outln!("next rotation   {}", when(ring.rotation_due_at(), now));
    if report.action_due {
        crate::outln!("action due      run `pki keys rotate {dir}`");
    }
    Ok(())
}
