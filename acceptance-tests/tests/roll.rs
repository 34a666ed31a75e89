//! Day 2: what a master is made of changes by rolling the masters one at a time, behind the load balancer, with
//! no member added or removed and no data lost. Before this, a cluster's `machine_type` change replaced every
//! replica at once and etcd came back empty.
//!
//! Each roll runs with a prober at the static IP (every 50 ms), a writer putting keys through whichever replica
//! answers (every 100 ms) and a sampler of voters down; afterwards every acknowledged key must be there, the
//! members must be the same ones, and the walk-through's full check must hold.

use std::collections::BTreeMap;
use std::time::Duration;

use acceptance_tests::faults::Event;
use acceptance_tests::probe::{apply_measured, assert_rolled_cleanly};
use acceptance_tests::walk::{
    THREE_ZONES, check, set_vars, three_replicas, walk_config_in, write_keys,
};
use acceptance_tests::{Sim, for_each_client};

const A: &str = "us-central1-a";
const UBUNTU: &str = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64";
const B: &str = "us-central1-b";
const C: &str = "us-central1-c";

/// The walk-through's configuration with extra cluster settings.
fn config(sim: &Sim, extra: &str) -> String {
    let base = walk_config_in(sim, A);
    let anchor = "  multizone                 = true\n";
    assert!(base.contains(anchor));
    base.replacen(anchor, &format!("{anchor}{extra}"), 1)
}

