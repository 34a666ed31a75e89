//! A master as the contract checker sees it: every static pod's containers (image, argv, user, mounts), the files
//! cloud-init wrote (with owner and mode), the addon manifests and the kubelet's own flags. Parsed from the same
//! `write_files` the VM boots from.

use super::release::Version;
use crate::vm::config::MANIFEST_DIR;
use crate::vm::guest_file::GuestFile;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Where the addon manager reads the manifests it applies (kube-up's addon directory).
pub(crate) const ADDON_DIR: &str = "/etc/kubernetes/addons";
/// The kubelet's systemd drop-in: its `ExecStart` is the kubelet's argv.
pub(crate) const KUBELET_DROPIN_DIR: &str = "/etc/systemd/system/kubelet.service.d";

#[derive(Debug, Deserialize)]
struct Pod {
    spec: PodSpec,
}

#[derive(Debug, Deserialize)]
struct PodSpec {
    #[serde(default, rename = "initContainers")]
    init_containers: Vec<RawContainer>,
    containers: Vec<RawContainer>,
    #[serde(default)]
    volumes: Vec<Volume>,
}

#[derive(Debug, Deserialize)]
struct Volume {
    name: String,
    #[serde(default, rename = "hostPath")]
    host_path: Option<HostPath>,
}

#[derive(Debug, Deserialize)]
struct HostPath {
    path: String,
}

#[derive(Debug, Deserialize)]
struct RawContainer {
    name: String,
    #[serde(default)]
    image: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default, rename = "volumeMounts")]
    volume_mounts: Vec<RawMount>,
    #[serde(default, rename = "securityContext")]
    security_context: Option<SecurityContext>,
    #[serde(default)]
    env: Vec<RawEnv>,
}

#[derive(Debug, Deserialize)]
struct RawEnv {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Debug, Deserialize)]
struct RawMount {
    name: String,
    #[serde(rename = "mountPath")]
    mount_path: String,
}

#[derive(Debug, Deserialize)]
struct SecurityContext {
    #[serde(default, rename = "runAsUser")]
    run_as_user: Option<u32>,
}

/// One container of a static pod.
#[derive(Debug, Clone)]
pub(crate) struct Container {
    /// The manifest's file name (`kube-apiserver.yaml`), for sentences.
    pub manifest: String,
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub run_as_user: Option<u32>,
    /// hostPath mounts: (path in the container, path on the VM).
    pub mounts: Vec<(String, String)>,
    /// `env` as (name, value), in order.
    pub env: Vec<(String, String)>,
    pub init: bool,
}

impl Container {
    /// The flags the program is given: command ++ args without the program itself (with no command the image's
    /// entrypoint is the program and all of args are flags).
    pub fn flags(&self) -> Vec<String> {
        let skip = usize::from(!self.command.is_empty());
        self.command
            .iter()
            .skip(skip)
            .chain(&self.args)
            .cloned()
            .collect()
    }

    /// `--name=value` of this container (bare `--name` is `true`); the last one wins, as with pflag.
    pub fn flag(&self, name: &str) -> Option<String> {
        parse_flags(&self.flags())
            .into_iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// The VM path a container path resolves to through its hostPath mounts (the deepest mount wins), or `None`
    /// when no mount covers it: the file does not exist inside the container.
    pub fn host_path(&self, path: &str) -> Option<String> {
        self.mounts
            .iter()
            .filter(|(inside, _)| {
                path == inside.as_str()
                    || path.starts_with(&format!("{}/", inside.trim_end_matches('/')))
            })
            .max_by_key(|(inside, _)| inside.len())
            .map(|(inside, host)| format!("{host}{}", &path[inside.len()..]))
    }
}

/// `--k=v` / `-k=v` / `--k` pairs, in order; arguments that are not flags are kept with an empty name.
pub(crate) fn parse_flags(argv: &[String]) -> Vec<(String, String)> {
    argv.iter()
        .map(
            |a| match a.strip_prefix("--").or_else(|| a.strip_prefix('-')) {
                Some(f) => {
                    let (k, v) = f.split_once('=').unwrap_or((f, "true"));
                    (k.to_string(), v.to_string())
                }
                None => (String::new(), a.clone()),
            },
        )
        .collect()
}

/// The master, parsed.
#[derive(Debug)]
pub(crate) struct Master<'a> {
    pub release: Version,
    pub containers: Vec<Container>,
    pub files: BTreeMap<&'a str, &'a GuestFile>,
    /// Every addon manifest document, as YAML values.
    pub addons: Vec<serde_norway::Value>,
    /// The kubelet's flags from its drop-in's `ExecStart`, when there is one.
    pub kubelet: Option<Vec<String>>,
}

