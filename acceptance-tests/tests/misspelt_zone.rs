//! A user's first week (#33): a zone typo must not strand state. A replica in a zone its region does not have is
//! refused at plan, naming the closest zone, before anything is created. A zone that exists at plan but fails the
//! create (taken down in ha-sim after the plan) leaves state the next plan reads; moving the replica to a zone
//! that works converges, and nothing the failed create made is left behind. A machine type the zone does not
//! offer, or an image nobody publishes, is refused at plan before a roll stops any master.

use std::time::Duration;

use acceptance_tests::faults::Event;
use acceptance_tests::walk::{
    assert_sim_empty, replicas_by_zone, set_vars, set_zones, walk_config_in,
};
use acceptance_tests::{Sim, Workspace, for_each_client};

const A: &str = "us-central1-a";
const B: &str = "us-central1-b";
const C: &str = "us-central1-c";

/// Names of the objects of one kind in ha-sim's stored state (`disks`, `addresses`, `instances`).
fn stored(sim: &Sim, kind: &str) -> Vec<String> {
    sim.admin("state")[kind]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, o)| o["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_misspelt_zone_is_refused_at_plan_and_a_failed_create_leaves_state_the_next_plan_reads() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("misspelt-zone-{client}"));
        let ws = Workspace::new(client, "misspelt-zone").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&walk_config_in(&sim, A));
        ws.init();

        // A zone us-central1 does not have: refused at plan with the closest one, and nothing is created.
        set_zones(&ws, &[A, "us-central1-q"]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
        plan.assert_contains("Zone us-central1-q does not exist");
        plan.assert_contains("The closest is `us-central1-a`");
        assert!(
            stored(&sim, "addresses").is_empty() && stored(&sim, "instances").is_empty(),
            "[{client}] a refused plan created something"
        );

        // Past the plan: B exists when planned, and is down when the apply creates the replica there.
        set_zones(&ws, &[A]);
        ws.apply();
        set_zones(&ws, &[A, B]);
        assert_eq!(
            ws.plan_detailed_exitcode(),
            2,
            "[{client}] B is a valid zone"
        );
        sim.event(Event::ZoneDown { zone: B.into() });
        let failed = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        failed.assert_failure();
        failed.assert_contains(&format!("zone {B} is DOWN"));

        // The state the failed apply left is one the next plan reads (no "Could not read replica").
        let plan = ws.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert_eq!(
            plan.code,
            Some(2),
            "[{client}] the plan after a failed create must read the state and plan a change:\n{plan}"
        );

        // The user moves the replica to a zone that works: one apply converges, and the next plan is empty.
        set_zones(&ws, &[A, C]);
        ws.apply();
        assert_eq!(ws.plan_detailed_exitcode(), 0, "[{client}] not converged");
        let by_zone = replicas_by_zone(&ws);
        assert_eq!(
            by_zone.keys().map(String::as_str).collect::<Vec<_>>(),
            [A, C],
            "[{client}] replicas"
        );
        // Nothing of the failed create is left: no disk, internal address or VM but the two replicas'.
        let replicas: Vec<&String> = by_zone.values().collect();
        for kind in ["instances", "disks"] {
            for name in stored(&sim, kind) {
                assert!(
                    replicas.iter().any(|r| name.starts_with(r.as_str())),
                    "[{client}] the failed create left {kind} {name}"
                );
            }
        }
        let internal: Vec<String> = stored(&sim, "addresses")
            .into_iter()
            .filter(|a| a.ends_with("-int"))
            .collect();
        assert_eq!(
            internal.len(),
            2,
            "[{client}] internal addresses: {internal:?}"
        );

        sim.event(Event::ZoneUp { zone: B.into() });
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}

/// A machine type the zone does not offer (a typo of `e2-standard-2`) is refused at plan on the attribute that
/// names it, before a master is created, and before a roll would stop one: on GCE the stop comes first and the
/// `setMachineType` that fails after it, leaving the master down.
#[test]
fn a_machine_type_or_image_compute_engine_lacks_is_refused_at_plan_and_no_master_is_touched() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("misspelt-type-{client}"));
        let ws = Workspace::new(client, "misspelt-type").with_timeout(Duration::from_secs(300));
        ws.write_main_tf(&walk_config_in(&sim, A));
        ws.init();
        let sentence = format!("Machine type e2-standard-3 does not exist in zone {A}");

        set_vars(&ws, &[A], &[("machine_type", "e2-standard-3")]);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, Some(1), "[{client}] plan must refuse:\n{plan}");
        plan.assert_contains(&sentence);
        plan.assert_contains("gcloud compute machine-types list");
        assert!(
            stored(&sim, "addresses").is_empty() && stored(&sim, "instances").is_empty(),
            "[{client}] a refused plan created something"
        );

        set_vars(&ws, &[A, B], &[]);
        ws.apply();
        let before = ["id", "status", "machineType"].map(|f| sim.vm_field(f));
        set_vars(&ws, &[A, B], &[("machine_type", "e2-standard-3")]);
        let roll = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(
            roll.code,
            Some(0),
            "[{client}] the roll must be refused:\n{roll}"
        );
        roll.assert_contains(&sentence);
        assert_eq!(
            ["id", "status", "machineType"].map(|f| sim.vm_field(f)),
            before,
            "[{client}] no master was stopped or changed"
        );
        // An image nobody publishes, by family or by name: a roll would delete each master's VM before its new
        // one failed to boot. Refused at plan, on the cluster's `image`.
        for (image, said) in [
            (
                "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts",
                "Image family ubuntu-2404-lts does not exist in project ubuntu-os-cloud",
            ),
            (
                "projects/cos-cloud/global/images/cos-stable-1",
                "Image cos-stable-1 does not exist in project cos-cloud",
            ),
        ] {
            set_vars(&ws, &[A, B], &[("image", image)]);
            let plan = ws.run(&["plan", "-input=false", "-no-color"]);
            assert_eq!(
                plan.code,
                Some(1),
                "[{client}] {image} must be refused:\n{plan}"
            );
            plan.assert_contains(said);
            plan.assert_contains("gcloud compute images list --project");
        }
        assert_eq!(
            ["id", "status", "machineType"].map(|f| sim.vm_field(f)),
            before,
            "[{client}] no master was stopped or changed"
        );

        set_vars(&ws, &[A, B], &[]);
        assert_eq!(ws.plan_detailed_exitcode(), 0, "[{client}] nothing to undo");
        ws.destroy();
        assert_sim_empty(client, &sim);
    });
}
