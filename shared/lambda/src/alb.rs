//! ALB events in, ALB responses out, around any HTTP service (the gRPC stack, or the
//! HTTP function's).
//!
//! lambda_http turns the ALB event into an `http::Request` (either header shape of the
//! target group, base64 bodies decoded) and the `http::Response` back into the ALB's
//! JSON. In between, [`AlbService`]:
//! - answers the ALB's own health checks (`user-agent: ELB-HealthChecker/...`) with 200
//!   whatever path the target group probes;
//! - refuses a request body over the ALB's 1 MB, and a response whose JSON would exceed
//!   it, with a status that says what to do — for gRPC a trailers-only
//!   `RESOURCE_EXHAUSTED` (grpc-status in the headers, empty body), otherwise an HTTP
//!   error — instead of the ALB's opaque 502;
//! - collects the response body (gRPC-web carries its trailers in the body) and moves
//!   HTTP trailers of a body-less response into its headers, since an ALB response has
//!   no trailers;
//! - compresses the body (`Content-Encoding: gzip`) when the request accepts gzip and
//!   the body is worth it: a browser inflates it below the gRPC-web client, so a large
//!   WebService answer (a stage log, a live state) fits the 1 MB several times over;
//! - times each request, and the part of it spent awaiting the stores, in a debug log
//!   line (target `wisp_lambda::timing`) that `scripts/measure-lambdas` reads.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, USER_AGENT, VARY,
};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use lambda_http::Body;
use tower::Service;

use crate::limits::{ALB_MAX_REQUEST_BODY, ALB_MAX_RESPONSE_JSON, response_json_len};

/// The body the wrapped service receives.
pub type RequestBody = Full<Bytes>;

/// Bodies smaller than this go out as they are: gzip would save too little to pay for
/// its CPU (a piped's polls are a few hundred bytes).
const GZIP_MIN_BYTES: usize = 4 * 1024;

/// What the ALB's health checker sends as its user agent (`ELB-HealthChecker/2.0`).
const HEALTH_CHECKER: &str = "ELB-HealthChecker/";

/// Content types lambda_http sends as text (everything else goes base64).
const TEXT_PREFIXES: [&str; 5] = [
    "text",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/yaml",
];
const TEXT_SUFFIXES: [&str; 3] = ["+xml", "+yaml", "+json"];

/// Wraps `inner` (an HTTP service) for lambda_http behind an ALB.
#[derive(Debug, Clone)]
pub struct AlbService<S> {
    inner: S,
}

impl<S> AlbService<S> {
    pub fn new(inner: S) -> Self {
        AlbService { inner }
    }
}

