//! What each component must be allowed to do to work at all: its leader-election lease (by name, in
//! kube-system), the leader-migration lease when it takes part in a migration, and the objects its controllers
//! touch. Taken from each program's source (named per entry); `rbac` judges them against the grants.

use super::flags::Program;
use super::master::{Container, Master};

/// What one request asks: a verb on a resource (optionally one object by name) in a namespace (`None` for
/// cluster-scoped).
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub name: Option<String>,
    pub namespace: Option<&'static str>,
    /// Why the component needs it, with the upstream source.
    pub why: &'static str,
}

/// Whose permissions a need is judged with.
#[derive(Debug, Clone)]
pub(crate) enum Who {
    /// The client certificate of this kubeconfig (a path on the VM).
    Kubeconfig(String),
    /// This client certificate itself (a path on the VM), as the API server presents it to kubelets.
    Certificate(String),
    /// A controller's own service account (`--use-service-account-credentials`).
    ServiceAccount(&'static str, &'static str),
}

#[derive(Debug, Clone)]
pub(crate) struct Need {
    pub component: String,
    /// What fails without it, for the sentence.
    pub what: String,
    pub identity: Who,
    pub asks: Vec<Ask>,
}

/// `get` and `update` of one lease in kube-system: what client-go's leader election does with a Lease lock.
fn lease(name: &str, why: &'static str) -> Vec<Ask> {
    ["get", "update"]
        .into_iter()
        .map(|verb| Ask {
            verb,
            group: "coordination.k8s.io",
            resource: "leases",
            name: Some(name.to_string()),
            namespace: Some("kube-system"),
            why,
        })
        .collect()
}

fn ask(verb: &'static str, group: &'static str, resource: &'static str, why: &'static str) -> Ask {
    Ask {
        verb,
        group,
        resource,
        name: None,
        namespace: None,
        why,
    }
}

/// The migration lease Kubernetes' leader migration takes when no configuration names another
/// (k8s.io/controller-manager `pkg/leadermigration/options`, `LeaderName` of the default configuration).
const MIGRATION_LEASE: &str = "cloud-provider-extraction-migration";

pub(crate) fn of(master: &Master<'_>) -> Vec<Need> {
    let mut out = Vec::new();
    for c in master.containers.iter().filter(|c| !c.init) {
        let Some(program) = Program::of_image(&c.image) else {
            continue;
        };
        out.extend(kubelet_client_need(c, program));
        out.extend(client_needs(c, program));
    }
    out
}

/// What the API server's own client towards kubelets needs.
fn kubelet_client_need(c: &Container, program: Program) -> Option<Need> {
    // The kubelets authorize the API server's own requests (pkg/kubelet/server/auth.go maps a path to a
    // subresource of nodes: /containerLogs, /exec, /attach, /portForward are `proxy`, the verb follows the
    // HTTP method) with a SubjectAccessReview, so its kubelet client certificate needs RBAC.
    if program == Program::KubeApiserver
        && let Some(cert) = c
            .flag("kubelet-client-certificate")
            .and_then(|p| c.host_path(&p))
    {
        return Some(Need {
            component: program.name().to_string(),
            what: "kubectl logs, exec, attach and port-forward are refused by every kubelet".into(),
            identity: Who::Certificate(cert),
            asks: vec![
                ask(
                    "get",
                    "",
                    "nodes/proxy",
                    "GET /containerLogs, the kubelet's log stream",
                ),
                ask(
                    "create",
                    "",
                    "nodes/proxy",
                    "POST /exec, /attach and /portForward on the kubelet",
                ),
            ],
        });
    }
    None
}

/// What a control-plane client needs as its kubeconfig's identity: delegated authentication, its lease, leader
/// migration, and what its controllers do.
fn client_needs(c: &Container, program: Program) -> Vec<Need> {
    let Some(kubeconfig) = c.flag("kubeconfig").and_then(|k| c.host_path(&k)) else {
        return Vec::new();
    };
    let me = Who::Kubeconfig(kubeconfig);
    let mut wants = delegated_authentication(c, &me);
    wants.extend(leases(c, program, &me));
    wants.extend(controllers(c, program, &me));
    wants
        .into_iter()
        .filter(|(_, _, asks)| !asks.is_empty())
        .map(|(what, identity, asks)| Need {
            component: program.name().to_string(),
            what: what.to_string(),
            identity,
            asks,
        })
        .collect()
}

