//! [`ConsoleLayer`]: in front of the gRPC routes, sends every request that is not a gRPC
//! (or gRPC-web) call and not `/healthz` to the [`Console`].

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use tower::{Layer, Service};

use crate::{Console, MAX_FORM_BYTES, plain};

#[derive(Clone)]
pub struct ConsoleLayer {
    console: Arc<Console>,
}

impl std::fmt::Debug for ConsoleLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleLayer").finish_non_exhaustive()
    }
}

impl ConsoleLayer {
    pub fn new(console: Arc<Console>) -> Self {
        ConsoleLayer { console }
    }
}

impl<S> Layer<S> for ConsoleLayer {
    type Service = ConsoleService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ConsoleService {
            inner,
            console: self.console.clone(),
        }
    }
}

#[derive(Clone)]
pub struct ConsoleService<S> {
    inner: S,
    console: Arc<Console>,
}

impl<S> std::fmt::Debug for ConsoleService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleService").finish_non_exhaustive()
    }
}

impl<S, B> Service<Request<B>> for ConsoleService<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
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
        if !Console::handles(req.uri().path()) {
            return Box::pin(self.inner.call(req));
        }
        let console = self.console.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let resp = match Limited::new(body, MAX_FORM_BYTES).collect().await {
                Ok(collected) => {
                    console
                        .handle(Request::from_parts(parts, collected.to_bytes()))
                        .await
                }
                Err(_) => plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
            };
            let (parts, bytes) = resp.into_parts();
            Ok(Response::from_parts(
                parts,
                tonic::body::Body::new(Full::new(bytes)),
            ))
        })
    }
}
