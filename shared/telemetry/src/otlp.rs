//! Spans to an OpenTelemetry collector over OTLP/gRPC (`wisp serve --otlp-endpoint`).
//!
//! Wisp's spans stay plain `tracing` spans, free of any exporter: `rpc` (service, method,
//! code, ms) opened by the gRPC gate, `store` (store, backend, kind, op, outcome) around
//! every store operation, and the jobs' spans. Here they are given OpenTelemetry's names
//! for what they are as they leave: an `rpc` span becomes a server span named
//! `PipedService/ReportStat` with the `rpc.*` attributes, a `store` span a client span
//! named `datastore Get`; server-side failures of either are marked as errors.
//!
//! Batches are sent from the SDK's own thread, so a slow or absent collector never holds
//! a call: past the queue (2,048 spans by default) spans are dropped, not waited for. The
//! SDK's standard variables apply: `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` and `OTEL_BSP_*`.
//!
//! A call that carries W3C trace context (`traceparent`, `tracestate`: gRPC metadata or
//! HTTP headers) continues its caller's trace: its span is a child of the caller's
//! ([`continue_trace`]), and the caller's sampling decision holds (the SDK's default
//! sampler follows the parent). Malformed context is ignored: the call starts a trace.

use std::borrow::Cow;
use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanProcessor,
};
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// How long the spans still queued may take to leave when the process ends.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// How long one export may take before the batch is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The attribute of a call's span that names the deployment its request names.
pub const DEPLOYMENT_ID: &str = "pipecd.deployment.id";

/// Makes `span` (not yet entered) a child of the caller's span that `traceparent` and
/// `tracestate` (W3C Trace Context) name. Absent or malformed context leaves `span` as it
/// is (a new trace, or its parent in the process): never an error.
pub fn continue_trace(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let Some(traceparent) = traceparent else {
        return;
    };
    let carrier = Carrier {
        traceparent,
        tracestate,
    };
    let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        // Fails only without the OpenTelemetry layer (no exporter) or for a disabled span.
        let _ = span.set_parent(cx);
    }
}

/// The two headers W3C Trace Context reads.
struct Carrier<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl opentelemetry::propagation::Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        let mut keys = vec!["traceparent"];
        if self.tracestate.is_some() {
            keys.push("tracestate");
        }
        keys
    }
}

/// Why the exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error(
        "--otlp-endpoint must be an http:// or https:// URL (the collector's OTLP/gRPC port, usually 4317)"
    )]
    Scheme,
    #[error("cannot set up the OTLP exporter: {0}")]
    Build(#[source] opentelemetry_otlp::ExporterBuildError),
}

/// The running exporter: dropping it without [`Exporter::shutdown`] loses the spans still
/// queued.
#[derive(Debug)]
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Sends what is queued (waiting at most a few seconds) and stops.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_WAIT) {
            tracing::warn!(error = %e, "OTLP exporter: spans still queued were lost");
        }
    }
}

/// A layer that exports Wisp's spans to the collector at `endpoint`, and the handle that
/// flushes them at the end. Must be called within a Tokio runtime (the gRPC channel's
/// connection task runs on it).
pub fn layer<S>(
    endpoint: &str,
    version: &'static str,
) -> Result<(impl Layer<S> + 'static, Exporter), OtlpError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let https = endpoint.starts_with("https://");
    if !https && !endpoint.starts_with("http://") {
        return Err(OtlpError::Scheme);
    }
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT);
    if https {
        // Collectors behind a company's own CA are the common case: the system's roots.
        builder = builder.with_tls_config(
            opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_native_roots(),
        );
    }
    let exporter = builder.build().map_err(OtlpError::Build)?;
    // Named "wisp" unless the SDK's variables name it otherwise.
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    let mut resource =
        Resource::builder().with_attribute(KeyValue::new("service.version", version));
    if !named {
        resource = resource.with_service_name("wisp");
    }
    let resource = resource.build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Conventions(BatchSpanProcessor::builder(exporter).build()))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("wisp");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_filter(tracing_subscriber::filter::filter_fn(exported));
    Ok((layer, Exporter { provider }))
}

/// Wisp's own spans (requests, store operations, jobs) and the events logged within them;
/// not the spans of the libraries underneath (the AWS SDK's, hyper's), which would
/// multiply every trace's size for little.
fn exported(meta: &tracing::Metadata<'_>) -> bool {
    meta.target().starts_with("wisp")
        && if meta.is_span() {
            *meta.level() <= tracing::Level::DEBUG
        } else {
            *meta.level() <= tracing::Level::INFO
        }
}

/// Gives Wisp's spans OpenTelemetry's names and kinds on their way out.
#[derive(Debug)]
struct Conventions<P>(P);

impl<P: SpanProcessor> SpanProcessor for Conventions<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, mut span: SpanData) {
        conventions(&mut span);
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|v| v.as_str().into_owned())
}

/// The server-side failures among gRPC codes: what a server span is marked an error for
/// (OpenTelemetry's gRPC conventions; a caller's mistake is not the server's error).
fn server_fault(code: &str) -> bool {
    matches!(
        code,
        "UNKNOWN"
            | "DEADLINE_EXCEEDED"
            | "UNIMPLEMENTED"
            | "INTERNAL"
            | "UNAVAILABLE"
            | "DATA_LOSS"
    )
}

