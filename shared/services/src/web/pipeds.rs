//! WebService: pipeds.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn register_piped(
        &self,
        _caller: &Authorized,
        _req: RegisterPipedRequest,
    ) -> Result<RegisterPipedResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "RegisterPiped is not implemented yet".into(),
        ))
    }

    pub async fn update_piped(
        &self,
        _caller: &Authorized,
        _req: UpdatePipedRequest,
    ) -> Result<UpdatePipedResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "UpdatePiped is not implemented yet".into(),
        ))
    }

    pub async fn recreate_piped_key(
        &self,
        _caller: &Authorized,
        _req: RecreatePipedKeyRequest,
    ) -> Result<RecreatePipedKeyResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "RecreatePipedKey is not implemented yet".into(),
        ))
    }

    pub async fn delete_old_piped_keys(
        &self,
        _caller: &Authorized,
        _req: DeleteOldPipedKeysRequest,
    ) -> Result<DeleteOldPipedKeysResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DeleteOldPipedKeys is not implemented yet".into(),
        ))
    }

    pub async fn enable_piped(
        &self,
        _caller: &Authorized,
        _req: EnablePipedRequest,
    ) -> Result<EnablePipedResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "EnablePiped is not implemented yet".into(),
        ))
    }

    pub async fn disable_piped(
        &self,
        _caller: &Authorized,
        _req: DisablePipedRequest,
    ) -> Result<DisablePipedResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DisablePiped is not implemented yet".into(),
        ))
    }

    pub async fn list_pipeds(
        &self,
        _caller: &Authorized,
        _req: ListPipedsRequest,
    ) -> Result<ListPipedsResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListPipeds is not implemented yet".into(),
        ))
    }

    pub async fn get_piped(
        &self,
        _caller: &Authorized,
        _req: GetPipedRequest,
    ) -> Result<GetPipedResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetPiped is not implemented yet".into(),
        ))
    }

    pub async fn update_piped_desired_version(
        &self,
        _caller: &Authorized,
        _req: UpdatePipedDesiredVersionRequest,
    ) -> Result<UpdatePipedDesiredVersionResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "UpdatePipedDesiredVersion is not implemented yet".into(),
        ))
    }

    pub async fn restart_piped(
        &self,
        _caller: &Authorized,
        _req: RestartPipedRequest,
    ) -> Result<RestartPipedResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "RestartPiped is not implemented yet".into(),
        ))
    }

    pub async fn list_released_versions(
        &self,
        _caller: &Authorized,
        _req: ListReleasedVersionsRequest,
    ) -> Result<ListReleasedVersionsResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListReleasedVersions is not implemented yet".into(),
        ))
    }

    pub async fn list_deprecated_notes(
        &self,
        _caller: &Authorized,
        _req: ListDeprecatedNotesRequest,
    ) -> Result<ListDeprecatedNotesResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListDeprecatedNotes is not implemented yet".into(),
        ))
    }
}
