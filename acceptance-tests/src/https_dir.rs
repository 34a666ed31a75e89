//! A directory served read-only over HTTPS on loopback, with a throwaway CA: a provider network mirror as the
//! clients reach one (the protocol requires HTTPS, and both clients verify the server against the roots in
//! `SSL_CERT_FILE`, which Go's crypto/x509 reads on Linux).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// Serves `root` until dropped. Every request's path is kept, so a test can tell what the clients fetched.
pub struct HttpsDir {
    addr: SocketAddr,
    ca_file: PathBuf,
    requests: Arc<Mutex<Vec<String>>>,
    /// Taken and shut down in `drop`, which stops the server.
    runtime: Option<tokio::runtime::Runtime>,
    /// Holds `ca_file`.
    _ca_dir: tempfile::TempDir,
}

impl HttpsDir {
    /// Starts serving `root` at `https://127.0.0.1:<free port>/`, with a certificate for 127.0.0.1 issued by a
    /// fresh CA whose PEM is `ca_file()`.
    pub fn serve(root: &Path) -> HttpsDir {
        let (ca_pem, tls) = throwaway_tls();
        let ca_dir = tempfile::tempdir().expect("a temporary directory for the test CA");
        let ca_file = ca_dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca_pem).expect("writing the test CA");

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime for the HTTPS server");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("binding a loopback port");
        let addr = listener.local_addr().expect("the listener's address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let (root, log) = (Arc::new(root.to_path_buf()), requests.clone());
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, root, log) = (acceptor.clone(), root.clone(), log.clone());
                tokio::spawn(async move {
                    // A client that refuses our certificate fails its own command; nothing to do here.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        let (root, log) = (root.clone(), log.clone());
                        async move { Ok::<_, Infallible>(answer(&root, &log, request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        HttpsDir {
            addr,
            ca_file,
            requests,
            runtime: Some(runtime),
            _ca_dir: ca_dir,
        }
    }

    /// The base URL, with the trailing slash a network mirror's `url` wants.
    pub fn url(&self) -> String {
        format!("https://{}/", self.addr)
    }

    /// The CA certificate (PEM) to trust, e.g. as `SSL_CERT_FILE`.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The paths requested so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for HttpsDir {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// GET or HEAD of a file under `root`; 404 for anything else, and for paths that would leave `root`.
async fn answer(
    root: &Path,
    log: &Mutex<Vec<String>>,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_string();
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.clone());
    let relative = Path::new(path.trim_start_matches('/'));
    let inside = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    let body = match (request.method(), inside) {
        (&Method::GET | &Method::HEAD, true) => tokio::fs::read(root.join(relative)).await.ok(),
        _ => None,
    };
    let Some(body) = body else {
        return status(StatusCode::NOT_FOUND);
    };
    let content_type = match relative.extension().and_then(|e| e.to_str()) {
        Some("json") => "application/json",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    };
    let mut response = Response::new(Full::new(Bytes::from(
        if request.method() == Method::HEAD {
            Vec::new()
        } else {
            body
        },
    )));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"not found\n")));
    *response.status_mut() = code;
    response
}

/// A fresh CA (its PEM) and a server configuration whose certificate it issued for the IP 127.0.0.1.
fn throwaway_tls() -> (String, rustls::ServerConfig) {
    let ca_key = KeyPair::generate().expect("generating the test CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.distinguished_name
        .push(DnType::CommonName, "acceptance-tests mirror CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).expect("self-signing the CA").pem();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().expect("generating the server key");
    let mut leaf =
        CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("server parameters");
    leaf.distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    leaf.extended_key_usages
        .push(ExtendedKeyUsagePurpose::ServerAuth);
    let cert = leaf
        .signed_by(&key, &issuer)
        .expect("issuing the server certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));

    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)
    .expect("the server's certificate and key");
    (ca_pem, config)
}
