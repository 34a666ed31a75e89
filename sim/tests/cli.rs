//! The `ha-sim` binary: serve in the foreground, find it through the state dir, drive faults and the request
//! log from the command line, stop it with `ha-sim stop` or SIGTERM.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ha-sim");

/// Starts `ha-sim serve`; the caller owns (and waits for) the child.
#[allow(clippy::zombie_processes)] // the child is handed to the caller, which waits for its exit
fn serve(dir: &Path) -> (Child, u16) {
    let port_file = dir.join("port");
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--no-vms",
            "--latency-profile",
            "test",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
        ])
        .arg(dir)
        .arg("--port-file")
        .arg(&port_file)
        .spawn()
        .expect("spawn ha-sim serve");
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(port) = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
        {
            return (child, port);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ha-sim serve never wrote its port file");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ha_sim(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .arg("--state-dir")
        .arg(dir)
        .output()
        .expect("run ha-sim");
    assert!(
        out.status.success(),
        "ha-sim {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < until, "ha-sim serve did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_cli_drives_a_running_sim_and_stops_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut child, port) = serve(dir.path());
    let discovery: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("sim.json")).expect("sim.json"),
    )
    .expect("json");
    assert_eq!(discovery["port"], port);

    let out = ha_sim(
        dir.path(),
        &[
            "fault",
            "http",
            "--status",
            "503",
            "--api",
            "zones.list",
            "--times",
            "1",
        ],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("request(zones.list)=status(503)x1"));
    let listed = ha_sim(dir.path(), &["fault", "list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("status(503)"));
    let out = ha_sim(dir.path(), &["fault", "zone-down", "us-central1-a"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("DOWN"));
    let status = ha_sim(dir.path(), &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(v["zonesDown"], serde_json::json!(["us-central1-a"]));
    assert_eq!(v["clientIp"], "127.0.0.1", "this host's default address");
    let text = ha_sim(dir.path(), &["status"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("zones DOWN: us-central1-a"));
    // This host moves outside the source ranges, and back.
    let out = ha_sim(dir.path(), &["fault", "client-ip", "198.51.100.7"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("198.51.100.7"));
    let text = ha_sim(dir.path(), &["status"]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("as the VMs' firewall sees it: 198.51.100.7")
    );
    ha_sim(dir.path(), &["fault", "client-ip", "default"]);
    let status = ha_sim(dir.path(), &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(v["clientIp"], "127.0.0.1");
    let bad = Command::new(BIN)
        .args(["fault", "client-ip", "not-an-ip", "--state-dir"])
        .arg(dir.path())
        .output()
        .expect("run ha-sim");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not an IPv4 address"));
    ha_sim(dir.path(), &["fault", "clear"]);
    let reqs = ha_sim(dir.path(), &["requests", "--reset"]);
    assert!(String::from_utf8_lossy(&reqs.stdout).contains("total"));

    ha_sim(dir.path(), &["stop"]);
    assert!(wait_exit(&mut child).success());
    assert!(
        !dir.path().join("sim.json").exists(),
        "the discovery file goes with the sim"
    );
    assert!(
        dir.path().join("state.json").exists(),
        "state stays for the next run"
    );
}

#[test]
fn sigterm_stops_the_sim_cleanly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut child, _) = serve(dir.path());
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(wait_exit(&mut child).success());
    assert!(!dir.path().join("sim.json").exists());
}

/// `ha-sim status | head -1`: once the reader has what it wants and closes the pipe, the command ends quietly
/// (SIGPIPE, as `ls | head` does), without a panic or a backtrace on stderr.
#[test]
fn a_closed_stdout_ends_a_client_command_quietly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut child, _) = serve(dir.path());
    // A pipe whose reader is already gone, so the command's first write meets it closed, every time.
    let mut fds = [0; 2];
    // Close-on-exec: a `serve` that another test spawns meanwhile must not inherit the reader and keep it open.
    // SAFETY: pipe2 writes two fresh descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are fresh, and each is owned exactly once.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let out = Command::new(BIN)
        .arg("status")
        .arg("--state-dir")
        .arg(dir.path())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("run ha-sim status");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked")
            && !stderr.contains("Broken pipe")
            && !stderr.contains("backtrace"),
        "ha-sim status into a closed pipe: {stderr}"
    );
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "ha-sim status into a closed pipe ended with {:?}: {stderr}",
        out.status
    );
    ha_sim(dir.path(), &["stop"]);
    assert!(wait_exit(&mut child).success());
}

/// `--stop-with-parent`: when whatever started the sim dies without stopping it (a test killed by a timeout), the
/// sim stops cleanly by itself instead of keeping its VMs' addresses bound.
#[test]
fn a_sim_started_with_stop_with_parent_stops_when_its_parent_is_killed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port_file = dir.path().join("port");
    // A shell starts the sim and then waits; killing the shell orphans the sim.
    let mut parent = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{BIN}' serve --no-vms --latency-profile test --listen 127.0.0.1:0 --state-dir '{}' \
             --port-file '{}' --stop-with-parent & wait",
            dir.path().display(),
            port_file.display()
        ))
        .spawn()
        .expect("spawn sh");
    let until = Instant::now() + Duration::from_secs(20);
    while !port_file.exists() {
        assert!(
            Instant::now() < until,
            "ha-sim serve never wrote its port file"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(dir.path().join("sim.json").exists());
    parent.kill().expect("killing the shell");
    parent.wait().expect("reaping the shell");
    // A clean stop removes sim.json as its last act.
    let until = Instant::now() + Duration::from_secs(10);
    while dir.path().join("sim.json").exists() {
        assert!(
            Instant::now() < until,
            "the orphaned sim was still running 10 s after its parent was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
