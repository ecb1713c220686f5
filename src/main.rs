//! The `pki` command-line tool: rotate a service CA kept in a directory.
//!
//! Exit status: 0 on success, 1 when an operation is refused or fails (with
//! a one-line reason on stderr, the store unchanged), 2 on bad usage, 5 when
//! the outcome is unknown (a store write's answer was lost: it may have
//! landed, and rerunning the command is safe); `pki status --check` exits
//! 3 when an action is due and 4 when trust is broken or something expired.

use pki::{mtls, tls};
mod common;
mod completions;
mod controller;
mod cred;
mod cred_args;
mod demo;
mod demo_set;
mod external;
mod fingerprint;
mod init;
mod inspect;
mod issue;
mod keys;
mod lint;
mod pin;
mod plan;
mod remove;
mod renew;
mod rotate;
mod set;
mod status;
mod store_key;
mod stores;
mod suggest;
mod timeline_svg;
mod token;
mod validate;
mod verify;

use clap::{Parser, Subcommand};
use common::{DEFAULT_MAX_INPUT, StoreArg, parse_duration, parse_size, parse_time};
use cred_args::CredCommand;
use pki_core::KeyAlgorithm;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use time::{Duration, OffsetDateTime};

#[derive(Parser)]
#[command(
    name = "pki",
    version,
    about = "Rotate X.509 certificate authorities without breaking trust",
    after_help = "TIME is RFC 3339, like 2027-02-01T00:00:00Z, or \"now\"; DUR is like 790d, 13h, 2h30m.\nExit status: 0 success, 1 refused or failed (one line on stderr, the store unchanged), 2 bad usage,\n5 outcome unknown (a store write may have landed; rerunning is safe);\n`pki status --check`: 0 nothing due, 3 an action is due, 4 trust broken or something expired.\nDIR may be etcd://HOST:PORT[,HOST:PORT...]/PREFIX, or etcds://... over TLS: PKI_ETCD_CACERT (the CA bundle\nthat verifies the servers), PKI_ETCD_CERT + PKI_ETCD_KEY (client certificate), PKI_ETCD_USER + PKI_ETCD_PASSWORD_FILE."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How long to wait for another pki run holding a directory store's
    /// lock before failing with who holds it, like 30s or 2m (default 30s).
    /// Reads never wait.
    #[arg(long, global = true, value_name = "DUR", value_parser = parse_duration)]
    lock_timeout: Option<Duration>,
}

