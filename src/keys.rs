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
    Driver, ImportedKeys, KeyRing, KeyRingEngine, KeyRingInput, KeyRingPolicy, RotateError,
};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key ring with a new active key, or adopt an existing key set.
    Init {
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
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
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
        KeysCommand::Init {
            dir,
            key,
            lifetime,
            grace,
            max_token_lifetime,
            import,
            now,
        } => {
            let policy = KeyRingPolicy {
                algorithm: key,
                lifetime,
                grace,
                max_token_lifetime,
            };
            init(&dir, policy, import.as_deref(), now)
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

fn load(dir: &StoreArg, reads: Reads) -> CliResult<(KeyRing, pki_rotate::Revision)> {
    Driver::new(open(dir, reads)?)
        .load::<KeyRingEngine>(&KEY)
        .map_err(not_initialized(dir))
}

fn init(
    dir: &StoreArg,
    policy: KeyRingPolicy,
    import: Option<&Path>,
    now: OffsetDateTime,
) -> CliResult {
    let mut rng = os_rng();
    let ring = match import {
        Some(path) => {
            let bytes = read_input(path, "key set")?;
            let keys = ImportedKeys::parse(&path.display().to_string(), &bytes)?;
            KeyRing::import(policy, keys, now, &mut rng)?
        }
        None => KeyRing::new(policy, now, &mut rng)?,
    };
    let store = dir.open_or_create()?;
    Driver::new(store)
        .create::<KeyRingEngine>(&KEY, &ring)
        .map_err(|e| match e {
            RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(_)) => {
                CliError::new(format!("a key ring already exists at {dir}"))
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
    crate::outln!("signing key     {}", dir.published(document::ACTIVE_KEY));
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
    let step = Driver::new(store)
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
