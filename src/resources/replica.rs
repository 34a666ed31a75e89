//! `ha_master_replica`: one master VM in one zone, running an etcd member, an API server on its local etcd and the
//! leader-elected controllers. This file is schema and glue: placement rules live in `ha_domain::zones`.

use ha_domain::replica_drift::{MemberSeen, Repair, ReplicaSeen, VmSeen, replica_repairs};

use async_trait::async_trait;
use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};
use tfplugin::value::Type;
use tfplugin_framework::planmodifier::{requires_replace, use_state_for_unknown};
use tfplugin_framework::validator::string_check;
use tfplugin_framework::{Attribute, PlanChange, Resource, Schema, Val, timeouts_block};

use super::replica_model::{
    ReplicaModel, VM_DELETED, cluster_recovers, imported_without_ca_keys, moves_subnetwork,
};
use super::spec::ClusterSpec;
use ha_domain::roll::{Build, network_move};
use ha_domain::{ids, names, zones};

pub struct ReplicaResource {
    pub settings: crate::config::SharedSettings,
    /// Cancelled on StopProvider: creates and deletes return at once (see `super::cancel`).
    pub stop: tokio_util::sync::CancellationToken,
}

impl ReplicaResource {
    fn settings(&self) -> crate::config::Settings {
        ha_settings::current(&self.settings)
    }
}

/// The replica's schema version.
/// - 1: the leaf private keys (`api_server_private_key`, `etcd_peer_private_key`, `etcd_server_private_key`) left
///   the state; they live in the replica's secret alone (docs/guides/secrets.md).
/// - 2: the leaf certificates' PEMs (`DROPPED_IN_2`) gave way to their fingerprints, `certificate_sha256`, so that
///   plans do not print some 40 lines of PEM per replica.
/// - 3: `startup_metadata` keeps a digest of each item instead of its value (`upgrade_to_3`), so no state holds a
///   master's startup configuration, nor the keys an earlier release's master keeps in it; `keys_in_metadata`
///   says which masters still do.
pub const SCHEMA_VERSION: i64 = 3;

/// The attributes version 0 had and version 1 dropped.
const DROPPED_IN_1: [&str; 3] = [
    "api_server_private_key",
    "etcd_peer_private_key",
    "etcd_server_private_key",
];

/// The attributes version 1 had and version 2 dropped, in `replica_model::CERTIFICATE_NAMES` order.
const DROPPED_IN_2: [&str; 3] = [
    "api_server_certificate",
    "etcd_peer_certificate",
    "etcd_server_certificate",
];

/// A version-1 state in version 2's terms: the fingerprints and the first expiry of the certificates it held.
/// The expiry is what the version-1 provider computed from the same PEMs, so the plan after the upgrade is the
/// plan before it.
fn upgrade_to_2(state: &mut serde_json::Map<String, serde_json::Value>) {
    let pems = DROPPED_IN_2.map(|name| match state.remove(name) {
        Some(serde_json::Value::String(pem)) => pem,
        _ => String::new(),
    });
    let (fingerprints, first_expiry) =
        super::replica_model::certificate_facts(pems.each_ref().map(String::as_str));
    state.insert("certificate_sha256".into(), serde_json::json!(fingerprints));
    if state
        .get("certificates_expire_at")
        .is_none_or(serde_json::Value::is_null)
    {
        state.insert(
            "certificates_expire_at".into(),
            serde_json::json!(first_expiry),
        );
    }
}

/// A version-2 state in version 3's terms: each `startup_metadata` item as its digest, which is what refresh
/// compares the VM's items with from now on (so the plan after the upgrade is the plan before it), and whether the
/// items held a private key (a master an earlier release made, `domain::key_placement`).
fn upgrade_to_3(state: &mut serde_json::Map<String, serde_json::Value>) {
    let Some(serde_json::Value::Object(items)) = state.get("startup_metadata") else {
        state.insert("keys_in_metadata".into(), serde_json::Value::Null);
        return;
    };
    let items: std::collections::BTreeMap<String, String> = items
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    let keys = ha_domain::key_placement::in_metadata(&items);
    state.insert(
        "startup_metadata".into(),
        serde_json::json!(ha_domain::metadata::digests(&items)),
    );
    state.insert("keys_in_metadata".into(), serde_json::json!(keys));
}

pub fn schema() -> Schema {
    let mut schema = Schema::new(
        "One Kubernetes master VM in one zone: an etcd member (joined as a learner and promoted once caught \
         up), an API server on its local etcd, and controller-manager, scheduler and cluster-autoscaler \
         with leader election. The second replica puts the cluster's static IP behind a load balancer; \
         removing the penultimate one gives the IP back to the last.",
    );
    schema = what_the_replica_is(schema);
    schema = what_it_observes(schema);
    schema = schema.block(timeouts_block(
        &["create", "update", "delete"],
        "create 20m, update 10m (20m for a replica that rejoins after the cluster's recovery or restore, \
         which does what a create does), delete 20m",
    ));
    schema.version = SCHEMA_VERSION;
    schema
}

/// A computed attribute that keeps its state value through plans: it changes only when the apply says so.
fn stable(a: Attribute) -> Attribute {
    a.computed().modifier(use_state_for_unknown())
}

