//! New CAs for a running cluster without a window in which any master refuses a certificate another one presents
//! (`ca_rotation` on the cluster). A CA whose key leaked issues any identity the masters accept (the cluster CA:
//! any user or group, `system:masters` among them; the etcd CAs: a peer or a client of every key), and certificates
//! cannot be revoked, so a cluster must be able to change its CAs while it runs. All three rotate together: they
//! live in the same secret, so whatever exposed one exposed the others.
//!
//! The stages and their rules are every rotation's (`domain::rotation`); what they mean for CAs:
//! - `started`: next CAs are made; every master trusts both (the API server's client CA, the kubeconfigs of its
//!   components, etcd's peer and client CAs) and still presents certificates the current CAs issued. The cluster's
//!   `ca_certificate` becomes both certificates, which is what clients and nodes must trust before `switched`;
//! - `switched`: every master presents certificates the next CAs issued and still trusts both, as does the
//!   provider's own etcd client certificate and every admin credential minted from now on;
//! - the setting removed: the next CAs become the CAs; what the old ones issued (nodes' kubelet client
//!   certificates, admin credentials minted before `switched`) is refused from then on.

pub use super::rotation::{Key, KeyChange, MasterKeys, Rotation, Stage};

/// The cluster's attribute, and the masters' build setting while a rotation is under way.
pub const ATTRIBUTE: &str = "ca_rotation";

pub const ROTATION: Rotation = Rotation {
    attribute: ATTRIBUTE,
    what: "CAs",
    stages: [
        "make next CAs that every master trusts beside the current ones",
        "have the masters present certificates the next CAs issue",
        "forget the old CAs",
    ],
    why_started_first: "Masters present certificates the next CAs issued only once every master trusts them, or a \
                        rolled master's API server and etcd member are refused by those not rolled yet.",
    why_masters_first: "or a master would be presented a certificate from a CA it does not trust",
    describe,
};

fn describe(change: KeyChange, after: Stage) -> &'static str {
    match change {
        KeyChange::Keep if after == Stage::Switched => {
            "every replica rolls to certificates the next CAs issue, and admin credentials are issued by the next \
             cluster CA; both CAs are still trusted. A client or node that trusts the old cluster CA alone stops \
             trusting the API servers: give each the cluster's `ca_certificate` (both CAs) first"
        }
        KeyChange::Keep => {
            "every replica rolls to certificates the current CAs issue again; both CAs are still trusted"
        }
        KeyChange::MakeNext => {
            "next CAs are made and every replica rolls to trust them beside the current ones, which still issue \
             every certificate; the cluster's `ca_certificate` becomes both CAs' certificates: give it to every \
             client and node (kubeconfigs, kubelets' CA files) before \"switched\""
        }
        KeyChange::DropNext => {
            "the next CAs are forgotten and every replica rolls to trust the current CAs alone; the cluster's \
             `ca_certificate` is the current CA's again"
        }
        KeyChange::PromoteNext => {
            "the next CAs become the CAs and every replica rolls to trust them alone: certificates the old CAs \
             issued are refused from then on (nodes' kubelet client certificates, admin credentials minted before \
             \"switched\"); the cluster's `ca_certificate` becomes the new CA's alone"
        }
    }
}

/// The cluster's three CAs (`ha_pki::ClusterCas`), each checked on every master on its own: a master could trust
/// the next cluster CA and not the next etcd peer CA only if its files were edited, and that must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ca {
    Cluster,
    EtcdPeer,
    EtcdClient,
}

impl Ca {
    pub const ALL: [Ca; 3] = [Ca::Cluster, Ca::EtcdPeer, Ca::EtcdClient];

    pub fn name(self) -> &'static str {
        match self {
            Ca::Cluster => "cluster CA",
            Ca::EtcdPeer => "etcd peer CA",
            Ca::EtcdClient => "etcd client CA",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Stage::*;
    use super::*;

    #[test]
    fn the_plan_names_what_each_change_does_to_clients() {
        let (summary, detail) = ROTATION.plan_note("prod", Steady, Started).unwrap();
        assert!(
            summary.contains("changes its CAs: ca_rotation = \"started\""),
            "{summary}"
        );
        assert!(
            detail.contains("give it to every client and node"),
            "{detail}"
        );
        let (_, detail) = ROTATION.plan_note("prod", Started, Switched).unwrap();
        assert!(
            detail.contains("stops trusting the API servers"),
            "{detail}"
        );
        let (_, detail) = ROTATION.plan_note("prod", Switched, Started).unwrap();
        assert!(detail.contains("current CAs issue again"), "{detail}");
        let (_, detail) = ROTATION.plan_note("prod", Started, Steady).unwrap();
        assert!(detail.contains("trust the current CAs alone"), "{detail}");
        let (summary, detail) = ROTATION.plan_note("prod", Switched, Steady).unwrap();
        assert!(summary.contains("removed") && detail.contains("refused from then on"));
    }

    #[test]
    fn a_stage_out_of_order_says_why_for_certificates() {
        let (_, detail) = ROTATION.change(true, Steady, Switched).unwrap_err();
        assert!(detail.contains("etcd member are refused"), "{detail}");
        let (summary, detail) = ROTATION.parse(Some("yes")).unwrap_err();
        assert!(summary.contains(ATTRIBUTE) && detail.contains("forget the old CAs"));
    }
}
