use super::*;
use crate::{DataDisk, Error, ExternalIp, InstanceSpec};
use std::collections::BTreeMap;

pub fn spec(name: &str) -> InstanceSpec {
    InstanceSpec {
        name: name.into(),
        zone: ZONE.into(),
        machine_type: "e2-standard-2".into(),
        image: "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts".into(),
        disk_size_gb: 20,
        disk_type: Some("pd-ssd".into()),
        network: "default".into(),
        subnetwork: None,
        network_ip: None,
        external_ip: ExternalIp::Ephemeral,
        tags: vec!["ha-master".into()],
        labels: BTreeMap::from([
            ("cluster".into(), "prod".into()),
            ("role".into(), "master".into()),
        ]),
        metadata: vec![("cluster-name".into(), "prod".into())],
        service_account: None,
        data_disk: None,
    }
}

#[tokio::test]
async fn insert_get_list_delete() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let vm = c.insert_instance(&spec("m-1"), deadline()).await.unwrap();
    assert_eq!(vm.status, "RUNNING");
    assert_eq!(vm.machine_type, "e2-standard-2");
    assert_eq!(vm.zone, ZONE);
    assert!(
        vm.internal_ip.is_some() && vm.external_ip.is_some(),
        "{vm:?}"
    );
    assert_eq!(vm.access_config_name.as_deref(), Some("External NAT"));
    assert_eq!(vm.nic_name, "nic0");
    assert_eq!(vm.metadata_value("cluster-name"), Some("prod"));
    assert_eq!(vm.tags, ["ha-master"]);
    assert!(vm.id != 0 && vm.self_link.ends_with("/zones/us-central1-a/instances/m-1"));

    // Inserting again (a retried apply) accepts the instance that is already there.
    let again = c.insert_instance(&spec("m-1"), deadline()).await.unwrap();
    assert_eq!(again.id, vm.id);
    let mut other = spec("m-2");
    other.labels.insert("cluster".into(), "staging".into());
    c.insert_instance(&other, deadline()).await.unwrap();

    let prod = BTreeMap::from([("cluster".to_string(), "prod".to_string())]);
    let listed = c.list_instances(ZONE, &prod, deadline()).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["m-1"]
    );
    assert_eq!(
        c.list_instances(ZONE, &BTreeMap::new(), deadline())
            .await
            .unwrap()
            .len(),
        2
    );

    let mut elsewhere = spec("m-3");
    elsewhere.zone = "us-central1-b".into();
    c.insert_instance(&elsewhere, deadline()).await.unwrap();
    let mut abroad = spec("m-4");
    abroad.zone = "europe-west1-b".into();
    c.insert_instance(&abroad, deadline()).await.unwrap();
    let in_region = c
        .list_instances_in_region(REGION, &prod, deadline())
        .await
        .unwrap();
    let names: Vec<_> = in_region
        .iter()
        .map(|i| (i.zone.as_str(), i.name.as_str()))
        .collect();
    assert_eq!(names, [(ZONE, "m-1"), ("us-central1-b", "m-3")]);

    c.delete_instance(ZONE, "m-1", deadline()).await.unwrap();
    assert_eq!(c.get_instance(ZONE, "m-1", deadline()).await.unwrap(), None);
    c.delete_instance(ZONE, "m-1", deadline()).await.unwrap();
}

#[tokio::test]
async fn an_existing_instance_with_another_internal_ip_is_a_conflict() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let vm = c.insert_instance(&spec("m-1"), deadline()).await.unwrap();
    let mut s = spec("m-1");
    s.network_ip = Some("127.10.9.9".into());
    let err = c.insert_instance(&s, deadline()).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert!(
        err.to_string().contains(vm.internal_ip.as_deref().unwrap()),
        "{err}"
    );
}

/// The replica flow: reserve the internal IP first (etcd names it before the VM exists), then create the VM on it
/// with the cluster's static IP as its NAT.
#[tokio::test]
async fn a_vm_uses_its_reserved_internal_ip_and_the_static_external_ip() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let internal = c
        .reserve_internal_address(REGION, "m-1-ip", None, "a replica of test", deadline())
        .await
        .unwrap();
    let external = c
        .reserve_external_address(REGION, "api", deadline())
        .await
        .unwrap();
    let mut s = spec("m-1");
    s.network_ip = Some(internal.ip.clone());
    s.external_ip = ExternalIp::Static(external.ip.clone());
    let vm = c.insert_instance(&s, deadline()).await.unwrap();
    assert_eq!(vm.internal_ip.as_deref(), Some(internal.ip.as_str()));
    assert_eq!(vm.external_ip.as_deref(), Some(external.ip.as_str()));
    let api = c
        .get_address(REGION, "api", deadline())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(api.status, "IN_USE");
    assert_eq!(api.users, std::slice::from_ref(&vm.self_link));
}

