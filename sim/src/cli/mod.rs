//! The `ha-sim` command line: `serve` runs a sim; every other command talks to a running one through the
//! admin API, found via `STATE_DIR/sim.json` (or `--url`).

pub mod client;
pub mod fault;
pub mod serve;
pub mod show;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "ha-sim",
    version,
    about = "A local Compute Engine v1 API whose VMs run real etcd"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// How client commands find the sim.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// State directory of the sim (its `sim.json` says where it listens).
    #[arg(long, env = "HA_SIM_STATE_DIR", global = true)]
    pub state_dir: Option<PathBuf>,
    /// Root URL of the sim's listener (instead of --state-dir), e.g. http://127.0.0.1:8085/.
    #[arg(long, env = "HA_SIM_URL", global = true)]
    pub url: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the simulator in the foreground until SIGTERM/SIGINT or `ha-sim stop`.
    Serve(serve::ServeArgs),
    /// Ask a running sim to stop (it kills every VM process before exiting).
    Stop {
        #[command(flatten)]
        target: Target,
    },
    /// Instances, IPs, load balancers and health, and each VM's etcd member list.
    Status {
        #[command(flatten)]
        target: Target,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run CMD inside a VM's environment (ETCDCTL_* set for its etcd), as `gcloud compute ssh VM -- CMD`.
    Ssh {
        #[command(flatten)]
        target: Target,
        /// Instance: `name`, `zone/name` or a link.
        vm: String,
        /// Command and arguments (after `--`); default: a shell.
        #[arg(last = true)]
        cmd: Vec<String>,
    },
    /// The request log: calls per API method since the last reset.
    Requests {
        #[command(flatten)]
        target: Target,
        /// Clear the log after printing it.
        #[arg(long)]
        reset: bool,
        /// Print the raw JSON (with the last entries).
        #[arg(long)]
        json: bool,
    },
    /// Fault injection: failpoints and out-of-band events.
    Fault {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        action: fault::FaultCommand,
    },
}

/// Runs a parsed command; the exit code is the process's.
pub async fn run(cli: Cli) -> Result<i32, String> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await.map(|_| 0),
        Command::Stop { target } => {
            let c = client::Client::find(&target)?;
            c.post("shutdown", None).await?;
            c.wait_gone().await?;
            println!("stopped");
            Ok(0)
        }
        Command::Status { target, json } => show::status(&client::Client::find(&target)?, json)
            .await
            .map(|_| 0),
        Command::Ssh { target, vm, cmd } => show::ssh(&target, &vm, &cmd).await,
        Command::Requests {
            target,
            reset,
            json,
        } => show::requests(&client::Client::find(&target)?, reset, json)
            .await
            .map(|_| 0),
        Command::Fault { target, action } => fault::run(&client::Client::find(&target)?, action)
            .await
            .map(|_| 0),
    }
}
