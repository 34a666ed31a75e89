//! A rotation of the cluster's CAs (issue #31), under both clients, on three replicas against ha-sim: each stage is
//! a roll of every replica measured as the other rolls are (probes at the static IP verified under the cluster's
//! `ca_certificate` as it was before the apply, a writer through etcd, voters sampled), and each master's CA
//! bundles and certificates are read from its disk after it.
//!
//! - `"switched"` before `"started"` is refused at plan, naming the attribute.
//! - `"started"`: `ca_certificate` becomes the old CA and a new one; every master trusts both CAs of each kind
//!   (cluster, etcd peer, etcd client) and still presents certificates the old ones issued.
//! - A stage change while a master still runs the stage before is refused at apply before anything changes:
//!   the cluster alone (`-target`) back to no rotation, then `"started"`, names the masters behind.
//! - `"switched"`: every master presents certificates the next CAs issued and trusts both; an admin credential
//!   is issued by the next cluster CA.
//! - Removed: every master trusts the new CAs alone; `ca_certificate` is the new CA alone; an admin credential the
//!   old CA issued is refused by every master, one from the new CA accepted; the state holds as many private keys
//!   as before.
//! - An admin credential from the old CA is presented to every master's API server in turn (a call every 100 ms) all through the
//!   `started` and `switched` rolls, and one from the new CA through the last: none is refused.
//! - Every key written before is there after, and each plan after an apply is empty (`check`).
//!
//! The second scenario rotates a cluster CA its user brought to a next one the user brings
//! (`a_brought_ca_rotates_to_the_next_ca_its_user_brings`), measured the same way.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use acceptance_tests::api_calls::{Credential, TLS_REFUSED, answer, api_ips, status_of};
use acceptance_tests::probe::{apply_measured, apply_measured_with, assert_rolled_cleanly};
use acceptance_tests::walk::{
    THREE_ZONES, assert_private_keys_only_in_the_cluster, check, edit_config, outputs, set_vars,
    walk_config_in, write_keys,
};
use acceptance_tests::{Client, Sim, Workspace, for_each_client};

/// Where a master keeps each kind's CA bundle and a certificate that kind issued it, under the VM's `rootfs/`.
const KINDS: [(&str, &str, &str); 3] = [
    (
        "cluster CA",
        "etc/srv/kubernetes/pki/ca.crt",
        "etc/srv/kubernetes/pki/apiserver.crt",
    ),
    (
        "etcd peer CA",
        "etc/srv/kubernetes/etcd-ca.crt",
        "etc/srv/kubernetes/etcd-peer.crt",
    ),
    (
        "etcd client CA",
        "etc/srv/kubernetes/pki/etcd-apiserver-ca.crt",
        "etc/srv/kubernetes/pki/etcd-apiserver-server.crt",
    ),
];

/// The cluster's CA certificate attributes, in `KINDS`' order (each a bundle while the CAs rotate).
fn ca_outputs(ws: &Workspace) -> [String; 3] {
    let out = outputs(ws);
    ["ca", "etcd_peer_ca", "etcd_client_ca"].map(|o| out[o]["value"].as_str().unwrap().to_string())
}

/// The certificates of each kind's bundle.
fn split(bundles: &[String; 3]) -> [Vec<String>; 3] {
    bundles
        .clone()
        .map(|b| ha_pki::certificates_in(&b).unwrap())
}

/// Every master trusts exactly `cas` of each kind, and presents a certificate `issuer` of that kind issued.
#[track_caller]
fn every_master_runs(
    client: Client,
    sim: &Sim,
    vms: &[String],
    issuer: [&str; 3],
    cas: [&[String]; 3],
) {
    for vm in vms {
        for (i, (kind, bundle_file, leaf_file)) in KINDS.iter().enumerate() {
            let bundle = sim.ssh(vm, &["cat", &format!("rootfs/{bundle_file}")]);
            let trusted: BTreeSet<String> = ha_pki::certificate_fingerprints(&bundle)
                .unwrap_or_else(|e| panic!("{vm}'s {kind} bundle: {e}"))
                .into_iter()
                .collect();
            let want: BTreeSet<String> = cas[i]
                .iter()
                .map(|c| ha_pki::sha256_fingerprint(c).unwrap())
                .collect();
            assert_eq!(trusted, want, "[{client}] the {kind}s {vm} trusts");
            let leaf = sim.ssh(vm, &["cat", &format!("rootfs/{leaf_file}")]);
            assert!(
                ha_pki::issued_by(&leaf, issuer[i]).unwrap(),
                "[{client}] {vm}'s {leaf_file} is not issued by the {kind} of the stage"
            );
        }
    }
}