impl<S, B> Service<lambda_http::Request> for AlbService<S>
where
    S: Service<http::Request<RequestBody>, Response = Response<B>, Error = Infallible>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Display,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: lambda_http::Request) -> Self::Future {
        if is_health_check(req.headers()) {
            return Box::pin(std::future::ready(Ok(health_ok())));
        }
        let protocol = Protocol::of(req.headers());
        let gzip = accepts_gzip(req.headers());
        let (parts, body) = req.into_parts();
        let bytes = match body {
            Body::Text(text) => Bytes::from(text),
            Body::Binary(data) => Bytes::from(data),
            _ => Bytes::new(),
        };
        if bytes.len() > ALB_MAX_REQUEST_BODY {
            tracing::warn!(
                path = parts.uri.path(),
                bytes = bytes.len(),
                "refused a request body over the load balancer's limit"
            );
            return Box::pin(std::future::ready(Ok(request_too_large(
                &protocol,
                bytes.len(),
            ))));
        }
        let mut parts = parts;
        if let Some(client) = client_addr(&parts.headers) {
            parts.extensions.insert(client);
        }
        let path = parts.uri.path().to_string();
        let started = Instant::now();
        let call = self
            .inner
            .call(http::Request::from_parts(parts, Full::new(bytes)));
        Box::pin(async move {
            let (answer, store) = wisp_store::metered::time_store_waits(async {
                let Ok(response) = call.await;
                let answer = into_alb_response(response, &protocol, &path, gzip).await;
                // Lambda may freeze the process after the answer: write the metrics now.
                wisp_telemetry::emf::flush();
                answer
            })
            .await;
            // What a warm invocation costs, with the stores' share (scripts/measure-lambdas
            // turns this on with `WISP_LOG=info,wisp_lambda::timing=debug`).
            let handler_us = micros(started.elapsed());
            let store_us = micros(store);
            tracing::debug!(
                target: "wisp_lambda::timing",
                path,
                handler_us,
                store_us,
                own_us = handler_us.saturating_sub(store_us),
                "invocation timed"
            );
            Ok(answer)
        })
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// gRPC (content type `application/grpc…`, gRPC-web included) or anything else.
#[derive(Debug, Clone)]
enum Protocol {
    /// The request's content type, echoed on errors we answer ourselves.
    Grpc(HeaderValue),
    Http,
}

impl Protocol {
    fn of(headers: &HeaderMap) -> Protocol {
        match headers.get(CONTENT_TYPE) {
            Some(ct) if ct.as_bytes().starts_with(b"application/grpc") => {
                Protocol::Grpc(ct.clone())
            }
            _ => Protocol::Http,
        }
    }
}

fn is_health_check(headers: &HeaderMap) -> bool {
    headers
        .get(USER_AGENT)
        .is_some_and(|ua| ua.as_bytes().starts_with(HEALTH_CHECKER.as_bytes()))
}

fn health_ok() -> Response<Body> {
    let mut response = Response::new(Body::Text("ok".into()));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Collects the body, checks the size, and picks the text or binary body lambda_http
/// will send.
async fn into_alb_response<B>(
    response: Response<B>,
    protocol: &Protocol,
    path: &str,
    gzip: bool,
) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let (mut parts, body) = response.into_parts();
    let collected = match body.collect().await {
        Ok(collected) => collected,
        Err(e) => {
            tracing::error!(path, error = %e, "the response body failed");
            return failure(
                protocol,
                tonic::Status::internal("the response could not be produced"),
                StatusCode::INTERNAL_SERVER_ERROR,
            );
        }
    };
    let trailers = collected.trailers().cloned();
    let bytes = collected.to_bytes();
    if let Some(trailers) = trailers {
        if bytes.is_empty() {
            // A trailers-only gRPC response: the status belongs in the headers.
            parts.headers.extend(trailers);
        } else {
            tracing::warn!(
                path,
                "dropped HTTP trailers: an ALB response cannot carry them"
            );
        }
    }
    // Failed calls answer trailers-only: their status is in the headers. (Successful
    // calls are not logged: a piped polls every 5 seconds.)
    if let Some(code) = parts.headers.get("grpc-status")
        && code != "0"
    {
        tracing::info!(
            path,
            grpc_status = code.to_str().unwrap_or_default(),
            grpc_message = parts
                .headers
                .get("grpc-message")
                .and_then(|m| m.to_str().ok())
                .unwrap_or_default(),
            "call failed"
        );
    }
    let raw_len = bytes.len();
    let bytes = if gzip {
        compress(&mut parts.headers, bytes)
    } else {
        bytes
    };
    let mut body = lambda_body(&parts.headers, bytes);
    let json_len = response_json_len(parts.status, &parts.headers, &mut body);
    if json_len > ALB_MAX_RESPONSE_JSON {
        tracing::warn!(
            path,
            bytes = raw_len,
            encoded = json_len,
            "refused a response over the load balancer's limit"
        );
        return response_too_large(protocol, raw_len, json_len);
    }
    Response::from_parts(parts, body)
}

/// Whether the request's `Accept-Encoding` takes gzip (`gzip`, `x-gzip` or `*`, not with
/// `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            !refused
                && (coding.eq_ignore_ascii_case("gzip")
                    || coding.eq_ignore_ascii_case("x-gzip")
                    || coding == "*")
        })
}

/// gzip-compresses `bytes` when that is worth it, marking the headers; else returns them
/// unchanged.
fn compress(headers: &mut HeaderMap, bytes: Bytes) -> Bytes {
    use std::io::Write;
    if bytes.len() < GZIP_MIN_BYTES || headers.contains_key(CONTENT_ENCODING) {
        return bytes;
    }
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::default(),
    );
    let packed = match encoder.write_all(&bytes).and_then(|()| encoder.finish()) {
        Ok(packed) if packed.len() < bytes.len() => packed,
        _ => return bytes,
    };
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.remove(CONTENT_LENGTH);
    headers.append(VARY, HeaderValue::from_static("accept-encoding"));
    Bytes::from(packed)
}

/// The body lambda_http will send for these headers: text for textual content types
/// (its rule), base64-encoded binary otherwise.
fn lambda_body(headers: &HeaderMap, bytes: Bytes) -> Body {
    if is_text(headers) {
        Body::Text(String::from_utf8_lossy(&bytes).into_owned())
    } else {
        Body::Binary(bytes.to_vec())
    }
}

/// lambda_http's rule for sending a body as text rather than base64.
fn is_text(headers: &HeaderMap) -> bool {
    if headers.contains_key(CONTENT_ENCODING) {
        return false;
    }
    let Some(content_type) = headers.get(CONTENT_TYPE) else {
        return true;
    };
    let content_type = content_type.to_str().unwrap_or_default();
    if TEXT_PREFIXES.iter().any(|p| content_type.starts_with(p)) {
        return true;
    }
    let mime = content_type.trim().split(';').next().unwrap_or_default();
    if TEXT_SUFFIXES.iter().any(|s| mime.ends_with(s)) {
        return true;
    }
    headers
        .get("x-lambda-http-content-encoding")
        .is_some_and(|v| v == "text")
}

