//! WebService: API keys for pipectl (generate, disable, list).

use wisp_proto::model;
use wisp_proto::webservice::*;

use super::{Authorized, WebApi, required};
use crate::error::ServiceError;
use crate::ops::api_keys as ops;

impl WebApi {
    /// A new key; the whole key (`id.secret`) is returned this once, only its bcrypt
    /// hash is kept.
    pub async fn generate_api_key(
        &self,
        caller: &Authorized,
        req: GenerateApiKeyRequest,
    ) -> Result<GenerateApiKeyResponse, ServiceError> {
        // A blank name is refused by the operation, in its words.
        let role = model::api_key::Role::try_from(req.role).map_err(|_| {
            ServiceError::InvalidArgument(format!("invalid request: unknown role {}", req.role))
        })?;
        let (_, key) = ops::generate_api_key(
            &self.stores.api_keys,
            caller.project_id(),
            req.name,
            role,
            caller.subject(),
        )
        .await?;
        Ok(GenerateApiKeyResponse { key })
    }

    /// Disables one of the project's keys. Verifiers cache a verified key for up to
    /// 5 minutes, so running instances may accept it that long.
    pub async fn disable_api_key(
        &self,
        caller: &Authorized,
        req: DisableApiKeyRequest,
    ) -> Result<DisableApiKeyResponse, ServiceError> {
        required("id", &req.id)?;
        self.owned(&self.stores.api_keys, &req.id, caller, "API key")
            .await?;
        ops::disable_api_key(&self.stores, caller.project_id(), &req.id).await?;
        Ok(DisableApiKeyResponse {})
    }

    /// The project's keys, hashes redacted (upstream's text).
    pub async fn list_api_keys(
        &self,
        caller: &Authorized,
        req: ListApiKeysRequest,
    ) -> Result<ListApiKeysResponse, ServiceError> {
        let enabled = req.options.and_then(|o| o.enabled);
        let keys = ops::list_api_keys(&self.stores.api_keys, caller.project_id(), enabled).await?;
        Ok(ListApiKeysResponse { keys })
    }
}