#[tokio::test]
async fn the_static_ip_moves_off_the_vm_and_back() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let ip = c
        .reserve_external_address(REGION, "api", deadline())
        .await
        .unwrap()
        .ip;
    let mut s = spec("m-1");
    s.external_ip = ExternalIp::Static(ip.clone());
    c.insert_instance(&s, deadline()).await.unwrap();

    let vm = c
        .swap_access_config(ZONE, "m-1", None, deadline())
        .await
        .unwrap();
    let ephemeral = vm.external_ip.clone().unwrap();
    assert_ne!(ephemeral, ip);
    assert_eq!(
        c.get_address(REGION, "api", deadline())
            .await
            .unwrap()
            .unwrap()
            .status,
        "RESERVED"
    );

    let vm = c
        .swap_access_config(ZONE, "m-1", Some(&ip), deadline())
        .await
        .unwrap();
    assert_eq!(vm.external_ip.as_deref(), Some(ip.as_str()));
    // Already there: no further access-config calls.
    c.swap_access_config(ZONE, "m-1", Some(&ip), deadline())
        .await
        .unwrap();
    assert_eq!(sim.calls("instances.deleteAccessConfig").await, 2);
    assert_eq!(sim.calls("instances.addAccessConfig").await, 2);

    let vm = c
        .set_external_ip(ZONE, "m-1", &ExternalIp::None, deadline())
        .await
        .unwrap();
    assert_eq!((vm.external_ip, vm.access_config_name), (None, None));
}

#[tokio::test]
async fn labels_and_metadata_are_replaced_with_fingerprints() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let before = c.insert_instance(&spec("m-1"), deadline()).await.unwrap();
    let labels = BTreeMap::from([
        ("cluster".to_string(), "prod".to_string()),
        ("tier".into(), "gold".into()),
    ]);
    let vm = c
        .set_labels(ZONE, "m-1", &labels, deadline())
        .await
        .unwrap();
    assert_eq!(vm.labels, labels);
    assert_ne!(vm.label_fingerprint, before.label_fingerprint);

    let md = vec![
        ("user-data".to_string(), "#cloud-config\n".to_string()),
        ("cluster-name".into(), "prod".into()),
    ];
    let vm = c.set_metadata(ZONE, "m-1", &md, deadline()).await.unwrap();
    assert_eq!(vm.metadata, md);
    // Unchanged: no call at all.
    c.set_metadata(ZONE, "m-1", &md, deadline()).await.unwrap();
    assert_eq!(sim.calls("instances.setMetadata").await, 1);
}

#[tokio::test]
async fn a_stale_fingerprint_is_reread_and_retried() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    c.insert_instance(&spec("m-1"), deadline()).await.unwrap();
    // Someone else changes the labels between our read and our write: GCE answers 412.
    sim.fail_requests("instances.setLabels", 412, 1).await;
    sim.fail_requests("instances.setMetadata", 412, 2).await;
    let labels = BTreeMap::from([("cluster".to_string(), "other".to_string())]);
    assert_eq!(
        c.set_labels(ZONE, "m-1", &labels, deadline())
            .await
            .unwrap()
            .labels,
        labels
    );
    assert_eq!(sim.statuses("instances.setLabels").await, [412, 200]);
    let md = vec![("k".to_string(), "v".to_string())];
    assert_eq!(
        c.set_metadata(ZONE, "m-1", &md, deadline())
            .await
            .unwrap()
            .metadata,
        md
    );
    assert_eq!(sim.statuses("instances.setMetadata").await, [412, 412, 200]);
}

#[tokio::test]
async fn quota_exceeded_names_the_quota_and_its_limit() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    sim.fail_operation("instances.insert", "QUOTA_EXCEEDED")
        .await;
    let err = c
        .insert_instance(&spec("m-1"), deadline())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::QuotaExceeded { .. }), "{err:?}");
    assert_eq!(err.operation_code(), Some("QUOTA_EXCEEDED"));
    let text = err.to_string();
    assert!(
        text.contains("instance projects/proj/zones/us-central1-a/instances/m-1"),
        "{text}"
    );
    assert!(
        text.contains("CPUS-per-project-region") && text.contains("limit 8"),
        "{text}"
    );
    assert!(text.contains("region us-central1"), "{text}");
}

#[tokio::test]
async fn a_stock_out_names_the_zone() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    sim.fail_operation("instances.insert", "ZONE_RESOURCE_POOL_EXHAUSTED")
        .await;
    let err = c
        .insert_instance(&spec("m-1"), deadline())
        .await
        .unwrap_err();
    match &err {
        Error::ZoneExhausted { zone, .. } => assert_eq!(zone, ZONE),
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains("zone us-central1-a does not have enough resources"),
        "{err}"
    );
}

