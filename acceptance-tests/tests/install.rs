//! The provider installs from a filesystem mirror exactly as a user would install it offline, and the lock file
//! protects that install: init verifies our pre-computed h1 hash, records the same hash itself, and refuses a
//! package that doesn't match.

use acceptance_tests::{
    Client, REQUIRED_PROVIDERS, Workspace, for_each_client, hashes_for, platform,
};

/// Checks what init leaves behind: the lock records exactly our hash and the package is linked in
/// `.terraform/providers`.
fn assert_installed(ws: &Workspace, client: Client) {
    let lock = ws.read_lock_file();
    let address = client.provider_address();
    assert_eq!(
        hashes_for(&lock, &address),
        Some(vec![ws.mirror().h1().to_string()]),
        "[{client}] lock file should record our h1 for {address}:\n{lock}"
    );
    let installed = ws
        .path()
        .join(".terraform/providers")
        .join(&address)
        .join(ws.mirror().version())
        .join(platform())
        .join(format!("terraform-provider-ha_v{}", ws.mirror().version()));
    assert!(
        installed.is_file(),
        "[{client}] {} missing after init",
        installed.display()
    );
}

#[test]
fn init_verifies_the_prewritten_lock_file() {
    for_each_client(|client| {
        let ws = Workspace::new(client, "install-prewritten-lock");
        ws.write_main_tf(REQUIRED_PROVIDERS);
        let output = ws.init();
        output.assert_contains(&format!("Installed hamaster/ha v{}", ws.mirror().version()));
        // A pre-written lock means the package was checked, not trusted on first use.
        output.assert_contains(
            "Reusing previous version of hamaster/ha from the dependency lock file",
        );
        assert_installed(&ws, client);
    });
}

#[test]
fn init_records_the_hash_we_compute() {
    for_each_client(|client| {
        let ws = Workspace::new(client, "install-records-h1");
        ws.write_main_tf(REQUIRED_PROVIDERS);
        ws.remove_lock_file();
        ws.init();
        assert_installed(&ws, client);
    });
}

#[test]
fn init_refuses_a_package_that_does_not_match_the_lock_file() {
    for_each_client(|client| {
        let ws = Workspace::new(client, "install-wrong-hash");
        ws.write_main_tf(REQUIRED_PROVIDERS);
        // A well-formed h1 of the wrong content (sha256 of nothing).
        let wrong = "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=".to_string();
        assert_ne!(wrong, ws.mirror().h1());
        ws.write_lock_file(&ws.mirror().lock_file_with_hashes(&[wrong]));
        ws.run(&["init", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains("Failed to install provider")
            .assert_contains(&format!(
                "the local package for {} {} doesn't match any of the checksums previously recorded in the \
                 dependency lock file",
                client.provider_address(),
                ws.mirror().version()
            ));
        assert!(
            !ws.path()
                .join(".terraform/providers")
                .join(client.provider_address())
                .exists()
        );
    });
}

#[test]
fn mirror_holds_a_copy_under_both_registry_hosts() {
    let mirror = acceptance_tests::Mirror::shared();
    for client in Client::all() {
        let file = mirror
            .package_dir(client.registry_host())
            .join(format!("terraform-provider-ha_v{}", mirror.version()));
        let meta =
            std::fs::symlink_metadata(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            meta.is_file(),
            "{} should be a regular file, not a symlink",
            file.display()
        );
    }
}
