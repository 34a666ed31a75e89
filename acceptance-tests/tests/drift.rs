//! The world moves behind Terraform's back; `plan` tells the truth and `apply` repairs it. Under both clients on
//! ha-sim with real etcd, each drift is made out of band (sim faults, etcdctl), then: `plan -detailed-exitcode`
//! exits 2 and its text names the problem, the apply succeeds, and the walk-through's `check` holds (plan empty,
//! etcd members == replicas all voting and healthy, keys intact, static IP serving /healthz over TLS, load
//! balancer iff two or more replicas with a pool of exactly the replica VMs, nothing in the sim unknown to state).
//! Drifts that compose share one cluster, to keep the wall time low. Metadata edited by hand is written back
//! before a crashed VM starts again, since it boots from it, or, for a startup configuration the state keeps only
//! a digest of, the VM is rebuilt.

use std::collections::BTreeSet;
use std::time::Duration;

use acceptance_tests::faults::Event;
use acceptance_tests::walk::{
    check, cluster_keys_secret_written, replicas_by_zone, set_vars, set_zones, walk_config,
    write_keys,
};
use acceptance_tests::{Client, CmdOutput, Sim, Workspace, for_each_client};

const B: &str = "europe-west1-b";
const C: &str = "europe-west1-c";
const D: &str = "europe-west1-d";
/// An image the masters are not built from by default: changing to it rebuilds every VM.
const UBUNTU: &str = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64";

/// A walk cluster with one replica per zone, keys written through the first.
fn cluster(client: Client, sim: &Sim, scenario: &str, zones: &[&str]) -> Workspace {
    let ws = Workspace::new(client, scenario).with_timeout(Duration::from_secs(300));
    ws.write_main_tf(&walk_config(sim));
    ws.init();
    set_zones(&ws, zones);
    ws.apply();
    write_keys(sim, &replicas_by_zone(&ws)[zones[0]]);
    ws
}

/// The plan sees a change (exit 2) and says each of `needles`.
#[track_caller]
fn plan_sees(client: Client, ws: &Workspace, needles: &[&str]) -> CmdOutput {
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(2),
        "[{client}] plan must see the drift:\n{plan}"
    );
    for needle in needles {
        plan.assert_contains(needle);
    }
    plan
}

fn instances(sim: &Sim) -> BTreeSet<String> {
    sim.names("instances").into_iter().collect()
}

/// The hex id of `name`'s etcd member, as `etcdctl member list` run on `via` shows it.
fn member_id(sim: &Sim, via: &str, name: &str) -> String {
    let list = sim.ssh(via, &["etcdctl", "member", "list"]);
    list.lines()
        .map(|l| l.split(", ").collect::<Vec<_>>())
        .find(|cols| cols.get(2) == Some(&name))
        .map(|cols| cols[0].to_string())
        .unwrap_or_else(|| panic!("no etcd member {name} in:\n{list}"))
}

/// `etcdctl member remove` through `via`. etcd refuses a removal until the remaining members have been connected
/// for a while ("unhealthy cluster" right after a join), so it is retried until it is accepted.
fn remove_member(sim: &Sim, via: &str, name: &str) {
    let id = member_id(sim, via, name);
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match sim.try_ssh(via, &["etcdctl", "member", "remove", &id]) {
            Ok(_) => break,
            Err(e) if e.contains("unhealthy cluster") && std::time::Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("etcdctl member remove {id} ({name}) via {via}: {e}"),
        }
    }
    // An operator plans once etcd has settled: right after the removal a remaining member can answer unhealthy
    // for a moment (a new leader, the configuration change still being applied), and plan would rightly refuse.
    while sim
        .try_ssh(via, &["etcdctl", "endpoint", "health", "--cluster"])
        .is_err()
    {
        assert!(
            std::time::Instant::now() < until,
            "etcd did not settle after removing {name}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_removed_etcd_member_or_a_vanished_vm_replaces_the_replica() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-member-{client}"));
        let ws = cluster(client, &sim, "drift-member", &[B, C, D]);

        // (a) The member is removed through another member; the VM keeps running.
        let by_zone = replicas_by_zone(&ws);
        let victim = by_zone[C].clone();
        remove_member(&sim, &by_zone[B], &victim);
        plan_sees(
            client,
            &ws,
            &[
                &format!("The etcd member of replica {victim} was removed out of band"),
                "A removed member cannot rejoin with its old data",
                "must be replaced",
            ],
        );
        ws.apply();
        check(client, &ws, &sim, 3);
        assert!(
            !instances(&sim).contains(&victim),
            "[{client}] {victim} came back under its old name"
        );

        // The VM is deleted in the console: its etcd data disk is not, so the VM is created again on it and
        // etcd restarts as the same member with its data (nothing replaced, nothing leaked).
        let victim = replicas_by_zone(&ws)[D].clone();
        sim.event(Event::DeleteInstance {
            instance: victim.clone(),
        });
        plan_sees(
            client,
            &ws,
            &[
                &format!("The VM of replica {victim} is gone; its etcd data disk is not"),
                r#"~ status = "DELETED" -> "RUNNING""#,
                // The pool still lists the dead VM: the cluster shows it and the apply removes it.
                &format!("target pool lists {victim}, which is not an existing replica VM"),
            ],
        );
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert!(
            !plan.stdout.contains("must be replaced"),
            "[{client}] a VM with its data disk is rebuilt, not replaced:\n{plan}"
        );
        ws.apply();
        check(client, &ws, &sim, 3);
        assert!(
            instances(&sim).contains(&victim),
            "[{client}] {victim} is rebuilt under its own name"
        );
    });
}

