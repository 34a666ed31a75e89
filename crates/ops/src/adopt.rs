//! Import: reading an existing cluster or replica back from GCE, including one built outside Terraform with
//! kube-up's names. What a master needs lives in its VM's metadata (the startup configuration), so that is where
//! import recovers CA certificates, the service-account key and a replica's own certificates. CA private keys are
//! never on a master, so an imported cluster has none: it can run, refresh, repair and remove its replicas, but
//! not sign certificates for a new one (docs/internals/import.md).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::cloud::Cloud;
use super::error::{OpError, Result};
use super::shared::{CLUSTER_LABEL, ETCD_CLIENT_PORT, zone_of};
use ha_domain::adopt::{is_replica_name, primary_zone, shared_labels};
use ha_domain::labels::is_provider_label;
use ha_domain::names::DerivedNames;
use ha_etcd::{Etcd, EtcdTarget, EtcdTls};
use ha_gce::{Compute, FirewallInfo, InstanceInfo};
use ha_master::paths;
use ha_master::read::{MasterFiles, read_user_data};
use ha_pki::CertKey;
use ha_settings::Settings;

/// What import reads back of a cluster.
#[derive(Debug, Clone)]
pub struct AdoptedCluster {
    pub external_ip: String,
    pub network: String,
    pub api_port: i64,
    pub api_source_ranges: Vec<String>,
    pub etcd_client_source_ranges: Vec<String>,
    /// `None` when the replicas are spread over zones and none is named as kube-up's first master.
    pub zone: Option<String>,
    /// A zone of some replica, for operations that need one before the plan settles `zone`.
    pub any_zone: String,
    pub multizone: bool,
    pub machine_type: String,
    pub tags: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub service_cluster_ip_range: String,
    pub dns_domain: String,
    pub ca_certificate: String,
    pub etcd_peer_ca_certificate: String,
    pub etcd_client_ca_certificate: String,
    pub service_account_key: String,
    /// The `etcd_version` the masters' etcd image stands for; `None` for an image whose minor is not pinned.
    pub etcd_version: Option<String>,
    /// The `kubernetes_version` the masters' kube-apiserver image stands for; `None` for a release the provider
    /// does not run.
    pub kubernetes_version: Option<String>,
    /// The name of the key the masters encrypt Secrets with, when they do: nothing on a master names the Secret
    /// Manager version it came from (`domain::secrets_encryption::adopted`).
    pub secrets_key_name: Option<String>,
}

/// What import reads back of a replica.
#[derive(Debug, Clone)]
pub struct AdoptedReplica {
    pub vm: InstanceInfo,
    /// The cluster it belongs to (its label, else its `cluster-name` metadata).
    pub cluster: String,
    pub static_ip: Option<String>,
    pub member_id: Option<u64>,
    pub api_server: CertKey,
    pub etcd_peer: CertKey,
    pub etcd_server: CertKey,
}

fn other(s: impl Into<String>) -> OpError {
    OpError::Other(s.into())
}

fn last_segment(s: &str) -> String {
    s.rsplit('/').next().unwrap_or(s).to_string()
}

/// A cluster's replica VMs: those carrying its label. A cluster made by kube-up's scripts has VMs named
/// `<master>` and `<master>-xyz` and no label: import names them and asks for the label rather than adopting VMs
/// by name, because the cluster finds its replicas by label ever after (`observe`), and a name alone could claim
/// a VM that is no master of this cluster.
pub async fn find_replicas(
    cloud: &Cloud,
    region: &str,
    cluster: &str,
    deadline: Instant,
) -> Result<Vec<InstanceInfo>> {
    replicas_of(&cloud.compute, region, cluster, deadline).await
}

