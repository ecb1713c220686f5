//! CA-bundle injection into annotated ConfigMaps: the store's whole bundle
//! (current, previous and bridge while trusted), never only the new CA,
//! which is how an injector takes webhooks down in the middle of a
//! rotation.

use super::Writer;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use std::sync::Arc;

/// The annotation (after the prefix) asking for injection; its value must
/// be `"true"`.
pub(super) const INJECT_CABUNDLE: &str = "inject-cabundle";

/// The reason of the Event on an object that got the bundle.
pub(super) const CA_BUNDLE_INJECTED: &str = "CABundleInjected";

/// The reason of the Warning Event on an object that did not take it.
pub(super) const INJECTION_REFUSED: &str = "InjectionRefused";

/// The ConfigMap keys that get the bundle: the usual one, and the one the
/// service-CA operator's consumers read.
pub(super) const BUNDLE_KEYS: [&str; 2] = ["ca-bundle.crt", "service-ca.crt"];

/// Whether `config_map` asks for injection under `prefix` and does not
/// hold `bundle` under every key yet.
fn wants(config_map: &ConfigMap, prefix: &str, bundle: &str) -> bool {
    let key = format!("{prefix}{INJECT_CABUNDLE}");
    if config_map.annotations().get(&key).map(|v| v.trim()) != Some("true") {
        return false;
    }
    let data = config_map.data.as_ref();
    !BUNDLE_KEYS
        .iter()
        .all(|k| data.and_then(|d| d.get(*k)).map(String::as_str) == Some(bundle))
}

impl Writer<'_> {
    /// Writes `bundle` into `config_map` when it asks for it and lags.
    ///
    /// A merge patch under the controller's field manager sets only the
    /// two keys: the ConfigMap's other data and metadata stay as their
    /// owners wrote them. A merge patch rather than a server-side apply,
    /// because an apply of a ConfigMap deleted since the cache saw it
    /// would create it again; a patch of a deleted one is a 404.
    pub(super) async fn inject(&self, config_map: &Arc<ConfigMap>, bundle: &str) {
        if !wants(config_map, &self.options.annotation_prefix, bundle) {
            return;
        }
        let (Some(namespace), name) = (config_map.namespace(), config_map.name_any()) else {
            return;
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &namespace);
        let data: serde_json::Map<String, serde_json::Value> = BUNDLE_KEYS
            .iter()
            .map(|k| (k.to_string(), serde_json::Value::from(bundle)))
            .collect();
        let patch = serde_json::json!({ "data": data });
        let params = PatchParams {
            field_manager: Some(super::FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let regarding = config_map.object_ref(&());
        let object = format!("ConfigMap {namespace}/{name}");
        match self
            .call(api.patch(&name, &params, &Patch::Merge(&patch)))
            .await
        {
            Ok(_) => self.injected(&regarding, &object, bundle).await,
            Err(fail) if fail.is_not_found() => {}
            Err(fail) => {
                self.injection_refused(&regarding, &object, &fail.describe())
                    .await
            }
        }
    }

    /// Reports `object` (`KIND [NAMESPACE/]NAME`) as holding `bundle` now:
    /// a notice and an Event on it.
    pub(super) async fn injected(&self, regarding: &ObjectReference, object: &str, bundle: &str) {
        self.clear_refusal(object);
        let message = format!(
            "{object}: CA bundle injected ({} certificates)",
            bundle.matches("-----BEGIN CERTIFICATE-----").count()
        );
        self.notice(&message);
        self.event(regarding, EventType::Normal, CA_BUNDLE_INJECTED, message)
            .await;
    }

    /// Reports that `object` did not take the bundle, and `why`: a notice
    /// each time, a Warning Event on it once while the controller runs.
    pub(super) async fn injection_refused(
        &self,
        regarding: &ObjectReference,
        object: &str,
        why: &str,
    ) {
        let message = format!("{object}: injection refused: {why}");
        self.notice(&message);
        if self.first_refusal(object) {
            self.event(regarding, EventType::Warning, INJECTION_REFUSED, message)
                .await;
        }
    }
}