#[test]
fn a_crashed_replica_is_started_again_or_replaced() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-crash-{client}"));
        let ws = cluster(client, &sim, "drift-crash", &[B, C, D]);
        let crash_seen = |victim: &str, zone: &str| {
            sim.event(Event::CrashVm {
                instance: victim.to_string(),
            });
            plan_sees(
                client,
                &ws,
                &[
                    r#"~ status = "TERMINATED" -> "RUNNING""#,
                    &format!("Replica {victim} is TERMINATED, and its etcd member {victim}"),
                    "is unhealthy",
                    "terraform apply -replace='<address>'",
                    &format!("named {victim} in {zone}"),
                ],
            );
        };

        // A plain apply starts the VM again; the same replica rejoins with its data.
        let victim = replicas_by_zone(&ws)[C].clone();
        crash_seen(&victim, C);
        ws.apply();
        check(client, &ws, &sim, 3);
        assert_eq!(
            replicas_by_zone(&ws)[C],
            victim,
            "[{client}] a restart keeps the replica"
        );

        // `apply -replace=` gives a fresh replica in the same zone; the dead member goes first.
        let victim = replicas_by_zone(&ws)[D].clone();
        crash_seen(&victim, D);
        ws.run(&[
            "apply",
            "-input=false",
            "-no-color",
            "-auto-approve",
            &format!(r#"-replace=ha_master_replica.r["{D}"]"#),
        ])
        .assert_success();
        check(client, &ws, &sim, 3);
        let now = replicas_by_zone(&ws);
        assert_ne!(now[D], victim, "[{client}] {D} has a new replica");
        assert!(
            !instances(&sim).contains(&victim),
            "[{client}] the crashed VM {victim} is left"
        );
    });
}

#[test]
fn a_load_balancer_that_lost_a_member_or_its_rule_and_hand_edited_labels_are_restored() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-lb-{client}"));
        let ws = cluster(client, &sim, "drift-lb", &[B, C]);
        let victim = replicas_by_zone(&ws)[C].clone();

        sim.event(Event::DropPoolMember {
            pool: "walk".into(),
            instance: victim.clone(),
        });
        plan_sees(
            client,
            &ws,
            &[
                &format!("Replica {victim} is not in the load balancer's target pool."),
                "ha_master_cluster.c will be updated in-place",
            ],
        );
        ws.apply();
        check(client, &ws, &sim, 2);

        sim.event(Event::DeleteForwardingRule {
            rule: "walk".into(),
        });
        plan_sees(
            client,
            &ws,
            &["The forwarding rule that serves the static IP is missing."],
        );
        ws.apply();
        check(client, &ws, &sim, 2);

        // Labels edited in the console: the replica's plan shows them, the update restores the declared set.
        sim.event(Event::SetLabel {
            instance: victim.clone(),
            key: "team".into(),
            value: Some("rogue".into()),
        });
        plan_sees(
            client,
            &ws,
            &[
                &format!(r#"ha_master_replica.r["{C}"] will be updated in-place"#),
                r#""team" = "rogue""#,
            ],
        );
        ws.apply();
        check(client, &ws, &sim, 2);
        let mut labels = sim.instance(&victim)["labels"].clone();
        // The build the VM was made from and the window its join measured are the provider's own labels, like
        // the cluster's, and the update keeps them.
        assert!(
            labels["ha-master-build"].is_string()
                && labels["ha-master-window"]
                    .as_str()
                    .is_some_and(|s| s.parse::<u64>().is_ok()),
            "[{client}] labels of {victim}: {labels}"
        );
        labels.as_object_mut().unwrap().remove("ha-master-build");
        labels.as_object_mut().unwrap().remove("ha-master-window");
        assert_eq!(
            labels,
            serde_json::json!({ "ha-master-cluster": "walk" }),
            "[{client}] labels of {victim}"
        );
    });
}

