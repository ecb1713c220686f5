//! The operator's side of a CA imported with its key in a token, made as
//! an operator would, outside pki: an OpenSSL root, and CA certificates it
//! issues for key pairs made in the token with OpenSC's `pkcs11-tool`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::hsm::{Hsm, text};
use super::softhsm::LABEL;
use std::process::Command;

/// The operator's side of an imported CA: an OpenSSL root, and CA
/// certificates it issues for key pairs made in the token with
/// `pkcs11-tool` (as an operator would, outside pki).
pub struct Operator<'a> {
    hsm: &'a Hsm,
    /// Where the operator's files are: `root.crt`, each `NAME.crt`.
    pub work: std::path::PathBuf,
}

impl Operator<'_> {
    pub fn new(hsm: &Hsm) -> Operator<'_> {
        let work = hsm.store.with_file_name("operator");
        std::fs::create_dir(&work).unwrap();
        let operator = Operator { hsm, work };
        // The operator's root: `root.crt` and `root.key`.
        super::cli::openssl_root(&operator.work, "root", 3650);
        std::fs::write(
            operator.work.join("ext.cnf"),
            "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
        )
        .unwrap();
        operator
    }

    pub fn path(&self, name: &str) -> String {
        self.work.join(name).to_str().unwrap().to_string()
    }

    fn openssl(&self, args: &[&str]) {
        let o = Command::new("openssl").args(args).output().unwrap();
        assert!(o.status.success(), "openssl {args:?}: {}", text(&o));
    }

    /// A key pair made in the token under `label` and `id` (hex), and the
    /// CA certificate `NAME.crt` the root issues for it; the key's URI.
    pub fn token_ca(&self, name: &str, label: &str, id: &str) -> String {
        let token = &self.hsm.token;
        token.pkcs11_tool(&[
            "--keypairgen",
            "--key-type",
            "EC:prime256v1",
            "--label",
            label,
            "--id",
            id,
        ]);
        let public = token.pkcs11_tool_bytes(&["--read-object", "--type", "pubkey", "--id", id]);
        std::fs::write(self.work.join("pub.der"), public).unwrap();
        self.openssl(&[
            "pkey",
            "-pubin",
            "-inform",
            "DER",
            "-in",
            &self.path("pub.der"),
            "-out",
            &self.path("pub.pem"),
        ]);
        let subject = [
            "-force_pubkey",
            &self.path("pub.pem"),
            "-subj",
            "/CN=operator-ca",
        ];
        self.root_signs(&["-new"], &subject, name);
        let escaped: String = id
            .as_bytes()
            .chunks(2)
            .map(|pair| format!("%{}", std::str::from_utf8(pair).unwrap()))
            .collect();
        format!("pkcs11:token={LABEL};object={label};id={escaped}")
    }

    /// The root issues the CA certificate `NAME.crt` (`openssl x509` in
    /// `mode`, for the key and subject `what` gives).
    fn root_signs(&self, mode: &[&str], what: &[&str], name: &str) {
        let (root, key) = (self.path("root.crt"), self.path("root.key"));
        let (ext, out) = (self.path("ext.cnf"), self.path(&format!("{name}.crt")));
        let issued = [
            "-CA", &root, "-CAkey", &key, "-days", "365", "-extfile", &ext, "-out", &out,
        ];
        self.openssl(&[&["x509"][..], mode, what, &issued[..]].concat());
    }

    /// A CA certificate `NAME.pem` with its key in the file (not in the
    /// token), and the root after it.
    pub fn file_ca(&self, name: &str) {
        self.openssl(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &self.path(&format!("{name}.key")),
            "-out",
            &self.path(&format!("{name}.csr")),
            "-subj",
            "/CN=operator-ca",
        ]);
        self.root_signs(
            &["-req"],
            &["-in", &self.path(&format!("{name}.csr"))],
            name,
        );
        let mut pem = std::fs::read(self.work.join(format!("{name}.crt"))).unwrap();
        pem.extend(std::fs::read(self.work.join(format!("{name}.key"))).unwrap());
        pem.extend(std::fs::read(self.work.join("root.crt")).unwrap());
        std::fs::write(self.work.join(format!("{name}.pem")), pem).unwrap();
    }
}
