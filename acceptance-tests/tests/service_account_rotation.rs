//! A rotation of the service-account signing key (issue #31), under both clients, on three replicas against
//! ha-sim: each stage is a roll of every replica measured as the other rolls are (probes at the static IP, a
//! writer through etcd, voters sampled), and each master's key files are read from its disk after it.
//!
//! - `"switched"` before `"started"` is refused at plan, naming the attribute.
//! - `"started"`: every master signs with the key it had (K) and verifies K and a new one (N).
//! - A stage change while a master still runs the stage before is refused at apply before anything changes:
//!   `"started"` applied to the cluster alone (`-target`), then `"switched"`, names the masters behind.
//! - `"switched"`: every master signs with N and verifies both; removed: every master signs and verifies N alone,
//!   K is gone from every master and from the cluster's state, which holds as many private keys as before.
//! - Tokens signed as the masters sign them (ES256 with a master's own key file) are presented to every master's
//!   API server, which ha-sim verifies under `--service-account-key-file` as kube-apiserver does, in turn (a call
//!   every 100 ms) while each roll runs, and to each after it: no master refuses a token another master of a neighbouring stage could
//!   have minted (the current key's until the rotation ends, the next key's from the switch on), the old key's
//!   are refused everywhere once it is forgotten, and a stranger's always.
//! - Every key written before is there after, and each plan after an apply is empty (`check`).

use std::time::Duration;

use acceptance_tests::api_calls::{Credential, api_ips, status_of};
use acceptance_tests::probe::{apply_measured, apply_measured_with, assert_rolled_cleanly};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use acceptance_tests::walk::{
    THREE_ZONES, assert_private_keys_only_in_the_cluster, check, edit_config, outputs, set_vars,
    walk_config_in, write_keys,
};
use acceptance_tests::{Client, Sim, Workspace, for_each_client};

/// The signing key's public half, and the public keys the API server verifies with, as the master's files hold
/// them (the sim keeps a guest's `/` under the VM's `rootfs/`).
fn keys_on(sim: &Sim, vm: &str) -> (String, Vec<String>) {
    let pki = "rootfs/etc/srv/kubernetes/pki";
    let key = sim.ssh(vm, &["cat", &format!("{pki}/service-account.key")]);
    let signs = ha_pki::service_account_public_key(&key)
        .unwrap_or_else(|e| panic!("{vm}'s signing key: {e}"));
    let public = sim.ssh(vm, &["cat", &format!("{pki}/service-account.pub")]);
    let verifies = ha_pki::public_key_fingerprints(&public)
        .unwrap_or_else(|e| panic!("{vm}'s verification keys: {e}\n{public}"));
    (
        ha_pki::public_key_fingerprints(&signs).unwrap().remove(0),
        verifies,
    )
}

/// A service-account token for `kube-system:default`, valid for ten minutes, signed with `key_pem` (a PKCS#8
/// ECDSA P-256 key, as a master's `service-account.key`): what that master's API server or controller manager
/// would mint.
fn token_signed_with(key_pem: &str) -> String {
    use base64::Engine as _;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let b64 = base64::engine::general_purpose::STANDARD;
    let der: String = key_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let rng = ring::rand::SystemRandom::new();
    let pair = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &b64.decode(der).unwrap(),
        &rng,
    )
    .unwrap();
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": "system:serviceaccount:kube-system:default",
        "exp": now + 600,
    });
    let signed = format!(
        "{}.{}",
        url.encode(br#"{"alg":"ES256","typ":"JWT"}"#),
        url.encode(claims.to_string())
    );
    let signature = pair.sign(&rng, signed.as_bytes()).unwrap();
    format!("{signed}.{}", url.encode(signature.as_ref()))
}

/// The signing key a master's files hold.
fn signing_key_of(sim: &Sim, vm: &str) -> String {
    sim.ssh(
        vm,
        &["cat", "rootfs/etc/srv/kubernetes/pki/service-account.key"],
    )
}

/// The cluster CA, written where curl can read it.
fn ca_file(ws: &Workspace) -> PathBuf {
    let ca = ws.path().join("ca.pem");
    std::fs::write(&ca, outputs(ws)["ca"]["value"].as_str().unwrap()).unwrap();
    ca
}

/// What each master's own API server answers `token` with, as `<vm>: <status>`.
fn answers_to(ws: &Workspace, sim: &Sim, vms: &[String], token: &str) -> Vec<String> {
    let ca = ca_file(ws);
    api_ips(sim, vms)
        .iter()
        .map(|(vm, ip)| format!("{vm}: {}", status_of(&ca, ip, Credential::Bearer(token))))
        .collect()
}

/// Tokens presented to every master's API server all through a roll: how many times one was authenticated, and
/// every refusal (a `401`). A master being rebuilt does not answer, which is not a refusal.
#[derive(Default)]
struct TokenSamples {
    authenticated: usize,
    refused: Vec<String>,
}

