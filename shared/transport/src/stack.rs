//! The one order of the HTTP layers in front of Wisp's tonic routes. `wisp serve` (through
//! `wisp_app::server`, below its connection bounds), the benches, the in-process test
//! server and the Lambda functions (`wisp_lambda::stack`, inside the ALB adapter) all
//! stack them with [`HttpLayers`], so a layer added here is added everywhere, in the same
//! place. Outermost first:
//!
//! 1. [`EdgeLayer`]: `/healthz`, upstream's legacy `/pipe.api.service.*` paths, OTLP/HTTP
//!    (`/v1/traces`, turned into the gRPC `TraceService/Export` call);
//! 2. the console (`wisp_console::ConsoleLayer`) where the process serves it: every path
//!    that is not a gRPC method (it must see plain HTTP/1 requests before gRPC-web does,
//!    which answers them 400);
//! 3. [`GrpcWebLayer`] where the process serves gRPC: gRPC-web turned into gRPC;
//!
//! then the routes, each service's gate inside them (credentials, call rate, request
//! bounds, the in-flight turn).

use tonic_web::GrpcWebLayer;
use tower::Layer;
use tower::layer::util::Identity;

use crate::edge::{EdgeLayer, EdgeService, Health};

/// Wisp's HTTP layers, in their one order (see the module). `C` is the console's layer
/// (or [`Identity`] without a console), `G` the gRPC-web layer (or [`Identity`] for a
/// stack that routes no gRPC, the Lambda HTTP function's).
#[derive(Debug, Clone)]
pub struct HttpLayers<C = Identity, G = GrpcWebLayer> {
    console: C,
    grpc_web: G,
    health: Health,
}

impl HttpLayers {
    /// For gRPC routes without the console (the Lambda gRPC functions).
    pub fn grpc() -> Self {
        HttpLayers {
            console: Identity::new(),
            grpc_web: GrpcWebLayer::new(),
            health: Health::default(),
        }
    }
}

impl HttpLayers<Identity, Identity> {
    /// For a stack that routes no gRPC (the Lambda HTTP function).
    pub fn no_grpc() -> Self {
        HttpLayers {
            console: Identity::new(),
            grpc_web: Identity::new(),
            health: Health::default(),
        }
    }
}

impl<G> HttpLayers<Identity, G> {
    /// The same stack with the console's layer in its place.
    pub fn with_console<C>(self, console: C) -> HttpLayers<C, G> {
        HttpLayers {
            console,
            grpc_web: self.grpc_web,
            health: self.health,
        }
    }
}

impl<C, G> HttpLayers<C, G> {
    /// The same stack with its health checks following `health` (a server that drains).
    pub fn with_health(mut self, health: Health) -> Self {
        self.health = health;
        self
    }
}

/// What [`HttpLayers`] makes of `S`.
pub type HttpStack<C, G, S> = EdgeService<<C as Layer<<G as Layer<S>>::Service>>::Service>;

impl<S, C, G> Layer<S> for HttpLayers<C, G>
where
    G: Layer<S>,
    C: Layer<G::Service>,
{
    type Service = HttpStack<C, G, S>;

    fn layer(&self, inner: S) -> Self::Service {
        EdgeLayer::new(self.health.clone()).layer(self.console.layer(self.grpc_web.layer(inner)))
    }
}
