//! The batch endpoint (`POST /batch/compute/v1`) over HTTP: each inner call answered in its own part, through the
//! same pipeline as a call sent alone (auth, failpoints, request log), and broken batches refused whole.
//! `gcloud.rs` checks the same endpoint with gcloud itself.

mod common;
use common::*;
use serde_json::{Value, json};

const Z: &str = "us-central1-b";

/// One answer taken out of a batch response.
struct Part {
    content_id: Option<String>,
    status: u16,
    body: Value,
}

/// Sends `calls` (Content-ID, request text) as gcloud does: LF line endings, a quoted boundary.
async fn batch(sim: &Sim, token: Option<&str>, calls: &[(&str, String)]) -> (u16, String, String) {
    let b = "===============123==";
    let mut body = String::new();
    for (id, call) in calls {
        body.push_str(&format!(
            "--{b}\nContent-Type: application/http\nMIME-Version: 1.0\n\
             Content-Transfer-Encoding: binary\nContent-ID: <{id}>\n\n{call}\n"
        ));
    }
    body.push_str(&format!("--{b}--\n"));
    send(
        sim,
        token,
        &format!("multipart/mixed; boundary=\"{b}\""),
        body,
    )
    .await
}

async fn send(
    sim: &Sim,
    token: Option<&str>,
    content_type: &str,
    body: String,
) -> (u16, String, String) {
    let mut rb = sim
        .http
        .post(format!("{}batch/compute/v1", sim.endpoint))
        .header("content-type", content_type)
        .header("user-agent", "outer-agent")
        .body(body);
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    let resp = rb.send().await.expect("batch sent");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, resp.text().await.unwrap())
}

/// Takes a `multipart/mixed` answer apart (the sim writes CRLF line endings); 2xx JSON bodies go through the
/// contract check like every other answer in these tests.
fn parts(content_type: &str, text: &str) -> Vec<Part> {
    let boundary = content_type
        .strip_prefix("multipart/mixed; boundary=")
        .unwrap_or_else(|| panic!("not multipart/mixed: {content_type}"));
    let delimiter = format!("\r\n--{boundary}");
    let text = format!("\r\n{text}");
    let (body, epilogue) = text
        .split_once(&format!("{delimiter}--"))
        .unwrap_or_else(|| panic!("no closing delimiter: {text}"));
    assert_eq!(epilogue, "\r\n");
    body.split(&delimiter)
        .skip(1)
        .map(|part| {
            let (mime, http) = part
                .strip_prefix("\r\n")
                .unwrap()
                .split_once("\r\n\r\n")
                .unwrap();
            assert!(mime.contains("Content-Type: application/http"), "{mime}");
            let content_id = mime
                .lines()
                .find_map(|l| l.strip_prefix("Content-ID: "))
                .map(str::to_string);
            let (head, body) = http.split_once("\r\n\r\n").unwrap();
            let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(length, body.len(), "{part}");
            let body: Value = if body.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(body).unwrap()
            };
            if (200..300).contains(&status) && !body.is_null() {
                contract_check(body["kind"].as_str().unwrap(), &body.to_string());
            }
            Part {
                content_id,
                status,
                body,
            }
        })
        .collect()
}

fn delete_call(name: &str) -> String {
    format!(
        "DELETE /compute/v1/projects/{PROJECT}/zones/{Z}/instances/{name}?alt=json HTTP/1.1\n\
         Content-Type: application/json\nMIME-Version: 1.0\ncontent-length: 0\n\
         user-agent: inner-agent\naccept: application/json\nHost: 127.0.0.1\n\n"
    )
}

fn get_call(path: &str) -> String {
    format!("GET /compute/v1/projects/{PROJECT}/{path} HTTP/1.1\nHost: 127.0.0.1\n\n")
}

#[tokio::test]
async fn each_call_is_answered_in_its_own_part() {
    let sim = start().await;
    instance(&sim, "a", Z, None).await;
    instance(&sim, "b", Z, None).await;
    sim.admin("POST", "requests/reset", None).await;
    let firewall = json!({"name": "fw", "allowed": [{"IPProtocol": "tcp", "ports": ["443"]}]});
    let calls = [
        ("u+0", delete_call("a")),
        ("u+1", delete_call("nope")),
        ("u+2", get_call(&format!("zones/{Z}"))),
        ("u+3", delete_call("b")),
        (
            "u+4",
            format!(
                "POST http://127.0.0.1/compute/v1/projects/{PROJECT}/global/firewalls HTTP/1.1\n\
                 Content-Type: application/json\n\n{firewall}"
            ),
        ),
    ];
    let (status, ct, text) = batch(&sim, Some("t"), &calls).await;
    assert_eq!(status, 200, "{text}");
    let got = parts(&ct, &text);
    let ids: Vec<_> = got
        .iter()
        .map(|p| p.content_id.as_deref().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "<response-u+0>",
            "<response-u+1>",
            "<response-u+2>",
            "<response-u+3>",
            "<response-u+4>"
        ]
    );
    let statuses: Vec<u16> = got.iter().map(|p| p.status).collect();
    assert_eq!(statuses, [200, 404, 200, 200, 200]);
    assert_eq!(got[0].body["operationType"], "delete");
    assert!(
        got[0].body["targetLink"]
            .as_str()
            .unwrap()
            .ends_with("/instances/a")
    );
    assert_eq!(
        got[1].body["error"]["message"],
        format!("The resource 'projects/{PROJECT}/zones/{Z}/instances/nope' was not found")
    );
    assert_eq!(got[2].body["name"], Z);
    assert!(
        got[3].body["targetLink"]
            .as_str()
            .unwrap()
            .ends_with("/instances/b")
    );
    assert_eq!(got[4].body["operationType"], "insert");
    // The calls really happened, each as if sent alone.
    sim.done(&Resp {
        status: 200,
        body: got[4].body.clone(),
    })
    .await;
    assert_eq!(sim.get("global/firewalls/fw").await.status, 200);
    for op in [&got[0], &got[3]] {
        sim.done(&Resp {
            status: 200,
            body: op.body.clone(),
        })
        .await;
    }
    assert_eq!(
        sim.get(&format!("zones/{Z}/instances"))
            .await
            .body
            .get("items"),
        None
    );
    // The log has the batch and each call; a call's own User-Agent wins over the batch's.
    let log = sim.admin("GET", "requests", None).await;
    let entries: Vec<&Value> = log["entries"].as_array().unwrap().iter().collect();
    let batch_entry = entries.iter().find(|e| e["api"] == "batch").unwrap();
    assert_eq!(batch_entry["path"], "/batch/compute/v1");
    assert_eq!(batch_entry["userAgent"], "outer-agent");
    let deletes: Vec<_> = entries
        .iter()
        .filter(|e| e["api"] == "compute.instances.delete")
        .collect();
    assert_eq!(deletes.len(), 3, "{log}");
    assert!(
        deletes.iter().all(|e| e["userAgent"] == "inner-agent"),
        "{log}"
    );
    let zone_get = entries
        .iter()
        .find(|e| e["api"] == "compute.zones.get")
        .unwrap();
    assert_eq!(
        zone_get["userAgent"], "outer-agent",
        "inherited from the batch"
    );
}

