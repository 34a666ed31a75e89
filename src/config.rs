//! The `provider "ha"` block, modelled on Google's provider so users already know it, with the same `GOOGLE_*`
//! environment fallbacks; plus how the provider reaches etcd.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin_framework::validator::{duration, parse_duration, string_check};
use tfplugin_framework::{Attribute, Schema, Val};

pub use ha_settings::{Auth, Settings, SharedSettings};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProviderConfig {
    pub project: Val<String>,
    pub region: Val<String>,
    pub zone: Val<String>,
    pub credentials: Val<String>,
    pub access_token: Val<String>,
    pub impersonate_service_account: Val<String>,
    pub compute_custom_endpoint: Val<String>,
    pub storage_custom_endpoint: Val<String>,
    pub secret_manager_custom_endpoint: Val<String>,
    pub universe_domain: Val<String>,
    pub etcd_dial_timeout: Val<String>,
    pub etcd_via_internal_ip: Val<bool>,
    pub drain_delay: Val<String>,
    pub roll_soak: Val<String>,
    pub lock_ttl: Val<String>,
    pub default_labels: Val<std::collections::BTreeMap<String, String>>,
    pub read_only: Val<bool>,
}

pub fn schema() -> Schema {
    let schema = Schema::new(
        "The `ha` provider runs highly-available Kubernetes masters on Google Compute Engine. Its settings \
         follow Google's provider: every one may also come from the usual `GOOGLE_*` environment variables.",
    );
    let schema = where_and_who(schema);
    let schema = endpoints(schema);
    timings(schema)
}

/// The default project, region and zone, and the credentials the provider calls Google's APIs with.
fn where_and_who(schema: Schema) -> Schema {
    schema
    .attribute(Attribute::string("project").optional().description(
        "Default project for clusters that set none. Env: `GOOGLE_PROJECT`, `GOOGLE_CLOUD_PROJECT`, \
         `GCLOUD_PROJECT`, `CLOUDSDK_CORE_PROJECT`.",
    ))
    .attribute(Attribute::string("region").optional().description(
        "Default region for clusters that set none. Env: `GOOGLE_REGION`, `GCLOUD_REGION`, \
         `CLOUDSDK_COMPUTE_REGION`.",
    ))
    .attribute(Attribute::string("zone").optional().description(
        "Default primary zone for clusters that set none. Env: `GOOGLE_ZONE`, `GCLOUD_ZONE`, \
         `CLOUDSDK_COMPUTE_ZONE`.",
    ))
    .attribute(
        Attribute::string("credentials")
            .optional()
            .sensitive()
            .description(
                "Path to, or contents of, a service account key or other credentials JSON. Env: \
                 `GOOGLE_CREDENTIALS`, `GOOGLE_CLOUD_KEYFILE_JSON`, `GCLOUD_KEYFILE_JSON`, \
                 `GOOGLE_APPLICATION_CREDENTIALS`. Without it, Application Default Credentials are used. \
                 Conflicts with `access_token`.",
            ),
    )
    .attribute(
        Attribute::string("access_token")
            .optional()
            .sensitive()
            .description(
                "An OAuth 2.0 access token to use as is. Env: `GOOGLE_OAUTH_ACCESS_TOKEN`. Conflicts with \
                 `credentials`.",
            ),
    )
    .attribute(
        Attribute::string("impersonate_service_account")
            .optional()
            .description(
                "A service account email to impersonate with the credentials above. Env: \
                 `GOOGLE_IMPERSONATE_SERVICE_ACCOUNT`.",
            ),
    )
}

