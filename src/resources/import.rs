//! `terraform import` and `import {}` for both resources: the id names the object, `ops::adopt` reads it back
//! from GCE and the master VMs' metadata, and this file maps what was found onto the model. What cannot be read
//! back is chosen so the first plan is empty when the configuration says the same (docs/internals/import.md).

use std::collections::BTreeMap;
use std::time::Duration;

use tfplugin::diag::Diagnostics;
use tfplugin_framework::Val;
use tokio::time::Instant;

use super::cluster_apply::endpoint;
use super::cluster_model::{ClusterModel, spec_of};
use super::replica_model::{ReplicaModel, record_metadata};
use crate::config::Settings;
use ha_domain::labels::is_provider_label;
use ha_domain::{ids, zones};
use ha_ops::adopt::{adopt_cluster, adopt_replica};
use ha_ops::cloud::Cloud;
use ha_ops::shared::zone_of;

const IMPORT_TIMEOUT: Duration = Duration::from_secs(120);

fn some_if<T>(v: T, non_empty: bool) -> Val<T> {
    if non_empty { Val::Known(v) } else { Val::Null }
}

async fn compute(settings: &Settings, project: &str, diags: &mut Diagnostics) -> Option<Cloud> {
    match Cloud::connect(settings, project).await {
        Ok(c) => Some(c),
        Err(e) => {
            diags.error("Could not reach the Compute API to import", e.to_string());
            None
        }
    }
}

fn parse<'a>(
    id: &'a str,
    shape: &str,
    diags: &mut Diagnostics,
) -> Option<(&'a str, &'a str, &'a str)> {
    match ids::parse3(id, shape) {
        Ok(parts) => Some(parts),
        Err(e) => {
            diags.error("Invalid import id", e);
            None
        }
    }
}

