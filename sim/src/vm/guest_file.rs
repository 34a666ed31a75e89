//! A file the guest's cloud-config writes, decoded: what the VM's disk gets, what the key fetch adds, and what
//! the Kubernetes contract (`crate::contract`) judges. Its own file because the cloud-config reader (`config`) and
//! the key fetch (`keys`) both make them.

/// One decoded `write_files` entry, with its guest path.
#[derive(Debug, Clone)]
pub(crate) struct GuestFile {
    pub path: String,
    pub mode: u32,
    /// `user:group` as written (`root:root` when not given).
    pub owner: String,
    pub append: bool,
    pub bytes: Vec<u8>,
}
