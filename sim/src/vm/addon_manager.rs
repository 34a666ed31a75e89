//! The part of kube-addon-manager the API stand-in models: the master's addon bindings come into being in etcd,
//! where the API server keeps them (`/registry/clusterrolebindings/<name>`), some time after the master boots
//! (the addon manager applies its directory on start, then every minute: `addon_delay`), and only what they say
//! there grants anything (`contract::Authorizer`): a binding not made yet grants nothing, and one whose subjects
//! a user took out (`PATCH`, the documented revocation) no longer grants them. RBAC reads them as the API server's
//! informers do, from a copy kept fresh in the background that outlives a moment without etcd. Another master's
//! addon manager may have made them first: they live in etcd, so a master that joins a cluster finds them, and a
//! cluster restored from a snapshot has them when the snapshot did. Each is created when absent and never
//! written back (`EnsureExists`), so an edit stays. The
//! stand-in talks to etcd as the API server does, over gRPC with its `--etcd-*` files (etcd's JSON gateway would
//! need a serving certificate that is also a client one, which masters do not have).

use crate::contract::{Subject, subjects_of};
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, TlsOptions, Txn,
    TxnOp,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// How the API server reaches its etcd: `--etcd-servers`' first URL as the sim dials it, the name its certificate
/// is checked against, and `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile` (PEM; none over plain HTTP).
#[derive(Clone)]
pub(crate) struct EtcdAccess {
    pub url: String,
    pub server_name: String,
    pub tls: Option<(String, String, String)>,
}

/// How often the copy RBAC reads is refreshed from etcd once every binding exists: one serializable read of the
/// bindings' directory each time, so thirty VMs of parallel scenarios add no load worth the name.
const REFRESH: Duration = Duration::from_secs(1);
/// How often while a binding is missing: the first ones are made soon after `addon_delay`.
const REFRESH_WHILE_MISSING: Duration = Duration::from_millis(100);
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) struct Bindings {
    etcd: EtcdAccess,
    /// The master's addon bindings: etcd key and JSON object.
    wanted: Vec<(String, String)>,
    /// The bindings as etcd last said (key → subjects): what RBAC counts.
    held: Mutex<BTreeMap<String, Vec<Subject>>>,
    client: tokio::sync::Mutex<Option<Client>>,
}

/// Why a patch was not applied, as the API server's status code and sentence.
pub(crate) type Refused = (u16, String);

/// One etcd call within `CALL_TIMEOUT`; a failure says `what` failed, with the code the API server answers for it
/// (504 when etcd did not answer in time, else 500).
async fn within<T>(
    what: String,
    call: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Refused> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Err(_) => Err((504, format!("{what}: timed out"))),
        Ok(Err(e)) => Err((500, format!("{what}: {e}"))),
        Ok(Ok(v)) => Ok(v),
    }
}

impl Bindings {
    pub(crate) fn new(etcd: EtcdAccess, wanted: Vec<(String, String)>) -> Bindings {
        Bindings {
            etcd,
            wanted,
            held: Mutex::default(),
            client: tokio::sync::Mutex::default(),
        }
    }

