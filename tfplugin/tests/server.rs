//! The provider process as Terraform and OpenTofu see it: launched with go-plugin's environment, it prints one
//! handshake line, serves gRPC only to the client holding the certificate from PLUGIN_CLIENT_CERT, and exits by
//! itself after Shutdown or when the client goes away.

mod support;

use std::time::{Duration, Instant};

use support::*;

const PROVIDER: &str = "/tfplugin6.Provider/GetProviderSchema";
const VALIDATE: &str = "/tfplugin6.Provider/ValidateResourceConfig";
const SHUTDOWN: &str = "/plugin.GRPCController/Shutdown";
const STDIO: &str = "/plugin.GRPCStdio/StreamStdio";
const STOP: &str = "/tfplugin6.Provider/StopProvider";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn run_by_hand_it_says_what_it_is_and_exits_1() {
    let start = Instant::now();
    let out = provider_command().output().expect("run the provider");
    assert!(start.elapsed() < Duration::from_secs(5), "must not hang");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "exactly one line: {stderr:?}");
    assert!(
        stderr.contains("not meant to be run directly") && stderr.contains("terraform init"),
        "{stderr}"
    );
}

#[test]
fn a_client_without_protocol_6_gets_a_clear_error() {
    let out = provider_command()
        .env(COOKIE.0, COOKIE.1)
        .env("PLUGIN_PROTOCOL_VERSIONS", "5")
        .output()
        .expect("run the provider");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("protocol 6"));
}

#[test]
fn the_launching_client_gets_the_schema_over_mutual_tls() {
    let client = cert::go_plugin_style();
    let plugin = Plugin::launch(Some(&client.pem()));
    assert!(
        plugin.line.ends_with('\n') && plugin.line.len() > 300,
        "{:?}",
        plugin.line
    );
    runtime().block_on(async {
        let channel = plugin
            .channel(Some(plugin.client_tls(Some(&client))))
            .await
            .expect("connect");
        let schema: SchemaResponse = unary(channel.clone(), PROVIDER, Empty {})
            .await
            .expect("GetProviderSchema");
        assert!(schema.resource_schemas.contains_key("echo_thing"));
        assert!(schema.server_capabilities.unwrap().plan_destroy);

        // A diagnostic crosses the wire with severity ERROR (1), never 0, and its attribute path.
        let req = ValidateResourceConfigRequest {
            type_name: "echo_invalid".into(),
        };
        let resp: DiagnosticsResponse = unary(channel, VALIDATE, req)
            .await
            .expect("ValidateResourceConfig");
        assert_eq!(resp.diagnostics.len(), 1);
        assert_eq!(resp.diagnostics[0].severity, 1);
        let steps = &resp.diagnostics[0].attribute.as_ref().unwrap().steps;
        assert_eq!(steps[0].attribute_name.as_deref(), Some("name"));
    });
}

/// Nothing but the launching client can talk to the plugin: not a client with another certificate, not one with
/// none, not one without TLS.
#[test]
fn any_other_client_is_refused_at_the_tls_handshake() {
    let client = cert::go_plugin_style();
    let impostor = cert::go_plugin_style();
    let plugin = Plugin::launch(Some(&client.pem()));
    runtime().block_on(async {
        for (who, tls) in [
            (
                "another certificate",
                Some(plugin.client_tls(Some(&impostor))),
            ),
            ("no certificate", Some(plugin.client_tls(None))),
            ("no TLS", None),
        ] {
            // With TLS 1.3 the client may finish its side before the server's rejection arrives, so the failure
            // can surface on connect or on the first call; either way no RPC may succeed.
            let result = match plugin.channel(tls).await {
                Err(e) => Err(e.to_string()),
                Ok(ch) => unary::<_, SchemaResponse>(ch, PROVIDER, Empty {})
                    .await
                    .map_err(|s| s.to_string()),
            };
            assert!(result.is_err(), "{who}: the call must fail, got {result:?}");
        }
    });
    // The server must have seen failed TLS handshakes, not gRPC-level errors; it logs each refusal a moment
    // after the client gave up.
    for reason in [
        "ApplicationVerificationFailure",
        "peer sent no certificates",
        "corrupt message",
    ] {
        let log = plugin.stderr_with(reason, Duration::from_secs(5));
        assert!(
            log.contains(reason),
            "expected a TLS handshake refusal ({reason}) in stderr:\n{log}"
        );
    }
    // The refused peers do not count as the client: the plugin is still up for the real one.
    runtime().block_on(async {
        let channel = plugin
            .channel(Some(plugin.client_tls(Some(&client))))
            .await
            .expect("connect");
        let _: SchemaResponse = unary(channel, PROVIDER, Empty {})
            .await
            .expect("the real client still works");
    });
}

