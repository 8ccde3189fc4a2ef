//! The one error type every service returns. Its variants are gRPC's codes; the
//! transport maps them to statuses in exactly one place.

use thiserror::Error;
use wisp_store::StoreError;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ServiceError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{0}")]
    Unimplemented(String),
    #[error("{0}")]
    Unavailable(String),
    /// The caller's credentials ended (a console session logged out, or its static admin
    /// changed).
    #[error("{0}")]
    Unauthenticated(String),
    /// The message is safe to show; the cause is logged where it happened.
    #[error("{0}")]
    Internal(String),
}

impl ServiceError {
    /// Upstream's `gRPCStoreError`: a store failure while trying to `what`
    /// (e.g. "update deployment d-1").
    pub fn store(err: StoreError, what: &str) -> ServiceError {
        match err {
            StoreError::NotFound(_) => {
                ServiceError::NotFound(format!("Entity was not found to {what}"))
            }
            StoreError::InvalidArgument(msg) => {
                ServiceError::InvalidArgument(format!("Invalid argument to {what}: {msg}"))
            }
            StoreError::AlreadyExists(_) => {
                ServiceError::AlreadyExists(format!("Entity already exists to {what}"))
            }
            StoreError::FailedPrecondition(msg) => ServiceError::FailedPrecondition(msg),
            StoreError::InvalidCursor => {
                ServiceError::InvalidArgument(format!("Invalid cursor to {what}"))
            }
            StoreError::Unavailable(msg) => {
                tracing::warn!(error = %msg, "store unavailable while trying to {what}");
                ServiceError::Unavailable(format!("Failed to {what}: store unavailable"))
            }
            StoreError::Conflict(msg) | StoreError::Internal(msg) => {
                tracing::error!(error = %msg, "store failure while trying to {what}");
                ServiceError::Internal(format!("Failed to {what}"))
            }
        }
    }
}

impl From<wisp_model::validate::ValidationError> for ServiceError {
    fn from(e: wisp_model::validate::ValidationError) -> Self {
        ServiceError::InvalidArgument(format!("invalid request: {e}"))
    }
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
