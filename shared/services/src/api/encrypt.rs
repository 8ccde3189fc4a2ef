//! Encrypt (`pipectl encrypt`): seal a secret with a piped's public key, so that only
//! that piped can read it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rsa::RsaPublicKey;
use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::api_key::Role;

use super::{ApiApi, ApiKeyCaller, check_project, require};
use crate::error::ServiceError;
use crate::hybrid;

/// How long a piped's public key is used without reading the piped again (upstream's).
const PUBLIC_KEY_TTL: Duration = Duration::from_secs(5 * 60);
/// Bound on the keys kept; past it, expired entries go, then everything.
const PUBLIC_KEY_CAPACITY: usize = 1_000;

impl ApiApi {
    /// The plaintext (base64-encoded first if asked) sealed with the piped's public key
    /// in upstream's hybrid format.
    ///
    /// Deviation: the piped must be in the key's project (`InvalidArgument`, as the
    /// other piped reads); upstream encrypts for any piped id.
    pub async fn encrypt(
        &self,
        caller: &ApiKeyCaller,
        req: EncryptRequest,
    ) -> Result<EncryptResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let key = match self.public_keys.get(&caller.project_id, &req.piped_id) {
            Some(key) => key,
            None => {
                let piped = self.piped(&req.piped_id).await?;
                check_project(caller, &piped.project_id, "piped")?;
                let pem = hybrid::public_key_pem(piped.secret_encryption.as_ref())?;
                let key = hybrid::parse_public_key_pem(pem).map_err(|e| {
                    tracing::error!(error = %wisp_store::error::chain(&e), piped = %req.piped_id, "failed to parse the piped's public key");
                    ServiceError::InvalidArgument("Invalid public key".into())
                })?;
                let key = Arc::new(key);
                self.public_keys
                    .put(&caller.project_id, &req.piped_id, key.clone());
                key
            }
        };
        let plaintext = if req.base64_encoding {
            STANDARD.encode(req.plaintext.as_bytes())
        } else {
            req.plaintext
        };
        let ciphertext = hybrid::encrypt(&key, plaintext.as_bytes()).map_err(|e| {
            tracing::error!(error = %wisp_store::error::chain(&e), "failed to encrypt the secret");
            ServiceError::FailedPrecondition("Failed to encrypt the secret".into())
        })?;
        Ok(EncryptResponse { ciphertext })
    }
}

type CachedKey = (Instant, Arc<RsaPublicKey>);

/// Parsed public keys by (project, piped), for [`PUBLIC_KEY_TTL`].
#[derive(Default)]
pub(super) struct PublicKeyCache {
    entries: Mutex<HashMap<(String, String), CachedKey>>,
}

impl PublicKeyCache {
    pub(super) fn new() -> Self {
        PublicKeyCache::default()
    }

    fn get(&self, project_id: &str, piped_id: &str) -> Option<Arc<RsaPublicKey>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (at, key) = entries.get(&(project_id.to_string(), piped_id.to_string()))?;
        (at.elapsed() < PUBLIC_KEY_TTL).then(|| key.clone())
    }

    fn put(&self, project_id: &str, piped_id: &str, key: Arc<RsaPublicKey>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= PUBLIC_KEY_CAPACITY {
            entries.retain(|_, (at, _)| at.elapsed() < PUBLIC_KEY_TTL);
            if entries.len() >= PUBLIC_KEY_CAPACITY {
                entries.clear();
            }
        }
        entries.insert(
            (project_id.to_string(), piped_id.to_string()),
            (Instant::now(), key),
        );
    }
}
