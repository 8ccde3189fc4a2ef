//! The pipeds' spans: OTLP `opentelemetry.proto.collector.trace.v1.TraceService/Export`,
//! accepted from a piped with its piped token and relayed to Wisp's OTLP collector.
//!
//! Upstream's gateway (Envoy) routes this path to an OpenTelemetry collector after its
//! `ext_authz` checked `authorization: Bearer <project>,<piped>,<key>` against the piped
//! records; plugin-architecture pipeds export their spans to the control plane's address
//! that way. Here the same check is the gate's ([`TraceAdmit`]: the verifier PipedService
//! uses, its cache and its revocation check), so is the size bound (`crate::limits::TRACE`)
//! and the call rate, charged to the piped under a principal of its own so that a piped's
//! spans never take the budget of its PipedService calls.
//!
//! The piped's identity is written into every resource by Wisp ([`PROJECT_ID`],
//! [`PIPED_ID`]), replacing what the payload claims: a piped cannot pass its spans off as
//! another's. With no collector configured the spans are dropped and the piped gets `OK`
//! (an error would only make it log one per batch and retry).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status};
use wisp_auth::{PipedCaller, PipedKeySource, PipedVerifier};

use crate::gate::{Admit, DecodeBudget, Gate, Principal};
use crate::status::from_auth_error;

/// Resource attribute Wisp sets to the piped's project id.
pub const PROJECT_ID: &str = "pipecd.project.id";
/// Resource attribute Wisp sets to the piped's id.
pub const PIPED_ID: &str = "pipecd.piped.id";
/// How long one relayed export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The served TraceService: the gate, then tonic.
pub type TraceServer<S> = Gate<TraceAdmit<S>, TraceServiceServer<TraceGrpc>>;

/// Admits pipeds by their token: `Bearer <project>,<piped>,<key>` as upstream's pipeds send
/// it to the OTLP route, or `PIPED-TOKEN` as on PipedService.
pub struct TraceAdmit<S: PipedKeySource> {
    verifier: Arc<PipedVerifier<S>>,
}

impl<S: PipedKeySource> std::fmt::Debug for TraceAdmit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceAdmit").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl<S: PipedKeySource + 'static> Admit for TraceAdmit<S> {
    type Caller = PipedCaller;
    async fn admit(
        &self,
        _method: &str,
        headers: &http::HeaderMap,
        source: Option<std::net::IpAddr>,
    ) -> Result<PipedCaller, Status> {
        let header = headers.get("authorization").and_then(|v| v.to_str().ok());
        let bearer = header.is_some_and(|h| h.trim_start().starts_with("Bearer "));
        let token = if bearer {
            wisp_auth::credentials::parse_bearer_piped_token(header)
        } else {
            wisp_auth::credentials::parse_piped_token(header)
        }
        .map_err(from_auth_error)?;
        self.verifier
            .verify_from(&token, source)
            .await
            .map_err(from_auth_error)
    }
    /// A principal of its own per piped: its spans are rated and charged apart from its
    /// PipedService calls (same project).
    fn principal(caller: &PipedCaller) -> Principal {
        Principal {
            project: caller.project_id.clone(),
            id: format!("piped-traces:{}", caller.piped_id),
        }
    }
}

/// Why the collector's address was refused.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(
        "the OTLP endpoint must be an http:// or https:// URL (the collector's OTLP/gRPC port, usually 4317)"
    )]
    Scheme,
    #[error("cannot use the OTLP endpoint")]
    Endpoint(#[source] tonic::transport::Error),
}

/// Where the pipeds' spans go: a collector, or nowhere.
#[derive(Debug, Clone)]
pub struct Relay {
    collector: Option<(String, TraceServiceClient<Channel>)>,
}

impl Relay {
    /// Spans are answered `OK` and dropped.
    pub fn drop_all() -> Self {
        Relay { collector: None }
    }

    /// Spans go to the OTLP/gRPC collector at `endpoint` (the address
    /// `--otlp-endpoint` names; connected on first use).
    pub fn to_collector(endpoint: &str) -> Result<Self, RelayError> {
        let https = endpoint.starts_with("https://");
        if !https && !endpoint.starts_with("http://") {
            return Err(RelayError::Scheme);
        }
        let mut channel = Endpoint::from_shared(endpoint.to_owned())
            .map_err(RelayError::Endpoint)?
            .timeout(EXPORT_TIMEOUT);
        if https {
            channel = channel
                .tls_config(ClientTlsConfig::new().with_native_roots())
                .map_err(RelayError::Endpoint)?;
        }
        let client = TraceServiceClient::new(channel.connect_lazy());
        Ok(Relay {
            collector: Some((endpoint.to_owned(), client)),
        })
    }

