//! One scenario's working directory under one client: its own CLI config, lock file, env and state.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::client::Client;
use crate::command::{CmdOutput, run};
use crate::mirror::Mirror;
use crate::paths::work_dir;

/// Default per-command timeout; `HA_ACCEPTANCE_TIMEOUT_SECS` overrides it, `Workspace::with_timeout` too.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Inherited variables that would change what the clients or the provider do, removed from every command so a
/// scenario sees only what it sets. TF_* covers TF_CLI_CONFIG_FILE (the machine points it at a missing file),
/// TF_PLUGIN_CACHE_DIR, TF_DATA_DIR, TF_LOG and TF_VAR_*; the others are the provider's credential and default
/// settings.
const SCRUBBED_PREFIXES: [&str; 6] = [
    "TF_",
    "CHECKPOINT_",
    "GOOGLE_",
    "GCLOUD_",
    "CLOUDSDK_",
    "PLUGIN_",
];

pub struct Workspace {
    client: Client,
    /// Some until drop, where a panicking test keeps it for inspection.
    dir: Option<tempfile::TempDir>,
    mirror: Arc<Mirror>,
    env: Vec<(String, String)>,
    timeout: Duration,
}

impl Workspace {
    /// A fresh workspace for `scenario` under `client`, installing the provider from the shared mirror with a
    /// pre-written lock file, so `init` verifies the package against the hash we computed.
    pub fn new(client: Client, scenario: &str) -> Workspace {
        Workspace::with_mirror(client, scenario, Mirror::shared())
    }

    /// Like `new`, with another mirror (e.g. the bench's wrapped provider).
    pub fn with_mirror(client: Client, scenario: &str, mirror: Arc<Mirror>) -> Workspace {
        let prefix = format!("{}-{}-", sanitize(scenario), client.name());
        let dir = tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir_in(work_dir())
            .unwrap_or_else(|e| panic!("creating a workspace for {scenario}: {e}"));
        let timeout = std::env::var("HA_ACCEPTANCE_TIMEOUT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_TIMEOUT);
        let ws = Workspace {
            client,
            dir: Some(dir),
            mirror,
            env: Vec::new(),
            timeout,
        };
        ws.write_file("cli.tfrc", &ws.mirror.cli_config());
        ws.write_lock_file(&ws.mirror.lock_file());
        ws
    }

    /// Adds an environment variable for every later command (e.g. the simulator's endpoint).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Workspace {
        self.set_env(key, value);
        self
    }

    pub fn set_env(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.env.push((key.into(), value.into()));
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Workspace {
        self.timeout = timeout;
        self
    }

    pub fn client(&self) -> Client {
        self.client
    }

    /// Runs every later command under `client`, on the same directory, state and lock file: the churn run
    /// alternates the clients on one state, as a team whose members use different clients would. The
    /// configuration must then name the provider by its full address (`registry.terraform.io/hamaster/ha`),
    /// which both clients read the same way, and `init` must run again under the new client.
    pub fn switch_client(&mut self, client: Client) {
        self.client = client;
    }

    pub fn mirror(&self) -> &Mirror {
        &self.mirror
    }

    /// Installs the provider from `mirror` from the next `init` on, as a user upgrading it in place
    /// (`init -upgrade`): the CLI config and the lock file name the new package, and the installed one is removed
    /// so `init` cannot keep it. The state, the configuration and the variables stay.
    pub fn switch_mirror(&mut self, mirror: Arc<Mirror>) {
        self.mirror = mirror;
        self.write_file("cli.tfrc", &self.mirror.cli_config());
        self.write_lock_file(&self.mirror.lock_file());
        let installed = self.path().join(".terraform").join("providers");
        if let Err(e) = std::fs::remove_dir_all(&installed)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            panic!("removing {}: {e}", installed.display());
        }
    }

    pub fn path(&self) -> &Path {
        self.dir
            .as_ref()
            .expect("workspace dir present until drop")
            .path()
    }

    pub fn write_main_tf(&self, config: &str) {
        self.write_file("main.tf", config);
    }

