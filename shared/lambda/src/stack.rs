//! The service stacks the functions hand to `lambda_http::run`: `wisp serve`'s layers, in
//! their one order ([`HttpLayers`]: the edge, the console where the function serves it,
//! gRPC-web where it routes gRPC), inside the ALB adapter.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response, StatusCode};
use tonic::service::Routes;
use tonic_web::GrpcWebService;
use tower::{Layer, Service};
use wisp_transport::{EdgeService, HttpLayers};

use crate::alb::AlbService;

/// The gRPC stack for one or more tonic services.
pub type GrpcStack = AlbService<EdgeService<GrpcWebService<Routes>>>;

/// The stack of the HTTP function: `/healthz` now; everything else is not found.
pub type HttpStack = AlbService<EdgeService<NotFound>>;

/// `routes` (e.g. `Routes::new(PipedGrpc::new(..).into_server())`) behind gRPC-web, the
/// edge and the ALB adapter.
pub fn grpc(routes: Routes) -> GrpcStack {
    AlbService::new(HttpLayers::grpc().layer(routes.prepare()))
}

/// The HTTP function's stack without the console: `/healthz` only.
pub fn http() -> HttpStack {
    AlbService::new(HttpLayers::no_grpc().layer(NotFound))
}

/// The HTTP function's stack with the console: `/healthz`, `/auth/*` and its static
/// files.
#[cfg(feature = "web")]
pub type ConsoleStack = AlbService<EdgeService<wisp_console::ConsoleService<NotFound>>>;

#[cfg(feature = "web")]
pub fn console(console: std::sync::Arc<wisp_console::Console>) -> ConsoleStack {
    let layers = HttpLayers::no_grpc().with_console(wisp_console::ConsoleLayer::new(console));
    AlbService::new(layers.layer(NotFound))
}

/// Answers 404 to everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NotFound;

impl<B> Service<Request<B>> for NotFound {
    type Response = Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let body = format!("not found: {}\n", req.uri().path());
        let mut response = Response::new(tonic::body::Body::new(body));
        *response.status_mut() = StatusCode::NOT_FOUND;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        std::future::ready(Ok(response))
    }
}
