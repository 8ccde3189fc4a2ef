//! Errors. The `Display` texts of the header-level variants are upstream's own (they reach
//! the client); everything else is an [`AuthError::Unauthenticated`] whose [`Reason`] is
//! for the server log only (the client sees "Unauthenticated", as upstream).

use std::fmt;
use std::sync::Arc;

use crate::credentials::CredentialsType;

/// Why a request could not be authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `authorization` value at all.
    #[error("missing credentials in authorization")]
    MissingCredentials,
    /// No `cookie` value at all (web console calls).
    #[error("missing cookie")]
    MissingCookie,
    /// The `authorization` value is not `<TYPE> <data>`.
    #[error("credentials is malformed")]
    MalformedCredentials,
    /// `<TYPE>` is none of `ID-TOKEN`, `PIPED-TOKEN`, `API-KEY`.
    #[error("unsupported credentials type")]
    UnsupportedCredentialsType,
    /// The credentials were read but are not good: wrong type for the service, malformed
    /// token, unknown or disabled principal, wrong key. Log the reason; tell the client
    /// only "Unauthenticated".
    #[error("unauthenticated: {0}")]
    Unauthenticated(Reason),
    /// The source of truth could not be read; the credentials may well be good. The
    /// cause (the store's error, the signer's) is kept as the source, for the log.
    #[error("unable to verify credentials: {0}")]
    Unavailable(#[source] SourceError),
}

impl AuthError {
    /// The message upstream sends to the client for this error.
    pub fn client_message(&self) -> &'static str {
        match self {
            AuthError::MissingCredentials => "missing credentials in authorization",
            AuthError::MissingCookie => "missing cookie",
            AuthError::MalformedCredentials => "credentials is malformed",
            AuthError::UnsupportedCredentialsType => "unsupported credentials type",
            AuthError::Unauthenticated(_) => "Unauthenticated",
            AuthError::Unavailable(_) => "Unable to verify credentials right now",
        }
    }
}

/// Which part of a piped token was empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipedTokenPart {
    /// Not exactly three comma-separated parts.
    Shape,
    ProjectId,
    PipedId,
    PipedKey,
}

/// The server-side reason behind [`AuthError::Unauthenticated`]. Never carries a key, a
/// secret or a token; ids are fine to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The service expects another credential type.
    WrongCredentialsType {
        expected: CredentialsType,
        got: CredentialsType,
    },
    MalformedPipedToken(PipedTokenPart),
    MalformedApiKey,
    /// A cookie header was present but had no `token=` entry (or an empty one).
    MissingTokenCookie,
    ProjectNotFound {
        project_id: String,
        piped_id: String,
    },
    PipedNotFound {
        piped_id: String,
    },
    PipedProjectMismatch {
        piped_id: String,
        expected: String,
        got: String,
    },
    PipedDisabled {
        piped_id: String,
    },
    /// No stored key hash matches (or the piped has no key).
    PipedKeyMismatch {
        piped_id: String,
    },
    ApiKeyNotFound {
        id: String,
    },
    ApiKeyDisabled {
        id: String,
    },
    ApiKeyMismatch {
        id: String,
    },
    /// The session token (JWT) is malformed, badly signed, expired or not ours.
    InvalidSessionToken(String),
    /// Too many wrong keys for this piped or API key lately; a new key was not checked.
    TooManyFailures {
        id: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::WrongCredentialsType { expected, got } => {
                write!(f, "wrong credentials type: expected {expected}, got {got}")
            }
            Reason::MalformedPipedToken(part) => match part {
                PipedTokenPart::Shape => f.write_str("malformed piped token"),
                PipedTokenPart::ProjectId => {
                    f.write_str("malformed piped token: projectID was empty")
                }
                PipedTokenPart::PipedId => f.write_str("malformed piped token: pipedID was empty"),
                PipedTokenPart::PipedKey => {
                    f.write_str("malformed piped token: pipedKey was empty")
                }
            },
            Reason::MalformedApiKey => f.write_str("malformed api key"),
            Reason::MissingTokenCookie => f.write_str("token does not exist in cookie"),
            Reason::ProjectNotFound {
                project_id,
                piped_id,
            } => write!(f, "project {project_id} for piped {piped_id} was not found"),
            Reason::PipedNotFound { piped_id } => write!(f, "piped {piped_id} was not found"),
            Reason::PipedProjectMismatch {
                piped_id,
                expected,
                got,
            } => write!(
                f,
                "the project of piped {piped_id} is not matched, expected={expected}, got={got}"
            ),
            Reason::PipedDisabled { piped_id } => {
                write!(f, "piped {piped_id} was already disabled")
            }
            Reason::PipedKeyMismatch { piped_id } => {
                write!(f, "the key of piped {piped_id} is not matched")
            }
            Reason::ApiKeyNotFound { id } => write!(f, "api key {id} was not found"),
            Reason::ApiKeyDisabled { id } => write!(f, "the api key {id} was already disabled"),
            Reason::ApiKeyMismatch { id } => write!(f, "invalid api key {id}"),
            Reason::InvalidSessionToken(why) => write!(f, "invalid session token: {why}"),
            Reason::TooManyFailures { id } => {
                write!(
                    f,
                    "too many wrong keys for {id} lately; this one was not checked"
                )
            }
        }
    }
}

impl From<Reason> for AuthError {
    fn from(reason: Reason) -> Self {
        AuthError::Unauthenticated(reason)
    }
}

/// A failure of a [`PipedKeySource`](crate::PipedKeySource) or
/// [`ApiKeyAuthSource`](crate::ApiKeyAuthSource) to read its stores (or of the server to
/// sign a token). It becomes [`AuthError::Unavailable`]; the message and the error
/// behind it are logged, never sent to the client.
///
/// The cause is shared (`Arc`) so that the error stays `Clone` like [`AuthError`], and
/// `source()` answers the cause itself (not the `Arc`), so that the chain can be walked
/// and downcast to the backend's own error.
#[derive(Debug, Clone)]
pub struct SourceError {
    message: String,
    cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl SourceError {
    /// A failure with no error behind it.
    pub fn new(message: impl fmt::Display) -> Self {
        SourceError {
            message: message.to_string(),
            cause: None,
        }
    }

    /// `context: cause`, with `cause` kept as the source.
    pub fn caused_by(
        context: impl fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        SourceError {
            message: format!("{context}: {cause}"),
            cause: Some(Arc::new(cause)),
        }
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Two failures are the same when they read the same (their causes included): what
/// tests compare.
impl PartialEq for SourceError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
            && self.cause.as_ref().map(ToString::to_string)
                == other.cause.as_ref().map(ToString::to_string)
    }
}

impl Eq for SourceError {}

impl From<SourceError> for AuthError {
    fn from(err: SourceError) -> Self {
        AuthError::Unavailable(err)
    }
}

/// Hashing a new secret failed (bad cost, secret longer than bcrypt's 72 bytes, no OS
/// randomness); bcrypt's own error, when there is one, is the source.
#[derive(Debug, thiserror::Error)]
#[error("unable to hash secret: {message}")]
pub struct HashError {
    message: String,
    #[source]
    cause: Option<bcrypt::BcryptError>,
}

impl HashError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        HashError {
            message: message.into(),
            cause: None,
        }
    }

    pub(crate) fn bcrypt(cause: bcrypt::BcryptError) -> Self {
        HashError {
            message: cause.to_string(),
            cause: Some(cause),
        }
    }
}
