//! What a store operation can fail with, the backend's own error kept as the source.

use thiserror::Error;

/// What a store operation can fail with. Backends map their own errors onto these;
/// the service layer maps these onto gRPC codes (once, at the edge).
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The optimistic-concurrency check failed: someone else wrote first.
    #[error("conflicting write: {0}")]
    Conflict(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("invalid cursor")]
    InvalidCursor,
    /// A rule of the domain refused the change (upstream's `ErrUserDefined`).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A retry later may succeed: the backend is throttling, unreachable or failing
    /// over.
    #[error("store unavailable: {context}")]
    Unavailable {
        /// What was being done (`DynamoDB GetItem application a-1`).
        context: String,
        /// The backend's own error (the AWS SDK's, SQLite's, Redis's, an io error).
        #[source]
        source: Option<BoxError>,
    },
    /// The backend failed in a way a retry will not fix, or a stored record is corrupt.
    #[error("internal store error: {context}")]
    Internal {
        /// What was being done, or what is wrong with the record.
        context: String,
        /// The backend's own error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
}

/// A backend's error kept whole, so that its code stays reachable (`downcast_ref`) and
/// its message reaches the log at the edge ([`wisp_telemetry::chain`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

pub use wisp_telemetry::{ErrorChain, chain};

impl StoreError {
    /// An internal failure with no lower-level error (a corrupt record, a broken
    /// invariant).
    pub fn internal(context: impl Into<String>) -> Self {
        StoreError::Internal {
            context: context.into(),
            source: None,
        }
    }

    /// An internal failure caused by `source` (a backend or io error), kept whole.
    pub fn internal_from(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Internal {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    /// The store cannot be reached or is busy; trying later may help.
    pub fn unavailable(context: impl Into<String>) -> Self {
        StoreError::Unavailable {
            context: context.into(),
            source: None,
        }
    }

    /// The store cannot be reached or is busy because of `source`, kept whole.
    pub fn unavailable_from(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Unavailable {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound(_))
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
