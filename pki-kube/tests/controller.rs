//! [`pki_kube::controller`] embedded in a program, on the program's own
//! tokio runtime, against a real kube-apiserver: it refuses a store
//! without a signer and a malformed annotation prefix, serves an annotated
//! Service with a Secret from the store's CA, reports what it did through
//! the notice function, and `run` returns Ok once the shutdown future
//! resolves.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use k8s_openapi::api::core::v1::{Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use pki_kube::KubeUrl;
use pki_kube::controller::{Clock, Controller, ControllerError, ControllerOptions, connect};
use pki_rotate::{Driver, RotateError, SignerEngine, SignerPolicy, SignerState, StoreError};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::admin::{Admin, open, options};
use support::kube::KubeServer;
use time::macros::datetime;

const URL: &str = "kube://pki/embedded";

fn service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("apps".into()),
            annotations: Some(
                [(
                    "example.invalid/serving-cert-secret-name".to_string(),
                    "web-tls".to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 443,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

#[test]
fn an_embedded_controller_serves_a_service_and_stops_when_asked() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    admin.create_namespace("apps");
    let t0 = datetime!(2026-01-01 00:00 UTC);
    let store = open(server.admin_kubeconfig(), URL);
    let signer = SignerState::new("service-ca", SignerPolicy::default(), t0, &mut rng()).unwrap();
    Driver::new(&store)
        .create::<SignerEngine>("signer", &signer)
        .unwrap();
    let url = KubeUrl::parse(URL).unwrap();
    let kube_options = options(server.admin_kubeconfig());
    let notices = Arc::new(Mutex::new(Vec::<String>::new()));
    let heard = Arc::clone(&notices);
    let controller_options = ControllerOptions {
        annotation_prefix: "example.invalid/".into(),
        clock: Clock::Frozen(t0 + time::Duration::hours(1)),
        store: kube_options.clone(),
        notice: Some(Arc::new(move |n| heard.lock().unwrap().push(n.to_string()))),
        ..ControllerOptions::default()
    };
    // The embedder's runtime.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = connect(&url, &kube_options).await.unwrap();
        refusals(&client, &controller_options).await;
        let services: Api<Service> = Api::namespaced(client.clone(), "apps");
        services
            .create(&PostParams::default(), &service())
            .await
            .unwrap();
        let controller = Controller::new(client.clone(), &url, controller_options)
            .await
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(controller.run(async {
            let _ = stopped.await;
        }));
        let secret = wait_for_secret(&client).await;
        let data = secret.data.unwrap();
        let bundle = String::from_utf8(data["ca.crt"].0.clone()).unwrap();
        let chain = pki_core::Certificate::all_from_pem(&data["tls.crt"].0).unwrap();
        assert_eq!(
            bundle,
            signer.bundle.to_pem(),
            "ca.crt is the store's bundle"
        );
        assert!(pki_core::issued_by(&chain[0], &signer.ca.cert).issued_by);
        // The Secret is visible before the controller has the answer to
        // its create, and notices it: stopping earlier abandons the pass.
        let told = "Secret apps/web-tls holds leaf svc.apps.web";
        for _ in 0..100 {
            if notices.lock().unwrap().iter().any(|n| n.contains(told)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.send(()).unwrap();
        let finished = tokio::time::timeout(Duration::from_secs(10), running).await;
        assert!(matches!(finished, Ok(Ok(Ok(())))), "{finished:?}");
    });
    let notices = notices.lock().unwrap();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("Secret apps/web-tls holds leaf svc.apps.web")),
        "{notices:#?}"
    );
}

/// A store without a signer fails `run` at once (NotInitialized), and a
/// prefix that is not an annotation prefix fails `new`.
async fn refusals(client: &kube::Client, options: &ControllerOptions) {
    let missing = KubeUrl::parse("kube://pki/missing").unwrap();
    let controller = Controller::new(client.clone(), &missing, options.clone())
        .await
        .unwrap();
    let error = controller.run(std::future::pending()).await.unwrap_err();
    assert!(
        matches!(
            error,
            ControllerError::Store(RotateError::Store(StoreError::NotInitialized(_)))
        ),
        "{error:?}"
    );
    let bad = ControllerOptions {
        annotation_prefix: "Not A Prefix".into(),
        ..options.clone()
    };
    let url = KubeUrl::parse(URL).unwrap();
    let refused = Controller::new(client.clone(), &url, bad).await;
    assert!(matches!(refused, Err(ControllerError::Prefix(_))));
}

/// The Secret apps/web-tls once it is there (bounded).
async fn wait_for_secret(client: &kube::Client) -> Secret {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "apps");
    let start = std::time::Instant::now();
    loop {
        if let Some(secret) = secrets.get_opt("web-tls").await.unwrap() {
            return secret;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no Secret in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn rng() -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(7)
}
