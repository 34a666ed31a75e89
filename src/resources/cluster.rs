//! `ha_master_cluster`: what replicas share — the static external IP, firewall rules, the CAs, and the settings
//! every replica inherits (exported as `spec`). This file is schema and glue: decisions live in `ha_domain`.

use async_trait::async_trait;
use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};
use tfplugin::value::{Type, Value};
use tfplugin_framework::model::TfType;
use tfplugin_framework::planmodifier::{requires_replace, use_state_for_unknown};
use tfplugin_framework::validator::string_check;
use tfplugin_framework::{
    Attribute, PlanChange, Resource, Schema, SingleBlock, Val, timeouts_block,
};

use super::cluster_model::{
    ClusterModel, PrivateKeys, key_store, keys_to_secret, recovery_planned, restore_generation,
    spec_of,
};
use super::spec::ClusterSpec;
use crate::config::SharedSettings;
use ha_domain::exposure::{Exposure, exposure_warnings};
use ha_domain::roll::data_disk_shrink;
use ha_domain::{ids, machine_type, names, network, zones};
use ha_ops::plan_check;

pub struct ClusterResource {
    pub settings: SharedSettings,
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

fn n(v: i64) -> Value {
    Value::Number(v.into())
}

pub fn schema() -> Schema {
    let schema = Schema::new(
        "A highly-available Kubernetes control plane's shared parts on Google Compute Engine: the static \
         external IP that kubelets and users talk to, firewall rules, the API server and etcd CAs, and the \
         settings every `ha_master_replica` inherits. Replicas join it with `cluster = \
         ha_master_cluster.<name>.spec`.",
    );
    let schema = where_and_what(schema);
    let schema = machines(schema);
    let schema = network_and_access(schema);
    let schema = certificates_and_keys(schema);
    let schema = secrets_encryption(schema);
    let schema = versions_and_lifetimes(schema);
    let schema = master_identity(schema);
    let schema = restore_block(schema);
    let schema = backup_attributes(schema);
    schema.block(timeouts_block(
        &["create", "update", "delete"],
        "create 10m, update 10m, delete 10m",
    ))
}

/// Identity and placement: the cluster's id and name, where it runs, and how etcd is read.
fn where_and_what(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("id")
            .computed()
            .description("`<project>/<region>/<name>`; also the import id.")
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::string("name")
            .required()
            .description(
                "The cluster's name. GCE objects are named after it (`<name>-ip`, `<name>-etcd`, …), so it \
                 follows GCE's naming rules and is at most 51 characters.",
            )
            .validator(string_check("An RFC 1035 name.", names::check_cluster_name))
            .modifier(requires_replace()),
    )
    .attribute(
        Attribute::string("project")
            .optional_computed()
            .description("The project. Defaults to the provider's `project`.")
            .modifier(requires_replace())
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::string("region")
            .optional_computed()
            .description(
                "The region of the static IP and load balancer; every replica is in it. Defaults to the \
                 region of `zone`, else the provider's `region`.",
            )
            .validator(string_check("A GCE region.", zones::check_region))
            .modifier(requires_replace())
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::string("zone")
            .optional_computed()
            .description(
                "The primary zone: where replicas go unless `multizone` is on. Defaults to the provider's \
                 `zone`.",
            )
            .validator(string_check("A GCE zone.", zones::check_zone))
            .modifier(requires_replace())
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::bool("multizone")
            .default(Value::Bool(false))
            .description(
                "Allow replicas in any zone of the region (and set `multizone` in the masters' cloud \
                 config). With one zone, a zone outage takes the control plane down.",
            ),
    )
    .attribute(
        Attribute::bool("etcd_quorum_read")
            .default(Value::Bool(true))
            .description(
                "Make the API servers read from etcd with quorum (linearizable) reads, so a replica never \
                 serves stale data after a partition. Only `true` is accepted: kube-apiserver has always \
                 read with quorum since Kubernetes 1.13 and has no way to turn it off, so `false` is \
                 refused at validate rather than silently ignored. The attribute stays so the setting of \
                 kube-up's `ENABLE_ETCD_QUORUM_READ` has a visible home and a clear answer.",
            ),
    )
}

/// What each master VM is made of: machine type, image, disks.
fn machines(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("machine_type")
            .default(s("e2-standard-2"))
            .description(
                "Machine type of every replica. A predefined type is checked at plan against each replica's \
                 zone (a zone that does not offer it is refused before any master is created or stopped); a \
                 custom type (`n2-custom-4-16384`) is not.",
            )
            .validator(string_check(
                "A GCE machine type.",
                machine_type::check_machine_type,
            )),
    )
    .attribute(
        Attribute::string("image")
            .optional_computed()
            .description(format!(
                "Boot image of every replica (an image or image family URL); plan refuses one Compute Engine \
                 does not have. It must run the master startup \
                 contract (docs/master-config.md): cloud-init, plus containerd and the kubelet of \
                 `kubernetes_version`, which the masters install at first boot from the distribution and \
                 pkgs.k8s.io where the image has apt and lacks them. Unset, a new cluster runs `{}` and an \
                 existing one keeps its image (a cluster made before this default ran `{}`, which has no \
                 apt and no kubelet: set an image that runs the contract, which rolls the replicas one at a \
                 time).",
                ha_domain::image::DEFAULT_FOR_NEW,
                ha_domain::image::LEGACY
            )),
    )
    .attribute(
        Attribute::number("boot_disk_size_gb")
            .default(n(20))
            .description("Boot disk size of every replica, in GB."),
    )
    .attribute(
        Attribute::number("data_disk_size_gb")
            .default(n(20))
            .description(
                "Size of each replica's etcd data disk (`<replica>-pd`), in GB. Growing it rolls the \
                 replicas one at a time: each disk grows while its VM is rebuilt on it, and the new VM \
                 grows the filesystem. GCE never shrinks a disk, so a smaller value is refused at plan.",
            ),
    )
    .attribute(
        Attribute::string("data_disk_type")
            .default(s(ha_domain::master_spec::DEFAULT_DATA_DISK_TYPE))
            .description(
                "Type of each replica's etcd data disk: `pd-ssd` (as kops uses for etcd: etcd is sensitive \
                 to disk latency), `pd-balanced` or `pd-standard`. A replica keeps the disk it was created \
                 with; the type applies to replicas created later.",
            )
            .validator(string_check(
                "A persistent disk type.",
                network::check_disk_type,
            )),
    )
}

