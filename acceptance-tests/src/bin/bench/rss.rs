//! Peak RSS of the provider processes a plan starts. The mirror holds a wrapper script instead of the provider;
//! the wrapper (this executable with `--rss-wrap`) runs the real provider with the same stdio and environment,
//! then appends the child's peak RSS (getrusage RUSAGE_CHILDREN: max RSS of the waited-for child) to a file.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use acceptance_tests::{Client, Mirror, Workspace};

pub const WRAP_FLAG: &str = "--rss-wrap";

/// Wrapper mode: `bench --rss-wrap <provider> <out file> [args…]`. Never returns.
pub fn wrap_main(args: &[String]) -> ! {
    let [provider, out, rest @ ..] = args else {
        eprintln!("bench {WRAP_FLAG}: expected <provider> <out file> [args…]");
        std::process::exit(2);
    };
    let status = Command::new(provider).args(rest).status();
    let code = match status {
        Ok(status) => status.code().unwrap_or(1),
        Err(e) => {
            eprintln!("bench {WRAP_FLAG}: running {provider}: {e}");
            std::process::exit(1);
        }
    };
    // SAFETY: getrusage writes into the zeroed struct we own.
    let max_rss_kib = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage.ru_maxrss
    };
    // One short O_APPEND write per process, so concurrent providers don't interleave.
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
    {
        let _ = file.write_all(format!("{max_rss_kib}\n").as_bytes());
    }
    std::process::exit(code);
}

/// Runs one plan of `config` under `client` with the wrapped provider; the largest peak RSS of its provider
/// processes, in MiB.
pub fn peak_mib(client: Client, provider: &Path, config: &str) -> Result<f64, String> {
    let scratch = tempfile::Builder::new()
        .prefix("bench-rss-")
        .tempdir_in(acceptance_tests::work_dir())
        .map_err(|e| format!("scratch dir: {e}"))?;
    let out = scratch.path().join("rss-kib.txt");
    let bench =
        std::env::current_exe().map_err(|e| format!("locating the bench executable: {e}"))?;
    let script = scratch.path().join("wrapper.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec '{}' {WRAP_FLAG} '{}' '{}' \"$@\"\n",
            bench.display(),
            provider.display(),
            out.display()
        ),
    )
    .map_err(|e| format!("writing {}: {e}", script.display()))?;
    let mirror = Mirror::create(&scratch.path().join("mirror"), &script)
        .map_err(|e| format!("wrapper mirror: {e}"))?;

    let ws = Workspace::with_mirror(client, "bench-rss", Arc::new(mirror));
    ws.write_main_tf(config);
    let init = ws.run(&["init", "-input=false", "-no-color"]);
    if !init.success() {
        return Err(format!("init failed:\n{init}"));
    }
    // init does not start the provider, but don't count it if a client ever does.
    let _ = std::fs::remove_file(&out);
    let plan = ws.run(&["plan", "-input=false", "-no-color"]);
    if !plan.success() {
        return Err(format!("plan failed:\n{plan}"));
    }
    let text = std::fs::read_to_string(&out)
        .map_err(|e| format!("no RSS recorded ({}): {e}", out.display()))?;
    let samples: Vec<u64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    eprintln!(
        "bench: {client}: {} provider processes, peak RSS KiB {samples:?}",
        samples.len()
    );
    samples
        .iter()
        .max()
        .map(|kib| *kib as f64 / 1024.0)
        .ok_or_else(|| "no provider process ran".to_string())
}
