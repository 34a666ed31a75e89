//! The Cloud Storage backend: a bucket that etcd snapshots are written to, listed in and pruned from. It knows
//! nothing of Terraform or of etcd: it moves bytes and metadata, and fails with one [`Error`] whose text names
//! the bucket and the object.
//!
//! Objects are written and read with Google's official client (`google-cloud-storage`), which checksums every
//! upload (CRC32C, checked by the service). Listing and deleting objects are, in that client, calls of the gRPC
//! API only (`StorageControl`); Cloud Storage's JSON API serves the same calls over HTTPS, works with every
//! endpoint the writes use (including a local emulator, `fake-gcs-server`, which speaks only JSON), and takes
//! the same credentials, so those two calls are made over JSON with the headers the credentials give.

use std::collections::BTreeMap;

use google_cloud_auth::credentials::{CacheableResource, Credentials};
use google_cloud_gax::retry_policy::{NeverRetry, RetryPolicyExt};
use google_cloud_storage::client::Storage;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;

use ha_settings::Settings;

/// Why a Cloud Storage call failed, naming the bucket (and object) it was about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the Cloud Storage client for bucket {bucket} could not be set up: {message}")]
    Setup { bucket: String, message: String },
    #[error("writing gs://{bucket}/{object} failed: {message}")]
    Write {
        bucket: String,
        object: String,
        message: String,
    },
    /// The name is taken (`ifGenerationMatch=0` failed): nothing was written.
    #[error("gs://{bucket}/{object} exists already")]
    Exists { bucket: String, object: String },
    #[error("reading gs://{bucket}/{object} failed: {message}")]
    Read {
        bucket: String,
        object: String,
        message: String,
    },
    #[error("listing gs://{bucket}/{prefix} failed: {message}")]
    List {
        bucket: String,
        prefix: String,
        message: String,
    },
    #[error("deleting gs://{bucket}/{object} failed: {message}")]
    Delete {
        bucket: String,
        object: String,
        message: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One object as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub name: String,
    pub size: u64,
    pub metadata: BTreeMap<String, String>,
}

/// A handle on one bucket. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Bucket {
    name: String,
    client: Storage,
    http: reqwest::Client,
    credentials: Credentials,
    /// The JSON API's origin, e.g. `https://storage.googleapis.com`.
    origin: String,
}

mod retry;
use retry::{CALL_LIMIT, Failed, attempt_limit, call_limit, retrying};

/// Uploads below this are sent in one request; the snapshot is in memory already, so one request is as cheap as
/// any and leaves no resumable session behind when the change fails.
const SINGLE_SHOT_LIMIT: usize = 5 * 1024 * 1024 * 1024;

/// The Storage origin of a universe, or the provider's `storage_custom_endpoint` written Google-provider style
/// (`https://host/storage/v1/`) or bare (`http://host:port`).
pub fn origin(settings: &Settings) -> String {
    settings.api_origin(
        settings.storage_endpoint.as_deref(),
        "/storage/v1",
        "storage",
    )
}