/// What the configuration says: the replica's cluster, zone, name and labels.
fn what_the_replica_is(schema: Schema) -> Schema {
    schema
    .attribute(
        stable(Attribute::string("id"))
            .description("`<project>/<zone>/<name>`; also the import id."),
    )
    .attribute(
        Attribute::typed("cluster", ClusterSpec::input_type())
            .required()
            .sensitive()
            .description(
                "The cluster to join: `cluster = ha_master_cluster.<name>.spec`. A change to what a master \
                 is made of (machine type, image, boot disk, tags, boot-time settings) rolls the replica in \
                 place (see `master_settings`), and so does a move to another subnetwork of the cluster's \
                 network (its VM is rebuilt there with a new `internal_ip`, and etcd is told its member's \
                 new peer URL: same member, same data). A move to another VPC network is refused at plan \
                 (members on two networks cannot reach each other), and another cluster replaces it.",
            ),
    )
    .attribute(
        stable(Attribute::string("cluster_id"))
            .description("The id of the cluster this replica belongs to."),
    )
    .attribute(
        Attribute::string("zone")
            .optional_computed()
            .description(
                "The replica's zone. Defaults to the cluster's primary zone; another zone of the cluster's \
                 region needs `multizone = true` on the cluster.",
            )
            .validator(string_check("A GCE zone.", zones::check_zone))
            .modifier(requires_replace())
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::string("name")
            .optional_computed()
            .description(format!(
                "The VM's name. Defaults to `<cluster>-<three random letters>`, as kube-up names replicas. \
                 At most {} characters, so that `<name>-int` (its internal address) and `<name>-pd` (its \
                 data disk) fit GCE's 63.",
                names::MAX_REPLICA_NAME
            ))
            .validator(string_check("An RFC 1035 name.", names::check_replica_name))
            .modifier(requires_replace())
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::typed("labels", Type::map(Type::String))
            .optional()
            .description(
                "Labels for this replica's VM, added to the cluster's labels. Changed in place. GCE's rules \
                 apply, as for the cluster's `labels`; keys starting with `ha-master-` or `ha-lock-` are \
                 the provider's own and are refused.",
            )
            .validator(super::labels_validator()),
    )
}

/// What the provider reads back: the VM, its member, its certificates, drift and the build it runs.
fn what_it_observes(schema: Schema) -> Schema {
    schema
    .attribute(stable(Attribute::string("instance_id")).description("GCE's numeric id of the VM."))
    .attribute(stable(Attribute::string("self_link")).description("The VM's URL."))
    .attribute(stable(Attribute::string("internal_ip")).description(
        "The VM's internal IP; in its API server and etcd certificates.",
    ))
    .attribute(Attribute::string("external_ip").computed().description(
        "The VM's external IP: the cluster's static IP while it is the only replica, otherwise an ephemeral \
         one (never in a certificate).",
    ))
    .attribute(Attribute::bool("holds_static_ip").computed().description(
        "Whether this VM holds the cluster's static IP directly (true only for a sole replica).",
    ))
    .attribute(stable(Attribute::string("etcd_member_id")).description(
        "The etcd member id, in hex. Empty after refresh when etcd answers without this replica's member \
         (removed out of band): the plan then replaces the replica.",
    ))
    .attribute(Attribute::string("status").computed().description(
        "GCE's status of the VM as refresh found it (`RUNNING`, `TERMINATED`, …), or `DELETED` when the VM \
         is gone but its etcd data disk and member remain. Planned `RUNNING`: an apply starts a stopped or \
         crashed VM again, or creates a deleted one again on its data disk, and waits until its etcd member \
         is healthy.",
    ))
    .attribute(
        stable(Attribute::typed("certificate_sha256", Type::map(Type::String))).description(
            "The SHA-256 fingerprints of the replica's leaf certificates, by name: `api_server` (the API \
             server's serving certificate: the static IP, the internal IP, the first service IP and the \
             `kubernetes` DNS names), `etcd_peer` (mutual TLS between members) and `etcd_server` (etcd's \
             client port). Each is the SHA-256 of the certificate's DER bytes in lower-case hex, what \
             `openssl x509 -noout -fingerprint -sha256` prints without the colons. The certificates \
             themselves are on the VM under `/etc/srv/kubernetes/` (docs/master-config.md), and the API \
             server's is what a client sees at the static IP; state keeps their fingerprints so that plans \
             do not print them. Schema version 2 replaced `api_server_certificate`, \
             `etcd_peer_certificate` and `etcd_server_certificate` (PEM) with this.",
        ),
    )
    .attribute(
        stable(Attribute::string("certificates_expire_at")).description(
            "When the first of the replica's certificates expires (RFC 3339, UTC). They all come from one \
             issue, when the VM is built, and live the cluster's `certificate_validity`. Within the \
             cluster's `certificate_renew_before` of this time, plan shows a roll of the replica that \
             renews them (planned unknown here), and warns of certificates expiring within 30 days.",
        ),
    )
    .attribute(
        stable(Attribute::typed(
            "startup_metadata",
            Type::map(Type::String),
        ))
        // Digests are no secret, but a change of sensitivity is itself a change to Terraform (it plans an
        // update to rewrite the state's sensitive paths), and upgrading the provider must plan none.
        .sensitive()
        .description(
            "A digest (`sha256:` and its hex) of each item of the VM's metadata as the provider wrote it: \
             `user-data` (the startup configuration; see docs/master-config.md) and `cluster-name`. The \
             provider owns the whole set; state keeps no value. Schema version 3 replaced the values.",
        ),
    )
    .attribute(
        stable(Attribute::bool("keys_in_metadata")).description(
            "Whether the metadata the provider owns on the VM (`startup_metadata`) holds private keys: a \
             master an earlier release (or kube-up) made. Its next rebuild moves them to the replica's secret in Secret Manager, and plan \
             warns until then (docs/guides/secrets.md).",
        ),
    )
    .attribute(
        Attribute::typed("drift", Type::list(Type::String))
            .computed()
            .description(
                "What refresh found changed by hand in the VM's metadata, one sentence per item (removed, \
                 changed or added). Planned empty: an apply removes the items added and writes back those \
                 it holds a value for; a `user-data` removed or changed is repaired by rebuilding the VM, \
                 which the plan shows.",
            ),
    )
    .attribute(
        Attribute::typed("master_settings", Type::map(Type::String))
            .computed()
            .description(
                "What this replica's master is made of, from the cluster's settings: `machine_type`, \
                 `image`, `boot_disk_size_gb`, `data_disk_size_gb`, `tags` and the settings a master reads \
                 at boot (`multizone`, `etcd_quorum_read`, `api_port`, `service_cluster_ip_range`, \
                 `dns_domain`), `etcd_image` once the cluster's `etcd_version` is not the default, and \
                 `kubernetes_version` once the cluster runs another release than 1.28.15 (what masters ran \
                 before the setting), and `secrets_encryption_key` (the version's name, never the key) when \
                 the cluster has one, with `secrets_decryption_keys` during a change of key. When the cluster changes any of them, the plan shows the change here \
                 and the apply rolls this replica in place, one replica of the cluster at a time: a machine \
                 type alone is stop, `setMachineType`, start; anything else rebuilds the VM on its etcd \
                 data disk and internal IP (a larger `data_disk_size_gb` grows the disk first), so etcd \
                 restarts as the same member with its data.",
            ),
    )
}