/// Where each Google API is reached: the custom endpoints and the universe domain.
fn endpoints(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("compute_custom_endpoint")
            .optional()
            .description(
                "Base URL of the Compute Engine API, e.g. `http://127.0.0.1:8787/compute/v1/` for `ha-sim`. \
                 Env: `GOOGLE_COMPUTE_CUSTOM_ENDPOINT`. Defaults to Google's endpoint.",
            )
            .validator(string_check("An http(s) URL.", check_endpoint)),
    )
    .attribute(
        Attribute::string("storage_custom_endpoint")
            .optional()
            .description(
                "Base URL of the Cloud Storage API that cluster backups go to, e.g. \
                 `http://127.0.0.1:4443/storage/v1/` for a local emulator. Env: \
                 `GOOGLE_STORAGE_CUSTOM_ENDPOINT`. Defaults to Google's endpoint \
                 (`https://storage.<universe_domain>`).",
            )
            .validator(string_check("An http(s) URL.", check_storage_endpoint)),
    )
    .attribute(
        Attribute::string("secret_manager_custom_endpoint")
            .optional()
            .description(
                "Base URL of the Secret Manager API that replicas' keys go to, e.g. \
                 `http://127.0.0.1:8787/v1/` for `ha-sim`. Env: `GOOGLE_SECRET_MANAGER_CUSTOM_ENDPOINT`. \
                 Defaults to Google's endpoint (`https://secretmanager.<universe_domain>`). The masters fetch \
                 their keys from the same endpoint, so it must be one they reach too.",
            )
            .validator(string_check("An http(s) URL.", check_secret_manager_endpoint)),
    )
    .attribute(
        Attribute::string("universe_domain")
            .optional()
            .description(
                "The Google Cloud universe to work in, e.g. a sovereign cloud's domain. Without \
                 `compute_custom_endpoint`, the Compute API is `https://compute.<universe_domain>`. Env: \
                 `GOOGLE_CLOUD_UNIVERSE_DOMAIN`. Defaults to `googleapis.com`.",
            )
            .validator(string_check(
                "A DNS domain like `googleapis.com`.",
                check_universe_domain,
            )),
    )
}

/// How long the provider waits for etcd, between steps and for the cluster lock, and how it reaches etcd.
fn timings(schema: Schema) -> Schema {
    schema
    .attribute(
        Attribute::string("etcd_dial_timeout")
            .optional()
            .description(
                "How long to wait when connecting to a master's etcd. Defaults to `10s`.",
            )
            .validator(duration()),
    )
    .attribute(
        Attribute::string("drain_delay")
            .optional()
            .description(
                "How long a replica that leaves the load balancer (to be rolled or removed) keeps serving \
                 before it stops, so the pool change reaches every forwarder and requests in flight finish, \
                 as kops waits after draining a master. Defaults to `5s`.",
            )
            .validator(duration()),
    )
    .attribute(
        Attribute::string("roll_soak")
            .optional()
            .description(
                "How long each rolled replica must stay healthy (its etcd member healthy and its API \
                 serving, checked three times over this span; any failed check starts the count again) \
                 before the next replica of a roll is touched, as Cluster API's `minReadySeconds` and kops' \
                 validation after each master. A longer soak catches a master that fails only after a \
                 while, at the cost of a longer roll. Defaults to `3s`.",
            )
            .validator(duration()),
    )
    .attribute(
        Attribute::string("lock_ttl")
            .optional()
            .description(
                "How long an apply that holds a cluster's lock may go without renewing it before another \
                 apply takes it over. The holder renews it three times per `lock_ttl`; one that was killed \
                 (a CI job cancelled, a laptop closed) stops, and the next apply waits this long. Shorter \
                 means a faster resume after a kill, longer means more tolerance for a slow Compute API. At \
                 least `3s`. Defaults to `30s`.",
            )
            .validator(string_check(
                "A duration of at least `3s`, like `30s`.",
                check_lock_ttl,
            )),
    )
    .attribute(
        Attribute::typed(
            "default_labels",
            tfplugin::value::Type::map(tfplugin::value::Type::String),
        )
        .optional()
        .description(
            "Labels every cluster of this provider puts on its GCE objects, as Google's provider's \
             `default_labels`: a cluster's own `labels` win on the same key, and each cluster shows the \
             result in `effective_labels`. Changing them updates the clusters' replica VMs in place (no \
             roll). GCE's rules apply, as for a cluster's `labels`.",
        )
        .validator(crate::resources::labels_validator()),
    )
    .attribute(
        Attribute::bool("read_only")
            .optional()
            .description(
                "Plan and refresh only, for drift jobs: the provider reads no CA key and no replica's key \
                 bundle, never dials etcd (plans say that etcd was not read), and refuses every apply. Its \
                 identity needs only the read permissions docs/guides/drift-jobs.md lists. Env: \
                 `HA_READ_ONLY` (`true` or `1`). Defaults to `false`.",
            ),
    )
    .attribute(
        Attribute::bool("etcd_via_internal_ip")
            .optional()
            .description(
                "Reach etcd through the masters' internal IPs instead of their external ones, for Terraform \
                 running inside the VPC. Defaults to `false`.",
            ),
    )
}

