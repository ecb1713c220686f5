//! CA-bundle injection into the API objects that carry a `caBundle`:
//! Validating- and MutatingWebhookConfigurations (each webhook's), an
//! APIService's, and a CustomResourceDefinition's conversion webhook. The
//! same rule as ConfigMaps ([`super::inject`]): the store's whole bundle,
//! written only where it lags, touching only the `caBundle` fields.

use super::Writer;
use super::inject::INJECT_CABUNDLE;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use std::sync::Arc;

/// A cluster-scoped object with `caBundle` fields.
pub(super) trait CaBundles:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + Clone
    + serde::de::DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// Its kind, for notices.
    const KIND: &'static str;

    /// Each `caBundle` it has, None where the field is unset.
    fn ca_bundles(&self) -> Vec<Option<&ByteString>>;

    /// The patch that sets every `caBundle` to `bundle` (base64 in JSON,
    /// as `ByteString` serializes), and nothing else.
    fn patch(&self, bundle: &Value) -> Patch<Value>;
}

/// The webhooks by name: a strategic merge patch merges `webhooks` by
/// `name`, so only the `caBundle` of each named webhook changes, whatever
/// order the list is in by the time the patch lands.
fn webhooks_patch<'a>(names: impl Iterator<Item = &'a str>, bundle: &Value) -> Patch<Value> {
    let webhooks: Vec<Value> = names
        .map(|name| json!({ "name": name, "clientConfig": { "caBundle": bundle } }))
        .collect();
    Patch::Strategic(json!({ "webhooks": webhooks }))
}

impl CaBundles for ValidatingWebhookConfiguration {
    const KIND: &'static str = "ValidatingWebhookConfiguration";

    fn ca_bundles(&self) -> Vec<Option<&ByteString>> {
        let webhooks = self.webhooks.iter().flatten();
        webhooks
            .map(|w| w.client_config.ca_bundle.as_ref())
            .collect()
    }

    fn patch(&self, bundle: &Value) -> Patch<Value> {
        webhooks_patch(
            self.webhooks.iter().flatten().map(|w| w.name.as_str()),
            bundle,
        )
    }
}

impl CaBundles for MutatingWebhookConfiguration {
    const KIND: &'static str = "MutatingWebhookConfiguration";

    fn ca_bundles(&self) -> Vec<Option<&ByteString>> {
        let webhooks = self.webhooks.iter().flatten();
        webhooks
            .map(|w| w.client_config.ca_bundle.as_ref())
            .collect()
    }

    fn patch(&self, bundle: &Value) -> Patch<Value> {
        webhooks_patch(
            self.webhooks.iter().flatten().map(|w| w.name.as_str()),
            bundle,
        )
    }
}

impl CaBundles for APIService {
    const KIND: &'static str = "APIService";

    /// None for a local APIService (no service) or one that skips TLS
    /// verification: the API server refuses a `caBundle` on those.
    fn ca_bundles(&self) -> Vec<Option<&ByteString>> {
        match &self.spec {
            Some(spec) if spec.service.is_some() && spec.insecure_skip_tls_verify != Some(true) => {
                vec![spec.ca_bundle.as_ref()]
            }
            _ => Vec::new(),
        }
    }

    fn patch(&self, bundle: &Value) -> Patch<Value> {
        Patch::Merge(json!({ "spec": { "caBundle": bundle } }))
    }
}

impl CaBundles for CustomResourceDefinition {
    const KIND: &'static str = "CustomResourceDefinition";

    /// The conversion webhook's, when it has a client configuration.
    fn ca_bundles(&self) -> Vec<Option<&ByteString>> {
        let conversion = self.spec.conversion.as_ref();
        let webhook = conversion.and_then(|c| c.webhook.as_ref());
        match webhook.and_then(|w| w.client_config.as_ref()) {
            Some(config) => vec![config.ca_bundle.as_ref()],
            None => Vec::new(),
        }
    }

    fn patch(&self, bundle: &Value) -> Patch<Value> {
        let client_config = json!({ "caBundle": bundle });
        let webhook = json!({ "clientConfig": client_config });
        Patch::Merge(json!({ "spec": { "conversion": { "webhook": webhook } } }))
    }
}

impl Writer<'_> {
    /// Writes `bundle` into every `caBundle` of `object` when it asks for
    /// injection and one of them lags.
    pub(super) async fn inject_ca_bundles<K: CaBundles>(&self, object: &Arc<K>, bundle: &str) {
        let key = format!("{}{INJECT_CABUNDLE}", self.options.annotation_prefix);
        if object.annotations().get(&key).map(|v| v.trim()) != Some("true") {
            return;
        }
        let name = object.name_any();
        let (kind, regarding) = (K::KIND, object.object_ref(&()));
        let described = format!("{kind} {name}");
        let current = object.ca_bundles();
        if current.is_empty() {
            let why = "it has no caBundle field (a local APIService, one that skips TLS verification, or a CRD without a conversion webhook)";
            return self.injection_refused(&regarding, &described, why).await;
        }
        let lags = current
            .iter()
            .any(|field| field.map(|b| b.0.as_slice()) != Some(bundle.as_bytes()));
        if !lags {
            return;
        }
        let value = match serde_json::to_value(ByteString(bundle.as_bytes().to_vec())) {
            Ok(value) => value,
            Err(e) => return self.notice(&format!("{described}: {e}")),
        };
        let api: Api<K> = Api::all(self.client.clone());
        let params = PatchParams {
            field_manager: Some(super::FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match self
            .call(api.patch(&name, &params, &object.patch(&value)))
            .await
        {
            Ok(_) => self.injected(&regarding, &described, bundle).await,
            Err(fail) if fail.is_not_found() => {}
            Err(fail) => {
                self.injection_refused(&regarding, &described, &fail.describe())
                    .await
            }
        }
    }
}
