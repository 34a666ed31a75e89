//! What each program reads at start, by flag: the key, certificate and kubeconfig files it is given, and how
//! upstream parses each one (the `kind` the file checker runs). A kubeconfig is followed to the files it names, as
//! client-go's `clientcmd` loads them.

use super::Refusal;
use super::flags::Program;
use super::master::{Container, Master, parse_flags};
use serde::Deserialize;

/// How upstream parses a file: the file checker's kinds (`tools/k8s-filecheck`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// client-go `keyutil.PublicKeysFromFile` (kube-apiserver `--service-account-key-file`).
    PublicKeys,
    /// client-go `keyutil.PrivateKeyFromFile` (`--service-account-signing-key-file`,
    /// `--service-account-private-key-file`).
    PrivateKey,
    /// client-go `certutil.CertsFromFile` (CA bundles).
    CertBundle,
    /// Go `tls.LoadX509KeyPair` (serving and client certificates with their keys).
    KeyPair,
    /// client-go `clientcmd.BuildConfigFromFlags` and the TLS configuration it makes (a component's kubeconfig,
    /// with the files it names).
    Kubeconfig,
    /// k8s.io/apiserver's `EncryptionConfiguration` decoding and `ValidateEncryptionConfiguration`
    /// (kube-apiserver `--encryption-provider-config`).
    EncryptionConfig,
    /// Read as it is (gce.conf, the kubelet's configuration).
    Plain,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::PublicKeys => "public-keys",
            Kind::PrivateKey => "private-key",
            Kind::CertBundle => "cert-bundle",
            Kind::KeyPair => "key-pair",
            Kind::Kubeconfig => "kubeconfig",
            Kind::EncryptionConfig => "encryption-config",
            Kind::Plain => "plain",
        }
    }
}

/// One thing a program reads at start: a file (or a certificate and its key) given by a flag.
#[derive(Debug, Clone)]
pub(crate) struct Read {
    /// The program, as sentences name it (`cluster-autoscaler`).
    pub component: String,
    /// `--service-account-key-file`, or `--kubeconfig → client-key`.
    pub what: String,
    pub kind: Kind,
    /// Paths as the program sees them (inside its container).
    pub paths: Vec<String>,
    /// The container that reads it; `None` for the kubelet, which runs on the VM itself.
    pub container: Option<Container>,
}

const KUBECONFIG_FLAGS: &[&str] = &[
    "kubeconfig",
    "authentication-kubeconfig",
    "authorization-kubeconfig",
];

/// Who reads: one of the judged programs, or a container the flag tables know by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    Program(Program),
    /// kops' kube-apiserver-healthcheck (its three flags; sim/src/vm/config.rs).
    Healthcheck,
    /// etcd's TLS flags (the sim runs the real etcd, so its flag set is not judged here, only what it opens).
    Etcd,
    /// kube-addon-manager: `kubectl` with the `KUBECTL_OPTS` its script passes on.
    AddonManager,
}

impl Reader {
    fn of(c: &Container) -> Option<Reader> {
        if let Some(p) = Program::of_image(&c.image) {
            return Some(Reader::Program(p));
        }
        match c.name.as_str() {
            "healthcheck" => Some(Reader::Healthcheck),
            "etcd" => Some(Reader::Etcd),
            "kube-addon-manager" => Some(Reader::AddonManager),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Reader::Program(p) => p.name(),
            Reader::Healthcheck => "kube-apiserver-healthcheck",
            Reader::Etcd => "etcd",
            Reader::AddonManager => "kube-addon-manager",
        }
    }

    /// The reader's flags: its argv, or for the addon manager the options its script hands kubectl.
    fn argv(self, c: &Container) -> Vec<String> {
        match self {
            Reader::AddonManager => c
                .env
                .iter()
                .filter(|(k, _)| k == "KUBECTL_OPTS")
                .flat_map(|(_, v)| v.split_whitespace().map(str::to_string))
                .collect(),
            _ => c.flags(),
        }
    }
}

/// Files given by flags, per reader: (flags read together, kind). Kubeconfig flags are followed separately.
fn flag_reads(reader: Reader) -> &'static [(&'static [&'static str], Kind)] {
    match reader {
        Reader::Program(Program::KubeApiserver) => &[
            (&["tls-cert-file", "tls-private-key-file"], Kind::KeyPair),
            (&["client-ca-file"], Kind::CertBundle),
            (&["etcd-cafile"], Kind::CertBundle),
            (&["etcd-certfile", "etcd-keyfile"], Kind::KeyPair),
            (&["service-account-key-file"], Kind::PublicKeys),
            (&["service-account-signing-key-file"], Kind::PrivateKey),
            (
                &["kubelet-client-certificate", "kubelet-client-key"],
                Kind::KeyPair,
            ),
            (&["encryption-provider-config"], Kind::EncryptionConfig),
        ],
        Reader::Program(Program::KubeControllerManager) => &[
            (&["root-ca-file"], Kind::CertBundle),
            (&["service-account-private-key-file"], Kind::PrivateKey),
            (&["cloud-config"], Kind::Plain),
        ],
        Reader::Program(Program::CloudControllerManager | Program::ClusterAutoscaler) => {
            &[(&["cloud-config"], Kind::Plain)]
        }
        Reader::Program(Program::Kubelet) => {
            &[(&["config"], Kind::Plain), (&["cloud-config"], Kind::Plain)]
        }
        Reader::Program(Program::KubeScheduler) | Reader::AddonManager => &[],
        Reader::Healthcheck => &[
            (&["ca-cert"], Kind::CertBundle),
            (&["client-cert", "client-key"], Kind::KeyPair),
        ],
        Reader::Etcd => &[
            (&["trusted-ca-file"], Kind::CertBundle),
            (&["cert-file", "key-file"], Kind::KeyPair),
            (&["peer-trusted-ca-file"], Kind::CertBundle),
            (&["peer-cert-file", "peer-key-file"], Kind::KeyPair),
        ],
    }
}

