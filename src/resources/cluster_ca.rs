//! A cluster CA the user brings (`ca_certificate` with `ca_private_key_wo`), for organisations whose clients and
//! nodes must trust a CA from their own PKI. Only the cluster CA is brought: it is the one kubeconfigs and kubelets
//! trust, while the two etcd CAs never leave the masters and the provider, so they are made fresh as always.
//!
//! The key is a write-only attribute (Terraform 1.11+): it is read from the configuration at plan (checked) and at
//! apply, and never lands in a plan or a state. The provider keeps it where it keeps the other CA keys, in the
//! cluster's keys secret, which it reads when it signs; the cluster's `private_keys` keep the three keys it made,
//! and the cluster CA's as an empty string. The user keeps the key too: an apply that has to write the secret
//! again (gone or overwritten) or rebuild a master from the cluster (a recovery) needs it given once more.
//! OpenTofu 1.6 does not declare write-only support, so the framework refuses the attribute there at validate.
//!
//! Changing the CA of a running cluster is a CA rotation (trust both, re-issue, drop the old) to a next CA the user
//! brings as well (`brought_ca_rotation`): plan refuses any other change of `ca_certificate` on a running cluster.

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin_framework::Val;

use super::cluster_model::{ClusterModel, PrivateKeys};
use ha_ops::cluster_keys::ClusterKeys;
use ha_pki::{CertKey, ClusterCas, PkiError};

use super::brought_ca_check::{check_at, now};
use super::brought_ca_rotation::NEXT_KEY;

const CERT: &str = "ca_certificate";
const KEY: &str = "ca_private_key_wo";

/// The brought CA of a configuration or planned model: its certificate and key, when both are known.
fn brought(m: &ClusterModel) -> Option<CertKey> {
    Some(CertKey {
        cert_pem: m.ca_certificate.known()?.clone(),
        key_pem: m.ca_private_key_wo.known()?.clone(),
    })
}

/// `validate`: a key needs the certificate it belongs to.
pub(super) fn validate(c: &ClusterModel, diags: &mut Diagnostics) {
    if !c.ca_private_key_wo.is_null() && c.ca_certificate.is_null() {
        diags.attr_error(
            AttributePath::attr(KEY),
            "ca_private_key_wo is set without ca_certificate",
            "A cluster CA you bring is its certificate (`ca_certificate`) and its key (`ca_private_key_wo`). Set \
             both, or neither to let the provider make the cluster CA.",
        );
    }
    if !c.next_ca_private_key_wo.is_null() && c.next_ca_certificate.is_null() {
        diags.attr_error(
            AttributePath::attr(NEXT_KEY),
            "next_ca_private_key_wo is set without next_ca_certificate",
            "A next cluster CA you bring is its certificate (`next_ca_certificate`) and its key \
             (`next_ca_private_key_wo`). Set both with `ca_rotation = \"started\"`, or neither.",
        );
    }
}

/// Plan: at create, a brought CA must be whole and sound; on a running cluster its certificate cannot change, and
/// a key given again must be its own.
pub(super) fn plan(config: &ClusterModel, prior: Option<&ClusterModel>, diags: &mut Diagnostics) {
    let Some(prior) = prior else {
        if config.ca_certificate.known().is_some() && config.ca_private_key_wo.is_null() {
            diags.attr_error(
                AttributePath::attr(KEY),
                "A cluster CA brought at create needs its key",
                "`ca_certificate` names a CA of your own, and the provider signs every master's certificates \
                 with it: give its key in `ca_private_key_wo` (write-only: it is kept in the cluster's Secret \
                 Manager secret, never in a plan or the state). Or remove `ca_certificate` to let the provider \
                 make the cluster CA.",
            );
        }
        if let Some(ca) = brought(config) {
            check_at(&ca.cert_pem, &ca.key_pem, (CERT, KEY), diags);
        }
        return;
    };
    // The end of a brought CA's rotation names the next CA: the one change of it a running cluster takes.
    let promoted = super::brought_ca_rotation::promotes(config, prior);
    if let (Some(was), Some(asked)) = (prior.ca_certificate.known(), config.ca_certificate.known())
        && was != asked
        && !promoted
    {
        let name = prior.name.known().cloned().unwrap_or_default();
        diags.attr_error(
            AttributePath::attr(CERT),
            format!("The cluster CA of running cluster {name} cannot change"),
            "Every master, kubelet and kubeconfig trusts the CA it was made with; another CA is a rotation (trust \
             both, issue every certificate again, then drop the old one): `ca_rotation`, with the next CA in \
             `next_ca_certificate` for a CA you brought, and `ca_certificate` set to it only as the rotation \
             ends (docs/guides/secrets.md). Set `ca_certificate` to the cluster's current CA (its \
             `ca_certificate` output), or remove it.",
        );
        return;
    }
    let cert = if promoted {
        config.ca_certificate.known()
    } else {
        prior.ca_certificate.known()
    };
    if let (Some(cert), Some(key)) = (cert, config.ca_private_key_wo.known()) {
        check_at(cert, key, (CERT, KEY), diags);
    }
}

/// The CAs a new cluster is made with: the brought cluster CA (checked again) and fresh etcd CAs, or three fresh.
pub(super) fn cas_at_create(p: &ClusterModel, name: &str) -> Result<ClusterCas, PkiError> {
    match brought(p) {
        Some(ca) => ClusterCas::with_cluster_ca(name, ca, now()),
        None => ClusterCas::generate(name),
    }
}

/// The keys the cluster's state keeps (`private_keys`): all it made, and not the key of a brought CA.
pub(super) fn keys_for_state(p: &ClusterModel, keys: &ClusterKeys) -> PrivateKeys {
    let mut kept = PrivateKeys::of(keys);
    if brought(p).is_some() {
        kept.ca = Val::Known(String::new());
    }
    kept
}