async fn replicas_of(
    c: &Compute,
    region: &str,
    cluster: &str,
    deadline: Instant,
) -> Result<Vec<InstanceInfo>> {
    let label: BTreeMap<String, String> = [(CLUSTER_LABEL.to_string(), cluster.to_string())].into();
    let labelled = c.list_instances_in_region(region, &label, deadline).await?;
    if !labelled.is_empty() {
        return Ok(labelled);
    }
    let named: Vec<InstanceInfo> = c
        .list_instances_in_region(region, &BTreeMap::new(), deadline)
        .await?
        .into_iter()
        .filter(|i| is_replica_name(&i.name, cluster))
        .collect();
    if named.is_empty() {
        return Ok(named);
    }
    Err(other(unlabelled(cluster, &named)))
}

/// What to run so the masters of a kube-up cluster carry the label this provider finds replicas by.
pub fn unlabelled(cluster: &str, vms: &[InstanceInfo]) -> String {
    let commands: Vec<String> = vms
        .iter()
        .map(|i| {
            format!(
                "gcloud compute instances add-labels {} --zone={} --labels={CLUSTER_LABEL}={cluster}",
                i.name,
                zone_of(i)
            )
        })
        .collect();
    format!(
        "the VMs {} look like the masters of {cluster} (kube-up's names) but do not carry the label {CLUSTER_LABEL}={cluster}, which is how this provider finds a cluster's replicas. Label them, then import again: {}",
        vms.iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        commands.join("; ")
    )
}

pub(super) fn files_of(vm: &InstanceInfo) -> Result<MasterFiles> {
    let ud = vm.metadata_value("user-data").ok_or_else(|| {
        other(format!(
            "VM {} has no user-data metadata, so it is not a master this provider can adopt",
            vm.name
        ))
    })?;
    read_user_data(ud).map_err(|e| other(format!("VM {}: {e}", vm.name)))
}

/// [`files_of`] with the master's keys: from its user-data, or read from the secret it fetched them from (as the
/// provider's principal, which owns the secret).
pub(super) async fn files_with_keys(settings: &Settings, vm: &InstanceInfo) -> Result<MasterFiles> {
    let mut files = files_of(vm)?;
    let Some(keys_in) = files.keys_in().cloned() else {
        return Ok(files);
    };
    let (project, id) = keys_in.project_and_id().ok_or_else(|| {
        other(format!(
            "VM {}: its keys are in {:?}, which is not a secret's name",
            vm.name, keys_in.secret
        ))
    })?;
    let secrets = ha_secrets::Secrets::connect(settings, project).await?;
    let tar = secrets.read(id, None).await?.ok_or_else(|| {
        other(format!(
            "VM {} fetched its keys from secret {}, which no longer exists: the VM cannot be read back. Rebuild \
             it (a roll writes the secret again), or delete the VM if it is no longer a replica",
            vm.name, keys_in.secret
        ))
    })?;
    files
        .add_keys(&tar)
        .map_err(|e| other(format!("VM {}: {e}", vm.name)))?;
    Ok(files)
}

/// The replica certificates state records (the others live only on the VM), as a VM's startup configuration
/// carries them.
pub struct RecordedCerts {
    pub api_server: CertKey,
    pub etcd_peer: CertKey,
    pub etcd_server: CertKey,
}

impl RecordedCerts {
    pub fn of(certs: &ha_pki::ReplicaCerts) -> Self {
        RecordedCerts {
            api_server: certs.api_server.clone(),
            etcd_peer: certs.etcd_peer.clone(),
            etcd_server: certs.etcd_server.clone(),
        }
    }
}

impl RecordedCerts {
    /// When the first of them expires (Unix seconds); `None` when one does not parse.
    pub fn expire_at(&self) -> Option<i64> {
        first_expiry(
            [&self.api_server, &self.etcd_peer, &self.etcd_server].map(|c| c.cert_pem.as_str()),
        )
    }
}

fn first_expiry<'a>(pems: impl IntoIterator<Item = &'a str>) -> Option<i64> {
    pems.into_iter()
        .map(|pem| ha_pki::not_after_unix(pem).ok())
        .collect::<Option<Vec<i64>>>()?
        .into_iter()
        .min()
}