#[test]
fn a_sole_replica_that_lost_the_static_ip_gets_it_back() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-ip-{client}"));
        let ws = cluster(client, &sim, "drift-ip", &[B]);
        let sole = replicas_by_zone(&ws)[B].clone();
        sim.event(Event::DetachIp {
            instance: sole.clone(),
        });
        plan_sees(
            client,
            &ws,
            &[&format!(
                "The sole replica {sole} does not hold the static IP (nothing holds it)."
            )],
        );
        ws.apply();
        check(client, &ws, &sim, 1);
    });
}

/// The cluster's keys' secret, deleted out of band: the cluster's refresh records it and the replicas' refreshes
/// warn without failing the plan, which shows an update of the cluster; its apply writes the keys back from the
/// cluster's state, before the replicas' changes, and a roll signed with them then works.
#[test]
fn a_deleted_keys_secret_is_written_back_from_the_clusters_state() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-keys-{client}"));
        let ws = cluster(client, &sim, "drift-keys", &[B, C]);
        sim.gcloud(&["secrets", "delete", "walk-cluster-keys", "--quiet"])
            .unwrap_or_else(|e| panic!("[{client}] {e}"));
        let plan = plan_sees(
            client,
            &ws,
            &[
                "Secret walk-cluster-keys does not hold the cluster's CA keys",
                "was not refreshed",
            ],
        );
        plan.assert_contains("0 to add, 1 to change, 0 to destroy");
        // The repair and a roll in one apply: the rebuilt VMs' new certificates are signed with the keys written
        // back (the cluster's update runs before its replicas').
        set_vars(&ws, &[B, C], &[("image", UBUNTU)]);
        ws.apply();
        cluster_keys_secret_written(client, &sim);
        check(client, &ws, &sim, 2);
    });
}

/// The items of `vm`'s metadata, as the sim holds them.
fn metadata_of(sim: &Sim, vm: &str) -> std::collections::BTreeMap<String, String> {
    sim.instance(vm)["metadata"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let s = |k: &str| i[k].as_str().unwrap_or_default().to_string();
            (s("key"), s("value"))
        })
        .collect()
}

/// State keeps only digests of the metadata the provider wrote. Items added by hand and a changed `cluster-name`
/// (which the settings make again) are put back in place, before a crashed VM boots; a changed startup
/// configuration, which only the VM held, is repaired by rebuilding the VM, and the plan says so.
#[test]
fn hand_edited_metadata_is_written_back_or_the_vm_rebuilt() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-md-{client}"));
        let ws = cluster(client, &sim, "drift-md", &[B]);
        let victim = replicas_by_zone(&ws)[B].clone();
        let wrote = metadata_of(&sim, &victim);
        assert!(
            wrote.contains_key("user-data"),
            "[{client}] the master has a startup configuration"
        );
        let id = sim.instance(&victim)["id"].to_string();

        // Someone renames the cluster's item and adds a key in the console; then the VM crashes.
        let set = |key: &str, value: &str| {
            sim.event(Event::SetMetadata {
                instance: victim.clone(),
                key: key.into(),
                value: Some(value.into()),
            })
        };
        set("cluster-name", "renamed");
        set("ssh-keys", "me:ssh-ed25519 AAAA");
        sim.event(Event::CrashVm {
            instance: victim.clone(),
        });
        plan_sees(
            client,
            &ws,
            &[
                &format!("The metadata of replica {victim} was edited out of band"),
                "metadata item cluster-name was changed on the VM",
                "metadata item ssh-keys was added to the VM",
                r#"~ status = "TERMINATED" -> "RUNNING""#,
            ],
        );
        // The apply writes the metadata back first, then starts the same VM, which boots from it and rejoins.
        ws.apply();
        check(client, &ws, &sim, 1);
        assert_eq!(
            metadata_of(&sim, &victim),
            wrote,
            "[{client}] the metadata of {victim} is the provider's again"
        );
        assert_eq!(
            sim.instance(&victim)["id"].to_string(),
            id,
            "[{client}] mended in place"
        );

        // Someone replaces the startup configuration. Booted from it, the master would run no etcd at all, and
        // the state holds no copy to write back: the VM is rebuilt on its data disk.
        set("user-data", "#cloud-config\nwrite_files: []\n");
        set("ssh-keys", "me:ssh-ed25519 AAAA");
        let plan = plan_sees(
            client,
            &ws,
            &[
                &format!("The startup configuration of replica {victim} was edited out of band"),
                "metadata item user-data was changed on the VM",
                "rebuilds the VM on its etcd data disk",
            ],
        );
        assert!(
            plan.stdout.contains("instance_id") && plan.stdout.contains("(known after apply)"),
            "[{client}] the plan shows the new VM:\n{plan}"
        );
        ws.apply();
        check(client, &ws, &sim, 1);
        assert_ne!(
            sim.instance(&victim)["id"].to_string(),
            id,
            "[{client}] rebuilt"
        );
        let now = metadata_of(&sim, &victim);
        assert!(
            !now.contains_key("ssh-keys")
                && now["user-data"].starts_with("#cloud-config")
                && now["user-data"] != "#cloud-config\nwrite_files: []\n",
            "[{client}] the provider's startup configuration: {now:?}"
        );

        // The same edit on a VM that is down (crashed, or stopped in the console): it must not be started on what
        // it would boot from, so it is rebuilt on its data disk too, and comes back running.
        let id = sim.instance(&victim)["id"].to_string();
        sim.event(Event::CrashVm {
            instance: victim.clone(),
        });
        set("user-data", "#cloud-config\nwrite_files: []\n");
        let plan = plan_sees(
            client,
            &ws,
            &[
                &format!("The startup configuration of replica {victim} was edited out of band"),
                "rebuilds the VM on its etcd data disk",
            ],
        );
        assert!(
            !plan.stdout.contains(&format!(
                "The metadata of replica {victim} was edited out of band"
            )),
            "[{client}] a VM that is rebuilt is not also mended in place:\n{plan}"
        );
        ws.apply();
        check(client, &ws, &sim, 1);
        assert_ne!(
            sim.instance(&victim)["id"].to_string(),
            id,
            "[{client}] the stopped VM was rebuilt, not started on the edited configuration"
        );
        assert_eq!(
            sim.instance(&victim)["status"],
            "RUNNING",
            "[{client}] and it runs"
        );
        let now = metadata_of(&sim, &victim);
        assert_ne!(
            now["user-data"], "#cloud-config\nwrite_files: []\n",
            "[{client}] the provider's startup configuration"
        );
    });
}

