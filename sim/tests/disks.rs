//! disks: CRUD, attachment to instances (at insert and with attachDisk/detachDisk), the one-writer and in-use
//! rules, what an instance delete does to its disks, and setMachineType on a stopped instance.

mod common;
use common::*;
use serde_json::{Value, json};

const Z: &str = "europe-west1-b";

/// An instance body whose second disk is the existing disk `disk` as `master-pd`.
fn with_data_disk(name: &str, disk: &str) -> Value {
    let mut b = instance_body(name, Z);
    b["disks"]
        .as_array_mut()
        .unwrap()
        .push(json!({"source": format!("zones/{Z}/disks/{disk}"), "deviceName": "master-pd"}));
    b
}

fn rel(link: &Value) -> String {
    let s = link.as_str().unwrap();
    s[s.find("projects/").unwrap()..].to_string()
}

#[tokio::test]
async fn disks_are_created_read_listed_and_deleted_as_gce_does() {
    let sim = start().await;
    let op = sim
        .post(&format!("zones/{Z}/disks"), disk_body("pd", Z))
        .await;
    assert_eq!(op.body["operationType"], "insert");
    assert!(op.body["zone"].is_string());
    sim.done(&op).await;
    let d = sim.get(&format!("zones/{Z}/disks/pd")).await.body;
    assert_eq!(d["kind"], "compute#disk");
    assert_eq!(d["status"], "READY");
    assert_eq!(d["sizeGb"], "20", "int64 as a string");
    assert_eq!(
        d["type"],
        format!(
            "{}compute/v1/projects/{PROJECT}/zones/{Z}/diskTypes/pd-ssd",
            sim.url
        )
    );
    assert_eq!(
        d["selfLink"],
        format!(
            "{}compute/v1/projects/{PROJECT}/zones/{Z}/disks/pd",
            sim.url
        )
    );
    assert!(
        d["zone"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/zones/{Z}"))
    );
    assert!(d["id"].is_string() && d["creationTimestamp"].is_string());
    assert!(d["labelFingerprint"].is_string());
    assert_eq!(d["labels"]["role"], "master-pd");
    assert_eq!(d["description"], "etcd data");
    assert!(d.get("users").is_none(), "no users: the key is omitted");

    // A number for sizeGb is accepted too; a blank pd-standard defaults to 500 GB.
    let mut n = json!({"name": "num", "sizeGb": 30});
    sim.ok("POST", &format!("zones/{Z}/disks"), Some(n.clone()))
        .await;
    assert_eq!(
        sim.get(&format!("zones/{Z}/disks/num")).await.body["sizeGb"],
        "30"
    );
    n["name"] = json!("blank");
    n.as_object_mut().unwrap().remove("sizeGb");
    sim.ok("POST", &format!("zones/{Z}/disks"), Some(n)).await;
    let blank = sim.get(&format!("zones/{Z}/disks/blank")).await.body;
    assert_eq!(blank["sizeGb"], "500");
    assert!(
        blank["type"]
            .as_str()
            .unwrap()
            .ends_with("/diskTypes/pd-standard")
    );

    // Duplicates, unknown names, bad types.
    sim.post(&format!("zones/{Z}/disks"), disk_body("pd", Z))
        .await
        .expect(409, "alreadyExists");
    let missing = sim.get(&format!("zones/{Z}/disks/nope")).await;
    missing.expect(404, "notFound");
    assert_eq!(
        missing.body["error"]["message"],
        format!("The resource 'projects/{PROJECT}/zones/{Z}/disks/nope' was not found")
    );
    let mut bad = disk_body("bad", Z);
    bad["type"] = json!(format!("zones/{Z}/diskTypes/pd-floppy"));
    sim.post(&format!("zones/{Z}/disks"), bad.clone())
        .await
        .expect(404, "notFound");
    bad["type"] = json!("zones/us-east1-b/diskTypes/pd-ssd");
    sim.post(&format!("zones/{Z}/disks"), bad)
        .await
        .expect(400, "invalid");

    // list (with a filter) and aggregatedList.
    let list = sim.get(&format!("zones/{Z}/disks")).await.body;
    assert_eq!(list["kind"], "compute#diskList");
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
    let f = sim
        .get(&format!(
            "zones/{Z}/disks?filter=labels.role%20%3D%20%22master-pd%22"
        ))
        .await
        .body;
    let names: Vec<&str> = f["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pd"]);
    let agg = sim.get("aggregated/disks").await.body;
    assert_eq!(agg["kind"], "compute#diskAggregatedList");
    assert_eq!(
        agg["items"][format!("zones/{Z}")]["disks"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        agg["items"]["zones/us-east1-b"]["warning"]["code"],
        "NO_RESULTS_ON_PAGE"
    );

    let del = sim.delete(&format!("zones/{Z}/disks/pd")).await;
    assert_eq!(del.body["operationType"], "delete");
    sim.done(&del).await;
    sim.get(&format!("zones/{Z}/disks/pd"))
        .await
        .expect(404, "notFound");
}

#[tokio::test]
async fn an_instance_attaches_an_existing_disk_and_holds_it_read_write() {
    let sim = start().await;
    let pd = disk(&sim, "pd", Z).await;
    // A source that does not exist: 404 at insert, and nothing is created (not even the boot disk).
    sim.post(
        &format!("zones/{Z}/instances"),
        with_data_disk("m0", "ghost"),
    )
    .await
    .expect(404, "notFound");
    sim.get(&format!("zones/{Z}/disks/m0"))
        .await
        .expect(404, "notFound");
    sim.get(&format!("zones/{Z}/instances/m0"))
        .await
        .expect(404, "notFound");

    let m1 = instance(&sim, "m1", Z, Some(with_data_disk("m1", "pd"))).await;
    let disks = m1["disks"].as_array().unwrap();
    assert_eq!(disks.len(), 2);
    let boot = &disks[0];
    assert_eq!(boot["boot"], true);
    assert_eq!(boot["autoDelete"], true);
    assert!(boot.get("initializeParams").is_none(), "input only");
    assert_eq!(
        boot["source"],
        format!(
            "{}compute/v1/projects/{PROJECT}/zones/{Z}/disks/m1",
            sim.url
        )
    );
    let data = &disks[1];
    assert_eq!(data["source"], pd["selfLink"]);
    assert_eq!(data["deviceName"], "master-pd");
    assert_eq!(data["boot"], false);
    assert_eq!(data["autoDelete"], false);
    assert_eq!(data["mode"], "READ_WRITE");
    assert_eq!(data["type"], "PERSISTENT");
    assert_eq!(data["interface"], "SCSI");
    assert_eq!(data["index"], 1);

    // The boot disk is a disk resource too; both list the instance as their user.
    let boot_disk = sim.get(&format!("zones/{Z}/disks/m1")).await.body;
    assert_eq!(boot_disk["users"], json!([m1["selfLink"]]));
    assert_eq!(boot_disk["sizeGb"], "20");
    let pd = sim.get(&format!("zones/{Z}/disks/pd")).await.body;
    assert_eq!(pd["users"], json!([m1["selfLink"]]));
    assert!(pd["lastAttachTimestamp"].is_string());

    // In use: it cannot be deleted, nor attached read-write a second time.
    let del = sim.delete(&format!("zones/{Z}/disks/pd")).await;
    del.expect(400, "resourceInUseByAnotherResource");
    assert_eq!(
        del.body["error"]["message"],
        format!(
            "The disk resource 'projects/{PROJECT}/zones/{Z}/disks/pd' is already being used by \
             'projects/{PROJECT}/zones/{Z}/instances/m1'"
        )
    );
    sim.post(&format!("zones/{Z}/instances"), with_data_disk("m2", "pd"))
        .await
        .expect(400, "resourceInUseByAnotherResource");
    sim.get(&format!("zones/{Z}/disks/m2"))
        .await
        .expect(404, "notFound");
    instance(&sim, "m2", Z, None).await;
    let att = sim
        .post(
            &format!("zones/{Z}/instances/m2/attachDisk"),
            json!({"source": pd["selfLink"], "deviceName": "master-pd"}),
        )
        .await;
    att.expect(400, "resourceInUseByAnotherResource");
    // Nor read-only next to the writer.
    sim.post(
        &format!("zones/{Z}/instances/m2/attachDisk"),
        json!({"source": pd["selfLink"], "mode": "READ_ONLY"}),
    )
    .await
    .expect(400, "resourceInUseByAnotherResource");
    // An instance's boot disk name is taken by an existing disk: 409.
    sim.post(&format!("zones/{Z}/instances"), instance_body("pd", Z))
        .await
        .expect(409, "alreadyExists");
}

#[tokio::test]
async fn deleting_an_instance_deletes_auto_delete_disks_and_detaches_the_others() {
    let sim = start().await;
    disk(&sim, "pd", Z).await;
    instance(&sim, "m1", Z, Some(with_data_disk("m1", "pd"))).await;
    // While the delete operation runs the disk is still held.
    sim.ok("DELETE", &format!("zones/{Z}/instances/m1"), None)
        .await;
    sim.get(&format!("zones/{Z}/disks/m1"))
        .await
        .expect(404, "notFound");
    let pd = sim.get(&format!("zones/{Z}/disks/pd")).await.body;
    assert_eq!(pd["status"], "READY");
    assert!(pd.get("users").is_none(), "detached: {pd}");
    assert!(pd["lastDetachTimestamp"].is_string());
    // The same disk goes to the replacement instance.
    let m1 = instance(&sim, "m1", Z, Some(with_data_disk("m1", "pd"))).await;
    assert_eq!(
        sim.get(&format!("zones/{Z}/disks/pd")).await.body["users"],
        json!([m1["selfLink"]])
    );
    // An out-of-band delete releases disks the same way.
    sim.admin(
        "POST",
        "events",
        Some(json!({"event": "deleteInstance", "instance": "m1"})),
    )
    .await;
    assert!(
        sim.get(&format!("zones/{Z}/disks/pd"))
            .await
            .body
            .get("users")
            .is_none()
    );
    sim.get(&format!("zones/{Z}/disks/m1"))
        .await
        .expect(404, "notFound");
    sim.ok("DELETE", &format!("zones/{Z}/disks/pd"), None).await;
}

#[tokio::test]
async fn attach_and_detach_disk_follow_the_same_rules() {
    let sim = start().await;
    let pd = disk(&sim, "pd", Z).await;
    let m1 = instance(&sim, "m1", Z, None).await;
    let base = format!("zones/{Z}/instances/m1");
    sim.post(
        &format!("{base}/attachDisk"),
        json!({"source": format!("zones/{Z}/disks/ghost")}),
    )
    .await
    .expect(404, "notFound");
    let op = sim
        .post(
            &format!("{base}/attachDisk"),
            json!({"source": pd["selfLink"], "deviceName": "master-pd"}),
        )
        .await;
    assert_eq!(op.body["operationType"], "attachDisk");
    sim.done(&op).await;
    let i = sim.get(&base).await.body;
    assert_eq!(i["disks"][1]["deviceName"], "master-pd");
    assert_eq!(i["disks"][1]["index"], 1);
    assert_eq!(i["disks"][1]["autoDelete"], false);
    assert_eq!(
        sim.get(&format!("zones/{Z}/disks/pd")).await.body["users"],
        json!([m1["selfLink"]])
    );
    // The same device name twice is refused.
    disk(&sim, "pd2", Z).await;
    sim.post(
        &format!("{base}/attachDisk"),
        json!({"source": format!("zones/{Z}/disks/pd2"), "deviceName": "master-pd"}),
    )
    .await
    .expect(400, "invalid");

    sim.post(
        &format!("{base}/detachDisk?deviceName=persistent-disk-0"),
        json!({}),
    )
    .await
    .expect(400, "invalid");
    sim.post(&format!("{base}/detachDisk?deviceName=nope"), json!({}))
        .await
        .expect(400, "invalid");
    let op = sim
        .post(
            &format!("{base}/detachDisk?deviceName=master-pd"),
            json!({}),
        )
        .await;
    assert_eq!(op.body["operationType"], "detachDisk");
    sim.done(&op).await;
    assert_eq!(
        sim.get(&base).await.body["disks"].as_array().unwrap().len(),
        1
    );
    let pd = sim.get(&format!("zones/{Z}/disks/pd")).await.body;
    assert!(pd.get("users").is_none() && pd["lastDetachTimestamp"].is_string());
    sim.ok("DELETE", &format!("zones/{Z}/disks/pd"), None).await;
    // The boot disk, held by the instance, cannot be deleted.
    sim.delete(&format!("zones/{Z}/disks/m1"))
        .await
        .expect(400, "resourceInUseByAnotherResource");
    assert_eq!(
        rel(&m1["disks"][0]["source"]),
        format!("projects/{PROJECT}/zones/{Z}/disks/m1")
    );
}

#[tokio::test]
async fn set_machine_type_needs_a_stopped_instance() {
    let sim = start().await;
    instance(&sim, "m1", Z, None).await;
    let base = format!("zones/{Z}/instances/m1");
    let want = format!("zones/{Z}/machineTypes/e2-standard-8");
    let running = sim
        .post(
            &format!("{base}/setMachineType"),
            json!({"machineType": want}),
        )
        .await;
    running.expect(400, "resourceNotReady");
    assert_eq!(
        running.body["error"]["message"],
        "Invalid resource usage: 'Instance should be in the STOPPED state.'."
    );
    assert!(
        sim.get(&base).await.body["machineType"]
            .as_str()
            .unwrap()
            .ends_with("/e2-standard-2")
    );

    sim.ok("POST", &format!("{base}/stop"), None).await;
    sim.post(
        &format!("{base}/setMachineType"),
        json!({"machineType": "zones/us-east1-b/machineTypes/e2-standard-8"}),
    )
    .await
    .expect(400, "invalid");
    let op = sim
        .post(
            &format!("{base}/setMachineType"),
            json!({"machineType": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/{want}")}),
        )
        .await;
    assert_eq!(op.body["operationType"], "setMachineType");
    sim.done(&op).await;
    let i = sim.get(&base).await.body;
    assert_eq!(
        i["machineType"],
        format!("{}compute/v1/projects/{PROJECT}/{want}", sim.url)
    );
    assert_eq!(i["status"], "TERMINATED");
    sim.ok("POST", &format!("{base}/start"), None).await;
    let i = sim.get(&base).await.body;
    assert_eq!(i["status"], "RUNNING");
    assert!(
        i["machineType"]
            .as_str()
            .unwrap()
            .ends_with("/e2-standard-8")
    );
}

#[tokio::test]
async fn a_disk_grows_attached_or_not_and_never_shrinks() {
    let sim = start().await;
    disk(&sim, "pd", Z).await;
    instance(&sim, "m1", Z, None).await;
    let base = format!("zones/{Z}/disks/pd");
    // Attached to a running instance: GCE grows it in place.
    let op = sim
        .post(
            &format!("zones/{Z}/instances/m1/attachDisk"),
            json!({"source": format!("zones/{Z}/disks/pd"), "deviceName": "master-pd"}),
        )
        .await;
    sim.done(&op).await;
    let op = sim
        .post(&format!("{base}/resize"), json!({"sizeGb": "30"}))
        .await;
    assert_eq!(op.body["operationType"], "resize");
    sim.done(&op).await;
    assert_eq!(sim.get(&base).await.body["sizeGb"], "30");
    // Not larger: refused with GCE's sentence, and the size stays.
    for smaller in ["30", "10"] {
        let refused = sim
            .post(&format!("{base}/resize"), json!({"sizeGb": smaller}))
            .await;
        refused.expect(400, "invalid");
        let msg = refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            msg.contains(&format!(
                "New disk size '{smaller}' GiB must be larger than existing size '30' GiB"
            )),
            "{msg}"
        );
    }
    sim.post(&format!("{base}/resize"), json!({}))
        .await
        .expect(400, "required");
    sim.post(
        &format!("zones/{Z}/disks/ghost/resize"),
        json!({"sizeGb": "40"}),
    )
    .await
    .expect(404, "notFound");
    assert_eq!(sim.get(&base).await.body["sizeGb"], "30");
}
