//! The arguments of `pki cred`: its subcommands and the options every
//! run of the credential hooks shares.

use crate::common::{StoreArg, parse_duration, parse_size};
use crate::cred;
use clap::Subcommand;
use std::path::PathBuf;
use time::Duration;

#[derive(Subcommand)]
pub enum CredCommand {
    /// Record a credential and mint its first one with the mint hook.
    Init {
        /// Store directory (created if missing), etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Credential name: files go to creds/NAME/.
        name: String,
        /// Rotate once the credential is this old, like 720h.
        #[arg(long, value_parser = parse_duration)]
        expire: Duration,
        /// Keep the previous credential working this long after a new one
        /// is minted, like 10m.
        #[arg(long, value_parser = parse_duration)]
        grace: Duration,
        /// Run with `sh -c`: prints the new credential on stdout (env PKI_CRED_NAME).
        #[arg(long)]
        mint_cmd: String,
        /// Run with `sh -c`: revokes the credential it reads on stdin;
        /// revoking an already revoked one must succeed.
        #[arg(long)]
        revoke_cmd: String,
        #[command(flatten)]
        run: CredRunArgs,
    },
    /// Run every due step (keep old, mint, revoke) until one must wait.
    Reconcile {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Only this credential (default: every credential in the store).
        name: Option<String>,
        #[command(flatten)]
        run: CredRunArgs,
    },
    /// Show each credential's step, times, failures and next action.
    Status {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Exit 0 when nothing is due, 3 when a step is due, 4 when a hook
        /// is failing (for monitoring, like `pki status --check`).
        #[arg(long)]
        check: bool,
        /// The time to report at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = cred::Clock::parse)]
        now: cred::Clock,
    },
}

#[derive(clap::Args)]
pub struct CredRunArgs {
    /// The time to act at: RFC 3339 or "now" (the clock, read at each step).
    #[arg(long, default_value = "now", value_parser = cred::Clock::parse)]
    pub now: cred::Clock,
    /// Kill a hook (its whole process group) that runs longer than this.
    #[arg(long, default_value = cred::DEFAULT_HOOK_TIMEOUT, value_parser = cred::parse_timeout)]
    pub hook_timeout: std::time::Duration,
    /// Where the mint hook's output is captured (default: DIR/.cred-capture,
    /// or $XDG_STATE_HOME/pki/cred-capture/URL for a store URL).
    #[arg(long)]
    pub capture_dir: Option<PathBuf>,
    /// Stop after this many committed steps, to watch a rotation one step
    /// at a time (default: run until a step must wait).
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// The most the mint hook may print, like 64K or 1M: over it the mint
    /// failed, and all it printed is revoked (the store keeps up to the
    /// cap; the rest waits in the capture directory for the revocation).
    #[arg(long, default_value = cred::DEFAULT_MAX_OUTPUT, value_parser = parse_size, value_name = "SIZE")]
    pub max_output: u64,
}

impl CredRunArgs {
    pub fn options(self) -> cred::RunOptions {
        cred::RunOptions {
            clock: self.now,
            hook_timeout: self.hook_timeout,
            capture_dir: self.capture_dir,
            max_steps: self.max_steps,
            max_output: self.max_output,
        }
    }
}