fn check_lock_ttl(s: &str) -> Result<(), (String, String)> {
    let ttl = parse_duration(s).map_err(|e| {
        (
            format!("Invalid lock_ttl {s:?}"),
            format!("{e}. Write a duration like `30s`."),
        )
    })?;
    ha_domain::lock::check_ttl(ttl)
}

/// An endpoint must be an http(s) URL; the fix names the API and Google's own base as the example.
fn http_url(s: &str, api: &str, example: &str) -> Result<(), (String, String)> {
    if s.starts_with("https://") || s.starts_with("http://") {
        Ok(())
    } else {
        Err((
            format!("Invalid endpoint {s:?}"),
            format!("Write the {api} API base as a URL, like `{example}`."),
        ))
    }
}

fn check_endpoint(s: &str) -> Result<(), (String, String)> {
    http_url(s, "Compute", "https://compute.googleapis.com/compute/v1/")
}

fn check_storage_endpoint(s: &str) -> Result<(), (String, String)> {
    http_url(
        s,
        "Cloud Storage",
        "https://storage.googleapis.com/storage/v1/",
    )
}

fn check_secret_manager_endpoint(s: &str) -> Result<(), (String, String)> {
    http_url(
        s,
        "Secret Manager",
        "https://secretmanager.googleapis.com/v1/",
    )
}

fn check_universe_domain(s: &str) -> Result<(), (String, String)> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if s.contains('.') && s.split('.').all(label_ok) {
        Ok(())
    } else {
        Err((
            format!("Invalid universe domain {s:?}"),
            "Write the bare domain of the universe, like `googleapis.com`, without a scheme, a service name \
             or a path."
                .into(),
        ))
    }
}

/// Cross-attribute checks on the provider block.
pub fn validate(cfg: &ProviderConfig, diags: &mut Diagnostics) {
    if cfg.credentials.known().is_some() && cfg.access_token.known().is_some() {
        diags.attr_error(
            AttributePath::attr("access_token"),
            "Conflicting credentials",
            "Set either `credentials` or `access_token`, not both: they are two ways of saying who you are.",
        );
    }
}

fn first_env(env: &HashMap<String, String>, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| env.get(*n).filter(|v| !v.is_empty()).cloned())
}

fn pick(v: &Val<String>, env: &HashMap<String, String>, names: &[&str]) -> Option<String> {
    v.known().cloned().or_else(|| first_env(env, names))
}

