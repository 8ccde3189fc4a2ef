//! WebService: deployments.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn list_deployments(
        &self,
        _caller: &Authorized,
        _req: ListDeploymentsRequest,
    ) -> Result<ListDeploymentsResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListDeployments is not implemented yet".into(),
        ))
    }

    pub async fn get_deployment(
        &self,
        _caller: &Authorized,
        _req: GetDeploymentRequest,
    ) -> Result<GetDeploymentResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetDeployment is not implemented yet".into(),
        ))
    }

    pub async fn get_stage_log(
        &self,
        _caller: &Authorized,
        _req: GetStageLogRequest,
    ) -> Result<GetStageLogResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetStageLog is not implemented yet".into(),
        ))
    }

    pub async fn cancel_deployment(
        &self,
        _caller: &Authorized,
        _req: CancelDeploymentRequest,
    ) -> Result<CancelDeploymentResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "CancelDeployment is not implemented yet".into(),
        ))
    }

    pub async fn skip_stage(
        &self,
        _caller: &Authorized,
        _req: SkipStageRequest,
    ) -> Result<SkipStageResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "SkipStage is not implemented yet".into(),
        ))
    }

    pub async fn approve_stage(
        &self,
        _caller: &Authorized,
        _req: ApproveStageRequest,
    ) -> Result<ApproveStageResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ApproveStage is not implemented yet".into(),
        ))
    }

    pub async fn list_deployment_traces(
        &self,
        _caller: &Authorized,
        _req: ListDeploymentTracesRequest,
    ) -> Result<ListDeploymentTracesResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListDeploymentTraces is not implemented yet".into(),
        ))
    }
}