#[test]
fn after_shutdown_the_process_exits_by_itself_even_with_stdio_streaming() {
    let client = cert::go_plugin_style();
    let mut plugin = Plugin::launch(Some(&client.pem()));
    let rt = runtime();
    let (channel, _stdio) = rt.block_on(async {
        let channel = plugin
            .channel(Some(plugin.client_tls(Some(&client))))
            .await
            .expect("connect");
        // go-plugin opens StreamStdio at start and reads it until EOF; it must not hold the process open.
        let stdio = server_stream::<_, StdioData>(channel.clone(), STDIO, Empty {})
            .await
            .expect("StreamStdio");
        let _: Empty = unary(channel.clone(), SHUTDOWN, Empty {})
            .await
            .expect("Shutdown replies");
        (channel, stdio)
    });
    let start = Instant::now();
    let status = plugin
        .wait_exit(Duration::from_secs(1))
        .expect("exited within 1 s of Shutdown");
    assert!(status.success(), "{status:?}");
    eprintln!("exited {:?} after the Shutdown reply", start.elapsed());
    drop(channel);
}

#[test]
fn when_the_client_goes_away_the_process_exits() {
    let client = cert::go_plugin_style();
    let mut plugin = Plugin::launch(Some(&client.pem()));
    {
        let rt = runtime();
        rt.block_on(async {
            let channel = plugin
                .channel(Some(plugin.client_tls(Some(&client))))
                .await
                .expect("connect");
            let _: SchemaResponse = unary(channel, PROVIDER, Empty {})
                .await
                .expect("GetProviderSchema");
        });
        // Dropping the runtime closes the connection, as a crashed or killed client's kernel would.
    }
    let status = plugin
        .wait_exit(Duration::from_secs(3))
        .expect("exited after the client's connection closed");
    assert!(status.success(), "{status:?}");
}

/// With TF_DISABLE_PLUGIN_TLS the client sets no PLUGIN_CLIENT_CERT and expects plaintext, as go-plugin serves it.
#[test]
fn without_a_client_certificate_it_serves_plaintext() {
    let plugin = Plugin::launch(None);
    assert!(
        plugin.server_cert.is_none() && plugin.line.ends_with("|grpc|\n"),
        "{:?}",
        plugin.line
    );
    runtime().block_on(async {
        let channel = plugin.channel(None).await.expect("connect");
        let schema: SchemaResponse = unary(channel, PROVIDER, Empty {})
            .await
            .expect("GetProviderSchema");
        assert!(schema.resource_schemas.contains_key("echo_thing"));
    });
    let log = plugin.stderr_with("serving plaintext", Duration::from_secs(5));
    assert!(
        log.contains("serving plaintext"),
        "the choice is logged: {log}"
    );
}

/// Ctrl-C reaches the whole process group; the client then stops us through StopProvider. Dying on SIGINT would
/// abandon an apply half way, so the plugin ignores it, as go-plugin's servers do.
#[test]
fn sigint_does_not_kill_the_plugin_and_stop_provider_answers() {
    let client = cert::go_plugin_style();
    let mut plugin = Plugin::launch(Some(&client.pem()));
    let status = std::process::Command::new("kill")
        .args(["-INT", &plugin.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        plugin.child.try_wait().unwrap().is_none(),
        "still running after SIGINT"
    );
    runtime().block_on(async {
        let channel = plugin
            .channel(Some(plugin.client_tls(Some(&client))))
            .await
            .expect("connect");
        let stop: StopProviderResponse =
            unary(channel, STOP, Empty {}).await.expect("StopProvider");
        assert_eq!(stop.error, "");
    });
}