/// What goes wrong without them, who asks, and the asks.
type Want = (&'static str, Who, Vec<Ask>);

/// Delegated authentication reads this config map at start, and a failed lookup is fatal unless
/// --authentication-tolerate-lookup-failure (k8s.io/apiserver pkg/server/options/authentication.go).
fn delegated_authentication(c: &Container, me: &Who) -> Vec<Want> {
    if c.flag("authentication-kubeconfig").is_none()
        || c.flag("authentication-tolerate-lookup-failure")
            .is_some_and(|v| v == "true")
    {
        return Vec::new();
    }
    vec![(
        "it exits at start",
        me.clone(),
        vec![Ask {
            verb: "get",
            group: "",
            resource: "configmaps",
            name: Some("extension-apiserver-authentication".into()),
            namespace: Some("kube-system"),
            why: "delegated authentication (--authentication-kubeconfig)",
        }],
    )]
}

/// Leader election: the lease is named after the program unless --leader-elect-resource-name says otherwise
/// (k8s.io/component-base/config/options/leaderelectionconfig.go; cluster-autoscaler elects by default and its
/// --leader-elect-resource-name defaults to "cluster-autoscaler", main.go); leader migration's lock besides.
fn leases(c: &Container, program: Program, me: &Who) -> Vec<Want> {
    let mut wants = Vec::new();
    let elects = c.flag("leader-elect").is_some_and(|v| v == "true")
        || (program == Program::ClusterAutoscaler && c.flag("leader-elect").is_none());
    if elects {
        let name = c
            .flag("leader-elect-resource-name")
            .unwrap_or_else(|| program.name().to_string());
        wants.push((
            "it never becomes leader, so its controllers never run",
            me.clone(),
            lease(&name, "leader election"),
        ));
    }
    if c.flag("enable-leader-migration")
        .is_some_and(|v| v == "true")
    {
        wants.push((
            "leader migration never hands the cloud controllers over",
            me.clone(),
            lease(MIGRATION_LEASE, "leader migration's lock"),
        ));
    }
    wants
}

/// What the program's own controllers do, as whom.
fn controllers(c: &Container, program: Program, me: &Who) -> Vec<Want> {
    let cloud_node_controller = || {
        vec![
            ask("update", "", "nodes", "cloud node controller"),
            ask("patch", "", "nodes/status", "cloud node controller"),
        ]
    };
    const TAINTED: &str = "nodes keep the node.cloudprovider.kubernetes.io/uninitialized taint";
    match program {
        Program::CloudControllerManager
            if c.flag("use-service-account-credentials")
                .is_some_and(|v| v == "true") =>
        {
            // k8s.io/controller-manager pkg/clientbuilder: one service account and token per controller.
            let mut asks = vec![
                ask("get", "", "serviceaccounts", "a client per controller"),
                ask(
                    "create",
                    "",
                    "serviceaccounts/token",
                    "a client per controller",
                ),
            ];
            for a in &mut asks {
                a.namespace = Some("kube-system");
            }
            vec![
                ("its controllers get no credentials", me.clone(), asks),
                // k8s.io/cloud-provider controllers/node (vendored in cloud-provider-gcp): the cloud node
                // controller runs as `node-controller`, sets addresses and removes the uninitialized taint.
                (
                    TAINTED,
                    Who::ServiceAccount("kube-system", "node-controller"),
                    cloud_node_controller(),
                ),
            ]
        }
        Program::CloudControllerManager => vec![(TAINTED, me.clone(), cloud_node_controller())],
        Program::ClusterAutoscaler => vec![(
            "it cannot see or scale the cluster",
            me.clone(),
            vec![
                ask(
                    "list",
                    "",
                    "nodes",
                    "cluster state (cluster-autoscaler's listers)",
                ),
                ask(
                    "watch",
                    "",
                    "pods",
                    "unschedulable pods (cluster-autoscaler's listers)",
                ),
                ask(
                    "create",
                    "",
                    "pods/eviction",
                    "draining a node before removing it",
                ),
            ],
        )],
        _ => Vec::new(),
    }
}