/// An admin credential (`kubernetes-admin` in `ha-master:cluster-admins`, ten minutes) issued by the cluster CA
/// `ca_cert` with the key the cluster's secret holds under `key_field` (`ca_key`, or `next_ca_key` while the CAs
/// rotate), as `ha_admin_credentials` issues it: its certificate and key written to files named after `label`.
fn admin_credential(
    ws: &Workspace,
    sim: &Sim,
    ca_cert: &str,
    key_field: &str,
    label: &str,
) -> (PathBuf, PathBuf) {
    let keys = acceptance_tests::walk::cluster_keys(sim);
    let ca = ha_pki::CertKey {
        cert_pem: ca_cert.to_string(),
        key_pem: keys[key_field].as_str().unwrap().to_string(),
    };
    let admin = ha_pki::issue_admin_cert(
        &ca,
        &ha_pki::AdminCertRequest {
            user: "kubernetes-admin".into(),
            groups: vec!["ha-master:cluster-admins".into()],
            validity: std::time::Duration::from_secs(600),
        },
    )
    .unwrap();
    let (cert_file, key_file) = (
        ws.path().join(format!("{label}.crt")),
        ws.path().join(format!("{label}.key")),
    );
    std::fs::write(&cert_file, &admin.cert.cert_pem).unwrap();
    std::fs::write(&key_file, &admin.cert.key_pem).unwrap();
    (cert_file, key_file)
}

/// The cluster's `ca_certificate` as it is now, written where curl reads it.
fn ca_file(ws: &Workspace, label: &str) -> PathBuf {
    let file = ws.path().join(format!("ca-{label}.pem"));
    std::fs::write(&file, &ca_outputs(ws)[0]).unwrap();
    file
}

/// Every master's API server answers `want` to the credential in `cert`/`key`, its certificate verified under
/// `ca`.
#[track_caller]
fn every_master_answers(
    client: Client,
    sim: &Sim,
    vms: &[String],
    ca: &Path,
    (cert, key): (&Path, &Path),
    want: &str,
) {
    let got: Vec<String> = api_ips(sim, vms)
        .iter()
        .map(|(vm, ip)| {
            format!(
                "{vm}: {}",
                status_of(ca, ip, Credential::Certificate { cert, key })
            )
        })
        .collect();
    let expected: Vec<String> = vms.iter().map(|vm| format!("{vm}: {want}")).collect();
    assert_eq!(
        got, expected,
        "[{client}] each API server's answer to an admin credential"
    );
}