    /// [`Relay::to_collector`] when `endpoint` is set, else [`Relay::drop_all`].
    pub fn from_endpoint(endpoint: Option<&str>) -> Result<Self, RelayError> {
        endpoint.map_or_else(|| Ok(Self::drop_all()), Self::to_collector)
    }
}

/// TraceService/Export for pipeds.
#[derive(Debug)]
pub struct TraceGrpc {
    relay: Relay,
}

impl TraceGrpc {
    pub fn new(relay: Relay) -> Self {
        TraceGrpc { relay }
    }

    /// The service behind its gate (the piped's token checked by `verifier`), ready to
    /// add to a router.
    pub fn into_server<S: PipedKeySource + 'static>(
        self,
        verifier: Arc<PipedVerifier<S>>,
    ) -> TraceServer<S> {
        let server = TraceServiceServer::new(self)
            .max_decoding_message_size(crate::limits::TRACE.max())
            .max_encoding_message_size(64 * 1024);
        Gate::new(
            Arc::new(TraceAdmit { verifier }),
            &crate::limits::TRACE,
            DecodeBudget::process(),
            server,
        )
    }
}

#[tonic::async_trait]
impl TraceService for TraceGrpc {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let caller: PipedCaller = crate::gate::admitted(&request)?;
        let mut export = request.into_inner();
        stamp(&mut export, &caller);
        let Some((endpoint, client)) = &self.relay.collector else {
            return Ok(Response::new(ExportTraceServiceResponse::default()));
        };
        match client.clone().export(export).await {
            Ok(answer) => Ok(Response::new(answer.into_inner())),
            Err(status) => {
                tracing::warn!(
                    collector = %endpoint,
                    code = ?status.code(),
                    "the OTLP collector refused or missed a piped's spans"
                );
                // The collector's code (UNAVAILABLE and RESOURCE_EXHAUSTED make the piped
                // retry), with a message that says which hop failed.
                Err(Status::new(
                    status.code(),
                    format!(
                        "Wisp could not pass the spans on to its OTLP collector: {}",
                        status.message()
                    ),
                ))
            }
        }
    }
}

/// Writes the caller's identity into every resource of `export`, replacing any value the
/// payload gave those keys.
pub fn stamp(export: &mut ExportTraceServiceRequest, caller: &PipedCaller) {
    for spans in &mut export.resource_spans {
        let resource = spans.resource.get_or_insert_with(Resource::default);
        resource
            .attributes
            .retain(|kv| kv.key != PROJECT_ID && kv.key != PIPED_ID);
        resource
            .attributes
            .push(text(PROJECT_ID, &caller.project_id));
        resource.attributes.push(text(PIPED_ID, &caller.piped_id));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::trace::v1::ResourceSpans;

    fn caller() -> PipedCaller {
        PipedCaller {
            project_id: "p1".to_owned(),
            piped_id: "piped-a".to_owned(),
        }
    }

    fn values(resource: &Resource, key: &str) -> Vec<String> {
        resource
            .attributes
            .iter()
            .filter(|kv| kv.key == key)
            .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn forged_identity_is_replaced_and_a_missing_resource_gets_one() {
        let forged = Resource {
            attributes: vec![
                text(PROJECT_ID, "other-project"),
                text(PIPED_ID, "other-piped"),
                text("service.name", "piped"),
            ],
            ..Resource::default()
        };
        let mut export = ExportTraceServiceRequest {
            resource_spans: vec![
                ResourceSpans {
                    resource: Some(forged),
                    ..ResourceSpans::default()
                },
                ResourceSpans::default(),
            ],
        };
        stamp(&mut export, &caller());
        for spans in &export.resource_spans {
            let resource = spans.resource.as_ref().expect("a resource");
            assert_eq!(values(resource, PROJECT_ID), ["p1"]);
            assert_eq!(values(resource, PIPED_ID), ["piped-a"]);
        }
        let first = export.resource_spans[0]
            .resource
            .as_ref()
            .expect("resource");
        assert_eq!(values(first, "service.name"), ["piped"]);
    }

    #[test]
    fn an_endpoint_must_be_a_url() {
        assert!(matches!(
            Relay::to_collector("collector:4317"),
            Err(RelayError::Scheme)
        ));
    }
}
