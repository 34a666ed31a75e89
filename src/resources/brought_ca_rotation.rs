//! A rotation of a cluster CA its user brought (`ca_rotation` with `next_ca_certificate` and the write-only
//! `next_ca_private_key_wo`). The provider cannot make the next CA of a CA it did not make: the PKI that made the
//! first makes the next, and the user brings it the same way. The two etcd CAs are the provider's, and rotate with
//! it as they do for every cluster (`domain::ca_rotation` says what each stage does).
//!
//! Terraform holds `ca_certificate` to the configuration, so it stays the current CA all through the rotation; the
//! bundle the masters trust (the current CA, then the next) is in the cluster's `spec`, and every admin
//! credential's `ca_certificate_pem`. What the configuration says at each stage:
//! - `"started"` with `next_ca_certificate` and `next_ca_private_key_wo`: checked as a CA brought at create, and
//!   another CA than the current one. Its key goes to the cluster's keys secret beside the others, never to state.
//! - `"switched"`, the next CA unchanged: the masters present certificates it issued; its key is the secret's.
//! - `ca_rotation` removed after `"switched"`, `ca_certificate` set to the next CA and `next_ca_certificate`
//!   removed: the next CA becomes the CA. Its key moves within the secret; `ca_private_key_wo` may give it again.
//! - `ca_rotation` removed after `"started"`, with `next_ca_certificate`: the next CA is dropped.
//!
//! The next CA cannot change while a rotation is under way: going back to no rotation drops it, and `"started"`
//! brings another.

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin_framework::Val;

use super::cluster_model::ClusterModel;
use ha_domain::ca_rotation::ROTATION;
use ha_domain::rotation::Stage;
use ha_pki::CertKey;

pub(super) const NEXT_CERT: &str = "next_ca_certificate";
pub(super) const NEXT_KEY: &str = "next_ca_private_key_wo";

/// The stage a configuration or state records; what the validator refused counts as none (its error stands).
fn stage(m: &ClusterModel) -> Stage {
    ROTATION
        .parse(m.ca_rotation.known().map(String::as_str))
        .unwrap_or(Stage::Steady)
}

/// The next cluster CA a rotation under way in `m` trusts: the second certificate of its spec's bundle.
pub(super) fn next_in_spec(m: &ClusterModel) -> Option<String> {
    let bundle = m.spec.known()?.ca_certificate.known()?;
    ha_pki::certificates_in(bundle).ok()?.into_iter().nth(1)
}

/// Whether this change ends a rotation of a brought CA: from `"switched"` to none, `ca_certificate` naming the
/// next CA. The one change of a running cluster's `ca_certificate` that plan lets through.
pub(super) fn promotes(config: &ClusterModel, prior: &ClusterModel) -> bool {
    prior.brings_own_ca()
        && stage(prior) == Stage::Switched
        && stage(config) == Stage::Steady
        && config.ca_certificate.known().cloned() == next_in_spec(prior)
}

/// The next CA an apply that starts a rotation of a brought CA makes the next one (`None` for a CA the provider
/// made: it makes the next itself), checked as plan checked it.
pub(super) fn next_of(prior: &ClusterModel, p: &ClusterModel) -> Option<Result<CertKey, String>> {
    if !prior.brings_own_ca() {
        return None;
    }
    let (Some(cert), Some(key)) = (
        p.next_ca_certificate.known(),
        p.next_ca_private_key_wo.known(),
    ) else {
        return Some(Err(format!(
            "the next cluster CA is brought: `{NEXT_CERT}` and `{NEXT_KEY}` must both be given"
        )));
    };
    let ca = CertKey {
        cert_pem: cert.clone(),
        key_pem: key.clone(),
    };
    Some(
        ha_pki::check_brought_ca(&ca, super::brought_ca_check::now())
            .map(|_| ca)
            .map_err(|e| format!("the next cluster CA you brought cannot sign: {e}")),
    )
}

