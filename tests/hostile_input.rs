//! Hostile input (reliability suite R5): the real provider binary, launched as Terraform launches it and reached
//! through a real gRPC client over the plugin's mutual TLS, gets malformed and random messages on every RPC it
//! serves. It must never panic or hang: each call is answered (a gRPC error for bytes that are not the message,
//! an error diagnostic for a message whose values are wrong), and the process is still serving at the end.
//!
//! The messages are drawn from a seed printed at the start (`HOSTILE_SEED=<n>` replays a run). The go-plugin
//! harness (launch, handshake, client certificate, channel) is the protocol crate's own, shared by path.

#[path = "../tfplugin/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use prost::Message;
use prost::bytes::{Buf, BufMut};
use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
use support::{Plugin, cert};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

/// How long one call may take before the provider counts as hung.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Every unary RPC of tfplugin6 the provider serves, except StopProvider (it cancels what runs, by design).
const UNARY: &[&str] = &[
    "GetMetadata",
    "GetProviderSchema",
    "ValidateProviderConfig",
    "ValidateResourceConfig",
    "ValidateDataResourceConfig",
    "UpgradeResourceState",
    "GetResourceIdentitySchemas",
    "UpgradeResourceIdentity",
    "ConfigureProvider",
    "ReadResource",
    "PlanResourceChange",
    "ApplyResourceChange",
    "ImportResourceState",
    "MoveResourceState",
    "ReadDataSource",
    "GenerateResourceConfig",
    "ValidateEphemeralResourceConfig",
    "OpenEphemeralResource",
    "RenewEphemeralResource",
    "CloseEphemeralResource",
    "ValidateListResourceConfig",
    "GetFunctions",
    "CallFunction",
    "ValidateStateStoreConfig",
    "ConfigureStateStore",
    "GetStates",
    "DeleteState",
    "PlanAction",
    "ValidateActionConfig",
];

/// The server-streaming RPCs.
const STREAMING: &[&str] = &["ListResource", "ReadStateBytes", "InvokeAction"];

/// The types a hostile value is sent for: every resource, data source and ephemeral resource the provider has,
/// and one it does not.
const TYPE_NAMES: &[&str] = &[
    "ha_master_cluster",
    "ha_master_replica",
    "ha_admin_credentials",
    "ha_no_such_type",
];

fn path(rpc: &str) -> PathAndQuery {
    PathAndQuery::try_from(format!("/tfplugin6.Provider/{rpc}")).unwrap()
}

// ---- a codec for raw bytes: the tests write the wire format themselves ----

#[derive(Default)]
struct RawCodec;
struct RawEncoder;
struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

/// What a call came back with.
#[derive(Debug)]
enum Answer {
    Status(tonic::Status),
    Message(Vec<u8>),
}

async fn call_unary(channel: &Channel, rpc: &str, body: Vec<u8>) -> Answer {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        grpc.unary(tonic::Request::new(body), path(rpc), RawCodec)
            .await
            .map(|r| r.into_inner())
    };
    match tokio::time::timeout(ANSWER_WITHIN, call).await {
        Err(_) => panic!("{rpc}: no answer within {ANSWER_WITHIN:?}: the provider hangs"),
        Ok(Ok(bytes)) => Answer::Message(bytes),
        Ok(Err(status)) => Answer::Status(status),
    }
}

async fn call_streaming(channel: &Channel, rpc: &str, body: Vec<u8>) -> Answer {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut stream = grpc
            .server_streaming(tonic::Request::new(body), path(rpc), RawCodec)
            .await?
            .into_inner();
        let mut last = Vec::new();
        while let Some(item) = stream.message().await? {
            last = item;
        }
        Ok::<_, tonic::Status>(last)
    };
    match tokio::time::timeout(ANSWER_WITHIN, call).await {
        Err(_) => {
            panic!("{rpc}: the stream did not end within {ANSWER_WITHIN:?}: the provider hangs")
        }
        Ok(Ok(bytes)) => Answer::Message(bytes),
        Ok(Err(status)) => Answer::Status(status),
    }
}

