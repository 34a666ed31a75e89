//! One function per Secret Manager method: validates as Secret Manager does, changes the stored secret, and
//! answers with the API's own JSON. IAM was checked before any of them runs (`mod.rs`).

use super::iam::known_role;
use super::model::{Binding, Policy, Secret, Version, VersionState, policy_etag};
use super::{SmError, SmReq, SmResult};
use crate::state::{Cloud, ids};
use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The largest payload Secret Manager takes: 64 KiB.
pub const MAX_PAYLOAD: usize = 64 * 1024;

/// The key a secret is stored under in `Cloud::secrets`.
pub fn key(req: &SmReq) -> String {
    format!("{}/{}", req.project, req.secret)
}

fn path(req: &SmReq) -> String {
    format!("projects/{}/secrets/{}", req.project, req.secret)
}

fn secret<'a>(cloud: &'a Cloud, req: &SmReq) -> SmResult<&'a Secret> {
    cloud
        .secrets
        .get(&key(req))
        .ok_or_else(|| SmError::not_found(format!("Secret [{}] not found.", path(req))))
}

fn secret_mut<'a>(cloud: &'a mut Cloud, req: &SmReq) -> SmResult<&'a mut Secret> {
    let p = path(req);
    cloud
        .secrets
        .get_mut(&key(req))
        .ok_or_else(|| SmError::not_found(format!("Secret [{p}] not found.")))
}

/// Secret Manager's rule for a secret id: letters, digits, `-` and `_`, at most 255.
fn valid_secret_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 255
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn string_map(v: &Value, field: &str) -> SmResult<BTreeMap<String, String>> {
    match v {
        Value::Null => Ok(BTreeMap::new()),
        v => serde_json::from_value(v.clone())
            .map_err(|_| SmError::invalid(format!("{field} must map strings to strings"))),
    }
}

pub fn create(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let id = req.query.get("secretId").map(String::as_str).unwrap_or("");
    if !valid_secret_id(id) {
        return Err(SmError::invalid(format!(
            "The provided Secret ID [{id}] does not match the expected format [[a-zA-Z_0-9-]+]"
        )));
    }
    let replication = req.body.get("replication").cloned().unwrap_or(Value::Null);
    if !replication.is_object() || replication.as_object().is_some_and(|o| o.is_empty()) {
        return Err(SmError::invalid("Secret.replication must be specified."));
    }
    let k = format!("{}/{id}", req.project);
    if cloud.secrets.contains_key(&k) {
        return Err(SmError::new(
            409,
            "ALREADY_EXISTS",
            format!(
                "Secret [projects/{}/secrets/{id}] already exists.",
                req.project
            ),
        ));
    }
    let s = Secret {
        project: req.project.clone(),
        name: id.to_string(),
        create_time: ids::now_rfc3339(),
        labels: string_map(&req.body["labels"], "labels")?,
        annotations: string_map(&req.body["annotations"], "annotations")?,
        replication,
        versions: Vec::new(),
        policy: Policy::default(),
        revision: 1,
    };
    let view = s.view();
    cloud.secrets.insert(k, s);
    Ok(view)
}

