//! PipeCD services, transport-free and backend-free: a typed request and the
//! authenticated caller in, a typed response or a `ServiceError` out.

#[cfg(feature = "api")]
pub mod api;
pub mod auth_source;
pub mod error;
#[cfg(any(feature = "api", feature = "web"))]
pub mod hybrid;
pub mod ops;
#[cfg(feature = "piped")]
pub mod piped;
mod support;
#[cfg(feature = "web")]
pub mod web;

pub use error::{Reason, ServiceError};
