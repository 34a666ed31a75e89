//! `ha_master_cluster`'s rotations, `service_account_key_rotation` and `ca_rotation` (`domain::rotation` says
//! which stages there are and why): judged at plan from state, and at apply against the masters as they run,
//! before the keys change. The keys themselves live where the cluster's others do: once in its state
//! (`private_keys`, each next key beside the current one) and in its keys secret, which replicas read when they
//! roll. While the CAs rotate, each CA certificate attribute (and the spec's) is a bundle: the current CA, then the
//! next.

use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};
use tfplugin_framework::{Val, replaces};

use super::cluster_model::{ClusterModel, PrivateKeys};
use ha_domain::rotation::{KeyChange, Rotation, Stage};
use ha_domain::{ca_rotation, service_account_rotation};

/// One rotation and the attribute of the model that records its stage.
struct Kind {
    rotation: &'static Rotation,
    stage_of: fn(&ClusterModel) -> &Val<String>,
}

const SERVICE_ACCOUNT: Kind = Kind {
    rotation: &service_account_rotation::ROTATION,
    stage_of: |m| &m.service_account_key_rotation,
};

const CAS: Kind = Kind {
    rotation: &ca_rotation::ROTATION,
    stage_of: |m| &m.ca_rotation,
};

impl Kind {
    /// The stage a model records; a value the validator refused counts as none (the validator's error stands).
    fn stage(&self, m: &ClusterModel) -> Stage {
        self.rotation
            .parse((self.stage_of)(m).known().map(String::as_str))
            .unwrap_or(Stage::Steady)
    }

    /// What this change of stage does to the keys, when the plan may go on; `None` when the stage does not
    /// change or cannot (the refusal said at the attribute).
    fn plan(
        &self,
        prior: Option<&ClusterModel>,
        p: &ClusterModel,
        diags: &mut Diagnostics,
    ) -> Option<KeyChange> {
        if (self.stage_of)(p).is_unknown() {
            return None;
        }
        let rotation = self.rotation;
        let (before, after) = (
            prior.map_or(Stage::Steady, |m| self.stage(m)),
            self.stage(p),
        );
        let at = || AttributePath::attr(rotation.attribute);
        let keys_change = match rotation.change(prior.is_some(), before, after) {
            Ok(c) => c,
            Err((summary, detail)) => {
                diags.push(Diagnostic::error(summary, detail).at(at()));
                return None;
            }
        };
        if before == after {
            return None;
        }
        let name = p.name.known().cloned().unwrap_or_default();
        if let Some((summary, detail)) = self.refusal(&name, p) {
            diags.push(Diagnostic::error(summary, detail).at(at()));
            return None;
        }
        if let Some((summary, detail)) = rotation.plan_note(&name, before, after) {
            diags.push(Diagnostic::warning(summary, detail).at(at()));
        }
        Some(keys_change)
    }

    /// Why this cluster cannot rotate at all, if it cannot.
    fn refusal(&self, name: &str, p: &ClusterModel) -> Option<(String, String)> {
        let what = self.rotation.what;
        if !p.keys_in_secret() {
            return Some((
                format!("Cluster {name}'s {what} cannot rotate while its keys are in state"),
                "A rotation keeps the next keys where the cluster keeps its others, and replicas read them from \
                 the cluster's secret. Move the keys there first (`ca_key_store = \"secret_manager\"`, an apply \
                 of its own), then start the rotation."
                    .to_string(),
            ));
        }
        // An imported cluster has no CA key at all: it cannot build a master, and a rotation builds every one.
        // (A brought cluster CA rotates to a next CA its user brings: `brought_ca_rotation`.)
        let holds_ca_keys = p
            .private_keys
            .known()
            .and_then(PrivateKeys::keys)
            .is_some_and(|k| !k.ca_key.is_empty() || k.brings_own_ca());
        if self.rotation.attribute == ca_rotation::ATTRIBUTE && !holds_ca_keys {
            return Some((
                format!("Cluster {name}'s CAs cannot rotate: it holds no CA key"),
                "The cluster was imported, and its CA keys are nowhere the provider can read (masters never \
                 hold them), so it cannot sign a certificate for a master, and each stage of a rotation builds \
                 every master again. Rotate its CAs the way they were made, or move the workload to a cluster \
                 made by this provider."
                    .to_string(),
            ));
        }
        None
    }
}

