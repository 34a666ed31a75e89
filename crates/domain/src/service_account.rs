//! The service account a master VM runs as, and its OAuth scopes. The kubelet, the controller-manager and the
//! cluster autoscaler on a master run with `--cloud-provider=gce` and call Google's APIs with the VM's
//! credentials, so a master needs one; kube-up gives masters the project's default Compute Engine service account
//! with the scopes `storage-ro,compute-rw,monitoring,logging-write`, and so does this provider by default.
//!
//! The Compute API takes scopes as URLs; users write gcloud's aliases or URLs, and the provider sends URLs.

/// The project's default Compute Engine service account, as the API names it in `instances.insert`.
pub const DEFAULT_EMAIL: &str = "default";

/// kube-up's master scopes (cluster/gce/config-default.sh), as gcloud's aliases.
pub const DEFAULT_SCOPES: [&str; 4] = ["storage-ro", "compute-rw", "monitoring", "logging-write"];

const SCOPE_URL: &str = "https://www.googleapis.com/auth/";

/// The one scope Secret Manager accepts a token with (cloud.google.com/secret-manager/docs/accessing-the-api:
/// "Request had insufficient authentication scopes" otherwise).
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

/// The scopes a master VM that fetches its keys from Secret Manager is made with: the cluster's
/// `service_account_scopes` (URLs) and `cloud-platform`, which the fetch needs. Not part of the build: adding it
/// must not roll a cluster whose masters keep their keys in metadata. What the masters' token may do is then what
/// IAM grants their service account; kube-up's `compute-rw` already let it make a VM with any scope.
pub fn with_secret_manager_scope(scopes: &[String]) -> Vec<String> {
    let mut out = scopes.to_vec();
    if !out.iter().any(|s| s == CLOUD_PLATFORM) {
        out.push(CLOUD_PLATFORM.to_string());
    }
    out
}

/// gcloud's scope aliases (`gcloud compute instances create --help`), the ones a master could need.
const ALIASES: [(&str, &str); 14] = [
    ("bigquery", "bigquery"),
    ("cloud-platform", "cloud-platform"),
    ("cloud-source-repos-ro", "source.read_only"),
    ("compute-ro", "compute.readonly"),
    ("compute-rw", "compute"),
    ("datastore", "datastore"),
    ("default", "cloud-platform"),
    ("logging-write", "logging.write"),
    ("monitoring", "monitoring"),
    ("monitoring-write", "monitoring.write"),
    ("pubsub", "pubsub"),
    ("service-management", "servicecontrol"),
    ("storage-ro", "devstorage.read_only"),
    ("storage-rw", "devstorage.read_write"),
];

