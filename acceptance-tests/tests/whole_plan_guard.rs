//! A plan that apply could not finish is refused at plan, judged as a whole: a rename of a cluster with replicas
//! (which would replace the cluster and every master, empty) and the removal of every replica of a protected
//! cluster (which would delete all but one and stop at the last voter) are each refused before anything is
//! touched, under both clients. A removal that can finish plans with notes counting every replica that leaves,
//! and the apply does exactly that. Each check fails on the provider before the change (no plan-time judgement of
//! a cluster's replacement; each replica's removal judged alone, so both plans were clean).

use std::time::Duration;

use acceptance_tests::walk::{
    KEYS, THREE_ZONES, assert_sim_empty, check, edit_config, replicas_by_zone, set_zones,
    walk_config_in, write_keys,
};
use acceptance_tests::{Client, CmdOutput, Sim, Workspace, for_each_client};

const PROTECTION_OFF: &str = "  deletion_protection       = false # scenarios end with a destroy\n";

/// The walk-through with the cluster's deletion protection at its default (on).
fn protected_config(sim: &Sim) -> String {
    edit_config(walk_config_in(sim, THREE_ZONES[0]), &[(PROTECTION_OFF, "")])
}

fn keys_on(sim: &Sim, vm: &str) -> usize {
    sim.ssh(vm, &["etcdctl", "get", "walk/", "--prefix", "--keys-only"])
        .lines()
        .filter(|l| l.starts_with("walk/k"))
        .count()
}

/// A plan and an apply of the current configuration are both refused, saying each of `needles`, and nothing in
/// the sim changed: the same VMs (by id) and every key on each.
#[track_caller]
fn refused_and_untouched(client: Client, ws: &Workspace, sim: &Sim, what: &str, needles: &[&str]) {
    let before = sim.vm_field("id");
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(1),
        "[{client}] {what}: plan must refuse:\n{plan}"
    );
    let apply = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
    assert_ne!(
        apply.code,
        Some(0),
        "[{client}] {what}: apply must refuse:\n{apply}"
    );
    for out in [&plan, &apply] {
        for needle in needles {
            out.assert_contains(needle);
        }
    }
    assert_eq!(
        sim.vm_field("id"),
        before,
        "[{client}] {what}: no VM was made or deleted"
    );
    for vm in before.keys() {
        assert_eq!(
            keys_on(sim, vm),
            KEYS,
            "[{client}] {what}: {vm} keeps every key"
        );
    }
}

fn plan_text(ws: &Workspace) -> CmdOutput {
    ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"])
}

#[test]
fn a_plan_apply_could_not_finish_is_refused_whole_and_one_it_can_finish_says_what_it_does() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("whole-plan-{client}"));
        let ws = Workspace::new(client, "whole-plan").with_timeout(Duration::from_secs(400));
        ws.write_main_tf(&protected_config(&sim));
        ws.init();
        set_zones(&ws, &THREE_ZONES);
        ws.apply();
        let by_zone = replicas_by_zone(&ws);
        let (a, b, c) = (
            &by_zone[THREE_ZONES[0]],
            &by_zone[THREE_ZONES[1]],
            &by_zone[THREE_ZONES[2]],
        );
        write_keys(&sim, a);

        // A rename replaces the cluster, and with it every master: refused at the attribute, whatever the
        // protection says, with the way that works.
        ws.write_main_tf(&edit_config(
            protected_config(&sim),
            &[(
                "  name                      = \"walk\"\n",
                "  name                      = \"walk-renamed\"\n",
            )],
        ));
        refused_and_untouched(
            client,
            &ws,
            &sim,
            "rename",
            &[
                "Cluster walk cannot be replaced while it has replicas",
                "Changing `name` replaces ha_master_cluster walk",
                a,
                b,
                c,
                "restore { source = \"snapshot\"",
            ],
        );

        // Every replica removed from a protected cluster: apply would delete two and stop at the third.
        ws.write_main_tf(&protected_config(&sim));
        set_zones(&ws, &[]);
        refused_and_untouched(
            client,
            &ws,
            &sim,
            "removal of every replica",
            &[
                "This plan removes every voting etcd member",
                "Remove at most 2 of these replicas in one apply",
                "deletion_protection = false",
            ],
        );

        // Two of three removed: the plan counts both in one note, and the apply does exactly that.
        set_zones(&ws, &[THREE_ZONES[0]]);
        let plan = plan_text(&ws);
        assert_eq!(plan.code, Some(2), "[{client}] the shrink plans:\n{plan}");
        let (gone_1, gone_2) = if b < c { (b, c) } else { (c, b) };
        plan.assert_contains(&format!(
            "Fault tolerance drops from 1 to 0 when {gone_1} and {gone_2} leave"
        ));
        plan.assert_contains(&format!(
            "The static IP moves from the load balancer to {a}"
        ));
        assert!(
            !plan.combined().contains("last voting etcd member"),
            "[{client}] one voter stays: nothing to refuse:\n{plan}"
        );
        ws.apply();
        check(client, &ws, &sim, 1);
        assert_eq!(
            sim.vm_field("id").into_keys().collect::<Vec<_>>(),
            vec![a.clone()],
            "[{client}] exactly the two replicas the plan named were removed"
        );

        // Protection off, applied, then destroy: nothing of the cluster is left.
        ws.write_main_tf(&walk_config_in(&sim, THREE_ZONES[0]));
        ws.apply();
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}
