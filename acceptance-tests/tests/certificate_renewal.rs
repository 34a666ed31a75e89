//! Day 2, issue #10: certificates that renew themselves. A cluster issues its replicas' certificates with a short
//! `certificate_validity`; while they are fresh, plan only warns that they expire soon. Once they enter the
//! `certificate_renew_before` window, plan shows each replica rolled to renew them, and the apply rolls them one at
//! a time (a prober at the static IP and a writer running): the new certificates verify against the same CAs
//! (checked with openssl, an independent client), name the static IP and the replica's internal IP and never its
//! ephemeral IP, expire later, and the etcd members are the same. The next plan is empty.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use acceptance_tests::probe::{apply_measured, assert_rolled_cleanly};
use acceptance_tests::walk::{THREE_ZONES, check, outputs, set_zones, walk_config_in, write_keys};
use acceptance_tests::{Sim, Workspace, for_each_client};
use serde_json::Value;

/// Certificates live 4 minutes and are renewed in their last 150 seconds: due 90 seconds after they are issued.
const VALIDITY: &str = "4m";
const RENEW_BEFORE: &str = "150s";
const DUE_AFTER: Duration = Duration::from_secs(90);

fn config(sim: &Sim) -> String {
    let base = walk_config_in(sim, THREE_ZONES[0]);
    let lifetimes = format!(
        "  multizone                 = true\n  certificate_validity      = \"{VALIDITY}\"\n  certificate_renew_before  = \"{RENEW_BEFORE}\"\n"
    );
    let edits = [
        ("  multizone                 = true\n", lifetimes.as_str()),
        (
            "output \"ca\" {",
            "output \"certs\" {\n  value = { for z, r in ha_master_replica.r : r.name => {\n    api         = r.certificate_sha256[\"api_server\"]\n    expires     = r.certificates_expire_at\n    internal_ip = r.internal_ip\n    member      = r.etcd_member_id\n  } }\n}\n\noutput \"ca\" {",
        ),
    ];
    acceptance_tests::walk::edit_config(base, &edits)
}

