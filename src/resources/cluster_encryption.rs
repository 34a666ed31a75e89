//! `ha_master_cluster`'s plan-time judgement of `secrets_encryption_key` (`domain::secrets_encryption`): an
//! existing cluster keeps the key it was made with, and a new cluster's key is read before anything is made, so a
//! missing version or a payload that is not a key is named at plan rather than when the first master renders.
//! A cluster this plan replaces (a new name or region, judged by core's own rule on the replacement paths) is a new
//! cluster: its key may be anything.

use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};
use tfplugin_framework::{Val, replaces};

use super::cluster_model::ClusterModel;
use ha_settings::Settings;

pub(super) async fn check(
    settings: &Settings,
    prior: Option<&ClusterModel>,
    p: &ClusterModel,
    requires_replace: &[AttributePath],
    diags: &mut Diagnostics,
) {
    let prior = prior.filter(|m| !replaces(*m, p, requires_replace));
    let at = AttributePath::attr("secrets_encryption_key");
    let after = match &p.secrets_encryption_key {
        Val::Unknown => return,
        v => v.known().map(String::as_str),
    };
    let after_reads = match &p.secrets_decryption_keys {
        Val::Unknown => return,
        v => v.known().cloned().unwrap_or_default(),
    };
    let before = prior
        .and_then(|m| m.secrets_encryption_key.known())
        .map(String::as_str);
    let before_reads = prior
        .and_then(|m| m.secrets_decryption_keys.known().cloned())
        .unwrap_or_default();
    let keys = |writes, reads| ha_domain::secrets_encryption::Keys { writes, reads };
    let (before_keys, after_keys) = (
        keys(before, &before_reads[..]),
        keys(after, &after_reads[..]),
    );
    if let Err((summary, detail)) =
        ha_domain::secrets_encryption::change(prior.is_some(), before_keys, after_keys)
    {
        let at = if summary.starts_with("secrets_decryption_keys") {
            AttributePath::attr("secrets_decryption_keys")
        } else {
            at
        };
        diags.push(Diagnostic::error(summary, detail).at(at));
        return;
    }
    let dropped = ha_domain::secrets_encryption::dropped(before_keys, after_keys);
    if !dropped.is_empty() {
        diags.push(
            Diagnostic::warning(
                format!(
                    "The API servers will stop reading Secrets encrypted with {}",
                    dropped.join(", ")
                ),
                "Before any replica rolls, the apply looks through etcd and refuses while any Secret is still \
                 encrypted with such a key, naming how many; rewrite them first with \
                 `kubectl get secrets --all-namespaces -o json | kubectl replace -f -`. Snapshots taken before \
                 still need the key to be restored: keep its version as long as them."
                    .to_string(),
            )
            .at(AttributePath::attr("secrets_decryption_keys")),
        );
    }
    // Every version the cluster did not read before is read now, so a wrong one is heard of at plan; an imported
    // cluster's must hold the key its masters encrypt with.
    let adopted = before.and_then(ha_domain::secrets_encryption::adopted);
    let new_versions = after
        .into_iter()
        .map(|w| (w, at.clone()))
        .chain(
            after_reads
                .iter()
                .map(|r| (r.as_str(), AttributePath::attr("secrets_decryption_keys"))),
        )
        .filter(|(v, _)| prior.is_none() || adopted.is_some() || !before_keys.read(v));
    for (reference, at) in new_versions {
        read_version(
            settings,
            reference,
            adopted.filter(|_| Some(reference) == after),
            at,
            diags,
        )
        .await;
    }
}

