//! Connections: one mutual-TLS gRPC client per endpoint, each verified against its member's name, and the two
//! ways of calling — one given endpoint, or the first endpoint that can answer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tokio::task::JoinSet;

use super::error::{CallError, EndpointFailure, FailureKind};
use super::{EtcdTarget, EtcdTls, Member, MemberStatus};

/// A handle on the etcd cluster's client API. Cheap to clone; connections are reused across calls.
#[derive(Clone)]
pub struct Etcd {
    inner: Arc<Inner>,
}

struct Inner {
    /// The current TLS material; replaced whole when `renewal` mints a new client certificate.
    tls: Mutex<EtcdTls>,
    renewal: Option<Renewal>,
    dial_timeout: Duration,
    request_timeout: Duration,
    // Keyed by endpoint *and* name: the same address verified as another member is another connection.
    clients: Mutex<HashMap<EtcdTarget, Client>>,
    /// Why this handle never dials (a read-only provider holds no key to present); `None` for every other.
    disabled: Option<String>,
}

/// A client certificate and its key, PEM, minted for a short while.
pub struct MintedIdentity {
    pub cert_pem: String,
    pub key_pem: String,
    pub expires_at: SystemTime,
}

/// Mints the client identity; the error is a sentence saying why it could not.
pub type Mint = Arc<dyn Fn() -> Result<MintedIdentity, String> + Send + Sync>;

/// How a short-lived client certificate stays valid: minted anew, before any connection is made, once less than
/// `renew_before` of it is left.
struct Renewal {
    mint: Mint,
    renew_before: Duration,
    expires_at: Mutex<SystemTime>,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd")
            .field("tls", &*self.inner.tls.lock().expect("etcd tls lock"))
            .field("renewing", &self.inner.renewal.is_some())
            .field("dial_timeout", &self.inner.dial_timeout)
            .field("request_timeout", &self.inner.request_timeout)
            .finish_non_exhaustive()
    }
}

