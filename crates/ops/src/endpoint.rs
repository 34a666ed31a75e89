//! Waits until the cluster's static IP really serves the API again: an HTTPS `GET /healthz` through the data
//! path, with the serving certificate verified against the cluster CA for that IP. A forwarding rule's operation
//! being DONE says nothing about traffic (GCE propagates rules for minutes), so this is the only honest check.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::error::{OpError, Result};

/// What answered: the replica's name from `X-Replica` if the server says (ha-sim and our health sidecar do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub replica: Option<String>,
}

/// A TLS connector that trusts `ca_pem` (a bundle during a CA rotation) and presents `client` (a certificate and
/// its key, PEM) when given.
fn connector(ca_pem: &str, client: Option<&ha_pki::CertKey>) -> Result<TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert =
            cert.map_err(|e| OpError::Other(format!("the cluster CA is not valid PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| OpError::Other(format!("the cluster CA is not usable: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OpError::Other(e.to_string()))?
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(c) => {
            let chain = CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| OpError::Other(format!("a client certificate is not PEM: {e}")))?;
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes())
                .map_err(|e| OpError::Other(format!("a client key is not PEM: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| OpError::Other(format!("a client certificate is not usable: {e}")))?
        }
    };
    Ok(TlsConnector::from(Arc::new(config)))
}

/// One probe: `GET /healthz` over TLS to `ip`, verifying the certificate for `verify_as` (the same IP for the
/// static IP; a replica's internal IP when reaching it through an ephemeral IP, which no certificate covers).
pub async fn probe(
    ca_pem: &str,
    ip: IpAddr,
    verify_as: IpAddr,
    port: u16,
    timeout: Duration,
) -> Result<Answer> {
    let at = Target {
        ca_pem,
        ip,
        verify_as,
        port,
    };
    get(&at, "/healthz", None, timeout).await
}

/// Where an API server is reached, and what its serving certificate is verified against.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The CA certificates the serving certificate must chain to.
    pub ca_pem: &'a str,
    pub ip: IpAddr,
    /// The IP the serving certificate must name (see [`probe`]).
    pub verify_as: IpAddr,
    pub port: u16,
}

/// `GET path` over TLS at `at`, as `client` when given (a client certificate the API server authenticates);
/// the answer's status, whatever it is.
pub async fn get(
    at: &Target<'_>,
    path: &str,
    client: Option<&ha_pki::CertKey>,
    timeout: Duration,
) -> Result<Answer> {
    let Target {
        ca_pem,
        ip,
        verify_as,
        port,
    } = *at;
    let connector = connector(ca_pem, client)?;
    let attempt = async {
        let tcp = TcpStream::connect((ip, port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut tls = connector
            .connect(ServerName::IpAddress(verify_as.into()), tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {ip}\r\nConnection: close\r\n\r\n");
        tls.write_all(req.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut buf = Vec::new();
        tls.read_to_end(&mut buf).await.or_else(|e| {
            if buf.is_empty() {
                Err(format!("read: {e}"))
            } else {
                Ok(0)
            }
        })?;
        let text = String::from_utf8_lossy(&buf);
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or("no HTTP status line")?;
        let replica = text
            .lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| {
                l.strip_prefix("X-Replica:")
                    .or_else(|| l.strip_prefix("x-replica:"))
            })
            .map(|v| v.trim().to_string());
        Ok::<_, String>(Answer { status, replica })
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e)) => Err(OpError::Other(e)),
        Err(_) => Err(OpError::Other(format!("no answer within {timeout:?}"))),
    }
}

/// Probes until `/healthz` answers 200 or the deadline passes; the error says what the last probe saw.
pub async fn await_serving(at: &Target<'_>, deadline: Instant) -> Result<Answer> {
    let Target { ip, port, .. } = *at;
    loop {
        let last = match get(at, "/healthz", None, Duration::from_secs(2)).await {
            Ok(a) if a.status == 200 => return Ok(a),
            Ok(a) => format!("/healthz answered {}", a.status),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(OpError::Other(format!(
                "the API at https://{ip}:{port} did not become healthy in time (last probe: {last}). Check the replicas' API servers and etcd, then apply again: the next apply resumes here."
            )));
        }
        // The data path has no operation to wait on: a short, fixed probe interval is the best available.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the cluster's static IP serves the API, verified for that IP, and says who answered.
pub async fn await_static_ip(ctx: &super::ClusterCtx, deadline: Instant) -> Result<Answer> {
    let spec = &ctx.spec;
    let ip: IpAddr = spec.external_ip.parse().map_err(|_| {
        OpError::Other(format!(
            "the cluster's external IP {:?} is not an IP address",
            spec.external_ip
        ))
    })?;
    let cas = spec.trusted_cas()?;
    let at = Target {
        ca_pem: &cas.cluster_ca,
        ip,
        verify_as: ip,
        port: spec.master.api_port,
    };
    let a = await_serving(&at, deadline).await?;
    tracing::info!(
        "the static IP serves the API (answered by {})",
        a.replica.as_deref().unwrap_or("?")
    );
    Ok(a)
}
