//! The startup configuration against the real tools that read it on a VM: cloud-init's own schema check of the
//! rendered user-data, and the node-runtime script under `sh` (syntax, shellcheck, and its two early exits run for
//! real: an image that already has the release's kubelet, and one that can install nothing). cloud-init and
//! shellcheck come from Debian through `bash scripts/setup`.

use super::k8s::CloudConfig;
use super::runtime::{SCRIPT, apt_repository, install_script, kubelet_package};
use super::tests::base;
use super::{KubernetesRelease, render_user_data};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn installed(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(found, "{tool} is missing: run `bash scripts/setup`");
}

fn release(tag: &str) -> KubernetesRelease {
    KubernetesRelease {
        image_tag: tag.into(),
        ..KubernetesRelease::legacy()
    }
}

#[test]
fn the_script_installs_the_clusters_release_from_its_minors_repository() {
    let k = release("v1.35.0");
    assert_eq!(
        apt_repository(&k),
        "https://pkgs.k8s.io/core:/stable:/v1.35/deb/"
    );
    assert_eq!(kubelet_package(&k), "kubelet=1.35.0-1.1");
    let legacy = KubernetesRelease::legacy();
    assert_eq!(kubelet_package(&legacy), "kubelet=1.28.15-1.1");
    let script = install_script(&k);
    assert!(script.contains(r#"want="Kubernetes v1.35.0""#), "{script}");
    assert!(script.contains(r#""kubelet=1.35.0-1.1""#), "{script}");
    assert!(script.contains("SystemdCgroup = true"), "{script}");
}

#[test]
fn user_data_writes_the_script_and_runs_it_before_the_kubelet_starts() {
    let ud = render_user_data(base());
    let cloud: CloudConfig = serde_norway::from_str(&ud).unwrap();
    let file = cloud
        .write_files
        .iter()
        .find(|f| f.path == SCRIPT)
        .expect("the install script is written");
    assert_eq!(file.permissions, "0755");
    assert_eq!(file.content, install_script(&base().kubernetes));
    let at = |cmd: &[&str]| cloud.runcmd.iter().position(|c| c == cmd);
    let runs = at(&["sh", SCRIPT]).expect("runcmd runs the script");
    let kubelet = at(&["systemctl", "enable", "--now", "kubelet"]).expect("kubelet started");
    assert!(runs < kubelet, "{:?}", cloud.runcmd);
}

#[test]
fn cloud_init_accepts_the_rendered_user_data() {
    installed("cloud-init");
    let dir = tempfile::tempdir().unwrap();
    let mut restoring = base().clone();
    restoring.kubernetes = release("v1.35.0");
    let mut other_port = base().clone();
    other_port.api_port = 6443;
    for (name, cfg) in [
        ("legacy", base()),
        ("1.35", &restoring),
        ("api on 6443", &other_port),
    ] {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, render_user_data(cfg)).unwrap();
        let out = Command::new("cloud-init")
            .args(["schema", "-c"])
            .arg(&path)
            .output()
            .expect("cloud-init runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "[{name}] cloud-init schema: {text}");
        assert!(text.contains("Valid cloud-config"), "[{name}] {text}");
    }
}

/// On a master whose API is off 443, the health-check port's unit is written, started after systemd has read it
/// and before the kubelet starts the sidecar, and systemd's own checker finds nothing wrong with it.
#[test]
fn the_health_check_ports_unit_is_started_before_the_kubelet_and_systemd_accepts_it() {
    use super::healthcheck_port::{UNIT, UNIT_NAME};
    let mut cfg = base().clone();
    cfg.api_port = 6443;
    let cloud: CloudConfig = serde_norway::from_str(&render_user_data(&cfg)).unwrap();
    let unit = cloud
        .write_files
        .iter()
        .find(|f| f.path == UNIT)
        .expect("the unit is written");
    assert_eq!(unit.permissions, "0644");
    let at = |cmd: &[&str]| cloud.runcmd.iter().position(|c| c == cmd);
    let reload = at(&["systemctl", "daemon-reload"]).expect("systemd reads new units");
    let started = at(&["systemctl", "enable", "--now", UNIT_NAME]).expect("the unit is started");
    let kubelet = at(&["systemctl", "enable", "--now", "kubelet"]).expect("kubelet started");
    assert!(reload < started && started < kubelet, "{:?}", cloud.runcmd);
    let on_443: CloudConfig = serde_norway::from_str(&render_user_data(base())).unwrap();
    assert!(on_443.write_files.iter().all(|f| f.path != UNIT));
    assert!(
        on_443
            .runcmd
            .iter()
            .all(|c| !c.contains(&UNIT_NAME.to_string()))
    );

    // systemd looks the unit's command up in its own search path, which includes /usr/sbin.
    installed("systemd-analyze");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(UNIT_NAME);
    std::fs::write(&path, &unit.content).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .output()
        .expect("systemd-analyze runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.trim().is_empty(),
        "systemd-analyze verify {UNIT_NAME} (iptables missing? run `bash scripts/setup`): {text}"
    );
}

#[test]
fn the_script_is_posix_sh_that_shellcheck_passes() {
    installed("shellcheck");
    let dir = tempfile::tempdir().unwrap();
    crate::tests::assert_posix_sh(
        dir.path(),
        "install-node-runtime.sh",
        &install_script(&base().kubernetes),
    );
}

/// Runs the script with `bin` as its whole PATH, so only the commands put there exist.
fn run_with_path(script: &str, bin: &Path) -> std::process::Output {
    let path = bin.join("install-node-runtime.sh");
    std::fs::write(&path, script).unwrap();
    Command::new("/bin/sh")
        .arg(&path)
        .env_clear()
        .env("PATH", bin)
        .output()
        .unwrap()
}

fn stub(bin: &Path, name: &str, body: &str) {
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_script_leaves_an_image_that_has_the_release_alone_and_explains_one_it_cannot_serve() {
    let script = install_script(&release("v1.35.0"));
    // An image built for the contract: the release's kubelet and containerd are there; nothing is installed (no
    // apt-get exists here, so reaching the install would fail).
    let ready = tempfile::tempdir().unwrap();
    stub(ready.path(), "kubelet", "echo 'Kubernetes v1.35.0'");
    stub(ready.path(), "containerd", "exit 0");
    let out = run_with_path(&script, ready.path());
    assert!(out.status.success(), "{out:?}");

    // Another release's kubelet on an image without apt: refused, saying what the image needs.
    let old = tempfile::tempdir().unwrap();
    stub(old.path(), "kubelet", "echo 'Kubernetes v1.34.1'");
    stub(old.path(), "containerd", "exit 0");
    let out = run_with_path(&script, old.path());
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no kubelet v1.35.0 and no apt-get") && err.contains("Debian or Ubuntu image"),
        "{err}"
    );
}

/// Runs the script's containerd filter on `default` (what `containerd config default` printed) with the real awk.
fn systemd_cgroups(default: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("/bin/sh")
        .args(["-c", super::runtime::SYSTEMD_CGROUP_FILTER])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(default.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The runc options table of containerd 1.7's and 2.x's `config default` (abridged to the lines around it): 1.x
/// prints `SystemdCgroup = false` in it, 2.x (config version 3) does not print the key at all, which a
/// `s/false/true/` left at cgroupfs while the kubelet expects systemd.
#[test]
fn containerd_1_and_2_default_configs_both_get_systemd_cgroups() {
    let v1 = "version = 2\n\
        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\
        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  BinaryName = \"\"\n  SystemdCgroup = false\n\
        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runsc]\n";
    let v2 = "version = 3\n\
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n  runtime_type = 'io.containerd.runc.v2'\n\
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  BinaryName = ''\n  CriuImagePath = ''\n\
        [plugins.'io.containerd.cri.v1.runtime'.cni]\n";
    for (name, default) in [("containerd 1.x", v1), ("containerd 2.x", v2)] {
        let out = systemd_cgroups(default);
        assert_eq!(out.matches("SystemdCgroup").count(), 1, "{name}:\n{out}");
        let table = out
            .split('[')
            .find(|t| t.contains("runtimes.runc.options]"))
            .unwrap();
        assert!(table.contains("SystemdCgroup = true"), "{name}:\n{out}");
        assert!(out.contains("BinaryName"), "{name} lost a line:\n{out}");
    }
}
