//! Google API clients kept for the life of the process, per endpoint and identity.
//!
//! Each of the SDK's clients builds its own HTTP client, and each of those reads the machine's root certificates
//! from disk (`rustls-platform-verifier` on Linux: every file of `/etc/ssl/certs`, stat, read and PEM-parse). A
//! provider process serves every resource of one Terraform command with the same settings, so building a client
//! per cluster context read the store dozens of times per apply: in ha-sim's scenarios it was the largest part of
//! the provider's CPU (`perf`, 2026-11-28). The backends keep their clients here instead; the SDK's clients are
//! handles meant to be cloned.

use std::sync::Mutex;

use super::{Auth, Settings};

/// What makes two clients interchangeable: where they call, and as whom. The credentials' text is held only to
/// compare it; `ClientKey` has no `Debug`, so it never reaches a log line.
#[derive(PartialEq, Eq)]
pub struct ClientKey {
    endpoint: String,
    auth: (u8, String),
    impersonate: Option<String>,
    universe: Option<String>,
}

impl ClientKey {
    pub fn new(settings: &Settings, endpoint: &str) -> ClientKey {
        let auth = match &settings.auth {
            Auth::Default => (0, String::new()),
            Auth::Credentials(c) => (1, c.clone()),
            Auth::AccessToken(t) => (2, t.clone()),
        };
        ClientKey {
            endpoint: endpoint.to_string(),
            auth,
            impersonate: settings.impersonate_service_account.clone(),
            universe: settings.universe_domain.clone(),
        }
    }
}

/// Clients already built, a handful at most (one per provider configuration), so a list.
pub struct ClientCache<T> {
    built: Mutex<Vec<(ClientKey, T)>>,
}

impl<T: Clone> ClientCache<T> {
    pub const fn new() -> Self {
        ClientCache {
            built: Mutex::new(Vec::new()),
        }
    }

    /// The client built before for `key`, if any.
    pub fn get(&self, key: &ClientKey) -> Option<T> {
        let built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        built.iter().find(|(k, _)| k == key).map(|(_, c)| c.clone())
    }

    /// Keeps `client` for `key` and returns it, or the one kept first when two callers built at once (builds
    /// await, so they happen outside the lock). Only a build that succeeded is kept: a failure is tried again.
    pub fn keep(&self, key: ClientKey, client: T) -> T {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, kept)) = built.iter().find(|(k, _)| *k == key) {
            return kept.clone();
        }
        built.push((key, client.clone()));
        client
    }
}

impl<T: Clone> Default for ClientCache<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(token: &str) -> Settings {
        Settings {
            auth: Auth::AccessToken(token.into()),
            ..Settings::default()
        }
    }

    #[test]
    fn a_client_is_found_only_for_its_endpoint_and_identity() {
        let cache = ClientCache::<u32>::new();
        let key = |token: &str, endpoint: &str| ClientKey::new(&settings(token), endpoint);
        assert_eq!(cache.get(&key("a", "http://x")), None);
        assert_eq!(cache.keep(key("a", "http://x"), 1), 1);
        assert_eq!(cache.get(&key("a", "http://x")), Some(1));
        assert_eq!(cache.get(&key("b", "http://x")), None, "another token");
        assert_eq!(cache.get(&key("a", "http://y")), None, "another endpoint");
        let adc = ClientKey::new(&Settings::default(), "http://x");
        assert!(cache.get(&adc).is_none(), "application default credentials");
        assert_eq!(
            cache.keep(key("a", "http://x"), 2),
            1,
            "the first kept wins"
        );
    }
}
