//! Errors. The `Display` texts of the header-level variants are upstream's own (they reach
//! the client); everything else is an [`AuthError::Unauthenticated`] whose [`Reason`] is
//! for the server log only (the client sees "Unauthenticated", as upstream).

use std::fmt;

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
    /// The source of truth could not be read; the credentials may well be good.
    #[error("unable to verify credentials: {0}")]
    Unavailable(String),
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
/// [`ApiKeyAuthSource`](crate::ApiKeyAuthSource) to read its stores. It becomes
/// [`AuthError::Unavailable`]; the message is logged, never sent to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

impl SourceError {
    pub fn new(message: impl fmt::Display) -> Self {
        SourceError(message.to_string())
    }
}

impl From<SourceError> for AuthError {
    fn from(err: SourceError) -> Self {
        AuthError::Unavailable(err.0)
    }
}

/// Hashing a new secret failed (bad cost, secret longer than bcrypt's 72 bytes, no OS
/// randomness).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to hash secret: {0}")]
pub struct HashError(pub String);