    /// Writes `contents` to `relative` inside the workspace, creating parent directories.
    pub fn write_file(&self, relative: &str, contents: &str) {
        let path = self.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("creating {}: {e}", parent.display()));
        }
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// Every file of the workspace that holds `needle` (state, its backups, saved plans, logs), but the
    /// configuration (`.tf`, where a test puts a secret), the files named in `except`, and the client's own
    /// `.terraform` directory (plugins and caches): where a value that must be stored nowhere would leak to.
    pub fn files_holding(&self, needle: &str, except: &[&str]) -> Vec<String> {
        let mut found = Vec::new();
        let mut dirs = vec![self.path().to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    if !path.ends_with(".terraform") {
                        dirs.push(path);
                    }
                } else if path.extension().is_none_or(|e| e != "tf")
                    && !except.iter().any(|name| path.ends_with(name))
                    && std::fs::read(&path)
                        .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                {
                    found.push(path.display().to_string());
                }
            }
        }
        found
    }

    pub fn read_file(&self, relative: &str) -> String {
        let path = self.path().join(relative);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
    }

    pub fn write_lock_file(&self, contents: &str) {
        self.write_file(".terraform.lock.hcl", contents);
    }

    /// Removes the pre-written lock file, so `init` records hashes itself (trust on first use).
    pub fn remove_lock_file(&self) {
        let path = self.path().join(".terraform.lock.hcl");
        std::fs::remove_file(&path).unwrap_or_else(|e| panic!("removing {}: {e}", path.display()));
    }

    pub fn read_lock_file(&self) -> String {
        self.read_file(".terraform.lock.hcl")
    }

    /// Runs the client with `args` in the workspace. Never panics on a non-zero exit: use the helpers below or
    /// `CmdOutput::assert_*`. Every command is logged to stderr (shown by the test runner only on failure).
    pub fn run(&self, args: &[&str]) -> CmdOutput {
        let cmd = self.command(args);
        let label = format!("{} {}", self.client.name(), args.join(" "));
        let output = run(cmd, label, self.path().to_path_buf(), self.timeout);
        let status = match (output.timed_out, output.code) {
            (true, _) => "timed out".to_string(),
            (false, Some(code)) => format!("exit {code}"),
            (false, None) => "killed".to_string(),
        };
        eprintln!(
            "[{}] $ {}  -> {status} in {:.2?}",
            self.client, output.command, output.duration
        );
        output
    }

    /// Starts the client with `args` in the background, as the leader of its own process group (so a test can
    /// signal it and the providers it started together, as a terminal would), with the environment `run` gives
    /// every command. Its output goes to `<log>.stdout` and `<log>.stderr` in the workspace.
    pub fn spawn(&self, args: &[&str], log: &str) -> Child {
        let mut cmd = self.command(args);
        let file = |ext: &str| {
            std::fs::File::create(self.path().join(format!("{log}.{ext}")))
                .unwrap_or_else(|e| panic!("creating {log}.{ext}: {e}"))
        };
        cmd.stdin(Stdio::null())
            .stdout(file("stdout"))
            .stderr(file("stderr"))
            .process_group(0);
        eprintln!("[{}] $ {} {} &", self.client, self.client, args.join(" "));
        cmd.spawn()
            .unwrap_or_else(|e| panic!("[{}] starting {args:?}: {e}", self.client))
    }

    /// The client's command line with the scenario's environment: inherited settings that would change what the
    /// clients or the provider do are removed, the workspace's CLI config and variables are set.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.client.binary());
        cmd.args(args).current_dir(self.path());
        for (key, _) in std::env::vars_os() {
            if let Some(key) = key.to_str()
                && SCRUBBED_PREFIXES.iter().any(|p| key.starts_with(p))
            {
                cmd.env_remove(key);
            }
        }
        cmd.env("TF_CLI_CONFIG_FILE", self.path().join("cli.tfrc"))
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1");
        // Opt-in client/provider logs for debugging a scenario: HA_ACCEPTANCE_TF_LOG=debug.
        if let Ok(level) = std::env::var("HA_ACCEPTANCE_TF_LOG") {
            cmd.env("TF_LOG", level);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// `init`, which must succeed.
    #[track_caller]
    pub fn init(&self) -> CmdOutput {
        self.checked(&["init", "-input=false", "-no-color"])
    }

    /// `validate`, which must succeed.
    #[track_caller]
    pub fn validate(&self) -> CmdOutput {
        self.checked(&["validate", "-no-color"])
    }

    /// `plan`, which must succeed.
    #[track_caller]
    pub fn plan(&self) -> CmdOutput {
        self.checked(&["plan", "-input=false", "-no-color"])
    }

    /// `plan -detailed-exitcode`: returns 0 (no changes) or 2 (changes); panics on an error.
    #[track_caller]
    pub fn plan_detailed_exitcode(&self) -> i32 {
        let output = self.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        match output.code {
            Some(code @ (0 | 2)) => code,
            _ => panic!("plan -detailed-exitcode failed:\n{output}"),
        }
    }

    /// `apply -auto-approve`, which must succeed.
    #[track_caller]
    pub fn apply(&self) -> CmdOutput {
        self.checked(&["apply", "-input=false", "-no-color", "-auto-approve"])
    }

    /// `apply -target=<address>`, which must succeed: that resource and what it depends on, nothing else (a
    /// replica first, before a plain apply does the rest).
    #[track_caller]
    pub fn apply_target(&self, address: &str) -> CmdOutput {
        let target = format!("-target={address}");
        self.checked(&[
            "apply",
            "-input=false",
            "-no-color",
            "-auto-approve",
            &target,
        ])
    }

    /// `apply -refresh-only -auto-approve`, which must succeed: state takes what the real objects and data sources
    /// say now, and nothing changes.
    #[track_caller]
    pub fn refresh_only(&self) -> CmdOutput {
        self.checked(&[
            "apply",
            "-refresh-only",
            "-auto-approve",
            "-input=false",
            "-no-color",
        ])
    }

    /// The attributes state holds for `address` (a root-module resource or data source, like `ha_master_cluster.c`
    /// or `data.ha_cluster_health.c`), sensitive ones included; panics when state has no such address.
    #[track_caller]
    pub fn state_values(&self, address: &str) -> Value {
        let state = self.show_json();
        state["values"]["root_module"]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["address"] == address)
            .map(|r| r["values"].clone())
            .unwrap_or_else(|| panic!("[{}] no {address} in state: {state}", self.client))
    }

    /// `destroy -auto-approve`, which must succeed.
    #[track_caller]
    pub fn destroy(&self) -> CmdOutput {
        self.checked(&["destroy", "-input=false", "-no-color", "-auto-approve"])
    }

    /// `show -json` of the current state, parsed.
    #[track_caller]
    pub fn show_json(&self) -> Value {
        self.checked_json(&["show", "-json", "-no-color"])
    }

    /// `providers schema -json`, parsed.
    #[track_caller]
    pub fn providers_schema_json(&self) -> Value {
        self.checked_json(&["providers", "schema", "-json"])
    }

    #[track_caller]
    fn checked(&self, args: &[&str]) -> CmdOutput {
        let output = self.run(args);
        assert!(
            output.success(),
            "[{}] command failed:\n{output}",
            self.client
        );
        output
    }

    #[track_caller]
    fn checked_json(&self, args: &[&str]) -> Value {
        let output = self.checked(args);
        serde_json::from_str(&output.stdout)
            .unwrap_or_else(|e| panic!("[{}] stdout is not JSON ({e}):\n{output}", self.client))
    }
}

impl Drop for Workspace {
    /// A failed scenario leaves its workspace behind (path printed) so its state, logs and config can be
    /// inspected; a passing one cleans up.
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take()
            && (std::thread::panicking() || std::env::var_os("HA_ACCEPTANCE_KEEP").is_some())
        {
            let kept: PathBuf = dir.keep();
            eprintln!("[{}] workspace kept at {}", self.client, kept.display());
        }
    }
}

/// A scenario name safe to use in a directory name.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect()
}
