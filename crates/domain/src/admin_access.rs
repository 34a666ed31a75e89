//! Who an admin credential names and how long it lives: the rules behind `ha_admin_credentials`. A Kubernetes API
//! server reads a client certificate's CN as the user and its O entries as the groups (`--client-ca-file`), so
//! these are the certificate's subject. The default user is kubeadm's `admin.conf` one; the default group is the
//! cluster's (its spec's `admin_group`): [`BOUND_GROUP`] for clusters made since the masters bind it, whose
//! credentials can then be revoked as kubeadm's can since 1.29; [`LEGACY_GROUP`] for clusters made before, whose
//! masters may not carry the binding until they roll.

use std::time::Duration;

use super::Problem;

pub const DEFAULT_USER: &str = "kubernetes-admin";
/// The group the masters bind to `cluster-admin` (`ha_master::addons::CLUSTER_ADMINS_GROUP`, the same name): a
/// binding the user can take back, where `system:masters` cannot be.
pub const BOUND_GROUP: &str = "ha-master:cluster-admins";
/// The default of clusters made before their masters carried [`BOUND_GROUP`]'s binding (their spec has no
/// `admin_group`): the API server lets its members do anything before RBAC is asked.
pub const LEGACY_GROUP: &str = "system:masters";
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(3600);
/// Shorter than this and clock skew between Terraform's host and the masters eats the credential (certificates
/// are backdated 5 minutes, and kubectl needs some time to be used at all).
pub const MIN_VALIDITY: Duration = Duration::from_secs(5 * 60);
/// A credential that cannot be revoked (Kubernetes has no revocation for client certificates) must expire soon:
/// a day covers a working session, and longer access belongs in the cluster's own identity provider.
pub const MAX_VALIDITY: Duration = Duration::from_secs(24 * 3600);

/// The validity to use: the default when unset, else the given one if within bounds.
pub fn validity(requested: Option<Duration>) -> Result<Duration, Problem> {
    let Some(d) = requested else {
        return Ok(DEFAULT_VALIDITY);
    };
    if d < MIN_VALIDITY || d > MAX_VALIDITY {
        return Err((
            "Admin credential validity out of range".into(),
            format!(
                "`validity` is {}, but an admin client certificate must live between 5m and 24h (it cannot be revoked, so keep it short; the default is 1h). Set for example `validity = \"1h\"`.",
                human(d)
            ),
        ));
    }
    Ok(d)
}

/// The user a credential names: the default, or a non-empty name without control characters.
pub fn user(requested: Option<&str>) -> Result<String, Problem> {
    match requested {
        None => Ok(DEFAULT_USER.into()),
        Some(u) => subject_part("user", u).map(str::to_string),
    }
}

/// The group a credential names when it names none: the cluster's `admin_group`, or [`LEGACY_GROUP`] for a
/// cluster without one (made before the binding, or imported).
pub fn default_group(cluster_admin_group: Option<&str>) -> &str {
    cluster_admin_group.unwrap_or(LEGACY_GROUP)
}

/// The groups a credential names: the cluster's default ([`default_group`]), or at most one non-empty name
/// without control characters. An empty list is allowed (a user that only its own RBAC bindings name). One,
/// because the certificate is issued with rcgen, whose subject holds one value per attribute type (a second O
/// would silently replace the first).
pub fn groups(
    requested: Option<&[String]>,
    cluster_admin_group: Option<&str>,
) -> Result<Vec<String>, Problem> {
    let Some(gs) = requested else {
        return Ok(vec![default_group(cluster_admin_group).to_string()]);
    };
    if gs.len() > 1 {
        return Err((
            "Too many `groups` for an admin credential".into(),
            format!(
                "`groups` names {} groups, but an admin credential carries at most one. Keep one (e.g. `groups = [\"{BOUND_GROUP}\"]`) and bind further roles to the user with RBAC.",
                gs.len()
            ),
        ));
    }
    gs.iter()
        .map(|g| subject_part("groups", g).map(str::to_string))
        .collect()
}

fn subject_part<'a>(attribute: &str, v: &'a str) -> Result<&'a str, Problem> {
    if v.trim().is_empty() || v.chars().any(char::is_control) {
        return Err((
            format!("Invalid `{attribute}` for an admin credential"),
            format!(
                "{v:?} cannot name a Kubernetes {}: it must be non-empty, without control characters (the API server reads it from the client certificate's subject). Leave `{attribute}` out for the default ({}).",
                if attribute == "user" { "user" } else { "group" },
                if attribute == "user" {
                    DEFAULT_USER
                } else {
                    "the cluster's admin group"
                }
            ),
        ));
    }
    Ok(v)
}

/// The API server's URL at the cluster's static IP, as a kubeconfig names it.
pub fn server_url(static_ip: &str, api_port: u16) -> String {
    format!("https://{static_ip}:{api_port}")
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (h, 0, 0) if h > 0 => format!("{h}h"),
        (0, m, 0) if m > 0 => format!("{m}m"),
        _ => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_defaults_to_an_hour_and_is_bounded() {
        let cases: &[(Option<u64>, Result<u64, &str>)] = &[
            (None, Ok(3600)),
            (Some(300), Ok(300)),
            (Some(86400), Ok(86400)),
            (Some(299), Err("299s")),
            (Some(0), Err("0s")),
            (Some(86401), Err("86401s")),
            (Some(48 * 3600), Err("48h")),
        ];
        for (given, want) in cases {
            let got = validity(given.map(Duration::from_secs));
            match (got, want) {
                (Ok(d), Ok(w)) => assert_eq!(d.as_secs(), *w, "{given:?}"),
                (Err((_, detail)), Err(shown)) => {
                    assert!(detail.contains(&format!("is {shown},")), "{detail}");
                    assert!(detail.contains("`validity`"), "{detail}");
                }
                (got, want) => panic!("{given:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn identity_defaults_to_kubeadm_admin_and_rejects_empty_names() {
        assert_eq!(user(None).unwrap(), "kubernetes-admin");
        // The cluster's group by default; a cluster without one (made before the binding) keeps system:masters.
        assert_eq!(groups(None, Some(BOUND_GROUP)).unwrap(), vec![BOUND_GROUP]);
        assert_eq!(groups(None, None).unwrap(), vec!["system:masters"]);
        assert_eq!(
            groups(Some(&["system:masters".into()]), Some(BOUND_GROUP)).unwrap(),
            vec!["system:masters"]
        );
        assert_eq!(user(Some("alice")).unwrap(), "alice");
        assert_eq!(
            groups(Some(&[]), Some(BOUND_GROUP)).unwrap(),
            Vec::<String>::new()
        );
        let (summary, detail) = user(Some(" ")).unwrap_err();
        assert!(summary.contains("`user`") && detail.contains("kubernetes-admin"));
        let (summary, _) = groups(Some(&["a\nb".into()]), None).unwrap_err();
        assert!(summary.contains("`groups`"));
        let (summary, detail) = groups(Some(&["ops".into(), "dev".into()]), None).unwrap_err();
        assert!(
            summary.contains("`groups`") && detail.contains("2 groups"),
            "{detail}"
        );
    }

    #[test]
    fn server_url_names_the_port() {
        assert_eq!(server_url("10.0.0.1", 443), "https://10.0.0.1:443");
        assert_eq!(server_url("10.0.0.1", 6443), "https://10.0.0.1:6443");
    }
}
