//! Deletion protection, on by default: the last copy of the control plane's data is never destroyed by accident.
//! `destroy` is refused at plan; replacing every replica at once never removes the last voting member (the
//! replacements join next to it, and the data stays); with protection off, destroy leaves the sim empty.

use std::time::Duration;

use acceptance_tests::walk::{
    KEYS, assert_sim_empty, check, edit_config, hold_walk_lock, release_walk_lock,
    replicas_by_zone, set_zones, walk_config_in, write_keys,
};
use acceptance_tests::{Sim, Workspace, for_each_client};

const A: &str = "us-central1-a";
const B: &str = "us-central1-b";
const C: &str = "us-central1-c";

/// The walk-through's configuration with the cluster's protection at its default (on).
fn protected_config(sim: &Sim) -> String {
    let config = walk_config_in(sim, A);
    let off = "  deletion_protection       = false # scenarios end with a destroy\n";
    edit_config(config, &[(off, "")])
}

fn keys_on(sim: &Sim, vm: &str) -> usize {
    sim.ssh(vm, &["etcdctl", "get", "walk/", "--prefix", "--keys-only"])
        .lines()
        .filter(|l| l.starts_with("walk/k"))
        .count()
}

#[test]
fn protection_refuses_destroy_and_never_removes_the_last_voter() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("protection-{client}"));
        let ws = Workspace::new(client, "protection").with_timeout(Duration::from_secs(400));
        ws.write_main_tf(&protected_config(&sim));
        ws.init();

        // One replica: replacing it would delete the only copy. The delete is refused and the replica kept.
        set_zones(&ws, &[A]);
        ws.apply();
        let sole = replicas_by_zone(&ws)[A].clone();
        write_keys(&sim, &sole);
        let address = format!("-replace=ha_master_replica.r[\"{A}\"]");
        let apply = ws.run(&[
            "apply",
            "-input=false",
            "-no-color",
            "-auto-approve",
            &address,
        ]);
        assert_ne!(
            apply.code,
            Some(0),
            "[{client}] the replace must be refused:\n{apply}"
        );
        apply.assert_contains(&format!(
            "Replica {sole} holds the cluster's last voting etcd member"
        ));
        apply.assert_contains("deletion_protection = false");
        assert_eq!(
            sim.names("instances"),
            vec![sole.clone()],
            "[{client}] the VM is kept"
        );
        assert_eq!(keys_on(&sim, &sole), KEYS, "[{client}] the data is there");
        // The refused delete released the cluster's lock before it answered: a lock left behind made the next
        // plan stand aside, and the destroy below planned clean.
        let address = sim
            .gcloud(&[
                "compute",
                "addresses",
                "describe",
                "walk-ip",
                "--region",
                "us-central1",
            ])
            .unwrap_or_else(|e| panic!("[{client}] gcloud addresses describe: {e}"));
        assert!(
            address["labels"].get("ha-lock-token").is_none(),
            "[{client}] the refused delete left the cluster locked: {}",
            address["labels"]
        );
        // Plan, too, says a destroy of the last replica would be refused.
        set_zones(&ws, &[]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
        plan.assert_contains("holds the cluster's last voting etcd member");
        // While another process holds the cluster's lock, the plan does not judge a half-done change, and says so
        // rather than plan the destroy in silence (here a holder that died: gcloud writes its labels).
        hold_walk_lock(
            &sim,
            "us-central1",
            "ci-7-pid-9",
            "roll-replica-x",
            1796600005,
        );
        let aside = ws.run(&["plan", "-input=false", "-no-color"]);
        aside.assert_contains(&format!(
            "Did not check replica {sole}'s change against etcd: cluster walk is locked"
        ));
        aside.assert_contains("ci-7-pid-9");
        release_walk_lock(&sim, "us-central1");

        // Three replicas, every one replaced in one apply: whatever order the lock gives the deletes, one voter
        // always stays, so the data does too. Either every replica was replaced next to a voter, or the last
        // delete was refused, naming the replica it kept.
        set_zones(&ws, &[A, B, C]);
        ws.apply();
        let before = replicas_by_zone(&ws);
        let mut args = vec!["apply", "-input=false", "-no-color", "-auto-approve"];
        let replaces: Vec<String> = [A, B, C]
            .iter()
            .map(|z| format!("-replace=ha_master_replica.r[\"{z}\"]"))
            .collect();
        args.extend(replaces.iter().map(String::as_str));
        let replaced = ws.run(&args);
        if replaced.code != Some(0) {
            replaced.assert_contains("holds the cluster's last voting etcd member");
            replaced.assert_contains("deletion protection");
        }
        // A plain apply finishes whatever was left; the walk-through's check includes every key.
        ws.apply();
        check(client, &ws, &sim, 3);
        let after = replicas_by_zone(&ws);
        let kept: Vec<&String> = before
            .values()
            .filter(|n| after.values().any(|m| m == *n))
            .collect();
        assert!(
            kept.len() <= 1,
            "[{client}] at most the last voter was kept: {kept:?}"
        );

        // destroy: refused at plan, naming the attribute to set. The client plans the replicas' destroys before
        // or beside the cluster's: judged together they remove every voter, which is refused as the cluster's own
        // destroy is; whichever the client plans first stops the plan.
        let destroy = ws.run(&["plan", "-destroy", "-input=false", "-no-color"]);
        assert_eq!(
            destroy.code,
            Some(1),
            "[{client}] destroy must be refused:\n{destroy}"
        );
        let said = destroy.combined();
        assert!(
            said.contains("is protected from deletion")
                || said.contains("This plan removes every voting etcd member"),
            "[{client}] the refusal names protection:\n{destroy}"
        );
        destroy.assert_contains("set `deletion_protection = false`");

        // Protection off, applied, then destroy: nothing of the cluster is left.
        ws.write_main_tf(&edit_config(
            protected_config(&sim),
            &[(
                "  multizone                 = true\n",
                "  multizone                 = true\n  deletion_protection       = false\n",
            )],
        ));
        ws.apply();
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}
