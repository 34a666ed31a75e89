//! `ha-sim`: see `ha-sim --help` and docs/sim.md.

use clap::Parser;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HA_SIM_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = ha_sim::cli::Cli::parse();
    if !matches!(cli.command, ha_sim::cli::Command::Serve(_)) {
        // The client commands print for a reader such as `ha-sim status | head -1`: when it closes the pipe, end
        // quietly, as other Unix tools do, instead of panicking in println! on EPIPE (Rust ignores SIGPIPE). Not
        // for `serve`, which must outlive its readers (pipes to VM processes, a log reader that goes away);
        // sockets are unaffected either way (Rust writes to them with MSG_NOSIGNAL).
        // SAFETY: restoring a signal's default disposition has no preconditions; nothing here handles SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match ha_sim::cli::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("ha-sim: {e}");
            std::process::exit(1);
        }
    }
}
