//! WebService: applications.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn add_application(
        &self,
        _caller: &Authorized,
        _req: AddApplicationRequest,
    ) -> Result<AddApplicationResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "AddApplication is not implemented yet".into(),
        ))
    }

    pub async fn update_application(
        &self,
        _caller: &Authorized,
        _req: UpdateApplicationRequest,
    ) -> Result<UpdateApplicationResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "UpdateApplication is not implemented yet".into(),
        ))
    }

    pub async fn enable_application(
        &self,
        _caller: &Authorized,
        _req: EnableApplicationRequest,
    ) -> Result<EnableApplicationResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "EnableApplication is not implemented yet".into(),
        ))
    }

    pub async fn disable_application(
        &self,
        _caller: &Authorized,
        _req: DisableApplicationRequest,
    ) -> Result<DisableApplicationResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DisableApplication is not implemented yet".into(),
        ))
    }

    pub async fn delete_application(
        &self,
        _caller: &Authorized,
        _req: DeleteApplicationRequest,
    ) -> Result<DeleteApplicationResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "DeleteApplication is not implemented yet".into(),
        ))
    }

    pub async fn list_applications(
        &self,
        _caller: &Authorized,
        _req: ListApplicationsRequest,
    ) -> Result<ListApplicationsResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListApplications is not implemented yet".into(),
        ))
    }

    pub async fn sync_application(
        &self,
        _caller: &Authorized,
        _req: SyncApplicationRequest,
    ) -> Result<SyncApplicationResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "SyncApplication is not implemented yet".into(),
        ))
    }

    pub async fn get_application(
        &self,
        _caller: &Authorized,
        _req: GetApplicationRequest,
    ) -> Result<GetApplicationResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetApplication is not implemented yet".into(),
        ))
    }

    pub async fn generate_application_sealed_secret(
        &self,
        _caller: &Authorized,
        _req: GenerateApplicationSealedSecretRequest,
    ) -> Result<GenerateApplicationSealedSecretResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GenerateApplicationSealedSecret is not implemented yet".into(),
        ))
    }

    pub async fn list_unregistered_applications(
        &self,
        _caller: &Authorized,
        _req: ListUnregisteredApplicationsRequest,
    ) -> Result<ListUnregisteredApplicationsResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListUnregisteredApplications is not implemented yet".into(),
        ))
    }

    pub async fn get_application_live_state(
        &self,
        _caller: &Authorized,
        _req: GetApplicationLiveStateRequest,
    ) -> Result<GetApplicationLiveStateResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetApplicationLiveState is not implemented yet".into(),
        ))
    }
}
