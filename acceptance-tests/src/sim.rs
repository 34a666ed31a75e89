//! A private `ha-sim` per scenario: its own state folder, port and loopback network block, so scenarios run in
//! parallel without seeing each other's clouds. Started with near-zero latencies; stopped (with every VM process)
//! when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ha_sim::faults::Failpoint;
use ha_sim::faults::events::Event;
use serde_json::Value;

use crate::network_block::NetworkBlock;
use crate::paths::{repo_root, target_dir, tools_bin, work_dir};

pub const SIM_BIN_ENV: &str = "HA_SIM_BIN";

pub fn sim_binary() -> PathBuf {
    let path = match std::env::var_os(SIM_BIN_ENV) {
        Some(p) => repo_root().join(p),
        None => target_dir().join("release").join("ha-sim"),
    };
    assert!(
        path.is_file(),
        "ha-sim binary {} not found: run `make build` first, or set {SIM_BIN_ENV}",
        path.display()
    );
    path
}

pub struct Sim {
    child: Child,
    url: String,
    state_dir: tempfile::TempDir,
    block: NetworkBlock,
}

impl Sim {
    /// Starts a sim with the test latency profile and waits until it listens.
    pub fn start(scenario: &str) -> Sim {
        Sim::start_with_profile(scenario, "test")
    }

    /// Starts a sim with a named latency profile (`test`: near zero; `demo`: seconds, as GCE's proportions).
    pub fn start_with_profile(scenario: &str, profile: &str) -> Sim {
        Sim::start_with_args(scenario, profile, &[])
    }

