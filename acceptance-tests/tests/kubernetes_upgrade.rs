//! Day 2, issue #10: `kubernetes_version` one minor up, by rolling the masters one at a time behind the static IP.
//! ha-sim's API server stand-in answers `/version` with the tag of the kube-apiserver image in each master's
//! manifest, so a client of the static IP (curl, under the cluster CA) sees the versions change replica by
//! replica: never anything but the old and the new release, no failed probe, no lost write. Two minors at once
//! and a minor downgrade are refused at plan, naming the rule; so is a jump from a half-rolled control plane,
//! judged from the version each master's VM was built with, not from state.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use acceptance_tests::probe::{apply_measured_with, assert_rolled_cleanly};
use acceptance_tests::walk::{
    THREE_ZONES, check, outputs, replicas_by_zone, set_vars, walk_config_in, write_keys,
};
use acceptance_tests::{Sim, Workspace, for_each_client};

/// The `gitVersion` the API at the static IP answers `/version` with, through curl verifying the cluster CA;
/// `None` when no API server answered.
fn version_at(ca_file: &std::path::Path, ip: IpAddr) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "2", "--cacert"])
        .arg(ca_file)
        .arg(format!("https://{ip}/version"))
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["gitVersion"].as_str().map(str::to_string)
}

fn set_version(ws: &Workspace, version: &str) {
    set_vars(ws, &THREE_ZONES, &[("kubernetes_version", version)]);
}

#[test]
fn kubernetes_moves_one_minor_at_a_time_behind_the_static_ip_and_refuses_two() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("k8s-upgrade-{client}"));
        let ws = Workspace::new(client, "k8s-upgrade").with_timeout(Duration::from_secs(600));
        ws.write_main_tf(&walk_config_in(&sim, THREE_ZONES[0]));
        ws.init();
        set_version(&ws, "1.33");
        ws.apply();
        let by_zone = replicas_by_zone(&ws);
        let vms: Vec<String> = by_zone.values().cloned().collect();
        write_keys(&sim, &vms[0]);
        let out = outputs(&ws);
        let ip: IpAddr = out["ip"]["value"].as_str().unwrap().parse().unwrap();
        let ca_file = ws.path().join("ca.pem");
        std::fs::write(&ca_file, out["ca"]["value"].as_str().unwrap()).unwrap();
        let at_static_ip = |n: usize| -> BTreeSet<Option<String>> {
            (0..n).map(|_| version_at(&ca_file, ip)).collect()
        };
        assert_eq!(
            at_static_ip(6),
            BTreeSet::from([Some("v1.33.5".to_string())]),
            "[{client}] `1.33` runs its pinned patch on every master"
        );

        // Two minors at once: refused at plan, naming the rule and the attribute; nothing rolls.
        set_version(&ws, "1.35.0");
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure();
        plan.assert_contains(
            "Kubernetes of cluster walk cannot move from 1.33 to 1.35 in one step",
        );
        plan.assert_contains("Rule: masters are upgraded one minor version at a time");
        plan.assert_contains("kubernetes_version");

        // One replica upgraded alone (-target) leaves a mixed control plane; state says 1.34 for the cluster, but
        // the next jump is judged from what the other masters' VMs run, and refused.
        set_version(&ws, "1.34");
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("Kubernetes of cluster walk will be upgraded from 1.33.5 to 1.34.1");
        plan.assert_contains("0 to add, 4 to change, 0 to destroy");
        plan.assert_contains("will be rolled: kubernetes_version changes");
        ws.apply_target(&format!(r#"ha_master_replica.r["{}"]"#, THREE_ZONES[0]));
        set_version(&ws, "1.35");
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure();
        plan.assert_contains(
            "Kubernetes of cluster walk cannot move from 1.33 to 1.35 in one step",
        );
        for zone in &THREE_ZONES[1..] {
            plan.assert_contains(&format!("replica {} runs 1.33.5", by_zone[*zone]));
        }

        // Finishing the upgrade: the other two roll one at a time, while a prober at the static IP, a writer and
        // a sampler of `/version` run. Every answer is the old or the new release.
        set_version(&ws, "1.34");
        let seen: Mutex<BTreeSet<String>> = Mutex::default();
        let sample = |stop: &AtomicBool| {
            while !stop.load(Ordering::Relaxed) {
                if let Some(v) = version_at(&ca_file, ip) {
                    seen.lock().unwrap().insert(v);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        let m = apply_measured_with(&ws, &sim, "k8s-upgrade", sample);
        assert_rolled_cleanly(client, &sim, &vms, "k8s-upgrade", &m);
        let seen = seen.into_inner().unwrap();
        assert!(
            seen.iter().all(|v| v == "v1.33.5" || v == "v1.34.1") && seen.contains("v1.34.1"),
            "[{client}] the static IP answered only the old and the new release: {seen:?}"
        );
        assert_eq!(
            at_static_ip(6),
            BTreeSet::from([Some("v1.34.1".to_string())]),
            "[{client}] every master runs 1.34.1 after the roll"
        );
        check(client, &ws, &sim, 3);

        // Back a minor: refused, naming the rule; nothing rolled back.
        set_version(&ws, "1.33");
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure();
        plan.assert_contains("Kubernetes of cluster walk cannot go back from 1.34 to 1.33");
        plan.assert_contains("Rule: a control plane's minor version is never downgraded");
        assert_eq!(
            at_static_ip(3),
            BTreeSet::from([Some("v1.34.1".to_string())])
        );
    });
}
