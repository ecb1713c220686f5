//! The `pki` command-line tool: rotate a service CA kept in a directory.
//!
//! Exit status: 0 on success, 1 when an operation is refused or fails (with
//! a one-line reason on stderr), 2 on bad usage.

mod common;
mod demo;
mod init;
mod issue;
mod keys;
mod pin;
mod rotate;
mod status;
mod stores;
mod tls;
mod verify;

use clap::{Parser, Subcommand};
use common::{StoreArg, parse_duration, parse_time};
use pki_core::KeyAlgorithm;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use time::{Duration, OffsetDateTime};

#[derive(Parser)]
#[command(
    name = "pki",
    version,
    about = "Rotate X.509 certificate authorities without breaking trust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a store with a new self-signed CA.
    Init {
        /// Store directory (created if missing), or etcd://HOST:PORT/PREFIX.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Common name of the CA.
        #[arg(long, default_value = "service-ca")]
        cn: String,
        /// Key type: p256, rsa2048, rsa3072 or rsa4096.
        #[arg(long, default_value = "p256", value_parser = parse_key)]
        key: KeyAlgorithm,
        /// CA lifetime D, like 790d.
        #[arg(long, default_value = "790d", value_parser = parse_duration)]
        lifetime: Duration,
        /// Minimum trust M: rotate when less than this remains, like 395d.
        #[arg(long, default_value = "395d", value_parser = parse_duration)]
        min_trust: Duration,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Issue (or change) a serving certificate, or a client one with --client.
    Issue {
        /// Store directory, or etcd://HOST:PORT/PREFIX.
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
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Rotate the CA if due or forced; re-issue stale certificates.
    Rotate {
        /// Store directory, or etcd://HOST:PORT/PREFIX.
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
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Show the CA, bridges, bundle, certificates, expiries and the next action.
    Status {
        /// Store directory, or etcd://HOST:PORT/PREFIX.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// The time to report at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Verify a chain (leaf first, then intermediates) against a bundle.
    Verify {
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
        /// Validation time: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        at: OffsetDateTime,
    },
    /// Print the root pin of a bundle: SHA-256 of the root certificate's DER.
    Pin {
        /// A PEM bundle.
        file: PathBuf,
    },
    /// Write a store's published files (certificates, bundle, keys) into a
    /// directory, in the directory layout.
    Export {
        /// The store: a directory, or etcd://HOST:PORT/PREFIX.
        #[arg(value_parser = StoreArg::parse)]
        store: StoreArg,
        /// Where to write the files (created if missing).
        outdir: PathBuf,
    },
    /// Service-account token signing keys: a key ring rotated with a grace period.
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Walk through a whole rotation on a temporary store with a simulated clock.
    Demo {
        /// Keep the demo store in this directory instead of a temporary one.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
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

fn run(cli: Cli) -> common::CliResult {
    match cli.command {
        Command::Init {
            dir,
            cn,
            key,
            lifetime,
            min_trust,
            now,
        } => init::run(&init::InitArgs {
            dir: &dir,
            common_name: &cn,
            key,
            lifetime,
            min_trust,
            now,
        })
        .map(drop),
        Command::Issue {
            dir,
            name,
            dns,
            ip,
            client,
            lifetime,
            now,
        } => issue::run(issue::IssueArgs {
            dir: &dir,
            name: &name,
            dns,
            ip,
            client,
            lifetime,
            now,
        }),
        Command::Rotate {
            dir,
            force,
            grace,
            compromised,
            now,
        } => {
            let forced = force.map(|reason| pki_rotate::ForcedRotation {
                reason,
                grace,
                no_bridges: compromised,
            });
            rotate::run(&dir, forced.as_ref(), now)
        }
        Command::Status { dir, json, now } => status::run(&dir, json, now),
        Command::Verify {
            bundle,
            chain,
            dns,
            ip,
            purpose,
            at,
        } => verify::run(&verify::VerifyArgs {
            bundle: &bundle,
            chain: &chain,
            dns,
            ip,
            purpose,
            at,
        }),
        Command::Pin { file } => pin::run(&file),
        Command::Export { store, outdir } => stores::export(&store, &outdir),
        Command::Demo { dir } => demo::run(dir.as_deref()),
        Command::Keys { command } => keys::run(command),
    }
}

fn main() -> ExitCode {
    // A bug must still end in one line, never a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("pki: internal error: {info}");
    }));
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pki: {}", e.message);
            ExitCode::from(1)
        }
    }
}