pub fn list(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let wanted = label_filter(req.query.get("filter").map(String::as_str).unwrap_or(""))?;
    let secrets: Vec<Value> = cloud
        .secrets
        .values()
        .filter(|s| s.project == req.project)
        .filter(|s| wanted.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .map(Secret::view)
        .collect();
    let total = secrets.len();
    Ok(if secrets.is_empty() {
        json!({})
    } else {
        json!({"secrets": secrets, "totalSize": total})
    })
}

/// The labels a `secrets.list` filter asks for: the real service's filter language, as far as the sim follows
/// it, is terms `labels.KEY=VALUE` joined by `AND` (or by spaces, which mean AND). Anything else is refused,
/// so a client that relies on more learns it here rather than getting every secret back.
fn label_filter(filter: &str) -> SmResult<Vec<(String, String)>> {
    filter
        .split_whitespace()
        .filter(|t| *t != "AND")
        .map(|term| {
            term.strip_prefix("labels.")
                .and_then(|t| t.split_once('='))
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
                .ok_or_else(|| {
                    SmError::invalid(format!(
                        "filter term {term:?}: the sim answers terms labels.KEY=VALUE joined by AND"
                    ))
                })
        })
        .collect()
}

pub fn get(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    Ok(secret(cloud, req)?.view())
}

/// `updateMask` names what changes: `labels` and `annotations` are what the sim keeps.
pub fn patch(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let mask = req.query.get("updateMask").cloned().unwrap_or_default();
    let labels = string_map(&req.body["labels"], "labels")?;
    let annotations = string_map(&req.body["annotations"], "annotations")?;
    let s = secret_mut(cloud, req)?;
    for field in mask.split(',').filter(|f| !f.is_empty()) {
        match field {
            "labels" => s.labels = labels.clone(),
            "annotations" => s.annotations = annotations.clone(),
            other => {
                return Err(SmError::invalid(format!(
                    "The update mask field [{other}] is not supported by this sim"
                )));
            }
        }
    }
    s.revision += 1;
    Ok(s.view())
}

pub fn delete(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let s = secret(cloud, req)?;
    // Google's clients send an empty etag when none is given: no condition, as Secret Manager takes it.
    if let Some(etag) = req.query.get("etag").filter(|e| !e.is_empty())
        && *etag != s.etag()
    {
        return Err(SmError::failed_precondition(format!(
            "The etag provided [{etag}] does not match the current etag of the secret."
        )));
    }
    cloud.secrets.remove(&key(req));
    Ok(json!({}))
}

/// The payload as bytes, checked against the checksum the caller sent (gcloud and Google's SDKs send CRC32C).
fn payload(body: &Value) -> SmResult<(String, Vec<u8>)> {
    let data = body["payload"]["data"].as_str().unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| SmError::invalid("SecretPayload.data is not valid base64."))?;
    if bytes.len() > MAX_PAYLOAD {
        return Err(SmError::invalid(format!(
            "Secret Version payload size exceeds the limit of {MAX_PAYLOAD} bytes."
        )));
    }
    if let Some(sent) = body["payload"].get("dataCrc32c") {
        let sent = sent
            .as_str()
            .and_then(|s| s.parse::<u32>().ok())
            .or_else(|| sent.as_u64().and_then(|n| u32::try_from(n).ok()));
        if sent != Some(crc32c::crc32c(&bytes)) {
            return Err(SmError::invalid(
                "Checksum mismatch: the data_crc32c does not match the payload's CRC32C.",
            ));
        }
    }
    Ok((data.to_string(), bytes))
}

pub fn add_version(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let (data, _) = payload(&req.body)?;
    let s = secret_mut(cloud, req)?;
    s.versions.push(Version {
        create_time: ids::now_rfc3339(),
        state: VersionState::Enabled,
        data: Some(data),
        destroy_time: None,
    });
    s.revision += 1;
    Ok(s.version_view(s.versions.len()))
}

/// The version a request names: a number, or `latest` (the newest enabled one for an access, the newest for
/// anything else).
fn version_number(s: &Secret, req: &SmReq, for_access: bool) -> SmResult<usize> {
    let missing = || {
        SmError::not_found(format!(
            "Secret Version [{}/versions/{}] not found.",
            s.path(),
            req.version
        ))
    };
    let n = if req.version == "latest" {
        let newest = if for_access {
            s.latest_enabled()
        } else {
            s.latest()
        };
        newest.ok_or_else(|| {
            SmError::not_found(format!(
                "Secret [{}] not found or has no versions.",
                s.path()
            ))
        })?
    } else {
        req.version.parse::<usize>().map_err(|_| missing())?
    };
    if n == 0 || n > s.versions.len() {
        return Err(missing());
    }
    Ok(n)
}

pub fn list_versions(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let s = secret(cloud, req)?;
    // Newest first, as Secret Manager lists them.
    let versions: Vec<Value> = (1..=s.versions.len())
        .rev()
        .map(|n| s.version_view(n))
        .collect();
    Ok(if versions.is_empty() {
        json!({})
    } else {
        json!({"versions": versions, "totalSize": versions.len()})
    })
}

pub fn get_version(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let s = secret(cloud, req)?;
    Ok(s.version_view(version_number(s, req, false)?))
}

