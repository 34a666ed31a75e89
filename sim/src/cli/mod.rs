//! Command-line interface (filled in below).

/// A plain-HTTP client for talking to a sim on loopback.
///
/// When reqwest is built with rustls but no crypto provider (the official SDK, a dev-dependency, asks for
/// that), building a client panics unless a provider is installed; installing ring first is harmless otherwise.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