/// Plan: what `next_ca_certificate` and its key may be at each stage, said at the attribute to fix.
pub(super) fn plan(config: &ClusterModel, prior: Option<&ClusterModel>, diags: &mut Diagnostics) {
    let given = !config.next_ca_certificate.is_null() || !config.next_ca_private_key_wo.is_null();
    let Some(prior) = prior else {
        if given {
            diags.attr_error(
                AttributePath::attr(NEXT_CERT),
                "A next cluster CA is for a running cluster's rotation",
                "A new cluster starts with one CA. Create it with `ca_certificate` and `ca_private_key_wo` alone; \
                 bring the next CA with `ca_rotation = \"started\"` when the CA is to change.",
            );
        }
        return;
    };
    let name = prior.name.known().cloned().unwrap_or_default();
    if !prior.brings_own_ca() {
        if given {
            diags.attr_error(
                AttributePath::attr(NEXT_CERT),
                format!("Cluster {name}'s next CA is the provider's to make"),
                "The provider made this cluster's CAs, and a rotation (`ca_rotation`) makes the next ones itself. \
                 Remove `next_ca_certificate` and `next_ca_private_key_wo`.",
            );
        }
        return;
    }
    let (before, after) = (stage(prior), stage(config));
    if after == Stage::Steady {
        plan_steady(config, prior, &name, before, given, diags);
        return;
    }
    let cert = match &config.next_ca_certificate {
        Val::Unknown => return,
        Val::Null => {
            diags.attr_error(
                AttributePath::attr(NEXT_CERT),
                format!("Cluster {name}'s CA rotates to a CA you bring"),
                "The cluster CA was brought, and the provider cannot make the next CA of a CA it did not make. \
                 Set `next_ca_certificate` to the next CA's certificate and `next_ca_private_key_wo` to its key \
                 (PEM PKCS#8), made by the PKI that made `ca_certificate`.",
            );
            return;
        }
        Val::Known(cert) => cert,
    };
    let key = config.next_ca_private_key_wo.known();
    if before == Stage::Steady {
        if config.ca_certificate.known() == Some(cert) {
            diags.attr_error(
                AttributePath::attr(NEXT_CERT),
                "The next cluster CA is the current one",
                "A rotation moves every master to another CA: set `next_ca_certificate` to a new CA's \
                 certificate, not the one `ca_certificate` names.",
            );
            return;
        }
        let Some(key) = key else {
            diags.attr_error(
                AttributePath::attr(NEXT_KEY),
                "The next cluster CA needs its key",
                "The provider signs every master's certificates with the next CA from \"switched\" on: give its \
                 key in `next_ca_private_key_wo` (write-only: it is kept in the cluster's Secret Manager secret, \
                 never in a plan or the state).",
            );
            return;
        };
        super::brought_ca_check::check_at(cert, key, (NEXT_CERT, NEXT_KEY), diags);
        return;
    }
    if next_in_spec(prior).as_ref() != Some(cert) {
        diags.attr_error(
            AttributePath::attr(NEXT_CERT),
            format!("Cluster {name}'s next CA cannot change during its rotation"),
            "Every master trusts the next CA the rotation started with. To bring another, go back to no rotation \
             first (remove `ca_rotation` while it is \"started\"), which drops that CA, then start again with the \
             new one.",
        );
    } else if let Some(key) = key {
        super::brought_ca_check::check_at(cert, key, (NEXT_CERT, NEXT_KEY), diags);
    }
}

