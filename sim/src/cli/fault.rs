//! `ha-sim fault ...`: builds failpoints and events as data and sends them to the admin API.

use super::client::Client;
use crate::faults::events::Event;
use crate::faults::{Chance, Effect, Failpoint, Trigger};
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum FaultCommand {
    /// Fail matching API requests with an HTTP status (429, 500, 503...).
    Http {
        #[arg(long)]
        status: u16,
        /// HTTP method, e.g. POST.
        #[arg(long)]
        method: Option<String>,
        /// API method pattern, e.g. `instances.insert`, `*.get`.
        #[arg(long)]
        api: Option<String>,
        /// URL path pattern, e.g. `/compute/v1/projects/*/zones/*/instances*`.
        #[arg(long)]
        path: Option<String>,
        /// Only the next N matches (default: until cleared).
        #[arg(long)]
        times: Option<u32>,
        #[command(flatten)]
        chance: ChanceArgs,
    },
    /// Add latency to matching requests (`--api`) or operations (`--op`).
    Delay {
        #[arg(long)]
        ms: u64,
        #[arg(long, conflicts_with = "op")]
        api: Option<String>,
        #[arg(long)]
        op: Option<String>,
        #[arg(long)]
        times: Option<u32>,
    },
    /// Operations of a kind (e.g. `instances.insert`) end DONE with this error code and change nothing.
    FailOp {
        #[arg(long)]
        kind: String,
        /// QUOTA_EXCEEDED, ZONE_RESOURCE_POOL_EXHAUSTED, RESOURCE_NOT_READY, ...
        #[arg(long)]
        code: String,
        #[arg(long)]
        message: Option<String>,
        #[arg(long)]
        times: Option<u32>,
        #[command(flatten)]
        chance: ChanceArgs,
    },
    /// Operations of a kind stay RUNNING until `fault clear`.
    StallOp {
        #[arg(long)]
        kind: String,
        #[arg(long)]
        times: Option<u32>,
    },
    /// List active failpoints.
    List,
    /// Remove one failpoint (by id) or all, releasing stalled operations.
    Clear { id: Option<u64> },
    /// Kill a VM's processes; the instance shows TERMINATED.
    CrashVm { instance: String },
    /// Delete an instance behind the provider's back (no operation).
    DeleteInstance { instance: String },
    /// Remove an instance's access configs (its external IP).
    DetachIp { instance: String },
    /// Remove an instance from a target pool.
    DropMember { pool: String, instance: String },
    /// Delete a forwarding rule behind the provider's back (no operation).
    DeleteForwardingRule { rule: String },
    /// Set a label on an instance by hand (`KEY=VALUE`), or remove it (`KEY`).
    SetLabel { instance: String, label: String },
    /// Set a metadata item on an instance by hand (`KEY=VALUE`), or remove it (`KEY`).
    SetMetadata { instance: String, item: String },
    /// Take a zone down: its VMs stop and mutations in it fail with 503.
    ZoneDown { zone: String },
    /// Bring a zone back; VMs the outage stopped restart.
    ZoneUp { zone: String },
    /// Refuse connections from outside the VPC to a guest port (e.g. 2379) on every VM's external IP.
    BlockPort { port: u16 },
    /// Make a blocked port reachable from outside again.
    UnblockPort { port: u16 },
    /// The address this host's connections (Terraform's, the tests') have as the VMs' firewall sees it, e.g.
    /// 198.51.100.7 to put Terraform outside `etcd_client_source_ranges`; `default` for 127.0.0.1.
    ClientIp { ip: String },
}

/// `KEY=VALUE` sets, a bare `KEY` removes (labels and metadata items edited by hand).
fn key_and_value(arg: String) -> (String, Option<String>) {
    match arg.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(v.to_string())),
        None => (arg, None),
    }
}

/// Random faults: fire on a share of matches, drawn from a seed.
#[derive(clap::Args, Debug)]
pub struct ChanceArgs {
    /// Fire on this percent of matches only (e.g. 5), chosen from --seed.
    #[arg(long)]
    percent: Option<f64>,
    /// The seed the share is drawn from (a run with the same seed and request order fails the same calls).
    #[arg(long, default_value_t = 1, requires = "percent")]
    seed: u64,
}

impl ChanceArgs {
    fn into_chance(self) -> Option<Chance> {
        self.percent.map(|percent| Chance {
            percent,
            seed: self.seed,
            state: 0,
        })
    }
}

fn failpoint(when: Trigger, then: Effect, times: Option<u32>) -> Failpoint {
    Failpoint {
        times,
        ..Failpoint::new(when, then)
    }
}

