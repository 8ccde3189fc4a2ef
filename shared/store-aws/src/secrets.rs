//! Loading the control-plane configuration and the encryption key from AWS Secrets
//! Manager (`--config-secret NAME`, `--encryption-key-secret NAME`).
//!
//! A secret's value is its `SecretString` (as UTF-8 bytes) or its `SecretBinary`. The
//! configuration secret holds the same YAML as a `control-plane-config.yaml`; the
//! encryption key secret holds what the key file would: its bytes are used as they are
//! (the whole value is the JWT key, its first 32 bytes the AES key).
//!
//! Secret values never appear in errors, logs or `Debug` output; errors name the secret.

pub use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use wisp_config::{Config, ConfigError, EncryptionKey};

/// Why a secret could not be loaded. Messages name the secret, never its value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("secret {name:?} does not exist in Secrets Manager (or has no current version)")]
    NotFound { name: String },
    #[error("secret {name:?} has neither a string nor a binary value")]
    Empty { name: String },
    #[error("secret {name:?}: access denied or not decryptable: {detail}")]
    Denied { name: String, detail: String },
    /// Network trouble, throttling, a Secrets Manager outage: worth retrying.
    #[error("secret {name:?}: Secrets Manager unavailable: {detail}")]
    Unavailable { name: String, detail: String },
    #[error("secret {name:?}: {detail}")]
    Other { name: String, detail: String },
    #[error("secret {name:?}: the configuration is not UTF-8 text")]
    NotUtf8 { name: String },
    /// The value is not a valid configuration or key. The message starts with
    /// `secret NAME:` (the source name given to the parser).
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// A Secrets Manager client from the standard AWS environment, with `region` and
/// `endpoint` overriding it (see [`crate::s3::load_sdk_config`]).
pub async fn client(region: Option<String>, endpoint: Option<String>) -> Client {
    Client::new(&crate::s3::load_sdk_config(region, endpoint).await)
}

/// The current value of the secret `name` (a name or an ARN): the `SecretString`'s bytes,
/// or the `SecretBinary`.
pub async fn load_secret(client: &Client, name: &str) -> Result<Vec<u8>, SecretError> {
    let output = client
        .get_secret_value()
        .secret_id(name)
        .send()
        .await
        .map_err(|e| classify(name, e))?;
    if let Some(text) = output.secret_string() {
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(blob) = output.secret_binary() {
        return Ok(blob.as_ref().to_vec());
    }
    Err(SecretError::Empty {
        name: name.to_string(),
    })
}

/// The control-plane configuration stored (as YAML) in the secret `name`. Errors in the
/// document are reported as coming from `secret NAME`.
pub async fn load_config_from_secret(client: &Client, name: &str) -> Result<Config, SecretError> {
    let bytes = load_secret(client, name).await?;
    let text = String::from_utf8(bytes).map_err(|_| SecretError::NotUtf8 {
        name: name.to_string(),
    })?;
    Ok(Config::from_yaml_str(&text, &format!("secret {name}"))?)
}

/// The encryption key stored in the secret `name` (at least 32 bytes).
pub async fn load_encryption_key_from_secret(
    client: &Client,
    name: &str,
) -> Result<EncryptionKey, SecretError> {
    let bytes = load_secret(client, name).await?;
    let len = bytes.len();
    EncryptionKey::from_bytes(bytes).map_err(|_| SecretError::Other {
        name: name.to_string(),
        detail: format!(
            "the encryption key is {len} bytes long; it needs at least {} (e.g. `openssl rand 64 | base64`)",
            EncryptionKey::AES_KEY_LEN
        ),
    })
}

fn classify<E>(name: &str, err: SdkError<E>) -> SecretError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let name = name.to_string();
    let status = match &err {
        SdkError::ServiceError(ctx) => ctx.raw().status().as_u16(),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            return SecretError::Unavailable {
                name,
                detail: DisplayErrorContext(&err).to_string(),
            };
        }
        _ => {
            return SecretError::Other {
                name,
                detail: DisplayErrorContext(&err).to_string(),
            };
        }
    };
    let code = err.code().unwrap_or_default().to_string();
    let detail = match err.message() {
        Some(message) => format!("{code}: {message}"),
        None => format!("HTTP {status} {code}"),
    };
    match code.as_str() {
        "ResourceNotFoundException" => SecretError::NotFound { name },
        "AccessDeniedException"
        | "DecryptionFailure"
        | "UnrecognizedClientException"
        | "InvalidSignatureException" => SecretError::Denied { name, detail },
        "ThrottlingException" | "InternalServiceError" | "ServiceUnavailable" => {
            SecretError::Unavailable { name, detail }
        }
        _ if status == 429 || status >= 500 => SecretError::Unavailable { name, detail },
        _ => SecretError::Other { name, detail },
    }
}
