//! The bearer token a VM's guest sends as its service account (the sim's metadata server hands out no real
//! ones). A leaf: the VM that sends it and the Secret Manager surface that reads it both name it.

/// A token that names a service account instead of the owner: this prefix, then the account's email.
pub const SERVICE_ACCOUNT_TOKEN: &str = "sim-sa:";