/// The network the masters sit in and who may reach them: firewalls, labels, the API's address.
fn network_and_access(schema: Schema) -> Schema {
    let cidrs = || string_check("Each entry is a CIDR range.", network::check_cidr);
    schema
    .attribute(
        Attribute::string("network")
            .default(s("default"))
            .description(
                "The VPC network of the masters and firewall rules. On the `default` network GCE's \
                 `default-allow-internal` rule admits the whole VPC to every port, so the masters-only etcd \
                 peer rule restricts nothing there: plan warns. See docs/guides/network.md. Changing it on \
                 a cluster that has replicas is refused at plan: a master's internal IP, and so its etcd \
                 member, cannot move in place.",
            )
            .modifier(requires_replace()),
    )
    .attribute(Attribute::string("subnetwork").optional().description(
        "The subnetwork of the masters (a name or a URL), for custom-mode networks; unset, the network's \
         own subnetwork in the region (auto mode). Changing it to another subnetwork of the same network \
         rolls the replicas one at a time: each VM is rebuilt there on its etcd data disk, its reserved \
         internal IP moves to the new subnetwork, and etcd is told its member's new peer URL, so every \
         member keeps its id and data. The subnetwork must exist (the provider never creates one).",
    ))
    .attribute(
        Attribute::typed("tags", Type::set(Type::String))
            .optional()
            .description(
                "Extra network tags for every replica. The provider adds `<name>-master`, which its \
                 firewall rules target.",
            ),
    )
    .attribute(
        Attribute::typed("labels", Type::map(Type::String))
            .optional()
            .description(format!(
                "Labels for every GCE object of the cluster. GCE's rules apply: keys are 1-63 characters \
                 starting with a lowercase letter, keys and values contain only lowercase letters, digits, \
                 `_` and `-`, and at most {} labels (GCE's 64 less room for the provider's own). Keys \
                 starting with `ha-master-` or `ha-lock-` are the provider's own (e.g. `ha-master-cluster`) \
                 and are refused.",
                ha_domain::labels::MAX_USER_LABELS
            ))
            .validator(super::labels_validator()),
    )
    .attribute(
        Attribute::typed("effective_labels", Type::map(Type::String))
            .computed()
            .description(
                "The labels the cluster's replica VMs carry (with the provider's own): the provider's \
                 `default_labels` with this cluster's `labels` over them. A change of either shows here and \
                 updates the VMs in place.",
            ),
    )
    .attribute(
        Attribute::typed("api_source_ranges", Type::list(Type::String))
            .default(Value::List(vec![s("0.0.0.0/0")]))
            .description(
                "CIDR ranges allowed to reach the API port on the static IP and on every replica's external \
                 IP. They must include where Terraform runs (the provider checks `/healthz` on the static \
                 IP after creating or deleting a replica), and your users and nodes. The default, \
                 `0.0.0.0/0`, opens the API to the whole Internet: plan warns when a create or a change \
                 sets it. See docs/guides/network.md.",
            )
            .validator(cidrs()),
    )
    .attribute(
        Attribute::typed("etcd_client_source_ranges", Type::list(Type::String))
            .required()
            .description(
                "CIDR ranges allowed to reach etcd's client port 2379 (mutual TLS) on every replica's \
                 external IP. They must include where Terraform runs, since the provider reads and changes \
                 etcd membership through it: from outside them, plan refuses to add, remove or roll a \
                 replica. Plan warns about `0.0.0.0/0`. See docs/guides/network.md.",
            )
            .validator(cidrs()),
    )
    .attribute(
        Attribute::number("api_port")
            .default(n(443))
            .description("The API server's port on the static IP."),
    )
    .attribute(
        Attribute::string("service_cluster_ip_range")
            .default(s("10.0.0.0/16"))
            .description(
                "The Kubernetes service range. Its first address is in every API server certificate.",
            )
            .validator(string_check(
                "An IPv4 CIDR range.",
                network::check_service_range,
            )),
    )
    .attribute(
        Attribute::string("dns_domain")
            .default(s("cluster.local"))
            .description(
                "The cluster's DNS domain, for the API server certificate's \
                 `kubernetes.default.svc.<domain>` name.",
            ),
    )
    .attribute(
        Attribute::string("external_ip")
            .computed()
            .description(
                "The static external IP. It never changes for the life of the cluster: it moves between the \
                 only replica and the load balancer.",
            )
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::string("endpoint")
            .computed()
            .description(
                "`https://<external_ip>[:<api_port>]`: the API endpoint for kubeconfigs.",
            )
            .modifier(use_state_for_unknown()),
    )
}

/// The CAs' certificates, the spec replicas inherit, and where the CA keys live.
fn certificates_and_keys(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("ca_certificate")
            .optional()
            .computed()
            .description(
                "PEM of the cluster CA that signs API server, kubelet and client certificates (public). Left \
                 unset, the provider makes it. Set it with `ca_private_key_wo` at create to bring a CA of \
                 your own (docs/guides/secrets.md); on a running cluster it changes only as a rotation of a \
                 brought CA ends (`next_ca_certificate`). While the CAs the provider made rotate \
                 (`ca_rotation`), the current CA then the next one: the bundle clients and nodes must trust; a \
                 brought CA's stays the current one, and the bundle is `spec`'s.",
            )
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::string("ca_private_key_wo")
            .optional()
            .sensitive()
            .write_only()
            .description(
                "Write-only (Terraform 1.11 or later): the private key of the CA in `ca_certificate`, PEM \
                 PKCS#8. Required at create with `ca_certificate`; the provider keeps it in the cluster's \
                 Secret Manager secret, never in a plan or the state. Give it again in an apply that must \
                 write that secret back or recover etcd; otherwise it may be left out.",
            ),
    )
    .attribute(
        Attribute::string("etcd_peer_ca_certificate")
            .computed()
            .description(
                "PEM of the CA for etcd peer (member to member) mutual TLS; while the CAs rotate, the current \
                 CA then the next one.",
            )
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::string("etcd_client_ca_certificate")
            .computed()
            .description(
                "PEM of the CA for etcd client mutual TLS; while the CAs rotate, the current CA then the next \
                 one.",
            )
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::typed("spec", <ClusterSpec as TfType>::tf_type())
            .computed()
            .sensitive()
            .description(
                "Everything a replica inherits: pass it to replicas as `cluster = \
                 ha_master_cluster.<name>.spec`. It names the cluster's keys' secret and carries no private \
                 key, unless `ca_key_store` is `terraform_state`. Sensitive all the same, as it was when it \
                 carried the keys.",
            ),
    )
    .attribute(
        Attribute::string("ca_key_store")
            .optional_computed()
            .validator(string_check(
                "`secret_manager` or `terraform_state`.",
                key_store::check,
            ))
            .description(
                "Where the private keys replicas are signed with live (the three CA keys and the \
                 service-account signing key; docs/guides/secrets.md). `secret_manager` (the default for a \
                 new cluster): in the cluster's own Secret Manager secret `<name>-cluster-keys`, which no \
                 master may read, and once in this cluster's state (`private_keys`); no replica's state holds \
                 one. `terraform_state`: in `spec`, and so in every replica's `cluster` input, where clusters \
                 made by releases before the secret keep them; unset, such a cluster keeps them there, and \
                 plan warns. Set it to `secret_manager` to move them: the apply writes the secret, and every \
                 replica's plan shows its `cluster` input changing, with no roll. There is no way back. An \
                 imported cluster has no CA key anywhere (masters never hold them) and leaves this null while \
                 its spec carries the service-account key import read from a master, and plan warns; \
                 `secret_manager` moves that key the same way.",
            ),
    )
    .attribute(
        Attribute::typed("private_keys", <PrivateKeys as TfType>::tf_type())
            .computed()
            .sensitive()
            .description(
                "The cluster's private keys, when `ca_key_store` is `secret_manager`: the copy its refresh \
                 compares the keys' secret with, and its apply writes back when the secret is gone. Null \
                 otherwise.",
            )
            .modifier(use_state_for_unknown()),
    )
    .attribute(
        Attribute::typed("drift", Type::list(Type::String))
            .computed()
            .description(
                "What refresh found out of shape, one sentence each (empty when in shape): the firewall \
                 rules (missing, or admitting other ports, ranges or tags than the settings say), the \
                 secret of the CA keys, and the load balancer and static IP (with one replica it holds the \
                 static IP and no load balancer exists; with two or more, a forwarding rule on the static IP \
                 sends to a target pool of exactly the replica VMs). Planned empty, so a plan after drift \
                 shows an in-place update, and the apply puts it right.",
            ),
    )
}

