//! Reliability (#13): a zone goes down in the middle of a roll. Once the first replica has rolled, another
//! replica's zone goes down (ha-sim `zone-down`: its VM stops, calls in the zone answer 503). The roll must stop
//! without touching a third replica while etcd has only two members up, say why in a sentence, lose no
//! acknowledged write, and a later apply (once the zone is back) must finish the roll with the walk-through's
//! full check.

use std::time::{Duration, Instant};

use acceptance_tests::faults::Event;
use acceptance_tests::probe::{assert_no_write_lost, keys_under, write_through};
use acceptance_tests::walk::{THREE_ZONES, check, set_vars, three_replicas, write_keys};
use acceptance_tests::{Sim, for_each_client};

const NEW: &str = "e2-standard-4";

fn machine_type(sim: &Sim, vm: &str) -> String {
    sim.instance(vm)["machineType"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_zone_outage_stops_a_roll_and_a_later_apply_finishes_it() {
    for_each_client(|client| {
        let (sim, ws, by_zone) = three_replicas(client, "zone-outage", Duration::from_secs(600));
        let vms: Vec<String> = by_zone.values().cloned().collect();
        write_keys(&sim, &vms[0]);

        set_vars(&ws, &THREE_ZONES, &[("machine_type", NEW)]);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (apply, downed, writes) = std::thread::scope(|s| {
            let writer =
                s.spawn(|| write_through(&sim, &vms, "outage", Duration::from_millis(100), &stop));
            let apply =
                s.spawn(|| ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]));
            // Once one replica runs the new machine type, take down the zone of one still on the old one and
            // still running (not the one being rolled, if the next has already stopped).
            let until = Instant::now() + Duration::from_secs(300);
            let downed = loop {
                assert!(
                    Instant::now() < until,
                    "[{client}] no replica rolled in time"
                );
                let rolled = vms.iter().any(|v| {
                    machine_type(&sim, v) == NEW && sim.instance(v)["status"] == "RUNNING"
                });
                let waiting = by_zone.iter().find(|(_, v)| {
                    machine_type(&sim, v) != NEW && sim.instance(v)["status"] == "RUNNING"
                });
                if let (true, Some((zone, vm))) = (rolled, waiting) {
                    sim.event(Event::ZoneDown {
                        zone: zone.to_string(),
                    });
                    break (zone.clone(), vm.clone());
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let apply = apply.join().unwrap();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (apply, downed, writer.join().unwrap())
        });
        let (zone, down_vm) = downed;
        apply.assert_failure();
        let out = apply.combined();
        // The downed replica's own roll stops at once, naming the zone (not after retrying into its deadline).
        assert!(
            out.contains(&format!("zone {zone} is DOWN")),
            "[{client}] the failure does not say that {zone} is down:\n{out}"
        );
        // Never more than one member away by the roll's own hand: the downed replica is the outage's, and the
        // roll left no other replica stopped.
        let stopped: Vec<&String> = vms
            .iter()
            .filter(|v| **v != down_vm && sim.instance(v)["status"] != "RUNNING")
            .collect();
        assert!(
            stopped.is_empty(),
            "[{client}] the roll went on into the outage and left {stopped:?} stopped"
        );
        let up: Vec<String> = vms.iter().filter(|v| **v != down_vm).cloned().collect();
        assert_no_write_lost(client, &sim, &up, "outage", &writes.acknowledged);

        // The zone comes back: a plain apply finishes the roll.
        sim.event(Event::ZoneUp { zone: zone.clone() });
        ws.apply();
        for vm in &vms {
            assert_eq!(
                machine_type(&sim, vm),
                NEW,
                "[{client}] {vm} was not rolled"
            );
        }
        assert_no_write_lost(client, &sim, &vms, "outage", &writes.acknowledged);
        assert!(
            keys_under(&sim, &vms[0], "walk").len() >= 5,
            "[{client}] the keys written first are gone"
        );
        check(client, &ws, &sim, 3);
    });
}
