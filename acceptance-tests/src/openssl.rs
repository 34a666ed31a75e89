//! CAs made the way an organisation's PKI makes them, with openssl rather than this repo's own `ha_pki`: what a
//! user brings (`ca_certificate`, `next_ca_certificate`) must be judged as it comes from elsewhere.

use std::process::Command;

use crate::Workspace;

/// A CA as `openssl req -x509` makes one (P-256, PKCS#8 key, CA:TRUE), written into the workspace as
/// `<name>.crt` and `<name>.key`; returns the key's PEM.
pub fn openssl_ca(ws: &Workspace, name: &str) -> String {
    let out = Command::new("openssl")
        .current_dir(ws.path())
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args([
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "3650",
        ])
        .args(["-subj", &format!("/O=Corp/CN={name}")])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args([
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        ])
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = ws.read_file(&format!("{name}.key"));
    assert!(key.contains("BEGIN PRIVATE KEY"), "openssl wrote PKCS#8");
    key
}

/// The PEM key's second line, past the ASN.1 header every P-256 PKCS#8 key shares: private key material, and whole
/// on one line in any file that holds the PEM (a JSON string escapes only the line breaks).
pub fn key_material(key_pem: &str) -> &str {
    key_pem
        .lines()
        .nth(2)
        .expect("a PEM key of three lines or more")
}
