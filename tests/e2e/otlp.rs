//! `wisp serve --otlp-endpoint` (issue 17): its spans reach an OpenTelemetry collector,
//! here an OTLP/gRPC receiver built from the OpenTelemetry protocol's own definitions.

use crate::support;

use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, span, status};
use support::{QUICKSTART, Server, Via};
use wisp_proto::pipedservice as ps;

/// A span as received, with its resource's attributes.
type Exported = (Vec<KeyValue>, Span);

/// What the collector received.
#[derive(Default, Clone)]
struct Received(Arc<Mutex<Vec<Exported>>>);

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = self.0.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans.resource.unwrap_or_default().attributes;
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    received.push((resource.clone(), span));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Received {
    fn spans(&self) -> Vec<Exported> {
        self.0.lock().unwrap().clone()
    }

    /// Waits (up to a generous minute) until a span named `name` has arrived.
    async fn wait_for(&self, name: &str) -> Span {
        for _ in 0..600 {
            if let Some((_, span)) = self.spans().into_iter().find(|(_, s)| s.name == name) {
                return span;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let names: Vec<String> = self.spans().into_iter().map(|(_, s)| s.name).collect();
        panic!("no span {name} reached the collector; it has {names:?}");
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn string(attributes: &[KeyValue], key: &str) -> Option<String> {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// An OTLP receiver on loopback: what it receives, and its address.
fn collector() -> (Received, std::net::SocketAddr) {
    let received = Received::default();
    let incoming = tonic::transport::server::TcpIncoming::bind(([127, 0, 0, 1], 0).into())
        .expect("bind the collector");
    let addr = incoming.local_addr().expect("collector address");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(received.clone()))
            .serve_with_incoming(incoming),
    );
    (received, addr)
}

/// `wisp serve` exporting to `collector`, its batches sent every `delay_ms`, and a piped
/// registered on it.
/// `wisp piped add` in the quickstart project, as a separate process on `dir`.
fn add_piped(dir: &std::path::Path, name: &str) -> support::Piped {
    let out = support::run_cli(
        dir,
        &[
            "piped",
            "add",
            "--project",
            QUICKSTART,
            "--name",
            name,
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let added: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    support::Piped {
        project: QUICKSTART.to_owned(),
        id: added["id"].as_str().expect("id").to_owned(),
        key: added["key"].as_str().expect("key").to_owned(),
    }
}

fn traced_server(
    dir: &std::path::Path,
    collector: std::net::SocketAddr,
    delay_ms: u32,
) -> (Server, support::Piped) {
    let args: Vec<OsString> = vec![
        "--otlp-endpoint".into(),
        format!("http://{collector}").into(),
    ];
    let env = [(
        "OTEL_BSP_SCHEDULE_DELAY".into(),
        delay_ms.to_string().into(),
    )];
    let server = Server::start_with(dir, &args, &env);
    let piped = add_piped(dir, "traced");
    (server, piped)
}

#[tokio::test]
async fn calls_and_their_store_operations_reach_the_collector() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    // Batches leave every 100 ms instead of every 5 s.
    let (server, piped) = traced_server(dir.path(), collector, 100);

    let mut client = support::connect(server.addr(), Via::Grpc, Some(&piped.authorization())).await;
    client
        .list_applications(ps::ListApplicationsRequest {})
        .await
        .expect("ListApplications");
    let wrong = piped.authorization_with(QUICKSTART, "not-the-key");
    let mut stranger = support::connect(server.addr(), Via::Grpc, Some(&wrong)).await;
    let refused = stranger
        .report_stat(ps::ReportStatRequest::default())
        .await
        .expect_err("a wrong key");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    // A call: a server span named for its method, with gRPC's attributes.
    let call = received.wait_for("PipedService/ListApplications").await;
    assert_eq!(call.kind, span::SpanKind::Server as i32);
    assert_eq!(
        string(&call.attributes, "rpc.system").as_deref(),
        Some("grpc")
    );
    assert_eq!(
        string(&call.attributes, "rpc.method").as_deref(),
        Some("ListApplications")
    );
    assert_eq!(
        attribute(&call.attributes, "rpc.grpc.status_code"),
        Some(&any_value::Value::IntValue(0))
    );
    // Its store operations are its children, in the same trace.
    let spans = received.spans();
    let children: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.trace_id == call.trace_id && s.parent_span_id == call.span_id)
        .collect();
    assert!(
        children
            .iter()
            .any(|s| s.name.starts_with("datastore ") && s.kind == span::SpanKind::Client as i32),
        "no store operation under the call: {:?}",
        children.iter().map(|s| &s.name).collect::<Vec<_>>()
    );

    // A caller's mistake is recorded with its code, and is not the server's error.
    let refused = received.wait_for("PipedService/ReportStat").await;
    assert_eq!(
        attribute(&refused.attributes, "rpc.grpc.status_code"),
        Some(&any_value::Value::IntValue(16))
    );
    let code = refused.status.as_ref().map_or(0, |s| s.code);
    assert_ne!(code, status::StatusCode::Error as i32);

    // The process names itself.
    let (resource, _) = &spans[0];
    assert_eq!(string(resource, "service.name").as_deref(), Some("wisp"));
    assert_eq!(
        string(resource, "service.version").as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn spans_queued_at_shutdown_are_sent_before_the_process_ends() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    // No batch would leave for a minute: only the flush at shutdown sends the call's span.
    let (mut server, piped) = traced_server(dir.path(), collector, 60_000);
    let mut client = support::connect(server.addr(), Via::Grpc, Some(&piped.authorization())).await;
    client
        .list_applications(ps::ListApplicationsRequest {})
        .await
        .expect("ListApplications");
    drop(client);
    let status = server
        .terminate(Duration::from_secs(20))
        .await
        .expect("wisp serve ends on SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(
        received
            .spans()
            .iter()
            .any(|(_, s)| s.name == "PipedService/ListApplications"),
        "the call's span was lost at shutdown"
    );
}

#[test]
fn an_endpoint_that_is_not_a_url_is_refused() {
    let dir = support::empty_data_dir();
    let out = support::run_cli_with(
        dir.path(),
        &["piped", "list", "--project", QUICKSTART],
        &["--otlp-endpoint".into(), "collector:4317".into()],
        &[],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .contains("--otlp-endpoint must be an http:// or https:// URL"),
        "{out:?}"
    );
}

// The pipeds' own spans (issue 32 point 2): `TraceService/Export` on Wisp's address, with
// the piped token, relayed to the collector with the piped's identity.

type TraceClient =
    opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient<
        tonic::service::interceptor::InterceptedService<
            tonic::transport::Channel,
            support::Authorization,
        >,
    >;

/// A TraceService client to `addr` (native gRPC) sending `authorization`.
async fn trace_client(addr: std::net::SocketAddr, authorization: &str) -> TraceClient {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("an address")
        .connect()
        .await
        .expect("connect");
    opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient::with_interceptor(
        channel,
        support::Authorization::new(Some(authorization)),
    )
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    }
}

/// One span named `name` under a resource that claims to be another project's piped.
fn forged_export(name: &str, padding: usize) -> ExportTraceServiceRequest {
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
    let mut attributes = vec![];
    if padding > 0 {
        attributes.push(text("padding", &"x".repeat(padding)));
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text("service.name", "piped"),
                    text("pipecd.project.id", "someone-else"),
                    text("pipecd.piped.id", "not-me"),
                ],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![7; 16],
                    span_id: vec![9; 8],
                    name: name.to_owned(),
                    kind: span::SpanKind::Internal as i32,
                    attributes,
                    ..Span::default()
                }],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

fn names(received: &Received) -> Vec<String> {
    received.spans().into_iter().map(|(_, s)| s.name).collect()
}

/// A piped's export through `addr` reaches the collector with Wisp's identity attributes.
async fn relayed_with_identity(
    addr: std::net::SocketAddr,
    received: &Received,
    piped: &support::Piped,
    authorization: &str,
    name: &str,
) {
    let mut client = trace_client(addr, authorization).await;
    client
        .export(forged_export(name, 0))
        .await
        .expect("the piped's export is accepted");
    // The relay answers once the collector has: the span is there now.
    let (resource, _) = received
        .spans()
        .into_iter()
        .find(|(_, s)| s.name == name)
        .unwrap_or_else(|| {
            panic!(
                "{name} not relayed; the collector has {:?}",
                names(received)
            )
        });
    assert_eq!(
        string(&resource, "pipecd.project.id").as_deref(),
        Some(QUICKSTART)
    );
    assert_eq!(
        string(&resource, "pipecd.piped.id").as_deref(),
        Some(piped.id.as_str())
    );
    assert_eq!(string(&resource, "service.name").as_deref(), Some("piped"));
    let claimed = |key: &str| resource.iter().filter(|kv| kv.key == key).count();
    assert_eq!(claimed("pipecd.project.id"), 1, "the forged value is gone");
    assert_eq!(claimed("pipecd.piped.id"), 1, "the forged value is gone");
}

#[tokio::test]
async fn a_pipeds_spans_reach_the_collector_with_its_identity_and_forgeries_replaced() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    let (server, piped) = traced_server(dir.path(), collector, 100);
    // As PipedService takes it, and as upstream's pipeds send it to the OTLP route.
    relayed_with_identity(
        server.addr(),
        &received,
        &piped,
        &piped.authorization(),
        "piped-span",
    )
    .await;
    let bearer = format!("Bearer {},{},{}", piped.project, piped.id, piped.key);
    relayed_with_identity(server.addr(), &received, &piped, &bearer, "bearer-span").await;

    // Through `wisp bridge` too, as a piped behind the ALB sends them.
    let bridge =
        support::bridge::Bridge::start(&format!("http://{}", server.addr()), dir.path(), &[]);
    relayed_with_identity(bridge.addr(), &received, &piped, &bearer, "bridged-span").await;
}

#[tokio::test]
async fn a_bad_or_revoked_token_is_unauthenticated_and_nothing_is_relayed() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    let (server, piped) = traced_server(dir.path(), collector, 100);

    let wrong = piped.authorization_with(QUICKSTART, "not-the-key");
    let refused = trace_client(server.addr(), &wrong)
        .await
        .export(forged_export("wrong-key-span", 0))
        .await
        .expect_err("a wrong key");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let refused = trace_client(server.addr(), "Bearer nonsense")
        .await
        .export(forged_export("malformed-token-span", 0))
        .await
        .expect_err("a malformed token");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");

    // Accepted while the piped is enabled; refused once it is disabled (by another
    // process: the CLI), within the verifier's revocation check.
    let mut client = trace_client(server.addr(), &piped.authorization()).await;
    client
        .export(forged_export("before-disable", 0))
        .await
        .expect("accepted while enabled");
    let out = support::run_cli(
        dir.path(),
        &["piped", "disable", "--project", QUICKSTART, &piped.id],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let mut refused = None;
    for n in 0..600 {
        match client
            .export(forged_export(&format!("after-disable-{n}"), 0))
            .await
        {
            Err(status) => {
                refused = Some((n, status));
                break;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let (n, status) = refused.expect("the disabled piped's exports are refused within a minute");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    let got = names(&received);
    let last = format!("after-disable-{n}");
    for never in ["wrong-key-span", "malformed-token-span", last.as_str()] {
        assert!(
            !got.iter().any(|g| g == never),
            "{never} was relayed: {got:?}"
        );
    }
    assert!(got.iter().any(|g| g == "before-disable"), "{got:?}");
}

#[tokio::test]
async fn an_oversized_export_is_refused_naming_wisps_limit() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    let (server, piped) = traced_server(dir.path(), collector, 100);
    let mut client = trace_client(server.addr(), &piped.authorization()).await;
    let refused = client
        .export(forged_export("too-big", 5 * 1024 * 1024))
        .await
        .expect_err("over the bound");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused
            .message()
            .contains("Export accepts at most 4194304 bytes"),
        "{refused:?}"
    );
    assert!(!names(&received).iter().any(|n| n == "too-big"));
}

#[tokio::test]
async fn without_an_endpoint_a_pipeds_spans_are_answered_ok_and_dropped() {
    let dir = support::empty_data_dir();
    let server = Server::start(dir.path());
    let authorization = add_piped(dir.path(), "p").authorization();
    trace_client(server.addr(), &authorization)
        .await
        .export(forged_export("dropped", 0))
        .await
        .expect("OK without a collector");
    // Still authenticated: a wrong key is refused, not dropped.
    let refused = trace_client(server.addr(), &format!("PIPED-TOKEN {QUICKSTART},x,y"))
        .await
        .export(forged_export("dropped", 0))
        .await
        .expect_err("a wrong key");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
}

#[tokio::test]
async fn a_call_that_names_a_deployment_carries_its_id() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    let (server, piped) = traced_server(dir.path(), collector, 100);
    let mut client = support::connect(server.addr(), Via::Grpc, Some(&piped.authorization())).await;
    // Not found, and still the call's span names what was asked for.
    let _ = client
        .get_deployment(ps::GetDeploymentRequest {
            id: "dep-traced".to_owned(),
        })
        .await;
    client
        .list_applications(ps::ListApplicationsRequest {})
        .await
        .expect("ListApplications");
    let call = received.wait_for("PipedService/GetDeployment").await;
    assert_eq!(
        string(&call.attributes, "pipecd.deployment.id").as_deref(),
        Some("dep-traced")
    );
    let other = received.wait_for("PipedService/ListApplications").await;
    assert_eq!(string(&other.attributes, "pipecd.deployment.id"), None);
}

/// The serverless path: a piped's spans through `wisp bridge`, the ALB emulator (its route
/// to the piped-api function) and the function, relayed to the collector
/// `WISP_OTLP_ENDPOINT` names; a wrong key refused there as on `wisp serve`.
#[tokio::test]
async fn a_pipeds_spans_reach_the_collector_through_the_alb_and_the_piped_api_function() {
    let (received, collector) = collector();
    let env = support::lambda::FunctionEnv::from([(
        "wisp-piped-api",
        vec![(
            "WISP_OTLP_ENDPOINT".to_string(),
            Some(format!("http://{collector}")),
        )],
    )]);
    let Some(wisp) = support::Wisp::start_lambda_with(
        "a_pipeds_spans_reach_the_collector_through_the_alb_and_the_piped_api_function",
        &env,
    ) else {
        return;
    };
    let piped = wisp.add_piped(QUICKSTART, "traced-lambda");
    let bearer = format!("Bearer {},{},{}", piped.project, piped.id, piped.key);
    relayed_with_identity(
        wisp.bridge().addr(),
        &received,
        &piped,
        &bearer,
        "lambda-span",
    )
    .await;
    let wrong = piped.authorization_with(QUICKSTART, "not-the-key");
    let refused = trace_client(wisp.bridge().addr(), &wrong)
        .await
        .export(forged_export("lambda-wrong-key", 0))
        .await
        .expect_err("a wrong key");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(!names(&received).iter().any(|n| n == "lambda-wrong-key"));
}

// OTLP/HTTP (issue 32 point 2): `POST /v1/traces` with a protobuf body, as OpenTelemetry
// SDKs' HTTP exporters send it, admitted, bounded, rated, stamped and relayed as the
// gRPC export is.

/// `google.rpc.Status`, the body of OTLP/HTTP's error answers.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

fn encoded(export: &ExportTraceServiceRequest) -> Vec<u8> {
    prost::Message::encode_to_vec(export)
}

fn gzipped(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

/// `size` bytes of zeros, gzipped (a bomb: about a thousandth of its size).
fn gzip_bomb(size: usize) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..size / zeros.len() {
        enc.write_all(&zeros).expect("gzip");
    }
    enc.finish().expect("gzip")
}

/// `POST /v1/traces` over HTTP/1.1, as the SDKs' exporters send it.
async fn post_traces(
    addr: std::net::SocketAddr,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> support::RawResponse {
    support::http_post_to(addr, "/v1/traces", headers, body).await
}

/// The same over HTTP/2 (prior knowledge): the server may answer before it has read
/// the whole body, which HTTP/2 carries cleanly (a stream reset, not a closed
/// connection under a request still being written).
async fn post_traces_h2(
    addr: std::net::SocketAddr,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (http::StatusCode, http::HeaderMap, Vec<u8>) {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut req = http::Request::builder()
        .method(http::Method::POST)
        .uri(format!("http://{addr}/v1/traces"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req
        .body(http_body_util::Full::new(tonic::codegen::Bytes::from(body)))
        .expect("a request");
    let resp = sender.send_request(req).await.expect("an answer");
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    (parts.status, parts.headers, body)
}

const PROTOBUF: (&str, &str) = ("content-type", "application/x-protobuf");

/// The answer is OTLP/HTTP's error: `status`, a protobuf `google.rpc.Status` body.
fn assert_refused(resp: &support::RawResponse, status: http::StatusCode) -> RpcStatus {
    assert_eq!(resp.status, status, "{resp:?}");
    assert_eq!(
        resp.headers.get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/x-protobuf"[..]),
        "{resp:?}"
    );
    prost::Message::decode(&resp.body[..]).expect("a google.rpc.Status body")
}

/// A piped's spans posted to `addr` as OTLP/HTTP (plain and gzipped) reach the collector
/// with Wisp's identity attributes; the answer is a protobuf `ExportTraceServiceResponse`.
async fn http_relayed_with_identity(
    addr: std::net::SocketAddr,
    received: &Received,
    piped: &support::Piped,
    name: &str,
) {
    let bearer = format!("Bearer {},{},{}", piped.project, piped.id, piped.key);
    let plain = post_traces(
        addr,
        &[PROTOBUF, ("authorization", &bearer)],
        encoded(&forged_export(&format!("{name}-plain"), 0)),
    )
    .await;
    assert_eq!(plain.status, http::StatusCode::OK, "{plain:?}");
    assert_eq!(
        plain.headers.get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/x-protobuf"[..])
    );
    let answer: ExportTraceServiceResponse =
        prost::Message::decode(&plain.body[..]).expect("an ExportTraceServiceResponse");
    assert_eq!(answer.partial_success, None);
    let authorization = piped.authorization();
    let gzip = post_traces(
        addr,
        &[
            PROTOBUF,
            ("content-encoding", "gzip"),
            ("authorization", &authorization),
        ],
        gzipped(&encoded(&forged_export(&format!("{name}-gzip"), 0))),
    )
    .await;
    assert_eq!(gzip.status, http::StatusCode::OK, "{gzip:?}");
    for sent in [format!("{name}-plain"), format!("{name}-gzip")] {
        let (resource, _) = received
            .spans()
            .into_iter()
            .find(|(_, s)| s.name == sent)
            .unwrap_or_else(|| {
                panic!(
                    "{sent} not relayed; the collector has {:?}",
                    names(received)
                )
            });
        assert_eq!(
            string(&resource, "pipecd.project.id").as_deref(),
            Some(QUICKSTART)
        );
        assert_eq!(
            string(&resource, "pipecd.piped.id").as_deref(),
            Some(piped.id.as_str())
        );
        let claimed = |key: &str| resource.iter().filter(|kv| kv.key == key).count();
        assert_eq!(claimed("pipecd.piped.id"), 1, "the forged value is gone");
    }
}

/// The refusals OTLP/HTTP names, each before anything is relayed: 401 without a token or
/// with a wrong one, 400 for a body that is not the message, 415 for JSON or another
/// encoding, 405 for another method, 413 for a gzip bomb (refused once the inflated
/// bytes pass the bound, not inflated whole).
async fn http_refusals(addr: std::net::SocketAddr, received: &Received, piped: &support::Piped) {
    let bearer = format!("Bearer {},{},{}", piped.project, piped.id, piped.key);
    let export = encoded(&forged_export("http-refused", 0));
    let missing = post_traces(addr, &[PROTOBUF], export.clone()).await;
    let status = assert_refused(&missing, http::StatusCode::UNAUTHORIZED);
    assert_eq!(
        status.code,
        tonic::Code::Unauthenticated as i32,
        "{status:?}"
    );
    let wrong = piped.authorization_with(QUICKSTART, "not-the-key");
    let wrong = post_traces(addr, &[PROTOBUF, ("authorization", &wrong)], export.clone()).await;
    assert_refused(&wrong, http::StatusCode::UNAUTHORIZED);

    let garbage = post_traces(
        addr,
        &[PROTOBUF, ("authorization", &bearer)],
        vec![0xff, 0xff, 0xff, 0xff],
    )
    .await;
    assert_refused(&garbage, http::StatusCode::BAD_REQUEST);
    let corrupt = post_traces(
        addr,
        &[
            PROTOBUF,
            ("content-encoding", "gzip"),
            ("authorization", &bearer),
        ],
        b"not gzip at all".to_vec(),
    )
    .await;
    assert_refused(&corrupt, http::StatusCode::BAD_REQUEST);

    let json = post_traces(
        addr,
        &[
            ("content-type", "application/json"),
            ("authorization", &bearer),
        ],
        b"{\"resourceSpans\":[]}".to_vec(),
    )
    .await;
    assert_refused(&json, http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let brotli = post_traces(
        addr,
        &[
            PROTOBUF,
            ("content-encoding", "br"),
            ("authorization", &bearer),
        ],
        export.clone(),
    )
    .await;
    assert_refused(&brotli, http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (get, _) = support::http_request_to(addr, http::Method::GET, "/v1/traces").await;
    assert_eq!(get, http::StatusCode::METHOD_NOT_ALLOWED);

    // 64 MiB of zeros in about 64 KiB: refused at the 4 MiB bound.
    let bomb = gzip_bomb(64 * 1024 * 1024);
    assert!(bomb.len() < 256 * 1024, "{}", bomb.len());
    let bombed = post_traces(
        addr,
        &[
            PROTOBUF,
            ("content-encoding", "gzip"),
            ("authorization", &bearer),
        ],
        bomb,
    )
    .await;
    let status = assert_refused(&bombed, http::StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        status
            .message
            .contains("Export accepts at most 4194304 bytes"),
        "{status:?}"
    );
    assert!(
        !names(received).iter().any(|n| n == "http-refused"),
        "{:?}",
        names(received)
    );
}

#[tokio::test]
async fn otlp_http_exports_are_admitted_stamped_and_relayed_on_serve() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    let (server, piped) = traced_server(dir.path(), collector, 100);
    http_relayed_with_identity(server.addr(), &received, &piped, "serve-http").await;

    let (idle_kib, _) = server.memory_kib();
    http_refusals(server.addr(), &received, &piped).await;
    // The bomb was not inflated whole (64 MiB): the peak stayed well under it.
    let (_, peak_kib) = server.memory_kib();
    println!("idle {idle_kib} KiB, peak {peak_kib} KiB");
    assert!(
        peak_kib < idle_kib + 48 * 1024,
        "peak {peak_kib} KiB against {idle_kib} KiB idle"
    );

    // Over the bound uncompressed: refused from its length, before it is all read.
    let bearer = format!("Bearer {},{},{}", piped.project, piped.id, piped.key);
    let (status, _, body) = post_traces_h2(
        server.addr(),
        &[PROTOBUF, ("authorization", &bearer)],
        encoded(&forged_export("http-too-big", 5 * 1024 * 1024)),
    )
    .await;
    assert_eq!(status, http::StatusCode::PAYLOAD_TOO_LARGE);
    let status: RpcStatus = prost::Message::decode(&body[..]).expect("a status");
    assert!(
        status.message.contains("at most 4194304 bytes"),
        "{status:?}"
    );
    assert!(!names(&received).iter().any(|n| n == "http-too-big"));
}

#[tokio::test]
async fn otlp_http_past_the_pipeds_rate_is_429_with_retry_after() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    let args: Vec<OsString> = vec![
        "--otlp-endpoint".into(),
        format!("http://{collector}").into(),
        "--max-call-rate".into(),
        "1".into(),
    ];
    let server = Server::start_with(dir.path(), &args, &[]);
    let piped = add_piped(dir.path(), "rated");
    let bearer = format!("Bearer {QUICKSTART},{},{}", piped.id, piped.key);
    // A burst of five, then one a second: the calls come faster than that.
    let mut rated = None;
    for n in 0..50 {
        let resp = post_traces(
            server.addr(),
            &[PROTOBUF, ("authorization", &bearer)],
            encoded(&forged_export(&format!("rated-{n}"), 0)),
        )
        .await;
        if resp.status != http::StatusCode::OK {
            rated = Some((n, resp));
            break;
        }
    }
    let (n, resp) = rated.expect("refused past the rate");
    assert!(n >= 1, "the first export is within the burst");
    let status = assert_refused(&resp, http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(status.code, tonic::Code::ResourceExhausted as i32);
    let retry_after = resp
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    assert!(retry_after.is_some_and(|s| s >= 1), "{resp:?}");
    assert!(!names(&received).iter().any(|s| *s == format!("rated-{n}")));
}

/// The serverless path: `/v1/traces` through the ALB emulator (the listener rule of
/// template.yaml and Terraform) to the piped-api function, relayed, and each refusal.
#[tokio::test]
async fn otlp_http_through_the_alb_and_the_piped_api_function() {
    let (received, collector) = collector();
    let env = support::lambda::FunctionEnv::from([(
        "wisp-piped-api",
        vec![
            (
                "WISP_OTLP_ENDPOINT".to_string(),
                Some(format!("http://{collector}")),
            ),
            ("WISP_MAX_CALL_RATE".to_string(), Some("2".to_string())),
        ],
    )]);
    let Some(wisp) = support::Wisp::start_lambda_with(
        "otlp_http_through_the_alb_and_the_piped_api_function",
        &env,
    ) else {
        return;
    };
    let piped = wisp.add_piped(QUICKSTART, "traced-http-lambda");
    http_relayed_with_identity(wisp.addr(), &received, &piped, "lambda-http").await;
    http_refusals(wisp.addr(), &received, &piped).await;
    // The function's rate (per instance there), as on serve.
    let bearer = format!("Bearer {},{},{}", piped.project, piped.id, piped.key);
    let mut rated = None;
    for n in 0..50 {
        let resp = post_traces(
            wisp.addr(),
            &[PROTOBUF, ("authorization", &bearer)],
            encoded(&forged_export(&format!("lambda-rated-{n}"), 0)),
        )
        .await;
        if resp.status != http::StatusCode::OK {
            rated = Some(resp);
            break;
        }
    }
    let resp = rated.expect("refused past the rate");
    assert_refused(&resp, http::StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers.get("retry-after").is_some(), "{resp:?}");
}

// W3C trace context (issue 32 point 2): a caller's `traceparent` makes Wisp's span for
// the call a child of the caller's span, in the caller's trace.

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn a_callers_traceparent_makes_wisps_span_its_child() {
    let (received, collector) = collector();
    let dir = support::empty_data_dir();
    let (server, piped) = traced_server(dir.path(), collector, 100);
    let mut client = support::connect(server.addr(), Via::Grpc, Some(&piped.authorization())).await;

    // gRPC metadata.
    let mut call = tonic::Request::new(ps::ListApplicationsRequest {});
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    call.metadata_mut()
        .insert("traceparent", traceparent.parse().expect("ASCII"));
    call.metadata_mut()
        .insert("tracestate", "vendor=opaque".parse().expect("ASCII"));
    client
        .list_applications(call)
        .await
        .expect("ListApplications");
    let span = received.wait_for("PipedService/ListApplications").await;
    assert_eq!(hex(&span.trace_id), CALLER_TRACE);
    assert_eq!(hex(&span.parent_span_id), CALLER_SPAN);
    assert_eq!(span.trace_state, "vendor=opaque");

    // Malformed context is ignored: a new trace, and the call is answered as ever.
    let mut call = tonic::Request::new(ps::GetDeploymentRequest {
        id: "dep-malformed".to_owned(),
    });
    call.metadata_mut().insert(
        "traceparent",
        "00-nothex-alsonothex-01".parse().expect("ASCII"),
    );
    let answer = client
        .get_deployment(call)
        .await
        .expect_err("no such deployment");
    assert_eq!(answer.code(), tonic::Code::NotFound, "{answer:?}");
    let span = received.wait_for("PipedService/GetDeployment").await;
    assert_ne!(hex(&span.trace_id), CALLER_TRACE);
    assert!(span.parent_span_id.is_empty(), "{:?}", span.parent_span_id);

    // HTTP headers: an OTLP/HTTP export's span joins the exporter's trace.
    let other_trace = "0af7651916cd43dd8448eb211c80319c";
    let other_span = "b7ad6b7169203331";
    let bearer = format!("Bearer {},{},{}", piped.project, piped.id, piped.key);
    let traceparent = format!("00-{other_trace}-{other_span}-01");
    let resp = post_traces(
        server.addr(),
        &[
            PROTOBUF,
            ("authorization", &bearer),
            ("traceparent", &traceparent),
        ],
        encoded(&forged_export("traceparent-export", 0)),
    )
    .await;
    assert_eq!(resp.status, http::StatusCode::OK, "{resp:?}");
    let span = received.wait_for("TraceService/Export").await;
    assert_eq!(hex(&span.trace_id), other_trace);
    assert_eq!(hex(&span.parent_span_id), other_span);
}
