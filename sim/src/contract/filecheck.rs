//! Keys and certificates parsed by upstream's own code: `k8s-filecheck` (tools/k8s-filecheck, built by
//! `scripts/setup` from client-go's sources as Debian packages them) runs, for each file, the function the real
//! program calls for that flag, and answers with that function's own error.

use super::Refusal;
use super::reads::{Kind, Read};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Serialize)]
struct Request {
    checks: Vec<Check>,
}

#[derive(Serialize)]
struct Check {
    id: String,
    kind: &'static str,
    paths: Vec<PathBuf>,
}

#[derive(Deserialize)]
struct Response {
    results: Vec<Answer>,
}

#[derive(Deserialize)]
struct Answer {
    id: String,
    ok: bool,
    #[serde(default)]
    error: String,
}

/// Where the checker is: `HA_SIM_K8S_FILECHECK`, else `k8s-filecheck` on `PATH`, else the workspace's `.tools/bin`.
pub fn program() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HA_SIM_K8S_FILECHECK") {
        return Some(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("k8s-filecheck"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/k8s-filecheck");
        p.is_file().then_some(p)
    })
}

/// Runs every parsing read of the master at once. `host` maps a path as a read's program sees it to the file on
/// this machine; `work` holds what the check writes (kubeconfigs whose paths are mapped the same way).
pub(crate) fn check(
    reads: &[Read],
    host: impl Fn(&Read, &str) -> Option<PathBuf>,
    work: &Path,
) -> Result<(), Refusal> {
    let mut checks = Vec::new();
    for (i, read) in reads.iter().enumerate() {
        if read.kind == Kind::Plain {
            continue;
        }
        // `access` has already refused a path that does not resolve; skip rather than guess.
        let Some(mut paths) = read
            .paths
            .iter()
            .map(|p| host(read, p))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        if read.kind == Kind::Kubeconfig {
            // The files a kubeconfig names are where the program sees them; clientcmd here sees this machine.
            let mapped = work.join(format!("kubeconfig-{i}.yaml"));
            map_kubeconfig(&paths[0], &mapped, |p| host(read, p)).map_err(|e| {
                Refusal::new(
                    &read.component,
                    format!("{} {}: {e}", read.what.trim(), read.paths[0]),
                )
            })?;
            paths = vec![mapped];
        }
        checks.push(Check {
            id: i.to_string(),
            kind: read.kind.as_str(),
            paths,
        });
    }
    if checks.is_empty() {
        return Ok(());
    }
    let environment = |cause: String| Refusal::new("ha-sim", cause);
    let program = program().ok_or_else(|| {
        environment("k8s-filecheck, which parses a master's keys with client-go, is not installed: run `bash scripts/setup`".into())
    })?;
    let request = serde_json::to_vec(&Request { checks }).expect("plain data serializes");
    let mut child = Command::new(&program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| environment(format!("cannot run {}: {e}", program.display())))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&request)
            .map_err(|e| environment(format!("writing to {}: {e}", program.display())))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| environment(format!("running {}: {e}", program.display())))?;
    if !out.status.success() {
        return Err(environment(format!(
            "{} failed: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let response: Response = serde_json::from_slice(&out.stdout)
        .map_err(|e| environment(format!("{} answered no JSON: {e}", program.display())))?;
    for answer in response.results.iter().filter(|a| !a.ok) {
        let Some(read) = answer.id.parse::<usize>().ok().and_then(|i| reads.get(i)) else {
            continue;
        };
        return Err(Refusal::new(
            &read.component,
            format!(
                "{} {}: {} (what {} calls for it)",
                read.what.trim(),
                read.paths.join(", "),
                answer.error,
                upstream_function(read.kind)
            ),
        ));
    }
    Ok(())
}

/// A copy of the kubeconfig at `from` whose certificate-authority, client-certificate and client-key name the files
/// on this machine.
fn map_kubeconfig(
    from: &Path,
    to: &Path,
    host: impl Fn(&str) -> Option<PathBuf>,
) -> Result<(), String> {
    use serde_norway::Value;
    let text = std::fs::read(from).map_err(|e| format!("open {}: {e}", from.display()))?;
    let mut kc: Value =
        serde_norway::from_slice(&text).map_err(|e| format!("error loading config file: {e}"))?;
    let remap = |entry: Option<&mut Value>, key: &str| {
        if let Some(Value::String(p)) = entry.and_then(|e| e.get_mut(key))
            && let Some(h) = host(p)
        {
            *p = h.to_string_lossy().into_owned();
        }
    };
    for list in ["clusters", "users"] {
        if let Some(Value::Sequence(items)) = kc.get_mut(list) {
            for item in items {
                if list == "clusters" {
                    remap(item.get_mut("cluster"), "certificate-authority");
                } else {
                    remap(item.get_mut("user"), "client-certificate");
                    remap(item.get_mut("user"), "client-key");
                }
            }
        }
    }
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let out = serde_norway::to_string(&kc).map_err(|e| e.to_string())?;
    std::fs::write(to, out).map_err(|e| format!("{}: {e}", to.display()))
}

fn upstream_function(kind: Kind) -> &'static str {
    match kind {
        Kind::PublicKeys => "client-go keyutil.PublicKeysFromFile",
        Kind::PrivateKey => "client-go keyutil.PrivateKeyFromFile",
        Kind::CertBundle => "client-go certutil.CertsFromFile",
        Kind::KeyPair => "Go's tls.LoadX509KeyPair",
        Kind::Kubeconfig => "client-go clientcmd.BuildConfigFromFlags and rest.TLSConfigFor",
        Kind::EncryptionConfig => {
            "apiserver's EncryptionConfiguration decoder and validation.ValidateEncryptionConfiguration"
        }
        Kind::Plain => "a plain read",
    }
}
