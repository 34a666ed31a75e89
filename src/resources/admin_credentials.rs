//! `ha_admin_credentials`: a short-lived admin client certificate for a cluster's API server, and a kubeconfig
//! that uses it. One schema and one minting function serve two blocks: the ephemeral resource (Terraform 1.10+:
//! never in plan or state) and, for clients without ephemeral resources (OpenTofu 1.6), a data source whose
//! result Terraform stores in state. The rules (identity, validity bounds) are `domain::admin_access`, the
//! kubeconfig `domain::kubeconfig`, the signing `pki::issue_admin_cert`; this file only wires them.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin::value::Type;
use tfplugin_framework::model::TfType;
use tfplugin_framework::validator::{duration, parse_duration};
use tfplugin_framework::{Attribute, DataSource, EphemeralResource, Opened, Schema, Val};

use super::spec::ClusterSpec;
use crate::config::{Settings, SharedSettings};
use ha_domain::admin_access;
use ha_domain::kubeconfig::{KubeconfigInput, render};
use ha_pki::{AdminCertRequest, CertKey, issue_admin_cert};

pub const TYPE_NAME: &str = "ha_admin_credentials";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AdminCredentialsModel {
    pub cluster: Val<ClusterSpec>,
    pub validity: Val<String>,
    pub user: Val<String>,
    pub groups: Val<Vec<String>>,
    pub client_certificate_pem: Val<String>,
    pub client_key_pem: Val<String>,
    pub ca_certificate_pem: Val<String>,
    pub server: Val<String>,
    pub kubeconfig: Val<String>,
    pub expires_at: Val<String>,
}

/// Which block the schema describes: the descriptions differ in where the result is kept.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ephemeral,
    DataSource,
}

fn schema(kind: Kind) -> Schema {
    let intro = match kind {
        Kind::Ephemeral => {
            "Mints a short-lived admin client certificate for a cluster's API server, signed by the cluster \
             CA, and a kubeconfig that uses it. Ephemeral (Terraform 1.10 or later): the credential is made \
             for one run and never written to the plan or the state. Feed it to a write-only attribute, a \
             provider block or a provisioner; docs/guides/kubectl.md shows how to keep a kubeconfig file \
             fresh, as the certificate expires after `validity`."
        }
        Kind::DataSource => {
            "Mints a short-lived admin client certificate for a cluster's API server, signed by the cluster \
             CA, and a kubeconfig that uses it. For clients without ephemeral resources (OpenTofu before \
             1.11): **the certificate, its private key and the kubeconfig are stored in the state**, like \
             the cluster's CA keys in `spec`, and a new certificate is minted at every refresh. Keep \
             `validity` short; on Terraform 1.10 or later use the ephemeral resource `ha_admin_credentials` \
             instead."
        }
    };
    Schema::new(intro)
        .attribute(
            Attribute::typed("cluster", <ClusterSpec as TfType>::tf_type())
                .required()
                .sensitive()
                .description(
                    "The cluster: `cluster = ha_master_cluster.<name>.spec`. Its CA signs the certificate, \
                     and its static IP and `api_port` are the server.",
                ),
        )
        .attribute(
            Attribute::string("validity")
                .optional()
                .description(
                    "How long the certificate is valid, as a duration (`30m`, `1h`), between 5m and 24h. \
                     Defaults to `1h`. Kubernetes cannot revoke a client certificate, so keep it short.",
                )
                .validator(duration()),
        )
        .attribute(Attribute::string("user").optional().description(
            "The Kubernetes user the certificate names (its CN). Defaults to `kubernetes-admin`, as \
             kubeadm's admin.conf.",
        ))
        .attribute(
            Attribute::typed("groups", Type::list(Type::String))
                .optional()
                .description(
                    "The Kubernetes groups the certificate names (its O), at most one. Defaults to \
                     `[\"ha-master:cluster-admins\"]` for clusters made by this release or later: the masters \
                     bind the group to `cluster-admin`, a binding that can be taken back (docs/guides/kubectl.md), \
                     and the first replica's apply ends once it exists. Clusters made by an earlier release (and \
                     imported ones) keep `[\"system:masters\"]`, which the API server lets do anything and \
                     nothing can revoke; name the bound group to use it there once every master has rolled with \
                     this release. `[]` names none, so only the user's own bindings apply.",
                ),
        )
        .attribute(
            Attribute::string("client_certificate_pem")
                .computed()
                .description("The client certificate, PEM."),
        )
        .attribute(
            Attribute::string("client_key_pem")
                .computed()
                .sensitive()
                .description("The client certificate's private key (PKCS#8), PEM."),
        )
        .attribute(
            Attribute::string("ca_certificate_pem")
                .computed()
                .description(
                    "The cluster CA certificate, PEM: what verifies the API server.",
                ),
        )
        .attribute(
            Attribute::string("server")
                .computed()
                .description("The API server's URL: `https://<static IP>:<api_port>`."),
        )
        .attribute(
            Attribute::string("kubeconfig")
                .computed()
                .sensitive()
                .description(
                    "A kubeconfig (YAML) with one cluster, user and current context named after the \
                     cluster, the PEMs inlined: write it to a file and run `kubectl --kubeconfig <file> \
                     version`.",
                ),
        )
        .attribute(
            Attribute::string("expires_at")
                .computed()
                .description("When the certificate expires (RFC 3339, UTC)."),
        )
}

