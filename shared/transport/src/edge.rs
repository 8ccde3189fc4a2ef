//! The HTTP edge every Wisp endpoint shares (`wisp serve` and the Lambda functions):
//! `GET /healthz`, upstream's legacy `/pipe.api.service.<pkg>.<Service>/` prefix
//! rewritten to `/grpc.service.<pkg>.<Service>/` before routing, and OTLP/HTTP's
//! `/v1/traces` turned into the gRPC `TraceService/Export` call and its answer back
//! ([`crate::otlp_http`]).

use std::task::{Context, Poll};

use http::{Request, Response, StatusCode, Uri};
use tower::{Layer, Service};

const LEGACY_PREFIX: &str = "/pipe.api.service.";
const CURRENT_PREFIX: &str = "/grpc.service.";
pub const HEALTH_PATH: &str = "/healthz";

#[derive(Debug, Clone, Copy, Default)]
pub struct EdgeLayer;

impl<S> Layer<S> for EdgeLayer {
    type Service = EdgeService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        EdgeService { inner }
    }
}

#[derive(Debug, Clone)]
pub struct EdgeService<S> {
    inner: S,
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
        if req.uri().path() == HEALTH_PATH {
            let allowed = req.method() == http::Method::GET || req.method() == http::Method::HEAD;
            let body = if allowed { "ok" } else { "method not allowed" };
            let mut resp = Response::new(tonic::body::Body::new(String::from(body)));
            if !allowed {
                *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                resp.headers_mut().insert(
                    http::header::ALLOW,
                    http::HeaderValue::from_static("GET, HEAD"),
                );
            }
            resp.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return Box::pin(async move { Ok(resp) });
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