fn request_too_large(protocol: &Protocol, bytes: usize) -> Response<Body> {
    let message = format!(
        "request body of {bytes} bytes exceeds the load balancer's 1 MB limit \
         ({ALB_MAX_REQUEST_BODY} bytes) for Lambda targets; send less per call, or compress \
         the request (grpc-encoding: gzip; wisp bridge does this for large requests)"
    );
    failure(
        protocol,
        tonic::Status::resource_exhausted(message),
        StatusCode::PAYLOAD_TOO_LARGE,
    )
}

fn response_too_large(protocol: &Protocol, bytes: usize, encoded: usize) -> Response<Body> {
    let message = format!(
        "response of {bytes} bytes ({encoded} bytes once encoded for the load balancer) \
         exceeds the load balancer's 1 MB limit ({ALB_MAX_RESPONSE_JSON} bytes) for Lambda \
         responses; request less per call (a smaller page or limit), or fetch the data in parts"
    );
    failure(
        protocol,
        tonic::Status::resource_exhausted(message),
        StatusCode::INTERNAL_SERVER_ERROR,
    )
}

/// A trailers-only gRPC status for gRPC requests; `http_status` with the message as text
/// otherwise.
fn failure(protocol: &Protocol, status: tonic::Status, http_status: StatusCode) -> Response<Body> {
    match protocol {
        Protocol::Grpc(content_type) => {
            let mut response = status.into_http::<Body>();
            response
                .headers_mut()
                .insert(CONTENT_TYPE, content_type.clone());
            response.extensions_mut().clear();
            response
        }
        Protocol::Http => {
            let mut response = Response::new(Body::Text(format!("{}\n", status.message())));
            *response.status_mut() = http_status;
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
    }
}

/// The client's address: the last entry of `X-Forwarded-For`, the one the load balancer
/// appends (the ones before it are the client's own claims).
fn client_addr(headers: &http::HeaderMap) -> Option<wisp_transport::gate::ClientAddr> {
    let last = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next_back()?;
    last.trim()
        .parse()
        .ok()
        .map(wisp_transport::gate::ClientAddr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn text_or_binary_like_lambda_http() {
        assert!(is_text(&headers(&[])));
        assert!(is_text(&headers(&[(
            "content-type",
            "text/plain; charset=utf-8"
        )])));
        assert!(is_text(&headers(&[("content-type", "application/json")])));
        assert!(is_text(&headers(&[(
            "content-type",
            "application/problem+json; x=y"
        )])));
        assert!(!is_text(&headers(&[(
            "content-type",
            "application/grpc-web+proto"
        )])));
        assert!(!is_text(&headers(&[(
            "content-type",
            "application/grpc-web-text"
        )])));
        assert!(!is_text(&headers(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip")
        ])));
    }

    #[test]
    fn accept_encoding_is_read_like_a_browser_sends_it() {
        assert!(accepts_gzip(&headers(&[(
            "accept-encoding",
            "gzip, deflate, br, zstd"
        )])));
        assert!(accepts_gzip(&headers(&[(
            "accept-encoding",
            "br;q=1.0, GZIP;q=0.5"
        )])));
        assert!(accepts_gzip(&headers(&[("accept-encoding", "*")])));
        assert!(!accepts_gzip(&headers(&[("accept-encoding", "gzip;q=0")])));
        assert!(!accepts_gzip(&headers(&[("accept-encoding", "identity")])));
        assert!(!accepts_gzip(&headers(&[])));
    }

    #[test]
    fn large_bodies_are_compressed_small_ones_left_alone() {
        use std::io::Read;
        let text = "a stage log line that repeats\n".repeat(1000);
        let mut h = headers(&[("content-type", "application/grpc-web+proto")]);
        let packed = compress(&mut h, Bytes::from(text.clone()));
        assert_eq!(h[CONTENT_ENCODING], "gzip");
        assert_eq!(h[VARY], "accept-encoding");
        assert!(packed.len() < text.len() / 10);
        let mut inflated = String::new();
        flate2::read::GzDecoder::new(packed.as_ref())
            .read_to_string(&mut inflated)
            .expect("gzip");
        assert_eq!(inflated, text);
        assert!(!is_text(&h), "a compressed body goes base64");

        let mut h = headers(&[("content-type", "application/grpc-web+proto")]);
        let small = compress(&mut h, Bytes::from_static(b"tiny"));
        assert_eq!(small.as_ref(), b"tiny");
        assert!(!h.contains_key(CONTENT_ENCODING));
    }

    #[test]
    fn health_checks_are_recognised_by_user_agent() {
        assert!(is_health_check(&headers(&[(
            "user-agent",
            "ELB-HealthChecker/2.0"
        )])));
        assert!(!is_health_check(&headers(&[(
            "user-agent",
            "grpc-go/1.60"
        )])));
        assert!(!is_health_check(&headers(&[])));
    }
}
