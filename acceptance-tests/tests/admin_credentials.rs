//! Admin access with a real kubectl, under both clients on ha-sim (one replica): `ha_admin_credentials` mints a
//! client certificate under the cluster CA and a kubeconfig for the static IP. Terraform takes the ephemeral
//! resource and hands its kubeconfig to a `local-exec` provisioner (ephemeral values may be read there, and
//! `terraform_data` is built in, so nothing is downloaded); the credential must then be nowhere in the state.
//! OpenTofu 1.6 has no ephemeral resources and takes the data source, whose kubeconfig is a sensitive output.
//! Either way `kubectl version` reaches the API server and prints the version its manifest runs; kubectl without
//! a client certificate (a bearer token the cluster does not know) is refused with 401, a client with no
//! credential at all is anonymous (it may read `/version`, as on a real API server, but is forbidden `/api`), and
//! kubectl with a certificate from another CA is refused at the handshake. What a credential may read is RBAC's
//! call from its group: in `ha-master:cluster-admins` (a new cluster's default, bound by the masters' addon) or in
//! `system:masters` it lists kube-system's Secrets; in no group it is refused with the API server's sentence. The
//! sim's addon manager makes that binding only 15 s after the master boots, as a real one does some time after
//! the API server answers: the default credential is served the moment the apply ends all the same, because the
//! founding replica's apply waited for the binding. Emptying the binding's subjects (the documented revocation)
//! refuses it while `system:masters` still reads, and putting the subject back serves it again. A too long or too short `validity` is refused at validate,
//! naming the attribute.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use acceptance_tests::{Client, Sim, Workspace, for_each_client};
use ha_pki::{AdminCertRequest, ClusterCas, issue_admin_cert};

fn provider(sim: &Sim) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    ha = {{ source = "hamaster/ha" }}
  }}
}}

provider "ha" {{
  project                 = "creds"
  zone                    = "europe-west1-b"
  compute_custom_endpoint = "{url}"
  secret_manager_custom_endpoint = "{url}"
  access_token            = "sim-token"
}}

resource "ha_master_cluster" "c" {{
  name                      = "creds"
  etcd_client_source_ranges = ["127.0.0.0/8"]
  deletion_protection       = false # the scenario ends with a destroy
}}

resource "ha_master_replica" "r" {{
  cluster = ha_master_cluster.c.spec
}}

output "ca" {{
  value = ha_master_cluster.c.ca_certificate
}}

output "etcd_version" {{
  value = ha_master_cluster.c.etcd_version
}}

output "vm" {{
  value = ha_master_replica.r.name
}}
"#,
        url = sim.url()
    )
}

/// How each client gets the kubeconfigs out: Terraform's ephemeral resource into a file, OpenTofu's data source
/// into a sensitive output. Three credentials: `admin` with the default group (a new cluster's:
/// `ha-master:cluster-admins`, which the masters bind to cluster-admin), `masters` in `system:masters`, `nogroup`
/// in none.
fn credentials(client: Client, validity: &str) -> String {
    [
        ("admin", ""),
        ("masters", "groups = [\"system:masters\"]"),
        ("nogroup", "groups = []"),
    ]
    .iter()
    .map(|(label, groups)| credential(client, label, validity, groups))
    .collect()
}

fn credential(client: Client, label: &str, validity: &str, groups: &str) -> String {
    match client {
        Client::Terraform => format!(
            r#"
ephemeral "ha_admin_credentials" "{label}" {{
  cluster  = ha_master_cluster.c.spec
  validity = "{validity}"
  {groups}
}}

resource "terraform_data" "{label}" {{
  depends_on = [ha_master_replica.r]
  provisioner "local-exec" {{
    command     = "umask 077 && printf '%s' \"$KUBECONFIG_YAML\" > {label}.kubeconfig"
    environment = {{ KUBECONFIG_YAML = ephemeral.ha_admin_credentials.{label}.kubeconfig }}
  }}
}}
"#
        ),
        Client::OpenTofu => format!(
            r#"
data "ha_admin_credentials" "{label}" {{
  cluster    = ha_master_cluster.c.spec
  validity   = "{validity}"
  {groups}
  depends_on = [ha_master_replica.r]
}}

output "{label}_kubeconfig" {{
  value     = data.ha_admin_credentials.{label}.kubeconfig
  sensitive = true
}}
"#
        ),
    }
}

