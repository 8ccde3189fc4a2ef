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
    let out = support::run_cli(
        dir,
        &[
            "piped",
            "add",
            "--project",
            QUICKSTART,
            "--name",
            "traced",
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let added: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let piped = support::Piped {
        project: QUICKSTART.to_owned(),
        id: added["id"].as_str().expect("id").to_owned(),
        key: added["key"].as_str().expect("key").to_owned(),
    };
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
    let out = support::run_cli(
        dir.path(),
        &[
            "piped",
            "add",
            "--project",
            QUICKSTART,
            "--name",
            "p",
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let added: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let authorization = format!(
        "PIPED-TOKEN {QUICKSTART},{},{}",
        added["id"].as_str().expect("id"),
        added["key"].as_str().expect("key")
    );
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
