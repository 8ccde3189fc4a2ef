//! The edge between the network and the services: credentials from gRPC metadata,
//! the one mapping from service and auth errors to gRPC statuses, the HTTP layer that
//! serves `/healthz`, rewrites upstream's legacy `/pipe.api.service.*` paths and speaks
//! gRPC-web and OTLP/HTTP, and one tonic adapter per service.

#[cfg(feature = "api")]
pub mod api;
pub mod audit;
pub mod edge;
pub mod gate;
pub mod limits;
pub mod load;
pub mod otlp_http;
#[cfg(feature = "piped")]
pub mod piped;
pub mod rate;
pub mod stack;
pub mod status;
#[cfg(feature = "trace")]
pub mod trace;
#[cfg(feature = "web")]
pub mod web;

pub use edge::{EdgeLayer, EdgeService, Health};
pub use stack::HttpLayers;