pub fn access(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let s = secret(cloud, req)?;
    let n = version_number(s, req, true)?;
    let v = &s.versions[n - 1];
    let data = match (&v.state, &v.data) {
        (VersionState::Enabled, Some(d)) => d,
        (state, _) => {
            return Err(SmError::failed_precondition(format!(
                "Secret Version [{}/versions/{n}] is in {} state.",
                s.path(),
                serde_json::to_value(state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            )));
        }
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap_or_default();
    Ok(json!({
        "name": format!("{}/versions/{n}", s.path()),
        "payload": {"data": data, "dataCrc32c": crc32c::crc32c(&bytes).to_string()},
    }))
}

fn set_state(cloud: &mut Cloud, req: &SmReq, to: VersionState) -> SmResult<Value> {
    let s = secret_mut(cloud, req)?;
    let n = version_number(s, req, false)?;
    let v = &mut s.versions[n - 1];
    if v.state == VersionState::Destroyed && to != VersionState::Destroyed {
        return Err(SmError::failed_precondition(format!(
            "Secret Version [{}/versions/{n}] is destroyed and cannot be changed.",
            s.path()
        )));
    }
    if to == VersionState::Destroyed && v.state != VersionState::Destroyed {
        v.data = None;
        v.destroy_time = Some(ids::now_rfc3339());
    }
    v.state = to;
    s.revision += 1;
    Ok(s.version_view(n))
}

pub fn disable(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    set_state(cloud, req, VersionState::Disabled)
}

pub fn enable(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    set_state(cloud, req, VersionState::Enabled)
}

pub fn destroy(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    set_state(cloud, req, VersionState::Destroyed)
}

pub fn get_iam_policy(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    Ok(secret(cloud, req)?.policy_view())
}

/// Replaces the policy. An etag, when sent, must be the current one (IAM's read-modify-write guard), every role
/// one the sim knows and every member a principal IAM can name.
pub fn set_iam_policy(cloud: &mut Cloud, req: &SmReq) -> SmResult<Value> {
    let policy = &req.body["policy"];
    if policy.get("auditConfigs").is_some()
        || policy["bindings"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b.get("condition").is_some()))
    {
        return Err(SmError::invalid(
            "Conditional bindings and audit configs are not supported by this sim.",
        ));
    }
    let bindings: Vec<Binding> = match &policy["bindings"] {
        Value::Null => Vec::new(),
        b => serde_json::from_value(b.clone())
            .map_err(|e| SmError::invalid(format!("Policy.bindings is not valid: {e}")))?,
    };
    for b in &bindings {
        if !known_role(&b.role) {
            return Err(SmError::invalid(format!(
                "Role {} is not supported for this resource.",
                b.role
            )));
        }
        if let Some(m) = b.members.iter().find(|m| !valid_member(m)) {
            return Err(SmError::invalid(format!("Invalid member: {m}")));
        }
    }
    let s = secret_mut(cloud, req)?;
    if let Some(etag) = policy["etag"].as_str().filter(|e| !e.is_empty())
        && etag != policy_etag(s.revision)
    {
        return Err(SmError::new(
            409,
            "ABORTED",
            "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.",
        ));
    }
    s.policy = Policy {
        bindings: bindings
            .into_iter()
            .filter(|b| !b.members.is_empty())
            .collect(),
    };
    s.revision += 1;
    Ok(s.policy_view())
}

fn valid_member(m: &str) -> bool {
    m == "allUsers"
        || m == "allAuthenticatedUsers"
        || [
            "serviceAccount:",
            "user:",
            "group:",
            "domain:",
            "principal:",
            "principalSet:",
        ]
        .iter()
        .any(|p| m.strip_prefix(p).is_some_and(|rest| !rest.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::label_filter;

    #[test]
    fn a_list_filter_is_label_terms_or_refused() {
        let pairs = |f: &str| label_filter(f).map_err(|e| e.message);
        assert_eq!(pairs(""), Ok(vec![]));
        assert_eq!(
            pairs("labels.a=1 AND labels.b=\"two\""),
            Ok(vec![("a".into(), "1".into()), ("b".into(), "two".into())])
        );
        assert_eq!(pairs("labels.a=1 labels.b=2").map(|v| v.len()), Ok(2));
        for refused in [
            "name:keys",
            "labels.a",
            "labels.=1",
            "labels.a=",
            "labels.a:*",
        ] {
            assert!(pairs(refused).is_err(), "{refused} must be refused");
        }
    }
}