/// The keys Kubernetes Secrets are encrypted with in etcd (`domain::secrets_encryption`).
fn secrets_encryption(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("secrets_encryption_key")
            .optional()
            .validator(string_check(
                "A Secret Manager secret version, `projects/PROJECT/secrets/SECRET/versions/N`.",
                |v| ha_domain::secrets_encryption::parse(v).map(|_| ()),
            ))
            .description(
                "Encrypts Kubernetes Secrets in etcd, and so in every snapshot the `backup` block takes: the \
                 Secret Manager secret version, `projects/PROJECT/secrets/SECRET/versions/N`, whose payload is \
                 the key (32 random bytes, or their base64: `head -c 32 /dev/urandom | gcloud secrets versions \
                 add SECRET --data-file=-`). The API servers encrypt every write with it (`secretbox`) and still \
                 read what was written plain or under `secrets_decryption_keys`. You own the secret, not the \
                 cluster: a snapshot's Secrets can be read only with the keys it was taken under, so keep each \
                 version for as long as its backups, after a `terraform destroy` too. The provider reads the key \
                 when it builds a master and hands it to that master in its own secret; it is never in Terraform \
                 state nor in instance metadata. On a running cluster it changes in stages, each a roll of every \
                 replica, and plan refuses a step past one: a key is first added to `secrets_decryption_keys`, \
                 then made this one, the old one staying in `secrets_decryption_keys` until every Secret is \
                 rewritten. Unset, Secrets are written plain. An imported cluster whose masters encrypt holds the \
                 key's name (`ha-<16 hex>`) until the configuration names the version that holds it, which plan \
                 checks. See docs/guides/secrets.md.",
            ),
    )
    .attribute(
        Attribute::typed("secrets_decryption_keys", Type::list(Type::String))
            .optional()
            .validator(string_check(
                "Secret Manager secret versions, `projects/PROJECT/secrets/SECRET/versions/N`.",
                |v| {
                    ha_domain::secrets_encryption::parse(v).map(|_| ()).map_err(|(summary, detail)| {
                        (
                            summary.replace("secrets_encryption_key", "secrets_decryption_keys"),
                            detail,
                        )
                    })
                },
            ))
            .description(
                "Secret Manager versions whose keys the API servers still read Secrets with but no longer \
                 write with: the middle stages of a change of `secrets_encryption_key` (docs/guides/secrets.md). \
                 A key to write with must be read by every API server first, and the key written with until \
                 now stays here until every Secret is rewritten (`kubectl get secrets --all-namespaces -o json \
                 | kubectl replace -f -`): plan refuses a step that skips either. Each change rolls every \
                 replica. Removing a key: the apply first looks through etcd and refuses while any Secret is \
                 still encrypted with it, naming how many. Also for a new cluster that restores a snapshot \
                 taken under an older key.",
            ),
    )
    .attribute(
        Attribute::string(ha_domain::service_account_rotation::ATTRIBUTE)
            .optional()
            .validator(string_check("\"started\" or \"switched\".", |v| {
                ha_domain::service_account_rotation::ROTATION
                    .parse(Some(v))
                    .map(|_| ())
            }))
            .description(
                "A rotation of the service-account signing key under way, in stages, each a roll of every \
                 replica: `\"started\"` makes a next key that every API server verifies tokens with while the \
                 current key still signs; `\"switched\"` signs with the next key, both still verified; removing \
                 the setting makes the next key the key and forgets the old one, whose tokens then stop \
                 verifying (kubelets refresh projected tokens within the hour; delete secret-based tokens to \
                 have them minted again). Plan refuses `\"switched\"` before `\"started\"`, and the apply \
                 refuses to change the stage until every master runs the keys of the current one. Going back \
                 (`\"switched\"` to `\"started\"`, `\"started\"` to unset) is always safe. Only for a cluster \
                 whose keys are in Secret Manager (`ca_key_store`). See docs/guides/secrets.md.",
            ),
    )
    .attribute(
        Attribute::string(ha_domain::ca_rotation::ATTRIBUTE)
            .optional()
            .validator(string_check("\"started\" or \"switched\".", |v| {
                ha_domain::ca_rotation::ROTATION.parse(Some(v)).map(|_| ())
            }))
            .description(
                "A rotation of the cluster's three CAs (the cluster CA and both etcd CAs) under way, in stages, \
                 each a roll of every replica: `\"started\"` makes next CAs that every master trusts beside the \
                 current ones, which still issue every certificate, and `ca_certificate` becomes both CAs' \
                 certificates: give it to every client and node before going on; `\"switched\"` has every master \
                 present certificates the next CAs issue (admin credentials too), both still trusted; removing \
                 the setting makes the next CAs the CAs and forgets the old ones, whose certificates (nodes' \
                 kubelet client certificates, older admin credentials) are then refused. Plan refuses \
                 `\"switched\"` before `\"started\"`, and the apply refuses to change the stage until every \
                 master runs the CAs of the current one. Going back (`\"switched\"` to `\"started\"`, \
                 `\"started\"` to unset) is always safe. For a cluster whose keys are in Secret Manager \
                 (`ca_key_store`). A cluster CA you brought rotates to a next one you bring (`next_ca_certificate`): \
                 its `ca_certificate` stays the current CA until the rotation ends, the bundle being in `spec`. \
                 See docs/guides/secrets.md.",
            ),
    )
    .attribute(
        Attribute::string("next_ca_certificate")
            .optional()
            .description(
                "For a cluster CA you brought (`ca_certificate`): the next CA a rotation (`ca_rotation`) moves \
                 to, PEM, made by the PKI that made the current one; with `next_ca_private_key_wo`. Set with \
                 `ca_rotation = \"started\"` and left as it is through `\"switched\"`; the rotation ends by \
                 removing it and `ca_rotation` together and setting `ca_certificate` to it. Going back from \
                 `\"started\"` (both removed, `ca_certificate` unchanged) drops it. The provider makes the \
                 next CAs of those it made, and refuses this for them.",
            ),
    )
    .attribute(
        Attribute::string("next_ca_private_key_wo")
            .optional()
            .sensitive()
            .write_only()
            .description(
                "Write-only (Terraform 1.11 or later): the private key of the CA in `next_ca_certificate`, PEM \
                 PKCS#8. Required in the apply that sets `ca_rotation = \"started\"`; the provider keeps it in \
                 the cluster's Secret Manager secret, never in a plan or the state, and moves it there to be the \
                 CA's key as the rotation ends. Give it again only when an apply must write that secret back.",
            ),
    )
}

/// Protection, versions and certificate lifetimes.
fn versions_and_lifetimes(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::bool("deletion_protection")
            .default(Value::Bool(true))
            .description(
                "While true (the default), destroying the cluster is refused at plan, and no apply removes \
                 the cluster's last voting etcd member (the last copy of the control plane's data), \
                 whatever the plan says: e.g. `-replace` of every replica leaves the last one and says why. \
                 Removing replicas down to one stays allowed. Set it to false and apply before destroying \
                 the cluster on purpose.",
            ),
    )
    .attribute(
        Attribute::string("kubernetes_version")
            .optional_computed()
            .description(format!(
                "The Kubernetes release every master runs (kube-apiserver, kube-controller-manager, \
                 kube-scheduler, the cluster-autoscaler and, from 1.30, Google's cloud-controller-manager): \
                 `1.<minor>.<patch>` of a minor from 1.28 to 1.36, e.g. `\"1.35.0\"`, or `1.<minor>` for \
                 the patch the provider pins. Unset, a new cluster runs `{}` and an existing one keeps what \
                 it runs (a cluster made before this setting runs `1.28.15`). Changing it rolls the \
                 replicas one at a time (see each replica's `master_settings`). Plan refuses, naming the \
                 rule, an upgrade of more than one minor (Kubernetes' version-skew policy, judged against \
                 the version each master was built with, so a roll that stopped half way is finished first) \
                 and any minor downgrade; a patch may go back. See docs/guides/upgrades.md.",
                ha_domain::kubernetes_version::DEFAULT_FOR_NEW
            ))
            .validator(string_check(
                "A supported Kubernetes version.",
                ha_domain::kubernetes_version::check,
            )),
    )
    .attribute(
        Attribute::string("certificate_validity")
            .default(s(ha_domain::certificates::DEFAULT_VALIDITY))
            .description(
                "How long the certificates a replica is built with live (API server, etcd peer and server, \
                 the components' client certificates), as a duration such as `8760h` (one year, as kubeadm) \
                 or `4m`. It applies to certificates issued from now on: when a replica joins or is rolled. \
                 Changing it rolls nothing. No certificate outlives the cluster's CAs (ten years): one issued \
                 closer to their expiry expires with them.",
            )
            .validator(tfplugin_framework::validator::duration_within(
                ha_domain::certificates::MAX_LIFETIME,
            )),
    )
    .attribute(
        Attribute::string("certificate_renew_before")
            .default(s(ha_domain::certificates::DEFAULT_RENEW_BEFORE))
            .description(
                "How long before its certificates expire a replica is renewed: once a replica's \
                 `certificates_expire_at` is this close, plan shows a roll of that replica (new leaf \
                 certificates from the same CAs, naming the same IPs; the same etcd member and data), and \
                 any roll of it renews them. The default is 30 days. Plan warns of certificates expiring \
                 within 30 days even outside this window. Must be shorter than `certificate_validity`.",
            )
            .validator(tfplugin_framework::validator::duration_within(
                ha_domain::certificates::MAX_LIFETIME,
            )),
    )
    .attribute(
        Attribute::string("etcd_version")
            .optional_computed()
            .description(
                "The etcd version every master runs: a minor, `\"3.4\"` (etcd 3.4.13, image \
                 `registry.k8s.io/etcd:3.4.13-0`) or `\"3.5\"` (etcd 3.5.24, \
                 `registry.k8s.io/etcd:3.5.24-0`), or that pinned patch; `\"3.5.1\"`, the 3.5 pin before \
                 3.5.24, stays selectable by its patch. Unset, a new cluster runs the etcd its \
                 `kubernetes_version` calls for (`\"3.5\"` for every release the provider runs: kubeadm \
                 pins 3.5 up to Kubernetes 1.33 and 3.6, which the provider does not run yet, from 1.34) \
                 and an existing one keeps what it runs (a cluster made before this setting runs \
                 `\"3.4\"`). Changing it rolls the replicas one at a time, each restarting on the new etcd \
                 with its data (see each replica's `master_settings`). An upgrade moves one minor at a time \
                 and only from a healthy cluster whose members all run the older minor; going back is \
                 allowed while etcd's cluster version is still the older minor, and refused once every \
                 member has run the newer one (etcd cannot downgrade its data). Plan reads both from etcd. \
                 See docs/guides/upgrades.md.",
            )
            .validator(string_check(
                "A supported etcd version.",
                ha_domain::etcd_version::check,
            )),
    )
}

