//! Whether each component's identity may do what it needs, as the API server's RBAC authorizer would decide:
//! Kubernetes' bootstrap policy for the release (`rbac/bootstrap.yaml`, taken from upstream's policy) plus the
//! Roles, ClusterRoles and bindings the master installs as addons. An identity is a client certificate's CN (the
//! user) and O (its groups), read from the kubeconfig the component is given; a controller that runs with
//! `--use-service-account-credentials` acts as its service account.

use super::Refusal;
use super::master::Master;
use super::needs::Ask;
use super::reads::Kubeconfig;
use super::release::{Version, bound};
use serde::Deserialize;

/// An RBAC rule (rbac.authorization.k8s.io/v1 `PolicyRule`, resource rules only).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Rule {
    #[serde(default, rename = "apiGroups")]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default, rename = "resourceNames")]
    pub resource_names: Vec<String>,
}

/// Who a rule is granted to: a user, a group, or a service account (`namespace:name`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Subject {
    pub kind: String,
    pub name: String,
}

/// A grant: rules for a subject, cluster-wide or in one namespace.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Grant {
    pub subject: Subject,
    /// The role the rules come from (`ClusterRole/system:kube-scheduler`), so the master's own bindings can name
    /// a bootstrap role.
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub until: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub rules: Vec<Rule>,
    /// For a grant of the master's own addons: the etcd key of the binding it comes from
    /// (`/registry/clusterrolebindings/<name>`). It counts only while that binding, as etcd has it, names the
    /// subject: once the addon manager made it, and until someone takes the subject out; the
    /// bootstrap policy's are there from the API server's start.
    #[serde(skip)]
    pub binding_key: Option<String>,
}

const BOOTSTRAP: &str = include_str!("rbac/bootstrap.yaml");

/// An identity: a user and its groups (`system:authenticated` is every authenticated identity's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

