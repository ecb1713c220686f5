//! The CLI against an etcd that requires mutual TLS, on certificates pki
//! itself issued (`pki init` and `pki issue` on a directory): `etcds://`
//! URLs with PKI_ETCD_CACERT, PKI_ETCD_CERT and PKI_ETCD_KEY, users with
//! PKI_ETCD_USER and PKI_ETCD_PASSWORD_FILE, one line for each mistake, and
//! a rotation of etcd's own CA with `pki rotate` while pki keeps talking to
//! it, with the old client material and with the new.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_etcd::client::Permission;
use pki_etcd::{EtcdOptions, EtcdTls, EtcdUser};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::cli::{exited_with, succeeded};
use support::etcd::{Etcd, ServerTls};

const ENV: [&str; 5] = [
    "PKI_ETCD_CACERT",
    "PKI_ETCD_CERT",
    "PKI_ETCD_KEY",
    "PKI_ETCD_USER",
    "PKI_ETCD_PASSWORD_FILE",
];

/// Runs `pki ARGS` with exactly the PKI_ETCD_* variables of `env`.
fn pki_with(env: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pki"));
    for name in ENV {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.args(args).output().expect("run pki")
}

fn ok_with(env: &[(&str, &Path)], args: &[&str]) -> String {
    succeeded(args, pki_with(env, args))
}

/// `pki ARGS` is refused (exit 1, one line) with a line containing `expect`.
fn refused_with(env: &[(&str, &Path)], args: &[&str], expect: &str) -> String {
    let line = exited_with(1, args, &pki_with(env, args));
    assert!(line.contains(expect), "expected {expect:?} in: {line}");
    line
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// The CA directory etcd's certificates come from: a signer made by the
/// CLI, with a server certificate for 127.0.0.1 and a client certificate.
fn ca_dir(root: &Path) -> PathBuf {
    let dir = root.join("etcd-ca");
    let d = path(&dir);
    ok_with(&[], &["init", &d, "--cn", "etcd CA"]);
    ok_with(
        &[],
        &[
            "issue",
            &d,
            "etcd-server",
            "--dns",
            "localhost",
            "--ip",
            "127.0.0.1",
        ],
    );
    ok_with(
        &[],
        &["issue", &d, "pki-client", "--client", "--dns", "pki-client"],
    );
    dir
}

/// The client material a consumer loaded: copies, so that a later rotation
/// of the CA directory does not change them.
struct ClientFiles {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl ClientFiles {
    fn copy(ca_dir: &Path, to: &Path) -> ClientFiles {
        std::fs::create_dir_all(to).unwrap();
        let copy = |from: &str, name: &str| {
            let target = to.join(name);
            std::fs::copy(ca_dir.join(from), &target).unwrap();
            target
        };
        ClientFiles {
            ca: copy("ca-bundle.crt", "ca.crt"),
            cert: copy("certs/pki-client/tls.crt", "client.crt"),
            key: copy("certs/pki-client/tls.key", "client.key"),
        }
    }

    fn env(&self) -> Vec<(&'static str, &Path)> {
        vec![
            ("PKI_ETCD_CACERT", self.ca.as_path()),
            ("PKI_ETCD_CERT", self.cert.as_path()),
            ("PKI_ETCD_KEY", self.key.as_path()),
        ]
    }

    fn options(&self) -> EtcdOptions {
        EtcdOptions {
            tls: Some(EtcdTls::from_files(&self.ca, Some((&self.cert, &self.key))).unwrap()),
            ..EtcdOptions::default()
        }
    }
}

/// What etcd serves with, copied from the CA directory (etcd reads the
/// files when it starts).
fn install_server_files(ca_dir: &Path, conf: &Path) -> ServerTls {
    std::fs::create_dir_all(conf).unwrap();
    let copy = |from: &str, name: &str| {
        let target = conf.join(name);
        std::fs::copy(ca_dir.join(from), &target).unwrap();
        target
    };
    ServerTls {
        cert: copy("certs/etcd-server/tls.crt", "server.crt"),
        key: copy("certs/etcd-server/tls.key", "server.key"),
        client_ca: Some(copy("ca-bundle.crt", "client-ca.crt")),
    }
}

fn certificates(file: &Path) -> usize {
    pki_core::Certificate::all_from_pem(&std::fs::read(file).unwrap())
        .unwrap()
        .len()
}

#[test]
fn the_cli_talks_mutual_tls_to_etcd_through_a_rotation_of_etcds_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = ca_dir(tmp.path());
    let old = ClientFiles::copy(&ca, &tmp.path().join("old-client"));
    let server = install_server_files(&ca, &tmp.path().join("etcd-conf"));
    let mut etcd = Etcd::start_tls(server.clone(), old.options());
    let url = etcd.url("pki/app");
    assert!(url.starts_with("etcds://"), "{url}");

    ok_with(&old.env(), &["init", &url, "--cn", "app CA"]);
    ok_with(&old.env(), &["issue", &url, "web", "--dns", "web.app.svc"]);
    assert!(
        etcd.dump("pki/app")
            .iter()
            .any(|(k, _, _)| k == "pki/app/signer")
    );

    // Rotate etcd's CA: the bundle trusts the old CA and the new one, and
    // the leaves move to the new CA.
    let bundle_before = certificates(&ca.join("ca-bundle.crt"));
    ok_with(&[], &["rotate", &path(&ca), "--force", "rotate etcd's CA"]);
    ok_with(&[], &["renew", &path(&ca), "etcd-server"]);
    ok_with(&[], &["renew", &path(&ca), "pki-client"]);
    assert!(certificates(&ca.join("ca-bundle.crt")) > bundle_before);
    let new = ClientFiles::copy(&ca, &tmp.path().join("new-client"));
    assert_ne!(
        std::fs::read(&new.cert).unwrap(),
        std::fs::read(&old.cert).unwrap()
    );

    // etcd restarts on the new server certificate and the bundle that
    // trusts both CAs.
    let served_before = std::fs::read(&server.cert).unwrap();
    install_server_files(&ca, &tmp.path().join("etcd-conf"));
    assert_ne!(std::fs::read(&server.cert).unwrap(), served_before);
    etcd.set_tls(server);
    etcd.restart();

    // A client that has not reloaded (old bundle, old certificate) still
    // verifies the new server and is still accepted...
    let status = ok_with(&old.env(), &["status", &url]);
    assert!(status.contains("web"), "{status}");
    // ...and one that has reloaded works too.
    ok_with(&new.env(), &["issue", &url, "api", "--dns", "api.app.svc"]);
    let status = ok_with(&old.env(), &["status", &url]);
    assert!(status.contains("api"), "{status}");
}

#[test]
fn tls_and_login_mistakes_in_the_environment_are_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = ca_dir(tmp.path());
    let client = ClientFiles::copy(&ca, &tmp.path().join("client"));
    let server = install_server_files(&ca, &tmp.path().join("etcd-conf"));
    let mut etcd = Etcd::start_tls(server, client.options());
    let url = etcd.url("pki/app");
    let plain_url = url.replacen("etcds://", "etcd://", 1);
    let args = ["status", url.as_str()];
    let missing = tmp.path().join("no-such-file");

    refused_with(
        &[],
        &args,
        "set PKI_ETCD_CACERT to the CA bundle that verifies the etcd servers",
    );
    refused_with(
        &[("PKI_ETCD_CACERT", &missing)],
        &args,
        "PKI_ETCD_CACERT: cannot read",
    );
    refused_with(
        &[
            ("PKI_ETCD_CACERT", &client.ca),
            ("PKI_ETCD_CERT", &client.cert),
        ],
        &args,
        "PKI_ETCD_CERT is set but PKI_ETCD_KEY is not",
    );
    refused_with(
        &[("PKI_ETCD_CACERT", &client.ca)],
        &args,
        "etcd requires a client certificate and none was given",
    );
    // Another CA's bundle does not verify etcd.
    let other = tmp.path().join("other-ca");
    ok_with(&[], &["init", &path(&other), "--cn", "other CA"]);
    let mut wrong_ca = client.env();
    wrong_ca[0].1 = other.join("ca-bundle.crt").leak();
    refused_with(
        &wrong_ca,
        &args,
        "does not verify against the CA bundle given",
    );
    refused_with(
        &[],
        &["status", &plain_url],
        "the server speaks TLS and the store URL is plaintext: use etcds://",
    );
    refused_with(
        &client.env(),
        &["status", &plain_url],
        "PKI_ETCD_CACERT is set but the store URL is plaintext: use etcds://",
    );

    // Users: authentication turned on with the client's Auth RPCs.
    etcd.with_client(async |c| {
        let mut auth = c.auth();
        auth.user_add("root", "root-secret").await.unwrap();
        auth.user_grant_role("root", "root").await.unwrap();
        auth.role_add("app").await.unwrap();
        auth.role_grant_prefix("app", "pki/app/", Permission::ReadWrite)
            .await
            .unwrap();
        auth.user_add("app", "app-secret").await.unwrap();
        auth.user_grant_role("app", "app").await.unwrap();
        auth.auth_enable().await.unwrap();
    });
    etcd.set_admin(EtcdOptions {
        user: Some(EtcdUser::new("root", "root-secret")),
        ..client.options()
    });
    let good = tmp.path().join("password");
    std::fs::write(&good, "app-secret\n").unwrap();
    let bad = tmp.path().join("wrong-password");
    std::fs::write(&bad, "guess\n").unwrap();
    let user = Path::new("app");
    let login = |file: &Path| {
        let mut env = client.env();
        env.push(("PKI_ETCD_USER", user));
        env.push((
            "PKI_ETCD_PASSWORD_FILE",
            Path::new(file).to_path_buf().leak(),
        ));
        env
    };
    ok_with(&login(&good), &["init", &url, "--cn", "app CA"]);
    ok_with(&login(&good), &["status", &url]);
    refused_with(
        &login(&bad),
        &args,
        "authentication failed, invalid user ID or password",
    );
    refused_with(
        &login(&missing),
        &args,
        "PKI_ETCD_PASSWORD_FILE: cannot read the password file",
    );
    let mut no_file = client.env();
    no_file.push(("PKI_ETCD_USER", user));
    refused_with(
        &no_file,
        &args,
        "PKI_ETCD_USER is set but PKI_ETCD_PASSWORD_FILE is not",
    );
}
