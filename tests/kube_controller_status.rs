//! What operators see of `pki controller`, on a real kube-apiserver:
//! `pki status kube://…` lists every annotated Service and object and
//! whether each holds the current bundle (text and `--json`, checked
//! against docs/status.schema.json), `--check` exits 3 once one lags past
//! the reload interval and not before; and the Events the controller
//! records: a serving certificate issued and re-issued with its reason, a
//! Secret it did not create, a bundle injected, an injection refused, and
//! the rotation on the store's own object.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The kube-apiserver support includes pki-etcd's `free_port` by path.
#![allow(clippy::duplicate_mod)]

#[path = "support/kube_controller.rs"]
mod controller_support;
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;
#[path = "support/schema.rs"]
mod schema;

use controller_support::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams};
use kube_support::admin::Admin;
use kube_support::kube::KubeServer;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `pki status STORE ARGS --now NOW`: its exit code and stdout.
fn status(server: &KubeServer, home: &Path, args: &[&str], now: &str) -> (i32, String) {
    let mut all = vec!["status", STORE, "--now", now];
    all.extend_from_slice(args);
    let out = output(pki(server, home, &all));
    let code = out.status.code().unwrap();
    assert!(
        code == 0 || code == 3,
        "status {args:?}: exit {code}: {}",
        text(&out.stderr)
    );
    (code, text(&out.stdout))
}

/// The report's `injection_targets`, checked against the schema, by
/// `KIND NAMESPACE/NAME`.
fn targets(server: &KubeServer, home: &Path, now: &str) -> (Value, BTreeMap<String, Value>) {
    let (_, json) = status(server, home, &["--json"], now);
    schema::validate("status.schema.json", &json, "status of a kube:// store");
    let report: Value = serde_json::from_str(&json).unwrap();
    let by_object = report["injection_targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let namespace = t["namespace"].as_str().map(|ns| format!("{ns}/"));
            let name = format!(
                "{} {}{}",
                t["kind"].as_str().unwrap(),
                namespace.unwrap_or_default(),
                t["name"].as_str().unwrap()
            );
            (name, t.clone())
        })
        .collect();
    (report, by_object)
}

/// A webhook configuration with one webhook that no request reaches.
fn webhook_configuration() -> ValidatingWebhookConfiguration {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "v", "annotations": {"pki.invalid/inject-cabundle": "true"}},
        "webhooks": [{
            "name": "a.pki.invalid",
            "clientConfig": {"service": {"namespace": APPS, "name": "web", "path": "/a"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["pki.invalid"],
                       "apiVersions": ["v1"], "resources": ["gadgets"]}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap()
}

/// An APIService served by the API server itself: annotated, but with no
/// `caBundle` to inject.
fn local_api_service() -> APIService {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "v1.local.pki.invalid",
                     "annotations": {"pki.invalid/inject-cabundle": "true"}},
        "spec": {"group": "local.pki.invalid", "version": "v1",
                 "groupPriorityMinimum": 1000, "versionPriority": 15},
    }))
    .unwrap()
}

/// The cluster of the test: two Services (one naming a Secret pki did not
/// create), two ConfigMaps (one immutable), a webhook configuration and a
/// local APIService, all annotated.
fn annotated_objects(cluster: &Cluster) {
    cluster.create(&Secret {
        metadata: meta("foreign", &[]),
        data: Some(BTreeMap::from([(
            "tls.crt".to_string(),
            ByteString(b"not pki's".to_vec()),
        )])),
        ..Secret::default()
    });
    cluster.create(&service("web", "web-tls"));
    cluster.create(&service("taken", "foreign"));
    let inject = [("pki.invalid/inject-cabundle", "true")];
    cluster.create(&ConfigMap {
        metadata: meta("trust", &inject),
        ..ConfigMap::default()
    });
    cluster.create(&ConfigMap {
        metadata: meta("frozen", &inject),
        immutable: Some(true),
        data: Some(BTreeMap::from([("keep".to_string(), "me".to_string())])),
        ..ConfigMap::default()
    });
    let post = kube::api::PostParams::default();
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(cluster.client.clone());
    let api_services: Api<APIService> = Api::all(cluster.client.clone());
    cluster.runtime.block_on(async {
        hooks.create(&post, &webhook_configuration()).await.unwrap();
        api_services
            .create(&post, &local_api_service())
            .await
            .unwrap();
    });
}

