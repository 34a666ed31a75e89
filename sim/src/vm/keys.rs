//! cloud-init's first `runcmd` on a master whose keys live in Secret Manager (docs/master-config.md §11):
//! `sh /etc/srv/kubernetes/fetch-keys.sh SECRET SHA256 ORIGIN`. The sim plays the script as it plays
//! `gcloud storage cp`: it reads `SECRET`'s newest version at `ORIGIN` with the token the VM's metadata server
//! would hand out (the VM's service account's, so the secret's IAM policy decides), checks the bundle against
//! `SHA256`, and unpacks it with its modes and owners.

use base64::Engine;

use super::VmError;
use super::guest_file::GuestFile;
use crate::secrets::token::SERVICE_ACCOUNT_TOKEN;

/// Where the contract writes the script (ha-master's `keys::FETCH_SCRIPT`).
pub(crate) const FETCH_SCRIPT: &str = "/etc/srv/kubernetes/fetch-keys.sh";

/// What the fetch sends as its user agent, as curl does.
pub(crate) const VM_USER_AGENT: &str = "curl/8.14.1";

/// One parsed fetch: its three arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyFetch {
    pub secret: String,
    pub sha256: String,
    pub origin: String,
}

/// The fetch among `runcmd`'s entries, if any; an entry that runs the script some other way is refused, as the
/// script would refuse it.
pub(crate) fn of(runcmd: &[Vec<String>]) -> Result<Option<KeyFetch>, VmError> {
    let Some(cmd) = runcmd.iter().find(|c| c.iter().any(|a| a == FETCH_SCRIPT)) else {
        return Ok(None);
    };
    match cmd.as_slice() {
        [sh, script, secret, sha256, origin] if sh == "sh" && script == FETCH_SCRIPT => {
            Ok(Some(KeyFetch {
                secret: secret.clone(),
                sha256: sha256.clone(),
                origin: origin.trim_end_matches('/').to_string(),
            }))
        }
        _ => Err(VmError::Config(format!(
            "runcmd {cmd:?}: the fetch script takes exactly SECRET SHA256 ORIGIN (`sh {FETCH_SCRIPT} ...`)"
        ))),
    }
}

/// The one scope Secret Manager takes a token with.
const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Reads and unpacks the bundle as the VM's service account, or says why the VM would wait for its keys.
pub(crate) fn fetch(f: &KeyFetch, vm: &super::Attached) -> Result<Vec<GuestFile>, VmError> {
    let waiting = |why: String| {
        VmError::Config(format!(
            "fetch-keys.sh is still waiting for this master's keys (the kubelet does not start): {why}"
        ))
    };
    let account = vm.service_account.as_deref().ok_or_else(|| {
        waiting("the VM has no service account, so its metadata server gives no token".into())
    })?;
    // The metadata server's token carries the VM's scopes, and Secret Manager refuses one without this.
    if !vm.scopes.iter().any(|s| s == CLOUD_PLATFORM) {
        return Err(waiting(format!(
            "GET {}/v1/{}/versions/latest:access: HTTP 403: Request had insufficient authentication scopes \
             (the VM's scopes lack {CLOUD_PLATFORM})",
            f.origin, f.secret
        )));
    }
    let url = format!("{}/v1/{}/versions/latest:access", f.origin, f.secret);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| waiting(e.to_string()))?;
    let answer: serde_json::Value = rt.block_on(async {
        let resp = crate::http::http_client()
            .get(&url)
            .bearer_auth(format!("{SERVICE_ACCOUNT_TOKEN}{account}"))
            // The script's client is curl; the request log tells the masters' calls from the provider's by it.
            .header(reqwest::header::USER_AGENT, VM_USER_AGENT)
            .send()
            .await
            .map_err(|e| waiting(format!("GET {url}: {e}")))?;
        let status = resp.status();
        let body = resp
            .text()
            .await
            .map_err(|e| waiting(format!("GET {url}: {e}")))?;
        if !status.is_success() {
            return Err(waiting(format!(
                "GET {url} as {account}: HTTP {status}: {body}"
            )));
        }
        serde_json::from_str(&body).map_err(|e| waiting(format!("GET {url}: {e}")))
    })?;
    let data = answer["payload"]["data"].as_str().unwrap_or_default();
    let tar = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| waiting(format!("{}: payload is not base64: {e}", f.secret)))?;
    let got = sha256_hex(&tar);
    if got != f.sha256 {
        return Err(waiting(format!(
            "{} holds a bundle with SHA-256 {got}, not this VM's {}",
            f.secret, f.sha256
        )));
    }
    unpack(&tar).map_err(|e| waiting(format!("{}: {e}", f.secret)))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// GNU tar's `-xp` as root: regular files at `/`-relative paths, with their modes and `user:group` owners.
fn unpack(tar_bytes: &[u8]) -> Result<Vec<GuestFile>, String> {
    let mut archive = tar::Archive::new(tar_bytes);
    let mut out = Vec::new();
    for entry in archive.entries().map_err(|e| format!("not a tar: {e}"))? {
        let mut entry = entry.map_err(|e| format!("a damaged tar: {e}"))?;
        let header = entry.header().clone();
        if header.entry_type() != tar::EntryType::Regular {
            return Err(format!(
                "the bundle holds a {:?}; it holds regular files only",
                header.entry_type()
            ));
        }
        let path = entry
            .path()
            .map_err(|e| format!("a bad path: {e}"))?
            .to_string_lossy()
            .into_owned();
        let name = |n: Option<&str>, id: u64| n.map_or_else(|| id.to_string(), str::to_string);
        let owner = format!(
            "{}:{}",
            name(header.username().ok().flatten(), header.uid().unwrap_or(0)),
            name(header.groupname().ok().flatten(), header.gid().unwrap_or(0))
        );
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).map_err(|e| format!("{path}: {e}"))?;
        out.push(GuestFile {
            path: format!("/{}", path.trim_start_matches('/')),
            mode: header.mode().map_err(|e| format!("{path}: {e}"))? & 0o7777,
            owner,
            append: false,
            bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_fetch_is_found_among_the_commands_and_a_malformed_one_refused() {
        let runcmd = vec![
            argv(&[
                "sh",
                FETCH_SCRIPT,
                "projects/p/secrets/s",
                "ab",
                "http://h/",
            ]),
            argv(&["systemctl", "daemon-reload"]),
        ];
        assert_eq!(
            of(&runcmd).unwrap(),
            Some(KeyFetch {
                secret: "projects/p/secrets/s".into(),
                sha256: "ab".into(),
                origin: "http://h".into(),
            })
        );
        assert_eq!(of(&runcmd[1..]).unwrap(), None);
        let e = of(&[argv(&["sh", FETCH_SCRIPT, "projects/p/secrets/s"])]).unwrap_err();
        assert!(e.to_string().contains("SECRET SHA256 ORIGIN"), "{e}");
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod fetch_tests;