/// Checks what can be checked from configuration alone, each at its attribute.
fn validate(m: &AdminCredentialsModel, diags: &mut Diagnostics) {
    if let Some(v) = m.validity.known()
        && let Ok(d) = parse_duration(v)
        && let Err((summary, detail)) = admin_access::validity(Some(d))
    {
        diags.attr_error(AttributePath::attr("validity"), summary, detail);
    }
    if let Some(u) = m.user.known()
        && let Err((summary, detail)) = admin_access::user(Some(u))
    {
        diags.attr_error(AttributePath::attr("user"), summary, detail);
    }
    if let Some(g) = m.groups.known()
        && let Err((summary, detail)) = admin_access::groups(Some(g), None)
    {
        diags.attr_error(AttributePath::attr("groups"), summary, detail);
    }
}

/// The cluster CA's key from the cluster's keys secret, when its spec names one (`ops::cluster_keys`); `None` when
/// the spec carries the key itself (or none). A secret that cannot be read is an error at `cluster`.
async fn key_from_secret(
    settings: &Settings,
    m: &AdminCredentialsModel,
    diags: &mut Diagnostics,
) -> Option<Option<String>> {
    let Some(path) = m.cluster.known().and_then(|c| c.keys_secret.known()) else {
        return Some(None);
    };
    let name = m
        .cluster
        .known()
        .and_then(|c| c.name.known().cloned())
        .unwrap_or_default();
    match ha_ops::cluster_keys::read(settings, path).await {
        Ok(Some(keys)) if signs_with_next(m.cluster.known()?) => Some(Some(keys.next_ca_key)),
        Ok(Some(keys)) => Some(Some(keys.ca_key)),
        Ok(None) => {
            diags.attr_error(
                AttributePath::attr("cluster"),
                format!("Cannot sign an admin certificate for cluster {name:?}"),
                format!(
                    "The cluster's CA keys are not in secret {path}: it does not exist or has no enabled \
                     version. Run `terraform apply` on the cluster, which writes them again from its state."
                ),
            );
            None
        }
        Err(e) => {
            diags.attr_error(
                AttributePath::attr("cluster"),
                format!("Could not read cluster {name:?}'s CA key"),
                if e.is_transient() {
                    super::advice::with_advice(&e)
                } else {
                    format!(
                        "{}. The provider's credentials need `secretmanager.versions.access` on secret {path}.",
                        e.explain()
                    )
                },
            );
            None
        }
    }
}