pub async fn run(c: &Client, action: FaultCommand) -> Result<(), String> {
    match action {
        FaultCommand::List => list(c).await,
        FaultCommand::Clear { id } => clear(c, id).await,
        action => match failpoint_of(action) {
            Ok(fp) => add(c, &fp).await,
            Err(action) => event(c, event_of(action)?).await,
        },
    }
}

async fn list(c: &Client) -> Result<(), String> {
    let v = c.get("faults").await?;
    for f in v["faults"].as_array().into_iter().flatten() {
        println!(
            "{:>4}  {}  (fired {})",
            f["id"],
            f["name"].as_str().unwrap_or_default(),
            f["hits"]
        );
    }
    Ok(())
}

async fn clear(c: &Client, id: Option<u64>) -> Result<(), String> {
    let v = match id {
        Some(id) => c.delete(&format!("faults/{id}")).await?,
        None => c.delete("faults").await?,
    };
    println!("cleared {}", v["cleared"]);
    Ok(())
}

async fn add(c: &Client, fp: &Failpoint) -> Result<(), String> {
    let body = serde_json::to_value(fp).map_err(|e| format!("encoding failpoint: {e}"))?;
    let added = c.post("faults", Some(body)).await?;
    println!(
        "{:>4}  {}",
        added["id"],
        added["name"].as_str().unwrap_or_default()
    );
    Ok(())
}

/// The failpoint a command adds; the command itself when it is not one (an event, or list/clear).
fn failpoint_of(action: FaultCommand) -> Result<Failpoint, FaultCommand> {
    use FaultCommand::*;
    Ok(match action {
        Http {
            status,
            method,
            api,
            path,
            times,
            chance,
        } => Failpoint {
            chance: chance.into_chance(),
            ..failpoint(
                Trigger::Request { method, api, path },
                Effect::Status { status },
                times,
            )
        },
        Delay {
            ms,
            api: _,
            op: Some(kind),
            times,
        } => failpoint(Trigger::Operation { kind }, Effect::Delay { ms }, times),
        Delay {
            ms,
            api,
            op: None,
            times,
        } => failpoint(
            Trigger::Request {
                method: None,
                api,
                path: None,
            },
            Effect::Delay { ms },
            times,
        ),
        FailOp {
            kind,
            code,
            message,
            times,
            chance,
        } => Failpoint {
            chance: chance.into_chance(),
            ..failpoint(
                Trigger::Operation { kind },
                Effect::Fail { code, message },
                times,
            )
        },
        StallOp { kind, times } => failpoint(Trigger::Operation { kind }, Effect::Stall, times),
        other => return Err(other),
    })
}

/// The out-of-band event a command sends; an error for a command that is not one.
fn event_of(action: FaultCommand) -> Result<Event, String> {
    use FaultCommand::*;
    Ok(match action {
        CrashVm { instance } => Event::CrashVm { instance },
        DeleteInstance { instance } => Event::DeleteInstance { instance },
        DetachIp { instance } => Event::DetachIp { instance },
        DropMember { pool, instance } => Event::DropPoolMember { pool, instance },
        DeleteForwardingRule { rule } => Event::DeleteForwardingRule { rule },
        SetLabel { instance, label } => {
            let (key, value) = key_and_value(label);
            Event::SetLabel {
                instance,
                key,
                value,
            }
        }
        SetMetadata { instance, item } => {
            let (key, value) = key_and_value(item);
            Event::SetMetadata {
                instance,
                key,
                value,
            }
        }
        ZoneDown { zone } => Event::ZoneDown { zone },
        ZoneUp { zone } => Event::ZoneUp { zone },
        BlockPort { port } => Event::BlockPort { port },
        UnblockPort { port } => Event::UnblockPort { port },
        ClientIp { ip } => Event::SetClientIp {
            ip: match ip.as_str() {
                "default" => None,
                other => Some(other.parse().map_err(|_| {
                    format!(
                        "client-ip: {other:?} is not an IPv4 address (or `default` for 127.0.0.1)"
                    )
                })?),
            },
        },
        List | Clear { .. } | Http { .. } | Delay { .. } | FailOp { .. } | StallOp { .. } => {
            return Err("not an out-of-band event".into());
        }
    })
}

async fn event(c: &Client, e: Event) -> Result<(), String> {
    let body = serde_json::to_value(&e).map_err(|e| format!("encoding event: {e}"))?;
    let v = c.post("events", Some(body)).await?;
    println!("{}", v["result"].as_str().unwrap_or_default());
    Ok(())
}