/// The provider block and the environment resolved to the plain [`Settings`] the layers below take.
pub fn resolve(cfg: &ProviderConfig, env: &HashMap<String, String>) -> Settings {
    let credentials = pick(
        &cfg.credentials,
        env,
        &[
            "GOOGLE_CREDENTIALS",
            "GOOGLE_CLOUD_KEYFILE_JSON",
            "GCLOUD_KEYFILE_JSON",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ],
    );
    let token = pick(&cfg.access_token, env, &["GOOGLE_OAUTH_ACCESS_TOKEN"]);
    // Configuration beats the environment: a token set in the block wins over a key file from the env.
    let auth = match (
        cfg.access_token.known(),
        cfg.credentials.known(),
        token,
        credentials,
    ) {
        (Some(t), _, _, _) => Auth::AccessToken(t.clone()),
        (None, Some(c), _, _) => Auth::Credentials(c.clone()),
        (None, None, Some(t), _) => Auth::AccessToken(t),
        (None, None, None, Some(c)) => Auth::Credentials(c),
        _ => Auth::Default,
    };
    Settings {
        project: pick(
            &cfg.project,
            env,
            &[
                "GOOGLE_PROJECT",
                "GOOGLE_CLOUD_PROJECT",
                "GCLOUD_PROJECT",
                "CLOUDSDK_CORE_PROJECT",
            ],
        ),
        region: pick(
            &cfg.region,
            env,
            &["GOOGLE_REGION", "GCLOUD_REGION", "CLOUDSDK_COMPUTE_REGION"],
        ),
        zone: pick(
            &cfg.zone,
            env,
            &["GOOGLE_ZONE", "GCLOUD_ZONE", "CLOUDSDK_COMPUTE_ZONE"],
        ),
        auth,
        impersonate_service_account: pick(
            &cfg.impersonate_service_account,
            env,
            &["GOOGLE_IMPERSONATE_SERVICE_ACCOUNT"],
        ),
        compute_endpoint: pick(
            &cfg.compute_custom_endpoint,
            env,
            &["GOOGLE_COMPUTE_CUSTOM_ENDPOINT"],
        ),
        storage_endpoint: pick(
            &cfg.storage_custom_endpoint,
            env,
            &["GOOGLE_STORAGE_CUSTOM_ENDPOINT"],
        ),
        secret_manager_endpoint: pick(
            &cfg.secret_manager_custom_endpoint,
            env,
            &["GOOGLE_SECRET_MANAGER_CUSTOM_ENDPOINT"],
        ),
        universe_domain: pick(&cfg.universe_domain, env, &["GOOGLE_CLOUD_UNIVERSE_DOMAIN"]),
        default_labels: cfg.default_labels.known().cloned().unwrap_or_default(),
        user_agent: ha_settings::user_agent(""),
        etcd_dial_timeout: cfg
            .etcd_dial_timeout
            .known()
            .and_then(|s| parse_duration(s).ok())
            .unwrap_or(Duration::from_secs(10)),
        etcd_via_internal_ip: cfg.etcd_via_internal_ip.known().copied().unwrap_or(false),
        drain_delay: cfg
            .drain_delay
            .known()
            .and_then(|s| parse_duration(s).ok())
            .unwrap_or(DEFAULT_DRAIN_DELAY),
        roll_soak: cfg
            .roll_soak
            .known()
            .and_then(|s| parse_duration(s).ok())
            .unwrap_or(DEFAULT_ROLL_SOAK),
        lock_ttl: cfg
            .lock_ttl
            .known()
            .and_then(|s| parse_duration(s).ok())
            .unwrap_or(ha_domain::lock::DEFAULT_TTL),
        read_only: cfg.read_only.known().copied().unwrap_or_else(|| {
            first_env(env, &["HA_READ_ONLY"]).is_some_and(|v| v == "true" || v == "1")
        }),
    }
}

