//! The Kubernetes half of a master, judged by the rules the real programs apply, release by release: what a VM's
//! boot refuses where a real master would not come up. etcd is not judged here: the sim runs the real etcd.
//!
//! In order, for the release the kube-apiserver image names:
//! 1. `flags`: every flag of kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet,
//!    cloud-controller-manager and cluster-autoscaler is one the release accepts, with a value it accepts (tables
//!    taken from upstream source, `flags/`);
//! 2. `images`: a container's `command` names the program where its image keeps it (`images.tsv`);
//! 3. `access`: each file a program is given is mounted into its container and readable by the container's user;
//! 4. `filecheck`: each key, certificate and kubeconfig parses the way upstream parses it, by client-go's own
//!    functions (`tools/k8s-filecheck`);
//! 5. `rbac`: each component's identity may take its leader-election lease and do what its controllers need,
//!    under the release's bootstrap policy plus the RBAC the master installs.
//!
//! Apart from the boot, `exposures` lists the private files a container can open and never reads (least
//! privilege, not a boot failure).
//!
//! docs/master-config.md says what each check proves and what only real GCE can.

mod access;
mod exposure;
mod filecheck;
mod flags;
mod images;
mod master;
mod needs;
mod rbac;
mod reads;
mod release;

pub use exposure::{Exposure, exposures};
pub use filecheck::program as filecheck_program;
pub use rbac::{Authorizer, Identity};
pub(crate) use rbac::{Subject, subjects_of};

use crate::vm::config;
use crate::vm::guest_file::GuestFile;
use master::Master;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why a master would not come up: the component and the cause, as the program (or the API server) would say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub component: String,
    pub cause: String,
}

impl Refusal {
    pub(crate) fn new(component: impl Into<String>, cause: impl Into<String>) -> Refusal {
        Refusal {
            component: component.into(),
            cause: cause.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} would not work on a real master: {}",
            self.component, self.cause
        )
    }
}

impl std::error::Error for Refusal {}

/// Judges the master whose `write_files` are `files`, written under `rootfs` (the guest's `/`); `work` is a
/// directory of the checker's own, outside the guest.
pub(crate) fn check(files: &[GuestFile], rootfs: &Path, work: &Path) -> Result<(), Refusal> {
    let master = Master::parse(files).map_err(|e| Refusal::new("kubelet", e))?;
    flags::check(&master)?;
    programs(&master)?;
    let reads = reads::of(&master)?;
    access::check(&master, &reads)?;
    filecheck::check(
        &reads,
        |read, path| {
            let on_vm = match &read.container {
                Some(c) => c.host_path(path)?,
                None => path.to_string(),
            };
            Some(rootfs.join(config::guest_relative(&on_vm).ok()?))
        },
        work,
    )?;
    rbac::check(&master)
}

/// The authorizer of a master whose files passed [`check`]: what its API server lets each client read.
pub(crate) fn authorizer(files: &[GuestFile]) -> Result<Authorizer, Refusal> {
    let master = Master::parse(files).map_err(|e| Refusal::new("kubelet", e))?;
    Authorizer::of(&master).map_err(|e| {
        Refusal::new(
            "ha-sim",
            format!("the contract's RBAC table is broken: {e}"),
        )
    })
}

/// Judges a master's instance metadata as a VM would boot it, writing its files under `scratch` first. For tests
/// and tools that have metadata but no VM.
pub fn check_metadata(metadata: &BTreeMap<String, String>, scratch: &Path) -> Result<(), Refusal> {
    let startup = config::parse(metadata).map_err(|e| Refusal::new("cloud-init", e.to_string()))?;
    let rootfs = scratch.join("rootfs");
    for f in &startup.files {
        let path: PathBuf = rootfs.join(
            config::guest_relative(&f.path)
                .map_err(|e| Refusal::new("cloud-init", e.to_string()))?,
        );
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Refusal::new("ha-sim", format!("{}: {e}", dir.display())))?;
        }
        std::fs::write(&path, &f.bytes)
            .map_err(|e| Refusal::new("ha-sim", format!("{}: {e}", path.display())))?;
    }
    check(&startup.files, &rootfs, &scratch.join("contract"))
}

/// A container's `command` must start a program its image has (runc: `exec: "...": stat ...: no such file or
/// directory`). Containers of images the table does not know are refused (`images::of_container`).
fn programs(master: &Master<'_>) -> Result<(), Refusal> {
    for c in &master.containers {
        let image = images::of_container(c)?;
        let Some(command0) = c.command.first() else {
            continue;
        };
        if !images::starts_program(command0, &image) {
            return Err(Refusal::new(
                &c.name,
                format!(
                    "{}: the container never starts: exec: {command0:?}: stat {command0}: no such file or directory \
                     (image {} has {}: {})",
                    c.manifest,
                    c.image,
                    images::programs(&image),
                    image.source
                ),
            ));
        }
    }
    Ok(())
}