/// When the first of the certificates state records for VM `vm` expires, read from its public files alone.
pub fn certs_expire_on(vm: &InstanceInfo) -> Option<i64> {
    let files = files_of(vm).ok()?;
    let pems = [
        paths::APISERVER_CRT,
        paths::ETCD_PEER_CRT,
        paths::ETCD_SERVER_CRT,
    ]
    .map(|p| files.get(p));
    first_expiry(pems.into_iter().collect::<Option<Vec<&str>>>()?)
}

/// The certificates replica VM `vm` runs with, read from its startup configuration.
pub async fn certs_on(settings: &Settings, vm: &InstanceInfo) -> Result<RecordedCerts> {
    let files = files_with_keys(settings, vm).await?;
    Ok(RecordedCerts {
        api_server: cert_key(&files, paths::APISERVER_CRT, paths::APISERVER_KEY)?,
        etcd_peer: cert_key(&files, paths::ETCD_PEER_CRT, paths::ETCD_PEER_KEY)?,
        etcd_server: cert_key(&files, paths::ETCD_SERVER_CRT, paths::ETCD_SERVER_KEY)?,
    })
}

fn cert_key(files: &MasterFiles, crt: &str, key: &str) -> Result<CertKey> {
    Ok(CertKey {
        cert_pem: files.require(crt).map_err(other)?.to_string(),
        key_pem: files.require(key).map_err(other)?.to_string(),
    })
}

/// The API firewall rule, the etcd client rule and the replica VMs an import reads. Both of what a kube-up cluster
/// lacks (the etcd client rule, labelled masters) are named at once, so the user fixes them in one round.
async fn rules_and_replicas(
    c: &Compute,
    region: &str,
    name: &str,
    names: &DerivedNames,
    deadline: Instant,
) -> Result<(FirewallInfo, FirewallInfo, Vec<InstanceInfo>)> {
    let fw = |n: String| async move {
        c.get_firewall(&n, deadline).await?.ok_or_else(|| {
            other(format!(
                "cluster {name} has no firewall rule {n}; create it (or apply a cluster of that name) before importing"
            ))
        })
    };
    let api = fw(names.firewall_api.clone()).await?;
    // kube-up makes no etcd client rule; the provider needs one to reach etcd at all.
    let etcd_client = c
        .get_firewall(&names.firewall_etcd_client, deadline)
        .await?;
    let replicas = replicas_of(c, region, name, deadline).await;
    match (etcd_client, replicas) {
        (Some(rule), Ok(replicas)) => Ok((api, rule, replicas)),
        (Some(_), Err(e)) => Err(e),
        (None, replicas) => {
            let missing = format!(
                "cluster {name} has no firewall rule {rule}, which lets the provider reach etcd's client port (a \
                 kube-up cluster has none). Create it for the masters' tag and the ranges Terraform runs from, \
                 then import again: gcloud compute firewall-rules create {rule} --network={network} \
                 --allow=tcp:{port} --target-tags={tags} --source-ranges=<Terraform's address>/32",
                rule = names.firewall_etcd_client,
                network = last_segment(&api.network),
                port = ha_domain::foundation::ETCD_CLIENT_PORT,
                tags = api.target_tags.join(","),
            );
            Err(other(match replicas {
                Ok(_) => missing,
                Err(e) => format!("{missing}. Also, {e}"),
            }))
        }
    }
}