// ---- seeded random data ----

/// xorshift64*: enough to draw test data from a seed that replays exactly.
struct Rng(u64);

impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("HOSTILE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("hostile input: HOSTILE_SEED={seed}");
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Between 1 and `max` random bytes: never none, since an empty DynamicValue is the protocol's null, which
    /// every field may be (seed 1795587726950497235 drew an empty one and expected an error).
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = 1 + self.below(max);
        (0..len).map(|_| self.next() as u8).collect()
    }
}

// ---- wire-format builders ----

fn string_field(tag: u32, s: &str, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(s.len() as u64, buf);
    buf.put_slice(s.as_bytes());
}

fn bytes_field(tag: u32, b: &[u8], buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(b.len() as u64, buf);
    buf.put_slice(b);
}

/// A DynamicValue carrying `msgpack`.
fn dynamic_value(msgpack: &[u8]) -> Vec<u8> {
    let mut dv = Vec::new();
    bytes_field(1, msgpack, &mut dv);
    dv
}

/// Protobuf bodies that are not the message: random bytes, a field that claims more bytes than follow, a
/// message nested far deeper than any decoder should follow, a body past the server's size limit.
fn malformed_bodies(rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    let mut huge_length = Vec::new();
    encode_key(2, WireType::LengthDelimited, &mut huge_length);
    encode_varint(u32::MAX as u64, &mut huge_length);
    huge_length.extend_from_slice(b"short");

    let mut nested = Vec::new();
    for _ in 0..5_000 {
        let mut outer = Vec::new();
        bytes_field(2, &nested, &mut outer);
        nested = outer;
    }

    let mut truncated_key = Vec::new();
    truncated_key.extend_from_slice(&[0xff, 0xff, 0xff]);

    let mut wrong_wire_type = Vec::new();
    encode_key(1, WireType::Varint, &mut wrong_wire_type);
    encode_varint(7, &mut wrong_wire_type);
    encode_key(2, WireType::SixtyFourBit, &mut wrong_wire_type);
    wrong_wire_type.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);

    vec![
        ("random bytes", rng.bytes(256)),
        ("random bytes", rng.bytes(4096)),
        ("a length past the end", huge_length),
        ("5,000 nested messages", nested),
        ("a truncated varint key", truncated_key),
        ("known fields with the wrong wire types", wrong_wire_type),
        ("5 MiB, over the message size limit", vec![0x0a; 5 << 20]),
    ]
}

/// msgpack's unknown value (extension 0), sent only where the protocol requires a known one.
const UNKNOWN: &str = "an unknown value";

/// DynamicValue payloads that are msgpack of the wrong kind (an empty one is not among them: the protocol reads it
/// as null, which every field here may be): truncated, the wrong type, a length the bytes do
/// not have, an unknown value where a known one is needed, nesting no schema has, random bytes.
fn hostile_values(rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    let mut deep = vec![0x91; 100_000]; // fixarray of one element, 100,000 deep
    deep.push(0xc0);
    vec![
        ("a truncated map", vec![0x85, 0xa1, b'a']),
        (
            "a string where an object belongs",
            vec![0xa3, b'a', b'b', b'c'],
        ),
        (
            "a str32 claiming 4 GiB",
            vec![0xdb, 0xff, 0xff, 0xff, 0xff, b'x'],
        ),
        (
            "an array32 claiming 4 billion items",
            vec![0xdd, 0xff, 0xff, 0xff, 0xff],
        ),
        (UNKNOWN, vec![0xd4, 0x00, 0x00]),
        ("100,000 nested arrays", deep),
        ("a map with an integer key", vec![0x81, 0x01, 0xc0]),
        ("random bytes", rng.bytes(512)),
    ]
}

