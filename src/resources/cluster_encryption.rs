//! `ha_master_cluster`'s plan-time judgement of `secrets_encryption_key` (`domain::secrets_encryption`): an
//! existing cluster keeps the key it was made with, and a new cluster's key is read before anything is made, so a
//! missing version or a payload that is not a key is named at plan rather than when the first master renders.
//! A cluster this plan replaces (a new name or region) is a new cluster: its key may be anything.

use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};
use tfplugin_framework::Val;

use super::cluster_model::ClusterModel;
use ha_settings::Settings;

/// `prior` is the state this plan keeps: `None` for a create and for a replacement.
pub(super) async fn check(
    settings: &Settings,
    prior: Option<&ClusterModel>,
    p: &ClusterModel,
    diags: &mut Diagnostics,
) {
    let at = AttributePath::attr("secrets_encryption_key");
    let after = match &p.secrets_encryption_key {
        Val::Unknown => return,
        v => v.known().map(String::as_str),
    };
    let before = prior
        .and_then(|m| m.secrets_encryption_key.known())
        .map(String::as_str);
    if let Err((summary, detail)) =
        ha_domain::secrets_encryption::change(prior.is_some(), before, after)
    {
        diags.push(Diagnostic::error(summary, detail).at(at));
        return;
    }
    let (None, Some(reference)) = (prior, after) else {
        return;
    };
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
        Ok(_) => {}
        Err(ha_ops::OpError::Refused(summary, detail)) => {
            diags.push(Diagnostic::error(summary, detail).at(at));
        }
        Err(e) => diags.push(
            Diagnostic::error(
                format!("Could not read secrets_encryption_key {reference}"),
                format!(
                    "{e}. The provider reads the key at plan so a wrong version is heard of before anything is \
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
            ..ClusterModel::default()
        }
    }

    const KEY: &str = "projects/p/secrets/k/versions/1";

    /// Turning encryption off needs no read of Secret Manager, so the rule is seen without a network: refused on
    /// a cluster the plan keeps, allowed on one it replaces.
    #[tokio::test]
    async fn a_kept_cluster_keeps_its_key_and_a_replaced_one_starts_afresh() {
        let (before, after) = (model(Some(KEY)), model(None));
        let mut diags = Diagnostics::new();
        check(&Settings::default(), Some(&before), &after, &mut diags).await;
        assert!(
            diags.has_error(),
            "turning off on a kept cluster: {diags:?}"
        );
        let at: Vec<String> = diags
            .iter()
            .filter_map(|d| d.attribute.as_ref().map(|p| p.to_string()))
            .collect();
        assert_eq!(at, ["secrets_encryption_key"]);

        let mut diags = Diagnostics::new();
        check(&Settings::default(), None, &after, &mut diags).await;
        assert!(
            diags.is_empty(),
            "a replacement is a new cluster: {diags:?}"
        );
    }
}