/// A request that has not answered in this long is treated as unanswered, so one hung member cannot stall
/// a step that another member could serve. Member changes in etcd commit within a few election timeouts.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl Etcd {
    /// `dial_timeout` bounds connecting and the TLS handshake to one endpoint.
    pub fn new(tls: EtcdTls, dial_timeout: Duration) -> Self {
        Self::with_timeouts(tls, dial_timeout, DEFAULT_REQUEST_TIMEOUT.max(dial_timeout))
    }

    /// As [`Etcd::new`], with a bound on each request as well (including its dial).
    pub fn with_timeouts(tls: EtcdTls, dial_timeout: Duration, request_timeout: Duration) -> Self {
        Self::build(tls, None, dial_timeout, request_timeout)
    }

    /// A handle whose client certificate is short-lived: `mint` makes the first one now, and a new one whenever
    /// a connection is about to be made with less than `renew_before` of the current one left. Connections made
    /// with the old certificate are dropped then, so a reconnect never presents an expired one; a request already
    /// under way keeps its connection (TLS checks the certificate at the handshake only).
    pub fn renewing(
        ca_pem: String,
        mint: Mint,
        renew_before: Duration,
        dial_timeout: Duration,
    ) -> Result<Self, String> {
        let first = mint()?;
        let tls = EtcdTls {
            ca_pem,
            client_cert_pem: first.cert_pem,
            client_key_pem: first.key_pem,
        };
        let renewal = Renewal {
            mint,
            renew_before,
            expires_at: Mutex::new(first.expires_at),
        };
        let request_timeout = DEFAULT_REQUEST_TIMEOUT.max(dial_timeout);
        Ok(Self::build(
            tls,
            Some(renewal),
            dial_timeout,
            request_timeout,
        ))
    }

    fn build(
        tls: EtcdTls,
        renewal: Option<Renewal>,
        dial_timeout: Duration,
        request_timeout: Duration,
    ) -> Self {
        Etcd {
            inner: Arc::new(Inner {
                tls: Mutex::new(tls),
                renewal,
                dial_timeout,
                request_timeout,
                clients: Mutex::new(HashMap::new()),
                disabled: None,
            }),
        }
    }

    /// A handle that never dials: every request fails at once, naming `reason`, so a read sees etcd as not
    /// answering and says why, without a dial timeout and without a client certificate (a read-only provider
    /// reads no CA key to mint one).
    pub fn disabled(reason: impl Into<String>) -> Self {
        let none = EtcdTls {
            ca_pem: String::new(),
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
        };
        Etcd {
            inner: Arc::new(Inner {
                tls: Mutex::new(none),
                renewal: None,
                dial_timeout: Duration::from_secs(1),
                request_timeout: Duration::from_secs(1),
                clients: Mutex::new(HashMap::new()),
                disabled: Some(reason.into()),
            }),
        }
    }

    /// The TLS material a new connection must use: renewed first when it is due.
    pub(super) fn tls(&self) -> Result<EtcdTls, String> {
        if let Some(reason) = &self.inner.disabled {
            return Err(reason.clone());
        }
        self.renew_if_due()?;
        Ok(self.inner.tls.lock().expect("etcd tls lock").clone())
    }

    /// Mints a new client certificate when less than `renew_before` of the current one is left, and forgets the
    /// connections made with the old one.
    fn renew_if_due(&self) -> Result<(), String> {
        let Some(renewal) = &self.inner.renewal else {
            return Ok(());
        };
        let mut expires_at = renewal.expires_at.lock().expect("etcd renewal lock");
        let left = expires_at
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        if left >= renewal.renew_before {
            return Ok(());
        }
        let fresh = (renewal.mint)().map_err(|e| {
            format!("the provider's etcd client certificate could not be renewed: {e}")
        })?;
        {
            let mut tls = self.inner.tls.lock().expect("etcd tls lock");
            tls.client_cert_pem = fresh.cert_pem;
            tls.client_key_pem = fresh.key_pem;
        }
        *expires_at = fresh.expires_at;
        self.inner
            .clients
            .lock()
            .expect("etcd client cache lock")
            .clear();
        Ok(())
    }

    pub(super) fn dial_timeout(&self) -> Duration {
        self.inner.dial_timeout
    }

    fn tls_options(&self, tls: &EtcdTls, target: &EtcdTarget) -> TlsOptions {
        TlsOptions::new()
            // Only our CA: no system roots, so a publicly trusted certificate for the name is not enough.
            .ca_certificate(Certificate::from_pem(&tls.ca_pem))
            .identity(Identity::from_pem(
                &tls.client_cert_pem,
                &tls.client_key_pem,
            ))
            // Verify the member's name, not the dialled IP: the IP is an external address that can move.
            .domain_name(target.server_name.clone())
            .timeout(self.inner.dial_timeout)
    }

    pub(super) async fn client(&self, target: &EtcdTarget) -> Result<Client, EndpointFailure> {
        let tls = self.tls().map_err(|message| EndpointFailure {
            endpoint: target.endpoint,
            server_name: target.server_name.clone(),
            kind: FailureKind::Unreachable,
            message,
        })?;
        if let Some(client) = self.cached(target) {
            return Ok(client);
        }
        let options = ConnectOptions::new()
            .with_tls(self.tls_options(&tls, target))
            .with_connect_timeout(self.inner.dial_timeout)
            .with_timeout(self.inner.request_timeout);
        let url = format!("https://{}", target.endpoint);
        // etcd-client connects lazily: this only builds the channel; failures show on the first request.
        let client = Client::connect([url], Some(options))
            .await
            .map_err(|e| failure(target, FailureKind::Unreachable, &e))?;
        self.inner
            .clients
            .lock()
            .expect("etcd client cache lock")
            .insert(target.clone(), client.clone());
        Ok(client)
    }

    fn cached(&self, target: &EtcdTarget) -> Option<Client> {
        self.inner
            .clients
            .lock()
            .expect("etcd client cache lock")
            .get(target)
            .cloned()
    }

    /// One request to one endpoint, bounded by the request timeout.
    pub(crate) async fn call_one<T, F, Fut>(
        &self,
        target: &EtcdTarget,
        op: F,
    ) -> Result<T, EndpointFailure>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let client = self.client(target).await?;
        // Our own bound as well as tonic's: a balanced channel with no ready endpoint waits without one.
        match tokio::time::timeout(self.inner.request_timeout, op(client)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(classify(target, &e)),
            Err(_) => Err(EndpointFailure {
                endpoint: target.endpoint,
                server_name: target.server_name.clone(),
                kind: FailureKind::Unreachable,
                message: format!("no answer within {:?}", self.inner.request_timeout),
            }),
        }
    }

    /// A request any voting member can serve: endpoints in order until one answers. A definitive refusal
    /// from etcd stops the search, since every member would refuse alike.
    pub(crate) async fn call_any<T, F, Fut>(
        &self,
        endpoints: &[EtcdTarget],
        op: F,
    ) -> Result<T, CallError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let mut failures = Vec::new();
        for target in endpoints {
            match self.call_one(target, &op).await {
                Ok(value) => return Ok(value),
                Err(f) if f.kind == FailureKind::Rejected => {
                    failures.push(f);
                    break;
                }
                Err(f) => failures.push(f),
            }
        }
        Err(CallError { failures })
    }

    /// `op` on every endpoint at once, each answer tagged with its endpoint's position.
    fn spawn_each<T, F, Fut>(
        &self,
        endpoints: &[EtcdTarget],
        op: F,
    ) -> JoinSet<(usize, Result<T, EndpointFailure>)>
    where
        T: Send + 'static,
        F: Fn(Etcd, EtcdTarget) -> Fut,
        Fut: Future<Output = Result<T, EndpointFailure>> + Send + 'static,
    {
        let mut set = JoinSet::new();
        for (i, target) in endpoints.iter().enumerate() {
            let fut = op(self.clone(), target.clone());
            set.spawn(async move { (i, fut.await) });
        }
        set
    }

    /// A read any member can serve, asked of every endpoint at once: the first answer wins and the other calls
    /// are dropped, so endpoints that do not answer (a plan run from outside etcd's source ranges) cost one
    /// timeout together rather than one each. As for [`Etcd::call_any`], a definitive refusal ends the call and
    /// is the last failure.
    pub(crate) async fn first_answer<T, F, Fut>(
        &self,
        endpoints: &[EtcdTarget],
        op: F,
    ) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: Fn(Etcd, EtcdTarget) -> Fut,
        Fut: Future<Output = Result<T, EndpointFailure>> + Send + 'static,
    {
        let mut set = self.spawn_each(endpoints, op);
        let mut failures = Vec::new();
        while let Some(joined) = set.join_next().await {
            let (i, result) = joined.expect("etcd endpoint task panicked");
            match result {
                Ok(value) => return Ok(value),
                Err(f) if f.kind == FailureKind::Rejected => {
                    failures.sort_by_key(|(i, _)| *i);
                    failures.push((i, f));
                    return Err(CallError {
                        failures: failures.into_iter().map(|(_, f)| f).collect(),
                    });
                }
                Err(f) => failures.push((i, f)),
            }
        }
        failures.sort_by_key(|(i, _)| *i);
        Err(CallError {
            failures: failures.into_iter().map(|(_, f)| f).collect(),
        })
    }

    /// The status of every endpoint, asked concurrently so unreachable members cost one timeout, not one each.
    /// Results are in the order of `endpoints`.
    pub(crate) async fn statuses(
        &self,
        endpoints: &[EtcdTarget],
    ) -> Vec<Result<MemberStatus, EndpointFailure>> {
        self.each(endpoints, |etcd, target| async move {
            etcd.status_of(&target).await
        })
        .await
    }

    /// The member list as each endpoint sees it locally (serializable: no round trip through the leader).
    pub(crate) async fn member_lists(
        &self,
        endpoints: &[EtcdTarget],
    ) -> Vec<Result<Vec<Member>, EndpointFailure>> {
        self.each(endpoints, |etcd, target| async move {
            etcd.member_list_of(&target).await
        })
        .await
    }

    async fn each<T, F, Fut>(
        &self,
        endpoints: &[EtcdTarget],
        op: F,
    ) -> Vec<Result<T, EndpointFailure>>
    where
        T: Send + 'static,
        F: Fn(Etcd, EtcdTarget) -> Fut,
        Fut: Future<Output = Result<T, EndpointFailure>> + Send + 'static,
    {
        let mut set = self.spawn_each(endpoints, op);
        let mut results: Vec<Option<Result<T, EndpointFailure>>> =
            (0..endpoints.len()).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            // A panic in a status call is a bug in this module: surface it rather than report a sick member.
            let (i, result) = joined.expect("etcd endpoint task panicked");
            results[i] = Some(result);
        }
        results
            .into_iter()
            .map(|r| r.expect("every endpoint task reported"))
            .collect()
    }

    pub(crate) async fn status_of(
        &self,
        target: &EtcdTarget,
    ) -> Result<MemberStatus, EndpointFailure> {
        let resp = self
            .call_one(target, |mut c| async move { c.status().await })
            .await?;
        Ok(MemberStatus {
            member_id: resp.header().map(|h| h.member_id()).unwrap_or_default(),
            revision: resp.header().map(|h| h.revision()).unwrap_or_default(),
            leader_id: resp.leader(),
            raft_index: resp.raft_index(),
            raft_applied_index: resp.raft_applied_index(),
            raft_term: resp.raft_term(),
            is_learner: resp.is_learner(),
            db_size: resp.db_size(),
            version: resp.version().to_string(),
            errors: resp.errors().to_vec(),
        })
    }

    pub(crate) async fn member_list_of(
        &self,
        target: &EtcdTarget,
    ) -> Result<Vec<Member>, EndpointFailure> {
        let resp = self
            .call_one(target, |mut c| async move { c.member_list().await })
            .await?;
        Ok(members(resp.members()))
    }
}

