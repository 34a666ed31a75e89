//! The Secret Manager backend: a secret per replica holding the keys its master needs, readable only by the
//! masters' service account. It knows nothing of Terraform, of etcd or of what the bytes are: it writes a
//! payload, names who may read it, reads it back and deletes it, and fails with one [`Error`] whose text names
//! the secret.
//!
//! Calls go through Google's official client (`google-cloud-secretmanager-v1`) with the provider's credentials,
//! so the keys are written as the same principal that makes the VMs. Every payload is sent with its CRC32C,
//! which Secret Manager checks, and every read is checked against the CRC32C it answers with.

use std::collections::BTreeMap;

use google_cloud_gax::error::rpc::Code;
use google_cloud_gax::options::RequestOptionsBuilder;
use google_cloud_iam_v1::model::{Binding, Policy};
use google_cloud_secretmanager_v1::client::SecretManagerService;
use google_cloud_secretmanager_v1::model::{Replication, Secret, SecretPayload, replication};

use ha_settings::Settings;
use ha_settings::client_cache::{ClientCache, ClientKey};

/// The only role a secret grants: reading its payload, nothing else (not its policy, not adding versions).
pub const READER_ROLE: &str = "roles/secretmanager.secretAccessor";

/// Why a Secret Manager call failed, naming the secret it was about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the Secret Manager client could not be set up: {0}")]
    Setup(String),
    #[error("{action} secret {secret} failed: {message}")]
    Call {
        action: &'static str,
        secret: String,
        message: String,
        /// Whether the same call may succeed if made again with nothing changed (see [`Error::is_transient`]).
        transient: bool,
    },
    #[error(
        "secret {secret} answered with a payload whose CRC32C does not match; read it again, and if it persists, add a new version"
    )]
    Corrupt { secret: String },
    #[error(
        "{action} secret {secret} failed: the Secret Manager API is not enabled in project {project}. Masters made by \
         this provider keep their keys there: enable it with `gcloud services enable secretmanager.googleapis.com \
         --project {project}` and run apply again"
    )]
    Disabled {
        action: &'static str,
        secret: String,
        project: String,
    },
}

impl Error {
    /// Whether the project has not enabled the Secret Manager API: no secret this provider wrote can be there (or
    /// be reached), so a cleanup has nothing to do.
    pub fn is_disabled(&self) -> bool {
        matches!(self, Error::Disabled { .. })
    }

    /// Whether the failure passes by itself: the service was unavailable, overloaded (429), failed inside
    /// (500), ran out of time, or the connection broke. The client has already retried what it safely could
    /// (see `retry_policy`); what is left is for the next apply, which writes again.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Call {
                transient: true,
                ..
            }
        )
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The Secret Manager origin of a universe, or the provider's `secret_manager_custom_endpoint` written
/// Google-provider style (`https://host/v1/`) or bare (`http://host:port`).
pub fn origin(settings: &Settings) -> String {
    settings.api_origin(
        settings.secret_manager_endpoint.as_deref(),
        "/v1",
        "secretmanager",
    )
}

/// A handle on one project's secrets. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Secrets {
    project: String,
    client: SecretManagerService,
    /// Sent with every request, as the Compute backend does (`ha_settings::user_agent`).
    user_agent: String,
}

impl Secrets {
    /// A client for `project` with the provider's credentials and endpoint. Nothing is called yet.
    /// The client is built once per endpoint and identity in a process (`ha_settings::client_cache`).
    pub async fn connect(settings: &Settings, project: &str) -> Result<Secrets> {
        static BUILT: ClientCache<SecretManagerService> = ClientCache::new();
        let endpoint = origin(settings);
        let key = ClientKey::new(settings, &endpoint);
        let client = match BUILT.get(&key) {
            Some(client) => client,
            None => {
                let credentials = ha_gce::google_credentials(settings)
                    .map_err(|e| Error::Setup(e.to_string()))?;
                let client = SecretManagerService::builder()
                    .with_endpoint(endpoint)
                    .with_credentials(credentials)
                    .with_retry_policy(retry_policy())
                    .build()
                    .await
                    .map_err(|e| Error::Setup(e.to_string()))?;
                BUILT.keep(key, client)
            }
        };
        Ok(Secrets {
            project: project.to_string(),
            client,
            user_agent: settings.user_agent.clone(),
        })
    }

    /// `projects/{project}/secrets/{id}`.
    pub fn path(&self, id: &str) -> String {
        format!("projects/{}/secrets/{id}", self.project)
    }