/// Who the masters run as, and what their token may reach.
fn master_identity(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("service_account")
            .default(s(ha_domain::service_account::DEFAULT_EMAIL))
            .description(
                "The service account every master VM runs as: `default` (the project's default Compute \
                 Engine service account, as kube-up gives masters) or a service account's email. The \
                 kubelet, controller-manager and cluster autoscaler on a master use it to call Google's \
                 APIs (`--cloud-provider=gce`). Whoever runs Terraform needs `iam.serviceAccounts.actAs` on \
                 it. A change rolls the replicas one at a time (GCE sets a VM's service account only while \
                 it is stopped). The default account usually holds Editor on the project, so plan warns when \
                 a create or a change sets it; docs/guides/gce.md gives a dedicated account's roles.",
            )
            .validator(string_check(
                "`default` or a service account's email.",
                ha_domain::service_account::check_email,
            )),
    )
    .attribute(
        Attribute::typed("service_account_scopes", Type::list(Type::String))
            .default(Value::List(
                ha_domain::service_account::DEFAULT_SCOPES
                    .iter()
                    .map(|x| s(x))
                    .collect(),
            ))
            .description(
                "The OAuth scopes of the masters' service account, as URLs or gcloud's aliases \
                 (`cloud-platform`, `compute-rw`, `storage-ro`, `logging-write`, `monitoring`, ...). The \
                 default is kube-up's master scopes. A change rolls the replicas one at a time. Every master \
                 VM also gets `cloud-platform`, the one scope Secret Manager accepts, to fetch its keys at boot \
                 (docs/guides/secrets.md); what its token may do is then what IAM grants the account.",
            )
            .validator(string_check("A scope URL or a gcloud scope alias.", |x| {
                ha_domain::service_account::scope_url(x).map(|_| ())
            })),
    )
}

/// The `restore` block: recovery on purpose.
fn restore_block(schema: Schema) -> Schema {
    schema
    .block(SingleBlock {
        name: "restore",
        description: "Disaster recovery, on purpose. Raising `generation` plans one recovery of etcd after \
                      it lost quorum for good; the plan says exactly what it will do, and refuses when etcd \
                      still has quorum or can get it back without one. See docs/guides/disaster-recovery.md."
            .into(),
        attributes: vec![
            Attribute::number("generation").required().description(
                "Raise it (by one) to run a recovery; lowering it is refused. Leave it as it is afterwards: \
                 the same number never recovers again.",
            ),
            Attribute::string("source").required().description(format!(
                "Where the data comes from. `\"{}\"`: the one etcd member that still runs with its data \
                 becomes a one-member cluster (etcd's `--force-new-cluster`, no snapshot, nothing it holds \
                 is lost), and the replicas whose members were lost rejoin as new members. `\"{}\"`: for a \
                 cluster with no replica VM left, etcd is restored from a Cloud Storage snapshot \
                 (`snapshot`, or the newest in the `backup` bucket) as a new cluster; what was written \
                 after the snapshot is lost. `\"{}\"`: for a cluster with no replica VM left, start a new, \
                 empty etcd on purpose; without it, plan refuses to found an empty etcd where the cluster \
                 had data (its load balancer, a replica's state or a snapshot says so), and the snapshots \
                 are kept.",
                ha_domain::recovery::SURVIVING_MEMBER,
                ha_domain::restore::SNAPSHOT,
                ha_domain::start_empty::EMPTY
            )),
            Attribute::string("snapshot").optional().description(
                "With `source = \"snapshot\"`: the snapshot to restore, as `gs://<bucket>/<object>`. \
                 Defaults to the cluster's newest snapshot in its `backup` bucket (plan names the one it \
                 will use). The master VMs' service account needs read access to it.",
            ),
        ],
    })
}

/// `last_backup` and the `backup` block: snapshots before every change that touches etcd.
fn backup_attributes(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("last_backup")
            .computed()
            .description(
                "The newest etcd snapshot of this cluster in the `backup` bucket, as \
                 `gs://<bucket>/<object>`, read at refresh (replicas take the snapshots, so it shows after \
                 the next refresh). Null without a `backup` block or before the first backup.",
            )
            .modifier(use_state_for_unknown()),
    )
    .block(SingleBlock {
        name: "backup",
        description: "Backups of etcd to Cloud Storage, as kops' etcd-manager takes them. Before every \
                      change that touches etcd (a replica joining or leaving, a roll, a version change, a \
                      certificate renewal), the provider takes a snapshot from a healthy member (a follower \
                      when there is one), checks it (size, its SHA-256 trailer, the bbolt header, a \
                      revision that did not go back while it was taken), uploads it as \
                      `<prefix>/<cluster>/etcd-<time>-rev<revision>.db` with metadata (cluster, member, \
                      revision, etcd version, time, the change), and deletes the cluster's snapshots beyond \
                      `keep`. The plan of such a change says a backup will be taken. The provider's \
                      credentials need `roles/storage.objectAdmin` on the bucket; `storage_custom_endpoint` \
                      in the provider block points elsewhere. See docs/guides/disaster-recovery.md."
            .into(),
        attributes: vec![
            Attribute::string("bucket")
                .required()
                .description(
                    "The Cloud Storage bucket's name (no `gs://`). The provider does not create it: give it \
                     versioning or a retention policy as your backups need.",
                )
                .validator(string_check(
                    "A Cloud Storage bucket name.",
                    ha_domain::backup::check_bucket,
                )),
            Attribute::string("prefix")
                .optional()
                .description(
                    "A path in the bucket the cluster's snapshots go under, e.g. `clusters`; they land in \
                     `<prefix>/<cluster name>/`. Defaults to the bucket's root.",
                )
                .validator(string_check(
                    "A path inside the bucket.",
                    ha_domain::backup::check_prefix,
                )),
            Attribute::number("keep").optional().description(format!(
                "How many of the cluster's snapshots to keep: after each upload, older ones are deleted \
                 (objects that are not the provider's snapshots are never touched), except the newest from \
                 before the cluster's etcd started over (founded again or restored to an older revision), \
                 which is kept beyond this count. 1 to {}; defaults to {}.",
                ha_domain::backup::MAX_KEEP,
                ha_domain::backup::DEFAULT_KEEP
            )),
            Attribute::string("kms_key_name")
                .optional()
                .description(
                    "The Cloud KMS key the snapshots are encrypted with (customer-managed encryption), as \
                     `projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>`, in the \
                     bucket's location. Cloud Storage's service agent of the bucket's project needs \
                     `roles/cloudkms.cryptoKeyEncrypterDecrypter` on it, for the uploads and for the masters' \
                     reads at a restore. A change applies to snapshots taken after it. Defaults to the \
                     bucket's own encryption.",
                )
                .validator(string_check(
                    "A Cloud KMS key's resource name.",
                    ha_domain::backup::check_kms_key_name,
                )),
            Attribute::bool("stop_on_failure").optional().description(
                "Whether a backup that cannot be taken, checked or uploaded stops the change before \
                 anything moves (the default, `true`), naming the bucket and what failed; `false` logs the \
                 failure and goes on.",
            ),
        ],
    })
}

