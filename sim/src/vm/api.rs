//! The kube-apiserver stand-in: a TLS server on the secure port whose /healthz is as honest as the real one (it fails
//! when the local etcd does), plus the plain-HTTP `healthcheck` sidecar that legacy HTTP health checks probe.

use super::VmError;
use crate::net::background::{Background, bind};
use crate::net::http;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

/// A real apiserver gives its etcd check a few seconds; a hung etcd must still turn /healthz red promptly.
const ETCD_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How to reach the local etcd's /health endpoint, as the apiserver's --etcd-* flags say.
#[derive(Debug, Clone)]
pub(crate) struct EtcdProbe {
    pub addr: SocketAddr,
    /// The name the certificate is checked against: the host as written in --etcd-servers (e.g. 127.0.0.1), even
    /// though the sim connects to the VM's own IP.
    pub server_name: ServerName<'static>,
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

pub(crate) struct ApiSpec {
    pub name: String,
    pub secure: std::net::TcpListener,
    pub tls: Arc<rustls::ServerConfig>,
    /// The healthcheck sidecar: its listener, and whether its fixed upstream (https://127.0.0.1:443) is this VM's
    /// apiserver.
    pub plain: Option<(std::net::TcpListener, bool)>,
    pub etcd: EtcdProbe,
    pub health_interval: Duration,
}

/// Last known health of the local etcd, for `VmHandle::status()`.
#[derive(Debug, Default)]
pub(crate) struct Health {
    pub etcd_healthy: AtomicBool,
    pub last_error: Mutex<Option<String>>,
    /// When the last probe finished, with its result: /healthz reuses a result younger than [`FRESH`].
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

/// Health checks with a scaled-down interval hit /healthz many times a second per backend; each live probe is a TLS
/// handshake with etcd. Answers this fresh are still "live" for any checker, and cap that load.
const FRESH: Duration = Duration::from_millis(100);

impl Health {
    fn record(&self, result: &Result<(), String>) {
        self.etcd_healthy.store(result.is_ok(), Ordering::SeqCst);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = result.clone().err();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), result.clone()));
    }

    fn fresh(&self) -> Option<Result<(), String>> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.as_ref()
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, r)| r.clone())
    }
}

/// Binds are done by the caller; this starts serving.
pub(crate) fn start(spec: ApiSpec, health: Arc<Health>) -> Result<Background, VmError> {
    let name = spec.name.clone();
    Background::spawn(&format!("api-{name}"), move || serve(spec, health)).map_err(|source| {
        VmError::Io {
            context: format!("start API server stand-in for {name}"),
            source,
        }
    })
}

/// Binds a listener, naming it in the error.
pub(crate) fn listen(addr: SocketAddr, what: &str) -> Result<std::net::TcpListener, VmError> {
    bind(addr).map_err(|source| VmError::Io {
        context: format!("listen on {addr} for {what}"),
        source,
    })
}

async fn serve(spec: ApiSpec, health: Arc<Health>) {
    let ctx = Arc::new(Ctx {
        name: spec.name,
        etcd: spec.etcd,
        health,
    });
    let acceptor = tokio_rustls::TlsAcceptor::from(spec.tls);
    let secure = TcpListener::from_std(spec.secure);
    let plain = spec.plain.map(|(l, up)| (TcpListener::from_std(l), up));
    let (Ok(secure), plain) = (secure, plain) else {
        tracing::error!("API stand-in listeners unusable");
        return;
    };

    let c = ctx.clone();
    let secure_loop = async move {
        loop {
            let Ok((tcp, _)) = secure.accept().await else {
                // Accept errors (e.g. EMFILE) are transient; back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let (acceptor, c) = (acceptor.clone(), c.clone());
            tokio::spawn(async move {
                // Handshake failures (e.g. a client that distrusts our CA) are the client's business.
                if let Ok(tls) = acceptor.accept(tcp).await {
                    c.handle(tls, None).await;
                }
            });
        }
    };
    let c = ctx.clone();
    let plain_loop = async move {
        let Some((Ok(listener), upstream)) = plain else {
            return std::future::pending::<()>().await;
        };
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let c = c.clone();
            tokio::spawn(async move { c.handle(tcp, Some(upstream)).await });
        }
    };
    // Background poll so status() stays current even when nobody calls /healthz.
    let c = ctx.clone();
    let monitor = async move {
        let mut ticker = tokio::time::interval(spec.health_interval);
        loop {
            ticker.tick().await;
            let r = c.probe_etcd().await;
            c.health.record(&r);
        }
    };
    tokio::join!(secure_loop, plain_loop, monitor);
}

