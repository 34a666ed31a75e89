//! The part of kube-addon-manager the API stand-in models: the master's addon bindings come into being in etcd,
//! where the API server keeps them (`/registry/clusterrolebindings/<name>`), some time after the master boots
//! (the addon manager applies its directory on start, then every minute: `addon_delay`), and only once there do
//! they grant anything (`contract::Authorizer`). Another master's addon manager may have made them first: they
//! live in etcd, so a master that joins a cluster finds them, and a cluster restored from a snapshot has them
//! when the snapshot did. Each is created when absent (`EnsureExists`); the sim changes none afterwards. The
//! stand-in talks to etcd as the API server does, over gRPC with its `--etcd-*` files (etcd's JSON gateway would
//! need a serving certificate that is also a client one, which masters do not have).

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, Identity, TlsOptions, Txn, TxnOp,
};
use std::collections::BTreeSet;
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

/// How often an addon manager that has not made every binding yet tries again (etcd not ready, no quorum).
const RETRY: Duration = Duration::from_millis(200);
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) struct Bindings {
    etcd: EtcdAccess,
    /// The master's addon bindings: etcd key and JSON object.
    wanted: Vec<(String, String)>,
    /// Keys seen in etcd: a binding, once made, is not deleted by anything the sim models.
    made: Mutex<BTreeSet<String>>,
}

impl Bindings {
    pub(crate) fn new(etcd: EtcdAccess, wanted: Vec<(String, String)>) -> Bindings {
        Bindings {
            etcd,
            wanted,
            made: Mutex::default(),
        }
    }

    /// The keys of the bindings that exist: those seen before, and the others as etcd has them now (a read each;
    /// one that fails counts as absent, as RBAC cannot see what its storage does not answer).
    pub(crate) async fn made(&self) -> BTreeSet<String> {
        let mut made = self.seen();
        for (key, _) in &self.wanted {
            if !made.contains(key) && matches!(self.read(key).await, Ok(Some(_))) {
                made.insert(key.clone());
            }
        }
        self.made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(made.iter().cloned());
        made
    }

    fn seen(&self) -> BTreeSet<String> {
        self.made.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The object stored at `key`, if any.
    pub(crate) async fn read(&self, key: &str) -> Result<Option<String>, String> {
        let mut c = self.client().await?;
        let got = tokio::time::timeout(CALL_TIMEOUT, c.get(key, None))
            .await
            .map_err(|_| format!("etcd get {key}: timed out"))?
            .map_err(|e| format!("etcd get {key}: {e}"))?;
        Ok(got
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
    }

    /// The addon manager: after `delay`, creates each binding etcd does not have, and tries again until all are
    /// there.
    pub(crate) async fn run(&self, delay: Duration) {
        tokio::time::sleep(delay).await;
        loop {
            let seen = self.seen();
            let mut missing = 0;
            for (key, object) in self.wanted.iter().filter(|(k, _)| !seen.contains(k)) {
                match self.create(key, object).await {
                    Ok(()) => {
                        self.made
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key.clone());
                    }
                    Err(e) => {
                        tracing::debug!("addon manager: {key}: {e}");
                        missing += 1;
                    }
                }
            }
            if missing == 0 {
                return;
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    /// Puts `object` at `key` unless something is there already (a transaction on the key's create revision).
    async fn create(&self, key: &str, object: &str) -> Result<(), String> {
        let mut c = self.client().await?;
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, object, None)]);
        tokio::time::timeout(CALL_TIMEOUT, c.txn(txn))
            .await
            .map_err(|_| format!("etcd txn on {key}: timed out"))?
            .map_err(|e| format!("etcd txn on {key}: {e}"))?;
        Ok(())
    }

    /// A client for one call (etcd-client connects lazily; the calls are few: until the bindings exist, and
    /// reads of one by name).
    async fn client(&self) -> Result<Client, String> {
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
        Client::connect([e.url.clone()], Some(options))
            .await
            .map_err(|e| format!("connect to etcd: {e}"))
    }
}
