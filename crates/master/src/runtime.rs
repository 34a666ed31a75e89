//! What a master's image must run before the kubelet can start the static pods: a container runtime (containerd)
//! and the kubelet of the cluster's Kubernetes release. Images built for the contract carry both; a stock Debian
//! or Ubuntu image (the provider's default for new clusters) carries neither, so the startup configuration brings
//! a script that installs them at first boot, from the distribution (containerd) and from the Kubernetes
//! project's own package repository (`pkgs.k8s.io`, one repository per minor, as kubeadm's install guide uses).
//!
//! The script does nothing on an image that already has the release's kubelet and a containerd, and refuses with a
//! sentence on an image that has neither apt nor the kubelet, so a VM that cannot run the contract says why in its
//! serial console instead of waiting for a kubelet that never comes.

use super::KubernetesRelease;

/// Where the script is written (docs/master-config.md §4) and run from, by `runcmd`, before the kubelet starts.
pub const SCRIPT: &str = "/etc/srv/kubernetes/install-node-runtime.sh";

/// The Debian revision `pkgs.k8s.io` gives every Kubernetes release it packages (`kubelet=1.35.0-1.1`).
const PACKAGE_REVISION: &str = "1.1";

/// `v1.35.0` → `1.35.0`, and its minor `1.35`.
fn release_of(k: &KubernetesRelease) -> (String, String) {
    let version = k.image_tag.trim_start_matches('v').to_string();
    let minor = version.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
    (version, minor)
}

/// The Kubernetes project's apt repository for `k`'s minor.
pub fn apt_repository(k: &KubernetesRelease) -> String {
    let (_, minor) = release_of(k);
    format!("https://pkgs.k8s.io/core:/stable:/v{minor}/deb/")
}

/// The kubelet package `k` installs, as apt names a version (`kubelet=1.35.0-1.1`).
pub fn kubelet_package(k: &KubernetesRelease) -> String {
    let (version, _) = release_of(k);
    format!("kubelet={version}-{PACKAGE_REVISION}")
}

/// Rewrites `containerd config default` (stdin → stdout) so runc manages cgroups through systemd: drops any
/// `SystemdCgroup` line and sets it to true right under runc's options table. A plain `s/false/true/` is not
/// enough: containerd 1.x prints `SystemdCgroup = false` under
/// `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`, but 2.x (config version 3, table
/// `[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]`) prints no such line at all
/// (containerd#12101), so the substitution changed nothing there.
pub(super) const SYSTEMD_CGROUP_FILTER: &str = r#"awk '/SystemdCgroup[[:space:]]*=/ { next } { print } /runtimes\.runc\.options\]$/ { print "  SystemdCgroup = true" }'"#;

/// The install script (POSIX sh, checked with `sh -n` and shellcheck in the tests). containerd is configured to
/// manage cgroups through systemd, as the kubelet's configuration says (`cgroupDriver: systemd`): the two must
/// agree or the kubelet refuses to start pods. The kubelet is held, so an unattended upgrade never moves a
/// master off its release; a roll rebuilds the VM on a new boot disk, which is how the release changes.
pub fn install_script(k: &KubernetesRelease) -> String {
    let (version, _) = release_of(k);
    let repo = apt_repository(k);
    let package = kubelet_package(k);
    format!(
        r#"#!/bin/sh
# Installs containerd and kubelet v{version} when the image lacks them (written by terraform-provider-ha).
set -eu
want="Kubernetes v{version}"
if command -v containerd >/dev/null 2>&1 && command -v kubelet >/dev/null 2>&1 \
  && [ "$(kubelet --version 2>/dev/null)" = "$want" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-node-runtime: this image has no kubelet v{version} and no apt-get to install it; use an image with cloud-init, containerd and kubelet v{version}, or a Debian or Ubuntu image" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q ca-certificates curl gpg containerd
mkdir -p /etc/apt/keyrings
chmod 755 /etc/apt/keyrings
curl -fsSL "{repo}Release.key" | gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
echo "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] {repo} /" > /etc/apt/sources.list.d/kubernetes.list
apt-get update -q
apt-get install -y -q --allow-downgrades --allow-change-held-packages "{package}"
apt-mark hold kubelet
mkdir -p /etc/containerd
containerd config default | {SYSTEMD_CGROUP_FILTER} > /etc/containerd/config.toml
if ! grep -q 'SystemdCgroup = true' /etc/containerd/config.toml; then
  echo "install-node-runtime: containerd's default configuration has no runc options table to set SystemdCgroup in; the kubelet's cgroupDriver is systemd, so pods would not start" >&2
  exit 1
fi
systemctl restart containerd
"#
    )
}
