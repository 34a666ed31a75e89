//! What a replica VM is made of, shared by a join (a new replica) and a roll (the same replica rebuilt): its
//! startup configuration, its etcd data disk, its labels (the cluster's, its own, and the build it was made
//! from) and the instance itself.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use tokio::time::Instant;

use super::context::ClusterCtx;
use super::error::Result;
use super::shared::{JOINING_LABEL, REPLICA_LABEL, replica_labels};
use ha_domain::roll::BUILD_LABEL;
use ha_gce::{DataDisk, ExternalIp, InstanceInfo, InstanceSpec};
use ha_master::{self as master, DATA_DEVICE, InitialState, KeyDelivery, MasterConfig};
use ha_pki::ReplicaCerts;

/// A replica's etcd data disk: it outlives the VM, so the VM can be rebuilt on the same data.
pub fn data_disk_name(replica: &str) -> String {
    format!("{replica}{}", ha_domain::names::DATA_DISK_SUFFIX)
}

/// The labels a replica VM carries once it is done: the cluster's, the replica's own, the cluster label, and the
/// build it was made from.
pub fn vm_labels(ctx: &ClusterCtx, own: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut labels = ctx.spec.master.labels.clone();
    labels.extend(own.clone());
    labels.insert(BUILD_LABEL.into(), ctx.spec.master.build().digest());
    replica_labels(&ctx.spec.name, &labels)
}

/// Who the replica is, for its startup configuration.
pub struct Identity<'a> {
    pub name: &'a str,
    pub zone: &'a str,
    pub internal_ip: Ipv4Addr,
    pub certs: &'a ReplicaCerts,
}

/// `secrets_encryption` is the cluster's key as read from Secret Manager (`ClusterCtx::secrets_keys`): a parameter,
/// not a field filled later, so no caller can render a master that forgets it.
pub fn master_config(
    ctx: &ClusterCtx,
    who: &Identity<'_>,
    initial_cluster: Vec<(String, Ipv4Addr)>,
    initial_state: InitialState,
    secrets_encryption: Option<master::SecretsEncryption>,
) -> Result<MasterConfig> {
    let spec = &ctx.spec;
    // While the service-account key rotates, the stage says which key signs and which others are verified.
    let (service_account_key_pem, service_account_also_verifies) = spec.service_account_keys()?;
    Ok(MasterConfig {
        cluster_name: spec.name.clone(),
        replica_name: who.name.to_string(),
        internal_ip: who.internal_ip,
        static_ip: spec.external_ip.parse().unwrap_or(Ipv4Addr::UNSPECIFIED),
        api_port: spec.master.api_port,
        service_cluster_ip_range: spec.master.service_range,
        dns_domain: spec.master.dns_domain.clone(),
        etcd_quorum_read: spec.master.etcd_quorum_read,
        multizone: spec.master.multizone,
        project: spec.project.clone(),
        zone: who.zone.to_string(),
        initial_cluster,
        initial_state,
        // While the CAs rotate, the stage says which CAs issued `certs` and which others are trusted.
        cas: spec.trusted_cas()?,
        certs: who.certs.clone(),
        service_account_key_pem,
        service_account_also_verifies,
        data_disk: true,
        etcd_image: ha_domain::etcd_version::image(&spec.master.etcd_version),
        kubernetes: kubernetes_release(&spec.master.kubernetes_version),
        restore: None,
        // Every VM made from now on fetches its keys; only VMs made before keep theirs in metadata.
        keys: KeyDelivery::SecretManager {
            secret: format!(
                "projects/{}/secrets/{}",
                spec.project,
                ha_domain::names::keys_secret(who.name, who.zone)
            ),
            origin: ha_secrets::origin(&ctx.settings),
        },
        secrets_encryption,
    })
}