/// Whether the cluster's next CA issues certificates at its stage of a rotation of the CAs
/// (`domain::ca_rotation`): its `ca_certificate` is then a bundle of both, the next one second.
fn signs_with_next(cluster: &ClusterSpec) -> bool {
    ha_domain::ca_rotation::ROTATION
        .parse(cluster.ca_rotation.known().map(String::as_str))
        .is_ok_and(|s| s.key_use().signs == ha_domain::rotation::Key::Next)
}

/// The certificate of the CA that issues at the cluster's stage, from its `ca_certificate` (a bundle while the
/// CAs rotate; as it is otherwise, for loading the CA to judge).
fn issuing_certificate(cluster: &ClusterSpec, bundle: &str) -> String {
    ha_pki::certificate_of_bundle(bundle, usize::from(signs_with_next(cluster)))
}

/// The configuration with the credential filled in. Runs only on known configuration (both clients defer a read
/// or an open whose configuration is unknown).
async fn mint_for(
    settings: &Settings,
    m: AdminCredentialsModel,
    diags: &mut Diagnostics,
) -> Option<AdminCredentialsModel> {
    if super::read_only::refused(settings, || "an admin credential".into(), diags) {
        return None;
    }
    let key = key_from_secret(settings, &m, diags).await?;
    mint(m, key, diags)
}

/// [`mint_for`] with the CA key read: `secret_key` from the cluster's keys secret, or else the spec's own.
fn mint(
    mut m: AdminCredentialsModel,
    secret_key: Option<String>,
    diags: &mut Diagnostics,
) -> Option<AdminCredentialsModel> {
    let at = |name: &str| AttributePath::attr(name);
    let requested = match m.validity.known() {
        Some(v) => match parse_duration(v) {
            Ok(d) => Some(d),
            Err(e) => {
                diags.attr_error(at("validity"), "Invalid validity", format!("{e}."));
                return None;
            }
        },
        None => None,
    };
    let validity = admin_access::validity(requested);
    let user = admin_access::user(m.user.known().map(String::as_str));
    let cluster_group = m
        .cluster
        .known()
        .and_then(|c| c.admin_group.known())
        .map(String::as_str);
    let groups = admin_access::groups(m.groups.known().map(Vec::as_slice), cluster_group);
    let (validity, user, groups) = match (validity, user, groups) {
        (Ok(v), Ok(u), Ok(g)) => (v, u, g),
        (v, u, g) => {
            for (name, r) in [
                ("validity", v.err()),
                ("user", u.err()),
                ("groups", g.err()),
            ] {
                if let Some((summary, detail)) = r {
                    diags.attr_error(at(name), summary, detail);
                }
            }
            return None;
        }
    };
    let cluster = m.cluster.known()?;
    let text = |v: &Val<String>| v.known().cloned().unwrap_or_default();
    let (name, ip, ca_cert, ca_key) = (
        text(&cluster.name),
        text(&cluster.external_ip),
        text(&cluster.ca_certificate),
        secret_key.unwrap_or_else(|| text(&cluster.ca_private_key)),
    );
    let port = cluster
        .api_port
        .known()
        .and_then(|p| u16::try_from(*p).ok());
    let Some(port) = port.filter(|_| !ip.is_empty() && !ca_cert.is_empty()) else {
        diags.attr_error(
            at("cluster"),
            "The cluster has no address or CA yet",
            "`cluster` must be an applied cluster's `spec` (`ha_master_cluster.<name>.spec`), with its \
             static IP, `api_port` and CA certificate.",
        );
        return None;
    };
    if ca_key.is_empty() {
        diags.attr_error(
            at("cluster"),
            format!("Cannot sign an admin certificate for cluster {name:?}"),
            "The cluster CA's private key is not in this state: the cluster was imported, and masters never \
             hold CA keys, so import could not recover it. Restore the state the cluster was created with, \
             or use a credential issued elsewhere by the cluster CA.",
        );
        return None;
    }
    // The credential trusts every CA of the bundle (`ca_cert`), and is issued by the one that issues now.
    let ca = CertKey {
        cert_pem: issuing_certificate(cluster, &ca_cert),
        key_pem: ca_key,
    };
    let req = AdminCertRequest {
        user: user.clone(),
        groups,
        validity,
    };
    let admin = match issue_admin_cert(&ca, &req) {
        Ok(a) => a,
        Err(e) => {
            diags.attr_error(
                at("cluster"),
                "Could not issue the admin certificate",
                format!(
                    "{e}. Check that `cluster` is an unedited `ha_master_cluster.<name>.spec`."
                ),
            );
            return None;
        }
    };
    let server = admin_access::server_url(&ip, port);
    let kubeconfig = render(&KubeconfigInput {
        cluster_name: &name,
        server: &server,
        ca_pem: &ca_cert,
        user: &user,
        client_cert_pem: &admin.cert.cert_pem,
        client_key_pem: &admin.cert.key_pem,
    });
    m.expires_at = Val::Known(admin.expires_rfc3339());
    m.client_certificate_pem = Val::Known(admin.cert.cert_pem);
    m.client_key_pem = Val::Known(admin.cert.key_pem);
    m.ca_certificate_pem = Val::Known(ca_cert);
    m.server = Val::Known(server);
    m.kubeconfig = Val::Known(kubeconfig);
    Some(m)
}