/// Plan: refuses a change of stage that is not safe, says what the apply will do, and leaves `private_keys`
/// unknown when the apply changes them (a next key made, dropped or made the key), with the CA certificates
/// when the CAs' do.
pub(super) fn plan(
    prior: Option<&ClusterModel>,
    p: &mut ClusterModel,
    requires_replace: &[AttributePath],
    diags: &mut Diagnostics,
) {
    let prior = prior.filter(|m| !replaces(*m, p, requires_replace));
    let brought = prior.is_some_and(ClusterModel::brings_own_ca);
    let service_account = SERVICE_ACCOUNT.plan(prior, p, diags);
    let cas = CAS.plan(prior, p, diags);
    if [service_account, cas]
        .iter()
        .any(|c| c.is_some_and(|c| c != KeyChange::Keep))
    {
        p.private_keys = Val::Unknown;
    }
    if let (Some(change), Some(prior)) = (cas, prior) {
        let certificates = match change {
            KeyChange::Keep => return,
            KeyChange::MakeNext => None,
            KeyChange::DropNext => CaCertificates::of(prior).map(|c| c.one(0)),
            KeyChange::PromoteNext => CaCertificates::of(prior).map(|c| c.one(1)),
        };
        CaCertificates::set(p, certificates.as_ref(), brought);
    }
}

/// The cluster's three CA certificates as its spec carries them, each one certificate or, while the CAs rotate, a
/// bundle of two (the current CA, then the next). The cluster's attributes are the same, but for a brought cluster
/// CA: Terraform holds `ca_certificate` to the configuration, so it stays the current CA alone.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CaCertificates {
    pub cluster: String,
    pub etcd_peer: String,
    pub etcd_client: String,
}

impl CaCertificates {
    pub(super) fn of(m: &ClusterModel) -> Option<CaCertificates> {
        let spec = m.spec.known()?;
        Some(CaCertificates {
            cluster: spec.ca_certificate.known()?.clone(),
            etcd_peer: spec.etcd_peer_ca_certificate.known()?.clone(),
            etcd_client: spec.etcd_client_ca_certificate.known()?.clone(),
        })
    }

    /// The `i`th certificate of each bundle (0: the current CAs, 1: the next ones); each bundle as it is when it
    /// holds no such certificate, which loading the CAs then refuses.
    fn one(&self, i: usize) -> CaCertificates {
        let pick = |bundle: &str| ha_pki::certificate_of_bundle(bundle, i);
        CaCertificates {
            cluster: pick(&self.cluster),
            etcd_peer: pick(&self.etcd_peer),
            etcd_client: pick(&self.etcd_client),
        }
    }

    /// Sets the cluster's spec and attributes to `c` (unknown when `None`: made by the apply); `ca_certificate`
    /// only when the provider made the cluster CA (`brought` is false): a brought one's is the configuration's.
    pub(super) fn set(p: &mut ClusterModel, c: Option<&CaCertificates>, brought: bool) {
        let v = |f: fn(&CaCertificates) -> &String| {
            c.map_or(Val::Unknown, |c| Val::Known(f(c).clone()))
        };
        if !brought {
            p.ca_certificate = v(|c| &c.cluster);
        }
        p.etcd_peer_ca_certificate = v(|c| &c.etcd_peer);
        p.etcd_client_ca_certificate = v(|c| &c.etcd_client);
        if let Val::Known(spec) = &mut p.spec {
            spec.ca_certificate = v(|c| &c.cluster);
            spec.etcd_peer_ca_certificate = p.etcd_peer_ca_certificate.clone();
            spec.etcd_client_ca_certificate = p.etcd_client_ca_certificate.clone();
        }
    }
}