/// Applies (measured as every roll is) while presenting the admin credential in `cert`/`key` to every master's API
/// server in turn, one call every 100 ms, verifying each under `ca`; asserts that it was authenticated and never
/// refused.
fn apply_presenting(
    client: Client,
    ws: &Workspace,
    sim: &Sim,
    vms: &[String],
    stage: &str,
    ca: &Path,
    (cert, key): (&Path, &Path),
) -> acceptance_tests::probe::Measured {
    let ips = api_ips(sim, vms);
    let (authenticated, refused) = (Mutex::new(0usize), Mutex::new(Vec::new()));
    let m = apply_measured_with(ws, sim, stage, |stop: &AtomicBool| {
        // One call every 100 ms, taking the masters in turn (as the service-account rotation does).
        for (vm, ip) in ips.iter().cycle() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let (status, said) = answer(ca, ip, Credential::Certificate { cert, key });
            match status.as_str() {
                "200" => *authenticated.lock().unwrap() += 1,
                "401" | TLS_REFUSED => refused
                    .lock()
                    .unwrap()
                    .push(format!("{vm}: {status} ({said})")),
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let (authenticated, refused) = (
        authenticated.into_inner().unwrap(),
        refused.into_inner().unwrap(),
    );
    assert!(
        refused.is_empty() && authenticated > 0,
        "[{client}] an admin credential during the roll to {stage}: {authenticated} authenticated, refused: \
         {refused:?}"
    );
    m
}

fn set_stage(ws: &Workspace, stage: Option<&str>) {
    let mut vars = Vec::new();
    if let Some(s) = stage {
        vars.push(("ca_rotation", s));
    }
    set_vars(ws, &THREE_ZONES, &vars);
}

fn config(sim: &Sim) -> String {
    edit_config(
        walk_config_in(sim, THREE_ZONES[0]),
        &[
            (
                "variable \"zones\" {",
                "variable \"ca_rotation\" {\n  type    = string\n  default = null\n}\n\nvariable \"zones\" {",
            ),
            (
                "  kubernetes_version        = var.kubernetes_version\n",
                "  kubernetes_version        = var.kubernetes_version\n  ca_rotation               = var.ca_rotation\n",
            ),
            (
                "output \"ip\" {",
                "output \"etcd_peer_ca\" {\n  value = ha_master_cluster.c.etcd_peer_ca_certificate\n}\n\n\
                 output \"etcd_client_ca\" {\n  value = ha_master_cluster.c.etcd_client_ca_certificate\n}\n\n\
                 output \"ip\" {",
            ),
        ],
    )
}

#[test]
fn the_cas_rotate_in_stages_with_no_certificate_refused_and_no_key_lost() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("ca-rotation-{client}"));
        let ws = Workspace::new(client, "ca-rotation").with_timeout(Duration::from_secs(600));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_stage(&ws, None);
        ws.apply();
        let vms: Vec<String> = acceptance_tests::walk::replicas_by_zone(&ws)
            .into_values()
            .collect();
        write_keys(&sim, &vms[0]);
        let old = split(&ca_outputs(&ws));
        assert!(
            old.iter().all(|c| c.len() == 1),
            "[{client}] one CA of each kind"
        );
        let old_cas: [&str; 3] = [&old[0][0], &old[1][0], &old[2][0]];
        every_master_runs(client, &sim, &vms, old_cas, [&old[0], &old[1], &old[2]]);
        let ca_old = ca_file(&ws, "old");
        let (cert, key) = admin_credential(&ws, &sim, old_cas[0], "ca_key", "admin-old");
        let admin_old = (cert.as_path(), key.as_path());
        every_master_answers(client, &sim, &vms, &ca_old, admin_old, "200");
        let private_keys =
            acceptance_tests::walk::private_keys_in(&ws.read_file("terraform.tfstate"));

        // Skipping a stage: refused at plan, nothing made.
        set_stage(&ws, Some("switched"));
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("ca_rotation cannot go to \"switched\" before \"started\"");

        // Started: next CAs, trusted everywhere beside the old ones, which still issue every certificate.
        set_stage(&ws, Some("started"));
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("changes its CAs");
        let m = apply_presenting(client, &ws, &sim, &vms, "started", &ca_old, admin_old);
        assert_rolled_cleanly(client, &sim, &vms, "started", &m);
        let both = split(&ca_outputs(&ws));
        for (kind, (now, before)) in both.iter().zip(&old).enumerate() {
            assert_eq!(
                now.len(),
                2,
                "[{client}] kind {kind}: the old CA and a next one"
            );
            assert_eq!(
                now[0], before[0],
                "[{client}] kind {kind}: the old CA first"
            );
        }
        every_master_runs(client, &sim, &vms, old_cas, [&both[0], &both[1], &both[2]]);
        check(client, &ws, &sim, 3);

        // Back to no rotation, the cluster alone: its masters still trust both, so moving on is refused.
        set_stage(&ws, None);
        ws.apply_target("ha_master_cluster.c");
        set_stage(&ws, Some("started"));
        let refused = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        refused.assert_failure();
        refused.assert_contains(
            "does not run the CAs of the cluster's stage yet (no rotation under way)",
        );
        every_master_runs(client, &sim, &vms, old_cas, [&both[0], &both[1], &both[2]]);
        // Finishing the stage the cluster is at rolls them back to the old CAs alone; `started` again makes others.
        set_stage(&ws, None);
        let m = apply_measured(&ws, &sim, "dropped");
        assert_rolled_cleanly(client, &sim, &vms, "dropped", &m);
        every_master_runs(client, &sim, &vms, old_cas, [&old[0], &old[1], &old[2]]);
        set_stage(&ws, Some("started"));
        let m = apply_measured(&ws, &sim, "started-again");
        assert_rolled_cleanly(client, &sim, &vms, "started-again", &m);
        let both = split(&ca_outputs(&ws));
        let next_cas: [&str; 3] = [&both[0][1], &both[1][1], &both[2][1]];
        every_master_runs(client, &sim, &vms, old_cas, [&both[0], &both[1], &both[2]]);

        // Switched: the next CAs issue, both trusted. While masters of both stages serve side by side, each accepts
        // the old CA's credential, and the probes verify every API server under the bundle.
        let ca_both = ca_file(&ws, "both");
        set_stage(&ws, Some("switched"));
        let m = apply_presenting(client, &ws, &sim, &vms, "switched", &ca_both, admin_old);
        assert_rolled_cleanly(client, &sim, &vms, "switched", &m);
        every_master_runs(client, &sim, &vms, next_cas, [&both[0], &both[1], &both[2]]);
        let (cert, key) = admin_credential(&ws, &sim, next_cas[0], "next_ca_key", "admin-new");
        let admin_new = (cert.as_path(), key.as_path());
        every_master_answers(client, &sim, &vms, &ca_both, admin_new, "200");
        every_master_answers(client, &sim, &vms, &ca_both, admin_old, "200");
        check(client, &ws, &sim, 3);

        // Done: the next CAs are the CAs, the old ones trusted nowhere and gone from state.
        set_stage(&ws, None);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_contains("refused from then on");
        let m = apply_presenting(client, &ws, &sim, &vms, "done", &ca_both, admin_new);
        assert_rolled_cleanly(client, &sim, &vms, "done", &m);
        let new = split(&ca_outputs(&ws));
        for (kind, now) in new.iter().enumerate() {
            assert_eq!(
                now,
                &vec![both[kind][1].clone()],
                "[{client}] kind {kind}: the new CA alone"
            );
        }
        every_master_runs(client, &sim, &vms, next_cas, [&new[0], &new[1], &new[2]]);
        let ca_new = ca_file(&ws, "new");
        every_master_answers(client, &sim, &vms, &ca_new, admin_new, "200");
        every_master_answers(client, &sim, &vms, &ca_new, admin_old, TLS_REFUSED);
        check(client, &ws, &sim, 3);
        let state = ws.read_file("terraform.tfstate");
        assert!(
            !state.contains(old[0][0].lines().nth(1).unwrap()),
            "[{client}] the old cluster CA is gone from state"
        );
        assert_eq!(
            acceptance_tests::walk::private_keys_in(&state),
            private_keys,
            "[{client}] as many private keys in state as before the rotation"
        );
        assert_private_keys_only_in_the_cluster(client, &ws, private_keys);
        // The admin credential issued by the next CA in the secret during the rotation is issued by the CA now.
        let keys = acceptance_tests::walk::cluster_keys(&sim);
        assert!(
            keys.get("next_ca_key").is_none(),
            "[{client}] no next CA key left in the secret"
        );
    });
}

