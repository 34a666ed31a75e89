//! `scripts/release` makes artefacts users can install and verify: the registry's file set (zips, manifest,
//! SHA256SUMS and its GPG signature) and a provider network mirror, which real Terraform and OpenTofu install from
//! over HTTPS, and from the same directory as a filesystem mirror, with the lock file pinning the zips' signed
//! `zh:` hashes.

use std::path::Path;
use std::process::{Command, Output};

use acceptance_tests::{
    Client, HttpsDir, LockEntry, ThrowawayKeyring, Workspace, for_each_client, hashes_for,
    platform, provider_binary, provider_version, render_lock_file, repo_root, work_dir,
};
use sha2::{Digest, Sha256};

const ADDRESS: &str = "registry.terraform.io/hamaster/ha";

/// Both clients take the fully qualified source: OpenTofu would expand `hamaster/ha` to its own registry.
const REQUIRED_PROVIDERS: &str = r#"terraform {
  required_providers {
    ha = {
      source = "registry.terraform.io/hamaster/ha"
    }
  }
}
"#;

#[test]
fn a_signed_release_installs_from_its_network_and_filesystem_mirror_under_both_clients() {
    let keyring = ThrowawayKeyring::new();
    let dist = tempfile::Builder::new()
        .prefix("release-")
        .tempdir_in(work_dir())
        .expect("a dist directory");
    let version = provider_version();
    let release = run_release(&keyring, dist.path(), &[]);
    assert!(
        release.status.success(),
        "scripts/release failed:\n{}",
        String::from_utf8_lossy(&release.stderr)
    );
    let out = dist.path().join(version);
    let prefix = format!("terraform-provider-ha_{version}");
    let zip_name = format!("{prefix}_{}.zip", platform());
    let (zip, sums, signature) = (
        out.join(&zip_name),
        out.join(format!("{prefix}_SHA256SUMS")),
        out.join(format!("{prefix}_SHA256SUMS.sig")),
    );
    let manifest = out.join(format!("{prefix}_manifest.json"));
    let mirror = out.join("mirror");
    let package = mirror.join(ADDRESS);
    let mut expected = vec![
        format!("mirror/{ADDRESS}/index.json"),
        format!("mirror/{ADDRESS}/{version}.json"),
        format!("mirror/{ADDRESS}/{zip_name}"),
        format!("{prefix}_SHA256SUMS"),
        format!("{prefix}_SHA256SUMS.sig"),
        zip_name.clone(),
        format!("{prefix}_manifest.json"),
    ];
    expected.sort();
    assert_eq!(files_under(&out), expected, "the release's files");

    // The registry's manifest: protocol 6 only, copied from the repository's.
    let manifest_json = read_json(&manifest);
    assert_eq!(
        manifest_json,
        serde_json::json!({"version": 1, "metadata": {"protocol_versions": ["6.0"]}})
    );
    assert_eq!(
        manifest_json,
        read_json(&repo_root().join("terraform-registry-manifest.json"))
    );

    // SHA256SUMS lists what we hash ourselves, and the signature covers exactly its bytes.
    let zip_sha = sha256_hex(&zip);
    assert_eq!(
        std::fs::read_to_string(&sums).expect("reading SHA256SUMS"),
        format!(
            "{zip_sha}  {zip_name}\n{}  {prefix}_manifest.json\n",
            sha256_hex(&manifest)
        )
    );
    let report = keyring
        .verify(&signature, &sums)
        .unwrap_or_else(|report| panic!("gpg --verify of the release failed:\n{report}"));
    assert!(
        report.contains(keyring.fingerprint()),
        "gpg should name the signing key {}:\n{report}",
        keyring.fingerprint()
    );
    let tampered = dist.path().join("tampered_SHA256SUMS");
    let mut bytes = std::fs::read(&sums).expect("reading SHA256SUMS");
    bytes[0] = if bytes[0] == b'0' { b'1' } else { b'0' };
    std::fs::write(&tampered, bytes).expect("writing a tampered copy");
    assert!(
        keyring.verify(&signature, &tampered).is_err(),
        "a changed SHA256SUMS must not verify"
    );

    // The network mirror: one version, one archive per platform, its zh: hash, the zip beside it.
    assert_eq!(
        read_json(&package.join("index.json")),
        serde_json::json!({"versions": {version: {}}})
    );
    assert_eq!(
        read_json(&package.join(format!("{version}.json"))),
        serde_json::json!({"archives": {platform(): {"url": zip_name, "hashes": [format!("zh:{zip_sha}")]}}})
    );
    assert_eq!(sha256_hex(&package.join(&zip_name)), zip_sha);

    let server = HttpsDir::serve(&mirror);
    for_each_client(|client| install_from_mirror(client, &server, &sums));
    for_each_client(|client| install_from_directory(client, &mirror, &sums));
    let requests = server.requests();
    let fetched = |path: String| requests.iter().filter(|r| **r == path).count();
    // Each client downloads the zip three times: the init that refuses it (the hash is checked on the bytes),
    // the init that installs it, and `providers lock`.
    assert_eq!(
        fetched(format!("/{ADDRESS}/{zip_name}")),
        3 * Client::all().len(),
        "zip downloads in {requests:?}"
    );
    assert!(
        fetched(format!("/{ADDRESS}/{version}.json")) >= 3 * Client::all().len(),
        "version document fetches in {requests:?}"
    );
}

