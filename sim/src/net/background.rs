//! A small owned event loop: one thread running a current-thread tokio runtime, stopped (and joined) on drop.
//!
//! Proxies, load balancers and VM API stand-ins each get their own, rather than borrowing the caller's runtime, because
//! (1) their constructors are plain functions the sim can call from sync or async code, and (2) dropping the runtime is
//! the one reliable way to close the listener *and every spliced connection* before `drop` returns, so a port can be
//! re-bound at once and no connection survives the removal of a NAT or forwarding rule (as on GCE).

use std::future::Future;
use std::io;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

pub(crate) struct Background {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Runs `make()`'s future until it finishes or the handle is stopped. `make` runs on the new thread, so the future
    /// need not be `Send`; anything it needs (bound std listeners, shared state) is moved in.
    pub(crate) fn spawn<F, Fut>(name: &str, make: F) -> io::Result<Background>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        // Built here, not on the thread, so a failure surfaces to the caller instead of a dead thread.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        _ = stopped => {}
                        _ = make() => {}
                    }
                });
                // Dropping the runtime cancels every task it spawned: accepted connections close here.
                drop(runtime);
            })?;
        Ok(Background {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the loop and waits until its sockets are closed. Idempotent.
    pub(crate) fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // A panic inside the loop already printed its message; there is nothing left to clean up.
            let _ = thread.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds a std listener (so bind errors surface synchronously) ready to hand to a [`Background`] loop.
pub(crate) fn bind(addr: std::net::SocketAddr) -> io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}
