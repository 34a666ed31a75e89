//! `ha_master_cluster`'s plan-time judgement of `secrets_encryption_key` (`domain::secrets_encryption`): an
//! existing cluster keeps the key it was made with, and a new cluster's key is read before anything is made, so a
//! missing version or a payload that is not a key is named at plan rather than when the first master renders.

use tfplugin::diag::{AttributePath, Diagnostic, Diagnostics};
use tfplugin_framework::Val;

use super::cluster_model::ClusterModel;
use ha_settings::Settings;

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
