//! The CLI's one error type: a user's mistake (exit status 2) or a failure (exit 1).

/// What went wrong, and whether it was the user's mistake (exit 2) or not (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    /// Written with its whole chain of causes (a store's context, the backend's own
    /// error), each once.
    #[error("{}", wisp_telemetry::chain(.0.as_ref()))]
    Failure(#[from] anyhow::Error),
}

/// A domain operation's refusal is the user's mistake; anything else is a failure.
impl From<wisp_services::ServiceError> for CliError {
    fn from(err: wisp_services::ServiceError) -> Self {
        use wisp_services::ServiceError as E;
        match err {
            E::InvalidArgument(m)
            | E::NotFound(m)
            | E::AlreadyExists(m)
            | E::PermissionDenied(m)
            | E::FailedPrecondition(m) => CliError::Usage(m),
            other => CliError::Failure(anyhow::Error::new(other)),
        }
    }
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failure(_) => 1,
        }
    }
}

/// A configuration, secret or flag the operator can fix is their mistake; an outage is a
/// failure.
impl From<wisp_app::AppError> for CliError {
    fn from(err: wisp_app::AppError) -> Self {
        if err.is_operator_error() {
            CliError::Usage(err.to_string())
        } else {
            CliError::Failure(anyhow::Error::new(err))
        }
    }
}
