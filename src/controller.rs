//! `pki controller kube://NAMESPACE/NAME`: the service-CA controller
//! ([`pki_kube::controller`]) on a tokio runtime of its own, until SIGTERM
//! or SIGINT.

use crate::common::{CliError, CliResult, one_line, os_rng, parse_duration, parse_time};
use pki_kube::KubeUrl;
use pki_kube::controller::{Clock, Controller, ControllerOptions, DEFAULT_ANNOTATION_PREFIX};
use pki_rotate::{SealedStore, SealingKeys};
use std::sync::Arc;
use time::{Duration, OffsetDateTime};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The arguments of `pki controller`.
#[derive(clap::Args)]
pub struct ControllerCommand {
    /// The store: kube://[CONTEXT@]NAMESPACE/NAME (made by `pki init`).
    #[arg(value_parser = parse_kube_url, value_name = "kube://NAMESPACE/NAME")]
    store: KubeUrl,
    /// The prefix of the annotations read on Services and ConfigMaps.
    #[arg(long, default_value = DEFAULT_ANNOTATION_PREFIX, value_name = "P")]
    annotation_prefix: String,
    /// How long a replica's hold on the leader Lease (NAME.controller in the
    /// store's namespace) lasts without renewal: one replica of several
    /// acts, and another takes over within this when it stops.
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DUR")]
    lease_duration: Duration,
    /// The longest pause between two passes, changes or not.
    #[arg(long, default_value = "10m", value_parser = parse_duration, value_name = "DUR")]
    resync: Duration,
    /// Freeze the controller's clock at this time (tests), like
    /// 2027-02-01T00:00:00Z, or "now".
    #[arg(long, value_parser = parse_time, value_name = "TIME")]
    now: Option<OffsetDateTime>,
}

fn parse_kube_url(s: &str) -> Result<KubeUrl, String> {
    if !pki_kube::is_kube_url(s) {
        return Err(format!(
            "\"{}\" is not a kube:// store: pki controller runs on kube://[CONTEXT@]NAMESPACE/NAME",
            s.escape_debug()
        ));
    }
    KubeUrl::parse(s).map_err(|e| e.to_string())
}

/// A duration as the standard library's (positive: parse_duration says so).
fn std_duration(d: Duration) -> std::time::Duration {
    std::time::Duration::try_from(d).unwrap_or(std::time::Duration::ZERO)
}

impl ControllerCommand {
    pub fn run(self) -> CliResult {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pki-controller")
            .enable_all()
            .build()
            .map_err(|e| CliError::new(format!("cannot start a tokio runtime: {e}")))?;
        runtime.block_on(self.run_async())
    }

    fn options(&self) -> ControllerOptions {
        ControllerOptions {
            annotation_prefix: self.annotation_prefix.clone(),
            resync: std_duration(self.resync),
            lease_duration: std_duration(self.lease_duration),
            clock: self.now.map_or(Clock::Real, Clock::Frozen),
            notice: Some(Arc::new(|notice| {
                eprintln!("pki: controller: {}", one_line(notice))
            })),
            ..ControllerOptions::default()
        }
    }

    async fn run_async(self) -> CliResult {
        // Installed first: a SIGTERM while connecting is a clean stop too,
        // not the default action (killed, exit 143).
        let signals = Signals::install()?;
        let options = self.options();
        let url = &self.store;
        let client = pki_kube::controller::connect(url, &options.store).await?;
        let store = pki_kube::AsyncKubeStore::open(url, options.store.clone()).await?;
        // Sealed as every command seals a kube:// store: leaf keys in clear
        // (their Secrets publish them), everything else under the key.
        let keys = match crate::store_key::key_from_env()? {
            Some(key) => SealingKeys::single(key),
            None => SealingKeys::none(),
        };
        let store = SealedStore::new(store, keys, os_rng(), true)
            .clear_only(pki_rotate::is_published_leaf_key);
        let controller = Controller::with_store(client, url, store, options)
            .map_err(|e| CliError::new(e.to_string()))?;
        eprintln!("pki: controller: running on {url}");
        controller.run(signals.wait()).await.map_err(|e| match e {
            pki_kube::controller::ControllerError::Store(e) => CliError::from(e),
            other => CliError::new(other.to_string()),
        })?;
        eprintln!("pki: controller: stopped");
        Ok(())
    }
}

/// SIGTERM (what Kubernetes sends a Pod) and SIGINT (Ctrl-C).
struct Signals {
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    fn install() -> CliResult<Self> {
        let install = |kind: SignalKind| {
            signal(kind).map_err(|e| CliError::new(format!("cannot handle signals: {e}")))
        };
        Ok(Signals {
            terminate: install(SignalKind::terminate())?,
            interrupt: install(SignalKind::interrupt())?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}