/// Reads `reference` as the plan does, and for an imported cluster checks it holds key `adopted`.
async fn read_version(
    settings: &Settings,
    reference: &str,
    adopted: Option<&str>,
    at: AttributePath,
    diags: &mut Diagnostics,
) {
    // A read-only provider reads no key; it cannot apply this plan either (`read_only::refused`).
    if settings.read_only {
        return;
    }
    let read = tokio::time::timeout(
        ha_ops::plan_check::PATIENCE,
        ha_ops::secrets_encryption::read(settings, reference),
    )
    .await
    .unwrap_or_else(|_| {
        Err(ha_ops::OpError::Other(
            "Secret Manager did not answer".into(),
        ))
    });
    match read {
        Ok(key) => {
            if let Some(name) = adopted
                && let Err((summary, detail)) =
                    ha_domain::secrets_encryption::adopt(name, reference, &key.name())
            {
                diags.push(Diagnostic::error(summary, detail).at(at));
            }
        }
        Err(ha_ops::OpError::Refused(summary, detail)) => {
            diags.push(Diagnostic::error(summary, detail).at(at));
        }
        Err(e) => diags.push(
            Diagnostic::error(
                format!("Could not read Secret Manager version {reference}"),
                format!(
                    "{e}. The provider reads each key at plan so a wrong version is heard of before anything is \
                     made; its credentials need `secretmanager.versions.access` on the secret. Run plan again \
                     once Secret Manager answers."
                ),
            )
            .at(at),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(key: Option<&str>) -> ClusterModel {
        ClusterModel {
            secrets_encryption_key: key.map_or(Val::Null, |k| Val::Known(k.into())),
            secrets_decryption_keys: Val::Null,
            service_account_key_rotation: Val::Null,
            ca_rotation: Val::Null,
            ..ClusterModel::default()
        }
    }

    const KEY: &str = "projects/p/secrets/k/versions/1";

    /// The replacement paths the framework plans from the cluster's own schema, before `modify_plan`.
    fn replacement_paths(prior: &ClusterModel, p: &ClusterModel) -> Vec<AttributePath> {
        use tfplugin_framework::Resource;
        let schema = super::super::cluster::ClusterResource {
            settings: Default::default(),
        }
        .schema();
        let value = |m: &ClusterModel| tfplugin_framework::model::to_value(m).unwrap();
        let (prior, planned) = (value(prior), value(p));
        tfplugin_framework::plan::plan(&schema, &planned, Some(&prior), &planned).requires_replace
    }

    async fn check_change(before: &ClusterModel, after: &ClusterModel, diags: &mut Diagnostics) {
        let paths = replacement_paths(before, after);
        check(&Settings::default(), Some(before), after, &paths, diags).await;
    }

    /// Turning encryption off in one step needs no read of Secret Manager, so the rule is seen without a network:
    /// refused on a cluster the plan keeps (whatever else changes in place), allowed on one it replaces for a new
    /// name.
    #[tokio::test]
    async fn a_kept_cluster_keeps_its_key_and_a_replaced_one_starts_afresh() {
        let named = |name: &str, key: Option<&str>| ClusterModel {
            name: Val::Known(name.into()),
            ..model(key)
        };
        let before = named("prod", Some(KEY));
        let at = |diags: &Diagnostics| -> Vec<String> {
            diags
                .iter()
                .filter_map(|d| d.attribute.as_ref().map(|p| p.to_string()))
                .collect()
        };
        for kept in [
            named("prod", None),
            ClusterModel {
                machine_type: Val::Known("e2-standard-8".into()),
                region: Val::Unknown,
                ..named("prod", None)
            },
        ] {
            let mut diags = Diagnostics::new();
            check_change(&before, &kept, &mut diags).await;
            assert!(
                diags.has_error(),
                "turning off on a kept cluster: {diags:?}"
            );
            // The way out is to keep reading the key while it is turned off: the list is where it goes.
            assert_eq!(at(&diags), ["secrets_decryption_keys"]);
        }

        let mut diags = Diagnostics::new();
        check_change(&before, &named("staging", None), &mut diags).await;
        assert!(
            diags.is_empty(),
            "a replacement is a new cluster: {diags:?}"
        );
    }
}
