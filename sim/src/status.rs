//! `GET /_sim/status` / `ha-sim status`: what is running, which IPs go where, load balancer health, and each
//! VM's view of its etcd cluster.

use crate::app::Sim;
use crate::state::links;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// How long one VM's `etcdctl member list` may take before status reports it as unreachable.
const ETCDCTL_TIMEOUT: Duration = Duration::from_secs(3);

/// The member list as this VM's etcd sees it, asked with etcdctl in the VM's environment.
/// Calls `vm::ssh_env(dir: &Path) -> Result<Vec<(String, String)>, vm::VmError>` (ETCDCTL_*, PATH).
async fn etcd_members(dir: PathBuf) -> Value {
    let env = match crate::vm::ssh_env(&dir) {
        Ok(e) => e,
        Err(e) => return json!({"etcdError": e.to_string()}),
    };
    // etcdctl from the VM's PATH (next to its etcd), not the sim's.
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let bin = std::env::split_paths(&path)
        .map(|d| d.join("etcdctl"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("etcdctl"));
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["member", "list", "-w", "json"])
        .envs(env)
        .kill_on_drop(true);
    let out = match tokio::time::timeout(ETCDCTL_TIMEOUT, cmd.output()).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return json!({"etcdError": format!("running etcdctl: {e}")}),
        Err(_) => return json!({"etcdError": "etcdctl timed out"}),
    };
    if !out.status.success() {
        return json!({"etcdError": String::from_utf8_lossy(&out.stderr).trim().to_string()});
    }
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(v) => {
            let members: Vec<Value> = v["members"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| {
                    json!({"name": m["name"], "peerURLs": m["peerURLs"], "clientURLs": m["clientURLs"],
                           "isLearner": m["isLearner"].as_bool().unwrap_or(false)})
                })
                .collect();
            json!({"etcdMembers": members})
        }
        Err(e) => json!({"etcdError": format!("parsing etcdctl output: {e}")}),
    }
}

/// The fabric's view of a VM (etcd pid, restarts, health) merged with its etcd member list.
fn vm_view(sim: &Sim, key: &str, id: &str, etcd: Option<&Value>) -> Value {
    let mut v = sim
        .fabric
        .vm_status(&format!("{key}#{id}"))
        .unwrap_or_else(|| json!({}));
    if let (Some(obj), Some(Value::Object(e))) = (v.as_object_mut(), etcd) {
        obj.extend(e.clone());
    }
    if v.as_object().is_some_and(|o| o.is_empty()) {
        Value::Null
    } else {
        v
    }
}

pub async fn collect(sim: &Sim) -> Value {
    let cloud = sim.cloud().clone();
    let mut probes = tokio::task::JoinSet::new();
    for (key, i) in &cloud.instances {
        if sim.cfg.fabric && i.status == "RUNNING" {
            let dir = crate::fabric::vm_dir(&sim.cfg, links::name_of(&i.zone), &i.name, &i.id);
            let key = key.clone();
            probes.spawn(async move { (key, etcd_members(dir).await) });
        }
    }
    let mut vms = std::collections::BTreeMap::new();
    while let Some(Ok((key, v))) = probes.join_next().await {
        vms.insert(key, v);
    }
    let instances: Vec<Value> = cloud
        .instances
        .iter()
        .map(|(key, i)| {
            let nic = i.network_interfaces.first();
            json!({
                "key": key,
                "name": i.name,
                "zone": links::name_of(&i.zone),
                "status": i.status,
                "internalIp": nic.and_then(|n| n.network_ip.clone()),
                "externalIp": nic.and_then(|n| n.access_configs.first()).and_then(|a| a.nat_ip.clone()),
                "vm": vm_view(sim, key, &i.id, vms.get(key)),
            })
        })
        .collect();
    let addresses: Vec<Value> = cloud
        .addresses
        .values()
        .map(|a| {
            let users = cloud.users_of_ip(links::name_of(&a.region), &a.address);
            json!({"name": a.name, "region": links::name_of(&a.region), "address": a.address,
                   "users": users.iter().map(|u| links::name_of(u)).collect::<Vec<_>>()})
        })
        .collect();
    let disks: Vec<Value> = cloud
        .disks
        .values()
        .map(|d| {
            let users = cloud.disk_users(&d.self_link);
            json!({"name": d.name, "zone": links::name_of(&d.zone), "sizeGb": d.size_gb, "status": d.status,
                   "type": links::name_of(&d.type_),
                   "users": users.iter().map(|(u, _)| links::name_of(u)).collect::<Vec<_>>(),
                   "dir": sim.cfg.fabric.then(|| crate::fabric::disk_dir(&sim.cfg, links::name_of(&d.zone), &d.name, &d.id))})
        })
        .collect();
    // Only the subnetworks someone created: the implicit `default` of every region is no resource of theirs.
    let subnetworks: Vec<Value> = cloud
        .subnetworks
        .iter()
        .map(|(key, sn)| {
            let users = cloud.subnet_users(key);
            json!({"name": sn.name, "region": links::name_of(&sn.region), "network": links::name_of(&sn.network),
                   "ipCidrRange": sn.ip_cidr_range,
                   "users": users.iter().map(|u| links::name_of(u)).collect::<Vec<_>>()})
        })
        .collect();
    let rules: Vec<Value> = cloud
        .forwarding_rules
        .iter()
        .map(|(key, f)| {
            let health = sim.fabric.lb_health(key);
            json!({"name": f.name, "ip": f.ip_address, "portRange": f.port_range, "target": links::name_of(&f.target),
                   "serving": health.as_ref().map(|h| h.serving),
                   "backends": health.map(|h| h.backends.iter().map(|(ip, ok)| json!({"ip": ip.to_string(), "healthy": ok})).collect::<Vec<_>>())})
        })
        .collect();
    let pending = cloud.operations.values().filter(|r| !r.is_done()).count();
    json!({
        "url": sim.root,
        "stateDir": sim.cfg.state_dir,
        "zonesDown": cloud.zones_down,
        // The address the VMs' firewall sees this host's connections come from (`fault client-ip`).
        "clientIp": cloud.client_ip.unwrap_or(crate::fabric::firewall::DEFAULT_CLIENT_IP).to_string(),
        "blockedPorts": cloud.blocked_external_ports,
        "instances": instances,
        "addresses": addresses,
        "disks": disks,
        "subnetworks": subnetworks,
        "forwardingRules": rules,
        "pendingOperations": pending,
        "faults": sim.faults().list().iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
        "problems": sim.fabric.problems(),
    })
}
