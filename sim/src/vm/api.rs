//! The kube-apiserver stand-in: a TLS server on the secure port whose /healthz is as honest as the real one (it fails
//! when the local etcd does), plus the plain-HTTP `healthcheck` sidecar that legacy HTTP health checks probe.
//!
//! Authentication is the real server's with `--client-ca-file` and the default `--anonymous-auth=true`: a client
//! certificate must verify under the cluster CA or the handshake fails (see `tls::server_config`); a client without
//! one is `system:anonymous`, which RBAC's default `system:public-info-viewer` lets read only `/healthz`, `/livez`,
//! `/readyz` and `/version`, and which gets 403 for anything else. An authenticated client gets `/version` and
//! `/api` (the core group's versions, what kubectl's discovery reads first), and lists of a few core resources
//! (`GET /api/v1/namespaces/<ns>/<resource>`, `GET /api/v1/<resource>`; see [`core_list`]), authorized as RBAC would
//! with the certificate's CN and O against the release's bootstrap policy and the master's own addons
//! (`contract::Authorizer`): 403 with the real server's sentence, or 200 and an empty list. The master's addon
//! bindings count only as etcd has them (`addon_manager`): once its addon manager made them, and for the subjects
//! they still name. A client that may gets one (`GET /apis/rbac.authorization.k8s.io/v1/clusterrolebindings/
//! <name>`) from etcd, or 404, and may change its subjects with a JSON patch (`PATCH`, the documented revocation). A bearer token is a
//! service-account token (`tokens`): one that verifies under `--service-account-key-file` authenticates its
//! service account, as a client certificate does its subject; any other gets 401 on every path, as a real server
//! answers a token it cannot authenticate.

use super::VmError;
use super::addon_manager::Bindings;
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
    /// What `/version` reports, from the kube-apiserver image's tag.
    pub version: Version,
    /// The healthcheck sidecar: its listener, and whether its fixed upstream (https://127.0.0.1:443) is this VM's
    /// apiserver.
    pub plain: Option<(std::net::TcpListener, bool)>,
    pub etcd: EtcdProbe,
    pub health_interval: Duration,
    /// What the master's RBAC lets each client read (`contract::authorizer`).
    pub authorizer: crate::contract::Authorizer,
    /// Service-account tokens, verified as `--service-account-key-file` and `--service-account-issuer` say.
    pub tokens: Option<super::tokens::TokenVerifier>,
    /// How long after the master boots its addon manager first applies the addons (`addon_manager`).
    pub addon_delay: Duration,
    /// The API server's etcd, as the addon manager and RBAC reach it.
    pub etcd_access: super::addon_manager::EtcdAccess,
}

/// Last known health of the local etcd, for `VmHandle::status()`.
#[derive(Debug, Default)]
pub(crate) struct Health {
    pub etcd_healthy: AtomicBool,
    pub last_error: Mutex<Option<String>>,
    /// When the last probe finished, with its result: /healthz reuses a result younger than [`FRESH`].
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

/// How long an etcd probe's answer stands, as upstream rate-limits it: k8s.io/apiserver's `newETCD3Check` allows one
/// probe every half of `--etcd-healthcheck-timeout` (2 s by default; the masters do not set it) and answers the
/// others with the last probe's result. Health checks with a scaled-down interval hit /healthz many times a second
/// per backend, and each live probe here is a TLS handshake with etcd: probing more often than upstream made etcd
/// and the sim spend about a tenth of a scenario's CPU on them.
const FRESH: Duration = Duration::from_secs(1);

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
    let bindings = Bindings::new(spec.etcd_access, spec.authorizer.bindings().to_vec());
    let ctx = Arc::new(Ctx {
        bindings,
        name: spec.name,
        version: spec.version,
        etcd: spec.etcd,
        health,
        authorizer: spec.authorizer,
        tokens: spec.tokens,
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
                    // The verifier accepted the certificate presented: having one means authenticated, as its
                    // subject says.
                    let who = match tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
                        Some(cert) => match x509_parser::parse_x509_certificate(cert) {
                            Ok((_, x509)) => Client::Authenticated(
                                crate::contract::Identity::of_subject(x509.subject()),
                            ),
                            Err(_) => return,
                        },
                        None => Client::Anonymous,
                    };
                    c.handle(tls, Role::Api(who)).await;
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
            tokio::spawn(async move { c.handle(tcp, Role::Sidecar { upstream }).await });
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
    let c = ctx.clone();
    let addon_manager = async move { c.bindings.run(spec.addon_delay).await };
    tokio::join!(secure_loop, plain_loop, monitor, addon_manager);
}

/// Who is asking the secure port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Client {
    Anonymous,
    /// Presented a certificate that verified under `--client-ca-file`: who its subject names.
    Authenticated(crate::contract::Identity),
}

