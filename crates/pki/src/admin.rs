//! A short-lived client certificate for a cluster admin, signed by the cluster CA: what `kubectl` presents to an
//! API server started with `--client-ca-file` (the API server reads CN as the user and O as the groups).

use std::time::Duration;

use time::OffsetDateTime;

use super::{CertKey, Issuer, LeafSpec, PkiError, Result, Usage};

/// What an admin certificate names and how long it lives (bounds are the caller's rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminCertRequest {
    pub user: String,
    pub groups: Vec<String>,
    pub validity: Duration,
}

/// An issued admin certificate and when it expires.
#[derive(Debug, Clone)]
pub struct AdminCert {
    pub cert: CertKey,
    pub not_after: OffsetDateTime,
}

/// Signs a fresh key's client certificate with the cluster CA (`ca`: the cluster's CA certificate and key).
pub fn issue_admin_cert(ca: &CertKey, req: &AdminCertRequest) -> Result<AdminCert> {
    let issuer = Issuer::from_pem(&ca.cert_pem, &ca.key_pem).map_err(|e| match e {
        PkiError::LoadCa { reason, .. } => PkiError::LoadCa {
            ca: "cluster CA".into(),
            reason,
        },
        other => other,
    })?;
    let lifetime =
        time::Duration::try_from(req.validity).map_err(|e| PkiError::InvalidRequest {
            field: "validity",
            reason: e.to_string(),
        })?;
    let not_after = OffsetDateTime::now_utc()
        .checked_add(lifetime)
        .ok_or_else(|| PkiError::InvalidRequest {
            field: "validity",
            reason: "ends past the last representable date".into(),
        })?;
    let spec = LeafSpec {
        common_name: req.user.clone(),
        organizations: req.groups.clone(),
        ..LeafSpec::default()
    };
    // Never past the CA: the expiry Terraform reports is the certificate's own.
    let not_after = not_after.min(issuer.expires_at());
    let cert = issuer.issue_until(&spec, Usage::Client, not_after)?;
    Ok(AdminCert { cert, not_after })
}

impl AdminCert {
    /// The expiry as RFC 3339 in UTC (`2026-11-23T19:04:05Z`), as Terraform users read timestamps.
    pub fn expires_rfc3339(&self) -> String {
        let t = self.not_after.to_offset(time::UtcOffset::UTC);
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        )
    }
}