fn conventions(span: &mut SpanData) {
    match span.name.as_ref() {
        "rpc" => {
            let service = text(span, "service").unwrap_or_default();
            let method = text(span, "method").unwrap_or_default();
            let code = text(span, "code");
            // The deployment a piped's call names, under the key the pipeds' own spans
            // carry their project and piped under (`wisp_transport::trace`).
            for kv in &mut span.attributes {
                if kv.key.as_str() == "deployment_id" {
                    kv.key = opentelemetry::Key::from_static_str(DEPLOYMENT_ID);
                }
            }
            span.name = Cow::Owned(format!("{service}/{method}"));
            span.span_kind = SpanKind::Server;
            span.attributes.extend([
                KeyValue::new("rpc.system", "grpc"),
                KeyValue::new("rpc.service", service),
                KeyValue::new("rpc.method", method),
            ]);
            if let Some(code) = code {
                if let Some(number) = crate::grpc_code_number(&code) {
                    span.attributes
                        .push(KeyValue::new("rpc.grpc.status_code", i64::from(number)));
                }
                if server_fault(&code) {
                    span.status = Status::error(code);
                }
            }
        }
        "store" => {
            let store = text(span, "store").unwrap_or_default();
            let op = text(span, "op").unwrap_or_default();
            span.name = Cow::Owned(format!("{store} {op}"));
            span.span_kind = SpanKind::Client;
            if let Some(outcome) = text(span, "outcome")
                && matches!(outcome.as_str(), "unavailable" | "internal")
            {
                span.status = Status::error(outcome);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    fn span(name: &'static str, attributes: Vec<KeyValue>) -> SpanData {
        SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed(name),
            start_time: std::time::SystemTime::UNIX_EPOCH,
            end_time: std::time::SystemTime::UNIX_EPOCH,
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[test]
    fn an_rpc_span_is_named_for_its_method_and_marked_by_its_code() {
        let mut ok = span(
            "rpc",
            vec![
                KeyValue::new("service", "PipedService"),
                KeyValue::new("method", "ReportStat"),
                KeyValue::new("code", "OK"),
            ],
        );
        conventions(&mut ok);
        assert_eq!(ok.name, "PipedService/ReportStat");
        assert_eq!(ok.span_kind, SpanKind::Server);
        assert_eq!(ok.status, Status::Unset);
        assert_eq!(attribute(&ok, "rpc.grpc.status_code"), Some(&Value::I64(0)));
        assert_eq!(text(&ok, "rpc.method").as_deref(), Some("ReportStat"));

        // A caller's mistake is not the server's error; the server's own failure is.
        for (code, number, error) in [("NOT_FOUND", 5, false), ("UNAVAILABLE", 14, true)] {
            let mut failed = span(
                "rpc",
                vec![
                    KeyValue::new("service", "APIService"),
                    KeyValue::new("method", "GetApplication"),
                    KeyValue::new("code", code),
                ],
            );
            conventions(&mut failed);
            assert_eq!(
                attribute(&failed, "rpc.grpc.status_code"),
                Some(&Value::I64(number))
            );
            assert_eq!(
                matches!(failed.status, Status::Error { .. }),
                error,
                "{code}"
            );
        }
    }

    #[test]
    fn a_calls_deployment_is_named_as_opentelemetry_sees_it() {
        let mut call = span(
            "rpc",
            vec![
                KeyValue::new("service", "PipedService"),
                KeyValue::new("method", "ReportStageLogs"),
                KeyValue::new("code", "OK"),
                KeyValue::new("deployment_id", "d-1"),
            ],
        );
        conventions(&mut call);
        assert_eq!(text(&call, DEPLOYMENT_ID).as_deref(), Some("d-1"));
        assert_eq!(attribute(&call, "deployment_id"), None);
    }

    #[test]
    fn a_store_span_is_a_client_span_failing_only_on_the_backends_fault() {
        for (outcome, error) in [("ok", false), ("not_found", false), ("unavailable", true)] {
            let mut store = span(
                "store",
                vec![
                    KeyValue::new("store", "datastore"),
                    KeyValue::new("op", "get"),
                    KeyValue::new("outcome", outcome),
                ],
            );
            conventions(&mut store);
            assert_eq!(store.name, "datastore get");
            assert_eq!(store.span_kind, SpanKind::Client);
            assert_eq!(
                matches!(store.status, Status::Error { .. }),
                error,
                "{outcome}"
            );
        }
    }

    #[test]
    fn other_spans_and_libraries_spans_pass_as_they_are() {
        let mut job = span("job", vec![KeyValue::new("job", "insights")]);
        conventions(&mut job);
        assert_eq!(job.name, "job");
        assert_eq!(job.span_kind, SpanKind::Internal);
    }

    #[test]
    fn an_endpoint_must_be_a_url() {
        let built = layer::<tracing_subscriber::Registry>("collector:4317", "0");
        assert!(matches!(built, Err(OtlpError::Scheme)));
    }
}
