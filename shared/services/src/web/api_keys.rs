//! WebService: api keys.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn generate_api_key(
        &self,
        _caller: &Authorized,
        _req: GenerateApiKeyRequest,
    ) -> Result<GenerateApiKeyResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GenerateAPIKey is not implemented yet".into(),
        ))
    }

    pub async fn disable_api_key(
        &self,
        _caller: &Authorized,
        _req: DisableApiKeyRequest,
    ) -> Result<DisableApiKeyResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DisableAPIKey is not implemented yet".into(),
        ))
    }

    pub async fn list_api_keys(
        &self,
        _caller: &Authorized,
        _req: ListApiKeysRequest,
    ) -> Result<ListApiKeysResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListAPIKeys is not implemented yet".into(),
        ))
    }
}
