//! Out-of-band events: things that happen to the cloud behind the provider's back. Each is data, applied to
//! the `Cloud` in one step; the fabric then kills or restarts processes to match.

use crate::state::resources::MetadataItem;
use crate::state::{Cloud, catalog, ids, links};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum Event {
    /// The VM's processes die and the instance shows TERMINATED.
    CrashVm { instance: String },
    /// The instance vanishes without an operation (someone deleted it in the console).
    DeleteInstance { instance: String },
    /// Every access config of the instance is removed: its external IP is gone, a static address turns RESERVED.
    DetachIp { instance: String },
    /// The instance is removed from the target pool.
    DropPoolMember { pool: String, instance: String },
    /// The forwarding rule vanishes without an operation (someone deleted it in the console): its IP stops
    /// serving and a static address turns RESERVED.
    DeleteForwardingRule { rule: String },
    /// A label of the instance is set (`value`) or removed (no value) by hand; the label fingerprint rotates.
    SetLabel {
        instance: String,
        key: String,
        #[serde(default)]
        value: Option<String>,
    },
    /// A metadata item of the instance is set (`value`) or removed (no value) by hand; the metadata fingerprint
    /// rotates. The running VM is not rebooted, as on GCE: it reads its metadata at its next boot.
    SetMetadata {
        instance: String,
        key: String,
        #[serde(default)]
        value: Option<String>,
    },
    /// The zone reports DOWN, its VMs stop, and mutations in it fail with 503 until it is back.
    ZoneDown { zone: String },
    /// The zone is UP again; VMs the outage stopped restart.
    ZoneUp { zone: String },
    /// Connections from outside the VPC to this guest port on any VM's external IP are refused, as for a host
    /// that no firewall rule admits (e.g. a CI runner outside `etcd_client_source_ranges`).
    BlockPort { port: u16 },
    /// The port is reachable from outside again.
    UnblockPort { port: u16 },
    /// Connections from the sim's host (Terraform, tests) come from this address as the VMs' firewall sees it; no
    /// `ip` = back to the default, 127.0.0.1. A host outside a rule's `sourceRanges` gets no answer from the ports
    /// the rule opens, as on GCE (its connections are dropped, not refused).
    SetClientIp {
        #[serde(default)]
        ip: Option<std::net::Ipv4Addr>,
    },
}

/// Finds an instance key from `name`, `zone/name`, or a full or relative link.
pub fn find_instance(cloud: &Cloud, reference: &str) -> Result<String, String> {
    find(cloud.instances.keys(), reference, "instances", "instance")
}

/// The instance `reference` names (as [`find_instance`] takes it), itself.
pub fn instance<'a>(
    cloud: &'a Cloud,
    reference: &str,
) -> Result<&'a crate::state::resources::Instance, String> {
    let key = find_instance(cloud, reference)?;
    Ok(&cloud.instances[&key])
}

fn find<'a>(
    keys: impl Iterator<Item = &'a String>,
    reference: &str,
    coll: &str,
    what: &str,
) -> Result<String, String> {
    let r = reference.trim_start_matches('/');
    let r = r
        .find("/compute/v1/")
        .map_or(r, |i| &r[i + "/compute/v1/".len()..]);
    let hits: Vec<&String> = keys
        .filter(|k| {
            let name = links::name_of(k);
            let scope = k.split('/').nth(3).unwrap_or_default();
            k.as_str() == r
                || name == r
                || format!("{scope}/{name}") == r
                || k.ends_with(&format!("/{coll}/{r}"))
        })
        .collect();
    match hits.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!("no {what} matches '{reference}'")),
        many => Err(format!(
            "'{reference}' matches {} {what}s; say zone/name",
            many.len()
        )),
    }
}