    /// The master's bindings RBAC counts now (key → subjects).
    pub(crate) fn held(&self) -> BTreeMap<String, Vec<Subject>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The object stored at `key`, if any.
    pub(crate) async fn read(&self, key: &str) -> Result<Option<String>, String> {
        let mut c = self.client().await?;
        let got = within(format!("etcd get {key}"), c.get(key, None))
            .await
            .map_err(|(_, e)| e)?;
        Ok(got
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
    }

    /// Keeps RBAC's copy fresh and, from `delay` after boot on, makes each binding etcd does not have.
    pub(crate) async fn run(&self, delay: Duration) {
        let started = tokio::time::Instant::now();
        loop {
            let missing = self.refresh().await;
            if started.elapsed() >= delay {
                for (key, object) in self.wanted.iter().filter(|(k, _)| missing.contains(k)) {
                    match self.create(key, object).await {
                        Ok(()) => self.remember(key, Some(object)),
                        Err(e) => tracing::debug!("addon manager: {key}: {e}"),
                    }
                }
            }
            let every = if missing.is_empty() {
                REFRESH
            } else {
                REFRESH_WHILE_MISSING
            };
            tokio::time::sleep(every).await;
        }
    }

    /// Reads the bindings' directories into RBAC's copy (serializable: the member's own view, as an informer's
    /// cache is the API server's); the keys etcd said it does not have. A directory that cannot be read keeps
    /// what was known of its bindings, and counts them as not missing.
    async fn refresh(&self) -> Vec<String> {
        let dirs: std::collections::BTreeSet<&str> = self
            .wanted
            .iter()
            .filter_map(|(k, _)| k.rsplit_once('/').map(|(dir, _)| dir))
            .collect();
        let mut missing = Vec::new();
        for dir in dirs {
            let prefix = format!("{dir}/");
            let found = match self.read_dir(&prefix).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::debug!("addon manager: read {prefix}: {e}");
                    continue;
                }
            };
            for (key, _) in self.wanted.iter().filter(|(k, _)| k.starts_with(&prefix)) {
                let object = found.get(key).map(String::as_str);
                self.remember(key, object);
                if object.is_none() {
                    missing.push(key.clone());
                }
            }
        }
        missing
    }

    /// Every object under `prefix`, by key.
    async fn read_dir(&self, prefix: &str) -> Result<BTreeMap<String, String>, String> {
        let mut c = self.client().await?;
        let options = GetOptions::new().with_prefix().with_serializable();
        let got = within(format!("etcd get {prefix}"), c.get(prefix, Some(options)))
            .await
            .map_err(|(_, e)| e)?;
        Ok(got
            .kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    String::from_utf8_lossy(kv.value()).into_owned(),
                )
            })
            .collect())
    }

    fn remember(&self, key: &str, object: Option<&str>) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        match object.map(serde_json::from_str::<Value>) {
            Some(Ok(v)) => {
                held.insert(key.to_string(), subjects_of(&v));
            }
            Some(Err(_)) | None => {
                held.remove(key);
            }
        }
    }

    /// Applies a JSON patch (RFC 6902) to the cluster role binding stored at `key` and stores the result; the
    /// stand-in takes the operations on `/subjects` alone (`remove`, `add`, `replace`), which is what taking a
    /// group's access back and giving it again need. The new object, or why not.
    pub(crate) async fn patch(
        &self,
        key: &str,
        name: &str,
        patch: &[u8],
    ) -> Result<String, Refused> {
        let ops: Vec<Value> = serde_json::from_slice(patch)
            .map_err(|e| (400, format!("the request body is not a JSON patch: {e}")))?;
        let current = self
            .read(key)
            .await
            .map_err(|e| (500, format!("etcd: {e}")))?;
        let Some(current) = current else {
            return Err((
                404,
                format!("clusterrolebindings.rbac.authorization.k8s.io {name:?} not found"),
            ));
        };
        let mut object: Value =
            serde_json::from_str(&current).map_err(|e| (500, format!("stored object: {e}")))?;
        for op in &ops {
            let (kind, path) = (op["op"].as_str(), op["path"].as_str());
            match (kind, path, object.as_object_mut()) {
                (Some("remove"), Some("/subjects"), Some(o)) => {
                    o.remove("subjects");
                }
                (Some("add" | "replace"), Some("/subjects"), Some(o)) if op["value"].is_array() => {
                    o.insert("subjects".into(), op["value"].clone());
                }
                _ => {
                    return Err((
                        422,
                        format!(
                            "ha-sim applies only remove, add and replace of /subjects, not {op}"
                        ),
                    ));
                }
            }
        }
        let text = object.to_string();
        let mut c = self.client().await.map_err(|e| (500, e))?;
        within(format!("etcd put {key}"), c.put(key, text.as_str(), None)).await?;
        self.remember(key, Some(&text));
        Ok(text)
    }

    /// Puts `object` at `key` unless something is there already (a transaction on the key's create revision).
    async fn create(&self, key: &str, object: &str) -> Result<(), String> {
        let mut c = self.client().await?;
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, object, None)]);
        within(format!("etcd txn on {key}"), c.txn(txn))
            .await
            .map_err(|(_, e)| e)?;
        Ok(())
    }

    /// The client, connected once (etcd-client connects lazily and reconnects on its own).
    async fn client(&self) -> Result<Client, String> {
        let mut cached = self.client.lock().await;
        if let Some(c) = cached.as_ref() {
            return Ok(c.clone());
        }
        let e = &self.etcd;
        let mut options = ConnectOptions::new()
            .with_connect_timeout(CALL_TIMEOUT)
            .with_timeout(CALL_TIMEOUT);
        if let Some((ca, cert, key)) = &e.tls {
            options = options.with_tls(
                TlsOptions::new()
                    .ca_certificate(Certificate::from_pem(ca))
                    .identity(Identity::from_pem(cert, key))
                    .domain_name(e.server_name.clone()),
            );
        }
        let client = Client::connect([e.url.clone()], Some(options))
            .await
            .map_err(|e| format!("connect to etcd: {e}"))?;
        *cached = Some(client.clone());
        Ok(client)
    }
}