/// What refresh recorded of a replica, as `domain::replica_drift` reads it: an empty `instance_id` is a VM gone
/// for good, the status `DELETED` one gone with its data disk, an empty `etcd_member_id` a removed member.
fn seen<'a>(prior: &'a ReplicaModel, drift: &'a [String]) -> ReplicaSeen<'a> {
    let status = prior.status.known().cloned().unwrap_or_default();
    let vm = if prior.instance_id.known().is_some_and(|id| id.is_empty()) {
        VmSeen::Gone
    } else if status == VM_DELETED {
        VmSeen::GoneWithDataDisk
    } else {
        VmSeen::Status(status)
    };
    let member_id = prior.etcd_member_id.known().map(String::as_str);
    ReplicaSeen {
        name: prior.name.known().map_or("", String::as_str),
        zone: prior.zone.known().map_or("", String::as_str),
        vm,
        member: if member_id == Some("") {
            MemberSeen::Removed
        } else {
            MemberSeen::Listed
        },
        member_id: member_id.filter(|id| !id.is_empty()),
        metadata_drift: drift,
    }
}

/// What refresh found wrong with the replica, planned as the repair `domain::replica_drift` decides, with its
/// warning: what each repair changes is planned unknown, and a replacement is marked as such.
fn plan_repairs(
    prior: &ReplicaModel,
    p: &mut ReplicaModel,
    requires_replace: &mut Vec<AttributePath>,
    diags: &mut Diagnostics,
) {
    let drift = prior.drift.known().cloned().unwrap_or_default();
    let seen = seen(prior, &drift);
    let repairs = replica_repairs(&seen);
    let replacing = repairs.iter().any(|(r, _)| *r == Repair::Replace);
    for (repair, (summary, detail)) in repairs {
        diags.warning(summary, detail);
        match repair {
            Repair::Replace if seen.vm == VmSeen::Gone => {
                p.instance_id = Val::Unknown;
                requires_replace.push(AttributePath::attr("instance_id"));
            }
            Repair::Replace => {
                p.etcd_member_id = Val::Unknown;
                requires_replace.push(AttributePath::attr("etcd_member_id"));
            }
            Repair::Rebuild => {
                p.external_ip = Val::Unknown;
                p.holds_static_ip = Val::Unknown;
                plan_rebuild(p);
            }
            // A VM that starts again may get another ephemeral IP.
            Repair::Start => {
                p.external_ip = Val::Unknown;
                p.holds_static_ip = Val::Unknown;
            }
            // Planned `drift = []` already says it.
            Repair::RestoreMetadata => {}
        }
    }
    if !replacing && prior.status.known().is_some_and(|s| !s.is_empty()) {
        p.status = Val::Known("RUNNING".into());
    }
}

