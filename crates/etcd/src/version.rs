//! etcd's versions as etcd reports them on `/version` of the client port (over the same mutual TLS as gRPC):
//! the member's server version and the *cluster version*, which etcd raises only once every member runs a
//! newer minor. No gRPC call reports the cluster version (Status carries the server's only).

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::EtcdTarget;
use super::client::Etcd;
use super::error::{EtcdError, Result};

/// `/version`'s answer: `{"etcdserver":"3.5.1","etcdcluster":"3.5.0"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Versions {
    #[serde(rename = "etcdserver")]
    pub server: String,
    /// `"not_decided"` while a new cluster has not agreed on one yet.
    #[serde(rename = "etcdcluster")]
    pub cluster: String,
}

impl Etcd {
    /// What `target` answers on `/version`, its certificate verified for the member's name.
    pub async fn versions(&self, target: &EtcdTarget) -> Result<Versions> {
        let fail = |message: String| EtcdError::Version {
            target: target.to_string(),
            message,
        };
        let connector = self.https_connector().map_err(fail)?;
        let name = ServerName::try_from(target.server_name.clone()).map_err(|e| {
            fail(format!(
                "{:?} is not a server name: {e}",
                target.server_name
            ))
        })?;
        let attempt = async {
            let tcp = TcpStream::connect(target.endpoint)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let mut tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            let req = format!(
                "GET /version HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                target.endpoint
            );
            tls.write_all(req.as_bytes())
                .await
                .map_err(|e| format!("write: {e}"))?;
            let mut buf = Vec::new();
            // etcd may close without a TLS close_notify once the body is sent.
            if let Err(e) = tls.read_to_end(&mut buf).await
                && buf.is_empty()
            {
                return Err(format!("read: {e}"));
            }
            let text = String::from_utf8_lossy(&buf);
            let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP response")?;
            if !head.starts_with("HTTP/1.1 200") {
                return Err(format!(
                    "answered {:?}",
                    head.lines().next().unwrap_or_default()
                ));
            }
            // The body is one JSON object (possibly chunked: take the object itself).
            let json = body
                .find('{')
                .zip(body.rfind('}'))
                .map(|(a, b)| &body[a..=b])
                .ok_or("no JSON body")?;
            serde_json::from_str::<Versions>(json).map_err(|e| format!("{json:?}: {e}"))
        };
        match tokio::time::timeout(
            self.dial_timeout().max(std::time::Duration::from_secs(5)),
            attempt,
        )
        .await
        {
            Ok(r) => r.map_err(fail),
            Err(_) => Err(fail("no answer in time".into())),
        }
    }

    fn https_connector(&self) -> std::result::Result<TlsConnector, String> {
        let tls = self.tls()?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(tls.ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("the etcd client CA is not valid PEM: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("the etcd client CA is not usable: {e}"))?;
        }
        let chain = CertificateDer::pem_slice_iter(tls.client_cert_pem.as_bytes())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| format!("the provider's etcd client certificate is not valid PEM: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(tls.client_key_pem.as_bytes())
            .map_err(|e| format!("the provider's etcd client key is not valid PEM: {e}"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("the provider's etcd client certificate: {e}"))?;
        Ok(TlsConnector::from(Arc::new(config)))
    }
}
