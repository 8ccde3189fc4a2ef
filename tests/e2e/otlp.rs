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