#[tokio::test]
async fn zones_and_regions() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let z = c.get_zone(ZONE, deadline()).await.unwrap();
    assert_eq!((z.region.as_str(), z.status.as_str()), (REGION, "UP"));
    let r = c.get_region("europe-west1", deadline()).await.unwrap();
    assert_eq!(
        r.zones,
        ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
    );
    assert!(
        c.get_region("mars-north1", deadline())
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn a_data_disk_made_with_its_vm_outlives_it_and_a_rebuilt_vm_takes_it_back() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let mut first = spec("m1");
    first.data_disk = Some(DataDisk::Create {
        name: "m1-pd".into(),
        size_gb: 20,
        disk_type: "pd-ssd".into(),
        device_name: "master-pd".into(),
        labels: BTreeMap::from([("ha-restore-generation".to_string(), "2".to_string())]),
    });
    let vm = c.insert_instance(&first, deadline()).await.unwrap();
    assert_eq!(
        vm.attached_disks,
        BTreeMap::from([("master-pd".to_string(), "m1-pd".to_string())])
    );
    let disk = c
        .get_disk(ZONE, "m1-pd", deadline())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((disk.size_gb, disk.disk_type.as_str()), (20, "pd-ssd"));
    assert_eq!(disk.users, vec!["m1".to_string()]);
    // The disk's own labels, given with the VM's insert.
    assert_eq!(
        disk.labels.get("ha-restore-generation").map(String::as_str),
        Some("2")
    );
    // GCE refuses to delete a disk a VM holds.
    let refused = c.delete_disk(ZONE, "m1-pd", deadline()).await.unwrap_err();
    assert!(refused.to_string().contains("m1-pd"), "{refused}");

    // Stop, resize, start: the VM keeps its disks.
    c.stop_instance(ZONE, "m1", deadline()).await.unwrap();
    c.set_machine_type(ZONE, "m1", "e2-standard-4", deadline())
        .await
        .unwrap();
    let resized = c.start_instance(ZONE, "m1", deadline()).await.unwrap();
    assert_eq!(resized.machine_type, "e2-standard-4");
    assert_eq!(resized.attached_disks, vm.attached_disks);

    // Deleted, the VM lets its data disk go free; rebuilt with the same name, it takes it back.
    c.delete_instance(ZONE, "m1", deadline()).await.unwrap();
    let free = c
        .get_disk(ZONE, "m1-pd", deadline())
        .await
        .unwrap()
        .unwrap();
    assert!(free.users.is_empty(), "{free:?}");
    let mut rebuilt = spec("m1");
    rebuilt.data_disk = Some(DataDisk::Attach {
        name: "m1-pd".into(),
        device_name: "master-pd".into(),
    });
    let again = c.insert_instance(&rebuilt, deadline()).await.unwrap();
    assert_eq!(again.attached_disks, vm.attached_disks);
    c.delete_instance(ZONE, "m1", deadline()).await.unwrap();
    c.delete_disk(ZONE, "m1-pd", deadline()).await.unwrap();
    assert!(
        c.get_disk(ZONE, "m1-pd", deadline())
            .await
            .unwrap()
            .is_none()
    );
    // Deleting what is gone is done.
    c.delete_disk(ZONE, "m1-pd", deadline()).await.unwrap();
}

#[tokio::test]
async fn set_machine_type_is_refused_while_the_vm_runs() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    c.insert_instance(&spec("m1"), deadline()).await.unwrap();
    // The refusal is a `resourceNotReady`, which the client retries until its deadline as Google's provider
    // does: a short one keeps the test from waiting 30 s for the same answer (5 s, not 2: on a loaded 2-core CI
    // machine an attempt can still be waiting for its answer when 2 s run out).
    let short = Instant::now() + Duration::from_secs(5);
    let e = c
        .set_machine_type(ZONE, "m1", "e2-standard-4", short)
        .await
        .unwrap_err();
    assert!(e.to_string().to_lowercase().contains("stopped"), "{e}");
}

/// A zone or region that does not exist holds nothing: reads find nothing and deletes have nothing to do, so a
/// replica created with a misspelt zone can be read and replaced. Creating there still fails, with GCE's sentence.
#[tokio::test]
async fn nothing_exists_in_a_zone_or_region_that_does_not() {
    let sim = Sim::start().await;
    let c = sim.compute().await;
    let typo = "europe-west1-q";
    assert!(
        c.get_instance(typo, "m-1", deadline())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        c.get_disk(typo, "m-1-data", deadline())
            .await
            .unwrap()
            .is_none()
    );
    c.delete_instance(typo, "m-1", deadline()).await.unwrap();
    c.delete_disk(typo, "m-1-data", deadline()).await.unwrap();
    assert!(
        c.get_address("europe-west9z", "m-1-int", deadline())
            .await
            .unwrap()
            .is_none()
    );
    let mut vm = spec("m-1");
    vm.zone = typo.into();
    let err = c.insert_instance(&vm, deadline()).await.unwrap_err();
    assert!(
        err.is_unknown_location() && err.to_string().contains("Unknown zone."),
        "{err}"
    );
    // A zone that exists answers as before.
    assert!(
        c.get_instance(ZONE, "m-1", deadline())
            .await
            .unwrap()
            .is_none()
    );
}
