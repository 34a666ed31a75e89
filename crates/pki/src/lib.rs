//! Certificates for a cluster of HA masters: the cluster's CAs (generated once, kept in Terraform state) and each
//! replica's certificates (docs/master-config.md §4), issued by those CAs loaded back from PEM. Pure functions
//! over PEM strings; no I/O, nothing about Terraform. Key material is never logged or printed by Debug.

mod admin;
mod bundle;
mod issuer;
#[cfg(test)]
mod tests;

pub use admin::{AdminCert, AdminCertRequest, issue_admin_cert};
pub use bundle::{
    bundle_of, certificate_fingerprints, certificate_of_bundle, certificates_in, issued_by,
};
pub use issuer::{Issuer, LeafSpec, Usage};

use std::net::Ipv4Addr;

/// What went wrong while making or loading certificates. Messages never contain key material.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating {what}: {reason}")]
    Generate { what: String, reason: String },
    #[error("loading the {ca} from PEM: {reason}")]
    LoadCa { ca: String, reason: String },
    #[error("invalid certificate request: {field} {reason}")]
    InvalidRequest { field: &'static str, reason: String },
}

pub type Result<T, E = PkiError> = std::result::Result<T, E>;

/// A PEM certificate and its PEM (PKCS#8) private key.
/// `Default` is two empty strings: what a resource reports before anything was issued.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CertKey {
    // The key is a secret: it goes to state (sensitive) and to masters, never to logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertKey")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// The cluster's three CAs. Separate CAs keep the trust domains apart: a peer certificate cannot act as an etcd
/// client, and nothing signed by the cluster CA (kubelets, users) is trusted by etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterCas {
    /// Signs API serving certificates and Kubernetes client certificates (`pki/ca.crt`).
    pub cluster_ca: CertKey,
    /// Signs etcd peer certificates (`etcd-ca.crt`).
    pub etcd_peer_ca: CertKey,
    /// Signs etcd's client-facing serving certificates and its clients (`pki/etcd-apiserver-ca.crt`).
    pub etcd_client_ca: CertKey,
}

impl ClusterCas {
    /// Three fresh 10-year ECDSA P-256 CAs named after the cluster.
    pub fn generate(cluster_name: &str) -> Result<ClusterCas> {
        check_dns_label("cluster_name", cluster_name)?;
        let (_, cluster_ca) = Issuer::generate(&format!("{cluster_name}-ca"))?;
        Self::around(cluster_name, cluster_ca)
    }

    /// The CAs a rotation makes (`domain::ca_rotation`): three fresh ones as `generate` makes them, their names
    /// ending in `generation` (the rotation's start, say) so that the masters' trust bundles and an operator
    /// reading a certificate tell the two apart.
    pub fn generate_next(cluster_name: &str, generation: &str) -> Result<ClusterCas> {
        check_dns_label("cluster_name", cluster_name)?;
        let (_, cluster_ca) = Issuer::generate(&format!("{cluster_name}-ca-{generation}"))?;
        let (_, etcd_peer_ca) =
            Issuer::generate(&format!("{cluster_name}-etcd-peer-ca-{generation}"))?;
        let (_, etcd_client_ca) =
            Issuer::generate(&format!("{cluster_name}-etcd-client-ca-{generation}"))?;
        Ok(ClusterCas {
            cluster_ca,
            etcd_peer_ca,
            etcd_client_ca,
        })
    }

    /// The cluster's CAs around a cluster CA the user brings (its certificate and key, PEM): checked to be a CA
    /// whose key is its own and that has not expired (`now`, Unix seconds), with the two etcd CAs generated
    /// fresh, as `generate` makes them. Only the cluster CA is brought: it is the one clients and nodes trust,
    /// while the etcd CAs never leave the masters and the provider.
    pub fn with_cluster_ca(
        cluster_name: &str,
        cluster_ca: CertKey,
        now: i64,
    ) -> Result<ClusterCas> {
        check_dns_label("cluster_name", cluster_name)?;
        check_brought_ca(&cluster_ca, now)?;
        Self::around(cluster_name, cluster_ca)
    }

    /// `cluster_ca` with two fresh etcd CAs named after the cluster.
    fn around(cluster_name: &str, cluster_ca: CertKey) -> Result<ClusterCas> {
        let (_, etcd_peer_ca) = Issuer::generate(&format!("{cluster_name}-etcd-peer-ca"))?;
        let (_, etcd_client_ca) = Issuer::generate(&format!("{cluster_name}-etcd-client-ca"))?;
        Ok(ClusterCas {
            cluster_ca,
            etcd_peer_ca,
            etcd_client_ca,
        })
    }

