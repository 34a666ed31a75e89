//! `ha_master_cluster`'s `service_account_key_rotation` (`domain::service_account_rotation` says which stages
//! there are and why): judged at plan from state, and at apply against the masters as they run, before the keys
//! change. The keys themselves live where the cluster's others do: once in its state (`private_keys`, the next key
//! beside the current one) and in its keys secret, which replicas read when they roll.

use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};
use tfplugin_framework::{Val, replaces};

use super::cluster_model::{ClusterModel, PrivateKeys};
use ha_domain::service_account_rotation::{ATTRIBUTE, KeyChange, Stage, change, plan_note};

/// The stage a model records; a value the validator refused counts as none (the validator's error stands).
fn stage(m: &ClusterModel) -> Stage {
    Stage::parse(m.service_account_key_rotation.known().map(String::as_str))
        .unwrap_or(Stage::Steady)
}

/// Plan: refuses a change of stage that is not safe, says what the apply will do, and leaves `private_keys`
/// unknown when the apply changes them (a next key made, dropped or made the key).
pub(super) fn plan(
    prior: Option<&ClusterModel>,
    p: &mut ClusterModel,
    requires_replace: &[AttributePath],
    diags: &mut Diagnostics,
) {
    if p.service_account_key_rotation.is_unknown() {
        return;
    }
    let prior = prior.filter(|m| !replaces(*m, p, requires_replace));
    let (before, after) = (prior.map_or(Stage::Steady, stage), stage(p));
    let at = || AttributePath::attr(ATTRIBUTE);
    let keys_change = match change(prior.is_some(), before, after) {
        Ok(c) => c,
        Err((summary, detail)) => {
            diags.push(Diagnostic::error(summary, detail).at(at()));
            return;
        }
    };
    if before == after {
        return;
    }
    let name = p.name.known().cloned().unwrap_or_default();
    if !p.keys_in_secret() {
        diags.push(
            Diagnostic::error(
                format!("Cluster {name}'s service-account key cannot rotate while its keys are in state"),
                "A rotation keeps the next key where the cluster keeps its others, and replicas read it from \
                 the cluster's secret. Move the keys there first (`ca_key_store = \"secret_manager\"`, an apply \
                 of its own), then start the rotation."
                    .to_string(),
            )
            .at(at()),
        );
        return;
    }
    if let Some((summary, detail)) = plan_note(&name, before, after) {
        diags.push(Diagnostic::warning(summary, detail).at(at()));
    }
    if keys_change != KeyChange::Keep {
        p.private_keys = Val::Unknown;
    }
}

/// Apply: the cluster's keys after this change of stage, from those in its state (the next key made, dropped or
/// made the key); `None` when the stage does not change them. Only the service-account keys move: a brought CA's
/// key stays out of state.
pub(super) fn rotated_keys(
    prior: &ClusterModel,
    p: &ClusterModel,
) -> Option<Result<PrivateKeys, String>> {
    let keys_change = change(true, stage(prior), stage(p)).ok()?;
    let mut keys = prior.private_keys.known()?.clone();
    match keys_change {
        KeyChange::Keep => return None,
        KeyChange::MakeNext => match ha_pki::service_account_key() {
            Ok(k) => keys.next_service_account = Val::Known(k),
            Err(e) => return Some(Err(format!("making the next service-account key: {e}"))),
        },
        KeyChange::DropNext => keys.next_service_account = Val::Null,
        KeyChange::PromoteNext => {
            let Some(next) = keys.next_service_account.known().cloned() else {
                return Some(Err(
                    "the rotation's next service-account key is not in the cluster's state".into(),
                ));
            };
            keys.service_account = Val::Known(next);
            keys.next_service_account = Val::Null;
        }
    }
    Some(Ok(keys))
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

    #[test]
    fn the_apply_makes_drops_and_promotes_the_next_key_and_touches_no_other() {
        let with = |stage, next| {
            let prior = model(stage, next);
            move |after: Option<&str>| {
                let p = ClusterModel {
                    service_account_key_rotation: after.map_or(Val::Null, |s| Val::Known(s.into())),
                    ..prior.clone()
                };
                rotated_keys(&prior, &p).map(Result::unwrap)
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