/// What an apply's change of stage makes of the cluster's keys, and of its CA certificates when the CAs' change.
#[derive(Debug)]
pub(super) struct Rotated {
    pub keys: PrivateKeys,
    pub certificates: Option<CaCertificates>,
}

/// Apply: the cluster's keys after these changes of stage, from those in its state (a next key made, dropped or
/// made the key); `None` when no stage change touches them. A brought CA's key stays out of state. `generation`
/// names the next CAs (`ha_pki::ClusterCas::generate_next`).
pub(super) fn rotated(
    prior: &ClusterModel,
    p: &ClusterModel,
    generation: &str,
) -> Option<Result<Rotated, String>> {
    let change = |k: &Kind| k.rotation.change(true, k.stage(prior), k.stage(p)).ok();
    let (sa, ca) = (change(&SERVICE_ACCOUNT)?, change(&CAS)?);
    if sa == KeyChange::Keep && ca == KeyChange::Keep {
        return None;
    }
    let mut keys = prior.private_keys.known()?.clone();
    let next = super::brought_ca_rotation::next_of(prior, p);
    Some(
        rotate_service_account(&mut keys, sa)
            .and_then(|()| rotate_cas(prior, &mut keys, ca, generation, next))
            .map(|certificates| Rotated { keys, certificates }),
    )
}

fn rotate_service_account(keys: &mut PrivateKeys, change: KeyChange) -> Result<(), String> {
    match change {
        KeyChange::Keep => {}
        KeyChange::MakeNext => {
            keys.next_service_account = Val::Known(
                ha_pki::service_account_key()
                    .map_err(|e| format!("making the next service-account key: {e}"))?,
            )
        }
        KeyChange::DropNext => keys.next_service_account = Val::Null,
        KeyChange::PromoteNext => {
            let Some(next) = keys.next_service_account.known().cloned() else {
                return Err(
                    "the rotation's next service-account key is not in the cluster's state".into(),
                );
            };
            keys.service_account = Val::Known(next);
            keys.next_service_account = Val::Null;
        }
    }
    Ok(())
}