/// Plan of an update: a cluster that brought its own CA needs its key given again when the apply writes the keys
/// secret back (refresh found it gone or overwritten) or recovers etcd (which builds a master again); said at
/// plan rather than found half-way through the apply.
pub(super) fn check_key_needed(
    config: &ClusterModel,
    prior: &ClusterModel,
    p: &ClusterModel,
    diags: &mut Diagnostics,
) {
    // The key of each brought CA the cluster runs on that the configuration does not give again.
    let next_brought = prior
        .private_keys
        .known()
        .and_then(PrivateKeys::keys)
        .is_some_and(|k| k.brings_own_next_ca());
    let missing = [
        (
            prior.brings_own_ca() && config.ca_private_key_wo.is_null(),
            KEY,
        ),
        (
            next_brought && config.next_ca_private_key_wo.is_null(),
            NEXT_KEY,
        ),
    ];
    let Some(attribute) = missing.iter().find(|(m, _)| *m).map(|(_, a)| *a) else {
        return;
    };
    let name = prior.name.known().cloned().unwrap_or_default();
    let secret = ha_domain::names::cluster_keys_secret(&name);
    let rewrites = prior
        .drift
        .known()
        .is_some_and(|d| d.iter().any(|s| s.contains(&secret)));
    let recovers = super::cluster_model::recovery_planned(Some(prior), p);
    if rewrites || recovers {
        let why = if rewrites {
            format!("writes secret {secret} back (refresh found it gone or overwritten)")
        } else {
            "recovers etcd, which builds a master again".to_string()
        };
        diags.attr_error(
            AttributePath::attr(attribute),
            format!("This apply needs the key of cluster {name}'s CA"),
            format!(
                "The apply {why}, and the key of the CA you brought is kept only in that secret and in your \
                 configuration, never in state. Give it in `{attribute}` for this apply."
            ),
        );
    }
}

/// The apply found the keys secret to write again and was not given the brought CA's key (`ha_ops` refused before
/// changing anything): plan asks first ([`check_key_needed`]), so this meets only a secret lost between plan and
/// apply.
pub(super) fn key_needed_at_apply(
    name: &str,
    which: ha_ops::cluster_keys::BroughtKey,
    diags: &mut Diagnostics,
) {
    let secret = ha_domain::names::cluster_keys_secret(name);
    let attribute = match which {
        ha_ops::cluster_keys::BroughtKey::Current => KEY,
        ha_ops::cluster_keys::BroughtKey::Next => NEXT_KEY,
    };
    diags.attr_error(
        AttributePath::attr(attribute),
        format!("This apply needs the key of cluster {name}'s CA"),
        format!(
            "Secret {secret} must be written again (it is gone or holds other keys), and the key of the CA you \
             brought is kept only in that secret and in your configuration, never in state: nothing can be signed \
             for a replica until it is written. Give the key in `{attribute}` and apply again. Nothing was \
             changed."
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::brought_ca_check::errors_at;

    fn model(cert: Option<&str>, key: Option<&str>) -> ClusterModel {
        let v = |s: Option<&str>| s.map_or(Val::Null, |s| Val::Known(s.to_string()));
        ClusterModel {
            name: Val::Known("prod".into()),
            ca_certificate: v(cert),
            ca_private_key_wo: v(key),
            ..ClusterModel::default()
        }
    }

    /// Each way a brought CA can be wrong is an error at the attribute to fix; a sound one is none.
    #[test]
    fn a_brought_ca_is_refused_at_the_attribute_at_fault() {
        let (_, ca) = ha_pki::Issuer::generate("corp").unwrap();
        let (_, other) = ha_pki::Issuer::generate("other").unwrap();
        let cases: [(&str, ClusterModel, Option<&ClusterModel>, Option<&str>); 6] = [
            (
                "sound",
                model(Some(&ca.cert_pem), Some(&ca.key_pem)),
                None,
                None,
            ),
            (
                "no key at create",
                model(Some(&ca.cert_pem), None),
                None,
                Some(KEY),
            ),
            (
                "another CA's key",
                model(Some(&ca.cert_pem), Some(&other.key_pem)),
                None,
                Some(KEY),
            ),
            (
                "not a key",
                model(Some(&ca.cert_pem), Some("-----BEGIN EC PRIVATE KEY-----")),
                None,
                Some(KEY),
            ),
            (
                "not a certificate",
                model(Some("corp"), Some(&ca.key_pem)),
                None,
                Some(CERT),
            ),
            (
                "no key on a running cluster is fine",
                model(Some(&ca.cert_pem), None),
                Some(&model(Some(&ca.cert_pem), None)),
                None,
            ),
        ];
        for (case, config, prior, at) in cases {
            let mut d = Diagnostics::new();
            plan(&config, prior, &mut d);
            let want: Vec<String> = at
                .map(|a| format!("{:?}", Some(AttributePath::attr(a))))
                .into_iter()
                .collect();
            assert_eq!(errors_at(&d), want, "{case}: {d:?}");
        }
        let mut d = Diagnostics::new();
        plan(
            &model(Some(&other.cert_pem), None),
            Some(&model(Some(&ca.cert_pem), None)),
            &mut d,
        );
        assert_eq!(
            errors_at(&d),
            vec![format!("{:?}", Some(AttributePath::attr(CERT)))],
            "{d:?}"
        );
        let mut d = Diagnostics::new();
        validate(&model(None, Some(&ca.key_pem)), &mut d);
        assert_eq!(
            errors_at(&d),
            vec![format!("{:?}", Some(AttributePath::attr(KEY)))],
            "{d:?}"
        );
    }
}