    /// Loads each CA, so state that was edited or mixed up is reported before anything is issued.
    pub fn issuers(&self) -> Result<ClusterIssuers> {
        Ok(ClusterIssuers {
            cluster: load("cluster CA", &self.cluster_ca)?,
            etcd_peer: load("etcd peer CA", &self.etcd_peer_ca)?,
            etcd_client: load("etcd client CA", &self.etcd_client_ca)?,
        })
    }
}

/// A cluster CA the user brings, as plan and apply check it: a CA certificate, a PKCS#8 key that is its own, and
/// not expired at `now` (Unix seconds). Returns when it expires (Unix seconds): every certificate it signs is
/// capped there.
pub fn check_brought_ca(ca: &CertKey, now: i64) -> Result<i64> {
    let issuer = load("cluster CA", ca)?;
    let expires = issuer.expires_at().unix_timestamp();
    if expires <= now {
        return Err(PkiError::LoadCa {
            ca: "cluster CA".into(),
            reason: format!(
                "certificate expired at {}",
                time::OffsetDateTime::from_unix_timestamp(expires)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            ),
        });
    }
    Ok(expires)
}

/// Whether `key_pem` is the private key of the CA certificate `cert_pem` (a CA, and the key its own).
pub fn is_key_of(cert_pem: &str, key_pem: &str) -> bool {
    Issuer::from_pem(cert_pem, key_pem).is_ok()
}

fn load(which: &str, ca: &CertKey) -> Result<Issuer> {
    Issuer::from_pem(&ca.cert_pem, &ca.key_pem).map_err(|e| match e {
        PkiError::LoadCa { reason, .. } => PkiError::LoadCa {
            ca: which.to_string(),
            reason,
        },
        other => other,
    })
}

/// The cluster's CAs, loaded and ready to sign.
#[derive(Debug)]
pub struct ClusterIssuers {
    pub cluster: Issuer,
    pub etcd_peer: Issuer,
    pub etcd_client: Issuer,
}

/// What a replica's certificates must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaCertRequest {
    /// The instance name; also the etcd member name.
    pub name: String,
    pub internal_ip: Ipv4Addr,
    /// The cluster's static IP, where clients reach the API.
    pub static_ip: Ipv4Addr,
    /// The first address of the service range: the `kubernetes` service's ClusterIP.
    pub first_service_ip: Ipv4Addr,
    /// e.g. `cluster.local`.
    pub dns_domain: String,
    /// How long every certificate of the replica is valid (the cluster's `certificate_validity`).
    pub validity: time::Duration,
}

/// One replica's certificates (docs/master-config.md §4). Each one gets its own key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaCerts {
    /// `pki/apiserver.{crt,key}`, signed by the cluster CA.
    pub api_server: CertKey,
    /// `etcd-peer.{crt,key}`, signed by the etcd peer CA.
    pub etcd_peer: CertKey,
    /// `pki/etcd-apiserver-server.{crt,key}`, signed by the etcd client CA.
    pub etcd_server: CertKey,
    /// `pki/etcd-apiserver-client.{crt,key}`, signed by the etcd client CA.
    pub etcd_apiserver_client: CertKey,
    /// Client certificates for the components that talk to the API (all signed by the cluster CA); Kubernetes
    /// maps CN to the user and O to groups, which the default RBAC bindings already know.
    pub kubelet: CertKey,
    pub controller_manager: CertKey,
    pub scheduler: CertKey,
    pub cluster_autoscaler: CertKey,
    /// Google's cloud-controller-manager, on releases whose cloud controllers run out of tree. Its own user
    /// (`system:cloud-controller-manager`, as cloud-provider-gcp's RBAC names it): the controller manager's
    /// bootstrap role may take only the `kube-controller-manager` lease, so borrowing that identity would never
    /// elect a leader.
    pub cloud_controller_manager: CertKey,
    pub addon_manager: CertKey,
    /// The apiserver's client certificate towards kubelets (logs, exec, port-forward), signed by the cluster CA.
    pub apiserver_kubelet_client: CertKey,
    /// The health-check sidecar's client certificate towards its own apiserver, signed by the cluster CA.
    pub healthcheck_client: CertKey,
}