/// The CA certificates after `change`, with `keys` changed to match; `None` when they stay. `brought_next` is the
/// next cluster CA of a brought one (`brought_ca_rotation::next_of`): its key stays out of state, as the CA's.
fn rotate_cas(
    prior: &ClusterModel,
    keys: &mut PrivateKeys,
    change: KeyChange,
    generation: &str,
    brought_next: Option<Result<ha_pki::CertKey, String>>,
) -> Result<Option<CaCertificates>, String> {
    let current = || {
        CaCertificates::of(prior)
            .ok_or_else(|| "the cluster's CA certificates are not in its state".to_string())
    };
    let next_keys = [
        &mut keys.next_ca,
        &mut keys.next_etcd_peer_ca,
        &mut keys.next_etcd_client_ca,
    ];
    match change {
        KeyChange::Keep => Ok(None),
        KeyChange::MakeNext => {
            let now = current()?;
            let name = prior.name.known().cloned().unwrap_or_default();
            let mut next = ha_pki::ClusterCas::generate_next(&name, generation)
                .map_err(|e| format!("making the next CAs: {e}"))?;
            if let Some(brought) = brought_next {
                next.cluster_ca = ha_pki::CertKey {
                    key_pem: String::new(),
                    ..brought?
                };
            }
            let [ca, peer, client] = next_keys;
            *ca = Val::Known(next.cluster_ca.key_pem);
            *peer = Val::Known(next.etcd_peer_ca.key_pem);
            *client = Val::Known(next.etcd_client_ca.key_pem);
            let both = |a: &str, b: &str| ha_pki::bundle_of([a, b]);
            Ok(Some(CaCertificates {
                cluster: both(&now.cluster, &next.cluster_ca.cert_pem),
                etcd_peer: both(&now.etcd_peer, &next.etcd_peer_ca.cert_pem),
                etcd_client: both(&now.etcd_client, &next.etcd_client_ca.cert_pem),
            }))
        }
        KeyChange::DropNext => {
            for k in next_keys {
                *k = Val::Null;
            }
            Ok(Some(current()?.one(0)))
        }
        KeyChange::PromoteNext => {
            let promoted = [
                &mut keys.ca,
                &mut keys.etcd_peer_ca,
                &mut keys.etcd_client_ca,
            ];
            for (key, next) in promoted.into_iter().zip(next_keys) {
                let Some(k) = next.known().cloned() else {
                    return Err("the rotation's next CA keys are not in the cluster's state".into());
                };
                *key = Val::Known(k);
                *next = Val::Null;
            }
            Ok(Some(current()?.one(1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(stage: Option<&str>, next: Option<&str>) -> ClusterModel {
        ClusterModel {
            name: Val::Known("prod".into()),
            ca_key_store: Val::Known(super::super::cluster_model::key_store::SECRET_MANAGER.into()),
            service_account_key_rotation: stage.map_or(Val::Null, |s| Val::Known(s.into())),
            private_keys: Val::Known(PrivateKeys {
                ca: Val::Known(String::new()),
                etcd_peer_ca: Val::Known("peer".into()),
                etcd_client_ca: Val::Known("client".into()),
                service_account: Val::Known("K".into()),
                next_service_account: next.map_or(Val::Null, |k| Val::Known(k.into())),
                ..PrivateKeys::default()
            }),
            ..ClusterModel::default()
        }
    }

    fn planned(prior: &ClusterModel, stage: Option<&str>) -> (ClusterModel, Diagnostics) {
        let mut p = ClusterModel {
            service_account_key_rotation: stage.map_or(Val::Null, |s| Val::Known(s.into())),
            ..prior.clone()
        };
        let mut diags = Diagnostics::new();
        plan(Some(prior), &mut p, &[], &mut diags);
        (p, diags)
    }

    #[test]
    fn plan_names_each_stage_and_leaves_changed_keys_unknown() {
        let (p, diags) = planned(&model(None, None), Some("started"));
        assert!(p.private_keys.is_unknown());
        assert!(!diags.has_error());
        let (p, diags) = planned(&model(Some("started"), Some("N")), Some("switched"));
        assert!(p.private_keys.known().is_some(), "switching changes no key");
        assert!(!diags.has_error());
        let (p, _) = planned(&model(None, None), None);
        assert!(p.private_keys.known().is_some());
        let (_, diags) = planned(&model(None, None), Some("switched"));
        assert!(diags.has_error());
        // Keys in state: refused.
        let mut in_state = model(None, None);
        in_state.ca_key_store =
            Val::Known(super::super::cluster_model::key_store::TERRAFORM_STATE.into());
        let (_, diags) = planned(&in_state, Some("started"));
        assert!(diags.has_error());
    }

    /// A brought cluster CA rotates to the next CA its user gave (its key out of state, as the CA's), beside next
    /// etcd CAs the provider makes; the model's `ca_certificate` stays the configuration's while the spec's is the
    /// bundle. An imported cluster, with no CA key at all, is refused.
    #[test]
    fn a_brought_ca_rotates_to_the_given_next_ca_and_an_imported_one_not_at_all() {
        let cas = ha_pki::ClusterCas::generate("prod").unwrap();
        let (_, next) = ha_pki::Issuer::generate("corp2").unwrap();
        let mut prior = model(None, None);
        prior.private_keys = Val::Known(PrivateKeys {
            ca: Val::Known(String::new()),
            etcd_peer_ca: Val::Known(cas.etcd_peer_ca.key_pem.clone()),
            etcd_client_ca: Val::Known(cas.etcd_client_ca.key_pem.clone()),
            service_account: Val::Known("K".into()),
            ..PrivateKeys::default()
        });
        prior.ca_certificate = Val::Known(cas.cluster_ca.cert_pem.clone());
        let mut spec = super::super::cluster_model::spec_of(&prior, None);
        spec.ca_certificate = prior.ca_certificate.clone();
        spec.etcd_peer_ca_certificate = Val::Known(cas.etcd_peer_ca.cert_pem.clone());
        spec.etcd_client_ca_certificate = Val::Known(cas.etcd_client_ca.cert_pem.clone());
        prior.spec = Val::Known(spec);
        let mut p = ClusterModel {
            ca_rotation: Val::Known("started".into()),
            next_ca_certificate: Val::Known(next.cert_pem.clone()),
            next_ca_private_key_wo: Val::Known(next.key_pem.clone()),
            ..prior.clone()
        };
        let rotated = rotated(&prior, &p, "r1").unwrap().unwrap();
        assert_eq!(
            rotated.keys.next_ca,
            Val::Known(String::new()),
            "the next CA's key stays out of state"
        );
        assert!(
            rotated
                .keys
                .next_etcd_peer_ca
                .known()
                .is_some_and(|k| k.contains("PRIVATE KEY"))
        );
        let certificates = rotated.certificates.unwrap();
        assert_eq!(
            ha_pki::certificates_in(&certificates.cluster).unwrap(),
            vec![cas.cluster_ca.cert_pem.clone(), next.cert_pem.clone()]
        );
        CaCertificates::set(&mut p, Some(&certificates), true);
        assert_eq!(
            p.ca_certificate, prior.ca_certificate,
            "the configuration's"
        );
        assert_eq!(
            p.spec.known().unwrap().ca_certificate,
            Val::Known(certificates.cluster.clone())
        );
        // Without the next key, the apply stops before anything changes.
        let no_key = ClusterModel {
            next_ca_private_key_wo: Val::Null,
            ..p.clone()
        };
        assert!(rotated_err(&prior, &no_key).contains("next_ca_private_key_wo"));

        let mut imported = model(None, None);
        imported.private_keys = Val::Known(PrivateKeys {
            ca: Val::Known(String::new()),
            etcd_peer_ca: Val::Known(String::new()),
            etcd_client_ca: Val::Known(String::new()),
            service_account: Val::Known("K".into()),
            ..PrivateKeys::default()
        });
        let mut p = ClusterModel {
            ca_rotation: Val::Known("started".into()),
            ..imported.clone()
        };
        let mut diags = Diagnostics::new();
        plan(Some(&imported), &mut p, &[], &mut diags);
        assert!(
            format!("{diags:?}").contains("it holds no CA key"),
            "{diags:?}"
        );
    }

    fn rotated_err(prior: &ClusterModel, p: &ClusterModel) -> String {
        match rotated(prior, p, "r1") {
            Some(Err(e)) => e,
            other => panic!(
                "not refused: {:?}",
                other.map(|r| r.map(|r| r.certificates))
            ),
        }
    }

    #[test]
    fn the_apply_makes_drops_and_promotes_the_next_key_and_touches_no_other() {
        let with = |stage, next| {
            let prior = model(stage, next);
            move |after: Option<&str>| {
                let p = ClusterModel {
                    service_account_key_rotation: after.map_or(Val::Null, |s| Val::Known(s.into())),
                    ..prior.clone()
                };
                rotated(&prior, &p, "r1").map(|r| r.unwrap().keys)
            }
        };
        let made = with(None, None)(Some("started")).unwrap();
        assert!(
            made.next_service_account
                .known()
                .is_some_and(|k| k.contains("PRIVATE KEY"))
        );
        assert_eq!(made.service_account, Val::Known("K".into()));
        assert_eq!(
            made.ca,
            Val::Known(String::new()),
            "a brought CA's key stays out of state"
        );
        assert!(with(Some("started"), Some("N"))(Some("switched")).is_none());
        let dropped = with(Some("started"), Some("N"))(None).unwrap();
        assert_eq!(
            (dropped.service_account, dropped.next_service_account),
            (Val::Known("K".into()), Val::Null)
        );
        let promoted = with(Some("switched"), Some("N"))(None).unwrap();
        assert_eq!(
            (promoted.service_account, promoted.next_service_account),
            (Val::Known("N".into()), Val::Null)
        );
    }
}