/// Which listener a request came in on.
#[derive(Debug, Clone)]
enum Role {
    /// The apiserver's secure port.
    Api(Client),
    /// kube-apiserver-healthcheck, with whether its fixed upstream (port 443) is this apiserver.
    Sidecar { upstream: bool },
}

/// The version `/version` reports, read from the image tag (`registry.k8s.io/kube-apiserver:v1.33.4`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    pub git_version: String,
    pub major: String,
    pub minor: String,
}

/// The version an image's tag names; an image without a `vMAJOR.MINOR…` tag reports `v0.0.0` (a real server
/// always knows its version, and `v0.0.0` is what an unversioned Kubernetes build reports).
pub(crate) fn version_of_image(image: &str) -> Version {
    let tag = image
        .rsplit_once(':')
        .filter(|(repo, tag)| !tag.contains('/') && !repo.is_empty())
        .map(|(_, tag)| tag)
        .unwrap_or_default();
    let mut parts = tag.strip_prefix('v').unwrap_or_default().split('.');
    let number = |p: Option<&str>| {
        p.filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .map(str::to_string)
    };
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) => Version {
            git_version: tag.to_string(),
            major,
            minor,
        },
        _ => Version {
            git_version: "v0.0.0".into(),
            major: "0".into(),
            minor: "0".into(),
        },
    }
}

impl Version {
    /// The body of `GET /version`, as k8s.io/apimachinery's `version.Info`.
    fn json(&self) -> String {
        serde_json::json!({
            "major": self.major,
            "minor": self.minor,
            "gitVersion": self.git_version,
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "",
            "goVersion": "",
            "compiler": "gc",
            "platform": "linux/amd64",
        })
        .to_string()
    }
}

/// A `metav1.Status` failure body, as the API server sends with a 4xx.
fn status_json(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    })
    .to_string()
}

struct Ctx {
    bindings: Bindings,
    name: String,
    version: Version,
    etcd: EtcdProbe,
    health: Arc<Health>,
    authorizer: crate::contract::Authorizer,
    tokens: Option<super::tokens::TokenVerifier>,
}

/// Where cluster role bindings are read, one by name.
const CLUSTER_ROLE_BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/";

/// A list of a core resource the stand-in serves: (resource, namespace or none for the cluster scope, the list's
/// kind). A few resources, in the namespaces every cluster has; anything else is 404, as before.
fn core_list(path: &str) -> Option<(&'static str, Option<&'static str>, &'static str)> {
    const RESOURCES: [(&str, &str); 5] = [
        ("secrets", "SecretList"),
        ("configmaps", "ConfigMapList"),
        ("pods", "PodList"),
        ("nodes", "NodeList"),
        ("namespaces", "NamespaceList"),
    ];
    const NAMESPACES: [&str; 3] = ["kube-system", "default", "kube-public"];
    let rest = path.strip_prefix("/api/v1/")?;
    let (namespace, resource) = match rest.split('/').collect::<Vec<_>>()[..] {
        ["namespaces", ns, resource] => (Some(*NAMESPACES.iter().find(|n| **n == ns)?), resource),
        [resource] => (None, resource),
        _ => return None,
    };
    let (resource, kind) = *RESOURCES.iter().find(|(r, _)| *r == resource)?;
    // Nodes and namespaces have no namespace.
    if namespace.is_some() && matches!(resource, "nodes" | "namespaces") {
        return None;
    }
    Some((resource, namespace, kind))
}

