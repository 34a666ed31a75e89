//! The quorum guard under both clients, with real etcd: a change that would leave etcd without quorum is refused
//! by `plan` (before anything is touched), with a message that names the unhealthy members and says what to do;
//! doing what it says (a plain apply starts the crashed VMs again) brings the cluster back, and the walk-through's
//! full check holds afterwards.

use std::time::Duration;

use acceptance_tests::faults::Event;
use acceptance_tests::walk::{
    check, replicas_by_zone, set_zones, three_replicas, wait_until_healthy, write_keys,
};
use acceptance_tests::{Client, CmdOutput, Workspace, for_each_client};

const A: &str = "us-central1-a";
const B: &str = "us-central1-b";
const C: &str = "us-central1-c";
const F: &str = "us-central1-f";

/// A plan that must be refused: it fails, and says each of `needles`.
#[track_caller]
fn plan_refuses(client: Client, ws: &Workspace, needles: &[&str]) -> CmdOutput {
    let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
    assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
    for needle in needles {
        plan.assert_contains(needle);
    }
    plan
}

#[test]
fn plan_refuses_what_would_lose_quorum_and_a_plain_apply_recovers() {
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "quorum-guard", Duration::from_secs(300));
        let (a, b, c) = (&by_zone[A], &by_zone[B], &by_zone[C]);
        write_keys(&sim, a);

        // One of three members down: removing a healthy replica would leave one healthy member of two.
        sim.event(Event::CrashVm {
            instance: c.to_string(),
        });
        // If c led, a and b elect a new leader first; the plan is about one member down, not an election.
        wait_until_healthy(&sim, a);
        wait_until_healthy(&sim, b);
        set_zones(&ws, &[B, C]);
        plan_refuses(
            client,
            &ws,
            &[
                &format!("Removing replica {a} would lose etcd's quorum"),
                &format!("2 of 3 etcd members are healthy (unhealthy: {c})"),
                "Repair or replace the unhealthy replicas first",
            ],
        );

        // Two of three down: quorum is lost, so no member can be added.
        sim.event(Event::CrashVm {
            instance: b.to_string(),
        });
        set_zones(&ws, &[A, B, C, F]);
        let refused = plan_refuses(
            client,
            &ws,
            &[
                "etcd has lost quorum: a new replica cannot join",
                "of 3 etcd members are healthy",
                "a majority of 2 is needed to admit a member",
                "Bring the unhealthy replicas back first",
            ],
        );
        for down in [b, c] {
            refused.assert_contains(down);
        }
        assert_eq!(
            sim.names("instances").len(),
            3,
            "[{client}] a refused plan created nothing"
        );

        // What the message says to do: a plain apply starts both VMs again; their members rejoin with their data.
        set_zones(&ws, &[A, B, C]);
        ws.apply();
        check(client, &ws, &sim, 3);
        assert_eq!(
            replicas_by_zone(&ws),
            by_zone,
            "[{client}] restarting keeps every replica"
        );
    });
}