/// What a user does with a release: write the lock file from the verified SHA256SUMS, point the CLI config at
/// the mirror, init. Then `providers lock` against the mirror records the same package hash.
fn install_from_mirror(client: Client, server: &HttpsDir, sums: &Path) {
    let ws = Workspace::new(client, "release-network-mirror")
        .with_env("SSL_CERT_FILE", server.ca_file().display().to_string());
    ws.write_main_tf(REQUIRED_PROVIDERS);
    ws.write_file(
        "cli.tfrc",
        &format!(
            "provider_installation {{\n  network_mirror {{\n    url = {:?}\n  }}\n}}\n",
            server.url()
        ),
    );
    let version = provider_version();
    let zh = zh_hashes_from_sums(sums);
    assert!(!zh.is_empty(), "no zip in {}", sums.display());

    // A lock file whose zh: names other bytes: the client must refuse the mirror's zip.
    ws.write_lock_file(&lock_file(&[format!("zh:{}", "0".repeat(64))]));
    ws.run(&["init", "-input=false", "-no-color"])
        .assert_failure()
        .assert_contains(
            "doesn't match any of the checksums previously recorded in the dependency lock file",
        );

    ws.write_lock_file(&lock_file(&zh));
    let init = ws.run(&["init", "-input=false", "-no-color"]);
    init.assert_success()
        .assert_contains(&format!("v{version} (verified checksum)"));
    for avoidable in ["unauthenticated", "Incomplete lock file", "Warning"] {
        assert!(
            !init.combined().contains(avoidable),
            "[{client}] init should not say {avoidable:?}:\n{init}"
        );
    }
    let recorded =
        hashes_for(&ws.read_lock_file(), ADDRESS).expect("a lock entry for the provider");
    for hash in &zh {
        assert!(
            recorded.contains(hash),
            "[{client}] the lock file should keep {hash}: {recorded:?}"
        );
    }
    let h1: Vec<&String> = recorded.iter().filter(|h| h.starts_with("h1:")).collect();
    assert_eq!(
        h1.len(),
        1,
        "[{client}] one h1 for this platform: {recorded:?}"
    );

    // What was unpacked is the binary we released, still executable.
    let installed = ws
        .path()
        .join(".terraform/providers")
        .join(ADDRESS)
        .join(version)
        .join(platform())
        .join(format!("terraform-provider-ha_v{version}"));
    assert_eq!(
        sha256_hex(&installed),
        sha256_hex(&provider_binary()),
        "[{client}] {} should be the released binary",
        installed.display()
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&installed)
        .expect("the installed binary")
        .permissions()
        .mode();
    assert!(
        mode & 0o111 != 0,
        "[{client}] installed binary mode {mode:o}"
    );

    // `providers lock` from the mirror alone (no lock file): it downloads, checks the zip against the mirror's
    // zh:, and records the same package hash init did.
    ws.remove_lock_file();
    let mirror_flag = format!("-net-mirror={}", server.url());
    let platform_flag = format!("-platform={}", platform());
    ws.run(&[
        "providers",
        "lock",
        "-no-color",
        &mirror_flag,
        &platform_flag,
    ])
    .assert_success()
    .assert_contains("(verified checksum)");
    assert_eq!(
        hashes_for(&ws.read_lock_file(), ADDRESS),
        Some(vec![h1[0].clone()]),
        "[{client}] providers lock should record init's h1"
    );
}

/// The same mirror directory, copied to a machine, is a packed filesystem mirror: the client finds the zip by
/// its name, and the lock file's zh: is what authenticates it (a directory offers no checksums of its own).
fn install_from_directory(client: Client, mirror: &Path, sums: &Path) {
    let ws = Workspace::new(client, "release-filesystem-mirror");
    ws.write_main_tf(REQUIRED_PROVIDERS);
    ws.write_file(
        "cli.tfrc",
        &format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = {:?}\n  }}\n}}\n",
            mirror.display().to_string()
        ),
    );
    ws.write_lock_file(&lock_file(&[format!("zh:{}", "0".repeat(64))]));
    ws.run(&["init", "-input=false", "-no-color"])
        .assert_failure()
        .assert_contains(
            "doesn't match any of the checksums previously recorded in the dependency lock file",
        );
    let zh = zh_hashes_from_sums(sums);
    ws.write_lock_file(&lock_file(&zh));
    ws.run(&["init", "-input=false", "-no-color"])
        .assert_success()
        .assert_contains(&format!(
            "hamaster/ha v{} (unauthenticated)",
            provider_version()
        ));
    let recorded =
        hashes_for(&ws.read_lock_file(), ADDRESS).expect("a lock entry for the provider");
    assert!(
        zh.iter().all(|hash| recorded.contains(hash))
            && recorded.iter().any(|h| h.starts_with("h1:")),
        "[{client}] the lock file should keep the zh: and add an h1: {recorded:?}"
    );
}

