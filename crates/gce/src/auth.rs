//! Credentials for the Compute client from the provider's `Auth`: Application Default Credentials, a key file
//! (path or JSON, any type ADC understands), or a raw access token; optionally impersonating a service account.
//! Tokens and keys are never logged or put into error messages.

use super::error::{Error, Result};
use google_cloud_auth::credentials::{
    self, CacheableResource, Credentials, CredentialsProvider, EntityTag, external_account,
    impersonated, service_account, user_account,
};
use google_cloud_auth::errors::CredentialsError;
use ha_settings::Auth;
use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};

const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

/// A caller-supplied OAuth 2.0 access token, sent as is (the SDK has no builder for one). It is never refreshed:
/// like Google's provider, we leave expiry to whoever minted it.
#[derive(Clone)]
struct AccessToken {
    header: HeaderValue,
    tag: EntityTag,
}

impl std::fmt::Debug for AccessToken {
    // The token must not reach a log line through the SDK's Debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(redacted)")
    }
}

impl CredentialsProvider for AccessToken {
    async fn headers(
        &self,
        extensions: http::Extensions,
    ) -> std::result::Result<CacheableResource<HeaderMap>, CredentialsError> {
        if extensions.get::<EntityTag>() == Some(&self.tag) {
            return Ok(CacheableResource::NotModified);
        }
        let mut data = HeaderMap::new();
        data.insert(AUTHORIZATION, self.header.clone());
        Ok(CacheableResource::New {
            entity_tag: self.tag.clone(),
            data,
        })
    }

    async fn universe_domain(&self) -> Option<String> {
        None
    }
}

fn access_token(token: &str) -> Result<Credentials> {
    let mut header = HeaderValue::from_str(&format!("Bearer {}", token.trim())).map_err(|_| {
        Error::Config("the access token contains characters not allowed in an HTTP header".into())
    })?;
    header.set_sensitive(true);
    Ok(Credentials::from(AccessToken {
        header,
        tag: EntityTag::new(),
    }))
}

/// `credentials` is a path to a JSON file or the JSON itself (Google's provider accepts both).
fn from_json_or_path(given: &str) -> Result<Credentials> {
    let text = if given.trim_start().starts_with('{') {
        given.to_string()
    } else {
        std::fs::read_to_string(given.trim()).map_err(|e| {
            Error::Config(format!(
                "reading the credentials file {:?}: {e}",
                given.trim()
            ))
        })?
    };
    // Parse errors are summarised without the input: it may be a private key.
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::Config(format!(
            "the credentials are not valid JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let kind = json
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or_default()
        .to_string();
    let built = match kind.as_str() {
        "service_account" => service_account::Builder::new(json).build(),
        "authorized_user" => user_account::Builder::new(json).build(),
        "impersonated_service_account" => impersonated::Builder::new(json).build(),
        "external_account" => external_account::Builder::new(json).build(),
        other => {
            return Err(Error::Config(format!(
                "unsupported credentials type {other:?} (want service_account, authorized_user, \
                 impersonated_service_account or external_account)"
            )));
        }
    };
    built.map_err(|e| Error::Config(format!("{kind} credentials: {e}")))
}

/// The universe the credentials are for: the provider's `universe_domain` (itself defaulted from
/// `GOOGLE_CLOUD_UNIVERSE_DOMAIN`), else Google Cloud's.
fn universe_domain(configured: Option<&str>) -> String {
    configured
        .filter(|u| !u.is_empty())
        .unwrap_or(ha_settings::DEFAULT_UNIVERSE_DOMAIN)
        .to_string()
}

/// The credentials the Compute clients use.
pub(crate) fn credentials(
    auth: &Auth,
    impersonate: Option<&str>,
    universe: Option<&str>,
) -> Result<Credentials> {
    let base = match auth {
        Auth::AccessToken(t) => access_token(t)?,
        Auth::Credentials(c) => from_json_or_path(c)?,
        // The universe is given so that building each client does not ask the metadata server for it (ADC
        // off GCE falls back to the metadata server; every client build would query it).
        Auth::Default => credentials::Builder::default()
            .with_scopes([CLOUD_PLATFORM])
            .with_universe_domain(universe_domain(universe))
            .build()
            .map_err(|e| Error::Config(format!("application default credentials: {e}")))?,
    };
    match impersonate.filter(|s| !s.is_empty()) {
        None => Ok(base),
        Some(email) => impersonated::Builder::from_source_credentials(base)
            .with_target_principal(email)
            .with_scopes([CLOUD_PLATFORM])
            .build()
            .map_err(|e| Error::Config(format!("impersonating {email}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_access_token_is_a_bearer_header_and_stays_out_of_debug() {
        let c = access_token("ya29.s3cr3t").unwrap();
        assert!(!format!("{c:?}").contains("s3cr3t"));
        let CacheableResource::New { data, .. } = c.headers(http::Extensions::new()).await.unwrap()
        else {
            panic!("expected headers");
        };
        assert_eq!(data[AUTHORIZATION], "Bearer ya29.s3cr3t");
    }

    // Building credentials spawns their token-refresh task: it needs a runtime (Compute::new is async).
    #[tokio::test]
    async fn credentials_are_read_from_json_or_from_a_file() {
        let json = r#"{"type": "authorized_user", "client_id": "id", "client_secret": "s3cr3t", "refresh_token": "r"}"#;
        from_json_or_path(json).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("adc.json");
        std::fs::write(&path, json).unwrap();
        from_json_or_path(path.to_str().unwrap()).unwrap();
        let e = from_json_or_path("/nonexistent/key.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("reading the credentials file"), "{e}");
    }

    #[tokio::test]
    async fn bad_key_json_is_reported_without_its_contents() {
        let e = from_json_or_path("{\"private_key\": \"s3cr3t\"")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
        let e = from_json_or_path("{\"type\": \"gdch_service_account\"}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unsupported credentials type"), "{e}");
    }
}