#[derive(Subcommand)]
enum Command {
    /// Create a store with a new self-signed CA.
    Init(Box<init::InitCommand>),
    /// Issue (or change) a serving certificate, or a client one with --client.
    Issue(IssueCommand),
    /// Issue a new key and certificate for one certificate now.
    Renew {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Certificate name (certs/NAME/).
        name: String,
        /// The time to act at, like 2027-02-01T00:00:00Z, or "now".
        #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
        now: OffsetDateTime,
    },
    /// Stop keeping a certificate: its files and key are removed.
    Remove {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Certificate name (certs/NAME/).
        name: String,
        /// The time to act at, like 2027-02-01T00:00:00Z, or "now".
        #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
        now: OffsetDateTime,
    },
    /// Rotate the CA if due or forced; re-issue stale certificates.
    Rotate(RotateCommand),
    /// Run the service-CA controller on a kube:// store: serving-cert
    /// Secrets for annotated Services, the CA bundle injected into annotated
    /// ConfigMaps; until SIGTERM or SIGINT.
    Controller(controller::ControllerCommand),
    /// Check a proposed replacement CA against today's trust; change nothing.
    Validate(ValidateCommand),
    /// Show the CA, bridges, bundle, certificates, expiries and the next action.
    Status {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Machine-readable output (docs/status.schema.json).
        #[arg(long)]
        json: bool,
        /// Exit 0 when nothing is due, 3 when an action is due, 4 when trust
        /// is broken or something has expired (for cron and monitoring).
        /// Without --json, answered from the store's summary when its
        /// promise covers the time (nothing due, nothing broken, no
        /// consumer lagging, as of the last write): a short report, at a
        /// cost that does not grow with the number of certificates. Not on
        /// a kube:// store: the summary knows nothing of the objects
        /// `pki controller` keeps current, so the full report decides.
        #[arg(long)]
        check: bool,
        /// With --check: read and verify every certificate even when the
        /// store's summary could answer (the full report). Without --check
        /// every report is full already.
        #[arg(long)]
        verify: bool,
        /// Also write the store's timeline as a self-contained SVG picture
        /// to FILE: the CAs' and leaves' lifetimes, the previous CA's trust,
        /// the rotation due, problems in red.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// On a kube:// store: the prefix of the annotations `pki
        /// controller` reads (its --annotation-prefix). The report lists the
        /// Services and objects annotated under it and whether each holds
        /// the current bundle; --check exits 3 when one lags past the reload
        /// interval. Other stores have no such objects.
        #[arg(long, default_value = pki_kube::controller::DEFAULT_ANNOTATION_PREFIX, value_name = "P")]
        annotation_prefix: String,
        /// The time to report at, like 2027-02-01T00:00:00Z, or "now".
        #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
        now: OffsetDateTime,
    },
    /// Verify a chain (leaf first, then intermediates) against a bundle.
    Verify(VerifyCommand),
    /// Print the root pin of a bundle: SHA-256 of the root certificate's DER.
    Pin {
        /// A PEM bundle.
        file: PathBuf,
        /// Refuse input files larger than this, like 16M or 1G.
        #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
        max_input_size: u64,
    },
    /// Show every certificate in a PEM file: subject, issuer, SKI/AKI,
    /// validity with a countdown, SANs, and which CA of a store issued it.
    Inspect {
        /// A PEM file (certificates; other blocks are skipped).
        file: PathBuf,
        /// A store whose current and previous CA to match issuers against.
        #[arg(long, value_parser = StoreArg::parse, value_name = "DIR")]
        store: Option<StoreArg>,
        /// The time countdowns are relative to, like 2027-02-01T00:00:00Z, or "now".
        #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
        now: OffsetDateTime,
        /// Refuse input files larger than this, like 16M or 1G.
        #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
        max_input_size: u64,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write every page (pki.1 and one per
    /// command) into OUTDIR; generated from this command's definition.
    #[command(hide = true)]
    Man {
        /// Where to write the pages.
        outdir: Option<PathBuf>,
    },
    /// Write a store's published files (certificates, bundle, keys) into a
    /// directory, in the directory layout.
    Export {
        /// The store: a directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        store: StoreArg,
        /// Where to write the files (created if missing).
        outdir: PathBuf,
    },
    /// A set of CAs rotated in gated steps (GEP-18, StarlingX).
    Set {
        #[command(subcommand)]
        command: set::SetCommand,
    },
    /// Print what a target acknowledges: SHA-256 over a target directory's
    /// file paths and contents; with --bundle, a CA bundle's token (the
    /// `bundle_fingerprint` of `pki status --json`).
    Fingerprint(fingerprint::FingerprintArgs),
    /// Record that CONSUMER loaded the CA bundle FP (see `pki fingerprint
    /// --bundle`); `pki status` lists the consumers that lag.
    Ack(fingerprint::AckArgs),
    /// Rotate credentials minted by an outside system through mint and revoke hooks.
    #[command(subcommand)]
    Cred(CredCommand),
    /// Service-account token signing keys: a key ring rotated with a grace period.
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// The key that seals private material in a store (PKI_STORE_KEY_FILE).
    StoreKey {
        #[command(subcommand)]
        command: store_key::StoreKeyCommand,
    },
    /// Find what breaks path builders in bundles and chains before they ship.
    Lint(lint::LintArgs),
    /// Simulate the store's rotations, bridge expiries and leaf refreshes
    /// until a time, and the policy checks that would bite; writes nothing.
    Plan(plan::PlanArgs),
    /// Walk through a whole rotation on a temporary store with a simulated clock.
    Demo {
        /// `set`: a CA set rotated in gated steps, with the mutual-TLS matrix per step.
        #[arg(value_parser = ["set"])]
        scenario: Option<String>,
        /// Keep the demo store in this directory instead of a temporary one.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Start the simulated clock at TIME instead of the current hour
        /// (the same TIME makes the same story, the picture included).
        #[arg(long, value_parser = parse_time, value_name = "TIME")]
        now: Option<time::OffsetDateTime>,
        /// Also write the demo store's timeline, as `pki status --svg`
        /// draws it after both rotations, to FILE (the service-CA demo;
        /// `set` draws none).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
}

/// The arguments of `pki issue`.
#[derive(clap::Args)]
struct IssueCommand {
    /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// Certificate name: files go to certs/NAME/.
    name: String,
    /// DNS subjectAltName (repeat for more).
    #[arg(long, required_unless_present = "ip")]
    dns: Vec<String>,
    /// IP subjectAltName (repeat for more).
    #[arg(long)]
    ip: Vec<IpAddr>,
    /// Issue a client certificate (clientAuth) instead of a server one.
    #[arg(long)]
    client: bool,
    /// Certificate lifetime, like 365d (cut at the CA's expiry).
    #[arg(long, value_parser = parse_duration)]
    lifetime: Option<Duration>,
    /// Allow changing an existing certificate's kind (server, client)
    /// or dropping some of its names.
    #[arg(long)]
    replace: bool,
    /// Print the result as JSON (docs/issue.schema.json).
    #[arg(long)]
    json: bool,
    /// The time to act at, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    now: OffsetDateTime,
}

impl IssueCommand {
    fn run(self) -> common::CliResult {
        let IssueCommand {
            dir,
            name,
            dns,
            ip,
            client,
            lifetime,
            replace,
            json,
            now,
        } = self;
        issue::run(issue::IssueArgs {
            dir: &dir,
            name: &name,
            dns,
            ip,
            client,
            lifetime,
            replace,
            json,
            now,
        })
    }
}

/// The arguments of `pki rotate`.
#[derive(clap::Args)]
struct RotateCommand {
    /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// Force a rotation, once per distinct reason.
    #[arg(long, value_name = "REASON")]
    force: Option<String>,
    /// Emergency: trust the previous CA only this long (instead of
    /// max(its expiry, now + M)).
    #[arg(long, requires = "force", value_parser = parse_duration, conflicts_with = "compromised")]
    grace: Option<Duration>,
    /// The previous CA's key is compromised: issue no bridges, distrust it at once.
    #[arg(long, requires = "force")]
    compromised: bool,
    /// Rotate even though some consumers would stop trusting each other
    /// (an expired CA; a rotation soon after another), for this reason,
    /// recorded in the history. Not with --to (--force REASON overrides a
    /// supplied CA's checks) or --renew-same-key (which breaks nothing).
    #[arg(long, value_name = "REASON", conflicts_with_all = ["to", "renew_same_key"])]
    allow_trust_break: Option<String>,
    /// Print the result as JSON (docs/rotate.schema.json).
    #[arg(long)]
    json: bool,
    /// Print only what was done, and nothing when nothing was due, so
    /// that cron mails only when something happened (errors still go to
    /// stderr).
    #[arg(long, short, conflicts_with_all = ["json", "to", "renew_same_key"])]
    quiet: bool,
    /// The time to act at, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    now: OffsetDateTime,
    /// Rotate to this supplied CA (PEM: its certificate, maybe its key
    /// and chain) after validating it; --force REASON overrides failed checks.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["grace", "compromised", "renew_same_key"])]
    to: Option<PathBuf>,
    /// The supplied CA's private key, when not in the --to file.
    #[arg(long, value_name = "FILE", requires = "to")]
    key_file: Option<PathBuf>,
    /// The supplied CA's key as an object in a PKCS#11 token, made by the
    /// operator: pki signs with it and never destroys it. A URI like
    /// pkcs11:token=LABEL;object=NAME (or id=...).
    #[arg(long, value_name = "PKCS11-URI", value_parser = crate::token::parse_uri, requires = "to", conflicts_with = "key_file")]
    key_uri: Option<pki_core::Pkcs11Uri>,
    /// The chain above the supplied CA (its issuer first, the root last).
    #[arg(long, value_name = "FILE", requires = "to")]
    chain: Option<PathBuf>,
    /// The service-account key set that comes with the supplied CA (PEM
    /// public or private keys); it must keep the key ring's current keys.
    #[arg(long, value_name = "FILE", requires = "to")]
    service_account_keys: Option<PathBuf>,
    /// Issue a new CA certificate on the same key and Subject: every
    /// certificate and pin stays valid, nothing is re-issued.
    #[arg(long, conflicts_with_all = ["force", "grace", "compromised"])]
    renew_same_key: bool,
    /// Refuse input files larger than this, like 16M or 1G.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
    max_input_size: u64,
}

impl RotateCommand {
    fn run(self) -> common::CliResult {
        let RotateCommand {
            dir,
            force,
            grace,
            compromised,
            allow_trust_break,
            json,
            quiet,
            now,
            to,
            key_file,
            key_uri,
            chain,
            service_account_keys,
            renew_same_key,
            max_input_size,
        } = self;

        if let Some(ca) = to {
            let files = external::CaFiles {
                ca,
                key: key_file,
                chain,
                key_uri,
                max_input_size,
            };
            return rotate::run_to(
                &dir,
                &files,
                service_account_keys.as_deref(),
                force,
                json,
                now,
            );
        }
        if renew_same_key {
            return rotate::run_renew_same_key(&dir, json, now);
        }
        let forced = force.map(|reason| pki_rotate::ForcedRotation {
            reason,
            grace,
            no_bridges: compromised,
        });
        rotate::run_guarded(&rotate::GuardedArgs {
            dir: &dir,
            forced: forced.as_ref(),
            allow_trust_break: allow_trust_break.as_deref(),
            json,
            quiet,
            now,
        })
    }
}

/// The arguments of `pki validate`.
#[derive(clap::Args)]
struct ValidateCommand {
    /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// The proposed CA (PEM: its certificate, maybe its key and chain).
    #[arg(long, value_name = "FILE")]
    to: PathBuf,
    /// Its private key, when not in the --to file.
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Its key as an object in a PKCS#11 token, like
    /// pkcs11:token=LABEL;object=NAME (or id=...).
    #[arg(long, value_name = "PKCS11-URI", value_parser = crate::token::parse_uri, conflicts_with = "key_file")]
    key_uri: Option<pki_core::Pkcs11Uri>,
    /// The chain above it (its issuer first, the root last).
    #[arg(long, value_name = "FILE")]
    chain: Option<PathBuf>,
    /// The proposed service-account key set (PEM public or private keys).
    #[arg(long, value_name = "FILE")]
    service_account_keys: Option<PathBuf>,
    /// Print {"ok", "checks": [{"name", "ok", "detail"}]} on stdout.
    #[arg(long)]
    json: bool,
    /// The time to validate at, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    now: OffsetDateTime,
    /// Refuse input files larger than this, like 16M or 1G.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
    max_input_size: u64,
}

impl ValidateCommand {
    fn run(self) -> common::CliResult {
        let ValidateCommand {
            dir,
            to,
            key_file,
            key_uri,
            chain,
            service_account_keys,
            json,
            now,
            max_input_size,
        } = self;
        validate::run(
            &dir,
            &external::CaFiles {
                ca: to,
                key: key_file,
                chain,
                key_uri,
                max_input_size,
            },
            service_account_keys.as_deref(),
            json,
            now,
        )
    }
}

/// The arguments of `pki verify`.
#[derive(clap::Args)]
struct VerifyCommand {
    /// Trusted CA bundle (PEM).
    #[arg(long)]
    bundle: PathBuf,
    /// Chain file (PEM): the leaf, then any untrusted intermediates.
    #[arg(long)]
    chain: PathBuf,
    /// Expected DNS name.
    #[arg(long, conflicts_with = "ip")]
    dns: Option<String>,
    /// Expected IP address.
    #[arg(long)]
    ip: Option<IpAddr>,
    /// What the leaf is for.
    #[arg(long, default_value = "server", value_parser = parse_purpose)]
    purpose: pki_core::verify::Purpose,
    /// Validation time, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    at: OffsetDateTime,
    /// Print the result as JSON (docs/verify.schema.json).
    #[arg(long)]
    json: bool,
    /// Refuse input files larger than this, like 16M or 1G.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
    max_input_size: u64,
}

impl VerifyCommand {
    fn run(self) -> common::CliResult {
        let VerifyCommand {
            bundle,
            chain,
            dns,
            ip,
            purpose,
            at,
            json,
            max_input_size,
        } = self;
        verify::run(&verify::VerifyArgs {
            bundle: &bundle,
            chain: &chain,
            dns,
            ip,
            purpose,
            at,
            json,
            max_input_size,
        })
    }
}

fn parse_key(s: &str) -> Result<KeyAlgorithm, String> {
    s.parse().map_err(|e: pki_core::Error| e.to_string())
}

fn parse_purpose(s: &str) -> Result<pki_core::verify::Purpose, String> {
    match s {
        "server" => Ok(pki_core::verify::Purpose::ServerAuth),
        "client" => Ok(pki_core::verify::Purpose::ClientAuth),
        other => Err(format!(
            "unknown purpose \"{other}\" (expected server or client)"
        )),
    }
}

fn run_cred(command: CredCommand) -> common::CliResult {
    match command {
        CredCommand::Init {
            dir,
            name,
            expire,
            grace,
            mint_cmd,
            revoke_cmd,
            run,
        } => cred::init(cred::InitArgs {
            dir: &dir,
            name: &name,
            expire,
            grace,
            mint_cmd: &mint_cmd,
            revoke_cmd: &revoke_cmd,
            options: run.options(),
        }),
        CredCommand::Reconcile { dir, name, run } => {
            cred::reconcile(&dir, name.as_deref(), &run.options())
        }
        CredCommand::Status {
            dir,
            json,
            check,
            now,
        } => cred::status(&dir, json, check, now),
    }
}

fn run(cli: Cli) -> common::CliResult {
    match cli.command {
        Command::Init(command) => command.run(),
        Command::Issue(command) => command.run(),
        Command::Renew { dir, name, now } => renew::run(&dir, &name, now),
        Command::Remove { dir, name, now } => remove::run(&dir, &name, now),
        Command::Rotate(command) => command.run(),
        Command::Controller(command) => command.run(),
        Command::Status {
            dir,
            json,
            check,
            verify,
            now,
            svg,
            annotation_prefix,
        } => status::run_drawing(
            &dir,
            status::Output {
                json,
                check,
                verify,
            },
            now,
            svg.as_deref(),
            &annotation_prefix,
        ),
        Command::Verify(command) => command.run(),
        Command::Pin {
            file,
            max_input_size,
        } => pin::run(&file, max_input_size),
        Command::Inspect {
            file,
            store,
            now,
            max_input_size,
        } => inspect::run(&file, store.as_ref(), now, max_input_size),
        Command::Completions { shell } => completions::completions(shell),
        Command::Validate(command) => command.run(),
        Command::Man { outdir } => completions::man(outdir.as_deref()),
        Command::Export { store, outdir } => stores::export(&store, &outdir),
        Command::Set { command } => set::run(command),
        Command::Fingerprint(args) => fingerprint::fingerprint(args),
        Command::Ack(args) => fingerprint::ack(args),
        Command::Demo {
            scenario: Some(_),
            dir,
            now,
            svg,
        } => match svg {
            Some(_) => Err(common::CliError::new(
                "pki demo set: --svg draws the service-CA demo's store (`pki demo --svg FILE`); \
                 a CA set has no timeline picture",
            )),
            None => demo_set::run(dir.as_deref(), now),
        },
        Command::Demo {
            scenario: None,
            dir,
            now,
            svg,
        } => demo::run(dir.as_deref(), now, svg.as_deref()),
        Command::Cred(command) => run_cred(command),
        Command::Keys { command } => keys::run(command),
        Command::StoreKey { command } => store_key::run(command),
        Command::Lint(args) => lint::run(args),
        Command::Plan(args) => plan::run(args),
    }
}

fn main() -> ExitCode {
    // A bug must still end in one line, never a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let text = info.to_string();
        // Output is written with `outln!`, which never panics; a `println!`
        // somewhere still would when the reader has gone: stop quietly with
        // the status a shell shows for a process ended by SIGPIPE.
        if text.contains("failed printing to stdout") {
            std::process::exit(141);
        }
        eprintln!("pki: internal error: {}", common::one_line(&text));
    }));
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| {
        suggest::improve(e, <Cli as clap::CommandFactory>::command(), &args).exit()
    });
    if let Some(timeout) = cli.lock_timeout {
        common::set_lock_timeout(timeout);
    }
    let result = run(cli);
    // A write that may have landed outranks a failure to print: exit 1
    // would tell the caller the store is unchanged.
    let unknown = matches!(&result, Err(e) if e.status == common::EXIT_UNKNOWN_OUTCOME);
    if !unknown && let Some(e) = common::stdout_error() {
        eprintln!("pki: {}", common::one_line(&e));
        return ExitCode::from(common::EXIT_FAILED);
    }
    match result {
        Ok(()) => ExitCode::from(common::exit_status()),
        Err(e) => {
            eprintln!("pki: {}", common::one_line(&e.message));
            for detail in &e.details {
                eprintln!("  {}", common::one_line(detail));
            }
            ExitCode::from(e.status)
        }
    }
}
