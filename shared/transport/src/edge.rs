//! The HTTP edge every Wisp endpoint shares (`wisp serve` and the Lambda functions):
//! `GET /healthz` and the gRPC health check (`grpc.health.v1.Health/Check`, what a load
//! balancer's gRPC target group asks), both failing while the server drains
//! ([`Health::set_draining`]), upstream's legacy `/pipe.api.service.<pkg>.<Service>/` prefix
//! rewritten to `/grpc.service.<pkg>.<Service>/` before routing, and OTLP/HTTP's
//! `/v1/traces` turned into the gRPC `TraceService/Export` call and its answer back
//! ([`crate::otlp_http`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode, Uri};
use tower::{Layer, Service};

const LEGACY_PREFIX: &str = "/pipe.api.service.";
const CURRENT_PREFIX: &str = "/grpc.service.";
pub const HEALTH_PATH: &str = "/healthz";
/// The standard gRPC health check's method (grpc.health.v1), answered for every service.
pub const GRPC_HEALTH_PATH: &str = "/grpc.health.v1.Health/Check";

/// Whether the server still takes new work: shared by its edge (which answers the health
/// checks from it) and its shutdown (which marks it draining before it stops listening,
/// so that a load balancer sends the next connections elsewhere first).
#[derive(Debug, Clone, Default)]
pub struct Health {
    draining: Arc<AtomicBool>,
}

impl Health {
    /// From now on both health checks fail; calls are still served.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, Default)]
pub struct EdgeLayer {
    health: Health,
}

impl EdgeLayer {
    /// An edge whose health checks follow `health`.
    pub fn new(health: Health) -> Self {
        EdgeLayer { health }
    }
}

impl<S> Layer<S> for EdgeLayer {
    type Service = EdgeService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        EdgeService {
            inner,
            health: self.health.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct EdgeService<S> {
    inner: S,
    health: Health,
}

/// `GET /healthz`: 200 while serving, 503 while draining.
fn http_health<B>(req: &Request<B>, health: &Health) -> Response<tonic::body::Body> {
    let allowed = req.method() == http::Method::GET || req.method() == http::Method::HEAD;
    let (status, body) = match (allowed, health.is_draining()) {
        (false, _) => (StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        (true, false) => (StatusCode::OK, "ok"),
        (true, true) => (StatusCode::SERVICE_UNAVAILABLE, "draining"),
    };
    let mut resp = Response::new(tonic::body::Body::new(String::from(body)));
    *resp.status_mut() = status;
    if !allowed {
        resp.headers_mut().insert(
            http::header::ALLOW,
            http::HeaderValue::from_static("GET, HEAD"),
        );
    }
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// `grpc.health.v1.Health/Check`, whatever service the request names: `SERVING` with
/// status OK while serving; `UNAVAILABLE` while draining (a load balancer's matcher and a
/// Kubernetes gRPC probe both take a status other than OK as a failed check).
fn grpc_health(health: &Health) -> Response<tonic::body::Body> {
    if health.is_draining() {
        return tonic::Status::unavailable("draining").into_http();
    }
    // HealthCheckResponse { status: SERVING (1) }: field 1, varint 1; one uncompressed
    // gRPC message, then the trailers.
    const SERVING: [u8; 7] = [0, 0, 0, 0, 2, 0x08, 0x01];
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let body = http_body_util::BodyExt::with_trailers(
        http_body_util::Full::new(bytes::Bytes::from_static(&SERVING)),
        std::future::ready(Some(Ok(trailers))),
    );
    let mut resp = Response::new(tonic::body::Body::new(body));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    resp
}

/// `Some(new path and query)` when `uri` uses the legacy service prefix.
pub fn rewrite_legacy_path(uri: &Uri) -> Option<String> {
    let rest = uri.path().strip_prefix(LEGACY_PREFIX)?;
    let mut rewritten = format!("{CURRENT_PREFIX}{rest}");
    if let Some(q) = uri.query() {
        rewritten.push('?');
        rewritten.push_str(q);
    }
    Some(rewritten)
}

/// Every body is handed on as tonic's (no copy: a tonic body, `wisp serve`'s, is passed
/// as it is), so that an OTLP/HTTP request can be handed on as a gRPC one.
impl<S, B> Service<Request<B>> for EdgeService<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        match req.uri().path() {
            HEALTH_PATH => {
                let resp = http_health(&req, &self.health);
                return Box::pin(std::future::ready(Ok(resp)));
            }
            GRPC_HEALTH_PATH if req.method() == http::Method::POST => {
                let resp = grpc_health(&self.health);
                return Box::pin(std::future::ready(Ok(resp)));
            }
            _ => {}
        }
        let mut req = req.map(tonic::body::Body::new);
        if req.uri().path() == crate::otlp_http::PATH {
            return match crate::otlp_http::to_grpc(req) {
                Ok(grpc) => {
                    let call = self.inner.call(grpc);
                    Box::pin(async move { Ok(crate::otlp_http::from_grpc(call.await?).await) })
                }
                Err(refused) => Box::pin(std::future::ready(Ok(*refused))),
            };
        }
        if let Some(path) = rewrite_legacy_path(req.uri()) {
            let mut parts = req.uri().clone().into_parts();
            if let Ok(pq) = path.parse() {
                parts.path_and_query = Some(pq);
                if let Ok(uri) = Uri::from_parts(parts) {
                    *req.uri_mut() = uri;
                }
            }
        }
        Box::pin(self.inner.call(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_paths_are_rewritten() {
        let uri: Uri = "/pipe.api.service.pipedservice.PipedService/ReportStat"
            .parse()
            .unwrap();
        assert_eq!(
            rewrite_legacy_path(&uri).as_deref(),
            Some("/grpc.service.pipedservice.PipedService/ReportStat")
        );
        let uri: Uri = "/grpc.service.pipedservice.PipedService/ReportStat"
            .parse()
            .unwrap();
        assert_eq!(rewrite_legacy_path(&uri), None);
    }
}
