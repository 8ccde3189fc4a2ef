//! OTLP/HTTP for the pipeds' spans: `POST /v1/traces` with a protobuf
//! `ExportTraceServiceRequest`, as OpenTelemetry SDKs' HTTP exporters send it
//! (`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`), optionally `Content-Encoding: gzip`.
//!
//! One code path with OTLP/gRPC: the request is turned into the gRPC call
//! `TraceService/Export` (the body framed as its one message, gzip announced as
//! `grpc-encoding`) and handed to the same route, so the same gate authenticates the piped
//! token (`authorization: Bearer <project>,<piped>,<key>` as upstream's pipeds send it to
//! the OTLP route, or `PIPED-TOKEN`), applies the same size bound (decompressed size
//! included: a gzip bomb is inflated only up to the bound) and call rate, and the same
//! handler stamps the piped's identity and relays the spans. The gRPC answer is then
//! turned into OTLP/HTTP's: 200 with a protobuf `ExportTraceServiceResponse`, or the
//! HTTP status the OTLP specification gives the failure, with a protobuf
//! `google.rpc.Status` body.
//!
//! Upstream's pipeds export over OTLP/gRPC only (`otlptracegrpc` in pipedv1); this path
//! is for other OpenTelemetry SDKs and collectors a team points at Wisp.
//!
//! Deviation: JSON (`application/json`) is not accepted (415); the specification makes it
//! optional for servers, and every OpenTelemetry SDK's HTTP exporter sends protobuf by
//! default. A body of unknown length (chunked, no `Content-Length`) is refused with 411:
//! the one gRPC message is framed with its length before a byte of it is read, so that
//! nothing is buffered before the caller is authenticated; SDKs send the length.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri, Version};
use http_body::{Frame, SizeHint};
use http_body_util::{BodyExt, Full, Limited};
use tonic::Code;
use tonic::body::Body;

/// Where OTLP/HTTP exporters post spans.
pub const PATH: &str = "/v1/traces";
/// The gRPC method the request becomes.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
/// OTLP/HTTP's binary protobuf encoding.
const PROTOBUF: &str = "application/x-protobuf";
/// The most of a gRPC answer read back (an `ExportTraceServiceResponse` is a few bytes;
/// the route's encoding bound is 64 KiB).
const MAX_ANSWER: usize = 1024 * 1024;
/// What a refused-for-rate (or busy) exporter is told to wait, in seconds.
const RETRY_AFTER_SECONDS: &str = "1";

/// The gRPC call an OTLP/HTTP request stands for, or the answer refusing it before the
/// route sees it (wrong method, content type, encoding, or a body of unknown length).
pub fn to_grpc(req: Request<Body>) -> Result<Request<Body>, Box<Response<Body>>> {
    if req.method() != Method::POST {
        let mut refused = error(
            StatusCode::METHOD_NOT_ALLOWED,
            Code::Unimplemented,
            "OTLP/HTTP takes POST",
        );
        refused
            .headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
        return Err(Box::new(refused));
    }
    let media_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    if media_type.as_deref() != Some(PROTOBUF) {
        return Err(Box::new(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::InvalidArgument,
            "OTLP/HTTP here takes Content-Type: application/x-protobuf (JSON is not accepted)",
        )));
    }
    let gzip = match req
        .headers()
        .get(CONTENT_ENCODING)
        .map(|v| v.as_bytes().to_ascii_lowercase())
        .as_deref()
    {
        None | Some(b"identity") => false,
        Some(b"gzip") => true,
        Some(_) => {
            return Err(Box::new(error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Code::InvalidArgument,
                "unsupported Content-Encoding (gzip and identity are accepted)",
            )));
        }
    };
    let Some(length) = http_body::Body::size_hint(req.body()).exact() else {
        return Err(Box::new(error(
            StatusCode::LENGTH_REQUIRED,
            Code::InvalidArgument,
            "send the body with a Content-Length",
        )));
    };
    // More than a gRPC frame can say is far more than the route's bound.
    let Ok(length) = u32::try_from(length) else {
        return Err(Box::new(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            Code::ResourceExhausted,
            "request too large",
        )));
    };
    let (mut parts, body) = req.into_parts();
    let mut uri = parts.uri.into_parts();
    uri.path_and_query = Some(http::uri::PathAndQuery::from_static(GRPC_PATH));
    parts.uri = Uri::from_parts(uri).unwrap_or_else(|_| Uri::from_static(GRPC_PATH));
    parts.version = Version::HTTP_2;
    let headers = &mut parts.headers;
    for name in [
        CONTENT_LENGTH,
        CONTENT_ENCODING,
        http::HeaderName::from_static("grpc-encoding"),
        http::HeaderName::from_static("grpc-accept-encoding"),
        http::HeaderName::from_static("grpc-timeout"),
    ] {
        headers.remove(name);
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
    if gzip {
        headers.insert("grpc-encoding", HeaderValue::from_static("gzip"));
    }
    let mut prefix = [0u8; 5];
    prefix[0] = u8::from(gzip);
    prefix[1..].copy_from_slice(&length.to_be_bytes());
    let framed = Framed {
        prefix: Some(Bytes::copy_from_slice(&prefix)),
        body,
    };
    Ok(Request::from_parts(parts, Body::new(framed)))
}

