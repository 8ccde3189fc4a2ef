//! Real ALB events (tests/fixtures/*.json: single- and multi-value header shapes, base64
//! gRPC-web bodies, health checks) through the stacks the functions build, over the
//! embedded stores, and back out as the ALB's JSON — the whole lambda_http path that
//! `lambda_http::run` takes, minus the runtime API.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::Response;
use lambda_http::request::LambdaRequest;
use lambda_http::{Adapter, Body, Context, LambdaEvent};
use prost::Message;
use serde_json::Value;
use tonic::service::Routes;
use tower::{Service, ServiceExt};
use wisp_lambda::limits::ALB_MAX_RESPONSE_JSON;
use wisp_lambda::stack;
use wisp_proto::model;
use wisp_proto::pipedservice::{GetApplicationSharedObjectResponse, ListUnhandledCommandsResponse};
use wisp_services::auth_source::StoreKeySource;
use wisp_store::stores::Stores;
use wisp_transport::api::ApiGrpc;
use wisp_transport::piped::PipedGrpc;

const PROJECT: &str = "fixture-project";
const PIPED: &str = "fixture-piped";
const PIPED_KEY: &str = "fixture-piped-key-0123456789";
const API_KEY_ID: &str = "fixture-api-key";
const API_KEY: &str = "fixture-api-key.fixture-api-secret-0123456789";
const APP: &str = "fixture-app";

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

struct Env {
    _dir: wisp_testkit::TempStores,
    stores: Stores,
}