/// Everything the master's programs read at start. A kubeconfig that does not parse, or names no user or
/// cluster, is refused here with clientcmd's own kind of sentence.
pub(crate) fn of(master: &Master<'_>) -> Result<Vec<Read>, Refusal> {
    let mut out = Vec::new();
    let judged = master
        .containers
        .iter()
        .filter(|c| !c.init)
        .filter_map(|c| {
            let reader = Reader::of(c)?;
            Some((
                reader,
                reader.name().to_string(),
                reader.argv(c),
                Some(c.clone()),
            ))
        });
    let kubelet = master.kubelet.clone().map(|argv| {
        (
            Reader::Program(Program::Kubelet),
            "kubelet".to_string(),
            argv,
            None,
        )
    });
    for (reader, component, argv, container) in judged.chain(kubelet) {
        let flags = parse_flags(&argv);
        let value = |name: &str| {
            flags
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        for (names, kind) in flag_reads(reader) {
            let paths: Vec<String> = names.iter().filter_map(|n| value(n)).collect();
            // A pair with one half missing is the program's own flag validation, which the boot reports.
            if paths.len() != names.len() {
                continue;
            }
            out.push(Read {
                component: component.clone(),
                what: names
                    .iter()
                    .map(|n| format!("--{n}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                kind: *kind,
                paths,
                container: container.clone(),
            });
        }
        for flag in KUBECONFIG_FLAGS {
            let Some(path) = value(flag) else { continue };
            let read = |kind, what: &str, paths: Vec<String>| Read {
                component: component.clone(),
                what: format!("--{flag} {what}"),
                kind,
                paths,
                container: container.clone(),
            };
            out.push(read(Kind::Kubeconfig, "", vec![path.clone()]));
            let refuse = |cause: String| {
                Refusal::new(component.clone(), format!("--{flag}={path}: {cause}"))
            };
            let file = master
                .files
                .get(path.as_str())
                .or_else(|| {
                    // The kubeconfig as the VM holds it, through the container's mounts.
                    let host = container.as_ref()?.host_path(&path)?;
                    master.files.get(host.as_str())
                })
                .ok_or_else(|| refuse("no such file on the master".into()))?;
            let kc = Kubeconfig::parse(&file.bytes).map_err(refuse)?;
            out.push(read(
                Kind::KeyPair,
                "→ client-certificate, client-key",
                vec![kc.client_certificate, kc.client_key],
            ));
            if let Some(ca) = kc.certificate_authority {
                out.push(read(Kind::CertBundle, "→ certificate-authority", vec![ca]));
            }
        }
    }
    Ok(out)
}

#[derive(Debug, Deserialize)]
struct RawKubeconfig {
    #[serde(default, rename = "current-context")]
    current_context: String,
    #[serde(default)]
    contexts: Vec<Named<ContextEntry>>,
    #[serde(default)]
    clusters: Vec<Named<ClusterEntry>>,
    #[serde(default)]
    users: Vec<Named<UserEntry>>,
}

#[derive(Debug, Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "context", alias = "cluster", alias = "user")]
    item: T,
}

#[derive(Debug, Deserialize)]
struct ContextEntry {
    cluster: String,
    user: String,
}

#[derive(Debug, Deserialize)]
struct ClusterEntry {
    server: String,
    #[serde(default, rename = "certificate-authority")]
    certificate_authority: Option<String>,
}

#[derive(Debug, Deserialize)]
struct UserEntry {
    #[serde(default, rename = "client-certificate")]
    client_certificate: Option<String>,
    #[serde(default, rename = "client-key")]
    client_key: Option<String>,
}

/// The parts of a kubeconfig a control-plane client uses: its current context's cluster and user
/// (k8s.io/client-go/tools/clientcmd/api/v1 field names; the sentences follow clientcmd's validation).
#[derive(Debug, Clone)]
pub(crate) struct Kubeconfig {
    pub certificate_authority: Option<String>,
    pub client_certificate: String,
    pub client_key: String,
}

impl Kubeconfig {
    pub fn parse(bytes: &[u8]) -> Result<Kubeconfig, String> {
        let raw: RawKubeconfig = serde_norway::from_slice(bytes)
            .map_err(|e| format!("error loading config file: {e}"))?;
        let context = raw
            .contexts
            .iter()
            .find(|c| c.name == raw.current_context)
            .ok_or_else(|| {
                format!(
                    "invalid configuration: context was not found for specified context: {}",
                    raw.current_context
                )
            })?;
        let cluster = raw
            .clusters
            .iter()
            .find(|c| c.name == context.item.cluster)
            .ok_or_else(|| {
                format!(
                    "invalid configuration: cluster {:?} not found",
                    context.item.cluster
                )
            })?;
        if cluster.item.server.is_empty() {
            return Err("invalid configuration: no server found for cluster".into());
        }
        let user = raw
            .users
            .iter()
            .find(|u| u.name == context.item.user)
            .ok_or_else(|| {
                format!(
                    "invalid configuration: user {:?} not found",
                    context.item.user
                )
            })?;
        match (&user.item.client_certificate, &user.item.client_key) {
            (Some(cert), Some(key)) => Ok(Kubeconfig {
                certificate_authority: cluster.item.certificate_authority.clone(),
                client_certificate: cert.clone(),
                client_key: key.clone(),
            }),
            _ => Err(format!(
                "invalid configuration: user {:?} has no client-certificate and client-key (the masters' components authenticate with certificates)",
                context.item.user
            )),
        }
    }
}