impl<'a> Master<'a> {
    pub fn parse(files: &'a [GuestFile]) -> Result<Master<'a>, String> {
        // cloud-init writes in order, so a later entry for the same path wins.
        let mut by_path = BTreeMap::new();
        for f in files {
            by_path.insert(f.path.as_str(), f);
        }
        let mut containers = Vec::new();
        for (path, f) in by_path.range(MANIFEST_DIR..) {
            let Some(manifest) = path
                .strip_prefix(MANIFEST_DIR)
                .and_then(|m| m.strip_prefix('/'))
                .filter(|m| m.ends_with(".yaml") && !m.contains('/'))
            else {
                continue;
            };
            let pod: Pod = serde_norway::from_slice(&f.bytes)
                .map_err(|e| format!("{path} is not a pod manifest: {e}"))?;
            let volumes: BTreeMap<&str, &str> = pod
                .spec
                .volumes
                .iter()
                .filter_map(|v| Some((v.name.as_str(), v.host_path.as_ref()?.path.as_str())))
                .collect();
            let all = pod
                .spec
                .init_containers
                .iter()
                .map(|c| (c, true))
                .chain(pod.spec.containers.iter().map(|c| (c, false)));
            for (c, init) in all {
                containers.push(Container {
                    manifest: manifest.to_string(),
                    name: c.name.clone(),
                    image: c.image.clone(),
                    command: c.command.clone(),
                    args: c.args.clone(),
                    run_as_user: c.security_context.as_ref().and_then(|s| s.run_as_user),
                    mounts: c
                        .volume_mounts
                        .iter()
                        .filter_map(|m| {
                            Some((
                                m.mount_path.clone(),
                                volumes.get(m.name.as_str())?.to_string(),
                            ))
                        })
                        .collect(),
                    env: c
                        .env
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect(),
                    init,
                });
            }
        }
        let apiserver = containers
            .iter()
            .find(|c| c.name == "kube-apiserver" && !c.init)
            .ok_or("no static pod runs a container named kube-apiserver")?;
        let release = Version::of_kubernetes_image(&apiserver.image).ok_or_else(|| {
            format!(
                "the kube-apiserver image {:?} is not registry.k8s.io/kube-apiserver:v1.<minor>.<patch>",
                apiserver.image
            )
        })?;
        let mut addons = Vec::new();
        for (path, f) in by_path.range(ADDON_DIR..) {
            if !path.starts_with(&format!("{ADDON_DIR}/")) {
                break;
            }
            let text = String::from_utf8_lossy(&f.bytes);
            for doc in serde_norway::Deserializer::from_str(&text) {
                let v = serde_norway::Value::deserialize(doc)
                    .map_err(|e| format!("{path} is not YAML: {e}"))?;
                if !v.is_null() {
                    addons.push(v);
                }
            }
        }
        let kubelet = by_path
            .range(KUBELET_DROPIN_DIR..)
            .take_while(|(p, _)| p.starts_with(KUBELET_DROPIN_DIR))
            .filter_map(|(_, f)| exec_start(&String::from_utf8_lossy(&f.bytes)))
            .last();
        Ok(Master {
            release,
            containers,
            files: by_path,
            addons,
            kubelet,
        })
    }
}

/// The last non-empty `ExecStart=` of a unit drop-in, split on whitespace, without the program.
fn exec_start(unit: &str) -> Option<Vec<String>> {
    unit.lines()
        .filter_map(|l| l.trim().strip_prefix("ExecStart="))
        .rfind(|v| !v.trim().is_empty())
        .map(|v| v.split_whitespace().skip(1).map(str::to_string).collect())
}