impl ClusterResource {
    fn settings(&self) -> crate::config::Settings {
        ha_settings::current(&self.settings)
    }

    /// Fills what the user left out (null in configuration) from the provider block. A value that is set but not yet
    /// known stays unknown: it is checked at apply.
    fn defaults_from_provider(
        &self,
        config: &ClusterModel,
        p: &mut ClusterModel,
        diags: &mut Diagnostics,
    ) {
        let settings = self.settings();
        if p.project.is_unknown() && config.project.is_null() {
            match settings.project {
                Some(v) => p.project = Val::Known(v),
                None => diags.attr_error(
                    AttributePath::attr("project"),
                    "No project",
                    "Set `project` on this cluster or in the provider block, or export GOOGLE_PROJECT.",
                ),
            }
        }
        // Null as well as unknown: an imported cluster whose replicas span zones has no primary zone in state,
        // and UseStateForUnknown carries that null over.
        if (p.zone.is_unknown() || p.zone.is_null()) && config.zone.is_null() {
            match settings.zone {
                Some(z)
                    if p.region
                        .known()
                        .is_none_or(|r| zones::region_of(&z) == Some(r.as_str())) =>
                {
                    p.zone = Val::Known(z)
                }
                _ => diags.attr_error(
                    AttributePath::attr("zone"),
                    "No primary zone",
                    "Set `zone` on this cluster (a zone of its region, like `europe-west1-b`) or in the \
                     provider block, or export GOOGLE_ZONE.",
                ),
            }
        }
        if p.region.is_unknown() && config.region.is_null() {
            let from_zone = p
                .zone
                .known()
                .and_then(|z| zones::region_of(z))
                .map(str::to_string);
            match from_zone.or(settings.region) {
                Some(r) => p.region = Val::Known(r),
                None => diags.attr_error(
                    AttributePath::attr("region"),
                    "No region",
                    "Set `region` or `zone` on this cluster or in the provider block.",
                ),
            }
        }
    }
}

impl ClusterResource {
    /// `effective_labels`: the provider's `default_labels` under the cluster's `labels`, refused at plan (at
    /// `labels`) when together they break GCE's rules, e.g. too many for one object.
    fn plan_effective_labels(&self, p: &mut ClusterModel, diags: &mut Diagnostics) {
        let own = match &p.labels {
            Val::Unknown => {
                p.effective_labels = Val::Unknown;
                return;
            }
            other => other.known().cloned().unwrap_or_default(),
        };
        let defaults = self.settings().default_labels;
        let all = ha_domain::labels::effective(&defaults, &own);
        if !defaults.is_empty() {
            for problem in ha_domain::labels::check_labels(&all) {
                diags.attr_error(
                    AttributePath::attr("labels"),
                    format!("{} (with the provider's default_labels)", problem.summary),
                    format!(
                        "{} The provider's `default_labels` count toward the cluster's labels.",
                        problem.detail
                    ),
                );
            }
        }
        p.effective_labels = Val::Known(all);
    }
}

/// The replica-facing spec: settings from the plan, generated material carried over from `prior` (unknown on create).
impl ClusterResource {
    /// A change of `etcd_version`, judged from etcd's own versions (`domain::etcd_version::check_change`): the
    /// plan refuses it naming the rule, or warns what the apply will do.
    async fn check_etcd_version(
        &self,
        prior: &ClusterModel,
        p: &ClusterModel,
        diags: &mut Diagnostics,
    ) {
        use ha_domain::etcd_version::{LEGACY, check_change};
        // A state from before the setting ran etcd 3.4 (`LEGACY`).
        let from = prior.etcd_version.known().map_or(LEGACY, String::as_str);
        let (Some(to), Some(name)) = (p.etcd_version.known(), p.name.known()) else {
            return;
        };
        if ha_domain::etcd_version::check(to).is_err()
            || ha_domain::etcd_version::minor(from) == ha_domain::etcd_version::minor(to)
        {
            return;
        }
        // The prior spec reaches the running cluster (its IP and CAs); a cluster not created yet has no etcd.
        let read = match prior.ops_spec() {
            None => None,
            Some(Err(e)) => Some(Err(e.to_string())),
            Some(Ok(spec)) => Some(
                match ha_ops::ClusterCtx::new(&self.settings(), spec).await {
                    Ok(ctx) => ha_ops::etcd_version::read(&ctx)
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
            ),
        };
        let observed = match &read {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(v))) => Some(Ok(v)),
            Some(Err(e)) => Some(Err(e.as_str())),
        };
        let at = AttributePath::attr("etcd_version");
        match check_change(name, from, to, observed) {
            Ok(None) => {}
            Ok(Some((summary, detail))) => diags.push(Diagnostic::warning(summary, detail).at(at)),
            Err((summary, detail)) => diags.push(Diagnostic::error(summary, detail).at(at)),
        }
    }
}

/// A setting that is optional and computed, left unset: a new cluster gets `for_new`, an existing one keeps what
/// its state says it runs (`legacy` for a state from before the setting), so neither a provider upgrade nor a
/// change elsewhere moves a cluster's masters unasked. `None`: the setting is configured, the plan keeps it.
/// `ca_key_store`, `private_keys`, and where the planned spec keeps the keys (`cluster_model::key_store`). Known at
/// plan in every case, so a replica's plan sees a known `cluster`.
pub(super) fn plan_key_store(
    config: &ClusterModel,
    prior: Option<&ClusterModel>,
    p: &mut ClusterModel,
    diags: &mut Diagnostics,
) {
    use key_store::{SECRET_MANAGER, TERRAFORM_STATE};
    let at = || AttributePath::attr("ca_key_store");
    let name = p.name.known().cloned().unwrap_or_default();
    let asked = config.ca_key_store.known().map(String::as_str);
    let Some(prior) = prior else {
        if asked == Some(TERRAFORM_STATE) {
            diags.attr_error(
                at(),
                "A new cluster keeps its keys in Secret Manager",
                format!(
                    "`{TERRAFORM_STATE}` is where clusters made before the keys' secret keep their keys until \
                     they move; a new cluster starts in `{SECRET_MANAGER}`. Remove `ca_key_store`."
                ),
            );
        }
        p.ca_key_store = Val::Known(SECRET_MANAGER.into());
        p.private_keys = Val::Unknown;
        keys_to_secret(p);
        return;
    };
    // A state from before the setting (not refreshed since, as with `-refresh=false`) says nothing; its spec does.
    let keeps_keys = prior
        .spec
        .known()
        .and_then(PrivateKeys::from_spec)
        .is_some();
    let was = match prior.ca_key_store.known().map(String::as_str) {
        None if keeps_keys => Some(TERRAFORM_STATE),
        was => was,
    };
    match (was, asked) {
        (Some(SECRET_MANAGER), Some(TERRAFORM_STATE)) => diags.attr_error(
            at(),
            format!("Cluster {name}'s keys cannot move back into state"),
            format!(
                "They are in its Secret Manager secret, and copying them into every replica's state again \
                 would undo what moving them bought. Remove `ca_key_store` or set it to `{SECRET_MANAGER}`."
            ),
        ),
        (Some(SECRET_MANAGER), _) => {
            p.ca_key_store = Val::Known(SECRET_MANAGER.into());
            p.private_keys = prior.private_keys.clone();
        }
        (Some(TERRAFORM_STATE), Some(SECRET_MANAGER)) => {
            match prior.spec.known().and_then(PrivateKeys::from_spec) {
                Some(keys) => {
                    p.ca_key_store = Val::Known(SECRET_MANAGER.into());
                    p.private_keys = Val::Known(keys);
                    keys_to_secret(p);
                }
                None => diags.attr_error(
                    at(),
                    format!("Cluster {name}'s keys are not all in its state"),
                    "A key of `spec` is empty, so there is nothing whole to move. Restore the state the \
                     cluster was created with."
                        .to_string(),
                ),
            }
        }
        (Some(_), _) => {
            // What the configuration asks for, when it does: a state not refreshed since the setting came says
            // null, and planning null against a configured value is an inconsistent plan.
            p.ca_key_store = match asked {
                Some(asked) => Val::Known(asked.to_string()),
                None => prior.ca_key_store.clone(),
            };
            p.private_keys = prior.private_keys.clone();
            let (summary, detail) = ha_domain::key_placement::ca_keys_in_state_warning(&name);
            diags.push(Diagnostic::warning(summary, detail).at(at()));
        }
        // An imported cluster: no CA key is anywhere this provider can reach (masters never hold them), but its
        // spec carries the service-account key import read from a master, and so does every replica's state.
        (None, asked) => {
            let service_account = prior
                .spec
                .known()
                .and_then(PrivateKeys::from_imported_spec);
            match (asked, service_account) {
                (Some(SECRET_MANAGER), Some(keys)) => {
                    p.ca_key_store = Val::Known(SECRET_MANAGER.into());
                    p.private_keys = Val::Known(keys);
                    keys_to_secret(p);
                }
                (Some(_), _) => diags.attr_error(
                    at(),
                    format!("Cluster {name} has no keys to store there"),
                    format!(
                        "It was imported, and masters never hold CA keys, so neither its state nor a secret has \
                         them; its service-account key, read from a master, can move to `{SECRET_MANAGER}` only. \
                         Set `ca_key_store = \"{SECRET_MANAGER}\"` or remove it."
                    ),
                ),
                (None, Some(_)) => {
                    p.ca_key_store = Val::Null;
                    p.private_keys = Val::Null;
                    let (summary, detail) =
                        ha_domain::key_placement::imported_key_in_state_warning(&name);
                    diags.push(Diagnostic::warning(summary, detail).at(at()));
                }
                (None, None) => {
                    p.ca_key_store = Val::Null;
                    p.private_keys = Val::Null;
                }
            }
        }
    }
}

