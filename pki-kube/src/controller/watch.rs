//! The controller's view of Services, ConfigMaps and the API objects with
//! a `caBundle`: a watch on each kind, in every namespace, feeding an
//! in-memory cache that passes read, and waking the loop when anything
//! changed.

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The client's read timeout for the controller: longer than a watch
/// request stays open (the watcher asks for 290 s), so a quiet watch is
/// not cut as a stalled request.
pub(super) const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(330);

/// How long the loop waits after a change for more before a pass: a burst
/// of changes (a Deployment's Services applied together, the store's own
/// publication) makes one pass, not one each.
const SETTLE: Duration = Duration::from_millis(200);

/// The watched caches, and the tasks that keep them.
pub(super) struct Watches {
    services: Store<Service>,
    config_maps: Store<ConfigMap>,
    /// The objects with `caBundle` fields, read as they are: an account
    /// that may not list one kind still gets Secrets and ConfigMaps.
    pub(super) validating: Store<ValidatingWebhookConfiguration>,
    pub(super) mutating: Store<MutatingWebhookConfiguration>,
    pub(super) api_services: Store<APIService>,
    pub(super) crds: Store<CustomResourceDefinition>,
    changed: Arc<Notify>,
    /// A change was taken from `changed` and no pass has been asked for
    /// it yet.
    seen: bool,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watches {
    /// The watch tasks live on the embedder's runtime: they end with the
    /// controller, not with the runtime.
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Watches {
    /// Starts watching Services and ConfigMaps in every namespace.
    pub(super) fn start(client: &Client) -> Self {
        let changed = Arc::new(Notify::new());
        let (services, service_task) = cache::<Service>(client, &changed);
        let (config_maps, config_map_task) = cache::<ConfigMap>(client, &changed);
        let (validating, validating_task) = cache(client, &changed);
        let (mutating, mutating_task) = cache(client, &changed);
        let (api_services, api_service_task) = cache(client, &changed);
        let (crds, crd_task) = cache(client, &changed);
        Watches {
            services,
            config_maps,
            validating,
            mutating,
            api_services,
            crds,
            changed,
            seen: false,
            tasks: vec![
                service_task,
                config_map_task,
                validating_task,
                mutating_task,
                api_service_task,
                crd_task,
            ],
        }
    }

    /// Resolves once the Services and ConfigMaps caches hold a first
    /// complete list (the others fill in as they list; their first list
    /// wakes the loop).
    pub(super) async fn ready(&self) {
        // An error means the watch task ended, which only Drop does.
        let _ = self.services.wait_until_ready().await;
        let _ = self.config_maps.wait_until_ready().await;
    }

    /// Resolves after a change to a watched object, once changes stop
    /// coming for a moment. A change seen by a call that was dropped
    /// before it resolved (the loop woke for another reason while it
    /// waited for changes to settle) is not lost: [`Watches::take_seen`]
    /// reports it.
    pub(super) async fn changed(&mut self) {
        self.changed.notified().await;
        self.seen = true;
        loop {
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep(SETTLE) => return,
            }
        }
    }

    /// Whether a change was seen since the last call.
    pub(super) fn take_seen(&mut self) -> bool {
        std::mem::take(&mut self.seen)
    }

    /// Every Service, as last seen.
    pub(super) fn services(&self) -> Vec<Arc<Service>> {
        self.services.state()
    }

    /// Every ConfigMap, as last seen.
    pub(super) fn config_maps(&self) -> Vec<Arc<ConfigMap>> {
        self.config_maps.state()
    }
}

/// A cache of every `K` in the cluster, kept by a task that notifies
/// `changed` on each event. The watcher lists, then watches from the
/// list's resourceVersion, re-listing when the server has compacted past
/// it; errors back off (kube-rs' default) instead of spinning.
fn cache<K>(client: &Client, changed: &Arc<Notify>) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + kube::runtime::reflector::Lookup<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(Api::<K>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff();
    let changed = Arc::clone(changed);
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {
            // Errors too: the watch restarted, and something may have
            // changed meanwhile.
            changed.notify_one();
        }
    });
    (reader, task)
}
