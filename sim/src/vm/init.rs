//! The kubelet's job for the etcd pod's init containers (docs/master-config.md §9): each runs to completion, in
//! order, before etcd starts. A restoring master has two: the provider's fetch script (`gcloud storage cp`, then
//! the snapshot's recorded SHA-256 checked) fetches the snapshot with the VM's service account, and etcd's own tool restores it into the data directory. The sim runs etcd's tool for real
//! (the binary of the container's image, as it does for etcd) and plays gcloud's copy itself: a GET of the
//! object from the Cloud Storage endpoint the container names in `CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE`, since
//! no sim VM reaches Google's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::VmError;
use super::config::{HostMap, InitContainer, container_to_vm};
use crate::etcd_bins::EtcdBins;

/// `$0` of the provider's snapshot fetch script (`ha_master::manifests::FETCH_SNAPSHOT_NAME`).
const FETCH_SNAPSHOT: &str = "fetch-snapshot";

/// gcloud's variable for another Cloud Storage endpoint (`https://host/storage/v1/`).
const STORAGE_ENDPOINT_ENV: &str = "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE";

/// One init container, mapped onto the host.
#[derive(Debug, Clone)]
pub(crate) enum InitStep {
    /// `gcloud storage cp gs://bucket/object <file>`, and with `sha256` the check the provider's fetch script
    /// makes (`sh -c <script> fetch-snapshot URL FILE [SHA256]`): other bytes are refused and no file is left.
    Fetch {
        name: String,
        url: String,
        endpoint: String,
        dest: PathBuf,
        sha256: Option<String>,
    },
    /// A program of an etcd image, with host paths.
    Run {
        name: String,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    },
}

impl InitStep {
    pub fn name(&self) -> &str {
        match self {
            InitStep::Fetch { name, .. } | InitStep::Run { name, .. } => name,
        }
    }
}

fn program(argv: &[String]) -> &str {
    argv.first()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or_default()
}

/// Maps an init container onto the host, or says why the sim cannot run it.
pub(crate) fn step(c: &InitContainer, bins: &EtcdBins, map: &HostMap) -> Result<InitStep, VmError> {
    let guest = |p: &str| map.mounted_path(&container_to_vm(p, &c.volumes));
    let unplayable = || {
        VmError::Config(format!(
            "etcd.yaml: init container {:?}: the sim plays only `gcloud storage cp gs://... <file>` and \
             `sh -c <script> {FETCH_SNAPSHOT} gs://... <file> [sha256]`, got {:?}",
            c.name, c.argv
        ))
    };
    let fetch = match program(&c.argv) {
        // The provider's fetch script (ha_master's fetch-snapshot.sh): the copy, then the digest check.
        "sh" => match c.argv.as_slice() {
            [_, dash_c, _text, name, url, dest, rest @ ..]
                if dash_c == "-c" && name == FETCH_SNAPSHOT && rest.len() <= 1 =>
            {
                Some((url, dest, rest.first().cloned()))
            }
            _ => return Err(unplayable()),
        },
        "gcloud" => match c.argv.as_slice() {
            [_, storage, cp, url, dest] if storage == "storage" && cp == "cp" => {
                Some((url, dest, None))
            }
            _ => return Err(unplayable()),
        },
        _ => None,
    };
    match (program(&c.argv), fetch) {
        (_, Some((url, dest, sha256))) => {
            if !url.starts_with("gs://") {
                return Err(unplayable());
            }
            let endpoint = c
                .env
                .iter()
                .find(|(k, _)| k == STORAGE_ENDPOINT_ENV)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| {
                    VmError::Config(format!(
                        "etcd.yaml: init container {:?} copies {url} from Google's Cloud Storage, which no sim VM \
                         reaches: set {STORAGE_ENDPOINT_ENV} (the provider does when `storage_custom_endpoint` is set)",
                        c.name
                    ))
                })?;
            Ok(InitStep::Fetch {
                name: c.name.clone(),
                url: url.clone(),
                endpoint,
                dest: guest(dest)?,
                sha256,
            })
        }
        (tool @ ("etcdutl" | "etcdctl"), None) => {
            let etcd = bins.for_image(&c.image).map_err(VmError::Config)?;
            let bin = etcd.with_file_name(tool);
            if !bin.is_file() {
                return Err(VmError::Config(format!(
                    "{tool} (for image {}) not found next to {}",
                    c.image,
                    etcd.display()
                )));
            }
            let mut argv = vec![bin.to_string_lossy().into_owned()];
            for arg in &c.argv[1..] {
                let mapped = match arg.split_once('=') {
                    Some((flag, value)) if value.starts_with('/') => {
                        format!("{flag}={}", guest(value)?.display())
                    }
                    _ if arg.starts_with('/') => guest(arg)?.to_string_lossy().into_owned(),
                    _ => arg.clone(),
                };
                argv.push(mapped);
            }
            Ok(InitStep::Run {
                name: c.name.clone(),
                argv,
                env: c.env.clone(),
            })
        }
        (other, _) => Err(VmError::Config(format!(
            "etcd.yaml: init container {:?} runs {other:?}; the sim runs only etcd's tools and `gcloud storage cp`",
            c.name
        ))),
    }
}

