//! PipeCD services, transport-free and backend-free: a typed request and the
//! authenticated caller in, a typed response or a `ServiceError` out.

pub mod auth_source;
pub mod error;
#[cfg(feature = "piped")]
pub mod piped;

pub use error::ServiceError;