const ALL: [&str; 5] = [
    "ConfigMap apps/frozen",
    "ConfigMap apps/trust",
    "Service apps/taken",
    "Service apps/web",
    "ValidatingWebhookConfiguration v",
];

#[test]
fn status_lists_annotated_objects_and_check_exits_3_only_once_one_lags_past_the_reload_interval() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    // Real time (the objects' creation times are real): a CA of 60 days
    // rotating 20 days before its end, so the reload interval is 20 days.
    let t0 = OffsetDateTime::now_utc();
    let at = |days: i64| (t0 + time::Duration::days(days)).format(&Rfc3339).unwrap();
    let init = ["init", STORE, "--lifetime", "60d", "--min-trust", "20d"];
    let out = output(pki(&server, home, &init));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    annotated_objects(&cluster);

    // No controller yet: every object lags, within the reload interval.
    let (report, before) = targets(&server, home, &at(1));
    assert_eq!(before.keys().collect::<Vec<_>>(), ALL, "{report:#}");
    assert!(
        before
            .values()
            .all(|t| t["current"] == false && t["overdue"] == false)
    );
    assert_eq!(
        before["Service apps/web"]["detail"],
        "Secret apps/web-tls does not exist yet"
    );
    assert_eq!(
        status(&server, home, &["--check"], &at(1)).0,
        0,
        "not before"
    );
    // Past it: overdue, exit 3, and the text says so.
    let (report, late) = targets(&server, home, &at(21));
    assert!(late.values().all(|t| t["overdue"] == true), "{report:#}");
    assert_eq!(report["health"], "action-due");
    let (code, table) = status(&server, home, &["--check"], &at(21));
    assert_eq!(code, 3, "{table}");
    assert!(
        table.contains("Service apps/web") && table.contains("LAGS"),
        "{table}"
    );
    assert!(table.contains("annotated objects lag"), "{table}");
    an_account_that_may_not_list_a_kind_gets_the_rest(&server, &cluster, home, &at(21));

    let log = tempfile::NamedTempFile::new().unwrap();
    // The controller names the kubeconfig's context, `pki status` does
    // not: the same store, so the Secrets it makes count as its own.
    let with_context = STORE.replace("kube://", "kube://pki-admin@");
    let child = pki(&server, home, &["controller", &with_context])
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let mut controller = Running(child);
    assert_events_of_a_first_pass(&cluster);

    // Converged but for the two objects the controller may not write.
    let (report, after) = targets(&server, home, &at(21));
    let bundle = report["bundle_fingerprint"].clone();
    for object in [
        "ConfigMap apps/trust",
        "Service apps/web",
        "ValidatingWebhookConfiguration v",
    ] {
        let target = &after[object];
        assert_eq!(target["current"], true, "{object}: {target:#}");
        assert_eq!(target["fingerprint"], bundle, "{object}");
    }
    let taken = &after["Service apps/taken"];
    assert_eq!(taken["overdue"], true, "{taken:#}");
    assert!(
        taken["detail"]
            .as_str()
            .unwrap()
            .contains("not created by pki controller")
    );
    assert_eq!(after["ConfigMap apps/frozen"]["overdue"], true);
    assert_eq!(status(&server, home, &["--check"], &at(21)).0, 3);
    // Without them, nothing lags: exit 0 past the reload interval.
    let services: Api<Service> = cluster.api();
    let config_maps: Api<ConfigMap> = cluster.api();
    cluster.runtime.block_on(async {
        let params = DeleteParams::default();
        services.delete("taken", &params).await.unwrap();
        config_maps.delete("frozen", &params).await.unwrap();
    });
    let (code, table) = status(&server, home, &["--check"], &at(21));
    assert_eq!(code, 0, "{table}");
    assert!(
        table.contains("Service apps/web") && table.contains("current: Secret apps/web-tls: leaf"),
        "{table}"
    );

    // A rotation by hand: the Service's Secret is re-issued with the
    // reason, and the store's head Secret records the rotation.
    let out = output(pki(
        &server,
        home,
        &["rotate", STORE, "--force", "key ceremony"],
    ));
    assert!(out.status.success(), "rotate: {}", text(&out.stderr));
    let web = (APPS, "Service", "web");
    let reissued = cluster.wait_for_event(web, "ServingCertReissued", "the CA was rotated");
    assert_eq!(reissued.type_, "Normal");
    let rotated = cluster.wait_for_event(
        ("pki", "Secret", "service-ca.signer"),
        "Rotated",
        "key ceremony",
    );
    assert!(rotated.note.contains("rotated CA"), "{rotated:?}");
    let (report, after) = targets(&server, home, &at(21));
    assert!(after.values().all(|t| t["current"] == true), "{report:#}");
    assert!(terminate(&mut controller).success(), "{}", read(&log));
}