/// The OTLP/HTTP answer for the gRPC answer of the call [`to_grpc`] made.
pub async fn from_grpc(response: Response<Body>) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let collected = match Limited::new(body, MAX_ANSWER).collect().await {
        Ok(collected) => collected,
        Err(_) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                Code::Internal,
                "the answer could not be read",
            );
        }
    };
    let trailers = collected.trailers().cloned();
    let message = collected.to_bytes();
    // A failed call answers trailers-only (its status in the headers); an answered one
    // has its status in the trailers.
    let status = tonic::Status::from_header_map(&parts.headers)
        .or_else(|| trailers.as_ref().and_then(tonic::Status::from_header_map));
    let Some(status) = status else {
        // Not a gRPC answer: a process that routes no TraceService (404), or a layer's.
        let http = if parts.status.is_client_error() || parts.status.is_server_error() {
            parts.status
        } else {
            StatusCode::BAD_GATEWAY
        };
        tracing::warn!(http = %parts.status, "an OTLP/HTTP export got no gRPC status");
        return error(http, Code::Internal, "the export was not answered");
    };
    if status.code() != Code::Ok {
        return refusal(&status);
    }
    // The one message of the answer, uncompressed (no compression was offered).
    let answer = match message.get(..5) {
        Some([0, ..]) => message.slice(5..),
        None if message.is_empty() => Bytes::new(),
        _ => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                Code::Internal,
                "the answer was not one uncompressed message",
            );
        }
    };
    protobuf(StatusCode::OK, answer)
}

/// OTLP/HTTP's status for a refused export: the client errors the specification names
/// (400, 401, 403, 413, 429 with `Retry-After`), 503 with `Retry-After` for the
/// retryable server failures.
fn refusal(status: &tonic::Status) -> Response<Body> {
    let http = match status.code() {
        Code::InvalidArgument | Code::Cancelled | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound | Code::Unimplemented => StatusCode::NOT_FOUND,
        Code::ResourceExhausted if status.message().starts_with(crate::gate::TOO_LARGE) => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        // The caller's rate, or the server's share for it: retry later.
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unavailable | Code::Aborted => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut response = error(http, status.code(), status.message());
    if matches!(
        http,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
    }
    response
}

/// `google.rpc.Status` as OTLP/HTTP's error bodies carry it.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

fn error(http: StatusCode, code: Code, message: &str) -> Response<Body> {
    let body = prost::Message::encode_to_vec(&RpcStatus {
        code: code as i32,
        message: message.to_owned(),
    });
    protobuf(http, Bytes::from(body))
}

fn protobuf(http: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Body::new(Full::new(body)));
    *response.status_mut() = http;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(PROTOBUF));
    response
}

/// The request body after its gRPC frame header: read as it comes, never buffered here
/// (the gate reads it within the route's bound).
struct Framed {
    prefix: Option<Bytes>,
    body: Body,
}

impl http_body::Body for Framed {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        if let Some(prefix) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.body.size_hint();
        let prefix = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(prefix));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(prefix));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, headers: &[(&str, &str)], body: &'static [u8]) -> Request<Body> {
        let mut req = Request::builder()
            .method(method)
            .uri("http://wisp/v1/traces");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        req.body(Body::new(Full::new(Bytes::from_static(body))))
            .unwrap()
    }

    fn refused(req: Request<Body>) -> StatusCode {
        to_grpc(req).expect_err("refused").status()
    }

    #[tokio::test]
    async fn a_protobuf_post_becomes_the_grpc_export_framed() {
        let req = request(
            Method::POST,
            &[
                ("content-type", "application/x-protobuf"),
                ("content-encoding", "gzip"),
                ("authorization", "Bearer p,q,r"),
            ],
            b"abc",
        );
        let grpc = to_grpc(req).expect("accepted");
        assert_eq!(grpc.uri().path(), GRPC_PATH);
        assert_eq!(grpc.headers()["content-type"], "application/grpc");
        assert_eq!(grpc.headers()["grpc-encoding"], "gzip");
        assert_eq!(grpc.headers()["authorization"], "Bearer p,q,r");
        assert!(grpc.headers().get("content-encoding").is_none());
        let body = grpc.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], &[1, 0, 0, 0, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn other_methods_types_and_encodings_are_refused() {
        let protobuf = ("content-type", "application/x-protobuf");
        assert_eq!(
            refused(request(Method::GET, &[protobuf], b"")),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            refused(request(
                Method::POST,
                &[("content-type", "application/json")],
                b"{}"
            )),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        assert_eq!(
            refused(request(
                Method::POST,
                &[protobuf, ("content-encoding", "br")],
                b""
            )),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
    }

    #[test]
    fn refusals_map_to_otlp_http_statuses() {
        let cases = [
            (
                tonic::Status::invalid_argument("x"),
                StatusCode::BAD_REQUEST,
            ),
            (
                tonic::Status::unauthenticated("x"),
                StatusCode::UNAUTHORIZED,
            ),
            (
                tonic::Status::resource_exhausted(format!("{}Export", crate::gate::TOO_LARGE)),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            (
                tonic::Status::resource_exhausted("too many calls"),
                StatusCode::TOO_MANY_REQUESTS,
            ),
            (
                tonic::Status::unavailable("collector down"),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
        ];
        for (status, http) in cases {
            let response = refusal(&status);
            assert_eq!(response.status(), http, "{status:?}");
            let retry = response.headers().get(RETRY_AFTER).is_some();
            assert_eq!(
                retry,
                matches!(
                    http,
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
                )
            );
        }
    }
}
