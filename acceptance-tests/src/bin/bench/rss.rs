//! Peak RSS of the provider processes a plan starts. The mirror holds a wrapper script instead of the provider;
//! the wrapper (this executable with `--rss-wrap`) runs the real provider with the same stdio and environment,
//! then appends the child's peak RSS and CPU time (getrusage RUSAGE_CHILDREN, i.e. the waited-for child) to a file.

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
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
    let cpu_us = micros(usage.ru_utime) + micros(usage.ru_stime);
    // One short O_APPEND write per process, so concurrent providers don't interleave.
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
    {
        let _ = file.write_all(format!("{} {cpu_us}\n", usage.ru_maxrss).as_bytes());
    }
    std::process::exit(code);
}

/// What the provider processes of one plan used.
pub struct ProviderUsage {
    /// The largest peak RSS of any of them.
    pub peak_mib: f64,
    /// Their total user + system CPU time: compared with the plan's wall time, it tells provider cost from
    /// client cost.
    pub cpu_secs: f64,
    pub processes: usize,
}

/// Runs one plan of `config` under `client` with the wrapped provider.
pub fn measure(client: Client, provider: &Path, config: &str) -> Result<ProviderUsage, String> {
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
    // Lines are "<max RSS KiB> <CPU microseconds>", one per provider process.
    let samples: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace().map(str::parse::<u64>);
            Some((fields.next()?.ok()?, fields.next()?.ok()?))
        })
        .collect();
    eprintln!("bench: {client}: (peak RSS KiB, CPU µs) per provider process: {samples:?}");
    let peak_kib = samples
        .iter()
        .map(|s| s.0)
        .max()
        .ok_or_else(|| "no provider process ran".to_string())?;
    Ok(ProviderUsage {
        peak_mib: peak_kib as f64 / 1024.0,
        cpu_secs: samples.iter().map(|s| s.1).sum::<u64>() as f64 / 1e6,
        processes: samples.len(),
    })
}