    /// [`Sim::start_with_profile`] with more `ha-sim serve` arguments (e.g. `--addon-delay-secs 15`).
    pub fn start_with_args(scenario: &str, profile: &str, more: &[&str]) -> Sim {
        let block = NetworkBlock::take();
        let state_dir = tempfile::Builder::new()
            .prefix(&format!("sim-{scenario}-"))
            .tempdir_in(work_dir())
            .expect("sim state dir");
        let port_file = state_dir.path().join("port");
        let log = std::fs::File::create(state_dir.path().join("sim.log")).expect("sim log");
        let child = Command::new(sim_binary())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--latency-profile",
                profile,
            ])
            .arg("--state-dir")
            .arg(state_dir.path())
            .arg("--port-file")
            .arg(&port_file)
            .args(["--network-block", &block.n.to_string()])
            .arg("--stop-with-parent")
            .args(etcd_bin_args())
            .args(more)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    tools_bin().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("starting ha-sim");
        let started = Instant::now();
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file)
                && let Ok(p) = p.trim().parse::<u16>()
            {
                break p;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "ha-sim did not start; see {}",
                state_dir.path().display()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Sim {
            child,
            url: format!("http://127.0.0.1:{port}/"),
            state_dir,
            block,
        }
    }

    /// The Compute endpoint to give the provider (`compute_custom_endpoint`).
    /// A /24 of loopback for a subnetwork a scenario creates, its own among parallel sims: `127.11.<block>.0/24`
    /// (ha-sim keeps subnetworks out of every sim's network blocks, 127.10, 127.20 and 127.32 to 127.231).
    pub fn spare_subnetwork_range(&self) -> String {
        format!("127.11.{}.0/24", self.block.n)
    }

    /// Creates subnetwork `name` of the default network in `region` on [`Self::spare_subnetwork_range`] with
    /// `gcloud compute networks subnets create`, as its owner would (the provider never creates subnetworks),
    /// and returns the range.
    pub fn create_subnetwork(&self, name: &str, region: &str) -> String {
        let range = self.spare_subnetwork_range();
        self.gcloud(&[
            "compute",
            "networks",
            "subnets",
            "create",
            name,
            "--network=default",
            &format!("--region={region}"),
            &format!("--range={range}"),
        ])
        .unwrap_or_else(|e| panic!("gcloud could not create subnetwork {name}: {e}"));
        range
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn state_dir(&self) -> &Path {
        self.state_dir.path()
    }

    /// `ha-sim status --json`.
    pub fn status(&self) -> Value {
        let out = self.cli(&["status", "--json"]);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("ha-sim status is not JSON ({e}):\n{out}"))
    }

    /// `ha-sim ssh VM -- CMD`: stdout, panicking with the output on failure.
    pub fn ssh(&self, vm: &str, cmd: &[&str]) -> String {
        // ssh reads the VM's own files (certificates), so it needs the state folder, not just the URL.
        let dir = self.state_dir().to_string_lossy().to_string();
        let mut args = vec!["ssh", "--state-dir", &dir, vm, "--"];
        args.extend_from_slice(cmd);
        self.run(&args)
    }

    /// Google's own CLI pointed at this sim, as an independent client: `gcloud ARGS --format=json` in project
    /// `walk` (the walk-through's), with its own configuration folder under the sim's state and the access token
    /// the provider uses. Returns the parsed JSON, or the failure with gcloud's output.
    pub fn gcloud(&self, args: &[&str]) -> Result<Value, String> {
        let dir = self.state_dir().join("gcloud");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let token = dir.join("token");
        std::fs::write(&token, "sim-token").map_err(|e| e.to_string())?;
        let out = Command::new("gcloud")
            .args(args)
            .arg("--format=json")
            .env("CLOUDSDK_CONFIG", dir.join("config"))
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
                format!("{}compute/v1/", self.url),
            )
            // `gcloud secrets` against the sim's Secret Manager, which is served from its root.
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER", &self.url)
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token)
            .env("CLOUDSDK_CORE_PROJECT", "walk")
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running gcloud: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "gcloud {args:?}: {}\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        serde_json::from_str(&stdout)
            .map_err(|e| format!("gcloud {args:?} is not JSON ({e}): {stdout}"))
    }

    /// `ha-sim ssh VM -- CMD`: stdout, or the failure with its output (for commands a test retries).
    pub fn try_ssh(&self, vm: &str, cmd: &[&str]) -> Result<String, String> {
        let dir = self.state_dir().to_string_lossy().to_string();
        let mut args = vec!["ssh", "--state-dir", &dir, vm, "--"];
        args.extend_from_slice(cmd);
        self.try_run(&args)
    }

    fn cli(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        all.extend(["--url", self.url.as_str()]);
        self.run(&all)
    }

    fn run(&self, args: &[&str]) -> String {
        self.try_run(args)
            .unwrap_or_else(|e| panic!("ha-sim {args:?} failed: {e}"))
    }

    fn try_run(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(sim_binary())
            .args(args)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    tools_bin().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .output()
            .expect("running ha-sim");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "{}\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Something that happens to the cloud behind the provider's back (ha-sim's own `Event`: a crashed VM, a
    /// zone down, a label edited by hand), applied before this returns: the sim answers once its VMs reflect it.
    /// Returns the sim's sentence for what it did.
    #[track_caller]
    pub fn event(&self, event: Event) -> String {
        let body = serde_json::to_value(&event).expect("an event encodes");
        let answer = self.admin_call("POST", "events", Some(&body));
        answer["result"].as_str().unwrap_or_default().to_string()
    }

    /// Adds a failpoint (ha-sim's own `Failpoint`: when a request or operation matches, then an effect) and
    /// returns its id.
    #[track_caller]
    pub fn add_failpoint(&self, failpoint: Failpoint) -> u64 {
        let body = serde_json::to_value(&failpoint).expect("a failpoint encodes");
        let added = self.admin_call("POST", "faults", Some(&body));
        added["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("the sim's answer to a new failpoint has no id: {added}"))
    }

    /// Removes every failpoint, releasing stalled operations.
    #[track_caller]
    pub fn clear_failpoints(&self) {
        self.admin_call("DELETE", "faults", None);
    }

    /// `GET /_sim/<path>` on the admin API, as JSON.
    #[track_caller]
    pub fn admin(&self, path: &str) -> Value {
        self.admin_call("GET", path, None)
    }

    /// One call to the admin API, `/_sim/<path>`: its JSON answer, or a panic naming the call and the sim's
    /// error for any status but 2xx.
    #[track_caller]
    fn admin_call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        use std::io::{Read, Write};
        let addr = self.url.trim_start_matches("http://").trim_end_matches('/');
        let mut conn = std::net::TcpStream::connect(addr).expect("connecting to ha-sim");
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            conn,
            "{method} /_sim/{path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("request");
        let mut text = String::new();
        conn.read_to_string(&mut text).expect("response");
        let (head, answer) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let ok = head
            .split(' ')
            .nth(1)
            .is_some_and(|code| code.starts_with('2'));
        assert!(ok, "{method} /_sim/{path} {body}: {head}\n{answer}");
        serde_json::from_str(answer)
            .unwrap_or_else(|e| panic!("/_sim/{path} is not JSON ({e}): {answer}"))
    }

    /// The request log (`GET /_sim/requests`: counts per API method and the last entries); `reset` clears it
    /// after reading, so the next read shows only what came after.
    pub fn requests(&self, reset: bool) -> Value {
        let log = self.admin("requests");
        if reset {
            self.cli(&["requests", "--reset"]);
        }
        log
    }

    /// The VM `name` as the sim stores it (`GET /_sim/state`), in GCE's JSON shape (labels, metadata, ...).
    pub fn instance(&self, name: &str) -> Value {
        self.find_instance(name)
            .unwrap_or_else(|| panic!("no VM {name} in the sim"))
    }

    /// The VM `name`, or `None` while it does not exist (e.g. between a rebuild's delete and its create).
    pub fn find_instance(&self, name: &str) -> Option<Value> {
        let state = self.admin("state");
        state["instances"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, i)| i)
            .find(|i| i["name"] == name)
            .cloned()
    }

    /// Names of the objects of one kind in `status` (`instances`, `addresses`, `forwardingRules`).
    /// One field of every VM, by VM name (`"id"`: a VM deleted and made again under its name shows a new id;
    /// `"status"`, `"machineType"`).
    pub fn vm_field(&self, field: &str) -> std::collections::BTreeMap<String, String> {
        self.admin("state")["instances"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, i)| {
                let text = |k: &str| i[k].as_str().unwrap_or_default().to_string();
                (text("name"), text(field))
            })
            .collect()
    }

    pub fn names(&self, kind: &str) -> Vec<String> {
        let mut v: Vec<String> = self.status()[kind]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|o| o["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.keep_if_failed();
        // A clean stop kills every VM process; fall back to SIGKILL of the sim if it does not answer.
        let _ = Command::new(sim_binary())
            .args(["stop", "--url", &self.url])
            .output();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sim {
    /// A failed scenario keeps the sim's folder (its log, every VM's etcd log and data) for whoever reads the
    /// failure, as the workspace is kept, and prints `ha-sim status` (each VM's etcd: running, healthy, restarts,
    /// why not), since a CI log is often all there is to read.
    fn keep_if_failed(&mut self) {
        if std::thread::panicking() {
            self.state_dir.disable_cleanup(true);
            eprintln!(
                "sim state kept at {} ({} free on its disk: a full disk stalls etcd)",
                self.state_dir.path().display(),
                free_space(self.state_dir.path())
            );
            if let Ok(out) = Command::new(sim_binary())
                .args(["status", "--url", &self.url])
                .output()
            {
                eprintln!(
                    "ha-sim status at the failure:\n{}",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        }
    }
}

/// The space left to unprivileged writers on the disk that holds `path`, e.g. "2.4 GB" ("unknown space" when
/// statvfs fails).
fn free_space(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return "unknown space".into();
    };
    // SAFETY: statvfs writes only into the zeroed struct we pass; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
        return "unknown space".into();
    }
    let bytes = st.f_bavail as f64 * st.f_frsize as f64;
    format!("{:.1} GB", bytes / 1e9)
}

/// `--etcd-bin` for each etcd minor scripts/setup installed: Debian's 3.4 at `.tools/bin/etcd` and, when present,
/// Debian trixie's 3.5.16 at `.tools/etcd-3.5/bin/etcd`. Per minor, not a plain default, so a master whose image names a minor
/// the sim has no binary for fails to boot instead of quietly running another version.
pub fn etcd_bin_args() -> Vec<std::ffi::OsString> {
    let mut args = vec![
        "--etcd-bin".into(),
        format!("3.4={}", tools_bin().join("etcd").display()).into(),
    ];
    if let Some(e35) = etcd35_bin() {
        args.push("--etcd-bin".into());
        args.push(format!("3.5={}", e35.display()).into());
    }
    args
}

/// etcd 3.5.16 as scripts/setup unpacks it (Debian trixie), with its etcdctl beside it.
pub fn etcd35_bin() -> Option<PathBuf> {
    let p = crate::paths::repo_root().join(".tools/etcd-3.5/bin/etcd");
    p.is_file().then_some(p)
}