/// Writes the replica's keys to its secret, readable by the masters' service account alone, before its VM is
/// made: the VM's first boot reads them. Writing the same keys again (a resumed step) adds nothing.
async fn write_keys(
    ctx: &ClusterCtx,
    who: &Identity<'_>,
    bundle: &master::KeyBundle,
    deadline: Instant,
) -> Result<()> {
    let spec = &ctx.spec;
    // An IAM binding names an email; the instance's `default` is the project's default account.
    let reader = match spec.master.service_account.as_str() {
        ha_domain::service_account::DEFAULT_EMAIL => {
            ctx.compute.default_service_account(deadline).await?
        }
        email => email.to_string(),
    };
    let id = ha_domain::names::keys_secret(who.name, who.zone);
    let labels = replica_labels(
        &spec.name,
        &BTreeMap::from([(REPLICA_LABEL.to_string(), who.name.to_string())]),
    );
    let secrets = ha_secrets::Secrets::connect(&ctx.settings, &spec.project).await?;
    let version = secrets
        .put(&id, &labels, &bundle.tar, Some(&reader))
        .await?;
    tracing::info!(
        "{}: keys in secret {id} (version {version}), readable by {reader}",
        who.name
    );
    Ok(())
}

/// Deletes the replica's secret (`ReplicaStep::DeleteKeys`); nothing to do when there is none (a replica made
/// before Secret Manager, or a delete that already ran).
pub async fn delete_keys(ctx: &ClusterCtx, replica: &str, zone: &str) -> Result<()> {
    delete_secret(ctx, &ha_domain::names::keys_secret(replica, zone)).await
}

/// Deletes secret `id` of the cluster's project; nothing to do when it is gone, or when the project never
/// enabled Secret Manager (a cluster whose masters all keep their keys in metadata).
pub async fn delete_secret(ctx: &ClusterCtx, id: &str) -> Result<()> {
    let secrets = ha_secrets::Secrets::connect(&ctx.settings, &ctx.spec.project).await?;
    match secrets.delete(id).await {
        Err(e) if e.is_disabled() => {
            tracing::info!("no secret {id} to delete: {e}");
            Ok(())
        }
        other => Ok(other.map(|_| ())?),
    }
}

/// Every secret labelled with `cluster`, by id with its labels. A project without the Secret Manager API holds
/// none: nothing this provider wrote can be there, and a write that needs the API says so itself.
pub(crate) async fn cluster_secrets(
    secrets: &ha_secrets::Secrets,
    cluster: &str,
) -> Result<Vec<(String, BTreeMap<String, String>)>> {
    match secrets
        .list(&replica_labels(cluster, &BTreeMap::new()))
        .await
    {
        Err(e) if e.is_disabled() => Ok(Vec::new()),
        other => Ok(other?),
    }
}

/// The keys secrets of the cluster's replicas, with the replica each belongs to (`REPLICA_LABEL`); a secret
/// without that label is not one this provider wrote, and is left alone.
pub async fn list_keys(ctx: &ClusterCtx) -> Result<Vec<ha_domain::orphans::SecretSeen>> {
    let secrets = ha_secrets::Secrets::connect(&ctx.settings, &ctx.spec.project).await?;
    Ok(cluster_secrets(&secrets, &ctx.spec.name)
        .await?
        .into_iter()
        .filter_map(|(id, labels)| {
            Some(ha_domain::orphans::SecretSeen {
                replica: labels.get(REPLICA_LABEL)?.clone(),
                id,
            })
        })
        .collect())
}

/// The release the domain picks for `version`, as the master renders it.
pub fn kubernetes_release(version: &str) -> master::KubernetesRelease {
    use ha_domain::kubernetes_version::{CloudIntegration, master_release};
    let r = master_release(version);
    master::KubernetesRelease {
        image_tag: r.image_tag,
        cloud: match r.cloud {
            CloudIntegration::InTree => master::CloudProvider::InTree,
            CloudIntegration::InTreeByGate => master::CloudProvider::InTreeByGate,
            CloudIntegration::External {
                ccm_image,
                ccm_program,
            } => master::CloudProvider::External {
                ccm_image: ccm_image.into(),
                ccm_program: ccm_program.into(),
            },
        },
        leader_migration: r.leader_migration,
        autoscaler_image: r.autoscaler_image,
    }
}