/// The diagnostics at field `tag` of a response, decoded without our generated code (wire numbers only).
fn diagnostics_at(mut bytes: &[u8], tag: u32) -> Vec<support::Diagnostic> {
    let mut found = Vec::new();
    while bytes.has_remaining() {
        let (field, wire) = decode_key(&mut bytes).expect("a response the client can read");
        if field == tag && wire == WireType::LengthDelimited {
            let len = decode_varint(&mut bytes).unwrap() as usize;
            found.push(support::Diagnostic::decode(&bytes[..len]).expect("a diagnostic"));
            bytes.advance(len);
        } else {
            prost::encoding::skip_field(wire, field, &mut bytes, Default::default())
                .expect("a well-formed response");
        }
    }
    found
}

/// How each RPC that takes a value carries it: the request's fields and where its response says what was wrong.
struct ValueRpc {
    rpc: &'static str,
    /// Field numbers of the request's DynamicValue fields that get the hostile value.
    value_fields: &'static [u32],
    /// The value fields the protocol requires to be wholly known (prior and config at apply, a stored state):
    /// only these get an unknown value, which is legitimate in a plan's config.
    known: &'static [u32],
    /// Whether field 1 is the type name.
    typed: bool,
    /// Field number of the response's diagnostics.
    diagnostics: u32,
}

const VALUE_RPCS: &[ValueRpc] = &[
    ValueRpc {
        rpc: "ValidateResourceConfig",
        value_fields: &[2],
        known: &[],
        typed: true,
        diagnostics: 1,
    },
    ValueRpc {
        rpc: "ValidateDataResourceConfig",
        value_fields: &[2],
        known: &[],
        typed: true,
        diagnostics: 1,
    },
    ValueRpc {
        rpc: "ValidateEphemeralResourceConfig",
        value_fields: &[2],
        known: &[],
        typed: true,
        diagnostics: 1,
    },
    ValueRpc {
        rpc: "PlanResourceChange",
        value_fields: &[2, 3, 4],
        known: &[],
        typed: true,
        diagnostics: 4,
    },
    ValueRpc {
        rpc: "ApplyResourceChange",
        value_fields: &[2, 3, 4],
        known: &[2, 4],
        typed: true,
        diagnostics: 3,
    },
    ValueRpc {
        rpc: "ReadResource",
        value_fields: &[2],
        known: &[2],
        typed: true,
        diagnostics: 2,
    },
    ValueRpc {
        rpc: "ReadDataSource",
        value_fields: &[2],
        known: &[],
        typed: true,
        diagnostics: 2,
    },
    ValueRpc {
        rpc: "OpenEphemeralResource",
        value_fields: &[2],
        known: &[],
        typed: true,
        diagnostics: 1,
    },
    ValueRpc {
        rpc: "ValidateProviderConfig",
        value_fields: &[1],
        known: &[],
        typed: false,
        diagnostics: 2,
    },
];

struct Harness {
    plugin: Plugin,
    channel: Channel,
}

async fn launch() -> Harness {
    let client = cert::go_plugin_style();
    let plugin = Plugin::launch_binary(
        env!("CARGO_BIN_EXE_terraform-provider-ha").as_ref(),
        Some(&client.pem()),
    );
    let channel = plugin
        .channel(Some(plugin.client_tls(Some(&client))))
        .await
        .expect("connect over mutual TLS");
    Harness { plugin, channel }
}