/// The ephemeral resource `ha_admin_credentials` (Terraform 1.10+).
pub struct AdminCredentialsEphemeral {
    pub settings: SharedSettings,
}

#[async_trait]
impl EphemeralResource for AdminCredentialsEphemeral {
    type Model = AdminCredentialsModel;

    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema(Kind::Ephemeral)
    }

    fn validate(&self, config: &AdminCredentialsModel, diags: &mut Diagnostics) {
        validate(config, diags);
    }

    /// No renewal: a certificate cannot be extended, and its validity outlasts the run that asked for it.
    async fn open(
        &self,
        config: AdminCredentialsModel,
        diags: &mut Diagnostics,
    ) -> Option<Opened<AdminCredentialsModel>> {
        mint_for(&ha_settings::current(&self.settings), config, diags)
            .await
            .map(|result| Opened {
                result,
                renew_at: None,
                private: None,
            })
    }
}

/// The data source `ha_admin_credentials`: the same credential, stored in state (for OpenTofu 1.6).
pub struct AdminCredentialsDataSource {
    pub settings: SharedSettings,
}

#[async_trait]
impl DataSource for AdminCredentialsDataSource {
    type Model = AdminCredentialsModel;

    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema(Kind::DataSource)
    }

    fn validate(&self, config: &AdminCredentialsModel, diags: &mut Diagnostics) {
        validate(config, diags);
    }

    async fn read(
        &self,
        config: AdminCredentialsModel,
        diags: &mut Diagnostics,
    ) -> Option<AdminCredentialsModel> {
        mint_for(&ha_settings::current(&self.settings), config, diags).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ha_pki::ClusterCas;
    use tfplugin::value::Value;

    /// A configuration with every attribute null, and a cluster spec with every field null.
    fn config() -> AdminCredentialsModel {
        let null_object = |ty: Type| {
            let Type::Object { attrs, .. } = ty else {
                panic!("an object")
            };
            Value::Object(attrs.keys().map(|k| (k.clone(), Value::Null)).collect())
        };
        let mut m: AdminCredentialsModel = tfplugin_framework::model::from_value(&null_object(
            schema(Kind::Ephemeral).value_type(),
        ))
        .unwrap();
        let spec: ClusterSpec =
            tfplugin_framework::model::from_value(&null_object(<ClusterSpec as TfType>::tf_type()))
                .unwrap();
        m.cluster = Val::Known(spec);
        m
    }

    fn paths(d: &Diagnostics) -> Vec<String> {
        d.iter().map(|d| format!("{:?}", d.attribute)).collect()
    }

    /// While the CAs rotate, the credential trusts both CAs and is issued by the one that issues at the stage:
    /// the current CA until `switched`, the next one from then on (with the next key, which the secret holds).
    #[test]
    fn while_the_cas_rotate_the_issuing_ca_signs_and_both_are_trusted() {
        let (old, next) = (
            ClusterCas::generate("prod").unwrap(),
            ClusterCas::generate_next("prod", "r1").unwrap(),
        );
        let bundle = ha_pki::bundle_of([
            old.cluster_ca.cert_pem.as_str(),
            next.cluster_ca.cert_pem.as_str(),
        ]);
        for (stage, issuer) in [("started", &old), ("switched", &next)] {
            let mut m = config();
            let c = m.cluster.known().cloned().unwrap();
            m.cluster = Val::Known(ClusterSpec {
                name: Val::Known("prod".into()),
                external_ip: Val::Known("203.0.113.9".into()),
                api_port: Val::Known(443),
                ca_certificate: Val::Known(bundle.clone()),
                ca_rotation: Val::Known(stage.into()),
                ..c
            });
            let mut diags = Diagnostics::new();
            let out = mint(m, Some(issuer.cluster_ca.key_pem.clone()), &mut diags)
                .unwrap_or_else(|| panic!("{stage}: {diags:?}"));
            let cert = out.client_certificate_pem.known().unwrap();
            assert!(
                ha_pki::issued_by(cert, &issuer.cluster_ca.cert_pem).unwrap(),
                "{stage}: issued by the stage's CA"
            );
            assert_eq!(out.ca_certificate_pem.known().unwrap(), &bundle, "{stage}");
        }
    }

    #[test]
    fn mints_a_kubeconfig_for_the_static_ip_under_the_cluster_ca() {
        let cas = ClusterCas::generate("prod").unwrap();
        let mut m = config();
        let c = m.cluster.known().cloned().unwrap();
        m.cluster = Val::Known(ClusterSpec {
            name: Val::Known("prod".into()),
            external_ip: Val::Known("203.0.113.9".into()),
            api_port: Val::Known(6443),
            ca_certificate: Val::Known(cas.cluster_ca.cert_pem.clone()),
            ca_private_key: Val::Known(cas.cluster_ca.key_pem.clone()),
            ..c
        });
        m.validity = Val::Known("30m".into());
        let mut diags = Diagnostics::new();
        let out = mint(m.clone(), None, &mut diags).expect("minted");
        assert!(!diags.has_error(), "{diags:?}");
        assert_eq!(out.server.known().unwrap(), "https://203.0.113.9:6443");
        assert_eq!(
            out.ca_certificate_pem.known().unwrap(),
            &cas.cluster_ca.cert_pem
        );
        let kubeconfig = out.kubeconfig.known().unwrap();
        assert!(
            kubeconfig.contains("server: https://203.0.113.9:6443"),
            "{kubeconfig}"
        );
        assert!(out.expires_at.known().unwrap().ends_with('Z'));
        // Inputs come back as configured (a data source must not change them).
        assert_eq!(out.validity, m.validity);
        assert_eq!(out.user, Val::Null);

        // An imported cluster has no CA key: refused at `cluster`, saying why.
        let mut imported = m.clone();
        if let Val::Known(c) = &mut imported.cluster {
            c.ca_private_key = Val::Known(String::new());
        }
        let mut diags = Diagnostics::new();
        assert!(mint(imported, None, &mut diags).is_none());
        assert_eq!(
            paths(&diags),
            vec![format!("{:?}", Some(AttributePath::attr("cluster")))]
        );
    }

    #[test]
    fn bad_inputs_are_errors_at_their_attributes() {
        let mut m = config();
        m.validity = Val::Known("2m".into());
        m.user = Val::Known("".into());
        m.groups = Val::Known(vec!["a".into(), "b".into()]);
        let mut diags = Diagnostics::new();
        validate(&m, &mut diags);
        let want: Vec<String> = ["validity", "user", "groups"]
            .iter()
            .map(|a| format!("{:?}", Some(AttributePath::attr(*a))))
            .collect();
        assert_eq!(paths(&diags), want);
    }
}