impl Env {
    async fn new() -> Env {
        let dir = wisp_testkit::TempStores::new();
        let stores = dir.stores.clone();
        stores
            .pipeds
            .create(wisp_testkit::fixtures::piped_with_key(
                PROJECT, PIPED, PIPED_KEY,
            ))
            .await
            .expect("create piped");
        stores
            .applications
            .create(model::Application {
                id: APP.into(),
                name: "fixture-app".into(),
                piped_id: PIPED.into(),
                project_id: PROJECT.into(),
                git_path: Some(model::ApplicationGitPath {
                    repo: Some(model::ApplicationGitRepository {
                        id: "repo".into(),
                        ..Default::default()
                    }),
                    path: "apps/fixture".into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .expect("create application");
        stores
            .api_keys
            .create(model::ApiKey {
                id: API_KEY_ID.into(),
                name: "ci".into(),
                key_hash: wisp_auth::keys::hash_secret_with_cost(
                    API_KEY,
                    wisp_auth::keys::MIN_COST,
                )
                .expect("hash"),
                project_id: PROJECT.into(),
                role: model::api_key::Role::ReadWrite as i32,
                creator: "test".into(),
                ..Default::default()
            })
            .await
            .expect("create API key");
        Env { _dir: dir, stores }
    }

    fn key_source(&self) -> StoreKeySource {
        // The project is defined in the configuration, as on AWS.
        StoreKeySource::new(self.stores.clone(), [PROJECT.to_string()])
    }

    /// What functions/piped-api builds.
    fn piped_stack(&self) -> stack::GrpcStack {
        let verifier = Arc::new(wisp_auth::PipedVerifier::new(self.key_source()));
        let api = Arc::new(wisp_services::piped::PipedApi::new(
            self.stores.clone(),
            String::new(),
        ));
        stack::grpc(Routes::new(PipedGrpc::new(api, verifier).into_server()))
    }

    /// What functions/api builds.
    fn api_stack(&self) -> stack::GrpcStack {
        let verifier = Arc::new(wisp_auth::ApiKeyVerifier::new(self.key_source()));
        let api = Arc::new(wisp_services::api::ApiApi::new(
            self.stores.clone(),
            String::new(),
        ));
        stack::grpc(Routes::new(ApiGrpc::new(api, verifier).into_server()))
    }
}

/// The ALB's view of a response.
#[derive(Debug)]
struct AlbResponse {
    status: u64,
    headers: HashMap<String, String>,
    body: Vec<u8>,
    json_len: usize,
}

impl AlbResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// gRPC status and message: from the trailer frame, or from the headers of a
    /// trailers-only response.
    fn grpc_status(&self) -> (String, String) {
        let trailers = match grpc_web_frames(&self.body)
            .into_iter()
            .find(|(flags, _)| flags & 0x80 != 0)
        {
            Some((_, block)) => parse_trailer_block(&block),
            None => self.headers.clone(),
        };
        (
            trailers.get("grpc-status").cloned().unwrap_or_default(),
            percent_decode(
                trailers
                    .get("grpc-message")
                    .map(String::as_str)
                    .unwrap_or(""),
            ),
        )
    }

    fn message<M: Message + Default>(&self) -> M {
        let (flags, payload) = grpc_web_frames(&self.body)
            .into_iter()
            .find(|(flags, _)| flags & 0x80 == 0)
            .expect("a message frame");
        assert_eq!(flags, 0, "uncompressed message");
        M::decode(payload.as_slice()).expect("decode message")
    }
}

/// Feeds the event to `stack` the way `lambda_http::run` does and returns what goes
/// back to the ALB.
async fn invoke<S>(stack: S, event: &str) -> AlbResponse
where
    S: Service<lambda_http::Request, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    let request: LambdaRequest = serde_json::from_str(event).expect("an ALB event");
    let mut adapter = Adapter::from(stack);
    let response = adapter
        .ready()
        .await
        .expect("ready")
        .call(LambdaEvent::new(request, Context::default()))
        .await
        .expect("infallible");
    let json = serde_json::to_string(&response).expect("serialise");
    let value: Value = serde_json::from_str(&json).expect("JSON");
    let mut headers = HashMap::new();
    if let Some(map) = value["headers"].as_object() {
        for (k, v) in map {
            headers.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
    }
    // Both shapes carry the same headers (either target-group setting works).
    let multi = value["multiValueHeaders"]
        .as_object()
        .expect("multiValueHeaders");
    for (k, v) in multi {
        assert_eq!(v[0].as_str(), headers.get(k).map(String::as_str), "{k}");
    }
    let body = match value["body"].as_str() {
        Some(text) if value["isBase64Encoded"] == Value::Bool(true) => {
            STANDARD.decode(text).expect("base64 body")
        }
        Some(text) => text.as_bytes().to_vec(),
        None => Vec::new(),
    };
    AlbResponse {
        status: value["statusCode"].as_u64().expect("statusCode"),
        headers,
        body,
        json_len: json.len(),
    }
}

fn grpc_web_frames(body: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 5 <= body.len() {
        let len =
            u32::from_be_bytes([body[at + 1], body[at + 2], body[at + 3], body[at + 4]]) as usize;
        frames.push((body[at], body[at + 5..at + 5 + len].to_vec()));
        at += 5 + len;
    }
    assert_eq!(at, body.len(), "whole frames");
    frames
}

fn parse_trailer_block(block: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(block)
        .split("\r\n")
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn unhandled_command(id: &str) -> model::Command {
    model::Command {
        id: id.into(),
        piped_id: PIPED.into(),
        application_id: APP.into(),
        project_id: PROJECT.into(),
        commander: "tester".into(),
        r#type: model::command::Type::SyncApplication as i32,
        sync_application: Some(model::command::SyncApplication {
            application_id: APP.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn alb_health_checks_get_200_on_any_path() {
    let env = Env::new().await;
    for name in ["health-check.json", "health-check-multi-value.json"] {
        let response = invoke(env.piped_stack(), &fixture(name)).await;
        assert_eq!(response.status, 200, "{name}");
        assert_eq!(response.body, b"ok", "{name}");
        let response = invoke(stack::http(), &fixture(name)).await;
        assert_eq!(response.status, 200, "{name}");
    }
    // A plain GET /healthz (not the ALB's checker) is the edge's.
    let response = invoke(stack::http(), &fixture("healthz-get.json")).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"ok");
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // The HTTP function serves nothing else yet.
    let other = fixture("healthz-get.json").replace("\"/healthz\"", "\"/console/index.html\"");
    assert_eq!(invoke(stack::http(), &other).await.status, 404);
}

#[tokio::test]
async fn grpc_web_call_with_single_value_headers() {
    let env = Env::new().await;
    env.stores
        .commands
        .create(unhandled_command("cmd-1"))
        .await
        .expect("command");
    let response = invoke(
        env.piped_stack(),
        &fixture("piped-list-unhandled-commands.json"),
    )
    .await;
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("application/grpc-web+proto")
    );
    assert_eq!(response.grpc_status(), ("0".into(), String::new()));
    let list: ListUnhandledCommandsResponse = response.message();
    assert_eq!(
        list.commands
            .iter()
            .map(|c| c.id.as_str())
            .collect::<Vec<_>>(),
        ["cmd-1"]
    );
}

#[tokio::test]
async fn multi_value_headers_and_the_legacy_path() {
    let env = Env::new().await;
    let event = fixture("piped-list-unhandled-commands-legacy-multi-value.json");
    // lambda_http keeps every value of a repeated header.
    let request = lambda_http::request::from_str(&event).expect("ALB event");
    assert_eq!(
        request.headers().get_all("x-forwarded-for").iter().count(),
        2
    );
    assert!(request.uri().path().starts_with("/pipe.api.service."));

    env.stores
        .commands
        .create(unhandled_command("cmd-2"))
        .await
        .expect("command");
    let response = invoke(env.piped_stack(), &event).await;
    assert_eq!(response.grpc_status(), ("0".into(), String::new()));
    let list: ListUnhandledCommandsResponse = response.message();
    assert_eq!(list.commands.len(), 1);
}

#[tokio::test]
async fn bad_credentials_are_unauthenticated_as_a_trailers_only_response() {
    let env = Env::new().await;
    let event = fixture("piped-list-unhandled-commands.json").replace(PIPED_KEY, "wrong-key");
    let response = invoke(env.piped_stack(), &event).await;
    assert_eq!(response.status, 200);
    assert!(response.body.is_empty(), "trailers-only");
    assert_eq!(response.header("grpc-status"), Some("16"));
    // The API-key function refuses a piped token.
    let response = invoke(
        env.api_stack(),
        &fixture("piped-list-unhandled-commands.json"),
    )
    .await;
    assert_ne!(response.grpc_status().0, "0");
}

#[tokio::test]
async fn api_key_call_through_the_api_function() {
    let env = Env::new().await;
    let response = invoke(
        env.api_stack(),
        &fixture("api-list-applications-multi-value.json"),
    )
    .await;
    assert_eq!(response.grpc_status(), ("0".into(), String::new()));
    let list: wisp_proto::apiservice::ListApplicationsResponse = response.message();
    assert_eq!(
        list.applications
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        [APP]
    );
    // Wrong secret.
    let event = fixture("api-list-applications-multi-value.json")
        .replace("fixture-api-secret", "guessed-secret");
    let response = invoke(env.api_stack(), &event).await;
    assert_eq!(response.header("grpc-status"), Some("16"));
}

#[tokio::test]
async fn gzip_compressed_requests_are_accepted() {
    let env = Env::new().await;
    let response = invoke(env.piped_stack(), &fixture("piped-report-stat-gzip.json")).await;
    assert_eq!(response.grpc_status(), ("0".into(), String::new()));
    let stat = env
        .stores
        .piped_stats
        .get(PIPED)
        .await
        .expect("get stat")
        .expect("stored");
    assert_eq!(stat.metrics, b"piped_build_info{version=\"v0.50.0\"} 1\n");
}

#[tokio::test]
async fn responses_over_the_alb_limit_are_resource_exhausted() {
    let env = Env::new().await;
    let event = fixture("piped-get-shared-object.json");

    // 700 kB: 933 kB once base64-encoded, so the ALB's JSON still fits.
    let fits = vec![0x5au8; 700_000];
    env.stores
        .shared_objects
        .put(APP, "fixture-plugin", "big", fits.clone())
        .await
        .expect("put object");
    let response = invoke(env.piped_stack(), &event).await;
    assert_eq!(response.grpc_status(), ("0".into(), String::new()));
    assert!(
        response.json_len <= ALB_MAX_RESPONSE_JSON,
        "{}",
        response.json_len
    );
    let got: GetApplicationSharedObjectResponse = response.message();
    assert_eq!(got.object, fits);

    // 760 kB: under 1 MB raw, over it once base64-encoded.
    env.stores
        .shared_objects
        .put(APP, "fixture-plugin", "big", vec![0x5au8; 760_000])
        .await
        .expect("put object");
    let response = invoke(env.piped_stack(), &event).await;
    assert_eq!(response.status, 200);
    assert!(response.body.is_empty(), "trailers-only");
    assert_eq!(
        response.header("content-type"),
        Some("application/grpc-web+proto")
    );
    let (code, message) = response.grpc_status();
    assert_eq!(code, "8", "RESOURCE_EXHAUSTED");
    assert!(
        message.contains("exceeds the load balancer's 1 MB limit"),
        "{message}"
    );
    assert!(message.contains("request less per call"), "{message}");
}

#[tokio::test]
async fn requests_over_the_alb_limit_are_resource_exhausted() {
    let env = Env::new().await;
    let mut event: Value =
        serde_json::from_str(&fixture("piped-list-unhandled-commands.json")).expect("JSON");
    let payload = vec![0u8; 1_000_100];
    let mut frame = vec![0u8];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    event["body"] = Value::String(STANDARD.encode(&frame));
    let response = invoke(env.piped_stack(), &event.to_string()).await;
    assert!(response.body.is_empty(), "trailers-only");
    let (code, message) = response.grpc_status();
    assert_eq!(code, "8", "RESOURCE_EXHAUSTED");
    assert!(
        message.contains("request body of 1000105 bytes"),
        "{message}"
    );
    assert!(message.contains("grpc-encoding: gzip"), "{message}");
}

/// Whatever the load balancer hands over — any method, path, headers, body, base64 or
/// not, gzip or not, with or without a valid piped key — the piped-api stack answers
/// without a server error: a 5xx (or a gRPC UNKNOWN, INTERNAL or DATA_LOSS) for input
/// from the network fails the test. Well-formed calls among the hostile events (a valid
/// key and a valid, possibly gzip-compressed ReportStat) succeed and are stored.
#[test]
fn any_alb_event_gets_an_answer() {
    use proptest::prelude::*;
    use wisp_reach::Reach;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let env = rt.block_on(Env::new());
    let stack = env.piped_stack();

    let rpcs: Vec<String> = wisp_transport::limits::PIPED
        .methods
        .iter()
        .map(|(m, _, _)| format!("/grpc.service.pipedservice.PipedService/{m}"))
        .collect();
    let path = prop_oneof![
        4 => proptest::sample::select(rpcs),
        1 => "/[ -~]{0,40}",
        1 => Just("/healthz".to_string()),
    ];
    let frame = |flag: u8, payload: Vec<u8>| {
        let mut out = vec![flag];
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend(payload);
        out
    };
    let gzip = |data: &[u8]| {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(data).expect("gzip");
        gz.finish().expect("gzip")
    };
    let body = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(move |p| frame(0, p)),
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(move |p| frame(1, gzip(&p))),
    ];
    let authorization = prop_oneof![
        Just(format!("PIPED-TOKEN {PROJECT},{PIPED},{PIPED_KEY}")),
        Just(format!("PIPED-TOKEN {PROJECT},{PIPED},wrong")),
        "[ -~]{0,60}",
    ];
    let content_type = prop_oneof![
        Just("application/grpc-web+proto".to_string()),
        Just("application/grpc-web-text".to_string()),
        Just("application/grpc".to_string()),
        "[ -~]{0,30}",
    ];
    let encoding = prop_oneof![
        Just(None),
        Just(Some("gzip".to_string())),
        Just(Some("identity".to_string())),
        "[a-z]{0,8}".prop_map(Some),
    ];
    // Hostile extra headers an ALB passes on.
    let extra = proptest::collection::vec(("x-[a-z-]{1,12}", "[ -~]{0,40}"), 0..3);
    let event_json = |method: &str,
                      path: &str,
                      body: &[u8],
                      base64: bool,
                      headers: serde_json::Value| {
        let body = if base64 {
            STANDARD.encode(body)
        } else {
            String::from_utf8_lossy(body).into_owned()
        };
        serde_json::json!({
            "requestContext": {"elb": {"targetGroupArn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/wisp/0123456789abcdef"}},
            "httpMethod": method,
            "path": path,
            "queryStringParameters": {},
            "headers": headers,
            "body": body,
            "isBase64Encoded": base64,
        })
        .to_string()
    };
    let hostile = (
        prop_oneof![Just("POST"), Just("GET"), Just("PUT"), Just("OPTIONS")],
        path,
        body,
        any::<bool>(),
        authorization,
        content_type,
        encoding,
        extra.clone(),
    )
        .prop_map(
            move |(method, path, body, base64, auth, ctype, enc, extra)| {
                let mut headers = serde_json::json!({
                    "content-type": ctype,
                    "authorization": auth,
                    "user-agent": "grpc-web-javascript/0.1",
                });
                if let Some(map) = headers.as_object_mut() {
                    if let Some(enc) = enc {
                        map.insert("grpc-encoding".into(), Value::String(enc));
                    }
                    for (k, v) in extra {
                        map.insert(k, Value::String(v));
                    }
                }
                (None, event_json(method, &path, &body, base64, headers))
            },
        );
    // A valid ReportStat, plain or gzip, among hostile extra headers.
    let valid = ("([a-z_]{1,12} [0-9]{1,4}\n){1,8}", any::<bool>(), extra).prop_map(
        move |(stats, gzipped, extra)| {
            let message = wisp_proto::pipedservice::ReportStatRequest {
                piped_stats: stats.clone().into_bytes(),
            }
            .encode_to_vec();
            let body = if gzipped {
                frame(1, gzip(&message))
            } else {
                frame(0, message)
            };
            let mut headers = serde_json::json!({
                "content-type": "application/grpc-web+proto",
                "authorization": format!("PIPED-TOKEN {PROJECT},{PIPED},{PIPED_KEY}"),
                "x-grpc-web": "1",
            });
            if let Some(map) = headers.as_object_mut() {
                if gzipped {
                    map.insert("grpc-encoding".into(), Value::String("gzip".into()));
                }
                for (k, v) in extra {
                    map.insert(k, Value::String(v));
                }
            }
            let path = "/grpc.service.pipedservice.PipedService/ReportStat";
            (Some(stats), event_json("POST", path, &body, true, headers))
        },
    );
    let events = prop_oneof![3 => hostile, 1 => valid];

    Reach::new("lambda: ALB events", file!())
        .at_least("valid call: OK and stored", 0.1)
        .at_least("gRPC call: refused with a client-error code", 0.04)
        .in_all_at_least(1.0)
        .run(events, |(stats, event)| {
            let response = rt.block_on(invoke(stack.clone(), &event));
            prop_assert!(
                (200..500).contains(&response.status),
                "a server error for input from the network: {:?}",
                response
            );
            let grpc = response
                .header("content-type")
                .is_some_and(|t| t.starts_with("application/grpc"));
            if let Some(stats) = stats {
                prop_assert_eq!(response.grpc_status(), ("0".into(), String::new()));
                let stored = rt
                    .block_on(env.stores.piped_stats.get(PIPED))
                    .expect("get stat")
                    .expect("stored");
                prop_assert_eq!(stored.metrics, stats.into_bytes());
                return Ok(Some("valid call: OK and stored"));
            }
            if !grpc {
                return Ok(Some("not gRPC: a 2xx-4xx answer"));
            }
            let (code, message) = response.grpc_status();
            // UNKNOWN, DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS: the server's
            // fault, never the answer to a bad request.
            prop_assert!(
                !["", "2", "4", "13", "14", "15"].contains(&code.as_str()),
                "grpc-status {:?} ({}) for {}",
                code,
                message,
                event
            );
            Ok(Some(if code == "0" {
                "gRPC call: OK"
            } else {
                "gRPC call: refused with a client-error code"
            }))
        });
}