pub async fn adopt_cluster(
    settings: &Settings,
    cloud: &Cloud,
    region: &str,
    name: &str,
    deadline: Instant,
) -> Result<AdoptedCluster> {
    let c = &cloud.compute;
    let names = DerivedNames::for_cluster(name);
    let address = c
        .get_address(region, &names.address, deadline)
        .await?
        .ok_or_else(|| {
            other(format!(
                "there is no address {} in {region}, so there is no cluster {name} there to import (the id is <project>/<region>/<name>)",
                names.address
            ))
        })?;
    let (api, etcd_client, replicas) =
        rules_and_replicas(c, region, name, &names, deadline).await?;
    // The first master kube-up made, if any, else the first found.
    let Some(vm) = replicas
        .iter()
        .find(|i| i.name == name)
        .or(replicas.first())
    else {
        return Err(other(format!(
            "cluster {name} has no replica VM in {region} (none carries the label {CLUSTER_LABEL}={name} or is named {name} or {name}-xyz). Its CA certificates and service-account key exist only on its masters (and in the state that was lost), so they cannot be recovered: create the cluster anew instead"
        )));
    };
    let files = files_with_keys(settings, vm).await?;
    let file = |p: &str| files.require(p).map(str::to_string).map_err(other);
    let zones: Vec<(String, String)> = replicas
        .iter()
        .map(|i| (i.name.clone(), zone_of(i)))
        .collect();
    let labels: Vec<BTreeMap<String, String>> = replicas
        .iter()
        .map(|i| {
            // The provider's own labels (cluster, build, joining) are not the user's: configuration refuses them.
            let mut l = i.labels.clone();
            l.retain(|k, _| !is_provider_label(k));
            l
        })
        .collect();
    Ok(AdoptedCluster {
        external_ip: address.ip,
        network: last_segment(&api.network),
        api_port: api
            .tcp_ports
            .first()
            .and_then(|p| p.parse().ok())
            .unwrap_or(443),
        api_source_ranges: api.source_ranges,
        etcd_client_source_ranges: etcd_client.source_ranges,
        zone: primary_zone(&zones, name),
        any_zone: zone_of(vm),
        multizone: files.multizone(),
        machine_type: last_segment(&vm.machine_type),
        tags: vm
            .tags
            .iter()
            .filter(|t| **t != names.master_tag)
            .cloned()
            .collect(),
        labels: shared_labels(&labels),
        service_cluster_ip_range: files
            .flag("kube-apiserver.yaml", "service-cluster-ip-range")
            .ok_or_else(|| {
                other(format!(
                    "VM {}: the API server has no service range",
                    vm.name
                ))
            })?,
        dns_domain: files
            .cluster_domain()
            .unwrap_or_else(|| "cluster.local".into()),
        ca_certificate: file(paths::CA)?,
        etcd_peer_ca_certificate: file(paths::ETCD_CA)?,
        etcd_client_ca_certificate: file(paths::ETCD_CLIENT_CA)?,
        service_account_key: file(paths::SERVICE_ACCOUNT_KEY)?,
        etcd_version: files
            .etcd_image()
            .and_then(|i| ha_domain::etcd_version::version_of_image(&i)),
        kubernetes_version: files
            .apiserver_image()
            .and_then(|i| ha_domain::kubernetes_version::version_of_image(&i))
            .map(|v| v.to_string()),
        secrets_key_name: files.secrets_key_name(),
    })
}

/// An etcd client built from a master's own configuration (the API server's etcd client certificate), for a
/// cluster whose etcd client CA key is not in state.
fn etcd_from(settings: &Settings, files: &MasterFiles) -> Result<Etcd> {
    let client = cert_key(
        files,
        paths::ETCD_APISERVER_CLIENT_CRT,
        paths::ETCD_APISERVER_CLIENT_KEY,
    )?;
    let tls = EtcdTls {
        ca_pem: files
            .require(paths::ETCD_CLIENT_CA)
            .map_err(other)?
            .to_string(),
        client_cert_pem: client.cert_pem,
        client_key_pem: client.key_pem,
    };
    Ok(Etcd::new(
        tls,
        settings.etcd_dial_timeout.max(Duration::from_secs(1)),
    ))
}

fn target(settings: &Settings, vm: &InstanceInfo) -> Option<EtcdTarget> {
    let ip = if settings.etcd_via_internal_ip {
        vm.internal_ip.as_ref()
    } else {
        vm.external_ip.as_ref()
    }?;
    Some(EtcdTarget::new(
        format!("{ip}:{ETCD_CLIENT_PORT}").parse().ok()?,
        vm.name.clone(),
    ))
}

