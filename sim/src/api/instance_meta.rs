//! instances.setMetadata, instances.setLabels and instances.setTags: optimistic concurrency with fingerprints. The request must
//! carry the current fingerprint or get 412 conditionNotMet; every accepted change rotates it.

use super::Req;
use super::common::body;
use super::error::{ApiError, ApiResult};
use super::instance_request::{find, op};
use crate::app::Sim;
use crate::ops::OpSpec;
use crate::ops::model::Transition;
use crate::state::resources::Metadata;
use crate::state::{Cloud, ids};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// GCE's limit on all metadata of one instance.
const METADATA_LIMIT: usize = 512 * 1024;

/// Keys unique and well-formed, total size within the limit.
pub fn check_metadata(m: &Metadata) -> ApiResult<()> {
    let mut seen = BTreeSet::new();
    let mut size = 0;
    for item in &m.items {
        let ok = !item.key.is_empty()
            && item.key.len() <= 128
            && item
                .key
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
        if !ok {
            return Err(ApiError::invalid_field(
                "resource.items.key",
                &item.key,
                "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'",
            ));
        }
        if !seen.insert(item.key.as_str()) {
            return Err(ApiError::invalid(format!(
                "Duplicate keys in metadata: '{}'.",
                item.key
            )));
        }
        size += item.key.len() + item.value.as_ref().map_or(0, String::len);
    }
    if size > METADATA_LIMIT {
        return Err(ApiError::invalid(format!(
            "Metadata size {size} exceeds the limit of {METADATA_LIMIT} bytes."
        )));
    }
    Ok(())
}

/// GCE label rules: ≤ 64 labels; keys start with a lowercase letter; keys and values ≤ 63 of `[a-z0-9_-]`.
pub fn check_labels(labels: &BTreeMap<String, String>) -> ApiResult<()> {
    let chars_ok = |s: &str| {
        s.len() <= 63
            && s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
    };
    if labels.len() > 64 {
        return Err(ApiError::invalid(
            "Too many labels: at most 64 are allowed.",
        ));
    }
    for (k, v) in labels {
        if !k.starts_with(|c: char| c.is_ascii_lowercase()) || !chars_ok(k) {
            return Err(ApiError::invalid_field(
                "labels",
                k,
                "Label keys must start with a lowercase letter and use [a-z0-9_-].",
            ));
        }
        if !chars_ok(v) {
            return Err(ApiError::invalid_field(
                &format!("labels.{k}"),
                v,
                "Label values use at most 63 of [a-z0-9_-].",
            ));
        }
    }
    Ok(())
}

pub fn set_metadata(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let m: Metadata = body(req)?;
    let (k, i) = find(cloud, req)?;
    if m.fingerprint != i.metadata.fingerprint {
        return Err(ApiError::fingerprint("metadata"));
    }
    check_metadata(&m)?;
    i.metadata = Metadata {
        kind: "compute#metadata".into(),
        fingerprint: ids::new_fingerprint(),
        items: m.items,
    };
    let id = i.id.clone();
    Ok(op(
        req,
        "setMetadata",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct SetLabels {
    labels: BTreeMap<String, String>,
    label_fingerprint: String,
}

pub fn set_labels(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let s: SetLabels = body(req)?;
    let (k, i) = find(cloud, req)?;
    if s.label_fingerprint != i.label_fingerprint {
        return Err(ApiError::fingerprint("label"));
    }
    check_labels(&s.labels)?;
    i.labels = s.labels;
    i.label_fingerprint = ids::new_fingerprint();
    let id = i.id.clone();
    Ok(op(
        req,
        "setLabels",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}

/// `instances.setTags`: the body is the `Tags` object itself (`items`, `fingerprint`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct SetTags {
    items: Vec<String>,
    fingerprint: String,
}

/// GCE's tag rules: at most 64, each 1 to 63 characters of RFC 1035 (a lowercase letter first, no trailing `-`).
fn check_tags(tags: &[String]) -> ApiResult<()> {
    if tags.len() > 64 {
        return Err(ApiError::invalid(format!(
            "Instance has {} network tags; the limit is 64.",
            tags.len()
        )));
    }
    for (n, tag) in tags.iter().enumerate() {
        let b = tag.as_bytes();
        let ok = (1..=63).contains(&b.len())
            && b[0].is_ascii_lowercase()
            && b[b.len() - 1] != b'-'
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
        if !ok {
            return Err(ApiError::invalid_field(
                &format!("resource.items[{n}]"),
                tag,
                "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'",
            ));
        }
    }
    Ok(())
}

pub fn set_tags(_sim: &Sim, cloud: &mut Cloud, req: &Req) -> ApiResult<OpSpec> {
    let s: SetTags = body(req)?;
    let (k, i) = find(cloud, req)?;
    if s.fingerprint != i.tags.fingerprint {
        return Err(ApiError::fingerprint("tags"));
    }
    check_tags(&s.items)?;
    i.tags.items = s.items;
    i.tags.fingerprint = ids::new_fingerprint();
    let id = i.id.clone();
    Ok(op(
        req,
        "setTags",
        k,
        id,
        Transition::Nothing,
        Transition::Nothing,
    ))
}
