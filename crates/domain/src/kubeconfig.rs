//! A kubeconfig (kubectl's `~/.kube/config` format, `apiVersion: v1`, `kind: Config`) for one cluster and one
//! client-certificate user, with the PEMs inlined as base64 `*-data` fields so the file stands alone. Built from
//! structs so quoting is the YAML serializer's job.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

/// What a kubeconfig names. The key is a secret: the rendered text is too.
pub struct KubeconfigInput<'a> {
    /// The cluster's and context's name.
    pub cluster_name: &'a str,
    pub server: &'a str,
    pub ca_pem: &'a str,
    pub user: &'a str,
    pub client_cert_pem: &'a str,
    pub client_key_pem: &'a str,
}

#[derive(Serialize)]
struct Config<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    clusters: Vec<Named<ClusterEntry>>,
    users: Vec<Named<UserEntry>>,
    contexts: Vec<Named<ContextEntry<'a>>>,
    #[serde(rename = "current-context")]
    current_context: &'a str,
}

#[derive(Serialize)]
struct Named<T> {
    name: String,
    #[serde(flatten)]
    item: T,
}

#[derive(Serialize)]
struct ClusterEntry {
    cluster: Cluster,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority_data: String,
}

#[derive(Serialize)]
struct UserEntry {
    user: User,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate_data: String,
    client_key_data: String,
}

#[derive(Serialize)]
struct ContextEntry<'a> {
    context: Context<'a>,
}

#[derive(Serialize)]
struct Context<'a> {
    cluster: &'a str,
    user: String,
}

/// The kubeconfig's YAML. Its one context, named after the cluster, is current.
pub fn render(i: &KubeconfigInput) -> String {
    let user_name = format!("{}@{}", i.user, i.cluster_name);
    let config = Config {
        api_version: "v1",
        kind: "Config",
        clusters: vec![Named {
            name: i.cluster_name.into(),
            item: ClusterEntry {
                cluster: Cluster {
                    server: i.server.into(),
                    certificate_authority_data: STANDARD.encode(i.ca_pem),
                },
            },
        }],
        users: vec![Named {
            name: user_name.clone(),
            item: UserEntry {
                user: User {
                    client_certificate_data: STANDARD.encode(i.client_cert_pem),
                    client_key_data: STANDARD.encode(i.client_key_pem),
                },
            },
        }],
        contexts: vec![Named {
            name: i.cluster_name.into(),
            item: ContextEntry {
                context: Context {
                    cluster: i.cluster_name,
                    user: user_name,
                },
            },
        }],
        current_context: i.cluster_name,
    };
    serde_norway::to_string(&config).expect("a kubeconfig of strings always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_cluster_user_and_current_context_with_inlined_pems() {
        let yaml = render(&KubeconfigInput {
            cluster_name: "prod: master", // a name YAML must quote
            server: "https://203.0.113.9:443",
            ca_pem: "CA PEM",
            user: "kubernetes-admin",
            client_cert_pem: "CERT PEM",
            client_key_pem: "KEY PEM",
        });
        let v: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
        let s = |v: &serde_norway::Value| v.as_str().unwrap().to_string();
        assert_eq!(s(&v["apiVersion"]), "v1");
        assert_eq!(s(&v["kind"]), "Config");
        assert_eq!(s(&v["current-context"]), "prod: master");
        let cluster = &v["clusters"][0];
        assert_eq!(s(&cluster["name"]), "prod: master");
        assert_eq!(s(&cluster["cluster"]["server"]), "https://203.0.113.9:443");
        let decode =
            |v: &serde_norway::Value| String::from_utf8(STANDARD.decode(s(v)).unwrap()).unwrap();
        assert_eq!(
            decode(&cluster["cluster"]["certificate-authority-data"]),
            "CA PEM"
        );
        let user = &v["users"][0];
        assert_eq!(s(&user["name"]), "kubernetes-admin@prod: master");
        assert_eq!(decode(&user["user"]["client-certificate-data"]), "CERT PEM");
        assert_eq!(decode(&user["user"]["client-key-data"]), "KEY PEM");
        let ctx = &v["contexts"][0];
        assert_eq!(s(&ctx["context"]["cluster"]), "prod: master");
        assert_eq!(s(&ctx["context"]["user"]), "kubernetes-admin@prod: master");
    }
}