/// The cluster recovers etcd in this apply. A replica whose VM is gone rejoins as a new member once it has, in
/// place: a replacement would delete it first, and Terraform runs a dependent's delete before its cluster's
/// update, when etcd still has no quorum to remove a member. The survivor's VM is created again by the recovery,
/// so its instance and certificates are planned unknown; any other replica keeps its member.
fn plan_recovery(prior: &ReplicaModel, p: &mut ReplicaModel, diags: &mut Diagnostics) {
    let name = prior.name.known().cloned().unwrap_or_default();
    let gone = prior.instance_id.known().is_some_and(|id| id.is_empty())
        || prior.status.known().is_some_and(|s| s == VM_DELETED);
    p.external_ip = Val::Unknown;
    p.holds_static_ip = Val::Unknown;
    plan_rebuild(p);
    let restoring = p
        .cluster
        .known()
        .is_some_and(|c| c.snapshot_choice().is_some());
    let starting_empty = p.cluster.known().is_some_and(|c| c.starts_empty());
    if restoring || starting_empty {
        // A restore (or an empty start) is for a cluster with nothing left: a VM or data disk that survives keeps
        // its data instead.
        let disk_kept = prior.status.known().is_some_and(|s| s == VM_DELETED);
        let member_recorded = prior
            .etcd_member_id
            .known()
            .is_some_and(|id| !id.is_empty());
        // A VM refresh found although the state records no instance.
        let vm_unrecorded =
            gone && !disk_kept && prior.status.known().is_some_and(|s| !s.is_empty());
        if restoring
            && ha_domain::restore::left_by_failed_attempt(vm_unrecorded, disk_kept, member_recorded)
        {
            let (summary, detail) = ha_domain::restore::failed_attempt_note(&name);
            diags.warning(summary, detail);
        } else if disk_kept {
            let (summary, detail) = ha_domain::restore::disk_survives(&name);
            diags.push(Diagnostic::error(summary, detail).at(AttributePath::attr("cluster")));
        } else if gone && restoring {
            let (summary, detail) = ha_domain::restore::replica_note(&name);
            diags.warning(summary, detail);
        } else if gone {
            diags.warning(
                format!("Replica {name} comes back in a new, empty etcd"),
                format!(
                    "The VM and data disk of {name} are gone, and the cluster starts a new, empty etcd \
                     (`restore.source = \"empty\"`). {name} is created again in its zone on a new data \
                     disk: if it is the first replica to apply, it founds the new cluster; otherwise it \
                     joins it as a new member."
                ),
            );
        }
        // A replica whose VM still exists makes the cluster's plan refuse the restore.
        if gone {
            p.etcd_member_id = Val::Unknown;
            p.self_link = Val::Unknown;
            p.internal_ip = Val::Unknown;
            p.status = Val::Unknown;
        }
        return;
    }
    if gone {
        diags.warning(
            format!("Replica {name} rejoins etcd as a new member after the recovery"),
            format!(
                "The VM of {name} is gone, and the cluster's recovery drops its etcd member. Once the \
                 cluster has recovered, {name} joins again in its zone as a new member (a learner first, \
                 promoted once caught up), on a new data disk: what it held is on the survivor."
            ),
        );
        p.etcd_member_id = Val::Unknown;
        p.self_link = Val::Unknown;
        p.internal_ip = Val::Unknown;
        p.status = Val::Unknown;
    } else {
        p.status = Val::Known("RUNNING".into());
    }
}

/// A replica whose `master_settings` change is rolled in place. What the roll changes is planned unknown: the
/// VM's ephemeral IP (it restarts), and for a rebuild its instance id, startup metadata and certificates (issued
/// anew from the same CAs, for settings they name such as the service range).
fn plan_roll(prior: &ReplicaModel, p: &mut ReplicaModel) {
    if moves_subnetwork(prior, p) {
        // Rebuilt in the new subnetwork: a new internal IP, and certificates that name it.
        p.internal_ip = Val::Unknown;
        p.external_ip = Val::Unknown;
        p.holds_static_ip = Val::Unknown;
        plan_rebuild(p);
        return;
    }
    let (Some(old), Some(new)) = (prior.master_settings.known(), p.master_settings.known()) else {
        return;
    };
    if old == new {
        return;
    }
    p.external_ip = Val::Unknown;
    p.holds_static_ip = Val::Unknown;
    let changes = Build::from_shown(new).changes_from(&Build::from_shown(old));
    if changes.iter().any(|c| c != "machine_type") {
        plan_rebuild(p);
    }
}

/// A VM created again on its data disk: a new instance, startup metadata and certificates (issued anew from the
/// same CAs, for settings they name such as the service range).
fn plan_rebuild(p: &mut ReplicaModel) {
    p.instance_id = Val::Unknown;
    p.startup_metadata = Val::Unknown;
    // This release's masters fetch their keys from Secret Manager.
    p.keys_in_metadata = Val::Known(false);
    p.certificates_expire_at = Val::Unknown;
    p.certificate_sha256 = Val::Unknown;
}

/// When the first of the replica's certificates expires, as `m` records it (Unix seconds).
fn expiry_unix(m: &ReplicaModel) -> Option<i64> {
    ha_domain::certificates::parse_rfc3339(m.certificates_expire_at.known()?)
}

pub(super) use ha_domain::certificates::rfc3339;