/// Runs kubectl in `dir`; (succeeded, stdout, stderr).
fn kubectl(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .args(args)
        .args(["--request-timeout=10s"])
        .current_dir(dir)
        .output()
        .expect("kubectl is on PATH");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    eprintln!("$ kubectl {} -> {}", args.join(" "), out.status);
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// A kubeconfig for the same server and CA, with the given user credentials (none: anonymous).
fn kubeconfig_with(dir: &Path, file: &str, server: &str, cert_and_key: Option<(&str, &str)>) {
    let kc = format!("--kubeconfig={file}");
    let steps: Vec<Vec<String>> = vec![
        vec![
            "config".into(),
            "set-cluster".into(),
            "c".into(),
            format!("--server={server}"),
            "--certificate-authority=ca.pem".into(),
            "--embed-certs=true".into(),
        ],
        match cert_and_key {
            Some((cert, key)) => vec![
                "config".into(),
                "set-credentials".into(),
                "u".into(),
                format!("--client-certificate={cert}"),
                format!("--client-key={key}"),
                "--embed-certs=true".into(),
            ],
            None => vec!["config".into(), "set-credentials".into(), "u".into()],
        },
        vec![
            "config".into(),
            "set-context".into(),
            "c".into(),
            "--cluster=c".into(),
            "--user=u".into(),
        ],
        vec!["config".into(), "use-context".into(), "c".into()],
    ];
    for step in steps {
        let mut args: Vec<&str> = vec![kc.as_str()];
        args.extend(step.iter().map(String::as_str));
        let out = Command::new("kubectl")
            .args(&args)
            .current_dir(dir)
            .output()
            .expect("kubectl");
        assert!(out.status.success(), "kubectl {args:?}: {out:?}");
    }
}

#[test]
fn kubectl_reaches_the_api_with_the_minted_credentials_and_nothing_else() {
    for_each_client(|client| {
        // Bounds first: refused at validate, at the attribute, before anything exists.
        let bad = Workspace::new(client, "creds-bad");
        let sim_for_config = Sim::start_with_args(
            &format!("creds-{client}"),
            "test",
            &["--addon-delay-secs", &ADDON_DELAY.as_secs().to_string()],
        );
        bad.write_main_tf(&(provider(&sim_for_config) + &credentials(client, "1m")));
        bad.init();
        let refused = bad.run(&["validate", "-no-color"]);
        refused.assert_failure();
        // Clients wrap the detail: compare with single spaces.
        let text = refused
            .combined()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            text.contains(r#"validity = "1m""#) && text.contains("between 5m and 24h"),
            "[{client}] a 1m validity must be refused naming the attribute:\n{text}"
        );

        let sim = sim_for_config;
        let ws = Workspace::new(client, "creds").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&(provider(&sim) + &credentials(client, "10m")));
        ws.init();
        ws.apply();
        // A new cluster that sets no versions runs the etcd its Kubernetes release calls for: 3.5, whose pinned
        // image ha-sim runs on its etcd 3.5 binary.
        let outputs = acceptance_tests::walk::outputs(&ws);
        assert_eq!(outputs["etcd_version"]["value"], "3.5", "[{client}]");
        let vm = outputs["vm"]["value"].as_str().unwrap().to_string();
        let status = sim.ssh(&vm, &["etcdctl", "endpoint", "status", "-w", "json"]);
        let status: serde_json::Value = serde_json::from_str(status.trim()).unwrap();
        let running = status[0]["Status"]["version"].as_str().unwrap_or_default();
        assert!(
            running.starts_with("3.5."),
            "[{client}] a new cluster's etcd runs 3.5, not {running}"
        );
        let dir = ws.path();
        if client == Client::OpenTofu {
            for label in ["admin", "masters", "nogroup"] {
                let out = ws.run(&["output", "-raw", &format!("{label}_kubeconfig")]);
                out.assert_success();
                ws.write_file(&format!("{label}.kubeconfig"), &out.stdout);
            }
        }
        let kubeconfig = ws.read_file("admin.kubeconfig");
        assert!(
            kubeconfig.contains("client-key-data"),
            "[{client}] {kubeconfig}"
        );
        // A new cluster's default credential is in the group the masters bind, which can be revoked.
        assert_eq!(
            subject_of(&kubeconfig),
            "O=ha-master:cluster-admins, CN=kubernetes-admin",
            "[{client}]"
        );
        // Its first use, right after the apply, well inside the addon manager's delay: served (the apply waited
        // for the binding), where without the wait RBAC would refuse it.
        let secrets = ["get", "--raw", "/api/v1/namespaces/kube-system/secrets"];
        let (ok, stdout, stderr) = kubectl(
            dir,
            &[&["--kubeconfig=admin.kubeconfig"][..], &secrets].concat(),
        );
        assert!(
            ok && stdout.contains("SecretList"),
            "[{client}] the default credential is served when the apply ends: {stdout}{stderr}"
        );

        // The minted credential reaches the API server, which reports the version its manifest runs.
        let (ok, stdout, stderr) = kubectl(
            dir,
            &["--kubeconfig=admin.kubeconfig", "version", "-o", "json"],
        );
        assert!(
            ok,
            "[{client}] kubectl version with the admin kubeconfig: {stderr}"
        );
        let version: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            version["serverVersion"]["gitVersion"],
            new_cluster_git_version(),
            "[{client}] {stdout}"
        );
        let (ok, stdout, stderr) = kubectl(
            dir,
            &["--kubeconfig=admin.kubeconfig", "get", "--raw", "/api"],
        );
        assert!(
            ok && stdout.contains("APIVersions"),
            "[{client}] /api as admin: {stdout}{stderr}"
        );

        // What each may read is RBAC's call, from the certificate's group: system:masters and the group the
        // masters' addon binds to cluster-admin may list Secrets; a credential in no group may not.
        for label in ["admin", "masters"] {
            let kubeconfig = format!("--kubeconfig={label}.kubeconfig");
            let (ok, stdout, stderr) =
                kubectl(dir, &[&[kubeconfig.as_str()][..], &secrets].concat());
            assert!(
                ok && stdout.contains("SecretList"),
                "[{client}] {label} lists kube-system's Secrets: {stdout}{stderr}"
            );
        }
        let (ok, stdout, stderr) = kubectl(
            dir,
            &[&["--kubeconfig=nogroup.kubeconfig"][..], &secrets].concat(),
        );
        assert!(
            !ok && stderr.contains(r#"User "kubernetes-admin" cannot list resource "secrets""#),
            "[{client}] a credential in no group is refused by RBAC: {stdout}{stderr}"
        );

        // The same server and CA without a client certificate. kubectl insists on some credential (with none it
        // prompts for a password), so it sends a bearer token the server does not know: refused, 401.
        let ca =
            serde_json::from_str::<serde_json::Value>(&ws.run(&["output", "-json", "ca"]).stdout)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string();
        ws.write_file("ca.pem", &ca);
        let server = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: "))
            .expect("a server line")
            .to_string();
        kubeconfig_with(dir, "nocert.kubeconfig", &server, None);
        for args in [&["version", "-o", "json"][..], &["get", "--raw", "/api"]] {
            let mut all = vec![
                "--kubeconfig=nocert.kubeconfig",
                "--token=not-a-token-of-this-cluster",
            ];
            all.extend(args);
            let (ok, stdout, stderr) = kubectl(dir, &all);
            assert!(
                // kubectl's words for a 401 are "You must be logged in to the server" (version), "Unauthorized" (raw).
                !ok && !stdout.contains("serverVersion")
                    && (stderr.contains("must be logged in") || stderr.contains("Unauthorized")),
                "[{client}] kubectl {args:?} without a client certificate must be refused: {stdout}{stderr}"
            );
        }
        // With no credential at all (curl, which does not insist), a client is anonymous, as on a real API
        // server: it may read /version (RBAC's system:public-info-viewer) but is forbidden /api.
        let curl = |path: &str| {
            let out = Command::new("curl")
                .args(["-sS", "--cacert", "ca.pem", "-w", "\n%{http_code}"])
                .arg(format!("{server}{path}"))
                .current_dir(dir)
                .output()
                .expect("curl is on PATH");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let version = curl("/version");
        assert!(
            version.ends_with("\n200") && version.contains(&new_cluster_git_version()),
            "[{client}] {version}"
        );
        let api = curl("/api");
        assert!(
            api.ends_with("\n403") && api.contains("system:anonymous"),
            "[{client}] {api}"
        );

        // Revocation, as docs/guides/kubectl.md says it: empty the binding's subjects (with the system:masters
        // credential) and the default credential is refused while system:masters still reads; put the subject
        // back and it is served again. The addon manager never writes the binding back (EnsureExists).
        let masters = ws.read_file("masters.kubeconfig");
        ws.write_file(
            "masters.crt",
            &kubeconfig_data(&masters, "client-certificate-data"),
        );
        ws.write_file("masters.key", &kubeconfig_data(&masters, "client-key-data"));
        let patch = |ops: &str| {
            let out = Command::new("curl")
                .args([
                    "-sS",
                    "--cacert",
                    "ca.pem",
                    "--cert",
                    "masters.crt",
                    "--key",
                    "masters.key",
                ])
                .args([
                    "-X",
                    "PATCH",
                    "-H",
                    "Content-Type: application/json-patch+json",
                ])
                .args(["--data", ops, "-w", "\n%{http_code}"])
                .arg(format!("{server}{BINDING}"))
                .current_dir(dir)
                .output()
                .expect("curl is on PATH");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let revoked = patch(r#"[{"op":"remove","path":"/subjects"}]"#);
        assert!(revoked.ends_with("\n200"), "[{client}] revoking: {revoked}");
        let lists = |label: &str| {
            let kubeconfig = format!("--kubeconfig={label}.kubeconfig");
            kubectl(dir, &[&[kubeconfig.as_str()][..], &secrets].concat())
        };
        let (ok, stdout, stderr) = lists("admin");
        assert!(
            !ok && stderr.contains(r#"User "kubernetes-admin" cannot list resource "secrets""#),
            "[{client}] the default credential is refused once its group's binding is emptied: {stdout}{stderr}"
        );
        let (ok, _, stderr) = lists("masters");
        assert!(ok, "[{client}] system:masters is not a binding: {stderr}");
        // Still refused a while later: nothing writes the subjects back.
        std::thread::sleep(Duration::from_secs(2));
        assert!(!lists("admin").0, "[{client}] the revocation stays");
        let granted = patch(
            r#"[{"op":"add","path":"/subjects","value":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"ha-master:cluster-admins"}]}]"#,
        );
        assert!(
            granted.ends_with("\n200"),
            "[{client}] granting again: {granted}"
        );
        let (ok, stdout, stderr) = lists("admin");
        assert!(ok, "[{client}] granted again: {stdout}{stderr}");

        // A certificate from another CA (another cluster's admin) fails the TLS handshake.
        let other = ClusterCas::generate("other").unwrap();
        let foreign = issue_admin_cert(
            &other.cluster_ca,
            &AdminCertRequest {
                user: "kubernetes-admin".into(),
                groups: vec!["system:masters".into()],
                validity: Duration::from_secs(600),
            },
        )
        .unwrap();
        ws.write_file("foreign.crt", &foreign.cert.cert_pem);
        ws.write_file("foreign.key", &foreign.cert.key_pem);
        kubeconfig_with(
            dir,
            "foreign.kubeconfig",
            &server,
            Some(("foreign.crt", "foreign.key")),
        );
        let (ok, stdout, stderr) = kubectl(
            dir,
            &["--kubeconfig=foreign.kubeconfig", "version", "-o", "json"],
        );
        assert!(
            !ok && !stdout.contains("serverVersion") && stderr.contains("tls"),
            "[{client}] a certificate from another CA must be refused: {stdout}{stderr}"
        );

        // Terraform's ephemeral credential is nowhere in the state.
        if client == Client::Terraform {
            let state = ws.read_file("terraform.tfstate");
            for field in ["client-certificate-data: ", "client-key-data: "] {
                let data = kubeconfig
                    .lines()
                    .find_map(|l| l.trim().strip_prefix(field))
                    .unwrap_or_else(|| panic!("{field} in the kubeconfig"));
                assert!(
                    !state.contains(data),
                    "[{client}] the ephemeral {field} is in the state"
                );
            }
        }
        ws.destroy();
    });
}

/// How long after boot the sim's addon manager makes the masters' bindings: longer than an apply's end and the
/// checks before the first `kubectl` take, so a credential used without the founding replica's wait is refused.
const ADDON_DELAY: Duration = Duration::from_secs(15);

/// The binding admin credentials in `ha-master:cluster-admins` act through.
const BINDING: &str =
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/ha-master:cluster-admins";

/// A kubeconfig's `field` (`client-certificate-data`, `client-key-data`), decoded.
fn kubeconfig_data(kubeconfig: &str, field: &str) -> String {
    use base64::Engine;
    let data = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{field}: ")))
        .unwrap_or_else(|| panic!("{field} in the kubeconfig"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64 kubeconfig data");
    String::from_utf8(bytes).expect("PEM text")
}

/// The subject of the client certificate in a kubeconfig, as `O=..., CN=...`.
fn subject_of(kubeconfig: &str) -> String {
    let pem = kubeconfig_data(kubeconfig, "client-certificate-data");
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("a PEM certificate");
    block
        .parse_x509()
        .expect("a certificate")
        .subject()
        .to_string()
}

/// What a new cluster's API servers report: the provider's default release for new clusters.
fn new_cluster_git_version() -> String {
    format!("v{}", ha_domain::kubernetes_version::DEFAULT_FOR_NEW)
}