/// A scope as the API takes it: an alias becomes its URL; a URL stays as written.
pub fn scope_url(scope: &str) -> Result<String, crate::Problem> {
    let scope = scope.trim();
    if scope.starts_with("https://") {
        return Ok(scope.to_string());
    }
    match ALIASES.iter().find(|(alias, _)| *alias == scope) {
        Some((_, path)) => Ok(format!("{SCOPE_URL}{path}")),
        None => Err((
            format!("Unknown scope {scope:?}"),
            format!(
                "Write a scope as a URL (like `{SCOPE_URL}cloud-platform`) or one of gcloud's aliases: {}.",
                ALIASES
                    .iter()
                    .map(|(a, _)| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The scopes as the API takes them, sorted and without repeats, so two spellings of one set are one build.
pub fn scope_urls(scopes: &[String]) -> Result<Vec<String>, crate::Problem> {
    let mut urls = scopes
        .iter()
        .map(|s| scope_url(s))
        .collect::<Result<Vec<_>, _>>()?;
    urls.sort();
    urls.dedup();
    Ok(urls)
}

/// `default`, or a service account's email (`name@project.iam.gserviceaccount.com`, or the default account's
/// `number-compute@developer.gserviceaccount.com`).
pub fn check_email(email: &str) -> Result<(), crate::Problem> {
    if email == DEFAULT_EMAIL {
        return Ok(());
    }
    let ok = email.split_once('@').is_some_and(|(user, domain)| {
        !user.is_empty()
            && user
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && domain.ends_with(".gserviceaccount.com")
    });
    if ok {
        Ok(())
    } else {
        Err((
            format!("Invalid service account {email:?}"),
            "Write `default` for the project's default Compute Engine service account, or a service account's email, like `masters@my-project.iam.gserviceaccount.com`.".into(),
        ))
    }
}

/// Whether `email` names the project's default Compute Engine service account: `default`, or its email
/// (`<project number>-compute@developer.gserviceaccount.com`).
pub fn is_default_account(email: &str) -> bool {
    email == DEFAULT_EMAIL || email.ends_with("-compute@developer.gserviceaccount.com")
}

/// The plan's warning when the masters run as the project's default Compute Engine service account. Shown when the
/// plan sets the account (a create, or a change of it), as the exposure warnings are: news, not noise on every plan.
/// `prior` is the account before this plan (None at create).
pub fn default_account_warning(
    cluster: &str,
    prior: Option<&str>,
    planned: &str,
) -> Option<crate::Problem> {
    if !is_default_account(planned) || prior == Some(planned) {
        return None;
    }
    Some((
        format!("Cluster {cluster}'s masters run as the project's default Compute Engine service account"),
        "GCE grants that account the Editor role on the project, unless the organization policy \
         `iam.automaticIamGrantsForDefaultServiceAccounts` is enforced, and the masters' token has the \
         `cloud-platform` scope (they fetch their keys from Secret Manager with it). Anything that runs on a \
         master, a pod scheduled there or a compromised component, can then do what Editor can: change any VM's \
         metadata and startup script in the project, read its buckets, delete its disks. Make a service account \
         for the masters with only the roles docs/guides/gce.md lists (\"The masters' service account\") and set \
         `service_account` to its email; the change rolls the masters one at a time."
            .to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_become_urls_and_urls_stay() {
        for (given, want) in [
            (
                "storage-ro",
                "https://www.googleapis.com/auth/devstorage.read_only",
            ),
            ("compute-rw", "https://www.googleapis.com/auth/compute"),
            (
                "logging-write",
                "https://www.googleapis.com/auth/logging.write",
            ),
            ("monitoring", "https://www.googleapis.com/auth/monitoring"),
            (
                "cloud-platform",
                "https://www.googleapis.com/auth/cloud-platform",
            ),
            (
                "https://www.googleapis.com/auth/userinfo.email",
                "https://www.googleapis.com/auth/userinfo.email",
            ),
        ] {
            assert_eq!(scope_url(given).unwrap(), want, "{given}");
        }
        let (summary, detail) = scope_url("compute-write").unwrap_err();
        assert!(summary.contains("compute-write"), "{summary}");
        assert!(detail.contains("`compute-rw`"), "{detail}");
    }

    #[test]
    fn two_spellings_of_one_set_are_the_same_scopes() {
        let a = scope_urls(&["compute-rw".into(), "storage-ro".into()]).unwrap();
        let b = scope_urls(&[
            "https://www.googleapis.com/auth/devstorage.read_only".into(),
            "compute-rw".into(),
            "compute-rw".into(),
        ])
        .unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn emails_are_default_or_a_service_account() {
        for ok in [
            "default",
            "masters@my-project.iam.gserviceaccount.com",
            "123456789-compute@developer.gserviceaccount.com",
        ] {
            assert!(check_email(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "masters",
            "me@example.com",
            "Masters@p.iam.gserviceaccount.com",
            "@p.iam.gserviceaccount.com",
        ] {
            assert!(check_email(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_master_that_fetches_its_keys_gets_the_cloud_platform_scope_once() {
        let kube_up: Vec<String> = DEFAULT_SCOPES
            .iter()
            .map(|s| scope_url(s).unwrap())
            .collect();
        let with = with_secret_manager_scope(&kube_up);
        assert_eq!(with.len(), 5);
        assert_eq!(with[..4], kube_up[..]);
        assert_eq!(with[4], CLOUD_PLATFORM);
        assert_eq!(with_secret_manager_scope(&with), with);
        assert_eq!(scope_url("cloud-platform").unwrap(), CLOUD_PLATFORM);
    }

    #[test]
    fn the_default_account_is_warned_of_when_a_plan_sets_it() {
        let own = "masters@prod.iam.gserviceaccount.com";
        let number = "123456789-compute@developer.gserviceaccount.com";
        for (prior, planned, warned) in [
            (None, DEFAULT_EMAIL, true),
            (None, number, true),
            (None, own, false),
            (Some(own), DEFAULT_EMAIL, true),
            (Some(DEFAULT_EMAIL), number, true),
            // A steady configuration is not warned of again at every plan.
            (Some(DEFAULT_EMAIL), DEFAULT_EMAIL, false),
            (Some(DEFAULT_EMAIL), own, false),
        ] {
            let w = default_account_warning("prod", prior, planned);
            assert_eq!(w.is_some(), warned, "{prior:?} -> {planned}: {w:?}");
            if let Some((summary, detail)) = w {
                assert!(summary.contains("prod"), "{summary}");
                assert!(detail.contains("`service_account`"), "{detail}");
                assert!(detail.contains("docs/guides/gce.md"), "{detail}");
            }
        }
    }
}