/// Runs one init container to completion; its output goes to the etcd log, as `kubectl logs` would show it.
pub(crate) fn run(step: &InitStep, log: &Path) -> Result<(), String> {
    match step {
        InitStep::Run { argv, env, .. } => {
            let out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| format!("open {}: {e}", log.display()))?;
            let err = out.try_clone().map_err(|e| e.to_string())?;
            let status = Command::new(&argv[0])
                .args(&argv[1..])
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .stdin(Stdio::null())
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err))
                .status()
                .map_err(|e| format!("could not start {}: {e}", argv[0]))?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("{} {status}", argv[0]))
            }
        }
        InitStep::Fetch {
            url,
            endpoint,
            dest,
            sha256,
            ..
        } => fetch(url, endpoint, dest, sha256.as_deref()),
    }
}

/// Percent-encodes an object name for the JSON API's path (every byte but the unreserved ones).
fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `gcloud storage cp gs://bucket/object dest`: the object's bytes, written under a temporary name and then
/// renamed, as gcloud does, so a half-written file is never taken for the snapshot.
fn fetch(url: &str, endpoint: &str, dest: &Path, sha256: Option<&str>) -> Result<(), String> {
    let rest = url.strip_prefix("gs://").unwrap_or(url);
    let (bucket, object) = rest
        .split_once('/')
        .ok_or_else(|| format!("{url} names no object"))?;
    let base = endpoint.trim_end_matches('/');
    let get = format!("{base}/b/{}/o/{}?alt=media", encode(bucket), encode(object));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let part = dest.with_extension("part");
    rt.block_on(async {
        let mut resp = crate::http::http_client()
            .get(&get)
            .send()
            .await
            .map_err(|e| format!("GET {get}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("GET {get}: HTTP {}", resp.status()));
        }
        if let Some(parent) = part.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        let mut file = std::fs::File::create(&part).map_err(|e| e.to_string())?;
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("GET {get}: {e}"))? {
            file.write_all(&chunk).map_err(|e| e.to_string())?;
        }
        file.sync_all().map_err(|e| e.to_string())
    })?;
    if let Some(want) = sha256 {
        // The recorded digest is the database's: the snapshot less etcd's own 32-byte SHA-256 trailer.
        let bytes = std::fs::read(&part).map_err(|e| format!("read {}: {e}", part.display()))?;
        if bytes.len() <= 32 {
            let _ = std::fs::remove_file(&part);
            return Err(format!(
                "fetch-snapshot: {url} is {} bytes, too small to be an etcd snapshot; refusing to restore it",
                bytes.len()
            ));
        }
        let got = super::keys::sha256_hex(&bytes[..bytes.len() - 32]);
        if got != want {
            let _ = std::fs::remove_file(&part);
            return Err(format!(
                "fetch-snapshot: {url} has SHA-256 {got}, not the {want} recorded when it was taken; refusing to \
                 restore it"
            ));
        }
    }
    std::fs::rename(&part, dest).map_err(|e| format!("rename to {}: {e}", dest.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(argv: &[&str]) -> InitContainer {
        InitContainer {
            name: "fetch-snapshot".into(),
            image: "gcr.io/google.com/cloudsdktool/google-cloud-cli:528.0.0-slim".into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            env: vec![(
                STORAGE_ENDPOINT_ENV.into(),
                "http://127.0.0.1:4443/storage/v1/".into(),
            )],
            volumes: vec![(
                "/var/lib/etcd-restore".into(),
                "/var/lib/etcd-restore".into(),
            )],
        }
    }

    /// The provider's fetch script is played with its digest; gcloud's bare copy without; any other shape is a
    /// boot error, never a fetch that skips a check the script would make.
    #[test]
    fn the_fetch_script_is_played_with_its_digest_and_other_shapes_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let map = HostMap {
            rootfs: root.path().into(),
            ip: "10.0.0.2".parse().unwrap(),
            mounted: vec![],
        };
        let bins = EtcdBins::single("/nonexistent/etcd");
        let url = "gs://b/clusters/walk/etcd.db";
        let dest = "/var/lib/etcd-restore/snapshot.db";
        let sha = "ab".repeat(32);
        let played = |argv: &[&str]| step(&container(argv), &bins, &map);
        match played(&["sh", "-c", "script", FETCH_SNAPSHOT, url, dest, &sha]).unwrap() {
            InitStep::Fetch {
                url: u,
                sha256,
                dest: d,
                ..
            } => {
                assert_eq!(u, url);
                assert_eq!(sha256.as_deref(), Some(sha.as_str()));
                assert_eq!(d, root.path().join("var/lib/etcd-restore/snapshot.db"));
            }
            other => panic!("{other:?}"),
        }
        match played(&["gcloud", "storage", "cp", url, dest]).unwrap() {
            InitStep::Fetch { sha256, .. } => assert_eq!(sha256, None),
            other => panic!("{other:?}"),
        }
        for refused in [
            vec!["sh", "-c", "script", "other-script", url, dest, &sha],
            vec![
                "sh",
                "-c",
                "script",
                FETCH_SNAPSHOT,
                url,
                dest,
                &sha,
                "extra",
            ],
            vec![
                "sh",
                "-c",
                "script",
                FETCH_SNAPSHOT,
                "https://example.com/x",
                dest,
            ],
            vec!["gcloud", "storage", "rsync", url, dest],
        ] {
            let err = played(&refused).expect_err("refused");
            assert!(format!("{err:?}").contains("the sim plays only"), "{err:?}");
        }
    }

    #[test]
    fn object_names_are_encoded_as_one_path_segment() {
        assert_eq!(
            encode("backups/prod/etcd-20261125T101500Z-rev42.db"),
            "backups%2Fprod%2Fetcd-20261125T101500Z-rev42.db"
        );
        assert_eq!(encode("a b+c"), "a%20b%2Bc");
    }
}
