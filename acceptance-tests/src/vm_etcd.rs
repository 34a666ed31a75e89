//! A VM's etcd as the scenarios' samplers reach it: the endpoint and the API server's etcd client certificate
//! that `ha-sim ssh <vm>` gives a shell inside the VM, used from the test process through etcd's own gRPC client.
//!
//! Why not `ha-sim ssh <vm> -- etcdctl ...`, as one-off checks do: the roll samplers put a key every 100 ms and
//! ask every voter's health every 200 ms for the whole roll. As processes (an ha-sim and a Go etcdctl with a
//! fresh TLS handshake each) that was a quarter of all CPU a roll scenario used (`perf record -a`, roll.rs), on a
//! 2-core CI machine where the scenarios run two at a time. One long-lived connection per VM asks etcd the same
//! questions over the same mutual TLS.

use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use crate::Sim;

/// One request's bound: the samplers' `etcdctl --command-timeout=1s`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// Where and how `vm`'s shell reaches its etcd, read from the VM through `ha-sim ssh` once per connection.
struct Access {
    endpoint: String,
    tls: TlsOptions,
}

fn access(sim: &Sim, vm: &str) -> Result<Access, String> {
    let env = sim.try_ssh(vm, &["env"])?;
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_string)
            .ok_or_else(|| format!("{vm}: no {name} in its shell's environment"))
    };
    let read = |name: &str| {
        let path = var(name)?;
        std::fs::read_to_string(&path).map_err(|e| format!("{vm}: read {path}: {e}"))
    };
    let endpoint = var("ETCDCTL_ENDPOINTS")?
        .split(',')
        .next()
        .unwrap_or_default()
        .to_string();
    let tls = TlsOptions::new()
        .ca_certificate(Certificate::from_pem(read("ETCDCTL_CACERT")?))
        .identity(Identity::from_pem(
            read("ETCDCTL_CERT")?,
            read("ETCDCTL_KEY")?,
        ));
    Ok(Access { endpoint, tls })
}

/// A sampler's connection to one VM's etcd. A failed request drops the connection, so the next one reads the
/// VM's access again: a rolled VM comes back with new certificates.
pub struct VmEtcd<'a> {
    sim: &'a Sim,
    vm: String,
    rt: tokio::runtime::Runtime,
    client: Option<Client>,
}

impl<'a> VmEtcd<'a> {
    pub fn new(sim: &'a Sim, vm: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime for an etcd sampler");
        VmEtcd {
            sim,
            vm: vm.to_string(),
            rt,
            client: None,
        }
    }

    /// `etcdctl put key value` answered OK within a second.
    pub fn put(&mut self, key: &str, value: &str) -> bool {
        self.call(|mut c| {
            let (key, value) = (key.to_string(), value.to_string());
            async move { c.put(key, value, None).await.map(|_| ()) }
        })
    }

    /// `etcdctl endpoint health`: a linearizable read answered within a second (etcdctl reads a missing key).
    /// It needs the member's quorum too, so it fails on every member while an election runs.
    pub fn healthy(&mut self) -> bool {
        self.call(|mut c| async move { c.get("health", None).await.map(|_| ()) })
    }

    /// `etcdctl endpoint status`: the member's own process answered within a second, quorum or not.
    pub fn serving(&mut self) -> bool {
        self.call(|mut c| async move { c.status().await.map(|_| ()) })
    }

    fn call<F, Fut>(&mut self, op: F) -> bool
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<(), etcd_client::Error>>,
    {
        let Some(client) = self.connected() else {
            return false;
        };
        let ok = self
            .rt
            .block_on(async { tokio::time::timeout(REQUEST_TIMEOUT, op(client)).await })
            .is_ok_and(|r| r.is_ok());
        if !ok {
            self.client = None;
        }
        ok
    }

    fn connected(&mut self) -> Option<Client> {
        if self.client.is_none() {
            let access = access(self.sim, &self.vm).ok()?;
            let options = ConnectOptions::new()
                .with_tls(access.tls)
                .with_connect_timeout(REQUEST_TIMEOUT)
                .with_timeout(REQUEST_TIMEOUT);
            let url = format!("https://{}", access.endpoint.trim_start_matches("https://"));
            self.client = self.rt.block_on(Client::connect([url], Some(options))).ok();
        }
        self.client.clone()
    }
}