/// Issues every certificate a replica needs, with the CAs from state.
pub fn issue_replica_certs(cas: &ClusterCas, req: &ReplicaCertRequest) -> Result<ReplicaCerts> {
    check_dns_label("name", &req.name)?;
    check_domain(&req.dns_domain)?;
    let ca = cas.issuers()?;
    let name = req.name.as_str();
    let loopback = Ipv4Addr::LOCALHOST;
    let lifetime = req.validity;

    let api_server = ca.cluster.issue_for(
        &LeafSpec {
            common_name: "kube-apiserver".into(),
            dns_names: vec![
                "kubernetes".into(),
                "kubernetes.default".into(),
                "kubernetes.default.svc".into(),
                format!("kubernetes.default.svc.{}", req.dns_domain),
                name.into(),
            ],
            // Loopback too: control-plane kubeconfigs and the health-check sidecar reach their own apiserver at
            // https://127.0.0.1 and verify it under the cluster CA (kops' apiserver certificate names it as well).
            ips: vec![
                req.static_ip,
                req.internal_ip,
                req.first_service_ip,
                loopback,
            ],
            ..LeafSpec::default()
        },
        Usage::Server,
        lifetime,
    )?;
    let etcd_peer = ca.etcd_peer.issue_for(
        &LeafSpec {
            common_name: name.into(),
            dns_names: vec![name.into()],
            ips: vec![req.internal_ip, loopback],
            ..LeafSpec::default()
        },
        Usage::ServerAndClient,
        lifetime,
    )?;
    // DNS <name>: the provider reaches each member's client port through the replica's external (maybe
    // ephemeral) IP and verifies the certificate by the member's name, never by an IP no certificate names.
    let etcd_server = ca.etcd_client.issue_for(
        &LeafSpec {
            common_name: format!("etcd-{name}"),
            dns_names: vec![name.into()],
            ips: vec![req.internal_ip, loopback],
            ..LeafSpec::default()
        },
        Usage::Server,
        lifetime,
    )?;
    let etcd_apiserver_client =
        ca.etcd_client
            .issue_for(&client("client", &[]), Usage::Client, lifetime)?;
    let kubelet = ca.cluster.issue_for(
        &client(&format!("system:node:{name}"), &["system:nodes"]),
        Usage::Client,
        lifetime,
    )?;
    let controller_manager = ca.cluster.issue_for(
        &client("system:kube-controller-manager", &[]),
        Usage::Client,
        lifetime,
    )?;
    let scheduler = ca.cluster.issue_for(
        &client("system:kube-scheduler", &[]),
        Usage::Client,
        lifetime,
    )?;
    let cluster_autoscaler =
        ca.cluster
            .issue_for(&client("cluster-autoscaler", &[]), Usage::Client, lifetime)?;
    let cloud_controller_manager = ca.cluster.issue_for(
        &client("system:cloud-controller-manager", &[]),
        Usage::Client,
        lifetime,
    )?;
    // The addon manager applies arbitrary addon manifests, so it needs cluster-admin (as kube-up's had).
    let addon_manager = ca.cluster.issue_for(
        &client("system:kube-addon-manager", &["system:masters"]),
        Usage::Client,
        lifetime,
    )?;
    // No group: kubelets authorize it through the webhook, and RBAC lets it do exactly what the bootstrap role
    // system:kubelet-api-admin allows (crates/master/src/addons/kubelet-api-admin-rbac.yaml binds it), as kube-up
    // did. kubeadm's keeps a cluster-admin group, which a stolen key would carry to every API.
    let apiserver_kubelet_client = ca.cluster.issue_for(
        &client("kube-apiserver-kubelet-client", &[]),
        Usage::Client,
        lifetime,
    )?;
    // No group: as any authenticated user it may GET /healthz, /livez and /readyz (system:public-info-viewer),
    // which is all the sidecar proxies. CN as kops issues it.
    let healthcheck_client = ca.cluster.issue_for(
        &client("kube-apiserver-healthcheck", &[]),
        Usage::Client,
        lifetime,
    )?;
    Ok(ReplicaCerts {
        healthcheck_client,
        api_server,
        etcd_peer,
        etcd_server,
        etcd_apiserver_client,
        kubelet,
        controller_manager,
        scheduler,
        cluster_autoscaler,
        cloud_controller_manager,
        addon_manager,
        apiserver_kubelet_client,
    })
}

/// How long the provider's own etcd client certificate lives. It is never written anywhere (the provider holds
/// it in memory while it talks to etcd, and mints another before this runs out: `ha_etcd::Etcd::renewing`), so a
/// copy taken from a core dump or a debugger is worth minutes. etcd has no revocation; expiry is the only limit.
pub const PROVIDER_ETCD_CLIENT_LIFETIME: time::Duration = time::Duration::minutes(15);

/// The provider's own etcd client certificate, for membership changes and health checks: it lives
/// `PROVIDER_ETCD_CLIENT_LIFETIME` (or until the CA expires, if that is sooner).
pub fn provider_etcd_client(cas: &ClusterCas) -> Result<CertKey> {
    load("etcd client CA", &cas.etcd_client_ca)?.issue_for(
        &client("terraform-provider-ha", &[]),
        Usage::Client,
        PROVIDER_ETCD_CLIENT_LIFETIME,
    )
}