/// Applies an event; returns a one-line description of what changed.
pub fn apply(cloud: &mut Cloud, event: &Event) -> Result<String, String> {
    match event {
        Event::CrashVm { instance } => {
            let key = find_instance(cloud, instance)?;
            let i = cloud.instances.get_mut(&key).ok_or("instance vanished")?;
            i.status = "TERMINATED".into();
            Ok(format!("{key} crashed: TERMINATED"))
        }
        Event::DeleteInstance { instance } => {
            let key = find_instance(cloud, instance)?;
            // As the instance's own delete would: autoDelete disks go, the others are detached.
            cloud.remove(crate::ops::model::Collection::Instances, &key);
            Ok(format!("{key} deleted out of band"))
        }
        Event::DetachIp { instance } => {
            let key = find_instance(cloud, instance)?;
            let i = cloud.instances.get_mut(&key).ok_or("instance vanished")?;
            let n: usize = i
                .network_interfaces
                .iter_mut()
                .map(|n| std::mem::take(&mut n.access_configs).len())
                .sum();
            Ok(format!("{key}: {n} access config(s) detached"))
        }
        Event::DropPoolMember { pool, instance } => drop_pool_member(cloud, pool, instance),
        Event::DeleteForwardingRule { rule } => {
            let key = find(
                cloud.forwarding_rules.keys(),
                rule,
                "forwardingRules",
                "forwarding rule",
            )?;
            cloud.forwarding_rules.remove(&key);
            Ok(format!("{key} deleted out of band"))
        }
        Event::SetLabel {
            instance,
            key,
            value,
        } => set_label(cloud, instance, key, value.as_deref()),
        Event::SetMetadata {
            instance,
            key,
            value,
        } => set_metadata(cloud, instance, key, value.as_deref()),
        Event::ZoneDown { zone } => zone_down(cloud, zone),
        Event::ZoneUp { zone } => Ok(zone_up(cloud, zone)),
        Event::BlockPort { port } => {
            cloud.blocked_external_ports.insert(*port);
            Ok(format!("port {port} refused on every external IP"))
        }
        Event::UnblockPort { port } => {
            if !cloud.blocked_external_ports.remove(port) {
                return Err(format!("port {port} is not blocked"));
            }
            Ok(format!("port {port} reachable again"))
        }
        Event::SetClientIp { ip } => {
            cloud.client_ip = *ip;
            let now = ip.unwrap_or(crate::fabric::firewall::DEFAULT_CLIENT_IP);
            Ok(format!(
                "connections from this host now come from {now} as the firewall sees them"
            ))
        }
    }
}

fn drop_pool_member(cloud: &mut Cloud, pool: &str, instance: &str) -> Result<String, String> {
    let pool_key = find(
        cloud.target_pools.keys(),
        pool,
        "targetPools",
        "target pool",
    )?;
    let p = cloud
        .target_pools
        .get_mut(&pool_key)
        .ok_or("pool vanished")?;
    let before = p.instances.len();
    p.instances
        .retain(|u| links::name_of(u) != links::name_of(instance) && u != instance);
    if p.instances.len() == before {
        return Err(format!("{instance} is not a member of {pool_key}"));
    }
    Ok(format!("{instance} dropped from {pool_key}"))
}

/// Sets (`Some`) or removes (`None`) one label, with a new fingerprint as setLabels gives.
fn set_label(
    cloud: &mut Cloud,
    instance: &str,
    key: &str,
    value: Option<&str>,
) -> Result<String, String> {
    let k = find_instance(cloud, instance)?;
    let i = cloud.instances.get_mut(&k).ok_or("instance vanished")?;
    let said = match value {
        Some(v) => {
            i.labels.insert(key.to_string(), v.to_string());
            format!("{key}={v} set")
        }
        None => match i.labels.remove(key) {
            Some(_) => format!("{key} removed"),
            None => return Err(format!("{k} has no label {key}")),
        },
    };
    i.label_fingerprint = ids::new_fingerprint();
    Ok(format!("{k}: label {said}"))
}

/// Sets (`Some`) or removes (`None`) one metadata item, with a new fingerprint as setMetadata gives.
fn set_metadata(
    cloud: &mut Cloud,
    instance: &str,
    key: &str,
    value: Option<&str>,
) -> Result<String, String> {
    let k = find_instance(cloud, instance)?;
    let i = cloud.instances.get_mut(&k).ok_or("instance vanished")?;
    let items = &mut i.metadata.items;
    let said = match value {
        Some(v) => {
            match items.iter_mut().find(|item| item.key == key) {
                Some(item) => item.value = Some(v.to_string()),
                None => items.push(MetadataItem {
                    key: key.to_string(),
                    value: Some(v.to_string()),
                }),
            }
            format!("{key} set")
        }
        None => {
            let before = items.len();
            items.retain(|item| item.key != key);
            if items.len() == before {
                return Err(format!("{k} has no metadata item {key}"));
            }
            format!("{key} removed")
        }
    };
    i.metadata.fingerprint = ids::new_fingerprint();
    Ok(format!("{k}: metadata {said}"))
}

/// Every running instance of the zone stops, remembered as stopped by the outage so that [`zone_up`] restarts
/// those and no other.
fn zone_down(cloud: &mut Cloud, zone: &str) -> Result<String, String> {
    catalog::region_of(zone).ok_or_else(|| format!("unknown zone {zone}"))?;
    cloud.zones_down.insert(zone.to_string());
    let hit: Vec<String> = cloud
        .instances
        .iter()
        .filter(|(k, i)| links::scope_of(k, "zones") == Some(zone) && i.status != "TERMINATED")
        .map(|(k, _)| k.clone())
        .collect();
    for k in &hit {
        if let Some(i) = cloud.instances.get_mut(k) {
            i.status = "TERMINATED".into();
        }
        cloud.crashed_by_outage.insert(k.clone());
    }
    Ok(format!(
        "zone {zone} DOWN; {} instance(s) stopped",
        hit.len()
    ))
}

