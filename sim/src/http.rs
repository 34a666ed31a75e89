//! The plain-HTTP client everything in the sim that calls a sim uses: the CLI, and a VM's guest fetching its keys
//! and reporting its boot. A leaf, so a VM never reaches the CLI for it.

/// A plain-HTTP client for talking to a sim on loopback.
///
/// When reqwest is built with rustls but no crypto provider (the official SDK, a dev-dependency, asks for
/// that), building a client panics unless a provider is installed; installing ring first is harmless otherwise.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