/// kops' `--post-drain-delay` after taking a master out of the load balancer.
pub const DEFAULT_DRAIN_DELAY: Duration = Duration::from_secs(5);
/// Three healthy checks a second apart after each rolled replica, as before the setting existed.
pub const DEFAULT_ROLL_SOAK: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ProviderConfig {
        ProviderConfig {
            project: Val::Null,
            region: Val::Null,
            zone: Val::Null,
            credentials: Val::Null,
            access_token: Val::Null,
            impersonate_service_account: Val::Null,
            compute_custom_endpoint: Val::Null,
            storage_custom_endpoint: Val::Null,
            secret_manager_custom_endpoint: Val::Null,
            universe_domain: Val::Null,
            etcd_dial_timeout: Val::Null,
            etcd_via_internal_ip: Val::Null,
            drain_delay: Val::Null,
            roll_soak: Val::Null,
            lock_ttl: Val::Null,
            default_labels: Val::Null,
            read_only: Val::Null,
        }
    }

    #[test]
    fn environment_fills_what_the_block_leaves_out() {
        let env: HashMap<String, String> = [
            ("GOOGLE_CLOUD_PROJECT", "from-env"),
            ("CLOUDSDK_COMPUTE_REGION", "europe-west1"),
            ("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.s3cr3t"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let mut c = cfg();
        c.project = Val::Known("from-block".into());
        let s = resolve(&c, &env);
        assert_eq!(s.project.as_deref(), Some("from-block"));
        assert_eq!(s.region.as_deref(), Some("europe-west1"));
        assert!(matches!(s.auth, Auth::AccessToken(ref t) if t == "ya29.s3cr3t"));
        assert_eq!(s.etcd_dial_timeout, Duration::from_secs(10));
        assert_eq!(s.roll_soak, Duration::from_secs(3));
        assert!(
            !format!("{s:?}").contains("s3cr3t"),
            "secrets must not appear in Debug output"
        );
    }

    #[test]
    fn read_only_comes_from_the_block_then_the_environment() {
        let env =
            |v: &str| -> HashMap<String, String> { [("HA_READ_ONLY".into(), v.into())].into() };
        for (block, variable, want) in [
            (None, None, false),
            (None, Some("true"), true),
            (None, Some("1"), true),
            (None, Some("yes please"), false),
            (Some(false), Some("true"), false),
            (Some(true), None, true),
        ] {
            let mut c = cfg();
            c.read_only = block.map_or(Val::Null, Val::Known);
            let e = variable.map(env).unwrap_or_default();
            assert_eq!(resolve(&c, &e).read_only, want, "{block:?} {variable:?}");
        }
    }

    #[test]
    fn the_universe_domain_comes_from_the_block_then_the_environment_and_must_be_a_bare_domain() {
        let env: HashMap<String, String> = [(
            "GOOGLE_CLOUD_UNIVERSE_DOMAIN".to_string(),
            "env.example".to_string(),
        )]
        .into();
        assert_eq!(
            resolve(&cfg(), &env).universe_domain.as_deref(),
            Some("env.example")
        );
        let mut c = cfg();
        c.universe_domain = Val::Known("block.example".into());
        assert_eq!(
            resolve(&c, &env).universe_domain.as_deref(),
            Some("block.example")
        );
        assert_eq!(resolve(&cfg(), &HashMap::new()).universe_domain, None);
        assert!(check_universe_domain("googleapis.com").is_ok());
        assert!(check_universe_domain("s3nsapis.fr").is_ok());
        for bad in [
            "https://googleapis.com",
            "compute.googleapis.com/compute/v1",
            "localhost",
            "a..b",
            "-a.b",
            "",
        ] {
            assert!(
                check_universe_domain(bad).is_err(),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn roll_soak_is_read_from_the_block_or_defaults_to_three_seconds() {
        let mut c = cfg();
        c.roll_soak = Val::Known("1m30s".into());
        assert_eq!(
            resolve(&c, &HashMap::new()).roll_soak,
            Duration::from_secs(90)
        );
        assert_eq!(
            resolve(&cfg(), &HashMap::new()).roll_soak,
            DEFAULT_ROLL_SOAK
        );
    }

    #[test]
    fn credentials_and_token_conflict() {
        let mut c = cfg();
        c.credentials = Val::Known("{}".into());
        c.access_token = Val::Known("t".into());
        let mut d = Diagnostics::new();
        validate(&c, &mut d);
        assert!(d.has_error());
    }
}