fn unset_setting(
    configured: &Val<String>,
    prior: Option<&Val<String>>,
    for_new: impl FnOnce() -> Val<String>,
    legacy: &str,
) -> Option<Val<String>> {
    if !configured.is_null() {
        return None;
    }
    Some(match prior {
        None => for_new(),
        Some(kept) => Val::Known(kept.known().map_or(legacy, String::as_str).into()),
    })
}

/// The versions and image a cluster runs when its configuration leaves them unset (`unset_setting`): a new
/// cluster runs the provider's current release, the etcd that release calls for
/// (`domain::kubernetes_version::etcd_for`, unknown while the release is) and an image the startup contract runs
/// on; an existing one keeps its release (1.28.15 before the setting), etcd (3.4) and image.
fn plan_unset_settings(config: &ClusterModel, prior: Option<&ClusterModel>, p: &mut ClusterModel) {
    use ha_domain::{etcd_version, image, kubernetes_version};
    if let Some(v) = unset_setting(
        &config.kubernetes_version,
        prior.map(|m| &m.kubernetes_version),
        || Val::Known(kubernetes_version::DEFAULT_FOR_NEW.into()),
        kubernetes_version::LEGACY,
    ) {
        p.kubernetes_version = v;
    }
    let release = p.kubernetes_version.clone();
    if let Some(v) = unset_setting(
        &config.etcd_version,
        prior.map(|m| &m.etcd_version),
        || match release
            .known()
            .and_then(|r| kubernetes_version::etcd_for(r))
        {
            Some(etcd) => Val::Known(etcd.into()),
            None => Val::Unknown,
        },
        etcd_version::LEGACY,
    ) {
        p.etcd_version = v;
    }
    if let Some(v) = unset_setting(
        &config.image,
        prior.map(|m| &m.image),
        || Val::Known(image::DEFAULT_FOR_NEW.into()),
        image::LEGACY,
    ) {
        p.image = v;
    }
}

impl ClusterResource {
    /// A change of `kubernetes_version`, judged by the version-skew policy against the release each master was
    /// built with (`domain::kubernetes_version::check_change`): refused naming the rule, or a warning of the roll.
    async fn check_kubernetes_version(
        &self,
        prior: &ClusterModel,
        p: &ClusterModel,
        diags: &mut Diagnostics,
    ) {
        use ha_domain::kubernetes_version::{LEGACY, check_change, parse};
        let from = prior
            .kubernetes_version
            .known()
            .map_or(LEGACY, String::as_str);
        let (Some(to), Some(name)) = (p.kubernetes_version.known(), p.name.known()) else {
            return;
        };
        if parse(to).is_none() || parse(from) == parse(to) {
            return;
        }
        let at = AttributePath::attr("kubernetes_version");
        // The masters' own versions, from their VMs; a cluster whose spec is not readable has nothing running to
        // judge beyond what state records.
        let replicas = match prior.ops_spec() {
            Some(Ok(spec)) => match ha_ops::ClusterCtx::new(&self.settings(), spec).await {
                Ok(ctx) => ha_ops::kubernetes_version::read(&ctx).await,
                Err(e) => Err(e),
            },
            _ => Ok(Vec::new()),
        };
        let replicas = match replicas {
            Ok(r) => r,
            Err(e) => {
                diags.push(
                    Diagnostic::error(
                        format!(
                            "Cannot read which Kubernetes version the masters of cluster {name} run"
                        ),
                        format!(
                            "{e}. The version-skew rules need every master's version before an upgrade is \
                             planned; run plan again once Compute answers."
                        ),
                    )
                    .at(at),
                );
                return;
            }
        };
        match check_change(name, from, to, &replicas) {
            Ok(None) => {}
            Ok(Some((summary, detail))) => diags.push(Diagnostic::warning(summary, detail).at(at)),
            Err((summary, detail)) => diags.push(Diagnostic::error(summary, detail).at(at)),
        }
    }
}

