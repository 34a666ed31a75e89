//! Day 2, issue #10: etcd 3.4 → 3.5 by rolling the masters one at a time on real binaries (ha-sim runs each VM's
//! etcd at the minor its manifest's image names: Debian's 3.4.23, Debian trixie's 3.5.16). During the roll a prober hits
//! the static IP and a writer puts keys; afterwards every member runs 3.5.16, etcd's cluster version is 3.5, the
//! keys written first and every acknowledged write are there, and going back to 3.4 is refused at plan because
//! etcd cannot downgrade a cluster version. Before that, one replica upgraded alone makes a mixed cluster, from
//! which going back is allowed and done. After it, unsetting `etcd_version` keeps what the cluster runs: the
//! default for new clusters (3.5) never applies to an existing one.
//!
//! The masters' manifests name the provider's 3.5 pin (`registry.k8s.io/etcd:3.5.24-0`); ha-sim runs a VM's etcd by
//! the minor of that tag, and the 3.5 it has is 3.5.16, which is what the members report.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use acceptance_tests::probe::{apply_measured_with, assert_rolled_cleanly};
use acceptance_tests::walk::{THREE_ZONES, check, set_vars, three_replicas, write_keys};
use acceptance_tests::{Sim, etcd35_bin, for_each_client};

/// `vm`'s etcd server version, as it reports itself (`etcdctl endpoint status`); `None` while it is down.
fn server_version(sim: &Sim, vm: &str) -> Option<String> {
    let out = sim
        .try_ssh(
            vm,
            &[
                "etcdctl",
                "--command-timeout=1s",
                "endpoint",
                "status",
                "-w",
                "json",
            ],
        )
        .ok()?;
    let status: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
    status[0]["Status"]["version"].as_str().map(str::to_string)
}

/// etcd's cluster version as `vm`'s etcd answers `/version` on its client port (mutual TLS, the VM's own
/// client certificate): what etcd raises once every member runs the newer minor.
fn cluster_version(sim: &Sim, vm: &str) -> Option<String> {
    let out = sim
        .try_ssh(
            vm,
            &[
                "sh",
                "-c",
                r#"curl -sS --max-time 2 --cacert "$ETCDCTL_CACERT" --cert "$ETCDCTL_CERT" --key "$ETCDCTL_KEY" "$ETCDCTL_ENDPOINTS/version""#,
            ],
        )
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
    v["etcdcluster"].as_str().map(str::to_string)
}

