//! Starting and stopping a sim: bind, load state, resume operations, serve the API and the admin routes.

use crate::app::Sim;
use crate::config::SimConfig;
use crate::fabric::Fabric;
use crate::state::Cloud;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;

/// A running sim. Dropping it does not stop it; call [`Running::stop`].
pub struct Running {
    pub sim: Arc<Sim>,
    pub addr: SocketAddr,
    /// Root URL, e.g. `http://127.0.0.1:40123/`: the API endpoint for clients.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
    /// Writes `state.json` behind the changes (`persist.rs`).
    persister: tokio::task::JoinHandle<()>,
}

async fn api(
    State(sim): State<Arc<Sim>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Batches carry API calls inside them and are answered by taking them apart (api/batch.rs).
    if uri.path() == crate::api::batch::PATH {
        return crate::api::batch::handle(sim, method, headers, body).await;
    }
    if uri.path().starts_with(crate::secrets::PREFIX) {
        return crate::secrets::handle(
            sim,
            method,
            uri.path().to_string(),
            uri.query().map(str::to_string),
            headers,
            body,
        )
        .await;
    }
    crate::api::handle(
        sim,
        method,
        uri.path().to_string(),
        uri.query().map(str::to_string),
        headers,
        body,
    )
    .await
}

/// Binds `cfg.listen`, loads `cfg.state_dir/state.json` and serves until stopped.
pub async fn start(cfg: SimConfig, fabric: Arc<dyn Fabric>) -> Result<Running, String> {
    std::fs::create_dir_all(&cfg.state_dir)
        .map_err(|e| format!("creating state dir {}: {e}", cfg.state_dir.display()))?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| format!("binding {}: {e}", cfg.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("reading bound address: {e}"))?;
    let url = match &cfg.base_url {
        Some(b) => format!("{}/", b.trim_end_matches('/')),
        None => format!("http://{addr}/"),
    };
    let cloud = Cloud::load(&cfg.state_dir, &url)?;
    let sim = Sim::new(cfg, url.clone(), cloud, fabric);
    let persister = crate::persist::spawn(sim.clone());
    {
        // Persist the (possibly re-based) state and let the fabric bring back VMs that were running.
        let cloud = sim.cloud();
        sim.commit(&cloud);
    }
    crate::ops::resume_all(&sim);
    let app = crate::admin::router().fallback(api).with_state(sim.clone());
    let mut stop = sim.stop.subscribe();
    let task = tokio::spawn(async move {
        let until_stopped = async move {
            // Resolves on `true`, or when the sender is gone.
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(until_stopped)
            .await
        {
            tracing::error!("server: {e}");
        }
    });
    tracing::info!(%url, "ha-sim serving");
    Ok(Running {
        sim,
        addr,
        url,
        task,
        persister,
    })
}

impl Running {
    /// Resolves when something asked the sim to stop (admin `shutdown`).
    pub async fn stopped(&self) {
        let mut stop = self.sim.stop.subscribe();
        let _ = stop.wait_for(|s| *s).await;
    }

    /// Stops serving, writes the final state, then stops every VM and proxy (waiting for child processes to exit).
    pub async fn stop(self) {
        self.sim.stop.send_replace(true);
        let _ = self.task.await;
        let _ = self.persister.await;
        let sim = self.sim.clone();
        let _ = tokio::task::spawn_blocking(move || sim.write_state()).await;
        let fabric = self.sim.fabric.clone();
        // The fabric joins threads and reaps processes: blocking work.
        let _ = tokio::task::spawn_blocking(move || fabric.shutdown()).await;
    }
}
