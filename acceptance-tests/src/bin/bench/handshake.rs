//! Time from exec to the go-plugin handshake line, spawning the provider the way the clients do.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// go-plugin's magic cookie for Terraform providers.
const MAGIC_COOKIE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// Median milliseconds over `runs` starts.
pub fn median_ms(provider: &Path, runs: usize) -> Result<f64, String> {
    let cert = client_cert_pem()?;
    let samples = (0..runs)
        .map(|_| once_ms(provider, &cert))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(crate::median(samples))
}

/// A stand-in for go-plugin's AutoMTLS client certificate: self-signed CA with clientAuth and serverAuth for
/// localhost, as go-plugin makes it, but P-256 (ring, which rcgen uses here, cannot sign with P-521). The
/// provider only decodes and pins it at startup, so the curve does not change what is measured.
fn client_cert_pem() -> Result<String, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut params = CertificateParams::new(vec!["localhost".to_string()])
        .map_err(|e| format!("cert params: {e}"))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ClientAuth,
        ExtendedKeyUsagePurpose::ServerAuth,
    ];
    let key = KeyPair::generate().map_err(|e| format!("client key: {e}"))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("client cert: {e}"))?;
    Ok(cert.pem())
}

/// One start: spawn, read the first stdout line, check its shape, stop the process we started.
fn once_ms(provider: &Path, cert: &str) -> Result<f64, String> {
    let mut cmd = Command::new(provider);
    // Only what go-plugin adds, so the figure doesn't depend on the caller's environment.
    cmd.env_clear()
        .env("TF_PLUGIN_MAGIC_COOKIE", MAGIC_COOKIE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "6")
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .env("PLUGIN_CLIENT_CERT", cert)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawning {}: {e}", provider.display()))?;
    let mut line = String::new();
    let read = BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line);
    let elapsed = start.elapsed();
    let _ = child.kill();
    let output = child
        .wait_with_output()
        .map_err(|e| format!("waiting for the provider: {e}"))?;
    read.map_err(|e| format!("reading the handshake line: {e}"))?;
    let fields: Vec<&str> = line.trim_end().split('|').collect();
    if fields.len() < 6 || fields[0] != "1" || fields[1] != "6" || fields[4] != "grpc" {
        return Err(format!(
            "unexpected handshake line {line:?}; provider stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(elapsed.as_secs_f64() * 1e3)
}
