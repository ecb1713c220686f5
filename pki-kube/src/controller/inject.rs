//! CA-bundle injection into annotated ConfigMaps: the store's whole bundle
//! (current, previous and bridge while trusted), never only the new CA,
//! which is how an injector takes webhooks down in the middle of a
//! rotation.

use super::Writer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use std::sync::Arc;

/// The annotation (after the prefix) asking for injection; its value must
/// be `"true"`.
pub(super) const INJECT_CABUNDLE: &str = "inject-cabundle";

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
        match self
            .call(api.patch(&name, &params, &Patch::Merge(&patch)))
            .await
        {
            Ok(_) => self.notice(&format!(
                "ConfigMap {namespace}/{name}: CA bundle injected ({} certificates)",
                bundle.matches("-----BEGIN CERTIFICATE-----").count()
            )),
            Err(fail) if fail.is_not_found() => {}
            Err(fail) => self.notice(&format!(
                "ConfigMap {namespace}/{name}: injection failed: {}",
                fail.describe()
            )),
        }
    }
}