/// A lock file pinning our version with `hashes`, as a user writes it from SHA256SUMS.
fn lock_file(hashes: &[String]) -> String {
    render_lock_file(&[LockEntry {
        address: ADDRESS.to_string(),
        version: provider_version().to_string(),
        hashes: hashes.to_vec(),
    }])
}

#[test]
fn a_target_without_a_toolchain_is_named_with_its_fix() {
    let installed = String::from_utf8(
        Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    let missing = [
        "aarch64-apple-darwin",
        "x86_64-pc-windows-msvc",
        "aarch64-unknown-linux-musl",
    ]
    .into_iter()
    .find(|t| !installed.split_whitespace().any(|i| i == *t))
    .expect("one of the candidate targets is not installed");
    let keyring = ThrowawayKeyring::new();
    let dist = tempfile::tempdir_in(work_dir()).expect("a dist directory");
    let out = run_release(&keyring, dist.path(), &[missing]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("target {missing}: its toolchain is missing here"))
            && stderr.contains(&format!("rustup target add {missing}")),
        "{stderr}"
    );
}

#[test]
fn a_release_without_a_signing_key_says_which_input_is_missing() {
    let dist = tempfile::tempdir_in(work_dir()).expect("a dist directory");
    let out = release_command(dist.path(), &[host_triple().as_str()])
        .env_remove("HA_RELEASE_GPG_KEY")
        .output()
        .expect("running scripts/release");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("HA_RELEASE_GPG_KEY is not set"), "{stderr}");
    // Checked before anything is built or written: a missing key must not cost a release build.
    assert!(!dist.path().join(provider_version()).exists(), "{stderr}");
}

#[test]
fn a_signing_key_missing_from_the_keyring_is_named_before_building() {
    let keyring = ThrowawayKeyring::new();
    let dist = tempfile::tempdir_in(work_dir()).expect("a dist directory");
    let absent = "0123456789ABCDEF0123456789ABCDEF01234567";
    let out = release_command(dist.path(), &[host_triple().as_str()])
        .env("GNUPGHOME", keyring.home())
        .env("HA_RELEASE_GPG_KEY", absent)
        .output()
        .expect("running scripts/release");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("HA_RELEASE_GPG_KEY={absent}: no such secret key")),
        "{stderr}"
    );
    assert!(!dist.path().join(provider_version()).exists(), "{stderr}");
}

/// `scripts/release` packaging the already built binary for the host (no cargo build), signed by `keyring`.
fn run_release(keyring: &ThrowawayKeyring, dist: &Path, targets: &[&str]) -> Output {
    let host = host_triple();
    let targets = if targets.is_empty() {
        vec![host.as_str()]
    } else {
        targets.to_vec()
    };
    release_command(dist, &targets)
        .env("GNUPGHOME", keyring.home())
        .env("HA_RELEASE_GPG_KEY", keyring.fingerprint())
        .output()
        .expect("running scripts/release")
}

fn release_command(dist: &Path, targets: &[&str]) -> Command {
    let mut cmd = Command::new(repo_root().join("scripts/release"));
    cmd.args(targets)
        .env("HA_RELEASE_DIST", dist)
        .env("HA_RELEASE_BINARY", provider_binary())
        .env_remove("HA_RELEASE_TARGETS")
        .env_remove("HA_RELEASE_UNSIGNED");
    cmd
}

fn host_triple() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("running rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

/// `zh:<sha256>` for every zip listed in a SHA256SUMS file: what a user pins in the lock file.
fn zh_hashes_from_sums(sums: &Path) -> Vec<String> {
    std::fs::read_to_string(sums)
        .expect("reading SHA256SUMS")
        .lines()
        .filter_map(|line| line.split_once("  "))
        .filter(|(_, name)| name.ends_with(".zip"))
        .map(|(sha, _)| format!("zh:{sha}"))
        .collect()
}

/// Every file under `dir`, as sorted paths relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                let relative = path.strip_prefix(base).expect("under base");
                out.push(relative.display().to_string());
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    files
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    hex::encode(Sha256::digest(&bytes))
}