    fn failed(
        &self,
        action: &'static str,
        id: &str,
    ) -> impl Fn(google_cloud_gax::error::Error) -> Error {
        let secret = self.path(id);
        let project = self.project.clone();
        move |e| {
            if service_disabled(&e) {
                return Error::Disabled {
                    action,
                    secret: secret.clone(),
                    project: project.clone(),
                };
            }
            Error::Call {
                action,
                secret: secret.clone(),
                transient: passes_by_itself(&e),
                message: e.to_string(),
            }
        }
    }

    /// Makes `payload` the one live version of secret `id` (made with `labels` if it does not exist), and
    /// `reader` (a service account's email) the only principal a binding on the secret lets read it; with none,
    /// no binding does (only who may read every secret of the project, such as the provider's own principal).
    /// Returns the version's number.
    ///
    /// Idempotent as a whole, so a write interrupted anywhere is finished by writing again: a secret that exists
    /// is kept and its policy set again; a newest version that already holds `payload` is kept rather than added
    /// again; and every older version is destroyed, so keys a rebuilt VM no longer uses cannot be read.
    pub async fn put(
        &self,
        id: &str,
        labels: &BTreeMap<String, String>,
        payload: &[u8],
        reader: Option<&str>,
    ) -> Result<u64> {
        let created = self
            .client
            .create_secret()
            .set_parent(format!("projects/{}", self.project))
            .set_secret_id(id)
            .set_secret(
                Secret::new()
                    .set_replication(
                        Replication::new().set_automatic(replication::Automatic::new()),
                    )
                    .set_labels(labels.clone()),
            )
            // A repeat after a lost answer meets ALREADY_EXISTS, which is taken as made.
            .with_idempotency(true)
            .with_user_agent(self.user_agent.clone())
            .send()
            .await;
        match created {
            Ok(_) => {}
            Err(e) if code(&e) == Some(Code::AlreadyExists) => {}
            Err(e) => return Err(self.failed("creating", id)(e)),
        }
        // The policy before the payload: the payload is never readable by anyone but owners and `reader`.
        self.client
            .set_iam_policy()
            .set_resource(self.path(id))
            .set_policy(Policy::new().set_bindings(reader.map(|reader| {
                Binding::new()
                    .set_role(READER_ROLE)
                    .set_members([format!("serviceAccount:{reader}")])
            })))
            // The whole policy is set, so setting it twice is setting it once.
            .with_idempotency(true)
            .with_user_agent(self.user_agent.clone())
            .send()
            .await
            .map_err(self.failed("setting the readers of", id))?;
        let newest = match self.access(id, None).await? {
            Some((number, data)) if data == payload => number,
            _ => {
                let version = self
                    .client
                    .add_secret_version()
                    .set_parent(self.path(id))
                    .set_payload(
                        SecretPayload::new()
                            .set_data(bytes::Bytes::copy_from_slice(payload))
                            .set_data_crc32c(i64::from(crc32c::crc32c(payload))),
                    )
                    // A repeat after a lost answer adds a second version with the same payload; the older one
                    // is destroyed just below, as every older version is.
                    .with_idempotency(true)
                    .with_user_agent(self.user_agent.clone())
                    .send()
                    .await
                    .map_err(self.failed("adding a version to", id))?;
                version_number(&version.name)
            }
        };
        self.destroy_older(id, newest).await?;
        Ok(newest)
    }

    /// Destroys every version of secret `id` older than `newest` that is not destroyed yet.
    async fn destroy_older(&self, id: &str, newest: u64) -> Result<()> {
        use google_cloud_gax::paginator::ItemPaginator;
        use google_cloud_secretmanager_v1::model::secret_version::State;
        let mut versions = self
            .client
            .list_secret_versions()
            .set_parent(self.path(id))
            .with_user_agent(self.user_agent.clone())
            .by_item();
        let mut old = Vec::new();
        while let Some(v) = versions.next().await {
            let v = v.map_err(self.failed("listing the versions of", id))?;
            if v.state != State::Destroyed && version_number(&v.name) < newest {
                old.push(v.name);
            }
        }
        for name in old {
            self.client
                .destroy_secret_version()
                .set_name(name)
                .with_user_agent(self.user_agent.clone())
                .send()
                .await
                .map_err(self.failed("destroying an old version of", id))?;
        }
        Ok(())
    }

    /// The payload of version `version` (`None`: the newest enabled one) of secret `id`; `None` when the secret
    /// or the version does not exist.
    pub async fn read(&self, id: &str, version: Option<u64>) -> Result<Option<Vec<u8>>> {
        Ok(self.access(id, version).await?.map(|(_, data)| data))
    }

