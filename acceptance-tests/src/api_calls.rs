//! Calls to each master's own API server, the way a client holding a credential makes them: what the rotation
//! scenarios present to every master, one at a time, while its replicas roll.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::Sim;

/// Each master's internal IP, where its own API server listens (it stays the same across a rebuild).
pub fn api_ips(sim: &Sim, vms: &[String]) -> Vec<(String, String)> {
    vms.iter()
        .map(|vm| {
            let ip = sim.instance(vm)["networkInterfaces"][0]["networkIP"]
                .as_str()
                .unwrap()
                .to_string();
            (vm.clone(), ip)
        })
        .collect()
}

/// What a client presents.
#[derive(Clone, Copy)]
pub enum Credential<'a> {
    /// A token, as the bearer (a service-account token).
    Bearer(&'a str),
    /// A client certificate and its key, as files (an admin credential).
    Certificate { cert: &'a Path, key: &'a Path },
}

/// What a TLS handshake that failed over a certificate reads as: an API server that does not trust the client's
/// certificate refuses it there, before any HTTP status.
pub const TLS_REFUSED: &str = "tls";

/// The HTTP status the API server at `ip` answers `/version` with, its certificate verified under the CAs in
/// `ca` (a file): `200` once it authenticates the credential, `401` when it cannot, [`TLS_REFUSED`] when the
/// handshake fails over a certificate (the client's, or the server's under `ca`), `000` when nothing answers (a VM
/// being rebuilt).
pub fn status_of(ca: &Path, ip: &str, credential: Credential<'_>) -> String {
    answer(ca, ip, credential).0
}

/// [`status_of`], with what curl said on stderr (why a handshake failed).
pub fn answer(ca: &Path, ip: &str, credential: Credential<'_>) -> (String, String) {
    let mut curl = Command::new("curl");
    curl.args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "2",
    ])
    .arg("--cacert")
    .arg(ca);
    match credential {
        Credential::Bearer(token) => {
            curl.args(["-H", &format!("Authorization: Bearer {token}")]);
        }
        Credential::Certificate { cert, key } => {
            curl.arg("--cert").arg(cert).arg("--key").arg(key);
        }
    }
    let out = curl
        .arg(format!("https://{ip}/version"))
        .stdin(Stdio::null())
        .output()
        .expect("curl is on PATH");
    // A handshake refused over a certificate: curl's exit 35 (handshake), 56 (an alert after a TLS 1.3
    // handshake, when the server refuses the client's certificate) or 60 (the server's certificate not verified
    // under `ca`), with the alert or the certificate named. The same codes without either are a connection cut
    // (a VM stopping: "SSL_ERROR_SYSCALL"), which is no answer.
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let over_a_certificate = ["alert", "certificate", "verify"]
        .iter()
        .any(|w| stderr.contains(w));
    let status = match out.status.code() {
        Some(35 | 56 | 60) if over_a_certificate => TLS_REFUSED.into(),
        _ => String::from_utf8_lossy(&out.stdout).into_owned(),
    };
    (status, stderr)
}
