//! `ha-sim status`, `ha-sim requests` and `ha-sim ssh`.

use super::Target;
use super::client::Client;
use crate::faults::events::instance;
use crate::state::resources::Instance;
use crate::state::{Cloud, links};
use serde_json::Value;
use std::path::Path;

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

pub async fn status(c: &Client, json: bool) -> Result<(), String> {
    let v = c.get("status").await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    println!("ha-sim at {} (state {})", s(&v["url"]), s(&v["stateDir"]));
    println!(
        "this host's address, as the VMs' firewall sees it: {}",
        s(&v["clientIp"])
    );
    if let Some(p) = v["blockedPorts"].as_array().filter(|p| !p.is_empty()) {
        println!(
            "ports refused on every external IP: {}",
            p.iter().map(s).collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(z) = v["zonesDown"].as_array().filter(|z| !z.is_empty()) {
        println!(
            "zones DOWN: {}",
            z.iter().map(s).collect::<Vec<_>>().join(", ")
        );
    }
    print_instances(&v);
    print_addresses_and_disks(&v);
    print_subnetworks(&v);
    print_forwarding_rules(&v);
    println!("\npending operations: {}", s(&v["pendingOperations"]));
    for f in v["faults"].as_array().into_iter().flatten() {
        println!("failpoint: {}", s(f));
    }
    for (k, p) in v["problems"].as_object().into_iter().flatten() {
        println!("problem: {k}: {}", s(p));
    }
    Ok(())
}

/// Each instance, with its etcd's process, health and member list where the VM runs one.
fn print_instances(v: &Value) {
    println!(
        "\nINSTANCE                      ZONE             STATUS       INTERNAL        EXTERNAL"
    );
    for i in v["instances"].as_array().into_iter().flatten() {
        println!(
            "{:<29} {:<16} {:<12} {:<15} {}",
            s(&i["name"]),
            s(&i["zone"]),
            s(&i["status"]),
            s(&i["internalIp"]),
            s(&i["externalIp"])
        );
        let vm = &i["vm"];
        if !vm["etcd_running"].is_null() {
            let health = if vm["etcd_healthy"] == true {
                "healthy"
            } else {
                "unhealthy"
            };
            println!(
                "    etcd pid {} {health}, {} restart(s){}",
                s(&vm["etcd_pid"]),
                s(&vm["etcd_restarts"]),
                vm["health_error"]
                    .as_str()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            );
        }
        if let Some(members) = vm["etcdMembers"].as_array() {
            let names: Vec<String> = members.iter().map(|m| s(&m["name"])).collect();
            println!("    etcd members ({}): {}", members.len(), names.join(", "));
        } else if !vm["etcdError"].is_null() {
            println!("    etcd: {}", s(&vm["etcdError"]));
        }
    }
}

fn print_addresses_and_disks(v: &Value) {
    println!("\nADDRESS              REGION         IP              USERS");
    for a in v["addresses"].as_array().into_iter().flatten() {
        let users: Vec<String> = a["users"].as_array().into_iter().flatten().map(s).collect();
        println!(
            "{:<20} {:<14} {:<15} {}",
            s(&a["name"]),
            s(&a["region"]),
            s(&a["address"]),
            users.join(", ")
        );
    }
    println!("\nDISK                 ZONE             SIZE GB  STATUS    USERS");
    for d in v["disks"].as_array().into_iter().flatten() {
        let users: Vec<String> = d["users"].as_array().into_iter().flatten().map(s).collect();
        println!(
            "{:<20} {:<16} {:<8} {:<9} {}",
            s(&d["name"]),
            s(&d["zone"]),
            s(&d["sizeGb"]),
            s(&d["status"]),
            users.join(", ")
        );
    }
}

fn print_subnetworks(v: &Value) {
    // Created subnetworks only; every region also has the implicit `default`.
    if let Some(subnets) = v["subnetworks"].as_array().filter(|s| !s.is_empty()) {
        println!("\nSUBNETWORK           REGION         NETWORK        RANGE              USERS");
        for sn in subnets {
            let users: Vec<String> = sn["users"]
                .as_array()
                .into_iter()
                .flatten()
                .map(s)
                .collect();
            println!(
                "{:<20} {:<14} {:<14} {:<18} {}",
                s(&sn["name"]),
                s(&sn["region"]),
                s(&sn["network"]),
                s(&sn["ipCidrRange"]),
                users.join(", ")
            );
        }
    }
}

/// Each forwarding rule, whether it serves, and its backends' health as the load balancer sees it.
fn print_forwarding_rules(v: &Value) {
    println!(
        "\nFORWARDING RULE      IP              PORTS          TARGET         SERVING  BACKENDS"
    );
    for f in v["forwardingRules"].as_array().into_iter().flatten() {
        let backends: Vec<String> = f["backends"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| {
                format!(
                    "{}{}",
                    s(&b["ip"]),
                    if b["healthy"] == true {
                        "(healthy)"
                    } else {
                        "(unhealthy)"
                    }
                )
            })
            .collect();
        println!(
            "{:<20} {:<15} {:<14} {:<14} {:<8} {}",
            s(&f["name"]),
            s(&f["ip"]),
            s(&f["portRange"]),
            s(&f["target"]),
            s(&f["serving"]),
            backends.join(" ")
        );
    }
}

pub async fn requests(c: &Client, reset: bool, json: bool) -> Result<(), String> {
    let v = c.get("requests").await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        for (method, n) in v["byMethod"].as_object().into_iter().flatten() {
            println!("{n:>6}  {method}");
        }
        println!("{:>6}  total", s(&v["total"]));
    }
    if reset {
        c.post("requests/reset", None).await?;
    }
    Ok(())
}

/// The instance `vm` names, as the sim serving `dir` holds it now; as `state.json` holds it when no sim answers
/// there (a running sim writes the file behind its changes, `persist.rs`, so the file alone can lag a moment).
async fn current_instance(target: &Target, dir: &Path, vm: &str) -> Result<Instance, String> {
    if let Ok(c) = Client::find(target)
        && let Ok(v) = c.get_with("instance", &[("name", vm)]).await
    {
        return serde_json::from_value(v).map_err(|e| format!("parsing the sim's {vm}: {e}"));
    }
    let path = dir.join("state.json");
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let cloud: Cloud =
        serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    instance(&cloud, vm).cloned()
}

/// Runs `cmd` with the VM's environment (`vm::ssh_env(dir: &Path) -> Result<Vec<(String, String)>, VmError>`)
/// and returns its exit code.
pub async fn ssh(target: &Target, vm: &str, cmd: &[String]) -> Result<i32, String> {
    let dir = target
        .state_dir
        .as_ref()
        .ok_or("ssh needs --state-dir (it reads the VM's files)")?;
    let inst = current_instance(target, dir, vm).await?;
    if inst.status != "RUNNING" {
        return Err(format!(
            "{} is {}: nothing to ssh into",
            inst.name, inst.status
        ));
    }
    let vm_dir = dir
        .join("vms")
        .join(links::name_of(&inst.zone))
        .join(format!("{}-{}", inst.name, inst.id));
    let env = crate::vm::ssh_env(&vm_dir).map_err(|e| format!("{}: {e}", inst.name))?;
    let (program, args) = match cmd.split_first() {
        Some((p, a)) => (p.clone(), a.to_vec()),
        None => (
            std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into()),
            vec![],
        ),
    };
    // The command can run for as long as it likes: off the runtime's worker threads.
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&program)
            .args(&args)
            .envs(env)
            .current_dir(&vm_dir)
            .status()
            .map_err(|e| format!("running {program}: {e}"))
    })
    .await
    .map_err(|e| format!("waiting for the command: {e}"))??;
    Ok(status.code().unwrap_or(1))
}