impl Harness {
    /// The provider is still running, logged no panic, and still answers the schema request.
    async fn still_serving(&mut self, after: &str) {
        assert!(
            self.plugin.child.try_wait().unwrap().is_none(),
            "the provider exited after {after}:\n{}",
            self.plugin.stderr()
        );
        let stderr = self.plugin.stderr();
        assert!(
            !stderr.contains("panicked"),
            "the provider panicked after {after}:\n{stderr}"
        );
        match call_unary(&self.channel, "GetProviderSchema", Vec::new()).await {
            Answer::Message(bytes) => assert!(!bytes.is_empty(), "an empty schema after {after}"),
            Answer::Status(s) => panic!("the schema is no longer served after {after}: {s}"),
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn bytes_that_are_not_the_message_get_a_grpc_error_on_every_rpc() {
    runtime().block_on(async {
        let mut rng = Rng::from_env();
        let mut h = launch().await;
        let mut answered = 0;
        for rpc in UNARY.iter().chain(STREAMING) {
            for (what, body) in malformed_bodies(&mut rng) {
                let answer = if STREAMING.contains(rpc) {
                    call_streaming(&h.channel, rpc, body).await
                } else {
                    call_unary(&h.channel, rpc, body).await
                };
                // Bytes that do not decode are refused by the server; a few bodies do decode (random bytes can
                // be a valid message of unknown fields) and then get an ordinary answer. Either is an answer.
                // tonic answers a body it cannot decode with INTERNAL "failed to decode Protobuf message"; any
                // other INTERNAL or UNKNOWN (a reset stream, a handler that died) is a crash, not a refusal.
                if let Answer::Status(s) = &answer {
                    let refused = match s.code() {
                        tonic::Code::Internal => s.message().starts_with("failed to decode"),
                        tonic::Code::Unknown => false,
                        _ => true,
                    };
                    assert!(refused, "{rpc} with {what}: {s} is not a refusal");
                }
                answered += 1;
            }
            h.still_serving(rpc).await;
        }
        eprintln!("hostile input: {answered} malformed bodies answered, no panic, no hang");
    });
}

#[test]
fn values_of_the_wrong_shape_get_an_error_diagnostic_on_every_rpc_that_takes_one() {
    runtime().block_on(async {
        let mut rng = Rng::from_env();
        let mut h = launch().await;
        let mut answered = 0;
        for spec in VALUE_RPCS {
            let names: &[&str] = if spec.typed { TYPE_NAMES } else { &[""] };
            for type_name in names {
                for (what, value) in hostile_values(&mut rng) {
                    for &field in spec.value_fields {
                        if what == UNKNOWN && !spec.known.contains(&field) {
                            continue;
                        }
                        let mut body = Vec::new();
                        if spec.typed {
                            string_field(1, type_name, &mut body);
                        }
                        bytes_field(field, &dynamic_value(&value), &mut body);
                        let case = format!("{} {type_name} with {what} in field {field}", spec.rpc);
                        match call_unary(&h.channel, spec.rpc, body).await {
                            Answer::Status(s) => {
                                panic!("{case}: a gRPC error ({s}), not a diagnostic")
                            }
                            Answer::Message(bytes) => {
                                let diags = diagnostics_at(&bytes, spec.diagnostics);
                                assert!(
                                    diags
                                        .iter()
                                        .any(|d| d.severity == 1 && !d.summary.is_empty()),
                                    "{case}: no error diagnostic in the answer: {diags:?}"
                                );
                            }
                        }
                        answered += 1;
                    }
                }
            }
            h.still_serving(spec.rpc).await;
        }
        // Functions answer with a FunctionError (field 2 of the response), not diagnostics.
        for (what, value) in hostile_values(&mut rng) {
            if what == UNKNOWN {
                // An unknown argument is legitimate: a function called at plan time answers unknown.
                continue;
            }
            for name in ["", "no_such_function", "quorum", "fault_tolerance"] {
                let mut body = Vec::new();
                string_field(1, name, &mut body);
                bytes_field(2, &dynamic_value(&value), &mut body);
                match call_unary(&h.channel, "CallFunction", body).await {
                    Answer::Status(s) => panic!("CallFunction {name:?} with {what}: {s}"),
                    Answer::Message(bytes) => {
                        let error = support::FunctionErrorResponse::decode(bytes.as_slice())
                            .expect("a CallFunction response");
                        assert!(
                            error.error.is_some_and(|e| !e.text.is_empty()),
                            "CallFunction {name:?} with {what}: no function error"
                        );
                    }
                }
                answered += 1;
            }
        }
        h.still_serving("CallFunction").await;
        eprintln!(
            "hostile input: {answered} hostile values answered with an error, no panic, no hang"
        );
    });
}
