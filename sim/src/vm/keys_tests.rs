//! The sim's play of `fetch-keys.sh` against its own Secret Manager: each refusal the script meets on a real VM
//! (no service account, a token without the `cloud-platform` scope, an account the secret does not bind, a bundle
//! whose digest is not the one in `user-data`) keeps the master waiting, and a right fetch unpacks the bundle with
//! its modes and owners.

use base64::Engine;

use super::{KeyFetch, fetch, sha256_hex};
use crate::vm::Attached;

const MASTERS: &str = "masters@proj.iam.gserviceaccount.com";
const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
const SECRET: &str = "projects/proj/secrets/m-keys";

/// A bundle of one 0600 key file owned by root, as ha-master packs it.
fn bundle() -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let data = b"-----BEGIN PRIVATE KEY-----\n";
    let mut header = tar::Header::new_ustar();
    header.set_size(data.len() as u64);
    header.set_mode(0o600);
    header.set_uid(0);
    header.set_gid(0);
    header.set_username("root").unwrap();
    header.set_groupname("root").unwrap();
    header.set_cksum();
    builder
        .append_data(&mut header, "etc/srv/kubernetes/pki/k.key", &data[..])
        .unwrap();
    builder.into_inner().unwrap()
}

/// A sim with secret `m-keys` holding `bundle`, readable by `MASTERS` alone; returns it with its origin.
fn sim_with_the_secret(rt: &tokio::runtime::Runtime, bundle: &[u8]) -> (crate::Running, String) {
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap().keep();
        let mut cfg = crate::SimConfig::for_tests(dir);
        cfg.latency = crate::LatencyProfile::test();
        let running = crate::start(cfg, std::sync::Arc::new(crate::fabric::NoFabric))
            .await
            .unwrap();
        let origin = format!("http://{}", running.addr);
        let http = crate::http::http_client();
        let call = |path: &str, body: serde_json::Value| {
            http.post(format!("{origin}/v1/{path}"))
                .bearer_auth("sim-token")
                .json(&body)
                .send()
        };
        for (path, body) in [
            (
                "projects/proj/secrets?secretId=m-keys".to_string(),
                serde_json::json!({"replication": {"automatic": {}}}),
            ),
            (
                format!("{SECRET}:setIamPolicy"),
                serde_json::json!({"policy": {"bindings": [{
                    "role": "roles/secretmanager.secretAccessor",
                    "members": [format!("serviceAccount:{MASTERS}")],
                }]}}),
            ),
            (
                format!("{SECRET}:addVersion"),
                serde_json::json!({"payload": {
                    "data": base64::engine::general_purpose::STANDARD.encode(bundle),
                }}),
            ),
        ] {
            let resp = call(&path, body).await.unwrap();
            assert!(
                resp.status().is_success(),
                "{path}: {}",
                resp.text().await.unwrap()
            );
        }
        (running, origin)
    })
}

#[test]
fn a_fetch_unpacks_the_bundle_and_each_refusal_keeps_the_master_waiting() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tar = bundle();
    let (_running, origin) = sim_with_the_secret(&rt, &tar);
    let right = KeyFetch {
        secret: SECRET.into(),
        sha256: sha256_hex(&tar),
        origin,
    };
    let vm = |account: Option<&str>, scopes: &[&str]| Attached {
        disks: Default::default(),
        service_account: account.map(str::to_string),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
    };
    // `fetch` blocks on its own runtime, as the VM's boot does: call it off this one.
    let run = |f: &KeyFetch, a: &Attached| {
        std::thread::scope(|s| s.spawn(|| fetch(f, a)).join().unwrap())
    };

    let files = run(&right, &vm(Some(MASTERS), &[CLOUD_PLATFORM])).expect("the right fetch");
    assert_eq!(files.len(), 1);
    assert_eq!(
        (
            files[0].path.as_str(),
            files[0].mode,
            files[0].owner.as_str()
        ),
        ("/etc/srv/kubernetes/pki/k.key", 0o600, "root:root")
    );

    let wrong_digest = KeyFetch {
        sha256: "0".repeat(64),
        ..right.clone()
    };
    let refusals = [
        (
            run(&right, &vm(None, &[CLOUD_PLATFORM])),
            "no service account",
        ),
        (
            run(
                &right,
                &vm(Some(MASTERS), &["https://www.googleapis.com/auth/compute"]),
            ),
            "insufficient authentication scopes",
        ),
        (
            run(
                &right,
                &vm(
                    Some("other@proj.iam.gserviceaccount.com"),
                    &[CLOUD_PLATFORM],
                ),
            ),
            "HTTP 403",
        ),
        (
            run(&wrong_digest, &vm(Some(MASTERS), &[CLOUD_PLATFORM])),
            "not this VM's",
        ),
    ];
    for (got, why) in refusals {
        let e = got.expect_err(why).to_string();
        assert!(e.contains("still waiting") && e.contains(why), "{why}: {e}");
    }
}
