//! Keys in Secret Manager: what `user-data` keeps, what the bundle holds, and the fetch script under the real
//! tools (`sh`, shellcheck) as `runtime_tests` does for the install script.

use super::k8s::CloudConfig;
use super::keys::{FETCH_SCRIPT, FETCH_SCRIPT_TEXT, sha256_hex, unpack};
use super::tests::{base, files};
use super::{KeyDelivery, MasterConfig, key_bundle, render_user_data};
use std::process::Command;

const SECRET: &str = "projects/my-project/secrets/prod-b-keys";

fn in_secret_manager() -> MasterConfig {
    MasterConfig {
        keys: KeyDelivery::SecretManager {
            secret: SECRET.into(),
            origin: "https://secretmanager.googleapis.com/".into(),
        },
        ..base().clone()
    }
}

fn cloud(cfg: &MasterConfig) -> CloudConfig {
    let ud = render_user_data(cfg);
    serde_norway::from_str(ud.strip_prefix("#cloud-config\n").unwrap()).unwrap()
}

#[test]
fn user_data_holds_no_private_key_and_fetches_the_bundle_before_anything_runs() {
    let cfg = in_secret_manager();
    let ud = render_user_data(&cfg);
    assert!(!ud.contains("PRIVATE KEY"), "{ud}");
    // Legacy masters keep theirs: the count this design removes.
    let legacy = render_user_data(base());
    assert_eq!(legacy.matches("BEGIN PRIVATE KEY-----").count(), 12);

    let bundle = key_bundle(&cfg).expect("keys go to Secret Manager");
    let c = cloud(&cfg);
    assert_eq!(
        c.runcmd.first().map(Vec::as_slice),
        Some(
            [
                "sh",
                FETCH_SCRIPT,
                SECRET,
                bundle.sha256.as_str(),
                "https://secretmanager.googleapis.com"
            ]
            .map(String::from)
            .as_slice()
        ),
        "{:?}",
        c.runcmd
    );
    let script = c
        .write_files
        .iter()
        .find(|f| f.path == FETCH_SCRIPT)
        .expect("the fetch script is written");
    assert_eq!(
        (script.content.as_str(), script.permissions.as_str()),
        (FETCH_SCRIPT_TEXT, "0755")
    );
    assert!(key_bundle(base()).is_none());
}

#[test]
fn the_bundle_holds_exactly_the_0600_files_the_legacy_render_writes() {
    let legacy = files(base());
    let moved: Vec<_> = legacy
        .values()
        .filter(|f| f.permissions == "0600")
        .collect();
    // Twelve keys (eleven leaf keys and the service-account key) and the five kubeconfigs that name them.
    assert_eq!(moved.len(), 17);
    let cfg = in_secret_manager();
    let bundle = key_bundle(&cfg).unwrap();
    assert_eq!(bundle.sha256, sha256_hex(&bundle.tar));
    let unpacked = unpack(&bundle.tar, &bundle.sha256).unwrap();
    let want: Vec<(String, String)> = moved
        .iter()
        .map(|f| (f.path.clone(), f.content.clone()))
        .collect();
    assert_eq!(unpacked, want, "paths in order, contents unchanged");
    // Modes and owners travel with the files.
    let mut archive = tar::Archive::new(bundle.tar.as_slice());
    for entry in archive.entries().unwrap() {
        let e = entry.unwrap();
        let h = e.header();
        assert_eq!(h.mode().unwrap(), 0o600);
        assert_eq!(h.username().unwrap(), Some("root"));
        assert_eq!(
            (h.uid().unwrap(), h.gid().unwrap(), h.mtime().unwrap()),
            (0, 0, 0)
        );
    }
    // What stays in user-data is everything else, unchanged.
    let kept = cloud(&cfg).write_files;
    for f in legacy.values().filter(|f| f.permissions != "0600") {
        assert!(kept.contains(f), "{} kept", f.path);
    }
    assert_eq!(
        kept.len(),
        legacy.len() - moved.len() + 1,
        "plus the script"
    );
}

#[test]
fn the_same_keys_make_the_same_bundle_and_a_changed_key_another() {
    let cfg = in_secret_manager();
    assert_eq!(key_bundle(&cfg), key_bundle(&cfg));
    assert_eq!(render_user_data(&cfg), render_user_data(&cfg));
    let mut other = cfg.clone();
    other.service_account_key_pem = ha_pki::service_account_key().unwrap();
    assert_ne!(
        key_bundle(&other).unwrap().sha256,
        key_bundle(&cfg).unwrap().sha256
    );
    assert_ne!(render_user_data(&other), render_user_data(&cfg));
}

#[test]
fn a_bundle_whose_digest_differs_is_refused() {
    let bundle = key_bundle(&in_secret_manager()).unwrap();
    let mut tampered = bundle.tar.clone();
    tampered[600] ^= 1;
    let e = unpack(&tampered, &bundle.sha256).unwrap_err();
    assert!(e.contains("SHA-256"), "{e}");
}

#[test]
fn the_fetch_script_is_posix_sh_that_shellcheck_passes_and_refuses_a_wrong_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::tests::assert_posix_sh(dir.path(), "fetch-keys.sh", FETCH_SCRIPT_TEXT);
    let usage = Command::new("sh").arg(&path).arg(SECRET).output().unwrap();
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");
    assert!(String::from_utf8_lossy(&usage.stderr).contains("usage: fetch-keys.sh"));
}