/// Certificates within the cluster's renewal window: the replica is rolled, and the rebuild issues new ones from
/// the same CAs (`domain::certificates`). Within 30 days but outside the window, a warning. `now` is injected.
fn plan_certificates(
    prior: &ReplicaModel,
    p: &mut ReplicaModel,
    now: i64,
    diags: &mut Diagnostics,
) -> bool {
    use ha_domain::certificates::{DEFAULT_RENEW_BEFORE, Outlook, expiry_warning, outlook};
    let (Some(expires), Some(cluster)) = (expiry_unix(prior), p.cluster.known()) else {
        return false;
    };
    let renew_before = cluster
        .certificate_renew_before
        .known()
        .map_or(DEFAULT_RENEW_BEFORE, String::as_str);
    let Ok(renew_before) = tfplugin_framework::validator::parse_duration_within(
        renew_before,
        ha_domain::certificates::MAX_LIFETIME,
    ) else {
        return false;
    };
    let ca_expires_at = ha_pki::cas_expire_at(
        [
            &cluster.ca_certificate,
            &cluster.etcd_peer_ca_certificate,
            &cluster.etcd_client_ca_certificate,
        ]
        .into_iter()
        .map(|c| c.known().map_or("", String::as_str)),
    );
    match outlook(expires, now, renew_before, ca_expires_at) {
        Outlook::Fine => false,
        Outlook::ExpiresWithCa => {
            let cluster_name = cluster.name.known().cloned().unwrap_or_default();
            let (summary, detail) = ha_domain::certificates::ca_expiry_warning(
                &format!("cluster {cluster_name}"),
                &rfc3339(ca_expires_at.unwrap_or(expires)),
            );
            diags.warning(summary, detail);
            false
        }
        Outlook::ExpiresSoon => {
            let name = prior.name.known().cloned().unwrap_or_default();
            let (summary, detail) = expiry_warning(&name, &rfc3339(expires), renew_before);
            diags.warning(summary, detail);
            false
        }
        Outlook::Renew => {
            p.external_ip = Val::Unknown;
            p.holds_static_ip = Val::Unknown;
            plan_rebuild(p);
            true
        }
    }
}

/// A VM an earlier release made keeps its keys in metadata until it is rebuilt (`domain::key_placement`).
fn warn_of_keys_in_metadata(prior: &ReplicaModel, p: &ReplicaModel, diags: &mut Diagnostics) {
    if prior.keys_in_metadata.known() == Some(&true) {
        let name = prior.name.known().cloned().unwrap_or_default();
        let (summary, detail) =
            ha_domain::key_placement::warning(&name, p.startup_metadata.is_unknown());
        diags.warning(summary, detail);
    }
}

/// A new replica needs certificates signed by the cluster's CAs. An imported cluster has no CA keys (masters
/// never hold them, so import cannot recover them): say so at plan instead of failing half-way through a join.
fn check_can_sign(r: &ReplicaModel, diags: &mut Diagnostics) {
    if let Some(name) = imported_without_ca_keys(r) {
        diags.attr_error(
            AttributePath::attr("cluster"),
            format!("Cluster {name} was imported without its CA private keys"),
            "A new replica needs certificates signed by the cluster's CAs, whose private keys lived only in \
             the state the cluster was created with (masters never hold them), so import could not recover \
             them. The imported replicas keep running and can be refreshed, repaired and removed. To add \
             one, restore the state that holds the keys, or create a new cluster and move the workload.",
        );
    }
}

/// Placement checks on whatever is known; unknown parts are checked again at apply.
fn check_placement(r: &ReplicaModel, diags: &mut Diagnostics) {
    let Some(cluster) = r.cluster.known() else {
        return;
    };
    let (Some(zone), Some(region), Some(cluster_zone)) =
        (r.zone.known(), cluster.region.known(), cluster.zone.known())
    else {
        return;
    };
    let Some(&multizone) = cluster.multizone.known() else {
        return;
    };
    if let Err((summary, detail)) = zones::check_replica_zone(zone, region, cluster_zone, multizone)
    {
        diags.attr_error(AttributePath::attr("zone"), summary, detail);
    }
}

fn replica_name(m: &ReplicaModel) -> String {
    m.name.known().cloned().unwrap_or_default()
}

fn replica_zone(m: &ReplicaModel) -> String {
    m.zone.known().cloned().unwrap_or_default()
}

/// An apply with a stand-in for the cluster's spec (`ClusterSpec::stand_in`) is refused before anything is
/// touched: it has no settings to make a master of, nor keys to sign one with.
fn refuse_stand_in(planned: &ReplicaModel, diags: &mut Diagnostics) -> bool {
    let Some(cluster) = planned.cluster.known().filter(|c| c.stand_in()) else {
        return false;
    };
    let (summary, detail) = cluster.stand_in_words();
    diags.push(Diagnostic::error(summary, detail).at(AttributePath::attr("cluster")));
    true
}

#[async_trait]
impl Resource for ReplicaResource {
    type Model = ReplicaModel;

    fn type_name(&self) -> &'static str {
        "ha_master_replica"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn upgrade_state(
        &self,
        version: i64,
        mut state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        match version {
            0 => {
                for name in DROPPED_IN_1 {
                    state.remove(name);
                }
                Ok(state)
            }
            1 => {
                upgrade_to_2(&mut state);
                Ok(state)
            }
            2 => {
                upgrade_to_3(&mut state);
                Ok(state)
            }
            _ => Err(format!("ha_master_replica has no schema version {version}")),
        }
    }

    fn validate(&self, r: &ReplicaModel, diags: &mut Diagnostics) {
        check_placement(r, diags);
    }