/// `<project>/<region>/<name>`. The CA private keys cannot be recovered (masters never hold them): the imported
/// `spec` carries empty keys, so replicas can be refreshed, repaired and removed but not added.
pub async fn cluster(
    settings: &Settings,
    id: &str,
    diags: &mut Diagnostics,
) -> Option<ClusterModel> {
    let (project, region, name) = parse(id, "<project>/<region>/<name>", diags)?;
    if let Err((summary, detail)) = zones::check_region(region) {
        diags.error(summary, detail);
        return None;
    }
    let c = compute(settings, project, diags).await?;
    let a = match adopt_cluster(settings, &c, region, name, Instant::now() + IMPORT_TIMEOUT).await {
        Ok(a) => a,
        Err(e) => {
            diags.error(
                format!("Could not import cluster {name}"),
                super::advice::with_advice(&e),
            );
            return None;
        }
    };
    let s = |v: &str| Val::Known(v.to_string());
    let mut m = ClusterModel {
        id: Val::Known(ids::cluster_id(project, region, name)),
        name: s(name),
        project: s(project),
        region: s(region),
        // Unknown when the replicas are spread over zones: null here, and the plan takes the configured zone
        // without replacing the cluster (see `ClusterResource::modify_plan`).
        zone: a.zone.clone().map(Val::Known).unwrap_or(Val::Null),
        multizone: Val::Known(a.multizone),
        etcd_quorum_read: Val::Known(true),
        machine_type: s(&a.machine_type),
        // Not on the instance as GCE lists it: assumed the defaults (for the image, what masters ran before the
        // default changed). A different configured image or disk size is a build change: the replicas roll onto it.
        image: s(ha_domain::image::LEGACY),
        boot_disk_size_gb: Val::Known(20),
        data_disk_size_gb: Val::Known(20),
        data_disk_type: Val::Known(ha_domain::master_spec::DEFAULT_DATA_DISK_TYPE.into()),
        // What the masters' etcd image says; an unpinned minor is assumed the default, whose plan then judges the
        // change from etcd's own versions (a downgrade from a moved cluster version is refused, not rolled).
        etcd_version: s(a
            .etcd_version
            .as_deref()
            .unwrap_or(ha_domain::etcd_version::LEGACY)),
        // What the masters' kube-apiserver image says, so the first plan rolls nothing; a release the provider does
        // not run reads as 1.28.15, what masters ran before the setting.
        certificate_validity: s(ha_domain::certificates::DEFAULT_VALIDITY),
        certificate_renew_before: s(ha_domain::certificates::DEFAULT_RENEW_BEFORE),
        kubernetes_version: s(a
            .kubernetes_version
            .as_deref()
            .unwrap_or(ha_domain::kubernetes_version::LEGACY)),
        // Assumed the defaults, like the image: GCE shows `default` resolved to the account's email, which would
        // read as a change of account.
        service_account: s(ha_domain::service_account::DEFAULT_EMAIL),
        service_account_scopes: Val::Known(
            ha_domain::service_account::DEFAULT_SCOPES
                .map(String::from)
                .to_vec(),
        ),
        network: s(&a.network),
        // Not told apart from the network's default subnetwork: left to the configuration.
        subnetwork: Val::Null,
        tags: some_if(a.tags.clone(), !a.tags.is_empty()),
        labels: some_if(a.labels.clone(), !a.labels.is_empty()),
        effective_labels: Val::Known(a.labels.clone()),
        api_source_ranges: Val::Known(a.api_source_ranges.clone()),
        etcd_client_source_ranges: Val::Known(a.etcd_client_source_ranges.clone()),
        api_port: Val::Known(a.api_port),
        service_cluster_ip_range: s(&a.service_cluster_ip_range),
        dns_domain: s(&a.dns_domain),
        external_ip: s(&a.external_ip),
        endpoint: s(&endpoint(&a.external_ip, a.api_port)),
        ca_certificate: s(&a.ca_certificate),
        ca_private_key_wo: Val::Null,
        etcd_peer_ca_certificate: s(&a.etcd_peer_ca_certificate),
        etcd_client_ca_certificate: s(&a.etcd_client_ca_certificate),
        spec: Val::Null,
        drift: Val::Known(Vec::new()),
        // Imported data is as precious as created data: protected, as the default says.
        deletion_protection: Val::Known(true),
        restore: Val::Null,
        backup: Val::Null,
        last_backup: Val::Null,
        // Masters never hold CA keys, so import finds none to store (`ca_key_store`).
        ca_key_store: Val::Null,
        // Nothing on a master names the version its key came from: the key's name stands in until the
        // configuration names it (`domain::secrets_encryption::adopted`). A kube-up master encrypts nothing.
        secrets_encryption_key: a.secrets_key_name.clone().map_or(Val::Null, Val::Known),
        // Which keys a master only reads is not told apart from keys it no longer needs: none is assumed, and a
        // configuration that names some rolls the masters to read them.
        secrets_decryption_keys: Val::Null,
        service_account_key_rotation: Val::Null,
        ca_rotation: Val::Null,
        next_ca_certificate: Val::Null,
        next_ca_private_key_wo: Val::Null,
        private_keys: Val::Null,
        timeouts: Val::Null,
    };
    let mut spec = spec_of(&m, None);
    // Whatever made the masters, nothing says they carry the admin binding: credentials stay in system:masters.
    spec.admin_group = Val::Null;
    spec.zone = s(a.zone.as_deref().unwrap_or(&a.any_zone));
    spec.external_ip = s(&a.external_ip);
    spec.ca_certificate = s(&a.ca_certificate);
    spec.etcd_peer_ca_certificate = s(&a.etcd_peer_ca_certificate);
    spec.etcd_client_ca_certificate = s(&a.etcd_client_ca_certificate);
    spec.service_account_key = s(&a.service_account_key);
    for key in [
        &mut spec.ca_private_key,
        &mut spec.etcd_peer_ca_private_key,
        &mut spec.etcd_client_ca_private_key,
    ] {
        *key = Val::Known(String::new());
    }
    spec.keys_secret = Val::Null;
    m.spec = Val::Known(spec);
    Some(m)
}