pub(crate) fn members(list: &[etcd_client::Member]) -> Vec<Member> {
    list.iter()
        .map(|m| Member {
            id: m.id(),
            name: m.name().to_string(),
            peer_urls: m.peer_urls().to_vec(),
            client_urls: m.client_urls().to_vec(),
            is_learner: m.is_learner(),
        })
        .collect()
}

// gRPC status codes, fixed by the gRPC spec; compared as numbers so only tfplugin names tonic's types.
const CANCELLED: i32 = 1;
const UNKNOWN: i32 = 2;
const DEADLINE_EXCEEDED: i32 = 4;
const FAILED_PRECONDITION: i32 = 9;
const UNAVAILABLE: i32 = 14;

fn classify(target: &EtcdTarget, e: &etcd_client::Error) -> EndpointFailure {
    use etcd_client::Error as E;
    let kind = match e {
        E::GRpcStatus(status) => match status.code() as i32 {
            // The learner interceptor answers every RPC but status and serializable reads with this.
            FAILED_PRECONDITION if status.message().contains("not supported for learner") => {
                FailureKind::Learner
            }
            // No connection, no leader, or a timeout: another member may well answer.
            UNAVAILABLE | DEADLINE_EXCEEDED | CANCELLED | UNKNOWN => FailureKind::Unreachable,
            _ => FailureKind::Rejected,
        },
        E::TransportError(_) | E::IoError(_) => FailureKind::Unreachable,
        _ => FailureKind::Rejected,
    };
    failure(target, kind, e)
}

fn failure(target: &EtcdTarget, kind: FailureKind, e: &etcd_client::Error) -> EndpointFailure {
    EndpointFailure {
        endpoint: target.endpoint,
        server_name: target.server_name.clone(),
        kind,
        message: chain(e),
    }
}

/// The error and its causes on one line: tonic's "transport error" alone hides a TLS verification failure.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let head = match e.downcast_ref::<etcd_client::Error>() {
        // The gRPC message is what etcd said; Status's Display adds code and metadata noise.
        Some(etcd_client::Error::GRpcStatus(status)) => status.message().to_string(),
        _ => e.to_string(),
    };
    // Layers often repeat their cause's text; each piece is said once.
    ha_settings::error_chain::with_causes(head, e.source())
}