    async fn modify_plan(&self, change: PlanChange<'_, ReplicaModel>, diags: &mut Diagnostics) {
        let p = change.planned;
        // The framework's replacement paths (a changed name or zone); what the repairs below add is a
        // replacement refresh called for, which has its own guard.
        let framework_paths = change.requires_replace.len();
        // Replaced by the configuration (another name, zone or cluster), not by a repair: its destroy half leaves.
        let mut moved = framework_paths > 0;
        // The declared state has no drift: a create starts without it, and an update writes the metadata back.
        p.drift = Val::Known(Vec::new());
        if let Some(cluster) = p.cluster.known().filter(|c| c.stand_in()) {
            let (summary, detail) = cluster.stand_in_words();
            diags.push(Diagnostic::warning(summary, detail).at(AttributePath::attr("cluster")));
        }
        if let Some(cluster) = p.cluster.known().cloned() {
            p.cluster_id = cluster.id.clone();
            if p.zone.is_unknown() && change.config.zone.is_null() {
                p.zone = cluster.zone.clone();
            }
            if let Some(old) = change.prior.and_then(|m| m.cluster.known())
                && cluster.changes_identity(old)
            {
                // Another cluster is another replica. The same cluster on another network is refused: replacing
                // every replica for it would lose etcd's data with the last one.
                if let (true, Some(name), Some(from), Some(to)) = (
                    cluster.id == old.id,
                    p.name.known(),
                    old.network.known(),
                    cluster.network.known(),
                ) && let Some((summary, detail)) = network_move(name, from, to)
                {
                    diags.push(
                        Diagnostic::error(summary, detail).at(AttributePath::attr("cluster")),
                    );
                }
                change.requires_replace.push(AttributePath::attr("cluster"));
                moved = true;
            }
            p.master_settings = match cluster.build() {
                // Just imported: the VM's build is recorded at its first update, not announced as a change.
                _ if change.prior.is_some_and(|m| m.master_settings.is_null()) => Val::Null,
                Some(build) => Val::Known(build.shown()),
                None => Val::Unknown,
            };
        }
        let recovering = change.prior.is_some_and(|prior| cluster_recovers(prior, p));
        if let Some(prior) = change.prior
            && recovering
        {
            plan_recovery(prior, p, diags);
        } else if let Some(prior) = change.prior {
            plan_repairs(prior, p, change.requires_replace, diags);
            if change.requires_replace.len() > framework_paths {
                super::replica_guard::check_replace(&self.settings(), prior, diags).await;
            }
            if moved {
                super::replica_guard::check_moved(&self.settings(), prior, p, diags).await;
            }
            if change.requires_replace.len() == framework_paths {
                plan_roll(prior, p);
                let now = time::OffsetDateTime::now_utc().unix_timestamp();
                let renewing = plan_certificates(prior, p, now, diags);
                warn_of_keys_in_metadata(prior, p, diags);
                super::replica_guard::check_roll(&self.settings(), prior, p, renewing, diags).await;
            }
        }
        if let (Some(cluster), Some(zone), Some(name)) =
            (p.cluster.known(), p.zone.known(), p.name.known())
            && let Some(project) = cluster.project.known()
        {
            p.id = Val::Known(ids::replica_id(project, zone, name));
        }
        check_placement(p, diags);
        if change.prior.is_none_or(|m| m.zone != p.zone)
            && let (Some(cluster), Some(zone)) = (p.cluster.known(), p.zone.known())
            && let (Some(project), Some(region)) = (cluster.project.known(), cluster.region.known())
        {
            super::placement::check(&self.settings(), project, region, Some(zone), "zone", diags)
                .await;
        }
        let machine_type = |m: &ReplicaModel| m.cluster.known().map(|c| c.machine_type.clone());
        let retyped = change
            .prior
            .is_none_or(|m| m.zone != p.zone || machine_type(m) != machine_type(p));
        if retyped
            && let (Some(cluster), Some(zone)) = (p.cluster.known(), p.zone.known())
            && let (Some(project), Some(machine_type)) =
                (cluster.project.known(), cluster.machine_type.known())
        {
            let at = AttributePath::attr("cluster");
            super::placement::check_machine_type(
                &self.settings(),
                project,
                zone,
                machine_type,
                at,
                diags,
            )
            .await;
        }
        if change.prior.is_none() {
            // This release's masters fetch their keys from Secret Manager.
            p.keys_in_metadata = Val::Known(false);
            check_can_sign(p, diags);
            super::replica_guard::check_create(&self.settings(), p, diags).await;
        }
    }

    async fn plan_destroy(&self, prior: &ReplicaModel, diags: &mut Diagnostics) {
        super::replica_guard::check_destroy(&self.settings(), prior, diags).await;
    }

    async fn create(&self, planned: ReplicaModel, diags: &mut Diagnostics) -> Option<ReplicaModel> {
        let what = || format!("the create of a replica in {}", replica_zone(&planned));
        if refuse_stand_in(&planned, diags)
            || super::read_only::refused(&self.settings(), what, diags)
        {
            return None;
        }
        super::replica_apply::create(&self.settings(), &self.stop, planned, diags).await
    }

    async fn read(&self, state: ReplicaModel, diags: &mut Diagnostics) -> Option<ReplicaModel> {
        super::replica_apply::read(&self.settings(), state, diags).await
    }

    async fn update(
        &self,
        prior: ReplicaModel,
        planned: ReplicaModel,
        diags: &mut Diagnostics,
    ) -> Option<ReplicaModel> {
        let what = || format!("the update of replica {}", replica_name(&prior));
        if refuse_stand_in(&planned, diags)
            || super::read_only::refused(&self.settings(), what, diags)
        {
            return Some(prior);
        }
        super::replica_apply::update(&self.settings(), &self.stop, prior, planned, diags).await
    }

