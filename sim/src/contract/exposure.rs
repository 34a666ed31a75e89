//! Least privilege on the master's disk: which private files (mode 0600: keys, and the kubeconfigs that name
//! them) a container can open through its hostPath mounts although nothing it runs ever reads them. A master
//! with such an exposure boots fine, so this is no refusal of the boot: `ops`' contract tests call it for every
//! supported release, and a compromised container (the third-party health-check image runs as uid 0) then holds
//! only its own keys.

use super::Refusal;
use super::master::{Container, Master};
use super::reads;
use crate::vm::config;
use std::collections::{BTreeMap, BTreeSet};

/// A private file a container can open and never reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    /// `kube-apiserver.yaml`.
    pub manifest: String,
    pub container: String,
    /// The file as the VM holds it.
    pub file: String,
}

impl std::fmt::Display for Exposure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "container `{}` of {} can read {}, which it never opens",
            self.container, self.manifest, self.file
        )
    }
}

/// Private files a VM writes are 0600 (`crates/master/src/keys.rs`): nobody but their owner may read them.
fn private(mode: u32) -> bool {
    mode & 0o077 == 0
}

/// Every exposure of the master whose startup configuration is `metadata`, by manifest, container and file. A
/// startup configuration, manifest or kubeconfig that does not parse is an error, as the boot would refuse it.
pub fn exposures(metadata: &BTreeMap<String, String>) -> Result<Vec<Exposure>, Refusal> {
    let startup = config::parse(metadata).map_err(|e| Refusal::new("cloud-init", e.to_string()))?;
    let master = Master::parse(&startup.files).map_err(|e| Refusal::new("kubelet", e))?;
    let reads = reads::of(&master)?;
    // What each container opens, as VM paths: the files its flags name and those its kubeconfigs name.
    let mut opened: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for r in &reads {
        let Some(c) = &r.container else { continue };
        let set = opened
            .entry((c.manifest.clone(), c.name.clone()))
            .or_default();
        set.extend(r.paths.iter().filter_map(|p| c.host_path(p)));
    }
    let mut out = Vec::new();
    for c in &master.containers {
        let opens = opened.get(&(c.manifest.clone(), c.name.clone()));
        for (path, file) in &master.files {
            if !private(file.mode) || !visible(c, path) {
                continue;
            }
            if opens.is_none_or(|o| !o.contains(*path)) {
                out.push(Exposure {
                    manifest: c.manifest.clone(),
                    container: c.name.clone(),
                    file: path.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// Whether a VM path lies under one of the container's hostPath mounts.
fn visible(c: &Container, vm_path: &str) -> bool {
    c.mounts.iter().any(|(_, host)| {
        vm_path == host.as_str() || vm_path.starts_with(&format!("{}/", host.trim_end_matches('/')))
    })
}
