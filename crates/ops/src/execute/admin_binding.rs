//! `ReplicaStep::AwaitAdminBinding`: the replica's API server finds the masters' `ha-master:cluster-admins`
//! binding, so a new cluster's default admin credential (`domain::admin_access::BOUND_GROUP`) is served when the
//! apply ends. The addon manager creates the binding (`EnsureExists`) on its start and then every minute, some
//! time after the first API server of a new etcd answers; nothing else here can hurry it.

use super::*;
use ha_domain::admin_access::{BOUND_GROUP, LEGACY_GROUP};
use ha_pki::{AdminCertRequest, issue_admin_cert};

/// Who the provider is while it looks: a member of `system:masters`, for minutes. The binding is read, not used,
/// so a binding whose subjects the user emptied (a revocation) is found all the same.
const LOOKER: &str = "ha-master-provider";
const LOOKER_VALIDITY: Duration = Duration::from_secs(10 * 60);
/// One read every half second: the binding appears once, within a minute or so of the API server's start.
const EVERY: Duration = Duration::from_millis(500);
const READ_TIMEOUT: Duration = Duration::from_secs(2);

impl ReplicaRun<'_> {
    /// `ReplicaStep::AwaitAdminBinding`.
    pub(super) async fn await_admin_binding(&mut self) -> Result<()> {
        let deadline = self.deadline;
        let me = self.me();
        let spec = &self.ctx.spec;
        // A cluster that cannot sign (imported: no CA key anywhere) made none of its masters' certificates either;
        // there is no credential to look with, and its default credential is not the bound group's.
        let Ok(issuing) = spec.issuing_cas() else {
            tracing::info!("{}: no CA key to look for the admin binding with", me.name);
            return Ok(());
        };
        let looker = issue_admin_cert(
            &issuing.cluster_ca,
            &AdminCertRequest {
                user: LOOKER.into(),
                groups: vec![LEGACY_GROUP.into()],
                validity: LOOKER_VALIDITY,
            },
        )?;
        let vm = self.fresh_vm(&me.name).await?;
        let cas = spec.trusted_cas()?;
        let at = own_api(&me, &vm, &cas.cluster_ca, spec.master.api_port)?;
        let path = format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{BOUND_GROUP}");
        loop {
            let last = match get(&at, &path, Some(&looker.cert), READ_TIMEOUT).await {
                Ok(a) if a.status == 200 => {
                    tracing::info!("{}: the {BOUND_GROUP} binding exists", me.name);
                    return Ok(());
                }
                Ok(a) if a.status == 404 => "not created yet".to_string(),
                Ok(a) => format!("the read answered {}", a.status),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(OpError::Other(format!(
                    "the API server of replica {} did not find the clusterrolebinding {BOUND_GROUP} in time ({last}). \
                     The addon manager on each master creates it from /etc/kubernetes/addons/cluster-admins-rbac.yaml \
                     within a minute or two of the API server's start, and until then a credential in the group is \
                     refused. Check the kube-addon-manager pod on {}, then apply again: the next apply resumes here.",
                    me.name, me.name
                )));
            }
            tokio::time::sleep(EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    /// The binding waited for is the one the masters' addon makes, whose group new clusters' credentials name.
    #[test]
    fn the_binding_waited_for_is_the_one_the_masters_carry() {
        assert_eq!(
            ha_domain::admin_access::BOUND_GROUP,
            ha_master::CLUSTER_ADMINS_GROUP
        );
    }
}