#[test]
fn etcd_goes_back_while_mixed_then_upgrades_to_3_5_one_replica_at_a_time_and_cannot_go_back() {
    assert!(
        etcd35_bin().is_some(),
        "etcd 3.5 is not installed at .tools/etcd-3.5/bin/etcd: run scripts/setup"
    );
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "etcd-upgrade", Duration::from_secs(600));
        let vms: Vec<String> = by_zone.values().cloned().collect();
        write_keys(&sim, &vms[0]);
        for vm in &vms {
            let v = server_version(&sim, vm).expect("etcd answers");
            assert!(
                v.starts_with("3.4."),
                "[{client}] {vm} starts on etcd 3.4, runs {v}"
            );
        }
        assert_eq!(cluster_version(&sim, &vms[0]).as_deref(), Some("3.4.0"));

        // Mixed, then back: one replica upgraded alone (-target); etcd's cluster version stays 3.4 while a member
        // runs 3.4, so going back is allowed, and that replica rolls back onto 3.4 with its data.
        set_vars(&ws, &THREE_ZONES, &[("etcd_version", "3.5")]);
        let first = &by_zone[THREE_ZONES[0]];
        ws.apply_target(&format!(r#"ha_master_replica.r["{}"]"#, THREE_ZONES[0]));
        for vm in &vms {
            let want = if vm == first { "3.5." } else { "3.4." };
            let v = server_version(&sim, vm).expect("etcd answers");
            assert!(v.starts_with(want), "[{client}] mixed: {vm} runs {v}");
        }
        assert_eq!(cluster_version(&sim, first).as_deref(), Some("3.4.0"));
        set_vars(&ws, &THREE_ZONES, &[("etcd_version", "3.4")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("etcd of cluster walk goes back from 3.5 to 3.4");
        plan.assert_contains("The cluster version is still 3.4.0");
        plan.assert_contains("0 to add, 2 to change, 0 to destroy");
        ws.apply();
        for vm in &vms {
            let v = server_version(&sim, vm).expect("etcd answers");
            assert!(
                v.starts_with("3.4."),
                "[{client}] back on 3.4: {vm} runs {v}"
            );
        }
        check(client, &ws, &sim, 3);

        // The plan names the upgrade and rolls every replica, each showing its new etcd image.
        set_vars(&ws, &THREE_ZONES, &[("etcd_version", "3.5")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("etcd of cluster walk will be upgraded from 3.4 to 3.5");
        plan.assert_contains("0 to add, 4 to change, 0 to destroy");
        plan.assert_contains("will be rolled: etcd_image changes");
        plan.assert_contains(r#"+ "etcd_image" = "registry.k8s.io/etcd:3.5.24-0""#);

        // During the roll: how many members run 3.5, sampled from every VM, must only ever grow by one member
        // at a time (0, 1, 2, 3): a mixed-version cluster, really.
        let seen: Mutex<Vec<usize>> = Mutex::default();
        let sample = |stop: &AtomicBool| {
            while !stop.load(Ordering::Relaxed) {
                let versions: Vec<Option<String>> =
                    vms.iter().map(|vm| server_version(&sim, vm)).collect();
                if versions.iter().all(Option::is_some) {
                    let on35 = versions
                        .iter()
                        .flatten()
                        .filter(|v| v.starts_with("3.5."))
                        .count();
                    let mut s = seen.lock().unwrap();
                    if s.last() != Some(&on35) {
                        s.push(on35);
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        };
        let m = apply_measured_with(&ws, &sim, "upgrade", sample);
        assert_rolled_cleanly(client, &sim, &vms, "upgrade", &m);
        let seen = seen.into_inner().unwrap();
        assert!(
            seen.windows(2).all(|w| w[1] == w[0] + 1) && seen.contains(&1) && seen.contains(&2),
            "[{client}] members moved to 3.5 one at a time through a mixed cluster: {seen:?}"
        );
        for vm in &vms {
            assert_eq!(
                server_version(&sim, vm).as_deref(),
                Some("3.5.16"),
                "[{client}] {vm} runs etcd 3.5.16"
            );
        }
        // etcd raises the cluster version on its own clock (it checks members' versions every few seconds).
        let until = Instant::now() + Duration::from_secs(60);
        let cluster = loop {
            let versions: BTreeSet<Option<String>> =
                vms.iter().map(|vm| cluster_version(&sim, vm)).collect();
            if versions.len() == 1 && versions.contains(&Some("3.5.0".into())) {
                break "3.5.0";
            }
            assert!(
                Instant::now() < until,
                "[{client}] the cluster version did not become 3.5: {versions:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        };
        assert_eq!(cluster, "3.5.0");
        check(client, &ws, &sim, 3);

        // Going back is refused at plan, naming the rule and the cluster version etcd reported.
        set_vars(&ws, &THREE_ZONES, &[("etcd_version", "3.4")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_failure();
        plan.assert_contains("etcd of cluster walk cannot go back from 3.5 to 3.4");
        plan.assert_contains("Rule: etcd cannot downgrade once its cluster version has moved. The cluster version is 3.5.0");
        plan.assert_contains("etcd_version");
        for vm in &vms {
            assert_eq!(
                server_version(&sim, vm).as_deref(),
                Some("3.5.16"),
                "[{client}] nothing rolled back"
            );
        }

        // Unset, `etcd_version` and `image` keep what the cluster runs: the defaults for new clusters (3.5 and
        // Ubuntu) never apply to an existing one, and no plan goes back to 3.4 (what a state from before the
        // setting means) or anywhere else.
        ws.write_file(
            "terraform.tfvars.json",
            &serde_json::json!({ "zones": THREE_ZONES, "etcd_version": null, "image": null })
                .to_string(),
        );
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(
            plan.code,
            Some(0),
            "[{client}] unset etcd_version and image keep 3.5 and the image, and plan nothing:\n{plan}"
        );
    });
}
