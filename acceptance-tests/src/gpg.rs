//! A throwaway GnuPG keyring with one signing key, for signing a release the way a maintainer would and checking
//! the signature the way a user would, with the real `gpg`.

use std::path::Path;
use std::process::{Command, Output};

pub struct ThrowawayKeyring {
    /// GNUPGHOME. Under the system temp dir, not `.work/`: gpg-agent's socket path must stay short.
    home: tempfile::TempDir,
    fingerprint: String,
}

impl ThrowawayKeyring {
    /// A new keyring holding one unprotected ed25519 signing key (no passphrase, so signing needs no prompt).
    pub fn new() -> ThrowawayKeyring {
        let home = tempfile::Builder::new()
            .prefix("gpg-")
            .tempdir()
            .expect("a temporary GNUPGHOME");
        let generated = gpg(
            home.path(),
            &[
                "--passphrase",
                "",
                "--quick-gen-key",
                "acceptance-tests release key <release@example.invalid>",
                "ed25519",
                "sign",
                "never",
            ],
        );
        assert!(
            generated.status.success(),
            "gpg --quick-gen-key failed: {}",
            String::from_utf8_lossy(&generated.stderr)
        );
        let listed = gpg(home.path(), &["--list-keys", "--with-colons"]);
        let listing = String::from_utf8_lossy(&listed.stdout);
        let fingerprint = listing
            .lines()
            .find_map(|line| line.strip_prefix("fpr:"))
            .and_then(|rest| rest.split(':').find(|field| !field.is_empty()))
            .unwrap_or_else(|| panic!("no fingerprint in gpg's listing:\n{listing}"))
            .to_string();
        ThrowawayKeyring { home, fingerprint }
    }

    /// The directory to pass as GNUPGHOME.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The signing key's fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// `gpg --verify <signature> <data>` against this keyring: Ok with gpg's report, or Err with it.
    pub fn verify(&self, signature: &Path, data: &Path) -> Result<String, String> {
        let out = gpg(
            self.home(),
            &[
                "--verify",
                &signature.display().to_string(),
                &data.display().to_string(),
            ],
        );
        let report = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            Ok(report)
        } else {
            Err(report)
        }
    }
}

fn gpg(home: &Path, args: &[&str]) -> Output {
    Command::new("gpg")
        .env("GNUPGHOME", home)
        .arg("--batch")
        .args(args)
        .output()
        .expect("running gpg (is GnuPG installed?)")
}

impl Default for ThrowawayKeyring {
    fn default() -> Self {
        ThrowawayKeyring::new()
    }
}

impl Drop for ThrowawayKeyring {
    /// gpg started an agent for this GNUPGHOME; stop that one agent before its directory goes.
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .env("GNUPGHOME", self.home())
            .args(["--kill", "gpg-agent"])
            .output();
    }
}