/// The cluster with a CA of its user's own (`corp.crt`, made with openssl), and the variables a rotation of it sets:
/// the CA's files, the next CA's, and the stage. Its `ca` output, which the probes and `check` verify the API
/// under, is what clients trust: a brought CA's `ca_certificate` stays the configured CA through a rotation, so
/// the bundle is the spec's (the same as every admin credential's `ca_certificate_pem`).
fn brought_config(sim: &Sim) -> String {
    edit_config(
        config(sim),
        &[
            (
                "output \"ca\" {\n  value = ha_master_cluster.c.ca_certificate\n}",
                "output \"ca\" {\n  value     = ha_master_cluster.c.spec.ca_certificate\n  sensitive = true\n}",
            ),
            (
                "variable \"zones\" {",
                "variable \"ca\" {\n  type = string\n}\n\n\
                 variable \"ca_key\" {\n  type    = string\n  default = null\n}\n\n\
                 variable \"next_ca\" {\n  type    = string\n  default = null\n}\n\n\
                 variable \"next_ca_key\" {\n  type    = string\n  default = null\n}\n\n\
                 variable \"zones\" {",
            ),
            (
                "  ca_rotation               = var.ca_rotation\n",
                "  ca_rotation               = var.ca_rotation\n\
                 \x20 ca_certificate            = file(var.ca)\n\
                 \x20 ca_private_key_wo         = var.ca_key == null ? null : file(var.ca_key)\n\
                 \x20 next_ca_certificate       = var.next_ca == null ? null : file(var.next_ca)\n\
                 \x20 next_ca_private_key_wo    = var.next_ca_key == null ? null : file(var.next_ca_key)\n",
            ),
        ],
    )
}