impl ClusterResource {
    /// Where the cluster goes and what its masters are made of, asked of Compute Engine when either changes: the
    /// region and zone exist, and the zone offers the machine type.
    async fn check_placement(
        &self,
        prior: Option<&ClusterModel>,
        p: &ClusterModel,
        diags: &mut Diagnostics,
    ) {
        let moved = prior.is_none_or(|m| m.region != p.region || m.zone != p.zone);
        if moved && let (Some(project), Some(region)) = (p.project.known(), p.region.known()) {
            let zone = p.zone.known().filter(|z| !z.is_empty()).map(String::as_str);
            let at = if zone.is_some() { "zone" } else { "region" };
            super::placement::check(&self.settings(), project, region, zone, at, diags).await;
        }
        let retyped = prior.is_none_or(|m| m.machine_type != p.machine_type || m.zone != p.zone);
        if retyped
            && let (Some(project), Some(zone), Some(machine_type)) =
                (p.project.known(), p.zone.known(), p.machine_type.known())
            && !zone.is_empty()
        {
            let at = AttributePath::attr("machine_type");
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
        if prior.is_none_or(|m| m.image != p.image)
            && let (Some(project), Some(image)) = (p.project.known(), p.image.known())
            && !image.is_empty()
        {
            let at = AttributePath::attr("image");
            super::placement::check_image(&self.settings(), project, image, at, diags).await;
        }
    }

    /// A raised `restore.generation`: the recovery the apply will run, judged from the running cluster
    /// (`domain::recovery`), as a warning that says what it does, or refused saying why it cannot or need not.
    /// A lowered one is refused.
    async fn check_recovery(
        &self,
        prior: &ClusterModel,
        p: &ClusterModel,
        diags: &mut Diagnostics,
    ) {
        let at = AttributePath::attr("restore").then_attr("generation");
        let (Some(old), Some(new)) = (restore_generation(prior), restore_generation(p)) else {
            return;
        };
        if new < old {
            diags.push(
                Diagnostic::error(
                    format!("restore.generation cannot go back from {old} to {new}"),
                    format!(
                        "The generation counts the recoveries asked for; a recovery runs when it goes up. \
                         Set it back to {old}."
                    ),
                )
                .at(at),
            );
            return;
        }
        if !recovery_planned(Some(prior), p) {
            return;
        }
        let name = p.name.known().cloned().unwrap_or_default();
        let planned = spec_of(p, prior.spec.known());
        if let Some(choice) = planned.snapshot_choice() {
            self.check_restore(prior, &planned, &choice, diags).await;
            return;
        }
        if planned.starts_empty() {
            self.check_start_empty(prior, &planned, diags).await;
            return;
        }
        // Not created yet: nothing runs, nothing to recover; the generation is only recorded.
        let Some(spec) = prior.spec.known().map(ClusterSpec::to_ops) else {
            return;
        };
        let judged = plan_check::judge(&self.settings(), spec, async |ctx, until| {
            ha_ops::recover::plan(ctx, until).await
        })
        .await;
        match judged {
            Ok(r) => {
                let (summary, detail) = ha_domain::recovery::describe(&name, &r);
                diags.push(Diagnostic::warning(summary, detail).at(at.clone()));
                // The apply backs up with the new configuration's `backup` block (`ops::recover`).
                if let Some(policy) = planned.backup_policy()
                    && ha_domain::recovery::takes_backup(&r)
                {
                    let change = ha_domain::recovery::change(&r);
                    let (summary, detail) = ha_domain::backup::plan_note(&policy, &name, &change);
                    diags.push(Diagnostic::warning(summary, detail).at(at));
                }
            }
            Err(e) => diags.push(not_judged(
                e,
                at,
                format!("Cannot judge the recovery of cluster {name}"),
                "A recovery is planned only from what the cluster's VMs and etcd say",
            )),
        }
    }
}

impl ClusterResource {
    /// A raised `restore.generation` with `source = "empty"`: what the apply does (the snapshots are kept and the
    /// newest is named), or why it may not (`domain::start_empty::decide`).
    async fn check_start_empty(
        &self,
        prior: &ClusterModel,
        planned: &ClusterSpec,
        diags: &mut Diagnostics,
    ) {
        let at = AttributePath::attr("restore").then_attr("generation");
        let name = planned.name.known().cloned().unwrap_or_default();
        let Some(spec) = prior.ops_spec() else {
            return;
        };
        let spec = spec.map(|mut spec| {
            spec.backup = planned.backup_policy();
            spec
        });
        let judged = plan_check::judge(&self.settings(), spec, async |ctx, until| {
            ha_ops::restore::plan_start_empty(ctx, until).await
        })
        .await;
        match judged {
            Ok((summary, detail)) => diags.push(Diagnostic::warning(summary, detail).at(at)),
            Err(e) => diags.push(not_judged(
                e,
                at,
                format!("Cannot judge starting cluster {name} empty"),
                "Starting empty is planned only from what the cluster's VMs and its backup bucket say",
            )),
        }
    }

    /// A raised `restore.generation` with `source = "snapshot"`: the snapshot the restore will use and what it
    /// does, or why it may not run (`domain::restore`). Judged with the planned backup bucket and etcd version.
    /// A new cluster with `restore { source = "snapshot" }`: its first replica restores the snapshot instead of
    /// founding an empty etcd (the way into another network or project). The plan names the snapshot, or refuses
    /// the create when it cannot be found or used, as it does for an existing cluster's restore.
    async fn check_restore_at_create(&self, p: &ClusterModel, diags: &mut Diagnostics) {
        let planned = spec_of(p, None);
        let Some(choice) = planned.snapshot_choice() else {
            return;
        };
        let at = AttributePath::attr("restore").then_attr("source");
        let (Some(name), Some(etcd_version), Some(data_gb), Some(boot_gb)) = (
            planned.name.known(),
            planned.etcd_version.known(),
            planned.data_disk_size_gb.known(),
            planned.boot_disk_size_gb.known(),
        ) else {
            // Known at apply: the join reads the snapshot then, and fails with the same words.
            return;
        };
        let backup = planned.backup_policy();
        let new = ha_ops::restore::NewCluster {
            name,
            backup: backup.as_ref(),
            etcd_version,
            data_disk_size_gb: *data_gb,
            boot_disk_size_gb: *boot_gb,
            secrets_encryption_key: p.secrets_encryption_key.known().map(String::as_str),
            secrets_decryption_keys: p.secrets_decryption_keys.known().map_or(&[], Vec::as_slice),
        };
        let judged = tokio::time::timeout(
            ha_ops::plan_check::PATIENCE,
            ha_ops::restore::plan_new(&self.settings(), &new, &choice),
        )
        .await
        .unwrap_or_else(|_| {
            Err(ha_ops::OpError::Other(
                "the backup bucket did not answer".into(),
            ))
        });
        match judged {
            Ok(snapshot) => {
                let (summary, detail) =
                    ha_domain::restore::describe_at_create(name, &snapshot, etcd_version);
                diags.push(Diagnostic::warning(summary, detail).at(at));
            }
            Err(e) => diags.push(not_judged(
                e,
                at,
                format!("Cannot judge the restore of cluster {name}"),
                "A new cluster's restore is planned from what its backup bucket says",
            )),
        }
    }

    async fn check_restore(
        &self,
        prior: &ClusterModel,
        planned: &ClusterSpec,
        choice: &ha_domain::restore::SnapshotChoice,
        diags: &mut Diagnostics,
    ) {
        let at = AttributePath::attr("restore").then_attr("generation");
        let name = planned.name.known().cloned().unwrap_or_default();
        let Some(spec) = prior.ops_spec() else {
            return;
        };
        let spec = spec.map(|mut spec| {
            spec.backup = planned.backup_policy();
            if let Some(v) = planned.etcd_version.known() {
                spec.master.etcd_version = v.clone();
            }
            // The restoring VM is made with the new configuration's disks.
            if let Some(gb) = planned.data_disk_size_gb.known() {
                spec.master.data_disk_size_gb = *gb;
            }
            if let Some(gb) = planned.boot_disk_size_gb.known() {
                spec.master.boot_disk_size_gb = *gb;
            }
            spec
        });
        let etcd_version = spec
            .as_ref()
            .map(|s| s.master.etcd_version.clone())
            .unwrap_or_default();
        let judged = plan_check::judge(&self.settings(), spec, async |ctx, until| {
            ha_ops::restore::plan(ctx, choice, until).await
        })
        .await;
        match judged {
            Ok(snapshot) => {
                let (summary, detail) =
                    ha_domain::restore::describe(&name, &snapshot, &etcd_version);
                diags.push(Diagnostic::warning(summary, detail).at(at));
            }
            Err(e) => diags.push(not_judged(
                e,
                at,
                format!("Cannot judge the restore of cluster {name}"),
                "A restore is planned only from what the cluster's VMs and its backup bucket say",
            )),
        }
    }
}

/// The cluster's CAs expire within a year (`domain::certificates::ca_outlook`): every certificate of its masters
/// expires with them at the latest, and only a rotation (`ca_rotation`) moves them. The clock is read here; the domain compares.
fn warn_of_ca_expiry(prior: &ClusterModel, diags: &mut Diagnostics) {
    let pems = [
        &prior.ca_certificate,
        &prior.etcd_peer_ca_certificate,
        &prior.etcd_client_ca_certificate,
    ];
    let Some(expires_at) = ha_pki::cas_expire_at(
        pems.into_iter()
            .map(|c| c.known().map_or("", String::as_str)),
    ) else {
        return;
    };
    let name = prior.name.known().cloned().unwrap_or_default();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let when = super::replica::rfc3339(expires_at);
    if let Some((summary, detail)) =
        ha_domain::certificates::ca_outlook(&format!("cluster {name}"), expires_at, &when, now)
    {
        diags.warning(summary, detail);
    }
}

/// A plan-time check that did not say yes, as an error at `at`: the domain's refusal as it is, or, when the
/// cluster could not be asked, `summary` with what went wrong, what the check needs (`needs`) and to plan again.
fn cluster_name(m: &ClusterModel) -> String {
    m.name.known().cloned().unwrap_or_default()
}

fn not_judged(e: ha_ops::OpError, at: AttributePath, summary: String, needs: &str) -> Diagnostic {
    match e {
        ha_ops::OpError::Refused(summary, detail) => Diagnostic::error(summary, detail).at(at),
        e => Diagnostic::error(
            summary,
            format!("{e}. {needs}; run plan again once they answer."),
        )
        .at(at),
    }
}

/// What the network lets in, as the model says (unknown values are not judged).
fn exposure_of<'a>(name: &'a str, m: &'a ClusterModel) -> Exposure<'a> {
    Exposure {
        name,
        network: m.network.known().map(String::as_str),
        api_port: m.api_port.known().copied(),
        api_source_ranges: m.api_source_ranges.known().map(Vec::as_slice),
        etcd_client_source_ranges: m.etcd_client_source_ranges.known().map(Vec::as_slice),
    }
}

#[async_trait]
impl Resource for ClusterResource {
    type Model = ClusterModel;