impl Identity {
    pub fn service_account(namespace: &str, name: &str) -> Identity {
        Identity {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    fn is(&self, s: &Subject) -> bool {
        match s.kind.as_str() {
            "User" => s.name == self.user,
            "Group" => self.groups.contains(&s.name),
            "ServiceAccount" => {
                let (ns, name) = s.name.split_once(':').unwrap_or(("", &s.name));
                self.user == format!("system:serviceaccount:{ns}:{name}")
            }
            _ => false,
        }
    }
}

fn matches(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

impl Rule {
    fn allows(&self, ask: &Ask) -> bool {
        matches(&self.verbs, ask.verb)
            && matches(&self.api_groups, ask.group)
            && matches(&self.resources, ask.resource)
            && (self.resource_names.is_empty()
                || ask
                    .name
                    .as_deref()
                    .is_some_and(|n| self.resource_names.iter().any(|r| r == n)))
    }
}

/// The release's bootstrap grants.
pub(crate) fn bootstrap(release: &Version) -> Result<Vec<Grant>, String> {
    let all: Vec<Grant> = serde_norway::from_str(BOOTSTRAP)
        .map_err(|e| format!("sim/src/contract/rbac/bootstrap.yaml: {e}"))?;
    let mut out = Vec::new();
    for g in all {
        let since = g.since.as_deref().map(bound).transpose()?.flatten();
        let until = g.until.as_deref().map(bound).transpose()?.flatten();
        if release.within(since.as_ref(), until.as_ref()) {
            out.push(g);
        }
    }
    Ok(out)
}

/// The grants the master's addon manifests make: each binding's subjects get its role's rules, whether the role is
/// one of the addons or one of the bootstrap policy's (`bootstrap`).
pub(crate) fn addon_grants(master: &Master<'_>, bootstrap: &[Grant]) -> Vec<Grant> {
    use serde_norway::Value;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let kind = |v: &Value| s(v, "kind").unwrap_or_default();
    let meta = |v: &Value, k: &str| v.get("metadata").and_then(|m| s(m, k));
    let rules_of = |role_kind: &str, name: &str, ns: Option<&str>| -> Vec<Rule> {
        let own: Vec<Rule> = master
            .addons
            .iter()
            .filter(|d| kind(d) == role_kind && meta(d, "name").as_deref() == Some(name))
            .filter(|d| role_kind == "ClusterRole" || meta(d, "namespace").as_deref() == ns)
            .filter_map(|d| serde_norway::from_value::<Vec<Rule>>(d.get("rules")?.clone()).ok())
            .flatten()
            .collect();
        if !own.is_empty() {
            return own;
        }
        let wanted = format!("{role_kind}/{name}");
        bootstrap
            .iter()
            .filter(|g| g.role.as_deref() == Some(wanted.as_str()))
            .filter(|g| role_kind == "ClusterRole" || g.namespace.as_deref() == ns)
            .map(|g| g.rules.clone())
            .next()
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for b in &master.addons {
        let k = kind(b);
        if k != "ClusterRoleBinding" && k != "RoleBinding" {
            continue;
        }
        let namespace = (k == "RoleBinding").then(|| meta(b, "namespace")).flatten();
        let Some(role) = b.get("roleRef") else {
            continue;
        };
        let (role_kind, role_name) = (
            s(role, "kind").unwrap_or_default(),
            s(role, "name").unwrap_or_default(),
        );
        let rules = rules_of(&role_kind, &role_name, namespace.as_deref());
        let binding_key = binding_key(b);
        let subjects = serde_json::to_value(b)
            .map(|b| subjects_of(&b))
            .unwrap_or_default();
        for subject in subjects {
            out.push(Grant {
                subject,
                role: Some(format!("{role_kind}/{role_name}")),
                since: None,
                until: None,
                namespace: namespace.clone(),
                rules: rules.clone(),
                binding_key: binding_key.clone(),
            });
        }
    }
    out
}

/// The subjects a binding (as JSON) names, as grants name them (a service account as `namespace:name`).
pub(crate) fn subjects_of(binding: &serde_json::Value) -> Vec<Subject> {
    let s = |v: &serde_json::Value, k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string()
    };
    binding
        .get("subjects")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .map(|subject| {
            let kind = s(subject, "kind");
            let name = match kind.as_str() {
                "ServiceAccount" => format!("{}:{}", s(subject, "namespace"), s(subject, "name")),
                _ => s(subject, "name"),
            };
            Subject { kind, name }
        })
        .collect()
}

/// Where the API server keeps an addon's binding in etcd (`/registry/<resource>/[<namespace>/]<name>`, as
/// k8s.io/apiserver's storage names objects), so the addon manager's write and RBAC's read meet there.
fn binding_key(binding: &serde_norway::Value) -> Option<String> {
    let meta = binding.get("metadata")?;
    let name = meta.get("name")?.as_str()?;
    match binding.get("kind")?.as_str()? {
        "ClusterRoleBinding" => Some(format!("/registry/clusterrolebindings/{name}")),
        "RoleBinding" => Some(format!(
            "/registry/rolebindings/{}/{name}",
            meta.get("namespace")?.as_str()?
        )),
        _ => None,
    }
}

/// Whether `who` may do `ask` under `grants`.
pub(crate) fn allowed(grants: &[Grant], who: &Identity, ask: &Ask) -> bool {
    allowed_with(grants, who, ask, |_, _| true)
}

/// [`allowed`], counting an addon's grant only when `held` says the binding as the cluster has it (by etcd key)
/// still names the grant's subject: it exists, and nobody took the subject out (a revocation).
fn allowed_with(
    grants: &[Grant],
    who: &Identity,
    ask: &Ask,
    held: impl Fn(&str, &Subject) -> bool,
) -> bool {
    grants.iter().any(|g| {
        g.binding_key
            .as_deref()
            .is_none_or(|key| held(key, &g.subject))
            && who.is(&g.subject)
            && (g.namespace.is_none() || g.namespace.as_deref() == ask.namespace)
            && g.rules.iter().any(|r| r.allows(ask))
    })
}

/// The API server's sentence for a refused request.
pub(crate) fn forbidden(who: &Identity, ask: &Ask) -> String {
    let group = if ask.group.is_empty() {
        String::new()
    } else {
        format!(".{}", ask.group)
    };
    let object = ask
        .name
        .as_deref()
        .map(|n| format!(" {n:?}"))
        .unwrap_or_default();
    let scope = match ask.namespace {
        Some(ns) => format!(" in the namespace {ns:?}"),
        None => " at the cluster scope".into(),
    };
    format!(
        "{}{group}{object} is forbidden: User {:?} cannot {} resource {:?} in API group {:?}{scope}",
        ask.resource, who.user, ask.verb, ask.resource, ask.group
    )
}

/// The identity a kubeconfig's client certificate carries (CN = user, O = groups).
pub(crate) fn identity_of(
    master: &Master<'_>,
    kubeconfig_host_path: &str,
) -> Result<Identity, String> {
    let file = master
        .files
        .get(kubeconfig_host_path)
        .ok_or_else(|| format!("no kubeconfig at {kubeconfig_host_path}"))?;
    let kc = Kubeconfig::parse(&file.bytes)?;
    identity_of_certificate(master, &kc.client_certificate)
}

/// The identity a client certificate carries (CN = user, O = groups), from its path on the VM.
pub(crate) fn identity_of_certificate(master: &Master<'_>, path: &str) -> Result<Identity, String> {
    let cert = master
        .files
        .get(path)
        .ok_or_else(|| format!("no client certificate at {path}"))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&cert.bytes)
        .map_err(|e| format!("{path}: not a PEM certificate: {e}"))?;
    let x509 = pem
        .parse_x509()
        .map_err(|e| format!("{path}: not a certificate: {e}"))?;
    Ok(Identity::of_subject(x509.subject()))
}

impl Identity {
    /// What the API server reads from a client certificate's subject: CN the user, each O a group, and every
    /// authenticated client in `system:authenticated`.
    pub fn of_subject(subject: &x509_parser::x509::X509Name<'_>) -> Identity {
        let user = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut groups: Vec<String> = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect();
        groups.push("system:authenticated".into());
        Identity { user, groups }
    }
}

/// What a booted master's API server authorizes: the release's bootstrap grants plus the master's addons, as RBAC
/// decides once the addon manager applied them. The stand-in API server asks it for the reads it serves
/// (`vm::api`), so a client certificate's group is judged as a real master would judge it.
#[derive(Debug, Default)]
pub struct Authorizer {
    grants: Vec<Grant>,
    /// The master's addon bindings as the addon manager writes them: etcd key and JSON object.
    bindings: Vec<(String, String)>,
}

impl Authorizer {
    pub(crate) fn of(master: &Master<'_>) -> Result<Authorizer, String> {
        let mut grants = bootstrap(&master.release)?;
        let own = addon_grants(master, &grants);
        grants.extend(own);
        let bindings = master
            .addons
            .iter()
            .filter_map(|b| {
                let key = binding_key(b)?;
                let json = serde_json::to_string(b).ok()?;
                Some((key, json))
            })
            .collect();
        Ok(Authorizer { grants, bindings })
    }

    /// The master's addon bindings (etcd key, JSON object): what its addon manager makes.
    pub(crate) fn bindings(&self) -> &[(String, String)] {
        &self.bindings
    }

    /// `Ok` when `who` may `list` `resource` (core group) in `namespace` (the cluster scope when none), else the
    /// API server's sentence for the refusal. `held` says whether an addon's binding, as the cluster has it (by
    /// etcd key), names a subject.
    pub(crate) fn may_list(
        &self,
        who: &Identity,
        resource: &'static str,
        namespace: Option<&'static str>,
        held: impl Fn(&str, &Subject) -> bool,
    ) -> Result<(), String> {
        self.may(
            who,
            Ask {
                verb: "list",
                group: "",
                resource,
                name: None,
                namespace,
                why: "a client's request",
            },
            held,
        )
    }

    /// `Ok` when `who` may `verb` (`get`, `patch`) the cluster role binding `name`, else the API server's sentence
    /// for the refusal.
    pub(crate) fn may_on_binding(
        &self,
        who: &Identity,
        verb: &'static str,
        name: &str,
        held: impl Fn(&str, &Subject) -> bool,
    ) -> Result<(), String> {
        self.may(
            who,
            Ask {
                verb,
                group: "rbac.authorization.k8s.io",
                resource: "clusterrolebindings",
                name: Some(name.to_string()),
                namespace: None,
                why: "a client's request",
            },
            held,
        )
    }

    fn may(
        &self,
        who: &Identity,
        ask: Ask,
        held: impl Fn(&str, &Subject) -> bool,
    ) -> Result<(), String> {
        if allowed_with(&self.grants, who, &ask, held) {
            Ok(())
        } else {
            Err(forbidden(who, &ask))
        }
    }
}

/// Every component's needs against the release's grants.
pub(crate) fn check(master: &Master<'_>) -> Result<(), Refusal> {
    let table = |e: String| {
        Refusal::new(
            "ha-sim",
            format!("the contract's RBAC table is broken: {e}"),
        )
    };
    let mut grants = bootstrap(&master.release).map_err(table)?;
    let own = addon_grants(master, &grants);
    grants.extend(own);
    for need in super::needs::of(master) {
        let who = match &need.identity {
            super::needs::Who::Kubeconfig(path) => identity_of(master, path)
                .map_err(|e| Refusal::new(&need.component, format!("its identity: {e}")))?,
            super::needs::Who::Certificate(path) => identity_of_certificate(master, path)
                .map_err(|e| Refusal::new(&need.component, format!("its identity: {e}")))?,
            super::needs::Who::ServiceAccount(ns, name) => Identity::service_account(ns, name),
        };
        for ask in &need.asks {
            if !allowed(&grants, &who, ask) {
                return Err(Refusal::new(
                    &need.component,
                    format!("{} ({}): {}", need.what, ask.why, forbidden(&who, ask)),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// An addon's grant counts while the binding, as the cluster has it, names the subject: not before the addon
    /// manager made it, not after the subject was taken out; the bootstrap policy's always.
    #[test]
    fn an_addon_grant_counts_only_while_its_binding_names_the_subject() {
        let binding = serde_json::json!({
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "ha-master:cluster-admins"},
            "subjects": [{"kind": "Group", "name": "ha-master:cluster-admins"}],
        });
        let key = "/registry/clusterrolebindings/ha-master:cluster-admins";
        let everything = Rule {
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            verbs: vec!["*".into()],
            resource_names: vec![],
        };
        let grant = |subject: Subject, binding_key: Option<&str>| Grant {
            subject,
            role: None,
            since: None,
            until: None,
            namespace: None,
            rules: vec![everything.clone()],
            binding_key: binding_key.map(str::to_string),
        };
        let bound = subjects_of(&binding).remove(0);
        let masters = Subject {
            kind: "Group".into(),
            name: "system:masters".into(),
        };
        let grants = [grant(bound.clone(), Some(key)), grant(masters, None)];
        let who = |group: &str| Identity {
            user: "kubernetes-admin".into(),
            groups: vec![group.into(), "system:authenticated".into()],
        };
        let ask = Ask {
            verb: "list",
            group: "",
            resource: "secrets",
            name: None,
            namespace: Some("kube-system"),
            why: "a test",
        };
        let none: BTreeMap<String, Vec<Subject>> = BTreeMap::new();
        let made = BTreeMap::from([(key.to_string(), vec![bound.clone()])]);
        let revoked = BTreeMap::from([(key.to_string(), vec![])]);
        for (why, held, group, want) in [
            ("not made yet", &none, "ha-master:cluster-admins", false),
            ("made", &made, "ha-master:cluster-admins", true),
            (
                "subjects emptied",
                &revoked,
                "ha-master:cluster-admins",
                false,
            ),
            ("system:masters, not made", &none, "system:masters", true),
            ("system:masters, emptied", &revoked, "system:masters", true),
        ] {
            let held = |k: &str, s: &Subject| held.get(k).is_some_and(|subs| subs.contains(s));
            assert_eq!(
                allowed_with(&grants, &who(group), &ask, held),
                want,
                "{why}"
            );
        }
    }
}