/// The Events of the controller's first pass over [`annotated_objects`].
fn assert_events_of_a_first_pass(cluster: &Cluster) {
    let issued = cluster.wait_for_event(
        (APPS, "Service", "web"),
        "ServingCertIssued",
        "apps/web-tls",
    );
    assert_eq!(issued.type_, "Normal");
    let foreign = cluster.wait_for_event(
        (APPS, "Service", "taken"),
        "SecretNotOwned",
        "apps/foreign exists and was not created by pki controller",
    );
    assert_eq!(foreign.type_, "Warning");
    let injected = cluster.wait_for_event(
        (APPS, "ConfigMap", "trust"),
        "CABundleInjected",
        "1 certificates",
    );
    assert_eq!(injected.type_, "Normal");
    let refused = cluster.wait_for_event(
        (APPS, "ConfigMap", "frozen"),
        "InjectionRefused",
        "immutable",
    );
    assert_eq!(refused.type_, "Warning");
    // Cluster-scoped objects: their Events are in `default`.
    cluster.wait_for_event(
        ("default", "ValidatingWebhookConfiguration", "v"),
        "CABundleInjected",
        "CA bundle injected",
    );
    let local = cluster.wait_for_event(
        ("default", "APIService", "v1.local.pki.invalid"),
        "InjectionRefused",
        "no caBundle field",
    );
    assert_eq!(local.type_, "Warning");
}

/// An account that may read the store, Services and ConfigMaps but not
/// list the cluster-scoped kinds (403): `pki status` names each kind it
/// could not list on stderr, one line each, and reports the rest; `--check`
/// still judges what it listed.
fn an_account_that_may_not_list_a_kind_gets_the_rest(
    server: &KubeServer,
    cluster: &Cluster,
    home: &Path,
    now: &str,
) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let reader = kube_support::kube::READER;
    cluster.create_global::<ClusterRole>(serde_json::json!({
        "metadata": {"name": "pki-status-namespaced"},
        "rules": [{"apiGroups": [""], "resources": ["secrets", "services", "configmaps"],
                   "verbs": ["get", "list"]}],
    }));
    cluster.create_global::<ClusterRoleBinding>(serde_json::json!({
        "metadata": {"name": "pki-status-namespaced"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "pki-status-namespaced"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": reader}],
    }));
    let as_reader = |args: &[&str]| {
        let mut command = pki(
            server,
            home,
            &[&["status", STORE, "--now", now][..], args].concat(),
        );
        command.env("KUBECONFIG", server.reader_kubeconfig());
        output(command)
    };
    let out = as_reader(&["--json"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<String> = report["injection_targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{} {}",
                t["kind"].as_str().unwrap(),
                t["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            "ConfigMap frozen",
            "ConfigMap trust",
            "Service taken",
            "Service web"
        ],
        "{report:#}"
    );
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
        "CustomResourceDefinition",
    ] {
        let said = format!("{kind} not listed");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(&said)).collect();
        assert_eq!(lines.len(), 1, "{kind}: {stderr}");
    }
    // What it could list lags past the reload interval: exit 3, as the admin's.
    let out = as_reader(&["--check"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
}