/// Applies (measured as every roll is) while presenting `tokens` to every master's API server, one call every
/// 100 ms.
fn apply_presenting(
    ws: &Workspace,
    sim: &Sim,
    vms: &[String],
    prefix: &str,
    tokens: &[(&str, &str)],
) -> (acceptance_tests::probe::Measured, TokenSamples) {
    let (ca, ips) = (ca_file(ws), api_ips(sim, vms));
    let samples = Mutex::new(TokenSamples::default());
    let m = apply_measured_with(ws, sim, prefix, |stop: &AtomicBool| {
        // One call every 100 ms, taking the masters and tokens in turn: each pair is tried several times a
        // second while a roll runs, without the curl processes costing the scenarios beside it their CPU.
        let pairs: Vec<_> = ips
            .iter()
            .flat_map(|vm_ip| tokens.iter().map(move |token| (vm_ip, token)))
            .collect();
        for ((vm, ip), (name, token)) in pairs.iter().cycle() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let status = status_of(&ca, ip, Credential::Bearer(token));
            let mut s = samples.lock().unwrap();
            match status.as_str() {
                "200" => s.authenticated += 1,
                "401" => s.refused.push(format!("{vm} refused the token {name}")),
                _ => {}
            }
            drop(s);
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    (m, samples.into_inner().unwrap())
}

/// No token was refused while the roll ran, and some were authenticated.
#[track_caller]
fn none_refused(client: Client, stage: &str, t: &TokenSamples) {
    assert!(
        t.refused.is_empty() && t.authenticated > 0,
        "[{client}] during the roll to {stage}: {} authenticated, refused: {:?}",
        t.authenticated,
        t.refused
    );
}

/// The next key a rotation made, from the cluster's keys secret (the provider's credentials may read it; no
/// master holds it before the switch), for a token a switched master would mint.
fn next_key_in_secret(sim: &Sim) -> String {
    acceptance_tests::walk::cluster_keys(sim)["next_service_account_key"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every master's API server answers `want` to `token`.
#[track_caller]
fn every_master_answers(
    client: Client,
    ws: &Workspace,
    sim: &Sim,
    vms: &[String],
    token: &str,
    want: &str,
) {
    let got = answers_to(ws, sim, vms, token);
    let expected: Vec<String> = vms.iter().map(|vm| format!("{vm}: {want}")).collect();
    assert_eq!(
        got, expected,
        "[{client}] each API server's answer to a token"
    );
}

/// Every master runs `signs` and verifies exactly `verifies`, signing key first.
#[track_caller]
fn every_master_runs(client: Client, sim: &Sim, vms: &[String], signs: &str, verifies: &[&str]) {
    for vm in vms {
        let (s, v) = keys_on(sim, vm);
        assert_eq!(
            (s.as_str(), v.iter().map(String::as_str).collect::<Vec<_>>()),
            (signs, verifies.to_vec()),
            "[{client}] {vm}'s service-account keys (signs, verifies)"
        );
    }
}

fn set_stage(ws: &Workspace, stage: Option<&str>) {
    let mut vars = Vec::new();
    if let Some(s) = stage {
        vars.push(("sa_rotation", s));
    }
    set_vars(ws, &THREE_ZONES, &vars);
}

#[test]
fn the_service_account_key_rotates_in_stages_with_no_token_refused_and_no_key_lost() {
    for_each_client(|client| {
        let sim = Sim::start(&format!("sa-rotation-{client}"));
        let ws = Workspace::new(client, "sa-rotation").with_timeout(Duration::from_secs(600));
        ws.write_main_tf(&edit_config(
            walk_config_in(&sim, THREE_ZONES[0]),
            &[
                (
                    "variable \"zones\" {",
                    "variable \"sa_rotation\" {\n  type    = string\n  default = null\n}\n\nvariable \"zones\" {",
                ),
                (
                    "  kubernetes_version        = var.kubernetes_version\n",
                    "  kubernetes_version        = var.kubernetes_version\n  service_account_key_rotation = var.sa_rotation\n",
                ),
            ],
        ));
        ws.init();
        set_stage(&ws, None);
        ws.apply();
        let vms: Vec<String> = acceptance_tests::walk::replicas_by_zone(&ws)
            .into_values()
            .collect();
        write_keys(&sim, &vms[0]);
        let (k, only_k) = keys_on(&sim, &vms[0]);
        assert_eq!(
            only_k,
            std::slice::from_ref(&k),
            "[{client}] one key before a rotation"
        );
        every_master_runs(client, &sim, &vms, &k, &[&k]);
        // Tokens as a master mints them verify on every master; one from a key no master knows on none.
        let token_k = token_signed_with(&signing_key_of(&sim, &vms[0]));
        every_master_answers(client, &ws, &sim, &vms, &token_k, "200");
        let stranger = token_signed_with(&ha_pki::service_account_key().unwrap());
        every_master_answers(client, &ws, &sim, &vms, &stranger, "401");
        let private_keys =
            acceptance_tests::walk::private_keys_in(&ws.read_file("terraform.tfstate"));

        // Skipping a stage: refused at plan, nothing made.
        set_stage(&ws, Some("switched"));
        ws.run(&["plan", "-input=false", "-no-color"])
            .assert_failure()
            .assert_contains(
                "service_account_key_rotation cannot go to \"switched\" before \"started\"",
            );

        // Started: a next key, verified everywhere; the current one still signs.
        set_stage(&ws, Some("started"));
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_success();
        plan.assert_contains("changes its service-account key");
        plan.assert_contains("\"service_account_key_rotation\" = \"started\"");
        let (m, tokens) = apply_presenting(&ws, &sim, &vms, "started", &[("K", &token_k)]);
        assert_rolled_cleanly(client, &sim, &vms, "started", &m);
        none_refused(client, "started", &tokens);
        let (_, both) = keys_on(&sim, &vms[0]);
        assert_eq!(both.len(), 2, "[{client}] two keys verified: {both:?}");
        let n = both[1].clone();
        assert_ne!(n, k);
        every_master_runs(client, &sim, &vms, &k, &[&k, &n]);
        every_master_answers(client, &ws, &sim, &vms, &token_k, "200");
        check(client, &ws, &sim, 3);

        // Back to no rotation, the cluster alone: its masters still run `started`, so moving on is refused.
        set_stage(&ws, None);
        ws.apply_target("ha_master_cluster.c");
        set_stage(&ws, Some("started"));
        let refused = ws.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        refused.assert_failure();
        refused.assert_contains(
            "does not run the service-account key of the cluster's stage yet (no rotation under way)",
        );
        every_master_runs(client, &sim, &vms, &k, &[&k, &n]);
        // Finishing the stage the cluster is at rolls them back to K alone; then `started` again makes another key.
        set_stage(&ws, None);
        let m = apply_measured(&ws, &sim, "dropped");
        assert_rolled_cleanly(client, &sim, &vms, "dropped", &m);
        every_master_runs(client, &sim, &vms, &k, &[&k]);
        set_stage(&ws, Some("started"));
        let m = apply_measured(&ws, &sim, "started-again");
        assert_rolled_cleanly(client, &sim, &vms, "started-again", &m);
        let n = keys_on(&sim, &vms[0]).1[1].clone();
        every_master_runs(client, &sim, &vms, &k, &[&k, &n]);

        // Switched: the next key signs, both verified. While masters of both stages serve side by side, each
        // authenticates what either signs.
        let token_n = token_signed_with(&next_key_in_secret(&sim));
        set_stage(&ws, Some("switched"));
        let (m, tokens) = apply_presenting(
            &ws,
            &sim,
            &vms,
            "switched",
            &[("K", &token_k), ("N", &token_n)],
        );
        assert_rolled_cleanly(client, &sim, &vms, "switched", &m);
        none_refused(client, "switched", &tokens);
        every_master_runs(client, &sim, &vms, &n, &[&n, &k]);
        // Tokens from before the switch and from after it verify everywhere; the one a switched master mints is
        // the one signed with the secret's next key.
        assert_eq!(
            signing_key_of(&sim, &vms[0]).trim(),
            next_key_in_secret(&sim).trim(),
            "[{client}] a switched master signs with the rotation's next key"
        );
        every_master_answers(client, &ws, &sim, &vms, &token_n, "200");
        every_master_answers(client, &ws, &sim, &vms, &token_k, "200");
        check(client, &ws, &sim, 3);

        // Done: the next key is the key, the old one gone from every master and from state.
        set_stage(&ws, None);
        let plan = ws.run(&["plan", "-input=false", "-no-color"]);
        plan.assert_contains("stop verifying");
        let (m, tokens) = apply_presenting(&ws, &sim, &vms, "done", &[("N", &token_n)]);
        assert_rolled_cleanly(client, &sim, &vms, "done", &m);
        none_refused(client, "done", &tokens);
        every_master_runs(client, &sim, &vms, &n, &[&n]);
        // The old key is forgotten: its tokens no longer verify anywhere; the new key's still do.
        every_master_answers(client, &ws, &sim, &vms, &token_n, "200");
        every_master_answers(client, &ws, &sim, &vms, &token_k, "401");
        check(client, &ws, &sim, 3);
        assert_eq!(
            acceptance_tests::walk::private_keys_in(&ws.read_file("terraform.tfstate")),
            private_keys,
            "[{client}] as many private keys in state as before the rotation"
        );
        assert_private_keys_only_in_the_cluster(client, &ws, private_keys);
    });
}
