//! Sealing a secret for a piped (`pipectl encrypt`, the console's sealed secrets): only
//! that piped can open it. Upstream's `getEncriptionKey` and `encrypt`, which both of its
//! services share, with their codes and texts.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rsa::RsaPublicKey;
use wisp_proto::model;

use crate::error::ServiceError;
use crate::hybrid;

/// The piped's public key: FailedPrecondition when it publishes none, InvalidArgument
/// "Invalid public key" when it cannot be read.
pub fn piped_public_key(piped: &model::Piped) -> Result<RsaPublicKey, ServiceError> {
    let pem = hybrid::public_key_pem(piped.secret_encryption.as_ref())?;
    hybrid::parse_public_key_pem(pem).map_err(|e| {
        tracing::error!(error = %e, piped = %piped.id, "failed to parse the piped's public key");
        ServiceError::InvalidArgument("Invalid public key".into())
    })
}

/// `plaintext` (base64-encoded first when asked) sealed with `key` in upstream's hybrid
/// format.
pub fn seal(key: &RsaPublicKey, plaintext: String, base64: bool) -> Result<String, ServiceError> {
    let plaintext = if base64 {
        STANDARD.encode(plaintext.as_bytes())
    } else {
        plaintext
    };
    hybrid::encrypt(key, plaintext.as_bytes()).map_err(|e| {
        tracing::error!(error = %e, "failed to encrypt the secret");
        ServiceError::FailedPrecondition("Failed to encrypt the secret".into())
    })
}