/// Plan with no rotation asked for: no next CA, and after `"switched"`, `ca_certificate` naming the next CA.
fn plan_steady(
    config: &ClusterModel,
    prior: &ClusterModel,
    name: &str,
    before: Stage,
    given: bool,
    diags: &mut Diagnostics,
) {
    let ends = before == Stage::Switched;
    if given {
        let detail = if ends {
            "Removing `ca_rotation` after \"switched\" makes the next CA the CA: set `ca_certificate` to it (and \
             `ca_private_key_wo` to its key, or leave that out: the cluster's secret holds it), and remove \
             `next_ca_certificate` and `next_ca_private_key_wo`."
        } else {
            "A next CA is brought with `ca_rotation = \"started\"`, and dropped by removing both. Set \
             `ca_rotation`, or remove `next_ca_certificate` and `next_ca_private_key_wo`."
        };
        diags.attr_error(
            AttributePath::attr(NEXT_CERT),
            format!("Cluster {name} has a next CA and no rotation of its CAs"),
            detail,
        );
    }
    if ends && config.ca_certificate.known().is_some() && !promotes(config, prior) {
        diags.attr_error(
            AttributePath::attr("ca_certificate"),
            format!("Cluster {name}'s rotation ends with the next CA as its CA"),
            "Removing `ca_rotation` after \"switched\" makes the next CA the CA, and every master trusts it \
             alone. Set `ca_certificate` to the next CA's certificate (the one `next_ca_certificate` named), or \
             set `ca_rotation = \"switched\"` again.",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::brought_ca_check::errors_at;
    use crate::resources::cluster_model::PrivateKeys;

    /// A running cluster on the brought CA `ca` at `stage`, its spec's bundle `ca` then `next` while one rotates;
    /// `made` when the provider made its CA instead.
    fn running(
        ca: &CertKey,
        next: Option<&CertKey>,
        stage: Option<&str>,
        made: bool,
    ) -> ClusterModel {
        let v = |s: &str| Val::Known(s.to_string());
        let mut m = ClusterModel {
            name: v("prod"),
            ca_certificate: v(&ca.cert_pem),
            ca_rotation: stage.map_or(Val::Null, v),
            next_ca_certificate: next.map_or(Val::Null, |n| v(&n.cert_pem)),
            private_keys: Val::Known(PrivateKeys {
                ca: v(if made { &ca.key_pem } else { "" }),
                etcd_peer_ca: v("peer"),
                etcd_client_ca: v("client"),
                service_account: v("sa"),
                next_ca: next.map_or(Val::Null, |_| v("")),
                next_etcd_peer_ca: next.map_or(Val::Null, |_| v("next peer")),
                next_etcd_client_ca: next.map_or(Val::Null, |_| v("next client")),
                ..PrivateKeys::default()
            }),
            ..ClusterModel::default()
        };
        let mut spec = super::super::cluster_model::spec_of(&m, None);
        let certs: Vec<&str> = [Some(ca), next]
            .into_iter()
            .flatten()
            .map(|c| c.cert_pem.as_str())
            .collect();
        spec.ca_certificate = Val::Known(ha_pki::bundle_of(certs));
        m.spec = Val::Known(spec);
        m
    }

    /// A configuration: the CA named, the stage, and the next CA with its key when `key`.
    fn config(ca: &CertKey, stage: Option<&str>, next: Option<(&CertKey, bool)>) -> ClusterModel {
        let v = |s: &str| Val::Known(s.to_string());
        ClusterModel {
            name: v("prod"),
            ca_certificate: v(&ca.cert_pem),
            ca_rotation: stage.map_or(Val::Null, v),
            next_ca_certificate: next.map_or(Val::Null, |(n, _)| v(&n.cert_pem)),
            next_ca_private_key_wo: next
                .filter(|(_, k)| *k)
                .map_or(Val::Null, |(n, _)| v(&n.key_pem)),
            ..ClusterModel::default()
        }
    }

    /// Each stage's rule for the next CA, and the end's for `ca_certificate`: an error at the attribute to fix,
    /// none where the configuration is right.
    #[test]
    fn the_next_ca_is_brought_at_the_start_kept_through_and_named_at_the_end() {
        let (_, x) = ha_pki::Issuer::generate("corp").unwrap();
        let (_, y) = ha_pki::Issuer::generate("corp2").unwrap();
        let (_, z) = ha_pki::Issuer::generate("other").unwrap();
        let steady = running(&x, None, None, false);
        let started = running(&x, Some(&y), Some("started"), false);
        let switched = running(&x, Some(&y), Some("switched"), false);
        let made = running(&x, None, None, true);
        let wrong_key = CertKey {
            key_pem: z.key_pem.clone(),
            ..y.clone()
        };
        let cases: Vec<(&str, ClusterModel, Option<&ClusterModel>, Option<&str>)> = vec![
            ("no rotation", config(&x, None, None), Some(&steady), None),
            (
                "start",
                config(&x, Some("started"), Some((&y, true))),
                Some(&steady),
                None,
            ),
            (
                "start with no next CA",
                config(&x, Some("started"), None),
                Some(&steady),
                Some(NEXT_CERT),
            ),
            (
                "start with no key",
                config(&x, Some("started"), Some((&y, false))),
                Some(&steady),
                Some(NEXT_KEY),
            ),
            (
                "start with another CA's key",
                config(&x, Some("started"), Some((&wrong_key, true))),
                Some(&steady),
                Some(NEXT_KEY),
            ),
            (
                "start with the current CA",
                config(&x, Some("started"), Some((&x, true))),
                Some(&steady),
                Some(NEXT_CERT),
            ),
            (
                "a next CA with no rotation",
                config(&x, None, Some((&y, true))),
                Some(&steady),
                Some(NEXT_CERT),
            ),
            (
                "switch, the key not given",
                config(&x, Some("switched"), Some((&y, false))),
                Some(&started),
                None,
            ),
            (
                "switch to another next CA",
                config(&x, Some("switched"), Some((&z, false))),
                Some(&started),
                Some(NEXT_CERT),
            ),
            (
                "back to no rotation",
                config(&x, None, None),
                Some(&started),
                None,
            ),
            ("the end", config(&y, None, None), Some(&switched), None),
            (
                "the end keeping the old CA",
                config(&x, None, None),
                Some(&switched),
                Some("ca_certificate"),
            ),
            (
                "the end keeping the next CA set",
                config(&y, None, Some((&y, false))),
                Some(&switched),
                Some(NEXT_CERT),
            ),
            (
                "a next CA for a made CA",
                config(&x, Some("started"), Some((&y, true))),
                Some(&made),
                Some(NEXT_CERT),
            ),
            (
                "a next CA at create",
                config(&x, None, Some((&y, true))),
                None,
                Some(NEXT_CERT),
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
        assert!(promotes(&config(&y, None, None), &switched));
        assert!(
            !promotes(&config(&y, None, None), &started),
            "the end comes after \"switched\""
        );
        assert!(!promotes(&config(&z, None, None), &switched));
    }
}
