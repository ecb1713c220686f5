//! OpenSSL making CAs for the tests: an organisation's root, its
//! intermediates and a cluster CA, as k3s and StarlingX users bring them,
//! and `openssl verify -x509_strict` over what pki serves.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::cli::text;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl is not installed or cannot run; install it with `apt-get install openssl` (Debian) or run scripts/test.sh");
    assert!(o.status.success(), "openssl {args:?}: {}", text(&o.stderr));
}

/// `openssl verify -x509_strict` accepts the serving chain file `chain`
/// (leaf, then the intermediates it carries) for a client trusting only
/// `root`.
pub fn openssl_verifies_serving_chain(root: &str, chain: &Path) {
    let o = Command::new("openssl")
        .args([
            "verify",
            "-x509_strict",
            "-purpose",
            "sslserver",
            "-CAfile",
            root,
        ])
        .arg("-untrusted")
        .arg(chain)
        .arg(chain)
        .output()
        .expect("openssl is not installed or cannot run; install it with `apt-get install openssl` (Debian) or run scripts/test.sh");
    assert!(
        o.status.success(),
        "openssl: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

/// A directory where OpenSSL makes CAs: each CA is NAME.crt and NAME.key.
pub struct Maker {
    pub dir: PathBuf,
}

impl Maker {
    pub fn new(dir: &Path) -> Self {
        let dir = dir.join("made");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("ext.cnf"),
            "[ca0]\nbasicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n\
             [ca1]\nbasicConstraints=critical,CA:TRUE,pathlen:1\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n\
             [canolen]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n\
             [notca]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n\
             [ca1nc]\nbasicConstraints=critical,CA:TRUE,pathlen:1\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\nnameConstraints=critical,permitted;DNS:example.com\n",
        )
        .unwrap();
        Maker { dir }
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    pub fn key(&self, name: &str) {
        openssl(
            &self.dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                &format!("{name}.key"),
            ],
        );
    }

    /// A self-signed root `CN=cn`.
    pub fn root(&self, name: &str, cn: &str, days: u32) {
        self.key(name);
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-new",
                "-key",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.crt"),
                "-subj",
                &format!("/CN={cn}"),
                "-days",
                &days.to_string(),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
    }

    /// `CN=cn` signed by `issuer`, with the extensions of section `ext`.
    pub fn signed(&self, name: &str, cn: &str, issuer: &str, ext: &str, days: u32) {
        self.key(name);
        openssl(
            &self.dir,
            &[
                "req",
                "-new",
                "-key",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={cn}"),
            ],
        );
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &format!("{issuer}.crt"),
                "-CAkey",
                &format!("{issuer}.key"),
                "-out",
                &format!("{name}.crt"),
                "-days",
                &days.to_string(),
                "-extfile",
                "ext.cnf",
                "-extensions",
                ext,
            ],
        );
    }

    /// Signs the request of the existing CA `of` again, by `issuer`, into
    /// `name.crt`: the same Subject and key, another issuer (a cross-sign).
    pub fn cross(&self, name: &str, of: &str, issuer: &str, ext: &str, days: u32) {
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{of}.csr"),
                "-CA",
                &format!("{issuer}.crt"),
                "-CAkey",
                &format!("{issuer}.key"),
                "-out",
                &format!("{name}.crt"),
                "-days",
                &days.to_string(),
                "-extfile",
                "ext.cnf",
                "-extensions",
                ext,
            ],
        );
    }

    pub fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap()
    }

    /// Writes `parts` (files of this directory) concatenated into `out`.
    pub fn bundle(&self, out: &str, parts: &[&str]) -> String {
        let joined: String = parts.iter().map(|p| self.read(p)).collect();
        std::fs::write(self.dir.join(out), joined).unwrap();
        self.path(out)
    }

    /// The k3s custom-CA topology: root → intermediate (pathlen 1) → `cluster` (pathlen 0).
    pub fn org(dir: &Path) -> Self {
        let m = Maker::new(dir);
        m.root("root", "Org Root", 3650);
        m.signed("int", "Org Intermediate", "root", "ca1", 1825);
        m.signed("cluster", "cluster-ca", "int", "ca0", 730);
        m
    }
}