/// A fresh cluster-wide service account signing key (ECDSA P-256, PKCS#8 PEM; tokens are ES256). Kept in state
/// with the CAs: every replica's apiserver must sign and verify with the same key, or a token minted by one
/// replica is rejected by the next.
pub fn service_account_key() -> Result<String> {
    Ok(issuer::p256()?.serialize_pem())
}

/// The public half of the service-account key, as a PKIX `PUBLIC KEY` PEM: what kube-apiserver's
/// `--service-account-key-file` is given. That flag is read by client-go's `keyutil.PublicKeysFromFile`, which takes
/// RSA keys, public keys, certificates and EC private keys in SEC1 only, so the PKCS#8 private key itself would stop
/// the API server at start ("data does not contain any valid RSA or ECDSA public keys"). kubeadm likewise gives the
/// flag `sa.pub`.
pub fn service_account_public_key(private_pem: &str) -> Result<String> {
    rcgen::KeyPair::from_pem(private_pem)
        .map(|k| k.public_key_pem())
        .map_err(|e| PkiError::InvalidRequest {
            field: "service_account_key",
            reason: format!("is not a PKCS#8 private key: {e}"),
        })
}

/// The fingerprint of each `PUBLIC KEY` in `pem` (a bundle, as kube-apiserver's `--service-account-key-file`
/// takes one): the first 16 hex digits of the SHA-256 of its DER. What a rotation compares a master's keys by.
pub fn public_key_fingerprints(pem: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| PkiError::InvalidRequest {
            field: "service_account_key",
            reason: format!("holds a PEM block that cannot be read: {e}"),
        })?;
        if block.label != "PUBLIC KEY" {
            return Err(PkiError::InvalidRequest {
                field: "service_account_key",
                reason: format!("holds a {} where public keys belong", block.label),
            });
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, &block.contents);
        out.push(
            digest.as_ref()[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        );
    }
    Ok(out)
}

fn client(cn: &str, orgs: &[&str]) -> LeafSpec {
    LeafSpec {
        common_name: cn.into(),
        organizations: orgs.iter().map(|o| o.to_string()).collect(),
        ..LeafSpec::default()
    }
}

/// GCE instance names are RFC 1035 labels; checking here keeps a bad name from becoming a useless SAN.
fn check_dns_label(field: &'static str, s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(PkiError::InvalidRequest {
            field,
            reason: format!(
                "{s:?} is not a DNS label (lowercase letters, digits, '-', at most 63)"
            ),
        })
    }
}

fn check_domain(domain: &str) -> Result<()> {
    domain
        .split('.')
        .try_for_each(|label| check_dns_label("dns_domain", label))
        .map_err(|_| PkiError::InvalidRequest {
            field: "dns_domain",
            reason: format!("{domain:?} is not a DNS domain"),
        })
}

/// The one PEM block of a certificate, decoded.
fn certificate_pem(cert_pem: &str) -> Result<x509_parser::pem::Pem> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).map_err(|e| {
        PkiError::InvalidRequest {
            field: "certificate",
            reason: format!("not a PEM certificate: {e}"),
        }
    })?;
    Ok(pem)
}

/// When a certificate expires (its notAfter), as seconds since the Unix epoch.
pub fn not_after_unix(cert_pem: &str) -> Result<i64> {
    let pem = certificate_pem(cert_pem)?;
    let cert = pem.parse_x509().map_err(|e| PkiError::InvalidRequest {
        field: "certificate",
        reason: format!("not an X.509 certificate: {e}"),
    })?;
    Ok(cert.validity().not_after.timestamp())
}

/// The SHA-256 fingerprint of a PEM certificate: of its DER bytes, in lower-case hex (what
/// `openssl x509 -noout -fingerprint -sha256` prints, without the colons).
pub fn sha256_fingerprint(cert_pem: &str) -> Result<String> {
    let pem = certificate_pem(cert_pem)?;
    Ok(ring::digest::digest(&ring::digest::SHA256, &pem.contents)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// When the first of these CA certificates expires (Unix seconds): no leaf signed by them outlives it. `None` when
/// any cannot be read (an empty or broken PEM), so a caller never caps by a guess.
pub fn cas_expire_at<'a>(ca_pems: impl IntoIterator<Item = &'a str>) -> Option<i64> {
    ca_pems
        .into_iter()
        .map(|pem| not_after_unix(pem).ok())
        .collect::<Option<Vec<i64>>>()?
        .into_iter()
        .min()
}
