//! The boot image a cluster's masters run when its configuration names none.
//!
//! A master's image must run the startup contract (docs/master-config.md): cloud-init, containerd and the kubelet
//! of the cluster's release. Google's Ubuntu LTS images carry cloud-init and apt, and the masters' first boot
//! installs the other two (`master::runtime`), so a new cluster gets Ubuntu's LTS family. Container-Optimized OS,
//! the default before, has neither apt nor a kubelet unit; a cluster made then keeps it until its configuration
//! says otherwise, so upgrading the provider rolls no existing cluster.

/// What a new cluster runs when `image` is unset: Ubuntu 24.04 LTS, the family that follows its patched images.
pub const DEFAULT_FOR_NEW: &str =
    "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64";

/// What every cluster made before the default changed runs (the schema's default then).
pub const LEGACY: &str = "projects/cos-cloud/global/images/family/cos-stable";