/// The token and the failpoints apply to each call, not to the batch.
#[tokio::test]
async fn calls_are_authorised_and_faulted_one_by_one() {
    let sim = start().await;
    let calls = [("x+0", get_call("zones")), ("x+1", get_call("regions"))];
    let (status, ct, text) = batch(&sim, None, &calls).await;
    assert_eq!(status, 200, "{text}");
    for p in parts(&ct, &text) {
        assert_eq!(p.status, 401, "{}", p.body);
        assert_eq!(p.body["error"]["status"], "UNAUTHENTICATED");
    }
    sim.admin(
        "POST",
        "faults",
        Some(json!({"when": {"on": "request", "api": "zones.list"},
                    "then": {"effect": "status", "status": 503}, "times": 1})),
    )
    .await;
    let (_, ct, text) = batch(&sim, Some("t"), &calls).await;
    let got = parts(&ct, &text);
    assert_eq!((got[0].status, got[1].status), (503, 200), "{text}");
    assert_eq!(got[0].body["error"]["errors"][0]["reason"], "backendError");
    assert_eq!(got[1].body["kind"], "compute#regionList");
    // The failpoint is spent: the same batch now succeeds whole.
    let (_, ct, text) = batch(&sim, Some("t"), &calls).await;
    assert!(parts(&ct, &text).iter().all(|p| p.status == 200), "{text}");
}

#[tokio::test]
async fn broken_batches_are_refused_whole() {
    let sim = start().await;
    let call = get_call("zones");
    let bad = [
        // Not multipart.
        ("application/json", "{}".to_string()),
        // No boundary parameter.
        (
            "multipart/mixed",
            format!("--b\nContent-Type: application/http\n\n{call}\n--b--\n"),
        ),
        // No closing delimiter.
        (
            "multipart/mixed; boundary=b",
            format!("--b\nContent-Type: application/http\n\n{call}\n"),
        ),
        // No parts.
        ("multipart/mixed; boundary=b", "--b--\n".to_string()),
        // A part that is not an HTTP request.
        (
            "multipart/mixed; boundary=b",
            "--b\nContent-Type: text/plain\n\nhello\n--b--\n".to_string(),
        ),
        (
            "multipart/mixed; boundary=b",
            "--b\nContent-Type: application/http\n\n\n--b--\n".to_string(),
        ),
        // A good call, then one with a header that cannot be sent: the good one must not run either.
        (
            "multipart/mixed; boundary=b",
            format!(
                "--b\nContent-Type: application/http\n\n{call}\n--b\nContent-Type: application/http\n\n\
                 GET /compute/v1/projects/{PROJECT}/regions HTTP/1.1\nBad Header: x\n\n\n--b--\n"
            ),
        ),
    ];
    for (ct, body) in bad {
        let (status, _, text) = send(&sim, Some("t"), ct, body.clone()).await;
        assert_eq!(status, 400, "{ct} {body:?}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["errors"][0]["reason"], "badRequest", "{text}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Failed to parse batch request, error: "),
            "{text}"
        );
    }
    let too_many: Vec<(String, String)> = (0..1001)
        .map(|i| (format!("y+{i}"), call.clone()))
        .collect();
    let too_many: Vec<(&str, String)> = too_many
        .iter()
        .map(|(i, c)| (i.as_str(), c.clone()))
        .collect();
    let (status, _, text) = batch(&sim, Some("t"), &too_many).await;
    assert_eq!(status, 400, "{text}");
    let get = sim
        .http
        .get(format!("{}batch/compute/v1", sim.endpoint))
        .bearer_auth("t")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 405);
    // Nothing in a refused batch ran.
    let log = sim.admin("GET", "requests", None).await;
    assert!(
        !log["byMethod"]
            .as_object()
            .unwrap()
            .contains_key("compute.zones.list"),
        "{log}"
    );
}