/// How many times the sim saw Compute method `api` (`firewalls.patch`) since the last reset of its request log.
fn calls(sim: &Sim, api: &str) -> u64 {
    sim.requests(false)["byMethod"][format!("compute.{api}")]
        .as_u64()
        .unwrap_or(0)
}

/// The cluster's firewall rules, edited out of band with gcloud: the etcd peer rule deleted, etcd's client port
/// opened to the whole internet. The cluster's refresh names both in `drift`, the plan shows an update of the
/// cluster, and its apply creates the one and patches the other back, touching no rule that was right.
#[test]
fn a_deleted_or_widened_firewall_rule_is_put_back() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("drift-firewall-{client}"));
        let ws = cluster(client, &sim, "drift-firewall", &[B]);
        for args in [
            &[
                "compute",
                "firewall-rules",
                "delete",
                "walk-etcd",
                "--quiet",
            ][..],
            &[
                "compute",
                "firewall-rules",
                "update",
                "walk-etcd-client",
                "--source-ranges=0.0.0.0/0",
            ],
        ] {
            sim.gcloud(args)
                .unwrap_or_else(|e| panic!("[{client}] gcloud {args:?}: {e}"));
        }
        let plan = plan_sees(
            client,
            &ws,
            &[
                "Firewall rule walk-etcd is missing; the apply creates it again.",
                "Firewall rule walk-etcd-client has source ranges 0.0.0.0/0, not 127.0.0.0/8",
            ],
        );
        plan.assert_contains("0 to add, 1 to change, 0 to destroy");
        sim.requests(true);
        ws.apply();
        assert_eq!(
            (
                calls(&sim, "firewalls.insert"),
                calls(&sim, "firewalls.patch")
            ),
            (1, 1),
            "[{client}] the repair creates the deleted rule, patches the widened one and no other"
        );
        let client_rule = sim
            .gcloud(&["compute", "firewall-rules", "describe", "walk-etcd-client"])
            .unwrap_or_else(|e| panic!("[{client}] {e}"));
        assert_eq!(
            client_rule["sourceRanges"],
            serde_json::json!(["127.0.0.0/8"]),
            "[{client}] etcd's client port admits the configured range again"
        );
        sim.gcloud(&["compute", "firewall-rules", "describe", "walk-etcd"])
            .unwrap_or_else(|e| panic!("[{client}] the peer rule is back: {e}"));
        check(client, &ws, &sim, 1);
    });
}
