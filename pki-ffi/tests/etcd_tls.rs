//! `pki_store_open` with etcd options against an etcd that requires mutual TLS and a
//! user (started here, on certificates pki issued): the options as JSON,
//! files or PEM, a signer stepped through it, and a refused client or a bad
//! password as `PKI_RESULT_STORE` with a message saying which.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::undocumented_unsafe_blocks)] // every pointer here is a live local or handle

#[path = "../../pki-etcd/tests/support/certs.rs"]
mod certs;
#[path = "../../pki-etcd/tests/support/etcd.rs"]
mod etcd;

use pki_etcd::client::Permission;
use pki_etcd::{EtcdOptions, EtcdTls, EtcdUser};
use pki_ffi::*;
use std::ptr;

fn open(url: &str, options: &str) -> (pki_result, *mut pki_store, String) {
    let mut store = ptr::null_mut();
    let r = unsafe {
        pki_store_open(
            url.as_ptr().cast(),
            url.len(),
            options.as_ptr().cast(),
            options.len(),
            &mut store,
        )
    };
    let mut message = vec![0u8; 1024];
    let mut written = 0usize;
    unsafe { pki_last_error(message.as_mut_ptr().cast(), message.len(), &mut written) };
    message.truncate(written);
    (r, store, String::from_utf8_lossy(&message).into_owned())
}

#[test]
fn a_store_opened_with_tls_and_a_user_steps_a_signer() {
    let pki = certs::TestPki::new();
    let server = etcd::ServerTls {
        cert: pki.server.cert.clone(),
        key: pki.server.key.clone(),
        client_ca: Some(pki.ca.clone()),
    };
    let admin = EtcdOptions {
        tls: Some(EtcdTls::from_files(&pki.ca, Some((&pki.client.cert, &pki.client.key))).unwrap()),
        ..EtcdOptions::default()
    };
    let mut etcd = etcd::Etcd::start_tls(server, admin.clone());
    etcd.with_client(async |c| {
        let mut auth = c.auth();
        auth.user_add("root", "root-secret").await.unwrap();
        auth.user_grant_role("root", "root").await.unwrap();
        auth.role_add("ffi").await.unwrap();
        auth.role_grant_prefix("ffi", "ffi/", Permission::ReadWrite)
            .await
            .unwrap();
        auth.user_add("ffi", "ffi-secret").await.unwrap();
        auth.user_grant_role("ffi", "ffi").await.unwrap();
        auth.auth_enable().await.unwrap();
    });
    etcd.set_admin(EtcdOptions {
        user: Some(EtcdUser::new("root", "root-secret")),
        ..admin
    });
    let url = etcd.url("ffi/signer");
    let json = |extra: &str| {
        serde_json::json!({
            "ca_file": pki.ca,
            "cert_pem": String::from_utf8(pki.client.cert_pem()).unwrap(),
            "key_file": pki.client.key,
            "user": "ffi",
            "connect_timeout_seconds": 3,
        })
        .to_string()
        .replacen('{', &format!("{{{extra}"), 1)
    };

    let (r, store, message) = open(&url, &json(r#""password": "ffi-secret","#));
    assert_eq!(r, pki_result::PKI_RESULT_OK, "{message}");
    unsafe {
        let input = r#"{"common_name": "ffi-ca"}"#;
        let mut created = ptr::null_mut();
        let r = pki_document_create(
            store,
            pki_kind::PKI_KIND_SIGNER as u32,
            "signer".as_ptr().cast(),
            6,
            input.as_ptr().cast(),
            input.len(),
            1_767_225_600,
            &mut created,
        );
        assert_eq!(r, pki_result::PKI_RESULT_OK);
        pki_buffer_free(created);
        pki_store_free(store);
    }
    assert!(
        etcd.dump("ffi/signer")
            .iter()
            .any(|(k, _, _)| k == "ffi/signer/signer")
    );

    let (r, _, message) = open(&url, &json(r#""password": "wrong","#));
    assert_eq!(r, pki_result::PKI_RESULT_STORE, "{message}");
    assert!(message.contains("authentication failed"), "{message}");

    let no_identity = serde_json::json!({"ca_file": pki.ca}).to_string();
    let (r, _, message) = open(&url, &no_identity);
    assert_eq!(r, pki_result::PKI_RESULT_STORE, "{message}");
    assert!(
        message.contains("requires a client certificate"),
        "{message}"
    );

    for (options, expect) in [
        (
            r#"{"ca_file": "/nonexistent/ca.crt"}"#,
            "`ca_file`: cannot read",
        ),
        (r#"{"ca_pem": "x", "ca_file": "y"}"#, "not both"),
        (r#"{"user": "ffi"}"#, "needs `password` or `password_file`"),
        (r#"{"ca_pem": "x", "cert_pem": "y"}"#, "both its chain"),
        (r#"{"colour": 1}"#, "unknown field"),
    ] {
        let (r, _, message) = open(&url, options);
        assert_eq!(
            r,
            pki_result::PKI_RESULT_INVALID_ARGUMENT,
            "{options}: {message}"
        );
        assert!(message.contains(expect), "{options}: {message}");
    }
}
