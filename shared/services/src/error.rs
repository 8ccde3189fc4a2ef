//! The one error type every service returns. Its variants are gRPC's codes; the
//! transport maps them to statuses in exactly one place, and logs there the cause that a
//! failure below the service (a store, a task) carries.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use wisp_store::StoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceError {
    InvalidArgument(String),
    NotFound(String),
    AlreadyExists(String),
    PermissionDenied(String),
    FailedPrecondition(String),
    ResourceExhausted(String),
    Unimplemented(String),
    /// Trying later may help (a store was unreachable or throttling).
    Unavailable(Reason),
    /// The caller's credentials ended (a console session logged out, or its static admin
    /// changed).
    Unauthenticated(String),
    /// The message is safe to show; the cause is logged at the edge.
    Internal(Reason),
}

/// What a client is told of a failure, and the lower-level error behind it: kept (as
/// [`Error::source`]) for the log at the edge, never sent.
#[derive(Clone)]
pub struct Reason {
    message: String,
    cause: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

impl Reason {
    /// `message` for the client, `cause` for the log.
    pub fn new(message: impl Into<String>, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Reason {
            message: message.into(),
            cause: Some(Arc::from(cause.into())),
        }
    }

    /// What the client is told.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error behind it, if any.
    pub fn cause(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

impl From<String> for Reason {
    fn from(message: String) -> Self {
        Reason {
            message,
            cause: None,
        }
    }
}

impl From<&str> for Reason {
    fn from(message: &str) -> Self {
        Reason::from(message.to_string())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Reason");
        d.field("message", &self.message);
        if let Some(cause) = &self.cause {
            d.field("cause", cause);
        }
        d.finish()
    }
}

/// Two failures are the same to a client when their messages are: the cause is only
/// for the log.
impl PartialEq for Reason {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for Reason {}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::InvalidArgument(m)
            | ServiceError::NotFound(m)
            | ServiceError::AlreadyExists(m)
            | ServiceError::PermissionDenied(m)
            | ServiceError::FailedPrecondition(m)
            | ServiceError::ResourceExhausted(m)
            | ServiceError::Unimplemented(m)
            | ServiceError::Unauthenticated(m) => f.write_str(m),
            ServiceError::Unavailable(r) | ServiceError::Internal(r) => f.write_str(&r.message),
        }
    }
}

impl Error for ServiceError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ServiceError::Unavailable(r) | ServiceError::Internal(r) => {
                r.cause().map(|e| e as &(dyn Error + 'static))
            }
            _ => None,
        }
    }
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
            err @ StoreError::Unavailable { .. } => ServiceError::Unavailable(Reason::new(
                format!("Failed to {what}: store unavailable"),
                err,
            )),
            err @ (StoreError::Conflict(_) | StoreError::Internal { .. }) => {
                ServiceError::Internal(Reason::new(format!("Failed to {what}"), err))
            }
        }
    }

    /// A failure below the service that a retry will not fix: the client is told
    /// `message`, the edge logs `cause`.
    pub fn internal(
        message: impl Into<String>,
        cause: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> ServiceError {
        ServiceError::Internal(Reason::new(message, cause))
    }

    /// A failure below the service that a retry may fix: the client is told `message`,
    /// the edge logs `cause`.
    pub fn unavailable(
        message: impl Into<String>,
        cause: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> ServiceError {
        ServiceError::Unavailable(Reason::new(message, cause))
    }
}

impl From<wisp_model::validate::ValidationError> for ServiceError {
    fn from(e: wisp_model::validate::ValidationError) -> Self {
        ServiceError::InvalidArgument(format!("invalid request: {e}"))
    }
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's message names only the action; the cause stays below it for the log.
    #[test]
    fn a_store_failure_keeps_its_cause_for_the_log_only() {
        let io = std::io::Error::other("database is locked");
        let err = ServiceError::store(
            StoreError::internal_from("SQLite put application a-1", io),
            "update application a-1",
        );
        assert_eq!(err.to_string(), "Failed to update application a-1");
        let store = err
            .source()
            .and_then(|e| e.downcast_ref::<StoreError>())
            .unwrap_or_else(|| panic!("no store error below {err:?}"));
        let root = store
            .source()
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .unwrap_or_else(|| panic!("no io error below {store:?}"));
        assert_eq!(root.to_string(), "database is locked");
        assert_eq!(
            wisp_store::error::chain(&err).to_string(),
            "Failed to update application a-1: internal store error: SQLite put application \
             a-1: database is locked"
        );
    }
}