    /// [`Self::read`], with the number of the version read.
    async fn access(&self, id: &str, version: Option<u64>) -> Result<Option<(u64, Vec<u8>)>> {
        let name = format!(
            "{}/versions/{}",
            self.path(id),
            version.map_or_else(|| "latest".to_string(), |v| v.to_string())
        );
        let answer = match self
            .client
            .access_secret_version()
            .set_name(name)
            .with_user_agent(self.user_agent.clone())
            .send()
            .await
        {
            Ok(a) => a,
            Err(e) if code(&e) == Some(Code::NotFound) => return Ok(None),
            Err(e) => return Err(self.failed("reading", id)(e)),
        };
        let number = version_number(&answer.name);
        let Some(payload) = answer.payload else {
            return Ok(Some((number, Vec::new())));
        };
        let data = payload.data.to_vec();
        if let Some(sent) = payload.data_crc32c
            && sent != i64::from(crc32c::crc32c(&data))
        {
            return Err(Error::Corrupt {
                secret: self.path(id),
            });
        }
        Ok(Some((number, data)))
    }

    /// The principals a binding lets read secret `id`; `None` when the secret does not exist.
    pub async fn readers(&self, id: &str) -> Result<Option<Vec<String>>> {
        let policy = match self
            .client
            .get_iam_policy()
            .set_resource(self.path(id))
            .with_user_agent(self.user_agent.clone())
            .send()
            .await
        {
            Ok(p) => p,
            Err(e) if code(&e) == Some(Code::NotFound) => return Ok(None),
            Err(e) => return Err(self.failed("reading the readers of", id)(e)),
        };
        let mut readers: Vec<String> = policy
            .bindings
            .into_iter()
            .filter(|b| b.role == READER_ROLE || b.role == "roles/secretmanager.admin")
            .flat_map(|b| b.members)
            .collect();
        readers.sort();
        readers.dedup();
        Ok(Some(readers))
    }

    /// The secrets of the project that carry every label in `labels`: their ids, each with all its labels.
    pub async fn list(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        use google_cloud_gax::paginator::ItemPaginator;
        let filter = labels
            .iter()
            .map(|(k, v)| format!("labels.{k}={v}"))
            .collect::<Vec<_>>()
            .join(" AND ");
        let mut secrets = self
            .client
            .list_secrets()
            .set_parent(format!("projects/{}", self.project))
            .set_filter(filter)
            .with_user_agent(self.user_agent.clone())
            .by_item();
        let mut out = Vec::new();
        while let Some(secret) = secrets.next().await {
            let secret = secret.map_err(self.failed("listing", "*"))?;
            let id = secret
                .name
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            out.push((id, secret.labels.into_iter().collect()));
        }
        Ok(out)
    }

    /// Deletes secret `id` with every version; `false` when there was none.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        match self
            .client
            .delete_secret()
            .set_name(self.path(id))
            .with_user_agent(self.user_agent.clone())
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if code(&e) == Some(Code::NotFound) => Ok(false),
            Err(e) => Err(self.failed("deleting", id)(e)),
        }
    }
}

/// The SDK's own policy (AIP-194: UNAVAILABLE and broken connections, on idempotent calls only, at most 10
/// attempts in 60 s), and also 429 RESOURCE_EXHAUSTED on any call: Secret Manager answers it for a request it
/// did not carry out (quota), so sending it again is always safe, and an apply should not stop for a quota
/// that refills within the minute. The Compute backend retries 429 too (`ha_gce::call`).
fn retry_policy() -> impl google_cloud_gax::retry_policy::RetryPolicy {
    use google_cloud_gax::retry_policy::{Aip194Strict, RetryPolicyExt, TooManyRequests};
    TooManyRequests::new(Aip194Strict)
        .with_attempt_limit(10)
        .with_time_limit(std::time::Duration::from_secs(60))
}

/// Whether `e` is a failure that the same call may not meet again: see [`Error::is_transient`].
fn passes_by_itself(e: &google_cloud_gax::error::Error) -> bool {
    match code(e) {
        Some(c) => matches!(
            c,
            Code::Unavailable
                | Code::ResourceExhausted
                | Code::Internal
                | Code::DeadlineExceeded
                | Code::Aborted
        ),
        None => e.is_io() || e.is_timeout() || e.is_exhausted(),
    }
}

/// Whether `e` is Google's answer for an API the project has not enabled (`ErrorInfo` reason
/// `SERVICE_DISABLED`).
fn service_disabled(e: &google_cloud_gax::error::Error) -> bool {
    use google_cloud_gax::error::rpc::StatusDetails;
    e.status().is_some_and(|s| {
        s.details
            .iter()
            .any(|d| matches!(d, StatusDetails::ErrorInfo(i) if i.reason == "SERVICE_DISABLED"))
    })
}

/// The service's status code, when it answered with one.
fn code(e: &google_cloud_gax::error::Error) -> Option<Code> {
    e.status().map(|s| s.code)
}

/// The number at the end of `projects/p/secrets/s/versions/3`.
fn version_number(name: &str) -> u64 {
    name.rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
