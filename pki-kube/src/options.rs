//! [`KubeOptions`]: where the credentials come from and how long a request
//! may take; and the kube-rs client they make.

use crate::fail;
use crate::url::KubeUrl;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use pki_rotate::Result;
use std::path::PathBuf;
use std::time::Duration;

/// How a Kubernetes store reaches the API server.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// The kubeconfig file to read. None: as kubectl does, `KUBECONFIG`
    /// or `~/.kube/config`, and when neither exists (and the URL names no
    /// context) the in-cluster service account.
    pub kubeconfig: Option<PathBuf>,
    /// How long loading the credentials, connecting, and checking that the
    /// server answers may take.
    pub connect_timeout: Duration,
    /// How long one request may take before it fails as a backend error.
    /// A commit that gets no answer within it is checked with one more
    /// request bounded the same way, so a write whose answer is lost fails
    /// within twice this, as [`StoreError::UnknownOutcome`](pki_rotate::StoreError::UnknownOutcome)
    /// unless that check finds it landed.
    pub request_timeout: Duration,
    /// How much older than a write's own first shard (by the server's
    /// clock) the shards of another attempt must be for that write to
    /// remove them as abandoned (an attempt killed before its commit).
    /// The rule is safe for any value when the API server's clock is one;
    /// the margin covers skew between the clocks of several API servers
    /// and the timestamps' whole seconds.
    pub abandoned_after: Duration,
}

impl Default for KubeOptions {
    /// 5 s to connect and 10 s a request, the bounds of the etcd store
    /// doubled for requests, since a shard is up to 768 KiB; shards of
    /// other attempts are abandoned a minute before a write's own.
    fn default() -> Self {
        KubeOptions {
            kubeconfig: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            abandoned_after: Duration::from_secs(60),
        }
    }
}

/// The client configuration for `url`: its context of the kubeconfig
/// `options` names (else kubectl's), or the in-cluster service account.
/// Requests are never retried by kube-rs: a write sent twice could land
/// twice or turn its own success into a conflict, so the store decides.
async fn config(url: &KubeUrl, options: &KubeOptions) -> std::result::Result<Config, String> {
    let kube_options = KubeConfigOptions {
        context: url.context().map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let mut config = match &options.kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| format!("reading kubeconfig {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(file, &kube_options)
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => match Config::from_kubeconfig(&kube_options).await {
            Ok(config) => config,
            // A context names a kubeconfig entry: no fallback.
            Err(e) if url.context().is_some() => return Err(format!("kubeconfig: {e}")),
            Err(kubeconfig) => Config::incluster().map_err(|in_cluster| {
                format!("no kubeconfig ({kubeconfig}) and not in a cluster ({in_cluster})")
            })?,
        },
    };
    config.connect_timeout = Some(options.connect_timeout);
    config.read_timeout = Some(options.request_timeout);
    config.write_timeout = Some(options.request_timeout);
    config.default_retry = false;
    Ok(config)
}

/// A client for `url`, checked to answer (`/version`) within
/// `options.connect_timeout`. Must run inside a tokio runtime (kube-rs
/// spawns its request buffer there).
pub(crate) async fn client(url: &KubeUrl, options: &KubeOptions) -> Result<Client> {
    let limit = options.connect_timeout;
    let config = match tokio::time::timeout(limit, config(url, options)).await {
        Ok(Ok(config)) => config,
        Ok(Err(e)) => return Err(fail::backend(url, format!("credentials: {e}"))),
        Err(_) => {
            return Err(fail::backend(
                url,
                format!("credentials: not loaded within {limit:?}"),
            ));
        }
    };
    let client = Client::try_from(config)
        .map_err(|e| fail::backend(url, format!("client: {}", fail::Fail::Kube(e).describe())))?;
    let answer = match tokio::time::timeout(limit, client.apiserver_version()).await {
        Ok(Ok(_)) => return Ok(client),
        Ok(Err(e)) => fail::Fail::Kube(e),
        Err(_) => fail::Fail::Timeout(limit),
    };
    Err(fail::backend(
        url,
        format!("connecting: {}", answer.describe()),
    ))
}
