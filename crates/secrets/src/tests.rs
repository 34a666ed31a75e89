//! The backend against ha-sim's Secret Manager (a private sim per test, as the Compute backend's tests use),
//! through Google's client: what it writes is read back, only by the reader it names.

use super::*;
use ha_gce::tests::Sim;

fn settings(sim: &Sim) -> Settings {
    Settings {
        secret_manager_endpoint: Some(format!("http://127.0.0.1:{}/", sim.port)),
        ..sim.settings()
    }
}

/// The same sim, seen by a service account (`sim-sa:<email>` is that account to the sim's IAM).
fn as_account(sim: &Sim, email: &str) -> Settings {
    Settings {
        auth: ha_settings::Auth::AccessToken(format!("sim-sa:{email}")),
        ..settings(sim)
    }
}

const MASTERS: &str = "masters@proj.iam.gserviceaccount.com";

#[tokio::test]
async fn a_payload_is_written_read_back_and_readable_only_by_its_reader() {
    let sim = Sim::start().await;
    let owner = Secrets::connect(&settings(&sim), "proj").await.unwrap();
    let labels = BTreeMap::from([("ha-master".to_string(), "prod".to_string())]);
    let keys = b"-----BEGIN EC PRIVATE KEY-----\n...\n-----END EC PRIVATE KEY-----\n".to_vec();

    assert_eq!(owner.read("prod-a-keys", None).await.unwrap(), None);
    assert_eq!(
        owner
            .put("prod-a-keys", &labels, &keys, Some(MASTERS))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        owner.read("prod-a-keys", None).await.unwrap(),
        Some(keys.clone())
    );
    assert_eq!(
        owner.readers("prod-a-keys").await.unwrap(),
        Some(vec![format!("serviceAccount:{MASTERS}")])
    );

    let masters = Secrets::connect(&as_account(&sim, MASTERS), "proj")
        .await
        .unwrap();
    assert_eq!(
        masters.read("prod-a-keys", Some(1)).await.unwrap(),
        Some(keys.clone())
    );
    let other = Secrets::connect(
        &as_account(&sim, "other@proj.iam.gserviceaccount.com"),
        "proj",
    )
    .await
    .unwrap();
    let refused = other
        .read("prod-a-keys", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("prod-a-keys") && refused.contains("denied"),
        "{refused}"
    );
    assert!(
        masters
            .put("prod-a-keys", &labels, b"x", Some(MASTERS))
            .await
            .is_err(),
        "a reader writes nothing"
    );

    // The same payload again (a resumed write) adds nothing.
    assert_eq!(
        owner
            .put("prod-a-keys", &labels, &keys, Some(MASTERS))
            .await
            .unwrap(),
        1
    );
    // Another keeps the secret and its single reader, adds the newest version and destroys the old one.
    let renewed = b"renewed".to_vec();
    assert_eq!(
        owner
            .put("prod-a-keys", &labels, &renewed, Some(MASTERS))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        owner.read("prod-a-keys", None).await.unwrap(),
        Some(renewed)
    );
    let destroyed = owner
        .read("prod-a-keys", Some(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(destroyed.contains("DESTROYED"), "{destroyed}");

    assert!(owner.delete("prod-a-keys").await.unwrap());
    assert!(!owner.delete("prod-a-keys").await.unwrap());
    assert_eq!(owner.readers("prod-a-keys").await.unwrap(), None);
}

/// A write meets the faults a busy service answers with: a 503 on any of its calls and a 429 (quota) are retried
/// by the client (each is safe to repeat), and what is not retried, a 500, fails with an error the provider
/// calls passing.
#[tokio::test]
async fn an_unavailable_or_overloaded_service_is_retried_and_a_failing_one_is_reported_as_passing()
{
    let sim = Sim::start().await;
    let owner = Secrets::connect(&settings(&sim), "proj").await.unwrap();
    let labels = BTreeMap::new();
    for api in [
        "secretmanager.secrets.create",
        "secretmanager.secrets.setIamPolicy",
        "secretmanager.secrets.addVersion",
    ] {
        sim.fail_requests(api, 503, 1).await;
    }
    assert_eq!(
        owner
            .put("prod-b-keys", &labels, b"keys", Some(MASTERS))
            .await
            .unwrap(),
        1,
        "every call answered 503 once and was made again"
    );
    let statuses = |api: &'static str| {
        let sim = &sim;
        async move {
            sim.admin("GET", "/_sim/requests", None).await["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["api"] == api)
                .map(|e| e["status"].as_u64().unwrap_or(0))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        statuses("secretmanager.secrets.addVersion").await,
        [503, 200],
        "the version was added on the second try"
    );

    // A quota refusal, on a write and on a read: made again, as the Compute backend does.
    sim.fail_requests("secretmanager.secrets.addVersion", 429, 1)
        .await;
    assert_eq!(
        owner
            .put("prod-b-keys", &labels, b"renewed", Some(MASTERS))
            .await
            .unwrap(),
        2,
        "a 429 on adding the version was retried"
    );
    assert_eq!(
        statuses("secretmanager.secrets.addVersion").await,
        [503, 200, 429, 200]
    );
    sim.fail_requests("secretmanager.secrets.versions.access", 429, 2)
        .await;
    assert_eq!(
        owner.read("prod-b-keys", None).await.unwrap(),
        Some(b"renewed".to_vec()),
        "two 429s on a read were retried"
    );

    sim.fail_requests("secretmanager.secrets.addVersion", 500, 1)
        .await;
    let failing = owner
        .put("prod-b-keys", &labels, b"renewed again", Some(MASTERS))
        .await
        .unwrap_err();
    assert!(failing.is_transient(), "{failing}");
    assert!(failing.to_string().contains("prod-b-keys"), "{failing}");
    assert_eq!(
        owner
            .put("prod-b-keys", &labels, b"renewed again", Some(MASTERS))
            .await
            .unwrap(),
        3,
        "the next write finishes it"
    );

    let denied = Secrets::connect(
        &as_account(&sim, "other@proj.iam.gserviceaccount.com"),
        "proj",
    )
    .await
    .unwrap()
    .read("prod-b-keys", None)
    .await
    .unwrap_err();
    assert!(!denied.is_transient(), "a refusal is not passing: {denied}");
}

/// Secrets are found by their labels (how a cluster finds what a dead join left), and only by all of them.
#[tokio::test]
async fn secrets_are_listed_by_every_label_asked_for() {
    let sim = Sim::start().await;
    let owner = Secrets::connect(&settings(&sim), "proj").await.unwrap();
    let labelled = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    for (id, labels) in [
        ("a-keys", labelled(&[("cluster", "prod"), ("replica", "a")])),
        ("b-keys", labelled(&[("cluster", "prod"), ("replica", "b")])),
        ("c-keys", labelled(&[("cluster", "test"), ("replica", "a")])),
    ] {
        owner.put(id, &labels, b"k", Some(MASTERS)).await.unwrap();
    }
    let ids = |found: Vec<(String, BTreeMap<String, String>)>| {
        let mut ids: Vec<String> = found.into_iter().map(|(id, _)| id).collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(owner.list(&labelled(&[("cluster", "prod")])).await.unwrap()),
        ["a-keys", "b-keys"]
    );
    let one = owner
        .list(&labelled(&[("cluster", "prod"), ("replica", "a")]))
        .await
        .unwrap();
    assert_eq!(
        one,
        [(
            "a-keys".to_string(),
            labelled(&[("cluster", "prod"), ("replica", "a")])
        )]
    );
    assert!(
        owner
            .list(&labelled(&[("cluster", "none")]))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(ids(owner.list(&BTreeMap::new()).await.unwrap()).len(), 3);
}

/// A project that never enabled the API: every call says so, naming the command that enables it, and the error
/// is told apart from a refusal, so a cleanup can take it as nothing to clean.
#[tokio::test]
async fn a_project_without_the_api_is_told_how_to_enable_it() {
    let sim = Sim::start().await;
    let owner = Secrets::connect(&settings(&sim), "proj").await.unwrap();
    sim.fault(serde_json::json!({
        "when": {"on": "request", "api": "secretmanager.*"},
        "then": {"effect": "fail", "code": "SERVICE_DISABLED"},
    }))
    .await;
    let put = owner
        .put("prod-c-keys", &BTreeMap::new(), b"k", Some(MASTERS))
        .await
        .unwrap_err();
    assert!(put.is_disabled() && !put.is_transient(), "{put}");
    let text = put.to_string();
    assert!(
        text.contains("gcloud services enable secretmanager.googleapis.com --project proj")
            && text.contains("prod-c-keys"),
        "{text}"
    );
    assert!(
        owner
            .list(&BTreeMap::new())
            .await
            .unwrap_err()
            .is_disabled()
    );
    assert!(owner.delete("prod-c-keys").await.unwrap_err().is_disabled());
}

#[test]
fn the_endpoint_is_the_origin_however_it_is_written() {
    let with = |e: Option<&str>, universe: Option<&str>| {
        origin(&Settings {
            secret_manager_endpoint: e.map(String::from),
            universe_domain: universe.map(String::from),
            ..Settings::default()
        })
    };
    assert_eq!(with(None, None), "https://secretmanager.googleapis.com");
    assert_eq!(
        with(None, Some("example.eu")),
        "https://secretmanager.example.eu"
    );
    assert_eq!(
        with(Some("http://127.0.0.1:8787/"), None),
        "http://127.0.0.1:8787"
    );
    assert_eq!(
        with(Some("https://secretmanager.googleapis.com/v1/"), None),
        "https://secretmanager.googleapis.com"
    );
}

#[tokio::test]
async fn a_secret_without_a_reader_is_read_by_its_owner_alone() {
    let sim = Sim::start().await;
    let owner = Secrets::connect(&settings(&sim), "proj").await.unwrap();
    let labels = BTreeMap::from([("ha-master".to_string(), "prod".to_string())]);
    owner
        .put("prod-cluster-keys", &labels, b"ca keys", None)
        .await
        .unwrap();
    assert_eq!(
        owner.readers("prod-cluster-keys").await.unwrap(),
        Some(vec![])
    );
    assert_eq!(
        owner.read("prod-cluster-keys", None).await.unwrap(),
        Some(b"ca keys".to_vec())
    );
    let masters = Secrets::connect(&as_account(&sim, MASTERS), "proj")
        .await
        .unwrap();
    assert!(masters.read("prod-cluster-keys", None).await.is_err());
}