impl Bucket {
    /// A client for `bucket` with the provider's credentials and endpoint. Nothing is called yet.
    pub async fn connect(settings: &Settings, bucket: &str) -> Result<Bucket> {
        let setup = |message: String| Error::Setup {
            bucket: bucket.to_string(),
            message,
        };
        let credentials = ha_gce::google_credentials(settings).map_err(|e| setup(e.to_string()))?;
        let origin = origin(settings);
        // Writes are tried again by `retry::retrying`, which also bounds each attempt; the client's own loop
        // would retry inside an attempt that is then abandoned. Reads keep the client's loop.
        let client = Storage::builder()
            .with_endpoint(origin.clone())
            .with_credentials(credentials.clone())
            .with_retry_policy(
                google_cloud_storage::retry_policy::RetryableErrors.with_time_limit(CALL_LIMIT),
            )
            .with_resumable_upload_threshold(SINGLE_SHOT_LIMIT)
            .build()
            .await
            .map_err(|e| setup(e.to_string()))?;
        let http = reqwest::Client::builder()
            .user_agent(settings.user_agent.clone())
            .build()
            .map_err(|e| setup(e.to_string()))?;
        Ok(Bucket {
            name: bucket.to_string(),
            client,
            http,
            credentials,
            origin,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn resource(&self) -> String {
        format!("projects/_/buckets/{}", self.name)
    }

    /// Writes `object` with `metadata`, encrypted with the Cloud KMS key `kms_key_name` when one is given (the
    /// upload's `kmsKeyName`; else the bucket's default encryption); returns the size the service stored, which
    /// the caller compares.
    pub async fn put(
        &self,
        object: &str,
        bytes: bytes::Bytes,
        metadata: &BTreeMap<String, String>,
        kms_key_name: Option<&str>,
    ) -> Result<u64> {
        // The CRC32C goes with the object's metadata, ahead of the data, and the service checks the data against
        // it; the client's default sends it after the data, as a third multipart part, which not every endpoint
        // that speaks the JSON API reads (fake-gcs-server takes it for data).
        let crc = crc32c::crc32c(&bytes);
        let size = bytes.len() as u64;
        let written = retrying(call_limit(size), attempt_limit(size), || async {
            self.client
                .write_object(self.resource(), object, bytes.clone())
                .with_known_crc32c(crc)
                .set_content_type("application/octet-stream")
                .set_metadata(metadata.clone())
                // Empty means none: the client sends `kmsKeyName` only when it is set.
                .set_kms_key(kms_key_name.unwrap_or_default())
                // A new object only: a name is never written twice, so a retried upload cannot replace another
                // (one whose first attempt was stored but not answered meets its own object: the caller tells).
                .set_if_generation_match(0)
                .with_retry_policy(NeverRetry)
                .send_unbuffered()
                .await
                .map_err(Failed::from_client)
        })
        .await
        .map_err(|e| match e.status {
            Some(412) => Error::Exists {
                bucket: self.name.clone(),
                object: object.to_string(),
            },
            _ => Error::Write {
                bucket: self.name.clone(),
                object: object.to_string(),
                message: e.message,
            },
        })?;
        Ok(u64::try_from(written.size).unwrap_or_default())
    }

    /// The whole object.
    pub async fn get(&self, object: &str) -> Result<Vec<u8>> {
        let read_err = |message: String| Error::Read {
            bucket: self.name.clone(),
            object: object.to_string(),
            message,
        };
        let mut resp = self
            .client
            .read_object(self.resource(), object)
            .send()
            .await
            .map_err(|e| read_err(e.to_string()))?;
        let mut out = Vec::new();
        while let Some(chunk) = resp.next().await {
            out.extend_from_slice(&chunk.map_err(|e| read_err(e.to_string()))?);
        }
        Ok(out)
    }

    async fn auth_headers(&self) -> std::result::Result<http::HeaderMap, String> {
        match self.credentials.headers(http::Extensions::new()).await {
            Ok(CacheableResource::New { data, .. }) => Ok(data),
            Ok(CacheableResource::NotModified) => Ok(http::HeaderMap::new()),
            Err(e) => Err(format!("the credentials gave no token: {e}")),
        }
    }

    /// Every object whose name starts with `prefix`, in name order.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let list_err = |message: String| Error::List {
            bucket: self.name.clone(),
            prefix: prefix.to_string(),
            message,
        };
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Page {
            #[serde(default)]
            items: Vec<Item>,
            next_page_token: Option<String>,
        }
        #[derive(Deserialize)]
        struct Item {
            name: String,
            #[serde(default)]
            size: Option<String>,
            #[serde(default)]
            metadata: BTreeMap<String, String>,
        }
        let url = format!(
            "{}/storage/v1/b/{}/o",
            self.origin,
            utf8_percent_encode(&self.name, NON_ALPHANUMERIC)
        );
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![("prefix", prefix.to_string())];
            if let Some(t) = &token {
                query.push(("pageToken", t.clone()));
            }
            let body = retrying(CALL_LIMIT, attempt_limit(0), || async {
                let resp = self
                    .http
                    .get(&url)
                    .headers(
                        self.auth_headers()
                            .await
                            .map_err(|e| Failed::Permanent(None, e))?,
                    )
                    .query(&query)
                    .send()
                    .await
                    .map_err(|e| Failed::Transient(transport(&e)))?;
                let status = resp.status();
                let body = resp
                    .text()
                    .await
                    .map_err(|e| Failed::Transient(transport(&e)))?;
                if !status.is_success() {
                    return Err(Failed::from_status(status, answer(status, &body)));
                }
                Ok(body)
            })
            .await
            .map_err(|e| list_err(e.message))?;
            let page: Page = serde_json::from_str(&body)
                .map_err(|e| list_err(format!("the answer is not a listing: {e}")))?;
            out.extend(page.items.into_iter().map(|i| ObjectInfo {
                name: i.name,
                size: i.size.and_then(|s| s.parse().ok()).unwrap_or_default(),
                metadata: i.metadata,
            }));
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes `object`; one that is already gone is not an error.
    pub async fn delete(&self, object: &str) -> Result<()> {
        let delete_err = |message: String| Error::Delete {
            bucket: self.name.clone(),
            object: object.to_string(),
            message,
        };
        let url = format!(
            "{}/storage/v1/b/{}/o/{}",
            self.origin,
            utf8_percent_encode(&self.name, NON_ALPHANUMERIC),
            utf8_percent_encode(object, NON_ALPHANUMERIC)
        );
        retrying(CALL_LIMIT, attempt_limit(0), || async {
            let resp = self
                .http
                .delete(&url)
                .headers(
                    self.auth_headers()
                        .await
                        .map_err(|e| Failed::Permanent(None, e))?,
                )
                .send()
                .await
                .map_err(|e| Failed::Transient(transport(&e)))?;
            let status = resp.status();
            // Gone already (a retry of a delete whose answer was lost finds it so) is what was asked.
            if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
                return Ok(());
            }
            let body = resp.text().await.unwrap_or_default();
            Err(Failed::from_status(status, answer(status, &body)))
        })
        .await
        .map_err(|e| delete_err(e.message))
    }
}

/// A transport failure with its causes: "error sending request" alone does not say "connection refused".
fn transport(e: &reqwest::Error) -> String {
    ha_settings::error_chain::explain(e)
}

/// The service's refusal, with its own message when the body carries one (`{"error":{"message":...}}`).
fn answer(status: reqwest::StatusCode, body: &str) -> String {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.chars().take(200).collect());
    format!("HTTP {status}: {message}")
}

#[cfg(test)]
mod emulator_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_follows_the_custom_endpoint_then_the_universe() {
        let mut s = Settings::default();
        assert_eq!(origin(&s), "https://storage.googleapis.com");
        s.universe_domain = Some("s3nsapis.fr".into());
        assert_eq!(origin(&s), "https://storage.s3nsapis.fr");
        for (given, want) in [
            (
                "https://storage.example.com/storage/v1/",
                "https://storage.example.com",
            ),
            ("http://127.0.0.1:4443", "http://127.0.0.1:4443"),
            ("http://127.0.0.1:4443/", "http://127.0.0.1:4443"),
        ] {
            s.storage_endpoint = Some(given.into());
            assert_eq!(origin(&s), want, "{given}");
        }
    }

    #[test]
    fn a_refusal_shows_the_services_message() {
        let body = r#"{"error":{"code":404,"message":"The specified bucket does not exist."}}"#;
        assert_eq!(
            answer(reqwest::StatusCode::NOT_FOUND, body),
            "HTTP 404 Not Found: The specified bucket does not exist."
        );
        assert!(answer(reqwest::StatusCode::BAD_GATEWAY, "plain").ends_with("plain"));
    }
}