/// The brought rotation's variables: the stage, the CA named by `ca` (its key given when `with_key`), and the next
/// CA named by `next` (its key given when the flag is set).
fn set_brought(
    ws: &Workspace,
    stage: Option<&str>,
    (ca, with_key): (&str, bool),
    next: Option<(&str, bool)>,
) {
    let (ca_file, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
    let mut vars = vec![("ca", ca_file.as_str())];
    if with_key {
        vars.push(("ca_key", &ca_key));
    }
    let next_files = next.map(|(n, with_key)| (format!("{n}.crt"), format!("{n}.key"), with_key));
    if let Some((cert, key, with_key)) = &next_files {
        vars.push(("next_ca", cert));
        if *with_key {
            vars.push(("next_ca_key", key));
        }
    }
    if let Some(s) = stage {
        vars.push(("ca_rotation", s));
    }
    set_vars(ws, &THREE_ZONES, &vars);
}

/// A cluster CA its user brought rotates to a next one the user brings (`next_ca_certificate` with the write-only
/// `next_ca_private_key_wo`), under Terraform (OpenTofu 1.6 has no write-only attributes, and refuses the key at
/// validate, naming it). The etcd CAs rotate with it as the provider's always do. `ca_certificate` stays the
/// configured CA until the end, the masters trusting both; the next CA's key is given once, in the apply that
/// starts the rotation, and never lands in a file of the workspace; the end names the next CA as `ca_certificate`
/// with no key given (the secret moves it). Each stage is a measured roll with an admin credential presented all
/// through, and every key written before is there after.
#[test]
fn a_brought_ca_rotates_to_the_next_ca_its_user_brings() {
    use acceptance_tests::openssl::{key_material, openssl_ca};
    for_each_client(|client| {
        let sim = Sim::start(&format!("brought-ca-rotation-{client}"));
        let ws =
            Workspace::new(client, "brought-ca-rotation").with_timeout(Duration::from_secs(600));
        let corp_key = openssl_ca(&ws, "corp");
        let next_key = openssl_ca(&ws, "corp2");
        let (corp, corp2) = (ws.read_file("corp.crt"), ws.read_file("corp2.crt"));
        ws.write_main_tf(&brought_config(&sim));
        ws.init();
        if client == Client::OpenTofu {
            set_brought(&ws, Some("started"), ("corp", false), Some(("corp2", true)));
            let refused = ws.run(&["plan", "-input=false", "-no-color"]);
            refused.assert_failure();
            refused.assert_contains("`next_ca_private_key_wo` is write-only");
            assert!(
                sim.names("instances").is_empty(),
                "[{client}] nothing was made"
            );
            return;
        }
        set_brought(&ws, None, ("corp", true), None);
        ws.apply();
        let vms: Vec<String> = acceptance_tests::walk::replicas_by_zone(&ws)
            .into_values()
            .collect();
        write_keys(&sim, &vms[0]);
        let old = split(&ca_outputs(&ws));
        assert_eq!(old[0], vec![corp.clone()], "[{client}] the brought CA");
        let old_cas: [&str; 3] = [&old[0][0], &old[1][0], &old[2][0]];
        let ca_old = ca_file(&ws, "old");
        let (cert, key) = admin_credential(&ws, &sim, &corp, "ca_key", "admin-old");
        let admin_old = (cert.as_path(), key.as_path());

        // The provider cannot make the next CA of one it did not make: refused at plan, naming the attribute.
        set_brought(&ws, Some("started"), ("corp", false), None);
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("Cluster walk's CA rotates to a CA you bring");

        // Started: the next CA brought, its key given this once; every master trusts both of each kind.
        set_brought(&ws, Some("started"), ("corp", false), Some(("corp2", true)));
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_success()
            .assert_contains("changes its CAs");
        let m = apply_presenting(client, &ws, &sim, &vms, "started", &ca_old, admin_old);
        assert_rolled_cleanly(client, &sim, &vms, "started", &m);
        let now = split(&ca_outputs(&ws));
        let cluster_both = vec![corp.clone(), corp2.clone()];
        assert_eq!(now[0], cluster_both, "[{client}] the bundle clients trust");
        assert_eq!(
            ws.state_values("ha_master_cluster.c")["ca_certificate"],
            serde_json::json!(corp),
            "[{client}] ca_certificate stays the configured CA"
        );
        every_master_runs(
            client,
            &sim,
            &vms,
            old_cas,
            [&cluster_both, &now[1], &now[2]],
        );
        check(client, &ws, &sim, 3);

        // Switched, the next key no longer given: the secret has it, and the next CAs issue.
        let ca_both = ws.path().join("ca-both.pem");
        std::fs::write(&ca_both, ha_pki::bundle_of([corp.as_str(), corp2.as_str()])).unwrap();
        set_brought(
            &ws,
            Some("switched"),
            ("corp", false),
            Some(("corp2", false)),
        );
        let m = apply_presenting(client, &ws, &sim, &vms, "switched", &ca_both, admin_old);
        assert_rolled_cleanly(client, &sim, &vms, "switched", &m);
        let next_cas: [&str; 3] = [&corp2, &now[1][1], &now[2][1]];
        every_master_runs(
            client,
            &sim,
            &vms,
            next_cas,
            [&cluster_both, &now[1], &now[2]],
        );
        let (cert, key) = admin_credential(&ws, &sim, &corp2, "next_ca_key", "admin-new");
        let admin_new = (cert.as_path(), key.as_path());
        every_master_answers(client, &sim, &vms, &ca_both, admin_new, "200");
        check(client, &ws, &sim, 3);

        // The end must name the next CA as the CA: refused at plan while `ca_certificate` is the old one.
        set_brought(&ws, None, ("corp", false), None);
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("Cluster walk's rotation ends with the next CA as its CA");

        // Done: the next CA is the CA, named so in the configuration, with no key given.
        set_brought(&ws, None, ("corp2", false), None);
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_success()
            .assert_contains("refused from then on");
        let m = apply_presenting(client, &ws, &sim, &vms, "done", &ca_both, admin_new);
        assert_rolled_cleanly(client, &sim, &vms, "done", &m);
        let new = split(&ca_outputs(&ws));
        let want = [
            vec![corp2.clone()],
            vec![now[1][1].clone()],
            vec![now[2][1].clone()],
        ];
        assert_eq!(new, want, "[{client}] the new CAs alone");
        every_master_runs(client, &sim, &vms, next_cas, [&new[0], &new[1], &new[2]]);
        let ca_new = ca_file(&ws, "new");
        every_master_answers(client, &sim, &vms, &ca_new, admin_new, "200");
        every_master_answers(client, &sim, &vms, &ca_new, admin_old, TLS_REFUSED);
        check(client, &ws, &sim, 3);
        let keys = acceptance_tests::walk::cluster_keys(&sim);
        assert!(
            ha_pki::is_key_of(&corp2, keys["ca_key"].as_str().unwrap()),
            "[{client}] the secret's CA key is the new CA's"
        );
        assert!(
            keys.get("next_ca_key").is_none(),
            "[{client}] no next CA key left in the secret"
        );
        // The state keeps the three keys the provider made (the etcd CAs', the service account's), neither
        // brought key, and no file of the workspace holds one but the user's own.
        assert_private_keys_only_in_the_cluster(client, &ws, 3);
        for (key, file) in [(&corp_key, "corp.key"), (&next_key, "corp2.key")] {
            let holding = ws.files_holding(key_material(key), &[file]);
            assert!(
                holding.is_empty(),
                "[{client}] {file}'s key is in {holding:?}"
            );
        }
    });
}