    async fn delete(&self, prior: ReplicaModel, diags: &mut Diagnostics) {
        let what = || format!("the destroy of replica {}", replica_name(&prior));
        if super::read_only::refused(&self.settings(), what, diags) {
            return;
        }
        super::replica_apply::delete(&self.settings(), &self.stop, prior, diags).await
    }

    fn identity_schema(&self) -> Option<&'static [(&'static str, &'static str)]> {
        Some(&[
            ("project", "The project."),
            ("zone", "The VM's zone."),
            ("name", "The VM's name."),
        ])
    }

    /// The parts of the id, `<project>/<zone>/<name>`, which is known once the object is planned or imported.
    fn identity(&self, m: &ReplicaModel) -> Option<Vec<String>> {
        let (a, b, c) = ids::parse3(m.id.known()?, "").ok()?;
        Some(vec![a.to_string(), b.to_string(), c.to_string()])
    }

    fn list_config_schema(&self) -> Option<Schema> {
        Some(super::import::replica_list_schema())
    }

    async fn list(
        &self,
        config: &tfplugin::value::Value,
        diags: &mut Diagnostics,
    ) -> Vec<ReplicaModel> {
        super::import::list_replicas(&self.settings(), config, diags).await
    }

    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<ReplicaModel> {
        super::import::replica(&self.settings(), id, diags).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin::value::Value;

    /// A replica in state whose VM exists and runs, with member `abc`.
    fn prior() -> ReplicaModel {
        let Type::Object { attrs, .. } = schema().value_type() else {
            panic!("a resource type is an object")
        };
        let v = Value::Object(attrs.keys().map(|k| (k.clone(), Value::Null)).collect());
        let mut m: ReplicaModel = tfplugin_framework::model::from_value(&v).unwrap();
        m.name = Val::Known("walk-abc".into());
        m.zone = Val::Known("europe-west1-c".into());
        m.instance_id = Val::Known("42".into());
        m.etcd_member_id = Val::Known("abc".into());
        m.status = Val::Known("RUNNING".into());
        m.external_ip = Val::Known("10.0.0.9".into());
        m.holds_static_ip = Val::Known(false);
        m
    }

    fn plan(prior: &ReplicaModel) -> (ReplicaModel, Vec<AttributePath>, Diagnostics) {
        let mut p = prior.clone();
        let mut replace = Vec::new();
        let mut diags = Diagnostics::new();
        plan_repairs(prior, &mut p, &mut replace, &mut diags);
        (p, replace, diags)
    }

    /// A state an older schema wrote reads as the same replica: fingerprints of the PEMs it held, the expiry it
    /// had, and no PEM left. From version 0 the private keys go too, on the way through version 1.
    #[test]
    fn older_states_keep_their_certificates_as_fingerprints() {
        let cas = ha_pki::ClusterCas::generate("prod").unwrap();
        let req = ha_pki::ReplicaCertRequest {
            name: "prod-master-b".into(),
            internal_ip: "10.128.0.7".parse().unwrap(),
            static_ip: "34.1.2.3".parse().unwrap(),
            first_service_ip: "10.0.0.1".parse().unwrap(),
            dns_domain: "cluster.local".into(),
            validity: time::Duration::days(30),
        };
        let certs = ha_pki::issue_replica_certs(&cas, &req).unwrap();
        let pems =
            [&certs.api_server, &certs.etcd_peer, &certs.etcd_server].map(|c| c.cert_pem.clone());
        let expires = pems
            .iter()
            .map(|p| ha_pki::not_after_unix(p).unwrap())
            .min()
            .unwrap();
        for (version, expiry_in_state) in [(0, false), (1, true), (1, false)] {
            let mut old = serde_json::Map::new();
            old.insert("name".into(), "prod-master-b".into());
            for (name, pem) in DROPPED_IN_2.iter().zip(&pems) {
                old.insert(name.to_string(), pem.clone().into());
            }
            for name in DROPPED_IN_1.iter().filter(|_| version == 0) {
                old.insert(name.to_string(), "-----BEGIN PRIVATE KEY-----".into());
            }
            let recorded = if expiry_in_state {
                rfc3339(expires).into()
            } else {
                serde_json::Value::Null
            };
            old.insert("certificates_expire_at".into(), recorded);
            // As the framework does: one version at a time, up to the current one.
            let resource = ReplicaResource {
                settings: Default::default(),
                stop: Default::default(),
            };
            let new = (version..SCHEMA_VERSION).fold(old, |state, from| {
                resource.upgrade_state(from, state).unwrap()
            });
            let at = format!("version {version}, expiry in state: {expiry_in_state}");
            for gone in DROPPED_IN_1.iter().chain(&DROPPED_IN_2) {
                assert!(!new.contains_key(*gone), "{at}: {gone} stays");
            }
            assert_eq!(
                new["certificates_expire_at"],
                serde_json::json!(rfc3339(expires)),
                "{at}"
            );
            for (name, pem) in super::super::replica_model::CERTIFICATE_NAMES
                .iter()
                .zip(&pems)
            {
                assert_eq!(
                    new["certificate_sha256"][name],
                    serde_json::json!(ha_pki::sha256_fingerprint(pem).unwrap()),
                    "{at}: {name}"
                );
            }
            assert_eq!(new["name"], "prod-master-b", "{at}");
        }
        let err = ReplicaResource {
            settings: Default::default(),
            stop: Default::default(),
        }
        .upgrade_state(SCHEMA_VERSION, serde_json::Map::new())
        .unwrap_err();
        assert!(err.contains("no schema version 3"), "{err}");
    }

    /// Version 2 kept the metadata's values, a legacy master's private keys among them; version 3 keeps their
    /// digests, which refresh then finds equal to the VM's items, and whether they held a key.
    #[test]
    fn version_2_metadata_becomes_digests_and_says_where_the_keys_are() {
        let resource = ReplicaResource {
            settings: Default::default(),
            stop: Default::default(),
        };
        let legacy = "#cloud-config\n-----BEGIN EC PRIVATE KEY-----\nMHc\n";
        for (user_data, keys) in [("#cloud-config\nruncmd: []\n", false), (legacy, true)] {
            let items = std::collections::BTreeMap::from([
                ("cluster-name".to_string(), "prod".to_string()),
                ("user-data".to_string(), user_data.to_string()),
            ]);
            let mut old = serde_json::Map::new();
            old.insert("startup_metadata".into(), serde_json::json!(items));
            let new = resource.upgrade_state(2, old).unwrap();
            let text = serde_json::Value::Object(new.clone()).to_string();
            assert!(
                !text.contains("cloud-config") && !text.contains("PRIVATE KEY"),
                "{text}"
            );
            assert_eq!(new["keys_in_metadata"], serde_json::json!(keys));
            let carries: Vec<(String, String)> = items.into_iter().collect();
            let wrote: std::collections::BTreeMap<String, String> =
                serde_json::from_value(new["startup_metadata"].clone()).unwrap();
            assert!(
                ha_domain::metadata::metadata_drift(&wrote, &carries).is_empty(),
                "{text}"
            );
        }
        // A state that kept none stays so; refresh takes the VM's items as the baseline.
        let new = resource.upgrade_state(2, serde_json::Map::new()).unwrap();
        assert!(new["keys_in_metadata"].is_null() && !new.contains_key("startup_metadata"));
    }

    #[test]
    fn a_running_replica_in_its_member_plans_nothing() {
        let (p, replace, diags) = plan(&prior());
        assert!(replace.is_empty() && diags.is_empty());
        assert_eq!(p.status, Val::Known("RUNNING".into()));
        assert_eq!(p.external_ip, Val::Known("10.0.0.9".into()));
    }

    #[test]
    fn a_removed_member_replaces_the_replica() {
        let mut s = prior();
        s.etcd_member_id = Val::Known(String::new());
        let (p, replace, diags) = plan(&s);
        assert_eq!(replace, vec![AttributePath::attr("etcd_member_id")]);
        assert!(p.etcd_member_id.is_unknown());
        let d = diags.iter().next().unwrap();
        assert!(
            d.summary.contains("walk-abc was removed out of band"),
            "{d:?}"
        );
        assert!(
            d.detail.contains("cannot rejoin with its old data"),
            "{d:?}"
        );
    }

    #[test]
    fn a_stopped_vm_is_started_in_place_and_the_warning_names_the_remedy() {
        let mut s = prior();
        s.status = Val::Known("TERMINATED".into());
        let (p, replace, diags) = plan(&s);
        assert!(replace.is_empty(), "a restart is in place");
        assert_eq!(p.status, Val::Known("RUNNING".into()));
        assert!(p.external_ip.is_unknown() && p.holds_static_ip.is_unknown());
        let d = diags.iter().next().unwrap();
        assert!(
            d.summary.contains(
                "walk-abc is TERMINATED, and its etcd member walk-abc (id abc) is unhealthy"
            ),
            "{d:?}"
        );
        assert!(
            d.detail.contains("-replace='<address>'")
                && d.detail.contains("named walk-abc in europe-west1-c"),
            "{d:?}"
        );
    }

    #[test]
    fn a_vanished_vm_is_replaced_once_whatever_else_is_wrong() {
        let mut s = prior();
        s.instance_id = Val::Known(String::new());
        s.etcd_member_id = Val::Known(String::new());
        s.status = Val::Known(String::new());
        let (p, replace, diags) = plan(&s);
        assert_eq!(replace, vec![AttributePath::attr("instance_id")]);
        assert!(p.instance_id.is_unknown());
        let all: Vec<_> = diags.iter().collect();
        assert_eq!(all.len(), 1, "{all:?}");
        assert!(
            all[0]
                .summary
                .contains("The VM of replica walk-abc is gone"),
            "{all:?}"
        );
    }

    #[test]
    fn a_vm_gone_with_its_data_disk_is_rebuilt_in_place() {
        let mut s = prior();
        s.status = Val::Known(VM_DELETED.into());
        let (p, replace, diags) = plan(&s);
        assert!(replace.is_empty(), "a rebuild is in place");
        assert_eq!(p.status, Val::Known("RUNNING".into()));
        assert!(p.instance_id.is_unknown() && p.certificate_sha256.is_unknown());
        let d = diags.iter().next().unwrap();
        assert!(d.summary.contains("its etcd data disk is not"), "{d:?}");
    }
}
