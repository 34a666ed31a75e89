//! Serving a provider to Terraform or OpenTofu over go-plugin: [`serve`] is the whole public surface.
//!
//! Order of events in a plugin process:
//! 1. `handshake`: check the magic cookie and protocol versions the client set in our environment.
//! 2. `tls`: make a fresh server certificate and pin the client's (AutoMTLS).
//! 3. Bind a loopback port, print the handshake line once, and serve gRPC (`grpc`, `controller`) on connections
//!    that passed mutual TLS (`listener`).
//! 4. `lifetime`: exit after Shutdown, when the client's connection is gone, or if it never came.

mod controller;
mod grpc;
mod handshake;
mod lifetime;
mod listener;
mod tls;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::transport::Server;

use crate::ProviderServer;
use crate::proto::health::health_server::HealthServer;
use crate::proto::plugin::grpc_broker_server::GrpcBrokerServer;
use crate::proto::plugin::grpc_controller_server::GrpcControllerServer;
use crate::proto::plugin::grpc_stdio_server::GrpcStdioServer;
use crate::proto::tfplugin6::provider_server::ProviderServer as ProviderGrpcServer;
use handshake::Launch;
use lifetime::{ExitReason, Lifetime};

/// Terraform's own limit for plugin messages (terraform-plugin-go uses the same). tonic's default of 4 MiB would
/// reject a large state or schema that Terraform itself accepts.
const MAX_MESSAGE_SIZE: usize = 256 << 20;

/// The stack of every runtime thread. A provider's apply is one deep chain of futures (a restore's join awaits
/// observe, backup, the executor and every backend call), and an unoptimised build lays each one out in full on
/// the polling thread's stack: tokio's 2 MiB default overflowed there and aborted the plugin ("Plugin did not
/// respond"). 16 MiB is reserved address space, touched only as deep as a call goes.
const RUNTIME_STACK: usize = 16 * 1024 * 1024;

/// Runs `provider` as a Terraform/OpenTofu plugin until the client is done with it, and returns the process exit
/// code. Call it from a plain (non-async) `main`; it builds its own tokio runtime.
///
/// Run by hand (without the client's magic cookie) it prints one line explaining what the binary is and returns
/// failure at once.
pub fn serve<P: ProviderServer>(provider: P) -> ExitCode {
    let launch = match handshake::check_launch(|k| std::env::var(k).ok()) {
        Ok(launch) => launch,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // Two workers: provider calls are mostly network I/O, but one slow CPU-bound call (e.g. key generation) must
    // not stall the other RPCs Terraform runs in parallel. Building it costs well under a millisecond.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(RUNTIME_STACK)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("terraform provider plugin: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(provider, launch));
    // Do not wait for tasks still running (the open StreamStdio stream, a handler the client abandoned): the
    // client is done with us.
    runtime.shutdown_background();
    code
}

async fn run<P: ProviderServer>(provider: P, launch: Launch) -> ExitCode {
    match run_inner(provider, launch).await {
        Ok(reason) => {
            tracing::debug!(?reason, "plugin exiting");
            match reason {
                ExitReason::Shutdown | ExitReason::ClientGone => ExitCode::SUCCESS,
                ExitReason::NeverConnected => ExitCode::FAILURE,
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "plugin failed");
            eprintln!("terraform provider plugin: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("binding a loopback port: {0}")]
    Bind(#[source] std::io::Error),
    #[error("writing the handshake line to stdout: {0}")]
    Handshake(#[source] std::io::Error),
    #[error("serving gRPC: {0}")]
    Serve(#[from] tonic::transport::Error),
}

async fn run_inner<P: ProviderServer>(
    provider: P,
    launch: Launch,
) -> Result<ExitReason, ServeError> {
    lifetime::ignore_interrupts();
    let tls = match launch.client_cert_pem.as_deref() {
        Some(pem) => Some(tls::server_tls(pem)?),
        None => {
            // go-plugin serves plaintext when the client did not ask for AutoMTLS; the client only does that when
            // the user set TF_DISABLE_PLUGIN_TLS. We follow, so that escape hatch keeps working, and say so.
            tracing::warn!(
                "no PLUGIN_CLIENT_CERT: serving plaintext gRPC on loopback, as the client asked"
            );
            None
        }
    };

    // Port 0: any free port; both clients accept any port. PLUGIN_MIN_PORT/MAX_PORT are ignored: go-plugin's own
    // servers read them only on Windows and use a Unix socket elsewhere, so no client relies on them here.
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .map_err(ServeError::Bind)?;
    let addr = listener.local_addr().map_err(ServeError::Bind)?;

    let lifetime = Lifetime::new();
    let acceptor = tls
        .as_ref()
        .map(|t| tokio_rustls::TlsAcceptor::from(t.config.clone()));
    let incoming = listener::incoming(listener, acceptor, lifetime.clone());

    let provider_service = ProviderGrpcServer::new(grpc::ProviderService::new(Arc::new(provider)))
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let server = Server::builder()
        .add_service(provider_service)
        .add_service(GrpcControllerServer::new(controller::Controller {
            lifetime: lifetime.clone(),
        }))
        .add_service(GrpcStdioServer::new(controller::Stdio))
        .add_service(GrpcBrokerServer::new(controller::Broker))
        .add_service(HealthServer::new(controller::Health))
        .serve_with_incoming(incoming);

    // Only now, with the listener bound and the server built, tell the client where to connect.
    write_handshake(&handshake::handshake_line(
        addr,
        tls.as_ref().map(|t| t.cert_der.as_slice()),
    ))?;
    tracing::debug!(%addr, tls = tls.is_some(), "plugin listening");

    // No graceful drain: the open StreamStdio stream would hold it forever, and every exit condition means the
    // client has finished with us.
    tokio::select! {
        result = server => {
            result?;
            Ok(ExitReason::ClientGone)
        }
        reason = lifetime.wait_for_exit() => Ok(reason),
    }
}

/// Writes the handshake line in one write and flushes it: the client reads stdout line by line and waits for it.
fn write_handshake(line: &str) -> Result<(), ServeError> {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .map_err(ServeError::Handshake)
}
