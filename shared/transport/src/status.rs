//! Errors become gRPC statuses here and nowhere else, and the causes of failures are
//! logged here.

use tonic::{Code, Status};
use wisp_auth::AuthError;
use wisp_services::ServiceError;

pub fn from_service_error(err: ServiceError) -> Status {
    let code = match &err {
        ServiceError::InvalidArgument(_) => Code::InvalidArgument,
        ServiceError::NotFound(_) => Code::NotFound,
        ServiceError::AlreadyExists(_) => Code::AlreadyExists,
        ServiceError::PermissionDenied(_) => Code::PermissionDenied,
        ServiceError::FailedPrecondition(_) => Code::FailedPrecondition,
        ServiceError::ResourceExhausted(_) => Code::ResourceExhausted,
        ServiceError::Unimplemented(_) => Code::Unimplemented,
        ServiceError::Unavailable(_) => Code::Unavailable,
        ServiceError::Unauthenticated(_) => Code::Unauthenticated,
        ServiceError::Internal(_) => Code::Internal,
    };
    // The client gets the mapped code and the service's message, never the cause; the
    // log gets the whole chain (the store's context, the backend's own error code).
    match &err {
        ServiceError::Internal(_) => {
            tracing::error!(error = %wisp_telemetry::chain(&err), "request failed");
        }
        ServiceError::Unavailable(_) => {
            tracing::warn!(error = %wisp_telemetry::chain(&err), "request failed, may succeed later");
        }
        _ => {}
    }
    Status::new(code, err.to_string())
}

/// Clients learn only upstream's message; the server-side reason is logged here.
pub fn from_auth_error(err: AuthError) -> Status {
    match &err {
        AuthError::Unavailable(_) => {
            tracing::warn!(error = %wisp_telemetry::chain(&err), "credential check could not reach the store");
            Status::unavailable(err.client_message())
        }
        AuthError::Unauthenticated(reason) => {
            tracing::info!(?reason, "rejected credentials");
            Status::unauthenticated(err.client_message())
        }
        _ => Status::unauthenticated(err.client_message()),
    }
}