fn zone_up(cloud: &mut Cloud, zone: &str) -> String {
    cloud.zones_down.remove(zone);
    let back: Vec<String> = cloud
        .crashed_by_outage
        .iter()
        .filter(|k| links::scope_of(k, "zones") == Some(zone))
        .cloned()
        .collect();
    for k in &back {
        cloud.crashed_by_outage.remove(k);
        if let Some(i) = cloud.instances.get_mut(k) {
            i.status = "RUNNING".into();
        }
    }
    format!("zone {zone} UP; {} instance(s) restarted", back.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::resources::Instance;

    fn cloud_with(keys: &[&str]) -> Cloud {
        let mut c = Cloud::new("http://x/");
        for k in keys {
            let i = Instance {
                status: "RUNNING".into(),
                name: links::name_of(k).into(),
                ..Default::default()
            };
            c.instances.insert(k.to_string(), i);
        }
        c
    }

    #[test]
    fn instances_are_found_by_name_zone_name_or_link() {
        let c = cloud_with(&[
            "projects/p/zones/us-central1-a/instances/m1",
            "projects/p/zones/us-central1-b/instances/m1",
        ]);
        assert!(find_instance(&c, "m1").unwrap_err().contains("matches 2"));
        assert_eq!(
            find_instance(&c, "us-central1-b/m1").unwrap(),
            "projects/p/zones/us-central1-b/instances/m1"
        );
        let link = "http://h:1/compute/v1/projects/p/zones/us-central1-a/instances/m1";
        assert_eq!(
            find_instance(&c, link).unwrap(),
            "projects/p/zones/us-central1-a/instances/m1"
        );
        assert!(find_instance(&c, "m2").is_err());
    }

    #[test]
    fn metadata_is_edited_by_hand_and_the_fingerprint_rotates() {
        let key = "projects/p/zones/us-central1-a/instances/a";
        let mut c = cloud_with(&[key]);
        let set = |k: &str, value: Option<&str>| Event::SetMetadata {
            instance: "a".into(),
            key: k.into(),
            value: value.map(str::to_string),
        };
        apply(&mut c, &set("user-data", Some("#cloud-config\n"))).unwrap();
        apply(&mut c, &set("user-data", Some("edited"))).unwrap();
        assert_eq!(c.instances[key].metadata.to_map()["user-data"], "edited");
        assert_eq!(
            c.instances[key].metadata.items.len(),
            1,
            "set twice, one item"
        );
        let before = c.instances[key].metadata.fingerprint.clone();
        apply(&mut c, &set("user-data", None)).unwrap();
        assert!(c.instances[key].metadata.items.is_empty());
        assert_ne!(c.instances[key].metadata.fingerprint, before);
        assert!(
            apply(&mut c, &set("user-data", None))
                .unwrap_err()
                .contains("no metadata item user-data")
        );
    }

    #[test]
    fn labels_are_edited_by_hand_and_the_fingerprint_rotates() {
        let key = "projects/p/zones/us-central1-a/instances/a";
        let mut c = cloud_with(&[key]);
        let set = |value: Option<&str>| Event::SetLabel {
            instance: "a".into(),
            key: "team".into(),
            value: value.map(str::to_string),
        };
        apply(&mut c, &set(Some("infra"))).unwrap();
        assert_eq!(c.instances[key].labels["team"], "infra");
        let before = c.instances[key].label_fingerprint.clone();
        apply(&mut c, &set(None)).unwrap();
        assert!(c.instances[key].labels.is_empty());
        assert_ne!(c.instances[key].label_fingerprint, before);
        assert!(
            apply(&mut c, &set(None))
                .unwrap_err()
                .contains("no label team")
        );
    }

    #[test]
    fn a_forwarding_rule_is_deleted_out_of_band() {
        let mut c = cloud_with(&[]);
        let key = "projects/p/regions/us-central1/forwardingRules/lb";
        c.forwarding_rules
            .insert(key.to_string(), Default::default());
        let gone = Event::DeleteForwardingRule { rule: "lb".into() };
        apply(&mut c, &gone).unwrap();
        assert!(c.forwarding_rules.is_empty());
        assert!(
            apply(&mut c, &gone)
                .unwrap_err()
                .contains("no forwarding rule")
        );
    }

    #[test]
    fn a_zone_outage_stops_its_vms_and_recovery_restarts_them() {
        let mut c = cloud_with(&[
            "projects/p/zones/us-central1-a/instances/a",
            "projects/p/zones/us-central1-b/instances/b",
        ]);
        apply(
            &mut c,
            &Event::ZoneDown {
                zone: "us-central1-a".into(),
            },
        )
        .unwrap();
        assert_eq!(
            c.instances["projects/p/zones/us-central1-a/instances/a"].status,
            "TERMINATED"
        );
        assert_eq!(
            c.instances["projects/p/zones/us-central1-b/instances/b"].status,
            "RUNNING"
        );
        apply(
            &mut c,
            &Event::ZoneUp {
                zone: "us-central1-a".into(),
            },
        )
        .unwrap();
        assert_eq!(
            c.instances["projects/p/zones/us-central1-a/instances/a"].status,
            "RUNNING"
        );
        assert!(c.zones_down.is_empty());
    }
}