/// etcd's members as (name, id), seen from `vm`.
fn members(sim: &Sim, vm: &str) -> BTreeMap<String, String> {
    let list: serde_json::Value =
        serde_json::from_str(&sim.ssh(vm, &["etcdctl", "member", "list", "-w", "json"])).unwrap();
    list["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m["ID"].to_string()))
        .collect()
}

#[test]
fn three_replicas_roll_one_at_a_time_with_no_downtime_and_no_data_lost() {
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "roll", Duration::from_secs(600));
        let vms: Vec<String> = by_zone.values().cloned().collect();
        write_keys(&sim, &vms[0]);
        let before = members(&sim, &vms[0]);
        let ids = |sim: &Sim| -> BTreeMap<String, String> {
            vms.iter()
                .map(|v| (v.clone(), sim.instance(v)["id"].to_string()))
                .collect()
        };

        // Machine type: planned in place, with the warning that says how; rolled by stop/set/start.
        set_vars(&ws, &THREE_ZONES, &[("machine_type", "e2-standard-4")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("0 to add, 4 to change, 0 to destroy");
        plan.assert_contains("will be rolled: machine_type changes");
        plan.assert_contains("no downtime is expected");
        plan.assert_contains(r#""e2-standard-2" -> "e2-standard-4""#);
        let vm_ids = ids(&sim);
        let m = apply_measured(&ws, &sim, "roll-mt");
        assert_rolled_cleanly(client, &sim, &vms, "roll-mt", &m);
        for vm in &vms {
            assert_eq!(
                sim.instance(vm)["machineType"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next(),
                Some("e2-standard-4")
            );
        }
        assert_eq!(
            ids(&sim),
            vm_ids,
            "[{client}] a machine type change keeps the VMs"
        );
        assert_eq!(
            members(&sim, &vms[1]),
            before,
            "[{client}] the same members"
        );
        check(client, &ws, &sim, 3);

        // Image: the VMs are rebuilt on their data disks; etcd restarts as the same members with their data.
        set_vars(
            &ws,
            &THREE_ZONES,
            &[("machine_type", "e2-standard-4"), ("image", UBUNTU)],
        );
        let m = apply_measured(&ws, &sim, "roll-img");
        assert_rolled_cleanly(client, &sim, &vms, "roll-img", &m);
        let rebuilt = ids(&sim);
        assert!(
            vm_ids.iter().all(|(vm, id)| rebuilt[vm] != *id),
            "[{client}] every VM was rebuilt"
        );
        assert_eq!(
            members(&sim, &vms[2]),
            before,
            "[{client}] the same members, no add or remove"
        );
        check(client, &ws, &sim, 3);

        // A setting a master reads at boot: the running masters' configuration has the new value.
        ws.write_main_tf(&config(&sim, "  dns_domain = \"corp.example\"\n"));
        let m = apply_measured(&ws, &sim, "roll-dns");
        assert_rolled_cleanly(client, &sim, &vms, "roll-dns", &m);
        for vm in &vms {
            let metadata = sim.instance(vm)["metadata"].to_string();
            assert!(
                metadata.contains("corp.example"),
                "[{client}] {vm} runs with the new DNS domain"
            );
        }
        assert_eq!(members(&sim, &vms[0]), before);
        check(client, &ws, &sim, 3);
    });
}

#[test]
fn a_roll_waits_for_a_down_member_and_a_sole_replica_rolls_with_warned_downtime() {
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "roll-guard", Duration::from_secs(600));
        write_keys(&sim, &by_zone[A]);
        let before = members(&sim, &by_zone[A]);

        // One member down: rolling any other would leave one healthy voter of three. Plan refuses, naming it.
        sim.event(Event::CrashVm {
            instance: by_zone[C].clone(),
        });
        set_vars(&ws, &THREE_ZONES, &[("machine_type", "e2-standard-4")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
        plan.assert_contains(&format!("Replica {} cannot be rolled now", by_zone[A]));
        plan.assert_contains(&format!("{} is unhealthy", by_zone[C]));
        assert_eq!(
            members(&sim, &by_zone[A]),
            before,
            "[{client}] nothing changed"
        );

        // The down replica first (its own roll restarts it on the new machine type), then the rest.
        ws.apply_target(&format!("ha_master_replica.r[\"{C}\"]"));
        ws.apply();
        check(client, &ws, &sim, 3);
        assert_eq!(
            members(&sim, &by_zone[B]),
            before,
            "[{client}] the same members"
        );

        // Two replicas cannot move to another subnetwork: neither member has a quorum to commit the other's new
        // peer address. Plan refuses, naming the way out, and nothing moves.
        let range = sim.create_subnetwork("masters-b", "us-central1");
        set_vars(&ws, &[A, B], &[("machine_type", "e2-standard-4")]);
        ws.apply();
        set_vars(
            &ws,
            &[A, B],
            &[
                ("machine_type", "e2-standard-4"),
                ("subnetwork", "masters-b"),
            ],
        );
        let refused = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(
            refused.code,
            Some(1),
            "[{client}] plan must refuse:\n{refused}"
        );
        refused
            .assert_contains("cannot move to another subnetwork with two replicas")
            .assert_contains("Add a third replica first");

        // Down to one replica, then a roll that rebuilds it (image, machine type and a larger data disk): plan
        // warns that the API goes down; the disk grows while the VM is away, the VM is created again on it and
        // gets the static IP back; the data stays. Google's own CLI reads the disk.
        set_vars(&ws, &[A], &[("machine_type", "e2-standard-4")]);
        ws.apply();
        let sole_id = sim.instance(&by_zone[A])["id"].to_string();
        let disk = format!("{}-pd", by_zone[A]);
        let disk_size = || -> String {
            let d = sim
                .gcloud(&[
                    "compute",
                    "disks",
                    "describe",
                    &disk,
                    &format!("--zone={A}"),
                ])
                .unwrap_or_else(|e| panic!("[{client}] {e}"));
            d["sizeGb"].as_str().unwrap_or_default().to_string()
        };
        assert_eq!(disk_size(), "20", "[{client}] the data disk as created");
        let rebuild = [
            ("machine_type", "e2-standard-8"),
            ("image", UBUNTU),
            ("data_disk_size_gb", "30"),
        ];
        set_vars(&ws, &[A], &rebuild);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains(
            "This is the only replica: the Kubernetes API is down while its VM restarts",
        );
        plan.assert_contains("data_disk_size_gb, image, machine_type changes");
        plan.assert_contains("Its etcd data disk grows while the VM is away");
        ws.apply();
        assert_eq!(disk_size(), "30", "[{client}] the data disk grew");
        // GCE never shrinks a disk: a smaller size is refused at plan, naming the attribute, and nothing changes.
        set_vars(
            &ws,
            &[A],
            &[rebuild[0], rebuild[1], ("data_disk_size_gb", "25")],
        );
        let refused = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(
            refused.code,
            Some(1),
            "[{client}] plan must refuse:\n{refused}"
        );
        refused
            .assert_contains("data_disk_size_gb cannot shrink from 30 to 25 GB")
            .assert_contains("data_disk_size_gb = 30");
        // Another network would give the member a new peer address: refused at plan, not a replacement that
        // would take etcd's data with it. The cluster's own plan refuses it first (it would replace the cluster);
        // a replica whose cluster lives in another state refuses it itself (`domain::roll::network_move`).
        set_vars(
            &ws,
            &[A],
            &[rebuild[0], rebuild[1], rebuild[2], ("network", "prod")],
        );
        let refused = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(
            refused.code,
            Some(1),
            "[{client}] plan must refuse:\n{refused}"
        );
        refused
            .assert_contains(&format!(
                "Cluster walk cannot be replaced while it has replicas ({})",
                by_zone[A]
            ))
            .assert_contains("Changing `network` replaces ha_master_cluster walk")
            .assert_contains("another subnetwork of the same network can be set instead");
        set_vars(&ws, &[A], &rebuild);
        assert_eq!(
            sim.instance(&by_zone[A])["machineType"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next(),
            Some("e2-standard-8")
        );
        assert_ne!(
            sim.instance(&by_zone[A])["id"].to_string(),
            sole_id,
            "[{client}] the sole replica was rebuilt"
        );
        assert_eq!(
            members(&sim, &by_zone[A]).len(),
            1,
            "[{client}] the same single member"
        );
        check(client, &ws, &sim, 1);

        // A sole replica moves to another subnetwork: rebuilt there on its disk, and its own etcd commits its new
        // peer URL once it runs again (there is no other member to commit it).
        let mut moved = rebuild.to_vec();
        moved.push(("subnetwork", "masters-b"));
        set_vars(&ws, &[A], &moved);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("will be rolled: subnetwork changes");
        plan.assert_contains(
            "This is the only replica: the Kubernetes API is down while its VM restarts",
        );
        ws.apply();
        let ip = sim.instance(&by_zone[A])["networkInterfaces"][0]["networkIP"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            ip.starts_with(range.trim_end_matches("0/24")),
            "[{client}] the sole replica is at {ip}"
        );
        let list: serde_json::Value = serde_json::from_str(
            &sim.ssh(&by_zone[A], &["etcdctl", "member", "list", "-w", "json"]),
        )
        .unwrap();
        assert_eq!(
            list["members"][0]["peerURLs"][0].as_str(),
            Some(format!("https://{ip}:2380").as_str()),
            "[{client}] etcd lists the new peer URL: {list}"
        );
        assert_eq!(
            members(&sim, &by_zone[A])[&by_zone[A]],
            before[&by_zone[A]],
            "[{client}] the same member"
        );
        check(client, &ws, &sim, 1);
    });
}

/// Another subnetwork of the cluster's network: each replica's VM is rebuilt there on its data disk, its reserved
/// internal IP moves with it and etcd is told its member's new peer URL. The members keep their ids and data (no
/// member is added or removed, nothing is streamed), one replica at a time, with no failed probe.
#[test]
fn three_replicas_move_to_another_subnetwork_keeping_their_members_and_data() {
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "subnet", Duration::from_secs(600));
        let vms: Vec<String> = by_zone.values().cloned().collect();
        write_keys(&sim, &vms[0]);
        let before = members(&sim, &vms[0]);
        // The new subnetwork, made with gcloud as its owner would.
        let range = sim.create_subnetwork("masters-b", "us-central1");
        let prefix = range.trim_end_matches("0/24").to_string();

        set_vars(&ws, &THREE_ZONES, &[("subnetwork", "masters-b")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("0 to add, 4 to change, 0 to destroy");
        plan.assert_contains("will be rolled: subnetwork changes");
        plan.assert_contains("etcd is told the member's new peer URL");
        plan.assert_contains("no downtime is expected");
        let m = apply_measured(&ws, &sim, "subnet");
        assert_rolled_cleanly(client, &sim, &vms, "subnet", &m);

        let peers: BTreeMap<String, String> = {
            let list: serde_json::Value = serde_json::from_str(
                &sim.ssh(&vms[1], &["etcdctl", "member", "list", "-w", "json"]),
            )
            .unwrap();
            list["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["name"].as_str().unwrap().to_string(),
                        m["peerURLs"][0].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        };
        for vm in &vms {
            let nic = sim.instance(vm)["networkInterfaces"][0].clone();
            assert!(
                nic["subnetwork"]
                    .as_str()
                    .unwrap()
                    .ends_with("/subnetworks/masters-b"),
                "[{client}] {vm} is on {}",
                nic["subnetwork"]
            );
            let ip = nic["networkIP"].as_str().unwrap();
            assert!(ip.starts_with(&prefix), "[{client}] {vm} has {ip}");
            let address = sim
                .gcloud(&[
                    "compute",
                    "addresses",
                    "describe",
                    &format!("{vm}-int"),
                    "--region=us-central1",
                ])
                .unwrap_or_else(|e| panic!("[{client}] {e}"));
            assert_eq!(address["address"], ip, "[{client}] {vm}'s reserved IP");
            assert!(
                address["subnetwork"]
                    .as_str()
                    .is_some_and(|s| s.ends_with("/subnetworks/masters-b")),
                "[{client}] {vm}'s address: {address}"
            );
            assert_eq!(
                peers[vm],
                format!("https://{ip}:2380"),
                "[{client}] etcd reaches {vm} at its new IP"
            );
        }
        assert_eq!(
            members(&sim, &vms[2]),
            before,
            "[{client}] the same members, no add or remove"
        );
        check(client, &ws, &sim, 3);
    });
}