    fn type_name(&self) -> &'static str {
        "ha_master_cluster"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, c: &ClusterModel, diags: &mut Diagnostics) {
        super::cluster_validate::validate(c, diags);
    }

    async fn modify_plan(&self, change: PlanChange<'_, ClusterModel>, diags: &mut Diagnostics) {
        let p = change.planned;
        self.defaults_from_provider(change.config, p, diags);
        self.plan_effective_labels(p, diags);
        if let (Some(project), Some(region), Some(name)) =
            (p.project.known(), p.region.known(), p.name.known())
        {
            p.id = Val::Known(ids::cluster_id(project, region, name));
        }
        // An imported cluster whose replicas span zones has no primary zone in state: the configured one is
        // recorded, not a change of zone (which would replace the cluster).
        if change.prior.is_some_and(|m| m.zone.is_null()) {
            change
                .requires_replace
                .retain(|path| *path != AttributePath::attr("zone"));
        }
        if let Some(prior) = change.prior
            && !change.requires_replace.is_empty()
        {
            super::cluster_replacement::check(
                &self.settings(),
                prior,
                change.requires_replace,
                diags,
            )
            .await;
        }
        plan_unset_settings(change.config, change.prior, p);
        let prior_spec = change.prior.and_then(|m| m.spec.known());
        p.spec = Val::Known(spec_of(p, prior_spec));
        plan_key_store(change.config, change.prior, p, diags);
        super::cluster_rotation::plan(change.prior, p, change.requires_replace, diags);
        super::cluster_ca::plan(change.config, change.prior, diags);
        super::brought_ca_rotation::plan(change.config, change.prior, diags);
        // Every create and update leaves the cluster in shape. A prior with drift therefore plans an in-place update
        // that lists what is wrong; `spec` above stays as it was, so replicas see no change from a repair.
        p.drift = Val::Known(Vec::new());
        // Replicas take the backups, so a new cluster has none: known at plan.
        if change.prior.is_none() {
            p.last_backup = Val::Null;
        }
        if let Some(prior) = change.prior
            && let Some(drift) = prior.drift.known().filter(|d| !d.is_empty())
        {
            let name = prior.name.known().cloned().unwrap_or_default();
            diags.warning(
                format!("Cluster {name} is out of shape"),
                format!(
                    "Refresh found: {} The apply puts it back as the configuration and the replicas call \
                     for.",
                    drift.join(" ")
                ),
            );
        }
        if let (Some(name), Some(old), Some(new)) = (
            p.name.known(),
            change.prior.and_then(|m| m.data_disk_size_gb.known()),
            p.data_disk_size_gb.known(),
        ) && let Some((summary, detail)) = data_disk_shrink(name, *old, *new)
        {
            diags.push(
                Diagnostic::error(summary, detail).at(AttributePath::attr("data_disk_size_gb")),
            );
        }
        super::cluster_encryption::check(
            &self.settings(),
            change.prior,
            p,
            change.requires_replace,
            diags,
        )
        .await;
        self.check_placement(change.prior, p, diags).await;
        if let Some(prior) = change.prior {
            super::cluster_ca::check_key_needed(change.config, prior, p, diags);
            warn_of_ca_expiry(prior, diags);
            self.check_etcd_version(prior, p, diags).await;
            self.check_kubernetes_version(prior, p, diags).await;
            self.check_recovery(prior, p, diags).await;
            super::cluster_rolls::say(&self.settings(), prior, p, diags).await;
        } else {
            self.check_restore_at_create(p, diags).await;
        }
        if let (Some(name), Some(account)) = (p.name.known(), p.service_account.known())
            && let Some((summary, detail)) = ha_domain::service_account::default_account_warning(
                name,
                change
                    .prior
                    .and_then(|m| m.service_account.known())
                    .map(String::as_str),
                account,
            )
        {
            diags.push(
                Diagnostic::warning(summary, detail).at(AttributePath::attr("service_account")),
            );
        }
        if let Some(name) = p.name.known() {
            let prior = change.prior.map(|m| exposure_of(name, m));
            for w in exposure_warnings(prior.as_ref(), &exposure_of(name, p)) {
                diags.push(
                    Diagnostic::warning(w.summary, w.detail).at(AttributePath::attr(w.attribute)),
                );
            }
        }
    }

    async fn create(&self, planned: ClusterModel, diags: &mut Diagnostics) -> Option<ClusterModel> {
        let what = || format!("the create of cluster {}", cluster_name(&planned));
        if super::read_only::refused(&self.settings(), what, diags) {
            return None;
        }
        super::cluster_apply::create(&self.settings(), planned, diags).await
    }

    async fn read(&self, state: ClusterModel, diags: &mut Diagnostics) -> Option<ClusterModel> {
        super::cluster_apply::read(&self.settings(), state, diags).await
    }

    async fn plan_destroy(&self, prior: &ClusterModel, diags: &mut Diagnostics) {
        if prior.deletion_protection.known() != Some(&false) {
            let name = prior.name.known().cloned().unwrap_or_default();
            diags.attr_error(
                AttributePath::attr("deletion_protection"),
                format!("Cluster {name} is protected from deletion"),
                format!(
                    "Destroying ha_master_cluster {name} deletes its static IP, CAs and firewall rules, and \
                     with them every replica's etcd data is gone for good. `deletion_protection` is on, so \
                     nothing was planned. To destroy it on purpose, set `deletion_protection = false` on \
                     the cluster, run `terraform apply`, then destroy."
                ),
            );
        }
    }

    async fn update(
        &self,
        prior: ClusterModel,
        planned: ClusterModel,
        diags: &mut Diagnostics,
    ) -> Option<ClusterModel> {
        let what = || format!("the update of cluster {}", cluster_name(&prior));
        if super::read_only::refused(&self.settings(), what, diags) {
            return Some(prior);
        }
        super::cluster_apply::update(&self.settings(), prior, planned, diags).await
    }

    async fn delete(&self, prior: ClusterModel, diags: &mut Diagnostics) {
        let what = || format!("the destroy of cluster {}", cluster_name(&prior));
        if super::read_only::refused(&self.settings(), what, diags) {
            return;
        }
        super::cluster_apply::delete(&self.settings(), prior, diags).await
    }

    fn identity_schema(&self) -> Option<&'static [(&'static str, &'static str)]> {
        Some(&[
            ("project", "The project."),
            ("region", "The region of the static IP."),
            ("name", "The cluster's name."),
        ])
    }

    /// The parts of the id, `<project>/<region>/<name>`, which is known once the object is planned or imported.
    fn identity(&self, m: &ClusterModel) -> Option<Vec<String>> {
        let (a, b, c) = ids::parse3(m.id.known()?, "").ok()?;
        Some(vec![a.to_string(), b.to_string(), c.to_string()])
    }

    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<ClusterModel> {
        super::import::cluster(&self.settings(), id, diags).await
    }
}