/// `<project>/<zone>/<name>`. `cluster` stays null (an id cannot carry the spec): the plan takes it from the
/// configuration without replacing the replica, and the apply records it.
pub async fn replica(
    settings: &Settings,
    id: &str,
    diags: &mut Diagnostics,
) -> Option<ReplicaModel> {
    let (project, zone, name) = parse(id, "<project>/<zone>/<name>", diags)?;
    let Some(region) = zones::region_of(zone) else {
        diags.error(
            "Invalid import id",
            format!("{zone:?} in {id:?} is not a GCE zone (the id is <project>/<zone>/<name>)."),
        );
        return None;
    };
    let c = compute(settings, project, diags).await?;
    let a = match adopt_replica(settings, &c, zone, name, Instant::now() + IMPORT_TIMEOUT).await {
        Ok(a) => a,
        Err(e) => {
            diags.error(
                format!("Could not import replica {name}"),
                super::advice::with_advice(&e),
            );
            return None;
        }
    };
    let vm = &a.vm;
    let external = vm.external_ip.clone().unwrap_or_default();
    // The VM's labels but the provider's own (which configuration refuses); the cluster's own labels among them show as the replica's until the
    // first apply, which sets the same labels again.
    let own: BTreeMap<String, String> = vm
        .labels
        .iter()
        .filter(|(k, _)| !is_provider_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let s = |v: &str| Val::Known(v.to_string());
    let pems = [&a.api_server, &a.etcd_peer, &a.etcd_server].map(|c| c.cert_pem.as_str());
    let (fingerprints, first_expiry) = super::replica_model::certificate_facts(pems);
    let mut m = ReplicaModel {
        id: Val::Known(ids::replica_id(project, &zone_of(vm), name)),
        cluster: Val::Null,
        cluster_id: Val::Known(ids::cluster_id(project, region, &a.cluster)),
        zone: s(zone),
        name: s(name),
        labels: some_if(own.clone(), !own.is_empty()),
        instance_id: Val::Known(vm.id.to_string()),
        self_link: s(&vm.self_link),
        internal_ip: s(vm.internal_ip.as_deref().unwrap_or_default()),
        holds_static_ip: Val::Known(a.static_ip.as_deref() == Some(external.as_str())),
        external_ip: Val::Known(external),
        etcd_member_id: Val::Known(a.member_id.map(|id| format!("{id:x}")).unwrap_or_default()),
        status: s(&vm.status),
        certificate_sha256: Val::Known(fingerprints),
        startup_metadata: Val::Null,
        keys_in_metadata: Val::Null,
        drift: Val::Known(Vec::new()),
        master_settings: Val::Null,
        certificates_expire_at: first_expiry.map_or(Val::Null, Val::Known),
        timeouts: Val::Null,
    };
    // What the VM carries now is what the provider owns from here on.
    record_metadata(&mut m, &vm.metadata);
    Some(m)
}

/// The `config` of `list "ha_master_replica"` (`terraform query`).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct ReplicaListConfig {
    pub cluster: Val<String>,
    pub region: Val<String>,
    pub project: Val<String>,
}

pub fn replica_list_schema() -> tfplugin_framework::Schema {
    use tfplugin_framework::{Attribute, Schema};
    Schema::new(
        "Finds the master VMs of a cluster (those labelled `ha-master-cluster=<cluster>`) in a region, for \
         `terraform query`. Each result has the replica's identity, so `terraform query \
         -generate-config-out` can write import blocks for them.",
    )
    .attribute(
        Attribute::string("cluster")
            .required()
            .description("The cluster's name."),
    )
    .attribute(Attribute::string("region").optional().description(
        "The cluster's region. Defaults to the provider's `region`, else the region of its `zone`.",
    ))
    .attribute(
        Attribute::string("project")
            .optional()
            .description("The project. Defaults to the provider's `project`."),
    )
}

/// The replicas of a cluster as GCE shows them: what import would read, but the etcd member id and the
/// certificates (listing stays a cheap read of the Compute API).
pub async fn list_replicas(
    settings: &Settings,
    config: &tfplugin::value::Value,
    diags: &mut Diagnostics,
) -> Vec<ReplicaModel> {
    let cfg: ReplicaListConfig = match tfplugin_framework::model::from_value(config) {
        Ok(c) => c,
        Err(e) => {
            diags.push(e.diagnostic("Could not read the list configuration"));
            return Vec::new();
        }
    };
    let Some(cluster) = cfg.cluster.known().cloned() else {
        return Vec::new();
    };
    let project = cfg.project.known().cloned().or(settings.project.clone());
    let region = cfg
        .region
        .known()
        .cloned()
        .or(settings.region.clone())
        .or_else(|| {
            settings
                .zone
                .as_deref()
                .and_then(zones::region_of)
                .map(str::to_string)
        });
    let (Some(project), Some(region)) = (project, region) else {
        diags.error(
            "No project or region to list in",
            "Set `project` and `region` in the list block's config or in the provider block.",
        );
        return Vec::new();
    };
    let Some(c) = compute(settings, &project, diags).await else {
        return Vec::new();
    };
    let vms =
        match ha_ops::adopt::find_replicas(&c, &region, &cluster, Instant::now() + IMPORT_TIMEOUT)
            .await
        {
            Ok(vms) => vms,
            Err(e) => {
                diags.error(
                    format!("Could not list the replicas of cluster {cluster}"),
                    super::advice::with_advice(&e),
                );
                return Vec::new();
            }
        };
    vms.iter()
        .map(|vm| {
            let zone = zone_of(vm);
            let s = |v: &str| Val::Known(v.to_string());
            ReplicaModel {
                id: Val::Known(ids::replica_id(&project, &zone, &vm.name)),
                cluster_id: Val::Known(ids::cluster_id(&project, &region, &cluster)),
                zone: s(&zone),
                name: s(&vm.name),
                instance_id: Val::Known(vm.id.to_string()),
                self_link: s(&vm.self_link),
                internal_ip: s(vm.internal_ip.as_deref().unwrap_or_default()),
                external_ip: s(vm.external_ip.as_deref().unwrap_or_default()),
                status: s(&vm.status),
                ..Default::default()
            }
        })
        .collect()
}
