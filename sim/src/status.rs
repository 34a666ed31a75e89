//! `GET /_sim/status` / `ha-sim status`: what is running, which IPs go where, load balancer health, and each
//! VM's view of its etcd cluster.

use crate::app::Sim;
use crate::state::links;
use serde_json::{Value, json};

pub async fn collect(sim: &Sim) -> Value {
    let cloud = sim.cloud().clone();
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
        "instances": instances,
        "addresses": addresses,
        "forwardingRules": rules,
        "pendingOperations": pending,
        "faults": sim.faults().list().iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
        "problems": sim.fabric.problems(),
    })
}