pub async fn adopt_replica(
    settings: &Settings,
    cloud: &Cloud,
    zone: &str,
    name: &str,
    deadline: Instant,
) -> Result<AdoptedReplica> {
    let c = &cloud.compute;
    let vm = c.get_instance(zone, name, deadline).await?.ok_or_else(|| {
        other(format!(
            "there is no VM {name} in {zone} to import (the id is <project>/<zone>/<name>)"
        ))
    })?;
    let files = files_with_keys(settings, &vm).await?;
    let cluster = vm
        .labels
        .get(CLUSTER_LABEL)
        .cloned()
        .or_else(|| vm.metadata_value("cluster-name").map(str::to_string))
        .ok_or_else(|| {
            other(format!(
                "VM {name} names no cluster (no {CLUSTER_LABEL} label or cluster-name metadata)"
            ))
        })?;
    if !vm.labels.contains_key(CLUSTER_LABEL) {
        return Err(other(unlabelled(&cluster, std::slice::from_ref(&vm))));
    }
    let region = ha_domain::zones::region_of(zone)
        .ok_or_else(|| other(format!("{zone:?} is not a zone")))?;
    let static_ip = c
        .get_address(
            region,
            &DerivedNames::for_cluster(&cluster).address,
            deadline,
        )
        .await?
        .map(|a| a.ip);
    // Its etcd member, asked through its own etcd with its own API server's client certificate. Without an
    // answer, import would have to guess: an empty id plans a replacement, so it refuses instead.
    let unreachable = |why: String| {
        other(format!(
            "could not ask the etcd of VM {name} for its member ({why}); import needs the VM running and its etcd client port reachable from here"
        ))
    };
    if vm.status != "RUNNING" {
        return Err(unreachable(format!("the VM is {}", vm.status)));
    }
    let t = target(settings, &vm)
        .ok_or_else(|| unreachable("the VM has no IP to reach it by".into()))?;
    let members = etcd_from(settings, &files)?
        .member_list(std::slice::from_ref(&t))
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let member_id = members.into_iter().find(|m| m.name == name).map(|m| m.id);
    Ok(AdoptedReplica {
        cluster,
        static_ip,
        member_id,
        api_server: cert_key(&files, paths::APISERVER_CRT, paths::APISERVER_KEY)?,
        etcd_peer: cert_key(&files, paths::ETCD_PEER_CRT, paths::ETCD_PEER_KEY)?,
        etcd_server: cert_key(&files, paths::ETCD_SERVER_CRT, paths::ETCD_SERVER_KEY)?,
        vm,
    })
}

/// The provider's etcd client credential for an imported cluster (no etcd client CA key in state): the API
/// server's client certificate from a replica's configuration. Kept per cluster for the provider's lifetime.
pub async fn etcd_client_from_replicas(
    settings: &Settings,
    c: &Compute,
    region: &str,
    cluster: &str,
) -> Result<CertKey> {
    static CACHE: OnceLock<Mutex<HashMap<String, CertKey>>> = OnceLock::new();
    let cache = || {
        CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    };
    let key = format!("{}/{region}/{cluster}", c.project().unwrap_or_default());
    if let Some(ck) = cache().get(&key) {
        return Ok(ck.clone());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let replicas = replicas_of(c, region, cluster, deadline).await?;
    let mut found = None;
    for vm in &replicas {
        let Ok(files) = files_with_keys(settings, vm).await else {
            continue;
        };
        if let Ok(ck) = cert_key(
            &files,
            paths::ETCD_APISERVER_CLIENT_CRT,
            paths::ETCD_APISERVER_CLIENT_KEY,
        ) {
            found = Some(ck);
            break;
        }
    }
    let ck = found.ok_or_else(|| {
        other(format!(
            "cluster {cluster} was imported without its etcd client CA key, and no replica VM in {region} holds an etcd client certificate to manage etcd with"
        ))
    })?;
    cache().insert(key, ck.clone());
    Ok(ck)
}
