//! A roll asks Compute Engine again, under the cluster's lock and before it stops or deletes a master, whether it
//! still has the machine type and image the master would come back on (`domain::boot_check`). Plan asked too, but
//! a roll can start long after it: here the replicas' rolls wait for the lock, held by another apply (labels
//! written with gcloud), and meanwhile the type, then the image, is withdrawn (the sim answers 404, as Compute
//! Engine does for one that is gone). The apply fails naming it, no master was stopped or deleted, and once the
//! catalogue has it again the same apply rolls every replica with every key kept.
//!
//! Before, the roll stopped the first master and failed at `setMachineType`, or deleted its VM and failed at
//! `instances.insert`, leaving it down.

use std::time::{Duration, Instant};

use acceptance_tests::faults::{Effect, Failpoint, Trigger};
use acceptance_tests::walk::{
    check, hold_walk_lock, not_running, release_walk_lock, set_vars, walk_config_in, write_keys,
};
use acceptance_tests::{Client, Sim, Workspace, for_each_client};

const ZONES: [&str; 2] = ["us-central1-a", "us-central1-b"];
const OLD_IMAGE: &str = "projects/cos-cloud/global/images/family/cos-stable";
const NEW_IMAGE: &str = "projects/cos-cloud/global/images/family/cos-121-lts";

/// How many times the sim saw Compute method `api` since its request log was last reset.
fn calls(sim: &Sim, api: &str) -> u64 {
    sim.requests(false)["byMethod"][format!("compute.{api}")]
        .as_u64()
        .unwrap_or(0)
}

/// Applies while another holder has the lock; once a roll waits for it, Compute Engine stops answering `api`
/// (404) and the lock is released. Returns the apply's output, which must fail.
fn apply_withdrawing(client: Client, ws: &Workspace, sim: &Sim, api: &str) -> String {
    // Another apply holds the lock and renewed it just now, so the provider waits (it takes a lock over only
    // after `lock_ttl` without a renewal).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    hold_walk_lock(sim, "us-central1", "ci-7-pid-9", "hold-for-test", now);
    let mut child = ws.spawn(
        &["apply", "-input=false", "-no-color", "-auto-approve"],
        "withdrawn",
    );
    let waiting = "for the lock of cluster walk: held by ci-7-pid-9";
    let start = Instant::now();
    while !ws.read_file("withdrawn.stderr").contains(waiting) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "[{client}] the apply ended ({status}) before a roll waited for the lock:\n{}",
                ws.read_file("withdrawn.stdout") + &ws.read_file("withdrawn.stderr")
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "[{client}] no roll waited for the lock"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    sim.requests(true);
    sim.add_failpoint(Failpoint::new(
        Trigger::Request {
            method: Some("GET".into()),
            api: Some(api.into()),
            path: None,
        },
        Effect::Status { status: 404 },
    ));
    release_walk_lock(sim, "us-central1");
    let status = child.wait().unwrap();
    let output = ws.read_file("withdrawn.stdout") + &ws.read_file("withdrawn.stderr");
    assert!(
        !status.success(),
        "[{client}] the apply must fail:\n{output}"
    );
    // Only what the roll asked under the lock, then nothing that takes a master down.
    assert!(
        calls(sim, api) >= 1,
        "[{client}] the roll did not ask {api}"
    );
    for down in [
        "instances.stop",
        "instances.delete",
        "instances.setMachineType",
        "targetPools.removeInstance",
    ] {
        assert_eq!(
            calls(sim, down),
            0,
            "[{client}] {down} was called:\n{output}"
        );
    }
    let stopped = not_running(sim);
    assert!(
        stopped.is_empty(),
        "[{client}] masters left down: {stopped:?}"
    );
    sim.clear_failpoints();
    output
}

#[test]
fn a_roll_does_not_take_a_master_down_for_a_type_or_image_compute_engine_no_longer_has() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("withdrawn-{client}"));
        let mut ws = Workspace::new(client, "withdrawn").with_timeout(Duration::from_secs(300));
        ws.set_env("TF_LOG_PROVIDER", "info");
        ws.write_main_tf(&walk_config_in(&sim, ZONES[0]));
        ws.init();
        set_vars(
            &ws,
            &ZONES,
            &[("machine_type", "e2-standard-2"), ("image", OLD_IMAGE)],
        );
        ws.apply();
        let names: Vec<String> = sim.vm_field("status").into_keys().collect();
        write_keys(&sim, &names[0]);

        // A resize: stop, set the type, start. The type is withdrawn while the rolls wait.
        set_vars(
            &ws,
            &ZONES,
            &[("machine_type", "e2-standard-4"), ("image", OLD_IMAGE)],
        );
        let output = apply_withdrawing(client, &ws, &sim, "machineTypes.get");
        let said = acceptance_tests::normalize_ws(&output);
        assert!(
            said.contains(
                "did not start: Machine type e2-standard-4 does not exist in zone us-central1-"
            ),
            "[{client}] {output}"
        );
        assert!(
            said.contains("Nothing was stopped or deleted"),
            "[{client}] {output}"
        );
        let types = sim.vm_field("machineType");
        assert!(
            types.values().all(|t| t.ends_with("/e2-standard-2")),
            "[{client}] {types:?}"
        );

        // A rebuild: delete, create again from the image. The image family is withdrawn while the rolls wait.
        set_vars(
            &ws,
            &ZONES,
            &[("machine_type", "e2-standard-4"), ("image", NEW_IMAGE)],
        );
        let output = apply_withdrawing(client, &ws, &sim, "images.getFromFamily");
        assert!(
            acceptance_tests::normalize_ws(&output).contains(
                "did not start: Image family cos-121-lts does not exist in project cos-cloud"
            ),
            "[{client}] {output}"
        );

        // The catalogue has both again: the same configuration rolls every replica and keeps every key. The
        // progress lines list each roll's steps before they run.
        let rolled = ws.apply();
        for vm in &names {
            rolled.assert_contains(&format!("roll of replica {vm}: "));
        }
        rolled.assert_contains(" steps: 1. ");
        rolled.assert_contains(". taking it out of the load balancer;");
        rolled.assert_contains("creating its VM again on its etcd data disk;");
        let types = sim.vm_field("machineType");
        assert!(
            types.values().all(|t| t.ends_with("/e2-standard-4")),
            "[{client}] {types:?}"
        );
        check(client, &ws, &sim, ZONES.len());
        assert_eq!(
            ws.plan_detailed_exitcode(),
            0,
            "[{client}] a second plan is empty"
        );
    });
}