/// Each replica's certificate facts, by VM name.
fn certs(ws: &Workspace) -> BTreeMap<String, Value> {
    outputs(ws)["certs"]["value"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn openssl(args: &[&str], input: &std::path::Path) -> String {
    let out = Command::new("openssl")
        .args(args)
        .arg(input)
        .output()
        .expect("openssl runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn certificates_in_the_renewal_window_are_renewed_by_a_roll_under_the_same_cas() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("cert-renewal-{client}"));
        let ws = Workspace::new(client, "cert-renewal").with_timeout(Duration::from_secs(600));
        ws.write_main_tf(&config(&sim));
        ws.init();
        set_zones(&ws, &THREE_ZONES);
        ws.apply();
        let issued_by = Instant::now();
        let before = certs(&ws);
        let vms: Vec<String> = before.keys().cloned().collect();
        write_keys(&sim, &vms[0]);

        // Fresh: nothing to do, but plan says when they expire (within 30 days).
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("No changes");
        plan.assert_contains(&format!("The certificates of replica {} expire at", vms[0]));

        // In the window: every replica is rolled to renew them.
        std::thread::sleep(
            (issued_by + DUE_AFTER + Duration::from_secs(5))
                .saturating_duration_since(Instant::now()),
        );
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("0 to add, 3 to change, 0 to destroy");
        plan.assert_contains("will be rolled: certificates changes (its certificates expire at");
        plan.assert_contains("certificates_expire_at");
        let m = apply_measured(&ws, &sim, "renewal");
        assert_rolled_cleanly(client, &sim, &vms, "renewal", &m);

        let after = certs(&ws);
        let ca = ws.path().join("ca.pem");
        std::fs::write(&ca, outputs(&ws)["ca"]["value"].as_str().unwrap()).unwrap();
        let static_ip = outputs(&ws)["ip"]["value"].as_str().unwrap().to_string();
        for vm in &vms {
            let (old, new) = (&before[vm], &after[vm]);
            assert_ne!(
                old["api"], new["api"],
                "[{client}] {vm} kept its certificate"
            );
            assert!(
                new["expires"].as_str() > old["expires"].as_str(),
                "[{client}] {vm}: {} is not later than {}",
                new["expires"],
                old["expires"]
            );
            assert_eq!(
                old["member"], new["member"],
                "[{client}] {vm} is another etcd member"
            );
            // The certificate the VM serves with, and state's fingerprint of it (openssl's, without colons).
            let pem = ws.path().join(format!("{vm}.pem"));
            let on_vm = sim.ssh(vm, &["cat", "rootfs/etc/srv/kubernetes/pki/apiserver.crt"]);
            std::fs::write(&pem, &on_vm).unwrap();
            let fingerprint = openssl(&["x509", "-noout", "-fingerprint", "-sha256", "-in"], &pem);
            let fingerprint = fingerprint
                .trim()
                .rsplit('=')
                .next()
                .unwrap()
                .replace(':', "")
                .to_lowercase();
            assert_eq!(
                new["api"].as_str(),
                Some(fingerprint.as_str()),
                "[{client}] {vm}: state's fingerprint is not the served certificate's"
            );
            let verified = openssl(&["verify", "-CAfile", ca.to_str().unwrap()], &pem);
            assert!(
                verified.trim_end().ends_with(": OK"),
                "[{client}] {vm}: {verified}"
            );
            let sans = openssl(&["x509", "-noout", "-ext", "subjectAltName", "-in"], &pem);
            let internal = new["internal_ip"].as_str().unwrap();
            // The VM's external IP as GCE (the sim) has it now: ephemeral behind the load balancer.
            let ephemeral = sim.instance(vm)["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let ephemeral = ephemeral.as_str();
            let named: Vec<&str> = sans.split([',', '\n']).map(str::trim).collect();
            for ip in [static_ip.as_str(), internal] {
                assert!(
                    named.contains(&format!("IP Address:{ip}").as_str()),
                    "[{client}] {vm} lacks {ip}: {sans}"
                );
            }
            assert!(
                !ephemeral.is_empty() && ephemeral != static_ip,
                "[{client}] {vm} should sit behind the load balancer with an ephemeral IP, has {ephemeral:?}"
            );
            assert!(
                !named.contains(&format!("IP Address:{ephemeral}").as_str()),
                "[{client}] {vm} names its ephemeral IP {ephemeral}: {sans}"
            );
        }
        check(client, &ws, &sim, 3);
    });
}

/// `cert_pem` signed again by its own key with openssl: the same CA (subject, key, extensions), expiring in a day.
fn resign_ca(ws: &Workspace, cert_pem: &str, key_pem: &str) -> String {
    let (cert, key) = (ws.path().join("ca-in.pem"), ws.path().join("ca-key.pem"));
    std::fs::write(&cert, cert_pem).unwrap();
    std::fs::write(&key, key_pem).unwrap();
    let out = Command::new("openssl")
        .args(["x509", "-days", "1", "-key"])
        .arg(&key)
        .arg("-in")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    std::fs::remove_file(&key).unwrap();
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every string in `v` equal to a key of `swap`, replaced by its value.
fn swap_strings(v: &mut Value, swap: &BTreeMap<String, String>) {
    match v {
        Value::String(s) => {
            if let Some(new) = swap.get(s.as_str()) {
                *s = new.clone();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| swap_strings(v, swap)),
        Value::Object(o) => o.values_mut().for_each(|v| swap_strings(v, swap)),
        _ => {}
    }
}

/// A cluster nine years and a half into its CAs' ten, made by a release that issued leaves past them: its CAs
/// expire in a day, its replica's certificates in a year. Those certificates expire with the CAs in fact (no
/// verifier accepts a chain past its CA), and renewing them cannot move that: the plan warns, on the cluster and on
/// the replica, that the CAs expire and what to do, and plans no roll (which every later plan would show again).
/// The state's CA certificates are signed again with the nearer expiry by their own keys, as such a cluster's are.
#[test]
fn certificates_that_cannot_outlive_their_ca_are_warned_of_and_never_rolled() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("ca-expiry-{client}"));
        let ws = Workspace::new(client, "ca-expiry");
        ws.write_main_tf(&walk_config_in(&sim, THREE_ZONES[0]));
        ws.init();
        set_zones(&ws, &THREE_ZONES[..1]);
        ws.apply();
        let vm = certs_of(&ws);

        let pulled = ws.run(&["state", "pull"]);
        pulled.assert_success();
        let mut state: Value = serde_json::from_str(&pulled.stdout).expect("state JSON");
        let cluster = state["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["type"] == "ha_master_cluster")
            .expect("the cluster in state")["instances"][0]["attributes"]
            .clone();
        let swap: BTreeMap<String, String> = ["ca", "etcd_peer_ca", "etcd_client_ca"]
            .iter()
            .map(|ca| {
                let cert = cluster[format!("{ca}_certificate")].as_str().unwrap();
                // The cluster's own copy of its keys (the spec names their secret instead).
                let key = cluster["private_keys"][*ca].as_str().unwrap();
                (cert.to_string(), resign_ca(&ws, cert, key))
            })
            .collect();
        swap_strings(&mut state, &swap);
        state["serial"] = (state["serial"].as_u64().unwrap() + 1).into();
        ws.write_file("nearer-ca.tfstate", &state.to_string());
        ws.run(&["state", "push", "nearer-ca.tfstate"])
            .assert_success();

        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(plan.code, Some(0), "[{client}] a roll was planned:\n{plan}");
        let said = plan.combined();
        // The cluster's warning, and the replica's with the same summary (both clients print one in full).
        plan.assert_contains("The CAs of cluster walk expire at")
            .assert_contains("with ha_master_cluster.c")
            .assert_contains("renewing a replica's certificates cannot move them past")
            .assert_contains("(and one more similar warning elsewhere)");
        assert!(
            !said.contains(&format!("The certificates of replica {vm} expire at")),
            "[{client}] warned of a renewal that cannot come:\n{plan}"
        );
        let id = sim.instance(&vm)["id"].clone();
        ws.apply();
        assert_eq!(
            sim.instance(&vm)["id"],
            id,
            "[{client}] the apply rebuilt {vm}"
        );
        ws.destroy();
    });
}

/// The one replica's VM name.
fn certs_of(ws: &Workspace) -> String {
    outputs(ws)["replicas"]["value"][0]
        .as_str()
        .expect("one replica")
        .to_string()
}