#[test]
fn cloud_init_accepts_the_user_data_that_fetches_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("user-data.yaml");
    std::fs::write(&path, render_user_data(&in_secret_manager())).unwrap();
    let out = Command::new("cloud-init")
        .args(["schema", "-c"])
        .arg(&path)
        .output()
        .expect("cloud-init is installed by `bash scripts/setup`");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn encrypting() -> MasterConfig {
    MasterConfig {
        secrets_encryption: Some(
            crate::SecretsKey::from_payload(b"0123456789abcdef0123456789abcdef")
                .unwrap()
                .into(),
        ),
        ..in_secret_manager()
    }
}

/// The encryption configuration holds the key: it travels in the bundle, the API server alone mounts it, and its
/// flag names it. Without a key nothing of it is rendered, so existing masters render as before.
#[test]
fn the_encryption_key_travels_in_the_bundle_and_only_the_api_server_reads_it() {
    use crate::encryption::CONFIG_PATH;
    let cfg = encrypting();
    let key = cfg.secrets_encryption.as_ref().unwrap();
    let ud = render_user_data(&cfg);
    assert!(
        ud.contains(CONFIG_PATH),
        "the API server's manifest names the file"
    );
    assert!(!ud.contains("secretbox"), "{ud}");
    assert!(
        !ud.contains("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="),
        "{ud}"
    );
    let bundle = key_bundle(&cfg).unwrap();
    let unpacked = unpack(&bundle.tar, &bundle.sha256).unwrap();
    let config = unpacked
        .iter()
        .find(|(path, _)| path == CONFIG_PATH)
        .expect("the configuration is in the bundle");
    assert_eq!(config.1, key.config_yaml());

    // Rendered as if in metadata, so the manifests can be read: only the API server mounts the file.
    let in_metadata = MasterConfig {
        keys: KeyDelivery::InMetadata,
        ..cfg.clone()
    };
    let written = files(&in_metadata);
    assert_eq!(written[CONFIG_PATH].permissions, "0600");
    for (path, f) in &written {
        let Some(name) = path
            .strip_prefix(&format!("{}/", crate::paths::MANIFESTS))
            .and_then(|n| n.strip_suffix(".yaml"))
        else {
            continue;
        };
        let pod = crate::tests::pod(&written, name);
        for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
            let mounts = c.volume_mounts.iter().any(|m| m.mount_path == CONFIG_PATH);
            let is_apiserver = c.name == "kube-apiserver";
            assert_eq!(mounts, is_apiserver, "{} in {}", c.name, f.path);
            if is_apiserver {
                let flags = crate::tests::flags(c);
                assert_eq!(flags["encryption-provider-config"], CONFIG_PATH);
            }
        }
    }
    // A master without a key renders none of it.
    let plain = files(base());
    assert!(!plain.contains_key(CONFIG_PATH));
    assert!(!render_user_data(base()).contains("encryption-provider-config"));
    // And no master may carry the key in metadata.
    assert_eq!(
        crate::check(&in_metadata),
        Err(crate::MasterError::EncryptionKeyInMetadata)
    );
    assert_eq!(crate::check(&cfg), Ok(()));
}

/// Import reads back the key's name from the master it renders, keys added from its bundle; a master that stores
/// Secrets plain names none.
#[test]
fn import_reads_the_key_name_from_a_masters_bundle() {
    let cfg = encrypting();
    let name = cfg.secrets_encryption.as_ref().unwrap().names()[0].clone();
    let mut files = crate::read::read_user_data(&render_user_data(&cfg)).unwrap();
    assert_eq!(
        files.secrets_key_name(),
        None,
        "the key is not in user-data"
    );
    files.add_keys(&key_bundle(&cfg).unwrap().tar).unwrap();
    assert_eq!(files.secrets_key_name(), Some(name));
    let plain = crate::read::read_user_data(&render_user_data(base())).unwrap();
    assert_eq!(plain.secrets_key_name(), None);
}

/// While a key is turned on (read, not yet written with), a master writes Secrets plain: it names no key it
/// encrypts with, and names the key it reads; with a change of key under way it names both, the written first.
#[test]
fn a_master_in_a_change_of_key_names_what_it_writes_with_and_what_it_reads() {
    let a = crate::SecretsKey::from_payload(b"0123456789abcdef0123456789abcdef").unwrap();
    let b = crate::SecretsKey::from_payload(b"fedcba9876543210fedcba9876543210").unwrap();
    for (writes, reads, named, names) in [
        (None, vec![a.clone()], None, vec![a.name()]),
        (
            Some(b.clone()),
            vec![a.clone()],
            Some(b.name()),
            vec![b.name(), a.name()],
        ),
    ] {
        let cfg = MasterConfig {
            secrets_encryption: Some(crate::SecretsEncryption { writes, reads }),
            ..encrypting()
        };
        let mut files = crate::read::read_user_data(&render_user_data(&cfg)).unwrap();
        files.add_keys(&key_bundle(&cfg).unwrap().tar).unwrap();
        assert_eq!(files.secrets_key_name(), named);
        assert_eq!(files.secrets_key_names(), names);
    }
}
