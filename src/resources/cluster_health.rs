//! The data source `ha_cluster_health`: a cluster's health as the real APIs report it, with a one-line verdict,
//! as `kops validate cluster` gives one. The facts are read by `ops::health::read_cluster` and judged by
//! `domain::health::judge`; this file declares the schema and copies the result into it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Type;
use tfplugin_framework::model::TfType;
use tfplugin_framework::{Attribute, DataSource, Schema, Val, typed_object};

use super::spec::ClusterSpec;
use crate::config::SharedSettings;
use ha_domain::certificates::rfc3339;
use ha_domain::health::{Facts, MemberState, Verdict, judge};
use ha_domain::topology::IpHolder;

pub const TYPE_NAME: &str = "ha_cluster_health";

/// How long the Compute calls of one read may take together. etcd calls have their own (short) timeouts, so a
/// cluster that lost quorum is reported in seconds.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

typed_object! {
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplicaHealth {
    pub name: Val<String>,
    pub zone: Val<String>,
    pub vm_status: Val<String>,
    pub load_balancer: Val<String>,
    pub certificates_expire_at: Val<String>,
}
}

typed_object! {
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemberHealth {
    pub id: Val<String>,
    pub name: Val<String>,
    pub learner: Val<bool>,
    pub leader: Val<bool>,
    pub state: Val<String>,
    pub db_size_bytes: Val<i64>,
}
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClusterHealthModel {
    pub cluster: Val<ClusterSpec>,
    pub healthy: Val<bool>,
    pub verdict: Val<String>,
    pub problems: Val<Vec<String>>,
    pub notes: Val<Vec<String>>,
    pub leader: Val<String>,
    pub voters: Val<i64>,
    pub healthy_voters: Val<i64>,
    pub fault_tolerance: Val<i64>,
    pub replicas: Val<Vec<ReplicaHealth>>,
    pub members: Val<Vec<MemberHealth>>,
    pub alarms: Val<Vec<String>>,
    pub static_ip_holder: Val<String>,
    pub last_backup: Val<String>,
    pub ca_expires_at: Val<String>,
}

fn schema() -> Schema {
    let computed = |a: Attribute| a.computed();
    Schema::new(
        "A cluster's health, read from the Compute API and etcd at each refresh: each replica's VM, etcd's \
         members (learners, leader, database size, alarms), the load balancer's view of each replica, who \
         serves the static IP, certificate expiry and the newest snapshot, judged into `healthy` and a one-line \
         `verdict`. Reading it changes nothing. Use it in a `check` block to be warned of an unhealthy cluster \
         at every plan, or with a `postcondition` on `healthy` to make the plan fail; docs/guides/health.md \
         shows both. `healthy` and `verdict` stay the same on a healthy cluster; `leader` and `members` change \
         between reads (an election, the database growing), so keep those out of resource arguments and of \
         outputs a drift-detection plan compares.",
    )
    .attribute(
        Attribute::typed("cluster", <ClusterSpec as TfType>::tf_type())
            .required()
            .sensitive()
            .description(
                "The cluster: `cluster = ha_master_cluster.<name>.spec`. Its etcd client CA makes the \
                 certificate the read uses. Give the data source no `depends_on`: with one, a plan in which a \
                 replica changes (a stopped VM is such a change) defers the read to apply.",
            ),
    )
    .attribute(computed(Attribute::bool("healthy")).description(
        "Whether nothing is wrong: every replica VM runs, every etcd member is a healthy voter with a leader, \
         no alarm is raised, the static IP is served, and with a load balancer every replica is in its pool \
         and passes its health check. `notes` never make it false.",
    ))
    .attribute(computed(Attribute::string("verdict")).description(
        "One line: `healthy: 3 of 3 etcd voters healthy, tolerates 1 failure`, or `unhealthy: <n> problems: ` \
         and each problem. It names no leader or size, so on a healthy cluster it is the same at every read.",
    ))
    .attribute(
        computed(Attribute::typed("problems", Type::list(Type::String))).description(
            "What makes the cluster unhealthy, one sentence each naming the replica or member and what the \
             next step is; empty when healthy.",
        ),
    )
    .attribute(
        computed(Attribute::typed("notes", Type::list(Type::String))).description(
            "What needs attention without making the cluster unhealthy: certificates within their renewal \
             window, a CA that expires within a year, a backup location with no snapshot yet or that could \
             not be listed.",
        ),
    )
    .attribute(computed(Attribute::string("leader")).description(
        "The etcd leader's member name, or null when the members that answered do not agree on one (no quorum, \
         or an election in progress).",
    ))
    .attribute(
        computed(Attribute::number("voters"))
            .description("How many of etcd's members vote (learners excluded)."),
    )
    .attribute(
        computed(Attribute::number("healthy_voters"))
            .description("How many voters answered healthy, with a leader."),
    )
    .attribute(computed(Attribute::number("fault_tolerance")).description(
        "How many more voters may fail before etcd loses quorum: healthy voters minus the quorum of all \
         voters, and 0 when it has none.",
    ))
    .attribute(
        computed(Attribute::typed(
            "replicas",
            Type::list(<ReplicaHealth as TfType>::tf_type()),
        ))
        .description(
            "Each replica VM found by the cluster's label, by name: `zone`, `vm_status` (Compute's: RUNNING, \
             TERMINATED…), `load_balancer` (`HEALTHY` or `UNHEALTHY` as the target pool's health check sees it, \
             `not in pool`, or `none` without a load balancer) and `certificates_expire_at` (RFC 3339, null when \
             its metadata does not carry them).",
        ),
    )
    .attribute(
        computed(Attribute::typed(
            "members",
            Type::list(<MemberHealth as TfType>::tf_type()),
        ))
        .description(
            "etcd's members as etcd lists them: `id` (hex, as etcdctl prints it), `name` (empty for a learner \
             that never started and matches no replica VM), `learner`, `leader`, `state` (`healthy`, `unhealthy: <why>`, `unreachable: \
             <why>`, or `not asked` when no running replica VM carries it) and `db_size_bytes` (null when it did \
             not answer). Empty when etcd could not be reached.",
        ),
    )
    .attribute(
        computed(Attribute::typed("alarms", Type::list(Type::String)))
            .description("Raised etcd alarms, as `NOSPACE on member <name>`."),
    )
    .attribute(computed(Attribute::string("static_ip_holder")).description(
        "What serves the static IP: `load balancer`, `replica <name>` (a one-replica cluster), or `nobody`.",
    ))
    .attribute(computed(Attribute::string("last_backup")).description(
        "The newest snapshot in the cluster's `backup` location, `gs://<bucket>/<object>`; null without a \
         `backup` block or before the first snapshot.",
    ))
    .attribute(
        computed(Attribute::string("ca_expires_at"))
            .description("When the first of the cluster's CAs expires (RFC 3339, UTC)."),
    )
}

/// The data source `ha_cluster_health`.
pub struct ClusterHealthDataSource {
    pub settings: SharedSettings,
}

#[async_trait]
impl DataSource for ClusterHealthDataSource {
    type Model = ClusterHealthModel;

    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn read(
        &self,
        config: ClusterHealthModel,
        diags: &mut Diagnostics,
    ) -> Option<ClusterHealthModel> {
        let at = AttributePath::attr("cluster");
        let Some(cluster) = config.cluster.known() else {
            diags.attr_error(
                at,
                "The cluster is not known",
                "Set `cluster = ha_master_cluster.<name>.spec`.",
            );
            return None;
        };
        let name = cluster.name.known().cloned().unwrap_or_default();
        let spec = match cluster.to_ops() {
            Ok(spec) => spec,
            Err(e) => {
                diags.attr_error(
                    at,
                    format!("Cannot read the health of cluster {name:?}"),
                    format!(
                        "{e}. `cluster` must be an applied cluster's unedited `spec` \
                         (`ha_master_cluster.<name>.spec`)."
                    ),
                );
                return None;
            }
        };
        let settings = ha_settings::current(&self.settings);
        let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
        let facts = match ha_ops::health::read_cluster(&settings, spec, deadline).await {
            Ok(facts) => facts,
            Err(e) => {
                diags.error(
                    format!("Could not read the health of cluster {name}"),
                    super::advice::with_advice(&e),
                );
                return None;
            }
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Some(fill(config, &facts, &judge(&facts, now)))
    }
}

/// The configuration with every computed attribute set from the facts and their verdict.
fn fill(mut m: ClusterHealthModel, facts: &Facts, v: &Verdict) -> ClusterHealthModel {
    let known = |s: &str| Val::Known(s.to_string());
    let time = |t: Option<i64>| t.map_or(Val::Null, |t| Val::Known(rfc3339(t)));
    m.healthy = Val::Known(v.healthy);
    m.verdict = Val::Known(v.summary.clone());
    m.problems = Val::Known(v.problems.clone());
    m.notes = Val::Known(v.notes.clone());
    m.leader = v.leader.as_deref().map_or(Val::Null, known);
    m.voters = Val::Known(v.voters as i64);
    m.healthy_voters = Val::Known(v.healthy_voters as i64);
    m.fault_tolerance = Val::Known(v.fault_tolerance as i64);
    m.replicas = Val::Known(
        facts
            .replicas
            .iter()
            .map(|r| ReplicaHealth {
                name: known(&r.name),
                zone: known(&r.zone),
                vm_status: known(&r.vm_status),
                load_balancer: known(match (facts.load_balancer, r.backend_healthy) {
                    (false, _) => "none",
                    (true, None) => "not in pool",
                    (true, Some(true)) => "HEALTHY",
                    (true, Some(false)) => "UNHEALTHY",
                }),
                certificates_expire_at: time(r.certificates_expire_at),
            })
            .collect(),
    );
    m.members = Val::Known(
        facts
            .members
            .iter()
            .flatten()
            .map(|mf| MemberHealth {
                id: Val::Known(format!("{:x}", mf.id)),
                name: known(&mf.name),
                learner: Val::Known(mf.learner),
                leader: Val::Known(v.leader_id == Some(mf.id)),
                state: Val::Known(match &mf.state {
                    MemberState::Healthy => "healthy".to_string(),
                    MemberState::Unhealthy(why) => format!("unhealthy: {why}"),
                    MemberState::Unreachable(why) => format!("unreachable: {why}"),
                    MemberState::NotAsked => "not asked".to_string(),
                }),
                db_size_bytes: mf.db_size.map_or(Val::Null, Val::Known),
            })
            .collect(),
    );
    m.alarms = Val::Known(facts.alarms.clone());
    m.static_ip_holder = Val::Known(match &facts.ip_holder {
        IpHolder::ForwardingRule => "load balancer".to_string(),
        IpHolder::Instance(name) => format!("replica {name}"),
        IpHolder::Nobody => "nobody".to_string(),
    });
    m.last_backup = facts.last_backup.as_deref().map_or(Val::Null, known);
    m.ca_expires_at = time(facts.ca_expires_at);
    m
}
