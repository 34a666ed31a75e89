//! Pure decisions, no I/O: what GCE accepts as a name, how zones relate to regions, which CIDRs and machine types
//! are well formed, quorum arithmetic. Everything here is a plain function with table tests; resources call it
//! for validation and planning, and the backends never decide anything themselves.

pub mod admin_access;
pub mod adopt;
pub mod availability;
pub mod backup;
pub mod boot_check;
pub mod ca_rotation;
pub mod certificates;
pub mod disruption;
pub mod etcd_version;
pub mod exposure;
pub mod firewall_handover;
pub mod firewall_rule;
pub mod foundation;
pub mod guard;
pub mod health;
pub mod ids;
pub mod image;
pub mod key_placement;
pub mod kubeconfig;
pub mod kubernetes_version;
pub mod labels;
pub mod lock;
pub mod machine_type;
pub mod master_spec;
pub mod mend;
pub mod metadata;
pub mod names;
pub mod network;
pub mod orphans;
pub mod protection;
pub mod quorum;
pub mod read_only;
pub mod recovery;
pub mod replica_drift;
pub mod restore;
pub mod roll;
pub mod rotation;
pub mod secrets_encryption;
pub mod service_account;
pub mod service_account_rotation;
pub mod shape;
pub mod start_empty;
pub mod step;
pub mod step_words;
pub mod topology;
pub mod zones;

/// A failed check: a one-line summary and a detail that says how to fix it.
pub type Problem = (String, String);
