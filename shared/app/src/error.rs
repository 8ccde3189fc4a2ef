//! Why the control plane could not be put together. Messages name the file, secret,
//! variable, table, bucket or address at fault, never a secret's value.

use std::path::PathBuf;

use wisp_config::ConfigError;
use wisp_store::StoreError;

/// Why loading the configuration or the key, or opening the stores, failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A Lambda function was started with neither configuration variable set.
    #[error(
        "set {} (a Secrets Manager secret) or {} (a file) to the control-plane configuration",
        crate::sources::CONFIG_SECRET_ENV,
        crate::sources::CONFIG_FILE_ENV
    )]
    NoConfig,
    /// The configuration (or key) is malformed, unsupported, or its file unreadable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A Secrets Manager secret could not be read or holds no valid value.
    #[cfg(feature = "aws")]
    #[error("{0}")]
    Secret(#[from] wisp_store_aws::secrets::SecretError),
    /// The encryption key is needed (console sessions are signed with it) but none was
    /// configured.
    #[error(
        "set {} (a Secrets Manager secret) or {} (a file): console sessions are signed with the encryption key",
        crate::sources::ENCRYPTION_KEY_SECRET_ENV,
        crate::sources::ENCRYPTION_KEY_FILE_ENV
    )]
    NoEncryptionKey,
    /// The configuration names a store or a source that this build, or this operation,
    /// does not handle.
    #[error("{0}")]
    Unsupported(String),
    /// The ElastiCache cache the configuration names by id cannot be used as configured
    /// (one line: the cause and the fix).
    #[cfg(feature = "aws")]
    #[error(transparent)]
    Cache(#[from] wisp_store_redis::elasticache::DiscoveryError),
    /// A store refused or could not be reached.
    #[error("{what}: {source}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
    /// A local file or directory could not be created or read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl AppError {
    pub(crate) fn store(what: impl Into<String>, source: StoreError) -> Self {
        AppError::Store {
            what: what.into(),
            source,
        }
    }

    /// Whether the operator can fix it by changing the configuration, a flag or a secret
    /// (the CLI exits 2), as opposed to an outage or a refusal worth retrying (exit 1).
    pub fn is_operator_error(&self) -> bool {
        match self {
            AppError::NoConfig
            | AppError::Config(_)
            | AppError::NoEncryptionKey
            | AppError::Unsupported(_) => true,
            #[cfg(feature = "aws")]
            AppError::Secret(e) => {
                use wisp_store_aws::secrets::SecretError as S;
                matches!(
                    e,
                    S::NotFound { .. } | S::Empty { .. } | S::NotUtf8 { .. } | S::Invalid(_)
                )
            }
            #[cfg(feature = "aws")]
            AppError::Cache(e) => !e.is_transient(),
            AppError::Store { source, .. } => matches!(
                source,
                StoreError::NotFound(_) | StoreError::InvalidArgument(_)
            ),
            AppError::Io { .. } => false,
        }
    }

    /// Whether trying again later may help (a store was unreachable or throttling).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            AppError::Store {
                source: StoreError::Unavailable { .. },
                ..
            }
        )
    }
}

#[cfg(feature = "aws")]
impl From<wisp_store_aws::open::OpenError> for AppError {
    fn from(err: wisp_store_aws::open::OpenError) -> Self {
        use wisp_store_aws::open::OpenError as O;
        match err {
            O::WrongTypes(m) => AppError::Unsupported(m),
            O::Config(e) => AppError::Config(e),
            O::Store { what, source } => AppError::Store { what, source },
        }
    }
}
