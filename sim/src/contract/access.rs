//! Whether each program can open what it is given: the file must be inside one of its container's hostPath
//! mounts, exist on the master, and be readable by the container's user (its `securityContext.runAsUser`, else the
//! image's user) with the owner and mode cloud-init gives it. A container that cannot open its key exits at start.

use super::Refusal;
use super::images;
use super::master::{Container, Master};
use super::reads::Read;
use crate::vm::guest_file::GuestFile;

/// `root:root` → (0, 0); numeric ids as given; any other name belongs to nobody a container runs as.
fn owner_ids(owner: &str) -> (u32, u32) {
    let id = |s: &str| match s {
        "root" => 0,
        n => n.parse().unwrap_or(u32::MAX),
    };
    let (u, g) = owner.split_once(':').unwrap_or((owner, owner));
    (id(u), id(g))
}

/// Unix read permission for (uid, gid) on a file.
fn readable(uid: u32, gid: u32, file: &GuestFile) -> bool {
    let (fu, fg) = owner_ids(&file.owner);
    uid == 0
        || (uid == fu && file.mode & 0o400 != 0)
        || (gid == fg && file.mode & 0o040 != 0)
        || file.mode & 0o004 != 0
}

/// The user a container runs as, and where that comes from (for the sentence).
pub(crate) fn user_of(c: &Container) -> Result<(u32, u32, String), Refusal> {
    let image = images::of_container(c)?;
    Ok(match c.run_as_user {
        Some(uid) => (uid, image.gid, format!("securityContext.runAsUser {uid}")),
        None => (
            image.uid,
            image.gid,
            format!("the image's user {} ({})", image.uid, image.source),
        ),
    })
}

/// Every read of the master, opened as its program would.
pub(crate) fn check(master: &Master<'_>, reads: &[Read]) -> Result<(), Refusal> {
    for read in reads {
        for path in &read.paths {
            let refuse = |cause: String| {
                Refusal::new(
                    &read.component,
                    format!("{} {path}: open {path}: {cause}", read.what.trim()),
                )
            };
            let Some(c) = &read.container else {
                // The kubelet runs on the VM as root: the file only has to be there.
                if !master.files.contains_key(path.as_str()) && !system_file(path) {
                    return Err(refuse("no such file or directory".into()));
                }
                continue;
            };
            let host = c.host_path(path).ok_or_else(|| {
                refuse(format!(
                    "no such file or directory (no hostPath volume of {} mounts it into container `{}`)",
                    c.manifest, c.name
                ))
            })?;
            let file = master.files.get(host.as_str()).ok_or_else(|| {
                refuse(format!(
                    "no such file or directory (the master writes no {host})"
                ))
            })?;
            let (uid, gid, why) = user_of(c)?;
            if !readable(uid, gid, file) {
                return Err(refuse(format!(
                    "permission denied: container `{}` runs as uid {uid} ({why}) and the file is {} {:04o}",
                    c.name, file.owner, file.mode
                )));
            }
        }
    }
    Ok(())
}

/// Files the image or the OS provides rather than the startup configuration.
fn system_file(path: &str) -> bool {
    path.starts_with("/etc/ssl/") || path.starts_with("/usr/")
}
