//! When the plugin process ends.
//!
//! A provider process lives exactly as long as its client needs it:
//! - **Shutdown** (go-plugin's last call to every plugin): exit once the client has closed its connection, which
//!   go-plugin's `GRPCClient.Close` does right after the reply arrives, so the reply is never cut off; or after
//!   [`SHUTDOWN_CAP`] if the client keeps the connection. If we stayed, go-plugin would wait 2 s and then SIGKILL
//!   us, for every one of the several processes a command starts. (A fixed 5 ms delay before this lost a Shutdown
//!   reply once on a loaded 2-core machine: the process exited before the reply left the socket.)
//! - **The client went away** without calling Shutdown (crashed, was killed): the kernel closes its sockets, so
//!   our last authenticated connection closes. We exit after a short grace period. This needs no polling of the
//!   parent process and works the same whoever the parent is. go-plugin clients hold one HTTP/2 connection for
//!   the whole session and keep the StreamStdio call open on it, so the connection never idles out while the
//!   client is alive.
//! - **No client ever connected** (it died between reading the handshake line and dialling): exit after go-plugin's
//!   own start timeout, instead of lingering forever.
//!
//! Only connections that completed the TLS handshake count, so nobody else can keep us alive or make us exit.
//! SIGINT is ignored, as go-plugin's servers do: Ctrl-C reaches the whole process group, and the client then asks
//! us to stop through StopProvider; dying on the signal would abandon an apply half way.

use std::time::Duration;

use tokio::sync::watch;

/// The longest we stay after Shutdown when the client keeps its connection open: far below go-plugin's 2 s kill,
/// far above the time a reply takes to leave the socket under load.
const SHUTDOWN_CAP: Duration = Duration::from_millis(250);
/// How long to wait for another connection after the last one closed.
const CLIENT_GONE_GRACE: Duration = Duration::from_millis(500);
/// go-plugin's default start timeout: the client gives up on us after this anyway.
const FIRST_CONNECTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the server stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitReason {
    Shutdown,
    ClientGone,
    NeverConnected,
}

#[derive(Debug, Clone, Copy, Default)]
struct State {
    live_connections: usize,
    ever_connected: bool,
    shutdown_requested: bool,
    shutdown_cap_passed: bool,
}

/// Shared by the listener (connections), the controller (Shutdown) and `serve` (waiting). Cheap to clone.
#[derive(Clone)]
pub(crate) struct Lifetime {
    state: watch::Sender<State>,
}

impl Lifetime {
    pub(crate) fn new() -> Self {
        Self {
            state: watch::Sender::new(State::default()),
        }
    }

    /// Records an authenticated connection; it counts until the guard is dropped.
    pub(crate) fn connection_opened(&self) -> ConnectionGuard {
        self.state.send_modify(|s| {
            s.live_connections += 1;
            s.ever_connected = true;
        });
        ConnectionGuard {
            state: self.state.clone(),
        }
    }

    /// Asks the process to exit once the client has closed its connection after the Shutdown reply, or after
    /// [`SHUTDOWN_CAP`].
    pub(crate) fn shutdown_soon(&self) {
        self.state.send_modify(|s| s.shutdown_requested = true);
        let state = self.state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(SHUTDOWN_CAP).await;
            state.send_modify(|s| s.shutdown_cap_passed = true);
        });
    }

    /// Resolves when one of the exit conditions in the module docs holds.
    pub(crate) async fn wait_for_exit(&self) -> ExitReason {
        let mut rx = self.state.subscribe();
        loop {
            let s = *rx.borrow_and_update();
            if s.shutdown_cap_passed || (s.shutdown_requested && s.live_connections == 0) {
                return ExitReason::Shutdown;
            }
            if s.live_connections > 0 {
                if rx.changed().await.is_err() {
                    return ExitReason::ClientGone;
                }
                continue;
            }
            let (wait, reason) = if s.ever_connected {
                (CLIENT_GONE_GRACE, ExitReason::ClientGone)
            } else {
                (FIRST_CONNECTION_TIMEOUT, ExitReason::NeverConnected)
            };
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return reason },
                _ = tokio::time::sleep(wait) => return reason,
            }
        }
    }
}

/// Keeps one connection counted while it is alive.
pub(crate) struct ConnectionGuard {
    state: watch::Sender<State>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.state
            .send_modify(|s| s.live_connections = s.live_connections.saturating_sub(1));
    }
}

/// Keeps SIGINT from killing the process (see the module docs). Must be called inside the runtime.
#[cfg(unix)]
pub(crate) fn ignore_interrupts() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::interrupt()) {
        Ok(mut sigint) => {
            tokio::spawn(async move {
                while sigint.recv().await.is_some() {
                    tracing::debug!(
                        "ignoring SIGINT; the client stops us through StopProvider and Shutdown"
                    );
                }
            });
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not install the SIGINT handler; Ctrl-C will kill this plugin")
        }
    }
}

#[cfg(not(unix))]
pub(crate) fn ignore_interrupts() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn shutdown_exits_as_soon_as_the_client_closes_its_connection() {
        let l = Lifetime::new();
        let c = l.connection_opened();
        let start = tokio::time::Instant::now();
        l.shutdown_soon();
        let waiter = tokio::spawn({
            let l = l.clone();
            async move { l.wait_for_exit().await }
        });
        tokio::time::sleep(SHUTDOWN_CAP / 10).await;
        assert!(!waiter.is_finished(), "the reply may still be on its way");
        drop(c);
        assert_eq!(waiter.await.unwrap(), ExitReason::Shutdown);
        assert!(start.elapsed() < SHUTDOWN_CAP, "{:?}", start.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_exits_after_the_cap_if_the_client_keeps_its_connection() {
        let l = Lifetime::new();
        let _c = l.connection_opened();
        let start = tokio::time::Instant::now();
        l.shutdown_soon();
        assert_eq!(l.wait_for_exit().await, ExitReason::Shutdown);
        assert!(start.elapsed() >= SHUTDOWN_CAP, "{:?}", start.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn last_connection_closing_exits_after_grace() {
        let l = Lifetime::new();
        let c = l.connection_opened();
        let waiter = tokio::spawn({
            let l = l.clone();
            async move { l.wait_for_exit().await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!waiter.is_finished(), "a live connection keeps us running");
        drop(c);
        assert_eq!(waiter.await.unwrap(), ExitReason::ClientGone);
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_within_the_grace_keeps_us_running() {
        let l = Lifetime::new();
        drop(l.connection_opened());
        let waiter = tokio::spawn({
            let l = l.clone();
            async move { l.wait_for_exit().await }
        });
        tokio::time::sleep(CLIENT_GONE_GRACE / 2).await;
        let _again = l.connection_opened();
        tokio::time::sleep(CLIENT_GONE_GRACE * 4).await;
        assert!(!waiter.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn never_connected_times_out() {
        let l = Lifetime::new();
        let start = tokio::time::Instant::now();
        assert_eq!(l.wait_for_exit().await, ExitReason::NeverConnected);
        assert!(start.elapsed() >= FIRST_CONNECTION_TIMEOUT);
    }
}