/// Creates the VM with its data disk: a new one for a join (made by the same insert, so no disk exists without
/// its VM), the existing one for a rebuild. A joining VM is marked as such until the join clears the mark (`ops::orphans` removes a marked VM that a
/// dead join left); a rebuilt one is not, since it belongs to a replica that state holds. `own_labels` are the
/// replica's own labels.
pub async fn create_instance(
    ctx: &ClusterCtx,
    who: &Identity<'_>,
    own_labels: &BTreeMap<String, String>,
    external_ip: ExternalIp,
    cfg: &MasterConfig,
    joining: bool,
    deadline: Instant,
) -> Result<InstanceInfo> {
    master::check(cfg)?;
    if let Some(bundle) = master::key_bundle(cfg) {
        write_keys(ctx, who, &bundle, deadline).await?;
    }
    let spec = &ctx.spec;
    let name = data_disk_name(who.name);
    let device_name = DATA_DEVICE.to_string();
    let data_disk = if joining {
        // A disk of this name without its VM is a leftover (a leave killed between deleting the VM and the
        // disk): a new member must not start on another member's data.
        if ctx
            .compute
            .get_disk(who.zone, &name, deadline)
            .await?
            .is_some()
        {
            ctx.compute.delete_disk(who.zone, &name, deadline).await?;
        }
        // The disk a restore makes records the restore's generation: if the apply is killed before the
        // replica's state is saved, the next plan knows the disk for this restore's, not a survivor's
        // (`domain::restore::disk_newer_than_state`).
        let mut labels = BTreeMap::new();
        if matches!(cfg.initial_state, master::InitialState::RestoreFromSnapshot) {
            labels.insert(
                ha_domain::restore::GENERATION_LABEL.to_string(),
                spec.restore_generation.to_string(),
            );
        }
        DataDisk::Create {
            name,
            size_gb: spec.master.data_disk_size_gb,
            disk_type: spec.master.data_disk_type.clone(),
            device_name,
            labels,
        }
    } else {
        DataDisk::Attach { name, device_name }
    };
    let mut labels = vm_labels(ctx, own_labels);
    // A VM forced to be a one-member cluster is no build: a resumed recovery (and any roll) rebuilds it.
    // A VM that restores a snapshot at boot is no build either: the restore rebuilds it once its member runs.
    match cfg.initial_state {
        master::InitialState::ForceNewCluster => {
            labels.insert(
                BUILD_LABEL.into(),
                ha_domain::recovery::RECOVERING_BUILD.into(),
            );
        }
        master::InitialState::RestoreFromSnapshot => {
            labels.insert(
                BUILD_LABEL.into(),
                ha_domain::restore::RESTORING_BUILD.into(),
            );
        }
        master::InitialState::New | master::InitialState::Existing => {}
    }
    if joining {
        labels.insert(JOINING_LABEL.into(), "true".into());
    }
    let mut tags = spec.master.tags.clone();
    tags.push(ctx.names.master_tag.clone());
    let instance = InstanceSpec {
        name: who.name.to_string(),
        zone: who.zone.to_string(),
        machine_type: spec.master.machine_type.clone(),
        image: spec.master.image.clone(),
        disk_size_gb: spec.master.boot_disk_size_gb,
        disk_type: None,
        network: spec.master.network.clone(),
        subnetwork: spec.master.subnetwork.clone(),
        network_ip: Some(who.internal_ip.to_string()),
        external_ip,
        tags,
        labels,
        metadata: master::metadata_items(cfg),
        service_account: Some(ha_gce::ServiceAccount {
            email: spec.master.service_account.clone(),
            scopes: match cfg.keys {
                KeyDelivery::SecretManager { .. } => {
                    ha_domain::service_account::with_secret_manager_scope(
                        &spec.master.service_account_scopes,
                    )
                }
                KeyDelivery::InMetadata => spec.master.service_account_scopes.clone(),
            },
        }),
        data_disk: Some(data_disk),
    };
    Ok(ctx.compute.insert_instance(&instance, deadline).await?)
}