impl Ctx {
    /// The service account a bearer token authenticates, as kube-apiserver's token authenticator does; none when it
    /// does not verify (the request is then refused with 401, on every path).
    fn authenticate(&self, token: &str) -> Option<crate::contract::Identity> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        match self.tokens.as_ref()?.verify(token, now) {
            Ok(who) => Some(who),
            Err(why) => {
                tracing::debug!(replica = %self.name, "bearer token refused: {why}");
                None
            }
        }
    }

    /// Serves one request. The sidecar answers as kube-apiserver-healthcheck does: GET of its own
    /// `/.kube-apiserver-healthcheck/healthz`, GET `/healthz`, `/livez`, `/readyz` proxied (502 when the upstream
    /// does not answer), 404 for anything else, whatever the method. The secure port: see the module's doc.
    async fn handle<S: AsyncRead + AsyncWrite + Unpin>(&self, mut stream: S, role: Role) {
        let Ok(((method, path, headers), body)) = http::read_request_with_body(&mut stream).await
        else {
            return;
        };
        let path = path.split('?').next().unwrap_or_default().to_string();
        let replica = [("X-Replica", self.name.as_str())];
        let is_health = matches!(path.as_str(), "/healthz" | "/livez" | "/readyz");
        let client = match role {
            Role::Api(client) => client,
            Role::Sidecar { upstream } => {
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
        };
        let public = is_health || path == "/version";
        let list = core_list(&path);
        let binding = path.strip_prefix(CLUSTER_ROLE_BINDINGS);
        // RBAC counts the addon bindings as the cluster has them (etcd, through the copy kept fresh).
        let held = self.bindings.held();
        let held = |key: &str, subject: &crate::contract::Subject| {
            held.get(key)
                .is_some_and(|subjects| subjects.contains(subject))
        };
        let bearer = headers.iter().find_map(|(k, v)| {
            let token = v
                .get(..7)
                .filter(|p| p.eq_ignore_ascii_case("bearer "))
                .map(|_| &v[7..]);
            token.filter(|_| k.eq_ignore_ascii_case("authorization"))
        });
        // A client certificate authenticates first; a bearer token is tried when none was presented.
        let client = match (client, bearer) {
            (Client::Anonymous, Some(token)) => match self.authenticate(token) {
                Some(who) => Client::Authenticated(who),
                None => Client::Anonymous,
            },
            (client, _) => client,
        };
        let _ = if client == Client::Anonymous && bearer.is_some() {
            // A token the server cannot authenticate is refused on every path, before authorization.
            let body = status_json(401, "Unauthorized", "Unauthorized");
            http::respond_json(&mut stream, 401, &replica, &body).await
        } else if let (Some(name), Client::Authenticated(who), "PATCH") =
            (binding, &client, method.as_str())
        {
            let answer = self.patch_binding(who, name, &headers, &body, held).await;
            match answer {
                Ok(object) => http::respond_json(&mut stream, 200, &replica, &object).await,
                Err((code, reason, message)) => {
                    let body = status_json(code, reason, &message);
                    http::respond_json(&mut stream, code, &replica, &body).await
                }
            }
        } else if method != "GET" && method != "HEAD" {
            http::respond(&mut stream, 405, &replica, "method not allowed\n").await
        } else if client == Client::Anonymous && !public {
            let message =
                format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\"");
            let body = status_json(403, "Forbidden", &message);
            http::respond_json(&mut stream, 403, &replica, &body).await
        } else if is_health {
            self.answer_health(&mut stream, &replica).await
        } else if path == "/version" {
            http::respond_json(&mut stream, 200, &replica, &self.version.json()).await
        } else if let (Some((resource, namespace, kind)), Client::Authenticated(who)) =
            (list, &client)
        {
            match self.authorizer.may_list(who, resource, namespace, held) {
                Ok(()) => {
                    let body = serde_json::json!({
                        "kind": kind,
                        "apiVersion": "v1",
                        "metadata": {"resourceVersion": "1"},
                        "items": [],
                    });
                    http::respond_json(&mut stream, 200, &replica, &body.to_string()).await
                }
                Err(message) => {
                    let body = status_json(403, "Forbidden", &message);
                    http::respond_json(&mut stream, 403, &replica, &body).await
                }
            }
        } else if let (Some(name), Client::Authenticated(who)) = (binding, &client) {
            self.answer_binding(&mut stream, &replica, who, name, held)
                .await
        } else if path == "/api" {
            let body = serde_json::json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [],
            });
            http::respond_json(&mut stream, 200, &replica, &body.to_string()).await
        } else {
            let body = status_json(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
            http::respond_json(&mut stream, 404, &replica, &body).await
        };
    }

    /// `PATCH` of a cluster role binding: authorized by RBAC, a JSON patch of its subjects, stored in etcd. The
    /// new object, or the status code, reason and sentence of the refusal.
    async fn patch_binding(
        &self,
        who: &crate::contract::Identity,
        name: &str,
        headers: &[(String, String)],
        body: &[u8],
        held: impl Fn(&str, &crate::contract::Subject) -> bool,
    ) -> Result<String, (u16, &'static str, String)> {
        let json_patch = headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("content-type") && v.starts_with("application/json-patch+json")
        });
        self.authorizer
            .may_on_binding(who, "patch", name, held)
            .map_err(|message| (403, "Forbidden", message))?;
        if !json_patch {
            return Err((
                415,
                "UnsupportedMediaType",
                "ha-sim takes a JSON patch (application/json-patch+json) alone".to_string(),
            ));
        }
        self.bindings
            .patch(&format!("/registry/clusterrolebindings/{name}"), name, body)
            .await
            .map_err(|(code, message)| (code, "Invalid", message))
    }

    /// A cluster role binding as etcd holds it, to a client RBAC lets read it; or the real server's 404.
    async fn answer_binding<S: AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        replica: &[(&str, &str)],
        who: &crate::contract::Identity,
        name: &str,
        held: impl Fn(&str, &crate::contract::Subject) -> bool,
    ) -> std::io::Result<()> {
        if let Err(message) = self.authorizer.may_on_binding(who, "get", name, held) {
            let body = status_json(403, "Forbidden", &message);
            return http::respond_json(stream, 403, replica, &body).await;
        }
        match self
            .bindings
            .read(&format!("/registry/clusterrolebindings/{name}"))
            .await
        {
            Ok(Some(object)) => http::respond_json(stream, 200, replica, &object).await,
            Ok(None) => {
                let message =
                    format!("clusterrolebindings.rbac.authorization.k8s.io {name:?} not found");
                let body = status_json(404, "NotFound", &message);
                http::respond_json(stream, 404, replica, &body).await
            }
            Err(e) => {
                let body = status_json(500, "InternalError", &format!("etcd: {e}"));
                http::respond_json(stream, 500, replica, &body).await
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_comes_from_the_image_tag() {
        let v = version_of_image("registry.k8s.io/kube-apiserver:v1.33.4");
        assert_eq!(
            (v.git_version.as_str(), v.major.as_str(), v.minor.as_str()),
            ("v1.33.4", "1", "33")
        );
        let json: serde_json::Value = serde_json::from_str(&v.json()).unwrap();
        assert_eq!(json["gitVersion"], "v1.33.4");
        assert_eq!(json["minor"], "33");
        // A registry port is not a tag; an untagged or unversioned image reports v0.0.0.
        for image in [
            "localhost:5000/kube-apiserver",
            "kube-apiserver",
            "kube-apiserver:latest",
        ] {
            assert_eq!(version_of_image(image).git_version, "v0.0.0", "{image}");
        }
    }
}
