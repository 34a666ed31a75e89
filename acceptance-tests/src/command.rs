//! Running a client command with a timeout and keeping everything it printed for assertion messages.

use std::fmt;
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one command did. `Display` shows all of it, so `panic!("{output}")` tells the whole story.
#[derive(Clone, Debug)]
pub struct CmdOutput {
    /// The command line as typed, e.g. `tofu plan -input=false -no-color`.
    pub command: String,
    pub dir: PathBuf,
    /// Exit code; None when killed (by the timeout or a signal).
    pub code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

impl CmdOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout then stderr: clients print diagnostics to stderr and progress to stdout.
    pub fn combined(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// Panics with the full output unless the exit code is 0.
    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(self.success(), "command failed:\n{self}");
        self
    }

    /// Panics with the full output unless the command ran to completion with a non-zero exit code.
    #[track_caller]
    pub fn assert_failure(&self) -> &Self {
        assert!(
            !self.timed_out && self.code.is_some_and(|c| c != 0),
            "command should have failed:\n{self}"
        );
        self
    }

    /// Panics with the full output unless `needle` is in stdout or stderr (whitespace-insensitive, since the
    /// clients wrap long diagnostic lines).
    #[track_caller]
    pub fn assert_contains(&self, needle: &str) -> &Self {
        assert!(
            normalize_ws(&self.combined()).contains(&normalize_ws(needle)),
            "expected output to contain {needle:?}:\n{self}"
        );
        self
    }
}

impl fmt::Display for CmdOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match (self.timed_out, self.code) {
            (true, _) => "TIMED OUT".to_string(),
            (false, Some(code)) => format!("exit code {code}"),
            (false, None) => "killed by a signal".to_string(),
        };
        writeln!(
            f,
            "$ {}    (in {}; {status} after {:.2?})",
            self.command,
            self.dir.display(),
            self.duration
        )?;
        writeln!(f, "----- stdout -----\n{}", self.stdout.trim_end())?;
        write!(
            f,
            "----- stderr -----\n{}\n------------------",
            self.stderr.trim_end()
        )
    }
}

/// Collapses every run of whitespace to one space.
pub fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs `cmd` to completion or until `timeout`, capturing stdout and stderr.
///
/// The child gets its own process group and a timeout kills the whole group: a hung client's providers would
/// otherwise survive it and keep our pipes open.
pub fn run(mut cmd: Command, label: String, dir: PathBuf, timeout: Duration) -> CmdOutput {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawning `{label}` in {}: {e}", dir.display()));
    // Drain both pipes on threads so a chatty child never blocks on a full pipe.
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || read_lossy(&mut out_pipe));
    let err_reader = std::thread::spawn(move || read_lossy(&mut err_pipe));

    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= timeout => {
                timed_out = true;
                // SAFETY: kill(2) with the negated pid of the process group we created for this child.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                break child
                    .wait()
                    .unwrap_or_else(|e| panic!("waiting for `{label}`: {e}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => panic!("waiting for `{label}`: {e}"),
        }
    };
    let duration = start.elapsed();
    let stdout = out_reader.join().expect("stdout reader");
    let stderr = err_reader.join().expect("stderr reader");
    CmdOutput {
        command: label,
        dir,
        code: status.code(),
        timed_out,
        stdout,
        stderr,
        duration,
    }
}

fn read_lossy(pipe: &mut impl Read) -> String {
    let mut bytes = Vec::new();
    // A read error only truncates what we show; the exit code still decides the outcome.
    let _ = pipe.read_to_end(&mut bytes);
    strip_ansi(&String::from_utf8_lossy(&bytes))
}

/// Removes ANSI colour sequences (ESC `[` … final byte). Commands that take no -no-color flag (`providers
/// schema`) still colour their errors, and matching and failure messages want plain text.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The background sleep keeps stdout open after the shell is killed; only killing the process group lets the
    /// readers finish, so this returns promptly only if the whole group dies.
    #[test]
    fn timeout_kills_the_process_group() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30 & sleep 30"]);
        let start = Instant::now();
        let output = run(
            cmd,
            "sh".into(),
            PathBuf::from("."),
            Duration::from_millis(300),
        );
        assert!(output.timed_out && output.code.is_none(), "{output}");
        assert_eq!(output.stdout, "started\n");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn strips_colour_codes() {
        assert_eq!(
            strip_ansi("\u{1b}[31m│\u{1b}[0m \u{1b}[0mError: x"),
            "│ Error: x"
        );
    }
}
