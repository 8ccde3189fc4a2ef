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
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("internal store error: {0}")]
    Internal(String),
}

impl StoreError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound(_))
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
