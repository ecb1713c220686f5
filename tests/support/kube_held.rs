//! What a cluster holds of `pki controller`'s work, and whether it keeps
//! trust: the annotated objects the trust tests make, each serving Secret's
//! chain and every injected bundle, and RFC 5280 verification of one
//! against the other (tests/kube_controller_kill.rs,
//! tests/kube_controller_trust.rs).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::controller_support::{APPS, Cluster, STORE, T0, meta, output, pki, service, text};
use crate::kube_support::kube::KubeServer;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use pki_core::verify::{ExpectedName, Purpose, VerifyOptions, verify_chain};
use pki_core::{Bundle, Certificate};
use std::collections::BTreeMap;
use std::path::Path;
use time::OffsetDateTime;

/// `pki init` of the store at T0 with a CA of 120 days that rotates 60
/// days before its end (D = 2M, the shortest the policy allows): the
/// leaves of one rotation are still valid at the next, 60 days later.
/// `extra` are more arguments.
pub fn init_short_lived(server: &KubeServer, home: &Path, extra: &[&str]) {
    let mut init = vec![
        "init",
        STORE,
        "--now",
        T0,
        "--lifetime",
        "120d",
        "--min-trust",
        "60d",
    ];
    init.extend_from_slice(extra);
    let out = output(pki(server, home, &init));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
}

/// `services` Services `svcN` annotated for a serving Secret `svcN-tls`,
/// `config_maps` ConfigMaps `trustN` and a ValidatingWebhookConfiguration
/// `hooks` (two webhooks) annotated for injection.
pub fn create_annotated(cluster: &Cluster, services: usize, config_maps: usize) {
    for i in 0..services {
        cluster.create(&service(&format!("svc{i}"), &format!("svc{i}-tls")));
    }
    for i in 0..config_maps {
        cluster.create(&ConfigMap {
            metadata: meta(
                &format!("trust{i}"),
                &[("pki.invalid/inject-cabundle", "true")],
            ),
            ..ConfigMap::default()
        });
    }
    let hook = |name: &str| {
        serde_json::json!({
            "name": format!("{name}.pki.invalid"),
            "clientConfig": {"service": {"namespace": APPS, "name": "svc0", "path": "/"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["pki.invalid"],
                       "apiVersions": ["v1"], "resources": ["gadgets"]}],
            "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        })
    };
    cluster.create_global::<ValidatingWebhookConfiguration>(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "hooks", "annotations": {"pki.invalid/inject-cabundle": "true"}},
        "webhooks": [hook("a"), hook("b")],
    }));
}

/// What the cluster holds: each serving Secret's chain by name, and every
/// injected bundle (ConfigMap keys and webhook `caBundle`s).
pub struct Held {
    pub chains: BTreeMap<String, Vec<Certificate>>,
    pub bundles: Vec<String>,
}

pub fn held(cluster: &Cluster) -> Held {
    let chains = cluster
        .list::<Secret>()
        .iter()
        .filter_map(|s| {
            let chain = Certificate::all_from_pem(s.data.as_ref()?.get("tls.crt")?.0.as_slice());
            Some((s.metadata.name.clone()?, chain.ok()?))
        })
        .collect();
    let mut bundles: Vec<String> = Vec::new();
    for config_map in cluster.list::<ConfigMap>() {
        let data = config_map.data.unwrap_or_default();
        for key in ["ca-bundle.crt", "service-ca.crt"] {
            bundles.push(data.get(key).cloned().unwrap_or_default());
        }
    }
    let hooks = [
        "/webhooks/0/clientConfig/caBundle",
        "/webhooks/1/clientConfig/caBundle",
    ];
    let injected = cluster.ca_bundles::<ValidatingWebhookConfiguration>("hooks", &hooks);
    bundles.extend(injected.into_iter().map(Option::unwrap_or_default));
    Held { chains, bundles }
}

/// Whether `chain` (a Service `svc`'s) verifies against `bundle` at `at`.
pub fn verifies(
    chain: &[Certificate],
    bundle: &str,
    svc: &str,
    at: OffsetDateTime,
) -> Result<(), String> {
    let bundle = Bundle::from_pem(bundle.as_bytes()).map_err(|e| e.to_string())?;
    let (leaf, intermediates) = chain.split_first().ok_or("an empty chain")?;
    let mut options = VerifyOptions::new(at, Purpose::ServerAuth);
    options.name = Some(ExpectedName::Dns(format!("{svc}.{APPS}.svc")));
    verify_chain(leaf, intermediates, &bundle, &options)
        .map(drop)
        .map_err(|e| e.to_string())
}
