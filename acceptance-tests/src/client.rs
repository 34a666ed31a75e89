//! The two CLI clients every scenario runs under, and running a scenario under both at once.

use std::fmt;
use std::path::PathBuf;

use crate::paths::tools_bin;
use crate::provider::provider_address;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    Terraform,
    OpenTofu,
}

impl Client {
    pub fn all() -> [Client; 2] {
        [Client::Terraform, Client::OpenTofu]
    }

    /// The executable's name, also used in workspace names and thread names.
    pub fn name(self) -> &'static str {
        match self {
            Client::Terraform => "terraform",
            Client::OpenTofu => "tofu",
        }
    }

    /// `.tools/bin/<name>` as installed by `scripts/setup`.
    pub fn binary(self) -> PathBuf {
        let path = tools_bin().join(self.name());
        assert!(
            path.exists(),
            "{} not found: run `bash scripts/setup`",
            path.display()
        );
        path
    }

    /// The registry host the short source `hamaster/ha` expands to: tofu's default registry is its own, so the
    /// same configuration names a different provider address under each client.
    pub fn registry_host(self) -> &'static str {
        match self {
            Client::Terraform => "registry.terraform.io",
            Client::OpenTofu => "registry.opentofu.org",
        }
    }

    /// The provider's full address under this client for `source = "hamaster/ha"`: the key in
    /// `providers schema -json`, the lock file block, and the `.terraform/providers` path.
    pub fn provider_address(self) -> String {
        provider_address(self.registry_host())
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Runs `scenario` under every client, concurrently (each gets its own workspace, so they can't interfere),
/// and fails naming the clients whose run panicked. Threads are named after the client, so each panic message
/// says which client it came from; the final failure repeats each client's panic message too, because a log
/// cut to its last lines (CI's excerpt) would otherwise show only "see the panic messages above".
pub fn for_each_client(scenario: impl Fn(Client) + Sync) {
    let failed: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = Client::all()
            .into_iter()
            .map(|client| {
                let scenario = &scenario;
                let handle = std::thread::Builder::new()
                    .name(client.name().to_string())
                    .spawn_scoped(s, move || scenario(client))
                    .expect("spawning a scenario thread");
                (client, handle)
            })
            .collect();
        runs.into_iter()
            .filter_map(|(client, handle)| {
                let payload = handle.join().err()?;
                Some(format!("[{client}] {}", panic_message(payload.as_ref())))
            })
            .collect()
    });
    assert!(
        failed.is_empty(),
        "scenario failed under {} client(s):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The text a panic was raised with (`panic!`/`assert!` give a `String` or a `&str`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_under_one_client_carries_that_clients_panic_message() {
        let caught = std::panic::catch_unwind(|| {
            for_each_client(|client| {
                assert!(client != Client::OpenTofu, "the probe failed {} times", 3);
            })
        })
        .expect_err("one client failed, so the run fails");
        let message = panic_message(caught.as_ref());
        assert!(
            message.contains("[tofu] the probe failed 3 times"),
            "{message}"
        );
        assert!(!message.contains("[terraform]"), "{message}");
    }
}
