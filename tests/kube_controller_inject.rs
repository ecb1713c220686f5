//! `pki controller` on a real kube-apiserver, injection into the API
//! objects with a `caBundle` (webhook configurations, an APIService, a
//! CRD's conversion webhook), and the measurement at 100 Services and 100
//! injected ConfigMaps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The kube-apiserver support includes pki-etcd's `free_port` by path.
#![allow(clippy::duplicate_mod)]

// The API server and its admin: pki-kube's own test support, by path.
#[path = "support/kube_controller.rs"]
mod controller_support;
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;

use controller_support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_support::admin::Admin;
use kube_support::kube::KubeServer;
use pki_core::Bundle;
use std::time::{Duration, Instant};

/// A webhook configuration of `kind` with two webhooks that no request
/// ever reaches (a resource that does not exist; failures ignored).
fn webhooks(kind: &str, name: &str, annotated: bool) -> serde_json::Value {
    let webhook = |hook: &str| {
        serde_json::json!({
            "name": format!("{hook}.pki.invalid"),
            "clientConfig": {"service": {"namespace": APPS, "name": "web", "path": format!("/{hook}")}},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["pki.invalid"],
                       "apiVersions": ["v1"], "resources": ["gadgets"]}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    };
    let annotations = if annotated {
        serde_json::json!({"pki.invalid/inject-cabundle": "true"})
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "annotations": annotations},
        "webhooks": [webhook("a"), webhook("b")],
    })
}

/// A CRD with two versions converted by a webhook behind Service apps/web.
fn crd() -> serde_json::Value {
    let schema = serde_json::json!({"openAPIV3Schema": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.pki.invalid",
                     "annotations": {"pki.invalid/inject-cabundle": "true"}},
        "spec": {
            "group": "pki.invalid",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": APPS, "name": "web", "path": "/convert", "port": 443}},
            }},
        },
    })
}

fn api_service() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1.api.pki.invalid",
                     "annotations": {"pki.invalid/inject-cabundle": "true"}},
        "spec": {"group": "api.pki.invalid", "version": "v1",
                 "service": {"namespace": APPS, "name": "web", "port": 443},
                 "groupPriorityMinimum": 1000, "versionPriority": 15},
    })
}

#[test]
fn webhook_configurations_api_services_and_crds_get_the_whole_bundle_in_every_ca_bundle() {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration as Mutating, ValidatingWebhookConfiguration as Validating,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition as Crd;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    cluster.create_global::<Validating>(webhooks("ValidatingWebhookConfiguration", "v", true));
    cluster.create_global::<Validating>(webhooks("ValidatingWebhookConfiguration", "plain", false));
    cluster.create_global::<Mutating>(webhooks("MutatingWebhookConfiguration", "m", true));
    cluster.create_global::<Crd>(crd());
    cluster.create_global::<APIService>(api_service());
    let (mut controller, log) = spawn_controller(&server, home);

    let hooks = [
        "/webhooks/0/clientConfig/caBundle",
        "/webhooks/1/clientConfig/caBundle",
    ];
    let crd_field = ["/spec/conversion/webhook/clientConfig/caBundle"];
    let api_field = ["/spec/caBundle"];
    let every = |bundle: &str| {
        let mut all = cluster.ca_bundles::<Validating>("v", &hooks);
        all.extend(cluster.ca_bundles::<Mutating>("m", &hooks));
        all.extend(cluster.ca_bundles::<Crd>("widgets.pki.invalid", &crd_field));
        all.extend(cluster.ca_bundles::<APIService>("v1.api.pki.invalid", &api_field));
        all.iter().all(|b| b.as_deref() == Some(bundle))
    };
    for round in ["after init", "after a forced rotation"] {
        if round != "after init" {
            let rotate = ["rotate", STORE, "--force", "test", "--now", T1];
            let out = output(pki(&server, home, &rotate));
            assert!(out.status.success(), "rotate: {}", text(&out.stderr));
        }
        let bundle = cluster.store_bundle();
        let start = Instant::now();
        while !every(&bundle) {
            assert!(
                start.elapsed() < CONVERGE,
                "{round}: not injected\n{}",
                read(&log)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let bundle = Bundle::from_pem(cluster.store_bundle().as_bytes()).unwrap();
    assert_eq!(
        bundle.len(),
        2,
        "the new CA and the old CA's key (bridge A)"
    );
    let plain = cluster.ca_bundles::<Validating>("plain", &hooks);
    assert_eq!(
        plain,
        vec![None, None],
        "an object not annotated is left alone"
    );
    assert!(terminate(&mut controller).success());
}

/// The measurement the issue asks for, at 100 Services and 100 injected
/// ConfigMaps: from the Services annotated to the last Secret written, and
/// from a forced rotation to the last object current.
#[test]
fn a_hundred_services_and_a_hundred_config_maps_converge_after_annotation_and_rotation() {
    const N: usize = 100;
    let limit = Duration::from_secs(180);
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    let (mut controller, log) = spawn_controller(&server, home);

    let annotated = Instant::now();
    for i in 0..N {
        cluster.create(&service(&format!("svc{i}"), &format!("svc{i}-tls")));
        cluster.create(&ConfigMap {
            metadata: meta(
                &format!("trust{i}"),
                &[("pki.invalid/inject-cabundle", "true")],
            ),
            ..ConfigMap::default()
        });
    }
    let created = annotated.elapsed();
    let bundle = cluster.store_bundle();
    let current = |secrets: &[Secret], maps: &[ConfigMap], bundle: &str| {
        let served = secrets.iter().filter(|s| {
            s.data
                .as_ref()
                .is_some_and(|d| d.get("ca.crt").is_some_and(|b| b.0 == bundle.as_bytes()))
        });
        let injected = maps
            .iter()
            .filter(|c| injected(c, None).as_deref() == Some(bundle));
        served.count() == N && injected.count() == N
    };
    cluster.until("100 Secrets and 100 bundles", limit, &log, |s, c| {
        current(s, c, &bundle)
    });
    let first = annotated.elapsed();

    let chains: Vec<String> = cluster
        .list::<Secret>()
        .iter()
        .map(|s| data(s, "tls.crt"))
        .collect();
    let rotate = ["rotate", STORE, "--force", "test", "--now", T1];
    let rotated = Instant::now();
    let out = output(pki(&server, home, &rotate));
    assert!(out.status.success(), "rotate: {}", text(&out.stderr));
    let new_bundle = cluster.store_bundle();
    assert_ne!(new_bundle, bundle);
    cluster.until(
        "100 re-issued Secrets and 100 new bundles",
        limit,
        &log,
        |s, c| {
            current(s, c, &new_bundle) && s.iter().all(|s| !chains.contains(&data(s, "tls.crt")))
        },
    );
    let second = rotated.elapsed();
    eprintln!(
        "scale: {N} Services + {N} ConfigMaps created in {created:?}; all Secrets and bundles current {first:?} after the first was annotated; {second:?} from `pki rotate --force` to all {N} Secrets re-issued and {N} bundles current"
    );
    assert!(terminate(&mut controller).success(), "{}", read(&log));
}
