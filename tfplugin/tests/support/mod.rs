//! Test harness that plays Terraform: launch the example provider with go-plugin's environment, read the handshake
//! line, and talk gRPC to it over mutual TLS with a go-plugin-shaped client certificate.

#![allow(dead_code)] // each test file uses a different part

pub mod cert;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

pub const COOKIE: (&str, &str) = (
    "TF_PLUGIN_MAGIC_COOKIE",
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
);

/// The example provider binary. `cargo test` builds examples before running tests.
pub fn provider_binary() -> PathBuf {
    let deps = std::env::current_exe().expect("test executable path");
    let bin = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples")
        .join("echo_provider");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo test -p tfplugin`, which builds the examples",
        bin.display()
    );
    bin
}

/// A command for the provider with a clean plugin environment (nothing inherited that could change behaviour).
pub fn provider_command() -> Command {
    provider_command_for(&provider_binary())
}

/// [`provider_command`] for another provider binary (the real provider's hostile-input test uses this harness).
pub fn provider_command_for(binary: &std::path::Path) -> Command {
    let mut cmd = Command::new(binary);
    for var in [
        "TF_PLUGIN_MAGIC_COOKIE",
        "PLUGIN_CLIENT_CERT",
        "PLUGIN_PROTOCOL_VERSIONS",
        "TF_LOG",
        "TF_LOG_PROVIDER",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A running provider after the handshake.
pub struct Plugin {
    pub child: Child,
    pub line: String,
    pub addr: SocketAddr,
    /// DER of the server certificate from the handshake line; `None` in plaintext mode.
    pub server_cert: Option<Vec<u8>>,
    stderr: Arc<Mutex<String>>,
}

impl Plugin {
    /// Launches the provider as Terraform does; `client_cert_pem: None` is Terraform with TF_DISABLE_PLUGIN_TLS.
    pub fn launch(client_cert_pem: Option<&str>) -> Plugin {
        Plugin::launch_binary(&provider_binary(), client_cert_pem)
    }

    /// [`Plugin::launch`] for another provider binary.
    pub fn launch_binary(binary: &std::path::Path, client_cert_pem: Option<&str>) -> Plugin {
        let mut cmd = provider_command_for(binary);
        cmd.env(COOKIE.0, COOKIE.1)
            .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
            .env("TF_LOG_PROVIDER", "debug");
        if let Some(pem) = client_cert_pem {
            cmd.env("PLUGIN_CLIENT_CERT", pem);
        }
        let mut child = cmd.spawn().expect("start the provider");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the handshake line");
        let fields: Vec<&str> = line.trim_end_matches('\n').split('|').collect();
        assert_eq!(fields.len(), 6, "handshake line {line:?}");
        assert_eq!(&fields[..3], &["1", "6", "tcp"]);
        assert_eq!(fields[4], "grpc");
        let addr: SocketAddr = fields[3].parse().expect("address");
        assert!(addr.ip().is_loopback());
        let server_cert = (!fields[5].is_empty()).then(|| {
            assert!(
                !fields[5].contains('='),
                "go-plugin decodes the certificate without padding"
            );
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(fields[5])
                .expect("unpadded base64 certificate")
        });
        Plugin {
            child,
            line,
            addr,
            server_cert,
            stderr,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits up to `limit` for stderr to contain `text` (a reader thread copies it, so a line the plugin has
    /// written may not be here yet); returns everything read so far either way.
    pub fn stderr_with(&self, text: &str, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let seen = self.stderr();
            if seen.contains(text) || start.elapsed() >= limit {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits up to `limit` for the process to exit by itself.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().expect("poll the provider") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// A TLS client config trusting the server certificate from the handshake line, as go-plugin does (it is the
    /// only root, checked for the name "localhost"), presenting `client` if given.
    pub fn client_tls(&self, client: Option<&cert::ClientCert>) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(
                self.server_cert.clone().expect("TLS mode"),
            ))
            .expect("server cert as root");
        // aws-lc-rs on the client: it can sign with the P-521 key, as Go can.
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let mut config = match client {
            Some(c) => {
                let (chain, key) = c.chain_and_key();
                builder
                    .with_client_auth_cert(chain, key)
                    .expect("client cert")
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        config
    }

    /// A gRPC channel over our own TLS connector (`tls: None` for plaintext).
    pub async fn channel(
        &self,
        tls: Option<rustls::ClientConfig>,
    ) -> Result<Channel, tonic::transport::Error> {
        let addr = self.addr;
        let tls = tls.map(|c| tokio_rustls::TlsConnector::from(Arc::new(c)));
        let connector = tower::service_fn(move |_| {
            let tls = tls.clone();
            async move {
                let tcp = TcpStream::connect(addr).await?;
                let io: Box<dyn Io> = match tls {
                    None => Box::new(tcp),
                    Some(tls) => {
                        let stream = tls
                            .connect(ServerName::try_from("localhost").unwrap(), tcp)
                            .await?;
                        assert_eq!(
                            stream.get_ref().1.alpn_protocol(),
                            Some(&b"h2"[..]),
                            "server must select h2"
                        );
                        Box::new(stream)
                    }
                };
                Ok::<_, std::io::Error>(TokioIo::new(io))
            }
        });
        Endpoint::from_static("http://localhost")
            .connect_with_connector(connector)
            .await
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Io for T {}

/// Calls a unary RPC by path with hand-written prost messages: the tests know only the wire numbers, not our
/// generated code.
pub async fn unary<Req, Resp>(
    channel: Channel,
    path: &'static str,
    req: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    grpc.unary(
        tonic::Request::new(req),
        PathAndQuery::from_static(path),
        codec,
    )
    .await
    .map(|r| r.into_inner())
}

/// Opens a server-streaming RPC and returns its (open) stream.
pub async fn server_stream<Req, Resp>(
    channel: Channel,
    path: &'static str,
    req: Req,
) -> Result<tonic::Streaming<Resp>, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    grpc.server_streaming(
        tonic::Request::new(req),
        PathAndQuery::from_static(path),
        codec,
    )
    .await
    .map(|r| r.into_inner())
}

// ---- the few wire messages the tests use (field numbers from proto/*.proto) ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SchemaResponse {
    #[prost(map = "string, message", tag = "2")]
    pub resource_schemas: std::collections::HashMap<String, Schema>,
    #[prost(message, repeated, tag = "4")]
    pub diagnostics: Vec<Diagnostic>,
    #[prost(message, optional, tag = "6")]
    pub server_capabilities: Option<ServerCapabilities>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Schema {
    #[prost(int64, tag = "1")]
    pub version: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerCapabilities {
    #[prost(bool, tag = "1")]
    pub plan_destroy: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValidateResourceConfigRequest {
    #[prost(string, tag = "1")]
    pub type_name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DiagnosticsResponse {
    #[prost(message, repeated, tag = "1")]
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Diagnostic {
    #[prost(int32, tag = "1")]
    pub severity: i32,
    #[prost(string, tag = "2")]
    pub summary: String,
    #[prost(message, optional, tag = "4")]
    pub attribute: Option<AttributePath>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributePath {
    #[prost(message, repeated, tag = "1")]
    pub steps: Vec<Step>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Step {
    #[prost(string, optional, tag = "1")]
    pub attribute_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StopProviderResponse {
    #[prost(string, tag = "1")]
    pub error: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StdioData {
    #[prost(int32, tag = "1")]
    pub channel: i32,
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionErrorResponse {
    #[prost(message, optional, tag = "2")]
    pub error: Option<FunctionError>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionError {
    #[prost(string, tag = "1")]
    pub text: String,
}