struct Ctx {
    name: String,
    etcd: EtcdProbe,
    health: Arc<Health>,
}

impl Ctx {
    /// Serves one request. `sidecar` is set for kube-apiserver-healthcheck (with whether its fixed upstream, port
    /// 443, is this apiserver), which answers as the program does: GET of its own
    /// `/.kube-apiserver-healthcheck/healthz`, GET `/healthz`, `/livez`, `/readyz` proxied (502 when the upstream
    /// does not answer), 404 for anything else, whatever the method.
    async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        mut stream: S,
        sidecar: Option<bool>,
    ) {
        let Ok((method, path)) = http::read_request(&mut stream).await else {
            return;
        };
        let path = path.split('?').next().unwrap_or_default().to_string();
        let replica = [("X-Replica", self.name.as_str())];
        let is_health = matches!(path.as_str(), "/healthz" | "/livez" | "/readyz");
        if let Some(upstream) = sidecar {
            let _ = if method != "GET" {
                http::respond(&mut stream, 404, &replica, "not found\n").await
            } else if path == "/.kube-apiserver-healthcheck/healthz" {
                http::respond(&mut stream, 200, &replica, "ok").await
            } else if !is_health {
                http::respond(&mut stream, 404, &replica, "not found\n").await
            } else if !upstream {
                http::respond(&mut stream, 502, &replica, "internal error\n").await
            } else {
                self.answer_health(&mut stream, &replica).await
            };
            return;
        }
        let _ = if method != "GET" && method != "HEAD" {
            http::respond(&mut stream, 405, &replica, "method not allowed\n").await
        } else if !is_health {
            http::respond(&mut stream, 404, &replica, "not found\n").await
        } else {
            self.answer_health(&mut stream, &replica).await
        };
    }

    /// The apiserver's health answer: live, like the real /healthz (give or take FRESH), since a stale answer
    /// could call a dead etcd healthy.
    async fn answer_health<S: AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        replica: &[(&str, &str)],
    ) -> std::io::Result<()> {
        let r = match self.health.fresh() {
            Some(r) => r,
            None => {
                let r = self.probe_etcd().await;
                self.health.record(&r);
                r
            }
        };
        match r {
            Ok(()) => http::respond(stream, 200, replica, "ok").await,
            Err(e) => {
                let body = format!("[-]etcd failed: {e}\nhealthz check failed\n");
                http::respond(stream, 500, replica, &body).await
            }
        }
    }

    async fn probe_etcd(&self) -> Result<(), String> {
        let p = &self.etcd;
        let attempt = || async {
            let tcp = TcpStream::connect(p.addr)
                .await
                .map_err(|e| format!("connect {}: {e}", p.addr))?;
            let host = p.addr.ip().to_string();
            let resp = match &p.tls {
                Some(cfg) => {
                    let tls = tokio_rustls::TlsConnector::from(cfg.clone())
                        .connect(p.server_name.clone(), tcp)
                        .await
                        .map_err(|e| format!("TLS to {}: {e}", p.addr))?;
                    http::get(tls, &host, "/health").await
                }
                None => http::get(tcp, &host, "/health").await,
            }
            .map_err(|e| format!("GET /health from {}: {e}", p.addr))?;
            if resp.status == 200 && resp.body.replace(' ', "").contains("\"health\":\"true\"") {
                Ok(())
            } else {
                Err(format!(
                    "etcd /health: {} {}",
                    resp.status,
                    resp.body.trim()
                ))
            }
        };
        // The real check is a linearizable read with --etcd-healthcheck-timeout (2 s): it waits out a leader
        // change (a leadership hand-off, a member restarting) instead of failing on the first "no leader", so it
        // is asked again until the timeout.
        let patient = async {
            loop {
                match attempt().await {
                    Ok(()) => return Ok(()),
                    Err(e) if e.starts_with("etcd /health") => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = e;
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        match tokio::time::timeout(ETCD_PROBE_TIMEOUT, patient).await {
            Ok(r) => r,
            Err(_) => match attempt().await {
                Ok(()) => Ok(()),
                Err(e) if e.starts_with("etcd /health") => Err(e),
                Err(_) => Err(format!("etcd /health at {} timed out", p.addr)),
            },
        }
    }
}
