//! The cluster's settings as `ops` takes them: plain values, every one known. Its own file because both the cluster
//! context (`context`) and the keys' secret (`cluster_keys`, which fills the CA keys in) work on it.

use ha_domain::master_spec::MasterSpec;
use ha_domain::names::DerivedNames;
use ha_pki::ClusterCas;

/// The cluster's settings with every value known, as at apply time: plain values, so `ops` knows nothing of
/// Terraform (`resources::spec::ClusterSpec::to_ops` makes one from the Terraform attribute).
#[derive(Clone)]
pub struct Spec {
    pub id: String,
    pub name: String,
    pub project: String,
    pub region: String,
    pub zone: String,
    /// What every master VM is made of (`domain::master_spec`): a roll compares its build.
    pub master: MasterSpec,
    pub external_ip: String,
    /// The CAs (certificates, and keys once `ClusterCtx::new` has read them) and the service-account key.
    pub cas: ClusterCas,
    pub service_account_key: String,
    /// The key a rotation of the service-account key made, until it becomes the key
    /// (`domain::service_account_rotation`; the stage is `master.service_account_key_rotation`).
    pub next_service_account_key: Option<String>,
    /// The CAs a rotation of the CAs made (`domain::ca_rotation`; the stage is `master.ca_rotation`), until they
    /// become `cas`: their certificates from the cluster's (a bundle of both while a rotation is under way), their
    /// keys as `cas`' are filled in.
    pub next_cas: Option<ClusterCas>,
    /// The Secret Manager secret that holds the CA keys and the service-account key (`ops::cluster_keys`), when the
    /// spec carries none itself.
    pub keys_secret: Option<String>,
    /// While true, no leave removes the cluster's last voting member (`domain::protection`).
    pub deletion_protection: bool,
    /// How long a replica's certificates live, and how long before expiry a roll renews them
    /// (`domain::certificates`).
    pub certificate_validity: std::time::Duration,
    pub certificate_renew_before: std::time::Duration,
    /// Where snapshots go before a change that touches etcd (`domain::backup`); none without a `backup` block.
    pub backup: Option<ha_domain::backup::Policy>,
    /// The snapshot a replica that finds no etcd member restores (`domain::restore`), when the cluster's
    /// `restore` block asks for one.
    pub restore_snapshot: Option<ha_domain::restore::SnapshotChoice>,
    /// The cluster's `restore.generation` (0 without a `restore` block): a data disk a restore makes records it
    /// (`domain::restore::GENERATION_LABEL`).
    pub restore_generation: i64,
    /// The cluster's `restore` block says `source = "empty"`: a founding join may start a new, empty etcd where
    /// the cluster had data (`domain::start_empty`).
    pub start_empty: bool,
}

impl Spec {
    /// The CAs that issue every certificate at the stage of a rotation of the CAs (the current ones, or the next
    /// once switched); refused when the stage needs next CAs the cluster does not hold.
    pub fn issuing_cas(&self) -> Result<&ClusterCas, crate::OpError> {
        self.cas_of(self.master.ca_rotation.key_use().signs)
    }

    /// The CA certificates a master, the provider and an admin credential trust at the stage of a rotation of the
    /// CAs: a bundle of each kind, the issuing CA first.
    pub fn trusted_cas(&self) -> Result<ha_master::CaCerts, crate::OpError> {
        let mut cas = Vec::new();
        for k in self.master.ca_rotation.key_use().verifies {
            cas.push(self.cas_of(k)?);
        }
        let bundle = |f: fn(&ClusterCas) -> &ha_pki::CertKey| {
            ha_pki::bundle_of(cas.iter().map(|c| f(c).cert_pem.as_str()))
        };
        Ok(ha_master::CaCerts {
            cluster_ca: bundle(|c| &c.cluster_ca),
            etcd_peer_ca: bundle(|c| &c.etcd_peer_ca),
            etcd_client_ca: bundle(|c| &c.etcd_client_ca),
        })
    }

    fn cas_of(&self, k: ha_domain::rotation::Key) -> Result<&ClusterCas, crate::OpError> {
        match k {
            ha_domain::rotation::Key::Current => Ok(&self.cas),
            ha_domain::rotation::Key::Next => self.next_cas.as_ref().ok_or_else(|| {
                crate::OpError::Other(format!(
                    "cluster {} rotates its CAs but holds no next CAs; run `terraform apply` on the cluster                      first",
                    self.name
                ))
            }),
        }
    }

    pub fn names(&self) -> DerivedNames {
        DerivedNames::for_cluster(&self.name)
    }

    /// The key the masters sign service-account tokens with at the rotation's stage, and the public halves of the
    /// others they verify them with; refused when the stage needs a next key the cluster does not have.
    pub fn service_account_keys(&self) -> Result<(String, Vec<String>), crate::OpError> {
        use ha_domain::service_account_rotation::Key;
        let want = self.master.service_account_key_rotation.key_use();
        let key = |k: Key| {
            match k {
            Key::Current => Ok(self.service_account_key.clone()),
            Key::Next => self.next_service_account_key.clone().ok_or_else(|| {
                crate::OpError::Other(format!(
                    "cluster {} rotates its service-account key but holds no next key; run `terraform apply` on \
                     the cluster first",
                    self.name
                ))
            }),
        }
        };
        let signs = key(want.signs)?;
        let mut also = Vec::new();
        for k in want.verifies.into_iter().filter(|k| *k != want.signs) {
            also.push(ha_pki::service_account_public_key(&key(k)?)?);
        }
        Ok((signs, also))
    }
}
